"""A peer's incoming JSON-RPC batches (handshake era, 2025-03-26 and before where a revision accepts them): each
request in a batch runs as its own task holding one of the peer's concurrency slots, and the answers leave together
as one array. Used by :class:`~mcpkit.engine.peer.Peer` for every batch it receives."""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..protocol import jsonrpc
from ..protocol.errors import InvalidRequest
from ..protocol.jsonrpc import Batch, Invalid, JSONDict, Parsed, Request, RequestId
from . import messages
from .context import RequestContext
from .messages import Outbox, Outgoing
from .runner import finish_batch
from .tap import OUT, TapHub
from .waiting import WaitingLine


class BatchHost(Protocol):
    """What batch handling uses of its peer (:class:`~mcpkit.engine.peer.Peer`)."""

    batch_policy: Callable[[], bool] | None
    batch_refusal: str
    max_batch_size: int
    tap: TapHub | None
    _inflight: dict[RequestId, RequestContext]
    _waiting: WaitingLine
    _active: int
    _max_concurrency: int

    @staticmethod
    def _duplicate(rid: RequestId) -> JSONDict: ...

    def _admit(self, req: Request, out: Outbox) -> RequestContext | None: ...

    _batch_answers: PendingAnswers

    async def _enter_line(
        self, ctx: RequestContext, req: Request, size: int = 0, ended: asyncio.Future[None] | None = None
    ) -> bool: ...

    def _launch(self, ctx: RequestContext) -> asyncio.Task[Any] | None: ...

    def _finished(self, ctx: RequestContext, _: object = None) -> None: ...

    def _on_invalid_response(self, rid: RequestId | None, reason: str) -> None: ...

    async def _receive(self, msg: Parsed | Batch, out: Outbox) -> None: ...

    def _spawn(self, aw: Awaitable[Any]) -> None: ...

    def _tapped(self, direction: str, msg: Outgoing) -> None: ...

    async def _send(self, msg: Outgoing, out: Outbox) -> None: ...


async def on_batch(peer: BatchHost, batch: Batch, out: Outbox, keep: bool = False) -> Outgoing | None:
    """Answer a batch: each request in it runs as its own task holding a concurrency slot, exactly like a single
    request (with no free slot, it waits in the peer's waiting line), and the responses leave as one array when
    all have ended (with ``keep``: are returned, see :meth:`Peer.handle <mcpkit.engine.peer.Peer.handle>`). A
    batch longer than
    ``max_batch_size`` is refused whole with one -32600 error."""
    answer: Outgoing | None
    accepted = peer.batch_policy is not None and peer.batch_policy()
    refusal = messages.batch_refusal(batch, accepted, peer.batch_refusal, peer.max_batch_size)
    if refusal is not None:
        return await _batch_answer(peer, messages.error(None, InvalidRequest(refusal).to_error()), out, keep)
    responses = bytearray()
    tasks: list[asyncio.Future[Any]] = []  # (its items' tasks, and the futures of those waiting in line)
    encode_error = jsonrpc.encode_error
    for item in batch:
        t = type(item)
        if t is Request:
            req: Request = item  # type: ignore[assignment]
            if req.method == "initialize":
                err = InvalidRequest("initialize MUST NOT be part of a batch")
                responses += encode_error(req.id, err.to_error()) + b","
                continue
            if req.id in peer._inflight:  # (refused inside the batch's answer, which is bounded)
                responses += encode_error(req.id, peer._duplicate(req.id)) + b","
                continue
            ctx = peer._admit(req, out)
            if ctx is None:
                continue  # dropped by the request policy
            ctx.sink = responses
            if peer._active >= peer._max_concurrency:  # into the peer's waiting line, like a single request
                ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                try:
                    waiting = await peer._enter_line(ctx, req, 0, ended)
                except BaseException:
                    for running in tasks:
                        running.cancel()
                    raise
                if waiting:
                    ended.add_done_callback(functools.partial(_gave_up, peer, ctx))
                    tasks.append(ended)
                    continue
            started = peer._launch(ctx)
            if started is not None:
                tasks.append(started)
        elif t is Invalid:
            inv: Invalid = item  # type: ignore[assignment]
            if not inv.is_response:
                responses += encode_error(inv.id, inv.error()) + b","
            else:
                peer._on_invalid_response(inv.id, inv.reason)
        else:
            await peer._receive(item, out)
    if not tasks:
        answer = messages.batch(responses)
    elif keep:
        answer = await finish_batch(tasks, responses)
    else:
        # The task that sends the batch's answer counts among the peer's pending batch answers until the answer is
        # written: a peer that floods batches and never reads their answers stops being read once that bound is
        # reached. (It holds no request slot: its items may wait in line for the slots, and the answers those
        # slots' requests wait for must still be read.)
        await peer._batch_answers.enter()
        peer._spawn(_send_batch(peer, tasks, responses, out))
        return None
    if answer is None:
        return None
    return await _batch_answer(peer, answer, out, keep)


async def _batch_answer(peer: BatchHost, answer: Outgoing, out: Outbox, keep: bool) -> Outgoing | None:
    """A batch's answer: returned when ``keep`` (a request-scoped transport sends it), else sent to ``out``."""
    if keep:
        if peer.tap is not None:
            peer._tapped(OUT, answer)
        return answer
    await peer._send(answer, out)
    return None


async def _send_batch(peer: BatchHost, tasks: list[asyncio.Future[Any]], responses: bytearray, out: Outbox) -> None:
    """Send the batch's answer once its requests ended, then leave the peer's pending batch answers."""
    try:
        try:
            answer = await finish_batch(tasks, responses)
        except asyncio.CancelledError:
            if not peer._waiting.cutting:
                raise
            # the peer gave up on its requests, answering them: the items it cut have their errors in the array
            answer = messages.batch(responses)
        if answer is not None:
            await peer._send(answer, out)
    finally:
        peer._batch_answers.leave()


def _gave_up(peer: BatchHost, ctx: RequestContext, ended: asyncio.Future[None]) -> None:
    """A batch item's future was cancelled (its batch gave up: the peer closes): its request is cancelled, or
    taken out of the waiting line unrun."""
    if not ended.cancelled():
        return
    if ctx.task is not None:
        ctx.task.cancel()
    elif peer._waiting.remove(ctx):
        peer._finished(ctx)


class PendingAnswers:
    """The batches of one peer whose answer array is not sent yet (their items run or wait for a slot), bounded
    by ``limit``: beyond, the reader waits until one is sent (backpressure)."""

    __slots__ = ("_room", "count", "limit")

    def __init__(self, limit: int) -> None:
        self.limit: int = max(1, limit)
        self.count: int = 0
        self._room: deque[asyncio.Future[None]] = deque()

    async def enter(self) -> None:
        while self.count >= self.limit:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._room.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._room:
                    self._room.remove(waiter)
        self.count += 1

    def leave(self) -> None:
        self.count -= 1
        while self._room:
            waiter = self._room.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break
