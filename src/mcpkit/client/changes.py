"""The changes a watch has received and its application has not read yet (:class:`ChangeQueue`), for both eras: a
2026-07-28 ``subscriptions/listen`` stream (:class:`~mcpkit.client.subscription.Subscription`) and a handshake-era
:class:`~mcpkit.client.handlers.Watch`.

An application that reads slower than the server sends (a burst of changes) gets every change while the queue has
room; once it is full (``maxsize`` changes wait, or ``maxbytes`` of them: each counts as its parameters encoded as
JSON, since a server may send ``resources/updated`` with up to the message limit, 4 MiB, of ``_meta``), one equal
to a change still waiting (a list's ``list_changed``, ``resources/updated`` of the same URI) is merged into it,
since the application re-reads the list or the resource once for both (the rule of
:class:`~mcpkit.protocol.changes.PendingChanges`, the server's listen stream's too). When distinct changes overflow
the queue's bounds, some would be lost: the queue ends with :class:`WatchFellBehind` instead, once what it holds is
read, so the application knows to watch again and re-read what it watches. Nothing is dropped silently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import orjson

from ..protocol.changes import PendingChanges
from ..protocol.errors import MCPError
from ..protocol.jsonrpc import JSONDict

logger: logging.Logger = logging.getLogger("mcpkit.client")

Change = tuple[str, JSONDict]

#: bytes of the changes waiting unread in one watch or listen stream (each its parameters as JSON), by default;
#: beyond it, as beyond its ``maxsize`` (one change larger than it still waits alone)
MAX_WAITING_CHANGE_BYTES: int = 16 * 1024 * 1024


class WatchFellBehind(MCPError):
    """A watch (or listen stream) whose application read its changes slower than they came: more distinct changes
    waited unread than its ``maxsize`` or ``maxbytes`` allow, so it ended rather than lose some. Raise the bound or
    read faster; watch again, then list again and read again what it watches (changes made meanwhile are not
    replayed)."""


class ChangeQueue:
    """A bounded queue of changes ``(method, params)`` for one reader, coalescing equal ones.

    ``offer`` never blocks (it runs in the connection's reader). ``pop``/``get`` return the changes in the order
    they first came, then raise the queue's end (:meth:`end`, or :class:`WatchFellBehind` after an overflow).
    ``on_overflow`` (optional) is called once when distinct changes overflow ``maxsize`` or ``maxbytes`` (to stop
    the stream)."""

    __slots__ = ("_changes", "_end", "_ready", "maxbytes", "maxsize", "on_overflow", "what")

    def __init__(self, maxsize: int, what: str = "watch", maxbytes: int = MAX_WAITING_CHANGE_BYTES) -> None:
        self._changes = PendingChanges(maxsize, maxbytes)  # (raises ValueError below 1)
        self.maxsize: int = maxsize
        self.maxbytes: int = maxbytes
        self.what: str = what  # (what the error names: "watch", "subscription 3")
        self.on_overflow: Callable[[], None] | None = None
        self._end: BaseException | None = None
        self._ready = asyncio.Event()  # set while a change waits or the queue ended

    def __len__(self) -> int:
        return len(self._changes)

    @property
    def ended(self) -> bool:
        """Whether the queue takes no more changes (it raises its end once what it holds is read)."""
        return self._end is not None

    def offer(self, method: str, params: JSONDict) -> None:
        """Queue a change (never blocks); ignored once the queue ended. The rule of
        :class:`~mcpkit.protocol.changes.PendingChanges`: every change is kept while there is room; with the queue
        full (``maxsize`` waiting, or ``maxbytes`` of them), a change equal to one that waits is merged into it (the
        application re-reads once for both), and the equal ones waiting are merged to make room; only distinct
        changes overflow (the queue then ends)."""
        if self._end is not None:
            return
        changes = self._changes
        if not changes.add(method, params, len(method) + len(orjson.dumps(params))):
            logger.warning(
                "%s: slow reader, %d changes (%d bytes) waiting unread; ending it",
                self.what,
                len(changes),
                changes.size,
            )
            if len(changes) >= self.maxsize:
                over, bound = f"more than {self.maxsize} distinct changes", f"maxsize={self.maxsize}"
            else:
                over, bound = f"more than {self.maxbytes} bytes of distinct changes", f"maxbytes={self.maxbytes}"
            self.end(
                WatchFellBehind(
                    f"{self.what} fell behind: {over} waited unread (its {bound}), so it ended rather than lose some; "
                    "raise it (watch(maxsize=, maxbytes=), listen(maxsize=, maxbytes=)) or read faster, then watch "
                    "again and list again or read again what it watches"
                )
            )
            if self.on_overflow is not None:
                self.on_overflow()
            return
        self._ready.set()

    def end(self, exc: BaseException) -> None:
        """Take no more changes: once those waiting are read, :meth:`pop` raises ``exc`` (the first end stays)."""
        if self._end is None:
            self._end = exc
            self._ready.set()

    def pop(self) -> Change | None:
        """The next change, or None when none waits; raises the queue's end once nothing waits."""
        change = self._changes.pop()
        if change is not None:
            if not self._changes and self._end is None:
                self._ready.clear()
            return change
        if self._end is not None:
            raise self._end
        return None

    async def wait(self) -> None:
        """Return once a change waits or the queue ended."""
        await self._ready.wait()

    async def get(self, timeout: float | None = None) -> Change:
        """The next change (``TimeoutError`` after ``timeout`` seconds); raises the queue's end once nothing
        waits."""
        async with asyncio.timeout(timeout):
            while True:
                item = self.pop()
                if item is not None:
                    return item
                await self._ready.wait()
