"""Legacy HTTP+SSE transport (protocol 2024-11-05), server side: one plain ASGI callable, no framework.

Mounting::

    from mcpkit.transports.http.sse import LegacySSEEndpoint
    sse = LegacySSEEndpoint(server, messages_path="/messages")
    # Route GET /sse, POST /messages and POST /message to ``sse`` (it dispatches on the HTTP method), or route
    # explicitly: /sse to ``sse``, /messages to ``sse.messages_route`` (POST only: other methods get 405, as
    # create_app does). ``sse`` alone is also a complete ASGI app (it answers the lifespan protocol), which is how
    # the tests serve it.

``LegacySSEEndpoint(server, *, messages_path="/messages", max_body=4 MiB, queue_size=256, queue_bytes=16 MiB,
stall_timeout=30.0, keepalive=15.0, max_sessions=10_000, max_sessions_per_client=100, allowed_origins=None,
allowed_hosts=None, check_request=None, **peer_options)``

Wire rules (the 2024-11-05 transport page; the POST path is ``/messages``, also accepted at ``/message``):

* ``GET`` opens ``text/event-stream``; its FIRST event is ``event: endpoint`` whose data is the POST URI,
  ``<root_path><messages_path>?session_id=<32 hex chars from a CSPRNG>`` (with a shared fan-out, five more hex
  digits first: the worker holding the stream, to which another worker forwards a POST). Every server message (responses
  included: this transport has a single stream) follows as ``event: message``. ``: keepalive`` comments go out
  when the stream is idle. The session (one :class:`~mcpkit.server.lowlevel.ServerSession`) lives exactly as long
  as this stream: when the client disconnects, the session is closed and its id answers 404. Behind
  :func:`mcpkit.auth.protect`, the stream ends when the access token it was opened with expires.
* ``POST ...?session_id=<id>`` with one JSON-RPC message (a batch is passed on to the engine, which accepts it in a
  handshake-era session): ``202 Accepted`` once dispatched; the answer travels on the stream. No ``session_id``
  → 400; unknown or ended session → 404; body over ``max_body`` → 413; a body that is not JSON → 400 whose body is
  the JSON-RPC parse error (-32700, id null), and the same error is also sent on the stream (the official SDK
  client treats any non-2xx as a failed send, and a stream reader sees the error where answers arrive).
* ``Origin`` (when present) must be a localhost origin or one of ``allowed_origins``; ``Host`` must be a localhost
  name or one of ``allowed_hosts`` (DNS-rebinding protection, 403 either way). Pass ``"*"`` to disable a check.
  The policy is :func:`.security.make_request_check`; ``check_request(scope) -> (status, reason) | None``
  replaces it (``create_app`` passes one policy to every route).
* Bounded sessions: at most ``max_sessions`` open streams (503 beyond) and ``max_sessions_per_client`` per
  client (429 beyond; the client is the authenticated principal, ``scope["auth"]``, else the remote address).
  A session here IS its open stream, so none is idle enough to evict: the caps refuse instead.
* Bounded memory: each session has a bounded queue (``queue_size`` messages, ``queue_bytes`` bytes: the message
  that crosses that bound is still queued). A writer that finds it full waits
  up to ``stall_timeout`` seconds for the reader, then the session is dropped (its stream ends), so a slow or
  stuck SSE reader cannot grow server memory or stall notification fan-out for everyone else.

Shutdown: uvicorn waits for open streaming responses (until ``timeout_graceful_shutdown``, then it cuts them);
``await sse.drain(timeout)`` (what ``MCPApp.drain`` does) ends each stream once its requests in flight are
answered (those still running after ``timeout`` are answered with the JSON-RPC error naming the shutdown, then the
stream ends), ``await sse.aclose()`` ends every stream at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote

import orjson

from ..._aio import SizedQueue
from ..._asgi import BodyTooLarge, Disconnected, Receive, Scope, Send, header, not_http, read_rest
from ...engine import Outgoing
from ...protocol import jsonrpc
from ...protocol.errors import ConnectionClosed, ParseError
from ...server.request_context import at_token_expiry
from ...stores.log import LogEntry, SharedFanout
from ..base import DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_QUEUE_BYTES
from .answer import SHUTTING_DOWN
from .security import RequestCheck, make_request_check
from .sessions import client_key, network_of, owner_matches
from .wire import TEXT_TYPE, declared_too_large, respond, wait_disconnect

if TYPE_CHECKING:
    from ...hosting import HostedServer, HostedSession

logger: logging.Logger = logging.getLogger("mcpkit.sse")
_SHUTTING_DOWN = {"code": SHUTTING_DOWN[0], "message": SHUTTING_DOWN[1]}  # (the JSON-RPC error object)


# ---------------------------------------------------------------- the body of a POST


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes | None:
    """The request body, or None when it exceeds ``limit`` bytes (declared or streamed)."""
    if declared_too_large(header(scope, b"content-length"), limit):
        return None
    try:
        return await read_rest(receive, await receive(), limit)
    except BodyTooLarge:
        return None


class BoundedOutbox:
    """A session's outgoing queue: bounded; a writer that stays blocked ``stall_timeout`` seconds kills the session.

    ``on_stall`` is called once when that happens (the transport ends the connection).
    """

    __slots__ = ("closed", "on_stall", "queue", "stall_timeout")

    def __init__(
        self, maxsize: int, stall_timeout: float, on_stall: Callable[[], None], max_bytes: int = DEFAULT_QUEUE_BYTES
    ) -> None:
        self.queue: SizedQueue[bytes] = SizedQueue(maxsize, max_bytes, len)
        self.stall_timeout: float = stall_timeout
        self.on_stall: Callable[[], None] = on_stall
        self.closed: bool = False

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        if self.closed:
            raise ConnectionClosed("the connection is closed")
        try:
            self.queue.put_nowait(data)
        except asyncio.QueueFull:
            try:
                await asyncio.wait_for(self.queue.put(data), self.stall_timeout)
            except TimeoutError:
                if not self.closed:
                    self.closed = True
                    logger.warning(
                        "dropping a connection whose reader is stuck (queue full for %ss)", self.stall_timeout
                    )
                    self.on_stall()
                raise ConnectionClosed("the peer is not reading; connection dropped") from None
        if self.closed:
            raise ConnectionClosed("the connection is closed")


# ---------------------------------------------------------------- the legacy SSE endpoint


class _SSEStream:
    __slots__ = ("client", "id", "outbox", "session", "task")

    def __init__(self, sid: str, outbox: BoundedOutbox, client: Any = None) -> None:
        self.id = sid
        self.client = client
        self.outbox = outbox
        self.session: HostedSession | None = None
        self.task: asyncio.Task[Any] | None = None

    def abort(self) -> None:
        self.outbox.closed = True
        if self.task is not None and not self.task.done():
            self.task.cancel()


def sse_event(event: bytes, data: bytes) -> bytes:
    """Encode one SSE event (data split on line breaks, as the SSE format requires)."""
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return b"event: " + event + b"\n" + b"".join(b"data: " + ln + b"\n" for ln in lines) + b"\n"
    return b"event: " + event + b"\ndata: " + data + b"\n\n"


_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class LegacySSEEndpoint:
    """The 2024-11-05 HTTP+SSE transport as an ASGI callable (see the module docstring for the rules)."""

    def __init__(
        self,
        server: HostedServer,
        *,
        messages_path: str = "/messages",
        max_body: int = DEFAULT_MAX_MESSAGE_SIZE,
        queue_size: int = 256,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        stall_timeout: float = 30.0,
        keepalive: float = 15.0,
        max_sessions: int | None = 10_000,
        max_sessions_per_client: int | None = 100,
        allowed_origins: Iterable[str] | str | None = None,
        allowed_hosts: Iterable[str] | str | None = None,
        check_request: RequestCheck | None = None,
        **peer_options: Any,
    ) -> None:
        if "://" in messages_path or "?" in messages_path or "#" in messages_path:
            raise ValueError("messages_path must be a path such as '/messages'")
        self.server = server
        self.messages_path: str = "/" + messages_path.lstrip("/")
        self.max_body = max_body
        self.queue_size = queue_size
        self.queue_bytes = queue_bytes
        self.stall_timeout = stall_timeout
        self.keepalive = keepalive
        self.max_sessions = max_sessions
        self.max_sessions_per_client = max_sessions_per_client
        self._per_client: dict[Any, int] = {}  # client key -> open streams (only keys with at least one)
        self.check_request: RequestCheck = check_request or make_request_check(allowed_origins, allowed_hosts)
        self.peer_options = peer_options
        self._streams: dict[str, _SSEStream] = {}
        self.draining: bool = False  # drain() began: a new stream gets 503 (it would outlive the drain)
        # several workers behind a balancer: a POST that reaches another worker is forwarded to this one's inbox
        fanout = server.fanout
        self.shared: SharedFanout | None = fanout if isinstance(fanout, SharedFanout) else None
        if self.shared is not None:
            self.shared.on_session_event(self._forwarded)

    @property
    def session_count(self) -> int:
        return len(self._streams)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http":
            await not_http(kind, receive, send, self.aclose)
            return
        method = scope["method"]
        if method == "GET":
            await self.handle_stream(scope, receive, send)
        elif method == "POST":
            await self.handle_post(scope, receive, send)
        else:
            await respond(send, 405, b"Method Not Allowed", TEXT_TYPE, [(b"allow", b"GET, POST")])

    async def messages_route(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI callable for the POST path alone (``create_app`` routes ``/messages`` here): POST as
        :meth:`handle_post`; any other method 405, so a GET there does not open a stream and a session."""
        if scope["type"] != "http":
            await not_http(scope["type"], receive, send, self.aclose)
        elif scope["method"] == "POST":
            await self.handle_post(scope, receive, send)
        else:
            await respond(send, 405, b"Method Not Allowed: POST messages here", TEXT_TYPE, [(b"allow", b"POST")])

    async def aclose(self) -> None:
        """End every open stream (and so every session)."""
        for stream in list(self._streams.values()):
            stream.abort()

    async def drain(self, timeout: float | None = None) -> None:
        """Graceful shutdown (:meth:`MCPApp.drain <mcpkit.transports.http.MCPApp.drain>` calls it): each open stream
        ends, cleanly, once the requests in flight on its session are answered (their answers still go out on it);
        an idle stream ends at once. After ``timeout`` seconds (None: no bound) each request still running or
        waiting for a slot is answered with -32603 "Service Unavailable: the server is shutting down" and
        cancelled, and its stream ends once those answers are out (1 s at most); what is left then is ended as
        :meth:`aclose` does. Without it, uvicorn keeps every stream open until its grace period runs out, then
        cuts it."""
        self.draining = True
        await finish_all_after_answers([(s.session, s.outbox, s.task) for s in self._streams.values()], timeout)
        await self.aclose()

    # ------------------------------------------------------------------ GET: the stream

    async def handle_stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.check_request(scope)
        if refused is not None:
            await respond(send, refused[0], refused[1].encode(), TEXT_TYPE)
            return
        if self.draining:
            await respond(send, 503, b"Service Unavailable: draining", TEXT_TYPE, [(b"retry-after", b"1")])
            return
        if self.max_sessions is not None and len(self._streams) >= self.max_sessions:
            message = f"too many sessions (max_sessions={self.max_sessions}): retry later"
            await respond(send, 503, message.encode(), TEXT_TYPE, [(b"retry-after", b"5")])
            return
        client = client_key(scope)
        quota = self.max_sessions_per_client
        if quota is not None and client is not None and self._per_client.get(client, 0) >= quota:
            message = f"too many SSE sessions for this client (max_sessions_per_client={quota}): close some streams"
            await respond(send, 429, message.encode(), TEXT_TYPE, [(b"retry-after", b"5")])
            return
        shared = self.shared
        worker = shared.worker if shared is not None else 0
        sid = (f"{worker:05x}" if worker else "") + secrets.token_hex(16)  # (the worker that holds the stream)
        outbox = BoundedOutbox(self.queue_size, self.stall_timeout, lambda: stream.abort(), self.queue_bytes)
        stream = _SSEStream(sid, outbox, client)
        session = self.server.create_session(stream.outbox, **self.peer_options)
        session.peer.network = network_of(scope)
        stream.session = session
        self._streams[sid] = stream
        self._per_client[client] = self._per_client.get(client, 0) + 1
        root = scope.get("root_path", "").rstrip("/")
        endpoint = quote(root + self.messages_path) + "?session_id=" + sid
        watcher = asyncio.get_running_loop().create_task(wait_disconnect(receive))
        expiry = at_token_expiry(stream.abort)  # (behind protect(): the stream ends with the token it was opened with)
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
            await send(
                {"type": "http.response.body", "body": sse_event(b"endpoint", endpoint.encode()), "more_body": True}
            )
            stream.task = asyncio.get_running_loop().create_task(self._pump(stream, send))
            if stream.outbox.closed:  # aclose() ran while the stream was starting
                stream.task.cancel()
            await asyncio.wait((watcher, stream.task), return_when=asyncio.FIRST_COMPLETED)
        except (OSError, Disconnected):
            pass
        finally:
            if expiry is not None:
                expiry.cancel()
            self._streams.pop(sid, None)
            left = self._per_client.pop(client, 1) - 1
            if left > 0:
                self._per_client[client] = left
            stream.outbox.closed = True
            session.closed = True
            for task in (watcher, stream.task):
                if task is not None and not task.done():
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
            await session.peer.close("session ended (SSE stream closed)")
            stream.session = None  # break the stream <-> session cycle: memory returns without a GC pass
            stream.outbox.on_stall = _noop
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            logger.debug("SSE session %s ended", sid)

    async def _pump(self, stream: _SSEStream, send: Send) -> None:
        queue = stream.outbox.queue
        while True:
            try:
                data = await asyncio.wait_for(queue.get(), self.keepalive)
            except TimeoutError:
                await send({"type": "http.response.body", "body": b": keepalive\n\n", "more_body": True})
                continue
            if not data:  # (the end: drain() queued it after the last answer)
                return
            await send({"type": "http.response.body", "body": sse_event(b"message", data), "more_body": True})

    # ------------------------------------------------------------------ POST: one message

    async def handle_post(self, scope: Scope, receive: Receive, send: Send) -> None:
        refused = self.check_request(scope)
        if refused is not None:
            await respond(send, refused[0], refused[1].encode(), TEXT_TYPE)
            return
        query = parse_qs(bytes(scope.get("query_string", b"")).decode("latin-1"))
        ids = query.get("session_id") or query.get("sessionId")
        if not ids:
            await respond(send, 400, b"session_id is required", TEXT_TYPE)
            return
        stream = self._streams.get(ids[0])
        if stream is None and self.shared is not None:
            await self._forward(ids[0], scope, receive, send)
            return
        if stream is None or stream.session is None or stream.outbox.closed or not owner_matches(stream.client, scope):
            # (a stream opened by an authenticated principal takes messages from that principal only)
            await respond(send, 404, b"Could not find session", TEXT_TYPE)
            return
        body = await self._read_post(scope, receive, send)
        if body is None:
            return
        try:
            msg = jsonrpc.parse(body)
        except ParseError as exc:
            error = jsonrpc.encode_error(None, exc.to_error())
            await respond(send, 400, error)
            with contextlib.suppress(Exception):
                await stream.outbox.send(error)
            return
        try:
            await stream.session.peer.receive_parsed(msg, stream.outbox, body)
        except ConnectionClosed:
            await respond(send, 404, b"Could not find session", TEXT_TYPE)
            return
        await respond(send, 202, b"Accepted", TEXT_TYPE)

    async def _read_post(self, scope: Scope, receive: Receive, send: Send) -> bytes | None:
        """A POST's body; None when it is answered already (413 beyond ``max_body``) or the client left."""
        try:
            body = await read_body(scope, receive, self.max_body)
        except Disconnected:
            return None
        if body is None:
            await respond(send, 413, f"request body larger than {self.max_body} bytes".encode(), TEXT_TYPE)
        return body

    async def _forward(self, sid: str, scope: Scope, receive: Receive, send: Send) -> None:
        """A POST for a session another worker holds (its number leads the id): into that worker's inbox, with
        the principal this worker authenticated (that worker checks it against the session's owner)."""
        assert self.shared is not None
        worker = int(sid[:5], 16) if len(sid) == 37 and all(c in "0123456789abcdef" for c in sid) else 0
        if not worker or worker == self.shared.worker:
            await respond(send, 404, b"Could not find session", TEXT_TYPE)
            return
        body = await self._read_post(scope, receive, send)
        if body is None:
            return
        key = client_key(scope)
        owner = orjson.dumps(list(key)).decode() if key is not None and key[0] == "principal" else None
        try:
            sent = await self.shared.forward(worker, sid, body, kind="legacy", owner=owner)
        except ConnectionError as exc:
            await respond(send, 503, f"Service Unavailable: {exc}".encode(), TEXT_TYPE, [(b"retry-after", b"1")])
            return
        if sent:
            await respond(send, 202, b"Accepted", TEXT_TYPE)
        else:
            await respond(
                send, 404, b"Could not find session", TEXT_TYPE
            )  # (that worker is gone, and the stream with it)

    async def _forwarded(self, entry: LogEntry) -> None:
        """A POST another worker took for a session of this one."""
        if entry.kind != "legacy" or entry.data is None:
            return
        stream = self._streams.get(entry.value)
        if stream is None or stream.session is None or stream.outbox.closed:
            return
        client = stream.client
        if client is not None and client[0] == "principal" and entry.owner != orjson.dumps(list(client)).decode():
            logger.warning("SSE session %s: a forwarded message of another principal was refused", entry.value[:8])
            return
        try:
            msg = jsonrpc.parse(entry.data)
        except ParseError as exc:
            with contextlib.suppress(Exception):
                await stream.outbox.send(jsonrpc.encode_error(None, exc.to_error()))
            return
        with contextlib.suppress(ConnectionClosed):
            await stream.session.peer.receive_parsed(msg, stream.outbox)


