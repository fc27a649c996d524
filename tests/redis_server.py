"""A real ``redis-server`` for tests: started on a free port of 127.0.0.1 with persistence off, killed at teardown.

``redis_url`` (session-scoped fixture, import it into a test module) yields ``redis://127.0.0.1:<port>/0``. When
``redis-server`` is not on PATH the test FAILS in CI (``CI`` set: scripts/test.sh installs it with apt, so a
missing binary is a broken build) and is skipped with a loud reason elsewhere.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

MISSING = (
    "!!! redis-server NOT FOUND: the Redis store tests cannot run. Install it "
    "(`apt-get update && apt-get install -y redis-server`, or run `bash scripts/test.sh`). !!!"
)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def require_redis_server() -> str:
    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return path


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` subprocess on 127.0.0.1."""

    def __init__(self, binary: str, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
                "--loglevel",
                "warning",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while not _ping(self.port):
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}: {out[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("redis-server did not answer PING within 10 s")
            time.sleep(0.02)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    server = RedisServer(require_redis_server())
    try:
        yield server.url
    finally:
        server.stop()


# ---------------------------------------------------------------------------------------------- a worker process
#
# `python tests/redis_server.py worker REDIS_URL PORT` serves one MCP endpoint worker on 127.0.0.1:PORT; start
# several on one redis-server and they behave as one endpoint (tests/test_stores_workers.py).

SHARED_KEY = b"k" * 32  # every worker seals requestState and list cursors with the same key


def worker_app(name: str) -> Any:
    """The MCPKit app every worker serves (also the one `mcpkit run` serves in tests/test_stores_workers.py)."""
    from mcpkit import MCPKit

    app = MCPKit(name, request_state_keys=[SHARED_KEY], page_size=1)

    @app.tool
    def add_tool(tool_name: str) -> str:
        """Register one more tool on this worker (its tool list changes)."""

        def extra() -> str:
            return "extra"

        app.add_tool(extra, name=tool_name)
        return f"added {tool_name} on {name}"

    @app.tool
    async def touch(uri: str) -> str:
        """Announce that a resource changed."""
        await app.notify_resource_updated(uri)
        return f"touched {uri} on {name}"

    @app.tool
    def whoami() -> str:
        return name

    @app.resource("mcpkit://doc")
    def doc() -> str:
        return "doc"

    return app


def build_worker(redis_url: str, name: str) -> tuple[object, object]:
    """(the MCPKit app, the ASGI app) of one worker: its fan-out, given to create_app, starts with the lifespan."""
    from mcpkit.stores.redis import RedisEventStore, RedisFanout, RedisSessionStore
    from mcpkit.transports.http import create_app

    app = worker_app(name)
    endpoint = create_app(
        app,
        fanout=RedisFanout(redis_url, prefix="e2e:"),
        event_store=RedisEventStore(redis_url, prefix="e2e:"),
        session_store=RedisSessionStore(redis_url, prefix="e2e:"),
        session_idle_timeout=float(os.environ.get("WORKER_IDLE_TIMEOUT", "1800")),
        sse=False,
        ws=False,
    )
    return app, endpoint


def _worker_main(argv: list[str]) -> None:
    import uvicorn

    redis_url, port, name = argv[0], int(argv[1]), argv[2]
    _, asgi = build_worker(redis_url, name)
    uvicorn.run(
        asgi,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",  # type: ignore[arg-type]
        timeout_graceful_shutdown=2,
    )


if __name__ == "__main__":
    import sys

    if len(sys.argv) >= 5 and sys.argv[1] == "worker":
        _worker_main(sys.argv[2:])
    else:
        sys.exit("usage: python tests/redis_server.py worker REDIS_URL PORT NAME")
