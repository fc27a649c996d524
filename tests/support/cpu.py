"""One CPU shared with busy processes, for tests of what the OS's preemptions do to a thread (Linux: CPU affinity)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def crowded_cpu(hogs: int, seconds: float = 10) -> Iterator[int]:
    """Start ``hogs`` processes that compute on one CPU of this process's (for ``seconds`` at most) and give the CPU's
    number; kill them at the end. The caller pins the threads it wants preempted to it (:func:`pinned_to`)."""
    cpu = min(os.sched_getaffinity(0))
    # (an ordinary process even when the test runs at a real-time priority, ``chrt -f``, as an idle machine's
    # stand-in: a real-time hog would never let the test's threads on its CPU run)
    code = (
        f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nos.sched_setscheduler(0, os.SCHED_OTHER, "
        f"os.sched_param(0))\nend = time.time() + {seconds}\nwhile time.time() < end: pass"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(hogs)]
    try:
        yield cpu
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def pinned_to(cpu: int) -> Iterator[None]:
    """Pin the calling thread, and the threads it starts meanwhile, to ``cpu``; its affinity back at the end."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
