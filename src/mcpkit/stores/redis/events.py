"""The SSE events of resumable streams in Redis: :class:`RedisEventStore`.

Each stream is a Redis stream whose entry ids ARE the event numbers (``<seq>-0``): XADD refuses an id that does not
grow (so two writers can never interleave one stream) and ``XRANGE`` from ``after + 1`` is the replay; the first
remaining entry tells whether a replay would have a hole. Each append and each replay is ONE command: a small Lua
script (EVALSHA) that does XADD with MAXLEN + PEXPIRE + ZADD/PEXPIRE of the session's streams (a sorted set, the
least recently written first: beyond ``max_streams_per_session`` that one is deleted in the same script; the
bytes of the session's events are counted in ``<prefix>{<session>}:evb``, and beyond ``max_bytes_per_session`` the
streams written least recently go, then the oldest events of the one written now), or reads
the first entry, checks for a gap and returns the range (renewing the TTL: a client still resuming keeps its
stream alive).

Keys (see :class:`~mcpkit.stores.redis.connection.KeyScheme`): stream ``<session>/<n>`` is
``<prefix>{<session>}:ev:<n>`` and the session's streams ``<prefix>{<session>}:evo``, so one session's
events live in one Redis Cluster slot and ``forget("<session>/")`` (what the Streamable HTTP server calls when a
session ends) deletes them in one command without scanning the keyspace; any other prefix falls back to
``SCAN MATCH`` (on every node of a cluster).

A stream's last event (the answer of the request that opened it) is marked (:meth:`RedisEventStore.append_last`),
so a worker that resumes a stream another worker is still writing follows it (:meth:`RedisEventStore.follow`)
until that answer, then ends it. The id of that request is kept with its first event
(:meth:`RedisEventStore.append_first`, in the same script) in the session's hash ``<prefix>{<session>}:evr``
(stream name -> the id in JSON, at most :data:`MAX_REQUEST_ID_BYTES`; same TTL, deleted with the session's events):
when the writer is gone, the follower answers that request with an error.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..base import MAX_REQUEST_ID_BYTES, check_event_bounds, request_id_from_json, request_id_json
from .connection import DEFAULT_TIMEOUT, OnConnection, RedisConnection, connection_for

if TYPE_CHECKING:
    from .connection import RedisClient

# KEYS: stream, the session's streams (sorted set, the least recently written first), request ids, bytes (a hash:
# stream name -> the bytes of its events kept; field '*': their sum). ARGV: entry id, data, maxlen, ttl ms ('' =
# none), stream name (member), last ('1'/''), the id of the request the stream answers (JSON; '' = none), the most
# streams a session keeps, the key of the session's streams without the part after '/' (to delete one that goes),
# the most bytes a session keeps.
_APPEND = """
local function weigh(stream, bytes)
  redis.call('HINCRBY', KEYS[4], stream, bytes)
  return redis.call('HINCRBY', KEYS[4], '*', bytes)
end
local function drop(stream)
  local at = string.find(stream, '/', 1, true)
  redis.call('DEL', ARGV[9] .. (at and string.sub(stream, at + 1) or ''))
  redis.call('HDEL', KEYS[3], stream)
  local bytes = tonumber(redis.call('HGET', KEYS[4], stream))
  if bytes then
    redis.call('HDEL', KEYS[4], stream)
    redis.call('HINCRBY', KEYS[4], '*', -bytes)
  end
end
-- the events MAXLEN is about to trim leave the count of bytes
local freed = 0
local over = redis.call('XLEN', KEYS[1]) - tonumber(ARGV[3]) + 1
if over > 0 then
  for _, entry in ipairs(redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', over)) do
    freed = freed + string.len(entry[2][2])
  end
end
if ARGV[6] == '1' then
  redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], ARGV[1], 'd', ARGV[2], 'f', '1')
else
  redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], ARGV[1], 'd', ARGV[2])
end
if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if #top == 0 or top[1] ~= ARGV[5] then
  local score = 1
  if #top > 0 then score = tonumber(top[2]) + 1 end
  local added = redis.call('ZADD', KEYS[2], score, ARGV[5])
  local extra = added == 1 and redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[8]) or 0
  if extra > 0 then
    local old = redis.call('ZPOPMIN', KEYS[2], extra)
    for i = 1, #old, 2 do drop(old[i]) end
  end
end
-- past the byte budget: the streams written least recently go, then the oldest events of this one (never the
-- event just kept)
local budget = tonumber(ARGV[10])
local total = weigh(ARGV[5], string.len(ARGV[2]) - freed)
while total > budget do
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)
  if #oldest == 0 or oldest[1] == ARGV[5] then break end
  redis.call('ZREM', KEYS[2], oldest[1])
  drop(oldest[1])
  total = tonumber(redis.call('HGET', KEYS[4], '*')) or 0
