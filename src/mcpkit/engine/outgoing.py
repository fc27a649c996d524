"""The engine's outgoing side: the requests a peer sends and waits for (ids, timeouts, cancellation, progress),
and its notifications. :class:`Requests` is a base class of :class:`~mcpkit.engine.peer.Peer`, which sets the
state declared here."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextvars import ContextVar
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .._aio import current_task as _current_task
from .._aio import running_loop as _running_loop
from ..protocol.errors import (
    ConnectionClosed,
    FrameTooLarge,
    MCPError,
    MessageTooLarge,
    RequestTimeout,
    error_from_response,
)
from ..protocol.jsonrpc import ErrorResponse, JSONDict, RequestId, Response
from . import messages
from .messages import Outbox, Outgoing
from .tap import OUT

if TYPE_CHECKING:
    from .tap import TapHub

logger: logging.Logger = logging.getLogger("mcpkit.engine")

ProgressCallback = Callable[[float, float | None, str | None], Any]


class Pending:
    """One request this peer sent and waits for: its future, its deadline and what progress keeps it alive."""

    __slots__ = (
        "deadline_max",
        "future",
        "last_progress",
        "method",
        "on_progress",
        "out",
        "progress_busy",
        "progress_next",
        "sender",
        "timeout",
        "timer",
    )

    def __init__(self, future: asyncio.Future[JSONDict], method: str, on_progress: ProgressCallback | None) -> None:
        self.future: asyncio.Future[JSONDict] = future
        self.method: str = method
        self.on_progress: ProgressCallback | None = on_progress
        self.last_progress: float | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.timeout: float | None = None
        self.deadline_max: float | None = None
        self.out: Outbox | None = None
        # an async progress callback still running, and the latest update that arrived meanwhile (see _on_progress)
        self.progress_busy: bool = False
        self.progress_next: tuple[float, float | None, str | None] | None = None
        # the task still in the request's send (a timed request only): its timeout interrupts the send, which
        # waits as long as the peer does not read (a full pipe); "interrupted" once it did
        self.sender: asyncio.Task[Any] | Literal[False] | None = None


RequestDone = Callable[[BaseException | None, "asyncio.Future[JSONDict]"], None]

#: ``(method, request id)`` of a request as it is sent (see :func:`watch_sent`)
SentWatcher = Callable[[str, RequestId], None]
_sent_watchers: ContextVar[tuple[SentWatcher, ...]] = ContextVar("mcpkit_sent_watchers", default=())


@contextlib.contextmanager
def watch_sent(watcher: SentWatcher) -> Iterator[None]:
    """Call ``watcher(method, request_id)`` for each request sent within the block, as it is sent: the JSON-RPC id
    the peer sees, which the client assigns (a call the server asks input of goes again under a new id, as does a
    retry; the requests a call sends for itself, a ``tools/list`` lookup or a task's polls, are seen too). It follows
    the context: requests of the current task and of the tasks started within the block (blocks nest). A watcher
    that raises is logged and ignored::

        ids = []
        with watch_sent(lambda method, rid: ids.append(rid) if method == "tools/call" else None):
            await client.call_tool("add", {"a": 1, "b": 2})
    """
    reset = _sent_watchers.set((*_sent_watchers.get(), watcher))
    try:
        yield
    finally:
        _sent_watchers.reset(reset)


def _tell_watchers(watchers: tuple[SentWatcher, ...], method: str, rid: RequestId) -> None:
    for watcher in watchers:
        try:
            watcher(method, rid)
        except Exception:
            logger.exception("a watcher of sent requests failed")


class RequestTracer(Protocol):
    """Watches the requests a peer sends (OpenTelemetry client spans, :mod:`mcpkit.telemetry`): ``start`` is called
    before a request goes out and returns its params (it may add trace context to ``_meta``) and the function called
    once it is over, with the exception that ended it (None) and its future (its result when it has one)."""

    def start(
        self, method: str, params: JSONDict | None, request_id: RequestId, peer: Any
    ) -> tuple[JSONDict | None, RequestDone]: ...


class Requests:
    """Outgoing requests and notifications of a peer (see :class:`~mcpkit.engine.peer.Peer` for the options)."""

    # (slots, as Peer's: what the layers above set on a peer is declared, there is no __dict__ to grow)
    __slots__ = ("_next_id", "_pending", "id_base", "network", "tracer", "unclaimed_progress")
    outbox: Outbox
    name: str
    default_timeout: float | None
    max_timeout: float | None
    cancel_timeout: float
    _next_id: int
    _pending: dict[RequestId, Pending]
    _closed: BaseException | None
    #: why no request of ours can be answered any more: the peer was closed, or its input ended (the other side
    #: is gone, but the answers to its requests may still be written while they drain)
    _stopped: str | None
    _tasks: set[asyncio.Task[Any]]
    _cancel_sends: set[asyncio.Task[None]]
    #: Added to the counter of the ids this peer gives its requests (1, 2, ...). Several workers serving one
    #: session give their copies distinct bases (``worker << 32``, see ``mcpkit.stores.log``), so a request id
    #: is unique across workers and names the worker waiting for the answer.
    id_base: int  # (0)
    #: receives ``notifications/progress`` params for a token no request of ours is waiting on (a 2025-11-25 task
    #: keeps its request's token after the request was answered); None: such progress is dropped
    unclaimed_progress: Callable[[JSONDict], None] | None
    tap: TapHub | None  # the message tap (see mcpkit.engine.tap)
    channel: int
    #: watches every request this peer sends (None: nothing is done, one attribute test per request)
    tracer: RequestTracer | None
    #: the transport its messages travel over, as OpenTelemetry's ``network.transport`` names it ("pipe": stdio;
    #: "tcp"; "unix": a Unix domain socket), set by whoever made the peer for a connection; None: not known, in memory
    network: str | None

    def _tapped(self, direction: str, msg: Outgoing) -> None:
        """Show ``msg`` to the tap (called only when there is one)."""
        tap = self.tap
        if tap is not None:
            tap.emit(direction, msg, self.name, self.channel)

    # ------------------------------------------------------------------ outgoing

    def next_id(self) -> int:
        """The id of this peer's next request: ``id_base`` plus a count from 1."""
        self._next_id += 1
        return self.id_base + self._next_id

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def notify(self, method: str, params: JSONDict | None = None, *, out: Outbox | None = None) -> None:
        """Send a notification."""
        if self._closed is not None:
            raise _of(ConnectionClosed(f"{self.name}: connection closed"), self)
        msg = messages.notification(method, params)
        if self.tap is not None:
            self._tapped(OUT, msg)
        await (out or self.outbox).send(msg.data, msg)

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
        if self._stopped is not None:
            raise _of(ConnectionClosed(self._stopped), self)
        rid = request_id if request_id is not None else self.next_id()
        if rid in self._pending:
            raise ValueError(f"request id {rid!r} is already in flight")
        loop = _running_loop()
        fut: asyncio.Future[JSONDict] = loop.create_future()
        pending = Pending(fut, method, on_progress)
        finish: RequestDone | None = None
        if self.tracer is not None:
            params, finish = self.tracer.start(method, params, rid, self)
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
            msg = messages.request(rid, method, params)
            if self.tap is not None:
                self._tapped(OUT, msg)
            watchers = _sent_watchers.get()
            if watchers:
                _tell_watchers(watchers, method, rid)
            if timeout is None:
                await (out or self.outbox).send(msg.data, msg)
            else:
                pending.sender = _current_task()
                await (out or self.outbox).send(msg.data, msg)
                pending.sender = None
            return await fut
        except TimeoutError:
            self._send_cancel(rid, method, f"timed out after {timeout}s", out)
            raise RequestTimeout(method, float(timeout or 0)) from None
        except asyncio.CancelledError:
            if pending.sender is False:  # the timeout interrupted the send (see _expire): a timeout, unless the
                task = _current_task()  # task was also cancelled from elsewhere
                if task is not None and task.uncancel() == 0:
                    fut.exception()  # (the TimeoutError the timer set: retrieved)
                    self._send_cancel(rid, method, f"timed out after {timeout}s (still sending)", out)
                    raise RequestTimeout(method, float(timeout or 0)) from None
            # Cancelling the awaiting task also cancels `fut`; a future that already holds an answer needs no cancel.
            if fut.cancelled() or not fut.done():
                self._send_cancel(rid, method, "cancelled by the caller", out)
            raise
        except Exception as exc:
            if fut.done() and not fut.cancelled():
                fut.exception()  # (the send failed after the timeout fired: its TimeoutError is not an error to log)
            if isinstance(exc, ConnectionClosed) and exc.connection is None and not isinstance(exc, MessageTooLarge):
                exc.connection = self  # this connection ended (or its channel for this request did)
            raise
        finally:
            if pending.timer is not None:
                pending.timer.cancel()
            self._pending.pop(rid, None)
            if finish is not None:
                finish(sys.exc_info()[1], fut)

    def _expire(self, rid: RequestId) -> None:
        pending = self._pending.get(rid)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(TimeoutError())
            sender = pending.sender
            if sender:  # still sending: the peer does not take the message (what was written stays queued)
                pending.sender = False
                sender.cancel()

    def _send_cancel(self, rid: RequestId, method: str, reason: str, out: Outbox | None) -> None:
        """Send ``notifications/cancelled`` in the background, bounded by ``cancel_timeout``: the caller's
        timeout or cancellation takes effect at once, even when the peer does not take the message."""
        if method == "initialize" or self._closed is not None:
            return  # initialize MUST NOT be cancelled
        note = messages.notification("notifications/cancelled", {"requestId": rid, "reason": reason})
        if self.tap is not None:
            self._tapped(OUT, note)

        async def send() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for((out or self.outbox).send(note.data, note), self.cancel_timeout)

        task = asyncio.get_running_loop().create_task(send())
        self._cancel_sends.add(task)
        task.add_done_callback(self._cancel_sends.discard)

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

    def fail_request(self, rid: RequestId, exc: BaseException) -> None:
        """Fail our request ``rid`` with ``exc`` if it is still waiting (a transport learnt its answer will not
        come: see ``BaseConnection.set_request_failure``)."""
        pending = self._pending.get(rid)
        if pending is not None and not pending.future.done():
            pending.future.set_exception(exc)

    def _on_invalid_response(self, rid: RequestId | None, reason: str) -> None:
        """A response that is not valid JSON-RPC: when its id names a request of ours, that request fails now, saying
        why (its answer will not come: waiting out its timeout would only hide the cause)."""
        pending = self._pending.get(rid) if rid is not None else None
        if pending is None or pending.future.done():
            logger.warning("%s: dropped an invalid response: %s", self.name, reason)
            return
        pending.future.set_exception(
            MCPError(f"{self.name}: the peer sent an invalid response to {pending.method!r}: {reason}")
        )

    def _on_progress(self, params: JSONDict) -> None:
        token = params.get("progressToken")
        progress = params.get("progress")
        if type(token) not in (str, int) or not isinstance(progress, (int, float)) or isinstance(progress, bool):
            return
        pending = self._pending.get(token)  # type: ignore[arg-type]
        if pending is None or pending.future.done():
            if self.unclaimed_progress is not None:
                self.unclaimed_progress(params)
            return  # progress for an unknown or finished request: not ours to track
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

    async def _progress_runner(self, pending: Pending, first: Awaitable[Any]) -> None:
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

    def _fail_oversize(self, exc: FrameTooLarge) -> None:
        """A message that came in on the default channel was too large and is dropped. It may have been the answer
        to any request waiting there (sent on that channel: a server's ``ctx.sample`` for a call over stdio too),
        which would otherwise wait out its timeout: fail them all, saying why (not when the transport could tell it
        was a request of the peer's)."""
        if not self._pending or exc.request_id is not None:
            return
        reason = (
            f"{self.name}: a message from the peer was dropped because it is larger than the {exc.limit}-byte limit "
            "(it may have been this request's answer); raise the transport's max_message_size option to accept it"
        )
        for pending in list(self._pending.values()):
            if (pending.out is None or pending.out is self.outbox) and not pending.future.done():
                pending.future.set_exception(MessageTooLarge(reason, exc.limit))

    def _fail_pending(self, exc: BaseException) -> None:
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(exc)

    async def _fail_waiting(self, exc: BaseException) -> None:
        """:meth:`_fail_pending`, then one turn of the loop, so that each task awaiting an answer sees ``exc`` (a
        :class:`ConnectionClosed` saying why: the session ended) before the caller cancels it (``Peer.close``);
        cancelled at once, a tool saw a bare ``CancelledError`` and could not tell why its ``ctx.elicit`` stopped."""
        if self._pending:
            self._fail_pending(exc)
            await asyncio.sleep(0)


def _of(exc: ConnectionClosed, connection: object) -> ConnectionClosed:
    """``exc``, saying which connection ended (see :attr:`ConnectionClosed.connection`)."""
    exc.connection = connection
    return exc
