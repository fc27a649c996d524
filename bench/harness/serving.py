"""The servers the stand-alone bench scripts (``ab.py``, ``loopstats.py``, ``scale.py``) start and stop: one way
to start a server process, to wait until it listens on 127.0.0.1, and to stop it (SIGTERM, then SIGKILL after a
grace). (``run.py``'s cases start theirs through :mod:`harness.procs`, in process groups of their own.)"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import time
from collections.abc import Mapping


def start(
    argv: list[str], *, cwd: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None, quiet: bool
) -> subprocess.Popen[bytes]:
    """Start ``argv``: its stdout goes nowhere, its stderr too when ``quiet`` (else to this script's)."""
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if quiet else None
    )


def _gone(port: int, proc: subprocess.Popen[bytes]) -> SystemExit | None:
    return SystemExit(f"server on port {port} exited with {proc.returncode}") if proc.poll() is not None else None


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """Return once 127.0.0.1:``port`` takes a connection; SystemExit if ``proc`` exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (exited := _gone(port, proc)) is not None:
            raise exited
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise SystemExit(f"server on port {port} did not listen within {timeout} s")


async def listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    """:func:`wait_listening` for a script's event loop (it runs on while it waits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (exited := _gone(port, proc)) is not None:
            raise exited
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        return
    raise SystemExit(f"server on port {port} did not listen within {timeout} s")


def stop(*procs: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """Stop every one of ``procs``: SIGTERM to all at once, then SIGKILL to each one still running ``grace``
    seconds later (``grace`` 0: SIGKILL at once). Each has been waited for when this returns."""
    for proc in procs:
        if proc.poll() is None:
            (proc.kill if grace <= 0 else proc.terminate)()
    for proc in procs:
        try:
            proc.wait(grace if grace > 0 else None)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
