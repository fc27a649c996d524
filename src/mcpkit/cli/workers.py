"""``mcpkit run --workers N``: N worker processes serving one listening socket on one host.

The parent binds the port (so ``--port 0`` works and every worker shares one port: on Linux one ``SO_REUSEPORT``
socket per worker, which spreads new connections evenly, see :class:`Listeners`), then starts each worker as
``mcpkit run TARGET ... --worker-fd FD`` with the shared configuration in its environment (the ``MCPKIT_*``
variables of :mod:`mcpkit.stores.config`, a generated key ring included when none was given). Each worker is a
complete guarded server (connection guard, every limit), so the per-process limits add up: N workers accept up to N
times ``max_connections`` connections and hold up to N times ``max_sessions`` sessions (copies of one session on
several workers count once on each). The kernel hands each new connection to one worker; a client's requests on one
keep-alive connection stay on that worker, and its next connection may reach another: the shared Redis state
makes that invisible.

The parent restarts a worker that dies (at most :data:`MAX_RESTARTS` in a minute, then it stops everything and
exits 1) and, on SIGTERM or SIGINT, passes SIGTERM on and waits for the workers' graceful shutdown (drain, then
the requests in flight).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from types import FrameType

from ._errors import PREFIX

#: Worker restarts allowed within a minute before the parent gives up.
MAX_RESTARTS = 10
#: The environment variable naming a worker's parent (the worker stops when that process is gone).
PARENT_ENV = "MCPKIT_WORKER_PARENT"


class Listeners:
    """Where the workers accept connections. On Linux, one socket per worker bound to the one port with
    ``SO_REUSEPORT``: the kernel spreads new connections evenly over the workers, and a worker that dies takes its
    socket out of the group. Elsewhere, one socket all workers accept on (the kernel gives each connection to
    whichever worker asks first)."""

    def __init__(self, host: str, port: int, backlog: int = 2048) -> None:
        self.host = host
        self.backlog = backlog
        self.reuseport: bool = sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")
        if self.reuseport and port:
            self._probe(port)
        self.first: socket.socket | None = self._make(port)
        self.address: tuple[str, int] = self.first.getsockname()
        self._shared = None if self.reuseport else self.first

    def _make(self, port: int) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.reuseport:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((self.host, port))
            sock.listen(self.backlog)
        except BaseException:
            sock.close()
            raise
        sock.set_inheritable(True)
        return sock

    def _probe(self, port: int) -> None:
        """Refuse a port another process listens on: with ``SO_REUSEPORT`` a second deployment would join the first
        one's group and the kernel would split the connections between two apps (two key rings, maybe two versions
        of the code) without a word. A socket without the option cannot bind where anyone listens."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((self.host, port))  # OSError EADDRINUSE: "Address already in use"

    def for_worker(self) -> socket.socket:
        """The socket of a worker about to start (:meth:`given` once it has it)."""
        if self._shared is not None:
            return self._shared
        if self.first is not None:
            sock, self.first = self.first, None
            return sock
        return self._make(self.address[1])

    def given(self, sock: socket.socket) -> None:
        """The worker has its copy: a socket of its own is closed here (its worker's death ends it)."""
        if sock is not self._shared:
            sock.close()

    def close(self) -> None:
        for sock in (self.first, self._shared):
            if sock is not None:
                sock.close()


def supervise(
    command: Sequence[str], workers: int, listeners: Listeners, env: dict[str, str], grace: float, announce: str
) -> int:
    """Run ``workers`` processes of ``command`` (which gets ``--worker-fd <fd>`` appended) until a signal stops
    them; returns the exit status."""
    stopping = False
    failed = False

    def spawn(index: int) -> subprocess.Popen[bytes]:
        sock = listeners.for_worker()
        fd = sock.fileno()
        try:
            return subprocess.Popen(
                [*command, "--worker-fd", str(fd)],
                pass_fds=(fd,),
                env={**env, "MCPKIT_WORKER_INDEX": str(index), PARENT_ENV: str(os.getpid())},
            )
        finally:
            listeners.given(sock)

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    procs = {i: spawn(i) for i in range(workers)}
    print(announce, file=sys.stderr, flush=True)
    restarts: deque[float] = deque()
    try:
        while procs and not stopping:
            time.sleep(0.1)
            for index, proc in list(procs.items()):
                code = proc.poll()
                if code is None or stopping:
                    continue
                now = time.monotonic()
                while restarts and now - restarts[0] > 60:
                    restarts.popleft()
                if len(restarts) >= MAX_RESTARTS:
                    print(f"{PREFIX}workers keep dying (the last {ended(code)}); stopping", file=sys.stderr, flush=True)
                    stopping = failed = True
                    break
                restarts.append(now)
                print(f"mcpkit: worker {index} {ended(code)}; starting another", file=sys.stderr, flush=True)
                procs[index] = spawn(index)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace + 10
        for proc in procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        listeners.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 1 if failed else 0


def ended(code: int) -> str:
    """How a worker ended, from its exit status (negative: the signal that killed it)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def watch_parent(parent: int, interval: float = 1.0) -> None:
    """In a worker: stop gracefully (SIGTERM to itself: drain, then the requests in flight) once the parent is gone
    (killed with SIGKILL, or by the OOM killer), instead of serving the port on as an orphan nobody supervises."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="mcpkit-parent-watch", daemon=True).start()


def worker_socket(fd: int) -> socket.socket:
    """The listening socket a worker was given (``--worker-fd``)."""
    sock = socket.socket(fileno=fd)
    sock.setblocking(False)
    return sock


def python_command() -> list[str]:
    """How to start ``mcpkit`` again with this interpreter."""
    return [sys.executable, "-m", "mcpkit.cli.main"]


def child_environment(extra: dict[str, str]) -> dict[str, str]:
    """The parent's environment plus the shared configuration."""
    return {**os.environ, **extra}
