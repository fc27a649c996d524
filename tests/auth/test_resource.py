"""The resource server's side of OAuth 2.1 for MCP (``mcpkit.auth.protect`` and the token verifiers): 401s
with the resource metadata, tokens refused for their audience, expiry or place, the principal handed to the
handlers, sessions bound to it, scopes."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt
import pytest

from mcpkit import Client
from mcpkit.auth import (
    AccessToken,
    AuthorizationServer,
    IntrospectionVerifier,
    InvalidToken,
    JWTVerifier,
    StaticTokenVerifier,
    current_access_token,
    protect,
)
from mcpkit.auth.challenges import parse_www_authenticate
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.http import create_app
from support.mcp_http import initialize_body
from support.oauth import _forge, mcp_server, serve, stack
from support.redis_server import redis_url  # noqa: F401  (the session fixture)

# what an auth-param value of a Bearer challenge may hold (RFC 6750 §3)
_RFC6750_CHARS = frozenset(map(chr, [0x20, 0x21, *range(0x23, 0x5C), *range(0x5D, 0x7F)]))


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


async def test_the_health_and_readiness_probes_of_a_protected_app_need_no_token() -> None:
    # deployment.md: /healthz and /readyz are for the orchestrator's probes (Kubernetes, HAProxy's httpchk), which
    # carry no token: behind protect() they answered 401, so every worker looked down
    async with stack() as s, httpx.AsyncClient() as http:
        base = s["rs_base"]
        assert (await http.get(base + "/healthz")).status_code == 200
        ready = await http.get(base + "/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert (await http.post(base + "/readyz")).status_code == 401  # only the probes' GET, nothing else
        assert (await http.get(s["mcp_url"], headers={"accept": "text/event-stream"})).status_code == 401


async def test_a_websocket_upgrade_without_a_valid_token_gets_the_same_401_challenge() -> None:
    """The WebSocket upgrade at ``/ws`` is refused like any request: 401 with the Bearer challenge naming the
    resource metadata (a client learns there where to get a token), not a bare 403 that reads as "forbidden"."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    from mcpkit import Client, ServerStartError

    async with stack(required=("mcp:read",)) as s:
        ws_url = s["rs_base"].replace("http://", "ws://") + "/ws"
        for headers in ({}, {"authorization": "Bearer not-a-token"}):
            with pytest.raises(InvalidStatus) as refused:
                await connect(ws_url, subprotocols=["mcp"], additional_headers=headers)  # type: ignore[list-item]
            response = refused.value.response
            assert response.status_code == 401, headers
            scheme, params = parse_www_authenticate(response.headers["www-authenticate"])
            assert scheme == "bearer"
            assert params["resource_metadata"] == s["rs_base"] + "/.well-known/oauth-protected-resource/mcp"
            assert ("error" in params) == bool(headers)  # invalid_token only when a token was sent
        with pytest.raises(ServerStartError, match="HTTP 401"):
            async with Client(ws_url, connect_timeout=5):
                pass


async def test_a_browser_page_can_read_the_401_challenge() -> None:
    """A request from a web page (``Origin``) without a token: the 401 carries CORS headers that let the page read
    its status and ``WWW-Authenticate`` (where the resource metadata is named), as the metadata itself is served
    to any origin; without them a browser client cannot start authorization. No credentials are allowed."""
    async with stack(required=("mcp:read",)) as s, httpx.AsyncClient() as http:
        origin = "http://localhost:6274"
        r = await http.post(
            s["mcp_url"],
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"accept": "application/json, text/event-stream", "origin": origin},
        )
        assert r.status_code == 401
        assert r.headers["access-control-allow-origin"] in ("*", origin)
        exposed = {h.strip().lower() for h in r.headers["access-control-expose-headers"].split(",")}
        assert "www-authenticate" in exposed
        assert "access-control-allow-credentials" not in r.headers
        scheme, params = parse_www_authenticate(r.headers["www-authenticate"])
        assert scheme == "bearer" and params["resource_metadata"].startswith(s["rs_base"])
        # the preflight of the authorized request passes (it carries no credentials) and allows the header
        pre = await http.options(
            s["mcp_url"],
            headers={
                "origin": origin,
                "access-control-request-method": "POST",
                "access-control-request-headers": "authorization, content-type",
            },
        )
        assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == origin
        assert "authorization" in pre.headers["access-control-allow-headers"].lower()
        # a request without Origin (not from a page) gets no CORS headers
        plain = await http.post(s["mcp_url"], json={"jsonrpc": "2.0", "id": 2, "method": "ping"})
        assert plain.status_code == 401 and "access-control-allow-origin" not in plain.headers


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


