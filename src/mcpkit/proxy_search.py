"""Tool search on a proxy (:mod:`mcpkit.proxies`): ``p.add_tool_search()`` covers the upstream's tools as well as
the proxy's own. The proxy walks each upstream's ``tools/list`` on its primary connection (the one that relays list
changes), at the first search and again at the first search after the upstream said its tools changed
(``notifications/tools/list_changed`` in the handshake era, its listen stream in 2026-07-28, a gateway member
joining, leaving or connected again). Those tools join the search index beside the proxy's own (a name both have
is the proxy's); ``call_tool`` of one is the direct ``tools/call`` of it, forwarded as any, through the proxy's
interceptors. With tool search on, ``tools/list`` shows of the upstream's tools only those named in
``always_visible`` and those that declare ``x-mcp-header`` parameters, as a plain app does with its own.

Bounds (``docs/security.md``): at most :data:`MAX_INDEXED_TOOLS` tools and :data:`MAX_INDEXED_BYTES` bytes of their
definitions are indexed, over at most :data:`MAX_INDEXED_PAGES` pages in all, within :data:`MAX_WALK_SECONDS`;
past either, the walk stops, and every search answer says so in its ``note`` (a warning line is logged too): the
tools left out are still called by their names. An upstream's listing that names a cursor it named before ends
there (it would never end), and a name listed again is indexed once (the first).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from typing import Any

import orjson

from .protocol.errors import MCPError
from .protocol.headers import param_headers_from_schema
from .protocol.jsonrpc import JSONDict
from .protocol.versions import Features
from .proxy_shaping import shape_item
from .server.prefixes import prefixed_name

logger: logging.Logger = logging.getLogger("mcpkit.proxy")

__all__ = [
    "MAX_INDEXED_BYTES",
    "MAX_INDEXED_PAGES",
    "MAX_INDEXED_TOOLS",
    "MAX_WALK_SECONDS",
    "UpstreamCatalog",
    "UpstreamTool",
]

#: the upstream tools a proxy's tool search indexes at most (all its upstreams together)
MAX_INDEXED_TOOLS = 10_000
#: bytes of those tools' definitions (as the upstream sent them) indexed at most
MAX_INDEXED_BYTES = 32 * 1024 * 1024
#: list pages walked for the index at most (all upstreams together)
MAX_INDEXED_PAGES = 1_000
#: seconds a walk of the upstreams' tools may take (the search that started it, and those behind it, wait for it)
MAX_WALK_SECONDS: float = 30.0


def declares_headers(item: Any) -> bool:
    """Whether a tool definition (a list item) declares ``x-mcp-header`` parameters (a client learns the headers a
    tool needs from the list only, so tool search keeps such a tool listed)."""
    if not isinstance(item, dict):
        return False
    try:
        return bool(param_headers_from_schema(item.get("inputSchema")))
    except ValueError:
        return False


class UpstreamTool:
    """One upstream tool in a proxy's search index: what the index reads (``name``, ``title``, ``description``,
    ``input_schema``) and its definition as the proxy lists it to a caller (:meth:`listed`)."""

    __slots__ = ("description", "input_schema", "item", "name", "prefix", "title")

    def __init__(self, item: JSONDict, prefix: str | None) -> None:
        self.item: JSONDict = item
        self.prefix: str | None = prefix
        self.name: str = prefixed_name(prefix, item["name"])
        title = item.get("title")
        self.title: str | None = title if isinstance(title, str) else None
        description = item.get("description")
        self.description: str | None = description if isinstance(description, str) else None
        schema = item.get("inputSchema")
        self.input_schema: JSONDict = schema if isinstance(schema, dict) else {}

    def listed(self, feats: Features) -> bytes:
        """Its definition for a caller of revision ``feats``, as the proxy's ``tools/list`` would show it."""
        return orjson.dumps(shape_item("tools/list", self.item, "name", self.prefix, feats))


