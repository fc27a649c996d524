"""For the test servers run as scripts whose app must know its own URL before it is built: a socket bound on
127.0.0.1 first, then uvicorn serving the app on it, ``{"port": N}`` printed once it listens."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import uvicorn


def bind() -> tuple[socket.socket, str]:
    """A socket bound to a free port of 127.0.0.1, and the base URL it will serve."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


async def serve_printing_port(app: Any, sock: socket.socket) -> None:
    """Serve ``app`` (lifespan on) on ``sock`` until the process ends; prints ``{"port": N}`` once it listens."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    await task
