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
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...hosting import deliver
from ..log import ID_SHIFT, LOG_POSITION, LogEntry, position_order
from .connection import DEFAULT_TIMEOUT, PostgresConnection, StoreUnavailable, postgres_for

if TYPE_CHECKING:
    from ...hosting import FanoutTarget

logger: logging.Logger = logging.getLogger("mcpkit.stores.postgres")

__all__ = ["BLOCK", "MAX_INLINE", "MAX_SWEEP", "PostgresFanout"]

#: Largest message kept inline in a log row that every worker reads (a client's cancellation); larger are refused.
MAX_INLINE = 4096
#: Seconds a reader waits for a notification before it looks at the table anyway.
BLOCK = 2.0
#: Rows one clean-up (expired inbox messages, dead workers) deletes at most.
MAX_SWEEP = 500
_BATCH = 256
_WORKERS = (1 << 20) - 1
_TAKE_TRIES = 1024
_CHANNEL = re.compile(r"[a-z_][a-z0-9_]{0,15}\Z")
_KINDS = frozenset(("list_changed", "resource_updated", "session", "direct", "cancel"))


def _position(row_id: int) -> str:
    return f"{row_id}-0"


def _row_id(position: str) -> int:
    return position_order(position) >> 32


class PostgresFanout:
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
        if heartbeat <= 0 or message_ttl <= 0:
            raise ValueError("heartbeat and message_ttl must be positive")
        if not _CHANNEL.match(channel):
            raise ValueError(f"channel {channel!r}: lower-case letters, digits and _, at most 16")
        self.conn: PostgresConnection
        self.conn, self._owns = postgres_for(postgres, prefix=prefix, timeout=timeout)
        t = self.conn.tables
        self._log_table, self._log_id = t["log"], t["log_id"]
        self._workers, self._worker_seq, self._inbox = t["workers"], t["worker_seq"], t["inbox"]
        self.channel: str = f"{self.conn.prefix}{channel}"
        self._inbox_channel = f"{self.channel}_in"
        self.max_log: int = max_log
        self.max_inbox: int = max_inbox
        self.message_ttl: float = message_ttl
        self.heartbeat: float = heartbeat
        self.max_unsent: int = max_unsent
        self.origin: str = secrets.token_hex(8)
        self.published: int = 0
        self.received: int = 0  # events from other workers delivered here
        self.missed: int = 0  # gaps found (the log was trimmed past this worker's position while it was cut off)
        self.forwarded: int = 0  # messages put into other workers' inboxes
        self.server: FanoutTarget | None = None
        self._worker = 0
        self._position: str | None = None
        self._session_listeners: list[Callable[[str], Awaitable[None]]] = []
        self._event_listeners: list[Callable[[LogEntry], Awaitable[None]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._first: asyncio.Future[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._listener: Any = None  # the LISTEN connection
        self._log_news = asyncio.Event()
        self._inbox_news = asyncio.Event()
        self._reading = False
        self._checked: tuple[float, str | None] = (-1.0, None)
        self._unsent: deque[tuple[str, str, bytes | None, bool]] = deque()
        self._overflowed = False
        self._warned = 0.0
        self._closed = False

    # ------------------------------------------------------------------ the Fanout interface

    @property
    def running(self) -> bool:
        """True once this worker reads the log."""
        return self._position is not None and not self._closed

    def bind(self, server: FanoutTarget) -> None:
        if self.server is not None and self.server is not server:
            raise ValueError("this fan-out already serves another server: give each server its own")
        self.server = server

    async def publish(self, event: str, value: str) -> None:
        """Log ``event``; every worker, this one too, delivers it from the log in one order (before this worker
        reads the log, it delivers its own at once). When the log cannot be reached, this worker's clients are told
        at once and the event waits (at most ``max_unsent``) until it can: the other workers get it late, not
        never."""
        if self._closed:
            return
        here = not self.running
        if not self._unsent:
            try:
                await self._log(event, value, None, late=here)
            except Exception as exc:
                self._warn("could not log %s (told this worker's clients; the others later): %s", event, exc)
            else:
                self.published += 1
                if here:
                    await self._deliver_here(event, value)
                return
        self._hold(event, value)
        await self._deliver_here(event, value)

    async def _deliver_here(self, event: str, value: str) -> None:
        token = LOG_POSITION.set("")
        try:
            await deliver(self.server, event, value)
        finally:
            LOG_POSITION.reset(token)

    def _hold(self, event: str, value: str) -> None:
        if len(self._unsent) >= self.max_unsent:
            self._unsent.popleft()
            self._overflowed = True
        self._unsent.append((event, value, None, True))

    async def _flush(self) -> None:
        if self._overflowed:
            await self._log("missed", "", None, late=True)
            self._overflowed = False
        while self._unsent:
            event, value, data, late = self._unsent[0]
            await self._log(event, value, data, late=late)
            self._unsent.popleft()
            self.published += 1

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        if listener not in self._session_listeners:
            self._session_listeners.append(listener)

    async def session_changed(self, session_id: str) -> None:
        """Tell the other workers that a session's record changed (they reload it before their next delivery)."""
        if self._closed:
            return
        if not self._unsent:
            try:
                await self._log("session", session_id, None)
                return
            except Exception as exc:
                self._warn("could not announce a change of session %s (later): %s", session_id[:8], exc)
        self._hold("session", session_id)

    async def start(self) -> None:
        """Take a worker number and start reading the log and the inbox (idempotent). When PostgreSQL cannot be
        reached this raises, and keeps trying in the background until it can."""
        if self.running or self._closed:
            return
        if self._first is None:
            loop = asyncio.get_running_loop()
            self._first = loop.create_future()
            self._supervisor = loop.create_task(self._start_until_started(self._first))
        await asyncio.shield(self._first)

    async def _start_until_started(self, first: asyncio.Future[None]) -> None:
        delay = 0.1
        while not self._closed:
            try:
                await self._start()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not first.done():
                    first.set_exception(exc)
                    first.exception()
                self._warn("the notification log is unreachable (retrying): %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if not first.done():
                first.set_result(None)
            else:
                self._first = asyncio.get_running_loop().create_future()
                self._first.set_result(None)
            return

    async def _start(self) -> None:
        await self._listen()
        async with self.conn.acquire("fan-out") as db:
            for _ in range(_TAKE_TRIES):
                n = int(await db.fetchval(f"SELECT nextval('{self._worker_seq}')"))
                worker = (n - 1) % _WORKERS + 1
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
                raise StoreUnavailable(f"fan-out: no free worker number in {_TAKE_TRIES} tries")
            await db.execute(f"DELETE FROM {self._inbox} WHERE worker = $1", worker)  # (a number used long ago)
        start = await self._log("start", str(worker), None)
        self._worker = worker
        self._position = _position(start)
        self._reading = True
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_log()),
            loop.create_task(self._read_inbox()),
            loop.create_task(self._beat()),
        ]

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

    async def aclose(self) -> None:
        """Stop reading, let the worker number go, close the connection if this fan-out made it."""
        if self._closed:
            return
        self._closed = True
        self._session_listeners.clear()
        self._event_listeners.clear()
        tasks = [t for t in (self._supervisor, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        if self._unsent and self._position is not None:
            self.conn.failed_at = 0.0
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._flush(), 5 * self.conn.timeout)
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
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
        if self._owns:
            await self.conn.aclose()

    # ------------------------------------------------------------------ the SharedFanout interface

    @property
    def worker(self) -> int:
        """This worker's number (0 until started)."""
        return self._worker

    @property
    def id_base(self) -> int:
        """What the engine adds to its request counter: ``worker << ID_SHIFT``."""
        return self._worker << ID_SHIFT

    @property
    def position(self) -> str | None:
        """The position of the last event this worker delivered."""
        return self._position

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
        return [entry for entry in (self._entry(row) for row in rows) if entry is not None]

    async def _rows(self, db: Any, since: int, limit: int) -> list[Any]:
        rows: list[Any] = await db.fetch(
            f"SELECT id, origin, kind, value, CASE WHEN kind = 'direct' THEN NULL ELSE data END AS data, late "
            f"FROM {self._log_table} WHERE id > $1 ORDER BY id LIMIT $2",
            since,
            limit,
        )
        return rows

    async def post(self, session_id: str, kind: str, data: bytes) -> str:
        """Log a message for one session (see :meth:`~mcpkit.stores.log.SharedFanout.post`)."""
        if kind != "direct" and len(data) > MAX_INLINE:
            raise ValueError(f"a {kind!r} message is limited to {MAX_INLINE} bytes")
        return _position(await self._log(kind, session_id, data))

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

    def on_session_event(self, listener: Callable[[LogEntry], Awaitable[None]]) -> None:
        if listener not in self._event_listeners:
            self._event_listeners.append(listener)

    async def check(self) -> str | None:
        """Why this worker is not ready, or None."""
        if self._closed:
            return "shutting down"
        if not self.running:
            return f"the notification log is unreachable ({self.conn.last_error or 'not started'})"
        if not self._reading:
            return f"the notification log reader lost PostgreSQL ({self.conn.last_error})"
        if not self.conn.available:
            return f"PostgreSQL is unavailable ({self.conn.last_error})"
        now = time.monotonic()
        if now - self._checked[0] >= 0.5:
            try:
                await self.conn.ping()
                reason = None
            except StoreUnavailable as exc:
                reason = str(exc)
            self._checked = (time.monotonic(), reason)
        return self._checked[1]

    # ------------------------------------------------------------------ internals

    def _warn(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._warned >= 5.0:
            self._warned = now
            logger.warning("postgres fan-out: " + message, *args)

    async def _log(self, kind: str, value: str, data: bytes | None, *, late: bool = False) -> int:
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
        return row_id

    def _entry(self, row: Any) -> LogEntry | None:
        kind = row["kind"]
        if kind not in _KINDS:
            return None
        position = _position(row["id"])
        data = row["data"]
        ref = str(row["id"]) if kind == "direct" else None
        return LogEntry(position, kind, row["value"], bytes(data) if data is not None else None, ref)

    async def _wait(self, news: asyncio.Event) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(news.wait(), BLOCK)
        news.clear()

    async def _read_log(self) -> None:
        delay = 0.05
        lost = False
        full = False
        while not self._closed:
            try:
                if not full:
                    await self._wait(self._log_news)
                listener = self._listener
                if listener is None or listener.is_closed():
                    await self._listen()
                    lost = True
                if lost:
                    await self._catch_up()
                    lost = False
                assert self._position is not None
                async with self.conn.acquire("notification log") as db:
                    rows = await self._rows(db, _row_id(self._position), _BATCH)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._reading = False
                lost = True
                full = False
                self._warn("the notification log is unreachable (this worker catches up when it is back): %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self._reading = True
            if self._unsent or self._overflowed:
                try:
                    await self._flush()
                except Exception as exc:
                    self._warn("could not log the events that waited: %s", exc)
            delay = 0.05
            full = len(rows) >= _BATCH
            for row in rows:
                position = _position(row["id"])
                try:
                    await self._deliver(row)
                except Exception:
                    logger.exception("postgres fan-out: could not deliver event %s", position)
                self._position = position

    async def _catch_up(self) -> None:
        """Back after losing PostgreSQL: if the log was trimmed past this worker's position, events may be
        missing: tell the clients to look again."""
        assert self._position is not None
        async with self.conn.acquire("notification log") as db:
            first = await db.fetchval(f"SELECT min(id) FROM {self._log_table}")
        if first is not None and first <= _row_id(self._position):
            return
        self.missed += 1
        logger.warning("postgres fan-out: events may have been lost while this worker was cut off; clients look again")
        await self._missed()
        if first is not None:
            self._position = _position(first - 1)  # everything before the oldest row is gone anyway

    async def _missed(self) -> None:
        server = self.server
        if server is None:
            return
        token = LOG_POSITION.set("")
        try:
            await server.deliver_missed()
        finally:
            LOG_POSITION.reset(token)

    async def _deliver(self, row: Any) -> None:
        kind, own = row["kind"], row["origin"] == self.origin
        server = self.server
        if own and row["late"]:
            return  # logged late: this worker told its clients when it happened
        position = _position(row["id"])
        if kind in ("list_changed", "resource_updated"):
            if server is None:
                return
            token = LOG_POSITION.set(position)
            try:
                if kind == "list_changed":
                    await server.deliver_list_changed(row["value"])
                else:
                    await server.deliver_resource_updated(row["value"])
            finally:
                LOG_POSITION.reset(token)
        elif kind == "session":
            if own:
                return
            for listener in list(self._session_listeners):
                await listener(row["value"])
        elif kind == "missed":
            await self._missed()
        elif kind in ("direct", "cancel"):
            entry = self._entry(row)
            if entry is not None:
                for event_listener in list(self._event_listeners):
                    await event_listener(entry)
        else:
            return
        if not own:
            self.received += 1

    async def _read_inbox(self) -> None:
        delay = 0.05
        full = False
        while not self._closed:
            try:
                if not full:
                    await self._wait(self._inbox_news)
                async with self.conn.acquire("worker inbox") as db:
                    rows = await db.fetch(
                        f"DELETE FROM {self._inbox} WHERE id IN (SELECT id FROM {self._inbox} WHERE worker = $1 "
                        f"ORDER BY id LIMIT {_BATCH}) RETURNING id, session, kind, data, owner",
                        self._worker,
                    )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._warn("this worker's inbox is unreachable: %s", exc)
                full = False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            full = len(rows) >= _BATCH
            for row in sorted(rows, key=lambda r: int(r["id"])):
                entry = LogEntry("", row["kind"] or "forward", row["session"], bytes(row["data"]), owner=row["owner"])
                for listener in list(self._event_listeners):
                    try:
                        await listener(entry)
                    except Exception:
                        logger.exception("postgres fan-out: could not deliver a forwarded message")

    async def _beat(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.heartbeat)
            with contextlib.suppress(Exception):
                async with self.conn.acquire("heartbeat") as db:
                    await db.execute(
                        f"UPDATE {self._workers} SET alive_until = clock_timestamp() + make_interval(secs => $2) "
                        "WHERE worker = $1",
                        self._worker,
                        self.heartbeat * 3,
                    )
                    if self.conn.sweep_due(self._inbox, 60.0):
                        await self.sweep(db)

    async def sweep(self, db: Any) -> None:
        """Delete at most :data:`MAX_SWEEP` expired inbox messages and as many long-dead workers' rows."""
        i, w = self._inbox, self._workers
        await db.execute(
            f"DELETE FROM {i} WHERE id IN (SELECT id FROM {i} WHERE expires_at <= clock_timestamp() LIMIT {MAX_SWEEP})"
        )
        await db.execute(
            f"DELETE FROM {w} WHERE worker IN (SELECT worker FROM {w} WHERE alive_until < clock_timestamp() - "
            f"interval '1 hour' LIMIT {MAX_SWEEP})"
        )