async def test_a_jwks_endpoint_that_does_not_answer_costs_one_fetch_per_interval_not_one_per_request() -> None:
    """While the JWKS cannot be fetched (the authorization server down, or silent), a burst of requests makes one
    fetch per ``min_refresh_interval`` and the others are refused at once (401), naming why. Every request fetched
    again, one after another behind the verifier's lock: five concurrent requests took five fetch timeouts, a
    hundred would have waited a hundred."""
    import asyncio

    accepted: list[object] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)  # holds the connection open and never answers

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        jv = JWTVerifier(
            issuer="https://as.example", audience=None, jwks_url=f"http://127.0.0.1:{port}/jwks", http_timeout=1.0
        )
        token = AuthorizationServer("https://as.example").issue_access_token(
            subject="s", client_id="c", scopes=[], resource=None
        )

        async def verify() -> str:
            with pytest.raises(InvalidToken) as info:
                await jv.verify(token)
            return str(info.value)

        started = time.monotonic()
        reasons = await asyncio.gather(*(verify() for _ in range(5)))
        assert time.monotonic() - started < 3.0
        assert len(accepted) == 1
        assert all("JWKS" in why for why in reasons), reasons
    finally:
        for writer in accepted:
            writer.close()  # type: ignore[attr-defined]
        server.close()
        await server.wait_closed()


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


async def test_a_verifier_refusal_in_any_words_is_a_401_whose_challenge_holds_only_allowed_characters() -> None:
    """Whatever a verifier says when it refuses a token (non-Latin-1 text, a line break, quotes), the answer is a
    401 whose ``error_description`` auth-param keeps to the characters RFC 6750 §3 allows (%x20-21 / %x23-5B /
    %x5D-7E), and the JSON body carries the verifier's words as they were; it was a 500 (a header that could not be
    encoded, or that the HTTP server refused to send)."""
    words = {
        "unicode": "jeton refusé — expiré",
        "newline": "bad\r\nX-Injected: yes",
        "quotes": 'bad "quoted" \\ value',
    }

    class Wordy:
        async def verify(self, token: str) -> AccessToken:
            raise InvalidToken(words[token])

    def make(base: str) -> Any:
        return protect(
            create_app(mcp_server()),
            resource=base + "/mcp",
            verifier=Wordy(),
            authorization_servers=["https://as.example"],
        )

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        for token, said in words.items():
            r = await http.post(base + "/mcp", json=initialize_body(), headers={"authorization": f"Bearer {token}"})
            assert r.status_code == 401, (token, r.status_code)
            assert r.json() == {"error": "invalid_token", "error_description": said}
            challenge = r.headers["www-authenticate"]
            assert "x-injected" not in {k.lower() for k in r.headers}
            _, params = parse_www_authenticate(challenge)
            assert params["error"] == "invalid_token"
            description = params["error_description"]
            assert description and all(c in _RFC6750_CHARS for c in description), description


