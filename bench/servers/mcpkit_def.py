"""Contender: mcpkit's high-level app with plain ``def`` tools (what most users write), otherwise the same as
mcpkit_server.py: ``@app.tool def echo(text: str) -> str`` with the default sync policy (learned: a worker
thread until the tool proves fast and non-blocking, then inline). Over HTTP it is served as its users serve it
(``app.run(transport="http")``: ``_serve.serve_mcpkit``); mcpkit_asgi.py mounts the same app on stock uvicorn."""

from __future__ import annotations

from typing import Any

from _serve import main, mcpkit_config, serve_mcpkit

from mcpkit import MCPKit


def echo(text: str) -> str:
    return text


def add(a: int, b: int) -> int:
    return a + b


def build(thread: bool | None = None) -> MCPKit:
    """The app with ``echo`` and ``add`` as plain ``def`` tools, registered with ``thread`` (None: the default
    sync policy; mcpkit_inline.py passes False)."""
    served = MCPKit("bench")
    for fn in (echo, add):
        served.tool(thread=thread)(fn)
    return served


def asgi_of(served: MCPKit, stateless: bool) -> Any:
    from mcpkit.transports.http import create_app

    return create_app(served, stateless=stateless, json_response=True)


app = build()


def make_asgi(stateless: bool) -> Any | None:
    return asgi_of(app, stateless)


def serve_http(port: int, stateless: bool) -> None:
    serve_mcpkit(app, port, stateless)


def served_config(stateless: bool) -> Any:
    """What serve_http serves, as a uvicorn Config (bench/uvicorn_inproc.py)."""
    return mcpkit_config(app, stateless)


if __name__ == "__main__":
    main(app.run, make_asgi, serve_http=serve_http)
