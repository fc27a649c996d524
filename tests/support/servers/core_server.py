"""A low-level mcpkit server used by the core (issue 2) tests, over memory and stdio.

Tools: echo(text), slow(steps, delay_ms) with progress and cancellation tracking, ask (elicitation + sampling +
roots, era-portable), shout (prints to stdout: the stdio guard must keep it off the protocol stream), big(n).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from mcpkit.server.lowlevel import Server, ServerRequestContext

server = Server("core-test", "1.2.3", instructions="test server")
cancelled: list[Any] = []  # ids of slow calls that observed their cancellation
finished: list[Any] = []

TOOLS = [
    {
        "name": "echo",
        "description": "Echo text",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    },
    {"name": "slow", "description": "Sleep in steps", "inputSchema": {"type": "object"}},
    {"name": "ask", "description": "Ask the client", "inputSchema": {"type": "object"}},
    {"name": "shout", "description": "print() to stdout", "inputSchema": {"type": "object"}},
    {"name": "big", "description": "n bytes of text", "inputSchema": {"type": "object"}},
    {"name": "status", "description": "what slow calls saw", "inputSchema": {"type": "object"}},
]


def text(t: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": t}], "isError": False}


@server.handler("tools/list")
async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"tools": TOOLS}


@server.handler("tools/call")
async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        await ctx.log("info", {"echo": args.get("text")})
        return text(str(args.get("text", "")))
    if name == "slow":
        steps = int(args.get("steps", 5))
        delay = float(args.get("delay_ms", 100)) / 1000
        try:
            for i in range(steps):
                await ctx.report_progress(i + 1, steps, f"step {i + 1}")
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            cancelled.append(args.get("tag", ctx.request_id))
            raise
        finished.append(args.get("tag", ctx.request_id))
        return text(f"done {steps}")
    if name == "ask":
        e = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        s = await ctx.sample(
            {"messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}], "maxTokens": 10}
        )
        r = await ctx.list_roots()
        name_ = (e.get("content") or {}).get("name")
        return text(f"{e['action']}:{name_}|{s['content']['text']}|{','.join(x['uri'] for x in r['roots'])}")
    if name == "shout":
        print("THIS MUST NOT REACH THE PROTOCOL STREAM")
        sys.stdout.flush()
        return text("shouted")
    if name == "big":
        return text("x" * int(args.get("n", 100_000)))
    if name == "status":
        return {
            "content": [{"type": "text", "text": "status"}],
            "structuredContent": {"cancelled": cancelled, "finished": finished},
        }
    from mcpkit.protocol.errors import InvalidParams

    raise InvalidParams(f"Unknown tool: {name}")


@server.handler("resources/read")
async def read(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    from mcpkit.protocol.errors import ResourceNotFound

    uri = params.get("uri")
    if uri == "test://hello":
        return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "hello"}]}
    raise ResourceNotFound(str(uri))


@server.handler("resources/list")
async def list_resources(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"resources": [{"uri": "test://hello", "name": "hello", "mimeType": "text/plain"}]}


if __name__ == "__main__":
    server.run()
