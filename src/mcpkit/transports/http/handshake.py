"""Streamable HTTP server, the handshake era's routes: a session's POST, GET and DELETE, and the stateless POST.

:class:`HandshakeRoutes` (the endpoint holds one) serves what a POST of the handshake era asks of a session:
``initialize`` opens one (``SessionManager.make_room`` / ``create``), any other POST names one by
``Mcp-Session-Id`` (404 when unknown or another principal's) and runs in its turn (``max_requests_per_session``
at once, each batch item counting as one; ``max_queued_per_session`` more wait, 429 beyond); a POST of
notifications and answers only is taken and answered 202. The answer comes back from the session's peer
(``Peer.answer``): the answer itself when it was made at once, which the endpoint sends as JSON, else an
awaitable that :class:`~.answer.Answerer` serves (JSON or SSE). GET opens (or resumes, ``Last-Event-ID``) a
session's standalone stream through the endpoint's :class:`~.stream.SSEPump`; DELETE ends a session. A stateless
endpoint runs each request on a pre-initialized session of its version instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from ..._asgi import Receive, Scope, Send
from ...engine import ERROR, NULL_OUTBOX, Outgoing, RequestContext
from ...engine.peer import Peer
from ...protocol import jsonrpc, versions
from ...protocol.errors import INVALID_REQUEST
from ...protocol.jsonrpc import Batch, Notification, Request, RequestId
from .answer import Answerer
from .sessions import SessionManager, client_key, network_of, owned_by
from .shared import MAX_LOGGED_CANCELS, unavailable
from .stream import JSON_MODE, SSE_MODE, UNDECIDED, HTTPSession, SSEPump, Stream
from .wire import (
    JSON_TYPE,
    RETRY_AFTER_1,
    TOO_BUSY,
    Headers,
    accepts,
    bad,
    error_body,
    has_requests,
    refusal_headers,
    request_count,
    respond,
    text,
    unsupported_header,
)

if TYPE_CHECKING:
    from ...hosting import Fanout, HostedServer, HostedSession
    from ...stores import EventStore, SessionStore
    from ...stores.log import LogEntry

logger: logging.Logger = logging.getLogger("mcpkit.http")

#: The methods of the Streamable HTTP endpoint (the ``Allow`` header of a 405 and of an OPTIONS answer)
ALLOWED_METHODS = b"GET, POST, DELETE, OPTIONS"

_NOT_FOUND = error_body(None, INVALID_REQUEST, "Session not found")
_SESSION_ID_REQUIRED = error_body(None, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required")


#: Running calls of authenticated callers a stateless endpoint keeps for their cancellation (beyond: not kept).
MAX_STATELESS_CALLS = 10_000
#: What a stateless cancellation logged for the other workers is logged under (then the principal, as JSON).
STATELESS_LOG = "stateless-cancel:"


class StatelessCalls:
    """The calls a stateless endpoint is running for authenticated callers, by (principal, request id), so that a
    caller's ``notifications/cancelled`` (a POST of its own: there is no session) reaches its call.

    A caller is its principal (:func:`~.sessions.client_key`: issuer and subject, else client id), never its
    address: anonymous calls are not kept, since any client could name another's request id. Two calls of one
    principal running under one id are both left running by a cancellation naming it (which one was meant is
    unknown). The requests of a batch (2025-03-26) are kept each under its own id, as the batch's peer, which
    cancels the one named as a session's peer would. At most :attr:`limit` calls are kept
    (:data:`MAX_STATELESS_CALLS`): a call beyond runs and answers, but cannot be cancelled. With a shared fan-out
    (several workers, Redis) a cancellation that finds no call here is logged for the other workers
    (:meth:`cancel_anywhere`, at most ``MAX_LOGGED_CANCELS`` a second per principal), and the worker running the
    call cancels it. A cancellation that arrives before its call is not remembered (a later call of the principal
    may reuse the id)."""

    __slots__ = ("_calls", "_logged", "count", "fanout", "limit")

    def __init__(self, limit: int = MAX_STATELESS_CALLS) -> None:
        # a call's context, or a batch's peer (which cancels the member by id); a list: several calls under one key
        self._calls: dict[tuple[Any, RequestId], RequestContext | Peer | list[RequestContext | Peer]] = {}
        self.count: int = 0  # calls kept (those sharing a key included)
        self.limit: int = limit
        self.fanout: Fanout | None = None  # the fan-out whose logged cancellations this table follows
        self._logged: dict[Any, tuple[int, int]] = {}  # principal -> (second, cancellations logged in it)

    def add(self, key: tuple[Any, RequestId], ctx: RequestContext | Peer) -> bool:
        """Keep ``ctx`` under ``key`` while it runs; False (not kept) when the table is full."""
        if self.count >= self.limit:
            return False
        calls = self._calls
        kept = calls.get(key)
        if kept is None:
            calls[key] = ctx
        elif type(kept) is list:
            kept.append(ctx)
        else:
            calls[key] = [kept, ctx]  # type: ignore[list-item]
        self.count += 1
        return True

    def discard(self, key: tuple[Any, RequestId], ctx: RequestContext | Peer) -> None:
        """``ctx`` (kept under ``key``) ended."""
        calls = self._calls
        kept = calls.get(key)
        if kept is ctx:
            del calls[key]
        elif type(kept) is list and ctx in kept:
            kept.remove(ctx)
            if len(kept) == 1:
                calls[key] = kept[0]
        else:
            return
        self.count -= 1

    async def cancel(self, principal: Any, msg: Any) -> list[Notification]:
        """Cancel the call that each ``notifications/cancelled`` in ``msg`` (a notification or a batch) names, when
        ``principal`` is running one (and only one) under that id; returns the cancellations that named no call
        here (anything else is ignored)."""
        missed: list[Notification] = []
        for item in msg if type(msg) is Batch else (msg,):
            if type(item) is not Notification or item.method != "notifications/cancelled" or not item.params:
                continue
            rid = item.params.get("requestId")
            if type(rid) is not str and type(rid) is not int:
                continue
            ctx = self._calls.get((principal, rid))  # type: ignore[arg-type]
            if ctx is None:
                missed.append(item)
            elif type(ctx) is RequestContext:
                if not ctx.done:
                    ctx.cancelled = True  # (no answer: the engine ends the call's stream without one)
                    if ctx.task is not None:
                        ctx.task.cancel()
            elif isinstance(ctx, Peer):  # a batch's: its member under that id is cancelled (left out of the answer)
                await ctx.receive_parsed(item, NULL_OUTBOX)
        return missed

    async def cancel_anywhere(self, principal: Any, msg: Any, fanout: Fanout) -> None:
        """:meth:`cancel`, and with a shared fan-out each cancellation that named no call here logged for the
        other workers (a cancellation that cannot be logged is lost: the call runs to its answer)."""
        from ...stores.log import SharedFanout

        missed = await self.cancel(principal, msg)
        if not missed or not isinstance(fanout, SharedFanout) or not self._may_log(principal):
            return
        value = STATELESS_LOG + orjson.dumps(principal).decode()
        for item in missed:
            try:
                await fanout.post(value, "cancel", jsonrpc.encode(item))
            except (ConnectionError, ValueError) as exc:  # (unreachable, or larger than a log entry may be)
                logger.info("a stateless cancellation could not be logged for the other workers: %s", exc)

    def _may_log(self, principal: Any) -> bool:
        """At most ``MAX_LOGGED_CANCELS`` logged a second for one principal (the table of counts is bounded)."""
        now = int(time.monotonic())
        second, count = self._logged.get(principal, (now, 0))
        if second != now:
            count = 0
        if count >= MAX_LOGGED_CANCELS:
            return False
        if len(self._logged) >= 10_000:
            self._logged.clear()
        self._logged[principal] = (now, count + 1)
        return True

    def follow(self, fanout: Fanout) -> None:
        """Follow the cancellations other workers log on ``fanout`` (when it is shared) for the calls kept here."""
        from ...stores.log import SharedFanout

        self.fanout = fanout
        if isinstance(fanout, SharedFanout):
            fanout.on_session_event(self._logged_cancel)

    async def _logged_cancel(self, entry: LogEntry) -> None:
        """A cancellation another worker logged: cancel the call it names if it runs here."""
        if entry.kind != "cancel" or not self.count or entry.data is None or not entry.value.startswith(STATELESS_LOG):
            return
        try:
            owner = orjson.loads(entry.value[len(STATELESS_LOG) :])
            msg = jsonrpc.parse(entry.data)
        except Exception:
            return
        if isinstance(owner, list):
            await self.cancel(tuple(owner), msg)


class HandshakeRoutes:
    """The handshake era's requests of one endpoint (see the module docstring). Every argument is the endpoint's
    (see :class:`~.streamable.StreamableHTTPEndpoint`): its session manager, answerer and SSE side, and options."""

    def __init__(
        self,
        server: HostedServer,
        sessions: SessionManager,
        answers: Answerer,
        sse: SSEPump,
        *,
        stateless: bool,
        json_response: bool,
        event_store: EventStore | None,
        session_store: SessionStore | None,
        get_stream: bool,
        max_queued_per_session: int,
        max_queued_bytes_per_session: int,
        peer_options: dict[str, Any],
    ) -> None:
        self.server = server
        self.sessions = sessions
        self.table: dict[str, HTTPSession] = sessions.table
        self.answers = answers
        self.sse = sse
        self.stateless = stateless
        self.json_response = json_response
        self.event_store = event_store
        self.session_store = session_store
        self.get_stream = get_stream
        self.max_queued_per_session = max_queued_per_session
        self.max_queued_bytes_per_session = max_queued_bytes_per_session
        self.peer_options = peer_options
        self.draining = False  # this worker stops: new GET streams are refused (MCPApp.drain)
        self.stateless_sessions: dict[str, HostedSession] = {}
        self.stateless_calls: StatelessCalls = StatelessCalls()

    # ------------------------------------------------------------------ a session's POST

    def post(
        self,
        scope: Scope,
        h: Headers,
        hv: str | None,
        msg: Any,
        receive: Receive,
        send: Send,
        body: bytes,
        found: HTTPSession | None = None,
    ) -> Outgoing | Awaitable[Any]:
        """A handshake-era POST to a stateful endpoint: the answer itself when the session's peer made it at once
        (the endpoint sends it with ``application/json``), else the awaitable that answers the POST (its result, an
        answer for the endpoint to send the same way, or anything else when it has answered). ``found``: the
        session :meth:`_find` read for it (checked, then run in its turn here)."""
        hs = found
        if hs is None:
            sid_raw = h.get(b"mcp-session-id")
            if sid_raw is None:
                return self._open(scope, msg, receive, send, body)
            hs = self.table.get(sid := sid_raw.strip(b" \t").decode("latin-1"))  # (wire.text's usual case)
            if hs is None or self.session_store is not None:
                return self._find(sid, scope, h, hv, msg, receive, send, body)
            if (owner := hs.client) is not None and owner[0] == "principal" and not owned_by(hs, scope):
                return respond(send, 404, _NOT_FOUND)
        if hv is not None and hv not in self.server.handshake_versions:
            return respond(send, 400, unsupported_header(hv))
        t = type(msg)
        if t is not Request and not has_requests(msg):
            return self._receive(hs, msg, body, send)
        weight = 1 if t is Request else request_count(msg)  # each request of a batch counts
        if hs.busy and hs.busy + weight > self.answers.max_requests_per_session:
            return self._wait_turn(hs, weight, body, receive, send)
        hs.busy += weight
        if weight != 1:
            return self._weighed(hs, weight, self._answer(hs, msg, body, receive, send))
        return self._answer(hs, msg, body, receive, send)

    async def _find(
        self, sid: str, scope: Scope, h: Headers, hv: str | None, msg: Any, receive: Receive, send: Send, body: bytes
    ) -> Any:
        """:meth:`post` for a session this worker does not hold, or with a session store (which is the truth)."""
        try:
            hs = await self.sessions.find(sid, network_of(scope))
        except ConnectionError as exc:  # the store cannot be reached: say so (the session may be fine)
            await respond(send, 503, unavailable(exc), extra=RETRY_AFTER_1)
            return None
        if hs is None or not owned_by(hs, scope):
            await respond(send, 404, _NOT_FOUND)
            return None
        answer = self.post(scope, h, hv, msg, receive, send, body, hs)
        return answer if isinstance(answer, Outgoing) else await answer

    def _answer(
        self, hs: HTTPSession, msg: Any, body: bytes, receive: Receive, send: Send
    ) -> Outgoing | Awaitable[Any]:
        """Hand a POST with room for it to the session's peer: the answer itself when it was made at once (nothing
        can have gone out before it: status 200), else :meth:`.Answerer.serve`'s awaitable."""
        cap = self.answers.max_requests_per_session
        if self.json_response and self.event_store is None:
            # a JSON answer: what the handler sends first goes to the session's standalone stream, which is all a
            # JSON-mode POST stream would do with it (no store here), so no stream is made unless the answer is not
            # made at once
            answer = hs.session.peer.answer(msg, hs, body)
            if type(answer) is Outgoing and answer.kind != ERROR:
                hs.finish_post(0, cap)
                return answer
            return self.answers.serve(self.session_stream(hs), answer, None, receive, send, ())
        stream = self.session_stream(hs)
        answer = hs.session.peer.answer(msg, stream, body)
        if type(answer) is Outgoing and answer.kind != ERROR:
            hs.finish_post(stream.no, cap)
            return answer
        return self.answers.serve(stream, answer, None, receive, send, ())

    async def _weighed(self, hs: HTTPSession, weight: int, answering: Outgoing | Awaitable[Any]) -> Any:
        """A batch's answer: its ``weight`` requests counted in the session's ``busy`` until it is answered (the
        answer gives one back)."""
        try:
            return answering if isinstance(answering, Outgoing) else await answering
        finally:
            hs.busy -= weight - 1
            if hs.queue:
                hs.next_turn(self.answers.max_requests_per_session)

    async def _wait_turn(self, hs: HTTPSession, weight: int, body: bytes, receive: Receive, send: Send) -> Any:
        """A POST of a session running ``max_requests_per_session`` already: it waits its turn (holding its body,
        not the parsed message, which is several times larger), or is refused 429 when the queue is full."""
        cap = self.answers.max_requests_per_session
        if not await hs.wait_turn(
            weight, len(body), cap, self.max_queued_per_session, self.max_queued_bytes_per_session
        ):
            hs.last_seen = time.monotonic()
            await respond(send, 429, TOO_BUSY, extra=RETRY_AFTER_1)
            return None
        if hs.session.closed:
            hs.busy -= weight
            hs.next_turn(cap)
            await respond(send, 404, _NOT_FOUND)
            return None
        msg = jsonrpc.parse(body)  # (it parsed before)
        answering = self._answer(hs, msg, body, receive, send)
        if weight != 1:
            return await self._weighed(hs, weight, answering)
        return answering if isinstance(answering, Outgoing) else await answering

    async def _receive(self, hs: HTTPSession, msg: Any, body: bytes, send: Send) -> None:
        """Notifications and answers only: 202, nothing else (answers resolve the server's requests)."""
        hs.last_seen = time.monotonic()
        try:  # (an answer to another worker's request goes there, with a shared fan-out)
            await self.sessions.receive(hs, msg, body)
        except ConnectionError as exc:
            await respond(send, 503, unavailable(exc), extra=RETRY_AFTER_1)
            return
        if self.session_store is not None and hs.session.initialized and hs.stored < 2:
            await self.sessions.save(hs, announce=True)
        await respond(send, 202)

    async def _open(self, scope: Scope, msg: Any, receive: Receive, send: Send, body: bytes) -> None:
        """A POST without ``Mcp-Session-Id``: ``initialize`` opens a session (ended again when it fails)."""
        if type(msg) is not Request or msg.method != "initialize":
            await respond(send, 400, _SESSION_ID_REQUIRED)
            return
        client = client_key(scope)
        refused = await self.sessions.make_room(client)
        if refused is not None:
            await respond(send, refused[0], refused[1], extra=[(b"retry-after", b"5")])
            return
        hs = self.sessions.create(client)
        hs.session.peer.network = network_of(scope)
        hs.busy += 1
        extra: Sequence[tuple[bytes, bytes]] = ((b"mcp-session-id", hs.id.encode()),)
        stream = self.session_stream(hs)
        answer = hs.session.peer.answer(msg, stream, body)
        status = await self.answers.serve(stream, answer, None, receive, send, extra, new_session=True)
        if status != 200:
            await self.sessions.end(hs)
        elif self.session_store is not None and not hs.stored:  # (recorded before the answer, unless that failed)
            await self.sessions.save(hs)

    def session_stream(self, hs: HTTPSession) -> Stream:
        """The stream of a session's next POST (numbered; kept in the session while it may be resumed)."""
        hs.next_no += 1
        stream = Stream(self.sse, hs, hs.next_no, JSON_MODE if self.json_response else UNDECIDED)
        if stream.resumable:
            if hs.live is None:
                hs.live = {}
            hs.live[stream.no] = stream
        return stream

    # ------------------------------------------------------------------ stateless

    async def post_stateless(
        self, scope: Scope, receive: Receive, send: Send, h: Headers, msg: Any, body: bytes
    ) -> None:
        """A handshake-era POST to a stateless endpoint: run on a pre-initialized session of its version. An
        authenticated caller's call that does not answer at once is kept in :attr:`stateless_calls` while it runs,
        for that caller's ``notifications/cancelled`` (see :class:`StatelessCalls`)."""
        server = self.server
        hv = text(h.get(b"mcp-protocol-version"))
        if hv is not None and hv not in server.handshake_versions:
            await respond(send, 400, unsupported_header(hv))
            return
        version = hv or versions.V2025_03_26
        if version not in server.handshake_versions:
            version = max(server.handshake_versions)
        t = type(msg)
        if t is Request and msg.method == "initialize":
            session = server.create_session(NULL_OUTBOX, **self.peer_options)  # answers initialize, then forgotten
            session.stateless = True  # (it stands for nobody either: what it declares is what every request gets)
            session.peer.network = network_of(scope)
        else:
            session = self._stateless_session(version, scope)
        if not has_requests(msg):
            if scope.get("auth") is not None:  # (the shared peer knows no detached request)
                await self.stateless_calls.cancel_anywhere(client_key(scope), msg, server.fanout)
            await session.peer.receive_parsed(msg, NULL_OUTBOX, body)
            await respond(send, 202)
            return
        stream = Stream(self.sse, None, 0, JSON_MODE if self.json_response else UNDECIDED)
        runner: Outgoing | Awaitable[Outgoing | None]
        if t is Request:
            # A detached run: concurrent clients may reuse request ids on this shared peer.
            ctx = session.peer.detached(msg.id, msg.method, msg.params, stream, body)
            runner = session.peer.run_detached(ctx)
            if type(runner) is not Outgoing and scope.get("auth") is not None and msg.method != "initialize":
                key = (client_key(scope), msg.id)
                if self.stateless_calls.add(key, ctx):
                    if self.stateless_calls.fanout is not server.fanout:
                        self.stateless_calls.follow(server.fanout)
                    try:
                        await self.answers.serve(stream, runner, None, receive, send, (), carried=(msg.id,))
                    finally:
                        self.stateless_calls.discard(key, ctx)
                    return
        else:
            peer = self._preinitialized(version, scope).peer
            runner = peer.answer(msg, stream, body)
            if t is Batch and scope.get("auth") is not None:
                await self._serve_batch(scope, msg, peer, stream, runner, receive, send)
                return
        # (the ids its answer names if it is cut off at shutdown)
        carried = (msg.id,) if t is Request else [m.id for m in msg if type(m) is Request] if t is Batch else None
        await self.answers.serve(stream, runner, None, receive, send, (), carried=carried)

    async def _serve_batch(
        self,
        scope: Scope,
        batch: Batch,
        peer: Peer,
        stream: Stream,
        runner: Outgoing | Awaitable[Outgoing | None],
        receive: Receive,
        send: Send,
    ) -> None:
        """An authenticated caller's batch, its requests kept in :attr:`stateless_calls` (as the batch's peer) while
        it runs, each for that caller's ``notifications/cancelled`` naming it."""
        principal = client_key(scope)
        ids = {item.id: None for item in batch if type(item) is Request and item.method != "initialize"}
        calls = self.stateless_calls
        kept = [key for key in ((principal, rid) for rid in ids) if calls.add(key, peer)]
        if kept and calls.fanout is not self.server.fanout:
            calls.follow(self.server.fanout)
        try:
            carried = [item.id for item in batch if type(item) is Request]  # (named if it is cut off at shutdown)
            await self.answers.serve(stream, runner, None, receive, send, (), carried=carried)
        finally:
            for key in kept:
                calls.discard(key, peer)

    def _preinitialized(self, version: str, scope: Scope) -> HostedSession:
        session = self.server.create_session(NULL_OUTBOX, **self.peer_options)
        session.peer.network = network_of(scope)
        session.version = version
        session.features = versions.features(version)
        session.initialized = True
        session.stateless = True  # every client's requests run on it: they keep nothing in it
        return session

    def _stateless_session(self, version: str, scope: Scope) -> HostedSession:
        session = self.stateless_sessions.get(version)
        if session is None:
            session = self.stateless_sessions[version] = self._preinitialized(version, scope)
        return session

    # ------------------------------------------------------------------ GET and DELETE

    async def _session_for(self, scope: Scope, h: Headers, verb: str) -> tuple[int, bytes] | HTTPSession:
        """The session a GET or DELETE names, or the status and body of its refusal."""
        hv = text(h.get(b"mcp-protocol-version"))
        if hv is not None and versions.is_modern(hv):
            return 405, b""
        if self.stateless or not self.server.handshake_versions:
            return 405, b""
        if self.draining and verb == "GET":  # this worker stops: the client opens its stream on another one
            return 503, bad(INVALID_REQUEST, "Service Unavailable: draining")
        sid = text(h.get(b"mcp-session-id"))
        if sid is None:
            return 400, _SESSION_ID_REQUIRED
        try:
            hs = await self.sessions.find(sid, network_of(scope))
        except ConnectionError as exc:
            return 503, unavailable(exc)
        if hs is None or not owned_by(hs, scope):
            return 404, _NOT_FOUND
        if hv is not None and hv not in self.server.handshake_versions:
            return 400, unsupported_header(hv)
        return hs

    async def get(self, scope: Scope, h: Headers, receive: Receive, send: Send) -> None:
        """GET: the session's standalone SSE stream, opened or resumed (``Last-Event-ID``)."""
        if not self.get_stream:
            await respond(send, 405, b"", None, [(b"allow", b"POST, DELETE")])
            return
        found = await self._session_for(scope, h, "GET")
        if not isinstance(found, HTTPSession):
            status, body = found
            await respond(send, status, body, JSON_TYPE, refusal_headers(status))
            return
        if not accepts(h.get(b"accept"))[1]:
            await respond(send, 406, bad(INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"))
            return
        hs = found
        hs.last_seen = time.monotonic()
        last = text(h.get(b"last-event-id"))
        shared = self.sessions.shared
        if shared is not None:
            return await shared.get(hs, last, receive, send)
        if last is not None:
            await self.sse.resume(hs, last, receive, send)
            return
        stream = hs.standalone  # (one open at a time: a newer GET takes over an open one, see SSEPump.attach)
        if stream is None:
            stream = hs.standalone = Stream(self.sse, hs, hs.base, SSE_MODE)
        await self.sse.attach(hs, stream, None, receive, send)

    async def other(self, scope: Scope, h: Headers, receive: Receive, send: Send) -> None:
        """A request of another method than POST, past the endpoint's screening: GET, DELETE, OPTIONS (not a CORS
        preflight: no Origin, or CORS off; what the endpoint allows, RFC 9110 9.3.7, without CORS headers, so a
        browser page still may not call it); any other, 405."""
        method = scope["method"]
        if method == "GET":
            await self.get(scope, h, receive, send)
        elif method == "DELETE":
            await self.delete(scope, h, send)
        else:
            await respond(send, 204 if method == "OPTIONS" else 405, b"", None, [(b"allow", ALLOWED_METHODS)])

    async def delete(self, scope: Scope, h: Headers, send: Send) -> None:
        """DELETE: end the session."""
        found = await self._session_for(scope, h, "DELETE")
        if not isinstance(found, HTTPSession):
            status, body = found
            await respond(send, status, body, JSON_TYPE, refusal_headers(status))
            return
        await self.sessions.delete(found)
        await respond(send, 200)
