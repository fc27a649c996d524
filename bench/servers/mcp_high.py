"""Contender: the official SDK's high-level server, `mcp` 2.3.0 `MCPServer`."""

from _serve import main
from mcp.server.mcpserver import MCPServer

app = MCPServer("bench")


@app.tool()
async def echo(text: str) -> str:
    return text


@app.tool()
async def add(a: int, b: int) -> int:
    return a + b


def make_asgi(stateless: bool) -> object:
    return app.streamable_http_app(json_response=True, stateless_http=stateless)


if __name__ == "__main__":
    main(app.run, make_asgi)
