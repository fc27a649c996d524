"""The OAuth client (``mcpkit.auth.OAuthClient``, an ``httpx.Auth`` flow) end to end against the resource server
and the authorization server: discovery, registration, PKCE, refresh, step-up, the loopback redirect, what it
refuses."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import jwt
import pytest

from mcpkit.auth import (
    AuthorizationServer,
    HeadlessBrowser,
    InMemoryTokenStorage,
    JWTVerifier,
    OAuthClient,
    OAuthFlowError,
    StaticTokenVerifier,
    protect,
    tool_scopes,
)
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.challenges import parse_www_authenticate
from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.http import create_app
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.forward_proxy import ForwardProxy
from support.oauth import REDIRECT, _forge, mcp_server, oauth, protected_by, serve, stack, whoami
from support.redis_server import redis_url  # noqa: F401  (the session fixture)


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
        assert set(storage.tokens) == {(s["as_url"], s["mcp_url"])} and set(storage.clients) == {s["as_url"]}
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


def without_resource_metadata(**as_options: Any) -> Callable[[str], Any]:
    """A factory for ``serve``: an authorization server at ``base`` (``as_options(resource)`` its options) whose
    protected MCP server at ``base/mcp`` serves no resource metadata (the 2025-03-26 way)."""

    def make(base: str) -> Any:
        resource = base + "/mcp"
        options = {k: (v(resource) if callable(v) else v) for k, v in as_options.items()}
        a = AuthorizationServer(base, auto_approve=True, **options)
        a.app = protect(
            create_app(mcp_server()),
            resource=resource,
            resource_metadata=False,
            verifier=JWTVerifier(issuer=base, audience=resource, keys={a.kid: a.key.public_key()}),
        )
        return a

    return make


@pytest.mark.req("M032", "M033")
async def test_2025_03_26_server_with_metadata_at_base_url() -> None:
    make = without_resource_metadata(default_resource=lambda resource: resource)
    async with serve(make) as (base, log):
        client, _ = oauth(base + "/mcp")
        assert await whoami(base + "/mcp", client, "handshake") == "test-user|"
        assert client.issuer == base
        assert ("GET", "/.well-known/oauth-authorization-server") in [(m, p) for m, p, _ in log.requests]
        await client.aclose()


@pytest.mark.req("M031")
async def test_a_server_without_resource_metadata_still_gets_the_resource_parameter_from_2025_06_18() -> None:
    """2025-06-18 and later: the ``resource`` parameter (RFC 8707) MUST be in the authorization and the token
    request, naming the MCP server's canonical URI, "regardless of whether authorization servers support it". A
    server without resource metadata sent the client down the 2025-03-26 path, where it named none; 2025-03-26
    itself predates resource indicators and still gets none."""

    make = without_resource_metadata(resources=lambda resource: [resource])  # (refuses a token for no resource)
    async with serve(make) as (base, _):
        client, browser = oauth(base + "/mcp")
        assert await whoami(base + "/mcp", client, "handshake") == "test-user|"
        assert dict(parse_qsl(urlsplit(browser.visited[0]).query))["resource"] == base + "/mcp"
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

        make_rs = protected_by(issuer)

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
            mw = protected_by(as_url)(base)
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
        first = storage.tokens[(s["as_url"], s["mcp_url"])]
        assert first.refresh_token
        first.expires_at = time.time()  # expired from the client's point of view: refresh before use
        assert await whoami(s["mcp_url"], client) == "test-user|"
        second = storage.tokens[(s["as_url"], s["mcp_url"])]
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
        tok = storage.tokens[(s["as_url"], s["mcp_url"])]
        tok.access_token = _forge(s["as"], aud="http://127.0.0.1:1/elsewhere")  # wrong audience → 401
        assert await whoami(s["mcp_url"], client) == "test-user|"
        assert len(browser.visited) == 1
        assert storage.tokens[(s["as_url"], s["mcp_url"])].access_token != tok.access_token
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

                async def redirect(send: Any, uri: str, params: Any, *rest: Any) -> None:
                    params = dict(params)
                    if iss is None:
                        params.pop("iss", None)
                    else:
                        params["iss"] = iss
                    await orig_redirect(send, uri, params, *rest)

                a._redirect = redirect  # type: ignore[method-assign]
            return a

        async with serve(make_as) as (as_url, _):

            def make_rs(base: str) -> Any:
                mw = protected_by(as_url)(base)
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

        make_rs = protected_by(as_url)

        async with serve(make_rs) as (rs, _):
            client, _b = oauth(rs + "/mcp", client_id=rec.client_id, client_secret=rec.client_secret, issuer=as_url)
            assert await whoami(rs + "/mcp", client) == "test-user|"
            token_reqs = [h for m, p, h in as_log.requests if p == "/token"]
            assert token_reqs and token_reqs[0]["authorization"].startswith("Basic ")
            assert "/register" not in [p for _, p, _ in as_log.requests]
            await client.aclose()


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


async def test_high_level_client_with_oauth_over_legacy_sse() -> None:
    """An OAuth flow (any ``httpx.Auth``) given to a client of the legacy HTTP+SSE transport authorizes its stream
    and its POSTs, as it does for Streamable HTTP; the SSE transport refused the ``auth`` option (TypeError)."""
    from mcpkit.client.client import Client

    async with stack(scopes_supported=["mcp:read"]) as s:
        auth, browser = oauth(s["mcp_url"])
        async with Client(s["rs_base"] + "/sse", transport="sse", transport_options={"auth": auth}) as c:
            result = await c.call_tool("whoami", {})
            assert result.raw.content[0].text == "test-user|mcp:read"  # type: ignore[union-attr]
            assert c.protocol_version is not None
        assert len(browser.visited) == 1
        await auth.aclose()


async def test_high_level_client_with_oauth_over_websocket() -> None:
    """An OAuth flow (any ``httpx.Auth``) given to a WebSocket client authorizes its upgrade: the 401 challenge of
    the upgrade starts the flow, as over HTTP, and the upgrade is tried again with the token. The option reached
    ``websockets`` and failed there with a TypeError (``transport_options``), or was refused (``auth=``)."""
    from mcpkit.client.client import Client

    async with stack(scopes_supported=["mcp:read"]) as s:
        ws_url = s["rs_base"].replace("http://", "ws://") + "/ws"
        auth, browser = oauth(s["mcp_url"])
        async with Client(ws_url, transport_options={"auth": auth}) as c:
            result = await c.call_tool("whoami", {})
            assert result.raw.content[0].text == "test-user|mcp:read"  # type: ignore[union-attr]
        async with Client(ws_url, auth=auth) as c:  # (the same flow: its token is used again, no second sign-in)
            result = await c.call_tool("whoami", {})
            assert result.raw.content[0].text == "test-user|mcp:read"  # type: ignore[union-attr]
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
            s["mcp_url"],
            client_id=rec.client_id,
            client_secret=rec.client_secret,
            grant_type="client_credentials",
            issuer=s["as_url"],
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
        await a.storage.save_client(dataclasses.replace(record, client_secret="rotated-elsewhere"))
        await storage.set_tokens(s["as_url"], None, s["mcp_url"])
        assert await whoami(s["mcp_url"], client) == "test-user|"
        second = await storage.get_client_info(s["as_url"])
        assert second is not None and second["client_id"] != first["client_id"]
        # the stored secret expires: registered again before authorizing
        second["client_secret_expires_at"] = int(time.time()) - 1
        await storage.set_client_info(s["as_url"], second)
        await storage.set_tokens(s["as_url"], None, s["mcp_url"])
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


async def test_malformed_discovery_documents_fail_the_flow_with_an_oauth_flow_error() -> None:
    """A resource metadata whose ``authorization_servers`` is no list of URLs, or authorization server metadata
    without the ``token_endpoint`` (or, for the authorization code grant, the ``authorization_endpoint``) RFC 8414
    requires, ends the flow with an :class:`OAuthFlowError` naming what is missing; they escaped as a bare
    ``KeyError: 0``, ``TypeError`` or ``KeyError: 'authorization_endpoint'`` from deep inside the flow."""

    def documents(prm: dict[str, Any], as_doc: Callable[[str], Any], challenge: bytes) -> Callable[[str], Any]:
        def make(base: str) -> Any:
            async def app(scope: Any, receive: Any, send: Any) -> None:
                if scope["type"] != "http":
                    return
                path = scope["path"]
                if path.startswith("/.well-known/oauth-protected-resource"):
                    body: Any = {"resource": base + "/mcp", "authorization_servers": [base], **prm}
                elif path.startswith("/.well-known/oauth-authorization-server"):
                    body = as_doc(base)
                else:
                    await send(
                        {"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", challenge)]}
                    )
                    await send({"type": "http.response.body", "body": b""})
                    return
                await send(
                    {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
                )
                await send({"type": "http.response.body", "body": json.dumps(body).encode()})

            return app

        return make

    def as_doc(**without: None) -> Callable[[str], Any]:
        def doc(base: str) -> dict[str, Any]:
            full = {
                "issuer": base,
                "authorization_endpoint": base + "/authorize",
                "token_endpoint": base + "/token",
                "code_challenge_methods_supported": ["S256"],
            }
            return {k: v for k, v in full.items() if k not in without}

        return doc

    cases = [
        ({"authorization_servers": {"a": 1}}, as_doc(), "names no authorization server", b"Bearer"),
        ({"authorization_servers": 5}, as_doc(), "names no authorization server", b"Bearer"),
        ({"authorization_servers": []}, as_doc(), "names no authorization server", b"Bearer"),
        ({}, as_doc(authorization_endpoint=None), "authorization_endpoint", b"Bearer"),
        ({}, as_doc(token_endpoint=None), "token_endpoint", b"Bearer"),
        # URLs that do not parse (an unclosed IPv6 "["): they escaped as ValueError: Invalid IPv6 URL
        # (a challenge's resource_metadata that is no URL is ignored: the well-known location is tried, and the flow
        # reaches the authorization endpoint, which this server does not have)
        ({}, as_doc(), "without a redirect", b'Bearer resource_metadata="http://["'),
        ({"resource": "http://["}, as_doc(), "names resource", b"Bearer"),
        ({"authorization_servers": ["http://["]}, as_doc(), "not a URL", b"Bearer"),
        ({}, lambda base: {**as_doc()(base), "token_endpoint": "http://["}, "token_endpoint must be", b"Bearer"),
    ]
    for prm, doc, expect, challenge in cases:
        async with serve(documents(prm, doc, challenge)) as (base, _):
            browser = HeadlessBrowser()
            client = OAuthClient(
                base + "/mcp",
                client_id="pre-registered",
                client_metadata={"redirect_uris": [REDIRECT]},
                redirect_handler=browser.redirect_handler,
                callback_handler=browser.callback_handler,
            )
            try:
                async with httpx.AsyncClient(auth=client) as http:
                    with pytest.raises(OAuthFlowError) as info:
                        await http.post(base + "/mcp", json={})
            finally:
                await client.aclose()
            assert expect in str(info.value), (prm, expect, info.value)


async def test_file_token_storage_writes_a_private_file_whatever_lies_at_its_temporary_name(tmp_path: Any) -> None:
    """``FileTokenStorage`` promises a file of mode 0600, replaced atomically. Its temporary file had a fixed name
    opened without ``O_EXCL``: a stale one of mode 0644 left the tokens readable by everyone, and a symlink planted
    there (a shared directory) had the tokens written to the file it pointed at, then became the token file."""
    import os
    import stat

    from mcpkit.auth import FileTokenStorage, TokenSet

    loose = tmp_path / "loose" / "tokens.json"
    loose.parent.mkdir()
    (loose.parent / "tokens.json.tmp").write_text("")
    os.chmod(loose.parent / "tokens.json.tmp", 0o644)
    await FileTokenStorage(loose).set_tokens("https://as.example", TokenSet("secret-token"))
    assert stat.S_IMODE(os.stat(loose).st_mode) == 0o600
    assert (await FileTokenStorage(loose).get_tokens("https://as.example")) == TokenSet("secret-token")

    planted = tmp_path / "planted" / "tokens.json"
    planted.parent.mkdir()
    elsewhere = tmp_path / "elsewhere"
    os.symlink(elsewhere, planted.parent / "tokens.json.tmp")
    await FileTokenStorage(planted).set_tokens("https://as.example", TokenSet("secret-token"))
    assert not elsewhere.exists()
    assert not planted.is_symlink() and stat.S_IMODE(os.stat(planted).st_mode) == 0o600
    await FileTokenStorage(planted).set_client_info("https://as.example", {"client_id": "c"})
    assert sorted(p.name for p in planted.parent.iterdir() if p.name != "tokens.json.tmp") == ["tokens.json"]


async def test_preregistered_credentials_go_only_to_the_authorization_server_they_were_registered_with() -> None:
    """A client secret registered with one authorization server is never sent to another that an MCP server's
    resource metadata names (a compromised or lying PRM would collect it, e.g. with the client credentials grant).
    Bound by ``issuer=``: elsewhere the client registers dynamically when it can, and otherwise fails naming both
    issuers."""
    import base64

    servers: dict[str, AuthorizationServer] = {}

    def make_as(name: str, **options: Any) -> Callable[[str], Any]:
        def make(base: str) -> Any:
            servers[name] = AuthorizationServer(base, auto_approve=True, **options)
            return servers[name]

        return make

    async with (
        serve(make_as("home", registration=False)) as (home_url, home_log),
        serve(make_as("open")) as (open_url, open_log),
        serve(make_as("closed", registration=False)) as (closed_url, closed_log),
    ):
        rec = await servers["home"].register_client(
            redirect_uris=[REDIRECT], token_endpoint_auth_method="client_secret_basic"
        )
        machine = await servers["home"].register_client(
            grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
        )
        secrets_seen = {base64.b64encode(f"{c.client_id}:{c.client_secret}".encode()).decode() for c in (rec, machine)}
        holder: dict[str, Any] = {}

        def make_rs(base: str) -> Any:
            resource = base + "/mcp"
            holder["rs"] = protect(
                create_app(mcp_server()),
                resource=resource,
                authorization_servers=[home_url],
                verifier=JWTVerifier(issuer=home_url, audience=resource, jwks_url=home_url + "/jwks"),
            )
            return holder["rs"]

        def point_at(as_url: str) -> None:
            rs = holder["rs"]
            rs.authorization_servers = [as_url]
            rs.verifier = JWTVerifier(issuer=as_url, audience=rs.resource, jwks_url=as_url + "/jwks")

        def leaked(log: Any) -> bool:
            return any(any(sec in h.get("authorization", "") for sec in secrets_seen) for _, _, h in log.requests)

        async with serve(make_rs) as (rs_base, _):
            url = rs_base + "/mcp"
            # bound explicitly, the resource names another AS that registers clients: a dynamic registration there
            point_at(open_url)
            client, _b = oauth(url, client_id=rec.client_id, client_secret=rec.client_secret, issuer=home_url)
            assert await whoami(url, client) == "test-user|"
            assert "/register" in [p for _, p, _ in open_log.requests]
            assert not leaked(open_log)
            await client.aclose()
            # ... an AS without registration: a clear error naming both issuers, nothing sent there
            point_at(closed_url)
            client, _b = oauth(url, client_id=rec.client_id, client_secret=rec.client_secret, issuer=home_url)
            with pytest.raises(OAuthFlowError) as info:
                await whoami(url, client)
            assert home_url in str(info.value) and closed_url in str(info.value)
            assert "/token" not in [p for _, p, _ in closed_log.requests]
            await client.aclose()
            # the client credentials grant cannot register: the same error, the secret stays home
            machine_client = OAuthClient(
                url,
                client_id=machine.client_id,
                client_secret=machine.client_secret,
                grant_type="client_credentials",
                issuer=home_url,
            )
            with pytest.raises(OAuthFlowError, match="registered with"):
                await whoami(url, machine_client)
            await machine_client.aclose()
            assert not leaked(closed_log) and not leaked(open_log)
            assert not [p for _, p, _ in home_log.requests if p == "/token"]  # none of this reached home either


async def test_a_client_secret_without_issuer_goes_only_to_an_authorization_server_on_the_mcp_servers_origin() -> None:
    """Without ``issuer=``, the authorization server of the first contact is whatever the MCP server's resource
    metadata names: a hostile or compromised MCP server would name its own and collect the secret (or a private_key
    assertion). So confidential pre-registered credentials go, unbound, only to an authorization server on the MCP
    server's origin, and any other is refused before anything is sent, with an error that names ``issuer=``. A
    public pre-registered ``client_id`` (no secret) keeps working anywhere, bound to the first server it uses."""
    import base64

    from mcpkit.auth import SigningKey

    servers: dict[str, AuthorizationServer] = {}

    def make_as(name: str, **options: Any) -> Callable[[str], Any]:
        def make(base: str) -> Any:
            servers[name] = AuthorizationServer(base, auto_approve=True, **options)
            return servers[name]

        return make

    async with serve(make_as("foreign")) as (foreign_url, foreign_log):
        foreign = servers["foreign"]
        rec = await foreign.register_client(redirect_uris=[REDIRECT], token_endpoint_auth_method="client_secret_basic")
        machine = await foreign.register_client(
            grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
        )
        key = SigningKey.generate("ES256")
        keyed = await foreign.register_client(
            grant_types=["client_credentials"], token_endpoint_auth_method="private_key_jwt", jwks=key.jwks()
        )
        public = await foreign.register_client(redirect_uris=[REDIRECT], token_endpoint_auth_method="none")
        basic = {base64.b64encode(f"{c.client_id}:{c.client_secret}".encode()).decode() for c in (rec, machine)}

        def sent_to_foreign() -> list[str]:
            return [p for _, p, _ in foreign_log.requests if p in ("/token", "/register", "/authorize")]

        async with serve(protected_by(foreign_url)) as (rs_base, _):
            url = rs_base + "/mcp"
            before = len(foreign_log.requests)
            cases: list[OAuthClient] = [
                oauth(url, client_id=rec.client_id, client_secret=rec.client_secret)[0],
                OAuthClient(
                    url,
                    grant_type="client_credentials",
                    client_id=machine.client_id,
                    client_secret=machine.client_secret,
                ),
                OAuthClient(url, grant_type="client_credentials", client_id=keyed.client_id, private_key=key),
            ]
            for client in cases:
                with pytest.raises(OAuthFlowError) as info:
                    await whoami(url, client)
                message = str(info.value)
                assert "issuer=" in message and foreign_url in message and rs_base in message, message
                await client.aclose()
            # nothing but its metadata was asked of the foreign AS: no token request, no registration, no secret
            assert not [p for _, p, _ in foreign_log.requests[before:] if p in ("/token", "/register", "/authorize")]
            assert not any(
                any(b in h.get("authorization", "") for b in basic) for _, _, h in foreign_log.requests[before:]
            )
            # named by the user: the same credentials work there
            client, _b = oauth(url, client_id=rec.client_id, client_secret=rec.client_secret, issuer=foreign_url)
            assert await whoami(url, client) == "test-user|"
            await client.aclose()
            client = OAuthClient(
                url, grant_type="client_credentials", client_id=keyed.client_id, private_key=key, issuer=foreign_url
            )
            assert await whoami(url, client) == f"{keyed.client_id}|"  # a machine client is its own subject
            await client.aclose()
            # a public client (no secret) needs no issuer=
            client, _b = oauth(url, client_id=public.client_id)
            assert await whoami(url, client) == "test-user|"
            await client.aclose()
            assert sent_to_foreign()

    # the authorization server on the MCP server's own origin gets them without issuer=
    holder: dict[str, Any] = {}

    def colocated(base: str) -> Any:
        authz = holder["as"] = AuthorizationServer(base, auto_approve=True, registration=False)
        authz.app = protected_by(base)(base)
        return authz

    async with serve(colocated) as (base, log):
        rec = await holder["as"].register_client(
            redirect_uris=[REDIRECT], token_endpoint_auth_method="client_secret_basic"
        )
        client, _b = oauth(base + "/mcp", client_id=rec.client_id, client_secret=rec.client_secret)
        assert await whoami(base + "/mcp", client) == "test-user|"
        assert any(h.get("authorization", "").startswith("Basic ") for _, p, h in log.requests if p == "/token")
        await client.aclose()


async def test_tokens_are_kept_per_authorization_server_and_resource(tmp_path: Any) -> None:
    """Two MCP servers behind one authorization server, one token file: each keeps its own token. Keyed by issuer
    alone, the second server's token replaced the first's, and the first client then presented it to the first
    server (a token for another audience, which that server could replay where it is valid). A file written
    before (one token per issuer) is still read for the resource its token was issued for, and for no other."""
    from mcpkit.auth import FileTokenStorage

    async with serve(lambda base: AuthorizationServer(base, auto_approve=True)) as (as_url, _):
        make_rs = protected_by(as_url)
        async with serve(make_rs) as (one, one_log), serve(make_rs) as (two, two_log):
            path = tmp_path / "tokens.json"
            first, browser1 = oauth(one + "/mcp", storage=FileTokenStorage(path))
            second, browser2 = oauth(two + "/mcp", storage=FileTokenStorage(path))
            assert await whoami(one + "/mcp", first) == "test-user|"
            assert await whoami(two + "/mcp", second) == "test-user|"
            assert await whoami(one + "/mcp", first) == "test-user|"
            assert await whoami(two + "/mcp", second) == "test-user|"
            assert (len(browser1.visited), len(browser2.visited)) == (1, 1)  # nobody signed in again
            for base, log in ((one, one_log), (two, two_log)):
                for _, _, headers in log.requests:
                    if "authorization" in headers:
                        claims = jwt.decode(headers["authorization"].split()[1], options={"verify_signature": False})
                        assert claims["aud"] == base + "/mcp"  # never the other server's token
            await first.aclose()
            await second.aclose()
            # a file of the earlier layout: {"tokens": {issuer: token}}; its token is for server one
            stored = json.loads(path.read_text())
            token_one = next(t for t in stored["tokens"].values() if t["resource"] == one + "/mcp")
            legacy = tmp_path / "legacy.json"
            legacy.write_text(json.dumps({"tokens": {as_url: token_one}, "clients": stored["clients"]}))
            again, browser3 = oauth(one + "/mcp", storage=FileTokenStorage(legacy))
            assert await whoami(one + "/mcp", again) == "test-user|"
            assert browser3.visited == []  # the old entry served the resource it was issued for
            await again.aclose()
            legacy.write_text(json.dumps({"tokens": {as_url: token_one}, "clients": stored["clients"]}))
            other, browser4 = oauth(two + "/mcp", storage=FileTokenStorage(legacy))
            seen = len(two_log.requests)
            assert await whoami(two + "/mcp", other) == "test-user|"
            assert len(browser4.visited) == 1  # ... and not another one: server two signed in
            assert all(
                token_one["access_token"] not in h.get("authorization", "") for _, _, h in two_log.requests[seen:]
            )
            await other.aclose()


async def test_the_oauth_client_connects_to_the_address_it_checked_not_a_rebound_one() -> None:
    """DNS rebinding: the SSRF rule resolved a name to check it, then httpx resolved it again to connect, so a name
    that answered a public address first and ``169.254.169.254`` next reached the second. The OAuth client's
    transport resolves once per connection, checks every address and connects to the checked one (``Host`` still
    the name); a name that resolves to a refused kind of address is never connected to."""
    from mcpkit.auth.client_discovery import CheckedAddressTransport

    answers = ["127.0.0.1", "169.254.169.254"]  # what the name resolves to, one answer per lookup
    lookups: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        lookups.append(host)
        return [answers[min(len(lookups), len(answers)) - 1]]

    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(dict(scope["headers"])[b"host"].decode())
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

    async with serve(lambda base: app) as (base, _):
        port = urlsplit(base).port
        mcp = base + "/mcp"  # the MCP server is on loopback: loopback targets are allowed, link-local never
        transport = CheckedAddressTransport(mcp, resolve=rebinding)
        async with httpx.AsyncClient(transport=transport, timeout=5) as http:
            assert (await http.get(f"http://as.rebind.test:{port}/.well-known/x")).status_code == 200
        assert seen == [f"as.rebind.test:{port}"] and lookups == ["as.rebind.test"]
        # the next connection: the name now answers the metadata address; refused before any connection
        transport = CheckedAddressTransport(mcp, resolve=rebinding)
        async with httpx.AsyncClient(transport=transport, timeout=5) as http:
            with pytest.raises(httpx.ConnectError, match=r"169\.254\.169\.254, a link-local address"):
                await http.get(f"http://as.rebind.test:{port}/.well-known/x")
        assert len(seen) == 1
        # allow_private_network lets it through to whatever the name resolves to (here: loopback again)
        answers[1] = "127.0.0.1"
        transport = CheckedAddressTransport(mcp, resolve=rebinding, allow_private_network=True)
        async with httpx.AsyncClient(transport=transport, timeout=5) as http:
            assert (await http.get(f"http://as.rebind.test:{port}/.well-known/x")).status_code == 200
    # the OAuth client's own fetches go through this transport
    client = OAuthClient("http://127.0.0.1:1/mcp", client_metadata={"redirect_uris": [REDIRECT]})
    assert isinstance(client._client()._transport, CheckedAddressTransport)
    await client.aclose()


async def test_the_oauth_client_goes_through_the_environment_proxy_and_checks_the_target_before_handing_it_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HTTP_PROXY`` / ``HTTPS_PROXY`` hold for the OAuth client's own requests as for the MCP connection (a client
    behind a corporate proxy cannot reach the authorization server directly). The proxy resolves the target's name,
    so the address rule is applied before handing the request over: an IP literal of a refused kind, or a name that
    resolves to one on this machine, never reaches the proxy; a name this machine cannot resolve is the proxy's to
    resolve. The proxy itself (configured by the operator, often on a private address) is not checked."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with ForwardProxy() as proxy, stack() as s:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        client, _ = oauth(s["mcp_url"])
        assert await whoami(s["mcp_url"], client) == "test-user|"
        await client.aclose()
        as_url = s["as_url"]
        # discovery, registration and the token request all went through the proxy
        for path in ("/.well-known/oauth-authorization-server", "/register", "/token"):
            assert any(r.endswith(as_url + path) for r in proxy.requests), (path, proxy.requests)

        # an MCP server on a public address: loopback, private and link-local targets are refused before the proxy
        client = OAuthClient("https://93.184.215.14/mcp", client_metadata={"redirect_uris": [REDIRECT]})
        http = client._client()
        before = len(proxy.requests)
        for url, kind in [
            ("https://169.254.169.254/latest/meta-data/", "link-local"),
            ("https://10.1.2.3/token", "private"),
            ("https://[::ffff:127.0.0.1]/token", "loopback"),
            ("http://localhost:9/x", "loopback"),  # a name that resolves to a refused kind on this machine
        ]:
            with pytest.raises(httpx.ConnectError, match=f"a {kind} address"):
                await http.get(url)
        assert len(proxy.requests) == before
        # a name this machine cannot resolve goes to the proxy (reached on loopback though the rule refuses that)
        with pytest.raises(httpx.ProxyError):
            await http.get("https://as.example.invalid/.well-known/oauth-authorization-server")
        assert proxy.requests[before:] == ["CONNECT as.example.invalid:443"]
        await client.aclose()
        # allow_private_network hands a private target to the proxy as well
        client = OAuthClient(
            "https://93.184.215.14/mcp", client_metadata={"redirect_uris": [REDIRECT]}, allow_private_network=True
        )
        with pytest.raises(httpx.ProxyError):
            await client._client().get("https://10.1.2.3/token")
        assert proxy.requests[-1] == "CONNECT 10.1.2.3:443"
        await client.aclose()
        # NO_PROXY exempts a host: the connection is direct, through the checked transport
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        before = len(proxy.requests)
        client, _ = oauth(s["mcp_url"], storage=InMemoryTokenStorage())
        assert await whoami(s["mcp_url"], client) == "test-user|"
        await client.aclose()
        assert len(proxy.requests) == before
