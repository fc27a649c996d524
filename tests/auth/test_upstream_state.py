"""An OAuth proxy's state (``mcpkit.auth.upstream_state``) in the authorization server's storage: two replicas of the
proxy (two uvicorn servers, one issuer, one real ``redis-server`` or PostgreSQL) share pending logins and upstream
tokens, which the storage holds sealed only."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from mcpkit.auth import AuthorizationServer, JWTVerifier, PostgresAuthStorage, RedisAuthStorage, protect
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.upstream import UpstreamProvider
from mcpkit.auth.upstream_login import UpstreamLogin
from mcpkit.auth.upstream_state import (
    InMemoryUpstreamState,
    RefreshLeaseStorage,
    RevocationRecordStorage,
    Sealer,
    UpstreamStateStorage,
    state_key,
)
from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import create_app
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.auth_storages import StorageMaker, make_auth_storage  # noqa: F401  (the fixture)
from support.oauth import serve
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.upstream_idp import (
    PROXY_CLIENT_ID,
    PROXY_CLIENT_SECRET,
    REDIRECT,
    Browser,
    Recorded,
    authorization_query,
    identity_provider,
    proxied_server,
    query,
    redeem,
)

SECRET = b"the-same-32-bytes-on-every-replica!"


@contextlib.asynccontextmanager
async def replicas(
    make: StorageMaker,
    *,
    idp_gate: Callable[[Any], Any] | None = None,
    login_options: dict[str, Any] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The upstream IdP, then two replicas A and B of the proxy (one issuer, one signing key, two storages on one
    Redis prefix or PostgreSQL table), each hosting the protected MCP server at ``/mcp``; the proxy registered at the
    IdP. ``idp_gate`` wraps the IdP app."""
    key = ec.generate_private_key(ec.SECP256R1())
    storages: list[Any] = []
    s: dict[str, Any] = {"recorded": Recorded(), "logins": [], "storages": storages}  # (closed by the fixture)

    def make_idp(base: str) -> Any:
        s["idp"] = identity_provider(base, lambda: "alice")
        app = s["recorded"].wrap(s["idp"])
        return idp_gate(app) if idp_gate is not None else app

    def replica(issuer: str, idp_url: str) -> Any:
        provider = UpstreamProvider(
            authorize_url=idp_url + "/authorize",
            token_url=idp_url + "/token",
            userinfo_url=idp_url + "/userinfo",
            client_id=PROXY_CLIENT_ID,
            client_secret=PROXY_CLIENT_SECRET,
            scopes=("profile",),
        )
        login = UpstreamLogin(provider, secret=SECRET, **(login_options or {}))
        storages.append(make.shared() if storages else make())
        mcp = protect(
            create_app(proxied_server(login, idp_url)),
            resource=issuer + "/mcp",
            verifier=JWTVerifier(issuer=issuer, audience=issuer + "/mcp", jwks_url=issuer + "/jwks"),
            authorization_servers=[issuer],
        )
        server = AuthorizationServer(
            issuer, resources=[issuer + "/mcp"], upstream=login, app=mcp, storage=storages[-1], signing_key=key
        )
        s["logins"].append(login)
        return server

    async with (
        serve(make_idp) as (idp_url, idp_log),
        serve(lambda base: replica(base, idp_url)) as (a_url, _),
        serve(lambda base: replica(a_url, idp_url)) as (b_url, b_log),  # B: the same issuer as A
    ):
        await s["idp"].register_client(
            client_id=PROXY_CLIENT_ID,
            client_secret=PROXY_CLIENT_SECRET,
            redirect_uris=[s["logins"][0].callback_url],
            token_endpoint_auth_method="client_secret_basic",
        )
        s.update(idp_url=idp_url, idp_log=idp_log, a_url=a_url, b_url=b_url, b_log=b_log, browser=Browser())
        try:
            yield s
        finally:
            await s["browser"].aclose()


async def stored_values(storage: Any) -> tuple[list[str], list[bytes]]:
    """Every key (kind:key in PostgreSQL) and value a shared storage keeps: what a dump or a replica shows."""
    if isinstance(storage, RedisAuthStorage):
        redis = storage.redis
        keys = [bytes(k).decode() async for k in redis.scan_iter(storage.prefix + "*")]
        return keys, [bytes(await redis.get(k) or b"") for k in keys if await redis.type(k) == b"string"]
    assert isinstance(storage, PostgresAuthStorage)
    async with storage.conn.acquire("test") as db:
        rows = await db.fetch(f"SELECT kind, key, value FROM {storage.table}")
    return [f"{r['kind']}:{r['key']}" for r in rows], [bytes(r["value"]) for r in rows]


