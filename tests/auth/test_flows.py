"""The OAuth flows beyond the authorization code: ``private_key_jwt`` client authentication (RFC 7523 §2.2), the
jwt-bearer grant for workload identity and enterprise-managed authorization (RFC 7523 §2.1, RFC 8693 token
exchange for an ID-JAG), and DPoP (RFC 9449) from the client through the authorization server to the resource
server, each with its refusals. Real parts: mcpkit's authorization server and protected MCP server on uvicorn at
127.0.0.1, :class:`mcpkit.auth.OAuthClient` driving them, raw httpx playing the attacker; the enterprise identity
provider is a small ASGI app of this file on uvicorn too."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import jwt
import orjson
import pytest

from mcpkit.auth import (
    AuthorizationServer,
    DPoPVerifier,
    IdJagExchange,
    InMemoryReplayCache,
    JWTVerifier,
    NonceSource,
    OAuthFlowError,
    SigningKey,
)
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.challenges import parse_challenges
from mcpkit.auth.client import InvalidClientError
from mcpkit.auth.dpop import DPoPError, access_token_hash, make_proof
from mcpkit.auth.keys import jwk_thumbprint
from support.asgi import read_body
from support.mcp_http import initialize_body
from support.oauth import REDIRECT, _forge, oauth, serve, stack, whoami
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
PING = initialize_body("2025-06-18")  # any request the MCP server answers 200 without a session
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def _token_requests(log: Any) -> list[dict[str, str]]:
    return [h for m, path, h in log.requests if m == "POST" and path.endswith("/token")]


def _challenges(r: httpx.Response) -> dict[str, dict[str, str]]:
    return dict(parse_challenges(", ".join(r.headers.get_list("www-authenticate"))))


# ------------------------------------------------------------------------------------------- keys, caches, nonces
def test_signing_keys_publish_only_their_public_half_and_the_rfc7638_thumbprint() -> None:
    rfc7638 = {
        "kty": "RSA",
        "n": (
            "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjB"
            "ZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8"
            "KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_"
            "xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
        ),
        "e": "AQAB",
        "alg": "RS256",
        "kid": "2011-04-29",
    }
    assert jwk_thumbprint(rfc7638) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"  # RFC 7638 §3.1
    for alg in ("ES256", "ES384", "EdDSA", "RS256", "PS256"):
        key = SigningKey.generate(alg, key_id="k1")
        assert not {"d", "p", "q", "dp", "dq", "qi"} & set(key.public_jwk)
        assert key.thumbprint == jwk_thumbprint(key.public_jwk)
        token = key.sign({"x": 1})
        assert jwt.get_unverified_header(token)["kid"] == "k1"
        public = jwt.PyJWK(key.jwks()["keys"][0]).key
        assert jwt.decode(token, public, algorithms=[alg]) == {"x": 1}
    with pytest.raises(ValueError):
        SigningKey.generate("HS256")
    with pytest.raises(ValueError):
        SigningKey(SigningKey.generate("ES256").private_key, algorithm="RS256")  # the key does not fit the alg


async def test_replay_cache_is_bounded_in_count_and_time_and_never_accepts_a_key_twice() -> None:
    now = [1000.0]
    cache = InMemoryReplayCache(max_entries=3, clock=lambda: now[0])
    assert await cache.first_use("a", 1000, 1300)
    assert not await cache.first_use("a", 1000, 1300)  # replay
    assert await cache.first_use("b", 1001, 1301) and await cache.first_use("c", 1002, 1302)
    # full of live entries: the oldest is forgotten and its issue time becomes a floor
    assert await cache.first_use("d", 1003, 1303)
    assert len(cache) == 3 and cache.evicted == 1 and cache.floor == 1000
    assert not await cache.first_use("a", 1000, 1300)  # forgotten, but refused: it is at the floor
    assert not await cache.first_use("e", 999, 1299)  # anything issued before the floor too
    now[0] = 1302.5  # b and c expired: dropped without raising the floor
    assert await cache.first_use("f", 1302, 1602) and len(cache) == 2 and cache.evicted == 1


def test_nonces_are_bound_to_their_secret_and_expire() -> None:
    now = [5000.0]
    source = NonceSource(b"k" * 32, lifetime=60, clock=lambda: now[0])
    nonce = source.issue()
    assert source.valid(nonce)
    assert not NonceSource(b"x" * 32, clock=lambda: now[0]).valid(nonce)  # another secret
    assert not source.valid(nonce[:-2] + ("AA" if nonce[-2:] != "AA" else "BB"))  # tampered
    assert not source.valid("short") and not source.valid(None)
    now[0] += 61
    assert not source.valid(nonce)


def test_www_authenticate_challenges_of_both_schemes_are_read() -> None:
    value = 'Bearer resource_metadata="https://a/.wk", scope="x y", DPoP algs="ES256 PS256", error="use_dpop_nonce"'
    assert parse_challenges(value) == [
        ("bearer", {"resource_metadata": "https://a/.wk", "scope": "x y"}),
        ("dpop", {"algs": "ES256 PS256", "error": "use_dpop_nonce"}),
    ]
    assert parse_challenges('DPoP error="invalid_dpop_proof", error_description="a \\"quoted\\" word"') == [
        ("dpop", {"error": "invalid_dpop_proof", "error_description": 'a "quoted" word'})
    ]


async def test_dpop_verifier_refuses_each_defect_of_a_proof() -> None:
    """RFC 9449 §4.3, one defect at a time: every proof below is refused, the good one accepted once."""
    key, other = SigningKey.generate(), SigningKey.generate()
    url, token = "https://mcp.example/mcp", "access-token-1"
    verifier = DPoPVerifier(algorithms=["ES256"])
    now = int(time.time())

    def proof(claims: dict[str, Any] | None = None, headers: dict[str, Any] | None = None, signer: Any = key) -> str:
        base = {"jti": uuid.uuid4().hex, "htm": "POST", "htu": url, "iat": now, "ath": access_token_hash(token)}
        base.update(claims or {})
        head = {"typ": "dpop+jwt", "jwk": key.public_jwk, **(headers or {})}
        return str(signer.sign({k: v for k, v in base.items() if v is not None}, headers=head))

    async def refused(value: Any, why: str, **kw: Any) -> None:
        with pytest.raises(DPoPError) as info:
            await verifier.verify(value, method="POST", url=url, access_token=token, jkt=key.thumbprint, **kw)
        assert why in info.value.description, info.value.description

    await refused(None, "no DPoP proof")
    await refused([proof(), proof()], "exactly one")
    await refused("not.a.jwt", "not a well-formed JWT")
    await refused(proof(headers={"typ": "JWT"}), "typ")
    await refused(jwt.encode({"jti": "x"}, "s" * 32, algorithm="HS256", headers={"typ": "dpop+jwt"}), "algorithm")
    await refused(proof(headers={"jwk": {**key.public_jwk, "d": "AAAA"}}), "public jwk")
    await refused(proof(signer=other), "signature")  # signed by another key than the jwk it carries
    await refused(proof({"htm": "GET"}), "htm")
    await refused(proof({"htu": "https://mcp.example/other"}), "htu")
    await refused(proof({"iat": now - 400}), "iat")
    await refused(proof({"iat": now + 400}), "iat")
    await refused(proof({"ath": access_token_hash("another-token")}), "ath")
    await refused(proof({"jti": None}), "signature or claims")  # a required claim missing
    other_bound = make_proof(other, "POST", url, access_token=token)
    await refused(other_bound, "bound to")  # a valid proof, but of a key the token is not bound to
    good = proof({"htu": "HTTPS://MCP.example:443/mcp/?q=1"})  # normalized: case, default port, query, slash
    accepted = await verifier.verify(good, method="post", url=url, access_token=token, jkt=key.thumbprint)
    assert accepted.jkt == key.thumbprint
    await refused(good, "replay")
    nonced = DPoPVerifier(nonce=True)
    with pytest.raises(DPoPError) as info:
        await nonced.verify(proof(), method="POST", url=url, access_token=token, jkt=key.thumbprint)
    assert info.value.error == "use_dpop_nonce" and nonced.nonces is not None and nonced.nonces.valid(info.value.nonce)
    ok = await nonced.verify(proof({"nonce": info.value.nonce}), method="POST", url=url, access_token=token)
    assert ok.jkt == key.thumbprint


async def _replay_rows(cache: Any) -> list[float]:
    """How long each key a shared replay cache keeps has left to live (seconds)."""
    from mcpkit.auth import RedisReplayCache

    if isinstance(cache, RedisReplayCache):
        stored = [k async for k in cache.redis.scan_iter(match=cache.prefix + "*")]
        return [await cache.redis.pttl(k) / 1000 for k in stored]
    async with cache.conn.acquire("test") as db:
        rows = await db.fetch(
            f"SELECT extract(epoch FROM expires_at - clock_timestamp()) AS left FROM {cache.table} WHERE kind = 'jti'"
        )
    return [float(row["left"]) for row in rows]


@pytest.mark.parametrize("backend", ["redis", "postgres"])
async def test_workers_sharing_a_replay_cache_see_each_others_proofs(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """A proof accepted by one worker is a replay to every other worker of the same resource server, whether they
    share a ``RedisReplayCache`` or a ``PostgresReplayCache``."""
    from mcpkit.auth import PostgresReplayCache, RedisReplayCache

    key, url, token = SigningKey.generate(), "https://mcp.example/mcp", "tok"
    shared_url: str = request.getfixturevalue(f"{backend}_url")
    caches: list[Any]
    if backend == "redis":
        caches = [RedisReplayCache(shared_url, prefix=f"mcpkit:test:{uuid.uuid4().hex}:") for _ in range(2)]
        caches[1].prefix = caches[0].prefix  # two connections, one cache
    else:
        prefix = f"t{uuid.uuid4().hex[:12]}_"
        caches = [PostgresReplayCache(shared_url, prefix=prefix) for _ in range(2)]  # two pools, one table
    workers = [DPoPVerifier(replay_cache=c) for c in caches]
    proof = make_proof(key, "POST", url, access_token=token)
    assert (await workers[0].verify(proof, method="POST", url=url, access_token=token)).jkt == key.thumbprint
    with pytest.raises(DPoPError, match="replay"):
        await workers[1].verify(proof, method="POST", url=url, access_token=token)
    fresh = make_proof(key, "POST", url, access_token=token)
    assert (await workers[1].verify(fresh, method="POST", url=url, access_token=token)).jkt == key.thumbprint
    left = await _replay_rows(caches[0])
    assert len(left) == 2
    assert all(0 < seconds <= 300 for seconds in left)  # forgotten when the proof could no longer be accepted anyway
    for cache in caches:
        await cache.aclose()


# ------------------------------------------------------------------------------------------- DPoP end to end
@pytest.mark.req("M036", "M038")
async def test_dpop_bound_tokens_from_the_authorization_server_to_the_mcp_server() -> None:
    """The AS advertises DPoP, so the client binds its tokens to a key of its own: the token request carries a
    proof, the token names the key (cnf.jkt, token_type DPoP) and every MCP request presents it with the DPoP
    scheme and a fresh proof. The same token as a bearer token is refused."""
    async with stack(as_options={"dpop": True}, rs_options={"dpop": True}) as s:
        client, _ = oauth(s["mcp_url"])
        assert (await whoami(s["mcp_url"], client)) == "test-user|"
        meta = orjson.loads(
            (await httpx.AsyncClient().get(s["as_url"] + "/.well-known/oauth-authorization-server")).content
        )
        assert "ES256" in meta["dpop_signing_alg_values_supported"]
        token_requests = _token_requests(s["as_log"])
        assert token_requests and all("dpop" in h for h in token_requests)
        assert client.issuer is not None
        tokens = await client.storage.get_tokens(client.issuer, client.resource)
        assert tokens is not None and tokens.token_type == "DPoP"
        claims = jwt.decode(tokens.access_token, options={"verify_signature": False})
        assert claims["cnf"]["jkt"] == tokens.dpop_jkt == client._dpop_key.thumbprint  # type: ignore[union-attr]
        mcp = [h for m, path, h in s["rs_log"].requests if path == "/mcp" and "authorization" in h]
        assert mcp and all(h["authorization"].startswith("DPoP ") and "dpop" in h for h in mcp)
        assert len({h["dpop"] for h in mcp}) == len(mcp)  # a fresh proof each time
        async with httpx.AsyncClient() as http:
            r = await http.post(
                s["mcp_url"], json=PING, headers={**MCP_HEADERS, "authorization": f"Bearer {tokens.access_token}"}
            )
            assert r.status_code == 401 and _challenges(r)["bearer"]["error"] == "invalid_token"
            assert "DPoP scheme" in r.json()["error_description"]
        await client.aclose()


async def test_an_authorization_server_offering_dpop_alone_does_not_bind_tokens_for_a_bearer_only_server() -> None:
    """``dpop="auto"`` follows the MCP server: a bearer-only one gets bearer tokens even when the AS offers DPoP;
    ``dpop=True`` binds anyway (and the bearer-only MCP server refuses the DPoP scheme)."""
    async with stack(as_options={"dpop": True}) as s:
        client, _ = oauth(s["mcp_url"])
        assert (await whoami(s["mcp_url"], client)) == "test-user|"
        assert all("dpop" not in h for h in _token_requests(s["as_log"]))
        await client.aclose()
        forced, _ = oauth(s["mcp_url"], dpop=True)
        with pytest.raises(Exception):  # noqa: B017 - the transport's own error for the 401
            await whoami(s["mcp_url"], forced)
        assert "dpop" in _token_requests(s["as_log"])[-1]
        await forced.aclose()


async def test_dpop_nonces_of_the_authorization_server_and_the_mcp_server_are_honoured() -> None:
    """Both servers require their nonce (RFC 9449 §8, §9): the client retries the token request and the MCP
    request once each with the nonce it was given, with a fresh proof."""
    async with stack(as_options={"dpop": DPoPVerifier(nonce=True)}, rs_options={"dpop": DPoPVerifier(nonce=True)}) as s:
        client, _ = oauth(s["mcp_url"])
        assert (await whoami(s["mcp_url"], client)) == "test-user|"
        first, second = _token_requests(s["as_log"])[:2]
        assert "nonce" not in jwt.decode(first["dpop"], options={"verify_signature": False})
        assert "nonce" in jwt.decode(second["dpop"], options={"verify_signature": False})
        assert any("asked for a DPoP nonce" in line for line in client.log)
        mcp = [h for m, path, h in s["rs_log"].requests if path == "/mcp" and "dpop" in h]
        nonces = [jwt.decode(h["dpop"], options={"verify_signature": False}).get("nonce") for h in mcp]
        assert nonces[0] is None and all(nonces[1:])  # challenged once, then every proof carries the nonce
        await client.aclose()


async def test_a_resource_server_that_keeps_refusing_nonces_does_not_loop_the_client() -> None:
    class Never(NonceSource):
        def valid(self, nonce: Any) -> bool:
            return False

    async with stack(as_options={"dpop": True}, rs_options={"dpop": DPoPVerifier(nonce=Never())}) as s:
        client, _ = oauth(s["mcp_url"])
        with pytest.raises(Exception):  # noqa: B017 - the transport's own error for a 401 it cannot get past
            await whoami(s["mcp_url"], client)
        posts = [p for m, p, _ in s["rs_log"].requests if m == "POST" and p == "/mcp"]
        assert 3 <= len(posts) <= 6, posts  # per request: without a token, with it, once with the nonce
        assert len(_token_requests(s["as_log"])) == 1  # and never a new authorization for a nonce refusal
        await client.aclose()


@pytest.mark.req("M038")
async def test_the_resource_server_refuses_dpop_proofs_that_do_not_bind_this_request_to_this_token() -> None:
    async with stack(rs_options={"dpop": True}) as s, httpx.AsyncClient() as http:
        key, other = SigningKey.generate(), SigningKey.generate()
        token = _forge(s["as"], aud=s["mcp_url"], cnf={"jkt": key.thumbprint})
        bearer_token = _forge(s["as"], aud=s["mcp_url"])

        async def post(token_: str, proof: str | None, scheme: str = "DPoP") -> httpx.Response:
            headers = {**MCP_HEADERS, "authorization": f"{scheme} {token_}"}
            if proof is not None:
                headers["dpop"] = proof
            return await http.post(s["mcp_url"], json=PING, headers=headers)

        url = s["mcp_url"]
        cases = {
            "no proof": (token, None),
            "another key": (token, make_proof(other, "POST", url, access_token=token)),
            "another request uri": (token, make_proof(key, "POST", s["rs_base"] + "/other", access_token=token)),
            "another method": (token, make_proof(key, "GET", url, access_token=token)),
            "another token": (token, make_proof(key, "POST", url, access_token=bearer_token)),
            "stale": (token, make_proof(key, "POST", url, access_token=token, now=time.time() - 600)),
            "unbound token": (bearer_token, make_proof(key, "POST", url, access_token=bearer_token)),
        }
        for name, (tok, proof) in cases.items():
            r = await post(tok, proof)
            assert r.status_code == 401, name
            assert r.json()["error"] in ("invalid_dpop_proof", "invalid_token"), name
            challenge = _challenges(r)["dpop"]
            assert challenge["algs"] and challenge["error"] == r.json()["error"], name
        assert (await post(token, make_proof(key, "POST", url, access_token=token))).status_code == 200
        # a DPoP-bound token presented as a bearer token (RFC 9449 §7.2), and an unbound bearer token still works
        assert (await post(token, None, "Bearer")).status_code == 401
        assert (await post(bearer_token, None, "Bearer")).status_code == 200
        # the PRM advertises the algorithms; an unauthenticated request learns both schemes
        prm = (await http.get(s["rs_base"] + "/.well-known/oauth-protected-resource/mcp")).json()
        assert "ES256" in prm["dpop_signing_alg_values_supported"]
        bare = await http.post(s["mcp_url"], json=PING, headers=MCP_HEADERS)
        assert set(_challenges(bare)) == {"bearer", "dpop"}


async def test_dpop_proofs_with_malformed_claims_are_refused_not_a_500() -> None:
    """A proof signed by any key the sender made up, whose ``ath`` holds a non-ASCII character or whose ``htu`` is
    no URL (``http://[``), is refused: 401 ``invalid_dpop_proof`` at the MCP server, 400 at the token endpoint. The
    comparison of a non-ASCII ``ath`` raised TypeError and the unparsable ``htu`` ValueError: a 500 from both
    servers, the token endpoint's to anyone without a token."""
    async with stack(as_options={"dpop": True}, rs_options={"dpop": True}) as s, httpx.AsyncClient() as http:
        key = SigningKey.generate()
        token = _forge(s["as"], aud=s["mcp_url"], cnf={"jkt": key.thumbprint})

        def proof(htu: str, **claims: Any) -> str:
            base = {"jti": uuid.uuid4().hex, "htm": "POST", "htu": htu, "iat": int(time.time()), **claims}
            return str(key.sign(base, headers={"typ": "dpop+jwt", "jwk": key.public_jwk}))

        for name, value in (
            ("non-ASCII ath", proof(s["mcp_url"], ath="é")),
            ("htu no URL", proof("http://[", ath=access_token_hash(token))),
        ):
            headers = {**MCP_HEADERS, "authorization": f"DPoP {token}", "dpop": value}
            r = await http.post(s["mcp_url"], json=PING, headers=headers)
            assert (r.status_code, r.json()["error"]) == (401, "invalid_dpop_proof"), (name, r.status_code, r.text)
        form = {"grant_type": "client_credentials", "client_id": "nobody"}
        r = await http.post(s["as_url"] + "/token", data=form, headers={"dpop": proof("http://[")})
        assert r.status_code in (400, 401) and r.status_code != 500, r.text
        cc = await s["as"].register_client(
            token_endpoint_auth_method="client_secret_post", grant_types=["client_credentials"]
        )
        form = {"grant_type": "client_credentials", "client_id": cc.client_id, "client_secret": cc.client_secret}
        r = await http.post(s["as_url"] + "/token", data=form, headers={"dpop": proof("http://[")})
        assert (r.status_code, r.json()["error"]) == (400, "invalid_dpop_proof"), r.text


async def test_a_dpop_bound_token_opens_a_websocket_with_a_proof_of_the_upgrade_request() -> None:
    """RFC 9449 §4.3, §7.1: a WebSocket upgrade is an HTTP GET of the resource, so the client proves it like any
    request (``htm`` GET, ``htu`` the http(s) URL of ``/ws``, ``ath`` of the token), honours the MCP server's DPoP
    nonce on the upgrade, and a server taking DPoP-bound tokens only serves it; a proof made for another request
    does not open it."""
    from mcpkit.client.client import Client

    rs = {"dpop": DPoPVerifier(nonce=True), "dpop_required": True}
    async with stack(as_options={"dpop": True}, rs_options=rs) as s:
        ws_url = s["rs_base"].replace("http://", "ws://") + "/ws"
        key = SigningKey.generate()
        client, _ = oauth(s["mcp_url"], dpop=key)
        async with Client(ws_url, auth=client) as c:
            result = await c.call_tool("whoami", {})
            assert result.raw.content[0].text == "test-user|"  # type: ignore[union-attr]
        upgrades = [h for m, path, h in s["rs_log"].requests if m == "WEBSOCKET" and path == "/ws"]
        assert upgrades and all(h["authorization"].startswith("DPoP ") for h in upgrades if "authorization" in h)
        last = upgrades[-1]
        claims = jwt.decode(last["dpop"], options={"verify_signature": False})
        token = last["authorization"].partition(" ")[2]
        assert (claims["htm"], claims["htu"]) == ("GET", s["rs_base"] + "/ws")
        assert claims["ath"] == access_token_hash(token) and claims.get("nonce")
        # the same token with a proof of a POST to /mcp (a proof of another request) opens nothing
        import websockets

        proof = make_proof(key, "POST", s["mcp_url"], access_token=token, nonce=claims["nonce"])
        other = {"authorization": f"DPoP {token}", "dpop": proof}
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws_url, additional_headers=other):
                pass
        assert refused.value.response.status_code == 401
        await client.aclose()


