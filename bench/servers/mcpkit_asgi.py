"""Contender: mcpkit_def.py's app (plain ``def`` tools, the default sync policy) as an ASGI app mounted on stock
uvicorn with the shared configuration: what users who mount mcpkit in Starlette or FastAPI (or serve
``create_app(...)`` with their own uvicorn) get. mcpkit_def.py serves the same app as ``app.run(transport="http")``
does (mcpkit's own protocol, with its lane)."""

from __future__ import annotations

from _serve import main
from mcpkit_def import app, entries

make_asgi = entries.make_asgi


if __name__ == "__main__":
    main(app.run, make_asgi)
