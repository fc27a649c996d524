"""Resources and templates from the client's side: which template serves a URI that several could serve."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import MCPKit
from mcpkit.protocol import versions
from mcpkit.protocol.errors import MCPError
from mcpkit.server.prompts import Message
from support.everything import MODES, connect
from support.wire_recorder import WireRecorder


def _two_templates_of_one_shape() -> MCPKit:
    app = MCPKit("shapes")

    @app.resource("items://{id}", scopes=["numbers"])
    def by_number(id: int) -> str:
        return f"number {id}"

    @app.resource("items://{name}", scopes=["names"])
    def by_name(name: str) -> str:
        return f"name {name}"

    return app


@pytest.mark.parametrize("mode", MODES)
async def test_a_uri_whose_value_the_first_template_cannot_convert_is_served_by_the_next_one(mode: str) -> None:
    app = _two_templates_of_one_shape()
    async with connect(app, mode=mode) as (cs, _, _):
        assert (await cs.read_resource("items://7")).dump()["contents"][0]["text"] == "number 7"
        # "abc" has the shape of both templates, but is no int: the first one does not serve it, the second does
        assert (await cs.read_resource("items://abc")).dump()["contents"][0]["text"] == "name abc"
        with pytest.raises(MCPError) as exc:
            await cs.read_resource("items://a/b")  # (matches neither: a simple variable holds no "/")
        assert exc.value.code == (-32002 if mode == "handshake" else -32602)


def test_the_scopes_a_read_needs_are_those_of_the_template_that_serves_it() -> None:
    rule = _two_templates_of_one_shape().scope_rule
    assert rule("resources/read", {"uri": "items://7"}) == ["numbers"]
    assert rule("resources/read", {"uri": "items://abc"}) == ["names"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_plus_in_a_query_variable_reaches_the_resource_as_a_plus(mode: str) -> None:
    app = MCPKit("search")

    @app.resource("search://items{?q}")
    def search(q: str = "") -> str:
        return f"[{q}]"

    async with connect(app, mode=mode) as (cs, _, _):
        assert (await cs.read_resource("search://items?q=a+b")).dump()["contents"][0]["text"] == "[a+b]"
        assert (await cs.read_resource("search://items?q=a%20b")).dump()["contents"][0]["text"] == "[a b]"


_ANNOTATED = {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"}


def _annotated_everywhere() -> MCPKit:
    app = MCPKit("annotated")

    @app.resource("notes://today", annotations=_ANNOTATED)
    def today() -> str:
        return "today"

    @app.resource("notes://day/{n}", annotations=_ANNOTATED)
    def day(n: str) -> str:
        return n

    @app.prompt
    def recap() -> list[Message]:
        """Recap the day."""
        return [
            Message.user({"type": "text", "text": "recap", "annotations": _ANNOTATED}),
            Message.user(
                {"type": "resource", "resource": {"uri": "notes://today", "text": "t"}, "annotations": _ANNOTATED}
            ),
        ]

    @app.tool
    def latest() -> list[dict[str, Any]]:
        return [{"type": "text", "text": "latest", "annotations": _ANNOTATED}]

    return app


@pytest.mark.parametrize("revision", versions.ALL_VERSIONS)
async def test_annotations_carry_last_modified_only_to_revisions_that_define_it(revision: str) -> None:
    # Annotations.lastModified came with 2025-06-18; 2024-11-05 and 2025-03-26 define audience and priority only
    known = versions.features(revision).titles  # (the same revision: 2025-06-18)
    rec = WireRecorder()
    async with connect(_annotated_everywhere(), version=revision, traffic=rec) as (cs, _, _):
        seen = [
            (await cs.list_resources()).dump()["resources"][0]["annotations"],
            (await cs.list_resource_templates()).dump()["resourceTemplates"][0]["annotations"],
            *[m["content"]["annotations"] for m in (await cs.get_prompt("recap")).dump()["messages"]],
            (await cs.call_tool("latest")).dump()["content"][0]["annotations"],
        ]
    expected = _ANNOTATED if known else {"audience": ["user"], "priority": 0.5}
    assert seen == [expected] * 5
    rec.validate(revision)
