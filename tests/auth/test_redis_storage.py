"""``RedisAuthStorage`` against a real ``redis-server``: key-bound refresh tokens are taken atomically, and refresh
tokens without an expiry are bounded in count."""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import asdict

import orjson
import pytest

from mcpkit.auth import RedisAuthStorage
from mcpkit.auth.storage import _Refresh
from support.redis_server import redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)


async def test_a_refresh_token_bound_to_another_key_is_left_in_place(redis_url: str) -> None:  # noqa: F811
    storage = RedisAuthStorage(redis_url, prefix=f"mcpkit-test:{time.time_ns()}:")
    try:
        token = secrets.token_urlsafe(32)
        await storage.save_refresh(token, _Refresh("c", ["s"], None, "alice", time.time() + 60, "fam", "jkt-1"))
        for wrong in ("jkt-2", None):
            seen = await storage.take_refresh(token, wrong)
            assert seen is not None and seen.jkt == "jkt-1"  # shown (to be refused), not taken
        taken = await storage.take_refresh(token, "jkt-1")
        assert taken is not None and taken.subject == "alice"
        assert await storage.take_refresh(token, "jkt-1") is None
        unbound = secrets.token_urlsafe(32)
        await storage.save_refresh(unbound, _Refresh("c", ["s"], None, "bob", None, "fam"))
        assert (await storage.take_refresh(unbound, "any")) is not None and await storage.pop_refresh(unbound) is None
    finally:
        await storage.aclose()


async def test_a_refresh_token_read_with_peek_stays_in_place(redis_url: str) -> None:  # noqa: F811
    """The refresh grant refuses a wider scope or another resource from a read that takes nothing: the token, kept
    under its digest or (by an earlier version) under itself, is still there to take afterwards."""
    storage = RedisAuthStorage(redis_url, prefix=f"mcpkit-test:{time.time_ns()}:")
    try:
        token, legacy = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        await storage.save_refresh(token, _Refresh("c", ["s"], "https://a/mcp", "alice", time.time() + 60, "fam"))
        record = _Refresh("c", ["s"], None, "bob", None, "fam")
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


async def test_refresh_tokens_without_an_expiry_are_bounded_in_count(redis_url: str) -> None:  # noqa: F811
    """``refresh_token_ttl=None`` gave refresh tokens no TTL in Redis: every abandoned one stayed forever (the
    in-memory storage keeps at most 100,000). At most ``max_refresh_tokens`` unexpiring ones are kept now, the
    least recently issued going first; tokens with a lifetime expire by themselves and are not counted."""
    prefix = f"mcpkit-test:{time.time_ns()}:"
    storage = RedisAuthStorage(redis_url, prefix=prefix, max_refresh_tokens=3)
    try:
        tokens = [secrets.token_urlsafe(32) for _ in range(6)]
        for i, token in enumerate(tokens):
            await storage.save_refresh(token, _Refresh("c", ["s"], None, f"u{i}", None, "fam"))
        expiring = secrets.token_urlsafe(32)
        await storage.save_refresh(expiring, _Refresh("c", ["s"], None, "e", time.time() + 60, "fam"))
        keys = [k async for k in storage.redis.scan_iter(match=prefix + "refresh-sha256:*")]
        assert len(keys) == 4, keys  # the three newest unexpiring ones and the expiring one
        # a token taken (rotated) leaves the count: the next one saved evicts nothing
        assert (await storage.pop_refresh(tokens[3])) is not None
        newest = secrets.token_urlsafe(32)
        await storage.save_refresh(newest, _Refresh("c", ["s"], None, "n", None, "fam"))
        alive = [t for t in [*tokens, newest] if await storage.pop_refresh(t) is not None]
        assert alive == [tokens[4], tokens[5], newest]
        assert await storage.pop_refresh(expiring) is not None
        assert await storage.redis.zcard(prefix + "refresh-unexpiring:all") == 0
    finally:
        await storage.aclose()
    with pytest.raises(ValueError, match="max_refresh_tokens"):
        RedisAuthStorage(redis_url, max_refresh_tokens=0)


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
        await storage.save_refresh(token, _Refresh("c", ["s"], None, "alice", None, "fam", "jkt-1"))
        assert (await storage.take_refresh(token, "jkt-2")) is not None  # shown, not taken
        assert (await storage.peek_refresh(token)) is not None  # (current and legacy keys in one MGET)
        assert (await storage.take_refresh(token, "jkt-1")) is not None
        assert await storage.pop_refresh(token) is None
    finally:
        await cluster.aclose()


async def test_an_oauth_proxys_pending_logins_and_upstream_tokens_keep_their_bounds_in_redis(
    redis_url: str,  # noqa: F811
) -> None:
    """The bounds of ``UpstreamLogin`` hold with its state in Redis: at most ``max_pending`` live pending records
    (an expired one makes room), each taken once; at most ``max_tokens`` users' upstream tokens, the least recently
    used going first, each forgotten at its expiry."""
    storage = RedisAuthStorage(redis_url, prefix=f"mcpkit-test:{time.time_ns()}:")
    now = time.time()
    assert await storage.put_pending("a", b"A", now + 60, now, 2)
    assert await storage.put_pending("b", b"B", now + 2, now, 2)
    assert not await storage.put_pending("c", b"C", now + 60, now, 2)  # full
    assert await storage.put_pending("a", b"A2", now + 60, now, 2)  # the same one again: not one more
    assert await storage.peek_pending("a", now) == b"A2"
    assert await storage.take_pending("a", now) == b"A2" and await storage.take_pending("a", now) is None
    await asyncio.sleep(2.5)  # b expired: room for two again
    assert await storage.put_pending("c", b"C", now + 60, now, 2)
    assert await storage.put_pending("d", b"D", now + 60, now, 2)
    for user in ("u1", "u2"):
        await storage.put_upstream(user, user.encode(), now + 60, now, 2)
    assert await storage.get_upstream("u1", now) == b"u1"  # u1 used last: u2 goes first
    await storage.put_upstream("u3", b"u3", now + 60, now, 2)
    assert await storage.get_upstream("u2", now) is None
    assert await storage.get_upstream("u1", now) == b"u1" and await storage.get_upstream("u3", now) == b"u3"
    await storage.put_upstream("u4", b"u4", now + 0.5, now, 2)
    await asyncio.sleep(1.0)
    assert await storage.get_upstream("u4", now) is None  # expired
    await storage.drop_upstream("u1")
    assert await storage.get_upstream("u1", now) is None
    assert await storage.redis.zcard(storage._key("upstream-tokens", "all")) <= 2
    await storage.aclose()
