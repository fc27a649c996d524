"""A response cache for the list methods and ``resources/read``, by the results' own caching hints.

A result is kept only when it says for how long: its ``ttlMs`` (the 2026-07-28 hint; ``MCPKit`` sets it on every
list with ``list_ttl_ms=`` and on a resource with ``ttl_ms=``; capped at ``max_ttl_ms``), and for whom: its
``cacheScope``. A ``public`` entry answers any caller of the same request (method, cursor or URI, protocol
revision); a ``private`` one (the default when a result names no scope) only the same principal, or without a
principal the same handshake-era session, and is never kept for a stateless request nobody is known for. A
request with ``requestState`` or ``inputResponses`` is never answered from the cache, and an ``input_required``
result never kept.

Entries go when their time is up, when the server delivers a change of the list (of the resource list: the reads
too, as a resource removed or disabled must not be read from here) or an update of the resource (every change,
whether a client listens or not, on every worker the server's fan-out reaches: :meth:`ResponseCache.install`
watches ``server.change_observers``), or when :meth:`ResponseCache.clear` is called; a result still being made
when such a change arrives answers its request but is not kept (it may predate the change). The table is bounded:
``max_entries`` entries and ``max_bytes`` of results (their JSON size), least recently used dropped first; a
result larger than ``max_entry_bytes`` is not kept.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from ..interceptors import LIST_METHODS, Call, CallNext
from .base import Middleware, session_label

JSONDict = dict[str, Any]

DEFAULT_MAX_ENTRIES = 1_024
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
DEFAULT_MAX_ENTRY_BYTES = 1024 * 1024
DEFAULT_MAX_TTL_MS = 3_600_000
_METHODS = frozenset((*LIST_METHODS, "resources/read"))
_LIST_OF = {
    "tools": ("tools/list",),
    "prompts": ("prompts/list",),
    # (a resource removed, disabled or hidden changes its list: a read kept of it must not outlive that)
    "resources": ("resources/list", "resources/templates/list", "resources/read"),
}


class _Entry:
    __slots__ = ("expires", "result", "size")

    def __init__(self, result: JSONDict, expires: float, size: int) -> None:
        self.result = result
        self.expires = expires
        self.size = size


class ResponseCache(Middleware):
    """Cache list pages and reads by their ``ttlMs``/``cacheScope`` (see the module docstring).

    Args:
        max_entries, max_bytes: the table's bounds (least recently used dropped).
        max_entry_bytes: the largest result kept.
        max_ttl_ms: the longest an entry lives, whatever its ``ttlMs``.
    """

    name = "cache"

    def __init__(
        self,
        *,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES,
        max_ttl_ms: int = DEFAULT_MAX_TTL_MS,
    ) -> None:
        super().__init__()
        if min(max_entries, max_bytes, max_entry_bytes) < 1 or max_ttl_ms < 0:
            raise ValueError("ResponseCache bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self.max_ttl_ms = max_ttl_ms
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._bytes = 0
        self._generation = 0  # (one more at each invalidation: a result made across one is not kept)
        self.hits: int = 0
        self.misses: int = 0

    @property
    def methods(self) -> frozenset[str]:
        return _METHODS

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """The JSON size of every result kept."""
        return self._bytes

    def install(self, server: Any) -> Callable[[], None]:
        """Install on ``server``, watching its changes; returns a function that removes both."""
        remove_interceptor = server.add_interceptor(self, methods=_METHODS)
        observers: list[Callable[[str, str], None]] = server.change_observers
        observers.append(self.changed)

        def remove() -> None:
            remove_interceptor()
            if self.changed in observers:
                observers.remove(self.changed)

        return remove

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        params = call.params
        if "requestState" in params or "inputResponses" in params:
            return await call_next(call)
        method = call.method
        what = params.get("uri") if method == "resources/read" else params.get("cursor")
        if what is not None and type(what) is not str:
            return await call_next(call)
        version = call.context.features.version
        now = time.monotonic()
        public = (method, what, version, None)
        private = self._private_key(call, method, what, version)
        for key in (public, private):
            if key is None:
                continue
            entry = self._entries.get(key)
            if entry is not None:
                if entry.expires > now:
                    self._entries.move_to_end(key)
                    self.hits += 1
                    return entry.result
                self._drop(key)
        self.misses += 1
        generation = self._generation
        result = await call_next(call)
        if generation == self._generation:  # (else what it read may be what a change since then made stale)
            self._keep(result, public, private, now)
        return result

    @staticmethod
    def _private_key(call: Call, method: str, what: str | None, version: str) -> tuple[Any, ...] | None:
        if call.principal is not None:
            return (method, what, version, ("principal", call.principal))
        session = session_label(call)
        return (method, what, version, ("session", session)) if session is not None else None

    def _keep(self, result: Any, public: tuple[Any, ...], private: tuple[Any, ...] | None, now: float) -> None:
        if type(result) is not dict or result.get("resultType", "complete") != "complete":
            return
        ttl = result.get("ttlMs")
        if type(ttl) is not int or ttl <= 0:
            return
        key = public if result.get("cacheScope") == "public" else private
        if key is None:
            return
        size = len(orjson.dumps(result))
        if size > self.max_entry_bytes:
            return
        self._drop(key)
        self._entries[key] = _Entry(result, now + min(ttl, self.max_ttl_ms) / 1000, size)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            oldest = next(iter(self._entries))
            self._drop(oldest)

    def _drop(self, key: tuple[Any, ...]) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size

    def invalidate(self, method: str | None = None, uri: str | None = None) -> None:
        """Drop the entries of ``method`` (a list method, or ``resources/read`` of ``uri``); everything without
        arguments."""
        self._generation += 1
        if method is None:
            self.clear()
            return
        for key in [k for k in self._entries if k[0] == method and (uri is None or k[1] == uri)]:
            self._drop(key)

    def clear(self) -> None:
        """Drop every entry."""
        self._generation += 1
        self._entries.clear()
        self._bytes = 0

    def changed(self, event: str, value: str) -> None:
        """What the server delivers: a list changed (``value``: "tools", "resources", "prompts") or a resource was
        updated (``value``: its URI); drops what went stale."""
        if event == "list_changed":
            for method in _LIST_OF.get(value, ()):
                self.invalidate(method)
        elif event == "resource_updated":
            self.invalidate("resources/read", value)


__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_ENTRIES", "DEFAULT_MAX_ENTRY_BYTES", "DEFAULT_MAX_TTL_MS", "ResponseCache"]
