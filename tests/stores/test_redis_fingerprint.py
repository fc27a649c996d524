"""The fingerprint of the app a Redis key prefix serves (``mcpkit.stores.redis.fingerprint``), against a real
redis-server: held while a worker runs, so an app started later on the same prefix is warned about at any time."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time

import pytest

from mcpkit.stores.redis import RedisConnection
from mcpkit.stores.redis.fingerprint import PrefixClaim, claim_prefix
from support.redis_server import redis_url  # noqa: F401  (the session fixture)

TTL = 4.0  # (written again every 2 s: a refresh may come up to 2 s late under load before the key ends)


def claim_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "mcpkit-prefix-claim"]


async def test_a_running_worker_keeps_its_fingerprint_past_the_ttl_and_stops_when_closed(
    redis_url: str,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The fingerprint was written only when a worker started: TTL after that, a worker still running left no trace
    # of its app, and another app started on its prefix was not warned about.
    prefix = f"fp{secrets.token_hex(4)}:"
    conn = RedisConnection(redis_url, prefix=prefix)
    key = conn.keys.key("app", "fingerprint")
    caplog.set_level(logging.WARNING, "mcpkit")
    claim = PrefixClaim(conn, "alpha aaaaaaaaaaaa", ttl=TTL)
    try:
        await claim.start()
        assert len(claim_tasks()) == 1
        started = time.monotonic()
        while time.monotonic() - started < 2.5 * TTL:  # (past two TTLs: only refreshes keep it)
            assert await conn.client.get(key) == b"alpha aaaaaaaaaaaa"
            assert 0 < await conn.client.pttl(key) <= TTL * 1000  # (the bound)
            await asyncio.sleep(0.25)
        assert caplog.records == []
        # another app starting now is warned about, and the running worker says so too at its next refresh
        assert await claim_prefix(conn, "beta bbbbbbbbbbbb", ttl=TTL) == "alpha aaaaaaaaaaaa"
        deadline = time.monotonic() + 3 * TTL
        while len(caplog.records) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 2, said
        assert "app 'alpha'" in said[0] and "this worker is app 'beta'" in said[0], said
        assert "app 'beta'" in said[1] and "this worker is app 'alpha'" in said[1], said
    finally:
        await claim.aclose()
    assert claim_tasks() == []
    # closed: nothing writes it any more, so it ends within its TTL
    await conn.client.set(key, b"alpha aaaaaaaaaaaa", px=int(TTL * 1000))
    deadline = time.monotonic() + 3 * TTL
    while await conn.client.exists(key) and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
    assert not await conn.client.exists(key)
    await conn.aclose()


def test_a_claim_refuses_a_ttl_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="ttl"):
        PrefixClaim(RedisConnection("redis://127.0.0.1:1", prefix="x:"), "a b", ttl=0)