async def sign_in(s: dict[str, Any], callback_on: str) -> str:
    """alice signs in through a new client: the consent answered on A, the provider's callback landing on
    ``callback_on``, the code redeemed there; the proxy's access token."""
    login_a, a_url = s["logins"][0], s["a_url"]
    client = await login_a.server.register_client(redirect_uris=[REDIRECT])
    verifier, challenge = pkce_pair()
    params = authorization_query(client.client_id, challenge, a_url + "/mcp", state="client-state")
    browser: Browser = s["browser"]
    at_callback = await browser.open(f"{a_url}/authorize?{params}", stop_at=login_a.callback_url)
    callback = str(at_callback.url.join(at_callback.headers["location"])).replace(a_url, callback_on)
    got = query(await browser.open(callback, stop_at=REDIRECT))
    assert "code" in got, got
    tokens, _ = await redeem(callback_on, client.client_id, got["code"], verifier)
    return str(tokens["access_token"])


async def whoami(url: str, access_token: str) -> str:
    bearer = {"authorization": "Bearer " + access_token}
    async with StreamableHTTPClientTransport(url + "/mcp", headers=bearer) as conn, ClientSession(conn) as session:
        result = await session.call_tool("upstream_whoami", {})
    return str(result.content[0].text)  # type: ignore[union-attr]


SHARED = pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)


