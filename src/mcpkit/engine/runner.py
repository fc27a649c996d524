"""The runner of a peer's incoming requests: one task that runs the requests a reader took, in turn.

A task costs about 1.8 µs on CPython 3.11 (its creation, its scheduling and its step); a read of 32 lines made 32 of
them. The runner runs those requests in one task instead, each in a copy of the reader's context, as a task of its
own would (nothing a handler sets leaks into the next request). A request its handler answers at once (a plain
``def`` tool run inline, a built-in) is answered there; one that has to wait (an ``async def`` tool, a call on a
worker thread) goes on in a task of its own.

A reader whose callback a hand-over of the loop takes over (the stdio server's: ``Peer.feeds_in_reader``) needs no
task at all: while the runner has nothing queued, a request it takes runs right in its callback, the same steps
(:meth:`RequestRunner._step`) without the task's creation, its scheduling and the loop's extra pass (measured over
stdio, sequential ``tools/call`` of a plain ``def`` tool: about 3.5 µs and one system call less server time per call).

A handler the runner calls may run a sync function inline that blocks; the loop is then handed over to a stand-in
thread (:mod:`mcpkit._runtime.handoff`) while the runner's step stays where it is. So that nothing waits for such a
call: requests that arrive while the runner is inside a handler get tasks of their own at once, and when requests
wait behind the one it runs, the runner leaves a callback for the loop's next pass that moves them to tasks of their
own if the runner is still inside that handler then (on the stand-in). A request run in the reader's callback that
blocks: the stand-in reads on, the rest of that read first (``transports.stdio_lines.LineReader.taken_over``).

Bounds: every queued request holds one of the peer's ``max_concurrency`` slots, taken as it is queued, so the
queue is never longer than that (beyond, requests wait for a slot in the peer's bounded line:
:mod:`mcpkit.engine.waiting`).

:func:`drain` is the end of a peer's requests when its input ends or serving stops: bounded waits, then cancellation.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from .._aio import current_task as _current_task
from .._aio import running_loop as _running_loop
from ..protocol import jsonrpc
from ..protocol.jsonrpc import JSONDict
from .context import RequestContext
from .messages import RESULT, BaseConnection, Outbox, Outgoing, batch, new
from .tap import OUT, TapHub

logger: logging.Logger = logging.getLogger("mcpkit.engine")

# Python 3.12+: a request's handler starts at once, inside the step that starts its task, and runs until it first
# waits. A handler that never waits (most do not) then costs no event-loop scheduling at all.
_EAGER_START = sys.version_info >= (3, 12)


def start_request_task(
    coro: Coroutine[Any, Any, Outgoing | None], context: contextvars.Context | None = None
) -> asyncio.Task[Any]:
    """Start the task of one request's coroutine on the running loop, in ``context`` (None: a copy of the current
    one): through the loop's task factory if one is set, else started eagerly where Python can (3.12+)."""
    loop = _running_loop()
    if loop.get_task_factory() is not None:
        return loop.create_task(coro, context=context)
    if _EAGER_START:
        return asyncio.Task(coro, loop=loop, context=context, eager_start=True)  # type: ignore[call-arg,unused-ignore]
    return asyncio.Task(coro, loop=loop, context=context)


class RunnerHost(Protocol):
    """What the runner uses of its peer (:class:`~mcpkit.engine.Peer`)."""

    name: str
    tap: TapHub | None
    _active: int
    outbox: Outbox
    request_handler: Callable[[RequestContext], Awaitable[JSONDict] | JSONDict]
    _tasks: set[asyncio.Task[Any]]

    def _tapped(self, direction: str, msg: Outgoing) -> None: ...

    def _failed(self, ctx: RequestContext, exc: Exception) -> Outgoing: ...

    def _finished(self, ctx: RequestContext, _: object = None) -> None: ...

    def _run_request(
        self, ctx: RequestContext, keep: bool = False, pending: Awaitable[JSONDict] | None = None
    ) -> Coroutine[Any, Any, Outgoing | None]: ...


