"""An MCP server protected by OAuth 2.1, with mcpkit's development authorization server on the same origin.

    python examples/oauth_server.py                 # serve on http://127.0.0.1:8000 (MCP at /mcp)
    python examples/oauth_server.py --demo          # serve, then run a headless OAuth client against it

Layout (one origin, two roles):
- the authorization server (``AuthorizationServer``): /.well-known/oauth-authorization-server, /authorize (auto-
  approves as "test-user": development only), /token, /register (DCR), /jwks;
- the MCP endpoint /mcp wrapped by ``protect``: 401 + ``WWW-Authenticate: Bearer resource_metadata=...`` without a
  token, Protected Resource Metadata at /.well-known/oauth-protected-resource/mcp, JWTs checked against /jwks with
  the audience http://127.0.0.1:PORT/mcp. The ``admin`` tool needs the ``mcp:admin`` scope (403 step-up).
- one process, so the resource server also asks the authorization server's revocation ledger about every token:
  the access token issued from an authorization code that was later replayed is refused (401) at once, not when it
  expires (RFC 6749 §4.1.2). DPoP is accepted too: a client that proves a key gets tokens bound to it.

In production, point ``JWTVerifier`` at your real authorization server's JWKS and drop ``AuthorizationServer``.
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn

from mcpkit import MCPKit
from mcpkit.auth import AuthorizationServer, JWTVerifier, current_access_token, protect, tool_scopes
from mcpkit.transports.http import create_app

mcp = MCPKit("oauth-example", version="1.0.0")


@mcp.tool
def whoami() -> str:
    """Who is calling: the subject and scopes of the access token."""
    token = current_access_token()
    return "anonymous" if token is None else f"{token.subject} ({' '.join(sorted(token.scopes)) or 'no scopes'})"


@mcp.tool
def admin(action: str = "status") -> str:
    """An administrative action; needs the mcp:admin scope."""
    return f"admin {action}: ok"


def build(host: str, port: int) -> AuthorizationServer:
    base = f"http://{host}:{port}"
    resource = base + "/mcp"
    authz = AuthorizationServer(
        base,
        auto_approve=True,
        scopes_supported=["mcp:read", "mcp:admin"],
        default_scopes=["mcp:read"],
        resources=[resource],
        dpop=True,
    )
    authz.app = protect(
        create_app(mcp),
        resource=resource,
        verifier=JWTVerifier(issuer=base, audience=resource, keys={authz.kid: authz.key.public_key()}),
        authorization_servers=[base],
        required_scopes=["mcp:read"],
        scopes_supported=["mcp:read", "mcp:admin"],
        scope_rule=tool_scopes({"admin": ["mcp:admin"]}),
        resource_name="mcpkit OAuth example",
        revocation=authz.revocation,  # the same process: a revoked grant's tokens are refused before they expire
        dpop=True,
    )
    return authz


async def demo(url: str) -> None:
    from mcpkit.auth import HeadlessBrowser, OAuthClient
    from mcpkit.client.lowlevel import ClientSession
    from mcpkit.transports.http import StreamableHTTPClientTransport

    browser = HeadlessBrowser()
    auth = OAuthClient(
        url,
        client_metadata={"client_name": "oauth-demo", "redirect_uris": ["http://127.0.0.1:1/cb"]},
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
    )
    async with StreamableHTTPClientTransport(url, auth=auth) as conn, ClientSession(conn) as session:
        for tool in ("whoami", "admin", "whoami"):
            result = await session.call_tool(tool, {})
            print(f"{tool}: {result.content[0].text}")  # type: ignore[union-attr]
    print("requests made by the OAuth client:", *auth.log, sep="\n  ")
    await auth.aclose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--demo", action="store_true", help="serve, run a headless OAuth client, exit")
    args = parser.parse_args()
    server = uvicorn.Server(
        uvicorn.Config(build(args.host, args.port), host=args.host, port=args.port, log_level="warning", lifespan="on")
    )
    if not args.demo:
        print(f"MCP endpoint: http://{args.host}:{args.port}/mcp (OAuth 2.1; dev AS auto-approves)")
        await server.serve()
        return
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.02)
    try:
        await demo(f"http://{args.host}:{args.port}/mcp")
    finally:
        server.should_exit = True
        await task


if __name__ == "__main__":
    asyncio.run(main())
