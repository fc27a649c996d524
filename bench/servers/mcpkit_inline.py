"""Contender: mcpkit_def.py with its plain ``def`` tools pinned inline (``@app.tool(thread=False)``): no learning,
no watch. Beside mcpkit-def it shows what the default sync policy costs under the bench's load."""

from __future__ import annotations

from typing import Any

from _serve import main, mcpkit_config, serve_mcpkit
from mcpkit_def import asgi_of, build

app = build(thread=False)


def make_asgi(stateless: bool) -> Any | None:
    return asgi_of(app, stateless)


def serve_http(port: int, stateless: bool) -> None:
    serve_mcpkit(app, port, stateless)


def served_config(stateless: bool) -> Any:
    """What serve_http serves, as a uvicorn Config (bench/uvicorn_inproc.py)."""
    return mcpkit_config(app, stateless)


if __name__ == "__main__":
    main(app.run, make_asgi, serve_http=serve_http)
