"""Contender: mcpkit's low-level `Server` with trivial hand-written handlers (issue 2: stdio round trips).

Written against `mcpkit.server.lowlevel.Server` as it is today: `set_handler(method, async (ctx, params) ->
dict)` and `run()` for stdio. If that API changes, adjust here; until it works the run reports n/a."""

from __future__ import annotations

from typing import Any

from _serve import main

from mcpkit.server.lowlevel import Server

TOOLS: list[dict[str, Any]] = [
    {
        "name": "echo",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "add",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
]

server = Server("bench-lowlevel")


async def list_tools(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
    return {"tools": TOOLS}


async def call_tool(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
    args = params.get("arguments") or {}
    if params.get("name") == "add":
        s = int(args["a"]) + int(args["b"])
        return {"content": [{"type": "text", "text": str(s)}], "structuredContent": {"result": s}}
    return {"content": [{"type": "text", "text": str(args.get("text", ""))}]}


server.set_handler("tools/list", list_tools)
server.set_handler("tools/call", call_tool)


if __name__ == "__main__":
    main(server.run)