class UpstreamCatalog:
    """The upstream tools a proxy's tool search covers (:attr:`ToolSearch.extra
    <mcpkit.server.tool_search.ToolSearch.extra>`): walked again lazily, at the first search after a change."""

    def __init__(self, proxy: Any) -> None:
        self.proxy: Any = proxy
        self.tools: Sequence[UpstreamTool] = ()
        self.note: str | None = None  #: what the index leaves out (past its bounds), said in every search answer
        self._stale = True
        self._walking = asyncio.Lock()

    def changed(self) -> None:
        """The upstream's tools may have changed: walk them again at the next search."""
        self._stale = True

    def serves(self, name: str) -> bool:
        """Whether ``call_tool`` of ``name`` (not one of the proxy's own) goes upstream: a name the proxy routes
        (a plain proxy's: every name; the upstream refuses one it does not have, as a direct call of it)."""
        try:
            self.proxy._route_name(name)
        except MCPError:
            return False
        return True

    async def ensure(self) -> None:
        """Walk the upstreams' tools if they changed since the last walk (or were never walked)."""
        if not self._stale:
            return
        async with self._walking:
            if not self._stale:
                return
            self._stale = False  # (a change during the walk marks it again: the next search walks again)
            try:
                tools, note = await self._walk()
            except BaseException:  # (the search was cancelled: the next one walks)
                self._stale = True
                raise
            self.tools, self.note = tools, note
            search = self.proxy.tool_search
            if search is not None:
                search.catalog_changed()

    async def _walk(self) -> tuple[tuple[UpstreamTool, ...], str | None]:
        found: list[UpstreamTool] = []
        names: set[str] = set()
        size = pages = 0
        note: str | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_WALK_SECONDS
        for upstream in self.proxy.upstreams:
            primary = upstream.primary
            client = primary.client if primary is not None else None
            if client is None or upstream.down is not None or not isinstance(upstream.capabilities.get("tools"), dict):
                continue  # (a member that is down: walked when it is back, which tells its lists changed)
            who = "the upstream" if upstream.prefix is None else f"gateway member {upstream.prefix!r}"
            cursor: str | None = None
            cursors: set[bytes] = set()  # (digests of the cursors it named: one named again ends its listing)
            while note is None:
                if pages >= MAX_INDEXED_PAGES:
                    note = f"only the upstream tools of the first {MAX_INDEXED_PAGES} list pages are searched"
                    break
                try:
                    async with asyncio.timeout_at(deadline):
                        page = await client.session.request("tools/list", {"cursor": cursor} if cursor else {})
                except TimeoutError:
                    note = f"only the upstream tools listed within {MAX_WALK_SECONDS:g} s are searched"
                    break
                except Exception as exc:  # (its tools are left out of this index; the next search walks again)
                    logger.warning("tool search: could not list the tools of %s: %s", who, exc)
                    self._stale = True
                    break
                pages += 1
                items = page.get("tools")
                for item in items if isinstance(items, list) else ():
                    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                        continue
                    if prefixed_name(upstream.prefix, item["name"]) in names:
                        continue  # (listed again: the first is indexed)
                    size += len(orjson.dumps(item))
                    if len(found) >= MAX_INDEXED_TOOLS or size > MAX_INDEXED_BYTES:
                        note = (
                            f"only the first {len(found)} upstream tools are searched (at most {MAX_INDEXED_TOOLS} "
                            f"tools, {MAX_INDEXED_BYTES} bytes of definitions): the others are called by their names"
                        )
                        break
                    found.append(UpstreamTool(item, upstream.prefix))
                    names.add(found[-1].name)
                nxt = page.get("nextCursor")
                if not isinstance(nxt, str) or not nxt:
                    break
                digest = hashlib.blake2b(nxt.encode("utf-8", "surrogatepass"), digest_size=16).digest()
                if digest in cursors:
                    logger.warning("tool search: %s named the cursor %r twice; its listing ends there", who, nxt[:100])
                    break
                cursors.add(digest)
                cursor = nxt
            if note is not None:
                break
        if note is not None:
            logger.warning("tool search: %s", note)
        return tuple(found), note
