"""Shared plumbing for the Streamable HTTP tests (no tests here).

* ``make_server()``: a low-level mcpkit server with tools exercising every transport path: echo, progress
  (notifications before the response → SSE), ask (server→client requests), region (``x-mcp-header``), polled
  (closes the SSE connection mid-stream, SEP-1699), touch (list_changed fan-out), hang (cancellation probe: runs
  until cancelled, or answers "woke" once ``probe.release`` is set).
* ``running(server, **create_app_options)``: the ASGI app on a real in-process uvicorn bound to 127.0.0.1, port 0;
  yields ``(base_url, app)``.
* ``forget_sessions(app)`` (the server forgets every session, as one restarted does) and
  ``open_sessions_with(app, gate)`` (``await gate()`` before a request that opens a session is answered: a server
  slow to start, or one refusing new sessions by raising ``Refuse``).
* raw request helpers with the right headers for each era.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
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
        self.release = asyncio.Event()  # ends every ``hang`` call (within 30 s it answers "woke" either way)


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
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(probe.release.wait(), 30)
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


async def forget_sessions(app: Any) -> None:
    """The server forgets every session, as one restarted does: a client's next request gets a 404."""
    for sid in app.streamable.session_ids():
        await app.streamable.sessions.end(app.streamable._sessions[sid])


class Refuse(Exception):
    """Raised by an ``open_sessions_with`` gate: the request that opens a session is answered 503."""


def open_sessions_with(app: Any, gate: Callable[[], Awaitable[None]]) -> None:
    """Before the server answers a POST that opens a session (one without ``Mcp-Session-Id``), ``await gate()``:
    a delay is a server slow to open a session; raising :class:`Refuse` answers 503 (a server still starting)."""
    real = app.routes["/mcp"]

    async def gated(scope: Any, receive: Any, send: Any) -> None:
        if scope["method"] == "POST" and not any(k == b"mcp-session-id" for k, _ in scope["headers"]):
            try:
                await gate()
            except Refuse:
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"starting"})
                return
        await real(scope, receive, send)

    app.routes["/mcp"] = gated


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


def dechunk(raw: bytes) -> tuple[bytes, bool]:
    """The body of a chunked HTTP/1.1 response read from a socket (``raw``: head and body), and whether its
    terminating chunk arrived."""
    body = raw.split(b"\r\n\r\n", 1)[1]
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            return bytes(out), True
        if len(rest) < size + 2:
            out += rest[:size]
            return bytes(out), False
        out += rest[:size]
        body = rest[size + 2 :]
    return bytes(out), False


def burst_server(count: int, size: int = 64 * 1024) -> Server:
    """make_server() whose prompts/get sends ``count`` log messages of ``size`` bytes to the session outside any
    request (they go to its standalone GET stream), then answers."""
    server = make_server()

    @server.handler("prompts/get")
    async def burst(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        # messages unrelated to any request: the session's standalone GET stream carries them
        for i in range(count):
            await ctx.session.notify("notifications/message", {"level": "info", "data": {"i": i, "pad": "x" * size}})
        return {"messages": []}

    return server


async def check_get_takeover(base: str, app: Any, count: int, version: str = "2025-11-25") -> None:
    """A GET stream goes half-open (a raw socket that stops reading) while ``burst_server(count)`` sends it
    ``count`` messages; a new GET takes over: asserts it is 200, that the old response ends cleanly, and that the
    messages arrive each once, in order, split between the two; then that later messages reach the new one."""
    import socket

    async with httpx.AsyncClient(timeout=30) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, version)
        port = int(base.rsplit(":", 1)[1])
        old = socket.socket()
        old.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        old.connect(("127.0.0.1", port))
        head = f"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: text/event-stream\r\n"
        head += f"mcp-session-id: {sid}\r\nmcp-protocol-version: {version}\r\n\r\n"
        old.sendall(head.encode())
        old.setblocking(False)
        loop = asyncio.get_running_loop()
        try:
            hs = app.streamable._sessions[sid]
            for _ in range(100):
                if hs.standalone is not None and hs.standalone.conn is not None:
                    break
                await asyncio.sleep(0.02)
            r = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 7, "method": "prompts/get", "params": {"name": "b"}},
                headers=handshake_headers(sid, version),
            )
            assert r.status_code == 200, r.text
            for _ in range(250):  # (with a shared fan-out the messages come through the log: wait for them)
                if hs.standalone.conn.queue.qsize():
                    break
                await asyncio.sleep(0.02)
            assert hs.standalone.conn.queue.qsize() > 0  # the old reader stopped: messages wait in its queue
            newer: list[dict[str, Any]] = []
            get = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": version}
            async with http.stream("GET", url, headers=get) as g:
                assert g.status_code == 200  # not 409: the newer stream takes over
                # the old connection is read again (as if the network came back): it ends cleanly
                raw = bytearray()
                deadline = loop.time() + 20
                while loop.time() < deadline:
                    try:
                        chunk = await asyncio.wait_for(loop.sock_recv(old, 1 << 20), 1)
                    except TimeoutError:
                        chunk = b""
                    raw += chunk
                    if raw.endswith(b"0\r\n\r\n"):
                        break
                body, ended = dechunk(bytes(raw))
                assert ended, "the old stream was not ended cleanly"
                older = messages(sse_events(body.decode()))
                lines = g.aiter_lines()

                async def read(n: int, into: list[dict[str, Any]]) -> None:
                    async for line in lines:
                        if line.startswith("data: ") and len(line) > 6:
                            into.append(orjson.loads(line[6:]))
                            if len(into) >= n:
                                return

                await asyncio.wait_for(read(count - len(older), newer), 20)
                assert newer and older, (len(older), len(newer))
                seen = [m["params"]["data"]["i"] for m in older + newer]
                assert seen == list(range(count))  # nothing lost, nothing twice, in order
                assert hs.standalone.conn is not None  # one live stream: the new one
                # messages sent from now on go to the new stream
                r = await http.post(
                    url,
                    json={"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "touch"}},
                    headers=handshake_headers(sid, version),
                )
                assert r.status_code == 200
                later: list[dict[str, Any]] = []
                await asyncio.wait_for(read(1, later), 10)
                assert later[0]["method"] == "notifications/tools/list_changed"
        finally:
            old.close()


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
