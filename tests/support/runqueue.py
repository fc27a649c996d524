"""How long the OS kept processes off the CPU: the scheduler's run-queue time (Linux ``/proc``), to tell a delay
that is mcpkit's own from one a busy machine imposed.

A test that bounds how long an event loop goes unserved measures wall time, which on a loaded machine (two cores
shared with CPU hogs and other test runs, load 20-30) holds whatever time the threads that must act were
runnable and waiting for a CPU. :class:`RunQueue` sums that time over every thread of the processes that take part
(this one, a server subprocess, the helper processes they started), so a test can bound the delay net of it: the
same bound as on an idle machine, where the sum stays near zero."""

from __future__ import annotations

import contextlib
import os


def _children(pid: int) -> list[int]:
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as f:
                found += (int(c) for c in f.read().split())
    return found


class RunQueue:
    """The run-queue seconds of processes ``pids`` (this one by default) and their descendants, every thread of
    each, summed since the first reading: call the instance for a reading. A thread that ends takes nothing of the
    sum back, and one that starts counts from its start. Where ``/proc`` does not say (not Linux), every reading is
    0.0, so a test bounds the wall time alone. Descendants and their threads are looked up on :meth:`refresh` (and
    at the first reading): a thread started since is not read until the next.

    A sum over threads is right for a chain of threads that act one after another (the watch wakes, then the
    stand-in runs the loop); threads that wait for a CPU side by side (two that wake on timers of their own) add
    up to more than the delay they caused, so on a loaded machine a bound net of this sum is lenient."""

    def __init__(self, *pids: int) -> None:
        self.roots = pids or (os.getpid(),)
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
        while todo and self.available:
            pid = todo.pop()
            pids.append(pid)
            todo += _children(pid)
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
