"""A low-level mcpkit server whose results do not fit the protocol's types (no tests in here: it is imported, and
run as a script to serve over stdio).

``build_server()`` gives a fresh instance; ``python tests/support/servers/invalid_results_server.py`` serves it
over stdio. Both eras. ``tools/list`` answers a valid tool ``t`` and one whose name is a number; ``tools/call``
answers a content block of an unknown type (``bogus``); ``prompts/get`` a message whose role is ``robot``;
``resources/read`` contents without a ``uri``; ``resources/list`` a resource without a ``name``.
"""

from __future__ import annotations

from typing import Any

from mcpkit.server.lowlevel import Server, ServerRequestContext


def build_server() -> Server:
    server = Server("invalid-results", "1.0.0")

    @server.handler("tools/list")
    async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": [{"name": "t", "inputSchema": {"type": "object"}}, {"name": 3, "inputSchema": {}}]}

    @server.handler("tools/call")
    async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "fine"}, {"type": "bogus", "text": "x"}]}

    @server.handler("prompts/get")
    async def get_prompt(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{"role": "robot", "content": {"type": "text", "text": "x"}}]}

    @server.handler("resources/read")
    async def read_resource(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"contents": [{"text": "no uri"}]}

    @server.handler("resources/list")
    async def list_resources(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        return {"resources": [{"uri": "x://1"}]}

    return server


if __name__ == "__main__":
    build_server().run()
