"""A stdio server on the official Python SDK's high-level ``MCPServer`` (``mcp`` 2.3.0) that elicits forms with
``Optional`` fields, written as its docs show. Tool ``optional`` asks ``name: str`` and ``nick: str | None = None``
(not required), tool ``required_nullable`` asks ``nick: str | None`` (required); each answers what it got as JSON
text (``{"action": ..., "data": {...}}``), or ``error: ...`` when the SDK raised."""

from __future__ import annotations

import json

from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

mcp = MCPServer("official-sdk-elicit")


class Optional_(BaseModel):
    name: str
    nick: str | None = None


class RequiredNullable(BaseModel):
    nick: str | None


async def _ask(ctx: Context, schema: type[BaseModel]) -> str:
    try:
        result = await ctx.elicit("Fill in the form", schema)
    except Exception as exc:
        return f"error: {exc}"
    data = getattr(result, "data", None)
    return json.dumps({"action": result.action, "data": data.model_dump() if data is not None else None})


@mcp.tool()
async def optional(ctx: Context) -> str:
    """Elicit a name and an optional nickname."""
    return await _ask(ctx, Optional_)


@mcp.tool()
async def required_nullable(ctx: Context) -> str:
    """Elicit a nickname that is required but may be null."""
    return await _ask(ctx, RequiredNullable)


if __name__ == "__main__":
    mcp.run()
