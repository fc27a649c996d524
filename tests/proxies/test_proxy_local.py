"""A proxy's own tools, resources and prompts (``p.add_tool(...)``, ``p.add_resources_as_tools()``,
``p.add_tool_search()``) are served beside the upstream's: listed first, called through the proxy's own dispatch,
advertised even when the upstream has none of them; a name both have is the proxy's (with a warning). The upstream
is a real stdio subprocess, the client ours, in both eras."""

from __future__ import annotations

import logging
import sys
from typing import Any

import pytest

import mcpkit
from mcpkit import Client
from support.toolkit import APPS_FILE, ERAS, tool_calls

pytestmark = pytest.mark.timeout(120)


def _upstream(name: str) -> list[str]:
    return [sys.executable, str(APPS_FILE), name]


async def _pages(client: Client, method: str, field: str) -> list[list[str]]:
    """Every page of ``method``, walked by its cursors: the names (or URIs) of each page's items."""
    key = {"tools": "name", "prompts": "name", "resources": "uri"}[field]
    pages: list[list[str]] = []
    cursor: str | None = None
    while True:
        page = await client.session.request(method, {"cursor": cursor} if cursor else {})
        pages.append([item[key] for item in page[field]])
        cursor = page.get("nextCursor")
        if not cursor:
            return pages
        assert len(pages) < 20, pages


