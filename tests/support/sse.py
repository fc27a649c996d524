"""Shared plumbing for the legacy SSE and WebSocket transport tests (no tests here).

* ``make_server()``: a small low-level mcpkit server (echo, slow with progress, ask = elicitation + sampling +
  roots in either era, big, notify = list_changed fan-out).
* ``serve(app, **uvicorn_options)``: a real in-process uvicorn server on 127.0.0.1, port 0; yields the port.
* ``client_handlers()``: ClientSession keyword arguments that answer the server's questions.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from mcpkit.protocol.errors import InvalidParams
from mcpkit.server.lowlevel import Server, ServerRequestContext
from support.asgi import serve_asgi

TOOLS = [
    {"name": n, "description": n, "inputSchema": {"type": "object"}} for n in ("echo", "slow", "ask", "big", "notify")
]


def _text(t: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t}], "isError": False}


def make_server(name: str = "transport-test") -> Server:
    server = Server(name, "1.0.0")

    @server.handler("tools/list")
    async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": TOOLS}

    @server.handler("tools/call")
    async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "echo":
            await ctx.log("info", {"echo": args.get("text")})
            return _text(str(args.get("text", "")))
        if name == "slow":
            steps = int(args.get("steps", 3))
            for i in range(steps):
                await ctx.report_progress(i + 1, steps, f"step {i + 1}")
                await asyncio.sleep(float(args.get("delay", 0.01)))
            return _text(f"done {steps}")
        if name == "ask":
            e = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
            s = await ctx.sample(
                {"messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}], "maxTokens": 10}
            )
            r = await ctx.list_roots()
            who = (e.get("content") or {}).get("name")
            return _text(f"{e['action']}:{who}|{s['content']['text']}|{','.join(x['uri'] for x in r['roots'])}")
        if name == "big":
            return _text("x" * int(args.get("n", 1000)))
        if name == "notify":
            await server.notify_list_changed("tools")
            return _text("notified")
        raise InvalidParams(f"Unknown tool: {name}")

    return server


def client_handlers() -> dict[str, Any]:
    return {
        "elicitation_handler": lambda p: {"action": "accept", "content": {"name": "Ada"}},
        "sampling_handler": lambda p: {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"},
        "roots": ["file:///work"],
    }


@contextlib.asynccontextmanager
async def serve(app: Any, **options: Any) -> AsyncIterator[int]:
    """Run ``app`` on a real uvicorn server bound to 127.0.0.1 (port 0) inside this event loop."""
    options.setdefault("timeout_graceful_shutdown", 2)
    async with serve_asgi(app, close_app=True, **options) as port:
        yield port


async def eventually(predicate: Any, timeout: float = 5.0) -> None:
    """Wait until ``predicate()`` is true (fails the test after ``timeout`` seconds)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)
