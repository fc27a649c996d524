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

import socket
import subprocess
import time
from typing import Any


class ServerDidNotStart(AssertionError):
    """The server process exited, or did not listen in time; the message says which (with its stderr, when it
    was piped)."""


def wait_listening(port: int, proc: subprocess.Popen[Any], timeout: float = 20.0, host: str = "127.0.0.1") -> None:
    """Return once something accepts connections on ``host:port``; raise :class:`ServerDidNotStart` when ``proc``
    exits first or after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else b""
            shown = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
            raise ServerDidNotStart(f"server exited with code {proc.returncode}: {shown}")
        with socket.socket() as s:
            if s.connect_ex((host, port)) == 0:
                return
        time.sleep(0.05)
    raise ServerDidNotStart(f"server did not listen on port {port} within {timeout:g}s")


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


__all__ = ["ServerDidNotStart", "stop_process", "wait_listening"]
