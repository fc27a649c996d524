"""How a plain ``def`` tool, resource, prompt or completer is called: inline on the event loop, or on a worker.

A sync function may block (a file, a socket, ``time.sleep``), so by default it must not run on the event loop:
one blocked call would stall every other request of every session. A worker-thread hand-off per call costs
tens of microseconds (two thread wake-ups), more than the whole rest of a ``tools/call``. Most sync tools never
block, though, and for those that cost is pure waste. So every sync function gets a :class:`SyncPolicy`:

- ``thread=True`` (declared): always on a worker thread (``loop.run_in_executor``, the loop's default
  executor, the calling task's contextvars copied, as ``asyncio.to_thread`` does).
- ``thread=False`` (declared): always inline on the event loop. Only for functions that never block.
- ``thread=None`` (the default, *learned*): the first calls run on a worker thread and are measured there.
  After ``learn_calls`` consecutive calls that each finished within ``long_ms / 10`` of wall time *and* never
  gave up the CPU voluntarily (no sleep, no I/O wait, no lock wait: the thread's voluntary context switches,
  from ``getrusage(RUSAGE_THREAD)``; elsewhere wall time minus thread CPU time under 50 µs), the function runs
  inline. Every inline call is timed with the clock (tens of nanoseconds). The clock alone cannot tell the
  function's own wait or computation from the OS running something else meanwhile, so an inline call that takes
  longer than ``long_ms`` makes the function's next calls *exactly* timed (a ``getrusage`` reading on each side
  as well, about a microsecond per call): the next :data:`EXACT_CALLS` (10,000) of them, a window twice as long
  each time a clock-timed call runs long again (up to :data:`EXACT_CALLS_MAX`), which starts again whenever an
  exactly timed call runs long without it being the function's fault. One that takes longer than
  ``long_ms`` *because of the function* (it waited, or computed that long) sends it back to the worker thread
  for good, with a warning naming it. So one preemption costs a fast function 10,000 exactly timed calls, not
  all its calls from then on. Two tolerances keep a busy machine from demoting
  fast functions at random: being preempted by the OS (a busy machine, a CPU quota) or a garbage collection
  (it pauses the loop wherever the function runs) is not held against a call (CPU time counts beyond
  ``long_ms`` + 10 ms: ``getrusage`` is tick-grained), and a short wait (under
  ``long_ms`` + two switch intervals, 12 ms by default: perhaps for the GIL, held by another thread) is
  forgiven unless it happens ``MAYBE_STRIKES`` (3) times within ``MAYBE_WINDOW_S`` (10 s) of each other
  (one that overlaps a wake of the watchdog is not counted only where the scheduler's times below cannot be read:
  the watchdog thread wakes every 5 ms, so a function that sleeps a few milliseconds per call would always have
  that excuse).
  Such a wait is wall time less CPU time, which also holds any time the OS kept the thread off the CPU: a call
  preempted for 30 ms whose thread handed the GIL over once meanwhile (to the thread that takes over the loop)
  has "waited" 30 ms. So where the scheduler tells a thread's run-queue time (Linux, ``/proc``), a wait that
  would demote the function makes it *suspect* instead: its next :data:`SUSPECT_CALLS` (1,000) inline calls also
  read the thread's CPU time and run-queue time around the call (two system calls more, 10-40 µs), and the next
  of them that runs long is judged by the time it was neither running nor runnable (asleep: on I/O, a lock, the
  GIL): a wait past ``long_ms`` + two switch intervals (or the short ones three times) demotes it, being
  preempted does not; so does a computation past ``long_ms`` + :data:`CPU_SLACK_S` (4 ms), and a shorter one
  past ``long_ms`` three times (the kernel charges a running thread for some of its own work: one reading a
  little past the limit is not proof). Nor does waiting for the GIL while the thread holding it is kept off the
  CPU (a busy machine preempts that thread too, and the call waits for the GIL as long): the suspect calls also read the
  other threads' run-queue time and preemption count (:func:`mcpkit._runtime.others_delay`: before the
  call, nothing of theirs when no other thread switched or ran since the last reading, two ``getrusage`` calls
  tell; else one read per thread, two for one that ran since; all of them after the call only when it ran long;
  at most 64 threads), and a short wait is judged
  less all of their run-queue time meanwhile (a thread the call's GIL hand-over woke is waited for while it
  waits for a CPU), a longer one less that of the threads the OS preempted meanwhile (a thread woken by a
  timer or I/O waits for a CPU without the GIL: only a preempted one can have held it so long), or less all of
  theirs when the call's own thread was preempted (holding the GIL: a thread that asked for it meanwhile is then
  handed the GIL, and waited for until it gets a CPU). The runtime's own light threads (the watchdog thread, the
  one that hears the helper process) count only in that last case: they hold the GIL for microseconds, and their
  wait for a CPU mostly follows their timer's or the helper's wake, the GIL free (the watchdog thread wakes every
  5 ms: a function that sleeps a few milliseconds per call would always have that excuse). A suspicion
  no long call confirms clears after its calls; the next one is twice as long (up to
  :data:`SUSPECT_CALLS_MAX`), or 1,000 again once a measured call showed the OS to blame. A call with no
  suspicion costs nothing more: the scheduler is read only around a suspect function's calls. A
  learning call that waits or computes longer than ``long_ms`` sends the function to the worker thread at once,
  where its calls go on being measured: one slow call (a cold cache, a first-time import) does not keep a fast
  function off the loop for good, but it must prove itself twice as long to come back (``2 * learn_calls``
  fast, non-waiting calls in a row after its first long call, four times as many after its second, eight after
  its third); its :data:`LEARN_STRIKES`-th long call on the thread ends the learning for good. A function that
  blocks now and then so never comes inline, and once inline it never goes back to learning (a long inline
  call is judged as below). Functions that take a :class:`~mcpkit.server.context.Context`
  are never learned inline (``ctx.run()`` needs a worker thread). Whatever a sync function returns that is
  awaitable is awaited, as before.

Guarantee and worst case: a function on a worker thread never stalls other requests (beyond the GIL's switch
interval for CPU-bound code, 5 ms by default). An inline call runs under the loop's hand-off guard
(:mod:`mcpkit._runtime.handoff`): when it runs for 10 ms (the watch sees it 10-15 ms after its start), a
stand-in thread takes over running the event loop until the call returns, so a learned-inline function that
suddenly blocks stalls other requests for at most 10-15 ms per long call, and three times when it blocks again
within 1,000 calls: its first
long call makes its calls exactly timed, the second makes it suspect, the third demotes it to the worker thread
for good (a wait past ``long_ms`` + two switch intervals; a computation past ``long_ms`` + 10 ms, which the OS
cannot feign, demotes it at the second; shorter waits, 12 ms at most by default, are forgiven while they are
rarer than three within 10 s). Where the run-queue time cannot
be read, the second long call demotes it. One that blocks less often, once every ``n`` calls, is demoted by its
``3 + log2(n / 10,000) + log2(n / 1,000)``-th long call (each term rounded up, and only when positive; without
the run-queue time ``2 + log2(n / 10,000)``) at the latest, since each window is twice the one before; on a
busy machine, where measured calls show the OS preempting it, each suspicion starts again at 1,000 calls, so
one that blocks less often may go on being handed over (10-15 ms each time) rather than be demoted. Where the
loop cannot be handed over (uvloop, a Python other than CPython 3.11-3.13), learned functions stay on the worker
thread; a declared ``thread=False`` function runs inline there, unguarded. While the loop is handed over, inline
functions run on worker threads. Declare ``thread=True`` for a function that can ever block; ``thread=False``
declares one that never blocks (always inline, never timed, never demoted).

Limits (``MCPKit(sync_long_ms=..., sync_learn_calls=...)``; module defaults :data:`DEFAULT_LONG_MS`,
:data:`DEFAULT_LEARN_CALLS`): ``long_ms`` (default 2 ms) bounds an inline call; ``learn_calls`` (default 20)
is how many fast, non-waiting worker calls earn a function the inline path.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

from .._runtime import (
    EAGER,
    ON_THREAD,
    TICKS,
    LoopHandoff,
    clock,
    delay_between,
    hook_gc,
    name_work,
    others_delay,
    run_delay,
    run_inline,
    running_guard,
    switch_interval,
    thread_usage,
)

logger: logging.Logger = logging.getLogger("mcpkit.server.sync")

#: A call longer than this (milliseconds) is "long": it demotes a learned-inline function to the worker thread.
DEFAULT_LONG_MS = 2.0
#: Consecutive fast, non-waiting worker calls needed before a function runs inline.
DEFAULT_LEARN_CALLS = 20
#: Wall time minus thread CPU time above this (seconds) means the call waited (sleep, I/O, a lock).
WAIT_SLACK_S = 50e-6
#: Inline calls timed exactly after a clock-timed one ran long (the first window; each later one is twice as long).
EXACT_CALLS = 10_000
#: The longest window of exactly timed calls (a function that keeps running long stays exactly timed).
EXACT_CALLS_MAX = EXACT_CALLS << 10
#: Inline calls of a suspect function (one whose wait, by wall time less CPU time, would have demoted it) measured
#: with the scheduler's run-queue time too (the first suspicion; each later one is twice as long, back to this
#: when a measured call shows the OS was to blame). The suspicion clears unconfirmed after them.
SUSPECT_CALLS = 1_000
#: The longest window of a suspicion.
SUSPECT_CALLS_MAX = SUSPECT_CALLS << 10
#: Long calls (past ``long_ms``: it waited or computed) while a function learns on the worker thread after which it
#: stays there for good; after each earlier one it needs twice as many fast calls in a row as before to run inline.
LEARN_STRIKES = 4

THREAD = 0
LEARNING = 1
INLINE = 2
_MODE_NAMES = {THREAD: "thread", LEARNING: "learning", INLINE: "inline"}


#: Types a function's return value is never awaitable as (the usual ones: no ``inspect.isawaitable`` call).
PLAIN_TYPES = frozenset((str, dict, list, int, float, bool, type(None), bytes, tuple))


class _Unguarded:
    """What :meth:`SyncPolicy.guard` says of a declared ``thread=False`` function on a loop that cannot be handed
    over (uvloop, ...): it runs inline, unguarded."""

    __slots__ = ()


_UNGUARDED = _Unguarded()

_TICK_S = 0.010  # CPU times from getrusage can lag by a scheduler tick
#: How far past ``long_ms`` one exact CPU reading may be and still be only a strike (MAYBE), not a demotion: the
#: kernel charges the running thread for work that is not the function's (interrupts and softirqs where it is not
#: built with IRQ_TIME_ACCOUNTING, reclaim in a page fault); a 0.3 ms computation read as 2.2 ms once in ~600
#: preempted calls on a loaded CI machine. A function that computes that long does it again: three strikes within
#: MAYBE_WINDOW_S demote it.
CPU_SLACK_S = 0.004


NOT, MAYBE, WAITED, YES = 0, 1, 2, 3  # verdicts of _by_itself (WAITED: by wall time less CPU time, not exact)
#: Short waits (under long_ms + two switch intervals) that may have been for the GIL, or computations past long_ms
#: by less than CPU_SLACK_S (measured exactly) that may have been the kernel's: this many within
#: MAYBE_WINDOW_S seconds of each other demote a function, fewer are forgiven.
MAYBE_STRIKES = 3
MAYBE_WINDOW_S = 10.0


def _by_itself(u0: Any, u1: Any, wall: float, long_s: float) -> int:
    """Whether a call that took ``wall`` (more than ``long_s``) took it by itself: YES when it computed that
    long; WAITED when it waited (slept, blocked on I/O or a lock) and took longer than ``long_s`` + two switch
    intervals, which may also be the OS preempting it, so :func:`_by_sched` has the last word where it can;
    MAYBE for a shorter wait, which may have been for the GIL held by another thread; NOT when the OS merely
    preempted it (a busy machine, a CPU quota)."""
    cpu: float = (u1.ru_utime + u1.ru_stime) - (u0.ru_utime + u0.ru_stime)
    if u0.ru_nvcsw < 0:  # no switch counts: precise CPU time, and any wait counts
        return YES if cpu > long_s or wall - cpu > WAIT_SLACK_S else NOT
    if cpu > long_s + _TICK_S:
        return YES  # computed that long, preempted or not
    if u1.ru_nvcsw > u0.ru_nvcsw:
        # it waited: for the GIL, another thread holds it at most a switch interval (5 ms) before it must hand it
        # over, so a longer wait is the function's own; but the wall time also holds any time the OS kept it off
        # the CPU meanwhile (one GIL hand-over to the watchdog in a preempted call is a wait)
        return WAITED if wall > long_s + 2 * switch_interval() else MAYBE
    return YES if u1.ru_nivcsw == u0.ru_nivcsw else NOT  # never preempted, never waited: it computed


def _by_sched(span: tuple[float, float, float, float, float], took: float, own: float, long_s: float) -> int:
    """:func:`_by_itself` for a call measured exactly (``span``: the call's wall seconds, the thread's CPU seconds
    and run-queue seconds during it, the other threads' run-queue seconds meanwhile, and those of the ones that may
    have held the GIL meanwhile). A wait is the time the thread was neither running nor runnable (asleep: on I/O,
    a lock, the GIL). YES when it computed past ``long_s`` (outside garbage collection, ``took - own``), or waited
    past ``long_s`` + two switch intervals beyond the time the threads that may have held the GIL were kept off
    the CPU (those the OS preempted; all of them when the call's own thread was preempted too, as it then held
    the GIL long enough for a thread to ask for it and be waited for); MAYBE for a wait past ``long_s`` beyond
    all the other threads' run-queue time (perhaps for the GIL) or a computation past ``long_s`` by less than
    :data:`CPU_SLACK_S` (perhaps the kernel's work charged to the thread); NOT otherwise: it was preempted, or it
    waited for the GIL held by a thread the OS kept off the CPU (or woken to take the GIL over from it) meanwhile."""
    wall, cpu, queued, woken, preempted = span
    computed = cpu - (took - own)
    if computed > long_s + CPU_SLACK_S:
        return YES
    waited = wall - cpu - queued
    if waited - preempted > long_s + 2 * switch_interval():
        return YES  # longer than another thread can hold the GIL it asked for (unless the OS preempts it)
    return MAYBE if waited - woken > long_s or computed > long_s else NOT


def _evidence(span: tuple[float, float, float, float, float]) -> str:
    """What a call measured with the scheduler's times did meanwhile, for the warning that demotes it."""
    wall, cpu, queued, _, preempted = span
    return (
        f"{cpu * 1000:.1f} ms on a CPU, {queued * 1000:.1f} ms waiting for one, {(wall - cpu - queued) * 1000:.1f} ms"
        f" asleep; threads that may have held the GIL were kept off a CPU {preempted * 1000:.1f} ms"
    )


def _usage_evidence(u0: Any, u1: Any) -> str:
    """What a call timed with the thread's usage counters did meanwhile, for the warning that demotes it."""
    cpu = (u1.ru_utime + u1.ru_stime) - (u0.ru_utime + u0.ru_stime)
    if u0.ru_nvcsw < 0:
        return f"{cpu * 1000:.1f} ms on a CPU"
    return (
        f"{cpu * 1000:.1f} ms on a CPU, {u1.ru_nvcsw - u0.ru_nvcsw} waits,"
        f" {u1.ru_nivcsw - u0.ru_nivcsw} preemptions by the OS"
    )


def _blocked(u0: Any, u1: Any, wall: float) -> bool:
    """Whether the thread waited (slept, blocked on I/O or a lock) between the two readings."""
    if u0.ru_nvcsw >= 0:
        return bool(u1.ru_nvcsw > u0.ru_nvcsw)
    return bool(wall - (u1.ru_utime - u0.ru_utime) > WAIT_SLACK_S)


def check_sync_limits(long_ms: float | None, learn_calls: int | None) -> None:
    """ValueError naming the option when a limit is out of range (None: not given)."""
    if long_ms is not None and not long_ms > 0:
        raise ValueError(f"sync_long_ms must be a positive number of milliseconds, not {long_ms!r}")
    if learn_calls is not None and (not isinstance(learn_calls, int) or learn_calls < 1):
        raise ValueError(f"sync_learn_calls must be an integer of at least 1, not {learn_calls!r}")


class SyncPolicy:
    """Where one sync function runs (inline or on a worker thread), learned from its calls unless declared.

    Args:
        fn: the plain function.
        what: how warnings name it, e.g. ``"tool 'echo'"``.
        thread: True = always a worker thread, False = always inline, None = learn (see the module docs).
        learnable: False keeps a ``thread=None`` function on the worker thread (e.g. it takes a Context).
        long_ms, learn_calls: the limits (module docs); :meth:`configure` changes them later.
    """

    __slots__ = (
        "__weakref__",  # (named in the shutdown warning of the worker pool: name_work)
        "_fast",
        "_fast_s",
        "_maybe",
        "_maybe_at",
        "_relearn",
        "_span",
        "_strikes",
        "_suspect",
        "_suspect_window",
        "_window",
        "declared",
        "exact",
        "fn",
        "inline_fn",
        "learn_calls",
        "long_s",
        "mode",
        "what",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        what: str,
        thread: bool | None = None,
        *,
        learnable: bool = True,
        long_ms: float = DEFAULT_LONG_MS,
        learn_calls: int = DEFAULT_LEARN_CALLS,
    ) -> None:
        self.fn: Callable[..., Any] = fn
        #: what an inline call calls: ``fn``, or a wrapper that measures it while the function is suspect
        self.inline_fn: Callable[..., Any] = fn
        self.what: str = what
        self.declared: bool = thread is False
        if thread is False:
            self.mode: int = INLINE
            hook_gc()
        elif thread is None and learnable:
            self.mode = LEARNING
        else:
            self.mode = THREAD
        self._fast = 0
        self._strikes = 0  # long calls while learning (see _measured)
        self._relearn = 0  # fast calls in a row a function sent to the thread while learning needs (0: for good)
        self.exact: int = 0  # inline calls still to be timed with the thread's usage counters too (see ran_long)
        self._window = 0  # the length of the last window of exactly timed calls (0: none yet)
        self._maybe = 0
        self._maybe_at = 0.0
        self._suspect = 0  # inline calls still to measure with the scheduler's times (see ran_long)
        self._suspect_window = 0  # the length of the last suspicion (0: none yet)
        # what _watched measured of the call that just ended (see _by_sched)
        self._span: tuple[float, float, float, float, float] | None = None
        self.long_s: float = 0.0
        self._fast_s = 0.0
        self.learn_calls: int = 0
        self.configure(long_ms, learn_calls)
        name_work(fn, what)  # (a call still running at shutdown is named: "tool 'slow'")
        name_work(self, what)  # (a learning call runs self._measured)

    def configure(self, long_ms: float | None = None, learn_calls: int | None = None) -> None:
        """Change the limits (``MCPKit`` passes its ``sync_long_ms`` / ``sync_learn_calls`` here)."""
        check_sync_limits(long_ms, learn_calls)
        if long_ms is not None:
            self.long_s = long_ms / 1000
            self._fast_s = self.long_s / 10
        if learn_calls is not None:
            self.learn_calls = learn_calls

    @property
    def mode_name(self) -> str:
        """``"thread"``, ``"learning"`` or ``"inline"``."""
        return _MODE_NAMES[self.mode]

    # ------------------------------------------------------------------ inline

    def try_inline(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call the function inline on the running loop when the policy says so and return what it returned;
        :data:`ON_THREAD` (not called) when it must run on a worker thread instead, :data:`EAGER` (not called)
        when the running task is in its eager first step (the caller yields one loop turn, ``await
        asyncio.sleep(0)``, and asks again). The runtime runs it (:func:`mcpkit._runtime.run_inline`: the loop
        stays served if the call runs long) and tells :meth:`ran_long` of a call longer than ``long_ms``; the
        thread's usage counters (a system call) are read around a call only once a call of this function has run
        long without an explanation."""
        if self.mode != INLINE:
            return ON_THREAD
        return run_inline(self.inline_fn, args, kwargs, self)

    def ran_long(self, took: float, own: float, u0: Any, k0: int = -1) -> None:
        """``took`` seconds, of which ``own`` outside garbage collection (which would pause the loop anyway);
        ``u0``: the thread's usage counters when the call started (None: not read, the call was timed with the
        clock alone); ``k0``: the watchdog's wake count when the call started (where the scheduler's times cannot
        be read, a short wait overlapping a wake is forgiven)."""
        if self.mode != INLINE or self.declared or own <= self.long_s:
            return
        span = self._span
        u1: Any = None
        if span is not None:  # measured exactly (the function is suspect): the scheduler has the last word
            self._span = None
            verdict = _by_sched(span, took, own, self.long_s)
        elif u0 is None:
            # The clock alone cannot tell the function's own wait or computation from the OS running something
            # else meanwhile (a busy machine, a CPU quota): its next calls are timed exactly, and the next one that
            # runs long among them is judged. (The loop's hand-over kept other requests served meanwhile.) Each
            # window is twice the one before, so a function that blocks now and then is caught all the same.
            window = min(self._window * 2, EXACT_CALLS_MAX) if self._window else EXACT_CALLS
            self._window = self.exact = window
            logger.debug("%s ran %.1f ms inline: its next %d calls are timed exactly", self.what, took * 1000, window)
            return
        else:
            u1 = thread_usage()
            verdict = _by_itself(u0, u1, own, self.long_s)
        if verdict == NOT:
            self.exact = self._window  # the OS ran something else meanwhile: the machine is busy, the window restarts
            if span is not None:
                self._suspect_window = 0  # (and a suspicion was the OS's doing: the next one starts short again)
            return
        if verdict == MAYBE:
            self.exact = self._window
            if span is None and TICKS[0] != k0 and run_delay() is None:
                # the watchdog woke meanwhile: the wait may have been its turn with the GIL, and with no scheduler's
                # times to tell, it is forgiven (where they can be read, the short waits make the function suspect:
                # its calls are measured, the time woken threads waited for a CPU is subtracted, and a wake of the
                # watchdog, which holds the GIL for microseconds, is no excuse; it wakes every 5 ms)
                return
            now = clock()
            self._maybe = self._maybe + 1 if now - self._maybe_at < MAYBE_WINDOW_S else 1
            self._maybe_at = now
            if self._maybe < MAYBE_STRIKES:
                return  # perhaps a GIL wait (another thread ran Python): forgiven unless it keeps happening
        if span is None and verdict != YES and run_delay() is not None:
            self._suspect_begins()  # a wait by the wall time only: the OS may have kept it off the CPU meanwhile
            return
        self._suspicion_ends()
        self.mode = THREAD
        logger.warning(
            "%s ran %.1f ms inline on the event loop (%s; more than sync_long_ms=%g), holding up other requests "
            "until the loop was handed to another thread (15 ms at most); it runs on a worker thread from now "
            "on. Declare thread=True for functions that can block, or raise MCPKit(sync_long_ms=...).",
            self.what,
            took * 1000,
            _evidence(span) if span is not None else _usage_evidence(u0, u1),
            self.long_s * 1000,
        )

    def _suspect_begins(self) -> None:
        """A wait by wall time less CPU time would demote the function, but the wall time also holds the time the
        OS kept the thread off the CPU (a busy machine preempts it; its one GIL hand-over then counts as a wait).
        Rather than demote it, measure its next inline calls with the scheduler's run-queue time too: the next
        one that runs long is judged by :func:`_by_sched`. A window twice the last one (so a function that blocks
        now and then is confirmed all the same), back to :data:`SUSPECT_CALLS` once the OS was seen to blame."""
        window = self._suspect_window
        window = min(window * 2, SUSPECT_CALLS_MAX) if window else SUSPECT_CALLS
        self._suspect_window = self._suspect = window
        self.exact = max(self.exact, self._window)
        self._maybe = 0  # (short waits count again once measured exactly)
        self.inline_fn = self._watched
        logger.debug("%s waited inline: its next %d calls are measured with the scheduler's times", self.what, window)

    def _suspicion_ends(self) -> None:
        self._suspect = 0
        self._span = None
        self.inline_fn = self.fn

    def _watched(self, *args: Any, **kwargs: Any) -> Any:
        """A suspect function's inline call: the thread's CPU time and run-queue time read around it, and the other
        threads' run-queue time (for :meth:`ran_long`, which judges the call if it runs long). Once the suspicion
        has run out unconfirmed, the function is called plainly again."""
        if self._suspect <= 0:
            self._suspicion_ends()
            return self.fn(*args, **kwargs)
        self._suspect -= 1
        self._span = None
        o0 = others_delay()
        q0 = run_delay()
        u0 = thread_usage()
        c0 = time.thread_time()
        t0 = clock()
        try:
            return self.fn(*args, **kwargs)
        finally:
            t1 = clock()
            c1 = time.thread_time()
            u1 = thread_usage()
            q1 = run_delay()
            if q0 is not None and q1 is not None:
                # the others' run-queue time only for a call that ran long (the one that is judged)
                # (read afresh: a thread that got an idle CPU meanwhile and still runs has not switched yet)
                woken, preempted, light = (
                    delay_between(o0, others_delay(True), t1 - t0) if t1 - t0 > self.long_s else (0.0, 0.0, 0.0)
                )
                if u1.ru_nivcsw != u0.ru_nivcsw:
                    # preempted itself while it held the GIL: a thread that asked for the GIL meanwhile made it
                    # give the GIL up when it ran again, and wait until that thread, woken, got a CPU (the
                    # runtime's own light threads too, which otherwise never keep it waiting long)
                    preempted = woken = min(t1 - t0, woken + light)
                self._span = (t1 - t0, c1 - c0, q1 - q0, woken, preempted)

    # ------------------------------------------------------------------ worker thread

    def _measured(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Runs on the worker while learning (or relearning after a long learning call): time the call, promote
        after enough fast, non-waiting calls in a row."""
        t0 = clock()
        u0 = thread_usage()
        try:
            return self.fn(*args, **kwargs)
        finally:
            wall = clock() - t0
            mode = self.mode
            if mode == LEARNING or (mode == THREAD and self._relearn):
                u1 = thread_usage()
                blocked = _blocked(u0, u1, wall)
                if wall > self.long_s and (blocked or _by_itself(u0, u1, wall, self.long_s) == YES):
                    # it waited or computed long: on the thread, perhaps for good; one slow call (a cold cache, a
                    # first-time import) may be followed by fast ones, which bring it back, more of them each time
                    self._strikes += 1
                    self._fast = 0
                    self._relearn = self.learn_calls << self._strikes if self._strikes < LEARN_STRIKES else 0
                    self.mode = THREAD
                elif blocked or wall > self._fast_s:
                    self._fast = 0  # it waited (or was slow, perhaps only preempted): start counting again
                else:
                    self._fast += 1
                    if self._fast >= (self.learn_calls if mode == LEARNING else self._relearn):
                        hook_gc()
                        self._relearn = 0  # (once inline, a long call is judged by ran_long: never learned again)
                        self.mode = INLINE
                        logger.debug("%s: %d fast calls, now runs inline", self.what, self._fast)

    def on_thread(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> asyncio.Future[Any]:
        """Call on a worker thread (the loop's default executor, this task's contextvars)."""
        ctx = contextvars.copy_context()
        call: functools.partial[Any]
        if self.mode == LEARNING or self._relearn:
            call = functools.partial(ctx.run, self._measured, args, kwargs)
        else:
            call = functools.partial(ctx.run, self.fn, *args, **kwargs)
        return asyncio.get_running_loop().run_in_executor(None, call)

    def guard(self) -> LoopHandoff | _Unguarded | None:
        """How the next call would run: inline under the returned guard (the running loop's
        :class:`~mcpkit._runtime.LoopHandoff`, or an unguarded marker for a declared function on a loop that cannot
        be handed over), or on a worker thread (None). :meth:`try_inline` decides the same way and runs the call
        in one step; this is for diagnostics and tests."""
        if self.mode != INLINE:
            return None
        h = running_guard()
        if h is None:
            return _UNGUARDED if self.declared else None
        return None if h.lost else h

    async def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function where the policy says and return its result (awaited, if it returned an awaitable)."""
        value = self.try_inline(args, kwargs)
        if value is EAGER:
            await asyncio.sleep(0)  # out of the callback that started this task (see in_eager_step)
            value = self.try_inline(args, kwargs)
        if value is ON_THREAD or value is EAGER:
            value = await self.on_thread(args, kwargs)
        if type(value) not in PLAIN_TYPES and inspect.isawaitable(value):
            value = await value
        return value


__all__ = [
    "DEFAULT_LEARN_CALLS",
    "DEFAULT_LONG_MS",
    "EAGER",
    "EXACT_CALLS",
    "EXACT_CALLS_MAX",
    "ON_THREAD",
    "PLAIN_TYPES",
    "INLINE",
    "LEARNING",
    "LEARN_STRIKES",
    "THREAD",
    "SyncPolicy",
    "check_sync_limits",
]
