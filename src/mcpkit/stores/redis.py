"""Redis backends: several workers (processes or hosts) serve one MCP endpoint.

* :class:`RedisEventStore` (:class:`~mcpkit.stores.EventStore`): SSE events for ``Last-Event-ID`` replay.
* :class:`RedisSessionStore` (:class:`~mcpkit.stores.SessionStore`): handshake-session records with an idle TTL.
* :class:`RedisBus` (:class:`~mcpkit.stores.bus.Bus`): pub/sub between workers.
* :class:`RedisFanout` (:class:`~mcpkit.stores.bus.Fanout`): ``create_app(server, fanout=RedisFanout(url))``
  carries list_changed / resources/updated (and session-record announcements) to every worker.

The fourth shared piece needs no Redis: give every worker the same ``Server(request_state_keys=[...])`` and a
``requestState`` (and a list cursor) sealed by one worker opens on any other.

Why Redis *streams* for events: an event's number is its stream entry id (``<seq>-0``), so the order is Redis's own,
``XRANGE key <after+1> +`` reads exactly the events a resumption needs (no scan of what the client already has),
``XADD ... MAXLEN <n>`` bounds each stream exactly in the same command, and the first entry tells whether a replay
would have a hole. A list would need a scan to find the position of ``after``; a sorted set stores the score
twice and trims in a separate command. Each append and each replay is ONE command: a small Lua script (EVALSHA)
that does XADD with MAXLEN + PEXPIRE + SADD/PEXPIRE of the stream's group set, or reads the first entry, checks
for a gap and returns the range (renewing the TTL: a client still resuming keeps its stream alive). Measured here,
the script costs no more than a bare XADD, where a four-command pipeline cost 1.5x. The group set
(``<prefix>grp:<stream up to its first '/'>``) lets ``forget("<session id>/")`` (what the Streamable HTTP server
calls when a session ends) delete a session's streams without SCANning the keyspace; any other prefix falls back
to ``SCAN MATCH``.

Every key carries a TTL refreshed on write, so abandoned streams and sessions expire by themselves; the total
memory bound is the Redis server's ``maxmemory`` (use ``volatile-ttl`` or ``allkeys-lru``). Written for one Redis
(or a primary with replicas). Not for Redis Cluster as is: the append script touches a stream and its group
set, which would need one hash tag (the session id) to share a slot.

Pass a URL (``redis://127.0.0.1:6379/0``) or a ``redis.asyncio.Redis`` client created with
``decode_responses=False`` (values are bytes). A store built from a URL owns its client: ``await store.aclose()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from typing import TYPE_CHECKING, Any

import orjson

from .bus import BusFanout, QueueSubscription, end_all

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.client import PubSub

logger = logging.getLogger("mcpkit.stores.redis")

_FIELD = b"d"

# KEYS: stream [, group]; ARGV: entry id, data, maxlen, ttl ms ('' = none), stream name (group member)
_APPEND = """
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], ARGV[1], 'd', ARGV[2])
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
if #KEYS > 1 then
  redis.call('SADD', KEYS[2], ARGV[5])
  if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[2], ARGV[4]) end
