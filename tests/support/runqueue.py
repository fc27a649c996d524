"""How long the OS kept processes off the CPU: the scheduler's run-queue time (Linux ``/proc``), to tell a delay
that is mcpkit's own from one a busy machine imposed.

A test that bounds how long an event loop goes unserved measures wall time, which on a loaded machine (two cores
shared with CPU hogs and other test runs, load 20-30) holds whatever time the threads that must act were
runnable and waiting for a CPU. :class:`RunQueue` sums that time over every thread of the processes that take part
(this one, a server subprocess, the helper processes they started), so a test can bound the delay net of it: the
same bound as on an idle machine, where the sum stays near zero.

Reading it costs system calls, which let go of the GIL: while a thread of the process computes, each one waits a
switch interval to take the GIL back, and the reading makes the delays it should measure. :class:`Sampled` reads it
from a child process instead (this file, run as a script), and gives the sum at any moment from its samples.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterable


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found += (int(c) for c in f.read().split())
    return found


def children_by_parent() -> dict[int, list[int]]:
    """Every process's children, from a scan of ``/proc`` (each process's parent in its ``stat``): also those the
    per-thread ``children`` files miss (a kernel without CONFIG_PROC_CHILDREN). About 6 ms on a test machine."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(entry))
    return kids


class RunQueue:
    """The run-queue seconds of processes ``pids`` (this one by default) and their descendants, every thread of
    each, summed since the first reading: call the instance for a reading. A thread that ends takes nothing of the
    sum back, and one that starts counts from its start. Where ``/proc`` does not say (not Linux), every reading is
    0.0, so a test bounds the wall time alone. Descendants and their threads are looked up on :meth:`refresh` (and
    at the first reading): a thread started since is not read until the next. ``scan``: descendants are found by a scan
    of ``/proc`` (each process's parent) rather than by the threads' ``children`` files, which a kernel without
    CONFIG_PROC_CHILDREN lacks.

    A sum over threads is right for a chain of threads that act one after another (the watch wakes, then the
    stand-in runs the loop); threads that wait for a CPU side by side (two that wake on timers of their own) add
    up to more than the delay they caused, so on a loaded machine a bound net of this sum is lenient."""

    def __init__(self, *pids: int, leave_out: int = 0, scan: bool = False) -> None:
        self.roots = pids or (os.getpid(),)
        # find descendants by a scan of /proc on each refresh (~6 ms: only for a caller that refreshes outside the
        # intervals it measures) rather than by the threads' children files
        self.scan = scan
        self.leave_out = leave_out  # a process (and its threads) not to read: the sampler's own
        self.available = os.path.exists("/proc/self/task")
        self.pids: list[int] = []
        self.files: dict[tuple[int, int], int] = {}  # (pid, thread id) -> its schedstat, open (a reading: a pread)
        self.total = 0
        self.last: dict[tuple[int, int], int] = {}
        self.refresh()
        self()
        self.total = 0

    def refresh(self) -> None:
        """Look up the descendants, and the threads of each, again."""
        pids: list[int] = []
        todo = list(self.roots)
        kids = children_by_parent() if self.scan and self.available else None
        while todo and self.available:
            pid = todo.pop()
            if pid == self.leave_out or pid in pids:
                continue
            pids.append(pid)
            todo += _children(pid) if kids is None else kids.get(pid, ())
        self.pids = pids
        threads: set[tuple[int, int]] = set()
        for pid in pids:
            with contextlib.suppress(OSError):
                threads.update((pid, int(tid)) for tid in os.listdir(f"/proc/{pid}/task"))
        for key in set(self.files) - threads:
            with contextlib.suppress(OSError):
                os.close(self.files.pop(key))
        for pid, tid in threads - set(self.files):
            with contextlib.suppress(OSError):
                self.files[pid, tid] = os.open(f"/proc/{pid}/task/{tid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)

    def close(self) -> None:
        """Close the files read."""
        for fd in self.files.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.files.clear()

    def __del__(self) -> None:
        self.close()

    def __call__(self) -> float:
        if not self.available:
            return 0.0
        now: dict[tuple[int, int], int] = {}
        for key, fd in self.files.items():
            try:  # "<ns on the CPU> <ns runnable, waiting for a CPU> <timeslices>"
                now[key] = int(os.pread(fd, 64, 0).split()[1])
            except (OSError, ValueError, IndexError):  # (the thread ended)
                continue
        last = self.last
        self.total += sum(ns - last.get(key, 0) for key, ns in now.items())
        self.last = now
        return self.total / 1e9


class Sampled:
    """:class:`RunQueue` of this process and ``also`` (and their descendants) read every ``every`` seconds by a child
    process, which takes none of this process's GIL; :meth:`stop` ends the sampling, then :meth:`at` gives the sum at
    any moment in between (``time.perf_counter()``, the same clock in both processes on Linux), linear between two
    samples. The sampler's own threads are not counted. Where ``/proc`` does not say, every sum is 0.0. (``also``:
    helper processes the caller knows of, for a kernel without ``/proc/<pid>/task/<tid>/children``, where
    descendants are not found.)"""

    def __init__(self, every: float = 0.001, also: Iterable[int] = ()) -> None:
        self.samples: list[tuple[float, float]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-I", __file__, str(every), str(os.getpid()), *map(str, also)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self.proc.stdout is not None
        self.proc.stdout.readline()  # (it samples from now on)

    def stop(self) -> None:
        """End the sampling and take the samples."""
        out, _ = self.proc.communicate(timeout=30)
        self.samples = [(t, q) for t, q in json.loads(out)]

    def at(self, when: float) -> float:
        """The run-queue seconds summed from the first sample to ``when``."""
        times = [t for t, _ in self.samples]
        i = bisect.bisect_left(times, when)
        if i == 0 or i == len(times):
            return self.samples[min(i, len(times) - 1)][1] if times else 0.0
        (t0, q0), (t1, q1) = self.samples[i - 1], self.samples[i]
        return q0 + (q1 - q0) * (when - t0) / (t1 - t0)


def _sample(every: float, *pids: int) -> None:
    """The sampler: read the run queue of ``pids`` and their descendants (but this process) every ``every`` seconds
    until stdin closes, then write the samples to stdout as JSON."""
    queued = RunQueue(*pids, leave_out=os.getpid())
    samples: list[tuple[float, float]] = []
    print("sampling", flush=True)
    refreshed = 0.0
    while not select.select([sys.stdin], [], [], every)[0]:
        now = time.perf_counter()
        if now - refreshed > 0.02:
            queued.refresh()  # (threads and helper processes started meanwhile)
            refreshed = now
        samples.append((now, queued()))
    json.dump(samples, sys.stdout)


if __name__ == "__main__":
    _sample(float(sys.argv[1]), *map(int, sys.argv[2:]))
