"""Contender: the official SDK's high-level server, `mcp` 2.3.0 `MCPServer`."""

import asyncio

from _growth import SLOW_TOOL, SLOW_TOOL_SECONDS, extra_resources, extra_tools, resource_uri, slow_tool
from _serve import main
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import TextResource

app = MCPServer("bench")


@app.tool()
async def echo(text: str) -> str:
    return text


@app.tool()
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
    app.add_resource(TextResource(uri=resource_uri(_i), name=f"r{_i}", text="x"))


def make_asgi(stateless: bool) -> object:
    return app.streamable_http_app(json_response=True, stateless_http=stateless)


if __name__ == "__main__":
    main(app.run, make_asgi)
