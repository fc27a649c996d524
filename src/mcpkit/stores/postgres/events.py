"""The SSE events of resumable streams in PostgreSQL: :class:`PostgresEventStore`.

Two tables: ``<prefix>streams`` (one row per stream: its session, the number of its last event, when the session
last wrote to it, the bytes of its events kept, the id of the request it answers, its expiry) and
``<prefix>events`` (one row per event kept, deleted with its stream). Each append is ONE transaction that locks the
stream's row, refuses a number that does not grow (two writers can never interleave one stream), keeps the event
and applies every bound: the newest ``max_events_per_stream`` events of the stream, the ``max_streams_per_session``
streams the session wrote to most recently, and ``max_bytes_per_session`` bytes of events per session (beyond, the
streams written least recently go, then the oldest events of the one written now, never the event just kept).
A replay is one transaction too: it renews the stream's TTL, finds its first event (a gap: None) and reads the
range. Expired streams are never read; a clean-up at most every ``sweep_every`` seconds per worker (at once again
after one that found a full batch) deletes at most :data:`MAX_SWEEP` of them.

A worker following a stream another worker writes (:meth:`PostgresEventStore.follow`) is woken by the append: each
append sends ``NOTIFY <prefix>events.follow`` with the stream's name (in the statement that keeps the event, so
delivered at its commit), and the store's one ``LISTEN`` connection, opened at the first follow, wakes the followers
of that stream. A follower still reads every :data:`FOLLOW_POLL` seconds (the safety net for a notification lost
with the connection), and polls every 50 ms rising to 250 ms while it cannot listen.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any, ClassVar

from ..base import MAX_REQUEST_ID_BYTES, check_event_bounds, request_id_from_json, request_id_json
from .connection import DEFAULT_TIMEOUT, PostgresConnection
from .swept import SweptTable

logger: logging.Logger = logging.getLogger("mcpkit.stores.postgres")

__all__ = [
    "BLOCK",
    "FOLLOW_POLL",
    "MAX_BYTES_PER_SESSION",
    "MAX_REQUEST_ID_BYTES",
    "MAX_STREAMS_PER_SESSION",
    "MAX_SWEEP",
    "PostgresEventStore",
]

#: Streams one session keeps by default.
MAX_STREAMS_PER_SESSION = 1000
#: Bytes of events one session keeps by default.
MAX_BYTES_PER_SESSION = 16 * 1024 * 1024
#: Expired streams one clean-up deletes at most (their events with them; a clean-up that found a full batch lets the
#: next append clean up again at once: see :class:`~mcpkit.stores.postgres.swept.SweptTable`).
MAX_SWEEP = 500
#: Seconds :meth:`PostgresEventStore.follow` waits at most for news before it returns.
BLOCK = 2.0
#: Seconds between two reads of a followed stream while the store listens for appends (a notification lost with its
#: connection delays an event by at most this much).
FOLLOW_POLL = 1.0
#: Longest stream name (bytes) a notification carries; an append to a longer one wakes every follower of the store.
_NOTIFY_NAME = 1000
_FOLLOW_BATCH = 100
_ALIVE = "(expires_at IS NULL OR expires_at > clock_timestamp())"


def _session(stream: str) -> str:
    return stream.partition("/")[0]


def _like(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


class PostgresEventStore(SweptTable):
    """An :class:`~mcpkit.stores.EventStore` in PostgreSQL (see the module docstring for the layout); also a
    :class:`~mcpkit.stores.FollowableEventStore` and a :class:`~mcpkit.stores.RequestEventStore`.

    Args:
        postgres: a URL or a shared :class:`~mcpkit.stores.postgres.PostgresConnection`.
        prefix, timeout: for a URL (see :class:`~mcpkit.stores.postgres.PostgresConnection`).
        max_events_per_stream: events kept per stream; a replay that needs an evicted one returns None.
        ttl: seconds after the last append (or replay) when a stream expires; None keeps streams until
            :meth:`forget`.
        max_streams_per_session: streams kept per session; beyond, the one written least recently goes.
        max_bytes_per_session: bytes of events kept per session (see the module docstring).
        sweep_every: seconds between two clean-ups of expired streams by this worker.
    """

    swept_name: ClassVar[str] = "streams"
    swept_keys: ClassVar[str] = "stream"
    swept_most: ClassVar[int] = MAX_SWEEP
    swept_what: ClassVar[str] = "event store"

    def __init__(
        self,
        postgres: str | PostgresConnection,
        *,
        prefix: str = "mcpkit_",
        max_events_per_stream: int = 1000,
        ttl: float | None = 3600.0,
        max_streams_per_session: int = MAX_STREAMS_PER_SESSION,
        max_bytes_per_session: int = MAX_BYTES_PER_SESSION,
        timeout: float = DEFAULT_TIMEOUT,
        sweep_every: float = 60.0,
    ) -> None:
        check_event_bounds(max_events_per_stream, max_streams_per_session, max_bytes_per_session, ttl)
        super().__init__(postgres, prefix=prefix, timeout=timeout, sweep_every=sweep_every)
        self.max_events_per_stream: int = max_events_per_stream
        self.max_streams_per_session: int = max_streams_per_session
        self.max_bytes_per_session: int = max_bytes_per_session
        self.ttl: float | None = ttl
        self._streams: str = self.table
        self._events: str = self.conn.tables["events"]
        self._expiry: str = "NULL" if ttl is None else f"clock_timestamp() + make_interval(secs => {float(ttl)!r})"
        self._channel: str = f"{self.conn.prefix}events.follow"
        self._waiters: dict[str, set[asyncio.Event]] = {}  # stream -> the follows waiting for it (one per call)
        self._listener: Any = None  # the LISTEN connection, opened at the first follow
        self._opening: asyncio.Lock | None = None
        self._listen_again_at = 0.0
        self._closed = False

    async def append(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event ``seq``. Raises ``ValueError`` when ``seq`` is not above the stream's last number: two writers
        numbering one stream would otherwise interleave into a history no client can resume."""
        await self._add(stream, seq, data, False, None)

    async def append_last(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event ``seq`` as the stream's last (the answer that ends it): a follower stops after it."""
        await self._add(stream, seq, data, True, None)

    async def append_first(self, stream: str, seq: int, data: bytes, request_id: str | int) -> None:
        """Keep event ``seq`` (the stream's first) and, in the same transaction, the id of the request the stream
        answers (not kept when its JSON is longer than :data:`MAX_REQUEST_ID_BYTES`)."""
        rid = request_id_json(request_id)
        await self._add(stream, seq, data, False, None if rid is None else rid.decode())

    async def _add(self, stream: str, seq: int, data: bytes, last: bool, request_id: str | None) -> None:
        s, e = self._streams, self._events
        session = _session(stream)
        async with self.conn.transaction("event store") as db:
            row = await db.fetchrow(f"SELECT last_seq, {_ALIVE} AS alive FROM {s} WHERE stream = $1 FOR UPDATE", stream)
            if row is not None and not row["alive"]:
                await db.execute(f"DELETE FROM {s} WHERE stream = $1", stream)  # (expired: starts over)
                row = None
            if row is not None and seq <= row["last_seq"]:
                raise ValueError(f"event {seq} of stream {stream!r} is not above its last one ({row['last_seq']})")
            written = await db.fetchval(f"SELECT coalesce(max(written), 0) + 1 FROM {s} WHERE session = $1", session)
            await db.execute(
                f"INSERT INTO {s} (stream, session, last_seq, written, bytes, request_id, expires_at) "
                f"VALUES ($1, $2, $3, $4, $5, $6, {self._expiry}) ON CONFLICT (stream) DO UPDATE SET "
                f"last_seq = $3, written = $4, bytes = {s}.bytes + $5, expires_at = EXCLUDED.expires_at, "
                f"request_id = coalesce(EXCLUDED.request_id, {s}.request_id)",
                stream,
                session,
                seq,
                written,
                len(data),
                request_id,
            )
            await db.execute(  # (the NOTIFY that wakes the stream's followers, sent at commit)
                f"INSERT INTO {e} (stream, seq, data, last) SELECT $1, $2, $3, $4 FROM (SELECT pg_notify($5, CASE "
                f"WHEN octet_length($1) <= {_NOTIFY_NAME} THEN $1 ELSE '' END)) AS woken",
                stream,
                seq,
                data,
                last,
                self._channel,
            )
            trimmed = await db.fetchval(
                f"WITH gone AS (DELETE FROM {e} WHERE stream = $1 AND seq <= $2 RETURNING length(data) AS n) "
                "SELECT coalesce(sum(n), 0) FROM gone",
                stream,
                seq - self.max_events_per_stream,
            )
            if trimmed:
                await db.execute(f"UPDATE {s} SET bytes = bytes - $2 WHERE stream = $1", stream, trimmed)
            if row is None:  # a new stream: past the session's bound, the streams written least recently go
                await db.execute(
                    f"DELETE FROM {s} WHERE stream IN (SELECT stream FROM {s} WHERE session = $1 AND stream <> $2 "
                    f"ORDER BY written DESC OFFSET $3)",
                    session,
                    stream,
                    self.max_streams_per_session - 1,
                )
            await self._within_bytes(db, session, stream, seq)
        if self.ttl is not None:
            await self._sweep()

    async def _within_bytes(self, db: Any, session: str, stream: str, seq: int) -> None:
        """Past the session's byte budget: the streams written least recently go, then the oldest events of this
        one (never the event just kept)."""
        s, e, budget = self._streams, self._events, self.max_bytes_per_session
        fetchval = db.fetchval
        total = await fetchval(f"SELECT coalesce(sum(bytes), 0) FROM {s} WHERE session = $1", session)
        while total > budget:
            oldest = await fetchval(
                f"DELETE FROM {s} WHERE stream = (SELECT stream FROM {s} WHERE session = $1 AND stream <> $2 "
                "ORDER BY written LIMIT 1) RETURNING bytes",
                session,
                stream,
            )
            if oldest is None:
                break
            total -= oldest
        while total > budget:
            freed = await fetchval(
                f"DELETE FROM {e} WHERE stream = $1 AND seq = (SELECT min(seq) FROM {e} WHERE stream = $1 AND "
                "seq < $2) RETURNING length(data)",
                stream,
                seq,
            )
            if freed is None:
                break
            await db.execute(f"UPDATE {s} SET bytes = bytes - $2 WHERE stream = $1", stream, freed)
            total -= freed

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]] | None:
        found = await self._read(stream, after, gap_check=True)
        return None if found is None else found[0]

    async def _read(
        self, stream: str, after: int, *, gap_check: bool, limit: int | None = None
    ) -> tuple[list[tuple[int, bytes]], bool] | None:
        s, e = self._streams, self._events
        after = max(after, 0)
        async with self.conn.transaction("event store") as db:
            alive = await db.fetchval(
                f"UPDATE {s} SET expires_at = {self._expiry} WHERE stream = $1 AND {_ALIVE} RETURNING 1", stream
            )
            if alive is None:
                return None
            if gap_check:
                first = await db.fetchval(f"SELECT min(seq) FROM {e} WHERE stream = $1", stream)
                if first is None or first > after + 1:
                    return None
            rows = await db.fetch(
                f"SELECT seq, data, last FROM {e} WHERE stream = $1 AND seq > $2 ORDER BY seq"
                + ("" if limit is None else f" LIMIT {int(limit)}"),
                stream,
                after,
            )
        return [(row["seq"], bytes(row["data"])) for row in rows], bool(rows) and bool(rows[-1]["last"])

    async def follow(self, stream: str, after: int, timeout: float) -> tuple[list[tuple[int, bytes]], bool] | None:
        """The events of ``stream`` after ``after`` as they come: waits up to ``timeout`` seconds (at most
        :data:`BLOCK`) for the first, woken by the append's notification (read again every :data:`FOLLOW_POLL`
        seconds all the same; every 50 ms rising to 250 ms while the store cannot listen), and says whether the
        stream's last event is among them. ``([], False)`` when nothing came; None when the stream is gone or, with
        ``timeout=0`` (what is there now), when events after ``after`` were evicted."""
        if timeout <= 0:
            return await self._read(stream, after, gap_check=True)
        deadline = time.monotonic() + min(timeout, BLOCK)
        news = asyncio.Event()
        waiting = self._waiters.setdefault(stream, set())
        waiting.add(news)
        try:
            pause = 0.05
            while True:
                listening = await self._listen()  # (before the read: an append after it wakes this follow)
                news.clear()
                found = await self._read(stream, after, gap_check=False, limit=_FOLLOW_BATCH)
                left = deadline - time.monotonic()
                if found is None or found[0] or left <= 0:
                    return found
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(news.wait(), min(FOLLOW_POLL if listening else pause, left))
                pause = min(pause * 1.5, 0.25)
        finally:
            waiting.discard(news)
            if not waiting and self._waiters.get(stream) is waiting:
                del self._waiters[stream]

    async def _listen(self) -> bool:
        """Whether the store listens for appends now: its ``LISTEN`` connection is opened at the first follow and
        again when it dropped (a failure is tried again :data:`FOLLOW_POLL` seconds later; meanwhile follows
        poll)."""
        if self._listener is not None and not self._listener.is_closed():
            return True
        if self._closed or time.monotonic() < self._listen_again_at:
            return False
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._listener is not None and not self._listener.is_closed():
                return True
            import asyncpg

            listener: Any = None
            try:
                # (asyncpg's annotation says int; it takes seconds as a float, as its pool does)
                listener = await asyncpg.connect(self.conn.url, timeout=self.conn.timeout)  # pyright: ignore[reportArgumentType]
                await listener.add_listener(self._channel, self._on_append)
            except Exception as exc:
                if listener is not None:
                    listener.terminate()
                self._listen_again_at = time.monotonic() + FOLLOW_POLL
                logger.debug("postgres event store: cannot listen for appends (followers poll): %s", exc)
                return False
            old, self._listener = self._listener, listener
            if old is not None:
                old.terminate()
            if self._closed:  # (closed while it connected)
                self._listener = None
                listener.terminate()
                return False
        return True

    def _on_append(self, connection: Any, pid: int, channel: str, payload: str) -> None:
        if payload:
            for news in self._waiters.get(payload, ()):
                news.set()
        else:  # (a stream name too long to send: every follower looks)
            for waiting in self._waiters.values():
                for news in waiting:
                    news.set()

    async def request_of(self, stream: str) -> str | int | None:
        """The id of the request ``stream`` answers, as :meth:`append_first` kept it; None when there is none."""
        async with self._connection() as db:
            raw = await db.fetchval(f"SELECT request_id FROM {self._streams} WHERE stream = $1 AND {_ALIVE}", stream)
        return request_id_from_json(raw)

    async def forget(self, prefix: str) -> None:
        """Drop every stream whose name starts with ``prefix`` (``"<session>/"``: the session's, by its index)."""
        s = self._streams
        tag, slash, rest = prefix.partition("/")
        async with self._connection() as db:
            if slash and not rest:
                await db.execute(f"DELETE FROM {s} WHERE session = $1", tag)
            else:
                await db.execute(f"DELETE FROM {s} WHERE stream LIKE $1", _like(prefix))

    async def aclose(self) -> None:
        """Stop listening for appends; close the connection if this store made it."""
        self._closed = True
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.terminate()
        await super().aclose()
