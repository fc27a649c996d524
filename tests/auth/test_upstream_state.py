"""An OAuth proxy's state (``mcpkit.auth.upstream_state``) in the authorization server's storage: two replicas of the
proxy (two uvicorn servers, one issuer, one real ``redis-server``) share pending logins and upstream tokens, which
Redis holds sealed only."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from redis.asyncio import Redis

from mcpkit.auth import AuthorizationServer, JWTVerifier, RedisAuthStorage, protect
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.upstream import UpstreamProvider
from mcpkit.auth.upstream_login import UpstreamLogin
from mcpkit.auth.upstream_state import Sealer
from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import create_app
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.oauth import serve
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.upstream_idp import (
    PROXY_CLIENT_ID,
    PROXY_CLIENT_SECRET,
    REDIRECT,
    Browser,
    Recorded,
    identity_provider,
    proxied_server,
    query,
)

SECRET = b"the-same-32-bytes-on-every-replica!"


async def test_a_login_started_on_one_replica_ends_on_another_and_its_upstream_token_is_read_there(
    redis_url: str,  # noqa: F811
) -> None:
    """Pending logins and upstream tokens lived in one process: a callback reaching another replica was refused
    (unknown state), and a tool there found no upstream token. Both go through the server's storage now: the
    consent is answered on replica A, the provider's callback lands on replica B, the code is redeemed there and a
    tool on B reads the user's upstream token. Redis never holds an upstream token in clear."""
    prefix = f"mcpkit-test:{time.time_ns()}:"
    key = ec.generate_private_key(ec.SECP256R1())
    recorded = Recorded()
    held: dict[str, Any] = {}

    def make_idp(base: str) -> Any:
        held["idp"] = identity_provider(base, lambda: "alice")
        return recorded.wrap(held["idp"])

    storages: list[RedisAuthStorage] = []

    def replica(issuer: str, idp_url: str) -> Any:
        provider = UpstreamProvider(
            authorize_url=idp_url + "/authorize",
            token_url=idp_url + "/token",
            userinfo_url=idp_url + "/userinfo",
            client_id=PROXY_CLIENT_ID,
            client_secret=PROXY_CLIENT_SECRET,
            scopes=("profile",),
        )
        login = UpstreamLogin(provider, secret=SECRET)
        storages.append(RedisAuthStorage(redis_url, prefix=prefix))
        mcp = protect(
            create_app(proxied_server(login, idp_url)),
            resource=issuer + "/mcp",
            verifier=JWTVerifier(issuer=issuer, audience=issuer + "/mcp", jwks_url=issuer + "/jwks"),
            authorization_servers=[issuer],
        )
        server = AuthorizationServer(
            issuer, resources=[issuer + "/mcp"], upstream=login, app=mcp, storage=storages[-1], signing_key=key
        )
        held.setdefault("logins", []).append(login)
        return server

    async with (
        serve(make_idp) as (idp_url, _),
        serve(lambda base: replica(base, idp_url)) as (a_url, _),
        serve(lambda base: replica(a_url, idp_url)) as (b_url, b_log),  # B: the same issuer as A
    ):
        login_a = held["logins"][0]
        await held["idp"].register_client(
            client_id=PROXY_CLIENT_ID,
            client_secret=PROXY_CLIENT_SECRET,
            redirect_uris=[login_a.callback_url],
            token_endpoint_auth_method="client_secret_basic",
        )
        server_a: AuthorizationServer = held["logins"][0].server
        client = await server_a.register_client(redirect_uris=[REDIRECT])
        verifier, challenge = pkce_pair()
        params = httpx.QueryParams(
            response_type="code",
            client_id=client.client_id,
            redirect_uri=REDIRECT,
            state="client-state",
            code_challenge=challenge,
            code_challenge_method="S256",
            resource=a_url + "/mcp",
        )
        browser = Browser()
        at_callback = await browser.open(f"{a_url}/authorize?{params}", stop_at=login_a.callback_url)
        assert browser.consent_pages == 1  # answered on A
        callback = str(at_callback.url.join(at_callback.headers["location"])).replace(a_url, b_url)
        done = await browser.open(callback, stop_at=REDIRECT)
        assert any(path.startswith("/upstream/callback") for _, path, _ in b_log.requests)
        got = query(done)
        assert "code" in got, got
        code = got["code"]
        async with httpx.AsyncClient() as http:
            answer = await http.post(
                b_url + "/token",
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "code_verifier": verifier,
                    "client_id": client.client_id,
                    "redirect_uri": REDIRECT,
                },
            )
        assert answer.status_code == 200, answer.text
        bearer = {"authorization": "Bearer " + answer.json()["access_token"]}
        async with (
            StreamableHTTPClientTransport(b_url + "/mcp", headers=bearer) as conn,
            ClientSession(conn) as session,
        ):
            result = await session.call_tool("upstream_whoami", {})
        assert result.content[0].text == "login-of-alice|alice"  # type: ignore[union-attr]
        # Redis holds the upstream tokens sealed only
        upstream = [b[k] for b in recorded.bodies("/token") for k in ("access_token", "refresh_token") if k in b]
        assert upstream
        redis = Redis.from_url(redis_url)
        keys = [k async for k in redis.scan_iter(prefix + "*")]
        values = [await redis.get(k) for k in keys if await redis.type(k) == b"string"]
        assert any(k.startswith((prefix + "upstream-token:").encode()) for k in keys)
        assert all(t.encode() not in v for t in upstream for v in values if v)
        await redis.aclose()
        await browser.aclose()
    for storage in storages:
        await storage.aclose()


def test_a_sealed_record_opens_only_under_its_key_and_secret() -> None:
    sealer = Sealer(SECRET)
    sealed = sealer.seal("k1", b"upstream-token")
    assert b"upstream-token" not in sealed
    assert sealer.open("k1", sealed) == b"upstream-token"
    assert sealer.open("k2", sealed) is None  # moved under another key
    assert Sealer(b"another secret of 32 bytes......").open("k1", sealed) is None
    assert sealer.open("k1", sealed[:-1] + bytes([sealed[-1] ^ 1])) is None


def test_a_proxy_on_a_shared_storage_needs_its_secret(redis_url: str) -> None:  # noqa: F811
    """Every replica must open what another sealed: a per-process secret on a shared storage is refused."""
    provider = UpstreamProvider.github("id", "secret")
    with pytest.raises(ValueError, match="secret"):
        AuthorizationServer("http://127.0.0.1:1", upstream=UpstreamLogin(provider), storage=RedisAuthStorage(redis_url))
