"""An open ``subscriptions/listen`` stream of the 2026-07-28 era (:class:`Subscription`, what
``ClientSession.listen`` yields): the acknowledged filter, then ``async for (method, params)``. Re-exported by
:mod:`mcpkit.client.lowlevel`, its public import path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from ..protocol.errors import (
    MCPError,
    RequestTimeout,
)
from ..protocol.jsonrpc import JSONDict
from .changes import MAX_WAITING_CHANGE_BYTES, ChangeQueue

if TYPE_CHECKING:
    from ..engine import Peer

logger: logging.Logger = logging.getLogger("mcpkit.client")


def listen_filter(
    *, tools: bool = False, prompts: bool = False, resources: bool = False, resource_uris: Sequence[str] = ()
) -> JSONDict:
    """The ``notifications`` filter of a ``subscriptions/listen`` request."""
    filt: JSONDict = {}
    if tools:
        filt["toolsListChanged"] = True
    if prompts:
        filt["promptsListChanged"] = True
    if resources:
        filt["resourcesListChanged"] = True
    if resource_uris:
        filt["resourceSubscriptions"] = list(resource_uris)
    return filt


class Subscription:
    """An open ``subscriptions/listen`` stream: ``acknowledged`` filter, then ``async for (method, params)``.

    Its notifications wait in a :class:`~mcpkit.client.changes.ChangeQueue` (``listen(maxsize=, maxbytes=)``):
    equal changes waiting unread coalesce, and when distinct ones overflow it the stream is cancelled and, once what
    it holds is read, iterating raises :class:`~mcpkit.client.changes.WatchFellBehind`."""

    def __init__(self, sub_id: int, changes: ChangeQueue, task: asyncio.Task[JSONDict]):
        self.id = sub_id
        self._changes = changes
        self._task = task
        self.acknowledged: JSONDict = {}

    async def _until_ready(self, timeout: float | None) -> None:
        """Return once a notification waits, the queue ended or the request ended (or ``timeout`` passed)."""
        ready = asyncio.ensure_future(self._changes.wait())
        try:
            await asyncio.wait({ready, self._task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()

    async def _wait_ack(self, timeout: float = 30.0) -> None:
        await self._until_ready(timeout)
        item = self._changes.pop()
        if item is not None:
            if item[0] == "notifications/subscriptions/acknowledged":
                self.acknowledged = item[1].get("notifications") or {}
                return
            raise MCPError(f"expected notifications/subscriptions/acknowledged first, got {item!r}")
        if self._task.done():
            self._task.result()  # raises the server's error
            raise MCPError("the subscription ended before it was acknowledged")
        raise RequestTimeout("subscriptions/listen", timeout)

    async def next(self, timeout: float | None = None) -> tuple[str, JSONDict]:
        """The next notification on this stream (``TimeoutError`` after ``timeout`` seconds); StopAsyncIteration
        once the server ended the subscription, the error that ended it otherwise (ConnectionClosed when the
        connection did, WatchFellBehind when more distinct notifications waited unread than ``maxsize``)."""
        async with asyncio.timeout(timeout):
            while True:
                item = self._changes.pop()  # (raises once the queue ended and what it held is read)
                if item is not None:
                    return item
                if self._task.done():
                    break
                await self._until_ready(None)
        if not self._task.cancelled() and self._task.exception() is not None:
            raise self._task.exception()  # type: ignore[misc]
        raise StopAsyncIteration  # the server ended the subscription

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> tuple[str, JSONDict]:
        return await self.next()


@contextlib.asynccontextmanager
async def open_subscription(
    peer: Peer,
    queues: dict[str | int, ChangeQueue],
    params: JSONDict,
    maxsize: int,
    maxbytes: int = MAX_WAITING_CHANGE_BYTES,
) -> AsyncIterator[Subscription]:
    """Send ``subscriptions/listen`` with ``params`` on ``peer`` and yield its :class:`Subscription` once
    acknowledged; its notifications arrive through ``queues`` (keyed by the request id, bounded by ``maxsize`` and
    ``maxbytes``: when distinct ones overflow them, the request is cancelled and the subscription raises
    WatchFellBehind). Leaving the block cancels the request (``notifications/cancelled``)."""
    rid = peer.next_id()
    changes = ChangeQueue(maxsize, f"subscription {rid!r}", maxbytes)
    queues[rid] = changes
    task = asyncio.get_running_loop().create_task(
        peer.request("subscriptions/listen", params, timeout=None, request_id=rid)
    )

    def stop() -> None:
        task.cancel()  # (sends notifications/cancelled: the server stops sending)

    changes.on_overflow = stop
    sub = Subscription(rid, changes, task)
    try:
        await sub._wait_ack()
        yield sub
    finally:
        queues.pop(rid, None)
        if not task.done():
            task.cancel()  # sends notifications/cancelled for the listen request
        with contextlib.suppress(BaseException):
            await task
