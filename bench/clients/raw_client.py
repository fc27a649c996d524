"""Client floor: the bench driver's raw JSON-RPC over asyncio pipes + orjson, no SDK."""

from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _common import args, measure, run
from harness import driver, procs


async def main_http(calls: int, seconds: float, url: str) -> None:
    from urllib.parse import urlsplit

    t = time.perf_counter()
    parts = urlsplit(url)
    m = driver.HttpMcp(parts.hostname or "127.0.0.1", parts.port or 80, path=parts.path or "/mcp")
    conn = m.conn()
    try:
        await m.initialize(conn)
        driver.check_tool_result(await m.call_tool(conn, "echo", {"text": "x"}), "x")
        connect_s = time.perf_counter() - t

        async def call() -> None:
            await m.call_tool(conn, "echo", {"text": "hello"})

        await measure(call, calls, seconds, connect_s)
    finally:
        await conn.close()


async def main() -> None:
    calls, seconds, server = args()
    if server[0].startswith("http"):
        await main_http(calls, seconds, server[0])
        return
    t = time.perf_counter()
    child = await procs.spawn(server, stdio=True)
    assert child.proc.stdout is not None and child.proc.stdin is not None
    conn = driver.StdioConn(child.proc.stdout, child.proc.stdin)
    try:
        await conn.handshake()
        driver.check_tool_result(await conn.request("tools/call", {"name": "echo", "arguments": {"text": "x"}}), "x")
        connect_s = time.perf_counter() - t

        async def call() -> None:
            await conn.request("tools/call", {"name": "echo", "arguments": {"text": "hello"}})

        await measure(call, calls, seconds, connect_s)
    finally:
        await conn.close()
        await child.stop()


if __name__ == "__main__":
    run(main())
