"""Completion from the client's side: what a completer returns and what the client is told."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import MCPKit
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import MCPError
from support.everything import MODES, connect


@pytest.mark.req("A026")
@pytest.mark.parametrize("mode", MODES)
async def test_a_completer_that_pages_its_source_itself_can_say_how_many_there_are(mode: str) -> None:
    app = MCPKit("paged completion")
    catalog = [f"item-{i}" for i in range(5000)]

    @app.prompt
    def pick(item: str, kind: str) -> str:
        return item

    @app.completion(prompt="pick", argument="item")
    def items(value: str) -> dict[str, Any]:
        # as a database query with LIMIT would: the first 10, and the count of them all
        found = [x for x in catalog if x.startswith(value)]
        return {"values": found[:10], "total": len(found), "hasMore": len(found) > 10}

    @app.completion(prompt="pick", argument="kind")
    def kinds(value: str) -> t.Completion:
        return t.Completion(values=["a", "b"], has_more=True)  # (a total it does not know)

    async with connect(app, mode=mode) as (cs, _, _):
        c = (await cs.complete({"type": "ref/prompt", "name": "pick"}, "item", "item-1")).completion
        assert c.values == [f"item-{i}" for i in (1, 10, 11, 12, 13, 14, 15, 16, 17, 18)]
        assert c.total == 1111 and c.has_more is True
        c = (await cs.complete({"type": "ref/prompt", "name": "pick"}, "item", "item-4999")).completion
        assert c.values == ["item-4999"] and c.total == 1 and c.has_more is False
        c = (await cs.complete({"type": "ref/prompt", "name": "pick"}, "kind", "")).completion
        assert c.values == ["a", "b"] and c.has_more is True and c.total is None


@pytest.mark.req("A026")
async def test_a_completers_own_count_never_says_fewer_than_it_sent_nor_more_than_100_go_out() -> None:
    app = MCPKit("odd completion")

    @app.prompt
    def pick(item: str, other: str) -> str:
        return item

    @app.completion(prompt="pick", argument="item")
    def items(value: str) -> dict[str, Any]:
        return {"values": [str(i) for i in range(150)], "total": 3, "hasMore": False}

    @app.completion(prompt="pick", argument="other")
    def other(value: str) -> dict[str, Any]:
        return {"values": ["x"], "total": "many", "hasMore": "yes"}

    async with connect(app) as (cs, _, _):
        c = (await cs.complete({"type": "ref/prompt", "name": "pick"}, "item", "")).completion
        assert len(c.values) == 100 and c.total == 150 and c.has_more is True
        with pytest.raises(MCPError) as exc:
            await cs.complete({"type": "ref/prompt", "name": "pick"}, "other", "")
        assert exc.value.code == -32603


@pytest.mark.parametrize("mode", MODES)
async def test_a_context_argument_that_is_not_a_string_is_refused_naming_it(mode: str) -> None:
    """``context.arguments`` maps names to strings (CompleteRequest); a number or an object there was turned into
    its Python text ("3", "{'a': 1}") and handed to the completer as if the user had typed it."""
    app = MCPKit("context completion")
    seen: list[dict[str, str]] = []

    @app.prompt
    def pick(owner: str, repo: str) -> str:
        return repo

    @app.completion(prompt="pick", argument="repo")
    def repos(value: str, context: dict[str, str]) -> list[str]:
        seen.append(context)
        return [f"{context.get('owner', '?')}/{value}"]

    ref = {"type": "ref/prompt", "name": "pick"}
    async with connect(app, mode=mode) as (cs, _, _):
        for bad, name in (({"owner": 3}, "owner"), ({"owner": "me", "n": {"a": 1}}, "n"), ({"x": None}, "x")):
            params = {"ref": ref, "argument": {"name": "repo", "value": "r"}, "context": {"arguments": bad}}
            with pytest.raises(MCPError) as exc:
                await cs.request("completion/complete", params)
            assert exc.value.code == -32602 and repr(name) in exc.value.message
        for bad_context in ({"arguments": ["owner"]}, "owner=me"):
            params = {"ref": ref, "argument": {"name": "repo", "value": "r"}, "context": bad_context}
            with pytest.raises(MCPError) as exc:
                await cs.request("completion/complete", params)
            assert exc.value.code == -32602
        assert seen == []
        params = {"ref": ref, "argument": {"name": "repo", "value": "r"}, "context": {"arguments": {"owner": "me"}}}
        assert (await cs.request("completion/complete", params))["completion"]["values"] == ["me/r"]
        assert (await cs.complete(ref, "repo", "s")).completion.values == ["?/s"]