@pytest.mark.parametrize("mode", ERAS)
async def test_a_proxys_own_tools_resources_and_prompts_are_served_first_beside_the_upstreams(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    p = mcpkit.proxy(_upstream("paged_upstream"), page_size=2)
    p.add_tool(lambda: "the proxy's own", name="own")
    p.add_tool(lambda: "the proxy's clash", name="clash")
    p.add_tool(lambda: "one more", name="own2")
    p.add_resource("data://clash", "the proxy's clash data")
    p.add_prompt(lambda: "the proxy's prompt", name="own_prompt")
    called = tool_calls(p)
    with caplog.at_level(logging.WARNING, logger="mcpkit.proxy"):
        async with Client(p, mode=mode) as client:
            pages = await _pages(client, "tools/list", "tools")
            walked = [name for page in pages for name in page]
            # the proxy's own first (its own pages), then the upstream's pages, "clash" only once: the proxy's
            assert walked == ["own", "clash", "own2", "up0", "up1", "up2", "up3", "up4", "up5"], pages
            assert all(len(page) <= 2 for page in pages)
            assert [t.name for t in await client.list_tools()] == walked
            for name, text in [("own", "the proxy's own"), ("clash", "the proxy's clash"), ("up3", "upstream 3")]:
                assert (await client.call_tool(name, {})).text == text
            assert called == ["own", "clash", "up3"]  # (the proxy's interceptor saw each, its own tools too)
            resources = [r.uri for r in await client.list_resources()]
            assert [str(u) for u in resources] == ["data://clash", "data://up"]
            assert await client.read_text("data://clash") == "the proxy's clash data"
            assert await client.read_text("data://up") == "upstream data"
            assert [pr.name for pr in await client.list_prompts()] == ["own_prompt", "up_prompt"]
            got = await client.get_prompt("own_prompt")
            assert got.messages[0].content.text == "the proxy's prompt"  # type: ignore[union-attr]
            got = await client.get_prompt("up_prompt")
            assert got.messages[0].content.text == "the upstream's prompt"  # type: ignore[union-attr]
    warned = [r.getMessage() for r in caplog.records if "clash" in r.getMessage()]
    assert any("tool 'clash'" in w for w in warned) and any("'data://clash'" in w for w in warned), warned


@pytest.mark.parametrize("mode", ERAS)
async def test_resources_and_prompts_as_tools_on_a_proxy_of_an_upstream_without_tools(mode: str) -> None:
    p = mcpkit.proxy(_upstream("resources_only"))
    p.add_resources_as_tools()
    p.add_prompts_as_tools()
    async with Client(p, mode=mode) as client:
        assert "tools" in client.server_capabilities
        names = [t.name for t in await client.list_tools()]
        assert names == ["list_resources", "read_resource", "list_prompts", "get_prompt"]
        listed = await client.call_tool("list_resources", {})
        assert "notes://today" in listed.text and "notes://day/{day}" in listed.text
        assert (await client.call_tool("read_resource", {"uri": "notes://day/mon"})).text == "notes of mon"
        got = await client.call_tool("get_prompt", {"name": "talk", "arguments": {"topic": "rain"}})
        assert "talk about rain" in got.text
        assert await client.read_text("notes://today") == "today's notes"  # (the upstream's, directly too)


@pytest.mark.parametrize("mode", ERAS)
async def test_tool_search_on_a_proxy_finds_and_calls_its_own_tools(mode: str) -> None:
    p = mcpkit.proxy(_upstream("resources_only"))

    @p.tool
    def weather_report(city: str) -> str:
        """The weather report of a city."""
        return f"rain in {city}"

    p.add_tool_search()
    async with Client(p, mode=mode) as client:
        assert [t.name for t in await client.list_tools()] == ["search_tools", "call_tool"]
        found = await client.call_tool("search_tools", {"query": "weather"})
        assert "weather_report" in found.text
        called = await client.call_tool("call_tool", {"name": "weather_report", "arguments": {"city": "Oslo"}})
        assert called.text == "rain in Oslo"
        assert (await client.call_tool("weather_report", {"city": "Rome"})).text == "rain in Rome"


async def test_the_upstream_cursor_a_proxys_cursor_carries_is_bounded() -> None:
    """The proxy's cursor carries the upstream's (any a server of ours makes: up to 1,024 characters), given back
    upstream as it came; a longer one fails that list request and the session goes on."""
    from mcpkit import MCPKit
    from mcpkit.protocol.errors import MCPError

    fits, too_long = "c" * 1024, "c" * 1025
    asked: list[Any] = []

    def tools(sctx: Any, params: Any) -> Any:
        asked.append(params.get("cursor"))
        if params.get("cursor") is None:
            return {"tools": [], "nextCursor": fits}
        return {"tools": [], "nextCursor": too_long}

    up = MCPKit("long-cursors")
    up.set_handler("tools/list", tools)
    for own in (False, True):
        p = mcpkit.proxy(up)
        if own:
            p.add_tool(lambda: "own", name="own")
        async with Client(p) as client:
            page = await client.session.request("tools/list", {})
            if own:
                assert [t["name"] for t in page["tools"]] == ["own"]
                page = await client.session.request("tools/list", {"cursor": page["nextCursor"]})
            assert len(page["nextCursor"]) <= 2048 and asked[-1] is None
            with pytest.raises(MCPError, match="the upstream sent a cursor too long to carry"):
                await client.session.request("tools/list", {"cursor": page["nextCursor"]})
            assert asked[-1] == fits  # (given back upstream as it came)
            with pytest.raises(MCPError, match="invalid cursor"):  # (the proxy's cursors are its own, sealed)
                await client.session.request("tools/list", {"cursor": fits})
            if own:
                assert (await client.call_tool("own", {})).text == "own"  # (the session goes on)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_proxys_own_prompt_arguments_are_completed_by_the_proxy(mode: str) -> None:
    p = mcpkit.proxy(_upstream("resources_only"))  # (an upstream that completes nothing)
    p.add_prompt(lambda style: f"in a {style} style", name="styled", completions={"style": ["formal", "casual"]})
    async with Client(p, mode=mode) as client:
        assert (await client.complete("styled", "style", "f")).completion.values == ["formal"]
        assert [pr.name for pr in await client.list_prompts()] == ["styled", "talk"]


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ERAS)
async def test_subscribers_of_a_proxys_own_resources_get_its_updates_and_the_upstreams_still_its_own(
    mode: str, upstream_mode: str
) -> None:
    """A subscription (``resources/subscribe``, or a 2026-07-28 ``subscriptions/listen`` stream) to a resource the
    proxy serves itself, or a URI one of its own templates matches, is the proxy's own: ``p.notify_resource_updated``
    reaches it, and the upstream is not asked to watch it. The upstream's resources are still watched upstream and
    their updates relayed. It used to go upstream, and the proxy's own updates never reached the subscriber."""
    p = mcpkit.proxy(_upstream("cached"), client_options={"mode": upstream_mode}, pool_size=4)
    p.add_resource("mem://x", "x")
    p.add_resource("mem://day/{day}", lambda day: f"the day {day}")
    async with Client(p, mode=mode) as client:
        assert client.server_capabilities["resources"].get("subscribe") is True
        async with client.watch(resource_uris=["mem://x", "mem://day/mon", "data://clock"]) as watch:
            assert not any(uri.startswith("mem://") for uri in p.upstreams[0].watched), p.upstreams[0].watched
            for uri in ("mem://x", "mem://day/mon"):
                await p.notify_resource_updated(uri)
                method, params = await watch.next(timeout=10)
                assert (method, params["uri"]) == ("notifications/resources/updated", uri)
            await p.notify_resource_updated("mem://day/tue")  # (not subscribed to)
            # the upstream's data://clock changes (a 2026-07-28 client of a handshake-era stdio upstream: in a
            # pooled upstream process, not the primary's, which watches it too: the update is relayed all the same)
            await client.call_tool("touch", {})
            method, params = await watch.next(timeout=10)
            assert (method, params["uri"]) == ("notifications/resources/updated", "data://clock")
            with pytest.raises(TimeoutError):
                await watch.next(timeout=0.5)  # (each update once, nothing of mem://day/tue)
        if mode == "handshake":  # (unsubscribed on the way out of the watch: updates no longer come)
            await p.notify_resource_updated("mem://x")
            assert await client.read_text("mem://x") == "x"


