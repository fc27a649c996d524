"""Many calls in flight on ONE Streamable HTTP session (issue 16): a 50 ms tool, N closed-loop workers (one
keep-alive connection each) sharing one handshake-era session. Reported per run: answered calls/s, 429 refusals,
server CPU seconds per 1,000 answered calls and the server's peak RSS.

    python bench/inflight.py [--inflight 256,1024] [--seconds 10] [--retry-wait 1.0] [--src /path/to/src]
                             [--server-opt max_requests_per_session=1 ...]

``--src`` puts another mcpkit first for the server (e.g. ``git archive <rev> src | tar -x -C /tmp/old`` then
``--src /tmp/old/src``) to compare before/after in one run. ``--retry-wait``: seconds a refused worker waits
before it sends again (``header``: what Retry-After says). ``--server-opt k=v`` (integers) goes to ``create_app``:
e.g. ``max_requests_per_session=1 --server-opt max_queued_per_session=0`` measures what a refusal costs. Every
load is bounded in seconds and calls; the server is a subprocess on 127.0.0.1 and is killed at the end. Runs in the
dev venv (mcpkit + uvicorn + orjson).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

CLK_TCK = os.sysconf("SC_CLK_TCK")


def serve(port: int, options: dict[str, int]) -> None:
    """The server: a low-level mcpkit Server with one tool that sleeps 50 ms, under the suite's uvicorn config."""
    import uvicorn
    from servers._serve import UVICORN_CONFIG

    from mcpkit.server.lowlevel import Server
    from mcpkit.transports.http import create_app

    server = Server("inflight")

    @server.handler("tools/list")
    async def list_tools(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": [{"name": "sleep50", "inputSchema": {"type": "object"}}]}

    @server.handler("tools/call")
    async def call_tool(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"content": [{"type": "text", "text": "ok"}]}

    app = create_app(server, sse=False, ws=False, **options)
    uvicorn.Server(uvicorn.Config(app, port=port, **{**UVICORN_CONFIG, "backlog": 4096})).run()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int, body: bytes, headers: str
) -> tuple[int, dict[str, str], bytes]:
    writer.write(
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body
    )
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    h = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    data = await reader.readexactly(int(h.get("content-length", "0")))
    return status, h, data


async def load(port: int, inflight: int, seconds: float, retry_wait: str, pid: int) -> dict[str, Any]:
    base = "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    r, w = await asyncio.open_connection("127.0.0.1", port)
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "b", "version": "0"}},
    }
    status, h, _ = await _post(r, w, port, orjson.dumps(init), base)
    assert status == 200, status
    headers = base + f"Mcp-Session-Id: {h['mcp-session-id']}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
    note = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
    status, _, _ = await _post(r, w, port, note, headers)
    w.close()
    conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(inflight)]
    done = refused = 0
    max_calls = int(seconds * 40_000)
    stop = time.perf_counter() + seconds
    next_id = 1
    peak_rss = _rss_mb(pid)
    cpu0 = _cpu_s(pid)

    async def worker(i: int) -> None:
        nonlocal done, refused, next_id
        reader, writer = conns[i]
        while time.perf_counter() < stop and done + refused < max_calls:
            rid = next_id
            next_id += 1
            call = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": "sleep50"}}
            status, h, _ = await _post(reader, writer, port, orjson.dumps(call), headers)
            if status == 200:
                done += 1
            elif status == 429:
                refused += 1
                wait = float(h.get("retry-after", "1")) if retry_wait == "header" else float(retry_wait)
                await asyncio.sleep(wait)
            else:
                raise RuntimeError(f"HTTP {status}")

    async def sampler() -> None:
        nonlocal peak_rss
        while time.perf_counter() < stop:
            peak_rss = max(peak_rss, _rss_mb(pid))
            await asyncio.sleep(0.1)

    t0 = time.perf_counter()
    sampling = asyncio.create_task(sampler())
    await asyncio.gather(*(worker(i) for i in range(inflight)))
    elapsed = time.perf_counter() - t0
    sampling.cancel()
    cpu = _cpu_s(pid) - cpu0
    for _, writer in conns:
        writer.close()
    return {
        "inflight": inflight,
        "calls_per_s": done / elapsed,
        "refused": refused,
        "cpu_ms_per_1k": 1000 * cpu / max(done, 1) * 1000,
        "cpu_us_per_call": 1e6 * cpu / max(done + refused, 1),
        "peak_rss_mb": peak_rss,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--inflight", default="256,1024")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--retry-wait", default="header")
    ap.add_argument("--src", default=None, help="the mcpkit source directory the server imports")
    ap.add_argument("--server-opt", action="append", default=[], help="k=v (integer) for create_app")
    ap.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve, {k: int(v) for k, v in (o.split("=", 1) for o in args.server_opt)})
        return
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = args.src
    for n in (int(x) for x in args.inflight.split(",")):
        port = _free_port()
        opts = [f"--server-opt={o}" for o in args.server_opt]
        proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(port), *opts], env=env, stderr=subprocess.DEVNULL
        )
        try:
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), 0.1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            out = asyncio.run(load(port, n, args.seconds, args.retry_wait, proc.pid))
            print(
                f"{n:5d} in flight: {out['calls_per_s']:7.0f} calls/s, {out['refused']:6d} refused (429), "
                f"server CPU {out['cpu_ms_per_1k']:6.0f} ms per 1k answered ({out['cpu_us_per_call']:.0f} us per "
                f"answer or refusal), peak RSS {out['peak_rss_mb']:.0f} MB",
                flush=True,
            )
        finally:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
