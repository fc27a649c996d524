"""Where the scripted server meets the client: over stdio (the client launches :mod:`.relay`, which connects back
to :class:`StdioHost` on 127.0.0.1) or over Streamable HTTP (:class:`HttpHost`, an ASGI app on uvicorn, 127.0.0.1).

Both record every message as it came (the client's bytes are judged, not corrected) and are guarded like any
mcpkit server facing an untrusted peer: lines, bodies and relay frames are bounded (:data:`~..wire.MAX_MESSAGE`),
the relay must present the run's secret token, and the HTTP host applies mcpkit's Host/Origin policy (403 for a
browser page or a rebound name), its connection guard (slow or idle connections closed, a connection cap) and a
body bound (413).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import secrets
import socket
import sys
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...transports.http.headers import decode_header_value
from ..wire import MAX_MESSAGE
from .scripted import Conn, Entry, ScriptedServer, TooMany, parse

if TYPE_CHECKING:
    from ...transports.http.security import RequestCheck

RELAY = Path(__file__).with_name("relay.py")
RELAY_FRAME = 8 * MAX_MESSAGE  # a relay frame: one line of the client, JSON-escaped (latin-1: up to 6 bytes a byte)
IN_FRAME = b'{"t":"in",'  # how a relay frame of a client's line begins (the relay writes compact JSON)
GET_HOLD = 20.0  # seconds a standalone GET stream is kept open (nothing is sent on it)
MAX_HTTP_LOG = 10_000  # HTTP requests the auth scenario records


class StdioHost:
    """Accepts the relays the client launches; each relay is one connection (one server process for the client)."""

    transport = "stdio"

    def __init__(self, server: ScriptedServer) -> None:
        self.server = server
        self.token: str = secrets.token_urlsafe(24)
        self._srv: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.port: int = 0

    async def start(self) -> None:
        self._srv = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=RELAY_FRAME)
        self.port = self._srv.sockets[0].getsockname()[1]

    @property
    def command(self) -> list[str]:
        """The server command line the client is given (the relay, with the address and this run's token)."""
        return [sys.executable, str(RELAY), "127.0.0.1", str(self.port), self.token]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello: Any = None
        try:
            hello = json.loads(await asyncio.wait_for(reader.readline(), 10))
            token = str(hello.get("token", "")) if isinstance(hello, dict) else ""
        except (ValueError, RecursionError, TimeoutError, asyncio.LimitOverrunError):  # (anyone may connect)
            token = ""
        if not hmac.compare_digest(token.encode(), self.token.encode()):
            writer.close()
            return
        try:
            conn = self.server.connect("stdio")
        except TooMany:
            writer.close()
            return
        conn.keep(Entry("event", "hello", hello))
        lock = asyncio.Lock()

        async def emit(msg: Any) -> None:
            raw = self.server.record_out(conn, msg)
            async with lock:
                if writer.is_closing():  # (the relay is gone: nothing more reaches the client)
                    return
                with contextlib.suppress(ConnectionError):
                    writer.write(raw.encode() + b"\n")
                    await writer.drain()

        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    continue
                except ConnectionError:  # the relay died (killed, or exited with our answers unread)
                    break
                if not line:
                    break
                if conn.full and line.startswith(IN_FRAME):  # a flood past the log's bound: counted, not parsed
                    conn.dropped += 1
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                kind = event.get("t") if isinstance(event, dict) else None
                if kind != "in":
                    conn.keep(Entry("event", str(kind), event))
                    continue
                raw = str(event.get("d", "")).encode("latin-1", "replace").decode("utf-8", "replace")
                entry = self.server.record_in(conn, raw)
                if entry.data is None:
                    continue
                size = len(raw)
                if not conn.admit(size):  # a flood the client does not read: recorded, not answered
                    continue
                task = asyncio.get_running_loop().create_task(self._answer(conn, entry.data, size, emit))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        finally:
            conn.closed_at = time.monotonic()
            conn.keep(Entry("event", "closed"))
            writer.close()

    async def _answer(self, conn: Conn, msg: Any, size: int, emit: Any) -> None:
        try:
            answer = await self.server.handle(conn, msg, emit)
            if answer is not None:
                await emit(answer)
        finally:
            conn.answered(size)

    async def stop(self) -> None:
        if self._srv is not None:
            self._srv.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._srv.wait_closed(), 2)
        for task in list(self._tasks):
            task.cancel()


