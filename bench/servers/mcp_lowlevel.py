"""Contender: the official SDK's low-level `Server` (`mcp` 2.3.0) with hand-written handlers, no schemas
derived from type hints and no validation of arguments beyond what the SDK itself does."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from _serve import main
from mcp.server.lowlevel import Server

TOOLS = [
    types.Tool(
        name="echo",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="add",
        input_schema={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    ),
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "echo":
        return types.CallToolResult(content=[types.TextContent(text=str(args["text"]))])
    if params.name == "add":
        s = int(args["a"]) + int(args["b"])
        return types.CallToolResult(content=[types.TextContent(text=str(s))], structured_content={"result": s})
    raise ValueError(f"unknown tool {params.name}")


server = Server("bench", on_list_tools=list_tools, on_call_tool=call_tool)


def run_stdio() -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    async def go() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(go)


def make_asgi(stateless: bool) -> object:
    return server.streamable_http_app(json_response=True, stateless_http=stateless)


if __name__ == "__main__":
    main(run_stdio, make_asgi)
