"""Client registration (``mcpkit.auth.registration``) over real HTTP, against every storage (in memory, a real
``redis-server``, a real PostgreSQL): secrets are kept as digests, self-registered metadata is the registered
members only, and the self-registered clients' table is bounded in bytes."""

from __future__ import annotations

import base64
import dataclasses
import secrets
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from mcpkit.auth import AuthorizationServer, PostgresAuthStorage, RedisAuthStorage
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.storage import ClientRecord
from support.auth_storages import StorageMaker, make_auth_storage  # noqa: F401  (the fixture)
from support.oauth import REDIRECT, serve
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)

StorageFactory = Callable[..., Any]


@pytest.fixture
def make_storage(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> StorageFactory:
    """Builds the storage under test (``**options`` go to its constructor), of each backend in turn."""
    return make_auth_storage


async def _stored_bytes(storage: Any, client_id: str) -> bytes:
    """Everything the storage keeps about one client, as bytes (what a dump, a replica or a debugger shows)."""
    if isinstance(storage, RedisAuthStorage):
        raw = await storage.redis.get(storage.prefix + "client:" + client_id)
        return bytes(raw or b"")
    if isinstance(storage, PostgresAuthStorage):
        async with storage.conn.acquire("test") as db:
            raw = await db.fetchval(f"SELECT value FROM {storage.table} WHERE kind = 'client' AND key = $1", client_id)
        return bytes(raw or b"")
    return orjson.dumps(dataclasses.asdict(storage.clients[client_id]))


def _basic(client_id: str, secret: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


async def test_client_secrets_are_stored_as_digests_and_shown_only_at_registration(
    make_storage: StorageFactory,
) -> None:
    """A client secret was stored as given (in memory and in the Redis JSON): whoever read the storage could
    authenticate as every confidential client. Only its SHA-256 is kept now; the secret is in the registration
    response once, works at /token, and a wrong one is refused."""
    storage = make_storage()

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, storage=storage, registration_client_credentials=True)

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        r = await http.post(
            base + "/register",
            json={"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic"},
        )
        assert r.status_code == 201, r.text
        reg = r.json()
        cid, secret = reg["client_id"], reg["client_secret"]
        assert secret and reg["client_secret_expires_at"] == 0
        stored = await _stored_bytes(storage, cid)
        assert stored and secret.encode() not in stored, stored
        token = await http.post(base + "/token", data={"grant_type": "client_credentials"}, headers=_basic(cid, secret))
        assert token.status_code == 200, token.text
        wrong = await http.post(
            base + "/token", data={"grant_type": "client_credentials"}, headers=_basic(cid, secret + "x")
        )
        assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"


async def test_a_secret_stored_in_clear_by_an_earlier_version_still_authenticates_and_is_then_digested(
    make_storage: StorageFactory,
) -> None:
    """A record an earlier version saved (the secret in clear) keeps working after the upgrade; its first
    successful use replaces the clear secret by its digest; a wrong secret neither works nor migrates it."""
    storage = make_storage()
    secret = secrets.token_urlsafe(32)
    legacy = {
        "client_id": "legacy",
        "client_secret": secret,
        "redirect_uris": [],
        "token_endpoint_auth_method": "client_secret_post",
        "grant_types": ["client_credentials"],
        "scope": None,
        "metadata": {},
        "dynamic": False,
        "resource_server": False,
        "jwks": None,
    }
    if isinstance(storage, RedisAuthStorage):
        await storage.redis.set(storage.prefix + "client:legacy", orjson.dumps(legacy))
    elif isinstance(storage, PostgresAuthStorage):
        await storage.get_client("legacy")  # (the table made)
        async with storage.conn.acquire("test") as db:
            await db.execute(
                f"INSERT INTO {storage.table} (kind, key, value) VALUES ('client', 'legacy', $1)", orjson.dumps(legacy)
            )
    else:
        storage.clients["legacy"] = ClientRecord(**legacy)

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, storage=storage)

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        form = {"grant_type": "client_credentials", "client_id": "legacy"}
        wrong = await http.post(base + "/token", data={**form, "client_secret": "guess"})
        assert wrong.status_code == 401
        assert secret.encode() in await _stored_bytes(storage, "legacy")  # a failed attempt changes nothing
        ok = await http.post(base + "/token", data={**form, "client_secret": secret})
        assert ok.status_code == 200, ok.text
        assert secret.encode() not in await _stored_bytes(storage, "legacy")
        again = await http.post(base + "/token", data={**form, "client_secret": secret})
        assert again.status_code == 200, again.text
        assert (await http.post(base + "/token", data={**form, "client_secret": "guess"})).status_code == 401


async def test_register_client_returns_the_secret_once_and_stores_its_digest(make_storage: StorageFactory) -> None:
    storage = make_storage()
    authz = AuthorizationServer("http://127.0.0.1:9", storage=storage, auto_approve=True)
    record = await authz.register_client(
        grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
    )
    assert record.client_secret is not None and len(record.client_secret) >= 43
    stored = await storage.get_client(record.client_id)
    assert stored is not None and stored.client_secret is None
    assert stored.secret_matches(record.client_secret) and not stored.secret_matches(record.client_secret[:-1])
    assert record.client_secret.encode() not in await _stored_bytes(storage, record.client_id)


