"""The OAuth test stack shared by the auth tests: an MCP app protected by ``protect``, the
authorization server, both on uvicorn on 127.0.0.1, and a client that signs in headlessly."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import jwt

from mcpkit import MCPKit
from mcpkit.auth import (
    AuthorizationServer,
    HeadlessBrowser,
    JWTVerifier,
    OAuthClient,
    current_access_token,
    protect,
)
from mcpkit.auth._util import pkce_pair
from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import create_app
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.asgi import serve_asgi
from support.redis_server import redis_url  # noqa: F401  (the session fixture)

REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the headless browser stops at the redirect


# ---------------------------------------------------------------------------------------------------- fixtures
def mcp_server() -> MCPKit:
    app = MCPKit("auth-test", version="1.0.0")

    @app.tool
    def whoami() -> str:
        """The subject and scopes of the caller's access token."""
        tok = current_access_token()
        return "anonymous" if tok is None else f"{tok.subject}|{' '.join(sorted(tok.scopes))}"

    @app.tool
    def admin() -> str:
        """Needs the mcp:admin scope (step-up)."""
        return "admin ok"

    return app


class Served:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, str]]] = []


@contextlib.asynccontextmanager
async def serve(factory: Callable[[str], Any]) -> AsyncIterator[tuple[str, Served]]:
    """Run ``factory(base_url)`` on uvicorn at a port bound before the app is built (the app must know its URL)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    inner = factory(base)
    served = Served()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):  # (a WebSocket upgrade is logged as method "WEBSOCKET")
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            served.requests.append(
                (
                    scope.get("method", "WEBSOCKET"),
                    scope["path"] + ("?" + scope["query_string"].decode() if scope["query_string"] else ""),
                    headers,
                )
            )
        await inner(scope, receive, send)

    async with serve_asgi(app, sock=sock):
        yield base, served


def protected_by(as_url: str, server: Callable[[], Any] = mcp_server, **protect_options: Any) -> Callable[[str], Any]:
    """For :func:`serve`: ``server()`` at ``<base>/mcp``, protected by access tokens of the authorization server at
    ``as_url`` (a :class:`JWTVerifier` against its JWKS, the audience being that resource)."""

    def make(base: str) -> Any:
        resource = base + "/mcp"
        verifier = JWTVerifier(issuer=as_url, audience=resource, jwks_url=as_url + "/jwks")
        options = {"authorization_servers": [as_url], **protect_options}
        return protect(create_app(server()), resource=resource, verifier=verifier, **options)

    return make


@contextlib.asynccontextmanager
async def foreign_issuer() -> AsyncIterator[tuple[str, Served, str, Any]]:
    """An authorization server and, on another origin, an MCP server it protects, with a machine client registered
    for ``client_credentials`` (``client_secret_basic``): yields (AS URL, its request log, the MCP server's base URL,
    the client's record). A client secret must not go to that AS unless the caller names it as the issuer."""
    holder: dict[str, AuthorizationServer] = {}

    def make_as(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, auto_approve=True)
        return holder["as"]

    async with serve(make_as) as (as_url, as_log), serve(protected_by(as_url)) as (rs_base, _):
        machine = await holder["as"].register_client(
            grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
        )
        assert machine.client_secret is not None
        yield as_url, as_log, rs_base, machine


@contextlib.asynccontextmanager
async def stack(
    *,
    scopes_supported: list[str] | None = None,
    required: tuple[str, ...] = (),
    scope_rule: Any = None,
    as_options: dict[str, Any] | None = None,
    rs_options: dict[str, Any] | Callable[[AuthorizationServer], dict[str, Any]] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """An AS on one port, the protected MCP server (JWTVerifier against the AS's JWKS) on another. ``rs_options``
    may be a callable of the AS (options that need it, e.g. ``revocation=authz.revocation``)."""
    holder: dict[str, Any] = {}

    def make_as(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(
            base, auto_approve=True, scopes_supported=scopes_supported, **(as_options or {})
        )
        return holder["as"]

    async with serve(make_as) as (as_url, as_log):

        def make_rs(base: str) -> Any:
            resource = base + "/mcp"
            holder["verifier"] = JWTVerifier(issuer=as_url, audience=resource, jwks_url=as_url + "/jwks")
            return protect(
                create_app(mcp_server()),
                resource=resource,
                verifier=holder["verifier"],
                authorization_servers=[as_url],
                required_scopes=required,
                scopes_supported=scopes_supported,
                scope_rule=scope_rule,
                **(rs_options(holder["as"]) if callable(rs_options) else rs_options or {}),
            )

        async with serve(make_rs) as (rs_base, rs_log):
            holder.update(as_url=as_url, as_log=as_log, mcp_url=rs_base + "/mcp", rs_base=rs_base, rs_log=rs_log)
            yield holder


async def register(http: httpx.AsyncClient, base: str, auth_method: str = "none") -> dict[str, Any]:
    """Register a client redirecting to :data:`REDIRECT` at the authorization server ``base``; its registration."""
    answer = await http.post(
        base + "/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": auth_method}
    )
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


async def code_grant(
    http: httpx.AsyncClient,
    base: str,
    client_id: str,
    *,
    query: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    auth: tuple[str, str] | None = None,
) -> httpx.Response:
    """The authorization code grant with PKCE at an auto-approving server: ``/authorize`` (with ``query`` added),
    then ``/token`` (with ``form`` added; ``client_id`` in the form unless ``auth`` is the client's secret pair).
    An authorization refused in the redirect is answered as a 400 carrying the redirect's parameters (its
    request: the one to ``/authorize``)."""
    verifier, challenge = pkce_pair()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        **(query or {}),
    }
    authorized = await http.get(base + "/authorize", params=params)
    got = dict(parse_qsl(urlsplit(authorized.headers["location"]).query))
    if "code" not in got:
        return httpx.Response(400, json=got, request=authorized.request)
    data = {
        "grant_type": "authorization_code",
        "code": got["code"],
        "code_verifier": verifier,
        "redirect_uri": REDIRECT,
        **({} if auth else {"client_id": client_id}),
        **(form or {}),
    }
    return await http.post(base + "/token", data=data, headers=headers, auth=auth)


def oauth(url: str, **kw: Any) -> tuple[OAuthClient, HeadlessBrowser]:
    browser = HeadlessBrowser()
    client = OAuthClient(
        url,
        client_metadata={"client_name": "mcpkit-test", "redirect_uris": [REDIRECT]},
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
        **kw,
    )
    return client, browser


async def whoami(url: str, auth: OAuthClient, mode: str = "auto") -> str:
    async with StreamableHTTPClientTransport(url, auth=auth) as conn, ClientSession(conn, mode=mode) as session:
        result = await session.call_tool("whoami", {})
        return str(result.content[0].text)  # type: ignore[union-attr]


def _forge(as_server: AuthorizationServer, **claims: Any) -> str:
    now = int(time.time())
    base = {"iss": as_server.issuer, "sub": "mallory", "iat": now, "exp": now + 600, "scope": "mcp:read"}
    base.update(claims)
    return jwt.encode(
        {k: v for k, v in base.items() if v is not None},
        as_server.key,
        algorithm="ES256",
        headers={"kid": as_server.kid},
    )
