"""A server on the official Python SDK's low-level ``Server`` (``mcp`` 2.3.0): handlers passed to the constructor,
paginated tools, a slow tool with progress; stdio by default, ``--http PORT`` for Streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

TOOLS = [
    types.Tool(
        name="echo",
        description="Echo the text back.",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    ),
    types.Tool(
        name="slow",
        description="Report progress for steps x 100 ms.",
        input_schema={"type": "object", "properties": {"steps": {"type": "integer"}}},
    ),
]


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    cursor = params.cursor if params else None
    if cursor is None:
        return types.ListToolsResult(tools=TOOLS[:1], next_cursor="page-2")
    return types.ListToolsResult(tools=TOOLS[1:])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    if params.name == "echo":
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(args.get("text", "")))])
    if params.name == "slow":
        steps = int(args.get("steps", 5))
        for i in range(steps):
            await asyncio.sleep(0.1)
            await ctx.session.report_progress(i + 1, steps)
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])
    raise ValueError(f"unknown tool {params.name}")


async def list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[types.Resource(uri="test://hello", name="hello", mime_type="text/plain")]
    )


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    text = types.TextResourceContents(uri=str(params.uri), mime_type="text/plain", text="hello")
    return types.ReadResourceResult(contents=[text])


server = Server(
    "official-sdk-lowlevel",
    version="1.0",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_list_resources=list_resources,
    on_read_resource=read_resource,
)


async def main() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if "--http" in sys.argv:
        import uvicorn

        app = server.streamable_http_app(host="127.0.0.1")
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]), log_level="warning")
    else:
        asyncio.run(main())
