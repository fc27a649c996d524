"""``mcpkit.testing.processes``: waiting for a server you start as a real process to listen (its stdout and stderr
piped, on 127.0.0.1), on a machine that may be loaded."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from mcpkit.testing.processes import START_IDLE, ServerDidNotStart, stop_process, wait_listening


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def started(code: str, port: int) -> subprocess.Popen[bytes]:
    """``python -c code`` with ``PORT`` set to ``port``, its stderr piped."""
    return subprocess.Popen([sys.executable, "-c", f"PORT = {port}\n{code}"], stderr=subprocess.PIPE)


SLOW_TO_START = """
import socket, sys, time
print("importing a lot", file=sys.stderr, flush=True)
end = time.monotonic() + 3
while time.monotonic() < end:  # (working all along, as a server started on a loaded machine is)
    pass
s = socket.socket()
s.bind(("127.0.0.1", PORT))
s.listen()
time.sleep(60)
"""

STUCK = """
import sys, time
print("waiting for the database at db:5432", file=sys.stderr, flush=True)
time.sleep(60)
"""

SPINNING = """
while True:
    pass
"""


def test_a_server_that_works_past_the_timeout_before_it_listens_is_waited_for() -> None:
    """The wait ends when the server accepts, not at a fixed timeout: one still working (its CPU time growing) when
    the timeout passes is given longer (a fixed 20 s gave up on a server a loaded machine was still starting)."""
    port = free_port()
    proc = started(SLOW_TO_START, port)
    try:
        begun = time.monotonic()
        wait_listening(port, proc, timeout=1.0)
        assert time.monotonic() - begun >= 2.5
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        stop_process(proc)


def test_a_server_that_neither_listens_nor_works_fails_the_wait_with_its_stderr() -> None:
    """A server stuck (no CPU used) past the timeout is given up on within ``START_IDLE`` seconds more, and the
    error shows what it wrote to its stderr (it still runs: read without waiting for it to end)."""
    port = free_port()
    proc = started(STUCK, port)
    try:
        begun = time.monotonic()
        with pytest.raises(ServerDidNotStart) as failed:
            wait_listening(port, proc, timeout=1.0)
        assert time.monotonic() - begun < 1.0 + START_IDLE + 5  # (5: the poll's own steps on a loaded machine)
        assert f"did not listen on port {port}" in str(failed.value)
        assert "waiting for the database at db:5432" in str(failed.value)
        assert proc.poll() is None  # (the caller stops it)
    finally:
        stop_process(proc)


def test_a_server_that_spins_without_listening_is_given_up_on_after_four_timeouts() -> None:
    port = free_port()
    proc = started(SPINNING, port)
    try:
        begun = time.monotonic()
        with pytest.raises(ServerDidNotStart, match=r"nothing on its stderr"):
            wait_listening(port, proc, timeout=0.5)
        assert 2.0 <= time.monotonic() - begun < 2.0 + 5
    finally:
        stop_process(proc)


def test_a_server_that_exits_before_it_listens_fails_the_wait_with_its_code_and_stderr() -> None:
    port = free_port()
    proc = started('import sys\nsys.exit("no such module: weather")', port)
    try:
        with pytest.raises(ServerDidNotStart, match=r"exited with code 1 before it listened: no such module: weather"):
            wait_listening(port, proc, timeout=5.0)
    finally:
        stop_process(proc)
