"""An ASGI MCP server (raw JSON-RPC, no SDK) that answers every request POST with an SSE stream carrying the
response and then never ends it: a comment every half second, for at most ``OPEN_FOR`` seconds. The 2025-03-26 to
2025-11-25 transports say the server SHOULD close the stream once its responses are sent; a checker must not be
held by one that does not. Serve it with ``support.asgi.serve_asgi`` (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

OPEN_FOR = 120.0  # seconds a stream is kept open after its response (bounded, so the test's load is too)
KEEPALIVE = 0.5

RESULTS: dict[str, Any] = {
    "initialize": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "open-streams", "version": "1.0"},
    },
    "ping": {},
    "tools/list": {"tools": [{"name": "echo", "description": "Echo.", "inputSchema": {"type": "object"}}]},
    "tools/call": {"content": [{"type": "text", "text": "echo"}], "isError": False},
}


async def _plain(send: Any, status: int, body: bytes = b"", ctype: bytes = b"application/json") -> None:
    headers = [(b"content-type", ctype)] if body else []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    body = b""
    while True:
        event = await receive()
        body += event.get("body", b"")
        if not event.get("more_body"):
            break
    if scope["method"] != "POST":
        await _plain(send, 405)
        return
    try:
        msg = json.loads(body)
    except ValueError:
        await _plain(send, 400)
        return
    if not isinstance(msg, dict) or "id" not in msg or not isinstance(msg.get("method"), str):
        await _plain(send, 202)  # notifications, answers (and what is neither: not judged here)
        return
    result = RESULTS.get(msg["method"])
    if result is None:
        error = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
        await _plain(send, 200, json.dumps(error).encode())
        return
    answer = json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
    await send({"type": "http.response.body", "body": b"data: " + answer + b"\n\n", "more_body": True})
    for _ in range(int(OPEN_FOR / KEEPALIVE)):  # the stream stays open: comments only
        await asyncio.sleep(KEEPALIVE)
        await send({"type": "http.response.body", "body": b": still here\n\n", "more_body": True})
    await send({"type": "http.response.body", "body": b""})
