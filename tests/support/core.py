"""Shared helpers for the core tests: open a ClientSession to tests/support/servers/core_server.py over memory or stdio,
and a raw JSON-RPC peer for sending hand-made (also malformed) messages."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import sys
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import orjson

from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.memory import create_memory_pair
from mcpkit.transports.stdio import StdioClientTransport, StdioServer
from support.paths import SERVERS

CORE_SERVER = SERVERS / "core_server.py"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
}


def load_core_server() -> ModuleType:
    """A fresh module instance (fresh Server, fresh counters) per call."""
    spec = importlib.util.spec_from_file_location(f"core_server_{id(object())}", CORE_SERVER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def handlers() -> dict[str, Any]:
    return {
        "elicitation_handler": lambda p: {"action": "accept", "content": {"name": "Ada"}},
        "sampling_handler": lambda p: {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"},
        "roots": ["file:///work", "file:///tmp"],
    }


@contextlib.asynccontextmanager
async def open_session(
    transport: str, *, tap: Any = None, traffic: Any = None, server_mod: ModuleType | None = None, **kw: Any
) -> AsyncIterator[ClientSession]:
    """A session with the core server over ``transport``; ``tap``: the memory pair's ``(direction, bytes)`` tap,
    ``traffic``: the client engine's message tap (a :class:`mcpkit.testing.Traffic`)."""
    kw["tap"] = traffic
    if transport == "memory":
        mod = server_mod or load_core_server()
        c, s = create_memory_pair(tap=tap)
        task = asyncio.create_task(mod.server.serve(s))
        try:
            async with ClientSession(c, **kw) as cs:
                yield cs
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)
    else:
        t = StdioClientTransport(StdioServer([sys.executable, str(CORE_SERVER)]))
        await t.start()
        async with ClientSession(t, **kw) as cs:
            yield cs


class RawPeer:
    """Speaks raw bytes to a server connection and reads raw messages back."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def send(self, obj: Any) -> None:
        data = obj if isinstance(obj, bytes) else orjson.dumps(obj)
        await self.conn.send(data)

    async def recv(self, timeout: float = 5.0) -> Any:
        data = await asyncio.wait_for(self.conn.receive(), timeout)
        assert data is not None, "connection closed"
        return orjson.loads(data)

    async def recv_until(self, pred: Any, timeout: float = 5.0) -> tuple[Any, list[Any]]:
        """Read messages until pred(msg); returns (msg, everything read before it)."""
        seen: list[Any] = []
        while True:
            msg = await self.recv(timeout)
            if pred(msg):
                return msg, seen
            seen.append(msg)

    async def request(self, id: Any, method: str, params: Any = None, timeout: float = 5.0) -> Any:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)
        reply, _ = await self.recv_until(lambda m: m.get("id") == id and "method" not in m, timeout)
        return reply

    async def initialize(self, version: str = "2025-11-25", caps: dict[str, Any] | None = None) -> Any:
        r = await self.request(
            0,
            "initialize",
            {"protocolVersion": version, "capabilities": caps or {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        await self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r


@contextlib.asynccontextmanager
async def raw_memory(server_mod: ModuleType | None = None, tap: Any = None) -> AsyncIterator[RawPeer]:
    mod = server_mod or load_core_server()
    c, s = create_memory_pair(tap=tap)
    task = asyncio.create_task(mod.server.serve(s))
    try:
        yield RawPeer(c)
    finally:
        await c.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)


@contextlib.asynccontextmanager
async def raw_stdio(argv: list[str] | None = None, **kw: Any) -> AsyncIterator[tuple[RawPeer, StdioClientTransport]]:
    t = StdioClientTransport(StdioServer(argv or [sys.executable, str(CORE_SERVER)], **kw))
    await t.start()
    try:
        yield RawPeer(t), t
    finally:
        await t.close()
