"""The stdio client's child process (``transports.stdio_process.ChildProcess``) is reaped as soon as it exits, by
either of its two reapers: a pidfd the event loop watches (Linux), or, where the system has no pidfd (macOS), a
thread blocked in ``waitpid``. Real child processes; the thread's path is taken here on Linux by removing
``os.pidfd_open`` for the test, as on a system without it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time

import pytest

from mcpkit.transports.stdio import StdioClientTransport, StdioServer

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to tell a zombie")

#: A server that exits with code 3 once it has read a line (so the test knows its reaper is in place first).
EXITS_ON_A_LINE = "import sys; sys.stdin.readline(); sys.exit(3)"
#: A server that ignores SIGTERM and the end of its stdin, and says when it does.
STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "sys.stderr.write('ready\\n'); sys.stderr.flush(); time.sleep(120)"
)


@pytest.fixture(params=["pidfd", "thread"])
def reaper(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both reapers: the pidfd where the system has one, and the ``waitpid`` thread (``os.pidfd_open`` removed)."""
    if request.param == "thread":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd on this system")
    return str(request.param)


def _exists(pid: int) -> bool:
    """Whether the process is there at all, running or a zombie (a reaped one is gone from /proc)."""
    return os.path.exists(f"/proc/{pid}")


def _reaper_of(pid: int) -> str:
    """Which reaper watches the running child ``pid``: its thread, if one is named after it, else the pidfd."""
    threads = {t.name for t in threading.enumerate()}
    return "thread" if f"mcpkit-reap-{pid}" in threads else "pidfd"


async def test_a_child_that_exits_is_reaped_without_anyone_waiting_for_it(reaper: str) -> None:
    """The server exits by itself (code 3) while nobody awaits it: it is reaped at once, not left a zombie until a
    close, and its exit code is known."""
    t = StdioClientTransport(StdioServer([sys.executable, "-c", EXITS_ON_A_LINE], stderr="devnull"))
    await t.start()
    assert t.process is not None
    pid = t.process.pid
    assert _reaper_of(pid) == reaper
    await t.send(b"{}")  # the server reads it and exits
    deadline = time.monotonic() + 10
    while _exists(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert not _exists(pid), "the exited server was left a zombie"
    for _ in range(100):  # (the thread tells the loop with a callback: one turn or so later)
        if t.returncode is not None:
            break
        await asyncio.sleep(0.01)
    assert t.returncode == 3
    assert await asyncio.wait_for(t.process.wait(), 1) == 3
    with pytest.raises(ProcessLookupError):
        t.process.send_signal(signal.SIGTERM)  # reaped: no signal goes to a pid that may be another's by now
    await t.close()


@pytest.mark.parametrize("waits", ["waitid", "polls"])
async def test_the_thread_reaper_records_the_exit_as_it_reaps(waits: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the thread reaps the child (no pidfd), a signal can never be sent to its pid once it is reaped (the
    system may give the pid to another process by then): the moment the child is gone, reaped, its exit code is
    known to ``send_signal``, though the loop has not run since (the thread tells the loop a turn later). Both ways
    the thread waits: ``waitid`` without reaping, and looking every ``REAP_POLL_S`` where ``waitid`` is missing
    (macOS)."""
    monkeypatch.delattr(os, "pidfd_open", raising=False)
    if waits == "polls":
        monkeypatch.delattr(os, "waitid", raising=False)
    t = StdioClientTransport(StdioServer([sys.executable, "-c", EXITS_ON_A_LINE], stderr="devnull"))
    await t.start()
    assert t.process is not None
    pid = t.process.pid
    assert _reaper_of(pid) == "thread"
    await t.send(b"{}")  # the server reads it and exits
    deadline = time.monotonic() + 10
    while _exists(pid) and time.monotonic() < deadline:
        time.sleep(0.001)  # (the loop does not run: only the thread can record the exit)
    assert not _exists(pid), "the exited server was not reaped"
    with pytest.raises(ProcessLookupError):
        t.process.send_signal(signal.SIGTERM)
    assert t.process.returncode == 3, "reaped, but its exit not recorded: a signal could go to its pid meanwhile"
    assert await asyncio.wait_for(t.process.wait(), 5) == 3
    await t.close()


async def test_a_child_that_does_not_exit_is_killed_after_its_bound_and_reaped(reaper: str) -> None:
    """The server ignores the end of its stdin and SIGTERM: ``close()`` waits ``shutdown_timeout`` after each
    step, then SIGKILLs it, and returns once it is reaped (killed by signal 9), well within the bound."""
    bound = 0.3
    t = StdioClientTransport(StdioServer([sys.executable, "-c", STUBBORN], shutdown_timeout=bound))
    await t.start()
    assert t.process is not None
    pid = t.process.pid
    assert _reaper_of(pid) == reaper
    deadline = time.monotonic() + 30
    while "ready" not in t.stderr_text and time.monotonic() < deadline:  # (SIGTERM ignored from here on)
        await asyncio.sleep(0.01)
    assert "ready" in t.stderr_text
    t0 = time.monotonic()
    await asyncio.wait_for(t.close(), 10)
    took = time.monotonic() - t0
    assert t.returncode == -signal.SIGKILL
    assert not _exists(pid), "the killed server was left a zombie"
    assert took >= 2 * bound, f"killed after {took:.2f} s: before the end of both waits"
