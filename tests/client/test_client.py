"""The high-level ``Client``'s own behaviour around a call (what is not a transport's or a result's)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import RequestTimeout


def _slow_listing_app(list_delay: float, tool_delay: float) -> MCPKit:
    """A server whose tools/list takes ``list_delay`` s (the client fetches it for the output schema first) and
    whose ``slow`` tool takes ``tool_delay`` s."""
    app = MCPKit("slow-list", "1.0.0")

    @app.tool
    async def slow() -> str:
        """Takes its time."""
        await asyncio.sleep(tool_delay)
        return "done"

    async def late_list(call: Any, call_next: Any) -> Any:
        await asyncio.sleep(list_delay)
        return await call_next(call)

    app.add_interceptor(late_list, methods="tools/list")
    return app


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_timeout_used_up_by_the_tool_lookup_names_the_whole_timeout(mode: str) -> None:
    """call_tool(timeout=2) whose first tools/list (fetched for the output schema) took the whole deadline said
    "timed out after 0.001s": the time left, not the timeout the caller gave. It names the whole 2 s, and what the
    call was waiting for; the call itself is not sent once the deadline has passed."""
    async with Client(_slow_listing_app(2.5, 0), mode=mode) as client:  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as caught:
            await client.call_tool("slow", timeout=2)
        assert time.monotonic() - started < 2.4
        assert caught.value.timeout == 2 and caught.value.method == "tools/call"
        assert "after 2s" in str(caught.value) and "tools/list" in str(caught.value)


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_call_that_times_out_after_the_lookup_names_the_whole_timeout(mode: str) -> None:
    """The lookup took 1.2 s of a 2 s deadline and the call the rest: the error names 2 s, not the 0.8 s left."""
    async with Client(_slow_listing_app(1.2, 5), mode=mode) as client:  # type: ignore[arg-type]
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as caught:
            await client.call_tool("slow", timeout=2)
        assert 1.9 < time.monotonic() - started < 3
        assert caught.value.timeout == 2 and "after 2s" in str(caught.value)


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_concurrent_first_calls_share_one_tool_lookup(mode: str) -> None:
    """Fifty calls of a tool the client has not listed yet, made at once, each learned its output schema with a
    tools/list of its own: fifty walks of the whole list. They share one; the calls all succeed."""
    app = _slow_listing_app(0.2, 0)
    listings: list[str] = []

    async def count(call: Any, call_next: Any) -> Any:
        listings.append(call.method)
        return await call_next(call)

    app.add_interceptor(count, methods="tools/list")
    async with Client(app, mode=mode) as client:  # type: ignore[arg-type]
        results = await asyncio.gather(*(client.call_tool("slow") for _ in range(50)))
        assert [r.text for r in results] == ["done"] * 50
        assert len(listings) == 1
    listings.clear()
    async with Client(app, mode=mode) as client:  # type: ignore[arg-type]
        # a lookup whose caller gave up (a timeout) does not stop the others sharing it
        quick = asyncio.ensure_future(client.call_tool("slow", timeout=0.05))
        rest = await asyncio.gather(*(client.call_tool("slow") for _ in range(5)))
        with pytest.raises(RequestTimeout):
            await quick
        assert [r.text for r in rest] == ["done"] * 5 and len(listings) == 1


def _counter_app() -> MCPKit:
    app = MCPKit("counter")
    state = {"n": 0}

    @app.resource("counter://value")
    def value() -> str:
        return str(state["n"])

    @app.tool
    async def bump() -> int:
        state["n"] += 1
        await app.notify_resource_updated("counter://value")
        return state["n"]

    return app


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_watch_that_ends_leaves_the_updates_of_another_watch_on_the_same_resource(mode: str) -> None:
    async with Client(_counter_app(), mode=mode) as client, client.watch(resource_uris=["counter://value"]) as stays:
        async with client.watch(resource_uris=["counter://value"]) as ends:
            await client.call_tool("bump")
            assert (await ends.next(timeout=5))[1]["uri"] == "counter://value"
            assert (await stays.next(timeout=5))[1]["uri"] == "counter://value"
        await client.call_tool("bump")
        assert (await stays.next(timeout=5))[1]["uri"] == "counter://value"


async def test_a_watch_that_ends_keeps_a_subscription_made_by_hand() -> None:
    updates: asyncio.Queue[str] = asyncio.Queue()

    def on_notification(method: str, params: dict[str, Any] | None) -> None:
        if method == "notifications/resources/updated" and params is not None:
            updates.put_nowait(params["uri"])

    async with Client(_counter_app(), mode="handshake", on_notification=on_notification) as client:
        await client.subscribe_resource("counter://value")
        async with client.watch(resource_uris=["counter://value"]):
            pass
        await client.call_tool("bump")
        assert await asyncio.wait_for(updates.get(), 5) == "counter://value"


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_watch_sent_names_the_request_id_the_server_saw(mode: str) -> None:
    """An MCP Apps host tells a view the JSON-RPC id of the ``tools/call`` that opened it: ``watch_sent`` shows the
    id of each request sent within the block (those of the tasks started in it too), the one the server's handler
    got, and nothing outside the block; blocks nest, and a watcher that raises does not fail the call."""
    from mcpkit import Context
    from mcpkit.client import watch_sent

    app = MCPKit("ids", "1.0.0")

    @app.tool
    def whoami(ctx: Context) -> str:
        """The id of this request."""
        return repr(ctx.request_id)

    async with Client(app, mode=mode) as client:  # type: ignore[arg-type]
        await client.list_tools()
        outer: list[tuple[str, Any]] = []
        inner: list[tuple[str, Any]] = []

        def broken(method: str, rid: Any) -> None:
            raise RuntimeError("a broken watcher")

        with watch_sent(lambda m, r: outer.append((m, r))):
            with watch_sent(lambda m, r: inner.append((m, r))), watch_sent(broken):
                first = await client.call_tool("whoami")
            second = await asyncio.create_task(client.call_tool("whoami"))
        await client.call_tool("whoami")  # (outside: not seen)
        assert [m for m, _ in outer] == ["tools/call", "tools/call"]
        assert inner == outer[:1]
        assert [repr(r) for _, r in outer] == [first.text, second.text]
