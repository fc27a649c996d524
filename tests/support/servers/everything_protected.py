"""``examples/everything.py`` over Streamable HTTP behind OAuth: mcpkit's development authorization server (auto
approval, dynamic registration, PKCE S256) and ``protect`` with a JWT verifier, on one port of 127.0.0.1. Prints
``{"port": N}`` once it listens.

    python tests/support/servers/everything_protected.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))

from everything import create_app
from listening import bind, serve_printing_port

from mcpkit.auth import AuthorizationServer, JWTVerifier, protect
from mcpkit.transports.http import create_app as http_app


async def main() -> None:
    sock, base = bind()
    authz = AuthorizationServer(base, auto_approve=True, scopes_supported=["mcp"], resources=[base + "/mcp"])
    authz.app = protect(
        http_app(create_app()),
        resource=base + "/mcp",
        verifier=JWTVerifier(issuer=base, audience=base + "/mcp", keys={authz.kid: authz.key.public_key()}),
        authorization_servers=[base],
        required_scopes=["mcp"],
    )
    await serve_printing_port(authz, sock)


if __name__ == "__main__":
    asyncio.run(main())
