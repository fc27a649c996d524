"""An MCP server built with ``MCPKit.from_fastapi`` from ``asgi_api``'s FastAPI app, in a subprocess.

    python fastapi_server.py stdio|http EVENTS_FILE [--fail]

The API's lifespan events go to EVENTS_FILE; ``--fail`` makes its startup fail. Over HTTP it serves Streamable HTTP
on 127.0.0.1 at a free port, printed first as ``PORT <n>``, until SIGTERM; it forwards the MCP request's
``Authorization`` to the API.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from asgi_api import build_api

from mcpkit import MCPKit


def main() -> None:
    transport, events = sys.argv[1], sys.argv[2]
    api = build_api(events_file=events, fail_startup="--fail" in sys.argv)
    app = MCPKit.from_fastapi(api, forward_headers=("authorization",), max_response_bytes=64 * 1024, timeout=10)
    if transport == "stdio":
        app.run()
        return
    import uvicorn

    from mcpkit.transports.http import create_app

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # (connections wait in the backlog while uvicorn starts)
    print("PORT", sock.getsockname()[1], flush=True)
    config = uvicorn.Config(create_app(app), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
