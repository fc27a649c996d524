"""The upstream connections a proxy's 2026-07-28 requests lease (``mcpkit.proxy_upstream``): a handshake-era
server keeps state per connection (a tool a call added, a setting), so its 2026-07-28 clients, who must see one
server whose lists do not vary with the connection that answered, are served by one connection (per set of client
capabilities, which the upstream may offer tools by) unless the operator says its connections are interchangeable
(``pool_size``). Real stdio upstream processes, our client."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

import mcpkit
import mcpkit.proxy_rounds
from mcpkit import Client
from mcpkit.protocol.errors import MCPError
from support.toolkit import APPS_FILE, processes_of, serve_http, serve_http_process

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
    """It was -32603 "Internal error" (a bare TimeoutError). The call holding the connection goes on. (The client
    declares roots, which a stdio upstream may ask for apart from any request: its requests are served one at a
    time.)"""
    p = mcpkit.proxy(_upstream("legacy-2025-06-18"), client_options={"mode": "handshake"}, lease_timeout=0.5)
    async with serve_http(p) as url, Client(url, mode="modern", roots=["file:///work"]) as client:
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
    call holding its connection ran. Now the bound runs from the request's arrival. (Both clients declare what a
    stdio upstream may ask them: their requests are served one at a time.)"""
    p = mcpkit.proxy(_upstream("legacy-2025-06-18"), client_options={"mode": "handshake"}, lease_timeout=0.6)
    async with (
        serve_http(p) as url,
        Client(url, mode="modern", roots=["file:///work"]) as client,
        Client(url, mode="modern", elicitation_handler=_answer("Ada")) as other,  # (a connection of its own)
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


def _answer(name: str) -> Any:
    return lambda params: {"action": "accept", "content": {"name": name}}


EVERY_CAPABILITY: dict[str, Any] = {  # (what the proxy's primary connection declares upstream)
    "roots": ["file:///work"],
    "sampling_handler": lambda params: {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
    "sampling_tools": True,
    "elicitation_handler": _answer("Ada"),
}


@contextlib.contextmanager
def _upstream_target(transport: str) -> Iterator[Any]:
    if transport == "http":  # (a process of its own, over Streamable HTTP)
        with serve_http_process("legacy-2025-06-18") as url:
            yield url
    else:
        yield _upstream("legacy-2025-06-18")


@pytest.mark.parametrize(
    ("transport", "asks", "shared"),
    [("http", True, True), ("stdio", False, True), ("stdio", True, False)],
    ids=["http-upstream", "stdio-upstream-client-declares-nothing", "stdio-upstream-client-can-be-asked"],
)
async def test_concurrent_calls_share_the_kept_upstream_connection_where_what_it_asks_can_be_attributed(
    transport: str, asks: bool, shared: bool
) -> None:
    """The kept connection of a capability set served its requests one after another: N slow calls took N calls'
    time. Now they run side by side when whatever the upstream asks can be told to be about one of them (over
    Streamable HTTP it asks on that request's own stream; a client that declared nothing cannot be asked), and one
    after another only where it cannot (a stdio upstream may ask a client that declared something, and its message
    does not say for which request)."""
    n, steps = 5, 40  # (each call ~2 s upstream: one after another, at least 10 s)
    options = EVERY_CAPABILITY if asks else {}
    with _upstream_target(transport) as target:
        p = mcpkit.proxy(target, client_options={"mode": "handshake"}, allow_private_network=True)
        async with serve_http(p) as url, Client(url, mode="modern", **options) as client:
            t0 = time.monotonic()
            calls = await asyncio.gather(*(client.call_tool("slow", {"steps": steps}, timeout=60) for _ in range(n)))
            took = time.monotonic() - t0
            assert [c.text for c in calls] == ["done"] * n
            most = (await client.call_tool("most_at_once", {})).data
    if shared:
        assert most >= n - 1, most  # (side by side in the one upstream process, give or take a late start)
        assert took < 0.6 * n * steps * 0.05, took  # (~2 s and the proxy's round trips; one after another: 10 s)
    else:
        assert most == 1 and took >= n * steps * 0.05, (most, took)


async def test_a_call_waiting_for_its_clients_answer_lets_the_other_calls_on_its_connection_proceed() -> None:
    """An elicitation suspended a call and it held the kept connection: the other clients' calls (the same
    capabilities, so the same connection) waited until it was answered, or failed after ``lease_timeout``. Now they
    run and complete meanwhile; the suspended call completes once its client answers."""
    asked, go_on = asyncio.Event(), asyncio.Event()

    async def waits(params: Any) -> Any:
        asked.set()
        await go_on.wait()
        return {"action": "accept", "content": {"name": "Ada"}}

    with serve_http_process("legacy-2025-06-18") as upstream:
        p = mcpkit.proxy(upstream, client_options={"mode": "handshake"}, allow_private_network=True, lease_timeout=5)
        async with (
            serve_http(p) as url,
            Client(url, mode="modern", elicitation_handler=waits) as first,
            Client(url, mode="modern", elicitation_handler=_answer("Bob")) as other,
        ):
            asking = asyncio.ensure_future(first.call_tool("ask", {}, timeout=60))
            await asyncio.wait_for(asked.wait(), 20)
            calls = await asyncio.wait_for(
                asyncio.gather(*(other.call_tool("slow", {"steps": 4}) for _ in range(3))), 20
            )
            assert [c.text for c in calls] == ["done"] * 3
            assert not asking.done()
            go_on.set()
            assert (await asking).text == "Hello, Ada!"


async def test_what_the_upstream_asks_during_concurrent_calls_reaches_only_the_client_whose_call_it_is_about() -> None:
    """Four clients with the same capabilities call a tool that elicits, at once, over one upstream connection: all
    four elicitations are pending together (each client's handler waits until every one was asked), and each
    reaches the client whose call asked it, never another."""
    names = ["Ada", "Bob", "Cy", "Di"]
    seen: dict[str, int] = dict.fromkeys(names, 0)
    everyone = asyncio.Barrier(len(names))

    def handler(name: str) -> Any:
        async def answer(params: Any) -> Any:
            seen[name] += 1
            await asyncio.wait_for(everyone.wait(), 20)  # (all pending at once, or this call fails)
            return {"action": "accept", "content": {"name": name}}

        return answer

    with serve_http_process("legacy-2025-06-18") as upstream:
        p = mcpkit.proxy(upstream, client_options={"mode": "handshake"}, allow_private_network=True)
        async with contextlib.AsyncExitStack() as stack:
            url = await stack.enter_async_context(serve_http(p))
            clients = [
                await stack.enter_async_context(Client(url, mode="modern", elicitation_handler=handler(name)))
                for name in names
            ]
            calls = await asyncio.gather(*(c.call_tool("ask", {}, timeout=60) for c in clients))
    assert [c.text for c in calls] == [f"Hello, {name}!" for name in names]
    assert seen == dict.fromkeys(names, 1)


async def test_the_upstreams_log_messages_during_concurrent_calls_reach_only_the_client_whose_call_sent_them() -> None:
    """Two clients call, at once, a tool that logs, over the one upstream connection they share: each gets the log
    messages of its own call, all of them and no other's. (They reached a request only while it held the connection
    alone: shared, they were dropped.) Over Streamable HTTP the upstream sends a request's log messages on that
    request's own stream, and the proxy's client keeps which stream each arrived on."""
    names = ["Ada", "Bob"]
    heard: dict[str, list[str]] = {name: [] for name in names}

    def handler(name: str) -> Any:
        return lambda message: heard[name].append(str(message.data))

    with serve_http_process("legacy-2025-06-18") as upstream:
        p = mcpkit.proxy(upstream, client_options={"mode": "handshake"}, allow_private_network=True)
        async with contextlib.AsyncExitStack() as stack:
            url = await stack.enter_async_context(serve_http(p))
            clients = [
                await stack.enter_async_context(
                    Client(url, mode="modern", log_level="info", logging_handler=handler(name))
                )
                for name in names
            ]
            calls = await asyncio.gather(
                *(
                    c.call_tool("chatty", {"name": name, "together": 2}, timeout=60)
                    for c, name in zip(clients, names, strict=True)
                )
            )
    assert [c.text for c in calls] == names
    assert heard == {name: [f"{name}: {i}" for i in range(5)] for name in names}


async def test_the_primary_serves_the_clients_that_declare_what_it_declares_instead_of_sitting_idle() -> None:
    """The primary connection (it declares every capability the proxy relays) sat in the pool under a key no client
    has: with ``pool_size=1`` a client declaring every capability got a second upstream process beside it, and in a
    pool the primary took a slot that served nobody. Now it serves those clients, and takes no slot of a pool."""
    mark = f"--mark={uuid.uuid4().hex}"
    p = mcpkit.proxy([*_upstream("legacy-2025-06-18"), mark], client_options={"mode": "handshake"})
    async with serve_http(p) as url, Client(url, mode="modern", **EVERY_CAPABILITY) as client:
        pid = (await client.call_tool("process", {})).data
        assert processes_of(mark) == {pid}  # (one upstream process: the primary's)
    mark = f"--mark={uuid.uuid4().hex}"
    p = mcpkit.proxy([*_upstream("legacy-2025-06-18"), mark], client_options={"mode": "handshake"}, pool_size=2)
    async with serve_http(p) as url, Client(url, mode="modern", roots=["file:///work"]) as client:
        await asyncio.gather(*(client.call_tool("slow", {"steps": 2}, timeout=60) for _ in range(2)))  # (opened)
        assert len(processes_of(mark)) == 3  # (the primary and the pool's two, both serving)
        t0 = time.monotonic()
        calls = await asyncio.gather(*(client.call_tool("slow", {"steps": 30}, timeout=60) for _ in range(2)))
        took = time.monotonic() - t0
        assert [c.text for c in calls] == ["done"] * 2
    assert took < 2 * 30 * 0.05, took  # (side by side: ~1.5 s; one after another: 3 s)


async def test_one_connection_serves_at_most_max_shared_requests_at_once() -> None:
    """Past ``max_shared`` requests on its one connection (here 2), a request waits for one of them to end."""
    with serve_http_process("legacy-2025-06-18") as upstream:
        p = mcpkit.proxy(upstream, client_options={"mode": "handshake"}, allow_private_network=True, max_shared=2)
        async with serve_http(p) as url, Client(url, mode="modern") as client:
            calls = await asyncio.gather(*(client.call_tool("slow", {"steps": 20}, timeout=60) for _ in range(3)))
            assert [c.text for c in calls] == ["done"] * 3
            assert (await client.call_tool("most_at_once", {})).data == 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_max_shared_is_a_positive_whole_number_or_the_proxy_is_refused_in_words(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"max_shared must be a positive whole number .* not "):
        mcpkit.proxy(_upstream("legacy-2025-06-18"), max_shared=bad)
    assert mcpkit.proxy(_upstream("legacy-2025-06-18")).max_shared == mcpkit.proxy_rounds.MAX_SHARED == 32


async def test_an_upstream_that_asks_apart_from_any_request_has_its_requests_served_one_at_a_time_from_then_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Over HTTP the upstream may ask on its standalone stream, apart from the request it is about: while requests
    share the connection the proxy cannot tell whose client to ask, so it stops sharing (and says so); the request
    alone on the connection then is the one asked, as before."""
    with serve_http_process("legacy-2025-06-18") as upstream:
        p = mcpkit.proxy(upstream, client_options={"mode": "handshake"}, allow_private_network=True)
        async with serve_http(p) as url, Client(url, mode="modern", roots=["file:///work"]) as client:
            assert (await client.call_tool("roots_later", {})).text == "asking later"
            assert (await client.call_tool("slow", {"steps": 20})).text == "done"  # (asked meanwhile, alone)
            assert "apart from the request they are about" in caplog.text
            t0 = time.monotonic()
            await asyncio.gather(*(client.call_tool("slow", {"steps": 20}, timeout=60) for _ in range(2)))
            assert time.monotonic() - t0 >= 2 * 20 * 0.05  # (one after the other)
