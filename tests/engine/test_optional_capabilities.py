"""The optional capabilities of a connection and of a session store are declared in base classes with defaults
(``engine.BaseConnection``, ``stores.BaseSessionStore``), never found with getattr: an object written against the
bare protocols, without the base class, is still served (with the defaults), and one that derives from the base
class without overriding an optional method gets its default."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from mcpkit import MCPKit
from mcpkit.client.lowlevel import ClientSession
from mcpkit.engine import Outgoing
from mcpkit.stores import BaseSessionStore
from support.mcp_http import handshake_headers, open_session, running

V = "2025-11-25"


class PlainEnd:
    """One end of an in-memory connection with only what the Connection protocol requires."""

    def __init__(self, inbox: asyncio.Queue[bytes | None], outbox: asyncio.Queue[bytes | None]) -> None:
        self.inbox = inbox
        self.outbox = outbox

    async def receive(self) -> bytes | None:
        return await self.inbox.get()

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        await self.outbox.put(data)

    async def close(self) -> None:
        await self.outbox.put(None)


def _app() -> MCPKit:
    app = MCPKit("plain")

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    return app


async def test_a_connection_without_the_base_class_is_served_and_served_from() -> None:
    """A server and a client each talk over a connection that has no set_fast_path or set_protocol_version: the
    session negotiates and a tool call answers, both sides using the defaults."""
    to_server: asyncio.Queue[bytes | None] = asyncio.Queue()
    to_client: asyncio.Queue[bytes | None] = asyncio.Queue()
    serving = asyncio.create_task(_app().serve(PlainEnd(to_server, to_client)))
    try:
        async with ClientSession(PlainEnd(to_client, to_server), mode="handshake") as session:
            result = await session.call_tool("add", {"a": 2, "b": 3})
            assert result.structured_content == {"result": 5}
    finally:
        await to_server.put(None)
        await asyncio.wait_for(serving, 5)


class ProtocolOnlyStore:
    """A session store of the SessionStore protocol alone (no touch): it counts what it is asked."""

    def __init__(self) -> None:
        self.records: dict[str, dict[str, Any]] = {}
        self.calls: list[str] = []

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        self.calls.append("save")
        self.records[session_id] = state

    async def load(self, session_id: str) -> dict[str, Any] | None:
        self.calls.append("load")
        return self.records.get(session_id)

    async def delete(self, session_id: str) -> None:
        self.calls.append("delete")
        self.records.pop(session_id, None)


class DefaultTouchStore(ProtocolOnlyStore, BaseSessionStore):
    """The same store deriving from BaseSessionStore without overriding touch: it gets the default (load, save)."""


async def _serve_from_two_workers(store: ProtocolOnlyStore) -> None:
    """A session opened on one endpoint is served by another that shares the store (restored from its record)."""
    async with (
        running(_app(), session_store=store) as (a, _),
        running(_app(), session_store=store) as (b, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        sid = await open_session(http, a + "/mcp", V)
        for url in (a, b, a):
            params = {"name": "add", "arguments": {"a": 1, "b": 1}}
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
            r = await http.post(url + "/mcp", json=body, headers=handshake_headers(sid, V))
            assert r.status_code == 200, r.text
            assert r.json()["result"]["structuredContent"] == {"result": 2}


async def test_a_session_store_without_touch_is_read_with_load() -> None:
    store = ProtocolOnlyStore()
    await _serve_from_two_workers(store)
    assert "load" in store.calls and "save" in store.calls


async def test_a_session_store_deriving_from_the_base_gets_the_default_touch() -> None:
    store = DefaultTouchStore()
    touched: list[str] = []
    default_touch = BaseSessionStore.touch

    async def counting(self: BaseSessionStore, session_id: str, ttl: float | None) -> dict[str, Any] | None:
        touched.append(session_id)
        return await default_touch(self, session_id, ttl)

    store.touch = counting.__get__(store)  # type: ignore[method-assign]
    await _serve_from_two_workers(store)
    assert touched  # every request on a worker that holds the session re-reads it through touch
    assert store.calls.count("save") >= len(touched)  # the default renews with save
