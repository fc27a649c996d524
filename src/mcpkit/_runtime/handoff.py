"""Keeping the event loop serving while a sync function runs inline on its thread for too long.

A plain ``def`` learned to be fast runs inline on the event loop (see :mod:`mcpkit.server.sync_exec`): no thread
hand-off, the speed of an ``async def``. Python cannot move a running call off a thread, so a function that suddenly
blocks (a slow disk, a lock, ``time.sleep``) would stall every other request for as long as it runs. Instead,
the *loop* moves: a watchdog notices an inline call that has run for 10 ms (it looks every 5 ms: 10-15 ms after the
call's start), and a stand-in thread takes over running the loop (``_run_once``) while the call goes on. When the
call returns, its thread takes the loop back at the stand-in's next turn and carries on where it was. Other requests are
served all along; the slow call's own request simply finishes later. (Go's runtime does the same for a
goroutine stuck in a system call: its processor passes to another OS thread.)

Only one thread runs the loop at any time, and the hand-over happens where the loop's state is whole: the
stand-in runs complete ``_run_once`` turns, and the call's thread waits for the end of one before going on. Three
things of the interrupted turn are put back as they were: the loop's thread id, the task being run (asyncio
records one per loop), and the count of ready callbacks that turn still expects to find.

An inline call made by a transport's read callback itself, not by a task (the HTTP lane answers in the protocol's
``data_received``): the callback's handle is the transport's reader, which the stand-in would run again while it
is still under way on the call's thread (its context entered there: an error each turn; the parser fed mid-call).
The transport names itself in :attr:`LoopHandoff.reader` around such calls; a hand-over then pauses its reading on
the stand-in's first turn and says so in :attr:`LoopHandoff.paused_reader`, for the transport to resume once its
callback's call has returned (:func:`reader_calls`).

Where it applies: asyncio's own event loops (``BaseEventLoop``: the selector loop uvicorn and ``asyncio.run``
use) on CPython 3.11-3.13. Elsewhere (uvloop, another Python) :func:`handoff_for` returns None, and a learned
sync function runs on a worker thread instead (a declared ``thread=False`` one still runs inline, unguarded).

One consequence to know: during a hand-over, coroutines and callbacks run on the stand-in's thread, so async
code that keys its state by thread (``threading.local``, ``threading.get_ident()``) sees another thread then;
``contextvars`` are unaffected.

Who watches: a small helper process (:mod:`.loop_watch`) where one can be started (POSIX, a ``sys.executable``
to run; one per loop that makes inline calls, ~10 MB, started at the first inline call, ended when the loop is
gone), else a watchdog thread here (``MCPKIT_LOOP_WATCH=thread`` asks for the thread). The loop's thread writes
each inline call's number into a memory cell the helper shares and reads every tick; the helper reports a call seen
on looks 10 ms apart through a pipe, to a thread that waits for it here without the GIL. A watchdog *thread* has
to take the GIL at every tick instead, and on a loop busy with requests it waits for it while the loop's thread
keeps taking it back: measured, that cost a saturated server 5% of its throughput (Streamable HTTP, 32 concurrent,
plain ``def`` tools: 141 µs of server CPU per call with the thread, 134 without; with the helper 130, as fast as
``async def`` tools). The watchdog thread watches from the first inline call until the helper runs (its first
message), and again if the helper dies.

Costs: the guard adds about 0.5 µs to an inline call (a thread-id lookup, a few attribute writes, a list append
and pop, two writes to the cell); the watch looks every 5 ms while inline calls happen and every 100 ms (helper)
or not at all (thread) after a second without them; the stand-in thread waits, parked, from the loop's first
inline call (started at the first hand-over, it made that hand-over wait for the GIL twice more).
Worst case: a call that blocks stalls the loop for 10-15 ms per hand-over (the watch's looks), plus, when the call
computes in Python instead of waiting, the GIL's switch interval (5 ms by default) once, for the thread that hears
the helper (or the watchdog thread's looks): while a loop is handed over, or its watchdog thread is about to hand
it over, the process's switch interval is held at 1 ms (:data:`QUICK_SWITCH_S`), so the stand-in's steps and the
turns it serves wait at most that long for the GIL (measured, CPython 3.11-3.13 on a machine with a CPU free: the
gap a computing call starts in, 45-60 ms with 5 ms waits and the stand-in started at the hand-over, is 24-32 ms;
the loop's later gaps 10-20 ms, now 6-8 ms). With the helper, up to 110 ms for a call that starts blocking after
a second without inline calls (its idle looks).
A call that holds the GIL in C code for long stalls every thread, so no thread can help it.
"""

