"""A low-level server whose handlers answer something that is no JSON (an ``object()`` inside the result): the
engine must answer -32603 and go on, not drop the answer. ``prompts/list`` answers at once (a plain function, run
inline), ``resources/list`` after an await; ``tools/list`` answers well."""

from __future__ import annotations

from typing import Any

from mcpkit.server.lowlevel import Server, ServerRequestContext

server = Server("unencodable", "1")


@server.handler("tools/list")
async def list_tools(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"tools": []}


@server.handler("prompts/list")
def list_prompts(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"prompts": [], "x": object()}


@server.handler("resources/list")
async def list_resources(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
    return {"resources": [], "x": object()}


if __name__ == "__main__":
    server.run()