async def test_a_proxy_with_resources_of_its_own_declares_subscriptions_its_upstream_lacks() -> None:
    """An upstream without ``resources.subscribe``: the proxy used to declare none either; with resources of its
    own it declares them, and a subscriber of its own resource gets its updates."""
    from mcpkit import MCPKit

    up = MCPKit("no-subscriptions")
    up.resource_subscriptions = False
    up.add_resource("data://up", "upstream data")
    plain = mcpkit.proxy(up)
    async with Client(plain) as client:
        assert not client.server_capabilities["resources"].get("subscribe")
    p = mcpkit.proxy(up)
    p.add_resource("mem://x", "x")
    async with Client(p, mode="handshake") as client, client.watch(resource_uris=["mem://x"]) as watch:
        assert client.server_capabilities["resources"].get("subscribe") is True
        await p.notify_resource_updated("mem://x")
        method, params = await watch.next(timeout=10)
        assert (method, params["uri"]) == ("notifications/resources/updated", "mem://x")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_proxys_first_own_resource_added_while_serving_declares_subscriptions_to_new_sessions(
    mode: str,
) -> None:
    """An upstream without ``resources.subscribe`` and a proxy that gets its first resource while it serves: a session
    opened after declares subscriptions and gets the resource's updates (it used to declare none, so a client refused
    to subscribe). A session opened before keeps the capabilities it was told when it began; it reads the resource."""
    p = mcpkit.proxy(_upstream("unsubscribable"))
    async with Client(p, mode=mode) as first:
        assert not first.server_capabilities["resources"].get("subscribe")
        p.add_resource("mem://x", "x")
        async with Client(p, mode=mode) as client, client.watch(resource_uris=["mem://x"]) as watch:
            assert client.server_capabilities["resources"].get("subscribe") is True
            await p.notify_resource_updated("mem://x")
            method, params = await watch.next(timeout=10)
            assert (method, params["uri"]) == ("notifications/resources/updated", "mem://x")
        assert await first.read_text("mem://x") == "x"
        assert await first.read_text("data://up") == "upstream data"


async def _next_page(client: Client, cursor: str | None) -> tuple[list[str], str | None]:
    page = await client.session.request("tools/list", {"cursor": cursor} if cursor else {})
    return [t["name"] for t in page["tools"]], page.get("nextCursor")


@pytest.mark.parametrize("mode", ERAS)
async def test_a_walk_goes_on_when_the_proxys_own_list_appears_or_empties_meanwhile(mode: str) -> None:
    """A plain proxy's list cursors used to be the upstream's own until it had a list of its own, and sealed after:
    a walk begun before its first tool was added, or before its last was removed, was refused its next page
    (-32602). Every cursor is now the proxy's, with the upstream's inside: the walk goes on, and the upstream's
    items come each once."""
    upstream_order = ["up0", "up1", "up2", "up3", "up4", "up5", "clash"]  # (in its pages of 2)
    p = mcpkit.proxy(_upstream("paged_upstream"), page_size=2)
    async with Client(p, mode=mode) as client:
        assert [t.name for t in await client.list_tools()] == upstream_order
        # the proxy's own list appears while the client is in the upstream's pages
        walked, cursor = await _next_page(client, None)
        assert walked == upstream_order[:2]
        p.add_tool(lambda: "own", name="own")
        while cursor:
            names, cursor = await _next_page(client, cursor)
            walked += names
        assert walked == upstream_order, walked
        # a new walk has it first; it empties while the client is in the upstream's pages, then in its own
        walked, cursor = await _next_page(client, None)
        assert walked == ["own"]
        names, cursor = await _next_page(client, cursor)
        assert names == upstream_order[:2]
        walked += names
        p.remove_tool("own")
        while cursor:
            names, cursor = await _next_page(client, cursor)
            walked += names
        assert walked == ["own", *upstream_order], walked
        p.add_tool(lambda: "own", name="own")
        p.add_tool(lambda: "own too", name="own2")
        p.add_tool(lambda: "own three", name="own3")
        walked, cursor = await _next_page(client, None)
        assert walked == ["own", "own2"]
        for name in ("own", "own2", "own3"):
            p.remove_tool(name)
        while cursor:  # (the proxy's list is gone: the walk goes on with the upstream's, from its start)
            names, cursor = await _next_page(client, cursor)
            walked += names
        assert walked == ["own", "own2", *upstream_order], walked
