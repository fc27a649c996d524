"""Contender: mcpkit's high-level app with plain ``def`` tools (what most users write), otherwise the same as
mcpkit_server.py: ``@app.tool def echo(text: str) -> str`` with the default sync policy (learned: a worker
thread until the tool proves fast and non-blocking, then inline)."""

from __future__ import annotations

from typing import Any

from _serve import main

from mcpkit import MCPKit

app = MCPKit("bench")


@app.tool
def echo(text: str) -> str:
    return text


@app.tool
def add(a: int, b: int) -> int:
    return a + b


def make_asgi(stateless: bool) -> Any | None:
    from mcpkit.transports.http import create_app

    return create_app(app, stateless=stateless, json_response=True)


if __name__ == "__main__":
    main(app.run, make_asgi)