@pytest.mark.req("M038")
async def test_a_resource_server_requiring_dpop_refuses_bearer_tokens() -> None:
    async with stack(rs_options={"dpop_required": True}) as s, httpx.AsyncClient() as http:
        token = _forge(s["as"], aud=s["mcp_url"])
        r = await http.post(s["mcp_url"], json=PING, headers={**MCP_HEADERS, "authorization": f"Bearer {token}"})
        assert r.status_code == 401 and set(_challenges(r)) == {"dpop"}
        prm = (await http.get(s["rs_base"] + "/.well-known/oauth-protected-resource/mcp")).json()
        assert prm["dpop_bound_access_tokens_required"] is True


async def test_a_public_clients_refresh_token_is_bound_to_its_dpop_key() -> None:
    """RFC 9449 §5: the refresh token of a public client works only with a proof of the same key."""
    async with stack(as_options={"dpop": True}) as s, httpx.AsyncClient() as http:
        base = s["as_url"]
        reg = (
            await http.post(
                base + "/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
            )
        ).json()
        verifier, challenge = pkce_pair()
        q = {
            "response_type": "code",
            "client_id": reg["client_id"],
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        loc = (await http.get(base + "/authorize", params=q)).headers["location"]
        code = dict(parse_qsl(urlsplit(loc).query))["code"]
        key, other = SigningKey.generate(), SigningKey.generate()
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "code_verifier": verifier,
            "client_id": reg["client_id"],
        }
        tokens = (
            await http.post(base + "/token", data=form, headers={"dpop": make_proof(key, "POST", base + "/token")})
        ).json()
        assert tokens["token_type"] == "DPoP"

        async def refresh(proof_key: SigningKey | None) -> httpx.Response:
            data = {
                "grant_type": "refresh_token",
                "refresh_token": tokens["refresh_token"],
                "client_id": reg["client_id"],
            }
            headers = {"dpop": make_proof(proof_key, "POST", base + "/token")} if proof_key else {}
            return await http.post(base + "/token", data=data, headers=headers)

        for wrong in (other, None):
            r = await refresh(wrong)
            assert r.status_code == 400 and r.json()["error"] == "invalid_grant"
            assert "another DPoP key" in r.json()["error_description"]
        # those attempts did not spend it (nor revoke its family): the key's holder refreshes, bound again
        fresh = await refresh(key)
        assert fresh.status_code == 200 and fresh.json()["token_type"] == "DPoP"
        claims = jwt.decode(fresh.json()["access_token"], options={"verify_signature": False})
        assert claims["cnf"]["jkt"] == key.thumbprint


