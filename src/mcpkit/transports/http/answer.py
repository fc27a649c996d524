"""Streamable HTTP server, answering a request: one ``application/json`` body or an SSE stream.

:class:`Answering` (a base class of the endpoint) runs a request inline in the ASGI request's task and sends its
answer, which the engine returns typed (:class:`~mcpkit.engine.Outgoing`: a result, an error and its code, a
batch's answer) in both protocol eras: the answer alone as JSON, or, as soon as the handler sends anything first,
an SSE stream (see :mod:`.stream`). The engine's bytes are never read here: the HTTP status comes from the
answer's kind and error code. A 2026-07-28 request still running after a tick or two gets a task watching for the client
leaving, which cancels it; one timer serves every request.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..._aio import current_task as _current_task
from ..._aio import running_loop as _running_loop
from ..._asgi import Receive, Send
from ...engine import ERROR, Outgoing
from ...protocol.errors import (
    HEADER_MISMATCH,
    INVALID_REQUEST,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    UNSUPPORTED_PROTOCOL_VERSION,
)
from .stream import _JSON_MODE, _SSE_MODE, SSEPump, _Stream
from .wire import _CONTENT_TYPE_JSON, _LENGTHS, _bad, _content_length, _respond, _wait_disconnect

if TYPE_CHECKING:
    from ...engine import RequestContext
    from ...hosting import HostedServer
    from .stream import _HTTPSession

_SLOW_AFTER = 0.05  # seconds: a modern request still running after one or two ticks gets a disconnect watcher
# the errors of a 2026-07-28 request answered with HTTP 400 (the others are 200: the JSON-RPC error says it all)
MODERN_400 = frozenset((HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION))


class Answering(SSEPump):
    """The endpoint's answering of requests (a base class of the endpoint)."""

    _closing: bool  # set by the endpoint: it shuts down
    # modern requests in progress -> (the watch tick at which they were seen first, their receive, their stream
    # if they have one); and the disconnect watchers of slow ones without a stream (see _tick)
    _slow: dict[RequestContext, tuple[int, Receive, _Stream | None]]
    _watchers: dict[RequestContext, asyncio.Task[None]]
    _slow_gen: int
    _slow_timer: asyncio.TimerHandle | None
    max_requests_per_session: int  # the endpoint's (a session's waiting POSTs run below it)
    server: HostedServer
    _session_stream: Callable[[_HTTPSession], _Stream]  # the endpoint's: the stream of a session's next POST

    async def _serve(
        self,
        stream: _Stream,
        runner: Outgoing | Awaitable[Outgoing | None],
        ctx: RequestContext | None,
        receive: Receive,
        send: Send,
        extra: Sequence[tuple[bytes, bytes]],
        *,
        new_session: bool = False,
    ) -> int:
        """Run the request inline and answer with JSON or an SSE stream.

        The handler runs in this (the ASGI request's) task: no extra task for the common case of a handler that
        answers at once. ``runner`` returns the answer; the handler's outbox, the :class:`_Stream`, turns the
        answer into an SSE stream as soon as the handler sends anything first (its pump then runs in its own task).
        ``ctx`` is set for modern requests: the client leaving cancels them (see :meth:`_tick`). For a session's
        POST (``stream.hs``) the session's request count and stream table are released when the handler returns.
        ``runner`` may be the answer itself (the handler answered at once: ``Peer.run_detached``).
        """
        task: asyncio.Task[Any] | None = None
        if ctx is not None:
            stream.asgi = (receive, send, extra, ctx)
            ctx.task = task = _current_task()
            self._slow[ctx] = (self._slow_gen, receive, stream)  # see _tick
            if self._slow_timer is None:
                self._slow_timer = _running_loop().call_later(_SLOW_AFTER, self._tick)
        elif stream.mode != _JSON_MODE:
            stream.asgi = (receive, send, extra, None)  # what _start_sse needs to turn the answer into SSE
        # (a JSON-mode answer is sent from here: a session's or a stateless POST does not need them)
        ended = False
        answer: Outgoing | None = None
        hs = stream.hs
        try:
            answer = runner if type(runner) is Outgoing else await runner  # type: ignore[misc]
            recorded = not new_session or answer is None or answer.kind == ERROR  # (a new session: record it)
            if hs is not None and self.session_store is not None and (hs.dirty() or not recorded):
                await self._sync(hs)  # before the answer leaves: the client may go to another worker next
            if answer is not None and stream.mode == _SSE_MODE:
                await stream.emit(answer.data, answer)  # notifications came first: the answer ends the SSE stream
        except asyncio.CancelledError:
            if not (self._closing or (hs is not None and hs.session.closed)):
                raise
            ended = True  # the session ended (DELETE, expiry, shutdown) under the request: close the answer cleanly
        finally:
            # The answer no longer needs the request's ASGI callables: dropping them here breaks the cycle
            # stream -> ctx -> stream (ctx.out), so a modern request's objects (and the server's request cycle
            # behind receive/send) are freed at once rather than by the garbage collector.
            stream.asgi = None
            if ctx is not None:
                self._slow.pop(ctx, None)
            if hs is not None:
                hs.finish_post(stream.no, self.max_requests_per_session)  # room for the session's next POST
        if answer is None or ended or stream.mode == _SSE_MODE:
            # A cancellation aimed at the request was absorbed here or by the engine (a cancelled request gets
            # no answer): we go on with this task. An answered request was not cancelled.
            if task is None:
                task = _current_task()
            if task is not None and task.cancelling():
                task.uncancel()
        if stream.mode == _SSE_MODE:
            stream.finish()
            if stream.pump is not None:
                await stream.pump
            return 200
        watcher = stream.watcher
        if watcher is not None:
            if watcher.done():
                return 499  # the client left; the request was cancelled and gets no answer
            watcher.cancel()
        if answer is None or ended:
            if ended:
                await _respond(send, 404, _bad(INVALID_REQUEST, "Session ended"))
                return 404
            await _respond(send, 202, b"", None, extra)  # nothing to answer (a cancelled request)
            return 202
        status = 200
        if answer.kind == ERROR:
            status = _error_status(answer, ctx is not None, new_session)
            if status != 200 and new_session:
                extra = [e for e in extra if e[0] != b"mcp-session-id"]
        data = answer.data
        length = _LENGTHS.get(len(data)) or _content_length(len(data))
        headers = [length, *extra, _CONTENT_TYPE_JSON] if extra else [length, _CONTENT_TYPE_JSON]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data, "more_body": False})
        return status

    async def _answer_modern(
        self, runner: Awaitable[Outgoing | None], ctx: RequestContext, receive: Receive, send: Send
    ) -> Outgoing | None:
        """Run a 2026-07-28 request that did not answer at once (``runner``: what ``peer.run_detached(ctx)``
        returned) in this (the ASGI request's) task, watched for the client leaving; returns its answer, which the
        caller sends with ``application/json`` as it sends one made at once (see the endpoint's ``__call__``), or
        None when there is nothing more to send (answered here with 202 or 503, or the client left)."""
        ctx.task = task = _current_task()
        slow = self._slow
        slow[ctx] = (self._slow_gen, receive, None)  # see _tick
        if self._slow_timer is None:
            self._slow_timer = _running_loop().call_later(_SLOW_AFTER, self._tick)
        ended = False
        try:
            answer = await runner
        except asyncio.CancelledError:
            if not self._closing:
                raise
            answer, ended = None, True  # the endpoint shuts down under the request
        finally:
            slow.pop(ctx, None)
        if answer is None and task is not None and task.cancelling():
            # A cancellation aimed at the request was absorbed here or by the engine (a cancelled request gets no
            # answer): this task goes on.
            task.uncancel()
        if self._watchers:
            watcher = self._watchers.pop(ctx, None)
            if watcher is not None:
                if watcher.done():
                    return None  # the client left: the request was cancelled and gets no answer
                watcher.cancel()
        if answer is None:
            if ended:
                await _respond(send, 503, _bad(INVALID_REQUEST, "Service Unavailable: the server is shutting down"))
            else:
                await _respond(send, 202)  # nothing to answer (a cancelled request)
        return answer

    def _tick(self) -> None:
        """A modern request still running after a tick or two of :data:`_SLOW_AFTER` seconds gets a task watching
        its ``receive``, so that the client leaving cancels it. One timer serves every request: most answer at once
        and never get a watcher. (A request answered over SSE is watched by its pump instead.)"""
        self._slow_timer = None
        slow = self._slow
        gen = self._slow_gen
        self._slow_gen = gen + 1
        loop = asyncio.get_running_loop()
        for ctx, (seen, receive, stream) in list(slow.items()):  # oldest first
            if seen >= gen:
                break  # started since the last tick: not slow yet
            del slow[ctx]
            if stream is not None and (stream.watcher is not None or stream.mode == _SSE_MODE or stream.asgi is None):
                continue
            w = loop.create_task(_wait_disconnect(receive))
            w.add_done_callback(functools.partial(_cancel_on_disconnect, ctx))
            if stream is not None:
                stream.watcher = w  # handed to the SSE pump if the answer turns into a stream
            else:
                self._watchers[ctx] = w
        if slow and not self._closing:
            self._slow_timer = loop.call_later(_SLOW_AFTER, self._tick)


def _error_status(answer: Outgoing, modern: bool, new_session: bool) -> int:
    """The HTTP status of an error answer: 400 for a failed ``initialize`` (no session is created) and for the
    2026-07-28 errors of :data:`MODERN_400`; 200 otherwise."""
    if new_session or (modern and answer.code in MODERN_400):
        return 400
    return 200


def _cancel_on_disconnect(ctx: RequestContext | None, _: Any) -> None:
    SSEPump._cancel(ctx)
