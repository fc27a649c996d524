"""The engine: one peer class shared by client and server.

A :class:`Peer` knows JSON-RPC messages, not bytes on a socket: a transport hands it framed payloads and gives it
an :class:`Outbox` to write to. It correlates ids, runs incoming requests concurrently (one task each), enforces
timeouts, propagates cancellation both ways, tracks progress tokens, and answers batches. What a request *means*
is decided by the ``request_handler`` (the server or client layer above).

Ordering guarantee: a handler's notifications are written before its response, because both go through the same
outbox and the response is written only after the handler returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from types import EllipsisType
from typing import Any, Protocol

from ._aio import current_task as _current_task
from ._aio import running_loop as _running_loop
from .protocol import jsonrpc
from .protocol.errors import (
    ConnectionClosed,
    FrameTooLarge,
    InternalError,
    InvalidRequest,
    MCPError,
    MessageTooLarge,
    ParseError,
    RequestTimeout,
    error_from_response,
)
from .protocol.jsonrpc import (
    Batch,
    ErrorResponse,
    Invalid,
    JSONDict,
    Notification,
    Request,
    RequestId,
    Response,
)

logger = logging.getLogger("mcpkit.engine")

# Python 3.12+: a request's handler starts at once, inside the reader's step, and runs until it first waits. A
# handler that never waits (most do not) then costs no event-loop scheduling at all.
_EAGER_START = sys.version_info >= (3, 12)


ProgressCallback = Callable[[float, float | None, str | None], Any]
RequestHandler = Callable[["RequestContext"], Awaitable[JSONDict]]
NotificationHandler = Callable[[str, "JSONDict | None"], Awaitable[None]]
BatchPolicy = Callable[[], bool]

DEFAULT_MAX_BATCH_SIZE = 100  # messages in one incoming JSON-RPC batch (Peer(max_batch_size=...))
MODERN_BATCH_REFUSAL = "batches do not exist in 2026-07-28: send each request on its own"


class Outbox(Protocol):
    """Where a peer writes encoded messages. Transports implement it (stdio pipe, SSE stream, ...)."""

    async def send(self, data: bytes) -> None: ...


class Connection(Protocol):
    """A bidirectional message channel: ``receive()`` returns one framed payload or None at end of input."""

    async def receive(self) -> bytes | None: ...

    async def send(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


class NullOutbox:
    """An outbox that drops what it is given: for messages that have nowhere to go (a stateless peer's own
    notifications, the answer to a request whose real answer travels another way)."""

    async def send(self, data: bytes) -> None:
        return None


NULL_OUTBOX = NullOutbox()


class _Pending:
    __slots__ = (
        "deadline_max",
        "future",
        "last_progress",
        "method",
        "on_progress",
        "out",
        "progress_busy",
        "progress_next",
        "timeout",
        "timer",
    )

    def __init__(self, future: asyncio.Future[JSONDict], method: str, on_progress: ProgressCallback | None) -> None:
        self.future = future
        self.method = method
        self.on_progress = on_progress
        self.last_progress: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timeout: float | None = None
        self.deadline_max: float | None = None
        self.out: Outbox | None = None
        # an async progress callback still running, and the latest update that arrived meanwhile (see _on_progress)
        self.progress_busy = False
        self.progress_next: tuple[float, float | None, str | None] | None = None


class RequestContext:
    """One incoming request being handled: its id, method, params, and the channel to answer on.

    Handlers use it to send notifications related to the request (they leave before the response), report
    progress (only while the request is active, strictly increasing, only if the requester asked for it) and
    send requests back to the requester on the same channel.
    """

    __slots__ = (
        "_last_progress",
        "_slot",
        "cancelled",
        "done",
        "id",
        "method",
        "out",
        "params",
        "peer",
        "sink",
        "state",
        "task",
    )

    def __init__(self, peer: Peer, id: RequestId, method: str, params: JSONDict | None, out: Outbox) -> None:
        self.peer = peer
        self.id = id
        self.method = method
        self.params = params
        self.out = out
        self.cancelled = False
        self.done = False
        self._last_progress: float | None = None
        self.task: asyncio.Task[Any] | None = None
        self.state: Any = None  # free slot for the layer above (server session, era, ...)
        # batch members add their response here (followed by a comma) instead of sending it: one buffer per batch,
        # not one small bytes object per member (orjson gives each a 4 KiB allocation while it is held)
        self.sink: bytearray | None = None
        self._slot = False  # holds one of the peer's max_concurrency slots

    @property
    def meta(self) -> JSONDict | None:
        p = self.params
        if p is None:
            return None
        m = p.get("_meta")
        return m if type(m) is dict else None

    @property
    def progress_token(self) -> str | int | None:
        m = self.meta
        if m is None:
            return None
        tok = m.get("progressToken")
        return tok if type(tok) in (str, int) else None

    async def notify(self, method: str, params: JSONDict | None = None) -> None:
        """Send a notification related to this request (on the request's own channel)."""
        await self.out.send(jsonrpc.encode_notification(method, params))

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Send ``notifications/progress`` if the requester asked for progress and the request is still active.

        Returns False (and sends nothing) when there is no token, the request is finished, or ``progress`` does
        not increase: the spec requires strictly increasing values for active requests only.
        """
        token = self.progress_token
        if token is None or self.done or self.cancelled:
            return False
        if self._last_progress is not None and progress <= self._last_progress:
            return False
        self._last_progress = progress
        params: JSONDict = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.out.send(jsonrpc.encode_notification("notifications/progress", params))
        return True

    async def request(
        self,
        method: str,
        params: JSONDict | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> JSONDict:
        """Send a request back to the requester, on the channel of this request."""
        return await self.peer.request(method, params, timeout=timeout, on_progress=on_progress, out=self.out)


class Peer:
    """A JSON-RPC peer: outgoing request correlation and incoming request dispatch over one outbox.

    Args:
        outbox: default channel for outgoing messages.
        request_handler: called with a :class:`RequestContext` for every incoming request; returns the result
            dict or raises :class:`MCPError`.
        notification_handler: called for incoming notifications other than the ones the engine handles itself
            (``notifications/cancelled`` and ``notifications/progress``).
        batch_policy: returns True when incoming batches are accepted right now (era/revision dependent).
        default_timeout: seconds before an outgoing request times out (None: never).
        max_timeout: the hard cap on a request that opted into ``reset_timeout_on_progress`` (None: no cap).
        cancel_timeout: how long the background send of ``notifications/cancelled`` after a timeout or a
            cancellation may take before it is given up (the caller never waits for it).
        max_concurrency: bound on concurrently running incoming requests, batch items included (backpressure on
            the reader).
        max_batch_size: longest incoming JSON-RPC batch accepted (messages in it); a longer one is answered with
            one -32600 error and none of it runs.
    """

    def __init__(
        self,
        outbox: Outbox,
        *,
        request_handler: RequestHandler,
        notification_handler: NotificationHandler | None = None,
        batch_policy: BatchPolicy | None = None,
        default_timeout: float | None = 60.0,
        max_timeout: float | None = 600.0,
        max_concurrency: int = 256,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        name: str = "peer",
        cancel_timeout: float = 5.0,
    ) -> None:
        self.outbox = outbox
        self.request_handler = request_handler
        self.notification_handler = notification_handler
        self.batch_policy = batch_policy
        self.default_timeout = default_timeout
        self.max_timeout = max_timeout
        self.cancel_timeout = cancel_timeout
        self.name = name
        self._next_id = 0
        self._pending: dict[RequestId, _Pending] = {}
        self._inflight: dict[RequestId, RequestContext] = {}
        self._max_concurrency = max_concurrency
        self.max_batch_size = max_batch_size
        # what a refused batch is told (the layer above may name the revision that has no batches)
        self.batch_refusal = "batches are not supported in this protocol revision"
        self._active = 0  # running request tasks started by the reader (bounded by max_concurrency)
        self._slot_waiters: deque[asyncio.Future[None]] = deque()
        self._closed: BaseException | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._cancel_sends: set[asyncio.Task[None]] = set()  # notifications/cancelled in flight (each bounded)

    # ------------------------------------------------------------------ outgoing

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def notify(self, method: str, params: JSONDict | None = None, *, out: Outbox | None = None) -> None:
        """Send a notification."""
        if self._closed is not None:
            raise ConnectionClosed(f"{self.name}: connection closed")
        await (out or self.outbox).send(jsonrpc.encode_notification(method, params))

    async def request(
        self,
        method: str,
        params: JSONDict | None = None,
        *,
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
        out: Outbox | None = None,
        request_id: RequestId | None = None,
    ) -> JSONDict:
        """Send a request and wait for its result.

        ``timeout`` is a deadline: progress notifications do not extend it unless ``reset_timeout_on_progress``
        is True, and then never past ``max_timeout`` seconds after the request was sent.

        Raises the typed :class:`MCPError` for an error response, :class:`RequestTimeout` on timeout (at once:
        ``notifications/cancelled`` goes out in the background, see ``cancel_timeout``), :class:`ConnectionClosed`
        if the connection ends first. Cancelling the awaiting task sends ``notifications/cancelled`` the same way
        (never for ``initialize``).
        """
        if self._closed is not None:
            raise ConnectionClosed(f"{self.name}: connection closed")
        rid = request_id if request_id is not None else self.next_id()
        if rid in self._pending:
            raise ValueError(f"request id {rid!r} is already in flight")
        loop = _running_loop()
        fut: asyncio.Future[JSONDict] = loop.create_future()
        pending = _Pending(fut, method, on_progress)
        if on_progress is not None:
            # The request id doubles as the progress token: unique among our active requests by construction.
            params = dict(params) if params else {}
            meta = params.get("_meta")
            params["_meta"] = {**meta, "progressToken": rid} if isinstance(meta, dict) else {"progressToken": rid}
        if isinstance(timeout, EllipsisType):
            timeout = self.default_timeout
        self._pending[rid] = pending
        pending.out = out
        try:
            if timeout is not None:
                t = float(timeout)
                pending.timeout = t if reset_timeout_on_progress else None
                if self.max_timeout is not None:
                    pending.deadline_max = loop.time() + max(self.max_timeout, t)
                pending.timer = loop.call_later(t, self._expire, rid)
            await (out or self.outbox).send(jsonrpc.encode_request(rid, method, params))
            return await fut
        except TimeoutError:
            self._send_cancel(rid, method, f"timed out after {timeout}s", out)
            raise RequestTimeout(method, float(timeout or 0)) from None
        except asyncio.CancelledError:
            # Cancelling the awaiting task also cancels `fut`; a future that already holds an answer needs no cancel.
            if fut.cancelled() or not fut.done():
                self._send_cancel(rid, method, "cancelled by the caller", out)
            raise
        finally:
            if pending.timer is not None:
                pending.timer.cancel()
            self._pending.pop(rid, None)

    def _expire(self, rid: RequestId) -> None:
        pending = self._pending.get(rid)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(TimeoutError())

    def _send_cancel(self, rid: RequestId, method: str, reason: str, out: Outbox | None) -> None:
        """Send ``notifications/cancelled`` in the background, bounded by ``cancel_timeout``: the caller's
        timeout or cancellation takes effect at once, even when the peer does not take the message."""
        if method == "initialize" or self._closed is not None:
            return  # initialize MUST NOT be cancelled
        note = jsonrpc.encode_notification("notifications/cancelled", {"requestId": rid, "reason": reason})

        async def send() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for((out or self.outbox).send(note), self.cancel_timeout)

        task = asyncio.get_running_loop().create_task(send())
        self._cancel_sends.add(task)
        task.add_done_callback(self._cancel_sends.discard)

    # ------------------------------------------------------------------ incoming

    async def run(self, receive: Callable[[], Awaitable[bytes | None]], *, drain_timeout: float = 30.0) -> None:
        """Read and dispatch messages until ``receive`` returns None (end of input).

        At end of input, outgoing requests fail (no response can arrive any more), then every request already
        received is finished and answered (bounded by ``drain_timeout``) before returning.
        """
        out = self.outbox
        parse = jsonrpc.parse
        try:
            while True:
                try:
                    data = await receive()
                except FrameTooLarge as exc:
                    self._fail_oversize(exc)
                    await self._send_error(None, InvalidRequest(str(exc)).to_error(), out)
                    continue
                if data is None:
                    break
                try:
                    msg = parse(data)
                except ParseError as exc:
                    await self._send_error(None, exc.to_error(), out)
                    continue
                if not self._take(msg, out):  # the common cases without a coroutine hop
                    await self.receive_parsed(msg, out)
        finally:
            self._fail_pending(ConnectionClosed(f"{self.name}: end of input"))
            await self.drain(drain_timeout)

    def _running_tasks(self) -> list[asyncio.Task[Any]]:
        tasks = {t for t in self._tasks if not t.done()}
        for ctx in self._inflight.values():
            if ctx.task is not None and not ctx.task.done():
                tasks.add(ctx.task)
        return list(tasks)

    async def drain(self, timeout: float = 30.0) -> None:
        """Wait for running incoming requests to finish (then cancel what is left)."""
        tasks = self._running_tasks()
        if not tasks:
            return
        _, left = await asyncio.wait(tasks, timeout=timeout)
        for t in left:
            t.cancel()
        if left:
            await asyncio.wait(left, timeout=5.0)

    def feed(self, data: bytes) -> bool:
        """Synchronous fast path for a transport that frames input in a protocol callback.

        Takes what needs no waiting (a request while a concurrency slot is free: its task is started; a response:
        matched to its request) and returns True. Returns False, having done nothing, for anything else
        (notifications, batches, invalid input, a saturated peer, a closed peer); the transport then delivers
        that payload through ``run``'s ``receive`` in order."""
        if self._closed is not None:
            return False
        try:
            msg = jsonrpc.parse(data)
        except ParseError:
            return False
        return self._take(msg, self.outbox)

    def _take(self, msg: jsonrpc.Parsed | Batch, out: Outbox) -> bool:
        """Handle ``msg`` if that needs no waiting (see :meth:`feed`); False, having done nothing, otherwise."""
        t = type(msg)
        if t is Request:
            if self._active >= self._max_concurrency:
                return False
            ctx = self._admit(msg, out)  # type: ignore[arg-type]
            if ctx is not None:
                self._launch(ctx)
            return True
        if t is Response or t is ErrorResponse:
            self._on_response(msg)  # type: ignore[arg-type]
            return True
        return False

    async def receive_bytes(self, data: bytes, out: Outbox | None = None) -> None:
        """Dispatch one framed payload. Requests are started as tasks; the call returns without awaiting them."""
        out = out or self.outbox
        try:
            msg = jsonrpc.parse(data)
        except ParseError as exc:
            await self._send_error(None, exc.to_error(), out)
            return
        await self.receive_parsed(msg, out)

    async def receive_parsed(self, msg: jsonrpc.Parsed | Batch, out: Outbox) -> None:
        t = type(msg)
        if t is Request:
            await self._start_request(msg, out)  # type: ignore[arg-type]
        elif t is Response or t is ErrorResponse:
            self._on_response(msg)  # type: ignore[arg-type]
        elif t is Notification:
            await self._on_notification(msg)  # type: ignore[arg-type]
        elif t is Batch:
            await self._on_batch(msg, out)  # type: ignore[arg-type]
        else:
            inv: Invalid = msg  # type: ignore[assignment]
            if not inv.is_response:
                await self._send_error(inv.id, inv.error(), out)
            else:
                logger.warning("%s: dropped an invalid response: %s", self.name, inv.reason)

    async def handle(self, msg: jsonrpc.Parsed | Batch, out: Outbox) -> None:
        """Dispatch a parsed payload and return only when every request in it has been answered on ``out``.

        Used by request-scoped transports (an HTTP POST): when this returns, the response stream can end.
        """
        if type(msg) is Request:
            ctx = self._admit(msg, out)  # type: ignore[arg-type]
            if ctx is not None:
                await self._run_request(ctx)
            return
        if type(msg) is Batch:
            await self._on_batch(msg, out, wait=True)  # type: ignore[arg-type]
            return
        await self.receive_parsed(msg, out)

    def detached(self, id: RequestId, method: str, params: JSONDict | None, out: Outbox) -> RequestContext:
        """A context for one request that :meth:`run_detached` will run, answering on ``out``."""
        return RequestContext(self, id, method, params, out)

    def run_detached(self, ctx: RequestContext) -> Awaitable[bytes | None]:  # (None: it answered on ctx.out)
        """Run one request without entering it in the in-flight table, answering on ``ctx.out``.

        For request-scoped transports where several independent clients share one peer (stateless HTTP): their
        request ids may collide, and each request's cancellation is its own stream closing, not a
        ``notifications/cancelled`` addressed by id."""
        return self._run_request(ctx)

    def answer_detached(self, ctx: RequestContext) -> Awaitable[bytes | None]:
        """Like :meth:`run_detached`, but the encoded answer (a result or an error response) is returned instead of
        sent; None when the requester cancelled the request (it gets no answer). What the handler sends before its
        answer (notifications) still goes to ``ctx.out``. For a transport that writes the answer itself (HTTP)."""
        return self._run_request(ctx, True)

    def _admit(self, req: Request, out: Outbox) -> RequestContext | None:
        if req.id in self._inflight:
            # Never cross wires: refuse the duplicate, the original keeps running. The refusal holds a slot until it
            # is sent, so a flood of duplicates is bounded like requests (the reader waits when the slots are taken).
            err = InvalidRequest(f"request id {req.id!r} is already in use by a request in progress").to_error()
            self._active += 1
            self._spawn(self._refuse(req.id, err, out))
            return None
        ctx = RequestContext(self, req.id, req.method, req.params, out)
        self._inflight[req.id] = ctx
        return ctx

    async def _refuse(self, rid: RequestId, error: JSONDict, out: Outbox) -> None:
        try:
            await self._send_error(rid, error, out)
        finally:
            self._release()

    async def _start_request(self, req: Request, out: Outbox) -> None:
        ctx = self._admit(req, out)
        if ctx is None:
            return
        if self._active >= self._max_concurrency:
            try:
                await self._wait_slot()
            except BaseException:
                self._finished(ctx)  # (it holds no slot yet)
                raise
        self._launch(ctx)

    async def _wait_slot(self) -> None:
        """Wait until one of the ``max_concurrency`` slots is free. Backpressure: the reader waits here, so the
        transport stops being read while the peer is saturated (single requests and batch items alike)."""
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
        loop = _running_loop()
        if loop.get_task_factory() is not None:
            task = loop.create_task(coro)
        elif _EAGER_START:
            task = asyncio.Task(coro, loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
        else:
            task = asyncio.Task(coro, loop=loop)
        if task.done():
            return None
        ctx.task = task
        return task

    def _release(self) -> None:
        self._active -= 1
        self._wake_one()

    def _wake_one(self) -> None:
        waiters = self._slot_waiters
        while waiters:
            w = waiters.popleft()
            if not w.done():
                w.set_result(None)
                break

    async def _run_request(self, ctx: RequestContext, keep: bool = False) -> bytes | None:
        """Run the handler and answer: send the answer on ``ctx.out`` (or into a batch's sink), or with ``keep``
        return it (see :meth:`answer_detached`)."""
        if ctx.task is None:
            ctx.task = _current_task()
        try:
            try:
                result = await self.request_handler(ctx)
            except asyncio.CancelledError:
                if ctx.cancelled:
                    return None  # cancelled by the requester: no response (spec)
                raise
            except MCPError as exc:
                ctx.done = True
                data = jsonrpc.encode_error(ctx.id, exc.to_error())
            except Exception:
                ctx.done = True
                logger.exception("%s: handler for %r failed", self.name, ctx.method)
                data = jsonrpc.encode_error(ctx.id, InternalError().to_error())
            else:
                ctx.done = True
                if ctx.cancelled:
                    return None
                data = jsonrpc.encode_result(ctx.id, result)
            if keep:
                return data
            sink = ctx.sink
            if sink is not None:
                sink += data
                sink += b","
            else:
                await ctx.out.send(data)
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
            self._release()

    async def _send_error(self, rid: RequestId | None, error: JSONDict, out: Outbox) -> None:
        try:
            await out.send(jsonrpc.encode_error(rid, error))
        except (ConnectionError, OSError) as exc:
            logger.debug("%s: could not send error: %s", self.name, exc)

    def _on_response(self, msg: Response | ErrorResponse) -> None:
        if msg.id is None:
            logger.warning("%s: peer reported an error for an unreadable request: %s", self.name, msg.error)  # type: ignore[union-attr]
            return
        pending = self._pending.get(msg.id)
        if pending is None or pending.future.done():
            return  # late answer to a cancelled or timed-out request: ignored (spec)
        if type(msg) is Response:
            pending.future.set_result(msg.result)  # type: ignore[union-attr]
        else:
            pending.future.set_exception(error_from_response(msg.error))  # type: ignore[union-attr]

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

    def _on_progress(self, params: JSONDict) -> None:
        token = params.get("progressToken")
        progress = params.get("progress")
        if type(token) not in (str, int) or not isinstance(progress, (int, float)) or isinstance(progress, bool):
            return
        pending = self._pending.get(token)  # type: ignore[arg-type]
        if pending is None or pending.future.done():
            return  # progress for an unknown or finished request: ignored
        if pending.last_progress is not None and progress <= pending.last_progress:
            return  # progress MUST increase; a non-increasing value is dropped
        pending.last_progress = float(progress)
        if pending.timeout is not None and pending.timer is not None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + pending.timeout
            if pending.deadline_max is not None:
                deadline = min(deadline, pending.deadline_max)
            pending.timer.cancel()
            pending.timer = loop.call_at(deadline, self._expire, token)  # type: ignore[arg-type]
        if pending.on_progress is not None:
            total = params.get("total")
            message = params.get("message")
            update = (
                float(progress),
                float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else None,
                message if isinstance(message, str) else None,
            )
            if pending.progress_busy:
                # An async callback is still running for this request: keep only the latest update (one task per
                # request at most, however fast the peer sends progress).
                pending.progress_next = update
                return
            try:
                r = pending.on_progress(*update)
            except Exception:
                logger.exception("%s: progress callback failed", self.name)
                return
            if inspect.isawaitable(r):
                pending.progress_busy = True
                self._spawn(self._progress_runner(pending, r))

    async def _progress_runner(self, pending: _Pending, first: Awaitable[Any]) -> None:
        """Await an async progress callback, then call it again with the latest update that arrived meanwhile."""
        r: Any = first
        try:
            while True:
                try:
                    if inspect.isawaitable(r):
                        await r
                except Exception:
                    logger.exception("%s: progress callback failed", self.name)
                update = pending.progress_next
                if update is None or pending.on_progress is None:
                    return
                pending.progress_next = None
                try:
                    r = pending.on_progress(*update)
                except Exception:
                    logger.exception("%s: progress callback failed", self.name)
                    r = None
        finally:
            pending.progress_busy = False

    async def _on_batch(self, batch: Batch, out: Outbox, wait: bool = False) -> None:
        """Answer a batch: each request in it runs as its own task holding a concurrency slot, exactly like a single
        request (the reader waits for a free slot), and the responses leave as one array when all have ended.
        A batch longer than ``max_batch_size`` is refused whole with one -32600 error."""
        if self.batch_policy is None or not self.batch_policy():
            reason = self.batch_refusal
            if any(type(item) is Request and item.method == "initialize" for item in batch):  # type: ignore[union-attr]
                reason = "initialize MUST NOT be part of a batch: send it on its own"
            await self._send_error(None, InvalidRequest(reason).to_error(), out)
            return
        if len(batch) > self.max_batch_size:
            err = InvalidRequest(
                f"batch of {len(batch)} messages is longer than the limit of {self.max_batch_size}: send fewer "
                "messages per batch (the limit is the max_batch_size option)"
            )
            await self._send_error(None, err.to_error(), out)
            return
        responses = bytearray()
        tasks: list[asyncio.Task[Any]] = []
        for item in batch:
            t = type(item)
            if t is Request:
                req: Request = item  # type: ignore[assignment]
                if req.method == "initialize":
                    err = InvalidRequest("initialize MUST NOT be part of a batch")
                    responses += jsonrpc.encode_error(req.id, err.to_error()) + b","
                    continue
                ctx = self._admit(req, out)
                if ctx is None:
                    continue
                ctx.sink = responses
                if self._active >= self._max_concurrency:
                    try:
                        await self._wait_slot()
                    except BaseException:
                        self._finished(ctx)
                        for running in tasks:
                            running.cancel()
                        raise
                started = self._launch(ctx)
                if started is not None:
                    tasks.append(started)
            elif t is Invalid:
                inv: Invalid = item  # type: ignore[assignment]
                if not inv.is_response:
                    responses += jsonrpc.encode_error(inv.id, inv.error()) + b","
            else:
                await self.receive_parsed(item, out)
        if not tasks:
            await self._send_batch(responses, out)
        elif wait:
            await self._finish_batch(tasks, responses, out)
        else:
            # The task that sends the batch's answer holds a slot of its own until the answer is written: a peer
            # that floods batches and never reads its answers stops being read once the slots are taken.
            if self._active >= self._max_concurrency:
                await self._wait_slot()
            self._active += 1
            self._spawn(self._finish_batch(tasks, responses, out, True))

    async def _finish_batch(
        self, tasks: list[asyncio.Task[Any]], responses: bytearray, out: Outbox, release: bool = False
    ) -> None:
        try:
            try:
                await asyncio.wait(tasks)
            except asyncio.CancelledError:
                for task in tasks:
                    task.cancel()
                raise
            tasks.clear()  # (done tasks keep their coroutines: a batch whose answer waits must not hold them)
            await self._send_batch(responses, out)
        finally:
            if release:
                self._release()

    async def _send_batch(self, responses: bytearray, out: Outbox) -> None:
        # Notifications from batched handlers leave as they come; the responses leave as one array.
        if not responses:
            return
        responses[-1:] = b"]"  # (the last member's comma)
        responses[0:0] = b"["
        try:
            await out.send(bytes(responses))
        except (ConnectionError, OSError) as exc:
            logger.debug("%s: could not answer a batch: %s", self.name, exc)

    def _spawn(self, aw: Awaitable[Any]) -> None:
        if inspect.iscoroutine(aw):
            coro: Coroutine[Any, Any, Any] = aw  # (a task cancelled before it starts closes it: no warning)
        else:

            async def runner() -> None:
                await aw

            coro = runner()
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ shutdown

    def _fail_oversize(self, exc: FrameTooLarge) -> None:
        """A message that came in on the default channel was too large and is dropped. It may have been the answer
        to any request waiting there, which would otherwise wait out its timeout: fail them all, saying why."""
        if not self._pending:
            return
        reason = (
            f"{self.name}: a message from the peer was dropped because it is larger than the {exc.limit}-byte limit "
            "(it may have been this request's answer); raise the transport's max_message_size option to accept it"
        )
        for pending in list(self._pending.values()):
            if pending.out is None and not pending.future.done():
                pending.future.set_exception(MessageTooLarge(reason, exc.limit))

    def _fail_pending(self, exc: BaseException) -> None:
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(exc)

    async def close(self, reason: str = "closed") -> None:
        """Fail outgoing requests, cancel running handlers, refuse further sends."""
        if self._closed is not None:
            return
        self._closed = ConnectionClosed(f"{self.name}: {reason}")
        self._fail_pending(self._closed)
        if self._cancel_sends:  # let the peer learn of the cancellations it was sent (each is bounded)
            await asyncio.wait(list(self._cancel_sends), timeout=self.cancel_timeout)
        tasks = self._running_tasks()
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)

    def inflight_count(self) -> int:
        return len(self._inflight)

    def pending_count(self) -> int:
        return len(self._pending)


def monotonic() -> float:
    return time.monotonic()
