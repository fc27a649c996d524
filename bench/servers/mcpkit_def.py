"""Contender: mcpkit's high-level app with plain ``def`` tools (what most users write), otherwise the same as
mcpkit_server.py: ``@app.tool def echo(text: str) -> str`` with the default sync policy (learned: a worker
thread until the tool proves fast and non-blocking, then inline). Over HTTP it is served as its users serve it
(``app.run(transport="http")``: ``_serve.serve_mcpkit``); mcpkit_asgi.py mounts the same app on stock uvicorn."""

from __future__ import annotations

from _serve import MCPKitEntries, main

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


app = build()
entries = MCPKitEntries(app)
make_asgi, serve_http, served_config = entries.make_asgi, entries.serve_http, entries.served_config


if __name__ == "__main__":
    main(app.run, make_asgi, serve_http=serve_http)
