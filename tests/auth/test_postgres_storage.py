"""What is PostgreSQL's own in ``PostgresAuthStorage`` and ``PostgresReplayCache``, against a real PostgreSQL: the
table holds digests and sealed records only, expired rows are swept in bounded batches that keep pace with the
writes, and leases follow the database's clock, not a replica's. The contract every storage holds is tested in
tests/auth/test_storage.py (and the proxy's, in test_upstream_state.py and test_upstream_revocation.py)."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcpkit.auth import PostgresAuthStorage, PostgresReplayCache
from mcpkit.auth.postgres_storage import MAX_SWEEP
from mcpkit.auth.storage import CodeGrant, RefreshGrant
from mcpkit.stores.postgres import PostgresConnection
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)


@pytest.fixture
async def pg(postgres_url: str) -> AsyncIterator[PostgresConnection]:  # noqa: F811
    conn = PostgresConnection(postgres_url, prefix=f"t{time.time_ns()}_")
    try:
        yield conn
    finally:
        await conn.aclose()


async def _rows(storage: PostgresAuthStorage, where: str = "true") -> list[Any]:
    async with storage.conn.acquire("test") as db:
        return list(await db.fetch(f"SELECT * FROM {storage.table} WHERE {where}"))


async def test_codes_and_refresh_tokens_are_kept_under_their_digest_only(pg: PostgresConnection) -> None:
    """Whoever reads the table (a replica, a dump, a backup) finds no code or refresh token that redeems: each is
    kept under its SHA-256, and the digest, presented as a token, takes nothing."""
    storage = PostgresAuthStorage(pg)
    code, refresh = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    await storage.save_code(code, CodeGrant("c", "https://r", "x" * 43, [], None, "alice", time.time() + 60))
    await storage.save_refresh(refresh, RefreshGrant("c", ["s"], None, "alice", time.time() + 60, "fam", "jkt"))
    rows = await _rows(storage)
    dump = b" ".join(repr(dict(row)).encode() for row in rows)
    assert len(rows) == 2 and code.encode() not in dump and refresh.encode() not in dump
    for row in rows:
        assert await storage.pop_code(row["key"]) is None and await storage.pop_refresh(row["key"]) is None
    assert (await storage.pop_code(code)) is not None and (await storage.take_refresh(refresh, "jkt")) is not None


async def test_a_code_past_its_expiry_is_never_given_and_expired_rows_are_swept_in_bounded_batches(
    pg: PostgresConnection,
) -> None:
    """A row past its expiry is never read (a code saved with a lifetime already over is not given back), and the
    sweep deletes at most ``MAX_SWEEP`` expired rows at a time; one that found a full batch lets the next write
    sweep again at once (a sweep a minute could not keep up with more than ``MAX_SWEEP`` expiries a minute)."""
    storage = PostgresAuthStorage(pg, sweep_every=3600)
    code = secrets.token_urlsafe(32)
    await storage.save_code(code, CodeGrant("c", "https://r", "x", [], None, "alice", time.time() - 1))
    assert await storage.pop_code(code) is None
    async with storage.conn.acquire("test") as db:  # (expired rows written in bulk)
        await db.execute(
            f"INSERT INTO {storage.table} (kind, key, value, expires_at) SELECT 'spent', 'k' || n, '', "
            f"clock_timestamp() - interval '1 second' FROM generate_series(1, {MAX_SWEEP + 20}) AS n"
        )
    assert await storage.used("k1") is None  # never read past its expiry
    assert await storage.sweep() == MAX_SWEEP  # a full batch: the next write sweeps again
    assert len(await _rows(storage, "expires_at <= clock_timestamp()")) == 20
    await storage.mark_used("live", "fam", time.time() + 60)  # (a write: it sweeps the rest)
    assert await _rows(storage, "expires_at <= clock_timestamp()") == []
    assert await storage.used("live") == "fam"
    await storage.mark_used("other", "fam", time.time() + 60)  # (caught up: no sweep before sweep_every)


async def test_a_replay_cache_remembers_a_key_until_it_expires_on_the_database_clock(pg: PostgresConnection) -> None:
    """The first use wins across workers; a key whose JWT is past its expiry on the database's clock is refused and
    not kept; a key kept past its expiry is free again (its row replaced, not added)."""
    first, second = PostgresReplayCache(pg), PostgresReplayCache(pg)
    now = time.time()
    assert await first.first_use("jti-1", now, now + 60)
    assert not await second.first_use("jti-1", now, now + 60)
    assert not await first.first_use("old", now - 120, now - 60)  # expired already: refused, not kept
    assert await first.first_use("short", now, time.time() + 1.0)  # (a JWT past its expiry would be refused)
    await asyncio.sleep(1.1)
    assert await second.first_use("short", now, time.time() + 60)
    async with pg.acquire("test") as db:
        kinds = await db.fetch(f"SELECT key FROM {first.table} WHERE kind = 'jti' ORDER BY key")
    assert [row["key"] for row in kinds] == ["jti-1", "short"]


async def test_the_count_of_refresh_tokens_without_an_expiry_matches_the_rows_whatever_races(
    pg: PostgresConnection,
) -> None:
    """Refresh tokens without an expiry are counted in a row of their own (trimming at the bound then deletes the
    few oldest rows instead of counting 100,000 at each save: measured 74 ms a save against 5 ms with the count, on
    a loaded machine). Two replicas saving, taking (bound and unbound) and saving again the same tokens at once, one
    of them with an expiry, keep that count equal to the rows without one, and the bound exact."""
    first, second = PostgresAuthStorage(pg, max_refresh_tokens=30), PostgresAuthStorage(pg, max_refresh_tokens=30)
    tokens = [secrets.token_urlsafe(32) for _ in range(40)]

    def record(i: int, expires_at: float | None = None) -> RefreshGrant:
        return RefreshGrant("c", ["s"], None, "u", expires_at, "fam", "jkt" if i % 2 else None)

    await asyncio.gather(*(s.save_refresh(t, record(i)) for i, t in enumerate(tokens) for s in (first, second)))
    taken = await asyncio.gather(
        *(s.take_refresh(t, "jkt" if i % 2 else None) for i, t in enumerate(tokens[:20]) for s in (first, second))
    )
    await asyncio.gather(*(first.save_refresh(t, record(i)) for i, t in enumerate(tokens[20:25])))  # again
    later = time.time() + 60
    await asyncio.gather(
        *(
            s.save_refresh(t, record(i, e))
            for i, t in enumerate(tokens[25:35])
            for s, e in ((first, later), (second, None))
        )
    )
    rows = await _rows(first, "kind = 'refresh' AND stamp IS NOT NULL")
    async with pg.acquire("test") as db:
        count = await db.fetchval(f"SELECT size FROM {first.table} WHERE kind = 'count' AND key = 'refresh'")
    assert count == len(rows) <= 30
    assert sum(1 for t in taken if t is not None) <= 20


async def test_the_storage_and_the_stores_make_their_tables_in_the_schema_given(postgres_url: str) -> None:  # noqa: F811
    """``PostgresConnection(schema=)`` failed at its first statement: the stores' tables were made with indexes named
    ``"schema".name``, which PostgreSQL refuses (an index lives in its table's schema). Indexes are named without it
    now: the stores' tables and the OAuth table are made in the schema, and used there."""
    import asyncpg

    from mcpkit.stores.postgres import PostgresSessionStore

    schema = f"s{time.time_ns()}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f"CREATE SCHEMA {schema}")
        pg = PostgresConnection(postgres_url, schema=schema)
        try:
            storage, sessions = PostgresAuthStorage(pg), PostgresSessionStore(pg)
            await storage.mark_used("k", "fam", None)
            await sessions.save("s1", {"v": 1}, 60)
            assert await storage.used("k") == "fam" and await sessions.load("s1") == {"v": 1}
        finally:
            await pg.aclose()
        made = await admin.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
        assert {"mcpkit_oauth", "mcpkit_sessions", "mcpkit_tasks"} <= {row["tablename"] for row in made}
    finally:
        await admin.execute(f"DROP SCHEMA {schema} CASCADE")
        await admin.close()