async def test_an_audience_that_is_no_url_is_another_resource_not_a_500() -> None:
    """A verified token whose ``aud`` holds a value that does not parse as a URL (``http://[``; a verifier with
    ``audience=None`` or introspection leaves the check to the middleware) is for another resource: 401, or accepted
    when another of its audiences is this resource. canonical_resource raised ValueError: a 500."""
    aud = "http://127.0.0.1:1/mcp"

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    tokens = {
        "odd": AccessToken("odd", subject="s", audience=("http://[",)),
        "both": AccessToken("both", subject="s", audience=("http://[", aud)),
    }
    mw = protect(app, resource=aud, verifier=StaticTokenVerifier(tokens))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=mw), base_url="http://127.0.0.1:1") as http:
        r = await http.get("/mcp", headers={"authorization": "Bearer odd"})
        assert r.status_code == 401 and r.json()["error"] == "invalid_token"
        assert (await http.get("/mcp", headers={"authorization": "Bearer both"})).status_code == 204


async def test_the_clock_skew_leeway_on_a_token_expiry_is_counted_once_from_its_exp() -> None:
    """A token is accepted until its ``exp`` plus the resource server's leeway, once: JWTVerifier reported
    ``exp + its leeway`` as the token's expiry and ``protect(leeway=)`` added its own on top, so ``leeway=10``
    accepted a token 39 s after it expired. ``AccessToken.expires_at`` is the token's ``exp`` as issued."""
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    aud = "http://127.0.0.1:1/mcp"
    seen: list[float | None] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        token = current_access_token()
        seen.append(token.expires_at if token is not None else None)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    def token(exp: int) -> str:
        claims = {"iss": "https://as.example", "aud": aud, "sub": "s", "exp": exp}
        return jwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})

    verifier = JWTVerifier(issuer="https://as.example", audience=aud, keys={"k1": key.public_key()}, leeway=30)
    for leeway in (10, 30):
        mw = protect(app, resource=aud, verifier=verifier, leeway=leeway)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=mw), base_url="http://127.0.0.1:1") as http:
            now = int(time.time())
            inside = await http.get("/mcp", headers={"authorization": f"Bearer {token(now - leeway + 5)}"})
            assert inside.status_code == 204, leeway
            assert seen[-1] == now - leeway + 5  # the token's own exp, no leeway added
            outside = await http.get("/mcp", headers={"authorization": f"Bearer {token(now - leeway - 5)}"})
            assert outside.status_code == 401, leeway
            assert parse_www_authenticate(outside.headers["www-authenticate"])[1]["error"] == "invalid_token"
    # the default: the same 30 s a JWTVerifier tolerates by default, not 30 + 30
    mw = protect(app, resource=aud, verifier=verifier)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=mw), base_url="http://127.0.0.1:1") as http:
        now = int(time.time())
        assert (await http.get("/mcp", headers={"authorization": f"Bearer {token(now - 25)}"})).status_code == 204
        assert (await http.get("/mcp", headers={"authorization": f"Bearer {token(now - 35)}"})).status_code == 401


async def test_the_resource_metadata_is_read_only_get_head_and_options() -> None:
    """RFC 9728 metadata, at its path-aware and root locations: GET and HEAD answer it, OPTIONS is the CORS
    preflight naming those methods, any other method is 405 with the complete ``Allow`` (RFC 9110 §15.5.6: the
    405 named ``GET, OPTIONS`` though HEAD is served)."""
    read_only = {"GET", "HEAD", "OPTIONS"}
    async with stack() as s, httpx.AsyncClient(follow_redirects=False) as http:
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            url = s["rs_base"] + path
            assert (await http.get(url)).json()["resource"] == s["mcp_url"], path
            head = await http.head(url)
            assert head.status_code == 200 and head.content == b"", path
            pre = await http.options(
                url, headers={"origin": "https://app.example", "access-control-request-method": "GET"}
            )
            assert pre.status_code == 204, path
            assert {m.strip() for m in pre.headers["access-control-allow-methods"].split(",")} == read_only, path
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                r = await http.request(method, url)
                assert r.status_code == 405, (method, path, r.status_code)
                assert {m.strip() for m in r.headers.get("allow", "").split(",")} == read_only, (method, path)


