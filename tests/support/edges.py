"""A real mcpkit HTTP server served in this loop (``build_server``), and raw sockets that poke its connections
the way a slow or hostile client does."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from mcpkit.transports.http import build_server
from support.mcp_http import handshake_headers, make_server, open_session

#: The revision the helpers speak.
V = "2025-11-25"


@contextlib.asynccontextmanager
async def served(**options: Any) -> AsyncIterator[tuple[str, Any]]:
    """``build_server(make_server(), port=0, **options)`` running in this loop; yields (base URL, uvicorn server)."""
    options.setdefault("timeout_graceful_shutdown", 1)
    userver = build_server(make_server(), "http", "127.0.0.1", 0, **options)
    task = asyncio.get_running_loop().create_task(userver.serve())
    for _ in range(500):
        if userver.started:
            break
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    port = userver.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", userver
    finally:
        userver.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)


async def half_open(port: int, head: bytes = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n") -> socket.socket:
    s = socket.socket()
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, ("127.0.0.1", port))
    if head:
        await asyncio.get_running_loop().sock_sendall(s, head)
    return s


async def closed_by_peer(s: socket.socket, within: float) -> bool:
    """True when the server closes ``s`` (EOF or reset) within ``within`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            data = await asyncio.wait_for(loop.sock_recv(s, 65536), max(0.01, deadline - time.monotonic()))
        except TimeoutError:
            return False
        except OSError:
            return True
        if not data:
            return True
    return False


async def tool_call(http: httpx.AsyncClient, url: str) -> None:
    sid = await open_session(http, url, V)
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}
    r = await http.post(url, json=body, headers=handshake_headers(sid, V))
    assert r.status_code == 200, r.text
    assert "hi" in r.text