end
while total > budget do
  local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)
  if #first == 0 or first[1][1] == ARGV[1] then break end
  redis.call('XDEL', KEYS[1], first[1][1])
  total = weigh(ARGV[5], -string.len(first[1][2][2]))
end
if ARGV[4] ~= '' then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
if ARGV[7] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[5], ARGV[7])
  if ARGV[4] ~= '' then redis.call('PEXPIRE', KEYS[3], ARGV[4]) end
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
#: Streams one session keeps by default (see ``RedisEventStore(max_streams_per_session=)``).
MAX_STREAMS_PER_SESSION = 1000
#: Bytes of events one session keeps by default (see ``RedisEventStore(max_bytes_per_session=)``).
MAX_BYTES_PER_SESSION = 16 * 1024 * 1024
_GLOB_SPECIAL = frozenset("*?[]\\")

__all__ = ["MAX_REQUEST_ID_BYTES", "RedisEventStore"]


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _glob_escape(text: str) -> str:
    return "".join("\\" + c if c in _GLOB_SPECIAL else c for c in text)


def _entries(raw: Any) -> tuple[list[tuple[int, bytes]], bool]:
    """Stream entries ``[b"<seq>-0", [b"d", data, (b"f", b"1")]]`` as (seq, data) and whether the last was marked."""
    events: list[tuple[int, bytes]] = []
    last = False
    for entry_id, fields in raw:
        if isinstance(fields, dict):  # (a client's parsed form)
            data, last = fields.get(b"d", b""), fields.get(b"f") == b"1"
        else:
            data, last = fields[1], len(fields) > 3 and fields[3] == b"1"
        events.append((int(entry_id[: entry_id.index(b"-")]), data))
    return events, last


