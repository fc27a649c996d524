"""Change notifications and messages between workers over Redis Streams: :class:`RedisFanout`.

Every event (a list changed, a resource updated, a session record changed, a message for one session) is one entry
of ONE Redis stream, the notification log (``<prefix>{<channel>}:log``, trimmed to about ``max_log`` entries).
Each worker reads the log in order from where it is (``XREAD BLOCK``), its own events included: every worker, the
publishing one too, delivers every event in the same order, and the entry's id is the event's position (the SSE id
of a handshake session's GET stream, see :mod:`mcpkit.stores.log`). Nothing is fire-and-forget: a worker cut off
from Redis goes on reading from its last position when Redis is back and delivers what it missed, in order; if the
log was trimmed past that position meanwhile, it tells its clients to look again (``deliver_missed``: every list
changed, every subscribed resource updated) rather than lose anything silently.

Each worker also gets a number (``INCR`` of ``<prefix>{workers}:seq``, skipping the numbers of live workers), a
heartbeat key and an inbox stream (``<prefix>{w<n>}:alive``, ``<prefix>{w<n>}:in``): an answer to a request this
worker sent that reached another worker is forwarded to this inbox. Messages for one session's GET stream keep their
bytes in ``<prefix>{<session>}:out`` (one slot with the session's other keys), the log holds a reference.

One publish is one ``XADD``; each worker holds two blocking connections (the log and its inbox) and refreshes its
heartbeat every ``heartbeat`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import TYPE_CHECKING, Any

from ..base import StoreUnavailable
from ..log import LogEntry, position_order
from ..log_fanout import BATCH, TAKE_TRIES, WORKERS, LogFanout, Logged
from .connection import DEFAULT_TIMEOUT, RedisConnection, connection_for

if TYPE_CHECKING:
    from .connection import RedisClient

logger: logging.Logger = logging.getLogger("mcpkit.stores.redis")

__all__ = ["MAX_INLINE", "RedisFanout"]

#: Largest message kept inside a log entry (a client's cancellation); larger ones are refused.
MAX_INLINE = 4096

# KEYS: inbox, alive; ARGV: maxlen, session id, data, ttl ms, kind, owner. 1: queued; 0: the worker is gone.
_FORWARD = """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 's', ARGV[2], 'd', ARGV[3], 'k', ARGV[5], 'p', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
"""

# KEYS: a session's out stream; ARGV: maxlen, data, ttl ms. The entry id.
_KEEP = """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'd', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return id
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


def _stream_entries(reply: Any) -> list[tuple[Any, dict[bytes, bytes]]]:
    """The entries of a one-stream XREAD reply (RESP2 list or RESP3 dict)."""
    if not reply:
        return []
    if isinstance(reply, dict):
        return list(next(iter(reply.values()))[0])
    return list(reply[0][1])