# ------------------------------------------------------------------------------------------- private_key_jwt
@pytest.mark.req("M031")
async def test_private_key_jwt_client_credentials_end_to_end() -> None:
    key = SigningKey.generate("ES256", key_id="k-2026")
    async with stack() as s:
        authz: AuthorizationServer = s["as"]
        record = await authz.register_client(
            token_endpoint_auth_method="private_key_jwt", jwks=key.jwks(), grant_types=["client_credentials"]
        )
        assert record.client_secret is None
        from mcpkit.auth import OAuthClient

        client = OAuthClient(
            s["mcp_url"],
            grant_type="client_credentials",
            client_id=record.client_id,
            private_key=key,
            issuer=s["as_url"],
        )
        assert (await whoami(s["mcp_url"], client)).startswith(record.client_id + "|")
        (request,) = _token_requests(s["as_log"])
        assert "authorization" not in request  # no secret anywhere: the key signs
        await client.aclose()


async def test_private_key_jwt_refusals_wrong_key_audience_expiry_replay_and_lifetime() -> None:
    key, wrong = SigningKey.generate(), SigningKey.generate()
    async with stack() as s, httpx.AsyncClient() as http:
        authz: AuthorizationServer = s["as"]
        record = await authz.register_client(
            token_endpoint_auth_method="private_key_jwt", jwks=key.jwks(), grant_types=["client_credentials"]
        )
        cid, now = record.client_id, int(time.time())

        def assertion(signer: SigningKey = key, **claims: Any) -> str:
            base = {"iss": cid, "sub": cid, "aud": authz.issuer, "iat": now, "exp": now + 60, "jti": uuid.uuid4().hex}
            base.update(claims)
            return signer.sign({k: v for k, v in base.items() if v is not None})

        async def token(value: str) -> httpx.Response:
            form = {
                "grant_type": "client_credentials",
                "client_assertion_type": CLIENT_ASSERTION,
                "client_assertion": value,
            }
            return await http.post(s["as_url"] + "/token", data=form)

        refused = {
            "wrong key": assertion(wrong),
            "wrong audience": assertion(aud="https://elsewhere.example"),
            "expired": assertion(iat=now - 600, exp=now - 300),
            "iss is not sub": assertion(iss="someone-else"),
            "no jti": assertion(jti=None),
            "lives too long": assertion(exp=now + 3600),
        }
        for name, value in refused.items():
            r = await token(value)
            assert r.status_code == 401 and r.json()["error"] == "invalid_client", name
        good = assertion(aud=authz.url("/token"))  # RFC 7523: the token endpoint URL is an accepted audience too
        assert (await token(good)).status_code == 200
        replay = await token(good)
        assert replay.status_code == 401 and "replay" in replay.json()["error_description"]
        # the OAuth client surfaces the refusal of a pre-registered key (nothing to re-register)
        from mcpkit.auth import OAuthClient

        client = OAuthClient(
            s["mcp_url"], grant_type="client_credentials", client_id=cid, private_key=wrong, issuer=s["as_url"]
        )
        with pytest.raises(Exception) as info:
            await whoami(s["mcp_url"], client)
        assert isinstance(info.value, InvalidClientError) or "invalid_client" in repr(info.value)
        await client.aclose()


