"""A low-level mcpkit server for the limits tests (issues 12.3, 12.12, 16): a slow tool that counts how many of its
calls run at once, a tool that asks the client for its roots (handshake era), and a tool that reports the peak and
the process's memory.

    python limits_server.py stdio [server options as k=v ...]
    python limits_server.py http [endpoint options as k=v ...]   (prints "PORT <n>" once listening on 127.0.0.1)

Options are integers (``max_requests_per_session=8``) passed to ``create_app`` (http) or ``Server.serve``'s peer
(stdio), e.g. ``max_concurrency=16``. ``modern_only=1`` serves only 2026-07-28.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from mcpkit.server.lowlevel import Server, ServerRequestContext


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def build(modern_only: bool) -> Server:
    server = Server("limits", "1.0.0", versions=("2026-07-28",) if modern_only else ("2025-03-26", "2026-07-28"))
    state = {"now": 0, "peak": 0, "calls": 0}

    @server.handler("tools/list")
    async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("slow", "ask", "stats")]}

    @server.handler("tools/call")
    async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        name = params.get("name")
        args = params.get("arguments") or {}
        if name == "slow":
            state["now"] += 1
            state["calls"] += 1
            state["peak"] = max(state["peak"], state["now"])
            try:
                if "until" in args:  # a wall-clock time (time.time()) shared with the test
                    await asyncio.sleep(max(0.0, float(args["until"]) - time.time()))
                else:
                    await asyncio.sleep(float(args.get("ms", 50)) / 1000)
            finally:
                state["now"] -= 1
            return {"content": [{"type": "text", "text": "ok"}]}
        if name == "ask":  # the client's roots, asked while the call runs (a request from the server)
            roots = await ctx.ask("roots/list", {}, timeout=float(args.get("timeout", 30)))
            return {"content": [{"type": "text", "text": str(len(roots.get("roots", [])))}]}
        if name == "stats":
            out = {**state, "rss_kb": rss_kb()}
            if args.get("reset"):
                state["peak"] = state["calls"] = 0
            return {"content": [{"type": "text", "text": json.dumps(out)}]}
        return {"content": [{"type": "text", "text": f"unknown tool {name}"}], "isError": True}

    return server


async def main() -> None:
    mode = sys.argv[1]
    opts = {k: int(v) for k, v in (a.split("=", 1) for a in sys.argv[2:])}
    server = build(bool(opts.pop("modern_only", 0)))
    if mode == "stdio":
        from mcpkit.transports.stdio import StdioServerTransport

        transport = StdioServerTransport()
        await transport.start()
        await server.serve(transport, **opts)
        return
    from mcpkit.transports.http import build_server

    userver = build_server(server, "http", "127.0.0.1", 0, ws=True, **opts)
    task = asyncio.create_task(userver.serve())
    while not userver.started:
        await asyncio.sleep(0.01)
    port = userver.servers[0].sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main())
