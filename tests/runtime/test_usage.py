"""What a call cost: the run-queue time and preemption counts of the process's other threads
(``mcpkit._runtime.usage``), read by the sync policy around a suspect function's calls."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time

import pytest

from mcpkit._runtime import delay_between, others_delay, run_delay
from mcpkit._runtime.usage import OTHERS_MAX

pytestmark = pytest.mark.skipif(run_delay() is None, reason="the scheduler's figures cannot be read here (no /proc)")


def files_of(tid: int | None) -> int:
    """How many files this process has open under /proc/self/task/<tid>/."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            n += f"/task/{tid}/" in os.readlink(f"/proc/self/fd/{fd}")
    return n


def idle_threads(n: int) -> tuple[threading.Event, list[threading.Thread]]:
    stop = threading.Event()
    threads = [threading.Thread(target=stop.wait, args=(30,), daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    return stop, threads


def test_other_threads_are_read_up_to_a_bound_and_ended_ones_let_go() -> None:
    """Each other thread's figures are read (the calling thread's are not), one pair of files kept open per
    thread; a thread that ended has its files closed at the next reading; with more than OTHERS_MAX other threads
    nothing is read (None), and reading resumes once they are fewer again."""
    stop, threads = idle_threads(1)
    tid = threads[0].native_id
    try:
        assert files_of(tid) == 0
        reading = others_delay()
        assert reading is not None
        assert threading.get_native_id() not in reading
        queued, switches = reading[tid or 0]
        assert queued >= 0.0 and switches >= 0
        assert files_of(tid) == 2  # its schedstat and status, kept open
        others_delay()
        assert files_of(tid) == 2  # (not opened again)
    finally:
        stop.set()
        threads[0].join(5)
    others_delay()
    assert files_of(tid) == 0  # it ended: its files closed
    stop, threads = idle_threads(0)
    try:
        while threading.active_count() - 1 <= OTHERS_MAX + 8 and len(threads) < 200:
            threads.append(threading.Thread(target=stop.wait, args=(30,), daemon=True))
            threads[-1].start()
        assert others_delay() is None
        assert delay_between(None, None, 1.0) == (0.0, 0.0)
        assert files_of(threads[-1].native_id) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    assert others_delay() is not None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_thread_the_os_keeps_off_the_cpu_shows_its_run_queue_time_and_preemptions() -> None:
    """A thread that computes on a CPU a busy process shares is preempted: its run-queue time between two readings
    counts, both among all threads' and among the preempted ones'; each is at most the time between the
    readings."""
    cpu = min(os.sched_getaffinity(0))
    hog = subprocess.Popen(
        [sys.executable, "-c", f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + 10\n"
         "while time.time() < end: pass"]
    )  # fmt: skip
    done = threading.Event()

    def compute() -> None:
        os.sched_setaffinity(0, {cpu})
        while not done.is_set():
            sum(range(10_000))

    worker = threading.Thread(target=compute, daemon=True)
    try:
        worker.start()
        time.sleep(0.05)
        t0 = time.perf_counter()
        before = others_delay()
        time.sleep(0.5)
        after = others_delay()
        within = time.perf_counter() - t0
        woken, preempted = delay_between(before, after, within)
        assert 0.0 < preempted <= woken <= within, (woken, preempted, within)
    finally:
        done.set()
        worker.join(5)
        hog.kill()
        hog.wait()
