"""What a test leaves behind: asyncio tasks still running, calls still running on worker threads (a plain ``def``
tool that never returned), child processes still alive (or never reaped), sockets still listening. Take a
:class:`LeakProbe` before, check it after::

    probe = LeakProbe.take()
    ... start and stop servers and clients ...
    await probe.assert_clean()          # waits a little for what is ending, then fails naming what is left

Child processes and listening sockets are read from ``/proc`` (Linux); elsewhere only tasks are checked
(:attr:`LeakProbe.sees_processes` says which). mcpkit's own helper process that watches the inline calls of an event
loop lives as long as that loop (it ends when the loop is gone), so it is not counted. :func:`running_functions`
tells whether some function is still suspended in a task of the loop (that a cancelled tool really stopped, for
instance).

A probe taken in an event loop makes that loop's default executor (where servers run plain ``def`` tools on worker
threads) mcpkit's worker pool, whose threads the loop's close waits for at most a second: a tool that never returns
then fails the check, naming it, instead of hanging the loop's close (``asyncio.run`` and pytest-asyncio wait for
the default executor's threads without a limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from .._runtime.workers import WorkerPool, describe

_PROC = "/proc"
# mcpkit's helper that watches an event loop's inline sync calls (server/loop_handoff.py): it ends with its loop
_LOOP_HELPER = re.compile(r" -I -S \S*[/\\]mcpkit[/\\]\S*loop_watch\.py ")


def running_functions(tasks: Iterable[asyncio.Task[Any]] | None = None) -> set[str]:
    """The names of the Python functions currently suspended in the tasks of the running loop (or in ``tasks``),
    following each task's chain of awaits."""
    names: set[str] = set()
    for task in asyncio.all_tasks() if tasks is None else tasks:
        coro: Any = task.get_coro()
        depth = 0
        while coro is not None and depth < 100:
            code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
            if code is not None:
                names.add(code.co_name)
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
            depth += 1
    return names


def _task_line(task: asyncio.Task[Any]) -> str:
    stack = [frame.f_code.co_name for frame in task.get_stack(limit=8)]
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", None) or type(coro).__name__
    return f"task {task.get_name()} running {name}" + (f" (at {' > '.join(stack)})" if stack else "")


def child_processes() -> dict[int, str]:
    """This process's children (pid -> state and command line), from ``/proc``; empty where there is none. The
    loop-watch helper of mcpkit's event loops is left out (it ends with its loop)."""
    me = os.getpid()
    found: dict[int, str] = {}
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"{_PROC}/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after its last ')'
        rest = stat[stat.rfind(")") + 2 :].split()
        if len(rest) < 2 or int(rest[1]) != me:
            continue
        try:
            with open(f"{_PROC}/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmdline = ""
        if _LOOP_HELPER.search(cmdline + " "):
            continue
        state = "zombie (exited, never reaped)" if rest[0] == "Z" else "running"
        found[int(entry)] = f"{state}: {cmdline or stat[: stat.rfind(')') + 1]}"
    return found


def listening_ports() -> set[int]:
    """The TCP ports this process listens on (IPv4 and IPv6), from ``/proc``; empty where there is none."""
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"{_PROC}/self/fd")
    except OSError:
        return set()
    for fd in fds:
        try:
            target = os.readlink(f"{_PROC}/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            with open(f"{_PROC}/self/net/{table}") as fh:
                next(fh, None)
                for line in fh:
                    cols = line.split()
                    # sl local_address rem_address st ... inode: st 0A is LISTEN
                    if len(cols) > 9 and cols[3] == "0A" and cols[9] in inodes:
                        ports.add(int(cols[1].rsplit(":", 1)[1], 16))
        except OSError:
            continue
    return ports


# the worker pool a probe made the default executor of its loop, one per loop (a second probe reuses it)
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WorkerPool] = weakref.WeakKeyDictionary()


def _loop_pool() -> WorkerPool | None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    pool = _POOLS.get(loop)
    if pool is None:
        pool = _POOLS[loop] = WorkerPool()
        loop.set_default_executor(pool)
    return pool


@dataclass
class Leaks:
    """What was left: tasks (a line each), child processes (pid -> what it is), listening ports."""

    tasks: list[str] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)
    ports: set[int] = field(default_factory=set)
    threads: list[str] = field(default_factory=list)  # what worker threads still run (``tool 'slow'``)

    def __bool__(self) -> bool:
        return bool(self.tasks or self.processes or self.ports or self.threads)

    def __str__(self) -> str:
        lines = [*self.tasks]
        lines += [f"a worker thread still running {what}" for what in self.threads]
        lines += [f"child process {pid} {what}" for pid, what in sorted(self.processes.items())]
        lines += [f"a socket still listening on port {port}" for port in sorted(self.ports)]
        return "\n".join(lines)