class RequestRunner:
    """The runner of one peer (see the module docs). :meth:`queue` takes a request that holds a slot."""

    __slots__ = ("_box", "_busy", "_peer", "_queue", "_send_now", "_spill_due", "_task")

    def __init__(self, peer: RunnerHost) -> None:
        self._peer = peer
        # the answers for the peer's outbox are written through its send_now when it is a BaseConnection (no
        # coroutine for a write that waits for nothing), an answer for another outbox through that one's send
        box = self._box = peer.outbox
        self._send_now: Callable[[bytes, Outgoing], Awaitable[None] | None] = (
            box.send_now if isinstance(box, BaseConnection) else box.send
        )
        self._queue: deque[RequestContext] = deque()  # (each holds a max_concurrency slot: bounded by it)
        self._task: asyncio.Task[None] | None = None
        self._busy = False  # inside a handler's synchronous part
        self._spill_due = False  # a _spill callback is scheduled

    def queue(self, ctx: RequestContext, here: bool = False) -> None:
        """Run ``ctx``, holding one of the peer's ``max_concurrency`` slots (taken here) until it ends: in the
        runner's turn, or at once in a task of its own while the runner is inside a handler.

        ``here``: the caller is a transport's read callback that a hand-over of the loop cannot leave stuck (the
        stdio server's: see :mod:`mcpkit.transports.stdio_lines`); while the runner has nothing queued, the request
        runs right there, without a task (its answer written at once when the handler made one)."""
        self._peer._active += 1
        ctx._slot = True
        if self._busy:
            self._continue(ctx, self._peer._run_request(ctx), None)
            return
        if here and self._task is None:  # (nothing queued: the runner's task empties the queue before it ends)
            waiting = self._step(ctx, contextvars.copy_context())
            if waiting is not None:  # the write has to wait (the reader reads slower than we answer)
                self._continue(ctx, self._finish_after(ctx, waiting), None)
            return
        self._queue.append(ctx)
        task = self._task
        if task is None or task.done():  # (done: cancelled before its first step, when the peer closed)
            loop = _running_loop()
            coro = self._run()
            # never an eager start: the handlers must run in a task step of their own, not in the reader's
            # callback (see mcpkit._runtime.handoff.in_eager_step)
            task = asyncio.Task(coro, loop=loop) if loop.get_task_factory() is None else loop.create_task(coro)
            self._task = task
            self._peer._tasks.add(task)  # (the peer's drain waits for it)

    async def _run(self) -> None:
        """Each queued request in turn (see :meth:`_step`)."""
        peer = self._peer
        q = self._queue
        copy_context = contextvars.copy_context
        loop = _running_loop()
        try:
            while q:
                ctx = q.popleft()
                if ctx.cancelled:  # cancelled before it ran: no response (spec)
                    peer._finished(ctx)
                    continue
                if q and not self._spill_due:
                    # requests wait behind this one: the loop's next pass starts them in tasks of their own if
                    # this one's handler is still running then (the loop was handed over from its inline call)
                    self._spill_due = True
                    loop.call_soon(self._spill)
                waiting = self._step(ctx, copy_context())
                if waiting is not None:
                    await self._finish_after(ctx, waiting)
        finally:
            self._task = None
            peer._tasks.discard(_current_task())  # type: ignore[arg-type]
            self._busy = False
            while q:  # the runner was cancelled (the peer closes): what it had not run gets no answer
                peer._finished(q.popleft())

    def _step(self, ctx: RequestContext, context: contextvars.Context) -> Awaitable[None] | None:
        """Run ``ctx``'s handler in ``context``: its answer sent when it made one at once, else the rest in a task of
        its own. Returns what to await when the answer's write has to wait (then :meth:`_finish_after`), else None
        (``ctx`` finished, or gone on in its task)."""
        peer = self._peer
        self._busy = True
        try:
            result = context.run(peer.request_handler, ctx)
        except Exception as exc:
            answer = peer._failed(ctx, exc)
        except BaseException:
            peer._finished(ctx)
            raise
        else:
            if not isinstance(result, dict):  # it has to wait: the rest in a task of its own
                self._busy = False
                self._continue(ctx, peer._run_request(ctx, False, result), context)
                return None
            ctx.done = True
            try:
                answer = new(Outgoing, (jsonrpc.encode_result(ctx.id, result), RESULT, ctx.id, None, None, None))
            except Exception as exc:  # a result that is no JSON: -32603, not a lost answer (free until raised)
                answer = peer._failed(ctx, exc)
        finally:
            self._busy = False
        waiting: Awaitable[None] | None = None
        try:
            if not ctx.cancelled:
                if peer.tap is not None:
                    peer._tapped(OUT, answer)
                out = ctx.out  # (no coroutine for a write that waits for nothing: see __init__)
                box = self._box
                waiting = self._send_now(answer.data, answer) if out is box else out.send(answer.data, answer)
        except (ConnectionError, OSError) as exc:
            logger.debug("%s: could not answer %r: %s", peer.name, ctx.method, exc)
        if waiting is None:
            peer._finished(ctx)
        return waiting

    async def _finish_after(self, ctx: RequestContext, waiting: Awaitable[None]) -> None:
        """Wait for ``ctx``'s answer to be written, then finish it."""
        try:
            await waiting
        except (ConnectionError, OSError) as exc:
            logger.debug("%s: could not answer %r: %s", self._peer.name, ctx.method, exc)
        finally:
            self._peer._finished(ctx)

    def _spill(self) -> None:
        """Run by the loop's pass after the runner left it: when the runner is still inside a handler then (the loop
        was handed over from its inline call, and this runs on the stand-in), the requests queued behind it start
        in tasks of their own."""
        self._spill_due = False
        if self._busy:
            q = self._queue
            while q:
                ctx = q.popleft()
                self._continue(ctx, self._peer._run_request(ctx), None)

    def _continue(
        self, ctx: RequestContext, coro: Coroutine[Any, Any, Outgoing | None], context: contextvars.Context | None
    ) -> None:
        """Run ``coro`` (``ctx``'s request, or its rest) in a task of its own, in ``context`` (None: a copy of the
        current one); the peer's in-flight table holds the task."""
        task = start_request_task(coro, context)
        if not task.done():
            ctx.task = task


