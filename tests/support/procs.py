"""The one way the tests (and ``tests/conformance/run.py``) wait for a server subprocess to listen and stop it.

proc = subprocess.Popen([...])
try:
    wait_listening(port, proc)       # raises ServerDidNotStart (an AssertionError) with the reason
    ...
finally:
    stop(proc)                       # terminate, then kill if it does not end in time
"""

from __future__ import annotations

import socket
import subprocess
import time
from typing import Any


class ServerDidNotStart(AssertionError):
    """The server subprocess exited, or did not listen in time; the message says which."""


def wait_listening(port: int, proc: subprocess.Popen[Any], timeout: float = 20.0) -> None:
    """Return once something accepts connections on 127.0.0.1:``port``; raise :class:`ServerDidNotStart` when
    ``proc`` exits first (with its stderr, when it was piped) or after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr is not None else b""
            shown = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
            raise ServerDidNotStart(f"server exited with code {proc.returncode}: {shown}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise ServerDidNotStart(f"server did not listen on port {port} within {timeout:g}s")


def stop(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """End ``proc``: SIGTERM, then SIGKILL when it has not exited after ``timeout`` seconds; always reaped."""
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def stderr_until(proc: subprocess.Popen[str], needle: str, timeout: float = 20.0) -> list[str]:
    """The lines ``proc`` writes to its (text, piped) stderr up to the first containing ``needle`` (included), or
    all it wrote when it ends or ``timeout`` seconds pass first (a bare readline could wait forever)."""
    import select

    assert proc.stderr is not None
    lines: list[str] = []
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0 and select.select([proc.stderr], [], [], left)[0]:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            break
    return lines