async def test_a_client_registers_its_public_key_and_authenticates_with_private_key_jwt() -> None:
    key = SigningKey.generate("EdDSA")
    async with stack() as s, httpx.AsyncClient() as http:
        client, _ = oauth(s["mcp_url"], private_key=key)
        assert (await whoami(s["mcp_url"], client)) == "test-user|"
        registration = next(h for m, p, h in s["as_log"].requests if p == "/register")
        assert registration is not None
        (token_request,) = _token_requests(s["as_log"])
        assert "authorization" not in token_request
        await client.aclose()
        # registration refuses what it cannot use safely: a key URL to fetch, a private key, a secret-less jwks
        base = s["as_url"] + "/register"
        for bad in (
            {"token_endpoint_auth_method": "private_key_jwt", "jwks_uri": "https://attacker.example/jwks"},
            {"token_endpoint_auth_method": "private_key_jwt", "jwks": {"keys": [{**key.public_jwk, "d": "AAAA"}]}},
            {"token_endpoint_auth_method": "private_key_jwt"},
            {"token_endpoint_auth_method": "client_secret_basic", "jwks": key.jwks()},
        ):
            r = await http.post(base, json={"redirect_uris": [REDIRECT], **bad})
            assert r.status_code == 400 and r.json()["error"] == "invalid_client_metadata", bad


