"""Helpers of the scale-out tests: worker processes of ``mcpkit run`` sharing one Redis, and raw SSE reading.

with Workers(redis_url, 2) as workers:          # two `mcpkit run examples/everything.py -t http` processes
    workers.urls[0], workers.urls[1]            # http://127.0.0.1:<port>/mcp each (as separate hosts)
    workers.kill(0)                             # SIGKILL one (a crash)
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson

from support.procs import stop, wait_listening

REPO = Path(__file__).resolve().parents[2]
EVERYTHING = REPO / "examples" / "everything.py"
ACCEPT_BOTH = "application/json, text/event-stream"
VERSION = "2025-11-25"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def shared_env(redis_url: str, *, cluster: bool = False, prefix: str | None = None) -> dict[str, str]:
    """The environment of every worker of one deployment: one Redis, one key prefix, one key ring."""
    return {
        "MCPKIT_REDIS_URL": redis_url,
        "MCPKIT_REDIS_CLUSTER": "1" if cluster else "0",
        "MCPKIT_REDIS_PREFIX": prefix or f"t{secrets.token_hex(4)}:",
        "MCPKIT_STATE_KEYS": "k" * 40,
    }


class Workers:
    """``n`` processes of ``mcpkit run SERVER -t http`` on their own ports of 127.0.0.1, sharing one Redis."""

    def __init__(
        self,
        redis_url: str,
        n: int = 2,
        *,
        server: Path = EVERYTHING,
        cluster: bool = False,
        extra: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.env = {**os.environ, **shared_env(redis_url, cluster=cluster), **(env or {})}
        self.server = server
        self.extra = list(extra)
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        for _ in range(n):
            self.ports.append(_free_port())
            self.procs.append(self._start(self.ports[-1]))
        for port, proc in zip(self.ports, self.procs, strict=True):
            wait_listening(port, proc, timeout=30)

    def _start(self, port: int) -> subprocess.Popen[bytes]:
        cmd = [sys.executable, "-m", "mcpkit.cli.main", "run", str(self.server), "-t", "http", "--port", str(port)]
        return subprocess.Popen(
            [*cmd, *self.extra], env=self.env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None
        )

    @property
    def urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}/mcp" for port in self.ports]

    def kill(self, index: int) -> None:
        """SIGKILL worker ``index`` (a crash: no drain, no goodbye)."""
        proc = self.procs[index]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def terminate(self, index: int) -> None:
        """SIGTERM worker ``index`` and wait for its graceful shutdown."""
        stop(self.procs[index], timeout=30)

    def restart(self, index: int) -> None:
        if self.procs[index].poll() is None:
            self.terminate(index)
        self.procs[index] = self._start(self.ports[index])
        wait_listening(self.ports[index], self.procs[index], timeout=30)

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            stop(proc, timeout=15)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------- raw HTTP


def rpc(method: str, params: dict[str, Any] | None = None, rid: int | str = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    return body


async def open_session(http: httpx.AsyncClient, url: str, caps: dict[str, Any] | None = None) -> dict[str, str]:
    """initialize + notifications/initialized on ``url``; the headers of the session's later requests."""
    init = await http.post(
        url,
        json=rpc(
            "initialize",
            {"protocolVersion": VERSION, "capabilities": caps or {}, "clientInfo": {"name": "raw", "version": "0"}},
        ),
        headers={"accept": ACCEPT_BOTH},
    )
    assert init.status_code == 200, init.text
    headers = {"mcp-session-id": init.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    done = await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**headers, "accept": ACCEPT_BOTH}
    )
    assert done.status_code == 202, done.text
    return headers


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, dict[str, Any] | None]]:
    """(id, message) of each SSE event (message None for an event without data: priming, retry)."""
    event_id: str | None = None
    data: list[str] = []
    seen = False
    async for line in lines:
        if line == "":
            if seen:
                payload = "\n".join(data).strip()
                yield event_id, (orjson.loads(payload) if payload else None)
            event_id, data, seen = None, [], False
            continue
        seen = True
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip())


async def next_message(events: AsyncIterator[tuple[str | None, dict[str, Any] | None]], timeout: float = 10) -> Any:
    """The next (id, message) with a message."""

    async def take() -> tuple[str | None, dict[str, Any]]:
        async for event_id, message in events:
            if message is not None:
                return event_id, message
        raise AssertionError("the stream ended")

    return await asyncio.wait_for(take(), timeout)
