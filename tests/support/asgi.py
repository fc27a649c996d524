"""The one way the tests serve an ASGI app: real uvicorn on 127.0.0.1, port 0 (or a socket bound beforehand).

    async with serve_asgi(app) as port: ...             # inside the test's event loop
    with serve_asgi_in_thread(app) as port: ...         # for synchronous tests (a CLI subprocess, ...)

Both wait until uvicorn listens (a start failure is raised, not hung on) and stop it on exit (graceful shutdown
bounded by ``timeout_graceful_shutdown``, the wait for the server bounded by ``STOP_TIMEOUT``).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import uvicorn

START_TIMEOUT = 10.0  # seconds uvicorn may take to listen
STOP_TIMEOUT = 15.0  # seconds the server task may take to end after should_exit


def _config(app: Any, options: dict[str, Any]) -> uvicorn.Config:
    settings: dict[str, Any] = {
        "host": "127.0.0.1",
        "port": 0,
        "log_level": "warning",
        "lifespan": "on",
        "timeout_graceful_shutdown": 1,
    }
    settings.update(options)
    return uvicorn.Config(app, **settings)


def _port(server: uvicorn.Server, sock: socket.socket | None) -> int:
    listening = sock if sock is not None else server.servers[0].sockets[0]
    port: int = listening.getsockname()[1]
    return port


@contextlib.asynccontextmanager
async def serve_asgi(
    app: Any, *, sock: socket.socket | None = None, close_app: bool = False, **options: Any
) -> AsyncIterator[int]:
    """Serve ``app`` on real uvicorn in this event loop; yields the port. ``sock``: a socket bound beforehand (the
    app must know its URL before it is built). ``close_app``: await ``app.aclose()`` before stopping. ``options``
    go to ``uvicorn.Config``. No signal handlers are taken from pytest."""
    server = uvicorn.Server(_config(app, options))
    task = asyncio.get_running_loop().create_task(server._serve(sockets=[sock] if sock is not None else None))
    deadline = asyncio.get_running_loop().time() + START_TIMEOUT
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn ended before it listened")
        if asyncio.get_running_loop().time() > deadline:
            task.cancel()
            raise RuntimeError(f"uvicorn did not listen within {START_TIMEOUT} s")
        await asyncio.sleep(0.01)
    try:
        yield _port(server, sock)
    finally:
        closer = getattr(app, "aclose", None) if close_app else None
        if closer is not None:
            await closer()
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, STOP_TIMEOUT)
        if sock is not None:
            sock.close()


@contextlib.contextmanager
def serve_asgi_in_thread(app: Any, **options: Any) -> Iterator[int]:
    """Serve ``app`` on real uvicorn in a background thread with its own event loop; yields the port."""
    server = uvicorn.Server(_config(app, options))
    thread = threading.Thread(target=lambda: asyncio.run(server._serve()), daemon=True)
    thread.start()
    for _ in range(int(START_TIMEOUT / 0.01)):
        if server.started or not thread.is_alive():
            break
        thread.join(0.01)
    if not server.started:
        server.should_exit = True
        thread.join(STOP_TIMEOUT)
        raise RuntimeError("uvicorn did not listen")
    try:
        yield _port(server, None)
    finally:
        server.should_exit = True
        thread.join(STOP_TIMEOUT)