class _Session:
    """An HTTP session of the scripted server (handshake era)."""

    def __init__(self, conn: Conn, sid: str) -> None:
        self.conn = conn
        self.sid = sid
        self.ended = False
        self.initialized = False
        self.resume: tuple[str, Any] | None = None  # (event id to resume from, the answer still owed)


class HttpHost:
    """The scripted server over Streamable HTTP at ``/mcp`` (sessions, SSE streams, resumption, 2026-07-28 headers)."""

    transport = "http"

    def __init__(self, server: ScriptedServer, port: int = 0) -> None:
        from ...transports.http.security import make_request_check

        self.server = server
        self.requested_port = port
        self.url: str = ""
        self.policy: RequestCheck = make_request_check(None, None)  # localhost names and origins only
        self.sessions: dict[str, _Session] = {}
        self.loose: Conn | None = None  # requests that came without a session id
        self.modern: Conn | None = None  # the stateless (2026-07-28) requests
        self.expired: bool = False  # the expiry scenario ended the first session already
        self._uv: Any = None
        self._task: asyncio.Task[Any] | None = None
        self._stopping = False

    async def start(self) -> None:
        import uvicorn

        from ...transports.http.limits import ConnectionGuard, guarded_protocol, resolve_protocol

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", self.requested_port))
        except OSError as exc:  # (a port taken, or not ours to bind): the caller's to fix, said in one line
            sock.close()
            raise ValueError(f"cannot serve on 127.0.0.1:{self.requested_port}: {exc.strerror or exc}") from None
        port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/mcp"
        options: dict[str, Any] = {"log_level": "warning", "lifespan": "off", "timeout_keep_alive": 5}
        base = resolve_protocol("auto")
        if base is not None:
            guard = ConnectionGuard(header_timeout=10.0, body_timeout=30.0, max_connections=64)
            options["http"] = guarded_protocol(base, guard)
        app: Any = self
        if self.server.scenario.auth:
            app = self.protected(f"http://127.0.0.1:{port}")
        self._uv = uvicorn.Server(uvicorn.Config(app, **options))
        self._uv.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]  # a host inside the checker: the process's signals are not its own
        self._task = asyncio.get_running_loop().create_task(self._uv.serve(sockets=[sock]))
        while not self._uv.started and not self._task.done():
            await asyncio.sleep(0.02)

    def protected(self, base: str) -> Any:
        """The auth scenario: this endpoint behind mcpkit's ``protect`` and its development authorization server
        (automatic approval, registration, PKCE S256), every HTTP request recorded for the client's OAuth rules."""
        from ...auth import AuthorizationServer, JWTVerifier, protect

        authz = AuthorizationServer(base, auto_approve=True, scopes_supported=["mcp"], resources=[base + "/mcp"])
        authz.app = protect(
            self,
            resource=base + "/mcp",
            verifier=JWTVerifier(issuer=base, audience=base + "/mcp", keys={authz.kid: authz.key.public_key()}),
            authorization_servers=[base],
            required_scopes=["mcp"],
        )
        log = self.server.http_log

        async def recorded(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] != "http" or len(log) >= MAX_HTTP_LOG:
                await authz(scope, receive, send)
                return
            entry: dict[str, Any] = {
                "at": time.monotonic(),
                "method": scope["method"],
                "path": scope["path"],
                "query": bytes(scope.get("query_string", b"")).decode("latin-1"),
                "headers": {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            }
            log.append(entry)

            async def status(message: MutableMapping[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    entry["status"] = message["status"]
                await send(message)

            await authz(scope, receive, status)

        return recorded

    async def stop(self) -> None:
        self._stopping = True
        if self._uv is not None:
            self._uv.should_exit = True
            self._uv.force_exit = True
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 5)
        if self._uv is not None:  # requests still waiting on the client (one that stopped answering) end here
            left = list(self._uv.server_state.tasks)
            for task in left:
                task.cancel()
            if left:
                await asyncio.wait(left, timeout=2)

    # ------------------------------------------------------------------------------------------------ ASGI

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        sent = {"started": False, "done": False}

        async def tracked(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                sent["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                sent["done"] = True
            await send(message)

        try:
            await self._serve(scope, receive, tracked)
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            # the run is over: the response ends cleanly (no traceback from the server under the report)
            with contextlib.suppress(Exception):
                if not sent["started"]:
                    await _respond(send, 503, b"the scripted server stopped", "text/plain")
                elif not sent["done"]:
                    await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _serve(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        refusal = self.policy(scope)
        if refusal is not None:
            await _respond(send, refusal[0], refusal[1].encode(), "text/plain")
            return
        if scope["path"].rstrip("/") != "/mcp":
            await _respond(send, 404, b"Not Found", "text/plain")
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        method = scope["method"]
        try:
            if method == "POST":
                await self.post(scope, receive, send, headers)
            elif method == "GET":
                await self.get(headers, receive, send)
            elif method == "DELETE":
                await self.delete(headers, send)
            else:  # a message sent with another method (M019) is recorded, then refused
                conn, _ = self._conn_for(headers)
                conn.keep(Entry("http", method, http={"method": method, "headers": headers, "status": 405}))
                await _respond(send, 405, b"", "text/plain")
        except TooMany as exc:
            await _respond(send, 503, str(exc).encode(), "text/plain")

    def _conn_for(self, headers: dict[str, str]) -> tuple[Conn, _Session | None]:
        sid = headers.get("mcp-session-id")
        session = self.sessions.get(sid) if sid else None
        if session is not None:
            return session.conn, session
        if self.loose is None:
            self.loose = self.server.connect("http")
        return self.loose, None

    async def post(self, scope: MutableMapping[str, Any], receive: Any, send: Any, headers: dict[str, str]) -> None:
        from ...transports.http.sse import read_body

        body = await read_body(scope, receive, MAX_MESSAGE)
        info: dict[str, Any] = {"method": "POST", "headers": headers}
        if body is None:
            conn, _ = self._conn_for(headers)
            conn.keep(Entry("in", f"<a body over {MAX_MESSAGE} bytes>", None, "too large", http=info))
            await _respond(send, 413, b"", "text/plain")
            return
        text = body.decode("utf-8", "replace")
        msg = parse(text)[0]
        meta = (msg.get("params") or {}).get("_meta") if isinstance(msg, dict) else None
        modern = isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
        if modern and self.server.scenario.modern:
            if self.modern is None:
                self.modern = self.server.connect("http")
            conn, session = self.modern, None
        elif isinstance(msg, dict) and msg.get("method") == "initialize":
            conn, session = self.server.connect("http"), None
        else:
            conn, session = self._conn_for(headers)
        info["ids"] = [m["id"] for m in (msg if isinstance(msg, list) else [msg]) if isinstance(m, dict) and "id" in m]
        entry = self.server.record_in(conn, text, info)
        if entry.data is None:
            await self._json(
                send,
                conn,
                400,
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}},
                info,
            )
            return
        if modern and not self.server.scenario.modern:  # a handshake-era server: a plain 400 (the client falls back)
            refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Bad Request: no session"}}
            await self._json(send, conn, 400, refusal, info)
            return
        if isinstance(msg, dict) and msg.get("method") == "initialize" and "id" in msg:
            await self.initialize(send, conn, msg, info)
            return
        if not modern:
            if session is None:
                status = 404 if headers.get("mcp-session-id") else 400
                error = {"code": -32001 if status == 404 else -32600, "message": "Session not found or missing"}
                await self._json(send, conn, status, {"jsonrpc": "2.0", "id": None, "error": error}, info)
                return
            if self.server.scenario.expire and not self.expired and session.initialized and _has_request(msg):
                session.ended = self.expired = True  # the server ends the session: later requests with its id: 404
            if session.ended:
                error = {"code": -32001, "message": "Session terminated"}
                await self._json(send, conn, 404, {"jsonrpc": "2.0", "id": None, "error": error}, info)
                return
            if isinstance(msg, dict) and msg.get("method") == "notifications/initialized":
                session.initialized = True
        if not _has_request(msg):
            await self.server.handle(conn, msg, _nowhere)
            info["status"] = 202
            await _respond(send, 202, b"", "application/json")
            return
        await self.answer(send, conn, session, msg, info, modern)

    async def initialize(self, send: Any, conn: Conn, msg: Any, info: dict[str, Any]) -> None:
        answer = await self.server.handle(conn, msg, _nowhere)
        sid = secrets.token_hex(16)
        self.sessions[sid] = _Session(conn, sid)
        self.server.record_out(conn, answer)
        info["status"] = 200
        data = json.dumps(answer).encode()
        await _respond(send, 200, data, "application/json", [(b"mcp-session-id", sid.encode())])

    async def answer(
        self, send: Any, conn: Conn, session: _Session | None, msg: Any, info: dict[str, Any], modern: bool
    ) -> None:
        """A request: on an SSE stream when the server says something first (check_ask, progress), else JSON."""
        name = (msg.get("params") or {}).get("name") if isinstance(msg, dict) else None
        token = ((msg.get("params") or {}).get("_meta") or {}).get("progressToken") if isinstance(msg, dict) else None
        streamed = not modern and (name == "check_ask" or (name == "check_echo" and token is not None))
        if session is not None and self.server.scenario.resume and name == "check_echo":
            await self.cut_stream(send, conn, session, msg, info)
            return
        if not streamed:
            answer = await self.server.handle(conn, msg, _nowhere)
            code = ((answer or {}).get("error") or {}).get("code") if isinstance(answer, dict) else None
            status = 404 if modern and code == -32601 else 400 if modern and code in (-32020, -32021, -32022) else 200
            await self._json(send, conn, status, answer, info)
            return
        info["status"] = 200
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})

        async def emit(out: Any) -> None:
            raw = self.server.record_out(conn, out)
            await send(
                {"type": "http.response.body", "body": f"event: message\ndata: {raw}\n\n".encode(), "more_body": True}
            )

        answer = await self.server.handle(conn, msg, emit)
        if answer is not None:
            await emit(answer)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def cut_stream(self, send: Any, conn: Conn, session: _Session, msg: Any, info: dict[str, Any]) -> None:
        """The resume scenario: a priming event (an id, no data) and a ``retry``, then the connection is closed
        before the answer; the answer waits for a GET with ``Last-Event-ID``."""
        answer = await self.server.handle(conn, msg, _nowhere)
        event_id = f"{session.sid[:8]}-1"
        session.resume = (event_id, answer)
        retry = self.server.scenario.retry_ms
        info["status"] = 200
        info["cut"] = time.monotonic()
        conn.keep(Entry("event", "cut", {"id": event_id, "retry": retry}))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        frame = f"id: {event_id}\nretry: {retry}\ndata: \n\n".encode()
        await send({"type": "http.response.body", "body": frame, "more_body": False})

    async def get(self, headers: dict[str, str], receive: Any, send: Any) -> None:
        conn, session = self._conn_for(headers)
        info: dict[str, Any] = {"method": "GET", "headers": headers}
        conn.keep(Entry("http", "GET", http=info))
        if session is None or session.ended:
            info["status"] = 404 if session is not None else 400
            await _respond(send, info["status"], b"", "text/plain")
            return
        last = headers.get("last-event-id")
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        info["status"] = 200
        if last is not None and session.resume is not None and last == session.resume[0]:
            event_id, answer = session.resume
            session.resume = None
            raw = self.server.record_out(conn, answer)
            frame = f"id: {event_id[:-1]}2\nevent: message\ndata: {raw}\n\n".encode()
            await send({"type": "http.response.body", "body": frame, "more_body": False})
            return
        with contextlib.suppress(TimeoutError):  # a standalone stream: held open, nothing sent on it
            await asyncio.wait_for(_disconnected(receive), GET_HOLD)
        info["closed by client"] = time.monotonic()
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def delete(self, headers: dict[str, str], send: Any) -> None:
        conn, session = self._conn_for(headers)
        info: dict[str, Any] = {"method": "DELETE", "headers": headers}
        conn.keep(Entry("http", "DELETE", http=info))
        if session is None:
            info["status"] = 404
            await _respond(send, 404, b"", "text/plain")
            return
        session.ended = True
        info["status"] = 200
        await _respond(send, 200, b"", "text/plain")

    async def _json(self, send: Any, conn: Conn, status: int, answer: Any, info: dict[str, Any]) -> None:
        raw = self.server.record_out(conn, answer)
        if isinstance(answer, dict) and answer.get("id") is None and info.get("ids"):
            conn.keep(Entry("event", "answered", info["ids"]))  # an id-less refusal ends those requests too
        info["status"] = status
        await _respond(send, status, raw.encode(), "application/json")


def header_value(headers: dict[str, str], name: str) -> str | None:
    """A header as the client meant it (the ``=?base64?…?=`` form decoded); None when absent or malformed."""
    raw = headers.get(name.lower())
    if raw is None:
        return None
    try:
        return decode_header_value(raw)
    except ValueError:
        return None


def _has_request(msg: Any) -> bool:
    items = msg if isinstance(msg, list) else [msg]
    return any(isinstance(m, dict) and "method" in m and "id" in m for m in items)


async def _nowhere(_msg: Any) -> None:
    return None


async def _disconnected(receive: Any) -> None:
    while True:
        message = await receive()
        if message.get("type") == "http.disconnect":
            return


async def _respond(
    send: Any, status: int, body: bytes, ctype: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
