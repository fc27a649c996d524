"""Tool search on a proxy (``p.add_tool_search()``) covers the upstream's tools: found by ``search_tools``, called by
``call_tool`` through the proxy's interceptors, left out of ``tools/list`` as the proxy's own are, walked again when
the upstream says its tools changed, within the bounds of the index. Real upstream processes (stdio, or HTTP on
127.0.0.1), our client, both eras."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import pytest

import mcpkit
import mcpkit.proxy_search as proxy_search
from mcpkit import Client
from mcpkit.protocol.errors import MCPError
from support.paths import SERVERS
from support.toolkit import APPS_FILE, ERAS, build, serve_http, tool_calls

pytestmark = pytest.mark.timeout(180)


def _upstream(name: str) -> list[str]:
    return [sys.executable, str(APPS_FILE), name]


def _hostile(*args: str) -> list[str]:
    return [sys.executable, str(SERVERS / "hostile_lists.py"), *args]


async def _search(client: Client, query: str) -> dict[str, Any]:
    found = await client.call_tool("search_tools", {"query": query})
    data: dict[str, Any] = found.structured
    return data


def _names(found: dict[str, Any]) -> list[str]:
    return [t["name"] for t in found["tools"]]


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("upstream_mode", ERAS)
async def test_tool_search_on_a_proxy_finds_and_calls_the_upstreams_tools_and_lists_them_as_its_own(
    mode: str, upstream_mode: str
) -> None:
    """The upstream's tools (seven, in pages of two) are found and called as the proxy's own are; ``tools/list``
    shows the two tools of the search and the tools named ``always_visible``, the upstream's too. A name both have
    is the proxy's. It used to search the proxy's own only: ``call_tool`` of an upstream tool was -32602."""
    p = mcpkit.proxy(_upstream("paged_upstream"), client_options={"mode": upstream_mode})

    @p.tool
    def weather_report(city: str) -> str:
        """The weather report of a city."""
        return f"rain in {city}"

    p.add_tool(lambda: "the proxy's clash", name="clash")
    p.add_tool_search(always_visible=["up3"])
    called = tool_calls(p)
    async with Client(p, mode=mode) as client:
        assert [t.name for t in await client.list_tools()] == ["search_tools", "call_tool", "up3"]
        assert _names(await _search(client, "up1")) == ["up1"]
        assert _names(await _search(client, "weather")) == ["weather_report"]
        assert _names(await _search(client, "clash")) == ["clash"]  # (the proxy's: the upstream's is not served)
        found = await _search(client, "up5")
        assert found["tools"][0]["inputSchema"]["type"] == "object" and "note" not in found
        assert (await client.call_tool("call_tool", {"name": "up1", "arguments": {}})).text == "upstream 1"
        assert (await client.call_tool("call_tool", {"name": "clash"})).text == "the proxy's clash"
        assert (await client.call_tool("up4", {})).text == "upstream 4"  # (by its own name too)
        assert called[-3:] == ["up1", "clash", "up4"]  # (the proxy's interceptors saw the real tools' calls)
        with pytest.raises(MCPError) as refused:  # (unknown upstream too: refused as its direct call is)
            await client.session.request("tools/call", {"name": "call_tool", "arguments": {"name": "nothing_like_it"}})
        assert refused.value.code == -32602


async def test_tool_search_on_a_gateway_covers_every_members_tools_under_their_prefixes() -> None:
    p = mcpkit.proxy({"a": _upstream("paged_upstream"), "b": _upstream("cached")})
    p.add_tool_search(strategy="keyword")
    async with Client(p) as client:
        assert [t.name for t in await client.list_tools()] == ["search_tools", "call_tool"]
        assert _names(await _search(client, "a_up2")) == ["a_up2"]
        assert _names(await _search(client, "b_touch")) == ["b_touch"]
        assert (await client.call_tool("call_tool", {"name": "a_up2"})).text == "upstream 2"


@pytest.mark.parametrize("mode", ERAS)
async def test_tool_search_on_a_proxy_says_what_its_bounds_leave_out(
    mode: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Past :data:`MAX_INDEXED_TOOLS` (or bytes, or pages), the upstream's other tools are not indexed, and every
    answer says so (never silently); they are still called by their names."""
    monkeypatch.setattr(proxy_search, "MAX_INDEXED_TOOLS", 3)
    p = mcpkit.proxy(_upstream("paged_upstream"))
    p.add_tool_search()
    with caplog.at_level(logging.WARNING, logger="mcpkit.proxy"):
        async with Client(p, mode=mode) as client:
            found = await _search(client, "up1")
            assert _names(found) == ["up1"] and "only the first 3 upstream tools are searched" in found["note"]
            found = await _search(client, "up5")
            assert _names(found) == [] and "only the first 3" in found["note"]
            assert (await client.call_tool("call_tool", {"name": "up5"})).text == "upstream 5"
    assert any("only the first 3 upstream tools" in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(proxy_search, "MAX_INDEXED_TOOLS", 10_000)
    monkeypatch.setattr(proxy_search, "MAX_INDEXED_BYTES", 300)  # (a definition is about 100 bytes)
    p = mcpkit.proxy(_upstream("paged_upstream"))
    p.add_tool_search()
    async with Client(p, mode=mode) as client:
        found = await _search(client, "up0")
        assert _names(found) == ["up0"] and "300 bytes" in found["note"]
        assert _names(await _search(client, "up4")) == []
    monkeypatch.setattr(proxy_search, "MAX_INDEXED_BYTES", 32 * 1024 * 1024)
    monkeypatch.setattr(proxy_search, "MAX_INDEXED_PAGES", 2)  # (pages of 2 tools)
    p = mcpkit.proxy(_upstream("paged_upstream"))
    p.add_tool_search()
    async with Client(p, mode=mode) as client:
        found = await _search(client, "up3")
        assert _names(found) == ["up3"] and "first 2 list pages" in found["note"]
        assert _names(await _search(client, "up4")) == []


async def test_an_upstream_listing_that_repeats_its_cursor_is_walked_once_and_each_tool_indexed_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An upstream naming the same ``nextCursor`` again never ends its listing: the walk went on to the page bound,
    indexing its tools once a page, so a search answered ``alpha`` ten times (and the index held 1,000 of it)."""
    p = mcpkit.proxy(_hostile("repeat"))
    p.add_tool_search()
    with caplog.at_level(logging.WARNING, logger="mcpkit.proxy"):
        async with Client(p) as client:
            found = await _search(client, "alpha")
            assert _names(found) == ["alpha"] and "note" not in found
            assert _names(await _search(client, "beta")) == ["beta"]
            assert (await client.call_tool("call_tool", {"name": "alpha"})).text == "called alpha"
    assert "named the cursor 'again' twice" in caplog.text


async def test_a_slow_upstream_listing_is_searched_as_far_as_the_walks_time_bound_and_the_answer_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A search waited for the whole walk, whatever it took: 1,000 pages of 0.4 s each held the first search (and
    every search behind it) for 400 s."""
    monkeypatch.setattr(proxy_search, "MAX_WALK_SECONDS", 1.5)
    p = mcpkit.proxy(_hostile("slow", "1000", "0.4"))
    p.add_tool_search()
    async with Client(p, validate_output=False) as client:  # (no tools/list first: the proxy's is 400 s long too)
        loop = asyncio.get_running_loop()
        started = loop.time()
        found = await _search(client, "t0")
        assert loop.time() - started < 1.5 + 15  # (not the 400 s of the whole listing; generous under load)
        assert _names(found) == ["t0"] and "listed within 1.5 s" in found["note"]
        assert "listed within 1.5 s" in (await _search(client, "t999"))["note"]  # (every answer says so)
        assert (await client.call_tool("call_tool", {"name": "t999"})).text == "called t999"


async def test_a_search_cancelled_while_it_walks_leaves_the_walk_to_the_next_search() -> None:
    """A search cancelled in the middle of the walk left the catalog marked as walked, with nothing in it: every
    later search found none of the upstream's tools until the upstream said its tools changed."""
    p = mcpkit.proxy(_hostile("slow", "3", "0.5"))
    p.add_tool_search()
    async with Client(p) as client:
        await client.list_tools()  # (known: the call below is the search, not the client's look-up of the tool)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(_search(client, "t2"), 0.3)  # (cancelled: the client says so to the proxy)
        assert _names(await _search(client, "t2")) == ["t2"]


async def _found_within(client: Client, query: str, name: str, seconds: float = 15.0) -> list[str]:
    """The search for ``query``, asked again until it finds ``name`` (the upstream's list_changed reaches the proxy
    on its own connection, maybe after the call that caused it answered), for at most ``seconds``."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        names = _names(await _search(client, query))
        if name in names or asyncio.get_running_loop().time() > deadline:
            return names
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_proxys_tool_search_walks_the_upstreams_tools_again_when_its_listen_stream_says_they_changed(
    mode: str,
) -> None:
    """A 2026-07-28 stdio upstream (every request shares the primary connection, whose listen stream relays its
    list changes): a tool it adds is found by the next search, and called."""
    p = mcpkit.proxy(_upstream("cached"), client_options={"mode": "modern"})
    p.add_tool_search()
    async with Client(p, mode=mode) as client:
        assert _names(await _search(client, "sprout")) == []
        assert (await client.call_tool("call_tool", {"name": "grow", "arguments": {"name": "sprout"}})).text == "grown"
        assert await _found_within(client, "sprout", "sprout") == ["sprout"]
        assert (await client.call_tool("call_tool", {"name": "sprout"})).text == "sprout"
        assert [t.name for t in await client.list_tools()] == ["search_tools", "call_tool"]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_proxys_tool_search_walks_the_upstreams_tools_again_when_it_sends_tools_list_changed(
    mode: str,
) -> None:
    """A handshake-era upstream over HTTP (one server process: a tool added through any session is told to the
    proxy's primary session as ``notifications/tools/list_changed``): the next search finds it."""
    async with serve_http(build("cached")) as url:
        p = mcpkit.proxy(url, client_options={"mode": "handshake"})
        p.add_tool_search()
        async with Client(p, mode=mode) as client:
            assert _names(await _search(client, "sprout")) == []
            grown = await client.call_tool("call_tool", {"name": "grow", "arguments": {"name": "sprout"}})
            assert grown.text == "grown"
            assert await _found_within(client, "sprout", "sprout") == ["sprout"]


async def test_a_handshake_era_sessions_search_finds_the_tool_its_own_stdio_upstream_process_added() -> None:
    """A handshake-era session's requests go to a stdio upstream process of its own: a tool that process adds is
    one the session can call, and its next search finds it (it used to search the proxy's own process only, and
    found nothing). Another session, whose process has no such tool, does not find it."""
    p = mcpkit.proxy(_upstream("cached"), client_options={"mode": "handshake"})
    p.add_tool_search()
    async with Client(p, mode="handshake") as client, Client(p, mode="handshake") as other:
        assert _names(await _search(client, "sprout")) == []
        grown = await client.call_tool("call_tool", {"name": "grow", "arguments": {"name": "sprout"}})
        assert grown.text == "grown"
        assert await _found_within(client, "sprout", "sprout") == ["sprout"]
        assert (await client.call_tool("call_tool", {"name": "sprout"})).text == "sprout"
        assert _names(await _search(client, "grow")) == ["grow"]  # (the others are still found)
        assert _names(await _search(other, "sprout")) == []
        assert "reads" in (await other.call_tool("asked", {})).structured  # (a process of its own now: no sprout)
        assert _names(await _search(other, "sprout")) == [] and _names(await _search(other, "grow")) == ["grow"]
        assert [t.name for t in await client.list_tools()] == ["search_tools", "call_tool"]


async def test_the_sessions_own_tool_lists_are_bounded_past_which_a_session_searches_the_proxys_list(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past :data:`MAX_SESSION_INDEXED_BYTES` (all sessions' own lists together), a session whose upstream process
    lists other tools than the proxy's connection searches the proxy's list, and its answers say so; the tool is
    still called by its name."""
    monkeypatch.setattr(proxy_search, "MAX_SESSION_INDEXED_BYTES", 100)  # (a definition is about 100 bytes)
    p = mcpkit.proxy(_upstream("cached"), client_options={"mode": "handshake"})
    p.add_tool_search()
    async with Client(p, mode="handshake") as client:
        assert "reads" in (await client.call_tool("asked", {})).structured  # (its own process: the same list)
        found = await _search(client, "grow")
        assert _names(found) == ["grow"] and "note" not in found  # (the same list: the proxy's, shared)
        grown = await client.call_tool("call_tool", {"name": "grow", "arguments": {"name": "sprout"}})
        assert grown.text == "grown"
        deadline = asyncio.get_running_loop().time() + 15.0
        while "note" not in found and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.1)
            found = await _search(client, "sprout")
        assert _names(found) == [] and "own upstream sessions list are not searched" in found["note"]
        assert _names(await _search(client, "grow")) == ["grow"]
        assert (await client.call_tool("call_tool", {"name": "sprout"})).text == "sprout"
