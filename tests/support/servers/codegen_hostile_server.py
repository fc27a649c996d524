"""A stdio MCP server whose tool names, descriptions and schemas try to inject code into a module ``mcpkit
codegen`` writes, and to make its names collide: quotes, triple quotes, backslashes, newlines, keywords, names of
the generated class's own members, non-ASCII, recursive ``$ref``. tools/list comes in pages of two. Every tool
answers its arguments, as ``structuredContent`` ``{"received": ...}`` when it declares an output schema.

    python tests/support/servers/codegen_hostile_server.py
"""

from __future__ import annotations

import json
from typing import Any

from mcpkit.server.lowlevel import Server, ServerRequestContext

INJECTION = '"""; import os; os._exit(7); """'
RECEIVED = {"type": "object", "properties": {"received": {"type": "object"}}, "required": ["received"]}

TOOLS: list[dict[str, Any]] = [
    {
        "name": INJECTION,
        "description": f'{INJECTION}\n\\\n\'\'\' "" " \\x00 \x00 \u202e\u2028 end"',
        "inputSchema": {
            "type": "object",
            "description": INJECTION,
            "properties": {
                "from": {"type": "string", "description": INJECTION},
                "class": {"enum": [INJECTION, "it's", "\\", 'a "b"']},
                INJECTION: {"type": "integer"},
                "self": {"type": "boolean"},
                "arguments": {"type": "number"},
            },
            "required": ["from"],
        },
        "outputSchema": RECEIVED,
    },
    {"name": "client", "description": "Named like the wrapper's client attribute.", "inputSchema": {"type": "object"}},
    {"name": "get-weather", "inputSchema": {"type": "object", "properties": {"l": {"type": "string"}}}},
    {"name": "get_weather", "inputSchema": {"type": "object", "properties": {"list": {"type": "string"}}}},
    {"name": "class", "inputSchema": {"type": "object", "properties": {"None": {"type": "null"}}}},
    {"name": "caf\u00e9-\u65e5\u672c", "inputSchema": {"type": "object"}, "outputSchema": RECEIVED},
    {
        "name": "tree",
        "inputSchema": {
            "type": "object",
            "$defs": {
                "EchoInput": {"type": "object", "properties": {"next": {"$ref": "#/$defs/EchoInput"}}},
                "Loop": {"$ref": "#/$defs/Loop"},
            },
            "properties": {"node": {"$ref": "#/$defs/EchoInput"}, "loop": {"$ref": "#/$defs/Loop"}},
        },
        "outputSchema": RECEIVED,
    },
    {"name": "echo", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}},
]
PAGE = 2

server = Server('hostile"""; import os; os._exit(9) #')


@server.handler("tools/list")
async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    start = int((params or {}).get("cursor") or 0)
    page: dict[str, Any] = {"tools": TOOLS[start : start + PAGE]}
    if start + PAGE < len(TOOLS):
        page["nextCursor"] = str(start + PAGE)
    return page


@server.handler("tools/call")
async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    arguments = params.get("arguments") or {}
    tool = next(t for t in TOOLS if t["name"] == params["name"])
    result: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(arguments, sort_keys=True)}]}
    if "outputSchema" in tool:
        result["structuredContent"] = {"received": arguments}
    return result


if __name__ == "__main__":
    server.run()
