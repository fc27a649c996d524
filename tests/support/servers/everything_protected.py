"""``examples/everything.py`` over Streamable HTTP behind OAuth: mcpkit's development authorization server (auto
approval, dynamic registration, PKCE S256) and ``protect`` with a JWT verifier, on one port of 127.0.0.1. Prints
``{"port": N}`` once it listens.

    python tests/support/servers/everything_protected.py
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

import uvicorn
from everything import create_app

from mcpkit.auth import AuthorizationServer, JWTVerifier, protect
from mcpkit.transports.http import create_app as http_app


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    authz = AuthorizationServer(base, auto_approve=True, scopes_supported=["mcp"], resources=[base + "/mcp"])
    authz.app = protect(
        http_app(create_app()),
        resource=base + "/mcp",
        verifier=JWTVerifier(issuer=base, audience=base + "/mcp", keys={authz.kid: authz.key.public_key()}),
        authorization_servers=[base],
        required_scopes=["mcp"],
    )
    server = uvicorn.Server(uvicorn.Config(authz, log_level="warning", lifespan="on"))
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started and not task.done():
        await asyncio.sleep(0.02)
    print(json.dumps({"port": port}), flush=True)
    await task


if __name__ == "__main__":
    asyncio.run(main())