@SHARED
async def test_a_login_started_on_one_replica_ends_on_another_and_its_upstream_token_is_read_there(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """Pending logins and upstream tokens lived in one process: a callback reaching another replica was refused
    (unknown state), and a tool there found no upstream token. Both go through the server's storage now: the
    consent is answered on replica A, the provider's callback lands on replica B, the code is redeemed there and a
    tool on B reads the user's upstream token. The storage (Redis, PostgreSQL) never holds an upstream token in
    clear."""
    async with replicas(make_auth_storage) as s:
        access_token = await sign_in(s, s["b_url"])
        assert s["browser"].consent_pages == 1  # answered on A
        assert any(path.startswith("/upstream/callback") for _, path, _ in s["b_log"].requests)
        assert await whoami(s["b_url"], access_token) == "login-of-alice|alice"
        # the storage holds the upstream tokens sealed only
        bodies = s["recorded"].bodies("/token")
        upstream = [b[k] for b in bodies for k in ("access_token", "refresh_token") if k in b]
        assert upstream
        keys, values = await stored_values(s["storages"][0])
        assert any(k.startswith(("upstream-token:", "upstream:")) or ":upstream-token:" in k for k in keys), keys
        assert values and all(t.encode() not in v for t in upstream for v in values)


@SHARED
async def test_two_replicas_refreshing_one_expired_upstream_token_at_once_ask_the_provider_once(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """The refresh lock was per process: two replicas with one expired upstream token both refreshed it, and a
    provider that rotates refresh tokens (as mcpkit's own does) refused the second as a reused one, so one of the
    two calls found no upstream token (and the user had to sign in again). The refresh is single-flight across
    replicas now (a lease in the shared storage): two calls at once, one on each replica, both succeed and the
    provider sees exactly one refresh. The provider holds each refresh until a second one comes (at most 3 s), so
    the two calls overlap however the machine schedules them."""
    now = [time.time()]
    refreshes: list[float] = []
    second = asyncio.Event()

    def gate(app: Any) -> Any:
        async def gated(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == "/token" and len(tokens_asked) >= 1:
                refreshes.append(time.monotonic())
                if len(refreshes) >= 2:
                    second.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(second.wait(), 3.0)
            if scope["type"] == "http" and scope["path"] == "/token":
                tokens_asked.append(scope["path"])
            await app(scope, receive, send)

        return gated

    tokens_asked: list[str] = []
    async with replicas(make_auth_storage, idp_gate=gate, login_options={"clock": lambda: now[0]}) as s:
        s["idp"].access_token_ttl = 60.0
        access_token = await sign_in(s, s["a_url"])
        assert len(tokens_asked) == 1  # the code exchange
        now[0] += 120  # the upstream access token expired (on both replicas' clocks)
        answers = await asyncio.gather(whoami(s["a_url"], access_token), whoami(s["b_url"], access_token))
        assert answers == ["login-of-alice|alice"] * 2
        assert len(refreshes) == 1, refreshes
        # and the refreshed token is the one both replicas read from now on
        assert await whoami(s["b_url"], access_token) == "login-of-alice|alice"
        assert len(refreshes) == 1


def test_a_sealed_record_opens_only_under_its_key_and_secret() -> None:
    sealer = Sealer(SECRET)
    sealed = sealer.seal("k1", b"upstream-token")
    assert b"upstream-token" not in sealed
    assert sealer.open("k1", sealed) == b"upstream-token"
    assert sealer.open("k2", sealed) is None  # moved under another key
    assert Sealer(b"another secret of 32 bytes......").open("k1", sealed) is None
    assert sealer.open("k1", sealed[:-1] + bytes([sealed[-1] ^ 1])) is None


def test_a_proxy_on_a_shared_storage_needs_its_secret() -> None:
    """Every replica must open what another sealed: a per-process secret on a shared storage is refused (neither
    storage connects before its first use)."""
    provider = UpstreamProvider.github("id", "secret")
    for storage in (RedisAuthStorage("redis://127.0.0.1:1/0"), PostgresAuthStorage("postgresql://127.0.0.1:1/db")):
        with pytest.raises(ValueError, match="secret"):
            AuthorizationServer("http://127.0.0.1:1", upstream=UpstreamLogin(provider), storage=storage)


@SHARED
async def test_a_refresh_lease_left_by_a_replica_that_died_ends_by_itself(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """A replica that took the refresh lease and died never releases it: the lease ends at its expiry, and the
    next call refreshes then (once) instead of waiting for ever."""
    now = [time.time()]
    async with replicas(make_auth_storage, login_options={"clock": lambda: now[0]}) as s:
        s["idp"].access_token_ttl = 60.0
        access_token = await sign_in(s, s["a_url"])
        family = jwt.decode(access_token, options={"verify_signature": False})["grant_id"]
        storage = s["logins"][0].server.storage
        assert await storage.acquire_lease(state_key("upstream", family), "a-replica-that-died", 1.5)
        now[0] += 120
        started = time.monotonic()
        assert await whoami(s["b_url"], access_token) == "login-of-alice|alice"
        assert time.monotonic() - started >= 1.0  # it waited for the dead replica's lease to end
        assert [p for _, p, _ in s["idp_log"].requests if p == "/token"] == ["/token"] * 2  # code, one refresh


async def test_a_refresh_lease_has_one_owner_until_it_is_released_or_expires(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    storage = make_auth_storage()
    assert await storage.acquire_lease("k", "a", 0.5)
    assert not await storage.acquire_lease("k", "b", 0.5)  # a holds it
    assert await storage.acquire_lease("other", "b", 0.5)  # one lease per key
    await asyncio.sleep(0.7)  # a never released it (it died): it ended by itself
    assert await storage.acquire_lease("k", "b", 5)
    await storage.release_lease("k", "a")  # a's release no longer ends b's lease
    assert not await storage.acquire_lease("k", "c", 5)
    await storage.release_lease("k", "b")
    assert await storage.acquire_lease("k", "c", 5)
    if make_auth_storage.kind == "memory":
        assert set(storage._leases) == {"k"}  # the expired ones are gone


class StateOnlyStorage(InMemoryUpstreamState):
    """A storage of a user's own written against the proxy's state alone (before refresh leases existed)."""

    acquire_lease = None  # type: ignore[assignment]
    release_lease = None  # type: ignore[assignment]


def test_a_storage_with_the_proxys_state_but_no_leases_still_keeps_it_and_says_refreshes_are_per_replica(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Refresh leases came after ``UpstreamStateStorage``: a storage implementing that alone keeps the proxy's
    state as before (logins may still cross replicas), and the startup log says an expired upstream token is
    refreshed once per replica, not across them."""
    storage = StateOnlyStorage()
    assert isinstance(storage, UpstreamStateStorage) and not isinstance(storage, RefreshLeaseStorage)
    login = UpstreamLogin(UpstreamProvider.github("id", "secret"), secret=SECRET)
    with caplog.at_level(logging.WARNING, "mcpkit.auth.upstream_login"):
        AuthorizationServer("http://127.0.0.1:1", upstream=login, storage=storage)  # type: ignore[arg-type]
    assert any("StateOnlyStorage" in r.getMessage() and "once per replica" in r.getMessage() for r in caplog.records)


class NoRecordsStorage(InMemoryUpstreamState):
    """A storage of a user's own written before revocation records existed."""

    put_revocation = None  # type: ignore[assignment]
    renew_revocations = None  # type: ignore[assignment]
    claim_revocations = None  # type: ignore[assignment]
    drop_revocation = None  # type: ignore[assignment]


def test_a_storage_without_revocation_records_keeps_them_in_the_process_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Revocation records came after ``UpstreamStateStorage``: on a storage without them, the proxy records its
    pending upstream revocations in its own memory (a revocation still works, it is only lost with the process) and
    the startup log says so."""
    storage = NoRecordsStorage()
    assert isinstance(storage, UpstreamStateStorage) and not isinstance(storage, RevocationRecordStorage)
    provider = dataclasses.replace(UpstreamProvider.github("id", "secret"), revocation_url="https://example.com/r")
    login = UpstreamLogin(provider, secret=SECRET)
    with caplog.at_level(logging.WARNING, "mcpkit.auth.upstream_login"):
        AuthorizationServer("http://127.0.0.1:1", upstream=login, storage=storage)  # type: ignore[arg-type]
    assert any("NoRecordsStorage" in r.getMessage() and "this process only" in r.getMessage() for r in caplog.records)
    assert isinstance(login._revocations.records, InMemoryUpstreamState) and login._revocations.records is not storage
