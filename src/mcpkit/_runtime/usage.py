"""What a call cost the thread that ran it: the clock, the thread's usage counters, and the time garbage collection
took meanwhile (a collection pauses the loop wherever a function runs, so it is not held against the function)."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

#: The clock inline calls are timed with.
clock = time.perf_counter


class Usage(NamedTuple):
    """What ``getrusage(RUSAGE_THREAD)`` gives, where it is missing: no switch counts, precise CPU time."""

    ru_nvcsw: int
    ru_nivcsw: int
    ru_utime: float
    ru_stime: float


try:
    import resource

    #: (voluntary, involuntary context switches, CPU seconds) of the calling thread, read straight from the C
    #: struct: a function that sleeps, waits for I/O or a lock gives up the CPU voluntarily; one the OS preempts
    #: does not. The CPU time is tick-grained (it may lag by a tick).
    thread_usage: Callable[[], Any] = functools.partial(resource.getrusage, resource.RUSAGE_THREAD)
except (ImportError, AttributeError):  # no per-thread rusage (not Linux): waits show as wall time minus CPU

    def thread_usage() -> Any:
        """The thread's CPU time, without switch counts (``ru_nvcsw`` -1)."""
        return Usage(-1, -1, time.thread_time(), 0.0)


#: The most other threads :func:`others_delay` reads the figures of (it keeps two files open for each); with
#: more, it gives None (no closer look: a wait is judged as if no other thread could have held the GIL).
OTHERS_MAX = 64
#: Other threads' CPU time (µs) that may go by between two readings of :func:`others_delay` without the second
#: looking at any thread: the calling thread's own time between its two ``getrusage`` calls, which counts in the
#: difference of the process's and the thread's CPU time.
QUIET_SLACK_US = 50

try:
    from resource import RUSAGE_SELF, RUSAGE_THREAD, getrusage

    def _others_moved_since() -> tuple[int, int, int]:
        """What the process's other threads have done so far, from two ``getrusage`` calls (for every thread of
        the process, Python's or not): their context switches, their CPU microseconds (with the calling thread's
        between the two calls), and how many threads Python knows."""
        own = getrusage(RUSAGE_THREAD)
        all_ = getrusage(RUSAGE_SELF)
        switches = all_.ru_nvcsw + all_.ru_nivcsw - own.ru_nvcsw - own.ru_nivcsw
        cpu = all_.ru_utime + all_.ru_stime - own.ru_utime - own.ru_stime
        return switches, int(cpu * 1e6), threading.active_count()

except (ImportError, AttributeError):  # (no per-thread rusage: not Linux, and then no /proc either)

    def _others_moved_since() -> tuple[int, int, int]:
        return -1, -1, -1