# ------------------------------------------------------------------------------------------- jwt-bearer grants
WORKLOAD_ISSUER = "https://workload-identity.example"


def _workload_stack(workload_key: SigningKey, **as_options: Any) -> Any:
    trusted = JWTVerifier(issuer=WORKLOAD_ISSUER, audience=None, keys=[workload_key.jwks()["keys"][0]])
    return stack(as_options={"assertion_issuers": [trusted], **as_options})


def _workload_jwt(key: SigningKey, audience: str, **claims: Any) -> str:
    now = int(time.time())
    base = {"iss": WORKLOAD_ISSUER, "sub": "spiffe://example.org/agent", "aud": audience, "iat": now}
    base.update({"exp": now + 300, "jti": uuid.uuid4().hex, **claims})
    return key.sign({k: v for k, v in base.items() if v is not None})


@pytest.mark.req("M031")
async def test_workload_identity_jwt_bearer_grant_end_to_end() -> None:
    wkey = SigningKey.generate("ES256")
    async with _workload_stack(wkey) as s:
        from mcpkit.auth import OAuthClient

        client = OAuthClient(s["mcp_url"], grant_type="jwt_bearer", assertion=_workload_jwt(wkey, s["as_url"]))
        assert (await whoami(s["mcp_url"], client)) == "spiffe://example.org/agent|"
        (request,) = _token_requests(s["as_log"])
        assert "authorization" not in request  # no client identity at all
        await client.aclose()
        meta = (await httpx.AsyncClient().get(s["as_url"] + "/.well-known/oauth-authorization-server")).json()
        assert JWT_BEARER in meta["grant_types_supported"]