from __future__ import annotations

import asyncio
import asyncio.events
import asyncio.tasks
import contextlib
import logging
import mmap
import os
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from .loop_watch import CELL_SIZE
from .usage import clock, gc_time, light_thread, thread_usage

logger: logging.Logger = logging.getLogger("mcpkit.server.sync")


#: How long (seconds) the watch must see an inline call under way to hand the loop over: a call seen on looks this far
#: apart is handed over.
TICK_S = 0.010
#: How often (seconds) the watch looks at the inline call under way, while inline calls happen: twice per
#: :data:`TICK_S`, so a call that runs long is handed over 10 to 15 ms after its start (not 10 to 20).
LOOK_S = TICK_S / 2
#: The GIL's switch interval (seconds) while a loop is handed over, or its watchdog thread is about to hand it
#: over: the threads that serve the loop then wait at most this long for a thread that computes to let go of the
#: GIL (see :func:`_quicken`).
QUICK_SWITCH_S = 0.001
#: Seconds without inline calls after which the watchdog sleeps until the next one.
IDLE_S = 1.0

_ATTR = "_mcpkit_handoff"
_current_tasks: dict[Any, Any] | None = getattr(asyncio.tasks, "_current_tasks", None)
# 3.12+: the tasks in their eager first step (asyncio.Task(..., eager_start=True) runs it synchronously, inside
# whatever callback created the task: the stdio transport's read handler, for one)
_eager_tasks: set[Any] | None = getattr(asyncio.tasks, "_eager_tasks", None)
_current_task = asyncio.current_task
_SUPPORTED = (3, 11) <= sys.version_info[:2] <= (3, 13) and _current_tasks is not None


def _noop() -> None:
    return None


#: How many times any watchdog has woken (it takes the GIL then): a short GIL wait of an inline call that
#: overlaps a wake may have been for the watchdog, so where the scheduler's times cannot be read sync_exec does not
#: hold it against the function (where they can, it measures the call instead: see usage.delay_between).
TICKS = [0]
_unsupported: set[type] = set()  # loop classes that cannot be handed over (uvloop, ...)
_by_thread: dict[int, LoopHandoff] = {}  # thread id -> the guard of the loop it last ran (checked on use)
_get_ident = threading.get_ident


def handoff_for(loop: asyncio.AbstractEventLoop) -> LoopHandoff | None:
    """The hand-off guard of ``loop`` (made on first use), or None where the loop cannot be handed over."""
    h: LoopHandoff | None = getattr(loop, _ATTR, None)
    if h is not None or type(loop) in _unsupported:
        return h
    if not (_SUPPORTED and isinstance(loop, asyncio.BaseEventLoop) and hasattr(loop, "_run_once")):
        _unsupported.add(type(loop))
        return None
    h = LoopHandoff(loop)
    setattr(loop, _ATTR, h)
    return h


def in_eager_step() -> bool:
    """Whether the running task is in its eager first step (CPython 3.12+), i.e. inside the callback that
    created it. An inline call must not run there: if it ran long, the stand-in could not run that callback's
    handle again (its context is entered on the call's thread; for a transport's read handler, the read would
    also re-enter the handler mid-call). The caller yields one loop turn first (``await asyncio.sleep(0)``), and
    the call runs in the task's own step. Cheap when no eager step is under way (an empty set)."""
    return bool(_eager_tasks) and _current_task() in _eager_tasks  # type: ignore[operator]


