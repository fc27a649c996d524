"""A stdio MCP server whose tool schemas are written by hand, in shapes that schema generators other than pydantic
emit: boolean subschemas (``true``: any value, ``false``: never present), as Rust's schemars writes for a
``serde_json::Value`` field. ``anything`` answers its arguments as JSON, so a test sees exactly what the form sent.

    python tests/support/servers/schema_shapes_server.py
"""

from __future__ import annotations

import json
from typing import Any

from mcpkit.server.lowlevel import Server, ServerRequestContext

TOOLS: list[dict[str, Any]] = [
    {
        "name": "anything",
        "description": "Answers its arguments as JSON.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "value": True,
                "label": {"type": "string"},
                "forbidden": False,
                "many": {"type": "array", "items": True},
            },
            "required": ["value"],
        },
    }
]

server = Server("schema-shapes")


@server.handler("tools/list")
async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"tools": TOOLS}


@server.handler("tools/call")
async def call_tool(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    arguments = params.get("arguments") or {}
    return {"content": [{"type": "text", "text": json.dumps(arguments, sort_keys=True)}]}


if __name__ == "__main__":
    server.run()