end
return 1
"""

# KEYS: stream; ARGV: after + 1, ttl ms ('' = none). nil: unknown stream; 0: the next event was trimmed (a gap);
# else the entries from `after + 1` on.
_REPLAY = """
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
if #first == 0 then return false end
local want = tonumber(ARGV[1])
if tonumber(string.match(first[1][1], '^(%d+)')) > want then return 0 end
if ARGV[2] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return redis.call('XRANGE', KEYS[1], ARGV[1] .. '-0', '+')
"""
_GLOB_SPECIAL = frozenset("*?[]\\")


def _client(redis: str | Redis) -> tuple[Redis, bool]:
    if isinstance(redis, str):
        from .._extras import require

        _Redis = require("redis.asyncio", "mcpkit.stores.redis").Redis
        return _Redis.from_url(redis, decode_responses=False), True
    return redis, False


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in text)


def _group(stream: str) -> str | None:
    """The part of a stream key up to and including its first '/' (the session id, for the HTTP server)."""
    i = stream.find("/")
    return stream[: i + 1] if i >= 0 else None


class _Owned:
    _redis: Redis
    _owns: bool

    @property
    def redis(self) -> Redis:
        return self._redis

    async def aclose(self) -> None:
        """Close the client if this object created it from a URL."""
        if self._owns:
            await self._redis.aclose()


class RedisEventStore(_Owned):
    """An :class:`~mcpkit.stores.EventStore` in Redis streams (see the module docstring for the layout).

    Args:
        redis: a URL or a ``redis.asyncio.Redis`` (bytes responses).
        prefix: prepended to every key (several apps can share one Redis).
        max_events_per_stream: events kept per stream; a replay that needs an evicted one returns None.
        ttl: seconds after the last append (or replay) when a stream expires; None keeps streams until
            :meth:`forget` (not advised: a client that never ends its session would leak them).
    """

    def __init__(
        self,
        redis: str | Redis,
        *,
        prefix: str = "mcpkit:",
        max_events_per_stream: int = 1000,
        ttl: float | None = 3600.0,
    ) -> None:
        if max_events_per_stream < 1:
            raise ValueError("max_events_per_stream must be at least 1")
        if ttl is not None and ttl <= 0:
            raise ValueError("ttl must be positive (or None)")
        self._redis, self._owns = _client(redis)
        self.prefix = prefix
        self.max_events_per_stream = max_events_per_stream
        self.ttl = ttl
        self._ttl_arg = str(_ms(ttl)) if ttl is not None else ""
        self._append = self._redis.register_script(_APPEND)
        self._replay = self._redis.register_script(_REPLAY)

    def _key(self, stream: str) -> str:
        return f"{self.prefix}ev:{stream}"

    def _group_key(self, group: str) -> str:
        return f"{self.prefix}grp:{group}"

    async def append(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event ``seq``. Raises ``redis.ResponseError`` when ``seq`` is not above the stream's last number:
        two writers numbering one stream would otherwise interleave into a history no client can resume."""
        group = _group(stream)
        keys = [self._key(stream)] if group is None else [self._key(stream), self._group_key(group)]
        await self._append(keys=keys, args=[f"{seq}-0", data, self.max_events_per_stream, self._ttl_arg, stream])

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]] | None:
        reply = await self._replay(keys=[self._key(stream)], args=[max(after, 0) + 1, self._ttl_arg])
        if not isinstance(reply, list):
            return None  # unknown (never seen, forgotten, expired) or the events right after `after` were trimmed
        # raw entries: [b"<seq>-0", [b"d", data]]
        return [(int(entry_id[: entry_id.index(b"-")]), fields[1]) for entry_id, fields in reply]

    async def forget(self, prefix: str) -> None:
        group = _group(prefix)
        if group is not None and group == prefix:
            group_key = self._group_key(group)
            members = await self._redis.smembers(group_key)
            keys = [self._key(m.decode() if isinstance(m, bytes) else m) for m in members]
            await self._redis.unlink(group_key, *keys)
            return
        # Any other prefix: SCAN for the streams, and for the group sets whose every member starts with it.
        batch: list[Any] = []
        for pattern in (self._key(prefix), self._group_key(prefix)):
            async for key in self._redis.scan_iter(match=_glob_escape(pattern) + "*", count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    await self._redis.unlink(*batch)
                    batch.clear()
        if batch:
            await self._redis.unlink(*batch)


class RedisSessionStore(_Owned):
    """A :class:`~mcpkit.stores.SessionStore`: one JSON value per session with ``PX`` = the idle TTL, renewed by
    every :meth:`save` and :meth:`touch` (so the TTL counts from the session's last activity on any worker).
    :meth:`touch` is ``GETEX`` (Redis >= 6.2): the Streamable HTTP endpoint re-reads a session on every request
    with it, one round trip that also renews the TTL."""

    def __init__(self, redis: str | Redis, *, prefix: str = "mcpkit:") -> None:
        self._redis, self._owns = _client(redis)
        self.prefix = prefix

    def _key(self, session_id: str) -> str:
        return f"{self.prefix}sess:{session_id}"

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        key = self._key(session_id)
        if ttl is not None and ttl <= 0:
            await self._redis.unlink(key)  # already expired
            return
        await self._redis.set(key, orjson.dumps(state), px=_ms(ttl) if ttl is not None else None)

    async def load(self, session_id: str) -> dict[str, Any] | None:
        raw = await self._redis.get(self._key(session_id))
        if raw is None:
            return None
        state = orjson.loads(raw)
        return state if isinstance(state, dict) else None

    async def touch(self, session_id: str, ttl: float | None) -> dict[str, Any] | None:
        """The session's state (None if gone), its TTL renewed to ``ttl`` in the same command."""
        key = self._key(session_id)
        if ttl is None:
            raw = await self._redis.getex(key, persist=True)
        else:
            raw = await self._redis.getex(key, px=_ms(ttl))
        if raw is None:
            return None
        state = orjson.loads(raw)
        return state if isinstance(state, dict) else None

    async def delete(self, session_id: str) -> None:
        await self._redis.unlink(self._key(session_id))


class RedisBus(_Owned):
    """A :class:`~mcpkit.stores.bus.Bus` over Redis pub/sub.

    One pub/sub connection per bus carries every subscription of this process (channels are multiplexed); each
    subscriber has its own bounded queue (the oldest message is dropped when a subscriber falls behind). Delivery
    is at most once, like Redis pub/sub itself: a worker that is disconnected misses what was published meanwhile
    (the reader reconnects and resubscribes by itself).
    """

    def __init__(self, redis: str | Redis, *, prefix: str = "mcpkit:", queue_size: int = 1024) -> None:
        self._redis, self._owns = _client(redis)
        self.prefix = prefix
        self.queue_size = queue_size
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        self._subs: dict[bytes, set[QueueSubscription]] = {}
        self._pending: dict[bytes, asyncio.Future[None]] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    def _channel(self, channel: str) -> bytes:
        return f"{self.prefix}bus:{channel}".encode()

    async def publish(self, channel: str, data: bytes) -> None:
        await self._redis.publish(self._channel(channel), data)

    async def subscribe(self, channel: str) -> QueueSubscription:
        """Subscribe; the subscription is live (Redis confirmed it) when this returns."""
        if self._closed:
            raise RuntimeError("the bus is closed")
        name = self._channel(channel)
        sub = QueueSubscription(self.queue_size, lambda s: self._drop(name, s))
        async with self._lock:
            subs = self._subs.get(name)
            if subs is not None:
                subs.add(sub)
                return sub
            self._subs[name] = {sub}
            if self._pubsub is None:
                self._pubsub = self._redis.pubsub()
            confirmed = asyncio.get_running_loop().create_future()
            self._pending[name] = confirmed
            await self._pubsub.subscribe(name)
            if self._reader is None:
                self._reader = asyncio.get_running_loop().create_task(self._read(self._pubsub))
        try:
            await asyncio.wait_for(asyncio.shield(confirmed), 10.0)
        except BaseException:
            await sub.aclose()
            raise
        return sub

    def _drop(self, name: bytes, sub: QueueSubscription) -> None:
        subs = self._subs.get(name)
        if subs is None:
            return
        subs.discard(sub)
        if not subs and not self._closed:
            del self._subs[name]
            pubsub = self._pubsub
            if pubsub is not None:
                task = asyncio.get_running_loop().create_task(self._unsubscribe(pubsub, name))
                task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _unsubscribe(self, pubsub: PubSub, name: bytes) -> None:
        async with self._lock:
            if name not in self._subs:
                await pubsub.unsubscribe(name)

    async def _read(self, pubsub: PubSub) -> None:
        delay = 0.05
        while not self._closed:
            try:
                msg = await pubsub.get_message(timeout=None)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection lost: redis-py reconnects and resubscribes on the next read
                logger.warning("redis bus: %s; retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            if msg is None:
                continue
            kind = msg.get("type")
            name = msg.get("channel")
            if kind == "message":
                for sub in list(self._subs.get(name, ())):
                    sub.put(msg["data"])
            elif kind == "subscribe":
                fut = self._pending.pop(name, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)

    async def aclose(self) -> None:
        """End every subscription and close the pub/sub connection (and the client if the bus owns it)."""
        self._closed = True
        end_all(self._subs)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
            self._pubsub = None
        await super().aclose()


class RedisFanout(BusFanout):
    """A :class:`~mcpkit.stores.bus.Fanout` over Redis pub/sub: ``create_app(server,
    fanout=RedisFanout("redis://..."))`` on every worker, and a change on one reaches the clients of all.

    Built from a URL it owns its :class:`RedisBus` (closed by :meth:`aclose`); ``prefix`` namespaces the channel
    (``<prefix>bus:<channel>``) so several apps can share one Redis; ``queue_size`` bounds the events waiting for
    this worker's subscriber (the oldest is dropped when it falls behind)."""

    def __init__(
        self, redis: str | Redis, *, prefix: str = "mcpkit:", channel: str = "notify", queue_size: int = 1024
    ) -> None:
        super().__init__(RedisBus(redis, prefix=prefix, queue_size=queue_size), channel=channel)

    async def aclose(self) -> None:
        """Stop the subscriber and close the bus (and its client if it was built from a URL)."""
        closed = self._closed
        await super().aclose()
        if not closed and isinstance(self.bus, RedisBus):
            await self.bus.aclose()


__all__ = ["RedisBus", "RedisEventStore", "RedisFanout", "RedisSessionStore"]