class LeakProbe:
    """A picture of the running tasks, worker-thread calls, child processes and listening ports, to compare with
    later ones."""

    def __init__(
        self,
        tasks: set[asyncio.Task[Any]],
        processes: dict[int, str],
        ports: set[int],
        pool: WorkerPool | None = None,
    ) -> None:
        self.tasks = tasks
        self.processes = processes
        self.ports = ports
        self.pool = pool
        self.calls: list[Callable[..., Any]] = pool.running() if pool is not None else []

    @classmethod
    def take(cls) -> LeakProbe:
        """The picture now (the tasks of the running loop, if there is one, whose default executor becomes
        mcpkit's worker pool: see the module's text)."""
        try:
            tasks = set(asyncio.all_tasks())
        except RuntimeError:
            tasks = set()
        return cls(tasks, child_processes(), listening_ports(), _loop_pool())

    @property
    def sees_processes(self) -> bool:
        """Child processes and ports can be read here (Linux ``/proc``)."""
        return os.path.isdir(f"{_PROC}/self/fd")

    def leaks(self) -> Leaks:
        """What appeared since the picture and is still there (the calling task excepted)."""
        try:
            current = asyncio.current_task()
            now = {t for t in asyncio.all_tasks() if t is not current and not t.done()}
        except RuntimeError:
            now = set()
        tasks = [_task_line(t) for t in now - self.tasks]
        processes = {pid: what for pid, what in child_processes().items() if pid not in self.processes}
        running = self.pool.running() if self.pool is not None else []
        threads = sorted(describe(fn) for fn in running if not any(fn is before for before in self.calls))
        return Leaks(sorted(tasks), processes, listening_ports() - self.ports, threads)

    async def assert_clean(self, timeout: float = 5.0, *, end_processes: bool = True) -> None:
        """Wait up to ``timeout`` seconds for what is still ending (a task's last step, a process being reaped),
        then raise ``AssertionError`` naming each task, process and port left since the picture. The child
        processes it names are ended first (unless ``end_processes=False``): SIGTERM, then SIGKILL after
        :data:`END_GRACE` seconds, and reaped, so none outlives the test run."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.005
        while (found := self.leaks()) and loop.time() < deadline:
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.1)
        if found:
            if end_processes and found.processes:
                for pause in _ending(found.processes):
                    await asyncio.sleep(pause)
            raise AssertionError(_report(found, end_processes))

    def assert_clean_now(self, *, end_processes: bool = True) -> None:
        """As :meth:`assert_clean`, without waiting for what is ending (outside an event loop)."""
        __tracebackhide__ = True  # (pytest shows the test's line, not this one)
        found = self.leaks()
        if found:
            if end_processes and found.processes:
                for pause in _ending(found.processes):
                    time.sleep(pause)
            raise AssertionError(_report(found, end_processes))


END_GRACE = 1.0
"""Seconds a leaked child process has to end after the leak check's SIGTERM, before its SIGKILL."""


def _report(found: Leaks, ended: bool) -> str:
    text = "left behind:\n" + str(found)
    if ended and found.processes:
        text += f"\n(the child processes were ended after this check: SIGTERM, then SIGKILL after {END_GRACE:g} s)"
    return text


def _gone(pid: int) -> bool:
    """Reap ``pid`` if it has ended; True once it is no child of ours any more."""
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return reaped == pid


def _signal(pid: int, sig: int) -> None:
    """``sig`` to the process, and to its process group when it leads one of its own (what it started goes too);
    never to the test run's own group."""
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid != os.getpgid(0):
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def _ending(pids: Iterable[int]) -> Iterator[float]:
    """End the child processes ``pids``: SIGTERM, up to :data:`END_GRACE` seconds for them to end, then SIGKILL
    and as long again; each is reaped. Yields the pauses between looks, for the caller to sleep (async or not)."""
    left = [pid for pid in pids if not _gone(pid)]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            _signal(pid, sig)
        deadline = time.monotonic() + END_GRACE
        while (left := [pid for pid in left if not _gone(pid)]) and time.monotonic() < deadline:
            yield 0.02


__all__ = ["END_GRACE", "LeakProbe", "Leaks", "child_processes", "listening_ports", "running_functions"]
