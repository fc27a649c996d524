"""Client contender: the official SDK's `mcp.Client` (2.3.0) over stdio or Streamable HTTP (a URL),
handshake era (mode="legacy")."""

from __future__ import annotations

import time

from _common import args, measure, run
from mcp import Client
from mcp.client.stdio import StdioServerParameters


async def main() -> None:
    calls, seconds, server = args()
    t = time.perf_counter()
    target = server[0] if server[0].startswith("http") else StdioServerParameters(command=server[0], args=server[1:])
    async with Client(target, mode="legacy") as client:
        r = await client.call_tool("echo", {"text": "x"})
        assert r.content[0].text == "x"  # type: ignore[union-attr]
        connect_s = time.perf_counter() - t

        async def call() -> None:
            await client.call_tool("echo", {"text": "hello"})

        await measure(call, calls, seconds, connect_s)


if __name__ == "__main__":
    run(main())
