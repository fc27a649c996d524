"""OAuth 2.1 for MCP over HTTP: the resource-server middleware, the built-in authorization server and the
``httpx.Auth`` client, end to end.

Everything is real: mcpkit's MCP app (``create_app``) wrapped by :func:`mcpkit.auth.protect` and the
:class:`~mcpkit.auth.AuthorizationServer`, each on uvicorn bound to 127.0.0.1, and the real mcpkit client
(``ClientSession`` over ``StreamableHTTPClientTransport(auth=OAuthClient(...))``) in both eras."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import jwt
import pytest

from mcpkit import MCPKit
from mcpkit.auth import (
    AccessToken,
    AuthorizationServer,
    HeadlessBrowser,
    InMemoryTokenStorage,
    IntrospectionVerifier,
    InvalidToken,
    JWTVerifier,
    OAuthClient,
    StaticTokenVerifier,
    current_access_token,
    protect,
    tool_scopes,
)
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.challenges import parse_www_authenticate
from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.http import create_app
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from redis_server import redis_url  # noqa: F401  (the session fixture)
from support.asgi import serve_asgi
from test_http_support import initialize_body

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
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            served.requests.append(
                (
                    scope["method"],
                    scope["path"] + ("?" + scope["query_string"].decode() if scope["query_string"] else ""),
                    headers,
                )
            )
        await inner(scope, receive, send)

    async with serve_asgi(app, sock=sock):
        yield base, served


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


# ---------------------------------------------------------------------------------------------------- resource server
@pytest.mark.req("M030", "M038")
async def test_missing_token_gets_401_with_resource_metadata_and_scope() -> None:
    async with (
        stack(scopes_supported=["mcp:read", "mcp:admin"], required=("mcp:read",)) as s,
        httpx.AsyncClient() as http,
    ):
        r = await http.post(
            s["mcp_url"],
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream"},
        )
        assert r.status_code == 401
        scheme, params = parse_www_authenticate(r.headers["www-authenticate"])
        assert scheme == "bearer"
        assert params["resource_metadata"] == s["rs_base"] + "/.well-known/oauth-protected-resource/mcp"
        assert params["scope"] == "mcp:read"
        assert "error" not in params  # no credentials: no error code (RFC 6750 §3.1)
        # the GET stream and DELETE are protected too
        assert (await http.get(s["mcp_url"], headers={"accept": "text/event-stream"})).status_code == 401
        assert (await http.delete(s["mcp_url"])).status_code == 401
        # RFC 9728 metadata at the path-aware location and at the root
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            prm = (await http.get(s["rs_base"] + path)).json()
            assert prm["resource"] == s["mcp_url"]
            assert prm["authorization_servers"] == [s["as_url"]]
            assert prm["scopes_supported"] == ["mcp:read", "mcp:admin"]
            assert prm["bearer_methods_supported"] == ["header"]


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


@pytest.mark.req("M038", "M031")
async def test_invalid_expired_and_wrong_audience_tokens_get_401() -> None:
    async with stack() as s:
        a: AuthorizationServer = s["as"]
        good = _forge(a, aud=s["mcp_url"])
        from cryptography.hazmat.primitives.asymmetric import ec

        other_key = ec.generate_private_key(ec.SECP256R1())
        cases = {
            "garbage": "not-a-jwt",
            "expired": _forge(a, aud=s["mcp_url"], exp=int(time.time()) - 3600),
            "wrong audience": _forge(a, aud="http://127.0.0.1:1/other"),
            "no audience": _forge(a, aud=None),
            "wrong issuer": _forge(a, aud=s["mcp_url"], iss="http://127.0.0.1:1"),
            "bad signature": jwt.encode(
                {"iss": a.issuer, "aud": s["mcp_url"], "exp": int(time.time()) + 60},
                other_key,
                algorithm="ES256",
                headers={"kid": a.kid},
            ),
            "unknown kid": jwt.encode(
                {"iss": a.issuer, "aud": s["mcp_url"], "exp": int(time.time()) + 60},
                other_key,
                algorithm="ES256",
                headers={"kid": "rotated-away"},
            ),
        }
        body = initialize_body("2025-06-18")
        hdrs = {"accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient() as http:
            for name, token in cases.items():
                r = await http.post(s["mcp_url"], json=body, headers={**hdrs, "authorization": f"Bearer {token}"})
                assert r.status_code == 401, name
                _, params = parse_www_authenticate(r.headers["www-authenticate"])
                assert params["error"] == "invalid_token", name
                assert "resource_metadata" in params
            # the same request with a valid token goes through
            r = await http.post(s["mcp_url"], json=body, headers={**hdrs, "authorization": f"Bearer {good}"})
            assert r.status_code == 200
            # a non-Bearer scheme is refused
            r = await http.post(s["mcp_url"], json=body, headers={**hdrs, "authorization": f"Basic {good}"})
            assert r.status_code == 401
        # the unknown kid made the verifier re-fetch the JWKS once (rotation), not once per request
        assert s["verifier"].fetches <= 3


@pytest.mark.req("M037")
async def test_query_string_token_is_refused_even_when_valid() -> None:
    async with stack() as s:
        good = _forge(s["as"], aud=s["mcp_url"])
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx.AsyncClient() as http:
            r = await http.post(
                s["mcp_url"] + "?" + urlencode({"access_token": good}),
                json=body,
                headers={"accept": "application/json, text/event-stream"},
            )
            assert r.status_code == 400
            assert r.json()["error"] == "invalid_request"
            # a token in the query string next to a header is refused too: the query is never a credential
            r = await http.post(
                s["mcp_url"] + "?" + urlencode({"access_token": good}),
                json=body,
                headers={"accept": "application/json, text/event-stream", "authorization": f"Bearer {good}"},
            )
            assert r.status_code == 400


async def test_static_and_introspection_verifiers() -> None:
    aud = "http://127.0.0.1:5/mcp"
    static = StaticTokenVerifier.simple({"t1": ["a"]}, audience=aud)
    assert (await static.verify("t1")).scopes == {"a"}
    with pytest.raises(InvalidToken):
        await static.verify("t2")
    holder: dict[str, Any] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, resources=[aud])
        return holder["as"]

    async with serve(make) as (as_url, _):
        a: AuthorizationServer = holder["as"]
        rs = await a.register_client(
            token_endpoint_auth_method="client_secret_basic", grant_types=[], resource_server=True
        )
        verifier = IntrospectionVerifier(
            as_url + "/introspect", client_id=rs.client_id, client_secret=rs.client_secret, issuer=as_url
        )
        token = a.issue_access_token(subject="alice", client_id="c", scopes=["x", "y"], resource=aud)
        got = await verifier.verify(token)
        assert (got.subject, got.scopes, got.audience) == ("alice", {"x", "y"}, (aud,))
        with pytest.raises(InvalidToken):
            await verifier.verify(token + "x")
        bad = IntrospectionVerifier(as_url + "/introspect", client_id=rs.client_id, client_secret="wrong")
        with pytest.raises(InvalidToken):
            await bad.verify(token)


async def test_jwt_verifier_static_keys_and_jwks_bound() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    v = JWTVerifier(issuer="https://as.example", audience="https://rs.example/mcp", keys={"k1": key.public_key()})
    ok = jwt.encode(
        {
            "iss": "https://as.example",
            "aud": "https://rs.example/mcp",
            "exp": int(time.time()) + 60,
            "scope": "a b",
            "sub": "s",
        },
        key,
        algorithm="ES256",
        headers={"kid": "k1"},
    )
    assert (await v.verify(ok)).scopes == {"a", "b"}
    with pytest.raises(InvalidToken):  # alg none is never accepted
        await v.verify(
            jwt.encode(
                {"iss": "https://as.example", "exp": int(time.time()) + 60},
                None,
                algorithm="none",
                headers={"kid": "k1"},
            )
        )
    with pytest.raises(InvalidToken):  # exp is required
        await v.verify(
            jwt.encode(
                {"iss": "https://as.example", "aud": "https://rs.example/mcp"},
                key,
                algorithm="ES256",
                headers={"kid": "k1"},
            )
        )
    with pytest.raises(ValueError):
        JWTVerifier(issuer=None, audience=None, keys={"k": key.public_key()}, algorithms=["none"])
    # a flood of unknown kids costs at most one JWKS fetch per min_refresh_interval
    holder: dict[str, Any] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base)
        return holder["as"]

    async with serve(make) as (as_url, log):
        jv = JWTVerifier(issuer=as_url, audience=None, jwks_url=as_url + "/jwks", min_refresh_interval=60)
        good = holder["as"].issue_access_token(subject="s", client_id="c", scopes=[], resource=None)
        assert (await jv.verify(good)).subject == "s"
        for i in range(20):
            forged = jwt.encode(
                {"iss": as_url, "exp": int(time.time()) + 60}, key, algorithm="ES256", headers={"kid": f"kid-{i}"}
            )
            with pytest.raises(InvalidToken):
                await jv.verify(forged)
        assert jv.fetches == 1
        assert sum(1 for m, p, _ in log.requests if p == "/jwks") == 1


# ---------------------------------------------------------------------------------------------------- full flows
@pytest.mark.req("M031", "M032", "M033", "M036", "M037", "S008", "S010", "S011", "S012", "A016")
@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_full_flow_prm_dcr_pkce_resource(mode: str) -> None:
    async with stack(scopes_supported=["mcp:read", "mcp:admin"], required=("mcp:read",)) as s:
        client, browser = oauth(s["mcp_url"])
        assert await whoami(s["mcp_url"], client, mode) == "test-user|mcp:read"
        # discovery: the challenge's resource_metadata, then RFC 8414 at the issuer, then DCR
        as_paths = [p for _, p, _ in s["as_log"].requests]
        assert as_paths[0] == "/.well-known/oauth-authorization-server"
        assert "/register" in as_paths
        # S012: every discovery request carried MCP-Protocol-Version
        discovery = [h for _, p, h in s["as_log"].requests + s["rs_log"].requests if "/.well-known/" in p]
        assert discovery and all(h.get("mcp-protocol-version") for h in discovery)
        # the authorization request: PKCE S256 and the RFC 8707 resource
        q = dict(parse_qsl(urlsplit(browser.visited[0]).query))
        assert q["code_challenge_method"] == "S256" and len(q["code_challenge"]) == 43
        assert q["resource"] == s["mcp_url"]
        assert q["scope"] == "mcp:read"  # the challenge's scope wins over scopes_supported
        # M036/M037: the token only ever travelled in the Authorization header
        mcp_reqs = [(p, h) for m, p, h in s["rs_log"].requests if p.startswith("/mcp")]
        authed = [h for p, h in mcp_reqs if "authorization" in h]
        assert authed and all(h["authorization"].startswith("Bearer ") for h in authed)
        assert all("?" not in p for p, _ in mcp_reqs)
        token = authed[-1]["authorization"].split(" ", 1)[1]
        claims = jwt.decode(token, options={"verify_signature": False})
        assert claims["aud"] == s["mcp_url"] and claims["iss"] == s["as_url"]
        # stored keyed by issuer, with the registration
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage)
        assert set(storage.tokens) == {s["as_url"]} and set(storage.clients) == {s["as_url"]}
        # a second session reuses the token: no new authorization
        visits = len(browser.visited)
        assert await whoami(s["mcp_url"], client, mode) == "test-user|mcp:read"
        assert len(browser.visited) == visits
        await client.aclose()


@pytest.mark.req("M034", "M035", "M031", "M036")
async def test_2025_03_26_server_without_metadata_uses_default_endpoints() -> None:
    """A 2025-03-26 layout: no PRM, the AS shares the MCP server's origin and serves no metadata; the client
    discards the URL path to get the authorization base URL and uses /authorize, /token, /register there."""
    holder: dict[str, Any] = {}

    def make(base: str) -> Any:
        resource = base + "/mcp"
        a = AuthorizationServer(base, auto_approve=True, metadata=False, default_resource=resource)
        inner = protect(
            create_app(mcp_server()),
            resource=resource,
            verifier=JWTVerifier(issuer=base, audience=resource, keys={a.kid: a.key.public_key()}),
            resource_metadata=False,
        )
        a.app = inner
        holder["as"] = a
        return a

    async with serve(make) as (base, log):
        client, browser = oauth(base + "/mcp", protocol_version="2025-03-26")
        async with (
            StreamableHTTPClientTransport(base + "/mcp", auth=client) as conn,
            ClientSession(conn, mode="handshake", protocol_version="2025-03-26") as session,
        ):
            result = await session.call_tool("whoami", {})
            assert result.content[0].text == "test-user|"  # type: ignore[union-attr]
        paths = [p.split("?")[0] for _, p, _ in log.requests]
        assert "/.well-known/oauth-authorization-server" in paths  # tried at the base URL first (M034)
        assert "/.well-known/oauth-authorization-server/mcp" not in paths
        assert "/register" in paths and "/token" in paths  # defaults at the base URL (M035)
        assert browser.visited[0].startswith(base + "/authorize?")
        assert "resource=" not in browser.visited[0]  # no PRM: nothing to name
        # S012: the discovery request carried the version of the request that was refused
        disc = [h for _, p, h in log.requests if p.startswith("/.well-known/oauth-authorization-server")]
        assert disc[0]["mcp-protocol-version"] == "2025-03-26"
        await client.aclose()


@pytest.mark.req("M032", "M033")
async def test_2025_03_26_server_with_metadata_at_base_url() -> None:
    def make(base: str) -> Any:
        resource = base + "/mcp"
        a = AuthorizationServer(base, auto_approve=True, default_resource=resource)
        a.app = protect(
            create_app(mcp_server()),
            resource=resource,
            resource_metadata=False,
            verifier=JWTVerifier(issuer=base, audience=resource, keys={a.kid: a.key.public_key()}),
        )
        return a

    async with serve(make) as (base, log):
        client, _ = oauth(base + "/mcp")
        assert await whoami(base + "/mcp", client, "handshake") == "test-user|"
        assert client.issuer == base
        assert ("GET", "/.well-known/oauth-authorization-server") in [(m, p) for m, p, _ in log.requests]
        await client.aclose()


@pytest.mark.req("M033")
@pytest.mark.parametrize("variant", ["oidc-root", "path-8414", "path-oidc-suffix"])
async def test_as_metadata_discovery_variants(variant: str) -> None:
    """Issuer with a path (RFC 8414 path insertion, OIDC insertion and suffix) and OIDC-only servers."""
    holder: dict[str, Any] = {}

    def make_as(base: str) -> Any:
        issuer = base if variant == "oidc-root" else base + "/tenant1"
        a = AuthorizationServer(issuer, auto_approve=True)
        holder["as"] = a
        allowed = {
            "oidc-root": "/.well-known/openid-configuration",
            "path-8414": "/.well-known/oauth-authorization-server/tenant1",
            "path-oidc-suffix": "/tenant1/.well-known/openid-configuration",
        }[variant]

        async def only(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and "/.well-known/" in scope["path"] and scope["path"] != allowed:
                await send({"type": "http.response.start", "status": 404, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            await a(scope, receive, send)

        return only

    async with serve(make_as) as (_as_url, _as_log):
        issuer = holder["as"].issuer

        def make_rs(base: str) -> Any:
            resource = base + "/mcp"
            return protect(
                create_app(mcp_server()),
                resource=resource,
                authorization_servers=[issuer],
                verifier=JWTVerifier(issuer=issuer, audience=resource, jwks_url=issuer + "/jwks"),
            )

        async with serve(make_rs) as (rs, _):
            client, _b = oauth(rs + "/mcp")
            assert await whoami(rs + "/mcp", client) == "test-user|"
            assert client.issuer == issuer
            await client.aclose()


@pytest.mark.req("M033")
async def test_prm_well_known_fallback_without_header_and_root_prm() -> None:
    """2025-11-25: no resource_metadata in the challenge → /.well-known/oauth-protected-resource/<path>, then
    the root. Here the path-aware document is missing, so the root one must be used."""
    holder: dict[str, Any] = {}

    def make_as(base: str) -> Any:
        holder["as"] = AuthorizationServer(base, auto_approve=True)
        return holder["as"]

    async with serve(make_as) as (as_url, _):

        def make_rs(base: str) -> Any:
            resource = base + "/mcp"
            mw = protect(
                create_app(mcp_server()),
                resource=resource,
                authorization_servers=[as_url],
                verifier=JWTVerifier(issuer=as_url, audience=resource, jwks_url=as_url + "/jwks"),
            )
            mw.metadata_path = "/.well-known/oauth-protected-resource"  # only the root document exists

            def challenge(*a: Any, **k: Any) -> bytes:
                return b"Bearer"  # no resource_metadata parameter

            mw.challenge = challenge  # type: ignore[method-assign]
            return mw

        async with serve(make_rs) as (rs, log):
            client, _b = oauth(rs + "/mcp")
            assert await whoami(rs + "/mcp", client) == "test-user|"
            prm = [p for _, p, _ in log.requests if "oauth-protected-resource" in p]
            assert prm[:2] == ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]
            await client.aclose()


@pytest.mark.req("M031")
async def test_refresh_on_expiry_with_rotation() -> None:
    async with stack(as_options={"access_token_ttl": 31}) as s:
        client, browser = oauth(s["mcp_url"])
        assert await whoami(s["mcp_url"], client) == "test-user|"
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage)
        first = storage.tokens[s["as_url"]]
        assert first.refresh_token
        first.expires_at = time.time()  # expired from the client's point of view: refresh before use
        assert await whoami(s["mcp_url"], client) == "test-user|"
        second = storage.tokens[s["as_url"]]
        assert second.access_token != first.access_token
        assert second.refresh_token and second.refresh_token != first.refresh_token  # rotated
        assert len(browser.visited) == 1  # no new authorization
        # the old refresh token is dead (rotation)
        a: AuthorizationServer = s["as"]
        info = storage.clients[s["as_url"]]
        async with httpx.AsyncClient() as http:
            r = await http.post(
                s["as_url"] + "/token",
                data={
                    "grant_type": "refresh_token",
                    "client_id": info["client_id"],
                    "refresh_token": first.refresh_token,
                },
            )
            assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
        assert a.counts["token"] >= 3
        await client.aclose()


@pytest.mark.req("M038")
async def test_server_side_rejection_triggers_refresh_then_retry() -> None:
    """The RS refuses a token the client still thinks valid (401 invalid_token): the client refreshes and retries
    the request once."""
    async with stack() as s:
        client, browser = oauth(s["mcp_url"])
        assert await whoami(s["mcp_url"], client) == "test-user|"
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage)
        tok = storage.tokens[s["as_url"]]
        tok.access_token = _forge(s["as"], aud="http://127.0.0.1:1/elsewhere")  # wrong audience → 401
        assert await whoami(s["mcp_url"], client) == "test-user|"
        assert len(browser.visited) == 1
        assert storage.tokens[s["as_url"]].access_token != tok.access_token
        await client.aclose()


@pytest.mark.req("M031")
async def test_step_up_on_insufficient_scope() -> None:
    async with stack(
        scopes_supported=["mcp:read", "mcp:admin"],
        required=("mcp:read",),
        scope_rule=tool_scopes({"admin": ["mcp:admin"]}),
    ) as s:
        client, browser = oauth(s["mcp_url"])
        async with (
            StreamableHTTPClientTransport(s["mcp_url"], auth=client) as conn,
            ClientSession(conn, mode="handshake") as session,
        ):
            who = await session.call_tool("whoami", {})
            assert who.content[0].text == "test-user|mcp:read"  # type: ignore[union-attr]
            res = await session.call_tool("admin", {})
            assert res.content[0].text == "admin ok"  # type: ignore[union-attr]
            who = await session.call_tool("whoami", {})
            assert who.content[0].text == "test-user|mcp:admin mcp:read"  # type: ignore[union-attr]
        assert len(browser.visited) == 2
        q = dict(parse_qsl(urlsplit(browser.visited[1]).query))
        assert set(q["scope"].split()) == {"mcp:read", "mcp:admin"}
        # the raw 403 shape
        async with httpx.AsyncClient() as http:
            token = _forge(s["as"], aud=s["mcp_url"], scope="mcp:read")
            r = await http.post(
                s["mcp_url"],
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "admin", "arguments": {}}},
                headers={"authorization": f"Bearer {token}", "accept": "application/json, text/event-stream"},
            )
            assert r.status_code == 403
            _, params = parse_www_authenticate(r.headers["www-authenticate"])
            assert params["error"] == "insufficient_scope"
            assert set(params["scope"].split()) == {"mcp:read", "mcp:admin"}
            assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
        await client.aclose()


# ---------------------------------------------------------------------------------------------------- the AS itself
@pytest.mark.req("S010", "A016", "M031")
async def test_authorization_server_rules() -> None:
    holder: dict[str, Any] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(
            base, auto_approve=True, resources=["http://127.0.0.1:7/mcp"], registration_client_credentials=True
        )
        return holder["as"]

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        meta = (await http.get(base + "/.well-known/oauth-authorization-server")).json()
        assert meta["issuer"] == base and meta["code_challenge_methods_supported"] == ["S256"]
        assert meta["authorization_response_iss_parameter_supported"] is True
        assert (await http.get(base + "/.well-known/openid-configuration")).json() == meta
        # DCR: https or localhost redirect URIs only
        bad = await http.post(base + "/register", json={"redirect_uris": ["http://evil.example/cb"]})
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_redirect_uri"
        reg = await http.post(
            base + "/register",
            json={"redirect_uris": [REDIRECT], "client_name": "x", "token_endpoint_auth_method": "none"},
        )
        assert reg.status_code == 201
        cid = reg.json()["client_id"]
        assert "client_secret" not in reg.json()
        verifier, challenge = pkce_pair()

        async def authorize(**params: str) -> dict[str, str]:
            q = {
                "response_type": "code",
                "client_id": cid,
                "redirect_uri": REDIRECT,
                "state": "st",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": "http://127.0.0.1:7/mcp",
                **params,
            }
            q = {k: v for k, v in q.items() if v != ""}
            r = await http.get(base + "/authorize?" + urlencode(q))
            assert r.status_code == 302
            assert r.headers["location"].startswith(REDIRECT + "?")
            return dict(parse_qsl(urlsplit(r.headers["location"]).query))

        # PKCE is required, and only S256
        assert (await authorize(code_challenge=""))["error"] == "invalid_request"
        assert (await authorize(code_challenge_method="plain"))["error"] == "invalid_request"
        assert (await authorize(resource="http://127.0.0.1:8/other"))["error"] == "invalid_target"
        # unregistered redirect_uri: no redirect at all (no open redirector)
        r = await http.get(
            base
            + "/authorize?"
            + urlencode(
                {
                    "response_type": "code",
                    "client_id": cid,
                    "redirect_uri": "http://127.0.0.1:9/other",
                    "code_challenge": challenge,
                    "code_challenge_method": "S256",
                }
            )
        )
        assert r.status_code == 400
        ok = await authorize()
        assert ok["iss"] == base and ok["state"] == "st"  # RFC 9207
        # a wrong verifier fails, and burns the code (single use)
        r = await http.post(
            base + "/token",
            data={
                "grant_type": "authorization_code",
                "code": ok["code"],
                "client_id": cid,
                "redirect_uri": REDIRECT,
                "code_verifier": "x" * 50,
            },
        )
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
        ok = await authorize()
        form = {
            "grant_type": "authorization_code",
            "code": ok["code"],
            "client_id": cid,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "resource": "http://127.0.0.1:7/mcp",
        }
        r = await http.post(base + "/token", data=form)
        assert r.status_code == 200, r.text
        tokens = r.json()
        assert tokens["token_type"] == "Bearer" and tokens["refresh_token"]
        claims = jwt.decode(
            tokens["access_token"],
            holder["as"].key.public_key(),
            algorithms=["ES256"],
            audience="http://127.0.0.1:7/mcp",
            issuer=base,
        )
        assert claims["client_id"] == cid
        assert (await http.post(base + "/token", data=form)).status_code == 400  # code reuse
        # client_credentials for a confidential client (client_secret_basic)
        reg = await http.post(
            base + "/register",
            json={"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic"},
        )
        info = reg.json()
        basic = base64.b64encode(f"{info['client_id']}:{info['client_secret']}".encode()).decode()
        r = await http.post(
            base + "/token",
            data={"grant_type": "client_credentials", "resource": "http://127.0.0.1:7/mcp"},
            headers={"authorization": "Basic " + basic},
        )
        assert r.status_code == 200 and "refresh_token" not in r.json()
        r = await http.post(
            base + "/token",
            data={"grant_type": "client_credentials"},
            headers={"authorization": "Basic " + base64.b64encode(f"{info['client_id']}:wrong".encode()).decode()},
        )
        assert r.status_code == 401
    with pytest.raises(RuntimeError):
        AuthorizationServer("https://as.example", production=True)
    AuthorizationServer("https://as.example", production=True, allow_in_memory=True)
    with pytest.raises(ValueError):
        AuthorizationServer("http://as.example")  # plain http only on loopback


# ---------------------------------------------------------------------------------------------------- client checks
@pytest.mark.req("M031")
async def test_client_refuses_insecure_or_inconsistent_servers() -> None:
    """The client refuses to proceed on: a PRM naming another resource, a metadata issuer mismatch, an iss in
    the redirect from another issuer, an AS without S256, a missing promised iss."""

    async def attempt(
        tamper: Callable[[dict[str, Any]], None],
        expect: str,
        *,
        iss: str | None = "keep",
        prm_resource: str | None = None,
    ) -> None:
        holder: dict[str, Any] = {}

        def make_as(base: str) -> Any:
            a = AuthorizationServer(base, auto_approve=True)
            holder["as"] = a
            orig = a.metadata

            def meta() -> dict[str, Any]:
                doc = orig()
                tamper(doc)
                return doc

            a.metadata = meta  # type: ignore[method-assign]
            if iss != "keep":
                orig_redirect = a._redirect

                async def redirect(send: Any, uri: str, params: Any) -> None:
                    params = dict(params)
                    if iss is None:
                        params.pop("iss", None)
                    else:
                        params["iss"] = iss
                    await orig_redirect(send, uri, params)

                a._redirect = redirect  # type: ignore[method-assign]
            return a

        async with serve(make_as) as (as_url, _):

            def make_rs(base: str) -> Any:
                resource = base + "/mcp"
                mw = protect(
                    create_app(mcp_server()),
                    resource=resource,
                    authorization_servers=[as_url],
                    verifier=JWTVerifier(issuer=as_url, audience=resource, jwks_url=as_url + "/jwks"),
                )
                if prm_resource:
                    mw.metadata_extra["resource"] = prm_resource
                return mw

            async with serve(make_rs) as (rs, _):
                client, _b = oauth(rs + "/mcp")
                try:
                    with pytest.raises(MCPError) as info:
                        await whoami(rs + "/mcp", client, "handshake")
                finally:
                    await client.aclose()
                # the OAuthFlowError itself, or (when the flow outlasted the transport's answer window) the error
                # response the transport made of it for the pending request
                assert isinstance(info.value, MCPError) and expect in str(info.value), repr(info.value)

    await attempt(lambda d: None, "names resource", prm_resource="http://127.0.0.1:1/mcp")
    await attempt(lambda d: d.update(issuer="http://127.0.0.1:1"), "metadata issuer")
    await attempt(lambda d: d.pop("code_challenge_methods_supported"), "PKCE S256")
    await attempt(lambda d: None, "comes from issuer", iss="http://127.0.0.1:1")
    await attempt(lambda d: None, "promised an iss", iss=None)
    await attempt(lambda d: d.update(token_endpoint="http://as.example/token"), "must be an https URL")


@pytest.mark.req("M036")
async def test_client_uses_preregistered_credentials_and_client_secret_basic() -> None:
    holder: dict[str, Any] = {}

    def make_as(base: str) -> Any:
        holder["as"] = AuthorizationServer(base, auto_approve=True, registration=False)
        return holder["as"]

    async with serve(make_as) as (as_url, as_log):
        rec = await holder["as"].register_client(
            redirect_uris=[REDIRECT], token_endpoint_auth_method="client_secret_basic"
        )

        def make_rs(base: str) -> Any:
            resource = base + "/mcp"
            return protect(
                create_app(mcp_server()),
                resource=resource,
                authorization_servers=[as_url],
                verifier=JWTVerifier(issuer=as_url, audience=resource, jwks_url=as_url + "/jwks"),
            )

        async with serve(make_rs) as (rs, _):
            client, _b = oauth(rs + "/mcp", client_id=rec.client_id, client_secret=rec.client_secret)
            assert await whoami(rs + "/mcp", client) == "test-user|"
            token_reqs = [h for m, p, h in as_log.requests if p == "/token"]
            assert token_reqs and token_reqs[0]["authorization"].startswith("Basic ")
            assert "/register" not in [p for _, p, _ in as_log.requests]
            await client.aclose()


@pytest.mark.req("M038")
async def test_principal_reaches_handlers_and_asgi_state() -> None:
    seen: list[AccessToken] = []
    aud = "http://127.0.0.1:1/mcp"

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["state"]["access_token"])
        assert current_access_token() is scope["auth"]
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    verifier = StaticTokenVerifier(
        {
            "t": AccessToken("t", subject="a", audience=(aud + "/",)),  # canonical form compares equal
            "other": AccessToken("other", audience=("http://127.0.0.1:2/mcp",)),
            "none": AccessToken("none"),
            "old": AccessToken("old", audience=(aud,), expires_at=time.time() - 5),
        }
    )
    mw = protect(app, resource=aud, verifier=verifier)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=mw), base_url="http://127.0.0.1:1") as http:
        assert (await http.get("/mcp", headers={"authorization": "Bearer t"})).status_code == 204
        for bad in ("u", "other", "none", "old"):  # unknown, another resource (RFC 8707), no audience, expired
            r = await http.get("/mcp", headers={"authorization": f"Bearer {bad}"})
            assert r.status_code == 401, bad
            assert 'error="invalid_token"' in r.headers["www-authenticate"]
    assert [t.token for t in seen] == ["t"]
    assert current_access_token() is None
    assert json.dumps(mw.metadata())


@pytest.mark.req("M030", "M036")
def test_oauth_example_demo_runs(free_port: Callable[[], int]) -> None:
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parent.parent / "examples" / "oauth_server.py"
    out = subprocess.run(
        [sys.executable, str(example), "--demo", "--port", str(free_port())], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:3] == [
        "whoami: test-user (mcp:read)",
        "admin: admin status: ok",
        "whoami: test-user (mcp:admin mcp:read)",
    ]


@pytest.mark.req("M038")
async def test_session_is_bound_to_the_principal_that_created_it() -> None:
    async with stack() as s, httpx.AsyncClient() as http:
        alice = _forge(s["as"], aud=s["mcp_url"], sub="alice")
        bob = _forge(s["as"], aud=s["mcp_url"], sub="bob")
        hdrs = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
        init = initialize_body("2025-06-18")
        r = await http.post(s["mcp_url"], json=init, headers={**hdrs, "authorization": f"Bearer {alice}"})
        assert r.status_code == 200
        sid = r.headers["mcp-session-id"]
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        as_bob = await http.post(
            s["mcp_url"], json=ping, headers={**hdrs, "mcp-session-id": sid, "authorization": f"Bearer {bob}"}
        )
        assert as_bob.status_code == 404
        as_alice = await http.post(
            s["mcp_url"], json=ping, headers={**hdrs, "mcp-session-id": sid, "authorization": f"Bearer {alice}"}
        )
        assert as_alice.status_code == 200
        # a fresh token for the same principal (after a refresh) keeps the session
        alice2 = _forge(s["as"], aud=s["mcp_url"], sub="alice", jti="second")
        again = await http.post(
            s["mcp_url"], json=ping, headers={**hdrs, "mcp-session-id": sid, "authorization": f"Bearer {alice2}"}
        )
        assert again.status_code == 200


@pytest.mark.req("S008", "M036")
@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_high_level_client_with_oauth(mode: str) -> None:
    from mcpkit.client.client import Client

    async with stack(scopes_supported=["mcp:read"]) as s:
        auth, browser = oauth(s["mcp_url"])
        async with Client(s["mcp_url"], mode=mode, transport_options={"auth": auth}) as c:
            result = await c.call_tool("whoami", {})
            assert result.raw.content[0].text == "test-user|mcp:read"  # type: ignore[union-attr]
            assert [t.name for t in await c.list_tools()] == ["whoami", "admin"]
        assert len(browser.visited) == 1
        await auth.aclose()


@pytest.mark.req("M031", "M036")
async def test_client_credentials_grant_machine_to_machine() -> None:
    async with stack(scopes_supported=["mcp:read"]) as s:
        a: AuthorizationServer = s["as"]
        rec = await a.register_client(
            grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
        )
        auth = OAuthClient(
            s["mcp_url"], client_id=rec.client_id, client_secret=rec.client_secret, grant_type="client_credentials"
        )
        assert await whoami(s["mcp_url"], auth) == f"{rec.client_id}|mcp:read"
        token_reqs = [h for m, p, h in s["as_log"].requests if p == "/token"]
        assert len(token_reqs) == 1 and token_reqs[0]["authorization"].startswith("Basic ")
        assert "/authorize" not in [p.split("?")[0] for _, p, _ in s["as_log"].requests]
        await auth.aclose()
        with pytest.raises(ValueError):
            OAuthClient(s["mcp_url"], grant_type="client_credentials")


@pytest.mark.req("M031")
async def test_client_registers_again_when_the_as_refuses_its_registration(tmp_path: Any) -> None:
    """python-sdk #3256: a client stuck with a dead dynamic registration. Here the AS rotates the secret (the token
    endpoint answers invalid_client) and later the stored secret expires: both times the client registers again."""
    from mcpkit.auth import FileTokenStorage

    async with stack() as s:
        a: AuthorizationServer = s["as"]
        storage = FileTokenStorage(tmp_path / "tokens.json")
        browser = HeadlessBrowser()
        meta = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}
        client = OAuthClient(
            s["mcp_url"],
            client_metadata=meta,
            storage=storage,
            redirect_handler=browser.redirect_handler,
            callback_handler=browser.callback_handler,
        )
        assert await whoami(s["mcp_url"], client) == "test-user|"
        first = await storage.get_client_info(s["as_url"])
        assert first is not None and first["client_secret"]
        assert (tmp_path / "tokens.json").stat().st_mode & 0o777 == 0o600
        # the AS rotates the secret; the client's tokens are gone: a full flow hits invalid_client at /token
        record = await a.storage.get_client(first["client_id"])
        assert record is not None
        record.client_secret = "rotated-elsewhere"
        await storage.set_tokens(s["as_url"], None)
        assert await whoami(s["mcp_url"], client) == "test-user|"
        second = await storage.get_client_info(s["as_url"])
        assert second is not None and second["client_id"] != first["client_id"]
        # the stored secret expires: registered again before authorizing
        second["client_secret_expires_at"] = int(time.time()) - 1
        await storage.set_client_info(s["as_url"], second)
        await storage.set_tokens(s["as_url"], None)
        assert await whoami(s["mcp_url"], client) == "test-user|"
        third = await storage.get_client_info(s["as_url"])
        assert third is not None and third["client_id"] not in (first["client_id"], second["client_id"])
        assert a.counts["register"] == 3
        await client.aclose()
        # a new process with the same file needs no authorization at all
        again, browser2 = oauth(s["mcp_url"], storage=FileTokenStorage(tmp_path / "tokens.json"))
        assert await whoami(s["mcp_url"], again) == "test-user|"
        assert browser2.visited == []
        await again.aclose()


async def test_loopback_redirect_uri_matches_on_any_port() -> None:
    holder: dict[str, Any] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, auto_approve=True)
        return holder["as"]

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        a: AuthorizationServer = holder["as"]
        rec = await a.register_client(redirect_uris=["http://127.0.0.1/callback", "https://app.example/cb"])
        _, challenge = pkce_pair()

        async def ask(uri: str) -> httpx.Response:
            return await http.get(
                base
                + "/authorize?"
                + urlencode(
                    {
                        "response_type": "code",
                        "client_id": rec.client_id,
                        "redirect_uri": uri,
                        "code_challenge": challenge,
                        "code_challenge_method": "S256",
                    }
                )
            )

        ok = await ask("http://127.0.0.1:53117/callback")
        assert ok.status_code == 302 and ok.headers["location"].startswith("http://127.0.0.1:53117/callback?code=")
        assert (await ask("http://127.0.0.1:53117/other")).status_code == 400
        assert (await ask("https://app.example:8443/cb")).status_code == 400  # only loopback ports float
        assert (await ask("https://app.example/cb")).status_code == 302


@pytest.mark.req("M031")
async def test_two_as_replicas_share_redis_storage_and_key(redis_url: str) -> None:  # noqa: F811
    """Replica-safe AS state: a code issued by one replica is redeemed at the other, exactly once; a rotated
    refresh token dies everywhere; both replicas publish the same key id."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from mcpkit.auth import RedisAuthStorage

    key = ec.generate_private_key(ec.SECP256R1())
    prefix = f"mcpkit-test:{time.time_ns()}:"
    holder: dict[str, Any] = {}

    def replica(name: str) -> Callable[[str], AuthorizationServer]:
        def make(base: str) -> AuthorizationServer:
            issuer = holder.setdefault("issuer", base)  # one issuer for both (behind one load balancer)
            holder[name] = AuthorizationServer(
                issuer,
                auto_approve=True,
                signing_key=key,
                production=True,
                storage=RedisAuthStorage(redis_url, prefix=prefix),
            )
            return holder[name]

        return make

    async with (
        serve(replica("a")) as (url_a, _),
        serve(replica("b")) as (url_b, _),
        httpx.AsyncClient(follow_redirects=False) as http,
    ):
        a, b = holder["a"], holder["b"]
        assert a.kid == b.kid and (await http.get(url_a + "/jwks")).json() == (await http.get(url_b + "/jwks")).json()
        reg = (
            await http.post(
                url_a + "/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
            )
        ).json()
        verifier, challenge = pkce_pair()
        loc = (
            await http.get(
                url_a
                + "/authorize?"
                + urlencode(
                    {
                        "response_type": "code",
                        "client_id": reg["client_id"],
                        "redirect_uri": REDIRECT,
                        "code_challenge": challenge,
                        "code_challenge_method": "S256",
                    }
                )
            )
        ).headers["location"]
        code = dict(parse_qsl(urlsplit(loc).query))["code"]
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "client_id": reg["client_id"],
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
        }
        first = await http.post(url_b + "/token", data=form)  # the other replica knows the client and the code
        assert first.status_code == 200, first.text
        refresh = {
            "grant_type": "refresh_token",
            "client_id": reg["client_id"],
            "refresh_token": first.json()["refresh_token"],
        }
        rotated = await http.post(url_a + "/token", data=refresh)
        assert rotated.status_code == 200
        again = await http.post(url_b + "/token", data=refresh)
        assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
        # the reuse revoked the family on every replica: the rotated successor is dead too
        successor = {**refresh, "refresh_token": rotated.json()["refresh_token"]}
        assert (await http.post(url_a + "/token", data=successor)).status_code == 400
        assert (await http.post(url_a + "/token", data=form)).status_code == 400  # the code: used once, everywhere
        await a.storage.aclose()
        await b.storage.aclose()


