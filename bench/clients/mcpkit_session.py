"""Client contender: mcpkit's low-level `ClientSession` over its stdio client transport, handshake era.

Written against the API as it is today (`mcpkit.client.lowlevel.ClientSession`,
`mcpkit.transports.stdio.StdioClientTransport(StdioServer(argv))`); adjust if it changes."""

from __future__ import annotations

import time
from typing import Any

from _common import args, measure, run

from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.stdio import StdioClientTransport, StdioServer


async def main() -> None:
    calls, seconds, server = args()
    t = time.perf_counter()
    transport: Any
    if server[0].startswith("http"):
        from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport

        transport = StreamableHTTPClientTransport(server[0])
    else:
        transport = StdioClientTransport(StdioServer(server, stderr="devnull"))
        await transport.start()
    async with ClientSession(transport, mode="handshake") as session:
        await session.call_tool("echo", {"text": "x"})
        connect_s = time.perf_counter() - t

        async def call() -> None:
            await session.call_tool("echo", {"text": "hello"})

        await measure(call, calls, seconds, connect_s)


if __name__ == "__main__":
    run(main())
