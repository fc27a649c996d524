"""Prompts as a client gets them: arguments are strings on the wire."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field

from mcpkit import Client, MCPKit
from mcpkit.protocol import versions
from mcpkit.protocol.errors import MCPError
from support.everything import connect
from support.wire_recorder import WireRecorder


class _Window(BaseModel):
    days: int


def _app() -> MCPKit:
    app = MCPKit("prompts")

    @app.prompt
    def digest(topics: list[str], window: _Window, weights: dict[str, float] | None = None, limit: int = 3) -> str:
        return f"{','.join(topics)} over {window.days} days, {weights}, top {limit}"

    return app


async def test_structured_prompt_arguments_sent_as_json_text_are_read() -> None:
    """A prompt argument annotated ``list``, ``dict`` or a model arrives as JSON text (the wire carries strings;
    ``Client.get_prompt`` sends such values that way, as the prompts guide says): it is read as JSON, not refused
    as "not a valid list"."""
    async with Client(_app()) as client:
        got = await client.get_prompt("digest", {"topics": ["mcp", "python"], "window": {"days": 7}, "limit": 5})
        assert got.messages[0].content.text == "mcp,python over 7 days, None, top 5"
        raw = {"topics": '["a"]', "window": '{"days": 1}', "weights": '{"a": 0.5}'}
        got = await client.get_prompt("digest", raw)
        assert got.messages[0].content.text == "a over 1 days, {'a': 0.5}, top 3"


@pytest.mark.parametrize(
    "arguments",
    [{"topics": "not json", "window": '{"days": 1}'}, {"topics": '["a"]', "window": '{"days": "many"}'}],
)
async def test_a_structured_prompt_argument_that_does_not_fit_is_invalid_params(arguments: dict[str, str]) -> None:
    async with Client(_app()) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("digest", arguments)
        assert caught.value.code == -32602


def _titled_app() -> MCPKit:
    app = MCPKit("prompts")

    @app.prompt
    def review(
        code: Annotated[str, Field(title="The code", description="what to review")],
        style: str = Field("pep8", title="Style guide"),
        depth: str = "short",
    ) -> str:
        return f"{code} {style} {depth}"

    return app


@pytest.mark.parametrize("revision", versions.ALL_VERSIONS)
async def test_prompt_arguments_carry_their_title_to_revisions_that_define_it(revision: str) -> None:
    """From 2025-06-18 on a PromptArgument is BaseMetadata (``name``, ``title``): the title given with
    ``Field(title=...)`` (in ``Annotated`` or as the default) is listed; 2024-11-05 and 2025-03-26 define no
    title on an argument, and get none."""
    titled = versions.features(revision).titles
    rec = WireRecorder()
    async with connect(_titled_app(), version=revision, traffic=rec) as (cs, _, _):
        listed = (await cs.list_prompts()).dump()["prompts"][0]["arguments"]
    by_name = {a["name"]: a for a in listed}
    assert by_name["code"]["description"] == "what to review"
    assert [by_name[n].get("title") for n in ("code", "style", "depth")] == (
        ["The code", "Style guide", None] if titled else [None, None, None]
    )
    rec.validate(revision)
