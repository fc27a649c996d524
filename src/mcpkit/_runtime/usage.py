"""What a call cost the thread that ran it: the clock, the thread's usage counters, and the time garbage collection
took meanwhile (a collection pauses the loop wherever a function runs, so it is not held against the function)."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import threading
import time
from collections.abc import Callable
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


class _SchedStat:
    """The calling thread's ``/proc/thread-self/schedstat``, opened once (a reading is one ``pread``) and closed
    with the thread's local data when the thread ends; and, once :func:`others_delay` is asked, the same file and
    the ``status`` file of each other thread of the process that runs Python (at most :data:`OTHERS_MAX`)."""

    __slots__ = ("fd", "others", "pid")

    def __init__(self) -> None:
        self.pid: int = os.getpid()
        self.others: dict[int, tuple[int, int]] = {}  # native thread id -> its schedstat and status files
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

    def others_delay(self) -> dict[int, tuple[float, int]] | None:
        if self.fd < 0:
            return None
        threads = threading.enumerate()
        if len(threads) > OTHERS_MAX + 1:
            return None
        own = threading.get_native_id()
        files = self.others
        out: dict[int, tuple[float, int]] = {}
        for t in threads:
            tid = t.native_id
            if tid is None or tid == own:
                continue
            fds = files.get(tid)
            try:
                if fds is None:
                    task = f"/proc/self/task/{tid}/"
                    fds = files[tid] = (
                        os.open(task + "schedstat", os.O_RDONLY | os.O_CLOEXEC),
                        os.open(task + "status", os.O_RDONLY | os.O_CLOEXEC),
                    )
                queued = int(os.pread(fds[0], 64, 0).split()[1]) / 1e9
                status = os.pread(fds[1], 4096, 0)
                at = status.index(b"nonvoluntary_ctxt_switches:") + 27
                out[tid] = (queued, int(status[at : status.index(b"\n", at)]))
            except (OSError, ValueError, IndexError):  # (the thread ended meanwhile; its id may come back)
                self._close(tid)
        if len(files) > len(out):
            for tid in [tid for tid in files if tid not in out]:
                self._close(tid)  # (threads that ended: at most one file per live thread)
        return out

    def _close(self, tid: int) -> None:
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


def others_delay() -> dict[int, tuple[float, int]] | None:
    """:func:`run_delay` of every other thread of the process that runs Python, and how many times the OS has
    preempted it (native thread id -> (seconds, involuntary switches)): one the OS keeps off the CPU while it holds
    the GIL makes a thread that waits for the GIL wait as long. None where the scheduler does not say, or with more
    than :data:`OTHERS_MAX` other threads. Two system calls per thread, so it is read only around a suspect
    function's calls, like :func:`run_delay`."""
    return _stat().others_delay()


def delay_between(
    before: dict[int, tuple[float, int]] | None, after: dict[int, tuple[float, int]] | None, within: float
) -> tuple[float, float]:
    """The run-queue seconds the other threads spent between two readings of :func:`others_delay` ``within``
    seconds apart, summed: of all of them, and of those the OS preempted meanwhile (only those can have held the
    GIL while kept off the CPU). A thread that started meanwhile counts from its start, one that ended meanwhile
    not at all; each thread's time is at most ``within`` (a wait that began before the first reading is counted
    when it ends), and so is each sum. (0.0, 0.0) when either reading is None."""
    if before is None or after is None:
        return 0.0, 0.0
    woken = preempted = 0.0
    for tid, (queued, switches) in after.items():
        queued0, switches0 = before.get(tid, (0.0, 0))
        d = min(within, max(0.0, queued - queued0))
        woken += d
        if switches != switches0:
            preempted += d
    return min(within, woken), min(within, preempted)


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
