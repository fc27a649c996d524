"""WebSocket transport (a custom transport, not part of the MCP spec), server side: one plain ASGI callable.

Mounting::

    from mcpkit.transports.http.ws import WebSocketEndpoint
    ws = WebSocketEndpoint(server)
    # route the "websocket" scope at /ws to ``ws``; serve with uvicorn and pass ``**ws.uvicorn_options()``
    # (ping interval/timeout and the frame size limit live in the ASGI server: ASGI cannot send pings).
    # ``ws`` alone is also a complete ASGI app (it answers the lifespan protocol and 404s plain HTTP).

``WebSocketEndpoint(server, *, max_message=4 MiB, ping_interval=20.0, ping_timeout=20.0, queue_size=256,
queue_bytes=16 MiB, stall_timeout=30.0, max_sessions=10_000, max_sessions_per_client=100, require_subprotocol=True,
allowed_origins=None, allowed_hosts=None, check_request=None, **peer_options)``

Rules:

* Subprotocol ``mcp``: a client that offers it gets it. A client that offers none, or only others, is refused
  before the upgrade (HTTP 403) unless ``require_subprotocol=False`` (then it is accepted without a subprotocol).
  The official TypeScript SDK's WebSocket client offers ``mcp``; so does ours.
* ``Origin``/``Host`` are checked before the upgrade (the same policy as the SSE endpoint; refused → HTTP 403).
* Bounded connections, each one session, as for legacy SSE: at most ``max_sessions`` open (HTTP 503 beyond) and
  ``max_sessions_per_client`` per client (HTTP 429 beyond; the client is the authenticated principal, else the
  remote address), refused before the upgrade (HTTP 403 under an ASGI server without the denial-response
  extension).
* One JSON-RPC message (or batch) per TEXT frame, each way. Close codes from the server: binary frame → 1003;
  text frame over ``max_message`` bytes → 1009; invalid UTF-8 → 1007 (sent by uvicorn's WebSocket layer before
  the frame reaches us); a stuck reader (outgoing queue full, ``queue_size`` messages or ``queue_bytes``
  bytes, for ``stall_timeout`` s) → 1008, and its connection is aborted once it has read nothing for
  ``stall_timeout`` s (uvicorn would wait for it to read the close frame: see ``uvicorn_options()``); the
  access token the connection was opened with expires (behind :func:`mcpkit.auth.protect`) → 1008, the reason
  says so (the client reconnects with a fresh token); shutdown → 1001 (``drain()``: once the requests in flight
  on the connection are answered; ``aclose()``: at once).
  Text that is not JSON is answered with a JSON-RPC parse error (-32700) and the connection stays open.
* One :class:`~mcpkit.server.lowlevel.ServerSession` per connection, so both eras work: handshake-era sessions
  (``initialize`` …) and modern-era requests carrying ``params._meta`` protocol version go through the same peer.
  The session ends, cleanly, whenever the connection closes (any code, from either side).
* Keep-alive: uvicorn sends pings every ``ping_interval`` s and drops a peer whose pong is ``ping_timeout`` s
  late (``uvicorn_options()``); it also answers client pings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..._asgi import Receive, Scope, Send, lifespan
from ...protocol import jsonrpc
from ...protocol.errors import ConnectionClosed, ParseError
from ...server.request_context import TOKEN_EXPIRED, at_token_expiry
from ..base import DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_QUEUE_BYTES
from .security import RequestCheck, make_request_check
from .sessions import client_key, network_of
from .sse import BoundedOutbox, finish_all_after_answers
from .wire import TEXT_TYPE, respond

if TYPE_CHECKING:
    from ...hosting import HostedServer, HostedSession

logger: logging.Logger = logging.getLogger("mcpkit.ws")

SUBPROTOCOL = "mcp"

CLOSE_NORMAL = 1000
CLOSE_GOING_AWAY = 1001
CLOSE_UNSUPPORTED_DATA = 1003
CLOSE_INVALID_PAYLOAD = 1007
CLOSE_POLICY_VIOLATION = 1008
CLOSE_TOO_BIG = 1009


class _Close(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class _Connection:
    __slots__ = ("closing", "outbox", "reader", "session", "writer")

    def __init__(self, outbox: BoundedOutbox) -> None:
        self.outbox = outbox
        self.session: HostedSession | None = None
        self.closing: tuple[int, str] | None = None
        self.reader: asyncio.Task[None] | None = None
        self.writer: asyncio.Task[None] | None = None

    def abort(self, code: int, reason: str) -> None:
        if self.closing is None:
            self.closing = (code, reason)
        self.outbox.closed = True
        for task in (self.reader, self.writer):
            if task is not None and not task.done():
                task.cancel()


class WebSocketEndpoint:
    """The MCP WebSocket transport as an ASGI callable (see the module docstring for the rules)."""

    def __init__(
        self,
        server: HostedServer,
        *,
        max_message: int = DEFAULT_MAX_MESSAGE_SIZE,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        queue_size: int = 256,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        stall_timeout: float = 30.0,
        max_sessions: int | None = 10_000,
        max_sessions_per_client: int | None = 100,
        require_subprotocol: bool = True,
        allowed_origins: Iterable[str] | str | None = None,
        allowed_hosts: Iterable[str] | str | None = None,
        check_request: RequestCheck | None = None,
        **peer_options: Any,
    ) -> None:
        self.server = server
        self.max_message = max_message
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.queue_size = queue_size
        self.queue_bytes = queue_bytes
        self.stall_timeout = stall_timeout
        self.require_subprotocol = require_subprotocol
        self.max_sessions = max_sessions
        self.max_sessions_per_client = max_sessions_per_client
        self._per_client: dict[Any, int] = {}  # client key -> open connections (only keys with at least one)
        self.draining: bool = False  # drain() began: a new connection gets 503 (it would outlive the drain)
        self.check_request: RequestCheck = check_request or make_request_check(allowed_origins, allowed_hosts)
        self.peer_options = peer_options
        self._connections: set[_Connection] = set()

    def uvicorn_options(self) -> dict[str, Any]:
        """Keyword arguments for ``uvicorn.Config`` that carry this endpoint's keep-alive and size settings.

        The frame limit given to uvicorn is slightly above ``max_message`` so that an oversized message reaches
        this endpoint and is refused with 1009 and a reason; anything far larger is cut by uvicorn (also 1009).
        The protocol is uvicorn's ``websockets-sansio`` that cuts off a peer that does not read
        (:class:`~.ws_protocol.FlowControlledWebSocketProtocol`): one that has read nothing for ``stall_timeout``
        seconds, or for which a MiB of pongs waits.
        """
        from .ws_protocol import FlowControlledWebSocketProtocol

        return {
            "ws": FlowControlledWebSocketProtocol.with_stall_timeout(self.stall_timeout),
            "ws_max_size": self.max_message + 64 * 1024,
            "ws_ping_interval": self.ping_interval,
            "ws_ping_timeout": self.ping_timeout,
        }

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def aclose(self) -> None:
        """Close every connection with 1001 (going away)."""
        for conn in list(self._connections):
            conn.abort(CLOSE_GOING_AWAY, "server shutting down")

    async def drain(self, timeout: float | None = None) -> None:
        """Graceful shutdown (:meth:`MCPApp.drain <mcpkit.transports.http.MCPApp.drain>` calls it, before uvicorn
        closes every WebSocket with 1012): each connection is closed with 1001 once the requests in flight on it
        are answered (the answers are sent first); an idle one at once. After ``timeout`` seconds (None: no bound)
        each request still running or waiting for a slot is answered with -32603 "Service Unavailable: the server
        is shutting down" and cancelled, and the connection closes once those answers are out (1 s at most); what
        is left then is closed as :meth:`aclose` does."""
        self.draining = True
        conns = list(self._connections)
        for conn in conns:
            conn.closing = conn.closing or (CLOSE_GOING_AWAY, "server shutting down")
        await finish_all_after_answers([(c.session, c.outbox, c.writer) for c in conns], timeout)
        await self.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket":
            await self.handle(scope, receive, send)
        elif kind == "lifespan":
            await lifespan(receive, send, self.aclose)
        elif kind == "http":
            await respond(
                send, 426, b"this endpoint speaks WebSocket (subprotocol mcp)", TEXT_TYPE, [(b"upgrade", b"websocket")]
            )
        else:
            raise RuntimeError(f"WebSocketEndpoint cannot serve {kind!r} connections")

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        refused = self.check_request(scope)
        if refused is not None:
            await _refuse(scope, send, refused[0], refused[1], retry=False)  # before accept: an HTTP answer
            return
        if self.draining:
            await _refuse(scope, send, 503, "Service Unavailable: draining")
            return
        if self.max_sessions is not None and len(self._connections) >= self.max_sessions:
            message = f"too many WebSocket connections (max_sessions={self.max_sessions}): retry later"
            await _refuse(scope, send, 503, message)
            return
        client = client_key(scope)
        quota = self.max_sessions_per_client
        if quota is not None and client is not None and self._per_client.get(client, 0) >= quota:
            message = f"too many WebSocket connections for this client (max_sessions_per_client={quota})"
            await _refuse(scope, send, 429, message)
            return
        offered = [str(p).strip() for p in scope.get("subprotocols", ())]
        if SUBPROTOCOL in offered:
            await send({"type": "websocket.accept", "subprotocol": SUBPROTOCOL})
        elif self.require_subprotocol:
            await _refuse(scope, send, 403, f"offer the WebSocket subprotocol {SUBPROTOCOL!r}", retry=False)
            return
        else:
            await send({"type": "websocket.accept"})

        conn = _Connection(BoundedOutbox(self.queue_size, self.stall_timeout, lambda: None, self.queue_bytes))
        conn.outbox.on_stall = lambda: conn.abort(CLOSE_POLICY_VIOLATION, "client is not reading")
        session = self.server.create_session(conn.outbox, **self.peer_options)
        session.peer.network = network_of(scope)
        conn.session = session
        self._connections.add(conn)
        self._per_client[client] = self._per_client.get(client, 0) + 1
        loop = asyncio.get_running_loop()
        conn.reader = loop.create_task(self._read(conn, receive, session.peer))
        conn.writer = loop.create_task(self._write(conn, send))
        expiry = at_token_expiry(lambda: conn.abort(CLOSE_POLICY_VIOLATION, TOKEN_EXPIRED))
        peer_closed = False
        try:
            await asyncio.wait((conn.reader, conn.writer), return_when=asyncio.FIRST_COMPLETED)
            for task in (conn.reader, conn.writer):
                if task.done() and not task.cancelled():
                    exc = task.exception()
                    if isinstance(exc, _Close):
                        conn.closing = conn.closing or (exc.code, exc.reason)
                    elif isinstance(exc, _PeerClosed):
                        peer_closed = True
                    elif exc is not None and not isinstance(exc, OSError):
                        logger.error("WebSocket connection failed", exc_info=exc)
                        conn.closing = conn.closing or (1011, "internal error")
        finally:
            if expiry is not None:
                expiry.cancel()
            self._connections.discard(conn)
            left = self._per_client.pop(client, 1) - 1
            if left > 0:
                self._per_client[client] = left
            conn.outbox.closed = True
            session.closed = True
            for task in (conn.reader, conn.writer):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            await session.peer.close("session ended (WebSocket closed)")
            conn.outbox.on_stall = _noop  # break the connection <-> session cycle
            conn.reader = conn.writer = None
            conn.session = None
            if not peer_closed:
                code, reason = conn.closing or (CLOSE_NORMAL, "")
                try:
                    await send({"type": "websocket.close", "code": code, "reason": reason})
                except asyncio.CancelledError:
                    if not self.draining:
                        raise  # (at shutdown: a client that reads nothing is given up on, quietly)
                except Exception:
                    pass

    async def _read(self, conn: _Connection, receive: Receive, peer: Any) -> None:
        limit = self.max_message
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.disconnect":
                raise _PeerClosed
            if kind != "websocket.receive":
                continue
            text = message.get("text")
            if text is None:
                raise _Close(CLOSE_UNSUPPORTED_DATA, "binary frames are not supported; send JSON-RPC as text")
            if len(text) > limit or (len(text) * 4 > limit and len(text.encode()) > limit):
                raise _Close(CLOSE_TOO_BIG, f"message larger than {limit} bytes")
            try:
                msg = jsonrpc.parse(text)
            except ParseError as exc:
                await conn.outbox.send(jsonrpc.encode_error(None, exc.to_error()))
                continue
            try:
                await peer.receive_parsed(msg, conn.outbox)
            except ConnectionClosed:
                return

    @staticmethod
    async def _write(conn: _Connection, send: Send) -> None:
        queue = conn.outbox.queue
        while True:
            data = await queue.get()
            if not data:  # (the end: drain() queued it after the last answer)
                return
            await send({"type": "websocket.send", "text": data.decode()})


class _PeerClosed(Exception):
    pass


async def _refuse(scope: Scope, send: Send, status: int, message: str, *, retry: bool = True) -> None:
    """Refuse the upgrade with ``status`` and ``message`` (the ASGI denial response; without that extension the
    ASGI server answers 403). ``retry``: with ``Retry-After`` (a refusal for now, not for good)."""
    if "websocket.http.response" not in (scope.get("extensions") or {}):
        await send({"type": "websocket.close", "code": CLOSE_POLICY_VIOLATION})
        return
    body = message.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if retry:
        headers.append((b"retry-after", b"5"))
    await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": body})


def _noop() -> None:
    pass
