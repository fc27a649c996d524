"""The fingerprint of the app a shared store's prefix serves (``mcpkit.stores.fingerprint``), on each backend that
keeps it: one key of a real redis-server (``mcpkit.stores.redis.fingerprint``), one row of ``<prefix>meta`` in a
real PostgreSQL (``mcpkit.stores.postgres.fingerprint``). Two apps on one prefix are warned about, the same app
(another worker) is not, a fingerprint past its time is not; a running worker holds its fingerprint past the TTL and
stops when closed. (The test through ``create_app``: tests/transports/http/test_shared.py.)"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

import pytest

from mcpkit.stores.fingerprint import HeldClaim
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)


@dataclass
class Backend:
    """One backend's fingerprint: its connection, its ``claim_prefix`` and claim class, what its warning names, and
    the TTL its running-worker test holds the claim for (Redis: written again every 2 s, so a refresh may come up to
    2 s late under load before the key ends; PostgreSQL: every second)."""

    name: str
    url: str

    @property
    def ttl(self) -> float:
        return 4.0 if self.name == "redis" else 2.0

    @property
    def what(self) -> str:
        return "Redis key prefix" if self.name == "redis" else "PostgreSQL table prefix"

    @property
    def setting(self) -> str:
        return "MCPKIT_REDIS_PREFIX" if self.name == "redis" else "MCPKIT_POSTGRES_PREFIX"

    def connect(self, url: str | None = None) -> Any:
        prefix = f"fp{secrets.token_hex(4)}" + (":" if self.name == "redis" else "_")
        if self.name == "redis":
            from mcpkit.stores.redis import RedisConnection

            return RedisConnection(url or self.url, prefix=prefix)
        from mcpkit.stores.postgres import PostgresConnection

        return PostgresConnection(url or self.url, prefix=prefix)

    async def claim_prefix(self, conn: Any, mine: str, ttl: float | None = None) -> str | None:
        if self.name == "redis":
            from mcpkit.stores.redis.fingerprint import claim_prefix
        else:
            from mcpkit.stores.postgres.fingerprint import claim_prefix
        return await claim_prefix(conn, mine, **({} if ttl is None else {"ttl": ttl}))

    def claim(self, conn: Any, mine: str, ttl: float) -> HeldClaim:
        if self.name == "redis":
            from mcpkit.stores.redis.fingerprint import PrefixClaim

            return PrefixClaim(conn, mine, ttl=ttl)
        from mcpkit.stores.postgres.fingerprint import PostgresPrefixClaim

        return PostgresPrefixClaim(conn, mine, ttl=ttl)

    async def stored(self, conn: Any) -> tuple[str, float] | None:
        """The fingerprint kept under the prefix and the seconds it has left, or None when there is none that has
        not ended."""
        if self.name == "redis":
            key = conn.keys.key("app", "fingerprint")
            value, left = await conn.client.get(key), await conn.client.pttl(key)
            return None if value is None else (value.decode(), left / 1000)
        async with conn.acquire("test") as db:
            row = await db.fetchrow(
                f"SELECT value, extract(epoch FROM clock_timestamp()) AS now FROM {conn.tables['meta']} "
                "WHERE key = 'fingerprint'"
            )
        if row is None:
            return None
        until, _, value = row["value"].partition(" ")
        left = float(until) - float(row["now"])
        return (value, left) if left > 0 else None


_URLS = {"redis": "redis_url", "postgres": "postgres_url"}
_MARKS = {"redis": pytest.mark.redis, "postgres": pytest.mark.postgres}
_BACKENDS = pytest.mark.parametrize(
    "backend", [pytest.param(n, marks=_MARKS[n]) for n in ("redis", "postgres")], indirect=True
)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Backend:
    return Backend(request.param, request.getfixturevalue(_URLS[request.param]))


def claim_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "mcpkit-prefix-claim"]


@_BACKENDS
async def test_a_second_app_on_a_prefix_is_warned_about_and_the_same_app_is_not(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    conn = backend.connect()
    caplog.set_level(logging.WARNING, "mcpkit")
    try:
        assert await backend.claim_prefix(conn, "alpha aaaaaaaaaaaa") is None  # (the first)
        assert await backend.claim_prefix(conn, "alpha aaaaaaaaaaaa") is None  # (another worker of the same app)
        assert caplog.records == []
        assert await backend.claim_prefix(conn, "beta bbbbbbbbbbbb") == "alpha aaaaaaaaaaaa"
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1, said
        assert f"{backend.what} {conn.prefix!r}" in said[0], said
        assert "app 'alpha'" in said[0] and "this worker is app 'beta'" in said[0], said
        assert backend.setting in said[0], said
        # a fingerprint past its time says nothing (the other app's workers are long gone)
        assert await backend.claim_prefix(conn, "gamma cccccccccccc", ttl=0.2) == "beta bbbbbbbbbbbb"
        await asyncio.sleep(0.5)
        caplog.clear()
        assert await backend.claim_prefix(conn, "delta dddddddddddd") is None
        assert caplog.records == []
        # another prefix is another deployment
        other = backend.connect()
        try:
            assert await backend.claim_prefix(other, "beta bbbbbbbbbbbb") is None
        finally:
            await other.aclose()
    finally:
        await conn.aclose()


@_BACKENDS
async def test_a_running_worker_keeps_its_fingerprint_past_the_ttl_and_stops_when_closed(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    # The fingerprint was written only when a worker started: TTL after that, a worker still running left no trace
    # of its app, and another app started on its prefix was not warned about.
    ttl = backend.ttl
    conn = backend.connect()
    caplog.set_level(logging.WARNING, "mcpkit")
    claim = backend.claim(conn, "alpha aaaaaaaaaaaa", ttl)
    try:
        await claim.start()
        assert len(claim_tasks()) == 1
        started = time.monotonic()
        while time.monotonic() - started < 2.5 * ttl:  # (past two TTLs: only refreshes keep it)
            kept = await backend.stored(conn)
            assert kept is not None and kept[0] == "alpha aaaaaaaaaaaa", kept
            assert 0 < kept[1] <= ttl  # (the bound)
            await asyncio.sleep(0.25)
        assert caplog.records == []
        # another app starting now is warned about, and the running worker says so too at its next refresh
        assert await backend.claim_prefix(conn, "beta bbbbbbbbbbbb", ttl=ttl) == "alpha aaaaaaaaaaaa"
        deadline = time.monotonic() + 3 * ttl
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
    await backend.claim_prefix(conn, "alpha aaaaaaaaaaaa", ttl=ttl)
    deadline = time.monotonic() + 3 * ttl
    while await backend.stored(conn) is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.25)
    assert await backend.stored(conn) is None
    await conn.aclose()


@pytest.mark.parametrize("name", ["redis", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_claim_refuses_a_ttl_that_is_not_positive(name: str) -> None:
    backend = Backend(name, "redis://127.0.0.1:1" if name == "redis" else "postgresql://x@127.0.0.1:1/x")
    with pytest.raises(ValueError, match="ttl"):
        backend.claim(backend.connect(), "a b", ttl=0)