async def test_self_registered_metadata_keeps_only_registered_members(make_storage: StorageFactory) -> None:
    """RFC 7591 §3.2.1: the server may ignore members; arbitrary ones were kept and echoed (16 KiB a client, up to
    10,000 clients). The registered members are kept and shown; anything else is dropped, as is a member of the
    wrong type."""
    storage = make_storage()

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, storage=storage)

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        meta = {
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
            "client_name": "Editor",
            "client_uri": "https://editor.example",
            "logo_uri": "https://editor.example/logo.png",
            "contacts": ["ops@editor.example"],
            "software_id": "4NRB1-0XZABZI9E6-5SM3R",
            "software_version": "2.1",
            "tos_uri": 7,  # the wrong type: dropped
            "junk": "x" * 10_000,
            "client_name#fr": "Éditeur",
        }
        r = await http.post(base + "/register", json=meta)
        assert r.status_code == 201, r.text
        body = r.json()
        for member in ("client_name", "client_uri", "logo_uri", "contacts", "software_id", "software_version"):
            assert body[member] == meta[member], member
        assert "junk" not in body and "tos_uri" not in body and "client_name#fr" not in body
        stored = await _stored_bytes(storage, body["client_id"])
        assert b"xxxxxxxxxx" not in stored and len(stored) < 2_000, len(stored)


async def test_self_registered_clients_are_bounded_in_bytes_the_oldest_going_first(
    make_storage: StorageFactory,
) -> None:
    """Each registration is capped (16 KiB) and so is their count (10,000), but not the product: 160 MB. The
    table has a byte budget now: past it the oldest self-registered clients go; pre-registered ones never."""
    storage = make_storage(max_dynamic_client_bytes=20_000)
    holder: dict[str, AuthorizationServer] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, auto_approve=True, storage=storage, registration_rate=None)
        return holder["as"]

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        authz_client = await http.post(
            base + "/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
        )
        assert authz_client.status_code == 201
        pre = await holder["as"].register_client(redirect_uris=[REDIRECT])
        ids = []
        for i in range(12):  # about 3 KiB each: 36 KiB asked for, 20 KiB kept
            meta = {
                "redirect_uris": [REDIRECT],
                "token_endpoint_auth_method": "none",
                "client_name": f"client {i} " + "n" * 3_000,
            }
            r = await http.post(base + "/register", json=meta)
            assert r.status_code == 201, r.text
            ids.append(r.json()["client_id"])
        kept = [cid for cid in ids if await storage.get_client(cid) is not None]
        assert kept == ids[-len(kept) :] and 4 <= len(kept) <= 6, len(kept)
        assert sum([len(await _stored_bytes(storage, cid)) for cid in kept]) <= 20_000
        assert await storage.get_client(authz_client.json()["client_id"]) is None  # the oldest went first
        assert await storage.get_client(pre.client_id) is not None
    with pytest.raises(ValueError, match="max_dynamic_client_bytes"):
        make_storage(max_dynamic_client_bytes=100)


async def _accepted_authorization(http: httpx.AsyncClient, base: str, client_id: str, challenge: str) -> str:
    """An authorization request of ``client_id`` (auto-approved): the code it got."""
    query = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    r = await http.get(base + "/authorize", params=query)
    assert r.status_code == 302 and "code=" in r.headers["location"], r.text
    return r.headers["location"].partition("code=")[2].partition("&")[0]


async def test_self_registered_clients_in_use_outlive_idle_ones_registered_later(make_storage: StorageFactory) -> None:
    """The budget of self-registered clients evicted by registration order: a client signing users in every day
    went before one registered after it and never used. It evicts the least recently used one now (used: a token
    issued to it, an authorization request of its accepted; a refused request is no use)."""
    storage = make_storage(max_dynamic_clients=3)
    holder: dict[str, AuthorizationServer] = {}
    secrets_by_id: dict[str, str] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, auto_approve=True, storage=storage, registration_rate=None)
        return holder["as"]

    async with serve(make) as (base, _), httpx.AsyncClient() as http:

        async def register() -> str:
            meta = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}
            r = await http.post(base + "/register", json=meta)
            assert r.status_code == 201, r.text
            secrets_by_id[r.json()["client_id"]] = r.json()["client_secret"]
            return str(r.json()["client_id"])

        def alive(*ids: str) -> Any:
            return [x for x in ids if x in kept]

        pre = await holder["as"].register_client(redirect_uris=[REDIRECT])
        a, b, c = [await register() for _ in range(3)]
        verifier, challenge = pkce_pair()
        code = await _accepted_authorization(http, base, a, challenge)
        await _accepted_authorization(http, base, b, challenge)
        refused = await http.post(  # client_credentials is off for self-registered clients: no use of c
            base + "/token", data={"grant_type": "client_credentials"}, headers=_basic(c, secrets_by_id[c])
        )
        assert refused.status_code == 400, refused.text
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT, "code_verifier": verifier}
        token = await http.post(base + "/token", data=form, headers=_basic(a, secrets_by_id[a]))
        assert token.status_code == 200, token.text  # a was used last
        d = await register()  # c, registered after a and b but never used, goes
        kept = {x for x in (a, b, c, d) if await storage.get_client(x) is not None}
        assert alive(a, b, c, d) == [a, b, d]
        e = await register()  # then b, whose authorization request came before a's token
        kept = {x for x in (a, b, d, e) if await storage.get_client(x) is not None}
        assert alive(a, b, d, e) == [a, d, e]
        assert await storage.get_client(pre.client_id) is not None
