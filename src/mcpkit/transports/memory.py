"""In-memory transport pair. Every message still travels as encoded bytes, so tests cannot skip the wire."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..engine import BaseConnection, Outgoing
from ..protocol.errors import ConnectionClosed

Tap = Callable[[str, bytes], None]


class MemoryConnection(BaseConnection):
    """One end of an in-memory pair (bounded queue: a fast sender waits for a slow receiver)."""

    def __init__(self, inbox: asyncio.Queue[bytes | None], name: str, tap: Tap | None) -> None:
        self._inbox = inbox
        self._outbox: asyncio.Queue[bytes | None] | None = None
        self._name = name
        self._tap = tap
        self._closed = False

    async def receive(self) -> bytes | None:
        data = await self._inbox.get()
        if data is None:
            self._inbox.put_nowait(None)  # stay at end of input for any later caller
        return data

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        if self._closed or self._outbox is None:
            raise ConnectionClosed(f"memory transport ({self._name}) is closed")
        if b"\n" in data:
            raise ValueError("a framed message must not contain a raw newline")
        if self._tap is not None:
            self._tap(self._name, data)
        await self._outbox.put(bytes(data))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._outbox is not None:
            try:
                self._outbox.put_nowait(None)
            except asyncio.QueueFull:
                await self._outbox.put(None)


def create_memory_pair(*, tap: Tap | None = None, maxsize: int = 1024) -> tuple[MemoryConnection, MemoryConnection]:
    """Return ``(client_end, server_end)``. ``tap(direction, data)`` sees every message sent
    (direction is ``"client->server"`` or ``"server->client"``)."""
    to_server: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize)
    to_client: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize)
    client = MemoryConnection(to_client, "client->server", tap)
    server = MemoryConnection(to_server, "server->client", tap)
    client._outbox = to_server
    server._outbox = to_client
    return client, server
