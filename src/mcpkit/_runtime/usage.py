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


class _SchedStat:
    """The calling thread's ``/proc/thread-self/schedstat``, opened once (a reading is one ``pread``) and closed
    with the thread's local data when the thread ends."""

    __slots__ = ("fd", "pid")

    def __init__(self) -> None:
        self.pid: int = os.getpid()
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

    def __del__(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)


_local = threading.local()


def run_delay() -> float | None:
    """Seconds the calling thread has spent so far runnable but not running: preempted, or woken and waiting for a
    CPU (the scheduler's run-queue time, Linux ``/proc/thread-self/schedstat``); None where the scheduler does not
    say. A reading costs a system call (10-40 µs on a busy machine, when it may also hand the GIL to a thread
    waiting for it), so it is taken only around the calls of a function suspected of waiting (see
    ``mcpkit.server.sync_exec``), never on every call."""
    stat: _SchedStat | None = getattr(_local, "stat", None)
    if stat is None or stat.pid != os.getpid():  # (a forked child must read its own thread, not its parent's)
        stat = _local.stat = _SchedStat()
    return stat.run_delay()


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
