"""Streamable HTTP, server side: one plain ASGI endpoint serving both protocol eras, chosen per request.

Handshake era (2025-03-26 … 2025-11-25): ``initialize`` creates a session (``Mcp-Session-Id`` from a CSPRNG);
each POST runs ``session.peer.answer(message, out=<this POST's stream>)``; GET opens the session's standalone SSE
stream (the session peer's outbox); DELETE ends the session; idle sessions expire. Modern era (2026-07-28): a
request whose ``params._meta`` carries the protocol version is validated against the ``Mcp-*`` headers and run
statelessly through ``server.dispatch_modern``; closing its response stream cancels it.

Per request the answer is ``application/json`` when the handler's first message is its response, and
``text/event-stream`` when the handler sends notifications or requests first (or always JSON with
``json_response=True``). With an :class:`~mcpkit.stores.EventStore` the SSE streams of handshake sessions are
resumable: event ids are ``<stream>_<seq>``, a priming event (id, empty data, ``retry:``) opens each stream for
clients of 2025-11-25, and a GET with ``Last-Event-ID`` replays what followed on that stream and then continues it.

Memory is bounded: request bodies (``max_body``, 413), sessions (``max_sessions``: under pressure the least
recently used idle sessions are evicted, 503 only when every session is busy; ``max_sessions_per_client`` per
principal or remote address: the client's own least recently used idle session makes room, 429 when all are busy),
per-connection SSE queues (``queue_size``: a POST handler waits for a slow reader; the standalone stream of a
reader that falls behind is closed, to be resumed from the event store), requests of one session
(``max_requests_per_session`` run at once, each batch item counting as one; up to ``max_queued_per_session`` more,
holding at most ``max_queued_bytes_per_session`` of bodies, wait their turn; 429 beyond, with a constant body).

This module is the ASGI entry and the POST/GET/DELETE routing; the endpoint's other parts live beside it:
:mod:`.sessions` (``SessionManager``: the session table, store and bus), :mod:`.modern` (the 2026-07-28 header
checks), :mod:`.answer` (JSON or SSE answers, the disconnect watch), :mod:`.stream` (the outboxes and the SSE
pump) and :mod:`.wire` (headers, bodies, plain answers, CORS). The engine hands over its answers typed
(:class:`~mcpkit.engine.Outgoing`): nothing here reads the engine's bytes; only the client's POST body is parsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..._asgi import Receive, Scope, Send, lifespan
from ...engine import DEFAULT_MAX_BATCH_SIZE, ERROR, Outgoing
from ...protocol import jsonrpc, versions
from ...protocol.errors import INVALID_REQUEST, PARSE_ERROR, ParseError, UnsupportedProtocolVersion
from ...protocol.jsonrpc import Batch, Invalid, Notification, Request
from ...protocol.versions import META_PROTOCOL_VERSION, MODERN_ONLY
from ..base import DEFAULT_MAX_MESSAGE_SIZE, NULL_OUTBOX
from .answer import Answering, _error_status
from .headers import decode_header_value, encode_header_value, header_text, param_headers_from_schema
from .modern import ModernValidator, Refused, ToolHeaders
from .security import MISSING, RequestCheck, RequestPolicy, make_request_check
from .sessions import SessionManager, _client_key, _owned_by
from .shared import unavailable
from .stream import (
    _JSON_MODE,
    _SSE_MODE,
    _UNDECIDED,
    _HTTPSession,
    _Stream,
    close_sse_stream,
)
from .wire import (
    _CONTENT_TYPE_JSON,
    _JSON,
    _LENGTHS,
    _RETRY_AFTER_1,
    _TOO_BUSY,
    Headers,
    _accepts,
    _bad,
    _content_length,
    _Disconnected,
    _error_body,
    _has_requests,
    _headers,
    _preflight,
    _read_rest,
    _request_count,
    _respond,
    _text,
    _TooLarge,
    _unsupported_header,
    _with_cors,
    refusal_headers,
    refuse_post,
)

if TYPE_CHECKING:
    from ...engine import Peer, RequestContext
    from ...hosting import HostedServer as Server
    from ...hosting import HostedSession as ServerSession
    from ...stores import EventStore, SessionStore

logger = logging.getLogger("mcpkit.http")


class StreamableHTTPEndpoint(Answering):
    """The Streamable HTTP endpoint (both eras) as an ASGI callable. See the module docstring for the rules.

    Args:
        server: the low-level (or high-level) :class:`~mcpkit.server.lowlevel.Server`.
        stateless: handshake-era requests need no session (no ``Mcp-Session-Id``; GET and DELETE → 405).
        json_response: always answer requests with ``application/json`` (except ``subscriptions/listen``).
        event_store: makes handshake-era SSE streams resumable (``Last-Event-ID``).
        session_store: records each handshake session's state (version, client capabilities and info, log level,
            subscriptions, owner), so any worker serves any session (no sticky routing). The store is the truth:
            every request re-reads the record (one round trip that renews its TTL, ``session_idle_timeout``), so
            a DELETE anywhere makes every worker answer 404 and a change made through one worker is seen on the
            next request elsewhere; a store that cannot be reached gives 503, not 404. With a shared fan-out
            (``RedisFanout``) the GET stream and answers to server requests move between workers too (see
            :mod:`.shared`). A local copy that idles out is only dropped: the session ends on DELETE or in the store.
        session_idle_timeout: seconds without a request after which a session is reclaimed (with a session store:
            this worker's copy is dropped, and the stored record expires after as long without activity anywhere).
        max_sessions: open handshake sessions at most. A new session beyond it evicts the least recently used
            idle sessions (no request or GET stream open; the oldest 1% at once); 503 only when every session is busy.
        max_sessions_per_client: sessions one client may hold: per principal (issuer, subject) when the request is
            authenticated (``scope["auth"]``), per remote address otherwise (behind a proxy, let uvicorn's
            ``proxy_headers`` set the address). A client at its quota that opens another session loses its own
            least recently used idle one; 429 when all of them are busy.
        allowed_origins, allowed_hosts, check_request: DNS-rebinding policy (see :mod:`.security`).
        max_body: largest accepted request body in bytes (413 beyond).
        get_stream: offer the standalone GET stream (405 when False).
        retry_interval: milliseconds sent as ``retry:`` with priming events and server-side closes.
        keepalive: seconds of silence after which an SSE stream gets a ``:`` comment line.
        queue_size: bound of each SSE connection's queue.
        max_requests_per_session: requests of one session running at once (each item of a batch counts as one).
            Default 1,024, the default bound on open connections: one HTTP/1.1 connection carries one POST at a
            time, so single requests are not held back below what the server admits anyway; batches and lower
            settings queue.
        max_queued_per_session: POSTs of one session that wait for a free place beyond those (429 beyond).
        max_queued_bytes_per_session: bound on the bodies of a session's waiting POSTs, in bytes (429 beyond;
            default: one max-size message, 4 MiB).
        cors: answer CORS preflights and add CORS headers for browser requests whose ``Origin`` the policy
            accepts (localhost origins and ``allowed_origins``), exposing ``Mcp-Session-Id``.
        tool_headers: ``fn(tool_name) -> {header_name: property_path}`` for ``Mcp-Param-*`` validation; default:
            the server's ``tool_param_headers``.
    """

    def __init__(
        self,
        server: Server,
        *,
        stateless: bool = False,
        json_response: bool = False,
        event_store: EventStore | None = None,
        session_store: SessionStore | None = None,
        session_idle_timeout: float = 1800.0,
        max_sessions: int = 10_000,
        max_sessions_per_client: int = 100,
        allowed_origins: Iterable[str] | str | None = None,
        allowed_hosts: Iterable[str] | str | None = None,
        check_request: RequestCheck | None = None,
        max_body: int = DEFAULT_MAX_MESSAGE_SIZE,
        get_stream: bool = True,
        retry_interval: int | None = None,
        keepalive: float = 15.0,
        queue_size: int = 256,
        max_requests_per_session: int = 1024,
        max_queued_per_session: int = 768,
        max_queued_bytes_per_session: int = DEFAULT_MAX_MESSAGE_SIZE,
        tool_headers: ToolHeaders | None = None,
        cors: bool = True,
        **peer_options: Any,
    ) -> None:
        self.server = server
        self.stateless = stateless
        self.json_response = json_response
        self.event_store = event_store
        self.session_store = session_store
        self.check_request = check_request or make_request_check(allowed_origins, allowed_hosts)
        self._allows = self.check_request.allows if isinstance(self.check_request, RequestPolicy) else None
        # the policy's verdicts (through allows()) on requests without Origin, by raw Host value (bounded)
        self._host_verdicts: dict[bytes | None, tuple[int, str] | None] = {}
        self.max_body = max_body
        self.get_stream = get_stream
        self.retry_interval = retry_interval
        self.keepalive = keepalive
        self.queue_size = queue_size
        self.max_requests_per_session = max_requests_per_session
        self.max_queued_per_session = max_queued_per_session
        self.max_queued_bytes_per_session = max_queued_bytes_per_session
        self._max_batch = int(peer_options.get("max_batch_size", DEFAULT_MAX_BATCH_SIZE))
        self.cors = cors
        self.modern = ModernValidator(server, tool_headers or server.tool_param_headers, self._max_batch)
        self.peer_options = peer_options
        self.sessions = SessionManager(
            server,
            session_store=session_store,
            event_store=event_store,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            peer_options=peer_options,
        )
        self.shared, self.draining = self.sessions.share(self), False  # (see .shared; MCPApp.drain)
        self._sessions = self.sessions.table  # (the manager's table, read here without a call per request)
        self._sync = self.sessions.sync  # (for the streams: a session's changed state is saved before a response)
        self._modern_peer: Peer | None = None
        self._stateless_sessions: dict[str, ServerSession] = {}
        self._sweeper: asyncio.Task[None] | None = None
        self._closing = False
        # modern requests in progress -> (the watch tick at which they were seen first, their receive, their stream
        # if they have one); and the disconnect watchers of slow ones without a stream (see _tick)
        self._slow: dict[RequestContext, tuple[int, Receive, _Stream | None]] = {}
        self._watchers: dict[RequestContext, asyncio.Task[None]] = {}
        # Accept values that list both types (the quick test of a POST's headers; bounded, see refuse_post)
        self._good_accepts: set[bytes | None] = set()
        self._slow_gen = 0
        self._slow_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------------ public

    @property
    def max_body(self) -> int:
        """Largest accepted request body in bytes (413 beyond)."""
        return self._max_body

    @max_body.setter
    def max_body(self, value: int) -> None:
        self._max_body = value
        self._limit_digits = len(str(value))  # a Content-Length shorter than this is below the limit

    @property
    def session_idle_timeout(self) -> float:
        """Seconds without a request after which a session is reclaimed (see :class:`.sessions.SessionManager`)."""
        return self.sessions.session_idle_timeout

    @session_idle_timeout.setter
    def session_idle_timeout(self, value: float) -> None:
        self.sessions.session_idle_timeout = value

    @property
    def max_sessions(self) -> int:
        """Open handshake sessions at most."""
        return self.sessions.max_sessions

    @max_sessions.setter
    def max_sessions(self, value: int) -> None:
        self.sessions.max_sessions = value

    @property
    def max_sessions_per_client(self) -> int:
        """Handshake sessions one client may hold."""
        return self.sessions.max_sessions_per_client

    @max_sessions_per_client.setter
    def max_sessions_per_client(self, value: int) -> None:
        self.sessions.max_sessions_per_client = value

    @property
    def session_count(self) -> int:
        """How many handshake sessions this worker holds."""
        return len(self._sessions)

    def session_ids(self) -> list[str]:
        """The ids of the handshake sessions this worker holds."""
        return list(self._sessions)

    async def aclose(self) -> None:
        """End every session and stream (server shutdown)."""
        self._closing = True
        if self._slow_timer is not None:
            self._slow_timer.cancel()
            self._slow_timer = None
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        await self.sessions.close()
        with contextlib.suppress(Exception):
            await self.server.close_listeners()

    async def expire_idle(self) -> int:
        """Reclaim sessions idle longer than ``session_idle_timeout``; returns how many (see
        :meth:`.sessions.SessionManager.expire_idle`)."""
        return await self.sessions.expire_idle()

    async def renew_busy(self) -> int:
        """Renew the stored TTL of busy sessions; returns how many (see :meth:`.sessions.SessionManager.renew_busy`)."""
        return await self.sessions.renew_busy()

    # ------------------------------------------------------------------ ASGI entry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await lifespan(receive, send, self.aclose)
            return
        if kind != "http":
            raise RuntimeError(f"StreamableHTTPEndpoint cannot serve {kind!r} connections")
        raw = scope.get("headers", ())  # _headers(scope), its usual case inline
        h = dict(raw) if type(raw) is list else None
        if h is None or len(h) != len(raw) or b"content-type" not in h:
            h = _headers(scope)
        origin_raw = h.get(b"origin")
        allows = self._allows
        if origin_raw is None and allows is not None:
            # not from a web page (no Origin): the policy's verdict on this Host, cached here by its raw bytes
            host_raw = h.get(b"host")
            refused = self._host_verdicts.get(host_raw, MISSING)
            if refused is MISSING:
                refused = allows(_text(host_raw), None)
                if len(self._host_verdicts) < 64:
                    self._host_verdicts[host_raw] = refused
            origin = None
        else:
            origin = _text(origin_raw)
            refused = allows(_text(h.get(b"host")), origin) if allows is not None else self.check_request(scope)
        if refused is not None:
            status, reason = refused
            await _respond(send, status, _error_body(None, INVALID_REQUEST, f"Forbidden: {reason}"))
            return
        if self._sweeper is None and not self.stateless and not self._closing:
            self._sweeper = asyncio.get_running_loop().create_task(self.sessions.sweep())
        method = scope["method"]
        if origin is not None and self.cors:
            # a browser page from an origin the policy trusts: let it read the answers (CORS)
            if method == "OPTIONS":
                await _preflight(scope, origin, send)
                return
            send = _with_cors(send, origin)
        if method == "POST":
            # the usual POST in one test (an Accept seen to pass before, Content-Type exactly application/json, a
            # Content-Length shorter than the limit's digits); anything else is judged by refuse_post
            if (
                h.get(b"accept") not in self._good_accepts
                or h.get(b"content-type") != _JSON
                or len(h.get(b"content-length", b"")) >= self._limit_digits
            ):
                refused_post = refuse_post(h, self.json_response, self._good_accepts, self._max_body)
                if refused_post is not None:
                    await _respond(send, *refused_post)
                    return
            # The body, read here rather than in another coroutine: the whole of it in one message is the usual case.
            limit = self._max_body
            try:
                message = await receive()
                if message.get("more_body", False) or message["type"] != "http.request":
                    body = await _read_rest(receive, message, limit)
                else:
                    body = message.get("body", b"")
                    if len(body) > limit:
                        raise _TooLarge
                    if type(body) is not bytes:
                        body = bytes(body)
            except _TooLarge:
                await _respond(send, 413, _error_body(None, INVALID_REQUEST, f"request body larger than {limit} bytes"))
                return
            except _Disconnected:
                return
            answer = self._post(scope, h, body, receive, send)
            if type(answer) is not Outgoing:
                answer = await answer  # type: ignore[misc]  # (an Outgoing only from _answer_modern: sent below)
                if type(answer) is not Outgoing:
                    return
            # An answer with application/json: a 2026-07-28 one (made at once, without a coroutine, or by
            # _answer_modern), or a handshake-era result made at once (_post_session; never an error: their
            # status follows other rules, _serve sends them)
            data = answer.data
            await send(
                {
                    "type": "http.response.start",
                    "status": 200 if answer.kind != ERROR else _error_status(answer, True, False),
                    "headers": [_LENGTHS.get(len(data)) or _content_length(len(data)), _CONTENT_TYPE_JSON],
                }
            )
            await send({"type": "http.response.body", "body": data, "more_body": False})
        elif method == "GET":
            await self._get(scope, h, receive, send)
        elif method == "DELETE":
            await self._delete(scope, h, send)
        else:
            await _respond(send, 405, b"", None, [(b"allow", b"GET, POST, DELETE, OPTIONS")])

    # ------------------------------------------------------------------ POST

    def _post(self, scope: Scope, h: Headers, body: bytes, receive: Receive, send: Send) -> Outgoing | Awaitable[Any]:
        """Route a POST's body; returns the awaitable that answers it (not a coroutine itself: one frame less on
        the way to a 2026-07-28 request's handler), or the answer itself, which the caller sends with
        ``application/json``: a 2026-07-28 request answered at once (the awaitable of one that is not returns its
        answer to send the same way)."""
        try:
            msg = jsonrpc.parse(body)
        except ParseError as exc:
            return _respond(send, 400, _error_body(None, PARSE_ERROR, exc.message))
        t = type(msg)
        hv_raw = h.get(b"mcp-protocol-version")
        hv: str | None = None
        server = self.server
        if t is Request or t is Notification:
            m: Request = msg  # type: ignore[assignment]
            p = m.params
            meta = p.get("_meta") if p is not None else None
            if server.modern_versions and (
                (type(meta) is dict and META_PROTOCOL_VERSION in meta)
                or m.method in MODERN_ONLY
                or (
                    hv_raw is not None  # (ModernValidator.modern_header, inline: the header's text is kept for below)
                    and (hv := _text(hv_raw)) not in server.handshake_versions
                    and versions.is_modern(hv)
                )
            ):
                if t is not Request:
                    return _respond(send, 202)  # no client notifications are defined over modern HTTP: ignored
                read = self.modern.validate(scope, h, m, meta)
                if type(read) is Refused:
                    return _respond(send, read.status, jsonrpc.encode_error(m.id, read.error))
                peer = self._modern_peer
                if peer is None:
                    peer = self._modern_peer = self.server.stateless_peer()  # runs dispatch_modern(rc)
                if self.json_response and m.method != "subscriptions/listen":
                    # answered with application/json, nothing before it: what the handler sends first (progress,
                    # log messages) has nowhere to go, so its outbox drops it
                    ctx = peer.detached(m.id, m.method, p, NULL_OUTBOX, body)
                    ctx.validated_meta = read  # what _meta says, for dispatch_modern
                    runner = peer.run_detached(ctx)
                    if type(runner) is Outgoing:
                        return runner  # answered at once: __call__ sends it
                    return self._answer_modern(runner, ctx, receive, send)  # type: ignore[arg-type]
                stream = _Stream(self, None, 0, _UNDECIDED)  # (the answer is returned, not sent through it)
                ctx = peer.detached(m.id, m.method, p, stream, body)
                ctx.validated_meta = read
                return self._serve(stream, peer.run_detached(ctx), ctx, receive, send, ())
        elif t is Invalid:
            inv: Invalid = msg  # type: ignore[assignment]
            return _respond(send, 400, jsonrpc.encode_error(inv.id, inv.error()))
        elif t is Batch:
            refusal = self.modern.refuse_batch(msg, hv_raw)  # type: ignore[arg-type]
            if refusal is not None:
                return _respond(send, 400, _bad(INVALID_REQUEST, refusal))
        if hv is None and hv_raw is not None:
            hv = _text(hv_raw)
        if not server.handshake_versions:
            requested = msg.params.get("protocolVersion") if t is Request and msg.params else hv  # type: ignore[union-attr]
            err = UnsupportedProtocolVersion(requested, server.supported_versions)
            return _respond(send, 400, jsonrpc.encode_error(msg.id if t is Request else None, err.to_error()))  # type: ignore[union-attr]
        if self.stateless:
            return self._post_stateless(receive, send, h, msg, body)
        return self._post_session(scope, h, hv, msg, receive, send, body)

    def _post_session(
        self, scope: Scope, h: Headers, hv: str | None, msg: Any, receive: Receive, send: Send, body: bytes = b""
    ) -> Outgoing | Awaitable[Any]:
        """A handshake-era POST to a stateful endpoint; returns the awaitable that answers it. The usual POST (one
        request, in a session this worker holds, with room for it) runs without a coroutine of its own: its
        result itself when it was made at once (the caller sends it as JSON), else :meth:`_serve`'s awaitable;
        everything else goes to :meth:`_post_session_full`."""
        if type(msg) is Request and self.session_store is None:
            hs = self._sessions.get(_text(h.get(b"mcp-session-id")))  # type: ignore[arg-type]
            # (the owner test: _owned_by's quick cases inline, an unauthenticated session first)
            if (
                hs is not None
                and (hv is None or hv in self.server.handshake_versions)
                and not (hs.busy and hs.busy >= self.max_requests_per_session)
                and ((owner := hs.client) is None or owner[0] != "principal" or _owned_by(hs, scope))
            ):
                hs.busy += 1
                if self.json_response and self.event_store is None:
                    # a JSON answer: what the handler sends first goes to the session's standalone stream, which
                    # is all a JSON-mode POST stream would do with it (no store here), so no stream is made unless
                    # the answer is not made at once
                    answer = hs.session.peer.answer(msg, hs, body)
                    if type(answer) is Outgoing and answer.kind != ERROR:
                        hs.finish_post(0, self.max_requests_per_session)
                        return answer
                    return self._serve(self._session_stream(hs), answer, None, receive, send, ())
                stream = self._session_stream(hs)
                answer = hs.session.peer.answer(msg, stream, body)
                if type(answer) is Outgoing and answer.kind != ERROR:
                    # answered at once (nothing can have gone out before it): __call__ sends it, status 200
                    hs.finish_post(stream.no, self.max_requests_per_session)
                    return answer
                return self._serve(stream, answer, None, receive, send, ())
        return self._post_session_full(scope, h, hv, msg, receive, send, body)

    async def _post_session_full(
        self, scope: Scope, h: Headers, hv: str | None, msg: Any, receive: Receive, send: Send, body: bytes = b""
    ) -> None:
        """:meth:`_post_session`, every case: ``initialize`` opens a session, anything else names one."""
        t = type(msg)
        server = self.server
        sid = _text(h.get(b"mcp-session-id"))
        new_session = False
        if sid is None:
            if t is not Request or msg.method != "initialize":  # type: ignore[union-attr]
                await _respond(
                    send, 400, _error_body(None, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required")
                )
                return
            client = _client_key(scope)
            refused = await self.sessions.make_room(client)
            if refused is not None:
                await _respond(send, refused[0], refused[1], extra=[(b"retry-after", b"5")])
                return
            hs = self.sessions.create(client)
            new_session = True
        else:
            try:
                found = await self.sessions.find(sid)
            except ConnectionError as exc:  # the store cannot be reached: say so (the session may be fine)
                await _respond(send, 503, unavailable(exc), extra=_RETRY_AFTER_1)
                return
            if found is None or not _owned_by(found, scope):
                await _respond(send, 404, _error_body(None, INVALID_REQUEST, "Session not found"))
                return
            hs = found
            if hv is not None and hv not in server.handshake_versions:
                await _respond(send, 400, _unsupported_header(hv))
                return
        if t is not Request and not _has_requests(msg):
            # notifications and responses only: 202, nothing else (responses resolve server->client requests)
            hs.last_seen = time.monotonic()
            try:  # (an answer to another worker's request goes there, with a shared fan-out)
                await self.sessions.receive(hs, msg, body)
            except ConnectionError as exc:
                await _respond(send, 503, unavailable(exc), extra=_RETRY_AFTER_1)
                return
            if self.session_store is not None and hs.session.initialized and hs.stored < 2:
                await self.sessions.save(hs, announce=True)
            await _respond(send, 202)
            return
        weight = 1 if t is Request else _request_count(msg)  # each request of a batch counts
        if hs.busy and hs.busy + weight > self.max_requests_per_session:
            msg = None  # a waiting POST holds its body, not the parsed message (several times larger)
            if not await hs.wait_turn(
                weight,
                len(body),
                self.max_requests_per_session,
                self.max_queued_per_session,
                self.max_queued_bytes_per_session,
            ):
                hs.last_seen = time.monotonic()
                await _respond(send, 429, _TOO_BUSY, extra=_RETRY_AFTER_1)
                return
            if hs.session.closed:
                hs.busy -= weight
                hs.next_turn(self.max_requests_per_session)
                await _respond(send, 404, _error_body(None, INVALID_REQUEST, "Session not found"))
                return
            msg = jsonrpc.parse(body)  # (it parsed before)
        else:
            hs.busy += weight
        extra: Sequence[tuple[bytes, bytes]] = ((b"mcp-session-id", hs.id.encode()),) if new_session else ()
        stream = self._session_stream(hs)
        try:
            status = await self._serve(
                stream, hs.session.peer.answer(msg, stream, body), None, receive, send, extra, new_session=new_session
            )
        finally:
            if weight != 1:
                hs.busy -= weight - 1  # (_serve gives one back, and lets the next waiting POSTs run)
                if hs.queue:
                    hs.next_turn(self.max_requests_per_session)
        if new_session:
            if status != 200:
                await self.sessions.end(hs)
            elif self.session_store is not None and not hs.stored:  # (recorded before the answer, unless that failed)
                await self.sessions.save(hs)

    def _session_stream(self, hs: _HTTPSession) -> _Stream:
        """The stream of a session's next POST (numbered; kept in the session while it may be resumed)."""
        hs.next_no += 1
        stream = _Stream(self, hs, hs.next_no, _JSON_MODE if self.json_response else _UNDECIDED)
        if stream.resumable:
            if hs.live is None:
                hs.live = {}
            hs.live[stream.no] = stream
        return stream

    async def _post_stateless(self, receive: Receive, send: Send, h: Headers, msg: Any, body: bytes) -> None:
        hv = _text(h.get(b"mcp-protocol-version"))
        if hv is not None and hv not in self.server.handshake_versions:
            await _respond(send, 400, _unsupported_header(hv))
            return
        version = hv or versions.V2025_03_26
        if version not in self.server.handshake_versions:
            version = max(self.server.handshake_versions)
        t = type(msg)
        if t is Request and msg.method == "initialize":
            session = self.server.create_session(NULL_OUTBOX, **self.peer_options)  # answers initialize, then forgotten
        else:
            session = self._stateless_session(version)
        if not _has_requests(msg):
            await session.peer.receive_parsed(msg, NULL_OUTBOX, body)
            await _respond(send, 202)
            return
        stream = _Stream(self, None, 0, _JSON_MODE if self.json_response else _UNDECIDED)
        runner: Outgoing | Awaitable[Outgoing | None]
        if t is Request:
            # A detached run: concurrent clients may reuse request ids on this shared peer.
            ctx = session.peer.detached(msg.id, msg.method, msg.params, stream, body)
            runner = session.peer.run_detached(ctx)
        else:
            runner = self._preinitialized(version).peer.answer(msg, stream, body)
        await self._serve(stream, runner, None, receive, send, ())

    def _preinitialized(self, version: str) -> ServerSession:
        session = self.server.create_session(NULL_OUTBOX, **self.peer_options)
        session.version = version
        session.features = versions.features(version)
        session.initialized = True
        return session

    def _stateless_session(self, version: str) -> ServerSession:
        session = self._stateless_sessions.get(version)
        if session is None:
            session = self._stateless_sessions[version] = self._preinitialized(version)
        return session

    # ------------------------------------------------------------------ modern era

    # ------------------------------------------------------------------ answering: JSON or SSE

    # ------------------------------------------------------------------ GET and DELETE

    async def _session_for(self, scope: Scope, h: Headers, verb: str) -> tuple[int, bytes] | _HTTPSession:
        hv = _text(h.get(b"mcp-protocol-version"))
        if hv is not None and versions.is_modern(hv):
            return 405, b""
        if self.stateless or not self.server.handshake_versions:
            return 405, b""
        if self.draining and verb == "GET":  # this worker stops: the client opens its stream on another one
            return 503, _bad(INVALID_REQUEST, "Service Unavailable: draining")
        sid = _text(h.get(b"mcp-session-id"))
        if sid is None:
            return 400, _error_body(None, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required")
        try:
            hs = await self.sessions.find(sid)
        except ConnectionError as exc:
            return 503, unavailable(exc)
        if hs is None or not _owned_by(hs, scope):
            return 404, _error_body(None, INVALID_REQUEST, "Session not found")
        if hv is not None and hv not in self.server.handshake_versions:
            return 400, _unsupported_header(hv)
        return hs

    async def _get(self, scope: Scope, h: Headers, receive: Receive, send: Send) -> None:
        if not self.get_stream:
            await _respond(send, 405, b"", None, [(b"allow", b"POST, DELETE")])
            return
        found = await self._session_for(scope, h, "GET")
        if not isinstance(found, _HTTPSession):
            status, body = found
            await _respond(send, status, body, _JSON, refusal_headers(status))
            return
        if not _accepts(h.get(b"accept"))[1]:
            await _respond(send, 406, _bad(INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"))
            return
        hs = found
        hs.last_seen = time.monotonic()
        last = _text(h.get(b"last-event-id"))
        if self.shared is not None:
            return await self.shared.get(hs, last, receive, send)
        if last is not None:
            await self._resume(hs, last, receive, send)
            return
        stream = hs.standalone
        if stream is not None and stream.conn is not None and not stream.conn.ended:
            await _respond(send, 409, _bad(INVALID_REQUEST, "Conflict: a standalone SSE stream is already open"))
            return
        if stream is None:
            stream = hs.standalone = _Stream(self, hs, hs.base, _SSE_MODE)
        await self._attach(hs, stream, None, receive, send)

    async def _delete(self, scope: Scope, h: Headers, send: Send) -> None:
        found = await self._session_for(scope, h, "DELETE")
        if not isinstance(found, _HTTPSession):
            status, body = found
            await _respond(send, status, body, _JSON, refusal_headers(status))
            return
        await self.sessions.delete(found)
        await _respond(send, 200)


__all__ = [
    "StreamableHTTPEndpoint",
    "close_sse_stream",
    "decode_header_value",
    "encode_header_value",
    "header_text",
    "param_headers_from_schema",
]
