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
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ...hosting import deliver
from ..log import ID_SHIFT, LOG_POSITION, LogEntry, position_order
from .connection import DEFAULT_TIMEOUT, RedisConnection, StoreUnavailable, connection_for

if TYPE_CHECKING:
    from ...hosting import FanoutTarget
    from .connection import RedisClient

logger: logging.Logger = logging.getLogger("mcpkit.stores.redis")

__all__ = ["MAX_INLINE", "RedisFanout"]

#: Largest message kept inside a log entry (a client's cancellation); larger ones are refused.
MAX_INLINE = 4096
_WORKERS = (1 << 20) - 1  # worker numbers cycle through 1 .. 2**20 - 1
_TAKE_TRIES = 1024  # numbers a starting worker tries past the live ones

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


class RedisFanout:
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
        if heartbeat <= 0 or message_ttl <= 0:
            raise ValueError("heartbeat and message_ttl must be positive")
        self.conn: RedisConnection
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)
        keys = self.conn.keys
        self.channel = channel
        self.log_key: str = keys.key(channel, "log")
        self._seq_key = keys.key("workers", "seq")
        self.max_log = max_log
        self.max_inbox = max_inbox
        self.max_messages_per_session = max_messages_per_session
        self.message_ttl = message_ttl
        self.heartbeat = heartbeat
        self.max_unsent = max_unsent
        self.origin: str = secrets.token_hex(8)
        self._origin = self.origin.encode()
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
        self._reading = False  # the log reader's last read succeeded
        self._checked: tuple[float, str | None] = (-1.0, None)  # the last readiness ping: (when, why not ready)
        self._unsent: deque[dict[bytes, bytes]] = deque()  # events the log could not take yet (this worker's)
        self._overflowed = False
        self._warned = 0.0
        self._closed = False
        client = self.conn.client
        self._forward = client.register_script(_FORWARD)
        self._keep = client.register_script(_KEEP)

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
        at once and the event waits in this worker's outbox (at most ``max_unsent``) until the log can be reached
        again: the other workers get it late, not never."""
        if self._closed:
            return
        fields = {b"o": self._origin, b"e": event.encode(), b"v": value.encode()}
        here = not self.running  # (before this worker reads the log, it delivers its own events at once)
        if not self._unsent:  # (while some wait, later ones wait behind them: one order)
            if here:
                fields[b"l"] = b"1"
            try:
                await self._log(fields)
            except Exception as exc:
                self._warn("could not log %s (told this worker's clients; the others later): %s", event, exc)
            else:
                self.published += 1
                if here:
                    await self._deliver_here(event, value)
                return
        self._hold(fields)
        await self._deliver_here(event, value)

    async def _deliver_here(self, event: str, value: str) -> None:
        """This worker's clients get an event the log does not deliver here (no position: GET streams send it
        without an id)."""
        token = LOG_POSITION.set("")
        try:
            await deliver(self.server, event, value)
        finally:
            LOG_POSITION.reset(token)

    def _hold(self, fields: dict[bytes, bytes]) -> None:
        """Keep an event the log could not take (``l``: this worker delivered it already)."""
        fields[b"l"] = b"1"
        if len(self._unsent) >= self.max_unsent:
            self._unsent.popleft()
            self._overflowed = True  # the others will be told to look again
        self._unsent.append(fields)

    async def _flush(self) -> None:
        """Log what waits in the outbox, in order (the log is reachable again)."""
        if self._overflowed:
            await self._log({b"o": self._origin, b"e": b"missed", b"v": b"", b"l": b"1"})
            self._overflowed = False
        while self._unsent:
            await self._log(self._unsent[0])
            self._unsent.popleft()
            self.published += 1

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        if listener not in self._session_listeners:
            self._session_listeners.append(listener)

    async def session_changed(self, session_id: str) -> None:
        """Tell the other workers that a session's record changed (they reload it before their next delivery)."""
        if self._closed:
            return
        fields = {b"o": self._origin, b"e": b"session", b"v": session_id.encode()}
        if not self._unsent:
            try:
                await self._log(fields)
                return
            except Exception as exc:  # (the others re-read the record on the session's next request anyway)
                self._warn("could not announce a change of session %s (later): %s", session_id[:8], exc)
        self._hold(fields)

    async def start(self) -> None:
        """Take a worker number and start reading the log and the inbox (idempotent). When Redis cannot be reached
        this raises, and keeps trying in the background until it can."""
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
                    first.exception()  # (retrieved: the caller may not be waiting any more)
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
        client = self.conn.client
        async with self.conn.guard("fan-out"):
            # The first number no live worker holds: the counter restarts from 0 when Redis lost it (a restart
            # without persistence, an eviction) while the workers that took 1, 2, ... still run and beat.
            for _ in range(_TAKE_TRIES):
                n = int(await client.incr(self._seq_key))
                worker = (n - 1) % _WORKERS + 1
                if await client.set(self.conn.keys.worker(worker, "alive"), b"1", px=self._heartbeat_ms(), nx=True):
                    break
            else:
                raise StoreUnavailable(f"fan-out: no free worker number in {_TAKE_TRIES} tries")
            await client.unlink(self.conn.keys.worker(worker, "in"))  # (a number used long ago may have one left)
            start = await client.xadd(
                self.log_key,
                {b"o": self._origin, b"e": b"start", b"v": str(worker).encode()},
                maxlen=self.max_log,
                approximate=True,
            )
        self._worker = worker
        self._position = _text(start)
        self._reading = True
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_log()),
            loop.create_task(self._read_inbox()),
            loop.create_task(self._beat()),
        ]

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
        if self._unsent and self._position is not None:  # one last try for what waits (bounded by the timeout)
            self.conn.failed_at = 0.0  # (a real try, whatever the breaker says: nothing comes after this one)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._flush(), 5 * self.conn.timeout)
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        if self._worker:
            keys = self.conn.keys
            with contextlib.suppress(Exception):
                await asyncio.wait_for(
                    self.conn.client.unlink(keys.worker(self._worker, "alive"), keys.worker(self._worker, "in")),
                    self.conn.timeout,
                )
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
        client = self.conn.client
        async with self.conn.guard("notification log"):
            if after:
                first = await client.xrange(self.log_key, "-", "+", count=1)
                if not first or position_order(_text(first[0][0])) > position_order(after):
                    return None
            raw = await client.xrange(self.log_key, f"({after}" if after else "-", "+", count=limit)
        entries = []
        for entry_id, fields in raw:
            entry = self._entry(_text(entry_id), fields)
            if entry is not None:
                entries.append(entry)
        return entries

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
        return _text(await self._log(fields))

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
            return f"the notification log reader lost Redis ({self.conn.last_error})"
        if not self.conn.available:
            return f"Redis is unavailable ({self.conn.last_error})"
        now = time.monotonic()
        if now - self._checked[0] >= 0.5:  # (one ping per half second, however often a probe asks)
            try:
                await self.conn.ping()
                reason = None
            except StoreUnavailable as exc:
                reason = str(exc)
            self._checked = (time.monotonic(), reason)
        return self._checked[1]

    # ------------------------------------------------------------------ internals

    def _heartbeat_ms(self) -> int:
        return self._ms(self.heartbeat * 3)

    @staticmethod
    def _ms(seconds: float) -> int:
        return max(1, math.ceil(seconds * 1000))

    def _warn(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._warned >= 5.0:  # one line per 5 s while Redis is away, not one per event
            self._warned = now
            logger.warning("redis fan-out: " + message, *args)

    async def _log(self, fields: dict[bytes, bytes]) -> Any:
        async with self.conn.guard("notification log"):
            return await self.conn.client.xadd(self.log_key, fields, maxlen=self.max_log, approximate=True)

    def _entry(self, position: str, fields: dict[bytes, bytes]) -> LogEntry | None:
        kind = _text(fields.get(b"e"))
        if kind not in ("list_changed", "resource_updated", "session", "direct", "cancel"):
            return None
        ref = fields.get(b"r")
        return LogEntry(position, kind, _text(fields.get(b"v")), fields.get(b"d"), _text(ref) if ref else None)

    async def _read_log(self) -> None:
        client, block = self.conn.blocking()
        block_ms = int(block * 1000)
        delay = 0.05
        lost = False
        while not self._closed:
            try:
                if lost:
                    await self._catch_up()
                    lost = False
                assert self._position is not None
                reply = await client.xread({self.log_key: self._position}, count=256, block=block_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, self.conn.errors):
                    self.conn.failed(exc)
                self._reading = False
                lost = True
                self._warn("the notification log is unreachable (this worker catches up when it is back): %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self._reading = True
            self.conn.failed_at = 0.0  # Redis answers again: close the breaker for everyone
            if self._unsent or self._overflowed:
                try:
                    await self._flush()
                except Exception as exc:
                    self._warn("could not log the events that waited: %s", exc)
            delay = 0.05
            for entry_id, fields in _stream_entries(reply):
                position = _text(entry_id)
                try:
                    await self._deliver(position, fields)
                except Exception:
                    logger.exception("redis fan-out: could not deliver event %s", position)
                self._position = position  # (after the delivery: see SharedFanout.position)

    async def _catch_up(self) -> None:
        """Back after losing Redis: if the log was trimmed past this worker's position (or lost: Redis restarted
        without persistence), events may be missing: tell the clients to look again."""
        first = await self.conn.client.xrange(self.log_key, "-", "+", count=1)
        assert self._position is not None
        if first and position_order(_text(first[0][0])) <= position_order(self._position):
            return
        self.missed += 1
        logger.warning("redis fan-out: events may have been lost while this worker was cut off; clients look again")
        await self._missed()
        if not first:
            return
        self._position = _text(first[0][0])  # everything before the oldest entry is gone anyway
        await self._deliver(self._position, first[0][1])

    async def _missed(self) -> None:
        """Tell this worker's clients to look again (events may be lost): no log position to resume from."""
        server = self.server
        if server is None:
            return
        token = LOG_POSITION.set("")
        try:
            await server.deliver_missed()
        finally:
            LOG_POSITION.reset(token)

    async def _deliver(self, position: str, fields: dict[bytes, bytes]) -> None:
        kind = fields.get(b"e")
        own = fields.get(b"o") == self._origin
        server = self.server
        if own and fields.get(b"l") == b"1":
            return  # logged late: this worker told its clients when it happened
        if kind == b"list_changed" or kind == b"resource_updated":
            if server is None:
                return
            token = LOG_POSITION.set(position)
            try:
                value = _text(fields.get(b"v"))
                if kind == b"list_changed":
                    await server.deliver_list_changed(value)
                else:
                    await server.deliver_resource_updated(value)
            finally:
                LOG_POSITION.reset(token)
        elif kind == b"session":
            if own:
                return  # the worker that changed the record has it
            for listener in list(self._session_listeners):
                await listener(_text(fields.get(b"v")))
        elif kind == b"missed":  # another worker dropped events it could not log: look again
            await self._missed()
        elif kind == b"direct" or kind == b"cancel":
            entry = self._entry(position, fields)
            if entry is not None:
                for event_listener in list(self._event_listeners):
                    await event_listener(entry)
        else:
            return
        if not own:
            self.received += 1

    async def _read_inbox(self) -> None:
        client, block = self.conn.blocking()
        block_ms = int(block * 1000)
        inbox = self.conn.keys.worker(self._worker, "in")
        last = "0-0"
        delay = 0.05
        while not self._closed:
            try:
                reply = await client.xread({inbox: last}, count=256, block=block_ms)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._warn("this worker's inbox is unreachable: %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            for entry_id, fields in _stream_entries(reply):
                last = _text(entry_id)
                kind = _text(fields.get(b"k")) or "forward"
                owner = _text(fields.get(b"p")) or None
                entry = LogEntry("", kind, _text(fields.get(b"s")), fields.get(b"d"), owner=owner)
                for listener in list(self._event_listeners):
                    try:
                        await listener(entry)
                    except Exception:
                        logger.exception("redis fan-out: could not deliver a forwarded message")

    async def _beat(self) -> None:
        key = self.conn.keys.worker(self._worker, "alive")
        while not self._closed:
            await asyncio.sleep(self.heartbeat)
            with contextlib.suppress(Exception):
                async with self.conn.guard("heartbeat"):
                    await self.conn.client.set(key, b"1", px=self._heartbeat_ms())
