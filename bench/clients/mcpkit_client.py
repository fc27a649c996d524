"""Client contender: mcpkit's high-level `Client` over stdio, handshake era (like the other clients).

Written against the API as it is today: `mcpkit.Client(StdioServer(argv), mode="handshake")` as an async
context manager with `call_tool(name, args)`. If that API changes, adjust here; a failure is reported n/a."""

from __future__ import annotations

import time
from typing import Any

from _common import args, measure, run

from mcpkit import Client


def _target(server: list[str]) -> Any:
    from mcpkit.transports.stdio import StdioServer

    return server[0] if server[0].startswith("http") else StdioServer(server)


async def main() -> None:
    calls, seconds, server = args()
    t = time.perf_counter()
    async with Client(_target(server), mode="handshake") as client:  # same era as the other clients
        await client.call_tool("echo", {"text": "x"})
        connect_s = time.perf_counter() - t

        async def call() -> None:
            await client.call_tool("echo", {"text": "hello"})

        await measure(call, calls, seconds, connect_s)


if __name__ == "__main__":
    run(main())
