"""Handshake sessions shared by several Streamable HTTP workers through a SessionStore (in one process: two real
uvicorn servers on 127.0.0.1 and the in-memory stores; tests/e2e/test_stores_workers.py does the same with worker
processes and Redis): the stored record is the truth for every worker, its TTL follows activity anywhere, and a
worker dropping its idle copy does not end the session for the others."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from mcpkit import MCPKit
from mcpkit.stores import InMemoryEventStore, InMemorySessionStore
from mcpkit.stores.bus import BusFanout, InMemoryBus
from support.mcp_http import handshake_headers, open_session, running

V = "2025-11-25"


def _app(name: str) -> MCPKit:
    app = MCPKit(name)

    @app.tool
    def whoami() -> str:
        return name

    @app.resource("mcpkit://doc")
    def doc() -> str:
        return "doc"

    return app


def _rpc(method: str, params: dict[str, Any], rid: int = 7) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


async def _post(http: httpx.AsyncClient, url: str, sid: str, method: str, params: dict[str, Any]) -> httpx.Response:
    return await http.post(url, json=_rpc(method, params), headers=handshake_headers(sid, V))


async def _next_data(lines: AsyncIterator[str]) -> dict[str, Any]:
    async for line in lines:
        if line.startswith("data:") and line[5:].strip():
            message: dict[str, Any] = orjson.loads(line[5:])
            return message
    raise AssertionError("the stream ended")


@pytest.mark.req("S025")
async def test_subscriptions_and_log_level_made_through_one_worker_are_seen_by_the_other() -> None:
    store = InMemorySessionStore()
    async with (
        running(_app("A"), session_store=store) as (a, app_a),
        running(_app("B"), session_store=store) as (b, app_b),
        httpx.AsyncClient(timeout=10) as http,
    ):
        a, b = a + "/mcp", b + "/mcp"
        sid = await open_session(http, a, V)
        assert (await _post(http, b, sid, "tools/call", {"name": "whoami"})).status_code == 200  # B holds a copy
        assert (await _post(http, a, sid, "resources/subscribe", {"uri": "mcpkit://doc"})).status_code == 200
        assert (await _post(http, a, sid, "logging/setLevel", {"level": "error"})).status_code == 200
        stored = await store.load(sid)
        assert stored is not None and stored["subscriptions"] == ["mcpkit://doc"] and stored["log_level"] == "error"
        assert (await _post(http, b, sid, "ping", {})).status_code == 200  # B re-reads the record
        copy_b = app_b.streamable._sessions[sid].session
        assert copy_b.subscriptions == {"mcpkit://doc"} and copy_b.log_level == "error"
        assert (await _post(http, b, sid, "resources/unsubscribe", {"uri": "mcpkit://doc"})).status_code == 200
        assert (await _post(http, a, sid, "ping", {})).status_code == 200
        assert app_a.streamable._sessions[sid].session.subscriptions == set()


@pytest.mark.req("S025")
async def test_with_a_bus_the_get_stream_worker_learns_of_a_subscription_and_of_a_delete_at_once() -> None:
    store, bus = InMemorySessionStore(), InMemoryBus()
    server_a, server_b = _app("A"), _app("B")
    bridges = [BusFanout(bus), BusFanout(bus)]
    server_a.set_fanout(bridges[0])
    server_b.set_fanout(bridges[1])
    for bridge in bridges:
        await bridge.start()
    try:
        async with (
            running(server_a, session_store=store) as (a, _),
            running(server_b, session_store=store) as (b, app_b),
            httpx.AsyncClient(timeout=10) as http,
        ):
            a, b = a + "/mcp", b + "/mcp"
            sid = await open_session(http, a, V)
            get = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
            async with http.stream("GET", b, headers=get) as stream:
                assert stream.status_code == 200
                lines = stream.aiter_lines()
                assert (await _post(http, a, sid, "resources/subscribe", {"uri": "mcpkit://doc"})).status_code == 200
                await server_a.notify_resource_updated("mcpkit://doc")  # made on A, the GET stream is on B
                message = await asyncio.wait_for(_next_data(lines), 5)
                assert message["method"] == "notifications/resources/updated"
                assert message["params"]["uri"] == "mcpkit://doc"
                assert (await http.delete(a, headers={"mcp-session-id": sid})).status_code == 200
                rest = await asyncio.wait_for(asyncio.ensure_future(_drain(lines)), 5)  # B ends its GET stream
                assert rest == []
            assert sid not in app_b.streamable._sessions
            assert (await _post(http, b, sid, "ping", {})).status_code == 404
    finally:
        for bridge in bridges:
            await bridge.aclose()


async def _drain(lines: AsyncIterator[str]) -> list[str]:
    return [line async for line in lines if line.startswith("data:") and line[5:].strip()]


@pytest.mark.req("S025")
async def test_a_delete_on_one_worker_is_a_404_on_the_other_without_a_bus() -> None:
    store = InMemorySessionStore()
    async with (
        running(_app("A"), session_store=store) as (a, _),
        running(_app("B"), session_store=store) as (b, app_b),
        httpx.AsyncClient(timeout=10) as http,
    ):
        a, b = a + "/mcp", b + "/mcp"
        sid = await open_session(http, a, V)
        assert (await _post(http, b, sid, "ping", {})).status_code == 200
        assert (await http.delete(a, headers={"mcp-session-id": sid})).status_code == 200
        assert sid in app_b.streamable._sessions  # no bus: B has not heard of it yet...
        assert (await _post(http, b, sid, "ping", {})).status_code == 404  # ...but re-checks the store
        assert sid not in app_b.streamable._sessions
        get = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
        assert (await http.get(b, headers=get)).status_code == 404
        assert (await http.delete(b, headers={"mcp-session-id": sid})).status_code == 404


async def test_requests_renew_the_stored_ttl() -> None:
    store = InMemorySessionStore()
    async with (
        running(_app("A"), session_store=store, session_idle_timeout=1.0) as (a, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        a += "/mcp"
        sid = await open_session(http, a, V)
        for _ in range(10):  # 2 s of activity, twice the TTL
            await asyncio.sleep(0.2)
            assert (await _post(http, a, sid, "ping", {})).status_code == 200
        assert await store.load(sid) is not None
        await asyncio.sleep(1.5)  # no activity for longer than the TTL: the record is gone, and so is the session
        assert await store.load(sid) is None
        assert (await _post(http, a, sid, "ping", {})).status_code == 404


async def test_an_idle_copy_does_not_forget_shared_events_and_a_busy_session_keeps_its_ttl() -> None:
    """B's copy of a session idles out while A serves the session's GET stream (no requests: A renews the stored
    TTL because the stream is open). The session's events stay in the shared event store and both workers still
    serve it."""
    events, store = InMemoryEventStore(), InMemorySessionStore()
    opts: dict[str, Any] = {"event_store": events, "session_store": store, "session_idle_timeout": 1.0}
    server_a = _app("A")
    async with (
        running(server_a, **opts) as (a, app_a),
        running(_app("B"), **opts) as (b, app_b),
        httpx.AsyncClient(timeout=10) as http,
    ):
        a, b = a + "/mcp", b + "/mcp"
        sid = await open_session(http, a, V)
        get = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
        async with http.stream("GET", a, headers=get) as stream:
            lines = stream.aiter_lines()
            await server_a.notify_list_changed("tools")
            assert (await asyncio.wait_for(_next_data(lines), 5))["method"] == "notifications/tools/list_changed"
            assert (await _post(http, b, sid, "ping", {})).status_code == 200  # B restores a copy
            assert sid in app_b.streamable._sessions
            await asyncio.sleep(2.0)  # B's copy idles out (1 s + a sweep); A's stream stays open, no request
            assert sid not in app_b.streamable._sessions
            assert sid in app_a.streamable._sessions
            assert await store.load(sid) is not None  # renewed by A while the stream is open
            kept = await events.replay(f"{sid}/0", 0)
            assert kept is not None and len(kept) == 1  # B did not forget the session's events
            assert (await _post(http, b, sid, "ping", {})).status_code == 200
            assert (await _post(http, a, sid, "ping", {})).status_code == 200
        assert (await http.delete(b, headers={"mcp-session-id": sid})).status_code == 200
        assert await events.replay(f"{sid}/0", 0) is None  # DELETE does forget them


class _SlowSaves(InMemorySessionStore):
    """A store whose writes take a while (a remote store under load)."""

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        await asyncio.sleep(0.1)
        await super().save(session_id, state, ttl)


async def test_a_request_sent_while_the_new_session_is_being_saved_finds_it() -> None:
    """The client may send its next request while the worker is still saving the new session: that request must
    not re-read the store before the record exists (and take the session for deleted)."""
    store = _SlowSaves()
    async with running(_app("A"), session_store=store) as (a, _), httpx.AsyncClient(timeout=10) as http:
        a += "/mcp"
        for _ in range(3):
            sid = await open_session(http, a, V)  # initialize, then notifications/initialized at once
            assert (await _post(http, a, sid, "ping", {})).status_code == 200
            assert (await store.load(sid)) is not None
