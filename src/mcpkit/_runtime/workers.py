"""The worker threads of a served process: a thread pool whose shutdown waits a bounded grace, never for ever.

``asyncio``'s default executor is a :class:`concurrent.futures.ThreadPoolExecutor`: at the end of ``asyncio.run``
its shutdown joins every thread, and the interpreter's exit joins them again. A plain ``def`` tool that sleeps
30 s therefore held a SIGTERMed server for 30 s, and the stdio client (or the process manager) then killed it
with SIGKILL: no ``atexit`` handler ran, no telemetry was flushed. A thread cannot be stopped from outside, so
:class:`WorkerPool` runs its work on *daemon* threads, which the interpreter's exit does not join, and its
``shutdown(wait=True)`` (what ``asyncio.run`` calls at its end, the event loop still running) waits for the work
in flight at most :attr:`WorkerPool.grace` seconds. It then logs one warning naming what still runs (the names
given with :func:`name_work`: ``tool 'slow'``) and returns; the program goes on to its exit, its ``atexit``
handlers run, and the threads still running end with the process.

``mcpkit.run`` makes it the default executor of the event loops it creates (``app.run()``, ``mcpkit run``); the
server's sync policy hands worker-thread calls to the default executor as before (``loop.run_in_executor(None,
...)``), so nothing changes on the way of a call. Nothing here imports the rest of mcpkit.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import os
import queue
import threading
import time
import types
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

logger: logging.Logger = logging.getLogger("mcpkit.server.sync")

#: Seconds the work still running on worker threads gets once serving has ended (SIGTERM, the end of stdin),
#: before the process exits without it. The stdio clients of mcpkit and of the official SDKs send SIGKILL 2 s
#: after SIGTERM: 1 s leaves the other second for the rest of the exit (``atexit`` handlers, the interpreter).
DEFAULT_WORKER_GRACE = 1.0

#: What :func:`describe` calls a function run on a worker: ``tool 'slow'`` (weak keys: names die with their functions).
_NAMES: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def name_work(fn: Any, name: str) -> None:
    """Name ``fn`` (a function, or the object whose bound methods run on workers) in the shutdown warning."""
    try:
        _NAMES[fn] = name
    except TypeError:  # (not weakly referable: named by its qualified name)
        pass


def _named(target: Any) -> str | None:
    try:
        return _NAMES.get(target)
    except TypeError:  # (not weakly referable: never named)
        return None


def describe(call: Callable[..., Any]) -> str:
    """How the shutdown warning names a call: the name given to its function with :func:`name_work`, else the
    function's qualified name. A ``functools.partial`` (``ctx.run`` of a function, as ``asyncio.to_thread`` and
    ``run_in_executor`` callers build) is looked through."""
    target: Any = call
    while isinstance(target, functools.partial):
        func = target.func
        if isinstance(func, types.BuiltinMethodType) and isinstance(func.__self__, contextvars.Context) and target.args:
            target = target.args[0]  # ctx.run(fn, ...)
        else:
            target = func
    name = _named(target)
    if name is None and isinstance(target, types.MethodType):
        name = _named(target.__self__)
    if name is not None:
        return name
    qualname = getattr(target, "__qualname__", None)
    return str(qualname) if qualname is not None else repr(target)


_Item = tuple[Future[Any], Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class WorkerPool(ThreadPoolExecutor):
    """A thread pool of daemon threads whose ``shutdown(wait=True)`` waits at most ``grace`` seconds.

    A :class:`~concurrent.futures.ThreadPoolExecutor` by type (``loop.set_default_executor`` takes no other), with
    its own threads: they are not the ones ``concurrent.futures`` joins at the interpreter's exit.

    Args:
        max_workers: threads at most (default ``min(32, CPUs + 4)``, as asyncio's default executor); more work
            waits in a queue, run in order as threads free up.
        grace: what ``shutdown(wait=True)`` waits, at most, for the work submitted before it (running or queued).
    """

    def __init__(self, max_workers: int | None = None, *, grace: float = DEFAULT_WORKER_GRACE) -> None:
        if max_workers is None:
            max_workers = min(32, (os.cpu_count() or 1) + 4)
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, not {max_workers!r}")
        if not grace >= 0:
            raise ValueError(f"worker_grace must be a number of seconds (0 or more), not {grace!r}")
        super().__init__(max_workers)  # (a ThreadPoolExecutor for asyncio's set_default_executor; its own
        # machinery stays unused: every method that would start or join its threads is this class's own)
        self.max_workers = max_workers
        self.grace = float(grace)
        self._jobs: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._idle_slots = threading.Semaphore(0)
        self._mutex = threading.Lock()
        self._finished = threading.Condition(self._mutex)
        self._started = 0
        self._pending = 0  # submitted, not finished (running or queued)
        self._running: dict[int, Callable[..., Any]] = {}  # thread id -> what it runs now
        self._closed = False
        self._deadline: float | None = None  # (monotonic) the end of the grace, once it began

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future: Future[T] = Future()
        with self._mutex:
            if self._closed:
                raise RuntimeError("cannot schedule new futures after shutdown")
            self._pending += 1
            self._jobs.put((future, fn, args, kwargs))
            if not self._idle_slots.acquire(blocking=False) and self._started < self.max_workers:
                self._started += 1
                threading.Thread(target=self._work, name=f"mcpkit-worker-{self._started}", daemon=True).start()
        return future

    def _work(self) -> None:
        me = threading.get_ident()
        running = self._running
        get = self._jobs.get
        while True:
            item = get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                running[me] = fn
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                finally:
                    del running[me]
            del item, future, fn, args, kwargs  # (nothing of the call outlives it here)
            with self._mutex:
                self._pending -= 1
                if not self._pending:
                    self._finished.notify_all()
            self._idle_slots.release()

    def running(self) -> list[Callable[..., Any]]:
        """What the worker threads run now."""
        return list(self._running.values())

    def begin_grace(self) -> float:
        """Serving is ending (SIGTERM): the grace starts now, if it has not yet. Returns its end (``time.monotonic``):
        :meth:`settle` and :meth:`shutdown` wait no later than that."""
        with self._mutex:
            if self._deadline is None:
                self._deadline = time.monotonic() + self.grace
            return self._deadline

    async def settle(self) -> bool:
        """Wait, without blocking the event loop, for the work submitted so far, until the end of the grace at most
        (the grace begins now if it has not: :meth:`begin_grace`). True when none is left. The server's lifespan
        waits here before its cleanup, so that a sync call still running finds what the lifespan opened still
        open. When the work ends within a grace this call began, the grace is left unspent (a later shutdown gets
        all of it); one begun before (SIGTERM) runs on."""
        if not self._pending:
            return True
        began = self._deadline is None
        deadline = self.begin_grace()
        while self._pending:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            await asyncio.sleep(min(0.01, left))  # (shutdown only: a short poll, no thread to wake the loop)
        if began:
            with self._mutex:
                if self._deadline == deadline:
                    self._deadline = None
        return True

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Take no more work; with ``wait``, wait up to :attr:`grace` (or what is left of it, once it began:
        :meth:`begin_grace`) for the work submitted before (then log one warning naming what still runs, and
        return: the daemon threads do not hold up the process's exit)."""
        with self._mutex:
            first = not self._closed
            self._closed = True
            if cancel_futures:
                while True:
                    try:
                        item = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if item is not None:
                        item[0].cancel()
                        self._pending -= 1
            if first or cancel_futures:
                for _ in range(self._started):
                    self._jobs.put(None)  # (after the work queued: each thread ends once it finds one)
            timeout = self.grace if self._deadline is None else max(0.0, self._deadline - time.monotonic())
            if not wait or self._finished.wait_for(lambda: not self._pending, timeout=timeout):
                return
            left = self.running()
            queued = self._pending - len(left)
        names = ", ".join(sorted(describe(fn) for fn in left)) or "none"
        more = f" (and {queued} queued)" if queued > 0 else ""
        logger.warning(
            "serving has ended; not waiting for %d call(s) still running on worker threads after the %g s grace "
            "(worker_grace), they end with the process: %s%s",
            len(left),
            self.grace,
            names,
            more,
        )


#: The pool :func:`install_pool` made each event loop's default executor (weak keys: gone with their loops).
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WorkerPool] = weakref.WeakKeyDictionary()


def install_pool(grace: float = DEFAULT_WORKER_GRACE) -> WorkerPool:
    """Make a new :class:`WorkerPool` the running event loop's default executor and return it (first thing in a
    loop of one's own: an executor the loop already had is replaced, not shut down)."""
    pool = WorkerPool(grace=grace)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(pool)
    _POOLS[loop] = pool
    return pool


def pool_of(loop: asyncio.AbstractEventLoop) -> WorkerPool | None:
    """The :class:`WorkerPool` :func:`install_pool` gave ``loop``, if it did (None: asyncio's own executor)."""
    return _POOLS.get(loop)


__all__ = ["DEFAULT_WORKER_GRACE", "WorkerPool", "describe", "install_pool", "name_work", "pool_of"]
