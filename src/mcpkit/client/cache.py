"""The client's response cache: the 2026-07-28 caching hints (``ttlMs``, ``cacheScope``) honoured.

A list page or a ``resources/read`` result is reused while it is fresh (``now < received + ttlMs``) for the same
method and the same parameters (the cursor, the URI); a result with ``ttlMs`` 0 or absent (every handshake-era
result) is never stored. ``cacheScope: "private"`` entries belong to one authorization context: they are keyed by
the cache's ``identity`` (give each caller's cache its own when a cache is shared) and never served to another;
``"public"`` entries are shared by every identity. A ``list_changed`` notification drops that list's pages, a
``resources/updated`` the read of that URI. Bounded: entries and bytes (least recently used dropped first).
"""

from __future__ import annotations

import time
from collections import OrderedDict

import orjson

from ..protocol.jsonrpc import JSONDict

#: the list methods whose pages a ``notifications/<kind>/list_changed`` makes stale
_INVALIDATED_BY = {
    "notifications/tools/list_changed": ("tools/list",),
    "notifications/prompts/list_changed": ("prompts/list",),
    "notifications/resources/list_changed": ("resources/list", "resources/templates/list"),
}
CACHEABLE = frozenset(("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read"))


class ResponseCache:
    """A bounded cache of cacheable results (see the module docstring).

    Args:
        max_entries: results kept at most (default 1,024).
        max_bytes: their encoded size at most (default 16 MiB); a larger result is not stored.
        identity: the authorization context of ``private`` entries (e.g. the token's subject); one cache per
            client needs none.
    """

    def __init__(self, *, max_entries: int = 1024, max_bytes: int = 16 * 1024 * 1024, identity: str = "") -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.identity = identity
        self._entries: OrderedDict[tuple[str, str, str], tuple[float, int, JSONDict]] = OrderedDict()
        self._bytes = 0
        self.hits: int = 0
        self.misses: int = 0

    @staticmethod
    def _params_key(params: JSONDict | None) -> str:
        salient = {k: v for k, v in (params or {}).items() if k != "_meta"}
        return orjson.dumps(salient, option=orjson.OPT_SORT_KEYS).decode()

    def get(self, method: str, params: JSONDict | None) -> JSONDict | None:
        """The fresh result of ``method`` with ``params`` (a private one of this identity, else a public one)."""
        if method not in CACHEABLE:
            return None
        key = self._params_key(params)
        now = time.monotonic()
        for scope in (self.identity, None):
            entry_key = (method, key, "" if scope is None else "p:" + scope)
            entry = self._entries.get(entry_key)
            if entry is None:
                continue
            expires, _, result = entry
            if now >= expires:
                self._drop(entry_key)
                continue
            self._entries.move_to_end(entry_key)
            self.hits += 1
            return result
        self.misses += 1
        return None

    def put(self, method: str, params: JSONDict | None, result: JSONDict) -> None:
        """Store ``result`` if its hints let it be reused (``ttlMs`` > 0) and it fits."""
        if method not in CACHEABLE or result.get("resultType", "complete") != "complete":
            return
        if params and ("inputResponses" in params or "requestState" in params):
            return  # results of input rounds depend on what is not in the key (spec: MUST NOT be cached)
        ttl = result.get("ttlMs")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl <= 0:
            return
        scope = result.get("cacheScope")
        size = len(orjson.dumps(result))
        if size > self.max_bytes:
            return
        entry_key = (method, self._params_key(params), "" if scope == "public" else "p:" + self.identity)
        if entry_key in self._entries:
            self._drop(entry_key)
        self._entries[entry_key] = (time.monotonic() + ttl / 1000, size, result)
        self._bytes += size
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._drop(next(iter(self._entries)))

    def _drop(self, entry_key: tuple[str, str, str]) -> None:
        entry = self._entries.pop(entry_key, None)
        if entry is not None:
            self._bytes -= entry[1]

    def invalidate(self, method: str, params: JSONDict | None = None) -> None:
        """A notification arrived: drop what it makes stale (``list_changed``: the list's pages; a
        ``resources/updated``: the read of its URI)."""
        stale = _INVALIDATED_BY.get(method)
        if stale is not None:
            for entry_key in [k for k in self._entries if k[0] in stale]:
                self._drop(entry_key)
        elif method == "notifications/resources/updated" and params is not None:
            key = self._params_key({"uri": params.get("uri")})
            for entry_key in [k for k in self._entries if k[0] == "resources/read" and k[1] == key]:
                self._drop(entry_key)

    def clear(self) -> None:
        """Drop everything (e.g. after a re-initialization, or a cursor the server refused)."""
        self._entries.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)


__all__ = ["CACHEABLE", "ResponseCache"]