async def test_workload_assertions_refused_for_audience_expiry_issuer_key_and_replay_without_retry() -> None:
    """Each refusal surfaces as the AS's invalid_grant; the client never sends a refused assertion again, nor
    falls back to another grant."""
    wkey, stranger = SigningKey.generate(), SigningKey.generate()
    async with _workload_stack(wkey) as s, httpx.AsyncClient() as http:
        from mcpkit.auth import OAuthClient

        refused = {
            "wrong audience": _workload_jwt(wkey, "https://wrong.example"),
            "expired": _workload_jwt(wkey, s["as_url"], iat=int(time.time()) - 900, exp=int(time.time()) - 600),
            "untrusted issuer": _workload_jwt(wkey, s["as_url"], iss="https://rogue.example"),
            "wrong key": _workload_jwt(stranger, s["as_url"]),
        }
        for name, assertion in refused.items():
            before = len(_token_requests(s["as_log"]))
            client = OAuthClient(s["mcp_url"], grant_type="jwt_bearer", assertion=assertion)
            for _ in range(2):  # a second call must not send the refused assertion again
                with pytest.raises(Exception) as info:
                    await whoami(s["mcp_url"], client)
                assert "invalid_grant" in str(info.value) or "refused this assertion" in str(info.value), name
            assert len(_token_requests(s["as_log"])) == before + 1, name  # one request, no retry, no fallback
            await client.aclose()
        good = _workload_jwt(wkey, s["as_url"])
        form = {"grant_type": JWT_BEARER, "assertion": good, "resource": s["mcp_url"]}
        assert (await http.post(s["as_url"] + "/token", data=form)).status_code == 200
        replay = await http.post(s["as_url"] + "/token", data=form)
        assert replay.status_code == 400 and "replay" in replay.json()["error_description"]


