"""Client contender: mcpkit's client over stdio.

TODO(bench): ADAPTER. mcpkit's client API is being written. This follows the planned shape
(`Client(target)` as an async context manager with `call_tool(name, args)`, a stdio target named by
`mcpkit.transports.stdio.StdioServer`); adjust `_target()` when the API lands. Until then it fails at import and the run
reports it as n/a with the error."""

from __future__ import annotations

import time
from typing import Any

from _common import args, measure, run

from mcpkit import Client


def _target(server: list[str]) -> Any:
    from mcpkit.transports.stdio import StdioServer

    return StdioServer(server)


async def main() -> None:
    calls, seconds, server = args()
    t = time.perf_counter()
    async with Client(_target(server)) as client:
        await client.call_tool("echo", {"text": "x"})
        connect_s = time.perf_counter() - t

        async def call() -> None:
            await client.call_tool("echo", {"text": "hello"})

        await measure(call, calls, seconds, connect_s)


if __name__ == "__main__":
    run(main())