__all__ = ["RequestRunner", "RunnerHost", "drain", "start_request_task"]


async def drain(
    running: Callable[[], list[asyncio.Task[Any]]],
    timeout: float,
    stop_grace: float = 0.0,
    giving_up: Callable[[], list[asyncio.Task[None]]] | None = None,
) -> None:
    """Wait for the requests ``running()`` gives (asked again until none is left: one the runner was still to run
    may have moved to a task of its own meanwhile) for ``timeout`` seconds at most, then cancel what is left
    (``giving_up`` is called first: the peer answers the requests that wait for a slot, and those it is told to
    answer; the tasks it returns, sending those answers, are waited for with the cancelled ones, bounded).

    Cancelled while it waits (SIGTERM during the drain at the end of the input), it waits ``stop_grace`` seconds
    at most from then (never past ``timeout``), cancels what is left and raises the cancellation; cancelled again,
    it cancels what is left at once."""
    loop = _running_loop()
    deadline = loop.time() + timeout
    stopped: asyncio.CancelledError | None = None
    while tasks := running():
        try:
            _, left = await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
        except asyncio.CancelledError as exc:
            if stopped is not None:
                if giving_up is not None:
                    giving_up()
                for t in tasks:
                    t.cancel()
                raise
            stopped = exc
            deadline = min(deadline, loop.time() + stop_grace)
            continue
        if left:
            answering = giving_up() if giving_up is not None else []
            for t in left:
                t.cancel()
            await asyncio.wait([*left, *answering], timeout=5.0)
            break
    if stopped is not None:
        raise stopped


async def finish_batch(tasks: list[asyncio.Future[Any]], responses: bytearray) -> Outgoing | None:
    """Wait for a batch's requests (``tasks``, cancelled if this is); their answers (gathered in ``responses``) as
    one array, None when none was answered."""
    try:
        await asyncio.wait(tasks)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        raise
    tasks.clear()  # (done tasks keep their coroutines: a batch whose answer waits must not hold them)
    return batch(responses)
