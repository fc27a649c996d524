"""What the test servers of the shared stores have in common (``redis_server.py``, ``postgres_server.py``): a free
port, a missing binary failing CI and skipping elsewhere, starting a server process and waiting until it answers,
and a worker process serving one MCP endpoint on the store: ``python tests/support/store_server.py worker redis|postgres
URL PORT NAME`` (start several on one store and they behave as one endpoint: tests/e2e/test_stores_workers.py,
test_postgres_workers.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def missing(reason: str) -> None:
    """A binary the test needs is missing: a FAILURE in CI (``CI`` set: scripts/test.sh installs it, so a missing
    binary is a broken build), a skip with ``reason`` elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def wait_ready(
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    what: str,
    seconds: float,
    stop: Callable[[], None],
    every: float = 0.02,
) -> None:
    """Return once ``ready()`` (asked every ``every`` seconds); a RuntimeError with the end of the process's output
    if it exits first, or (after ``stop()``) if ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not ready():
        if proc.poll() is not None:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}: {out[-2000:]}")
        if time.monotonic() > deadline:
            stop()
            raise RuntimeError(f"{what} did not answer within {seconds:g} s")
        time.sleep(every)


def serve_worker(endpoint: Any, port: int) -> None:
    """Serve one worker's ASGI ``endpoint`` on 127.0.0.1:``port`` (its lifespan on, a graceful shutdown of 2 s)."""
    import uvicorn

    uvicorn.run(
        endpoint,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",  # type: ignore[arg-type]
        timeout_graceful_shutdown=2,
    )


if __name__ == "__main__":
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if len(sys.argv) >= 6 and sys.argv[1] == "worker" and sys.argv[2] in ("redis", "postgres"):
        from support import postgres_server, redis_server

        build = redis_server.build_endpoint if sys.argv[2] == "redis" else postgres_server.build_endpoint
        serve_worker(build(sys.argv[3], sys.argv[5]), int(sys.argv[4]))
    else:
        sys.exit("usage: python tests/support/store_server.py worker redis|postgres URL PORT NAME")
