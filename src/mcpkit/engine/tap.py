"""The message tap: every JSON-RPC message a peer receives or sends, shown to an observer as it passes.

A tap is a plain function ``tap(event)`` called synchronously with a :class:`TapEvent` for each message, in both
directions, on every transport: the peer calls it where the message enters it (parsed from the transport's
bytes) and where it leaves (written to an outbox, or returned to a request-scoped transport as a POST's answer).
It must not block: it runs on the event loop, inside the message's path (an ``async def`` tap is refused where it
is added: nothing would await it). An observer that is slow or must await something goes behind a
:class:`QueuedTap`, which hands the events to it on a task of its own through a queue bounded in events and in
bytes (the oldest dropped and counted when it falls behind). An exception in a tap is logged and never breaks the
peer. A peer without a tap pays one attribute test per message.

Taps are installed on a server with ``Server.add_tap(fn)`` (every peer of that server: its sessions, the stateless
peer of 2026-07-28 requests) and on a client with ``Client(..., tap=fn)`` or ``ClientSession(..., tap=fn)``.
:class:`TapRecorder` is a tap that keeps the last events, bounded in count and in bytes (tests, an inspector's
message log).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, NamedTuple

from ..protocol import jsonrpc
from ..protocol.jsonrpc import Batch, ErrorResponse, Invalid, Notification, Request, RequestId, Response
from .messages import BATCH, ERROR, NOTIFICATION, REQUEST, RESULT, UNKNOWN, Outgoing

logger: logging.Logger = logging.getLogger("mcpkit.engine")

IN: Final = "in"
"""A message the peer received."""
OUT: Final = "out"
"""A message the peer sent (or returned as a request-scoped transport's answer)."""

DEFAULT_QUEUED_BYTES: Final = 16 * 1024 * 1024
"""Message bytes a :class:`QueuedTap` holds for its observer at most, by default (four messages of the largest size
the transports read by default)."""

_KIND_NAMES = {REQUEST: "request", NOTIFICATION: "notification", RESULT: "result", ERROR: "error", BATCH: "batch"}


class TapEvent(NamedTuple):
    """One message passing through a peer.

    Attributes:
        direction: :data:`IN` (received) or :data:`OUT` (sent).
        message: the message: its bytes (``message.data``) and what it is (``kind``: one of the engine's
            ``REQUEST``, ``NOTIFICATION``, ``RESULT``, ``ERROR``, ``BATCH``, ``UNKNOWN``; ``id``, ``method``,
            ``params``, an error's ``code``), as the engine's :class:`~mcpkit.engine.Outgoing` describes it.
        timestamp: when it passed (``time.time()``, seconds since the epoch).
        peer: the name of the peer it passed through (``"client"``, ``"server:<name>"``, ...).
        channel: a number for the connection (the peer) it passed through, unique in this process: the events of
            one session share it.
    """

    direction: str
    message: Outgoing
    timestamp: float
    peer: str
    channel: int

    @property
    def kind(self) -> str:
        """The message's kind as a word: "request", "notification", "result", "error", "batch" or "unknown"."""
        return _KIND_NAMES.get(self.message.kind, "unknown")

    @property
    def method(self) -> str | None:
        """A request's or a notification's method."""
        return self.message.method

    @property
    def id(self) -> RequestId | None:
        """The request id of a request, a result or an error."""
        return self.message.id

    @property
    def data(self) -> bytes:
        """The message's bytes."""
        return self.message.data


Tap = Callable[[TapEvent], None]
"""A message observer: called synchronously with every :class:`TapEvent`; must not block."""


def described(msg: jsonrpc.Parsed | Batch, data: bytes | None) -> Outgoing:
    """What a parsed incoming message is (its bytes: ``data``, or the message encoded again when the transport
    parsed them itself and did not keep them)."""
    t = type(msg)
    if t is Request:
        req: Request = msg  # type: ignore[assignment]
        if data is None:
            data = jsonrpc.encode_request(req.id, req.method, req.params)
        return Outgoing(data, REQUEST, req.id, req.method, req.params)
    if t is Notification:
        note: Notification = msg  # type: ignore[assignment]
        if data is None:
            data = jsonrpc.encode_notification(note.method, note.params)
        return Outgoing(data, NOTIFICATION, None, note.method, note.params)
    if t is Response:
        res: Response = msg  # type: ignore[assignment]
        if data is None:
            data = jsonrpc.encode_result(res.id, res.result)
        return Outgoing(data, RESULT, res.id)
    if t is ErrorResponse:
        err: ErrorResponse = msg  # type: ignore[assignment]
        if data is None:
            data = jsonrpc.encode_error(err.id, err.error)
        code = err.error.get("code") if type(err.error) is dict else None
        return Outgoing(data, ERROR, err.id, code=code if type(code) is int else None)
    if t is Batch:
        return Outgoing(data if data is not None else b"", BATCH)
    inv: Invalid = msg  # type: ignore[assignment]
    return Outgoing(data if data is not None else b"", UNKNOWN, inv.id)


class TapHub:
    """The taps of one server or client, called in the order they were added; what a peer calls (``peer.tap``)."""

    __slots__ = ("taps",)

    def __init__(self) -> None:
        self.taps: tuple[Tap, ...] = ()

    def add(self, fn: Tap) -> Callable[[], None]:
        """Add ``fn``; returns a function that removes it again. An ``async def`` tap is a TypeError (it is called
        synchronously: nothing would await it); put it behind a :class:`QueuedTap`."""
        checked_tap(fn)
        self.taps = (*self.taps, fn)

        def remove() -> None:
            taps = list(self.taps)
            if fn in taps:
                taps.remove(fn)
                self.taps = tuple(taps)

        return remove

    def __bool__(self) -> bool:
        return bool(self.taps)

    def emit(self, direction: str, message: Outgoing, peer: str, channel: int) -> None:
        """Show one message to every tap (an exception in a tap is logged, never raised)."""
        event = TapEvent(direction, message, time.time(), peer, channel)
        for fn in self.taps:
            try:
                fn(event)
            except Exception:
                logger.exception("a message tap failed (the message went on)")


def checked_tap(fn: Tap) -> Tap:
    """``fn``, or a TypeError naming :class:`QueuedTap` if it is async (a tap is called synchronously on the event
    loop: nothing would await it). Whatever takes a tap checks it where it is given, before joining it to others."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__):
        raise TypeError(
            f"{fn!r} is async: a message tap is called synchronously on the event loop (nothing would await it); "
            "wrap it as QueuedTap(fn) (mcpkit.engine.tap), which runs it on a task of its own, bounded"
        )
    return fn


def hub_of(fn: Tap | None) -> TapHub | None:
    """A hub holding the one tap ``fn`` (None without one): what a peer is given."""
    if fn is None:
        return None
    hub = TapHub()
    hub.add(fn)
    return hub


class QueuedTap:
    """A tap for an observer that is slow or must await (write to a socket, a database): the events go into a
    bounded queue and ``fn(event)`` (``async def`` or plain) runs on a task of its own, one event at a time, in
    order, so the peer never waits for it. When the observer falls behind by ``max_queued`` events, or the events
    waiting hold ``max_bytes`` of messages, the oldest waiting ones are dropped (counted in :attr:`dropped`): memory
    stays bounded and the server's pace is its own. What ``fn`` raises is logged and the next event still reaches
    it::

        async def ship(event): await sink.send(event.data)
        app.add_tap(QueuedTap(ship, max_queued=1_000))

    Args:
        fn: the observer, called with each :class:`TapEvent`.
        max_queued: events waiting for it at most (default 1,000).
        max_bytes: message bytes (``len(event.data)``, the bytes the message came or went as) waiting for it at
            most, summed over the events waiting (default 16 MiB); an event larger than that on its own is dropped
            (counted in :attr:`dropped`), the ones waiting are kept.
    """

    def __init__(
        self,
        fn: Callable[[TapEvent], Awaitable[None] | None],
        max_queued: int = 1000,
        max_bytes: int = DEFAULT_QUEUED_BYTES,
    ) -> None:
        if max_queued < 1 or max_bytes < 1:
            raise ValueError("max_queued and max_bytes must be at least 1")
        self.fn = fn
        self.max_queued = max_queued
        self.max_bytes = max_bytes
        self._bytes = 0
        self._queue: deque[TapEvent] = deque()
        self._ready: asyncio.Event | None = None
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._busy = False
        self.seen: int = 0
        """Events shown to this tap."""
        self.dropped: int = 0
        """Events dropped (the oldest waiting) because the observer was ``max_queued`` events or ``max_bytes``
        behind, and events larger than ``max_bytes`` on their own."""

    def __call__(self, event: TapEvent) -> None:
        self.seen += 1
        size = len(event.message.data)  # (the bytes the event holds, known already: nothing is encoded for this)
        if size > self.max_bytes:
            self.dropped += 1
            return
        queue = self._queue
        while queue and (len(queue) >= self.max_queued or self._bytes + size > self.max_bytes):
            self._bytes -= len(queue.popleft().message.data)
            self.dropped += 1
        queue.append(event)
        self._bytes += size
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done() or self._loop is not loop:
            self._loop = loop
            self._ready = asyncio.Event()
            self._worker = loop.create_task(self._run(), name="mcpkit-queued-tap")
        assert self._ready is not None
        self._ready.set()

    def __len__(self) -> int:
        """Events waiting for the observer."""
        return len(self._queue)

    @property
    def size(self) -> int:
        """Message bytes waiting for the observer."""
        return self._bytes

    async def _run(self) -> None:
        ready = self._ready
        assert ready is not None
        queue = self._queue
        while True:
            while queue:
                event = queue.popleft()
                self._bytes -= len(event.message.data)
                self._busy = True
                try:
                    pending = self.fn(event)
                    if pending is not None:
                        await pending
                except Exception:
                    logger.exception("a queued message tap failed (the next events still reach it)")
                finally:
                    self._busy = False
            ready.clear()
            await ready.wait()

    async def drain(self) -> None:
        """Wait until the observer has seen every event queued so far (or dropped)."""
        while self._queue or self._busy:
            await asyncio.sleep(0.005)

    def close(self) -> None:
        """Stop the observer's task; events still waiting are let go."""
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None
        self._queue.clear()
        self._bytes = 0


class TapRecorder:
    """A tap that keeps the most recent events: at most ``max_events`` of them, holding at most ``max_bytes`` of
    message bytes (the oldest go first). For tests and message logs::

        recorder = TapRecorder()
        server.add_tap(recorder)
        ...
        [e.method for e in recorder.events if e.direction == "in"]

    Args:
        max_events: events kept at most (default 1,000).
        max_bytes: message bytes kept at most, summed over the events kept (default 4 MiB); an event larger than
            that on its own is kept with its message's bytes left out (``b""``) and its size in :attr:`dropped_bytes`.
    """

    def __init__(self, max_events: int = 1000, max_bytes: int = 4 * 1024 * 1024) -> None:
        if max_events < 1 or max_bytes < 1:
            raise ValueError("max_events and max_bytes must be at least 1")
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: deque[TapEvent] = deque()
        self._bytes = 0
        self.dropped: int = 0
        """Events let go to stay within the bounds."""
        self.dropped_bytes: int = 0
        """Bytes of messages too large to keep on their own (their events are kept without them)."""

    def __call__(self, event: TapEvent) -> None:
        size = len(event.message.data)
        if size > self.max_bytes:
            self.dropped_bytes += size
            event = event._replace(message=event.message._replace(data=b""))
            size = 0
        events = self._events
        events.append(event)
        self._bytes += size
        while len(events) > self.max_events or self._bytes > self.max_bytes:
            old = events.popleft()
            self._bytes -= len(old.message.data)
            self.dropped += 1

    @property
    def events(self) -> list[TapEvent]:
        """The events kept, oldest first."""
        return list(self._events)

    @property
    def size(self) -> int:
        """Bytes of messages kept."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[TapEvent]:
        return iter(list(self._events))

    def clear(self) -> None:
        """Forget every event kept."""
        self._events.clear()
        self._bytes = 0

    def messages(
        self, direction: str | None = None, *, kind: str | None = None, method: str | None = None
    ) -> list[TapEvent]:
        """The events kept that match: ``direction`` ("in"/"out"), ``kind`` ("request", "result", ...),
        ``method``."""
        return [
            e
            for e in self._events
            if (direction is None or e.direction == direction)
            and (kind is None or e.kind == kind)
            and (method is None or e.message.method == method)
        ]


__all__ = [
    "DEFAULT_QUEUED_BYTES",
    "IN",
    "OUT",
    "QueuedTap",
    "Tap",
    "TapEvent",
    "TapHub",
    "TapRecorder",
    "described",
    "hub_of",
]
