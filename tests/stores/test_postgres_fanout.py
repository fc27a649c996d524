"""PostgresFanout (a log table woken by LISTEN/NOTIFY), PostgresConnection (the bounded pool, the breaker, URL
checks) and the bounds of the PostgreSQL stores, against a real PostgreSQL: a worker cut off past the log's bound
tells its clients to look again; answers are forwarded to the worker that waits for them; every table stays
bounded. (What every backend's fan-out does alike, delivery in one order and catching up after a cut:
tests/stores/test_log_fanout.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcpkit.stores.log import position_order, worker_of
from mcpkit.stores.postgres import (
    MAX_POOL_SIZE,
    PostgresConnection,
    PostgresEventStore,
    PostgresFanout,
    PostgresSessionStore,
)
from mcpkit.stores.redis import StoreUnavailable
from support.fanout_recorder import cut_off_past_the_log_bound, recording, the_outbox_keeps_its_bound
from support.postgres_server import _free_port, postgres_url  # noqa: F401  (the session fixture)
from support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgres


def _prefix() -> str:
    return f"t{secrets.token_hex(4)}_"


@contextlib.asynccontextmanager
async def fanouts(urls: list[str], *, prefix: str | None = None, **options: Any) -> AsyncIterator[list[PostgresFanout]]:
    prefix = prefix or _prefix()
    made = [PostgresFanout(url, prefix=prefix, **options) for url in urls]
    try:
        yield made
    finally:
        for fanout in made:
            await fanout.aclose()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _via(url: str, port: int) -> str:
    return url.replace(f":{_port(url)}/", f":{port}/")


async def test_answers_are_forwarded_to_the_inbox_of_the_worker_that_waits(postgres_url: str) -> None:  # noqa: F811
    async with fanouts([postgres_url] * 2) as (a, b):
        await recording(a)
        await recording(b)
        got: list[Any] = []
        arrived = asyncio.Event()

        async def inbox(entry: Any) -> None:
            got.append(entry)
            arrived.set()

        a.on_session_event(inbox)
        rid = a.id_base + 7
        assert worker_of(rid) == a.worker
        assert await b.forward(worker_of(rid) or 0, "sess-1", b'{"jsonrpc":"2.0","id":1,"result":{}}', owner="p")
        await asyncio.wait_for(arrived.wait(), 10)
        assert [(e.kind, e.value, e.data, e.owner) for e in got] == [
            ("forward", "sess-1", b'{"jsonrpc":"2.0","id":1,"result":{}}', "p")
        ]
        assert await b.alive(a.worker)
        gone = a.worker
        await a.aclose()
        assert not await b.alive(gone)
        assert not await b.forward(gone, "sess-1", b"{}")  # nobody waits there any more: refused, not queued


async def test_session_messages_keep_their_bytes_out_of_the_notification(postgres_url: str) -> None:  # noqa: F811
    async with fanouts([postgres_url] * 2) as (a, b):
        await recording(a)
        await recording(b)
        seen: list[Any] = []

        async def record(entry: Any) -> None:
            seen.append(entry)

        b.on_session_event(record)
        before = b.position
        assert before is not None
        big = b"x" * 100_000  # far past the 8,000 bytes a NOTIFY payload may carry
        pos = await a.post("sess-2", "direct", big)
        cancel = await a.post("sess-2", "cancel", b'{"method":"notifications/cancelled"}')
        assert position_order(before) < position_order(pos) < position_order(cancel)
        deadline = time.monotonic() + 10
        while len(seen) < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        direct, cancelled = seen
        assert (direct.kind, direct.value, direct.position) == ("direct", "sess-2", pos)
        assert direct.data is None and await b.payload(direct) == big  # read from the table by the sender only
        assert (cancelled.kind, cancelled.data) == ("cancel", b'{"method":"notifications/cancelled"}')
        entries = await b.read(before)
        assert entries is not None and [e.position for e in entries] == [pos, cancel]
        with pytest.raises(ValueError):
            await a.post("sess-2", "cancel", b"y" * 5000)  # inline messages are bounded


async def test_a_worker_cut_off_past_the_log_bound_tells_its_clients_to_look_again(
    postgres_url: str,  # noqa: F811
) -> None:
    prefix = _prefix()
    with TcpProxy(_port(postgres_url)) as proxy:
        async with (
            fanouts([postgres_url], prefix=prefix, max_log=100) as (a,),
            fanouts([_via(postgres_url, proxy.port)], prefix=prefix, max_log=100, timeout=1.0) as (b,),
        ):

            async def the_log_table_is_bounded() -> None:
                async with a.conn.acquire("test") as db:
                    rows = await db.fetchval(f"SELECT count(*) FROM {a.conn.tables['log']}")
                assert rows <= a.max_log + 64

            await cut_off_past_the_log_bound(a, b, proxy, 400, timeout=30, while_cut=the_log_table_is_bounded)


async def test_publish_without_the_database_tells_this_workers_clients_now_and_the_others_later(
    postgres_url: str,  # noqa: F811
) -> None:
    prefix = _prefix()
    with TcpProxy(_port(postgres_url)) as proxy:
        async with (
            fanouts([postgres_url], prefix=prefix) as (a,),
            fanouts([_via(postgres_url, proxy.port)], prefix=prefix, timeout=0.5, max_unsent=3) as (b,),
        ):
            await the_outbox_keeps_its_bound(a, b, proxy, timeout=30)


async def test_a_workers_inbox_is_bounded(postgres_url: str) -> None:  # noqa: F811
    async with fanouts([postgres_url] * 2, max_inbox=100) as (a, b):
        await recording(a)
        await recording(b)
        a._tasks[1].cancel()  # (nobody reads A's inbox: only the bound keeps it small)
        with contextlib.suppress(BaseException):
            await a._tasks[1]
        for i in range(300):
            assert await b.forward(a.worker, "s", f"answer {i}".encode())
        async with a.conn.acquire("test") as db:
            kept = await db.fetch(f"SELECT data FROM {a.conn.tables['inbox']} WHERE worker = $1 ORDER BY id", a.worker)
        assert [bytes(r["data"]) for r in kept] == [f"answer {i}".encode() for i in range(200, 300)]


async def test_an_unreachable_database_fails_at_once_with_the_password_hidden() -> None:
    conn = PostgresConnection(f"postgresql://u:secret@127.0.0.1:{_free_port()}/db", timeout=0.5, breaker=5.0)
    store = PostgresSessionStore(conn)
    try:
        with pytest.raises(StoreUnavailable) as caught:
            await store.load("s")
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):  # the breaker is open: no second wait
            await store.load("s")
        assert time.monotonic() - started < 0.1
        assert "secret" not in str(caught.value)
    finally:
        await conn.aclose()


def test_urls_prefixes_and_pool_sizes_are_checked_where_given() -> None:
    with pytest.raises(ValueError, match=r"not a PostgreSQL URL: 'redis://u:\*\*\*@h/0'"):
        PostgresConnection("redis://u:secret@h/0")
    with pytest.raises(ValueError, match="prefix"):
        PostgresConnection("postgresql://h/db", prefix="Robert'); DROP TABLE students;--")
    with pytest.raises(ValueError, match="pool_size"):
        PostgresConnection("postgresql://h/db", pool_size=MAX_POOL_SIZE + 1)
    with pytest.raises(ValueError, match="pool_size"):
        PostgresConnection("postgresql://h/db", pool_size=0)


async def test_a_pool_holds_at_most_its_size_of_connections(postgres_url: str) -> None:  # noqa: F811
    conn = PostgresConnection(postgres_url, prefix=_prefix(), pool_size=3)
    store = PostgresSessionStore(conn)
    try:
        await asyncio.gather(*(store.save(f"s{i}", {"n": i}, 60) for i in range(40)))
        pool = await conn.pool()
        assert pool.get_max_size() == 3 and pool.get_size() <= 3
        assert [await store.load(f"s{i}") for i in range(40)] == [{"n": i} for i in range(40)]
    finally:
        await conn.aclose()


async def test_expired_rows_are_swept_a_bounded_number_at_a_time(postgres_url: str) -> None:  # noqa: F811
    from mcpkit.stores.postgres import events, sessions

    conn = PostgresConnection(postgres_url, prefix=_prefix())
    store = PostgresSessionStore(conn, sweep_every=3600)
    streams = PostgresEventStore(conn, ttl=0.2, sweep_every=3600)
    try:
        async with conn.acquire("test") as db:  # more expired rows than one sweep takes
            await db.execute(
                f"INSERT INTO {conn.tables['sessions']} SELECT 'x' || n, '{{}}'::bytea, clock_timestamp() - "
                "interval '1 second' FROM generate_series(1, $1) AS n",
                sessions.MAX_SWEEP + 20,
            )
        assert conn.sweep_due(conn.tables["sessions"], 3600)  # (swept just now, as far as this worker knows)
        assert await store.sweep() == sessions.MAX_SWEEP
        await store.save("live", {}, 60)  # after a full batch, the next write sweeps again at once
        assert await store.sweep() == 0 and await store.load("live") == {}
        # (swept just now, as far as this worker knows: else the first append sweeps, and on a loaded machine the
        # first stream had expired by then, so the sweeps below found one fewer)
        assert conn.sweep_due(conn.tables["streams"], 3600)
        for n in range(events.MAX_SWEEP + 5):
            await streams.append(f"s/{n}", 1, b"e")
        await asyncio.sleep(0.3)
        assert await streams.sweep() == events.MAX_SWEEP
        await streams.append("live/0", 1, b"e")  # after a full batch, the next append sweeps again at once
        async with conn.acquire("test") as db:
            left = f"SELECT count(*) FROM {conn.tables['events']} WHERE stream LIKE 's/%'"
            assert await db.fetchval(left) == 0
    finally:
        await conn.aclose()


async def test_a_sessions_stored_events_stay_within_its_byte_budget(postgres_url: str) -> None:  # noqa: F811
    store = PostgresEventStore(postgres_url, prefix=_prefix(), max_bytes_per_session=1000, max_events_per_stream=50)
    try:
        for n in range(3):
            for seq in range(1, 5):
                await store.append(f"s/{n}", seq, b"x" * 100)
        assert await store.replay("s/0", 0) is None  # the stream written least recently went first
        await store.append("s/2", 5, b"y" * 900)  # past the budget within one stream: its oldest events go
        assert await store.replay("s/2", 4) == [(5, b"y" * 900)]
        assert await store.replay("s/2", 0) is None
        await store.append("other/0", 1, b"z" * 5000)  # one event larger than the budget is kept alone
        assert await store.replay("other/0", 0) == [(1, b"z" * 5000)]
        with pytest.raises(ValueError, match="not above"):
            await store.append("s/2", 5, b"again")  # two writers can never interleave one stream
    finally:
        await store.aclose()


async def test_tables_of_a_newer_layout_are_refused(postgres_url: str) -> None:  # noqa: F811
    prefix = _prefix()
    conn = PostgresConnection(postgres_url, prefix=prefix)
    try:
        await conn.ping()
        async with conn.acquire("test") as db:
            await db.execute(f"UPDATE {conn.tables['meta']} SET value = '99' WHERE key = 'version'")
    finally:
        await conn.aclose()
    later = PostgresConnection(postgres_url, prefix=prefix)
    try:
        with pytest.raises(RuntimeError, match="layout version 99"):
            await later.ping()
    finally:
        await later.aclose()
