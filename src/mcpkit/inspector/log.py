"""The inspector's message log: every JSON-RPC message between the inspector's client and the server, both ways,
with its time and, for an answer, how long its request took.

A bounded ring (:class:`MessageLog`): at most ``max_entries`` messages and ``max_bytes`` bytes of message text;
the oldest go first. One message's text is kept up to ``max_entry_bytes`` (its size is always recorded), so a
server that answers with 4 MiB results cannot make the log hold more than its byte bound. The answer-to-request
timing keeps at most ``MAX_PENDING_TIMES`` outstanding request ids (the oldest forgotten first).
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "DEFAULT_MAX_ENTRY_BYTES",
    "DEFAULT_MAX_LOG_BYTES",
    "LogEntry",
    "MessageLog",
]

DEFAULT_MAX_ENTRIES = 2_000
DEFAULT_MAX_LOG_BYTES = 16 * 1024 * 1024
DEFAULT_MAX_ENTRY_BYTES = 256 * 1024
MAX_PENDING_TIMES = 4_096
PREVIEW_CHARS = 300

OUT = "out"  # the inspector's client to the server
IN = "in"  # the server to the inspector's client


@dataclass(slots=True)
class LogEntry:
    """One message. ``direction`` is ``"out"`` (to the server) or ``"in"`` (from it); ``kind`` is ``request``,
    ``notification``, ``result``, ``error``, ``batch`` or ``invalid``; ``elapsed`` is the seconds since its request
    (answers only); ``text`` is the message as sent, cut at the entry bound (``cut`` says so); ``t`` is seconds
    since the log started, ``wall`` the Unix time."""

    seq: int
    t: float
    wall: float
    direction: str
    kind: str
    id: str | int | None
    method: str | None
    size: int
    elapsed: float | None
    text: str
    cut: bool

    def summary(self) -> dict[str, Any]:
        """What the page lists: everything but the whole text (a preview of it instead)."""
        return {
            "seq": self.seq,
            "t": round(self.t, 6),
            "wall": self.wall,
            "dir": self.direction,
            "kind": self.kind,
            "id": self.id,
            "method": self.method,
            "size": self.size,
            "elapsed": None if self.elapsed is None else round(self.elapsed, 6),
            "preview": self.text[:PREVIEW_CHARS],
        }

    def full(self) -> dict[str, Any]:
        """The summary with the whole kept text."""
        out = self.summary()
        out["text"] = self.text
        out["cut"] = self.cut
        return out


def _classify(data: bytes) -> tuple[str, Any, str | None]:
    """(kind, id, method) of one encoded message."""
    try:
        msg = orjson.loads(data)
    except orjson.JSONDecodeError:
        return "invalid", None, None
    if isinstance(msg, list):
        return "batch", None, None
    if not isinstance(msg, dict):
        return "invalid", None, None
    rid = msg.get("id")
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        rid = None
    method = msg.get("method")
    if isinstance(method, str):
        return ("request" if "id" in msg else "notification"), rid, method
    if "error" in msg:
        return "error", rid, None
    if "result" in msg:
        return "result", rid, None
    return "invalid", rid, None


class MessageLog:
    """A bounded ring of :class:`LogEntry` (see the module docstring). ``on_entry`` is called with each new entry
    (synchronously: it must not block)."""

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_LOG_BYTES,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        on_entry: Callable[[LogEntry], None] | None = None,
    ) -> None:
        if max_entries < 1 or max_bytes < 1 or max_entry_bytes < 1:
            raise ValueError("the message log's bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes: int = min(max_entry_bytes, max_bytes)
        self.on_entry = on_entry
        self._entries: deque[LogEntry] = deque()
        self._bytes = 0
        self._seq = 0
        self._start = time.monotonic()
        self._pending: OrderedDict[tuple[int, str, Any], tuple[float, str]] = OrderedDict()
        self.dropped: int = 0  # entries pushed out by the bounds

    @property
    def held_bytes(self) -> int:
        """Bytes of message text held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def record(
        self, direction: str, data: bytes | bytearray | memoryview, when: float | None = None, connection: int = 0
    ) -> LogEntry:
        """Add one message (``direction`` ``"out"`` or ``"in"``); ``when`` is a ``time.monotonic()`` reading;
        ``connection`` tells the connections apart (request ids start again on each, so an answer is timed
        against the request of its own connection)."""
        raw = bytes(data)
        now = time.monotonic() if when is None else when
        kind, rid, method = _classify(raw)
        elapsed: float | None = None
        if kind == "request" and rid is not None and method is not None:
            self._pending[(connection, direction, rid)] = (now, method)
            if len(self._pending) > MAX_PENDING_TIMES:
                self._pending.popitem(last=False)
        elif kind in ("result", "error") and rid is not None:
            asked = self._pending.pop((connection, OUT if direction == IN else IN, rid), None)
            if asked is not None:
                elapsed = now - asked[0]
                method = asked[1]
        size = len(raw)
        cut = size > self.max_entry_bytes
        text = raw[: self.max_entry_bytes].decode("utf-8", errors="replace")
        self._seq += 1
        entry = LogEntry(
            seq=self._seq,
            t=now - self._start,
            wall=time.time(),
            direction=direction,
            kind=kind,
            id=rid,
            method=method,
            size=size,
            elapsed=elapsed,
            text=text,
            cut=cut,
        )
        self._entries.append(entry)
        self._bytes += len(text)
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            old = self._entries.popleft()
            self._bytes -= len(old.text)
            self.dropped += 1
        if self.on_entry is not None:
            self.on_entry(entry)
        return entry

    def entries(self, since: int = 0) -> list[LogEntry]:
        """The entries with a sequence number above ``since``, oldest first."""
        if since <= 0:
            return list(self._entries)
        return [e for e in self._entries if e.seq > since]

    def get(self, seq: int) -> LogEntry | None:
        """The entry ``seq`` while the ring still holds it."""
        if not self._entries or seq < self._entries[0].seq or seq > self._entries[-1].seq:
            return None
        index = seq - self._entries[0].seq  # sequence numbers are consecutive in the ring
        entry = self._entries[index]
        return entry if entry.seq == seq else None

    def clear(self) -> None:
        """Forget every entry (sequence numbers go on)."""
        self._entries.clear()
        self._bytes = 0
        self._pending.clear()

    def stats(self) -> dict[str, int]:
        """Entries and bytes held, their bounds, and how many were pushed out."""
        return {
            "entries": len(self._entries),
            "bytes": self._bytes,
            "maxEntries": self.max_entries,
            "maxBytes": self.max_bytes,
            "maxEntryBytes": self.max_entry_bytes,
            "dropped": self.dropped,
        }
