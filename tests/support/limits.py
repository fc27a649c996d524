"""The limits server's peers (tests/support/servers/limits_server.py over stdio, WebSocket and Streamable HTTP,
each a real process on 127.0.0.1): hand-made requests and batches, and the server's peak memory while it
takes them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import websockets

import mcpkit
from support.paths import SERVERS

LIMITS_SERVER = SERVERS / "limits_server.py"
V = "2025-03-26"  # the revision with batches
MODERN = "2026-07-28"
# the subprocesses import the mcpkit this test imports
ENV = {**os.environ, "PYTHONPATH": str(Path(mcpkit.__file__).resolve().parent.parent)}


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class PeakRSS:
    """Samples a process's RSS every 20 ms while the block runs; ``growth_mb`` is the peak over the start."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.base = rss_kb(pid)
        self.peak = self.base
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, rss_kb(self.pid))
            await asyncio.sleep(0.02)

    async def __aenter__(self) -> PeakRSS:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.peak = max(self.peak, rss_kb(self.pid))

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / 1024


def initialize(rid: int = 0, version: str = V) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
    }


INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def slow(rid: int, ms: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "slow", "arguments": {"ms": ms}}}


def stats(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "stats", "arguments": {}}}


def batches(count: int, size: int, ms: float, first_id: int = 1000) -> list[list[dict[str, Any]]]:
    return [[slow(first_id + b * size + i, ms) for i in range(size)] for b in range(count)]


def stats_of(answer: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(answer["result"]["content"][0]["text"])
    return out


class StdioPeer:
    """The limits server as a subprocess, spoken to with raw JSON lines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.pid = proc.pid

    async def send(self, msg: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        await self.proc.stdin.drain()

    async def recv(self) -> Any:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        assert line, "the server ended its output"
        return orjson.loads(line)


class WsPeer:
    def __init__(self, ws: Any, pid: int) -> None:
        self.ws = ws
        self.pid = pid

    async def send(self, msg: Any) -> None:
        await self.ws.send(orjson.dumps(msg).decode())

    async def recv(self) -> Any:
        return orjson.loads(await asyncio.wait_for(self.ws.recv(), 30))


@contextlib.asynccontextmanager
async def server_process(mode: str, *opts: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, int | None]]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(LIMITS_SERVER),
        mode,
        *opts,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=ENV,
        limit=8 * 1024 * 1024,
    )
    try:
        port = None
        if mode == "http":
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line.startswith(b"PORT "), line
            port = int(line.split()[1])
        yield proc, port
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


@contextlib.asynccontextmanager
async def raw_peer(transport: str, *opts: str, handshake: bool = True) -> AsyncIterator[Any]:
    """A raw peer of the limits server over ``transport``, initialized in 2025-03-26 unless ``handshake`` is False."""
    if transport == "stdio":
        async with server_process("stdio", *opts) as (proc, _):
            peer: Any = StdioPeer(proc)
            if handshake:
                await peer.send(initialize())
                assert "result" in await peer.recv()
                await peer.send(INITIALIZED)
            yield peer
        return
    async with server_process("http", *opts) as (proc, port):
        url = f"ws://127.0.0.1:{port}/ws"
        async with websockets.connect(url, max_size=None, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
            peer = WsPeer(ws, proc.pid)
            if handshake:
                await peer.send(initialize())
                assert "result" in await peer.recv()
                await peer.send(INITIALIZED)
            yield peer


async def flood(peer: Any, work: list[list[dict[str, Any]]]) -> list[Any]:
    """Send every batch (without waiting for answers) while reading the answers; returns the answer arrays."""
    expected = len(work)

    async def writer() -> None:
        for b in work:
            await peer.send(b)

    w = asyncio.create_task(writer())
    answers: list[Any] = []
    try:
        while len(answers) < expected:
            answers.append(await peer.recv())
        await w
    finally:
        w.cancel()
    return answers


@contextlib.asynccontextmanager
async def http_session(*opts: str) -> AsyncIterator[tuple[httpx.AsyncClient, str, dict[str, str], int]]:
    async with (
        server_process("http", *opts) as (proc, port),
        httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=1200, max_keepalive_connections=0)) as http,
    ):
        url = f"http://127.0.0.1:{port}/mcp"
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        r = await http.post(url, json=initialize(), headers=headers)
        assert r.status_code == 200, r.text
        headers["mcp-session-id"] = r.headers["mcp-session-id"]
        r = await http.post(url, json=INITIALIZED, headers=headers)
        assert r.status_code == 202
        yield http, url, headers, proc.pid
