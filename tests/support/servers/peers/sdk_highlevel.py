"""A server on the official Python SDK's high-level ``MCPServer`` (``mcp`` 2.3.0), written as its docs show:
stdio by default, ``--http PORT`` for Streamable HTTP on 127.0.0.1, ``--sse PORT`` for the legacy HTTP+SSE transport."""

from __future__ import annotations

import asyncio
import sys

from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("official-sdk-example")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Report progress for steps x 100 ms."""
    for i in range(steps):
        await asyncio.sleep(0.1)
        await ctx.report_progress(i + 1, steps)
    return "done"


@mcp.resource("test://hello", mime_type="text/plain")
def hello() -> str:
    """A static text resource."""
    return "hello"


@mcp.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Please greet {name}."


if __name__ == "__main__":
    if "--http" in sys.argv:
        mcp.run("streamable-http", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--http") + 1]))
    elif "--sse" in sys.argv:  # the legacy HTTP+SSE transport, at /sse
        mcp.run("sse", host="127.0.0.1", port=int(sys.argv[sys.argv.index("--sse") + 1]))
    else:
        mcp.run()
