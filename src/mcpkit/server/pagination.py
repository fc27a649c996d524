"""Opaque, tamper-proof list cursors.

A cursor is ``base64url(json) + "." + HMAC`` over the list it belongs to and where the next page starts.
Anything that does not verify is an invalid cursor (-32602), so a forged, truncated or foreign cursor can never
crash the server or index out of range.

The lists of an app (:class:`Snapshot`) give each item a *sequence number*: increasing in registration order and
kept while the item stays registered (a replacement keeps it; an item removed and registered again gets a new
one, at the end). A cursor carries the sequence number of the last item sent, and the next page starts at the
first item with a greater one (a bisection). So whatever changed between pages, a walk never skips an item that
was there all along (even when the item the client saw last was removed) and never shows one twice, and items
registered since show at the end. Plain sequences (:meth:`Paginator.page`) page by offset.

A ``cursor`` of ``""`` is an empty last page (2024-11-05/2025-03-26 sessions end their lists
with ``nextCursor: ""``, and a client that sends it back must not get the first page again).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from array import array
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import orjson

from ..protocol.errors import InvalidParams
from ..protocol.jsonrpc import JSONDict
from ..protocol.versions import Features
from .request_state import RequestStateSealer

T = TypeVar("T")
_UNSET: Any = object()
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
        self.max_bytes: int = max_bytes
        self.used: int = 0

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
    first signs, every one verifies, so they rotate with the ``requestState`` keys), else from a random key.
    ``max_cursor``: the longest cursor it reads (characters; a longer one is refused unread)."""

    def __init__(
        self, key: bytes | None = None, *, ring: RequestStateSealer | None = None, max_cursor: int = _MAX_CURSOR
    ) -> None:
        self._ring = None if key is not None else ring
        self._max_cursor = max_cursor  # (characters of a cursor it takes: longer is refused unread)
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
        if not isinstance(cursor, str) or len(cursor) > self._max_cursor or not cursor.isascii():
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
        seqs: Sequence[int] | None = None,
    ) -> tuple[int, int, str | None]:
        """Where the page ``params["cursor"]`` asks for starts and ends in ``items`` (``items[start:end]``), and the
        cursor of the next one (None at the end).

        ``seqs`` (e.g. :attr:`Snapshot.seqs`): the items' sequence numbers, increasing; the cursor then carries the
        last one sent and the next page starts after it by bisection, whatever changed since. Without them the
        cursor carries the offset of the next page and the key of the last item sent, and a list that changed
        since resumes after that item if it is still there (found by a scan)."""
        cursor = params.get("cursor")
        start = 0
        if cursor is not None:
            if cursor == "":
                return 0, 0, None
            offset, last = self.decode(kind, cursor)
            if seqs is not None:
                start = bisect_right(seqs, offset)
            else:
                start = offset
                if not (0 < offset <= len(items) and key(items[offset - 1]) == last):
                    # the list changed since: resume after the last item the client saw, if it is still there
                    for i, item in enumerate(items):
                        if key(item) == last:
                            start = i + 1
                            break
                    start = min(start, len(items))
        end = min(start + page_size, len(items))
        if end < len(items) and end > start:
            if seqs is not None:
                return start, end, self.encode(kind, seqs[end - 1], "")
            return start, end, self.encode(kind, end, key(items[end - 1]))
        return start, end, None

    def page(
        self,
        kind: str,
        items: Sequence[T],
        params: dict[str, Any],
        page_size: int,
        key: Callable[[T], str],
    ) -> tuple[list[T], str | None]:
        """The page ``params["cursor"]`` asks for, and the cursor of the next one (None at the end): the items of
        :meth:`window` (by offset)."""
        start, end, cursor = self.window(kind, items, params, page_size, key)
        return list(items[start:end]), cursor


