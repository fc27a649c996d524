"""Bounded in-memory stores (the defaults). Memory stays bounded however clients behave: per-stream event
counts, a total byte budget with oldest-stream eviction, and a cap on remembered sessions."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import Any

from .base import BaseSessionStore


class _Stream:
    __slots__ = ("events", "first", "size")

    def __init__(self, maxlen: int) -> None:
        self.events: deque[tuple[int, bytes]] = deque(maxlen=maxlen)
        self.first = 1  # seq of the oldest event still kept (events before it were evicted)
        self.size = 0


class InMemoryEventStore:
    """Keeps the last ``max_events_per_stream`` events of each stream, at most ``max_streams`` streams and
    ``max_bytes`` of event data in total.

    When the budget is exceeded the oldest streams are dropped whole (the stream being written, when it is the
    oldest, loses its own oldest events instead); a replay that would need an evicted event returns None (the
    server then answers the resumption with an error instead of a stream with a hole).
    """

    def __init__(
        self, *, max_events_per_stream: int = 1000, max_bytes: int = 64 * 1024 * 1024, max_streams: int = 100_000
    ) -> None:
        self.max_events_per_stream = max_events_per_stream
        self.max_bytes = max_bytes
        self.max_streams = max_streams  # each stream costs ~1 KB of bookkeeping beyond its bytes
        self._streams: OrderedDict[str, _Stream] = OrderedDict()
        self._bytes = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    @property
    def stream_count(self) -> int:
        return len(self._streams)

    async def append(self, stream: str, seq: int, data: bytes) -> None:
        s = self._streams.get(stream)
        if s is not None and s.events and seq <= s.events[-1][0]:
            # numbering restarted (another worker took the stream over): the newest writer wins
            self._bytes -= self._streams.pop(stream).size
            s = None
        if s is None:
            while len(self._streams) >= self.max_streams:
                _, victim = self._streams.popitem(last=False)
                self._bytes -= victim.size
            s = self._streams[stream] = _Stream(self.max_events_per_stream)
            s.first = seq
        events = s.events
        if len(events) == events.maxlen:
            old_seq, old = events[0]
            s.size -= len(old)
            self._bytes -= len(old)
            s.first = old_seq + 1
        # A copy: bytes from orjson.dumps keep their whole encode buffer (about 4 KiB for a 40-byte message with
        # orjson 3.13), so a store of small events would hold ~100x the bytes max_bytes counts.
        data = memoryview(data).tobytes()
        events.append((seq, data))
        s.size += len(data)
        self._bytes += len(data)
        while self._bytes > self.max_bytes:
            streams = iter(self._streams.items())
            key, victim = next(streams)
            if victim is s:
                # the stream written to is the oldest (or the only one): its own oldest events go first, down to
                # the one just written; then the next oldest stream
                if len(events) > 1:
                    old_seq, old = events.popleft()
                    s.size -= len(old)
                    self._bytes -= len(old)
                    s.first = old_seq + 1
                    continue
                following = next(streams, None)
                if following is None:
                    break  # one event larger than the whole budget: kept alone, so the stream stays resumable
                key, victim = following
            del self._streams[key]
            self._bytes -= victim.size

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]] | None:
        s = self._streams.get(stream)
        if s is None:
            return None
        if after + 1 < s.first:
            return None  # the events right after `after` were evicted
        return [(seq, data) for seq, data in s.events if seq > after]

    async def forget(self, prefix: str) -> None:
        for key in [k for k in self._streams if k.startswith(prefix)]:
            self._bytes -= self._streams.pop(key).size


class InMemorySessionStore(BaseSessionStore):
    """Session records with a TTL, at most ``max_sessions`` (oldest dropped first)."""

    def __init__(self, *, max_sessions: int = 100_000) -> None:
        self.max_sessions = max_sessions
        self._items: OrderedDict[str, tuple[float | None, dict[str, Any]]] = OrderedDict()

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        expires = time.monotonic() + ttl if ttl is not None else None
        self._items[session_id] = (expires, state)
        self._items.move_to_end(session_id)
        while len(self._items) > self.max_sessions:
            self._items.popitem(last=False)

    async def load(self, session_id: str) -> dict[str, Any] | None:
        item = self._items.get(session_id)
        if item is None:
            return None
        expires, state = item
        if expires is not None and expires < time.monotonic():
            del self._items[session_id]
            return None
        return state

    async def touch(self, session_id: str, ttl: float | None) -> dict[str, Any] | None:
        """The session's state (None if gone or expired), its TTL renewed to ``ttl``."""
        state = await self.load(session_id)
        if state is not None:
            self._items[session_id] = (time.monotonic() + ttl if ttl is not None else None, state)
            self._items.move_to_end(session_id)
        return state

    async def delete(self, session_id: str) -> None:
        self._items.pop(session_id, None)
