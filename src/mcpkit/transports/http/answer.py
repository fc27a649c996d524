"""Streamable HTTP server, answering a request: one ``application/json`` body or an SSE stream.

:class:`Answerer` (the endpoint holds one) runs a request inline in the ASGI request's task and sends its
answer, which the engine returns typed (:class:`~mcpkit.engine.Outgoing`: a result, an error and its code, a
batch's answer) in both protocol eras: the answer alone as JSON, or, as soon as the handler sends anything first,
an SSE stream (see :mod:`.stream`). The engine's bytes are never read here: the HTTP status comes from the
answer's kind and error code. A 2026-07-28 request still running after a tick or two gets a task watching for the client
leaving, which cancels it; one timer serves every request.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any

from ..._aio import current_task as _current_task
from ..._aio import running_loop as _running_loop
from ..._asgi import Receive, Send
from ...engine import ERROR, Outgoing
from ...protocol.errors import (
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from .stream import JSON_MODE, SSE_MODE, SSEPump, Stream, cancel_request, sse_frame
from .wire import (
    CONTENT_TYPE_JSON,
    LENGTHS,
    RETRY_AFTER_1,
    bad,
    content_length,
    error_body,
    respond,
    wait_disconnect,
)

if TYPE_CHECKING:
    from ...engine import RequestContext

#: the answer to an initialize whose session the shared session store cannot record now (503, Retry-After: 1)
_UNRECORDED = bad(
    INTERNAL_ERROR, "Service Unavailable: session store: the new session cannot be recorded now; retry shortly"
)
_SLOW_AFTER = 0.05  # seconds: a modern request still running after one or two ticks gets a disconnect watcher
# the errors of a 2026-07-28 request answered with HTTP 400 (the others are 200: the JSON-RPC error says it all)
MODERN_400 = frozenset((HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION))


_ENDED = (INVALID_REQUEST, "Session ended")
#: what a request still running when the server stops serving is answered (HTTP 503 or its SSE stream's last event)
SHUTTING_DOWN = (INTERNAL_ERROR, "Service Unavailable: the server is shutting down")


def _cut_ids(
    stream: Stream, ctx: RequestContext | None, by_task: bool, carried: Sequence[Any] | None = None
) -> Sequence[Any] | None:
    """The ids of the requests a POST carried that were cut off under it: a session's (recorded when it ended, or
    when the server stopped serving: ``hs.orphans``), the one request of a 2026-07-28 POST, or those a stateless
    handshake-era POST ``carried`` (its request's, or each of a batch's: none of its answer has gone out); None
    when unknown."""
    hs = stream.hs
    if hs is not None and hs.orphans:
        ids = hs.orphans.pop(stream, None) or (hs.orphans.pop(_current_task(), None) if by_task else None)
        if ids:
            return ids
    if ctx is not None:
        return [ctx.id]
    return carried or None


def _cut_answer(
    stream: Stream, ctx: RequestContext | None, why: tuple[int, str], carried: Sequence[Any] | None = None
) -> bytes:
    """The answer of a POST cut off under its requests (its session ended: spec, HTTP 404 for a terminated session;
    or the server stops serving: 503): the error with the id of each request it carried (a batch's answer for
    several), so the client's requests fail at once; ``id: null`` when none is known."""
    ids = _cut_ids(stream, ctx, True, carried)
    if not ids:
        return bad(*why)
    errors = [error_body(rid, *why) for rid in ids]
    return errors[0] if len(errors) == 1 else b"[" + b",".join(errors) + b"]"


async def _tell_orphans(
    stream: Stream, ctx: RequestContext | None, why: tuple[int, str], carried: Sequence[Any] | None
) -> None:
    """An SSE answer cut off under its requests (as for :func:`_cut_answer`): its last event is the error of each
    request it carried (not kept in the event store: the session's events are forgotten, or the server stops)."""
    ids = _cut_ids(stream, ctx, False, carried)
    conn = stream.conn
    if conn is None or conn.ended:
        return
    if ids:
        for rid in ids:
            await conn.queue.put((0, sse_frame(error_body(rid, *why), None)))
    elif why is SHUTTING_DOWN:  # (no id known)
        await conn.queue.put((0, sse_frame(bad(*why), None)))


