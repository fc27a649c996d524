"""The development authorization server (``mcpkit.auth.AuthorizationServer``): its rules, replicas sharing
Redis storage, and the OAuth example."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import httpx
import jwt
import pytest

from mcpkit.auth import (
    AuthorizationServer,
)
from mcpkit.auth._util import pkce_pair
from support.auth_storages import StorageMaker, make_auth_storage  # noqa: F401  (the fixture)
from support.oauth import REDIRECT, serve
from support.paths import REPO
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)


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


def _as_on(base: str) -> AuthorizationServer:
    return AuthorizationServer(base, auto_approve=True, resources=["http://127.0.0.1:7/mcp"])


async def _public_client(http: httpx.AsyncClient, base: str) -> str:
    reg = await http.post(base + "/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"})
    return str(reg.json()["client_id"])


async def _code_for(http: httpx.AsyncClient, base: str, cid: str, challenge: str, **extra: str) -> str:
    query = {
        "response_type": "code",
        "client_id": cid,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": "http://127.0.0.1:7/mcp",
        **extra,
    }
    r = await http.get(base + "/authorize?" + urlencode(query))
    assert r.status_code == 302, r.text
    return dict(parse_qsl(urlsplit(r.headers["location"]).query))["code"]


async def test_a_code_asked_for_with_a_redirect_uri_is_exchanged_only_with_that_redirect_uri() -> None:
    """RFC 6749 §4.1.3 and OAuth 2.1 §4.1.3: when the authorization request carried ``redirect_uri``, the token
    request must carry it too, identical; a token request without it is ``invalid_grant``. It was accepted. A code
    asked for without ``redirect_uri`` (a client with one registered URI) is exchanged without it."""
    async with serve(_as_on) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = await _public_client(http, base)
        verifier, challenge = pkce_pair()
        form = {"grant_type": "authorization_code", "client_id": cid, "code_verifier": verifier}
        code = await _code_for(http, base, cid, challenge, redirect_uri=REDIRECT)
        r = await http.post(base + "/token", data={**form, "code": code})
        assert r.status_code == 400 and r.json()["error"] == "invalid_grant", r.text
        code = await _code_for(http, base, cid, challenge, redirect_uri=REDIRECT)
        r = await http.post(base + "/token", data={**form, "code": code, "redirect_uri": REDIRECT})
        assert r.status_code == 200, r.text
        code = await _code_for(http, base, cid, challenge)  # the one registered URI, implied
        r = await http.post(base + "/token", data={**form, "code": code})
        assert r.status_code == 200, r.text


async def test_token_endpoint_error_codes_follow_rfc_6749() -> None:
    """RFC 6749 §5.2: a grant type the server does not support at all is ``unsupported_grant_type`` (it was
    ``unauthorized_client``, which says this client may not use a grant the server has), and a request without
    ``grant_type`` is ``invalid_request``."""
    async with serve(_as_on) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = await _public_client(http, base)
        password = {"grant_type": "password", "client_id": cid, "username": "u", "password": "p"}
        r = await http.post(base + "/token", data=password)
        assert (r.status_code, r.json()["error"]) == (400, "unsupported_grant_type"), r.text
        r = await http.post(base + "/token", data={"client_id": cid})
        assert (r.status_code, r.json()["error"]) == (400, "invalid_request"), r.text
        # a grant the server has but this client was not registered for stays unauthorized_client
        r = await http.post(base + "/token", data={"grant_type": "client_credentials", "client_id": cid})
        assert (r.status_code, r.json()["error"]) == (400, "unauthorized_client"), r.text


async def test_an_endpoint_asked_with_the_wrong_method_names_the_methods_it_takes() -> None:
    """RFC 9110 §15.5.6: a 405 carries ``Allow``. /token, /register and /introspect take POST, /authorize GET and
    POST; their 405s had no ``Allow``."""
    async with serve(_as_on) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        for method, path, allowed in (
            ("GET", "/token", {"POST", "OPTIONS"}),
            ("GET", "/register", {"POST", "OPTIONS"}),
            ("GET", "/introspect", {"POST", "OPTIONS"}),
            ("PUT", "/authorize", {"GET", "POST", "OPTIONS"}),
        ):
            r = await http.request(method, base + path)
            assert r.status_code == 405, (path, r.status_code)
            assert {m.strip() for m in r.headers.get("allow", "").split(",")} == allowed, (path, r.headers)


async def test_registration_with_malformed_grant_types_is_invalid_client_metadata() -> None:
    """RFC 7591 §3.2.2: bad client metadata gets 400 ``invalid_client_metadata``; ``grant_types`` that is a number,
    or a list holding something other than strings, was a 500. A redirect URI with an impossible port is refused."""
    async with serve(_as_on) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        for grant_types in (5, [[]], [{"a": 1}], [5], "authorization_code", True):
            r = await http.post(base + "/register", json={"redirect_uris": [REDIRECT], "grant_types": grant_types})
            assert (r.status_code, r.json()["error"]) == (400, "invalid_client_metadata"), (grant_types, r.text)
        r = await http.post(base + "/register", json={"redirect_uris": ["http://127.0.0.1:99999/cb"]})
        assert (r.status_code, r.json()["error"]) == (400, "invalid_redirect_uri"), r.text


async def test_an_authorization_request_with_a_repeated_parameter_is_invalid_request() -> None:
    """RFC 6749 §3.1 and §4.1.2.1: request parameters must not be included more than once; a repeated one is
    ``invalid_request``, sent back to the client's redirect URI, or answered directly when what is repeated is the
    ``client_id`` or ``redirect_uri`` (the redirect target is then in doubt). It was issued a code, the last value
    silently winning (``scope=mcp&scope=admin``)."""
    async with serve(_as_on) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = await _public_client(http, base)
        _, challenge = pkce_pair()
        query = [
            ("response_type", "code"),
            ("client_id", cid),
            ("redirect_uri", REDIRECT),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("state", "st"),
        ]
        r = await http.get(base + "/authorize?" + urlencode([*query, ("state", "other")]))
        assert r.status_code == 302 and r.headers["location"].startswith(REDIRECT + "?")
        answer = dict(parse_qsl(urlsplit(r.headers["location"]).query))
        assert answer["error"] == "invalid_request" and "code" not in answer, answer
        for repeated in (("client_id", cid), ("redirect_uri", REDIRECT)):
            r = await http.get(base + "/authorize?" + urlencode([*query, repeated]))
            assert r.status_code == 400 and r.json()["error"] == "invalid_request", (repeated, r.status_code)
        # several resources (RFC 8707 §2 allows them) are a target this server cannot issue one token for
        two = [("resource", "http://127.0.0.1:7/mcp"), ("resource", "http://127.0.0.1:7/mcp")]
        r = await http.get(base + "/authorize?" + urlencode([*query, *two]))
        assert dict(parse_qsl(urlsplit(r.headers["location"]).query))["error"] == "invalid_target"
        r = await http.get(base + "/authorize?" + urlencode(query))  # once each: a code
        assert "code" in dict(parse_qsl(urlsplit(r.headers["location"]).query))


async def test_non_ascii_pkce_values_and_client_secrets_are_refused_not_a_500() -> None:
    """A ``code_verifier``, ``code_challenge`` or ``client_secret`` holding a non-ASCII character gets the OAuth
    error (``invalid_grant``; ``invalid_request`` for a challenge that is no S256 value, RFC 7636 §4.2: 43
    base64url characters; ``invalid_client``), not a 500: the verifier's S256 raised UnicodeEncodeError and the
    constant-time comparisons TypeError (``compare_digest`` takes no non-ASCII str)."""
    holder: dict[str, AuthorizationServer] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = _as_on(base)
        return holder["as"]

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = await _public_client(http, base)
        _, challenge = pkce_pair()
        code = await _code_for(http, base, cid, challenge, redirect_uri=REDIRECT)
        form = {"grant_type": "authorization_code", "client_id": cid, "redirect_uri": REDIRECT}
        r = await http.post(base + "/token", data={**form, "code": code, "code_verifier": "é" * 50})
        assert (r.status_code, r.json()["error"]) == (400, "invalid_grant"), r.text
        for bad in ("é" * 43, "short", challenge + "="):
            query = {
                "response_type": "code",
                "client_id": cid,
                "redirect_uri": REDIRECT,
                "code_challenge": bad,
                "code_challenge_method": "S256",
            }
            r = await http.get(base + "/authorize?" + urlencode(query))
            assert r.status_code == 302, r.text
            assert dict(parse_qsl(urlsplit(r.headers["location"]).query))["error"] == "invalid_request", bad
        record = await holder["as"].register_client(
            token_endpoint_auth_method="client_secret_post", grant_types=["client_credentials"]
        )
        cc = {"grant_type": "client_credentials", "client_id": record.client_id, "client_secret": "é"}
        r = await http.post(base + "/token", data=cc)
        assert (r.status_code, r.json()["error"]) == (401, "invalid_client"), r.text


async def test_a_resource_that_is_no_url_is_invalid_target() -> None:
    """RFC 8707 §2: a ``resource`` that is not an absolute URI is ``invalid_target``; one that does not parse at all
    (``http://[``, a port out of range) was a 500 at /authorize and at /token."""
    async with serve(_as_on) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = await _public_client(http, base)
        verifier, challenge = pkce_pair()
        for bad in ("http://[", "http://127.0.0.1:99999/mcp"):
            query = {
                "response_type": "code",
                "client_id": cid,
                "redirect_uri": REDIRECT,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "resource": bad,
            }
            r = await http.get(base + "/authorize?" + urlencode(query))
            assert r.status_code == 302, (bad, r.status_code)
            assert dict(parse_qsl(urlsplit(r.headers["location"]).query))["error"] == "invalid_target", bad
            code = await _code_for(http, base, cid, challenge, redirect_uri=REDIRECT)
            form = {"grant_type": "authorization_code", "client_id": cid, "redirect_uri": REDIRECT}
            r = await http.post(
                base + "/token", data={**form, "code": code, "code_verifier": verifier, "resource": bad}
            )
            assert (r.status_code, r.json()["error"]) == (400, "invalid_target"), (bad, r.text)


async def test_redis_storage_keeps_at_most_max_dynamic_clients_and_every_preregistered_one(
    redis_url: str,  # noqa: F811
) -> None:
    """security.md: self-registered clients are bounded (the oldest goes), pre-registered ones never; in Redis each
    registration was a key without a TTL, kept forever: anyone who can register grew Redis without bound."""
    import redis.asyncio as redis

    from mcpkit.auth import RedisAuthStorage
    from mcpkit.auth.storage import ClientRecord

    prefix = f"mcpkit-test:{time.time_ns()}:"
    storage = RedisAuthStorage(redis_url, prefix=prefix, max_dynamic_clients=3)
    raw = redis.from_url(redis_url)
    try:
        await storage.save_client(ClientRecord("pre", None, [REDIRECT]))
        for i in range(6):
            await storage.save_client(ClientRecord(f"dyn{i}", None, [REDIRECT], dynamic=True))
        await storage.save_client(ClientRecord("dyn5", "rotated", [REDIRECT], dynamic=True))  # (saved again: once)
        kept = [c for c in ("pre", *(f"dyn{i}" for i in range(6))) if await storage.get_client(c) is not None]
        assert kept == ["pre", "dyn3", "dyn4", "dyn5"]
        assert len([k async for k in raw.scan_iter(match=prefix + "client:*")]) == 4
    finally:
        await raw.aclose()
        await storage.aclose()


@pytest.mark.req("M031")
@pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)
async def test_two_as_replicas_share_their_storage_and_key(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """Replica-safe AS state, in Redis or PostgreSQL: a code issued by one replica is redeemed at the other,
    exactly once; a rotated refresh token dies everywhere; both replicas publish the same key id."""
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    holder: dict[str, Any] = {}

    def replica(name: str) -> Callable[[str], AuthorizationServer]:
        def make(base: str) -> AuthorizationServer:
            issuer = holder.setdefault("issuer", base)  # one issuer for both (behind one load balancer)
            holder[name] = AuthorizationServer(
                issuer,
                auto_approve=True,
                signing_key=key,
                production=True,
                storage=make_auth_storage.shared() if make_auth_storage.made else make_auth_storage(),
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


@pytest.mark.req("M030", "M036")
def test_oauth_example_demo_runs(free_port: Callable[[], int]) -> None:
    import subprocess
    import sys

    example = REPO / "examples" / "oauth_server.py"
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


async def test_metadata_documents_are_read_only_get_head_and_options() -> None:
    """The metadata (RFC 8414, its OpenID Connect aliases) and the JWKS are documents to read: GET and HEAD answer
    them, OPTIONS is the CORS preflight naming those methods, and any other method is 405 with the complete
    ``Allow`` (RFC 9110 §15.5.6). They answered POST and DELETE with 200."""
    read_only = {"GET", "HEAD", "OPTIONS"}
    async with serve(_as_on) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        for path in (
            "/.well-known/oauth-authorization-server",
            "/.well-known/openid-configuration",
            "/jwks",
        ):
            assert (await http.get(base + path)).status_code == 200, path
            head = await http.head(base + path)
            assert head.status_code == 200 and head.content == b"", path
            pre = await http.options(
                base + path, headers={"origin": "https://app.example", "access-control-request-method": "GET"}
            )
            assert pre.status_code == 204, path
            assert {m.strip() for m in pre.headers["access-control-allow-methods"].split(",")} == read_only, path
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                r = await http.request(method, base + path)
                assert r.status_code == 405, (method, path, r.status_code)
                assert {m.strip() for m in r.headers.get("allow", "").split(",")} == read_only, (method, path)


async def test_introspection_names_a_dpop_bound_token_dpop_and_its_key() -> None:
    """RFC 9449 §6.2: a DPoP-bound token introspects with its ``cnf.jkt`` and ``token_type`` ``DPoP``. /introspect
    said ``Bearer`` for every token, so a resource server trusting the answer's type took a token bound to a key
    for a bearer token anyone holding it may use."""
    from mcpkit.auth.dpop import make_proof
    from mcpkit.auth.keys import SigningKey

    holder: dict[str, Any] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, auto_approve=True, dpop=True)
        return holder["as"]

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        authz: AuthorizationServer = holder["as"]
        machine = await authz.register_client(
            token_endpoint_auth_method="client_secret_post", grant_types=["client_credentials"]
        )
        rs = await authz.register_client(token_endpoint_auth_method="client_secret_post", resource_server=True)
        key = SigningKey.generate()
        secret = machine.client_secret or ""
        form = {"grant_type": "client_credentials", "client_id": machine.client_id, "client_secret": secret}
        bound = await http.post(base + "/token", data=form, headers={"dpop": make_proof(key, "POST", base + "/token")})
        plain = await http.post(base + "/token", data=form)
        assert bound.json()["token_type"] == "DPoP" and plain.json()["token_type"] == "Bearer"
        for token, kind, jkt in (
            (bound.json()["access_token"], "DPoP", key.thumbprint),
            (plain.json()["access_token"], "Bearer", None),
        ):
            r = await http.post(
                base + "/introspect",
                data={"token": token, "client_id": rs.client_id, "client_secret": rs.client_secret},
            )
            answer = r.json()
            assert answer["active"] is True and answer["token_type"] == kind, answer
            assert answer.get("cnf", {}).get("jkt") == jkt


async def test_redis_storage_keeps_codes_and_refresh_tokens_by_digest_never_in_clear(
    redis_url: str,  # noqa: F811
) -> None:
    """Codes and refresh tokens were Redis keys named by the secret itself: anyone who could list keys (a replica,
    a dump, ``SCAN``, ``MONITOR``) held every live refresh token, ready to use. They are kept under a digest now
    (the replay ledger already was); the digest itself redeems nothing, and a refresh token stored by an earlier
    version under its old key still works once."""
    import dataclasses
    import secrets

    import orjson
    import redis.asyncio as redis

    from mcpkit.auth import RedisAuthStorage
    from mcpkit.auth.storage import CodeGrant, RefreshGrant

    prefix = f"mcpkit-test:{time.time_ns()}:"
    storage = RedisAuthStorage(redis_url, prefix=prefix)
    raw = redis.from_url(redis_url)
    try:
        code, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        await storage.save_code(code, CodeGrant("c", REDIRECT, "x" * 43, [], None, "alice", time.time() + 60))
        await storage.save_refresh(refresh, RefreshGrant("c", ["s"], None, "alice", time.time() + 60, "fam"))
        keys = [k async for k in raw.scan_iter(match=prefix + "*")]
        values = [await raw.get(k) for k in keys]
        dump = b" ".join(keys + [v for v in values if v])
        assert len(keys) == 2 and code.encode() not in dump and refresh.encode() not in dump, keys
        # what a reader of the key names learns redeems nothing
        for key in keys:
            name = key.decode().rsplit(":", 1)[1]
            assert await storage.pop_code(name) is None and await storage.pop_refresh(name) is None
        popped = await storage.pop_refresh(refresh)
        assert popped is not None and popped.subject == "alice" and await storage.pop_refresh(refresh) is None
        popped_code = await storage.pop_code(code)
        assert popped_code is not None and popped_code.subject == "alice" and await storage.pop_code(code) is None
        # a refresh token saved before the upgrade (under the token itself) is taken once
        old = secrets.token_urlsafe(32)
        record = RefreshGrant("c", ["s"], None, "bob", None, "fam")
        await raw.set(f"{prefix}refresh:{old}", orjson.dumps(dataclasses.asdict(record)))
        legacy = await storage.pop_refresh(old)
        assert legacy is not None and legacy.subject == "bob" and await storage.pop_refresh(old) is None
    finally:
        await raw.aclose()
        await storage.aclose()


async def test_a_refresh_request_refused_for_its_scope_or_resource_does_not_spend_the_refresh_token() -> None:
    """A refresh asking for more scope than granted (``invalid_scope``) or another resource (``invalid_target``)
    spent the refresh token and recorded it as used: the client's retry without that parameter then counted as a
    reused token and revoked the whole grant, access token included. A request the client got wrong now spends
    nothing; only a refresh that succeeds rotates the token."""

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(
            base, auto_approve=True, resources=["http://127.0.0.1:7/mcp"], scopes_supported=["read", "admin"]
        )

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = await _public_client(http, base)
        verifier, challenge = pkce_pair()
        code = await _code_for(http, base, cid, challenge, scope="read")
        form = {"grant_type": "authorization_code", "client_id": cid, "code_verifier": verifier, "code": code}
        tokens = (await http.post(base + "/token", data=form)).json()
        refresh = {"grant_type": "refresh_token", "client_id": cid, "refresh_token": tokens["refresh_token"]}
        wider = await http.post(base + "/token", data={**refresh, "scope": "read admin"})
        assert wider.status_code == 400 and wider.json()["error"] == "invalid_scope", wider.text
        elsewhere = await http.post(base + "/token", data={**refresh, "resource": "http://127.0.0.1:8/mcp"})
        assert elsewhere.status_code == 400 and elsewhere.json()["error"] == "invalid_target", elsewhere.text
        rotated = await http.post(base + "/token", data=refresh)
        assert rotated.status_code == 200 and rotated.json()["scope"] == "read", rotated.text
        # rotated once: the old token is spent now, and its reuse still revokes the family
        assert (await http.post(base + "/token", data=refresh)).json()["error"] == "invalid_grant"
        successor = {**refresh, "refresh_token": rotated.json()["refresh_token"]}
        assert (await http.post(base + "/token", data=successor)).json()["error"] == "invalid_grant"
