"""Tasks every worker serves, in PostgreSQL: :class:`PostgresTaskStore`.

One row per task in ``<prefix>tasks`` (the record as JSON, its owner, creation time, estimated payload bytes,
whether it is in progress, and when it may go: :func:`~mcpkit.tasks.model.kept_until`). A creation is ONE
transaction under a transaction-level advisory lock (the caps on tasks in progress and the bounds on tasks kept,
per caller and in total, in records and bytes, hold for every worker at once: past a bound the oldest finished task
goes, of that caller or of anyone, never one in progress). An update takes the same lock, locks the task's row
(``SELECT ... FOR UPDATE``), applies the engine's change and writes it back. The bytes kept, per caller and in all,
are running totals in ``<prefix>task_bytes`` that a trigger keeps in the transaction of every change of a task row,
so checking the byte bounds reads one row, however many tasks there are. Rows past their time are never read, and
are deleted by a bounded sweep. Every change is announced with ``NOTIFY`` (the payload: the task's id), which each
store's ``LISTEN`` connection turns into calls of its listeners, so a ``tasks/result`` waiting on one worker wakes
up when another worker ends the task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from typing import Any

import orjson

from ...protocol.errors import TaskLimitReached
from ...tasks.model import TaskRecord, is_terminal, kept_until, now_ms
from ...tasks.store import (
    MAX_BYTES,
    MAX_BYTES_PER_OWNER,
    MAX_RECORDS,
    MAX_RECORDS_PER_OWNER,
    Change,
    KeptBounds,
    Listener,
    Listeners,
    kept_refused,
    total_refused,
)
from .connection import DEFAULT_TIMEOUT, PostgresConnection, postgres_for

logger: logging.Logger = logging.getLogger("mcpkit.stores.postgres")

__all__ = ["MAX_SWEEP", "PostgresTaskStore"]

#: Expired tasks one clean-up deletes at most (one clean-up a minute per worker).
MAX_SWEEP = 500
_ALIVE = "(kept_until IS NULL OR kept_until > $1)"


def _size(record: TaskRecord) -> int:
    return len(orjson.dumps(record))


class PostgresTaskStore(KeptBounds):
    """A :class:`~mcpkit.tasks.store.TaskStore` in PostgreSQL (see the module docstring), shared by every worker:
    ``app.enable_tasks(PostgresTaskStore(pg))``, or built by ``create_app`` from a PostgreSQL configuration.

    Args:
        postgres: a URL or a shared :class:`~mcpkit.stores.postgres.PostgresConnection`.
        prefix, timeout: for a URL.
        max_records, max_bytes, max_records_per_owner, max_bytes_per_owner: as
            :class:`~mcpkit.tasks.store.InMemoryTaskStore` (bytes: the record's JSON).
    """

    def __init__(
        self,
        postgres: str | PostgresConnection,
        *,
        prefix: str = "mcpkit_",
        timeout: float = DEFAULT_TIMEOUT,
        max_records: int = MAX_RECORDS,
        max_bytes: int = MAX_BYTES,
        max_records_per_owner: int = MAX_RECORDS_PER_OWNER,
        max_bytes_per_owner: int = MAX_BYTES_PER_OWNER,
    ) -> None:
        self._keep_within(max_records, max_bytes, max_records_per_owner, max_bytes_per_owner)
        self.conn: PostgresConnection
        self.conn, self._owns = postgres_for(postgres, prefix=prefix, timeout=timeout)
        self._table: str = self.conn.tables["tasks"]
        self._bytes: str = self.conn.tables["task_bytes"]
        self.channel: str = f"{self.conn.prefix}tasks"
        self._origin = secrets.token_hex(8)
        self._listeners = Listeners()
        self._listener: Any = None
        self._listening: asyncio.Task[None] | None = None
        self._closed = False

    # ------------------------------------------------------------------ the TaskStore interface

    async def create(self, record: TaskRecord, *, max_live: int, max_live_per_owner: int) -> None:
        t, owner, now = self._table, record.get("owner"), now_ms()
        mine = "owner IS NOT DISTINCT FROM $2"
        async with self.conn.transaction("task store") as db:
            await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", t)
            live = await db.fetchval(f"SELECT count(*) FROM {t} WHERE live AND {_ALIVE}", now)
            if live >= max_live:
                raise TaskLimitReached(
                    f"the server has {max_live} tasks in progress, as many as it allows (max_tasks): retry later"
                )
            if await db.fetchval(f"SELECT count(*) FROM {t} WHERE live AND {_ALIVE} AND {mine}", now, owner) >= (
                max_live_per_owner
            ):
                raise TaskLimitReached(
                    f"{max_live_per_owner} tasks of yours are in progress, as many as this server allows per caller "
                    "(max_tasks_per_principal): wait for one to finish or cancel one"
                )
            await db.execute(f"DELETE FROM {t} WHERE {mine} AND NOT {_ALIVE}", now, owner)
            owned = await db.fetchval(f"SELECT count(*) FROM {t} WHERE owner IS NOT DISTINCT FROM $1", owner)
            if owned >= self.max_records_per_owner and not await self._drop_oldest(db, now, owner, None):
                raise kept_refused(self.max_records_per_owner)
            if self.conn.sweep_due(t, 60.0):
                await self._sweep(db, now)
            if await db.fetchval(f"SELECT count(*) FROM {t} WHERE {_ALIVE}", now) >= self.max_records:
                await self._sweep(db, now)
                kept = await db.fetchval(f"SELECT count(*) FROM {t} WHERE {_ALIVE}", now)
                if kept >= self.max_records and not await self._drop_oldest(db, now, None, None, everyone=True):
                    raise total_refused(self.max_records)
            data = orjson.dumps(record)
            await db.execute(
                f"INSERT INTO {t} (id, owner, created, record, size, live, kept_until) VALUES ($1, $2, $3, $4, $5, "
                "$6, $7)",
                record["id"],
                owner,
                int(record["created"]),
                data,
                len(data),
                not is_terminal(record),
                kept_until(record),
            )
            await self._fit(db, now, owner, record["id"])
            await db.execute("SELECT pg_notify($1, $2)", self.channel, f"{self._origin}:{record['id']}")
        self._listeners.tell(record["id"])

    async def get(self, task_id: str) -> TaskRecord | None:
        async with self.conn.acquire("task store") as db:
            raw = await db.fetchval(f"SELECT record FROM {self._table} WHERE id = $2 AND {_ALIVE}", now_ms(), task_id)
        return None if raw is None else orjson.loads(raw)  # type: ignore[no-any-return]

    async def update(self, task_id: str, change: Change) -> TaskRecord | None:
        t, now = self._table, now_ms()
        async with self.conn.transaction("task store") as db:
            await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", t)  # (see _fit)
            raw = await db.fetchval(f"SELECT record FROM {t} WHERE id = $2 AND {_ALIVE} FOR UPDATE", now, task_id)
            if raw is None:
                return None
            draft: TaskRecord = orjson.loads(raw)
            if not change(draft):
                return draft
            data = orjson.dumps(draft)
            await db.execute(
                f"UPDATE {t} SET record = $2, size = $3, live = $4, kept_until = $5 WHERE id = $1",
                task_id,
                data,
                len(data),
                not is_terminal(draft),
                kept_until(draft),
            )
            await self._fit(db, now, draft.get("owner"), task_id)
            await db.execute("SELECT pg_notify($1, $2)", self.channel, f"{self._origin}:{task_id}")
        self._listeners.tell(task_id)
        return orjson.loads(data)  # type: ignore[no-any-return]

    async def delete(self, task_id: str) -> None:
        async with self.conn.transaction("task store") as db:
            await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", self._table)  # (see _fit)
            await db.execute(f"DELETE FROM {self._table} WHERE id = $1", task_id)

    async def list(self, owner: str | None, after: tuple[int, str] | None, limit: int) -> list[TaskRecord]:
        created, last = after if after is not None else (-(2**62), "")
        async with self.conn.acquire("task store") as db:
            rows = await db.fetch(
                f"SELECT record FROM {self._table} WHERE owner IS NOT DISTINCT FROM $2 AND {_ALIVE} AND "
                "(created, id) > ($3, $4) ORDER BY created, id LIMIT $5",
                now_ms(),
                owner,
                int(created),
                str(last),
                int(limit),
            )
        return [orjson.loads(row["record"]) for row in rows]

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(task_id)`` after every change of a task, on this worker or another (through ``LISTEN``,
        opened with the first subscription)."""
        if self._listening is None and not self._closed:
            with contextlib.suppress(RuntimeError):  # (no running loop: this worker's own changes only)
                self._listening = asyncio.get_running_loop().create_task(self._listen())
        return self._listeners.subscribe(listener)

    async def aclose(self) -> None:
        """Stop listening; close the connection if this store made it."""
        self._closed = True
        self._listeners.clear()
        if self._listening is not None:
            self._listening.cancel()
            with contextlib.suppress(BaseException):
                await self._listening
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.terminate()
        if self._owns:
            await self.conn.aclose()

    # ------------------------------------------------------------------ internals

    async def _listen(self) -> None:
        """Keep a ``LISTEN`` connection open (reopened when it drops) while the store lives."""
        import asyncpg

        delay = 0.1
        while not self._closed:
            try:
                if self._listener is None or self._listener.is_closed():
                    await self.conn.pool()  # (the tables exist)
                    # (asyncpg's annotation says int; it takes seconds as a float)
                    listener = await asyncpg.connect(self.conn.url, timeout=self.conn.timeout)  # pyright: ignore[reportArgumentType]
                    await listener.add_listener(self.channel, self._on_notify)
                    self._listener = listener
                    delay = 0.1
                await asyncio.sleep(2.0)
                await self._listener.execute("SELECT 1")  # (notices a connection that died quietly)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning("postgres task store: change notifications unavailable (retrying): %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    def _on_notify(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        origin, _, task_id = payload.partition(":")
        if origin != self._origin and task_id:
            self._listeners.tell(task_id)

    async def _drop_oldest(
        self, db: Any, now: int, owner: str | None, keep: str | None, *, everyone: bool = False
    ) -> bool:
        """Delete the oldest finished task (of ``owner``, or of anyone), never ``keep``; whether one went."""
        t = self._table
        pick = f"SELECT id FROM {t} WHERE NOT live AND id <> $1"
        if everyone:
            gone = await db.fetchval(
                f"DELETE FROM {t} WHERE id = ({pick} ORDER BY created, id LIMIT 1) RETURNING id", keep or ""
            )
        else:
            gone = await db.fetchval(
                f"DELETE FROM {t} WHERE id = ({pick} AND owner IS NOT DISTINCT FROM $2 ORDER BY created, id LIMIT 1) "
                "RETURNING id",
                keep or "",
                owner,
            )
        return gone is not None

    async def _fit(self, db: Any, now: int, owner: str | None, task_id: str) -> None:
        """Past the bytes of one owner, or of everyone, the oldest finished tasks go (never ``task_id``).

        The bytes are read from ``<prefix>task_bytes``, the running totals a trigger keeps in the transaction of
        every change of a task row (one row read, however many tasks there are). Every transaction that changes task
        rows holds the store's advisory lock first, so the totals are exact when read and two writers never wait on
        each other's total rows (no deadlock)."""
        b = self._bytes
        bytes_of = f"SELECT coalesce((SELECT bytes FROM {b} WHERE key = $1), 0)"
        while await db.fetchval(bytes_of, "-" if owner is None else f"o:{owner}") > self.max_bytes_per_owner:
            if not await self._drop_oldest(db, now, owner, task_id):
                break
        while await db.fetchval(bytes_of, "*") > self.max_bytes:
            if not await self._drop_oldest(db, now, None, task_id, everyone=True):
                break

    async def _sweep(self, db: Any, now: int) -> None:
        t = self._table
        await db.execute(
            f"DELETE FROM {t} WHERE id IN (SELECT id FROM {t} WHERE kept_until <= $1 LIMIT {MAX_SWEEP})", now
        )
