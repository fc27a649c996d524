"""Contender: mcpkit_def.py with its plain ``def`` tools pinned inline (``@app.tool(thread=False)``): no learning,
no watch. Beside mcpkit-def it shows what the default sync policy costs under the bench's load."""

from __future__ import annotations

from _serve import MCPKitEntries, main
from mcpkit_def import build

app = build(thread=False)
entries = MCPKitEntries(app)
make_asgi, serve_http, served_config = entries.make_asgi, entries.serve_http, entries.served_config


if __name__ == "__main__":
    main(app.run, make_asgi, serve_http=serve_http)
