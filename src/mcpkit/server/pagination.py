"""Opaque, tamper-proof list cursors.

A cursor is ``base64url(json) + "." + HMAC`` over the list it belongs to, the offset of the next page and the
key of the last item sent. Anything that does not verify is an invalid cursor (-32602), so a forged, truncated
or foreign cursor can never crash the server or index out of range. When the list changed between pages, the
next page resumes after the last item the client saw (if it still exists) instead of trusting the offset.

A ``cursor`` of ``""`` is an empty last page (2024-11-05/2025-03-26 sessions end their lists
with ``nextCursor: ""``, and a client that sends it back must not get the first page again).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import orjson

from ..protocol.errors import InvalidParams
from ..protocol.jsonrpc import JSONDict
from ..protocol.versions import Features
from .request_state import RequestStateSealer

T = TypeVar("T")
_MAX_CURSOR = 1024
#: items a list page holds unless the app says otherwise (``MCPKit(page_size=...)``): a 100,000-resource list is
#: 100 round trips, and the client's default bounds walk any list whose items fit its memory bound
DEFAULT_PAGE_SIZE = 1000
#: bytes all the list caches of one app may hold together (:class:`ListCache`): page texts, remembered page windows
#: and per-principal views, whatever the number of lists, revisions, views or pages
MAX_LIST_CACHE_BYTES = 64 * 1024 * 1024
# what a cache entry costs beyond its text, roughly (CPython 3.11-3.13: key tuple, dict slot, Fragment, str headers)
_PAGE_ENTRY_BYTES = 200
_WINDOW_ENTRY_BYTES = 300
#: what a per-principal view costs beyond its items (its snapshot, its name, its place in the table) and per item
#: (its own dict of the visible items and their ordered list), charged to the app's :class:`ListCache`
VIEW_BYTES = 1024
VIEW_ITEM_BYTES = 72


def kept_json(value: Any) -> bytes:
    """``value`` as JSON text to keep (a cache's entry), in a right-sized copy: the bytes ``orjson.dumps`` returns
    keep its whole encoding buffer (4 KiB at least with orjson 3.12+, however short the text), which made each
    cached list item cost ~4 KiB instead of its ~100 bytes."""
    return bytes(memoryview(orjson.dumps(value)))


class ListCache:
    """The one byte bound of everything an app keeps to answer list pages fast (:data:`MAX_LIST_CACHE_BYTES` by
    default): the pages' texts and windows of every :class:`Snapshot` (the shared list and every per-principal
    view) and the views themselves (see :mod:`mcpkit.server.visibility`). A snapshot charges what it keeps and gives
    it back when it is dropped; what would go past the bound is not kept (a page is then encoded again when asked
    for, from its items' texts), so memory stays proportional to the lists and bounded, and no answer changes."""

    __slots__ = ("max_bytes", "used")

    def __init__(self, max_bytes: int = MAX_LIST_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self.used = 0

    def take(self, size: int) -> bool:
        """Charge ``size`` bytes if they fit under the bound; False (nothing charged) if they do not."""
        if self.used + size > self.max_bytes:
            return False
        self.used += size
        return True

    def give(self, size: int) -> None:
        """Give back ``size`` bytes charged before."""
        self.used -= size


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Paginator:
    """Slice lists into pages with sealed cursors. ``key`` (bytes) lets several workers share cursors; without it,
    the cursor keys derive from ``ring``'s keys (a :class:`~mcpkit.server.request_state.RequestStateSealer`: the
    first signs, every one verifies, so they rotate with the ``requestState`` keys), else from a random key."""

    def __init__(self, key: bytes | None = None, *, ring: RequestStateSealer | None = None) -> None:
        self._ring = None if key is not None else ring
        self._source: list[bytes] | None = None  # the ring's key list the keys below derive from
        self._keys = [key or os.urandom(32)]

    def _current(self) -> list[bytes]:
        ring = self._ring
        if ring is not None and ring.keys is not self._source:  # (adopt() puts a new list in the ring)
            self._source = ring.keys
            self._keys = [hmac.new(k, b"mcpkit list cursors", hashlib.sha256).digest() for k in ring.keys]
        return self._keys

    @staticmethod
    def _sign(body: str, key: bytes) -> str:
        return _b64(hmac.new(key, body.encode("ascii"), hashlib.sha256).digest()[:16])

    def encode(self, kind: str, offset: int, last: str) -> str:
        body = _b64(orjson.dumps([kind, offset, last]))
        return f"{body}.{self._sign(body, self._current()[0])}"

    def decode(self, kind: str, cursor: Any) -> tuple[int, str]:
        if not isinstance(cursor, str) or len(cursor) > _MAX_CURSOR or not cursor.isascii():
            raise InvalidParams("invalid cursor")
        body, _, sig = cursor.partition(".")
        if not sig or not any(hmac.compare_digest(sig, self._sign(body, k)) for k in self._current()):
            raise InvalidParams("invalid cursor")
        try:
            k, offset, last = orjson.loads(_unb64(body))
        except Exception:
            raise InvalidParams("invalid cursor") from None
        if k != kind or not isinstance(offset, int) or offset < 0 or not isinstance(last, str):
            raise InvalidParams("invalid cursor: it belongs to a different list")
        return offset, last

    def window(
        self,
        kind: str,
        items: Sequence[T],
        params: dict[str, Any],
        page_size: int,
        key: Callable[[T], str],
        position: Callable[[str], int | None] | None = None,
    ) -> tuple[int, int, str | None]:
        """Where the page ``params["cursor"]`` asks for starts and ends in ``items`` (``items[start:end]``), and the
        cursor of the next one (None at the end).

        ``position(key)`` (e.g. :meth:`Snapshot.position`) finds an item by key in O(1) when the list changed
        between pages; without it that rare case scans the list."""
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if cursor == "":
                return 0, 0, None
            offset, last = self.decode(kind, cursor)
            start = offset
            if not (0 < offset <= len(items) and key(items[offset - 1]) == last):
                # the list changed since: resume after the last item the client saw, if it is still there
                if position is not None:
                    found = position(last)
                    if found is not None:
                        start = found + 1
                else:
                    for i, item in enumerate(items):
                        if key(item) == last:
                            start = i + 1
                            break
                start = min(start, len(items))
        end = min(start + page_size, len(items))
        if end < len(items) and end > start:
            return start, end, self.encode(kind, end, key(items[end - 1]))
        return start, end, None

    def page(
        self,
        kind: str,
        items: Sequence[T],
        params: dict[str, Any],
        page_size: int,
        key: Callable[[T], str],
        position: Callable[[str], int | None] | None = None,
    ) -> tuple[list[T], str | None]:
        """The page ``params["cursor"]`` asks for, and the cursor of the next one (None at the end): the items of
        :meth:`window`."""
        start, end, cursor = self.window(kind, items, params, page_size, key, position)
        return list(items[start:end]), cursor


class Snapshot(Generic[T]):
    """An ordered list view of a registry dict (key -> item) for paging, rebuilt only after it changed.

    Listing a page then costs O(page size) whatever the registry's size and the page's position (instead of
    copying the whole registry per page). Call :meth:`invalidate` whenever the dict changes; as a safety net a
    changed length also rebuilds it. What it keeps to answer pages again (their texts and windows) is charged to
    ``cache`` (the app's :class:`ListCache`; one of its own by default) and given back when it is dropped."""

    __slots__ = ("_cache", "_held", "_index", "_items", "_pages", "_source", "_windows")

    def __init__(self, source: Mapping[str, T], cache: ListCache | None = None) -> None:
        self._source = source
        self._cache = cache if cache is not None else ListCache()
        self._held = 0  # bytes charged to the cache for _pages and _windows
        self._items: list[T] | None = None
        self._index: dict[str, int] | None = None
        # pages as JSON text: (revision, start, end) -> the array of the items' listed() texts (see page_text)
        self._pages: dict[tuple[str, int, int], orjson.Fragment] = {}
        # (cursor, page size) -> the page's window (see window)
        self._windows: dict[tuple[str | None, int], tuple[int, int, str | None]] = {}

    def invalidate(self) -> None:
        """Forget the snapshot and give back what it kept; the next page rebuilds it (O(registry) once per
        change)."""
        self._items = None
        self._index = None
        self._forget_pages()

    def _forget_pages(self) -> None:
        self._pages = {}
        self._windows = {}
        self._cache.give(self._held)
        self._held = 0

    def _keep(self, size: int) -> bool:
        if self._cache.take(size):
            self._held += size
            return True
        return False

    @property
    def items(self) -> list[T]:
        """The registry's items in registration order."""
        items = self._items
        if items is None or len(items) != len(self._source):
            items = self._items = list(self._source.values())
            self._index = None
            self._forget_pages()
        return items

    def window(
        self, paginator: Paginator, kind: str, params: dict[str, Any], page_size: int, key: Callable[[T], str]
    ) -> tuple[int, int, str | None]:
        """:meth:`Paginator.window` over :attr:`items` (one paginator and list ``kind`` per snapshot), remembered
        per cursor and page size while the snapshot stands: a page asked for again (every walk asks for the same
        pages) then costs one lookup instead of verifying its cursor (HMAC, base64, JSON) and sealing the next
        one, and reads no item. Only cursors that verified are remembered (a forged one is refused every time),
        while the app's :class:`ListCache` has room."""
        items = self.items  # (first: a changed registry starts the snapshot afresh)
        cursor = params.get("cursor")
        if cursor is not None and type(cursor) is not str:
            return paginator.window(kind, items, params, page_size, key, self.position)  # (refused)
        memo = (cursor, page_size)
        found = self._windows.get(memo)
        if found is None:
            found = paginator.window(kind, items, params, page_size, key, self.position)
            nxt = found[2]
            if self._keep(_WINDOW_ENTRY_BYTES + len(cursor or "") + len(nxt or "")):
                self._windows[memo] = found
        return found

    def page_text(self, feats: Features, start: int, end: int) -> orjson.Fragment:
        """``items[start:end]`` (:class:`Listed` items) as one JSON array for ``feats``' revision, encoded once
        per snapshot: a page then reads one contiguous text instead of one object per item scattered over the
        heap, so its cost depends neither on the registry's size nor on the page's position. Kept while the app's
        :class:`ListCache` has room; past it a page is encoded again each time it is asked for (from its items'
        texts)."""
        key = (feats.version, start, end)
        text = self._pages.get(key)
        if text is None:
            body = b",".join([item.listed(feats) for item in self.items[start:end]])  # type: ignore[attr-defined]
            text = orjson.Fragment(b"[%b]" % body)
            if self._keep(_PAGE_ENTRY_BYTES + len(body)):
                self._pages[key] = text
        return text

    def position(self, key: str) -> int | None:
        """The index of ``key`` in :attr:`items` (None if absent), from a lazily built index."""
        items = self.items
        index = self._index
        if index is None:
            index = self._index = {k: i for i, k in enumerate(self._source)}
        found = index.get(key)
        return found if found is not None and found < len(items) else None


class Listed:
    """An item a ``*/list`` page shows (tool, resource, template, prompt).

    The subclass builds its object for a protocol revision in :meth:`definition` (once per revision, kept in
    ``_defs``); :meth:`listed` is that object as JSON text, encoded once. A page is then a copy of a few ready
    strings: encoding the definitions again on every page walked thousands of small objects scattered over the
    heap, and the cache misses made a page of a 10,000-tool registry cost twice a page of a 1,000-tool one.

    ``tags`` and ``scopes`` are the item's labels for the server's rules, never sent: ``tags`` for visibility
    (``MCPKit(include_tags=..., exclude_tags=...)``, ``app.disable(tags=...)``), ``scopes`` for authorization
    (``MCPKit.scope_rule``: the OAuth scopes a call of the item needs)."""

    tags: frozenset[str] = frozenset()
    scopes: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._defs: dict[str, JSONDict] = {}
        self._texts: dict[str, bytes] = {}

    def definition(self, feats: Features) -> JSONDict:
        """The object a list shows for this item in ``feats``' revision."""
        raise NotImplementedError

    def listed(self, feats: Features) -> bytes:
        """:meth:`definition` as JSON text (kept per revision), what a page's text is joined from."""
        text = self._texts.get(feats.version)
        if text is None:
            text = self._texts[feats.version] = kept_json(self.definition(feats))
            # the text is what a list needs again; the object it was made from would double the item's cost
            self._defs.pop(feats.version, None)
        return text


def list_result(
    key: str, items: list[orjson.Fragment] | orjson.Fragment, cursor: str | None, cache: JSONDict
) -> JSONDict:
    """A ``*/list`` result: the page's items (ready JSON texts, e.g. :meth:`Snapshot.page_text`), the cache hints,
    the next cursor."""
    result: JSONDict = {key: items, **cache}
    if cursor is not None:
        result["nextCursor"] = cursor
    return result


__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_LIST_CACHE_BYTES",
    "VIEW_BYTES",
    "VIEW_ITEM_BYTES",
    "ListCache",
    "Listed",
    "Paginator",
    "Snapshot",
    "kept_json",
    "list_result",
]
