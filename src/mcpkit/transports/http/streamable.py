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
from collections.abc import Awaitable, Iterable
from typing import TYPE_CHECKING, Any

from ..._asgi import BodyTooLarge, Disconnected, Receive, Scope, Send, not_http, read_rest
from ...engine import DEFAULT_MAX_BATCH_SIZE, ERROR, Outgoing
from ...protocol import jsonrpc, versions
from ...protocol.errors import INVALID_REQUEST, PARSE_ERROR, ParseError, UnsupportedProtocolVersion
from ...protocol.jsonrpc import Batch, Invalid, Notification, Request
from ...protocol.versions import META_PROTOCOL_VERSION, MODERN_ONLY
from ..base import DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_QUEUE_BYTES
from .answer import Answerer, error_status
from .handshake import HandshakeRoutes
from .headers import decode_header_value, encode_header_value, header_text, param_headers_from_schema
from .modern import ModernRoutes, ToolHeaders
from .security import MISSING, RequestCheck, RequestPolicy, make_request_check
from .sessions import SessionManager, record_orphans
from .stream import SSEPump, close_sse_stream
from .wire import (
    CONTENT_TYPE_JSON,
    JSON_TYPE,
    LENGTHS,
    Headers,
    bad,
    content_length,
    error_body,
    preflight,
    refuse_post,
    request_headers,
    respond,
    text,
    with_cors,
)

if TYPE_CHECKING:
    from ...hosting import HostedServer as Server
    from ...stores import EventStore, SessionStore
    from .shared import SharedSessions

logger: logging.Logger = logging.getLogger("mcpkit.http")


#: Why a JSON-RPC response POSTed under a 2026-07-28 ``MCP-Protocol-Version`` header is refused (400, -32600)
MODERN_RESPONSE_REFUSAL = (
    "JSON-RPC responses are not accepted in 2026-07-28: a client POSTs only requests (and notifications); answers"
    " to a server's input requests go in the retried request's inputResponses"
)

#: A POST's Host, Accept and Content-Type (the endpoint's one test of the usual POST)
UsualPost = tuple[bytes | None, bytes | None, bytes | None]


