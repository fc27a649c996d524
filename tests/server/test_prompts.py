"""Prompts as a client gets them: arguments are strings on the wire."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError


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