def _idp(key: SigningKey, client_id_for_jag: str) -> Callable[[str], Any]:
    """An enterprise IdP: token exchange (RFC 8693) of its ID token for an ID-JAG (SEP-990)."""

    def make(base: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            body = await read_body(receive)
            form = dict(parse_qsl(body.decode()))
            status, answer = 400, {"error": "invalid_request"}
            try:
                id_token = jwt.decode(
                    form["subject_token"],
                    jwt.PyJWK(key.public_jwk, "ES256").key,
                    algorithms=["ES256"],
                    audience="idp-client",
                )
                ok = (
                    form["grant_type"] == "urn:ietf:params:oauth:grant-type:token-exchange"
                    and form["requested_token_type"] == "urn:ietf:params:oauth:token-type:id-jag"
                    and form["subject_token_type"] == "urn:ietf:params:oauth:token-type:id_token"
                )
            except (KeyError, jwt.PyJWTError):
                ok = False
            if ok:
                now = int(time.time())
                jag = key.sign(
                    {
                        "iss": base,
                        "sub": id_token["sub"],
                        "aud": form["audience"],
                        "client_id": client_id_for_jag,
                        "resource": form.get("resource"),
                        "scope": "mcp:read",
                        "iat": now,
                        "exp": now + 300,
                        "jti": uuid.uuid4().hex,
                    },
                    headers={"typ": "oauth-id-jag+jwt"},
                )
                status = 200
                answer = {
                    "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "access_token": jag,
                    "token_type": "N_A",
                }
            data = orjson.dumps(answer)
            await send(
                {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": data})

        return app

    return make


@pytest.mark.req("M031")
async def test_enterprise_managed_authorization_id_jag_end_to_end_and_for_another_client() -> None:
    idp_key = SigningKey.generate("ES256")
    for jag_client, works in (("mcp-client", True), ("someone-else", False)):
        async with serve(_idp(idp_key, jag_client)) as (idp_url, _):
            trusted = JWTVerifier(issuer=idp_url, audience=None, keys=[idp_key.jwks()["keys"][0]])
            async with stack(
                scopes_supported=["mcp:read", "mcp:admin"], as_options={"assertion_issuers": [trusted]}
            ) as s:
                authz: AuthorizationServer = s["as"]
                await authz.register_client(
                    client_id="mcp-client",
                    client_secret="s3cret",
                    token_endpoint_auth_method="client_secret_basic",
                    grant_types=[JWT_BEARER],
                )
                now = int(time.time())
                id_token = idp_key.sign(
                    {"iss": idp_url, "sub": "alice@example.com", "aud": "idp-client", "iat": now, "exp": now + 600}
                )
                from mcpkit.auth import OAuthClient

                client = OAuthClient(
                    s["mcp_url"],
                    grant_type="jwt_bearer",
                    client_id="mcp-client",
                    client_secret="s3cret",
                    issuer=s["as_url"],
                    assertion=IdJagExchange(idp_url + "/token", id_token, client_id="idp-client"),
                )
                if works:
                    # the ID-JAG's scope caps the grant: mcp:read only, though the PRM lists mcp:admin too
                    assert (await whoami(s["mcp_url"], client)) == "alice@example.com|mcp:read"
                else:
                    with pytest.raises(Exception) as info:
                        await whoami(s["mcp_url"], client)
                    assert "invalid_grant" in str(info.value)
                await client.aclose()


async def test_the_identity_providers_endpoint_follows_the_clients_fetch_rules() -> None:
    async with stack(
        as_options={
            "assertion_issuers": [
                JWTVerifier(issuer="https://idp.example", audience=None, keys=[SigningKey.generate().jwks()["keys"][0]])
            ]
        }
    ) as s:
        from mcpkit.auth import OAuthClient

        for endpoint, why in (("http://idp.example/token", "must be https"), ("https://10.1.2.3/token", "private")):
            client = OAuthClient(s["mcp_url"], grant_type="jwt_bearer", assertion=IdJagExchange(endpoint, "id-token"))
            with pytest.raises(Exception) as info:
                await whoami(s["mcp_url"], client)
            assert why in str(info.value), str(info.value)
            await client.aclose()


def test_oauth_client_options_are_checked() -> None:
    from mcpkit.auth import OAuthClient

    with pytest.raises(ValueError, match="assertion"):
        OAuthClient("https://m.example/mcp", grant_type="jwt_bearer")
    with pytest.raises(ValueError, match="private_key"):
        OAuthClient("https://m.example/mcp", grant_type="client_credentials", client_id="c")
    with pytest.raises(ValueError, match="not both"):
        OAuthClient(
            "https://m.example/mcp",
            grant_type="client_credentials",
            client_id="c",
            client_secret="s",
            private_key=SigningKey.generate(),
        )
    with pytest.raises(ValueError, match="dpop"):
        OAuthClient("https://m.example/mcp", client_metadata={"redirect_uris": [REDIRECT]}, dpop="sometimes")  # type: ignore[arg-type]
    assert OAuthFlowError("x").oauth_error is None


# ------------------------------------------------------------------------------------------- client metadata documents
def _documents(docs: dict[str, Any], hits: list[str]) -> Callable[[str], Any]:
    """A web server holding client metadata documents: ``docs[path]`` is a dict (served as JSON, ``{base}`` in
    strings replaced by its URL), or (status, headers, bytes)."""

    def make(base: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            hits.append(scope["path"])
            doc = docs.get(scope["path"])
            status, headers, body = 404, [], b"{}"
            if isinstance(doc, tuple):
                status, headers, body = doc
            elif doc is not None:
                status, body = 200, orjson.dumps(doc).replace(b"{base}", base.encode())
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        return app

    return make


@pytest.mark.req("M031")
async def test_a_client_named_by_its_metadata_document_url_authorizes_without_registering() -> None:
    """2025-11-25: the AS advertises Client ID Metadata Documents; the OAuth client uses its document URL as
    client_id, the AS fetches the document (once, then from its cache) and honours its redirect URIs."""
    hits: list[str] = []
    doc = {"client_id": "{base}/client.json", "client_name": "doc client", "redirect_uris": [REDIRECT]}
    async with serve(_documents({"/client.json": doc}, hits)) as (docs_url, _), stack() as s:
        meta = (await httpx.AsyncClient().get(s["as_url"] + "/.well-known/oauth-authorization-server")).json()
        assert meta["client_id_metadata_document_supported"] is True
        for _ in range(2):
            client, _ = oauth(s["mcp_url"], client_metadata_url=docs_url + "/client.json")
            assert (await whoami(s["mcp_url"], client)) == "test-user|"
            await client.aclose()
        assert not any(p == "/register" for _, p, _ in s["as_log"].requests)  # no dynamic registration
        assert hits == ["/client.json"]  # fetched once: the second authorization used the cache


async def test_a_client_metadata_document_is_fetched_from_the_address_checked_not_a_rebound_one() -> None:
    """The authorization server fetches the document a stranger's ``client_id`` names, under the OAuth client's
    rule, checked where the connection is made: the name is resolved once for the connection and every address
    checked, so a name that passed the check and resolves to ``169.254.169.254`` when connecting (DNS rebinding) is
    never connected to. (The resolver is the one stand-in: this machine runs no DNS server to re-point a name.)"""
    hits: list[str] = []
    doc = {"client_id": "{base}/client.json", "client_name": "rebound", "redirect_uris": [REDIRECT]}
    docs = {"/client.json": doc, "/again.json": {**doc, "client_id": "{base}/again.json"}}
    answers = ["169.254.169.254"]
    lookups: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return list(answers)

    async with serve(_documents(docs, hits)) as (docs_url, _), stack() as s, httpx.AsyncClient() as http:
        s["as"]._resolve = resolver
        port = urlsplit(docs_url).port
        _, challenge = pkce_pair()

        async def authorize(client_id: str) -> httpx.Response:
            q = {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": REDIRECT,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
            return await http.get(s["as_url"] + "/authorize", params=q)

        # localhost passes the check (loopback, as the authorization server is); the connection's lookup answers
        # the link-local address: refused, the document server never reached
        r = await authorize(f"http://localhost:{port}/client.json")
        assert r.status_code == 401 and r.json()["error"] == "invalid_client", r.text
        assert hits == [] and lookups == ["localhost"]
        assert "169.254" not in r.text  # what the name resolves to is not told to the stranger
        # the same name answering loopback: the document is fetched from that checked address
        answers[:] = ["127.0.0.1"]
        r = await authorize(f"http://localhost:{port}/again.json")
        assert hits == ["/again.json"] and lookups == ["localhost", "localhost"], (hits, lookups, r.text)


async def test_client_metadata_documents_that_cannot_be_trusted_are_refused() -> None:
    hits: list[str] = []
    good = {"client_id": "{base}/good.json", "client_name": "good", "redirect_uris": [REDIRECT]}
    docs: dict[str, Any] = {
        "/good.json": good,
        "/other-id.json": {"client_id": "https://elsewhere.example/c.json", "redirect_uris": [REDIRECT]},
        "/secret.json": {"client_id": "{base}/secret.json", "redirect_uris": [REDIRECT], "client_secret": "x"},
        "/jwks-uri.json": {
            "client_id": "{base}/jwks-uri.json",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "private_key_jwt",
            "jwks_uri": "https://attacker.example/jwks",
        },
        "/bad-redirect.json": {"client_id": "{base}/bad-redirect.json", "redirect_uris": ["http://evil.example/cb"]},
        "/huge.json": (200, [], b'{"client_id": "' + b"x" * 10_000 + b'"}'),
        # grant_types holding a list: was a TypeError (unhashable) and a 500 at /authorize
        "/bad-grants.json": {"client_id": "{base}/bad-grants.json", "redirect_uris": [REDIRECT], "grant_types": [[]]},
        "/moved.json": (302, [(b"location", b"/good.json")], b""),
        # MCP 2025-11-25: the document must hold client_id, client_name and redirect_uris (what the consent shows)
        "/no-name.json": {"client_id": "{base}/no-name.json", "redirect_uris": [REDIRECT]},
        "/empty-name.json": {"client_id": "{base}/empty-name.json", "client_name": " ", "redirect_uris": [REDIRECT]},
    }
    async with serve(_documents(docs, hits)) as (docs_url, _), stack() as s, httpx.AsyncClient() as http:
        _, challenge = pkce_pair()

        async def authorize(client_id: str, redirect: str = REDIRECT) -> httpx.Response:
            q = {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": redirect,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
            return await http.get(s["as_url"] + "/authorize", params=q)

        assert (await authorize(docs_url + "/good.json")).status_code == 302
        # a redirect URI the document does not list gets no redirect (no open redirector)
        assert (await authorize(docs_url + "/good.json", "http://127.0.0.1:9/elsewhere")).status_code == 400
        for path, why in (
            ("/other-id.json", "not its own URL"),
            ("/secret.json", "no secret"),
            ("/jwks-uri.json", "jwks_uri"),
            ("/bad-redirect.json", "redirect_uris"),
            ("/huge.json", "larger than"),
            ("/bad-grants.json", "grant_types"),
            ("/moved.json", "redirects are not followed"),
            ("/missing.json", "HTTP 404"),
            ("/no-name.json", "client_name"),
            ("/empty-name.json", "client_name"),
        ):
            r = await authorize(docs_url + path)
            assert r.status_code == 401 and r.json()["error"] == "invalid_client", path
            assert why in r.json()["error_description"], (path, r.json())
        before = len(hits)
        again = await authorize(docs_url + "/secret.json")
        assert again.status_code == 401 and len(hits) == before  # a failure is cached too: no fetch per request
        # an address class the AS is not on is never fetched (SSRF), and a URL without a path is no document
        for client_id in ("https://10.20.30.40/client.json", "https://169.254.169.254/latest/meta-data/x"):
            r = await authorize(client_id)
            assert r.status_code == 401 and "address" in r.json()["error_description"], client_id
        assert (await authorize("https://example.com")).json()["error_description"] == "unknown client_id"


async def test_a_client_metadata_document_trickled_a_byte_at_a_time_is_given_up_at_the_deadline() -> None:
    """The document a stranger's ``client_id`` names is fetched within one deadline for the whole exchange. The
    fetch had only httpx's per-read timeout: a server sending a byte every second (never 5 s apart) held the
    /authorize request, and a connection and a task of the authorization server, for as long as it liked (5 KiB of
    spaces: well over an hour)."""
    import asyncio

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n")
            for _ in range(60):  # bounded: a minute at most
                writer.write(b" ")
                await writer.drain()
                await asyncio.sleep(0.25)
        writer.close()

    server = await asyncio.start_server(trickle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _, challenge = pkce_pair()
    query = {
        "response_type": "code",
        "client_id": f"http://127.0.0.1:{port}/client.json",
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    async with server, stack(as_options={"client_document_timeout": 1.0}) as s, httpx.AsyncClient() as http:
        started = time.monotonic()
        r = await http.get(s["as_url"] + "/authorize", params=query, timeout=20)
        elapsed = time.monotonic() - started
        assert r.status_code == 401 and r.json()["error"] == "invalid_client", r.text
        assert "1 s" in r.json()["error_description"] and "client_document_timeout" in r.json()["error_description"]
        assert elapsed < 3, elapsed
