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

When the peer stops waiting for its requests (its drain gives up, or it closes: :func:`give_up`), each request
still in the line is answered with an error saying it never ran (a request is never dropped silently; one its
requester cancelled has left the line already, unanswered, as the spec says).
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from typing import Any, Protocol

from .._aio import running_loop as _running_loop
from ..protocol import jsonrpc
from ..protocol.errors import InternalError
from ..protocol.jsonrpc import JSONDict, Request, RequestId
from .context import RequestContext
from .messages import Outbox

#: Bytes of the frames of the requests one peer holds waiting for a slot (Peer(max_waiting_bytes=...)).
DEFAULT_MAX_WAITING_BYTES = 16 * 1024 * 1024


class WaitingLine:
    """Requests waiting for a request slot, in arrival order, bounded by ``max_count`` requests and ``max_bytes``
    bytes of their frames (a request always fits an empty line, whatever its size: the transport bounds a frame).
    The peer keeps the rule that the line is empty while a slot is free."""

    __slots__ = ("_room", "cutting", "items", "max_bytes", "max_count", "size", "starting")

    def __init__(self, max_count: int, max_bytes: int) -> None:
        self.max_count: int = max_count
        self.max_bytes: int = max_bytes
        # (request, frame bytes, a batch item's future: resolved when it ends, its batch waits for it)
        self.items: deque[tuple[RequestContext, int, asyncio.Future[None] | None]] = deque()
        self.size: int = 0  # bytes of the frames in the line
        self.starting: bool = False  # the peer starts requests from the line (one ending meanwhile: no re-entry)
        # the peer gave up on its requests, answering them (give_up with a cut): a batch whose sender is cancelled
        # now still sends its array, its cut items' errors in it
        self.cutting: bool = False
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


class LineHost(Protocol):
    """What the waiting line's logic uses of its peer (:class:`~mcpkit.engine.peer.Peer`)."""

    _waiting: WaitingLine
    _active: int
    _max_concurrency: int
    _slot_waiters: deque[asyncio.Future[None]]
    _inflight: dict[RequestId, RequestContext]

    def _queue(self, ctx: RequestContext) -> None: ...

    def _launch(self, ctx: RequestContext) -> asyncio.Task[Any] | None: ...

    def _finished(self, ctx: RequestContext, _: object = None) -> None: ...

    def _wake_one(self) -> None: ...

    async def _wait_slot(self) -> None: ...

    async def _send_error(self, rid: RequestId | None, error: JSONDict, out: Outbox) -> None: ...


async def enter_line(
    peer: LineHost, ctx: RequestContext, req: Request, size: int = 0, ended: asyncio.Future[None] | None = None
) -> bool:
    """No slot is free: put ``ctx`` into the peer's waiting line (True; the reader waits only while the line is
    full), or, with no line (``max_waiting=0``) or a slot freed meanwhile, wait for a slot (False: start it now).
    ``ended``: a batch item's future, resolved when it ends."""
    line = peer._waiting
    try:
        if line.max_count <= 0:
            await peer._wait_slot()
            return False
        if not size:  # (the frame's bytes, when the transport did not give them)
            size = len(jsonrpc.encode_request(req.id, req.method, req.params))
        while not line.fits(size):  # the line is full: the reader waits (backpressure)
            await line.room()
        if peer._active >= peer._max_concurrency or line.items:
            line.push(ctx, size, ended)
            return True
        return False
    except BaseException:
        peer._finished(ctx)  # (it holds no slot yet)
        raise


def from_line(peer: LineHost) -> None:
    """Start the requests waiting in the peer's line while slots are free, longest waiting first."""
    line = peer._waiting
    if line.starting:  # (a request started here ended at once: the loop below goes on)
        return
    line.starting = True
    try:
        while line.items and peer._active < peer._max_concurrency:
            ctx, ended = line.pop()
            if ended is None:
                peer._queue(ctx)
            elif ended.done():  # (its batch gave up on it)
                peer._finished(ctx)
            else:
                task = peer._launch(ctx)
                if task is None:
                    ended.set_result(None)
                else:
                    task.add_done_callback(functools.partial(_item_ended, ended))
    finally:
        line.starting = False
    if peer._slot_waiters and peer._active < peer._max_concurrency:
        peer._wake_one()


#: what a request still waiting for a slot when its peer stops is answered (-32603), unless the peer is told better
NEVER_RAN = "shutting down: this request waited for a free slot and never ran"


def give_up(peer: LineHost, cut: JSONDict | None = None) -> list[asyncio.Task[None]]:
    """The peer stops waiting for its requests (its drain gave up, or it closes), just before it cancels those
    still running. Each request still in the line leaves it (its id is freed) and is answered with ``cut``, or
    with -32603 :data:`NEVER_RAN` when ``cut`` is None. With ``cut``, each request still running is answered with
    it too, and counts as cancelled from now on (its cancellation sends nothing more); without, it is left to
    its cancellation, unanswered. With ``cut``, a batch item's error goes into its batch's array, which its sender
    still sends. Returns the task that sends the other answers (none: an empty list), for the caller to wait for,
    bounded."""
    answers: list[tuple[RequestContext, JSONDict]] = []
    line = peer._waiting
    if cut is not None:
        line.cutting = True
    waiting = line.clear()
    if waiting:
        never = cut if cut is not None else InternalError(NEVER_RAN).to_error()
        for ctx in waiting:
            peer._finished(ctx)
            _cut(ctx, never, cut is not None, answers)
    if cut is not None:
        for ctx in list(peer._inflight.values()):
            if not ctx.done and not ctx.cancelled:  # (done: its answer is made, and on its way)
                ctx.cancelled = True
                _cut(ctx, cut, True, answers)
    if not answers:
        return []
    return [_running_loop().create_task(_answer(peer, answers))]


def _cut(ctx: RequestContext, error: JSONDict, in_batch: bool, answers: list[tuple[RequestContext, JSONDict]]) -> None:
    """Answer ``ctx`` with ``error``: into its batch's array (``in_batch``: its sender sends the array even though
    it is cancelled, see :attr:`WaitingLine.cutting`), or on its own."""
    sink = ctx.sink
    if in_batch and sink is not None:
        sink += jsonrpc.encode_error(ctx.id, error)
        sink += b","
    else:
        answers.append((ctx, error))


async def _answer(peer: LineHost, answers: list[tuple[RequestContext, JSONDict]]) -> None:
    for ctx, error in answers:  # (in arrival order: each after what its request sent before)
        await peer._send_error(ctx.id, error, ctx.out)


def _item_ended(ended: asyncio.Future[None], _: object) -> None:
    """A batch item started from the waiting line ended: its batch stops waiting for it."""
    if not ended.done():
        ended.set_result(None)


def _resolve(ended: asyncio.Future[None] | None) -> None:
    if ended is not None and not ended.done():
        ended.set_result(None)  # (a batch item that will not run: its batch answers without it)


__all__ = ["DEFAULT_MAX_WAITING_BYTES", "NEVER_RAN", "LineHost", "WaitingLine", "enter_line", "from_line", "give_up"]