class RedisEventStore(OnConnection):
    """An :class:`~mcpkit.stores.EventStore` in Redis streams (see the module docstring for the layout); also a
    :class:`~mcpkit.stores.FollowableEventStore` and a :class:`~mcpkit.stores.RequestEventStore`.

    Args:
        redis: a URL, a ``redis.asyncio`` client (bytes responses) or a shared
            :class:`~mcpkit.stores.redis.RedisConnection` (then its prefix applies).
        prefix: prepended to every key (several apps can share one Redis).
        max_events_per_stream: events kept per stream; a replay that needs an evicted one returns None.
        ttl: seconds after the last append (or replay) when a stream expires; None keeps streams until
            :meth:`forget` (not advised: a client that never ends its session would leak them).
        max_streams_per_session: streams kept per session (each answer streamed as SSE is one, about 5 KB in
            Redis); beyond, the one the session wrote to least recently is deleted (a resume of it gets None).
        max_bytes_per_session: bytes of events kept per session (default 16 MiB, the events' data; events trimmed
            by ``max_events_per_stream`` leave the count): beyond, the streams the session wrote to least recently
            are deleted, then the oldest events of the stream written now (never the event just kept): so a
            session's events take at most this much of Redis, or one event if it is larger.
        cluster, timeout: for a URL (see :class:`~mcpkit.stores.redis.RedisConnection`).
    """

    def __init__(
        self,
        redis: str | RedisClient | RedisConnection,
        *,
        prefix: str = "mcpkit:",
        max_events_per_stream: int = 1000,
        ttl: float | None = 3600.0,
        max_streams_per_session: int = MAX_STREAMS_PER_SESSION,
        max_bytes_per_session: int = MAX_BYTES_PER_SESSION,
        cluster: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        check_event_bounds(max_events_per_stream, max_streams_per_session, max_bytes_per_session, ttl)
        self.conn: RedisConnection
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)
        self.max_events_per_stream = max_events_per_stream
        self.max_streams_per_session = max_streams_per_session
        self.max_bytes_per_session = max_bytes_per_session
        self.ttl = ttl
        self._ttl_arg = str(_ms(ttl)) if ttl is not None else ""
        client = self.conn.client
        self._append = client.register_script(_APPEND)
        self._replay = client.register_script(_REPLAY)

    def key(self, stream: str) -> str:
        """The Redis key of ``stream``: ``<prefix>{<session>}:ev:<rest>`` for ``<session>/<rest>``."""
        tag, _, rest = stream.partition("/")
        return self.conn.keys.key(tag, "ev", rest)

    def _group_key(self, stream: str) -> str:
        return self.conn.keys.key(stream.partition("/")[0], "evo")

    def _requests_key(self, stream: str) -> str:
        return self.conn.keys.key(stream.partition("/")[0], "evr")

    def _bytes_key(self, stream: str) -> str:
        return self.conn.keys.key(stream.partition("/")[0], "evb")

    async def append(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event ``seq``. Raises ``redis.ResponseError`` when ``seq`` is not above the stream's last number:
        two writers numbering one stream would otherwise interleave into a history no client can resume."""
        await self._add(stream, seq, data, "")

    async def append_last(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event ``seq`` as the stream's last (the answer that ends it): a follower stops after it."""
        await self._add(stream, seq, data, "1")

    async def append_first(self, stream: str, seq: int, data: bytes, request_id: str | int) -> None:
        """Keep event ``seq`` (the stream's first) and, in the same script, the id of the request the stream
        answers (not kept when its JSON is longer than :data:`MAX_REQUEST_ID_BYTES`)."""
        await self._add(stream, seq, data, "", request_id_json(request_id) or b"")

    async def request_of(self, stream: str) -> str | int | None:
        """The id of the request ``stream`` answers, as :meth:`append_first` kept it; None when there is none."""
        async with self.conn.guard("event store"):
            raw = await self.conn.client.hget(self._requests_key(stream), stream)
        return request_id_from_json(raw)

    async def _add(self, stream: str, seq: int, data: bytes, last: str, request_id: bytes = b"") -> None:
        tag = stream.partition("/")[0]
        keys = [self.key(stream), self._group_key(stream), self._requests_key(stream), self._bytes_key(stream)]
        base = self.conn.keys.key(tag, "ev", "")
        cap = self.max_streams_per_session
        args = [f"{seq}-0", data, self.max_events_per_stream, self._ttl_arg, stream, last, request_id, cap, base]
        args.append(self.max_bytes_per_session)
        async with self.conn.guard("event store"):
            await self._append(keys=keys, args=args)

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]] | None:
        async with self.conn.guard("event store"):
            reply = await self._replay(keys=[self.key(stream)], args=[max(after, 0) + 1, self._ttl_arg])
        if not isinstance(reply, list):
            return None  # unknown (never seen, forgotten, expired) or the events right after `after` were trimmed
        return _entries(reply)[0]

    async def follow(self, stream: str, after: int, timeout: float) -> tuple[list[tuple[int, bytes]], bool] | None:
        """The events of ``stream`` after ``after`` as they come: waits up to ``timeout`` seconds (at most
        :data:`~mcpkit.stores.redis.connection.BLOCK`) for the first, and says whether the stream's last event is
        among them. ``([], False)`` when nothing came; None when the stream is gone (expired or forgotten) or,
        with ``timeout=0`` (what is there now), when events after ``after`` were evicted."""
        key = self.key(stream)
        if timeout <= 0:  # what is there now, with the replay's gap check
            async with self.conn.guard("event store"):
                reply = await self._replay(keys=[key], args=[max(after, 0) + 1, self._ttl_arg])
            return _entries(reply) if isinstance(reply, list) else None
        client, block = self.conn.blocking()
        wait = max(1, min(int(timeout * 1000), int(block * 1000)))
        async with self.conn.guard("event store"):
            reply = await client.xread({key: f"{max(after, 0)}-0"}, count=100, block=wait)
            if not reply:
                return None if not await self.conn.client.exists(key) else ([], False)
        raw = reply[0][1] if isinstance(reply, list) else next(iter(reply.values()))[0]
        return _entries(raw)

    async def forget(self, prefix: str) -> None:
        keys = self.conn.keys
        tag, slash, rest = prefix.partition("/")
        client = self.conn.client
        async with self.conn.guard("event store"):
            if slash and not rest:  # "<session>/": the session's streams are named in one key, all in one slot
                group_key, older = keys.key(tag, "evo"), keys.key(tag, "evs")  # (evs: a set, before the cap)
                members = [*await client.zrange(group_key, 0, -1), *await client.smembers(older)]
                names = [self.key(m.decode() if isinstance(m, bytes) else m) for m in members]
                await client.unlink(group_key, older, keys.key(tag, "evr"), keys.key(tag, "evb"), *names)
                return
            # Any other prefix: SCAN for the streams (and the session sets whose streams all start with it).
            if slash:
                patterns = [_glob_escape(keys.key(tag, "ev", rest)) + "*"]
            else:
                start = _glob_escape(f"{keys.prefix}{{{prefix}")
                patterns = [start + "*}:ev:*", start + "*}:evo", start + "*}:evs", start + "*}:evr", start + "*}:evb"]
            batch: list[Any] = []
            for pattern in patterns:
                async for key in client.scan_iter(match=pattern, count=1000):
                    batch.append(key)
                    if len(batch) >= 500:
                        await client.unlink(*batch)
                        batch.clear()
            if batch:
                await client.unlink(*batch)

    async def aclose(self) -> None:
        """Close the connection if this store made it (from a URL or a client)."""
        if self._owns:
            await self.conn.aclose()