class StreamableHTTPEndpoint:
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
            authenticated (``scope["auth"]``), per remote address otherwise (behind a proxy, name it in
            ``forwarded_allow_ips`` so that uvicorn sets the address). A client at its quota that opens another
            session loses its own least recently used idle one; 429 when all of them are busy.
        allowed_origins, allowed_hosts, check_request: DNS-rebinding policy (see :mod:`.security`).
        max_body: largest accepted request body in bytes (413 beyond).
        get_stream: offer the standalone GET stream (405 when False).
        retry_interval: milliseconds sent as ``retry:`` with priming events and server-side closes.
        keepalive: seconds of silence after which an SSE stream gets a ``:`` comment line.
        queue_size: bound of each SSE connection's queue, in messages.
        queue_bytes: bound of each SSE connection's queue, in bytes (default 16 MiB; the message that crosses it
            is still queued). A POST's stream makes its handler wait for the reader; the standalone GET stream of
            a reader that falls that far behind is closed (it may reconnect and resume).
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
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
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
        self.check_request: RequestCheck = check_request or make_request_check(allowed_origins, allowed_hosts)
        self._allows = self.check_request.allows if isinstance(self.check_request, RequestPolicy) else None
        # the policy's verdicts (through allows()) on requests without Origin, by raw Host value (bounded)
        self._host_verdicts: dict[bytes | None, tuple[int, str] | None] = {}
        self.max_body = max_body
        self.cors = cors
        self.peer_options = peer_options
        max_batch = int(peer_options.get("max_batch_size", DEFAULT_MAX_BATCH_SIZE))
        # the parts, each an object of its own: the 2026-07-28 routes, the session table, the SSE side handed to
        # every stream, the answering, and the handshake era's routes
        self.sessions: SessionManager = SessionManager(
            server,
            session_store=session_store,
            event_store=event_store,
            session_idle_timeout=session_idle_timeout,
            max_sessions=max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            peer_options=peer_options,
        )
        self.sse: SSEPump = SSEPump(
            event_store=event_store,
            session_store=session_store,
            retry_interval=retry_interval,
            keepalive=keepalive,
            queue_size=queue_size,
            queue_bytes=queue_bytes,
            sync=self.sessions.sync,  # a session's changed state is saved before a message leaves
        )
        self.shared: SharedSessions | None = self.sessions.share(self.sse)  # (see .shared)
        self.answers: Answerer = Answerer(self.sse, max_requests_per_session)
        headers = tool_headers or server.tool_param_headers
        self.modern: ModernRoutes = ModernRoutes(server, headers, max_batch, self.answers, json_response=json_response)
        self.handshake: HandshakeRoutes = HandshakeRoutes(
            server,
            self.sessions,
            self.answers,
            self.sse,
            stateless=stateless,
            json_response=json_response,
            event_store=event_store,
            session_store=session_store,
            get_stream=get_stream,
            max_queued_per_session=max_queued_per_session,
            max_queued_bytes_per_session=max_queued_bytes_per_session,
            peer_options=peer_options,
        )
        self._sessions = self.sessions.table  # (the manager's table)
        self._sweeper: asyncio.Task[None] | None = None
        # Accept values that list both types (the quick test of a POST's headers; bounded, see refuse_post)
        self._good_accepts: set[bytes | None] = set()
        # (Host, Accept, Content-Type) of POSTs without Origin that passed _screen (__call__'s one test; bounded)
        self._usual_posts: set[UsualPost] = set()

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
    def draining(self) -> bool:
        """This worker stops (``MCPApp.drain``): new GET streams are refused with 503, to be opened elsewhere."""
        return self.handshake.draining

    @draining.setter
    def draining(self, value: bool) -> None:
        self.handshake.draining = value

    @property
    def max_requests_per_session(self) -> int:
        """Requests of one session running at once (each item of a batch counts as one)."""
        return self.answers.max_requests_per_session

    @max_requests_per_session.setter
    def max_requests_per_session(self, value: int) -> None:
        self.answers.max_requests_per_session = value

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
        self.answers.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        await self.sessions.close()
        with contextlib.suppress(Exception):
            await self.server.close_listeners()

    def cut(self) -> None:
        """The server stops serving while requests still run here (their grace is over, they are cancelled next):
        each is answered with an error naming the shutdown, with its id (each session's are recorded for that)."""
        self.answers.close()
        for hs in self._sessions.values():
            record_orphans(hs)

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
        if kind != "http":
            await not_http(kind, receive, send, self.aclose)
            return
        raw = scope.get("headers", ())  # request_headers(scope)'s usual case (hot path: docs/architecture.md)
        if type(raw) is not list or len(h := dict(raw)) != len(raw) or b"content-type" not in h:
            h = request_headers(scope)
        usual = (h.get(b"host"), h.get(b"accept"), h.get(b"content-type"))
        if not self._usual(scope, h, usual):
            screened = await self._screen(scope, h, usual, receive, send)
            if screened is None:
                return
            send = screened
        # The body: the whole of it in one message is the usual case (hot path: docs/architecture.md).
        limit = self._max_body
        try:
            message = await receive()
            if message.get("more_body", False) or message["type"] != "http.request":
                body = await read_rest(receive, message, limit)
            else:
                body = message.get("body", b"")
                if len(body) > limit:
                    raise BodyTooLarge
                if type(body) is not bytes:
                    body = bytes(body)
        except BodyTooLarge:
            await respond(send, 413, error_body(None, INVALID_REQUEST, f"request body larger than {limit} bytes"))
            return
        except Disconnected:
            return
        answer = self.route(scope, h, body, receive, send)
        if type(answer) is not Outgoing:
            await self.send_answer(answer, send)
            return
        # an answer made at once: send_answer's two messages, without its coroutine (hot path: docs/architecture.md)
        status, headers = json_head(answer)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.data, "more_body": False})

    def _usual(self, scope: Scope, h: Headers, usual: UsualPost) -> bool:
        """The usual POST, in one test: no Origin, a Host, Accept and Content-Type that passed :meth:`_screen`
        together before, a Content-Length shorter than the limit's digits; anything else is screened step by step."""
        return (
            usual in self._usual_posts
            and b"origin" not in h
            and scope["method"] == "POST"
            and len(h.get(b"content-length", b"")) < self._limit_digits
        )

    def at_once(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> Outgoing | Awaitable[Any] | None:
        """The answer of a usual POST whose whole ``body`` is in hand, by the route :meth:`__call__` takes (the
        served protocol's lane, :mod:`.lane`): the answer itself when it was made at once, else the awaitable that
        answers (for :meth:`send_answer`, on ``receive``/``send`` of an ASGI cycle). None: not the usual POST
        (headers to screen, a body over the limit); nothing was done, :meth:`__call__` serves it."""
        raw = scope["headers"]
        h = dict(raw)
        if len(h) != len(raw) or b"content-type" not in h or len(body) > self._max_body:
            return None
        if not self._usual(scope, h, (h.get(b"host"), h.get(b"accept"), h.get(b"content-type"))):
            return None
        return self.route(scope, h, body, receive, send)

    async def send_answer(self, answer: Outgoing | Awaitable[Any], send: Send) -> None:
        """Send what :meth:`route` gave: an answer made at once, or the one its awaitable makes, with
        application/json (see :func:`json_head`); an awaitable that answered itself returns anything else."""
        if type(answer) is not Outgoing:
            answer = await answer  # type: ignore[misc]  # (an Outgoing: made later, sent below)
            if type(answer) is not Outgoing:
                return
        status, headers = json_head(answer)  # type: ignore[arg-type]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.data, "more_body": False})  # type: ignore[union-attr]

    def route(self, scope: Scope, h: Headers, body: bytes, receive: Receive, send: Send) -> Outgoing | Awaitable[Any]:
        """The POST's route (hot path: docs/architecture.md): the answer itself when it was made at once, else the
        awaitable that answers (when it returns an answer, that one is sent the same way). The one decision of both
        adapters: :meth:`__call__` (ASGI) and :meth:`at_once` (the served protocol's lane)."""
        try:
            msg = jsonrpc.parse(body)
        except ParseError as exc:
            return respond(send, 400, error_body(None, PARSE_ERROR, exc.message))
        t = type(msg)
        hv_raw = h.get(b"mcp-protocol-version")
        hv: str | None = None
        server = self.server
        if t is Request or t is Notification:
            p = msg.params  # type: ignore[union-attr]
            meta = p.get("_meta") if p is not None else None
            if server.modern_versions and (
                (type(meta) is dict and META_PROTOCOL_VERSION in meta)
                or msg.method in MODERN_ONLY  # type: ignore[union-attr]
                or (
                    hv_raw is not None  # (ModernRoutes.modern_header; the header's text, kept for below)
                    and (hv := hv_raw.strip(b" \t").decode("latin-1")) not in server.handshake_versions
                    and versions.is_modern(hv)
                )
            ):
                if t is Request:
                    return self.modern.post(scope, h, msg, meta, body, receive, send)  # type: ignore[arg-type]
                return respond(send, 202)  # no client notifications are defined over modern HTTP: ignored
        elif t is Invalid:
            return respond(send, 400, jsonrpc.encode_error(msg.id, msg.error()))  # type: ignore[union-attr, operator]
        elif t is Batch:
            refusal = self.modern.refuse_batch(msg, hv_raw)  # type: ignore[arg-type]
            if refusal is not None:
                return respond(send, 400, bad(INVALID_REQUEST, refusal))
        elif hv_raw is not None and server.modern_versions and self.modern.modern_header(hv_raw):
            # a response (or error response) under a 2026-07-28 header: that era has no client responses (the
            # answers to a server's input requests travel in the retried request's inputResponses) and no session
            return respond(send, 400, bad(INVALID_REQUEST, MODERN_RESPONSE_REFUSAL))
        # the handshake era
        if hv is None and hv_raw is not None:
            hv = text(hv_raw)
        if not server.handshake_versions:
            requested = msg.params.get("protocolVersion") if t is Request and msg.params else hv  # type: ignore[union-attr]
            err = UnsupportedProtocolVersion(requested, server.supported_versions).to_error()
            return respond(send, 400, jsonrpc.encode_error(msg.id if t is Request else None, err))  # type: ignore[union-attr]
        if self.stateless:
            return self.handshake.post_stateless(scope, receive, send, h, msg, body)
        return self.handshake.post(scope, h, hv, msg, receive, send, body)

    async def _screen(self, scope: Scope, h: Headers, usual: UsualPost, receive: Receive, send: Send) -> Send | None:
        """The checks of every request but the usual POST: the Host/Origin policy, CORS, the other methods (answered
        here), a POST's headers. Returns the ``send`` of a POST (with a trusted page's CORS headers), or None when the
        request has its answer. A POST without ``Origin`` that passes joins the usual ones (64 at most)."""
        origin_raw = h.get(b"origin")
        allows = self._allows
        if origin_raw is None and allows is not None:
            # not from a web page (no Origin): the policy's verdict on this Host, cached here by its raw bytes
            host_raw = h.get(b"host")
            refused = self._host_verdicts.get(host_raw, MISSING)
            if refused is MISSING:
                refused = allows(text(host_raw), None)
                if len(self._host_verdicts) < 64:
                    self._host_verdicts[host_raw] = refused
            origin = None
        else:
            origin = text(origin_raw)
            refused = allows(text(h.get(b"host")), origin) if allows is not None else self.check_request(scope)
        if refused is not None:
            await respond(send, refused[0], error_body(None, INVALID_REQUEST, f"Forbidden: {refused[1]}"))
            return None
        if self._sweeper is None and not self.stateless and not self.answers.closing:
            self._sweeper = asyncio.get_running_loop().create_task(self.sessions.sweep())
        method = scope["method"]
        if origin is not None and self.cors:
            # a browser page from an origin the policy trusts: let it read the answers (CORS)
            if method == "OPTIONS":
                await preflight(scope, origin, send)
                return None
            send = with_cors(send, origin)
        if method == "POST":
            refused_post = refuse_post(h, self.json_response, self._good_accepts, self._max_body)
            if refused_post is not None:
                await respond(send, *refused_post)
                return None
            usual_ok = usual[2] == JSON_TYPE and usual[1] in self._good_accepts and len(self._usual_posts) < 64
            if origin is None and allows is not None and usual_ok:
                self._usual_posts.add(usual)
            return send
        await self.handshake.other(scope, h, receive, send)
        return None


def json_head(answer: Outgoing) -> tuple[int, list[tuple[bytes, bytes]]]:
    """The status and headers of an answer sent with application/json: a 2026-07-28 one (made at once, without a
    coroutine, or by :meth:`.Answerer.answer_modern`), or a handshake-era result made without a stream
    (:meth:`.HandshakeRoutes.post`; never an error: their status follows other rules, :meth:`.Answerer.serve`
    sends them)."""
    data = answer.data
    status = 200 if answer.kind != ERROR else error_status(answer, True, False)
    return status, [LENGTHS.get(len(data)) or content_length(len(data)), CONTENT_TYPE_JSON]


__all__ = [
    "StreamableHTTPEndpoint",
    "close_sse_stream",
    "decode_header_value",
    "encode_header_value",
    "header_text",
    "param_headers_from_schema",
]
