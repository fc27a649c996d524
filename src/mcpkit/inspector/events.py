"""What the inspector tells its pages as it happens: :class:`EventHub`, a fan-out of JSON events to the open
pages' event streams.

Each event is encoded once, as one Server-Sent Events frame, and put in every subscriber's queue. A queue holds at
most ``queue_size`` frames and ``queue_bytes`` bytes (the frame that crosses them is still queued); a page that falls
behind loses its queue and gets one ``resync`` event instead (it then asks for the whole state again), so a slow or
stalled page never makes the inspector hold more. At most ``max_subscribers`` pages listen at once; one more is
refused (HTTP 429).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from .._aio import SizedQueue

__all__ = [
    "DEFAULT_EVENT_BYTES",
    "DEFAULT_EVENT_QUEUE",
    "DEFAULT_MAX_SUBSCRIBERS",
    "EventHub",
    "Subscriber",
    "TooManySubscribers",
]

DEFAULT_MAX_SUBSCRIBERS = 16
DEFAULT_EVENT_QUEUE = 2_000
DEFAULT_EVENT_BYTES = 16 * 1024 * 1024

_RESYNC = b'data: {"type":"resync"}\n\n'


class TooManySubscribers(RuntimeError):
    """``max_subscribers`` pages already listen."""


def frame(event: dict[str, Any]) -> bytes:
    """One SSE frame carrying ``event`` as JSON."""
    return b"data: " + orjson.dumps(event) + b"\n\n"


class Subscriber:
    """One page's event stream: ``await next()`` returns the next frame (bytes)."""

    def __init__(self, hub: EventHub, queue_size: int, queue_bytes: int = DEFAULT_EVENT_BYTES) -> None:
        self._hub = hub
        self._queue: SizedQueue[bytes] = SizedQueue(queue_size, queue_bytes, len)
        self.overflowed: int = 0

    def offer(self, data: bytes) -> None:
        try:
            self._queue.put_nowait(data)
        except asyncio.QueueFull:
            self.overflowed += 1
            while not self._queue.empty():
                self._queue.get_nowait()
            self._queue.put_nowait(_RESYNC)

    async def next(self) -> bytes:
        return await self._queue.get()

    def close(self) -> None:
        self._hub._subscribers.discard(self)


class EventHub:
    """The fan-out (see the module docstring)."""

    def __init__(
        self,
        *,
        max_subscribers: int = DEFAULT_MAX_SUBSCRIBERS,
        queue_size: int = DEFAULT_EVENT_QUEUE,
        queue_bytes: int = DEFAULT_EVENT_BYTES,
    ):
        self.max_subscribers = max_subscribers
        self.queue_size = queue_size
        self.queue_bytes = queue_bytes
        self._subscribers: set[Subscriber] = set()

    @property
    def subscribers(self) -> int:
        """Pages listening now."""
        return len(self._subscribers)

    def subscribe(self) -> Subscriber:
        """A new stream; :class:`TooManySubscribers` when ``max_subscribers`` already listen."""
        if len(self._subscribers) >= self.max_subscribers:
            raise TooManySubscribers(f"{self.max_subscribers} pages already listen")
        sub = Subscriber(self, self.queue_size, self.queue_bytes)
        self._subscribers.add(sub)
        return sub

    def publish(self, type_: str, **data: Any) -> None:
        """Send ``{"type": type_, **data}`` to every page (nothing happens without one)."""
        if not self._subscribers:
            return
        data["type"] = type_
        encoded = frame(data)
        for sub in list(self._subscribers):
            sub.offer(encoded)
