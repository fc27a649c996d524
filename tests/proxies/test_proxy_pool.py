"""The upstream connections a proxy's 2026-07-28 requests lease (``mcpkit.proxy_upstream``): a handshake-era
server keeps state per connection (a tool a call added, a setting), so its 2026-07-28 clients, who must see one
server whose lists do not vary with the connection that answered, are served by one connection (per set of client
capabilities, which the upstream may offer tools by) unless the operator says its connections are interchangeable
(``pool_size``). Real stdio upstream processes, our client."""

from __future__ import annotations

import asyncio
import sys

import pytest

import mcpkit
from mcpkit import Client
from mcpkit.protocol.errors import MCPError
from support.toolkit import APPS_FILE, serve_http

pytestmark = pytest.mark.timeout(120)


def _upstream(name: str) -> list[str]:
    return [sys.executable, str(APPS_FILE), name]


async def test_a_tool_a_call_added_upstream_is_listed_and_called_by_every_request_after_it() -> None:
    """It used to be found by one request in several: the call ran in one pooled upstream process, and concurrent
    requests after it were spread over processes opened for them, which did not have the tool (unknown tool, lists
    without it). Now every 2026-07-28 request of clients declaring the same capabilities is served by one process,
    and a listen stream hears the change."""
    p = mcpkit.proxy(_upstream("cached"), client_options={"mode": "handshake"})
    async with serve_http(p) as url, Client(url, mode="modern", roots=["file:///work"]) as client:
        async with client.watch(tools=True) as watch:
            assert (await client.call_tool("grow", {"name": "added"})).text == "grown"
            method, _ = await watch.next(timeout=10)
            assert method == "notifications/tools/list_changed"
        calls = await asyncio.gather(*(client.call_tool("added", {}) for _ in range(4)))
        assert [c.text for c in calls] == ["added"] * 4
        lists = await asyncio.gather(*(client.list_tools() for _ in range(4)))
        assert all("added" in {t.name for t in tools} for tools in lists)
        pids = await asyncio.gather(*(client.call_tool("process", {}) for _ in range(4)))
        assert len({c.data for c in pids}) == 1  # (one upstream process for this client's capabilities)
        async with Client(url, mode="modern") as other:  # (no capabilities: a connection of its own, kept)
            theirs = await asyncio.gather(*(other.call_tool("process", {}) for _ in range(3)))
            assert len({c.data for c in theirs}) == 1 and theirs[0].data != pids[0].data
        assert (await client.call_tool("added", {})).text == "added"  # (the first one was not closed for it)


async def test_a_request_that_finds_no_free_connection_within_lease_timeout_is_refused_in_words() -> None:
    """It was -32603 "Internal error" (a bare TimeoutError). The call holding the connection goes on."""
    p = mcpkit.proxy(_upstream("legacy-2025-06-18"), client_options={"mode": "handshake"}, lease_timeout=0.5)
    async with serve_http(p) as url, Client(url, mode="modern") as client:
        started = asyncio.Event()
        holding = asyncio.ensure_future(
            client.call_tool("slow", {"steps": 40}, on_progress=lambda *_: started.set(), timeout=30)
        )
        await started.wait()
        with pytest.raises(MCPError) as refused:
            await client.call_tool("process", {})
        assert "lease_timeout" in refused.value.message and "pool_size=1" in refused.value.message
        assert (await holding).text == "done"
        assert (await client.call_tool("process", {})).data


async def test_lease_timeout_bounds_a_wait_however_often_other_connections_are_given_back() -> None:
    """Every connection given back wakes every waiter (they may wait for other capabilities): each wake used to start
    the waiter's ``lease_timeout`` again, so while other clients' calls came and went a request waited as long as the
    call holding its connection ran. Now the bound runs from the request's arrival."""
    p = mcpkit.proxy(_upstream("legacy-2025-06-18"), client_options={"mode": "handshake"}, lease_timeout=0.6)
    async with (
        serve_http(p) as url,
        Client(url, mode="modern") as client,
        Client(url, mode="modern", roots=["file:///work"]) as other,  # (a connection of its own)
    ):
        started = asyncio.Event()
        holding = asyncio.ensure_future(
            client.call_tool("slow", {"steps": 100}, on_progress=lambda *_: started.set(), timeout=30)
        )
        await started.wait()

        async def churn() -> None:  # the other connection given back every ~0.1 s
            while True:
                await other.call_tool("process", {})
                await asyncio.sleep(0.1)

        churning = asyncio.ensure_future(churn())
        try:
            t0 = asyncio.get_running_loop().time()
            with pytest.raises(MCPError) as refused:
                await client.call_tool("process", {}, timeout=30)
            waited = asyncio.get_running_loop().time() - t0
        finally:
            churning.cancel()
        assert "lease_timeout" in refused.value.message
        assert waited < 3.0, waited  # (0.6 s and the round trips; the slow call holds its connection ~5 s)
        assert not holding.done()
        assert (await holding).text == "done"
