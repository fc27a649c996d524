"""The line of incoming requests that wait for one of a peer's request slots.

While every one of its ``max_concurrency`` slots is taken, a :class:`~mcpkit.engine.peer.Peer` goes on reading its
input: notifications (``notifications/cancelled``, progress, ...) and the answers to its own requests are handled at
once, and a request enters this line, to be started in arrival order as slots free. Without it the reader would
wait for a slot, and so would a cancellation that would free one, or the client's answer a running request is
waiting for (a server whose running tools all ask the client something would stop until those requests timed out).

A batch's items wait in the same line; each has a future that resolves when it ends (or leaves the line unrun),
so the batch's answer array leaves once every item is answered.

A request in the line is in the peer's in-flight table (its id is taken; a cancellation takes it out of the line,
unanswered). The line is bounded in requests and in the bytes of their frames; when it is full the reader waits
for room (backpressure, as it waits for a slot when there is no line).
"""

from __future__ import annotations

import asyncio
from collections import deque

from .._aio import running_loop as _running_loop
from .context import RequestContext

#: Bytes of the frames of the requests one peer holds waiting for a slot (Peer(max_waiting_bytes=...)).
DEFAULT_MAX_WAITING_BYTES = 16 * 1024 * 1024


class WaitingLine:
    """Requests waiting for a request slot, in arrival order, bounded by ``max_count`` requests and ``max_bytes``
    bytes of their frames (a request always fits an empty line, whatever its size: the transport bounds a frame).
    The peer keeps the rule that the line is empty while a slot is free."""

    __slots__ = ("_room", "items", "max_bytes", "max_count", "size", "starting")

    def __init__(self, max_count: int, max_bytes: int) -> None:
        self.max_count: int = max_count
        self.max_bytes: int = max_bytes
        # (request, frame bytes, a batch item's future: resolved when it ends, its batch waits for it)
        self.items: deque[tuple[RequestContext, int, asyncio.Future[None] | None]] = deque()
        self.size: int = 0  # bytes of the frames in the line
        self.starting: bool = False  # the peer starts requests from the line (one ending meanwhile: no re-entry)
        self._room: list[asyncio.Future[None]] = []  # readers waiting for room

    def fits(self, size: int) -> bool:
        """Whether a request of ``size`` bytes may enter now."""
        n = len(self.items)
        return n < self.max_count and (n == 0 or self.size + size <= self.max_bytes)

    def push(self, ctx: RequestContext, size: int, ended: asyncio.Future[None] | None = None) -> None:
        """Put ``ctx`` at the end of the line; ``ended``: a batch item's, resolved when it ends (or leaves the
        line unrun)."""
        self.items.append((ctx, size, ended))
        self.size += size

    def pop(self) -> tuple[RequestContext, asyncio.Future[None] | None]:
        """The request waiting longest, out of the line (with its batch item's future)."""
        ctx, size, ended = self.items.popleft()
        self.size -= size
        self._left()
        return ctx, ended

    def remove(self, ctx: RequestContext) -> bool:
        """Take ``ctx`` out of the line (it was cancelled); False when it is not in it."""
        items = self.items
        for i, (waiting, size, ended) in enumerate(items):
            if waiting is ctx:
                del items[i]
                self.size -= size
                self._left()
                _resolve(ended)
                return True
        return False

    def clear(self) -> list[RequestContext]:
        """Empty the line (the peer closes); the requests that were in it."""
        out = [ctx for ctx, _, _ in self.items]
        for _, _, ended in self.items:
            _resolve(ended)
        self.items.clear()
        self.size = 0
        self._left()
        return out

    async def room(self) -> None:
        """Wait until a request leaves the line."""
        waiter: asyncio.Future[None] = _running_loop().create_future()
        self._room.append(waiter)
        try:
            await waiter
        finally:
            if waiter in self._room:
                self._room.remove(waiter)

    def _left(self) -> None:
        room = self._room
        if room:
            for waiter in room:
                if not waiter.done():
                    waiter.set_result(None)
            room.clear()


def _resolve(ended: asyncio.Future[None] | None) -> None:
    if ended is not None and not ended.done():
        ended.set_result(None)  # (a batch item that will not run: its batch answers without it)


__all__ = ["DEFAULT_MAX_WAITING_BYTES", "WaitingLine"]
