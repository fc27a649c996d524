"""What is Redis's own in ``RedisAuthStorage``, against a real ``redis-server``: the keys an earlier version wrote,
and a Redis Cluster's hash slots. The contract every storage holds is tested in tests/auth/test_storage.py."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict

import orjson
import pytest

from mcpkit.auth import RedisAuthStorage
from mcpkit.auth.storage import RefreshGrant
from support.redis_server import redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)


async def test_a_refresh_token_an_earlier_version_kept_under_itself_is_read_and_taken(
    redis_url: str,  # noqa: F811
) -> None:
    """An earlier version kept refresh tokens under the secret itself (a refresh token lives for weeks): peeked, it
    stays in place, and it is taken from there, as the ones under their digest are (tests/auth/test_storage.py
    holds every backend to the rest of the contract)."""
    storage = RedisAuthStorage(redis_url, prefix=f"mcpkit-test:{time.time_ns()}:")
    try:
        token, legacy = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        await storage.save_refresh(token, RefreshGrant("c", ["s"], "https://a/mcp", "alice", time.time() + 60, "fam"))
        record = RefreshGrant("c", ["s"], None, "bob", None, "fam")
        await storage.redis.set(storage._key("refresh", legacy), orjson.dumps(asdict(record)))
        for _ in range(2):
            seen = await storage.peek_refresh(token)
            assert seen is not None and seen.subject == "alice" and seen.resource == "https://a/mcp"
            assert (await storage.peek_refresh(legacy)) == record
        assert await storage.peek_refresh(secrets.token_urlsafe(32)) is None
        assert (await storage.take_refresh(token, None)) is not None and await storage.peek_refresh(token) is None
        assert (await storage.take_refresh(legacy, None)) == record and await storage.peek_refresh(legacy) is None
    finally:
        await storage.aclose()


async def test_on_a_redis_cluster_the_storage_keeps_its_keys_in_one_slot(redis_cluster_url: str) -> None:  # noqa: F811
    """Its scripts touch several keys at once (a client and the set of self-registered ones; a refresh token and
    the set of unexpiring ones), which a Redis Cluster refuses (CROSSSLOT) unless they share a hash slot: given a
    cluster client, a prefix without a hash tag is refused where it is given, naming one that works; with one,
    self-registered clients and key-bound refresh tokens work on the cluster."""
    from redis.asyncio.cluster import RedisCluster

    from mcpkit.auth.storage import ClientRecord

    cluster = RedisCluster.from_url(redis_cluster_url)
    try:
        with pytest.raises(ValueError, match=r"hash tag.*\{"):
            RedisAuthStorage(cluster, prefix="mcpkit-test:oauth:")
        storage = RedisAuthStorage(cluster, prefix=f"mcpkit-test:{{oauth-{time.time_ns()}}}:", max_dynamic_clients=2)
        for i in range(3):
            record = ClientRecord(f"dyn-{i}", None, redirect_uris=["http://127.0.0.1:9/cb"], dynamic=True)
            await storage.save_client(record)
        assert await storage.get_client("dyn-0") is None and await storage.get_client("dyn-2") is not None
        token = secrets.token_urlsafe(32)
        await storage.save_refresh(token, RefreshGrant("c", ["s"], None, "alice", None, "fam", "jkt-1"))
        assert (await storage.take_refresh(token, "jkt-2")) is not None  # shown, not taken
        assert (await storage.peek_refresh(token)) is not None  # (current and legacy keys in one MGET)
        assert (await storage.take_refresh(token, "jkt-1")) is not None
        assert await storage.pop_refresh(token) is None
    finally:
        await cluster.aclose()
