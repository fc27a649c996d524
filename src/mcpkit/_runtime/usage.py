"""What a call cost the thread that ran it: the clock, the thread's usage counters, and the time garbage collection
took meanwhile (a collection pauses the loop wherever a function runs, so it is not held against the function)."""

from __future__ import annotations

import functools
import gc
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
