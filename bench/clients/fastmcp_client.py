"""Client contender: fastmcp's `Client` (4.1.2) over stdio, handshake era (mode="legacy", like the others)."""

from __future__ import annotations

import time

from _common import args, measure, run
from fastmcp import Client
from fastmcp.client.transports import StdioTransport


async def main() -> None:
    calls, seconds, server = args()
    t = time.perf_counter()
    target = server[0] if server[0].startswith("http") else StdioTransport(command=server[0], args=server[1:])
    async with Client(target, mode="legacy") as client:
        r = await client.call_tool_mcp("echo", {"text": "x"})
        assert r.content[0].text == "x"  # type: ignore[union-attr]
        connect_s = time.perf_counter() - t

        async def call() -> None:
            await client.call_tool_mcp("echo", {"text": "hello"})

        await measure(call, calls, seconds, connect_s)


if __name__ == "__main__":
    run(main())
