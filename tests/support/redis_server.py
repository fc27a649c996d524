"""A real ``redis-server`` for tests: started on a free port of 127.0.0.1 with persistence off, killed at teardown.

``redis_url`` (session-scoped fixture, import it into a test module) yields ``redis://127.0.0.1:<port>/0``;
``redis_cluster_url`` a node of a local three-primary Redis Cluster (``redis-cli --cluster create`` on free ports);
:class:`PersistentRedis` is one with an append-only file that can be restarted. When
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

from support.store_server import free_port as _free_port  # (the tests import it from here)
from support.store_server import missing, wait_ready

MISSING = (
    "!!! redis-server NOT FOUND: the Redis store tests cannot run. Install it "
    "(`apt-get update && apt-get install -y redis-server`, or run `bash scripts/test.sh`). !!!"
)


def require_redis_server() -> str:
    path = shutil.which("redis-server")
    if path is None:
        missing(MISSING)
    assert path is not None
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

    def __init__(
        self, binary: str, port: int | None = None, *, persist: str | None = None, cluster_dir: str | None = None
    ) -> None:
        self.port = port or _free_port()
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        args += ["--protected-mode", "yes", "--loglevel", "warning"]
        if persist is not None:  # every write in the append-only file before it is acknowledged
            args += ["--dir", persist, "--appendonly", "yes", "--appendfsync", "always"]
        else:
            args += ["--appendonly", "no"]
        if cluster_dir is not None:
            args += ["--dir", cluster_dir, "--cluster-enabled", "yes", "--cluster-node-timeout", "3000"]
            args += ["--cluster-config-file", f"nodes-{self.port}.conf"]
        self.proc = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        wait_ready(self.proc, lambda: _ping(self.port), "redis-server", 10, self.stop)

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


# ---------------------------------------------------------------------------------------------- persistence


class PersistentRedis(RedisServer):
    """A ``redis-server`` that writes every command to its append-only file in ``directory`` (``appendfsync
    always``): :meth:`restart` stops it (SIGTERM, as an operator would) and starts it again on the same port and
    file, so what Redis acknowledged survives."""

    def __init__(self, binary: str, directory: str, port: int | None = None) -> None:
        self.binary = binary
        self.directory = directory
        super().__init__(binary, port, persist=directory)

    def restart(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(timeout=20)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        RedisServer.__init__(self, self.binary, self.port, persist=self.directory)


# ---------------------------------------------------------------------------------------------- Redis Cluster


def require_redis_cli() -> str:
    path = shutil.which("redis-cli")
    if path is None:
        missing(MISSING)
    assert path is not None
    return path


def _cluster_ports(n: int) -> list[int]:
    """``n`` ports whose cluster bus ports (port + 10000) are free too."""
    ports: list[int] = []
    while len(ports) < n:
        port = _free_port()
        if port + 10000 > 65535 or port in ports:
            continue
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        ports.append(port)
    return ports


class RedisClusterNodes:
    """A local Redis Cluster of ``masters`` primaries (no replicas) on free ports of 127.0.0.1, created with
    ``redis-cli --cluster create``; its state in ``directory``."""

    def __init__(self, binary: str, cli: str, directory: str, masters: int = 3) -> None:
        self.nodes: list[RedisServer] = []
        try:
            for port in _cluster_ports(masters):
                self.nodes.append(RedisServer(binary, port, cluster_dir=directory))
            addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
            done = subprocess.run(
                [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True,
                text=True,
                timeout=60,
            )
            if done.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed: {done.stdout[-2000:]} {done.stderr[-2000:]}")
            deadline = time.monotonic() + 30
            while not all(_cluster_ok(node.port) for node in self.nodes):
                if time.monotonic() > deadline:
                    raise RuntimeError("the Redis Cluster did not reach cluster_state:ok within 30 s")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """Any node: the cluster client discovers the others."""
        return self.nodes[0].url

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def _cluster_ok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"CLUSTER INFO\r\n")
            data = b""
            while b"cluster_state:" not in data or not data.endswith(b"\r\n"):
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
            return b"cluster_state:ok" in data
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_cluster_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A three-primary Redis Cluster for the session (any node's URL; build clients with ``cluster=True``)."""
    cluster = RedisClusterNodes(
        require_redis_server(), require_redis_cli(), str(tmp_path_factory.mktemp("redis-cluster"))
    )
    try:
        yield cluster.url
    finally:
        cluster.stop()


# ---------------------------------------------------------------------------------------------- a worker process
#
# `python tests/support/store_server.py worker redis REDIS_URL PORT NAME` serves one MCP endpoint worker on
# 127.0.0.1:PORT (build_endpoint); start several on one redis-server and they behave as one endpoint
# (tests/e2e/test_stores_workers.py).

SHARED_KEY = b"k" * 32  # every worker seals requestState and list cursors with the same key


def worker_app(name: str) -> Any:
    """The MCPKit app every worker serves (also the one `mcpkit run` serves in tests/e2e/test_stores_workers.py)."""
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


def build_endpoint(redis_url: str, name: str) -> object:
    """The ASGI app of one worker (``python tests/support/store_server.py worker redis URL PORT NAME``)."""
    return build_worker(redis_url, name)[1]