class _SchedStat:
    """The calling thread's ``/proc/thread-self/schedstat``, opened once (a reading is one ``pread``) and closed
    with the thread's local data when the thread ends; and, once :func:`others_delay` is asked, the same file and
    the ``status`` file of each other thread of the process, a C extension's too (at most :data:`OTHERS_MAX`).

    A reading of the others costs little more than two ``getrusage`` calls when no other thread switched or ran
    since the last one (the threads of a pool waiting for work): the last one still holds, and is given again.
    Otherwise each thread's ``schedstat`` is read (one ``pread``), and its ``status`` (a larger file, ten times as
    long to make) only when the thread ran since its ``status`` was read: its preemption count cannot have moved
    otherwise."""

    __slots__ = ("fd", "last", "moved", "others", "pid", "seen")

    def __init__(self) -> None:
        self.pid: int = os.getpid()
        self.others: dict[int, tuple[int, int]] = {}  # native thread id -> its schedstat and status files
        # native thread id -> its CPU nanoseconds when its status was read, and its preemption count then
        self.seen: dict[int, tuple[int, int]] = {}
        self.last: dict[int, tuple[float, int]] | None = None  # the last reading of the others
        self.moved: tuple[int, int, int] = (-1, -1, -1)  # _others_moved_since() before it
        try:
            self.fd: int = os.open("/proc/thread-self/schedstat", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # not Linux, or no /proc
            self.fd = -1

    def run_delay(self) -> float | None:
        if self.fd < 0:
            return None
        try:  # "<ns on the CPU> <ns runnable, waiting for a CPU> <timeslices>"
            return int(os.pread(self.fd, 64, 0).split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return None

    def others_delay(self, fresh: bool) -> dict[int, tuple[float, int]] | None:
        if self.fd < 0:
            return None
        moved = _others_moved_since()
        last = self.last
        if (
            not fresh
            and last is not None
            and moved[0] == self.moved[0]
            and moved[2] == self.moved[2]
            and moved[1] - self.moved[1] < QUIET_SLACK_US
        ):
            # No other thread switched since the last reading, so none was preempted or woken since and none
            # got a CPU from another thread of ours; none ran a scheduler tick either: their figures are those
            # of the last reading (but for a thread that got an idle CPU within the last tick and still runs)
            return last
        self.last = None
        try:  # every thread of the process: a C extension's may hold the GIL too, and threading knows only its own
            threads = [int(tid) for tid in os.listdir("/proc/self/task")]
        except (OSError, ValueError):
            return None
        if len(threads) > OTHERS_MAX + 1:
            return None
        own = threading.get_native_id()
        files = self.others
        seen = self.seen
        out: dict[int, tuple[float, int]] = {}
        for tid in threads:
            if tid == own:
                continue
            fds = files.get(tid)
            try:
                if fds is None:
                    task = f"/proc/self/task/{tid}/"
                    fds = files[tid] = (
                        os.open(task + "schedstat", os.O_RDONLY | os.O_CLOEXEC),
                        os.open(task + "status", os.O_RDONLY | os.O_CLOEXEC),
                    )
                sched = os.pread(fds[0], 64, 0).split()
                ran = int(sched[0])
                was = seen.get(tid)
                if was is None or was[0] != ran:  # (it ran since: a switch is preceded by its CPU time's update)
                    status = os.pread(fds[1], 4096, 0)
                    at = status.index(b"nonvoluntary_ctxt_switches:") + 27
                    was = seen[tid] = (ran, int(status[at : status.index(b"\n", at)]))
                out[tid] = (int(sched[1]) / 1e9, was[1])
            except (OSError, ValueError, IndexError):  # (the thread ended meanwhile; its id may come back)
                self._close(tid)
        if len(files) > len(out):
            for tid in [tid for tid in files if tid not in out]:
                self._close(tid)  # (threads that ended: at most one file per live thread)
        self.last = out
        self.moved = moved
        return out

    def _close(self, tid: int) -> None:
        self.seen.pop(tid, None)
        for fd in self.others.pop(tid, ()):
            with contextlib.suppress(OSError):
                os.close(fd)

    def __del__(self) -> None:
        for tid in list(self.others):
            self._close(tid)
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)


_local = threading.local()


def _stat() -> _SchedStat:
    stat: _SchedStat | None = getattr(_local, "stat", None)
    if stat is None or stat.pid != os.getpid():  # (a forked child must read its own threads, not its parent's)
        stat = _local.stat = _SchedStat()
    return stat


def run_delay() -> float | None:
    """Seconds the calling thread has spent so far runnable but not running: preempted, or woken and waiting for a
    CPU (the scheduler's run-queue time, Linux ``/proc/thread-self/schedstat``); None where the scheduler does not
    say. A reading costs a system call (10-40 µs on a busy machine, when it may also hand the GIL to a thread
    waiting for it), so it is taken only around the calls of a function suspected of waiting (see
    ``mcpkit.server.sync_exec``), never on every call."""
    return _stat().run_delay()


def others_delay(fresh: bool = False) -> dict[int, tuple[float, int]] | None:
    """:func:`run_delay` of every other thread of the process (a C extension's too), and how many times the OS has
    preempted it (native thread id -> (seconds, involuntary switches)): one the OS keeps off the CPU while it holds
    the GIL makes a thread that waits for the GIL wait as long. None where the scheduler does not say, or with more
    than :data:`OTHERS_MAX` other threads. When no other thread switched or ran since the calling thread's last
    reading, that reading is given again (two ``getrusage`` calls); otherwise a system call per thread, and one more
    per thread that ran since (``fresh``: always so). It is read only around a suspect function's calls, like
    :func:`run_delay`."""
    return _stat().others_delay(fresh)


#: Native ids of the runtime's own threads that take the GIL only for moments: the watchdog thread (a look at the
#: inline call under way, every 5 ms while inline calls happen) and the thread that hears the helper process's
#: alarms. Each is here while it runs (see :func:`light_thread`): at most two per event loop that made inline calls.
_light: set[int] = set()


@contextlib.contextmanager
def light_thread() -> Iterator[None]:
    """Mark the calling thread, while the block runs, as one of the runtime's own that takes the GIL only for moments
    (:func:`delay_between` counts its run-queue time apart)."""
    tid = threading.get_native_id()
    _light.add(tid)
    try:
        yield
    finally:
        _light.discard(tid)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_light.clear)  # (the parent's threads are not the child's)


def delay_between(
    before: dict[int, tuple[float, int]] | None, after: dict[int, tuple[float, int]] | None, within: float
) -> tuple[float, float, float]:
    """The run-queue seconds the other threads spent between two readings of :func:`others_delay` ``within``
    seconds apart, summed: of all of them but the runtime's light ones (:func:`light_thread`), of those of them the
    OS preempted meanwhile (only those can have held the GIL while kept off the CPU), and of the light ones. A
    light thread holds the GIL for microseconds, so its wait for a CPU is no wait of a call's but while the call
    itself is preempted, holding the GIL the light thread then asks for; most of it is the wait after its timer
    wakes it, with the GIL free. A thread that started meanwhile counts from its start, one that ended meanwhile
    not at all; each thread's time is at most ``within`` (a wait that began before the first reading is counted
    when it ends), and so is each sum. (0.0, 0.0, 0.0) when either reading is None."""
    if before is None or after is None:
        return 0.0, 0.0, 0.0
    woken = preempted = light = 0.0
    for tid, (queued, switches) in after.items():
        queued0, switches0 = before.get(tid, (0.0, 0))
        d = min(within, max(0.0, queued - queued0))
        if tid in _light:
            light += d
            continue
        woken += d
        if switches != switches0:
            preempted += d
    return min(within, woken), min(within, preempted), min(within, light)


#: Seconds spent in garbage collection so far, counted once :func:`hook_gc` has run.
gc_time = [0.0]
_gc_start = [0.0]


def _gc_callback(phase: str, _info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_start[0] = clock()
    else:
        gc_time[0] += clock() - _gc_start[0]


def hook_gc() -> None:
    """Count the time of every garbage collection from now on (in :data:`gc_time`)."""
    if _gc_callback not in gc.callbacks:
        gc.callbacks.append(_gc_callback)
