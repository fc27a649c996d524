"""Contender: fastmcp (4.1.2; 4.1.6 does not resolve on this machine's index). The startup banner is
turned off: it is cosmetic and goes to stderr."""

from _serve import main
from fastmcp import FastMCP

app = FastMCP("bench")


@app.tool
async def echo(text: str) -> str:
    return text


@app.tool
async def add(a: int, b: int) -> int:
    return a + b


def make_asgi(stateless: bool) -> object:
    return app.http_app(json_response=True, stateless_http=stateless)


if __name__ == "__main__":
    main(lambda: app.run(show_banner=False), make_asgi)
