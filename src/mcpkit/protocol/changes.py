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
    """The changes ``(method, params)`` waiting for one reader, in the order they came, at most ``maxsize``.

    The rule, the same on both sides: every change is kept while there is room (a reader that counts updates sees
    each one); once ``maxsize`` wait, a change equal to one still waiting (:func:`change_key`) is merged into it,
    and equal ones waiting are merged to make room (the reader re-reads once for all of them); only distinct
    changes overflow: :meth:`add` returns False and keeps nothing, and the owner ends the stream with its
    fell-behind error (nothing is dropped silently). Not thread-safe; never blocks."""

    __slots__ = ("_items", "_keys", "maxsize")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, not {maxsize}")
        self.maxsize: int = maxsize
        self._items: deque[tuple[str, dict[str, Any], object]] = deque()  # (method, params, its key or None)
        self._keys: dict[object, int] = {}  # the keys of the waiting changes that coalesce, and how many wait

    def __len__(self) -> int:
        return len(self._items)

    def add(self, method: str, params: dict[str, Any]) -> bool:
        """Queue a change, or merge it into an equal one waiting when the queue is full; False when it cannot be
        kept (``maxsize`` distinct changes wait)."""
        key = change_key(method, params)
        if len(self._items) >= self.maxsize:
            if key is not None and key in self._keys:
                return True  # the same change waits already: the reader re-reads once for both
            self._merge_waiting()
            if len(self._items) >= self.maxsize:
                return False
        self._items.append((method, params, key))
        if key is not None:
            self._keys[key] = self._keys.get(key, 0) + 1
        return True

    def pop(self) -> tuple[str, dict[str, Any]] | None:
        """The change waiting longest, or None when none waits."""
        if not self._items:
            return None
        method, params, key = self._items.popleft()
        if key is not None:
            left = self._keys.pop(key) - 1
            if left:
                self._keys[key] = left
        return method, params

    def clear(self) -> None:
        """Forget every waiting change."""
        self._items.clear()
        self._keys.clear()

    def _merge_waiting(self) -> None:
        # full: keep the first of each set of equal waiting changes (in their order), the others merged into it
        if len(self._keys) == sum(self._keys.values()):
            return  # no two equal ones wait
        kept: deque[tuple[str, dict[str, Any], object]] = deque()
        seen: dict[object, int] = {}
        for item in self._items:
            key = item[2]
            if key is None or key not in seen:
                kept.append(item)
                if key is not None:
                    seen[key] = 1
        self._items = kept
        self._keys = seen


__all__ = ["PendingChanges", "change_key"]
