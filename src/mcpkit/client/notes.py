"""The queue of a client session's notifications for its logging and notification handlers.

The handlers run in one task of their own, in order, apart from the reader: a handler may call the session back
(re-list the tools on ``notifications/tools/list_changed``) while the reader goes on. A request of the session
returns once the notifications that arrived before its answer are handled (:meth:`HandlerQueue.catch_up`), unless
it is made from a handler itself (it would wait for itself).

Bounds: at most :data:`MAX_QUEUED_NOTIFICATIONS` wait, and at most :data:`MAX_QUEUED_NOTIFICATION_BYTES` of them
(each counted as its parameters encoded as JSON: a server may send notifications up to the message limit, 4 MiB,
each). With the queue full (either bound), a change equal to one still waiting (a list's ``list_changed``,
``resources/updated`` of the same URI) merges into it (the handler re-reads once for both); any other notification
makes the session stop reading until one is handled -- unless a handler is waiting for an answer of the session,
which only the reader can read: then the notification is dropped, with a warning, rather than the session hang for
good.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Iterator

import orjson

from ..engine import ORIGIN
from ..protocol.changes import change_key
from ..protocol.jsonrpc import JSONDict

logger: logging.Logger = logging.getLogger("mcpkit.client")

#: notifications waiting for the logging and notification handlers; beyond it equal changes merge, and the session
#: stops reading until one is handled (or drops the notification while a handler waits for an answer of it)
MAX_QUEUED_NOTIFICATIONS = 1024
#: bytes of the notifications waiting for the handlers (their parameters as JSON); beyond it, as beyond the count (a
#: notification larger than it still goes when none waits)
MAX_QUEUED_NOTIFICATION_BYTES = 16 * 1024 * 1024

# the queue whose handlers run in this task (and the tasks they start): their calls back into its session do not
# wait for the handlers to catch up (they are the handlers)
_HANDLING: contextvars.ContextVar[HandlerQueue | None] = contextvars.ContextVar("mcpkit_client_handling", default=None)

Deliver = Callable[[str, JSONDict | None], Awaitable[None]]


class HandlerQueue:
    """One session's notifications on their way to its handlers (see the module docs); ``deliver(method, params)``
    runs the handlers of one. The task starts with the first notification."""

    __slots__ = (
        "_calling",
        "_closed",
        "_deliver",
        "_event",
        "_items",
        "_keys",
        "_ready",
        "_room",
        "_size",
        "_task",
        "_warned",
        "dropped",
        "handled",
        "received",
    )

    def __init__(self, deliver: Deliver) -> None:
        self._deliver = deliver
        #: (method, params, key, size, origin: the request of the session it was sent about, see put)
        self._items: deque[tuple[str, JSONDict | None, object, int, object]] = deque()
        self._size = 0  # the sizes of the waiting ones
        self._keys: dict[object, int] = {}  # the keys of the waiting changes that coalesce, and how many wait
        self._task: asyncio.Task[None] | None = None
        self._event: asyncio.Event | None = None  # set as each one is handled (catch_up)
        self._ready = asyncio.Event()  # set while one waits
        self._room = asyncio.Event()  # set when one leaves a full queue, or a handler starts waiting on the session
        self._calling = 0  # calls of the handlers into their session waiting for an answer
        self._closed = False
        self._warned = False
        self.received: int = 0  # notifications put in the queue
        self.handled: int = 0  # ... and handled (the session compares the two before it waits in catch_up)
        self.dropped: int = 0  # notifications dropped: the queue was full while a handler waited on the session

    async def put(self, method: str, params: JSONDict | None, origin: object = None) -> None:
        """Queue one notification for the handlers (see the module docs for what happens when the queue is
        full). ``origin``: the :data:`~mcpkit.engine.ORIGIN` of the session's request it was sent about (the
        transport said so: its log messages), set again while the handlers run for it."""
        if self._task is None:
            self._event = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run(self._event))
        items = self._items
        if params is None:
            key, size = change_key(method, {}), len(method)
        else:
            key, size = change_key(method, params), len(method) + len(orjson.dumps(params))
        while (
            len(items) >= MAX_QUEUED_NOTIFICATIONS or (items and self._size + size > MAX_QUEUED_NOTIFICATION_BYTES)
        ) and not self._closed:
            if key is not None and key in self._keys:
                return  # the same change waits already: the handler reads once for both
            if self._calling:
                self.dropped += 1
                if not self._warned:
                    self._warned = True
                    logger.warning(
                        "%d notifications (%d bytes) wait for the client's handlers while a handler waits for an "
                        "answer of the client: a %s notification was dropped, and others may be, rather than stop "
                        "reading the answer it waits for (a handler that calls the client back: keep it quick)",
                        len(items),
                        self._size,
                        method,
                    )
                return
            self._room.clear()
            await self._room.wait()
        self._warned = False
        self.received += 1
        items.append((method, params, key, size, origin))
        self._size += size
        if key is not None:
            self._keys[key] = self._keys.get(key, 0) + 1
        self._ready.set()

    async def _run(self, event: asyncio.Event) -> None:
        """Run the handlers, one notification after the other."""
        _HANDLING.set(self)
        items, ready = self._items, self._ready
        while True:
            if not items:
                ready.clear()
                await ready.wait()
                continue
            method, params, key, size, origin = items.popleft()
            self._size -= size
            if key is not None:
                left = self._keys.pop(key) - 1
                if left:
                    self._keys[key] = left
            self._room.set()
            token = ORIGIN.set(origin) if origin is not None else None
            try:
                await self._deliver(method, params)
            except Exception:
                logger.exception("the handler of a %r notification failed", method)
            finally:
                if token is not None:
                    ORIGIN.reset(token)
                self.handled += 1
                event.set()

    def from_handler(self) -> bool:
        """Whether the caller runs in a handler of this queue (or a task one started)."""
        return _HANDLING.get() is self

    @contextlib.contextmanager
    def calling_back(self) -> Iterator[None]:
        """Around a handler's call into its session: while it waits, a full queue does not stop the reader."""
        self._calling += 1
        self._room.set()  # (a reader waiting for room looks again)
        try:
            yield
        finally:
            self._calling -= 1

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
        self._closed = True
        self._room.set()
        if self._task is not None:
            self._task.cancel()


__all__ = ["MAX_QUEUED_NOTIFICATION_BYTES", "MAX_QUEUED_NOTIFICATIONS", "HandlerQueue"]
