"""Issue 12 acceptance, hostile load bounded to this machine: a real ``mcpkit run ... -t http`` subprocess under
2,000 half-open connections plus a batch flood still lets a fresh client initialize and call a tool within 1 s,
and its RSS stays under a stated bound.

The server runs with an open-file limit of 1024 (a common default): on the unfixed code the half-open connections
take every descriptor, accept() fails with EMFILE and the fresh client never gets an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from support.core import CORE_SERVER

HALF_OPEN = 2000
FLOODERS = 4
BATCH = 200
SERVER_FDS = 1024
RSS_BOUND_MB = 150  # stated bound for the server process during the whole attack
ACCEPT = "application/json, text/event-stream"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _limit_fds() -> None:  # runs in the child before exec
    resource.setrlimit(resource.RLIMIT_NOFILE, (SERVER_FDS, SERVER_FDS))


async def _session(http: httpx.AsyncClient, url: str, version: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    r = await http.post(url, json=body, headers=headers)
    assert r.status_code == 200, r.text
    sid = r.headers["mcp-session-id"]
    headers = {**headers, "mcp-session-id": sid, "mcp-protocol-version": version}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(url, json=note, headers=headers)).status_code == 202
    return sid


async def _fresh_client(url: str) -> float:
    """Seconds a brand-new client (new connection) takes to initialize and get a tool's answer."""
    start = time.monotonic()
    async with httpx.AsyncClient(timeout=10) as http:
        sid = await _session(http, url, "2025-11-25")
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "hi"}},
        }
        headers = {
            "accept": ACCEPT,
            "content-type": "application/json",
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-11-25",
        }
        r = await http.post(url, json=call, headers=headers)
        assert r.status_code == 200 and '"hi"' in r.text, r.text
    return time.monotonic() - start


async def _flood(url: str, stop: asyncio.Event, sent: list[int]) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        sid = await _session(http, url, "2025-03-26")
        headers = {
            "accept": ACCEPT,
            "content-type": "application/json",
            "mcp-session-id": sid,
            "mcp-protocol-version": "2025-03-26",
        }
        n = 10
        while not stop.is_set():
            batch = [
                {"jsonrpc": "2.0", "id": n + i, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
                for i in range(BATCH)
            ]
            n += BATCH
            with contextlib.suppress(httpx.HTTPError):
                await http.post(url, content=orjson.dumps(batch), headers=headers)
            sent[0] += BATCH


async def _open_half(port: int, socks: list[socket.socket]) -> None:
    loop = asyncio.get_running_loop()
    s = socket.socket()
    s.setblocking(False)
    try:
        await asyncio.wait_for(loop.sock_connect(s, ("127.0.0.1", port)), 5)
        await loop.sock_sendall(s, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Le")
    except (OSError, TimeoutError):
        s.close()
        return
    socks.append(s)


async def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if proc.poll() is not None:
            raise AssertionError(f"the server exited: {proc.stderr.read() if proc.stderr else b''!r}")
        with contextlib.suppress(httpx.HTTPError):
            async with httpx.AsyncClient(timeout=1) as http:
                await http.get(url)
                return
        await asyncio.sleep(0.1)
    raise AssertionError("the server did not start")


async def test_half_open_connections_and_batch_flood(free_port: Callable[[], int]) -> None:
    """2,000 half-open connections + a batch flood: a fresh client initializes and calls a tool within 1 s
    (three times), and the server's RSS stays under RSS_BOUND_MB."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, HALF_OPEN + 1024)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    cmd = [sys.executable, "-m", "mcpkit.cli.main", "run", str(CORE_SERVER), "-t", "http", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=_limit_fds)
    socks: list[socket.socket] = []
    stop = asyncio.Event()
    flooders: list[asyncio.Task[Any]] = []
    try:
        await _wait_ready(url, proc)
        base_rss = _rss_mb(proc.pid)
        peak = base_rss
        for _ in range(HALF_OPEN // 100):
            await asyncio.gather(*(_open_half(port, socks) for _i in range(100)))
            peak = max(peak, _rss_mb(proc.pid))
        assert len(socks) >= HALF_OPEN * 0.9, f"only {len(socks)} half-open connections were made"
        sent = [0]
        flooders = [asyncio.create_task(_flood(url, stop, sent)) for _ in range(FLOODERS)]
        await asyncio.sleep(1.0)  # the flood is running
        timings = []
        for _ in range(3):
            timings.append(await asyncio.wait_for(_fresh_client(url), 10))
            peak = max(peak, _rss_mb(proc.pid))
            await asyncio.sleep(0.3)
        stop.set()
        await asyncio.wait_for(asyncio.gather(*flooders), 30)
        peak = max(peak, _rss_mb(proc.pid))
        print(
            f"\nfresh client: {', '.join(f'{t * 1000:.0f} ms' for t in timings)}; flood items sent: {sent[0]}; "
            f"server RSS {base_rss:.0f} MB -> peak {peak:.0f} MB (bound {RSS_BOUND_MB} MB)"
        )
        assert max(timings) < 1.0, timings
        assert sent[0] >= BATCH * FLOODERS
        assert peak < RSS_BOUND_MB
        assert proc.poll() is None, "the server died"
    finally:
        stop.set()
        for task in flooders:
            task.cancel()
        for s in socks:
            s.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