def _noop() -> None:
    pass


#: seconds the answers of the calls cut off at the end of a drain (and the stream's end) get to go out
_CUT_SEND = 1.0


async def finish_all_after_answers(
    ends: list[tuple[HostedSession | None, BoundedOutbox, asyncio.Task[Any] | None]], timeout: float | None
) -> None:
    """:func:`finish_after_answers` for each ``(session, outbox, writer)`` at once, all within ``timeout`` s (None:
    no bound) and :data:`_CUT_SEND` s more for the last answers to go out; what is not finished by then is given
    up (e.g. a reader that does not read: its queue is full)."""
    if ends:
        finishing = [asyncio.ensure_future(finish_after_answers(s, o, w, timeout)) for s, o, w in ends]
        _, late = await asyncio.wait(finishing, timeout=None if timeout is None else timeout + _CUT_SEND)
        for end in late:
            end.cancel()


async def finish_after_answers(
    session: HostedSession | None, outbox: BoundedOutbox, writer: asyncio.Task[Any] | None, timeout: float | None
) -> None:
    """Let the requests in flight on ``session`` finish (at most ``timeout`` s: then each still running is answered
    with the error naming the shutdown, as Streamable HTTP answers it, and cancelled), then close ``outbox``,
    queue the end marker (an empty message) after what it holds, and wait for the ``writer`` to stop at it."""
    if session is not None and not outbox.closed:
        await session.peer.drain(86_400.0 if timeout is None else timeout, cut=_SHUTTING_DOWN)
    if outbox.closed:
        return
    outbox.closed = True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(outbox.queue.put(b""), outbox.stall_timeout)
    if writer is not None:
        await asyncio.wait((writer,))  # (never cancels it: the caller's bound gives it up)
