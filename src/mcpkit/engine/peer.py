"""The engine's peer: one JSON-RPC endpoint shared by client and server.

A :class:`Peer` knows JSON-RPC messages, not bytes on a socket: a transport hands it framed payloads and gives it
an :class:`~mcpkit.engine.messages.Outbox` to write to. It correlates ids, runs incoming requests concurrently (one
task each), enforces timeouts, propagates cancellation both ways, tracks progress tokens, and answers batches. What
a request *means* is decided by the ``request_handler`` (the server or client layer above).

Ordering guarantee: a handler's notifications are written before its response, because both go through the same
outbox and the response is written only after the handler returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from .._aio import current_task as _current_task
from .._aio import running_loop as _running_loop
from ..protocol import jsonrpc
from ..protocol.errors import (
    ConnectionClosed,
    FrameTooLarge,
    InternalError,
    InvalidRequest,
    MCPError,
    ParseError,
)
from ..protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    Invalid,
    JSONDict,
    Notification,
    Request,
    RequestId,
    Response,
)
from . import messages
from .batches import PendingAnswers, on_batch
from .context import RequestContext
from .messages import (
    DEFAULT_MAX_BATCH_SIZE,
    ERROR,
    REQUEST,
    RESULT,
    UNKNOWN,
    Outbox,
    Outgoing,
    new,
)
from .outgoing import Pending, Requests, RequestTracer
from .runner import RequestRunner, drain, start_request_task
from .tap import IN, OUT, TapHub, described
from .waiting import DEFAULT_MAX_WAITING_BYTES, WaitingLine, enter_line, from_line, give_up

logger: logging.Logger = logging.getLogger("mcpkit.engine")


RequestHandler = Callable[[RequestContext], "Awaitable[JSONDict] | JSONDict"]
NotificationHandler = Callable[[str, "JSONDict | None"], Awaitable[None]]
BatchPolicy = Callable[[], bool]
RequestPolicy = Callable[[str], bool]


_channels = itertools.count(1)  # (TapEvent.channel: one number per peer)


async def _no_answer() -> None:
    """What :meth:`Peer.answer` returns for a request cancelled before its at-once answer: nothing to answer."""
    return None


class Peer(Requests):
    """A JSON-RPC peer: outgoing request correlation and incoming request dispatch over one outbox.

    Args:
        outbox: default channel for outgoing messages.
        request_handler: called with a :class:`RequestContext` for every incoming request; returns the result
            dict or raises :class:`MCPError`.
        notification_handler: called for incoming notifications other than the ones the engine handles itself
            (``notifications/cancelled`` and ``notifications/progress``).
        batch_policy: returns True when incoming batches are accepted right now (era/revision dependent).
        request_policy: called with the method of every incoming request; False drops it unanswered (a 2026-07-28
            client: that revision has no requests from the server, and a client posts no responses). None: all run.
        default_timeout: seconds before an outgoing request times out (None: never).
        max_timeout: the hard cap on a request that opted into ``reset_timeout_on_progress`` (None: no cap).
        cancel_timeout: how long the background send of ``notifications/cancelled`` after a timeout or a
            cancellation may take before it is given up (the caller never waits for it).
        max_concurrency: bound on concurrently running incoming requests, batch items included.
        max_waiting: requests that may wait for a slot while all are taken (default: ``max_concurrency``); the
            reader goes on reading meanwhile (cancellations, answers to this peer's requests), and waits only when
            the line is full (backpressure). 0: no line, the reader waits for a slot.
        max_waiting_bytes: bound on the bytes of the frames of those waiting requests (default 16 MiB).
        max_batch_size: longest incoming JSON-RPC batch accepted (messages in it); a longer one is answered with
            one -32600 error and none of it runs.
        tap: the message tap (:class:`~mcpkit.engine.tap.TapHub`) shown every message received and sent (None:
            none; the owner may set :attr:`tap` later).
    """

    # Slots: every attribute is declared (a __dict__ of more than 30 keys, CPython 3.11's limit for keys shared
    # between the instances of a class, makes every attribute read of the peer slower: 1.4k instructions more per
    # tools/call, measured with three more names), and nothing else can be set on a peer.
    __slots__ = (
        "__weakref__",
        "_active",
        "_batch_answers",
        "_cancel_sends",
        "_closed",
        "_inflight",
        "_max_concurrency",
        "_runner",
        "_slot_waiters",
        "_stopped",
        "_tasks",
        "_waiting",
        "batch_policy",
        "batch_refusal",
        "cancel_timeout",
        "channel",
        "default_timeout",
        "feeds_in_reader",
        "inflight_count",
        "max_batch_size",
        "max_timeout",
        "name",
        "notification_handler",
        "on_input_end",
        "outbox",
        "request_handler",
        "request_policy",
        "tap",
    )

    def __init__(
        self,
        outbox: Outbox,
        *,
        request_handler: RequestHandler,
        notification_handler: NotificationHandler | None = None,
        batch_policy: BatchPolicy | None = None,
        request_policy: RequestPolicy | None = None,
        default_timeout: float | None = 60.0,
        max_timeout: float | None = 600.0,
        max_concurrency: int = 256,
        max_waiting: int | None = None,
        max_waiting_bytes: int = DEFAULT_MAX_WAITING_BYTES,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        name: str = "peer",
        cancel_timeout: float = 5.0,
        tap: TapHub | None = None,
    ) -> None:
        self.outbox: Outbox = outbox
        self.tap: TapHub | None = tap
        self.channel: int = next(_channels)
        self.request_handler: RequestHandler = request_handler
        self.notification_handler: NotificationHandler | None = notification_handler
        self.batch_policy: BatchPolicy | None = batch_policy
        self.request_policy: RequestPolicy | None = request_policy
        self.default_timeout: float | None = default_timeout
        self.max_timeout: float | None = max_timeout
        self.cancel_timeout: float = cancel_timeout
        self.name: str = name
        self.id_base: int = 0
        self.unclaimed_progress: Callable[[JSONDict], None] | None = None
        self.tracer: RequestTracer | None = None
        self.network: str | None = None
        #: :meth:`feed` is called from a read callback a hand-over takes over (``BaseConnection.feeds_in_reader``): a
        #: request it takes runs right there while the runner is idle (see :meth:`.runner.RequestRunner.queue`)
        self.feeds_in_reader: bool = False
        self._next_id: int = 0
        self._pending: dict[RequestId, Pending] = {}
        self._inflight: dict[RequestId, RequestContext] = {}
        #: the number of requests of the other side in progress here (the table's own ``__len__``: no Python frame
        #: when a transport asks it per message, as stdio's ``send_now`` does)
        self.inflight_count: Callable[[], int] = self._inflight.__len__
        self._max_concurrency: int = max_concurrency
        self.max_batch_size: int = max_batch_size
        # what a refused batch is told (the layer above may name the revision that has no batches)
        self.batch_refusal: str = "batches are not supported in this protocol revision"
        self._active: int = 0  # running request tasks started by the reader (bounded by max_concurrency)
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._batch_answers: PendingAnswers = PendingAnswers(max_concurrency)  # batches whose answer is not sent yet
        # requests that wait for a slot while the reader goes on (see mcpkit.engine.waiting); empty while one is free
        line = max_concurrency if max_waiting is None else max_waiting
        self._waiting: WaitingLine = WaitingLine(line, max_waiting_bytes)
        self._closed: BaseException | None = None
        self._stopped: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cancel_sends: set[asyncio.Task[None]] = set()  # notifications/cancelled in flight (each bounded)
        #: called when :meth:`run`'s input ends, before the drain (the owner ends what never ends by itself)
        self.on_input_end: Callable[[], None] | None = None
        # runs the requests the reader takes (see _queue); (pyright matches a protocol's callable attribute against a
        # slot as if it were a method: a false alarm, the instance's request_handler is the plain callable)
        self._runner: RequestRunner = RequestRunner(self)  # pyright: ignore[reportArgumentType]

    # ------------------------------------------------------------------ incoming

    async def run(
        self, receive: Callable[[], Awaitable[bytes | None]], *, drain_timeout: float = 30.0, stop_grace: float = 0.0
    ) -> None:
        """Read and dispatch messages until ``receive`` returns None (end of input) or raises ConnectionClosed (the
        end of input, saying why: its message becomes the reason every request then fails with).

        At end of input, outgoing requests fail (no response can arrive any more), then every request already
        received is finished and answered (bounded by ``drain_timeout``) before returning. When the task running
        it is cancelled (SIGTERM), they get ``stop_grace`` seconds instead (then are cancelled, unanswered).
        """
        out = self.outbox
        parse = jsonrpc.parse
        ended: ConnectionClosed | None = None
        cancelled = False
        try:
            while True:
                try:
                    data = await receive()
                except FrameTooLarge as exc:
                    self._fail_oversize(exc)
                    await self._send_error(exc.request_id, InvalidRequest(str(exc)).to_error(), out)
                    continue
                except ConnectionClosed as exc:  # the end of input, with the transport's word on why
                    ended = exc
                    break
                if data is None:
                    break
                try:
                    msg = parse(data)
                except ParseError as exc:
                    if self.tap is not None:
                        self._tapped(IN, Outgoing(data, UNKNOWN))
                    await self._send_error(None, exc.to_error(), out)
                    continue
                if self.tap is not None:
                    self._tapped(IN, described(msg, data))
                if not self._take(msg, out):  # the common cases without a coroutine hop
                    await self._receive(msg, out, len(data))
        except asyncio.CancelledError:  # serving itself is stopped (e.g. SIGTERM): its requests get stop_grace
            cancelled = True
            raise
        finally:
            if self._stopped is None:
                why = str(ended) if ended is not None else "connection closed by the peer (end of input)"
                self._stopped = f"{self.name}: {why}"
            self._fail_pending(ConnectionClosed(self._stopped))
            if self.on_input_end is not None:
                self.on_input_end()
            await self.drain(stop_grace if cancelled else drain_timeout, stop_grace)

    def _running_tasks(self) -> list[asyncio.Task[Any]]:
        tasks = {t for t in self._tasks if not t.done()}
        for ctx in self._inflight.values():
            if ctx.task is not None and not ctx.task.done():
                tasks.add(ctx.task)
        return list(tasks)

    async def drain(self, timeout: float = 30.0, stop_grace: float = 0.0, cut: JSONDict | None = None) -> None:
        """Wait for running incoming requests to finish (then cancel what is left); cancelled meanwhile (SIGTERM
        after the end of input), wait ``stop_grace`` seconds at most from then (see :func:`.runner.drain`). When
        it gives up, the requests still waiting for a slot are answered with an error (``cut``, or one saying they
        never ran), before the cancellations free slots for them; with ``cut`` (a JSON-RPC error object), so is
        each request still running, instead of being cancelled unanswered (see :func:`.waiting.give_up`)."""
        await drain(self._running_tasks, timeout, stop_grace, functools.partial(give_up, self, cut))

    def feed(self, data: bytes) -> bool:
        """Synchronous fast path for a transport that frames input in a protocol callback.

        Takes what needs no waiting (a request while a concurrency slot is free: started, right here when
        :attr:`feeds_in_reader` and the runner is idle, else in the runner's turn; a response: matched to its request)
        and returns True. Returns False, having done nothing, for anything else
        (notifications, batches, invalid input, a saturated peer, a closed peer); the transport then delivers
        that payload through ``run``'s ``receive`` in order."""
        if self._closed is not None:
            return False
        try:
            msg = jsonrpc.parse(data)
        except ParseError:
            return False
        if self.tap is not None:
            t = type(msg)  # (shown to the tap only when _take takes it: otherwise run's receive shows it)
            if not ((t is Request and self._active < self._max_concurrency) or t is Response or t is ErrorResponse):
                return False
            self._tapped(IN, described(msg, data))
        return self._take(msg, self.outbox, self.feeds_in_reader)

    def _take(self, msg: jsonrpc.Parsed | Batch, out: Outbox, here: bool = False) -> bool:
        """Handle ``msg`` if that needs no waiting (see :meth:`feed`); False, having done nothing, otherwise
        (``here``: from the transport's read callback, where a request may run at once: see
        :meth:`.runner.RequestRunner.queue`)."""
        t = type(msg)
        if t is Request:
            if self._active >= self._max_concurrency:
                return False
            req: Request = msg  # type: ignore[assignment]
            rid = req.id
            inflight = self._inflight
            ctx: RequestContext | None
            if self.request_policy is None and rid not in inflight:  # _admit's usual case, without its frame
                ctx = inflight[rid] = RequestContext(self, rid, req.method, req.params, out)
            else:
                ctx = self._admit(req, out)
                if ctx is None:
                    return True
            self._runner.queue(ctx, here)  # (_queue without its frame)
            return True
        if t is Response or t is ErrorResponse:
            self._on_response(msg)  # type: ignore[arg-type]
            return True
        return False

    async def receive_parsed(self, msg: jsonrpc.Parsed | Batch, out: Outbox, data: bytes | None = None) -> None:
        """Dispatch one message a transport parsed (``data``: its bytes, for the tap). Requests are started as
        tasks; the call returns without awaiting them (while no concurrency slot is free, a request waits in the
        peer's waiting line; the call waits only when that line is full)."""
        if self.tap is not None:
            self._tapped(IN, described(msg, data))
        await self._receive(msg, out, 0 if data is None else len(data))

    async def _receive(self, msg: jsonrpc.Parsed | Batch, out: Outbox, size: int = 0) -> None:
        """Dispatch one message (``size``: the bytes of its frame, 0 when not known)."""
        t = type(msg)
        if t is Request:
            await self._start_request(msg, out, size)  # type: ignore[arg-type]
        elif t is Response or t is ErrorResponse:
            self._on_response(msg)  # type: ignore[arg-type]
        elif t is Notification:
            await self._on_notification(msg)  # type: ignore[arg-type]
        elif t is Batch:
            await on_batch(self, msg, out)  # type: ignore[arg-type]
        else:
            inv: Invalid = msg  # type: ignore[assignment]
            if not inv.is_response:
                await self._send_error(inv.id, inv.error(), out)
            else:
                self._on_invalid_response(inv.id, inv.reason)

    async def handle(self, msg: jsonrpc.Parsed | Batch, out: Outbox, data: bytes | None = None) -> Outgoing | None:
        """Dispatch a parsed payload and return its answer once every request in it has been answered (``data``:
        its bytes, for the tap).

        For request-scoped transports (an HTTP POST, handshake era): the answer (a request's result or error, a
        batch's array, the error an invalid message gets) is returned, not sent, because it is the POST's response;
        what the handlers send before it (notifications, requests) goes to ``out``. None when there is nothing to
        answer (notifications and responses only, or a request its requester cancelled).
        """
        if self.tap is not None:
            self._tapped(IN, described(msg, data))
        t = type(msg)
        answer: Outgoing | None
        if t is Request:
            req: Request = msg  # type: ignore[assignment]
            if req.id in self._inflight:
                answer = messages.error(req.id, self._duplicate(req.id))
            else:
                ctx = self._admit(req, out)
                if ctx is None:
                    return None  # dropped by the request policy
                return await self._run_request(ctx, True)
        elif t is Batch:
            return await on_batch(self, msg, out, keep=True)  # type: ignore[arg-type]
        elif t is Invalid and not (inv := msg).is_response:  # type: ignore[union-attr]
            answer = messages.error(inv.id, inv.error())  # type: ignore[union-attr,operator]
        else:
            await self._receive(msg, out)
            return None
        if self.tap is not None:
            self._tapped(OUT, answer)
        return answer

    def answer(
        self, msg: jsonrpc.Parsed | Batch, out: Outbox, data: bytes | None = None
    ) -> Outgoing | Awaitable[Outgoing | None]:
        """:meth:`handle`, without a coroutine when ``msg`` is a request whose handler answers at once (a plain
        ``def`` tool that ran inline, a built-in with nothing to wait for, a refusal): the answer itself then.
        Otherwise the awaitable that makes it (None from it: nothing to answer). ``data``: the message's bytes,
        for the tap.

        The one way a request-scoped transport (an HTTP POST to a handshake-era session) has a message answered:
        whatever the server decides about running it (a plain ``def`` tool inline, or not), the transport gets an
        :class:`~mcpkit.engine.Outgoing` now or an awaitable of one."""
        if type(msg) is not Request:
            return self.handle(msg, out, data)
        req: Request = msg  # type: ignore[assignment]
        if self.tap is not None:
            self._tapped(IN, described(req, data))
        rid = req.id
        inflight = self._inflight
        if rid in inflight:
            refusal = messages.error(rid, self._duplicate(rid))
            if self.tap is not None:
                self._tapped(OUT, refusal)
            return refusal
        ctx = inflight[rid] = RequestContext(self, rid, req.method, req.params, out)  # (_admit, its id known free)
        answer = self.run_detached(ctx)  # (the awaitable, if any, leaves the table when it ends)
        if type(answer) is Outgoing:
            if inflight.get(rid) is ctx:  # (_finished, for a context that holds no slot and is done)
                del inflight[rid]
            if ctx.cancelled:  # while the loop was handed over during an inline call: no response (spec)
                return _no_answer()
        return answer

    def detached(
        self, id: RequestId, method: str, params: JSONDict | None, out: Outbox, data: bytes | None = None
    ) -> RequestContext:
        """A context for one request that :meth:`run_detached` will run; what its handler sends before the answer
        goes to ``out`` (``data``: the request's bytes, for the tap)."""
        if self.tap is not None:
            if data is None:
                data = jsonrpc.encode_request(id, method, params)
            self._tapped(IN, Outgoing(data, REQUEST, id, method, params))
        return RequestContext(self, id, method, params, out)

    def run_detached(self, ctx: RequestContext) -> Outgoing | Awaitable[Outgoing | None]:
        """Run one request without entering it in the in-flight table and return its answer (a result or an error
        response; None when the requester cancelled the request: it gets no answer), as :meth:`handle` does.

        The answer itself when the handler answered at once (a plain ``def`` tool that ran inline, a built-in
        with nothing to wait for, a request refused before it ran: no coroutine at all), otherwise the awaitable
        that makes it.

        For request-scoped transports where several independent clients share one peer (stateless HTTP, both
        eras): their request ids may collide, and each request's cancellation is its own stream closing, not a
        ``notifications/cancelled`` addressed by id."""
        try:
            result = self.request_handler(ctx)
        except Exception as exc:
            answer = self._failed(ctx, exc)
        else:
            if not isinstance(result, dict):
                return self._run_request(ctx, True, result)
            ctx.done = True
            try:
                answer = new(Outgoing, (jsonrpc.encode_result(ctx.id, result), RESULT, ctx.id, None, None, None))
            except Exception as exc:  # a result that is no JSON: -32603, not a lost answer (free until raised)
                answer = self._failed(ctx, exc)
        if self.tap is not None:
            self._tapped(OUT, answer)
        return answer  # (a detached context is in no table and holds no slot: nothing to leave)

    def _failed(self, ctx: RequestContext, exc: BaseException) -> Outgoing:
        """The error answer of a request whose handler raised ``exc`` (logged unless it is a protocol error)."""
        ctx.done = True
        if isinstance(exc, MCPError):
            code = exc.code
            data = jsonrpc.encode_error(ctx.id, exc.to_error())
        else:
            logger.error("%s: handler for %r failed", self.name, ctx.method, exc_info=exc)
            err = InternalError()
            code = err.code
            data = jsonrpc.encode_error(ctx.id, err.to_error())
        return new(Outgoing, (data, ERROR, ctx.id, None, None, code))

    @staticmethod
    def _duplicate(rid: RequestId) -> JSONDict:
        return InvalidRequest(f"request id {rid!r} is already in use by a request in progress").to_error()

    def _admit(self, req: Request, out: Outbox) -> RequestContext | None:
        if self.request_policy is not None and not self.request_policy(req.method):
            return None  # dropped unanswered
        if req.id in self._inflight:
            # Never cross wires: refuse the duplicate, the original keeps running. The refusal holds a slot until it
            # is sent, so a flood of duplicates is bounded like requests (the reader waits when the slots are taken).
            self._active += 1
            self._spawn(self._refuse(req.id, self._duplicate(req.id), out))
            return None
        ctx = RequestContext(self, req.id, req.method, req.params, out)
        self._inflight[req.id] = ctx
        return ctx

    async def _refuse(self, rid: RequestId, error: JSONDict, out: Outbox) -> None:
        try:
            await self._send_error(rid, error, out)
        finally:
            self._release()

    async def _start_request(self, req: Request, out: Outbox, size: int = 0) -> None:
        ctx = self._admit(req, out)
        if ctx is None:
            return
        if self._active >= self._max_concurrency and await self._enter_line(ctx, req, size):
            return  # started by _release, in arrival order
        self._queue(ctx)

    async def _enter_line(
        self, ctx: RequestContext, req: Request, size: int = 0, ended: asyncio.Future[None] | None = None
    ) -> bool:
        """See :func:`.waiting.enter_line` (batch items come here too)."""
        return await enter_line(self, ctx, req, size, ended)

    async def _wait_slot(self) -> None:
        """Wait until one of the ``max_concurrency`` slots is free. Backpressure: the reader waits here, so the
        transport stops being read while the peer is saturated: with no waiting line (``max_waiting=0``), for
        single requests and batch items alike, and for :meth:`slot`."""
        while self._active >= self._max_concurrency:
            waiter: asyncio.Future[None] = _running_loop().create_future()
            self._slot_waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                with contextlib.suppress(ValueError):
                    self._slot_waiters.remove(waiter)
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # the wake-up it got goes to the next waiter instead
                raise

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the ``max_concurrency`` slots (waiting for one if none is free) for work the peer does on
        the other side's behalf outside a request of its own (e.g. a client answering modern input requests)."""
        if self._active >= self._max_concurrency:
            await self._wait_slot()
        self._active += 1
        try:
            yield
        finally:
            self._release()

    def _launch(self, ctx: RequestContext) -> asyncio.Task[Any] | None:
        """Start the task that runs ``ctx``; it holds one of the ``max_concurrency`` slots until it ends.

        The task is referenced from the in-flight table (``ctx.task``) for as long as it runs; it needs no
        done-callback bookkeeping. Returns the task, or None when it already ended (eager start)."""
        self._active += 1
        ctx._slot = True
        coro = self._run_request(ctx)
        task = start_request_task(coro)
        if task.done():
            return None
        ctx.task = task
        return task

    def _queue(self, ctx: RequestContext) -> None:
        """Start ``ctx``, holding one of the ``max_concurrency`` slots until it ends: through the peer's
        :class:`~.runner.RequestRunner`, one task that runs the requests the reader took in turn."""
        self._runner.queue(ctx)

    def _release(self) -> None:
        self._active -= 1
        if self._waiting.items:  # (none waits, the usual case: no call)
            from_line(self)
        elif self._slot_waiters:
            self._wake_one()

    def _wake_one(self) -> None:
        waiters = self._slot_waiters
        while waiters:
            w = waiters.popleft()
            if not w.done():
                w.set_result(None)
                break

    async def _run_request(
        self, ctx: RequestContext, keep: bool = False, pending: Awaitable[JSONDict] | None = None
    ) -> Outgoing | None:
        """Run the handler and answer: send the answer on ``ctx.out`` (or add it to a batch's sink), or with
        ``keep`` return it (see :meth:`run_detached`; ``pending``: what the handler returned there, to await)."""
        if ctx.task is None:
            ctx.task = _current_task()
        try:
            try:
                result = self.request_handler(ctx) if pending is None else pending
                if not isinstance(result, dict):  # (a handler may answer at once: no coroutine to await then)
                    result = await result
            except asyncio.CancelledError as exc:
                if ctx.cancelled:
                    return None  # cancelled by the requester: no response (spec)
                if _being_cancelled():
                    raise  # (the server stops, or the request's HTTP exchange ended)
                answer = self._failed(ctx, exc)  # the handler's own (it awaited what other code cancelled)
            except Exception as exc:
                answer = self._failed(ctx, exc)
            else:
                ctx.done = True
                if ctx.cancelled:
                    return None
                try:
                    answer = new(Outgoing, (jsonrpc.encode_result(ctx.id, result), RESULT, ctx.id, None, None, None))
                except Exception as exc:  # (as in run_detached)
                    answer = self._failed(ctx, exc)
            sink = ctx.sink
            if sink is not None:  # a batch member: no object of its own
                sink += answer.data
                sink += b","
                return None
            if self.tap is not None:
                self._tapped(OUT, answer)
            if keep:
                return answer
            await ctx.out.send(answer.data, answer)
        except (ConnectionError, OSError) as exc:
            logger.debug("%s: could not answer %r: %s", self.name, ctx.method, exc)
        finally:
            self._finished(ctx)
        return None

    def _finished(self, ctx: RequestContext, _: object = None) -> None:
        """Leave the in-flight table and give the slot back (idempotent: also a cancelled task's done-callback,
        since a task cancelled before its first step never runs the ``finally`` above)."""
        ctx.done = True
        inflight = self._inflight
        if inflight and inflight.get(ctx.id) is ctx:  # (a detached request is not in it)
            del inflight[ctx.id]
        if ctx._slot:
            ctx._slot = False
            if self._waiting.items or self._slot_waiters:
                self._release()
            else:  # (_release without its frame when nothing waits for the slot, the usual case)
                self._active -= 1

    async def _send_error(self, rid: RequestId | None, error: JSONDict, out: Outbox) -> None:
        await self._send(messages.error(rid, error), out)

    async def _send(self, msg: Outgoing, out: Outbox) -> None:
        if self.tap is not None:
            self._tapped(OUT, msg)
        try:
            await out.send(msg.data, msg)
        except (ConnectionError, OSError) as exc:
            logger.debug("%s: could not send a message: %s", self.name, exc)

    async def _on_notification(self, msg: Notification) -> None:
        method = msg.method
        params = msg.params
        if method == "notifications/cancelled":
            rid = params.get("requestId") if params else None
            ctx = self._inflight.get(rid) if type(rid) in (str, int) else None  # type: ignore[arg-type]
            if ctx is not None and ctx.method != "initialize" and not ctx.done:
                ctx.cancelled = True
                if ctx.task is not None:
                    ctx.task.cancel()
                    ctx.task.add_done_callback(functools.partial(self._finished, ctx))
                elif not ctx._slot and self._waiting.items and self._waiting.remove(ctx):
                    self._finished(ctx)  # waiting for a slot: out of the line, its id free again
            # unknown or finished requests: ignored (spec allows it)
            if self.notification_handler is not None:
                await self._notify_handler(method, params)
            return
        if method == "notifications/progress" and params is not None:
            self._on_progress(params)
            return
        if self.notification_handler is not None:
            await self._notify_handler(method, params)

    async def _notify_handler(self, method: str, params: JSONDict | None) -> None:
        assert self.notification_handler is not None
        try:
            await self.notification_handler(method, params)
        except Exception:
            logger.exception("%s: notification handler for %r failed", self.name, method)

    # ------------------------------------------------------------------ shutdown

    async def close(self, reason: str = "closed") -> None:
        """Fail outgoing requests, cancel running handlers, refuse further sends."""
        if self._closed is not None:
            return
        self._closed = ConnectionClosed(f"{self.name}: {reason}")
        self._stopped = f"{self.name}: connection closed"
        answering = give_up(self)  # (the requests still waiting for a slot: answered that they never ran)
        await self._fail_waiting(self._closed)
        if self._cancel_sends:  # let the peer learn of the cancellations it was sent (each is bounded)
            await asyncio.wait(list(self._cancel_sends), timeout=self.cancel_timeout)
        tasks = self._running_tasks()
        for t in tasks:
            t.cancel()
        if tasks or answering:
            await asyncio.wait([*tasks, *answering], timeout=5.0)
        for t in answering:
            t.cancel()  # (a peer that reads nothing any more: the answers are given up on)

    def requests_in_progress(self) -> list[RequestContext]:
        """The requests of the other side in progress here (taken, not answered yet), e.g. for a transport to tell
        which requests a connection ending under them leaves without an answer."""
        return list(self._inflight.values())

    def is_running(self, request_id: Any) -> bool:
        """Whether a request of the other side with this id is in progress here (its answer not sent yet)."""
        return type(request_id) in (str, int) and request_id in self._inflight

    def is_running_method(self, method: str) -> bool:
        """Whether a request of the other side for ``method`` is in progress here (taken, not answered yet)."""
        return any(ctx.method == method for ctx in self._inflight.values())


def _being_cancelled() -> bool:
    """Is the running task being cancelled (``Task.cancel()`` asked of it, not taken back)? A ``CancelledError``
    that reaches a request's handler otherwise came out of something it awaited (a future or task other code
    cancelled): the handler failed, and its request still gets an answer."""
    task = _current_task()
    return task is None or task.cancelling() > 0
