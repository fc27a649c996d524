"""``Client(url, auth=...)``: a bearer token, an ``httpx.Auth`` flow such as ``OAuthClient``, or ``"oauth"`` (the
browser flow: a loopback listener receives the redirect). Real uvicorn, the development authorization server and a
resource server made with ``protect``."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import webbrowser
from collections.abc import AsyncIterator

import pytest

from mcpkit import Client, MCPError, MCPKit, ServerStartError

pytest.importorskip("jwt")
pytest.importorskip("uvicorn")

import httpx

from mcpkit.auth import (
    AuthorizationServer,
    HeadlessBrowser,
    JWTVerifier,
    OAuthClient,
    StaticTokenVerifier,
    current_access_token,
    protect,
)
from mcpkit.transports.http import create_app
from support.asgi import serve_asgi


def make_app() -> MCPKit:
    app = MCPKit("protected")

    @app.tool
    def whoami() -> str:
        """The subject of the caller's token."""
        token = current_access_token()
        return "anonymous" if token is None else str(token.subject)

    return app


@contextlib.asynccontextmanager
async def oauth_protected() -> AsyncIterator[str]:
    """A protected MCP endpoint with the development authorization server on the same origin; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    authz = AuthorizationServer(base, auto_approve=True, scopes_supported=["mcp"], resources=[base + "/mcp"])
    authz.app = protect(
        create_app(make_app()),
        resource=base + "/mcp",
        verifier=JWTVerifier(issuer=base, audience=base + "/mcp", keys={authz.kid: authz.key.public_key()}),
        authorization_servers=[base],
        required_scopes=["mcp"],
    )
    async with serve_asgi(authz, sock=sock):
        yield base + "/mcp"


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_bearer_token_string(mode: str) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    verifier = StaticTokenVerifier.simple({"s3cret": ["mcp"]}, audience=url)
    async with serve_asgi(protect(create_app(make_app()), resource=url, verifier=verifier), sock=sock):
        async with Client(url, mode=mode, auth="s3cret") as client:  # type: ignore[arg-type]
            assert (await client.call_tool("whoami")).data == "static-client"
        with pytest.raises(MCPError, match=r"HTTP 401: .*unknown token") as refused:
            async with Client(url, mode=mode, auth="wrong") as client:  # type: ignore[arg-type]
                pass
        assert refused.value.data == {"status": 401}


async def test_an_oauth_client_flow() -> None:
    async with oauth_protected() as url:
        browser = HeadlessBrowser()
        oauth = OAuthClient(
            url,
            client_metadata={"client_name": "t", "redirect_uris": ["http://127.0.0.1:1/callback"]},
            redirect_handler=browser.redirect_handler,
            callback_handler=browser.callback_handler,
        )
        try:
            async with Client(url, auth=oauth) as client:
                assert (await client.call_tool("whoami")).data == "test-user"
        finally:
            await oauth.aclose()
        assert browser.visited  # the authorization URL was visited once


async def test_oauth_in_the_browser(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auth="oauth"``: the authorization URL opens in the browser (here a stand-in that follows the redirects,
    as a person approving it would), the loopback listener receives the code, the call goes through."""
    opened: list[str] = []

    def browser(url: str, *args: object, **kwargs: object) -> bool:
        opened.append(url)
        with httpx.Client(follow_redirects=True, timeout=10) as agent:
            agent.get(url)  # the dev server approves and redirects to the loopback listener
        return True

    monkeypatch.setattr(webbrowser, "open", browser)
    async with oauth_protected() as url, Client(url, auth="oauth") as client:
        assert (await client.call_tool("whoami")).data == "test-user"
    assert len(opened) == 1 and "/authorize?" in opened[0] and "code_challenge=" in opened[0]


def test_auth_is_checked_when_the_client_is_built() -> None:
    with pytest.raises(ValueError, match="auth= applies to http"):
        Client([sys.executable, "-c", "pass"], auth="token")
    with pytest.raises(TypeError, match='auth must be "oauth", a bearer token'):
        Client("http://127.0.0.1:9/mcp", auth=42)  # type: ignore[arg-type]
    assert issubclass(ServerStartError, ConnectionError)
    assert asyncio.iscoroutinefunction(Client.aclose)
