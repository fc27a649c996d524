"""The queue of a client session's notifications for its logging and notification handlers.

The handlers run in one task of their own, in order, apart from the reader: a handler may call the session back
(re-list the tools on ``notifications/tools/list_changed``) while the reader goes on. A request of the session
returns once the notifications that arrived before its answer are handled (:meth:`HandlerQueue.catch_up`), unless
it is made from a handler itself (it would wait for itself).

Bounds: at most :data:`MAX_QUEUED_NOTIFICATIONS` wait; beyond, the session stops reading until one is handled.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable

from ..protocol.jsonrpc import JSONDict

logger: logging.Logger = logging.getLogger("mcpkit.client")

#: notifications waiting for the logging and notification handlers; beyond it the session stops reading until one
#: is handled
MAX_QUEUED_NOTIFICATIONS = 1024

# the queue whose handlers run in this task (and the tasks they start): their calls back into its session do not
# wait for the handlers to catch up (they are the handlers)
_HANDLING: contextvars.ContextVar[HandlerQueue | None] = contextvars.ContextVar("mcpkit_client_handling", default=None)

Deliver = Callable[[str, JSONDict | None], Awaitable[None]]


class HandlerQueue:
    """One session's notifications on their way to its handlers (see the module docs); ``deliver(method, params)``
    runs the handlers of one. The task starts with the first notification."""

    __slots__ = ("_deliver", "_event", "_queue", "_task", "handled", "received")

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        self._queue: asyncio.Queue[tuple[str, JSONDict | None]] | None = None
        self._task: asyncio.Task[None] | None = None
        self._event: asyncio.Event | None = None
        self.received: int = 0  # notifications put in the queue
        self.handled: int = 0  # ... and handled (the session compares the two before it waits in catch_up)

    async def put(self, method: str, params: JSONDict | None) -> None:
        """Queue one notification for the handlers (waits only when they are MAX_QUEUED_NOTIFICATIONS behind)."""
        queue = self._queue
        if queue is None:
            queue = self._queue = asyncio.Queue(MAX_QUEUED_NOTIFICATIONS)
            self._event = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(queue, self._event))
        self.received += 1
        await queue.put((method, params))

    async def _run(self, queue: asyncio.Queue[tuple[str, JSONDict | None]], event: asyncio.Event) -> None:
        """Run the handlers, one notification after the other."""
        _HANDLING.set(self)
        while True:
            method, params = await queue.get()
            try:
                await self._deliver(method, params)
            except Exception:
                logger.exception("the handler of a %r notification failed", method)
            finally:
                self.handled += 1
                event.set()

    async def catch_up(self) -> None:
        """Wait until the handlers have seen every notification received so far, unless called from a handler."""
        event, task, target = self._event, self._task, self.received
        if event is None or task is None or _HANDLING.get() is self:
            return
        while self.handled < target and not task.done():
            event.clear()
            await event.wait()

    def close(self) -> None:
        """Stop the handlers' task (what waits is not handled)."""
        if self._task is not None:
            self._task.cancel()


__all__ = ["MAX_QUEUED_NOTIFICATIONS", "HandlerQueue"]
