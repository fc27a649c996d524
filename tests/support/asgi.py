"""The one way the tests serve an ASGI app: the testing kit's :func:`mcpkit.testing.serve_asgi` (uvicorn behind
mcpkit's connection guard, 127.0.0.1, port 0 or a socket bound beforehand), yielding the port.

    async with serve_asgi(app) as port: ...             # inside the test's event loop
    with serve_asgi_in_thread(app) as port: ...         # for synchronous tests (a CLI subprocess, ...)
    body = await read_body(receive)                      # in a test's own ASGI app: the request's whole body

Both wait until uvicorn listens (a start failure is raised, not hung on) and stop it on exit within the kit's
bounds.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from mcpkit.testing import serve_asgi as kit_serve_asgi

START_TIMEOUT = 10.0  # seconds the thread's server may take to listen
STOP_TIMEOUT = 15.0  # seconds the thread may take to end after it was told to stop


async def read_body(receive: Any) -> bytes:
    """The whole body of the HTTP request an ASGI app is answering: every ``http.request`` message's ``body``
    until one says there is no more (or the client went: ``http.disconnect``)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


@contextlib.asynccontextmanager
async def serve_asgi(
    app: Any, *, sock: socket.socket | None = None, close_app: bool = False, **options: Any
) -> AsyncIterator[int]:
    """Serve ``app`` in this event loop; yields the port. ``sock``: a socket bound beforehand (the app must know
    its URL before it is built). ``close_app``: await ``app.aclose()`` before stopping. ``options`` go to
    uvicorn (through :func:`mcpkit.transports.http.build_asgi_server`)."""
    options.setdefault("timeout_graceful_shutdown", 1)
    async with kit_serve_asgi(app, sock=sock, **options) as served:
        try:
            yield served.port
        finally:
            closer = getattr(app, "aclose", None) if close_app else None
            if closer is not None:
                await closer()


@contextlib.contextmanager
def serve_asgi_in_thread(app: Any, **options: Any) -> Iterator[int]:
    """Serve ``app`` in a background thread with its own event loop; yields the port."""
    ready = threading.Event()
    port: list[int] = []
    failure: list[BaseException] = []
    stop: list[asyncio.Event] = []
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        loops.append(asyncio.get_running_loop())
        try:
            async with serve_asgi(app, **options) as bound:
                port.append(bound)
                ready.set()
                await stop[0].wait()
        except BaseException as exc:
            failure.append(exc)
            ready.set()

    thread = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    thread.start()
    if not ready.wait(START_TIMEOUT) or not port:
        raise RuntimeError(f"uvicorn did not listen: {failure[0] if failure else 'timed out'}")
    try:
        yield port[0]
    finally:
        loops[0].call_soon_threadsafe(stop[0].set)
        thread.join(STOP_TIMEOUT)
