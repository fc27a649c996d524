"""PostgresTaskStore shared by two workers (two stores, two pools, one PostgreSQL): a change made through one is
heard by the other's listeners (LISTEN/NOTIFY) and read there, and the caps on tasks in progress hold for both
together when they create at the same moment. (The store kit's task contract runs in
tests/testing/test_stores.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator

import orjson
import pytest

from mcpkit.protocol.errors import TaskLimitReached
from mcpkit.stores.postgres import PostgresTaskStore
from mcpkit.tasks.model import TaskRecord, new_record
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.postgres


@contextlib.asynccontextmanager
async def two_workers(url: str, **options: int) -> AsyncIterator[tuple[PostgresTaskStore, PostgresTaskStore]]:
    prefix = f"t{secrets.token_hex(4)}_"
    a, b = PostgresTaskStore(url, prefix=prefix, **options), PostgresTaskStore(url, prefix=prefix, **options)
    try:
        yield a, b
    finally:
        await a.aclose()
        await b.aclose()


def _task(owner: str | None) -> TaskRecord:
    return new_record(owner=owner, method="tools/call", name="t", ttl_ms=60_000, poll_ms=100)


async def test_a_change_made_on_one_worker_is_heard_and_read_on_the_other(postgres_url: str) -> None:  # noqa: F811
    async with two_workers(postgres_url) as (a, b):
        heard: list[str] = []
        b.subscribe(heard.append)
        await asyncio.sleep(0.5)  # (B's LISTEN connection opens)
        record = _task("p:alice")
        await a.create(record, max_live=10, max_live_per_owner=10)

        def finish(r: TaskRecord) -> bool:
            r["status"] = "completed"
            r["result"] = {"content": [{"type": "text", "text": "done"}]}
            return True

        await a.update(record["id"], finish)
        deadline = time.monotonic() + 10
        while heard.count(record["id"]) < 2:  # the creation and the change, told to B by PostgreSQL
            assert time.monotonic() < deadline, heard
            await asyncio.sleep(0.05)
        got = await b.get(record["id"])
        assert got is not None and got["status"] == "completed" and got["result"]["content"][0]["text"] == "done"
        assert [r["id"] for r in await b.list("p:alice", None, 10)] == [record["id"]]


async def test_the_caps_on_tasks_in_progress_hold_across_workers(postgres_url: str) -> None:  # noqa: F811
    async with two_workers(postgres_url) as (a, b):
        tasks = [_task(f"p:caller-{n % 3}") for n in range(20)]
        results = await asyncio.gather(
            *((a if n % 2 else b).create(record, max_live=5, max_live_per_owner=100) for n, record in enumerate(tasks)),
            return_exceptions=True,
        )
        made = [r for r in results if r is None]
        refused = [r for r in results if isinstance(r, TaskLimitReached)]
        assert len(made) == 5 and len(refused) == 15, results  # five in progress, whichever worker took them


def _finished(owner: str | None, pad: int) -> TaskRecord:
    record = _task(owner)
    record["status"] = "completed"
    record["result"] = {"content": [{"type": "text", "text": "x" * pad}]}
    return record


async def test_the_byte_bounds_hold_exactly_under_creates_from_two_workers_at_once(postgres_url: str) -> None:  # noqa: F811
    """Two workers create 60 finished tasks at once, of three callers, past both byte bounds: the bytes kept never
    pass either bound (the oldest finished tasks go), and the running totals the bounds are checked against equal
    the bytes really kept, per caller and in all, after every burst."""
    size = len(orjson.dumps(_finished("p:caller-0", 1000)))
    bounds = {"max_bytes": 10 * size, "max_bytes_per_owner": 4 * size}
    async with two_workers(postgres_url, **bounds) as (a, b):
        for burst in range(3):
            tasks = [_finished(f"p:caller-{n % 3}", 1000) for n in range(20)]
            await asyncio.gather(
                *((a if n % 2 else b).create(r, max_live=100, max_live_per_owner=100) for n, r in enumerate(tasks))
            )
            async with a.conn.acquire("test") as db:
                t = a.conn.tables["tasks"]
                kept = {
                    row["owner"]: row["bytes"]
                    for row in await db.fetch(f"SELECT owner, sum(size) AS bytes FROM {t} GROUP BY owner")
                }
                totals = {
                    row["key"]: row["bytes"]
                    for row in await db.fetch(f"SELECT key, bytes FROM {a.conn.tables['task_bytes']}")
                }
            assert sum(kept.values()) <= bounds["max_bytes"], (burst, kept)
            assert all(n <= bounds["max_bytes_per_owner"] for n in kept.values()), (burst, kept)
            assert totals == {"*": sum(kept.values()), **{f"o:{owner}": n for owner, n in kept.items()}}, burst
            assert sum(kept.values()) > bounds["max_bytes"] - size  # (full: the oldest went, not everything)


async def test_tables_an_older_mcpkit_made_get_their_byte_totals_on_first_use(postgres_url: str) -> None:  # noqa: F811
    """Task tables made before the running totals existed (no ``task_bytes`` table, no trigger) have them made and
    filled from the rows already there when a worker first opens them, so the byte bounds count those tasks."""
    async with two_workers(postgres_url) as (a, _):
        for owner in ("p:one", "p:one", "p:two", None):
            await a.create(_finished(owner, 100), max_live=100, max_live_per_owner=100)
        async with a.conn.acquire("test") as db:
            await db.execute(f"DROP TABLE {a.conn.tables['task_bytes']}")
            await db.execute(f"DROP FUNCTION {a.conn.tables['task_bytes_f']}() CASCADE")  # (and its triggers)
        later = PostgresTaskStore(postgres_url, prefix=a.conn.prefix)
        try:
            await later.create(_finished("p:two", 100), max_live=100, max_live_per_owner=100)
            async with later.conn.acquire("test") as db:
                t = later.conn.tables["tasks"]
                kept = {
                    row["key"]: row["bytes"]
                    for row in await db.fetch(
                        f"SELECT coalesce('o:' || owner, '-') AS key, sum(size) AS bytes FROM {t} GROUP BY owner"
                    )
                }
                totals = {
                    row["key"]: row["bytes"]
                    for row in await db.fetch(f"SELECT key, bytes FROM {later.conn.tables['task_bytes']}")
                }
        finally:
            await later.aclose()
        assert set(kept) == {"o:p:one", "o:p:two", "-"}
        assert totals == {"*": sum(kept.values()), **kept}
