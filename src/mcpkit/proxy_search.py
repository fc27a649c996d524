"""Tool search on a proxy (:mod:`mcpkit.proxies`): ``p.add_tool_search()`` covers the upstream's tools as well as
the proxy's own. The proxy walks each upstream's ``tools/list`` on its primary connection (the one that relays list
changes), at the first search and again at the first search after the upstream said its tools changed
(``notifications/tools/list_changed`` in the handshake era, its listen stream in 2026-07-28, a gateway member
joining, leaving or connected again). Those tools join the search index beside the proxy's own (a name both have
is the proxy's); ``call_tool`` of one is the direct ``tools/call`` of it, forwarded as any, through the proxy's
interceptors. With tool search on, ``tools/list`` shows of the upstream's tools only those named in
``always_visible`` and those that declare ``x-mcp-header`` parameters, as a plain app does with its own.

A handshake-era client session has upstream sessions of its own (on a stdio upstream, processes of its own), and
its calls go there: a tool its own upstream session adds is one it can call and the proxy's connection never sees.
So its search covers what its own upstream sessions list (walked at its first search once it has one, and again
after one of them says its tools changed, or is opened again), and the proxy's connection's list for an upstream
it has no session of its own on yet. A session whose walk finds what the proxy's connection lists shares the
proxy's catalog (and its index); one whose list differs has a catalog of its own, for as long as the session lasts.

Bounds (``docs/security.md``): at most :data:`MAX_INDEXED_TOOLS` tools and :data:`MAX_INDEXED_BYTES` bytes of their
definitions are indexed, over at most :data:`MAX_INDEXED_PAGES` pages in all, within :data:`MAX_WALK_SECONDS`, per
catalog; past either, the walk stops, and every search answer says so in its ``note`` (a warning line is logged
too): the tools left out are still called by their names. An upstream's listing that names a cursor it named before
ends there (it would never end), and a name listed again is indexed once (the first). The sessions' catalogs of
their own hold at most :data:`MAX_SESSION_INDEXED_BYTES` bytes of definitions all together: past that, a session's
search covers the proxy's catalog, and its answers say so.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import weakref
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
    "MAX_SESSION_INDEXED_BYTES",
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
#: bytes of definitions the handshake-era sessions' catalogs of their own hold at most, all sessions together (a
#: session whose upstream sessions list what the proxy's connection lists shares the proxy's: it counts nothing)
MAX_SESSION_INDEXED_BYTES = 64 * 1024 * 1024


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
    <mcpkit.server.tool_search.ToolSearch.extra>`): walked again lazily, at the first search after a change. The
    proxy's catalog walks each upstream's primary connection; a handshake-era session's (``session``, made by the
    proxy's, ``shared``) walks the session's own upstream sessions, where it has them."""

    def __init__(self, proxy: Any, session: Any = None, shared: UpstreamCatalog | None = None) -> None:
        self.proxy: Any = proxy
        self.session: Any = session  #: (a session's catalog) the handshake-era client session it is of
        self.shared: UpstreamCatalog | None = shared  #: (a session's catalog) the proxy's
        self.sharing: bool = False  #: (a session's catalog) it covers the proxy's catalog (holding nothing)
        self.refusal: str | None = None  #: (a session's catalog) why it shares though its list differs
        self.digest: bytes = b""  #: of the definitions walked (a session's catalog that walks the same shares)
        self.size: int = 0  #: bytes of definitions held (0 while a session's catalog shares the proxy's)
        self.changes: int = 0  #: (the proxy's) the times its upstreams said their tools changed
        self._tools: Sequence[UpstreamTool] = ()
        self._note: str | None = None
        self._stale = True
        self._key: tuple[Any, ...] | None = None  # (a session's) what it walked: the connections, their changes
        self._walking = asyncio.Lock()
        self._sessions: weakref.WeakKeyDictionary[Any, UpstreamCatalog] = weakref.WeakKeyDictionary()

    @property
    def tools(self) -> Sequence[UpstreamTool]:
        """The tools searched (a session's catalog that shares: the proxy's, the same sequence)."""
        shared = self.shared
        return shared.tools if shared is not None and self.sharing else self._tools

    @property
    def note(self) -> str | None:
        """What the index leaves out (past its bounds), said in every search answer."""
        shared = self.shared
        if shared is not None and self.sharing:
            return "; ".join(n for n in (self.refusal, shared.note) if n) or None
        return self._note

    def changed(self) -> None:
        """The upstream's tools may have changed: walk them again at the next search (the sessions' too)."""
        self._stale = True
        self.changes += 1

    def serves(self, name: str) -> bool:
        """Whether ``call_tool`` of ``name`` (not one of the proxy's own) goes upstream: a name the proxy routes
        (a plain proxy's: every name; the upstream refuses one it does not have, as a direct call of it)."""
        try:
            self.proxy._route_name(name)
        except MCPError:
            return False
        return True

    def for_request(self, sctx: Any) -> UpstreamCatalog:
        """The catalog the search of ``sctx`` covers: its handshake-era session's (once :meth:`ensure` walked it for
        the session), else this one."""
        session = sctx.session
        if session is None or sctx.features.modern:
            return self
        return self._sessions.get(session, self)

    async def ensure(self, sctx: Any = None) -> None:
        """Walk the upstreams' tools if they changed since the last walk (or were never walked); for a request of
        a handshake-era session with upstream sessions of its own, walk what those list too (:meth:`for_request`)."""
        await self._ensure_proxys()
        session = sctx.session if sctx is not None and not sctx.features.modern else None
        if session is None:
            return
        own = [u.own_conn(session) if not u.modern else None for u in self.proxy.upstreams]
        if not any(own):  # (its calls go where the proxy's connection lists: the proxy's catalog is its)
            self._sessions.pop(session, None)
            return
        mine = self._sessions.get(session)
        if mine is None:
            for gone in [s for s in self._sessions if s.closed]:
                self._sessions.pop(gone, None)
            mine = self._sessions[session] = UpstreamCatalog(self.proxy, session, self)
        conns = [o if o is not None else u.primary for o, u in zip(own, self.proxy.upstreams, strict=True)]
        await mine._ensure_session((self.changes, *((c, c.tools_changes) if c else None for c in conns)), conns)

    async def _ensure_proxys(self) -> None:
        if not self._stale:
            return
        async with self._walking:
            if not self._stale:
                return
            self._stale = False  # (a change during the walk marks it again: the next search walks again)
            try:
                walked = await self._walk([u.primary for u in self.proxy.upstreams])
            except BaseException:  # (the search was cancelled: the next one walks)
                self._stale = True
                raise
            self._tools, self._note, self.digest, self.size = walked
            search = self.proxy.tool_search
            if search is not None:
                search.catalog_changed()

    async def _ensure_session(self, key: tuple[Any, ...], conns: list[Any]) -> None:
        shared = self.shared
        assert shared is not None
        async with self._walking:
            if self._key == key:
                return
            self._stale = False
            self._key = None  # (until the walk ends: a cancelled one is walked again at the next search)
            tools, note, digest, size = await self._walk(conns)
            if not self._stale:  # (a walk that failed is walked again at the next search)
                self._key = key
            held = sum(c.size for c in list(shared._sessions.values()) if c is not self)
            self._tools, self._note, self.digest, self.size = (), None, digest, 0
            self.sharing, self.refusal = True, None
            if digest == shared.digest:  # (what the proxy's connection lists: its catalog, and its index)
                return
            if held + size > MAX_SESSION_INDEXED_BYTES:
                self.refusal = (
                    "the tools this session's own upstream sessions list are not searched (the sessions' own tool "
                    f"lists hold {MAX_SESSION_INDEXED_BYTES} bytes at most, all together): the proxy's list is, and "
                    "every tool is called by its name"
                )
                logger.warning("tool search: %s", self.refusal)
                return
            self._tools, self._note, self.size, self.sharing = tools, note, size, False

    async def _walk(self, conns: list[Any]) -> tuple[tuple[UpstreamTool, ...], str | None, bytes, int]:
        """The tools ``conns`` list (one connection per upstream, in order; None: left out), within the bounds:
        the tools, what was left out, the digest of the definitions and their size."""
        found: list[UpstreamTool] = []
        names: set[str] = set()
        size = pages = 0
        note: str | None = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_WALK_SECONDS
        hashed = hashlib.blake2b(digest_size=16)  # (of the definitions: a session's walk that finds the same shares)
        for upstream, conn in zip(self.proxy.upstreams, conns, strict=True):
            client = conn.client if conn is not None else None
            if client is None or upstream.down is not None or not isinstance(upstream.capabilities.get("tools"), dict):
                continue  # (a member that is down: walked when it is back, which tells its lists changed)
            who = "the upstream" if upstream.prefix is None else f"gateway member {upstream.prefix!r}"
            cursor: str | None = None
            hashed.update(repr(upstream.prefix).encode())
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
                    definition = orjson.dumps(item)
                    size += len(definition)
                    if len(found) >= MAX_INDEXED_TOOLS or size > MAX_INDEXED_BYTES:
                        note = (
                            f"only the first {len(found)} upstream tools are searched (at most {MAX_INDEXED_TOOLS} "
                            f"tools, {MAX_INDEXED_BYTES} bytes of definitions): the others are called by their names"
                        )
                        break
                    hashed.update(definition)
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
        return tuple(found), note, hashed.digest(), size