def running_guard() -> LoopHandoff | None:
    """The guard of the event loop running on this thread (None: it cannot be handed over). A dictionary
    lookup by thread id, checked against the loop's own record of its thread (``get_running_loop()`` costs a
    ``getpid()`` on CPython 3.11)."""
    tid = _get_ident()
    h = _by_thread.get(tid)
    if h is not None:
        loop = h._loop()
        if loop is not None and loop._thread_id == tid:  # type: ignore[attr-defined]
            return h
    h = handoff_for(asyncio.get_running_loop())
    if h is not None:
        if len(_by_thread) > 256:
            _by_thread.clear()  # (threads that ran loops once: a bound, not an eviction policy)
        _by_thread[tid] = h
    return h


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: What :func:`run_inline` returns when the function must run on a worker thread (it was not called).
ON_THREAD: Any = _Sentinel("ON_THREAD")
#: What :func:`run_inline` returns inside a task's eager first step (it was not called).
EAGER: Any = _Sentinel("EAGER")


class InlinePolicy(Protocol):
    """What :func:`run_inline` asks of the policy of the function it runs (``mcpkit.server.sync_exec.SyncPolicy``)."""

    declared: bool  # declared inline: it runs inline, unguarded, where the loop cannot be handed over
    # how many more calls to time with the thread's usage counters (a system call) as well as the clock; run_inline
    # counts it down (0: the clock alone)
    exact: int
    long_s: float  # a call that held the loop longer than this (seconds) is reported to ran_long

    def ran_long(self, took: float, own: float, u0: Any, k0: int) -> None:
        """A call held the loop ``took`` seconds, ``own`` of them outside garbage collection; ``u0``: the thread's
        usage counters when it started (None when it was timed by the clock alone); ``k0``: :data:`TICKS` when it
        started."""


def run_inline(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], policy: InlinePolicy) -> Any:
    """Call ``fn(*args, **kwargs)`` inline on the event loop running on this thread, under the loop's hand-off guard
    (a call that runs long gets the loop served by a stand-in thread meanwhile), and return what it returned; a
    call that held the loop longer than ``policy.long_s`` is reported to ``policy.ran_long`` (the policy judges
    it). Without calling it, :data:`ON_THREAD` when it must run on a worker thread instead (the loop is handed over
    meanwhile, or it cannot be handed over and the policy is not ``declared`` inline: a declared one then runs
    unguarded), :data:`EAGER` when the running task is in its eager first step (the caller yields one loop turn and
    asks again; see :func:`in_eager_step`).

    The one place an inline call takes the hand-off slot: the guard's lookup by thread id (checked against the
    loop's own record of its thread), the slot, the helper's cell, the timing and the call, in one frame."""
    tid = _get_ident()
    h = _by_thread.get(tid)
    if h is None or (loop := h._loop()) is None or loop._thread_id != tid:  # type: ignore[attr-defined]
        h = running_guard()
        if h is None:  # a loop that cannot be handed over: only a declared function runs inline, unguarded
            return fn(*args, **kwargs) if policy.declared else ON_THREAD
    if h.lost:
        return ON_THREAD  # the loop is handed over meanwhile: inline functions run on worker threads
    if _eager_tasks and in_eager_step():
        return EAGER
    seq = h._seq + 1
    h._seq = seq
    slot = h._slot
    slot.append(seq)  # (the watchdog takes it out to hand the loop over; see LoopHandoff)
    cell = h._cell
    if cell is None and h._sleeping:
        h._rouse()
        cell = h._cell
    if cell is not None:
        cell[0] = seq  # (the helper process reads it: see .loop_watch)
    ready = len(h._ready)
    if policy.exact:
        u0 = thread_usage()
        policy.exact -= 1
    else:
        u0 = None
    k0 = TICKS[0]
    g0 = gc_time[0]
    t0 = clock()
    try:
        return fn(*args, **kwargs)
    finally:
        took = clock() - t0
        try:
            if took > policy.long_s:
                policy.ran_long(took, took - (gc_time[0] - g0), u0, k0)
        finally:
            if cell is not None:
                cell[0] = -seq
            try:
                slot.pop()
            except IndexError:  # the watchdog took it: the loop was handed over
                h._take_back(ready)