class RedisFanout(LogFanout[RedisConnection]):
    """A :class:`~mcpkit.stores.log.SharedFanout` over Redis Streams (see the module docstring):
    ``create_app(server, fanout=RedisFanout("redis://..."))`` on every worker, and a change on one reaches the
    clients of all, in one order, without loss.

    Args:
        redis: a URL, a ``redis.asyncio`` client or a shared :class:`~mcpkit.stores.redis.RedisConnection`.
        prefix: prepended to every key (several apps can share one Redis).
        channel: the log's name (the hash tag of its key).
        max_log: entries the log keeps (approximately: ``MAXLEN ~``); a worker cut off for longer than this many
            events is told to look again.
        max_inbox: messages a worker's inbox keeps.
        message_ttl: seconds a session message (and an inbox) is kept after its last write.
        heartbeat: seconds between heartbeats (a worker is taken for gone after three missed).
        max_unsent: events this worker keeps while the log cannot be reached, logged when it can (beyond, the
            oldest are dropped and the other workers are told to look again).
        cluster, timeout: for a URL (see :class:`~mcpkit.stores.redis.RedisConnection`).
    """

    conn: RedisConnection
    forwarded: int

    _store = "Redis"
    _logger = logger
    _name = "redis"

    def __init__(
        self,
        redis: str | RedisClient | RedisConnection,
        *,
        prefix: str = "mcpkit:",
        channel: str = "notify",
        max_log: int = 10_000,
        max_inbox: int = 10_000,
        max_messages_per_session: int = 1000,
        message_ttl: float = 3600.0,
        heartbeat: float = 1.0,
        max_unsent: int = 10_000,
        cluster: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if max_log < 100 or max_inbox < 100 or max_messages_per_session < 1:
            raise ValueError("max_log and max_inbox must be at least 100, max_messages_per_session at least 1")
        super().__init__(
            max_log=max_log, max_inbox=max_inbox, message_ttl=message_ttl, heartbeat=heartbeat, max_unsent=max_unsent
        )
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)
        keys = self.conn.keys
        self.channel = channel
        self.log_key: str = keys.key(channel, "log")
        self._seq_key = keys.key("workers", "seq")
        self.max_messages_per_session: int = max_messages_per_session
        self._origin = self.origin.encode()
        self._inbox_last = "0-0"  # the last inbox entry read
        client = self.conn.client
        self._forward = client.register_script(_FORWARD)
        self._keep = client.register_script(_KEEP)

    # ------------------------------------------------------------------ the SharedFanout interface

    async def read(self, after: str, limit: int = 500) -> list[LogEntry] | None:
        """Up to ``limit`` log entries after ``after`` (``""``: from the oldest kept); None when entries after
        ``after`` were trimmed."""
        client = self.conn.client
        async with self.conn.guard("notification log"):
            if after:
                first = await client.xrange(self.log_key, "-", "+", count=1)
                if not first or position_order(_text(first[0][0])) > position_order(after):
                    return None
            raw = await client.xrange(self.log_key, f"({after}" if after else "-", "+", count=limit)
        entries = (self._entry(self._logged(entry_id, fields)) for entry_id, fields in raw)
        return [entry for entry in entries if entry is not None]

    async def post(self, session_id: str, kind: str, data: bytes) -> str:
        """Log a message for one session (see :meth:`~mcpkit.stores.log.SharedFanout.post`)."""
        fields: dict[bytes, bytes] = {b"o": self._origin, b"e": kind.encode(), b"v": session_id.encode()}
        if kind == "direct":
            async with self.conn.guard("notification log"):
                ref = await self._keep(
                    keys=[self.conn.keys.key(session_id, "out")],
                    args=[self.max_messages_per_session, data, self._ms(self.message_ttl)],
                )
            fields[b"r"] = ref if isinstance(ref, bytes) else str(ref).encode()
        else:
            if len(data) > MAX_INLINE:
                raise ValueError(f"a {kind!r} message is limited to {MAX_INLINE} bytes")
            fields[b"d"] = data
        return _text(await self._add(fields))

    async def payload(self, entry: LogEntry) -> bytes | None:
        """The bytes of a ``"direct"`` entry (None once expired or trimmed)."""
        if entry.data is not None:
            return entry.data
        if entry.ref is None:
            return None
        async with self.conn.guard("notification log"):
            found = await self.conn.client.xrange(self.conn.keys.key(entry.value, "out"), entry.ref, entry.ref)
        if not found:
            return None
        fields = found[0][1]
        data = fields.get(b"d")
        return data if isinstance(data, bytes) else None

    async def forward(
        self, worker: int, session_id: str, data: bytes, *, kind: str = "forward", owner: str | None = None
    ) -> bool:
        """Put a client's message into worker ``worker``'s inbox; False when that worker is gone."""
        keys = self.conn.keys
        async with self.conn.guard("worker inbox"):
            done = await self._forward(
                keys=[keys.worker(worker, "in"), keys.worker(worker, "alive")],
                args=[self.max_inbox, session_id, data, self._ms(self.message_ttl), kind, owner or ""],
            )
        if done:
            self.forwarded += 1
        return bool(done)

    async def alive(self, worker: int) -> bool:
        """Whether worker ``worker`` beat within the last three heartbeats."""
        async with self.conn.guard("worker inbox"):
            return bool(await self.conn.client.exists(self.conn.keys.worker(worker, "alive")))

    # ------------------------------------------------------------------ the storage (see LogFanout)

    def _heartbeat_ms(self) -> int:
        return self._ms(self.heartbeat * 3)

    @staticmethod
    def _ms(seconds: float) -> int:
        return max(1, math.ceil(seconds * 1000))

    async def _add(self, fields: dict[bytes, bytes]) -> Any:
        async with self.conn.guard("notification log"):
            return await self.conn.client.xadd(self.log_key, fields, maxlen=self.max_log, approximate=True)

    async def _append(self, kind: str, value: str, data: bytes | None = None, *, late: bool = False) -> str:
        fields = {b"o": self._origin, b"e": kind.encode(), b"v": value.encode()}
        if data is not None:
            fields[b"d"] = data
        if late:
            fields[b"l"] = b"1"
        return _text(await self._add(fields))

    def _logged(self, entry_id: Any, fields: dict[bytes, bytes]) -> Logged:
        ref = fields.get(b"r")
        return Logged(
            _text(entry_id),
            _text(fields.get(b"o")),
            _text(fields.get(b"e")),
            _text(fields.get(b"v")),
            fields.get(b"d"),
            _text(ref) if ref else None,
            fields.get(b"l") == b"1",
        )

    async def _claim(self) -> tuple[int, str]:
        client = self.conn.client
        async with self.conn.guard("fan-out"):
            # The first number no live worker holds: the counter restarts from 0 when Redis lost it (a restart
            # without persistence, an eviction) while the workers that took 1, 2, ... still run and beat.
            for _ in range(TAKE_TRIES):
                n = int(await client.incr(self._seq_key))
                worker = (n - 1) % WORKERS + 1
                if await client.set(self.conn.keys.worker(worker, "alive"), b"1", px=self._heartbeat_ms(), nx=True):
                    break
            else:
                raise StoreUnavailable(f"fan-out: no free worker number in {TAKE_TRIES} tries")
            await client.unlink(self.conn.keys.worker(worker, "in"))  # (a number used long ago may have one left)
            start = await client.xadd(
                self.log_key,
                {b"o": self._origin, b"e": b"start", b"v": str(worker).encode()},
                maxlen=self.max_log,
                approximate=True,
            )
        self._inbox_last = "0-0"
        return worker, _text(start)

    async def _read_after(self, position: str) -> list[Logged]:
        client, block = self.conn.blocking()
        reply = await client.xread({self.log_key: position}, count=BATCH, block=int(block * 1000))
        return [self._logged(entry_id, fields) for entry_id, fields in _stream_entries(reply)]

    def _read_failed(self, exc: Exception) -> None:
        if isinstance(exc, self.conn.errors):
            self.conn.failed(exc)

    def _read_ok(self) -> None:
        self.conn.failed_at = 0.0  # Redis answers again: close the breaker for everyone

    async def _oldest(self) -> Logged | None:
        first = await self.conn.client.xrange(self.log_key, "-", "+", count=1)
        return self._logged(first[0][0], first[0][1]) if first else None

    async def _take_inbox(self, full: bool) -> list[LogEntry]:
        client, block = self.conn.blocking()
        inbox = self.conn.keys.worker(self._worker, "in")
        reply = await client.xread({inbox: self._inbox_last}, count=BATCH, block=int(block * 1000))
        entries = []
        for entry_id, fields in _stream_entries(reply):
            self._inbox_last = _text(entry_id)
            kind = _text(fields.get(b"k")) or "forward"
            owner = _text(fields.get(b"p")) or None
            entries.append(LogEntry("", kind, _text(fields.get(b"s")), fields.get(b"d"), owner=owner))
        return entries

    async def _refresh(self) -> None:
        async with self.conn.guard("heartbeat"):
            await self.conn.client.set(self.conn.keys.worker(self._worker, "alive"), b"1", px=self._heartbeat_ms())

    async def _release(self) -> None:
        if self._worker:
            keys = self.conn.keys
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.conn.client.unlink(keys.worker(self._worker, "alive"), keys.worker(self._worker, "in")),
                    self.conn.timeout,
                )