async def test_without_an_authorization_server_there_is_no_resource_metadata_only_bearer_tokens() -> None:
    """MCP (2025-06-18, 2025-11-25): the resource metadata MUST name at least one authorization server. Without
    one, ``protect`` is plain bearer-token protection: no metadata document (404 at both locations), a challenge
    without ``resource_metadata``; it served ``authorization_servers: []``. An authorization server that hosts the
    protected app (mcpkit's, in the same process) is named by default."""
    async with (
        serve(
            lambda base: protect(
                create_app(mcp_server()),
                resource=base + "/mcp",
                verifier=StaticTokenVerifier.simple({"t": []}, audience=base + "/mcp"),
            )
        ) as (base, _),
        httpx.AsyncClient() as http,
    ):
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            r = await http.get(base + path)
            assert r.status_code == 404, (path, r.status_code, r.text)
        r = await http.post(base + "/mcp", json=initialize_body("2025-11-25"))
        assert r.status_code == 401
        scheme, params = parse_www_authenticate(r.headers["www-authenticate"])
        assert scheme.lower() == "bearer" and "resource_metadata" not in params
        r = await http.post(
            base + "/mcp",
            json=initialize_body("2025-11-25"),
            headers={"authorization": "Bearer t", "accept": "application/json, text/event-stream"},
        )
        assert r.status_code == 200
    # colocated: the authorization server hosting the app is the one named
    async with (
        serve(
            lambda base: AuthorizationServer(
                base,
                app=protect(
                    create_app(mcp_server()),
                    resource=base + "/mcp",
                    verifier=StaticTokenVerifier.simple({"t": []}, audience=base + "/mcp"),
                ),
            )
        ) as (base, _),
        httpx.AsyncClient() as http,
    ):
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            assert (await http.get(base + path)).json()["authorization_servers"] == [base], path
        r = await http.post(base + "/mcp", json=initialize_body("2025-11-25"))
        params = parse_www_authenticate(r.headers["www-authenticate"])[1]
        assert params["resource_metadata"] == base + "/.well-known/oauth-protected-resource/mcp"


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_protect_asks_the_app_what_a_call_asks_about_too_only_once_it_serves_a_caller_tool(mode: str) -> None:
    """``protect``'s early look at a POST asked the app, for every request, what else the authorization is asked
    about (tool search's ``call_tool``: the tool it names), though an app without tool search never names any. It
    now reads the app's ``asks_too`` first, as the dispatcher does: nothing is asked until tool search is added
    (while serving here), and from then on ``call_tool`` gets the direct call's refusal."""
    from mcpkit import MCPKit
    from support.asgi import serve_asgi

    class CountingApp(MCPKit):
        asked: int = 0

        def asked_too(self, method: str, params: Any) -> tuple[dict[str, Any], ...]:
            self.asked += 1
            return super().asked_too(method, params)

    app = CountingApp("counting")

    @app.tool()
    def purge(path: str) -> str:
        return f"purged {path}"

    resource = "http://mcp.test/mcp"
    verifier = StaticTokenVerifier.simple({"reader": [], "admin": ["files:admin"]}, audience=resource)

    def rule(method: str, params: Any) -> list[str]:
        return ["files:admin"] if method == "tools/call" and params.get("name") == "purge" else []

    async with serve_asgi(protect(create_app(app), resource=resource, verifier=verifier, scope_rule=rule)) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, headers={"Authorization": "Bearer admin"}) as admin:
            assert [t.name for t in await admin.list_tools()] == ["purge"]
            assert (await admin.call_tool("purge", {"path": "/x"})).text == "purged /x"
        async with Client(url, mode=mode, headers={"Authorization": "Bearer reader"}) as reader:
            with pytest.raises(MCPError) as direct:
                await reader.call_tool("purge", {"path": "/x"})
            assert app.asked == 0  # (no caller tool: nothing to ask, on no POST)
            app.add_tool_search()
            with pytest.raises(MCPError) as through:
                await reader.call_tool("call_tool", {"name": "purge", "arguments": {"path": "/x"}})
            assert (through.value.code, through.value.message) == (direct.value.code, direct.value.message)
            assert direct.value.code != -32003  # (HTTP 403 with the step-up challenge, before any server)
            assert app.asked > 0
