"""Contender: mcpkit_def.py with its plain ``def`` tools pinned inline (``@app.tool(thread=False)``): no learning,
no watch. Beside mcpkit-def it shows what the default sync policy costs under the bench's load."""

from __future__ import annotations

from typing import Any

from _serve import main

from mcpkit import MCPKit

app = MCPKit("bench")


@app.tool(thread=False)
def echo(text: str) -> str:
    return text


@app.tool(thread=False)
def add(a: int, b: int) -> int:
    return a + b


def make_asgi(stateless: bool) -> Any | None:
    from mcpkit.transports.http import create_app

    return create_app(app, stateless=stateless, json_response=True)


if __name__ == "__main__":
    main(app.run, make_asgi)
