"""A plain TCP server on 127.0.0.1 for tests that write HTTP by hand (framing a real server would never send).

    async def on_conn(reader, writer): ...           # read the request bytes, write any response bytes
    async with raw_server(on_conn) as port: ...

Connection errors end a connection quietly; on exit the server is closed and every connection it accepted is
aborted, so a handler still writing (a flood) stops at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[int]:
    """Serve ``handler(reader, writer)`` per connection; yields the port."""
    opened: list[asyncio.StreamWriter] = []

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened.append(writer)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(on_conn, "127.0.0.1", 0)
    try:
        yield srv.sockets[0].getsockname()[1]
    finally:
        srv.close()
        for writer in opened:
            writer.transport.abort()