def reader_calls(transport: Any, call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` made by ``transport``'s read callback, not by a task (the HTTP lane, the stdio server): its
    inline calls may be handed over, and the stand-in then pauses ``transport``'s reading on its first turn
    (``pause_reading``) and resumes it once ``call`` has returned (``resume_reading``), see the module docs. What
    ``transport`` names is the reading of that one callback: the stdio server gives an object whose pause hands the
    rest of the callback's input to the stand-in, which reads on (there is nothing to resume then). Resumed here,
    in the caller's context (a reader resumed inside ``call``'s context would run every later read in it). The
    loop's guard, if it has one, is looked up by thread id (:func:`running_guard`)."""
    h = running_guard() if _SUPPORTED else None
    if h is None:
        return call(*args)
    before = h.reader
    h.reader = transport
    try:
        return call(*args)
    finally:
        h.reader = before
        if h.paused_reader is transport:
            h.paused_reader = None
            if not transport.is_closing():
                transport.resume_reading()


class LoopHandoff:
    """The guard of one event loop: it keeps the loop served while a sync function called inline by
    :func:`run_inline` runs long (see the module docs). Made by :func:`handoff_for`."""

    __slots__ = (
        "__weakref__",
        "_cell",
        "_error",
        "_go",
        "_handing",
        "_handovers",
        "_held_reader",
        "_loop",
        "_parked",
        "_quick",
        "_ready",
        "_reclaim",
        "_seq",
        "_sleeping",
        "_slot",
        "_stand_in",
        "_starting",
        "_task",
        "_tried_watch",
        "_wake",
        "_watchdog",
        "lost",
        "paused_reader",
        "reader",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)
        self._ready = loop._ready  # type: ignore[attr-defined]
        self._seq = 0  # numbers the inline calls
        # the number of the call under way on the loop's thread (empty: none). The call's thread and the
        # watchdog each take it out with one atomic list operation (pop, remove): whoever gets it decides
        # whether the call's thread goes on running the loop or the stand-in takes it over. No lock.
        self._slot: list[int] = []
        #: True from a hand-over until the loop's thread has taken the loop back.
        self.lost: bool = False
        self._reclaim = False  # the call's thread wants the loop back: the stand-in stops after its turn
        self._sleeping = True  # the watchdog sleeps (or is not started yet) until the next inline call wakes it
        # the cell the helper process watches (see .loop_watch): the number of the inline call under way, negated
        # when it ends; None while the watch is a thread here (or not started yet)
        self._cell: Any = None
        self._tried_watch = False  # the helper process is tried once: if it cannot run, the watch is a thread
        self._wake = threading.Event()
        self._go = threading.Event()  # starts the stand-in
        self._handing = threading.Lock()  # held by a hand-over (see _hand_over)
        self._starting = threading.Lock()  # held while the stand-in thread is made (see _prepare_stand_in)
        self._parked = threading.Event()  # the stand-in has finished its last turn
        self._task: Any = None  # the task of the interrupted turn
        #: the transport whose read callback makes the inline calls now, not a task (None: a task makes them)
        self.reader: Any = None
        self._held_reader: Any = None  # the reader of an interrupted callback, for the stand-in to pause
        #: the reader the stand-in paused (its transport resumes it once the call has returned)
        self.paused_reader: Any = None
        self._error: BaseException | None = None  # what the stand-in's turn raised (re-raised by the owner)
        self._watchdog: threading.Thread | None = None
        self._stand_in: tuple[threading.Thread, int] | None = None  # the stand-in thread, and the pid it was made in
        self._handovers = 0
        self._quick = False  # this guard holds the switch interval at QUICK_SWITCH_S (see _quicken)

    @property
    def handovers(self) -> int:
        """How many times the loop was handed to the stand-in (diagnostics, tests)."""
        return self._handovers

    # ------------------------------------------------------------------ watchdog

    def _rouse(self) -> None:
        self._sleeping = False
        if not self._tried_watch:
            self._tried_watch = True
            _start_watch(self)  # the helper takes the watch over once it runs; this thread watches until then
        if self._watchdog is None or not self._watchdog.is_alive():  # (not alive: this is a forked child)
            self._watchdog = threading.Thread(target=self._watch, name="mcpkit-loop-watchdog", daemon=True)
            self._watchdog.start()
        self._prepare_stand_in()
        self._wake.set()

    def _watch(self) -> None:
        with light_thread():  # (it takes the GIL for a look: see usage.delay_between)
            self._watch_calls()

    def _watch_calls(self) -> None:
        seen = 0
        count = 0  # how many looks in a row after the first have seen the call ``seen``
        looks = max(1, round(TICK_S / LOOK_S))
        quiet_since = time.monotonic()
        last_seq = -1
        while True:
            loop = self._loop()
            if loop is None or loop.is_closed():
                _quicken(self, False)
                self._go.set()  # let a parked stand-in end too
                return
            del loop
            if self._cell is not None and not self._slot:
                # The helper process watches now: every call from here on writes its cell (a call reads the cell
                # after it fills the slot, so none can slip between this look and the helper).
                _quicken(self, False)
                self._watchdog = None
                return
            TICKS[0] += 1
            slot = self._slot
            job = slot[0] if slot else 0
            count = count + 1 if job and job == seen else 0
            if count >= looks and not self.lost:
                self._hand_over(job)
            elif count and not self.lost:
                # Its next look hands it over: this thread then waits for the GIL a short switch interval (not
                # the default 5 ms) when the call computes, and so does the stand-in
                _quicken(self, True)
            elif not count and not self.lost:
                _quicken(self, False)
            seen = job
            if self._seq != last_seq or job:
                last_seq = self._seq
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since > IDLE_S:
                self._wake.clear()
                self._sleeping = True
                woken = bool(self._slot)  # (run() fills the slot before it reads _sleeping: one sees the other)
                if not woken:
                    woken = self._wake.wait(IDLE_S)  # (a timeout only looks whether the loop is closed)
                self._sleeping = False
                if woken:
                    quiet_since = time.monotonic()
                continue
            time.sleep(LOOK_S)

    def _hand_over(self, job: int) -> None:
        # One hand-over at a time, and none while the loop is handed over: while the helper process starts, the
        # watchdog thread and the helper's listener both watch, and the second to see a call may act after the
        # first handed the loop over (it looked at ``lost`` before); its _parked.clear() would then erase the
        # stand-in's word to a _take_back under way, which would wait for ever.
        with self._handing:
            if self.lost:
                return
            self._hand_over_now(job)

    def _hand_over_now(self, job: int) -> None:
        loop = self._loop()
        if loop is None:
            return
        # Ordered so that the call's thread, if its call ends right after the remove below, waits in
        # _take_back until the stand-in has started and stopped (it sets _parked only after _go).
        self._parked.clear()
        try:
            self._slot.remove(job)  # atomic: only while that very call is still under way
        except ValueError:
            return  # the call ended meanwhile: its thread goes on running the loop
        self.lost = True
        _quicken(self, True)
        assert _current_tasks is not None
        self._task = _current_tasks.pop(loop, None)
        self._held_reader = self.reader if self._task is None else None
        self._handovers += 1
        self._prepare_stand_in()
        self._go.set()

    # ------------------------------------------------------------------ the stand-in

    def _prepare_stand_in(self) -> None:
        """Start the stand-in thread (parked until a hand-over), unless it runs. It starts with the watch, not at the
        first hand-over: starting a thread there waits for the GIL twice more (the new thread's start, then the
        hand-over's turn again), each a switch interval when the call computes."""
        with self._starting:  # (the loop's thread at the first inline call, a watch's hand-over: one of them starts it)
            # The one made in this process is the stand-in, whether it runs yet or not: made but not started, or
            # started and not yet running (is_alive() is False until then, though its ident is set), it sees the
            # hand-over's _go once it runs. One made in another process is the parent's (this is a forked child).
            if self._stand_in is not None and self._stand_in[1] == os.getpid():
                return
            stand_in = threading.Thread(target=self._stand_in_main, name="mcpkit-loop-stand-in", daemon=True)
            self._stand_in = (stand_in, os.getpid())
        try:
            stand_in.start()
        except BaseException:
            self._stand_in = None  # (never started: the next call tries again)
            raise

    def _stand_in_main(self) -> None:
        while True:
            go = self._go.wait(IDLE_S * 10)
            loop = self._loop()
            if loop is None or loop.is_closed():
                self._parked.set()
                return
            if not go:
                continue
            self._go.clear()
            if self.lost:
                self._serve(loop)
            del loop

    def _serve(self, loop: Any) -> None:
        """Run the loop's turns until its own thread wants it back (or the loop stops)."""
        hooks = sys.get_asyncgen_hooks()
        loop._thread_id = threading.get_ident()
        asyncio.events._set_running_loop(loop)
        sys.set_asyncgen_hooks(firstiter=loop._asyncgen_firstiter_hook, finalizer=loop._asyncgen_finalizer_hook)
        try:
            reader, self._held_reader = self._held_reader, None
            if reader is not None:  # (the interrupted callback is its reader: see above)
                with contextlib.suppress(Exception):  # (a transport that cannot tell or pause: served as before)
                    if reader.is_reading():
                        reader.pause_reading()
                        self.paused_reader = reader
            while not self._reclaim and not loop._stopping:
                loop._run_once()
        except BaseException as exc:  # a callback raised SystemExit/KeyboardInterrupt: the owner re-raises it
            self._error = exc
        finally:
            asyncio.events._set_running_loop(None)
            sys.set_asyncgen_hooks(*hooks)
            self._parked.set()

    # ------------------------------------------------------------------ taking the loop back

    def _take_back(self, ready: int) -> None:
        """On the loop's own thread, once the long call has returned: wait for the stand-in's turn to end, then
        restore what the interrupted turn expects and go on with it."""
        loop: Any = self._loop()
        self._reclaim = True
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(Exception):
                loop._write_to_self()  # the stand-in may be waiting in select()
        interrupted: BaseException | None = None
        while True:  # never go on while the stand-in may still run the loop, whatever interrupts the wait
            try:
                self._parked.wait()
                break
            except BaseException as exc:  # KeyboardInterrupt, ...: raised once the loop is back
                interrupted = exc
        self._reclaim = False
        if loop is not None:
            loop._thread_id = threading.get_ident()
            if self._task is not None and _current_tasks is not None:
                _current_tasks[loop] = self._task
            self._task = None
            # the interrupted turn pops as many ready callbacks as it counted at its start; the stand-in has
            # run some of them: make sure the count is still there (no-ops that cost nothing)
            for _ in range(ready - len(loop._ready)):
                loop._ready.append(asyncio.events.Handle(_noop, (), loop, None))
        _quicken(self, False)
        self.lost = False
        error, self._error = self._error, None
        if interrupted is not None:
            raise interrupted
        if error is not None:
            raise error


# ------------------------------------------------------------------------------------------- the switch interval

_quick_lock = threading.Lock()
_quick_guards: weakref.WeakSet[LoopHandoff] = weakref.WeakSet()  # the guards that hold the interval short
_switch_before = [0.0]  # the switch interval before the first of them


def _quicken(h: LoopHandoff, on: bool) -> None:
    """Hold the GIL's switch interval at :data:`QUICK_SWITCH_S` while ``h`` hands its loop over or has it handed over
    (``on``), or let go of it. A thread that asks for the GIL held by a thread that computes waits a switch interval
    before the holder must let go: the default 5 ms, at each step of a hand-over (the stand-in's start, each
    ``select`` of its turns) and at each turn of the loop the stand-in then serves. The interval is the process's:
    it is set back when no guard holds it any more, unless something else changed it meanwhile."""
    with _quick_lock:
        if h._quick == on:
            return
        h._quick = on
        if on:
            if not _quick_guards:
                _switch_before[0] = sys.getswitchinterval()
                if _switch_before[0] > QUICK_SWITCH_S:
                    sys.setswitchinterval(QUICK_SWITCH_S)
            _quick_guards.add(h)
        else:
            _quick_guards.discard(h)
            if not _quick_guards and _switch_before[0] > QUICK_SWITCH_S == sys.getswitchinterval():
                sys.setswitchinterval(_switch_before[0])


def switch_interval() -> float:
    """The GIL's switch interval as it is while no loop is handed over (:func:`_quicken` shortens it meanwhile): how
    long a thread may hold the GIL another one asked for, for a call that ran under either."""
    with _quick_lock:
        return max(sys.getswitchinterval(), _switch_before[0]) if _quick_guards else sys.getswitchinterval()


# ---------------------------------------------------------------------------------------------- the helper process

#: Whether inline calls are watched from a helper process where one can be started (see :mod:`.loop_watch`);
#: ``MCPKIT_LOOP_WATCH=thread`` keeps the watch in a thread of the server process.
WATCH_PROCESS = os.environ.get("MCPKIT_LOOP_WATCH", "process") != "thread"
_WATCH_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loop_watch.py")


def _start_watch(h: LoopHandoff) -> bool:
    """Start the helper process that watches ``h``'s inline calls and the thread that hears its alarms; False
    (nothing started, nothing left open) where that cannot be done: the watch is then a thread here."""
    loop = h._loop()
    if not WATCH_PROCESS or loop is None or os.name != "posix" or not sys.executable or getattr(sys, "frozen", False):
        return False  # (a frozen application's executable is the application, not a Python to run a script)
    opened: list[int] = []
    try:
        memfd = getattr(os, "memfd_create", None)
        if memfd is not None:
            fd = memfd("mcpkit-loop-watch")
        else:
            fd, path = tempfile.mkstemp(prefix="mcpkit-loop-watch-")
            os.unlink(path)
        opened.append(fd)
        os.ftruncate(fd, CELL_SIZE)
        cell = memoryview(mmap.mmap(fd, CELL_SIZE)).cast("q")
        alarm_r, alarm_w = os.pipe()
        opened += (alarm_r, alarm_w)
        life_r, life_w = os.pipe()
        opened += (life_r, life_w)
        args = [str(fd), str(alarm_w), str(life_r), str(LOOK_S * 1000), str(TICK_S * 1000), str(IDLE_S * 1000)]
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", _WATCH_SCRIPT, *args],
            pass_fds=(fd, alarm_w, life_r),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        logger.debug("no helper process to watch inline calls (%s): a watchdog thread does it", exc)
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)
        return False
    for fd in (opened[0], alarm_w, life_r):  # the helper's ends
        os.close(fd)
    weakref.finalize(loop, os.close, life_w)  # the loop gone: the helper sees end of file and ends
    listener = threading.Thread(
        target=_listen, args=(weakref.ref(h), alarm_r, proc, cell), name="mcpkit-loop-watch", daemon=True
    )
    listener.start()
    _watched.add(h)
    return True


_watched: weakref.WeakSet[LoopHandoff] = weakref.WeakSet()


def _forget_watches() -> None:
    """In a forked child: the helper processes and threads watching the parent's loops are not this process's;
    a loop used on in the child starts its own watch at its next inline call."""
    for h in list(_watched):
        h._cell = None
        h._tried_watch = False
        h._sleeping = True
    _watched.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_watches)


def _listen(ref: weakref.ref[LoopHandoff], alarm: int, proc: subprocess.Popen[bytes], cell: memoryview) -> None:
    """In a thread of the server process, blocked in ``read`` (without the GIL): the helper's first message (call
    number 0) says it runs, and the calls write ``cell`` from then on; hand the loop over for each call it reports
    after that. When the helper ends (the loop is gone, or it was killed), the watch falls back to a thread."""
    with light_thread():  # (it takes the GIL only to hand the loop over: see usage.delay_between)
        _hear(ref, alarm, proc, cell)


def _hear(ref: weakref.ref[LoopHandoff], alarm: int, proc: subprocess.Popen[bytes], cell: memoryview) -> None:
    try:
        while True:
            try:
                data = os.read(alarm, 8)
            except OSError:
                data = b""
            h = ref()
            if len(data) < 8 or h is None:
                if h is not None and h._cell is not None:
                    h._cell = None
                    h._sleeping = True  # the next inline call starts the watchdog thread
                return
            job = int.from_bytes(data, "little")
            if job == 0:
                h._cell = cell  # (the watchdog thread hands over to the helper at its next tick)
            else:
                TICKS[0] += 1
                if not h.lost:
                    h._hand_over(job)
            del h
    finally:
        os.close(alarm)
        with contextlib.suppress(Exception):
            proc.wait(5)


def read_in_chunks(transport: Any, size: int) -> None:
    """Make an asyncio read-pipe transport read ``size`` bytes at a time (the ``max_size`` of asyncio's own
    ``_UnixReadPipeTransport``; other event loops' transports, e.g. uvloop's, are left as they are)."""
    with contextlib.suppress(AttributeError, TypeError):
        if getattr(transport, "max_size", 0) > size:
            transport.max_size = size
