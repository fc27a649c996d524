"""A server you start yourself as a process (``mcpkit run server.py -t http --port N``, your own entry point):
wait until it listens, and stop it for good.

    proc = subprocess.Popen([sys.executable, "-m", "mcpkit", "run", "server.py", "-t", "http", "--port", str(port)])
    try:
        wait_listening(port, proc)       # raises ServerDidNotStart (an AssertionError) saying why
        ...
    finally:
        stop_process(proc)               # SIGTERM, then SIGKILL when it does not end in time; always reaped
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import time
from typing import Any

START_TIMEOUT = 30.0
"""Seconds :func:`wait_listening` waits for a server to listen, however little it works meanwhile."""
START_IDLE = 5.0
"""Past the timeout, seconds without any CPU used by the server (and its children) that end the wait."""
START_MOST = 4
"""The wait never lasts more than this many timeouts, however busy the server is (one spinning is given up on)."""
STDERR_SHOWN = 64 * 1024
"""Bytes of a server's piped stderr that :class:`ServerDidNotStart` shows (the last ones)."""


class ServerDidNotStart(AssertionError):
    """The server process exited, or did not listen in time; the message says which (with its stderr, when it
    was piped)."""


def cpu_seconds(pid: int, depth: int = 3) -> float:
    """The CPU time ``pid`` and its children (down to ``depth`` generations, 8 each) have used, from ``/proc``
    (Linux); 0 elsewhere or once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except (OSError, IndexError, ValueError):
        return 0.0
    own = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return own + sum(cpu_seconds(c, depth - 1) for c in children[:8]) if depth > 0 else own


class StartWait:
    """How long to wait for a process to get ready (to listen, to print its address): ``timeout`` seconds, and
    past them as long as it (or a child) still uses CPU, as a process started on a loaded machine does, until
    ``idle`` seconds pass without any, or ``most`` timeouts have passed in all. Call :meth:`over` as you poll."""

    def __init__(self, pid: int, timeout: float, *, idle: float = START_IDLE, most: float = START_MOST) -> None:
        self.pid = pid
        self.started: float = time.monotonic()
        self._worked = self.started
        self.timeout = timeout
        self.idle = idle
        self.most = most
        self._cpu = cpu_seconds(pid)

    @property
    def elapsed(self) -> float:
        """Seconds since the wait began."""
        return time.monotonic() - self.started

    def over(self) -> bool:
        """Whether to give up now."""
        now = time.monotonic()
        if (used := cpu_seconds(self.pid)) > self._cpu:
            self._cpu, self._worked = used, now
        if now >= self.started + self.most * self.timeout:
            return True
        return now >= self.started + self.timeout and now >= self._worked + self.idle


def stderr_so_far(proc: subprocess.Popen[Any], limit: int = STDERR_SHOWN) -> str:
    """What ``proc`` wrote to its piped stderr and nobody read yet (its last ``limit`` bytes), read without waiting
    for more (it may still run); empty when stderr is not piped."""
    if proc.stderr is None:
        return ""
    fd = proc.stderr.fileno()
    got = bytearray()
    try:
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            got += chunk
            del got[:-limit]
    except (OSError, ValueError):  # (closed meanwhile)
        pass
    return got.decode(errors="replace")


def wait_listening(
    port: int, proc: subprocess.Popen[Any], timeout: float = START_TIMEOUT, host: str = "127.0.0.1"
) -> None:
    """Return once something accepts connections on ``host:port``. Raise :class:`ServerDidNotStart`, with what the
    server wrote to its stderr (when piped), when ``proc`` exits first, or when it has not listened after
    ``timeout`` seconds and no longer works (no CPU used for :data:`START_IDLE` seconds: a loaded machine starts
    a server slowly, one stuck uses none), or after :data:`START_MOST` timeouts whatever it does."""
    wait = StartWait(proc.pid, timeout)
    while True:
        if proc.poll() is not None:
            err = stderr_so_far(proc)
            raise ServerDidNotStart(f"server exited with code {proc.returncode} before it listened: {err}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        if wait.over():
            break
        time.sleep(0.05)
    err = stderr_so_far(proc)
    shown = f"; its stderr:\n{err}" if err else " (nothing on its stderr)" if proc.stderr is not None else ""
    raise ServerDidNotStart(f"server (pid {proc.pid}) did not listen on port {port} within {wait.elapsed:.0f} s{shown}")


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """End ``proc``: SIGTERM, then SIGKILL when it has not exited after ``timeout`` seconds; always reaped (no
    zombie left). Its pipes stay open: what it wrote can still be read."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    proc.wait()


__all__ = [
    "START_IDLE",
    "START_MOST",
    "START_TIMEOUT",
    "STDERR_SHOWN",
    "ServerDidNotStart",
    "StartWait",
    "cpu_seconds",
    "stderr_so_far",
    "stop_process",
    "wait_listening",
]
