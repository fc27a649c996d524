"""What a call cost: the run-queue time and preemption counts of the process's other threads
(``mcpkit._runtime.usage``), read by the sync policy around a suspect function's calls."""

from __future__ import annotations

import _thread
import contextlib
import os
import subprocess
import sys
import threading
import time

import pytest

from mcpkit._runtime import delay_between, others_delay, run_delay
from mcpkit._runtime.usage import OTHERS_MAX, light_thread
from support.cpu import crowded_cpu, pinned_to
from support.paths import TESTS

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


def test_threads_threading_does_not_know_are_read_too() -> None:
    """A thread started outside ``threading`` (as a C extension starts its own, which may take the GIL) is read like
    the others: it can hold the GIL a call waits for as well."""
    started = threading.Event()
    stop = threading.Event()
    native: list[int] = []

    def run() -> None:
        native.append(threading.get_native_id())
        started.set()
        stop.wait(30)

    _thread.start_new_thread(run, ())
    try:
        assert started.wait(10)
        assert native[0] not in {t.native_id for t in threading.enumerate()}  # (threading does not know it)
        reading = others_delay(True)
        assert reading is not None and native[0] in reading
    finally:
        stop.set()


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
    # join() returns when the thread's Python part is done; the OS thread leaves /proc/self/task (what the reading
    # lists, C extensions' threads included) a moment later: wait for that, bounded
    deadline = time.monotonic() + 5.0
    while os.path.exists(f"/proc/self/task/{tid}") and time.monotonic() < deadline:
        time.sleep(0.001)
    others_delay()
    assert files_of(tid) == 0  # it ended: its files closed
    stop, threads = idle_threads(0)
    try:
        while threading.active_count() - 1 <= OTHERS_MAX + 8 and len(threads) < 200:
            threads.append(threading.Thread(target=stop.wait, args=(30,), daemon=True))
            threads[-1].start()
        assert others_delay() is None
        assert delay_between(None, None, 1.0) == (0.0, 0.0, 0.0)
        assert files_of(threads[-1].native_id) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(5)
    assert others_delay() is not None


def reads() -> int:
    """How many read system calls the calling thread has made so far (its ``/proc/thread-self/io``)."""
    with open("/proc/thread-self/io", "rb") as f:
        return int(f.read().split(b"syscr:")[1].split()[0])


@pytest.mark.skipif(not os.path.exists("/proc/thread-self/io"), reason="no I/O accounting to count the reads")
def test_a_reading_of_the_other_threads_reads_only_what_can_have_moved_since_the_last() -> None:
    """A suspect call reads the other threads' figures before it runs, so their cost bounds its cost: when no other
    thread switched or ran since the last reading, nothing of theirs is read again (the last reading holds); a
    reading afresh reads each thread's run-queue time, and its preemption count (the costly file) only when the
    thread ran since; a thread that ran is read again.

    In a process of its own, whose threads are the scenario's: the test runner's process holds threads that earlier
    tests left behind (a loop's parked stand-in thread ends up to 10 s after its loop closed), which start, run and
    end at their own times, and a reading rightly reads them again."""
    code = (
        f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
        "from runtime.test_usage import read_only_what_moved\n"
        "read_only_what_moved()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def read_only_what_moved() -> None:
    """The scenario of the test above, in a process where no thread but its own runs."""
    n = 48
    stop, threads = idle_threads(n)
    wake, done = threading.Event(), threading.Event()

    def compute_when_woken() -> None:
        while wake.wait(30) and not done.is_set():
            wake.clear()
            end = time.thread_time() + 0.02  # (past a scheduler tick)
            while time.thread_time() < end:
                pass

    worker = threading.Thread(target=compute_when_woken, daemon=True)
    worker.start()
    try:
        time.sleep(0.05)  # (all of them waiting)
        overhead = -reads() + reads()
        first = others_delay(True)
        assert first is not None and len(first) == n + 1, first
        r0 = reads()
        again = others_delay(True)
        afresh = reads() - r0 - overhead
        assert again is not None and again.keys() == first.keys(), (again, first)
        assert afresh <= len(first), (afresh, len(first))  # one read each, none of the idle ones' status
        quiet = []
        for _ in range(20):  # (this thread's own CPU time, counted late, may show in the process's: read again)
            r0 = reads()
            same = others_delay()
            quiet.append(reads() - r0 - overhead)
            if quiet[-1] == 0:
                break
        assert quiet[-1] == 0 and same is not None and same.keys() == first.keys(), quiet
        wake.set()
        while wake.is_set():
            time.sleep(0.005)
        time.sleep(0.03)  # (it computed 20 ms, and waits again)
        r0 = reads()
        after = others_delay()
        moved = reads() - r0 - overhead
        assert moved >= len(first), (moved, len(first))  # it ran since: read again
        assert after is not None and after[worker.native_id or 0][0] >= first[worker.native_id or 0][0], after
    finally:
        stop.set()
        done.set()
        wake.set()
        for t in [*threads, worker]:
            t.join(5)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
@pytest.mark.parametrize("light", [False, True], ids=["a thread", "a light thread of the runtime"])
def test_a_thread_the_os_keeps_off_the_cpu_shows_its_run_queue_time_and_preemptions(light: bool) -> None:
    """A thread that computes on a CPU a busy process shares is preempted: its run-queue time between two readings
    counts, both among all threads' and among the preempted ones'; each is at most the time between the
    readings. The runtime's own light threads (its watchdog thread, the thread that hears the helper process), which
    take the GIL for microseconds, count apart: their wait for a CPU is not one a call waits for the GIL."""
    done = threading.Event()

    def compute() -> None:
        with pinned_to(cpu), light_thread() if light else contextlib.nullcontext():
            while not done.is_set():
                sum(range(10_000))

    worker = threading.Thread(target=compute, daemon=True)
    with crowded_cpu(1) as cpu:
        try:
            worker.start()
            time.sleep(0.05)
            t0 = time.perf_counter()
            before = others_delay()
            time.sleep(0.5)
            after = others_delay()
            within = time.perf_counter() - t0
            woken, preempted, apart = delay_between(before, after, within)
            if light:
                assert 0.0 < apart <= within and woken < apart, (woken, preempted, apart, within)
            else:
                assert 0.0 < preempted <= woken <= within, (woken, preempted, within)
        finally:
            done.set()
            worker.join(5)
