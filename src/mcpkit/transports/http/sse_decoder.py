"""The one Server-Sent Events decoder of every client transport (WHATWG HTML, "Parsing an event stream").

:class:`SSEDecoder` takes the body bytes as they arrive (:meth:`SSEDecoder.feed`) and returns the events they
complete. It follows the standard: lines end with CRLF, LF or CR (also when the pair is split between two reads);
one leading UTF-8 BOM is skipped; ``data`` lines are joined with LF; an ``id`` containing NUL is ignored; ``retry``
is taken only when it is all ASCII digits; a block without ``data`` dispatches nothing (but an ``id`` in it still
becomes the last event id); an event cut off by the end of the stream (no blank line after it) is NOT dispatched.

Bounds, checked before anything is buffered beyond one read: an event's data larger than ``max_event_size`` bytes
and a line longer than ``max_event_size`` + 1 KiB raise :class:`SSEEventTooLarge`, which names the limit.
"""

from __future__ import annotations

import re

LINE_SLACK = 1024  # a line may exceed the event bound by this much (its field name, "data: ", an id...)

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")
_BOM = b"\xef\xbb\xbf"


class SSEEventTooLarge(Exception):
    """A Server-Sent Event (or one line of the stream) is larger than the decoder's bound."""

    def __init__(self, limit: int, what: str = "event") -> None:
        super().__init__(f"an SSE {what} larger than the {limit}-byte limit")
        self.limit = limit


class SSEEvent:
    """One dispatched event: its type (``message`` by default), its data (UTF-8 bytes) and the last event id."""

    __slots__ = ("data", "event", "id")

    def __init__(self, event: str, data: bytes, id: str) -> None:
        self.event: str = event
        self.data: bytes = data
        self.id: str = id

    def __repr__(self) -> str:
        return f"SSEEvent(event={self.event!r}, data={self.data[:60]!r}, id={self.id!r})"


class SSEDecoder:
    """Incremental WHATWG event-stream decoder with a size bound (see the module docstring).

    ``last_event_id`` (the id to resume from, "" for none) and ``retry`` (the server's reconnection time in
    milliseconds, or None) live across :meth:`new_stream`, as they do on an ``EventSource``.
    """

    __slots__ = (
        "_buf",
        "_cr",
        "_event",
        "_first",
        "_id",
        "_lines",
        "_more",
        "_size",
        "_start",
        "last_event_id",
        "max_event_size",
        "retry",
    )

    def __init__(self, max_event_size: int) -> None:
        self.max_event_size: int = max_event_size
        self.last_event_id: str = ""
        self.retry: int | None = None
        self._id = ""
        self.new_stream()

    def new_stream(self) -> None:
        """Forget the partial line and event of the previous response (a reconnection starts afresh)."""
        self._buf = bytearray()
        self._cr = False  # the previous read ended with CR: a LF opening the next one belongs to it
        self._start = True  # nothing read yet: a BOM may come
        self._lines = 0  # data lines of the event so far: the first kept as is, more joined in _more
        self._first = b""
        self._more: bytearray | None = None  # (one growing buffer: a flood of empty data lines costs 1 byte each)
        self._size = 0
        self._event = b""
        self._id = self.last_event_id

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """The events completed by ``chunk`` (raises :class:`SSEEventTooLarge` past the bound)."""
        if self._start:
            head = bytes(self._buf) + chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._buf = bytearray(head)  # maybe the start of a BOM: wait for more
                return []
            self._start = False
            self._buf = bytearray()
            chunk = head[3:] if head.startswith(_BOM) else head
        elif self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        buf = self._buf
        data: bytes | bytearray
        if buf:
            scan = len(buf)  # the held part has no line end (a final CR was taken as one, see _cr)
            buf += chunk
            data = buf
        else:
            scan = 0
            data = chunk
        events: list[SSEEvent] = []
        start = 0
        for m in _LINE_BREAK.finditer(data, scan):
            end = m.end()
            if end == len(data) and m.group() == b"\r":
                self._cr = True
            self._line(bytes(data[start : m.start()]), events)
            start = end
        rest = len(data) - start
        if rest > self.max_event_size + LINE_SLACK:
            raise SSEEventTooLarge(self.max_event_size, "line")
        if data is buf:
            del buf[:start]
        elif rest:
            buf += data[start:]
        return events

    def _line(self, line: bytes, events: list[SSEEvent]) -> None:
        if not line:  # dispatch
            self.last_event_id = self._id
            if self._lines:
                event = self._event.decode("utf-8", "replace") if self._event else "message"
                data = self._first if self._more is None else bytes(self._more)
                events.append(SSEEvent(event, data, self._id))
                self._lines = 0
                self._more = None
                self._size = 0
            self._event = b""
            return
        if line[0] == 0x3A:  # ":" a comment
            return
        field, colon, value = line.partition(b":")
        if colon and value[:1] == b" ":
            value = value[1:]
        if field == b"data":
            self._size += len(value) + 1
            if self._size > self.max_event_size + 1:
                raise SSEEventTooLarge(self.max_event_size)
            if self._lines == 0:
                self._first = value
            else:
                if self._more is None:
                    self._more = bytearray(self._first)
                self._more += b"\n"
                self._more += value
            self._lines += 1
        elif field == b"event":
            self._event = value
        elif field == b"id":
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif field == b"retry" and value.isdigit():  # bytes.isdigit: ASCII digits only (False for b"")
            self.retry = int(value)


__all__ = ["LINE_SLACK", "SSEDecoder", "SSEEvent", "SSEEventTooLarge"]
