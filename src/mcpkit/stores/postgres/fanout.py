"""Change notifications and messages between workers over PostgreSQL: :class:`PostgresFanout`.

Every event (a list changed, a resource updated, a session record changed, a message for one session) is one row of
ONE table, the notification log (``<prefix>log``, its ids from a sequence, trimmed to the newest ``max_log`` rows).
Rows are added under a transaction-level advisory lock, so they become visible in the order of their ids (a reader
never skips a row committed late). Each worker reads the log in order from where it is, its own events included:
every worker, the publishing one too, delivers every event in the same order, and the row's id is the event's
position (``<id>-0``: the SSE id of a handshake session's GET stream, see :mod:`mcpkit.stores.log`).

``NOTIFY`` only wakes the readers: its payload is a position (a few bytes; PostgreSQL refuses payloads of 8,000
bytes or more), never the message, which the reader takes from the table. A reader also looks every
:data:`BLOCK` seconds without being woken (a notification lost with a connection costs at most that long). A worker
cut off from PostgreSQL reads on from its last position when it is back; if the log was trimmed past that position
meanwhile, it tells its clients to look again (``deliver_missed``) rather than lose anything silently.

Each worker also takes a number (the first free one from a sequence; a row of ``<prefix>workers`` with a heartbeat
expiry) and has an inbox (rows of ``<prefix>inbox`` for it, at most ``max_inbox``, taken as they are read): an answer
to a request this worker sent that reached another worker is put there. A message for one session's GET stream
is a log row whose bytes are read only by the worker that sends it (:meth:`PostgresFanout.payload`).

Each worker holds one connection of its own for ``LISTEN`` besides the pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import Any

from ..base import StoreUnavailable
from ..log import LogEntry, position_order
from ..log_fanout import BATCH, TAKE_TRIES, WORKERS, LogFanout, Logged
from .connection import DEFAULT_TIMEOUT, PostgresConnection, delete_expired, postgres_for

logger: logging.Logger = logging.getLogger("mcpkit.stores.postgres")

__all__ = ["BLOCK", "MAX_INLINE", "MAX_SWEEP", "PostgresFanout"]

#: Largest message kept inline in a log row that every worker reads (a client's cancellation); larger are refused.
MAX_INLINE = 4096
#: Seconds a reader waits for a notification before it looks at the table anyway.
BLOCK = 2.0
#: Rows one clean-up (expired inbox messages, dead workers) deletes at most.
MAX_SWEEP = 500
_CHANNEL = re.compile(r"[a-z_][a-z0-9_]{0,15}\Z")


def _position(row_id: int) -> str:
    return f"{row_id}-0"


def _row_id(position: str) -> int:
    return position_order(position) >> 32


class PostgresFanout(LogFanout[PostgresConnection]):
    """A :class:`~mcpkit.stores.log.SharedFanout` over PostgreSQL (see the module docstring):
    ``create_app(server, fanout=PostgresFanout("postgresql://..."))`` on every worker, and a change on one reaches
    the clients of all, in one order, without loss.

    Args:
        postgres: a URL or a shared :class:`~mcpkit.stores.postgres.PostgresConnection`.
        prefix, timeout: for a URL (see :class:`~mcpkit.stores.postgres.PostgresConnection`).
        channel: the name of the ``NOTIFY`` channel (after the prefix; lower-case letters, digits, ``_``).
        max_log: rows the log keeps; a worker cut off for longer than this many events is told to look again.
        max_inbox: messages a worker's inbox keeps (the oldest go first).
        message_ttl: seconds an inbox message is kept unread.
        heartbeat: seconds between heartbeats (a worker is taken for gone after three missed).
        max_unsent: events this worker keeps while the log cannot be reached (beyond, the oldest are dropped and
            the other workers are told to look again).
    """

    conn: PostgresConnection
    channel: str
    forwarded: int

    _store = "PostgreSQL"
    _logger = logger
    _name = "postgres"

    def __init__(
        self,
        postgres: str | PostgresConnection,
        *,
        prefix: str = "mcpkit_",
        channel: str = "notify",
        max_log: int = 10_000,
        max_inbox: int = 10_000,
        message_ttl: float = 3600.0,
        heartbeat: float = 1.0,
        max_unsent: int = 10_000,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if max_log < 100 or max_inbox < 100:
            raise ValueError("max_log and max_inbox must be at least 100")
        super().__init__(
            max_log=max_log, max_inbox=max_inbox, message_ttl=message_ttl, heartbeat=heartbeat, max_unsent=max_unsent
        )
        if not _CHANNEL.match(channel):
            raise ValueError(f"channel {channel!r}: lower-case letters, digits and _, at most 16")
        self.conn, self._owns = postgres_for(postgres, prefix=prefix, timeout=timeout)
        t = self.conn.tables
        self._log_table, self._log_id = t["log"], t["log_id"]
        self._workers, self._worker_seq, self._inbox = t["workers"], t["worker_seq"], t["inbox"]
        self.channel = f"{self.conn.prefix}{channel}"
        self._inbox_channel = f"{self.channel}_in"
        self._listener: Any = None  # the LISTEN connection
        self._log_news = asyncio.Event()
        self._inbox_news = asyncio.Event()

    # ------------------------------------------------------------------ the SharedFanout interface

    async def read(self, after: str, limit: int = 500) -> list[LogEntry] | None:
        """Up to ``limit`` log entries after ``after`` (``""``: from the oldest kept); None when entries after
        ``after`` were trimmed."""
        since = _row_id(after) if after else 0
        async with self.conn.acquire("notification log") as db:
            if after:
                first = await db.fetchval(f"SELECT min(id) FROM {self._log_table}")
                if first is None or first > since:
                    return None
            rows = await self._rows(db, since, limit)
        return [entry for entry in (self._entry(self._logged(row)) for row in rows) if entry is not None]

    async def post(self, session_id: str, kind: str, data: bytes) -> str:
        """Log a message for one session (see :meth:`~mcpkit.stores.log.SharedFanout.post`)."""
        if kind != "direct" and len(data) > MAX_INLINE:
            raise ValueError(f"a {kind!r} message is limited to {MAX_INLINE} bytes")
        return await self._append(kind, session_id, data)

    async def payload(self, entry: LogEntry) -> bytes | None:
        """The bytes of a ``"direct"`` entry (None once trimmed)."""
        if entry.data is not None:
            return entry.data
        if entry.ref is None or not entry.ref.isdigit():
            return None
        async with self.conn.acquire("notification log") as db:
            data = await db.fetchval(
                f"SELECT data FROM {self._log_table} WHERE id = $1 AND kind = 'direct'", int(entry.ref)
            )
        return bytes(data) if data is not None else None

    async def forward(
        self, worker: int, session_id: str, data: bytes, *, kind: str = "forward", owner: str | None = None
    ) -> bool:
        """Put a client's message into worker ``worker``'s inbox; False when that worker is gone."""
        w, inbox = self._workers, self._inbox
        async with self.conn.transaction("worker inbox") as db:
            if not await db.fetchval(
                f"SELECT 1 FROM {w} WHERE worker = $1 AND alive_until > clock_timestamp()", worker
            ):
                return False
            await db.execute(
                f"INSERT INTO {inbox} (worker, session, kind, data, owner, expires_at) VALUES ($1, $2, $3, $4, $5, "
                "clock_timestamp() + make_interval(secs => $6))",
                worker,
                session_id,
                kind,
                data,
                owner,
                self.message_ttl,
            )
            await db.execute(
                f"DELETE FROM {inbox} WHERE worker = $1 AND id < (SELECT id FROM {inbox} WHERE worker = $1 "
                "ORDER BY id DESC OFFSET $2 LIMIT 1)",
                worker,
                self.max_inbox - 1,
            )
            await db.execute("SELECT pg_notify($1, $2)", self._inbox_channel, str(worker))
        self.forwarded += 1
        return True

    async def alive(self, worker: int) -> bool:
        """Whether worker ``worker`` beat within the last three heartbeats."""
        async with self.conn.acquire("worker inbox") as db:
            found = await db.fetchval(
                f"SELECT 1 FROM {self._workers} WHERE worker = $1 AND alive_until > clock_timestamp()", worker
            )
        return found is not None

    async def sweep(self, db: Any) -> None:
        """Delete at most :data:`MAX_SWEEP` expired inbox messages and as many long-dead workers' rows."""
        i, w = self._inbox, self._workers
        await delete_expired(db, i, "id", MAX_SWEEP)
        await db.execute(
            f"DELETE FROM {w} WHERE worker IN (SELECT worker FROM {w} WHERE alive_until < clock_timestamp() - "
            f"interval '1 hour' LIMIT {MAX_SWEEP})"
        )

    # ------------------------------------------------------------------ the storage (see LogFanout)

    async def _append(self, kind: str, value: str, data: bytes | None = None, *, late: bool = False) -> str:
        """Add a row to the log (in id order: under the advisory lock), wake the readers, trim the log."""
        table = self._log_table
        async with self.conn.transaction("notification log") as db:
            await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", table)
            row_id: int = await db.fetchval(
                f"INSERT INTO {table} (id, origin, kind, value, data, late) VALUES (nextval('{self._log_id}'), "
                "$1, $2, $3, $4, $5) RETURNING id",
                self.origin,
                kind,
                value,
                data,
                late,
            )
            if row_id % 64 == 0:  # (the trim every 64 rows: the log holds at most max_log + 64)
                await db.execute(f"DELETE FROM {table} WHERE id <= $1", row_id - self.max_log)
            await db.execute("SELECT pg_notify($1, $2)", self.channel, _position(row_id))
        return _position(row_id)

    async def _rows(self, db: Any, since: int, limit: int) -> list[Any]:
        rows: list[Any] = await db.fetch(
            f"SELECT id, origin, kind, value, CASE WHEN kind = 'direct' THEN NULL ELSE data END AS data, late "
            f"FROM {self._log_table} WHERE id > $1 ORDER BY id LIMIT $2",
            since,
            limit,
        )
        return rows

    @staticmethod
    def _logged(row: Any) -> Logged:
        kind, data = row["kind"], row["data"]
        ref = str(row["id"]) if kind == "direct" else None
        data = bytes(data) if data is not None else None
        return Logged(_position(row["id"]), row["origin"], kind, row["value"], data, ref, bool(row["late"]))

    async def _claim(self) -> tuple[int, str]:
        await self._listen()
        async with self.conn.acquire("fan-out") as db:
            for _ in range(TAKE_TRIES):
                n = int(await db.fetchval(f"SELECT nextval('{self._worker_seq}')"))
                worker = (n - 1) % WORKERS + 1
                taken = await db.fetchval(
                    f"INSERT INTO {self._workers} VALUES ($1, clock_timestamp() + make_interval(secs => $2)) "
                    f"ON CONFLICT (worker) DO UPDATE SET alive_until = EXCLUDED.alive_until "
                    f"WHERE {self._workers}.alive_until < clock_timestamp() RETURNING worker",
                    worker,
                    self.heartbeat * 3,
                )
                if taken is not None:
                    break
            else:
                raise StoreUnavailable(f"fan-out: no free worker number in {TAKE_TRIES} tries")
            await db.execute(f"DELETE FROM {self._inbox} WHERE worker = $1", worker)  # (a number used long ago)
        return worker, await self._append("start", str(worker))

    async def _listen(self) -> None:
        """(Re)open the LISTEN connection: a notification wakes the log's reader (any) or the inbox's (this
        worker's number)."""
        import asyncpg

        old, self._listener = self._listener, None
        if old is not None:
            old.terminate()
        async with self.conn.guard("fan-out"):
            # (asyncpg's annotation says int; it takes seconds as a float, as its pool does)
            listener = await asyncpg.connect(self.conn.url, timeout=self.conn.timeout)  # pyright: ignore[reportArgumentType]
            try:
                await listener.add_listener(self.channel, self._on_log)
                await listener.add_listener(self._inbox_channel, self._on_inbox)
            except BaseException:
                listener.terminate()
                raise
        self._listener = listener
        self._log_news.set()  # (look: something may have come while nobody listened)
        self._inbox_news.set()

    def _on_log(self, *args: Any) -> None:
        self._log_news.set()

    def _on_inbox(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        if payload == str(self._worker):
            self._inbox_news.set()

    async def _wait(self, news: asyncio.Event) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(news.wait(), BLOCK)
        news.clear()

    async def _wait_log(self, full: bool) -> bool:
        if not full:
            await self._wait(self._log_news)
        listener = self._listener
        if listener is None or listener.is_closed():
            await self._listen()
            return True
        return False

    async def _read_after(self, position: str) -> list[Logged]:
        async with self.conn.acquire("notification log") as db:
            rows = await self._rows(db, _row_id(position), BATCH)
        return [self._logged(row) for row in rows]

    async def _oldest(self) -> Logged | None:
        async with self.conn.acquire("notification log") as db:
            rows = await self._rows(db, 0, 1)
        return self._logged(rows[0]) if rows else None

    async def _take_inbox(self, full: bool) -> list[LogEntry]:
        if not full:
            await self._wait(self._inbox_news)
        async with self.conn.acquire("worker inbox") as db:
            rows = await db.fetch(
                f"DELETE FROM {self._inbox} WHERE id IN (SELECT id FROM {self._inbox} WHERE worker = $1 "
                f"ORDER BY id LIMIT {BATCH}) RETURNING id, session, kind, data, owner",
                self._worker,
            )
        return [
            LogEntry("", row["kind"] or "forward", row["session"], bytes(row["data"]), owner=row["owner"])
            for row in sorted(rows, key=lambda r: int(r["id"]))
        ]

    async def _refresh(self) -> None:
        async with self.conn.acquire("heartbeat") as db:
            await db.execute(
                f"UPDATE {self._workers} SET alive_until = clock_timestamp() + make_interval(secs => $2) "
                "WHERE worker = $1",
                self._worker,
                self.heartbeat * 3,
            )
            if self.conn.sweep_due(self._inbox, 60.0):
                await self.sweep(db)

    async def _release(self) -> None:
        if self._worker:
            with contextlib.suppress(Exception):
                async with self.conn.acquire("fan-out") as db:
                    await db.execute(f"DELETE FROM {self._workers} WHERE worker = $1", self._worker)
                    await db.execute(f"DELETE FROM {self._inbox} WHERE worker = $1", self._worker)
        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                await asyncio.wait_for(listener.close(), self.conn.timeout)
            except Exception:
                listener.terminate()
