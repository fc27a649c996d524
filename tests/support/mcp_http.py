"""Shared plumbing for the Streamable HTTP tests (no tests here).

* ``make_server()``: a low-level mcpkit server with tools exercising every transport path: echo, progress
  (notifications before the response → SSE), ask (server→client requests), region (``x-mcp-header``), polled
  (closes the SSE connection mid-stream, SEP-1699), touch (list_changed fan-out), hang (cancellation probe).
* ``running(server, **create_app_options)``: the ASGI app on a real in-process uvicorn bound to 127.0.0.1, port 0;
  yields ``(base_url, app)``.
* raw request helpers with the right headers for each era.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from mcpkit.protocol.errors import InvalidParams
from mcpkit.protocol.versions import META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION
from mcpkit.server.lowlevel import Server, ServerRequestContext
from mcpkit.transports.http import close_sse_stream, create_app
from mcpkit.transports.http.headers import param_headers_from_schema
from support.asgi import serve_asgi

ACCEPT_BOTH = "application/json, text/event-stream"
MODERN = "2026-07-28"

REGION_SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "query": {"type": "string"},
    },
}
TOOLS = [
    {"name": "echo", "description": "echo", "inputSchema": {"type": "object"}},
    {"name": "progress", "description": "progress", "inputSchema": {"type": "object"}},
    {"name": "ask", "description": "ask", "inputSchema": {"type": "object"}},
    {"name": "region", "description": "region", "inputSchema": REGION_SCHEMA},
    {"name": "polled", "description": "polled", "inputSchema": {"type": "object"}},
    {"name": "touch", "description": "touch", "inputSchema": {"type": "object"}},
    {"name": "hang", "description": "hang", "inputSchema": {"type": "object"}},
    {
        "name": "bad-header",
        "description": "x",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}},
    },
]


def text(t: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t}], "isError": False}


class Probe:
    def __init__(self) -> None:
        self.cancelled: list[Any] = []
        self.started = asyncio.Event()


def silent_prompt(probe: Probe, started: list[asyncio.Event] | None = None) -> Any:
    """A ``prompts/get`` handler that never answers on its own: it sets ``probe.started`` (and, with ``started``,
    ``started[int(name)]``) when it begins and records its cancellation in ``probe``."""

    async def silent(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        probe.started.set()
        if started is not None:
            started[int(params["name"])].set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            probe.cancelled.append(ctx.request_id)
            raise
        return {"messages": []}

    return silent


def make_server(probe: Probe | None = None) -> Server:
    probe = probe or Probe()
    server = Server("http-test", "1.0.0")
    headers = {t["name"]: param_headers_from_schema(t["inputSchema"]) for t in TOOLS if t["name"] != "bad-header"}
    server.tool_param_headers = lambda name: headers.get(name)  # type: ignore[attr-defined]
    server.probe = probe  # type: ignore[attr-defined]

    @server.handler("tools/list")
    async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": TOOLS}

    @server.handler("resources/list")
    async def list_resources(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"resources": []}

    @server.handler("tools/call")
    async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "echo":
            return text(str(args.get("text", "")))
        if name == "progress":
            steps = int(args.get("steps", 3))
            for i in range(steps):
                await ctx.log("info", f"step {i + 1}")
                await asyncio.sleep(float(args.get("delay", 0.01)))
            return text(f"done {steps}")
        if name == "ask":
            e = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
            return text(f"{e['action']}:{(e.get('content') or {}).get('name')}")
        if name == "region":
            return text(f"{args.get('region')}/{args.get('count')}")
        if name == "polled":
            n = int(args.get("n", 6))
            for i in range(n):
                if i == n // 2:
                    await asyncio.sleep(0.05)
                    await close_sse_stream(ctx, 50)
                await ctx.log("info", f"event {i}")
                await asyncio.sleep(0.01)
            return text(f"polled {n}")
        if name == "touch":
            await server.notify_list_changed("tools")
            return text("touched")
        if name == "hang":
            probe.started.set()
            try:
                await ctx.log("info", "hanging")
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                probe.cancelled.append(ctx.request_id)
                raise
            return text("woke")
        raise InvalidParams(f"Unknown tool: {name}")

    return server


@contextlib.asynccontextmanager
async def running(server: Server, **options: Any) -> AsyncIterator[tuple[str, Any]]:
    """Serve ``create_app(server, **options)`` on real uvicorn at 127.0.0.1:<port 0> inside this loop."""
    options.setdefault("sse", False)
    options.setdefault("ws", False)
    wrap = options.pop("wrap", None)
    app = create_app(server, **options)
    served = wrap(app) if wrap is not None else app
    async with serve_asgi(served) as port:
        yield f"http://127.0.0.1:{port}", app


def handshake_headers(session_id: str | None = None, version: str | None = None, **extra: str) -> dict[str, str]:
    h = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
    if session_id:
        h["mcp-session-id"] = session_id
    if version:
        h["mcp-protocol-version"] = version
    h.update(extra)
    return h


def initialize_body(version: str = "2025-11-25", rid: int = 1, caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": caps or {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


async def open_session(
    http: httpx.AsyncClient, url: str, version: str = "2025-11-25", caps: dict[str, Any] | None = None
) -> str:
    r = await http.post(url, json=initialize_body(version, caps=caps), headers=handshake_headers())
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    hv = version if version >= "2025-06-18" else None
    r = await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=handshake_headers(sid, hv)
    )
    assert r.status_code == 202
    return sid


def modern_body(
    method: str,
    params: dict[str, Any] | None = None,
    rid: int = 1,
    version: str = MODERN,
    caps: dict[str, Any] | None = None,
    log_level: str | None = None,
) -> dict[str, Any]:
    p = dict(params or {})
    p["_meta"] = {
        META_PROTOCOL_VERSION: version,
        META_CLIENT_CAPABILITIES: caps or {},
        META_CLIENT_INFO: {"name": "raw", "version": "0"},
    }
    if log_level is not None:
        p["_meta"]["io.modelcontextprotocol/logLevel"] = log_level
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": p}


def modern_headers(method: str, name: str | None = None, version: str = MODERN, **extra: str) -> dict[str, str]:
    h = {
        "accept": ACCEPT_BOTH,
        "content-type": "application/json",
        "mcp-protocol-version": version,
        "mcp-method": method,
    }
    if name is not None:
        h["mcp-name"] = name
    h.update(extra)
    return h


def sse_events(raw: str) -> list[dict[str, Any]]:
    """Parse an SSE body into events: {"id", "data", "retry"} (comments dropped)."""
    events: list[dict[str, Any]] = []
    for block in raw.replace("\r\n", "\n").split("\n\n"):
        ev: dict[str, Any] = {}
        data: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "data":
                data.append(value)
            else:
                ev[field] = value
        if data:
            ev["data"] = "\n".join(data)
        if ev:
            events.append(ev)
    return events


def messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [orjson.loads(e["data"]) for e in events if e.get("data")]