@pytest.mark.req("M031")
async def test_a_slow_failing_authorization_fails_the_call_instead_of_hanging() -> None:
    """The HTTP transport hands a request to the background after a short answer window; an authorization that
    fails after that (slow AS, then a security check refuses) must still fail the pending call."""
    holder: dict[str, Any] = {}

    def make_as(base: str) -> Any:
        a = AuthorizationServer(base, auto_approve=True)
        holder["as"] = a

        async def slow(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"].startswith("/.well-known/"):
                await asyncio.sleep(0.6)
                doc = {**a.metadata(), "issuer": "http://127.0.0.1:1"}  # mismatch: the client must refuse
                body = json.dumps(doc).encode()
                await send(
                    {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": body})
                return
            await a(scope, receive, send)

        return slow

    async with serve(make_as) as (as_url, _):

        def make_rs(base: str) -> Any:
            resource = base + "/mcp"
            return protect(
                create_app(mcp_server()),
                resource=resource,
                authorization_servers=[as_url],
                verifier=StaticTokenVerifier({}),
            )

        async with serve(make_rs) as (rs, _):
            client, _b = oauth(rs + "/mcp")
            started = time.monotonic()
            with pytest.raises(Exception) as info:
                await asyncio.wait_for(whoami(rs + "/mcp", client, "handshake"), 15)
            assert not isinstance(info.value, (asyncio.TimeoutError, TimeoutError)), "the call hung"
            assert "issuer" in str(info.value)
            assert time.monotonic() - started < 10
            await client.aclose()


@pytest.mark.req("M036")
async def test_token_never_sent_to_another_origin() -> None:
    async with stack() as s:
        auth, _ = oauth(s["mcp_url"])
        assert await whoami(s["mcp_url"], auth) == "test-user|"
        async with httpx.AsyncClient(auth=auth) as http:
            r = await http.get(s["as_url"] + "/jwks")  # another origin (the AS): no Authorization header
            assert r.status_code == 200
            mcp = await http.get(s["rs_base"] + "/.well-known/oauth-protected-resource")
            assert mcp.status_code == 200
        assert "authorization" not in [h for _, p, hs in s["as_log"].requests if p == "/jwks" for h in hs]
        sent = [hs for _, p, hs in s["rs_log"].requests if p == "/.well-known/oauth-protected-resource"]
        assert sent[-1]["authorization"].startswith("Bearer ")  # same origin: sent
        await auth.aclose()


@pytest.mark.req("M030", "M038")
async def test_scope_hierarchy_and_malformed_credentials() -> None:
    aud = "http://127.0.0.1:1/mcp"

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    verifier = StaticTokenVerifier.simple(
        {"admin": ["files:admin"], "writer": ["files:write"], "other": ["unrelated"]}, audience=aud
    )
    mw = protect(
        app,
        resource=aud,
        verifier=verifier,
        required_scopes=["files:read"],
        scope_implies={"files:admin": ["files:write"], "files:write": ["files:read"]},
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=mw), base_url="http://127.0.0.1:1") as http:
        for tok in ("admin", "writer"):  # transitively implies files:read
            assert (await http.get("/mcp", headers={"authorization": f"Bearer {tok}"})).status_code == 204
        r = await http.get("/mcp", headers={"authorization": "Bearer other"})
        assert r.status_code == 403 and 'scope="files:read unrelated"' in r.headers["www-authenticate"]
        r = await http.get("/mcp", headers={"authorization": "Basic dXNlcjpwYXNz"})
        assert r.status_code == 401 and "error=" not in r.headers["www-authenticate"]  # not a bearer: challenge
        r = await http.get("/mcp", headers={"authorization": "Bearer"})
        assert r.status_code == 400 and 'error="invalid_request"' in r.headers["www-authenticate"]


@pytest.mark.req("M031")
async def test_loopback_callback_receives_the_redirect_like_a_browser_would() -> None:
    """The interactive flow: a one-shot listener on 127.0.0.1 gets the redirect; the 'browser' here is httpx
    following the AS's 302 to that listener. A step-up runs a second flow on the same redirect URI."""
    from mcpkit.auth import LoopbackCallback

    opened: list[str] = []

    async def browser(url: str) -> None:
        opened.append(url)
        async with httpx.AsyncClient(follow_redirects=True) as http:
            page = await http.get(url)
            assert page.status_code == 200 and "Authorization complete" in page.text

    async with stack(
        scopes_supported=["mcp:read", "mcp:admin"],
        required=("mcp:read",),
        scope_rule=tool_scopes({"admin": ["mcp:admin"]}),
    ) as s:
        cb = LoopbackCallback(open_url=browser)
        auth = OAuthClient(
            s["mcp_url"],
            client_metadata={"redirect_uris": [cb.redirect_uri]},
            redirect_handler=cb.redirect_handler,
            callback_handler=cb.callback_handler,
        )
        async with (
            StreamableHTTPClientTransport(s["mcp_url"], auth=auth) as conn,
            ClientSession(conn, mode="handshake") as session,
        ):
            assert (await session.call_tool("admin", {})).content[0].text == "admin ok"  # type: ignore[union-attr]
        assert len(opened) == 2
        # the listener is gone after each callback
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient() as http:
                await http.get(cb.redirect_uri)
        await auth.aclose()


@pytest.mark.req("S009")
async def test_stdio_never_uses_oauth() -> None:
    """stdio SHOULD NOT use the OAuth mechanism: the client refuses an auth flow for a stdio target (credentials go
    through the server's environment), and the stdio transport has no hook for one."""
    import inspect
    import sys

    from mcpkit import Client
    from mcpkit.transports.stdio import StdioClientTransport, StdioServer

    with pytest.raises(ValueError, match="environment"):
        async with Client([sys.executable, "-c", "pass"], transport_options={"auth": object()}):
            pass
    assert "auth" not in inspect.signature(StdioServer).parameters
    assert "auth" not in inspect.signature(StdioClientTransport).parameters
