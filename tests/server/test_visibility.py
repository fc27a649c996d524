"""Visibility from one rule: tags, include/exclude, enable/disable at run time, per-principal views. What a caller
cannot list it cannot call, read or get either; a list cursor carries its view. Both eras, stdio and HTTP (the
apps are in tests/support/servers/toolkit_apps.py)."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError
from mcpkit.server.pagination import VIEW_BYTES, VIEW_ITEM_BYTES, ListCache
from mcpkit.server.visibility import Visibility
from support.toolkit import ERAS, TRANSPORTS, build, serve_http, toolkit_client

pytestmark = pytest.mark.timeout(60)
PUBLIC = [f"public_{i}" for i in range(5)]


async def _refused(coro: Any) -> MCPError:
    with pytest.raises(MCPError) as info:
        await coro
    return info.value


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_hidden_tools_are_neither_listed_nor_callable(transport: str, mode: str) -> None:
    async with toolkit_client("visibility", transport, mode) as client:
        names = [t.name for t in await client.list_tools()]  # (pages of 2: the walk goes through the view)
        assert names == [*PUBLIC, "wipe", "set_admin", "set_beta"]
        unknown = await _refused(client.call_tool("no_such_tool", {}))
        for hidden in ("debug_dump", "beta"):  # excluded by tag, disabled at registration
            refused = await _refused(client.call_tool(hidden, {}))
            assert (refused.code, refused.message) == (unknown.code, f"Unknown tool: {hidden!r}")


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_disable_and_enable_at_run_time_change_lists_and_calls_with_list_changed(
    transport: str, mode: str
) -> None:
    async with toolkit_client("visibility", transport, mode) as client:
        assert (await client.call_tool("wipe", {})).text == "wiped"
        assert await client.read_text("secret://plan") == "the plan"
        assert [p.name for p in await client.list_prompts()] == ["admin_prompt"]
        assert (await client.complete("admin_prompt", "topic", "m")).completion.values == ["mine"]
        async with client.watch(tools=True, prompts=True, resources=True) as watch:
            await client.call_tool("set_admin", {"on": False})
            seen = {(await watch.next(timeout=5))[0] for _ in range(3)}
        assert seen == {f"notifications/{k}/list_changed" for k in ("tools", "prompts", "resources")}
        assert "wipe" not in [t.name for t in await client.list_tools()]
        await _refused(client.call_tool("wipe", {}))
        assert await client.list_resources() == [] and await client.list_prompts() == []
        missing = await _refused(client.read_resource("secret://plan"))
        assert missing.code == (-32602 if client.modern else -32002)  # exactly like a resource that does not exist
        await _refused(client.get_prompt("admin_prompt"))
        await _refused(client.complete("admin_prompt", "topic", ""))
        await client.call_tool("set_beta", {"on": True})
        assert "beta" in [t.name for t in await client.list_tools()]
        assert (await client.call_tool("beta", {})).text == "beta"
        await client.call_tool("set_admin", {"on": True})
        assert (await client.call_tool("wipe", {})).text == "wiped"


@pytest.mark.parametrize("mode", ERAS)
async def test_per_principal_views_over_stdio_hide_what_the_anonymous_caller_may_not_see(mode: str) -> None:
    async with toolkit_client("per_principal", "stdio", mode) as client:
        assert "wipe" not in [t.name for t in await client.list_tools()]
        await _refused(client.call_tool("wipe", {}))


@pytest.mark.parametrize("mode", ERAS)
async def test_per_principal_views_and_a_cursor_from_another_view_is_refused(mode: str) -> None:
    app = build("per_principal")
    async with (
        serve_http(app) as url,
        Client(url, mode=mode, headers={"X-User": "alice"}) as alice,
        Client(url, mode=mode, headers={"X-User": "bob"}) as bob,
    ):
        assert "wipe" in [t.name for t in await alice.list_tools()]
        assert "wipe" not in [t.name for t in await bob.list_tools()]
        assert (await alice.call_tool("wipe", {})).text == "wiped"
        await _refused(bob.call_tool("wipe", {}))
        await _refused(bob.read_resource("secret://plan"))
        _, alice_cursor = await alice.list_tools_page()
        _, bob_cursor = await bob.list_tools_page()
        assert alice_cursor and bob_cursor and alice_cursor != bob_cursor
        refused = await _refused(bob.list_tools_page(alice_cursor))
        assert refused.code == -32602 and "cursor" in refused.message
        await _refused(alice.list_tools_page(bob_cursor))
        assert (await alice.list_tools_page(alice_cursor))[0]  # each keeps walking its own view
        if mode == "modern":  # lists that differ per principal are private (2026-07-28 cache hints)
            page = await bob.request("tools/list", {})
            assert page["cacheScope"] == "private"


async def test_a_hidden_inline_tool_cannot_be_called_on_the_quick_path() -> None:
    app = MCPKit("quick")

    @app.tool(thread=False)
    def fast() -> str:
        return "fast"

    async with Client(app) as client:
        assert (await client.call_tool("fast", {})).text == "fast"
        app.disable("fast")
        await _refused(client.call_tool("fast", {}))
        app.enable("fast")
        assert (await client.call_tool("fast", {})).text == "fast"


def test_views_are_bounded_in_bytes_and_dropped_when_a_rule_changes() -> None:
    """Per-principal views share the app's one byte bound (ListCache) with every page they keep: past it the least
    recently used view is dropped (its bytes given back); a rule change drops them all."""
    rules = Visibility()
    rules.view_filter = lambda component, principal: True
    registry = {"t": MCPKit("x").add_tool(lambda: 1, name="t")}
    one_view = VIEW_BYTES + VIEW_ITEM_BYTES
    cache = ListCache(max_bytes=20 * one_view)
    for i in range(30):
        rules.view("tools", registry, f"user{i}", cache)
    assert len(rules._views) == 20 and cache.used == 20 * one_view
    assert [p for _, p in rules._views] == [f"user{i}" for i in range(10, 30)]  # the oldest ten went
    first, name = rules.view("tools", registry, "user0", cache)  # (dropped, made again: user10 goes)
    assert name.startswith("tools/") and rules.view("tools", registry, "user0", cache)[0] is first
    assert ("tools", "user10") not in rules._views and cache.used == 20 * one_view
    rules.set(False, ["t"], None, ["tools"])
    assert len(rules._views) == 0 and cache.used == 0
    assert rules.view("tools", registry, "user0", cache)[0].items == []
    tiny = ListCache(max_bytes=10)  # not even one view fits: the page is answered, nothing is kept
    assert rules.view("prompts", {}, "user0", tiny)[0].items == [] and tiny.used == 0 and len(rules._views) == 1
    with pytest.raises(ValueError, match="unknown list"):
        rules.set(False, ["t"], None, ["widgets"])


def test_include_tags_keep_only_tagged_components() -> None:
    app = MCPKit("x", include_tags={"public"})
    tagged = app.add_tool(lambda: 1, name="a", tags={"public", "x"})
    plain = app.add_tool(lambda: 2, name="b")
    assert app._visibility is not None
    assert app._visibility.allows("tools", "a", tagged, None)
    assert not app._visibility.allows("tools", "b", plain, None)


@pytest.mark.parametrize("mode", ERAS)
async def test_enable_and_disable_announce_only_the_lists_whose_content_changed(mode: str) -> None:
    """``app.disable``/``app.enable`` (all kinds by default) send ``list_changed`` for the lists where something
    appeared or disappeared, and for no other: disabling a tool re-lists no prompts or resources; a tag only
    prompts carry announces prompts; a rule that hides nothing more (or shows nothing new) announces nothing."""
    import asyncio

    app = MCPKit("announce")
    app.add_tool(lambda: "x", name="deploy", tags={"ops"})
    app.add_tool(lambda: "x", name="status")
    app.add_prompt(lambda: "x", name="runbook", tags={"docs"})
    app.add_resource("mem://manual", "x", name="manual", tags={"docs", "ops"})
    app.add_resource("mem://barrier", "x", name="barrier")

    async with Client(app, mode=mode) as client:
        async with client.watch(tools=True, prompts=True, resources=True, resource_uris=["mem://barrier"]) as watch:

            async def announced(change: Any) -> set[str]:
                change()
                await asyncio.sleep(0.05)  # (the changes are sent from the next loop iteration)
                await app.notify_resource_updated("mem://barrier")  # everything sent before it is read before it
                seen: set[str] = set()
                while True:
                    method = (await watch.next(timeout=5))[0]
                    if method == "notifications/resources/updated":
                        return seen
                    seen.add(method.split("/")[1])

            assert await announced(lambda: app.disable("status")) == {"tools"}
            assert await announced(lambda: app.disable("status")) == set()  # already hidden
            assert await announced(lambda: app.disable("nothing-by-that-name")) == set()
            assert await announced(lambda: app.disable(tags="docs")) == {"prompts", "resources"}
            assert await announced(lambda: app.disable(tags="ops")) == {"tools"}  # (the manual is hidden already)
            assert await announced(lambda: app.enable(tags="docs")) == {"prompts"}  # (ops still hides the manual)
            assert await announced(lambda: app.enable(tags="ops")) == {"tools", "resources"}
            assert await announced(lambda: app.enable("status")) == {"tools"}
            assert await announced(lambda: app.enable("status", tags="nobody")) == set()
        assert [t.name for t in await client.list_tools()] == ["deploy", "status"]


@pytest.mark.parametrize("mode", ERAS)
async def test_ctx_read_resource_sees_only_what_the_caller_may_read(mode: str) -> None:
    """A tool that reads a URI its caller gave (``ctx.read_resource``) reads only what ``resources/read`` would
    give that caller: a resource or template hidden by ``exclude_tags``, by ``disable`` or by the per-principal
    filter is answered like one that does not exist, so the tool cannot be used to read past the rules."""
    from mcpkit import Context

    app = MCPKit("reader", exclude_tags={"internal"})
    app.add_resource("mem://public", "open", name="public")
    app.add_resource("mem://internal", "excluded", name="internal", tags={"internal"})
    app.add_resource("mem://off", "disabled", name="off")
    app.add_resource("mem://t/{id}", lambda id: f"templated {id}", name="templated")
    app.add_resource("mem://filtered", "filtered out", name="filtered")
    app.disable("mem://off", "mem://t/{id}")
    app.set_view_filter(lambda component, principal: getattr(component, "name", None) != "filtered")

    @app.tool
    async def fetch(uri: str, ctx: Context) -> str:
        return str((await ctx.read_resource(uri))[0]["text"])

    async with Client(app, mode=mode) as client:
        assert (await client.call_tool("fetch", {"uri": "mem://public"})).text == "open"
        missing = await client.call_tool("fetch", {"uri": "mem://nothing-there"})
        assert missing.is_error
        for hidden in ("mem://internal", "mem://off", "mem://t/1", "mem://filtered"):
            refused = await client.call_tool("fetch", {"uri": hidden})
            assert refused.is_error, hidden
            assert refused.text == (missing.text or "").replace("mem://nothing-there", hidden), refused.text
        app.enable("mem://t/{id}")
        assert (await client.call_tool("fetch", {"uri": "mem://t/1"})).text == "templated 1"
    assert await app.read_resource_contents("mem://internal") == [
        {"uri": "mem://internal", "mimeType": "text/plain", "text": "excluded"}
    ]  # (the app's own reads, outside any request, see everything)
