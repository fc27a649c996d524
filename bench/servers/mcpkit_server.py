"""Contender: mcpkit's high-level app, through its public API:

    app = MCPKit("bench"); @app.tool ...; app.run()  /  app.run(transport="http", host=..., port=...)

If it fails to import or start, the run reports mcpkit as n/a with the error.
For HTTP it is served as its users serve it (`app.run(transport="http")`: `_serve.serve_mcpkit`, with
`json_response=True` and the shared uvicorn settings); `make_asgi` gives its ASGI app for the in-process tools."""

from __future__ import annotations

import asyncio
from typing import Any

from _growth import SLOW_TOOL, SLOW_TOOL_SECONDS, extra_resources, extra_tools, resource_uri, slow_tool
from _serve import MCPKitEntries, main

from mcpkit import MCPKit

app = MCPKit("bench")


@app.tool
async def echo(text: str) -> str:
    return text


@app.tool
async def add(a: int, b: int) -> int:
    return a + b


def _extra_tool(text: str) -> str:
    return text


if slow_tool():  # in-flight cases only

    @app.tool(name=SLOW_TOOL)
    async def sleep50() -> str:
        await asyncio.sleep(SLOW_TOOL_SECONDS)
        return "ok"


for _i in range(extra_tools()):  # growth cases only
    app.add_tool(_extra_tool, name=f"t{_i}", description="A registry-size tool.")
for _i in range(extra_resources()):
    app.add_resource(resource_uri(_i), "x", name=f"r{_i}")


def make_asgi(stateless: bool) -> Any | None:
    """mcpkit's Streamable HTTP ASGI app, served by the shared uvicorn configuration like every contender.
    Returns None (fall back to app.run) if that factory is not importable."""
    try:
        from mcpkit.transports.http import create_app
    except ImportError:
        return None
    return create_app(app, stateless=stateless, json_response=True)


def run_http(port: int, stateless: bool) -> None:
    kwargs: dict[str, Any] = {"transport": "http", "host": "127.0.0.1", "port": port}
    if stateless:
        kwargs["stateless"] = True
    app.run(**kwargs)


entries = MCPKitEntries(app)
serve_http, served_config = entries.serve_http, entries.served_config


if __name__ == "__main__":
    main(app.run, make_asgi, run_http, serve_http=serve_http)