class Answerer:
    """How one endpoint answers the requests it runs (the endpoint holds one): :meth:`serve` (JSON or SSE, both
    eras) and :meth:`answer_modern` (a 2026-07-28 JSON answer that was not made at once), and the disconnect
    watch of slow 2026-07-28 requests (:meth:`tick`).

    Args:
        sse: the endpoint's SSE side (its session store and ``sync`` too: a session's changed state is saved
            before its answer leaves).
        max_requests_per_session: the endpoint's (a session's waiting POSTs run below it).
    """

    def __init__(self, sse: SSEPump, max_requests_per_session: int) -> None:
        self.sse = sse
        self.max_requests_per_session = max_requests_per_session
        self.closing: bool = False  # the endpoint shuts down: a request cancelled now is answered SHUTTING_DOWN
        # modern requests in progress -> (the watch tick at which they were seen first, their receive, their stream
        # if they have one); and the disconnect watchers of slow ones without a stream (see tick)
        self.slow: dict[RequestContext, tuple[int, Receive, Stream | None]] = {}
        self.watchers: dict[RequestContext, asyncio.Task[None]] = {}
        self.slow_gen: int = 0
        self.slow_timer: asyncio.TimerHandle | None = None

    def close(self) -> None:
        """The endpoint shuts down: requests cancelled under it from now on are answered with an error naming the
        shutdown (:data:`SHUTTING_DOWN`), and the watch timer stops."""
        self.closing = True
        if self.slow_timer is not None:
            self.slow_timer.cancel()
            self.slow_timer = None

    async def serve(
        self,
        stream: Stream,
        runner: Outgoing | Awaitable[Outgoing | None],
        ctx: RequestContext | None,
        receive: Receive,
        send: Send,
        extra: Sequence[tuple[bytes, bytes]],
        *,
        new_session: bool = False,
        carried: Sequence[Any] | None = None,
    ) -> int:
        """Run the request inline and answer with JSON or an SSE stream.

        The handler runs in this (the ASGI request's) task: no extra task for the common case of a handler that
        answers at once. ``runner`` returns the answer; the handler's outbox, the :class:`Stream`, turns the
        answer into an SSE stream as soon as the handler sends anything first (its pump then runs in its own task).
        ``ctx`` is set for modern requests: the client leaving cancels them (see :meth:`tick`). For a session's
        POST (``stream.hs``) the session's request count and stream table are released when the handler returns.
        ``runner`` may be the answer itself (the handler answered at once: ``Peer.run_detached``). ``carried``: the
        request ids of a stateless handshake-era POST, which its answer names if it is cut off.
        """
        task: asyncio.Task[Any] | None = None
        if ctx is not None:
            stream.asgi = (receive, send, extra, ctx)
            ctx.task = task = _current_task()
            self.slow[ctx] = (self.slow_gen, receive, stream)  # see tick
            if self.slow_timer is None:
                self.slow_timer = _running_loop().call_later(_SLOW_AFTER, self.tick)
        elif stream.mode != JSON_MODE:
            stream.asgi = (receive, send, extra, None)  # what SSEPump.start needs to turn the answer into SSE
        # (a JSON-mode answer is sent from here: a session's or a stateless POST does not need them)
        ended = False
        unrecorded = False
        answer: Outgoing | None = None
        hs = stream.hs
        try:
            answer = runner if type(runner) is Outgoing else await runner  # type: ignore[misc]
            recorded = not new_session or answer is None or answer.kind == ERROR  # (a new session: record it)
            if hs is not None and self.sse.session_store is not None and (hs.dirty() or not recorded):
                await self.sse.sync(hs)  # before the answer leaves: the client may go to another worker next
                # a new session the store could not record (unreachable): no other worker would ever know it
                unrecorded = not recorded and not hs.stored and stream.mode != SSE_MODE
            if answer is not None and stream.mode == SSE_MODE:
                await stream.emit(answer.data, answer)  # notifications came first: the answer ends the SSE stream
        except asyncio.CancelledError:
            if not (self.closing or (hs is not None and hs.session.closed)):
                raise
            ended = True  # the session ended (DELETE, expiry, shutdown) under the request: close the answer cleanly
        finally:
            # The answer no longer needs the request's ASGI callables: dropping them here breaks the cycle
            # stream -> ctx -> stream (ctx.out), so a modern request's objects (and the server's request cycle
            # behind receive/send) are freed at once rather than by the garbage collector.
            stream.asgi = None
            if ctx is not None:
                self.slow.pop(ctx, None)
            if hs is not None:
                hs.finish_post(stream.no, self.max_requests_per_session)  # room for the session's next POST
        if answer is None or ended or stream.mode == SSE_MODE:
            # A cancellation aimed at the request was absorbed here or by the engine (a cancelled request gets
            # no answer): we go on with this task. An answered request was not cancelled.
            if task is None:
                task = _current_task()
            if task is not None and task.cancelling():
                task.uncancel()
        if stream.mode == SSE_MODE:
            if ended or (answer is None and self.closing):  # (the engine may take the shutdown's cancellation)
                await _tell_orphans(stream, ctx, SHUTTING_DOWN if self.closing else _ENDED, carried)
            stream.finish()
            if stream.pump_task is not None:
                await stream.pump_task
            return 200
        watcher = stream.watcher
        if watcher is not None:
            if watcher.done():
                return 499  # the client left; the request was cancelled and gets no answer
            watcher.cancel()
        if unrecorded:
            await respond(send, 503, _UNRECORDED, extra=RETRY_AFTER_1)
            return 503
        if answer is None or ended:
            if ended or self.closing:  # (the engine may take the shutdown's cancellation as the request's)
                status = 503 if self.closing else 404
                why = SHUTTING_DOWN if self.closing else _ENDED
                await respond(send, status, _cut_answer(stream, ctx, why, carried))
                return status
            await respond(send, 202, b"", None, extra)  # nothing to answer (a cancelled request)
            return 202
        status = 200
        if answer.kind == ERROR:
            status = error_status(answer, ctx is not None, new_session)
            if status != 200 and new_session:
                extra = [e for e in extra if e[0] != b"mcp-session-id"]
        data = answer.data
        length = LENGTHS.get(len(data)) or content_length(len(data))
        headers = [length, *extra, CONTENT_TYPE_JSON] if extra else [length, CONTENT_TYPE_JSON]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data, "more_body": False})
        return status

    async def answer_modern(
        self, runner: Awaitable[Outgoing | None], ctx: RequestContext, receive: Receive, send: Send
    ) -> Outgoing | None:
        """Run a 2026-07-28 request that did not answer at once (``runner``: what ``peer.run_detached(ctx)``
        returned) in this (the ASGI request's) task, watched for the client leaving; returns its answer, which the
        caller sends with ``application/json`` as it sends one made at once (see the endpoint's ``__call__``), or
        None when there is nothing more to send (answered here with 202 or 503, or the client left)."""
        ctx.task = task = _current_task()
        slow = self.slow
        slow[ctx] = (self.slow_gen, receive, None)  # see tick
        if self.slow_timer is None:
            self.slow_timer = _running_loop().call_later(_SLOW_AFTER, self.tick)
        ended = False
        try:
            answer = await runner
        except asyncio.CancelledError:
            if not self.closing:
                raise
            answer, ended = None, True  # the endpoint shuts down under the request
        finally:
            slow.pop(ctx, None)
        if answer is None and task is not None and task.cancelling():
            # A cancellation aimed at the request was absorbed here or by the engine (a cancelled request gets no
            # answer): this task goes on.
            task.uncancel()
        if self.watchers:
            watcher = self.watchers.pop(ctx, None)
            if watcher is not None:
                if watcher.done():
                    return None  # the client left: the request was cancelled and gets no answer
                watcher.cancel()
        if answer is None:
            if ended or self.closing:  # (the engine may take the shutdown's cancellation as the request's)
                await respond(send, 503, error_body(ctx.id, *SHUTTING_DOWN))
            else:
                await respond(send, 202)  # nothing to answer (a cancelled request)
        return answer

    def tick(self) -> None:
        """A modern request still running after a tick or two of :data:`_SLOW_AFTER` seconds gets a task watching
        its ``receive``, so that the client leaving cancels it. One timer serves every request: most answer at once
        and never get a watcher. (A request answered over SSE is watched by its pump instead.)"""
        self.slow_timer = None
        slow = self.slow
        gen = self.slow_gen
        self.slow_gen = gen + 1
        loop = asyncio.get_running_loop()
        for ctx, (seen, receive, stream) in list(slow.items()):  # oldest first
            if seen >= gen:
                break  # started since the last tick: not slow yet
            del slow[ctx]
            if stream is not None and (stream.watcher is not None or stream.mode == SSE_MODE or stream.asgi is None):
                continue
            w = loop.create_task(wait_disconnect(receive))
            w.add_done_callback(functools.partial(_cancel_on_disconnect, ctx))
            if stream is not None:
                stream.watcher = w  # handed to the SSE pump if the answer turns into a stream
            else:
                self.watchers[ctx] = w
        if slow and not self.closing:
            self.slow_timer = loop.call_later(_SLOW_AFTER, self.tick)


def error_status(answer: Outgoing, modern: bool, new_session: bool) -> int:
    """The HTTP status of an error answer: 400 for a failed ``initialize`` (no session is created) and for the
    2026-07-28 errors of :data:`MODERN_400`; 200 otherwise."""
    if new_session or (modern and answer.code in MODERN_400):
        return 400
    return 200


def _cancel_on_disconnect(ctx: RequestContext | None, _: Any) -> None:
    cancel_request(ctx)
