"""Which change notifications are the same change, and the one rule by which the queues that hold them for a slow
reader merge them: a server's ``subscriptions/listen`` stream and a client's watch (both eras) keep their waiting
changes in a :class:`PendingChanges`. Free of pydantic and of asyncio: the server's built-ins import it, and a
server of plain tools never loads pydantic."""

from __future__ import annotations

from collections import deque
from typing import Any


def change_key(method: str, params: dict[str, Any]) -> object:
    """What makes two change notifications the same change (None: each counts on its own), for the queues that
    coalesce them (a server's listen stream, a client's watch): a list's ``list_changed``, or
    ``resources/updated`` of one URI. Task notifications carry state, so they never coalesce."""
    if method == "notifications/resources/updated":
        uri = params.get("uri")
        return (method, uri) if isinstance(uri, str) else None
    if method.endswith("/list_changed"):
        return method
    return None


class PendingChanges:
    """The changes ``(method, params)`` waiting for one reader, in the order they came, at most ``maxsize`` of them
    and, when ``maxbytes`` is given, at most ``maxbytes`` of their sizes (the ``size`` each was added with).

    The rule, the same on both sides: every change is kept while there is room (a reader that counts updates sees
    each one); once the queue is full (``maxsize`` wait, or a change would take the sizes waiting past
    ``maxbytes``), a change equal to one still waiting (:func:`change_key`) is merged into it, and equal ones
    waiting are merged to make room (the reader re-reads once for all of them); only distinct changes overflow:
    :meth:`add` returns False and keeps nothing, and the owner ends the stream with its fell-behind error (nothing
    is dropped silently). One change larger than ``maxbytes`` is kept when nothing waits. Not thread-safe; never
    blocks."""

    __slots__ = ("_items", "_keys", "maxbytes", "maxsize", "size")

    def __init__(self, maxsize: int, maxbytes: int | None = None) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        if maxbytes is not None and maxbytes < 1:
            raise ValueError(f"maxbytes must be at least 1, not {maxbytes}")
        self.maxsize: int = maxsize
        self.maxbytes: int | None = maxbytes
        self.size: int = 0  # the sizes of the waiting changes
        self._items: deque[tuple[str, dict[str, Any], object, int]] = deque()  # (method, params, key or None, size)
        self._keys: dict[object, int] = {}  # the keys of the waiting changes that coalesce, and how many wait

    def __len__(self) -> int:
        return len(self._items)

    def full(self, size: int = 0) -> bool:
        """Whether a change of ``size`` finds no room (``maxsize`` wait, or it would pass ``maxbytes``)."""
        items = self._items
        return len(items) >= self.maxsize or (
            self.maxbytes is not None and bool(items) and self.size + size > self.maxbytes
        )

    def add(self, method: str, params: dict[str, Any], size: int = 0) -> bool:
        """Queue a change of ``size`` (what counts against ``maxbytes``), or merge it into an equal one waiting
        when the queue is full; False when it cannot be kept (distinct changes fill the queue)."""
        key = change_key(method, params)
        if self.full(size):
            if key is not None and key in self._keys:
                return True  # the same change waits already: the reader re-reads once for both
            self._merge_waiting()
            if self.full(size):
                return False
        self._items.append((method, params, key, size))
        self.size += size
        if key is not None:
            self._keys[key] = self._keys.get(key, 0) + 1
        return True

    def pop(self) -> tuple[str, dict[str, Any]] | None:
        """The change waiting longest, or None when none waits."""
        if not self._items:
            return None
        method, params, key, size = self._items.popleft()
        self.size -= size
        if key is not None:
            left = self._keys.pop(key) - 1
            if left:
                self._keys[key] = left
        return method, params

    def clear(self) -> None:
        """Forget every waiting change."""
        self._items.clear()
        self._keys.clear()
        self.size = 0

    def _merge_waiting(self) -> None:
        # full: keep the first of each set of equal waiting changes (in their order), the others merged into it
        if len(self._keys) == sum(self._keys.values()):
            return  # no two equal ones wait
        kept: deque[tuple[str, dict[str, Any], object, int]] = deque()
        seen: dict[object, int] = {}
        size = 0
        for item in self._items:
            key = item[2]
            if key is None or key not in seen:
                kept.append(item)
                size += item[3]
                if key is not None:
                    seen[key] = 1
        self._items = kept
        self._keys = seen
        self.size = size


__all__ = ["PendingChanges", "change_key"]