class Snapshot(Generic[T]):
    """An ordered list view of a registry dict (key -> item) for paging, rebuilt only after it changed.

    Listing a page then costs O(page size) whatever the registry's size and the page's position (instead of
    copying the whole registry per page). Call :meth:`invalidate` whenever the dict changes; as a safety net a
    changed length also rebuilds it. What it keeps to answer pages again (their texts and windows) is charged to
    ``cache`` (the app's :class:`ListCache`; one of its own by default) and given back when it is dropped.

    Its items' sequence numbers (:attr:`seqs`, see the module docstring) are its own, or, for a view of part of a
    registry (``base``: the registry's own snapshot; ``source`` then holds some of its keys, in its order), the
    registry's: a cursor then means the same place in every view of it. ``key`` (an item's key in ``source``,
    e.g. a tool's name) tells a replaced item (the same place, the same number) from a new one; without it items
    are compared with ``==``."""

    __slots__ = (
        "_base",
        "_cache",
        "_held",
        "_items",
        "_key",
        "_next",
        "_pages",
        "_seqs",
        "_source",
        "_was",
        "_windows",
    )

    def __init__(
        self,
        source: Mapping[str, T],
        cache: ListCache | None = None,
        base: Snapshot[Any] | None = None,
        key: Callable[[T], str] | None = None,
    ) -> None:
        self._source = source
        self._cache = cache if cache is not None else ListCache()
        self._base = base
        self._key = key
        self._held = 0  # bytes charged to the cache for _pages and _windows
        self._items: list[T] | None = None
        # the sequence numbers of the items: a range while nothing was ever removed (no memory), else an array (8
        # bytes an item); _next: the next number to give; _was: the items of the last build, until the next one
        # (numbered from them)
        self._seqs: Sequence[int] = range(0)
        self._next = 0
        self._was: list[T] | None = None
        # pages as JSON text: (revision, start, end) -> the array of the items' listed() texts (see page_text)
        self._pages: dict[tuple[str, int, int], orjson.Fragment] = {}
        # (cursor, page size) -> the page's window (see window)
        self._windows: dict[tuple[str | None, int], tuple[int, int, str | None]] = {}

    def invalidate(self) -> None:
        """Forget the snapshot and give back what it kept; the next page rebuilds it (O(registry) once per
        change)."""
        if self._items is not None:
            self._was = self._items
        self._items = None
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
            if items is not None:
                self._was = items  # (a missed invalidate())
            items = self._items = list(self._source.values())
            self._number(items)
            self._forget_pages()
        return items

    @property
    def seqs(self) -> Sequence[int]:
        """The sequence numbers of :attr:`items`, increasing (see the module docstring)."""
        self.items  # noqa: B018 - (first: a changed registry is numbered afresh)
        return self._seqs

    def _number(self, items: list[T]) -> None:
        """Give the items of a new build their sequence numbers: O(registry), once per change."""
        base = self._base
        if base is not None:  # a view: the registry's numbers, for the keys it shows
            shown = self._source
            shown_seqs = array("q", [s for k, s in zip(base._source, base.seqs, strict=True) if k in shown])
            if len(shown_seqs) == len(items):
                self._seqs = shown_seqs
                return
            self._base = None  # (not a view of that registry after all: numbered on its own from now on)
        was, old, nxt, key, n = self._was, self._seqs, self._next, self._key, len(items)
        self._was = None
        kept = len(was) if was is not None else 0
        if items[:kept] == (was or []):  # nothing removed or replaced (the usual change: items added at the end)
            if isinstance(old, range) and old.stop == nxt:
                seqs: Sequence[int] = range(old.start, nxt + n - kept)
            else:
                seqs = array("q", old)
                seqs.extend(range(nxt, nxt + n - kept))
            nxt += n - kept
        else:  # something removed or replaced: one pass over both builds, in order (each is a subsequence)
            assert was is not None
            seqs = array("q")
            i, kept = 0, len(was)
            for item in items:
                wanted: Any = _UNSET
                while i < kept:
                    before = was[i]
                    if before is item:
                        break
                    if wanted is _UNSET:
                        wanted = item if key is None else key(item)
                    if (before if key is None else key(before)) == wanted:
                        break  # replaced: the same place, the same number
                    i += 1  # (removed since)
                if i < kept:
                    seqs.append(old[i])
                    i += 1
                else:  # added since (or removed and registered again): a new number, at the end
                    seqs.append(nxt)
                    nxt += 1
        self._seqs, self._next = seqs, nxt

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
            return paginator.window(kind, items, params, page_size, key, self._seqs)  # (refused)
        memo = (cursor, page_size)
        found = self._windows.get(memo)
        if found is None:
            found = paginator.window(kind, items, params, page_size, key, self._seqs)
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
