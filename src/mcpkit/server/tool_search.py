"""Tool search (progressive disclosure): a server with hundreds of tools lists two, and the model finds the rest
on demand.

``app.add_tool_search()`` makes ``tools/list`` show a search tool (``search_tools``), a caller tool
(``call_tool``), the tools named ``always_visible`` and the tools that declare ``x-mcp-header`` parameters (a
2026-07-28 HTTP client learns the headers a tool needs only from the list, so these are listed as if pinned, in
every revision). ``search_tools(query, limit?)`` answers the definitions of
the tools that match, exactly as ``tools/list`` would show them to this caller in its revision (the same text),
as structured content and as text; ``call_tool(name, arguments)`` runs one of them. Every tool stays callable by
its own name too: search is discovery, not access control (hide a tool with the visibility rules, protect it with
scopes).

Both obey the rules a direct call obeys, because a ``call_tool`` *is* the direct call:

- what a caller may see (tags, ``disable``, the view filter per principal) bounds what search finds (a hidden tool
  is never found, nor does it sway the ranking: :mod:`mcpkit.server.search_index`) and what ``call_tool`` runs
  (a hidden or unknown tool is refused exactly as ``tools/call`` of it is);
- the OAuth scopes of the tool called: :attr:`MCPKit.scope_rule <mcpkit.server.visibility.Rules.scope_rule>` asks
  for the inner tool's (so :func:`mcpkit.auth.protect` refuses, or answers HTTP 403 with a step-up challenge,
  as for the tool called directly), and a rule of the installer's own is asked again with the inner tool's name
  (by ``protect`` too, through :meth:`Searching.asked_too`, for the same 403);
- ``call_tool`` is rewritten into ``tools/call`` of the inner tool by an interceptor that runs first (outermost):
  the app's other interceptors, its middleware and telemetry, and its task support see the real tool's call, and
  the call runs on the same request (progress, cancellation, logging, input rounds as for a direct call).
  ``call_tool`` cannot call the search or caller tool.
- an app with tool search may be mounted or imported: the app serving the request routes a call of the mounted
  caller tool (``ops_call_tool``) before its own chain (:class:`~mcpkit.server.search_routing.CallRouting`), into
  its own ``tools/call`` of the tool named as it serves it (``ops_purge``), so its scope rule, view and
  interceptors are asked about that tool;
  the mounted search tool finds what that app shows the caller, under its names (of an import, the copies it
  took, as they were: an import is a snapshot, searched as it is served); that app's ``tools/list`` shows
  what the mounted app lists (its two tools and pinned tools, prefixed), the others stay callable by their names.
  Every app that serves a caller tool, its own or a mounted one, has the routing interceptor; in a mounted app's
  chain it does nothing (the call was routed at the top, or came by other means and the caller tool's own
  function routes it).

An app without tool search pays nothing: ``tools/call`` runs as before (the interceptor exists only once
``add_tool_search`` was called). The index (:class:`~mcpkit.server.search_index.SearchIndex`) is built at the
first search and again after the catalog changed (a tool added, removed or replaced, a mount's change); a search
runs on a worker thread, so building the index of a large catalog never holds up the event loop.
"""

from __future__ import annotations

import operator
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import orjson

from ..protocol.errors import MCPError, MissingRequiredClientCapability, TaskFailed, URLElicitationRequired
from ..protocol.jsonrpc import JSONDict
from .compose import Mount, MountedTool, prefixed_name
from .pagination import Snapshot
from .request_context import CURRENT_AUTHORIZATION, Forbidden
from .search_index import SearchIndex
from .search_routing import CallerTool, CallRouting, caller_route, mounts_serving, routed_params
from .tools import CallRefused, Tool

if TYPE_CHECKING:
    from .context import Context
    from .pagination import ListCache
    from .visibility import Visibility

#: the most results one search may ask for (``max_results`` is at most this)
MAX_RESULTS = 100
#: the longest query, in characters (a longer one is refused as an invalid argument)
MAX_QUERY_CHARS = 1024
STRATEGIES = ("bm25", "keyword")
#: a scope rule: ``(method, params) -> scopes needed`` (what :func:`mcpkit.auth.protect` takes as ``scope_rule``)
ScopeRuleFn = Callable[[str, Mapping[str, Any]], list[str]]


class _Listed(Mapping[str, Tool]):
    """What ``tools/list`` shows under tool search: the registered tools among ``names``, in that order, then every
    other tool whose definition declares ``x-mcp-header`` parameters, in registration order (a live view of the
    registry: a tool registered later shows then). A client learns the ``Mcp-Param-*`` headers a tool needs only
    from the definitions it listed (2026-07-28 HTTP), so such a tool is listed as if pinned, in every revision and
    on every transport alike (the list never depends on how it is served)."""

    __slots__ = ("_names", "_tools")

    def __init__(self, tools: dict[str, Tool], names: tuple[str, ...]) -> None:
        self._tools = tools
        self._names = names

    def __getitem__(self, key: str) -> Tool:
        tool = self._tools[key]
        if key not in self._names and tool.param_headers is None:
            raise KeyError(key)
        return tool

    def __iter__(self) -> Iterator[str]:
        names, tools = self._names, self._tools
        yield from (name for name in names if name in tools)
        registered = list(tools.items())  # (a copy in one step: a sync tool may register meanwhile)
        yield from (name for name, tool in registered if name not in names and tool.param_headers is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _MountedListed(Mapping[str, Tool]):
    """What ``tools/list`` shows of an app that serves a mounted (or imported) app with tool search: its tools but
    those the mounted app does not list (:attr:`MountedTool.unlisted <mcpkit.server.compose.MountedTool>`): it
    shows what that app shows on its own, under the prefix; the others stay callable by their names and found by
    its search tool. A live view of the registry."""

    __slots__ = ("_tools",)

    def __init__(self, tools: dict[str, Tool]) -> None:
        self._tools = tools

    def __getitem__(self, key: str) -> Tool:
        tool = self._tools[key]
        if isinstance(tool, MountedTool) and tool.unlisted:
            raise KeyError(key)
        return tool

    def __iter__(self) -> Iterator[str]:
        registered = list(self._tools.items())  # (a copy in one step: a sync tool may register meanwhile)
        return (name for name, tool in registered if not (isinstance(tool, MountedTool) and tool.unlisted))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class ExtraTools(Protocol):
    """Tools a search covers beside the app's own (a proxy's upstream tools, :mod:`mcpkit.proxy_search`)."""

    @property
    def tools(self) -> Sequence[Any]:
        """The tools: each with ``name``, ``title``, ``description``, ``input_schema`` (what the index reads) and
        ``listed(features) -> bytes`` (its definition for a caller). One named as a tool of the app's is left out."""
        ...

    @property
    def note(self) -> str | None:
        """What the search leaves out of them, said in every answer (``note``), or None."""
        ...

    def serves(self, name: str) -> bool:
        """Whether ``call_tool`` of ``name`` (not a tool of the app's) is the app's ``tools/call`` of it."""
        ...

    def for_request(self, sctx: Any) -> ExtraTools:
        """The extra tools the search of the request ``sctx`` covers: these, or those its caller can call when
        they differ (a proxy's session with upstream sessions of its own). The index of another one than these
        is kept while its ``tools`` are the same sequence (one that is these ``tools`` shares their index)."""
        ...


class ToolSearch:
    """The tool search of one app (what :meth:`Searching.add_tool_search` installs)."""

    #: tools searched and called beside the app's own (set by a proxy: its upstream's), or None
    extra: ExtraTools | None = None

    def __init__(
        self, app: Any, strategy: str, max_results: int, search_name: str, call_name: str, pinned: tuple[str, ...]
    ) -> None:
        self.app = app
        self.keyword: bool = strategy == "keyword"
        self.max_results = max_results
        self.search_name = search_name
        self.call_name = call_name
        self.synthetic: frozenset[str] = frozenset((search_name, call_name))
        self.pinned = pinned
        self._index: SearchIndex | None = None
        # searches run on worker threads, catalog changes on the event loop: an index built from a catalog that
        # changed meanwhile answers its own search but is not kept (the generation tells)
        self._generation = 0
        self._lock = threading.Lock()
        # the index of what an importer serves of this catalog (ToolSearch._copies_index), with those tools
        self._copies: tuple[tuple[Tool, ...], SearchIndex] | None = None
        # the indexes with other extra tools than ``extra``'s (ExtraTools.for_request), while those live
        self._scoped: weakref.WeakKeyDictionary[Any, tuple[int, Sequence[Any], SearchIndex]] = (
            weakref.WeakKeyDictionary()
        )
        self.search_tool: Tool = _search_tool(self)
        self.caller_tool: Tool = CallerTool(self)

    def serves_extra(self, name: str) -> bool:
        """Whether ``call_tool`` of ``name`` (not a tool of the app's) is the app's ``tools/call`` of it (one of
        :attr:`extra`'s)."""
        return self.extra is not None and self.extra.serves(name)

    # ------------------------------------------------------------------ the catalog

    def catalog_changed(self) -> None:
        """Forget the index (the next search builds it again)."""
        with self._lock:
            self._generation += 1
            self._index = None

    def index(self, extra: ExtraTools | None = None) -> SearchIndex:
        """The index of the catalog as it is now (built here when there is none), with :attr:`extra`'s tools, or
        with ``extra``'s (:meth:`ExtraTools.for_request`)."""
        if extra is not None and extra is not self.extra and self.extra is not None:
            if extra.tools is not self.extra.tools:
                return self._scoped_index(extra)
            with self._lock:  # (it has these tools now: an index of others it had is not needed any more)
                self._scoped.pop(extra, None)
        index = self._index
        if index is None:
            generation = self._generation
            registered = list(self.app._tools.items())  # (a copy in one step: the loop may register meanwhile)
            tools = [tool for name, tool in registered if name not in self.synthetic]
            if self.extra is not None:  # (after the app's own; one named as the app's is the app's)
                own = {name for name, _ in registered}
                tools += [tool for tool in self.extra.tools if tool.name not in own]
            index = SearchIndex(tools, self.keyword)
            with self._lock:
                if self._generation == generation:
                    self._index = index
        return index

    def _scoped_index(self, extra: ExtraTools) -> SearchIndex:
        """The index of the app's tools with ``extra``'s (kept while the catalog and ``extra``'s tools stay)."""
        generation, tools = self._generation, extra.tools
        with self._lock:
            kept = self._scoped.get(extra)
        if kept is not None and kept[0] == generation and kept[1] is tools:
            return kept[2]
        registered = list(self.app._tools.items())  # (a copy in one step: the loop may register meanwhile)
        own = {name for name, _ in registered}
        listed = [tool for name, tool in registered if name not in self.synthetic]
        index = SearchIndex(listed + [tool for tool in tools if tool.name not in own], self.keyword)
        with self._lock:
            self._scoped[extra] = (generation, tools, index)
        return index

    def _copies_index(self, served: _Served) -> SearchIndex:
        """The index of the tools of this catalog that ``served``'s app serves through an import (the copies it
        took then, which the child may have replaced or removed since): kept while it serves the same ones (one
        such index at a time, like the catalog's own)."""
        copies = served.copies(self.synthetic)
        kept = self._copies
        if kept is not None and len(kept[0]) == len(copies) and all(map(operator.is_, kept[0], copies)):
            return kept[1]
        index = SearchIndex(copies, self.keyword)
        self._copies = (copies, index)
        return index

    # ------------------------------------------------------------------ the search tool

    def search(self, arguments: JSONDict, ctx: Context) -> JSONDict:
        """``search_tools``: the definitions of the tools matching ``query`` that the caller may see (of the app
        serving the request: when this app is mounted, the tools as the parent serves them to this caller)."""
        sctx = ctx.request_context
        limit = arguments.get("limit")
        limit = self.max_results if limit is None else min(int(limit), self.max_results)
        feats = sctx.features
        top: Any = sctx.server
        if top is not self.app:  # mounted (or imported): the parent's names, the parent's view
            mounts = self._mounts_in(top, sctx, self.search_tool)
            served = _Served(top, mounts, sctx)
            # live mounts serve this catalog as it is now; an import serves the copies it took (a snapshot)
            index = self.index() if all(mount.live for mount in mounts) else self._copies_index(served)
            found = index.search(str(arguments["query"]), limit, served.shown)
            return {"tools": [orjson.loads(served.tool(tool).listed(feats)) for tool in found]}
        app = self.app
        visible: Callable[[Tool], bool] | None = None
        if app._visibility is not None:
            rules: Visibility = app._visibility
            principal = sctx.principal

            def shown(tool: Tool) -> bool:  # (an extra tool is not the app's to hide: shown as its list shows it)
                return not isinstance(tool, Tool) or rules.allows("tools", tool.name, tool, principal)

            visible = shown

        extra = self.extra.for_request(sctx) if self.extra is not None else None
        found = self.index(extra).search(str(arguments["query"]), limit, visible)
        answer: JSONDict = {"tools": [orjson.loads(tool.listed(feats)) for tool in found]}
        note = extra.note if extra is not None else None
        if note:
            answer["note"] = note
        return answer

    def _mounts_in(self, top: Any, sctx: Any, synthetic: Tool) -> tuple[Mount, ...]:
        """The mounts through which ``top`` (the app serving the request) serves ``synthetic`` (this app's search
        or caller tool) for the request (see :func:`mounts_serving`)."""
        return mounts_serving(
            top,
            sctx,
            synthetic,
            f"{synthetic.name!r} of {self.app.name!r} is served more than once by {top.name!r}, under different "
            "names: call it by the name the server lists it under",
        )

    # ------------------------------------------------------------------ the caller tool

    async def call(self, arguments: JSONDict, ctx: Context) -> Any:
        """``call_tool`` reached without the rewrite (the tool run by other means, e.g. ``forward()`` of a tool
        derived from it): the inner call under the same rules, without the chain, as the app serving the request
        runs it."""
        sctx = ctx.request_context
        top: Any = sctx.server
        try:
            mounts = () if top is self.app else self._mounts_in(top, sctx, self.caller_tool)
            inner = routed_params(top, self, mounts, arguments, {"name": self.call_name, "arguments": arguments})
            authz = CURRENT_AUTHORIZATION.get()
            if authz is not None:
                try:
                    authz.check("tools/call", inner)
                except Forbidden as exc:
                    raise _forbidden_inside(exc, sctx, inner["name"]) from None
            result = top._call_tool(sctx, inner)
            return result if type(result) is dict else await result
        except (MissingRequiredClientCapability, TaskFailed, URLElicitationRequired, CallRefused):
            raise  # (protocol signals: the tool running this one answers them as it answers its own)
        except MCPError as exc:  # the refusal of the call (unknown, hidden, synthetic, a scope): as when direct
            raise CallRefused(exc) from None

    def scope_rule(self, rule: Callable[[str, Mapping[str, Any]], Iterable[str]]) -> ScopeRuleFn:
        """A scope rule of your own (``(method, params) -> scopes``, naming the tools as called directly) that
        also asks ``rule`` about the tool a ``call_tool`` call names (or a call of a tool derived from it), for
        :func:`mcpkit.auth.protect`: its early look at an HTTP POST then answers 403 with the step-up challenge
        for ``call_tool(purge)`` exactly as for ``purge`` called directly. (Unwrapped, ``rule`` is asked about
        the inner tool by the dispatcher only: the refusal is JSON-RPC -32003, since ``protect`` runs before any
        server and knows nothing of ``call_tool``.) It asks this app about the call: wrap the rule of the app
        you serve (``protect(create_app(app), ...)`` does this for you)."""
        asked_too = self.app.asked_too

        def wrapped(method: str, params: Mapping[str, Any]) -> list[str]:
            needed = list(dict.fromkeys(rule(method, params)))
            for inner in asked_too(method, params):
                needed.extend(s for s in rule(method, inner) if s not in needed)
            return needed

        return wrapped

    def inner_params(self, params: Mapping[str, Any]) -> JSONDict | None:
        """The ``tools/call`` params of the tool a call of the caller tool (or of a tool derived from it) names
        (None: ``params`` call another tool, or name no tool this search may call)."""
        inner = self.app.asked_too("tools/call", params)
        return inner[0] if inner else None


def _forbidden_inside(exc: Forbidden, sctx: Any, called: str) -> Forbidden:
    """The refusal of the inner call ``called`` that a running tool made (``forward()`` of a tool derived with
    ``fn=``, code calling the caller tool): nothing could know that tool before this one ran, so no HTTP 403
    step-up challenge was possible; the error says which tool was refused, why, and how to get the challenge."""
    requested = (sctx.rc.params or {}).get("name")
    who = repr(requested) if type(requested) is str else "the tool"
    data = exc.data
    scopes = data.get("scopes") if isinstance(data, dict) else None
    if isinstance(scopes, list) and scopes:
        why = f"which needs scope {' '.join(map(str, scopes))}: obtain a token that grants it and retry"
    else:
        why = f"refused: {exc.message}"
    return Forbidden(
        f"{who} called {called!r} while it ran, {why}. What a tool derived with fn= calls is known only while it "
        f"runs, so the server could not answer HTTP 403 with the step-up challenge first; call {called!r} directly, "
        "or through the caller tool, for it",
        {**data, "tool": called} if isinstance(data, dict) else data,
    )


class _Served:
    """The tools of a mounted search's catalog as ``top`` (the app serving the request) serves them through
    ``mounts`` to the request's caller."""

    __slots__ = ("_mounts", "_sctx", "_top")

    def __init__(self, top: Any, mounts: tuple[Mount, ...], sctx: Any) -> None:
        self._top = top
        self._mounts = mounts
        self._sctx = sctx

    def tool(self, tool: Tool) -> Tool:
        """``top``'s entry for ``tool`` (the search's own tool: found, so shown)."""
        name = tool.name
        for mount in reversed(self._mounts):
            name = prefixed_name(mount.prefix, name)
        served: Tool = self._top._tools[name]
        return served

    def copies(self, synthetic: frozenset[str]) -> tuple[Tool, ...]:
        """The search's tools ``top`` serves through the mounts (but the ``synthetic`` ones), in its order: for an
        import, the copies taken then."""
        out: list[Tool] = []
        for entry in list(self._top._tools.values()):  # (a copy in one step: the loop may register meanwhile)
            for mount in self._mounts:
                entry = entry.inner if isinstance(entry, MountedTool) and entry.mount is mount else None
            if entry is not None and entry.name not in synthetic:
                out.append(entry)
        return tuple(out)

    def shown(self, tool: Tool) -> bool:
        """Whether ``top`` serves ``tool``'s name through the mounts (not one of its own that took the name; for
        an import, maybe the copy taken then) and the caller may see it."""
        name = tool.name
        for mount in reversed(self._mounts):
            name = prefixed_name(mount.prefix, name)
        served = entry = self._top._tools.get(name)
        for mount in self._mounts:
            entry = entry.inner if isinstance(entry, MountedTool) and entry.mount is mount else None
        return entry is not None and bool(self._top._visible("tools", name, served, self._sctx))


def _search_tool(search: ToolSearch) -> Tool:
    limit = {
        "type": "integer",
        "minimum": 1,
        "maximum": search.max_results,
        "description": f"How many tools to return at most (default and most: {search.max_results}).",
    }
    how = "all of its words" if search.keyword else "its words, best match first"
    return Tool.from_schema(
        search.search_name,
        {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_QUERY_CHARS,
                    "description": "Words describing what you want to do.",
                },
                "limit": limit,
            },
            "required": ["query"],
        },
        search.search,
        output_schema={
            "type": "object",
            "properties": {"tools": {"type": "array", "items": {"type": "object"}}},
            "required": ["tools"],
        },
        description=(
            "Search this server's tools by name, description and parameters; answers the definitions of the tools "
            f"that match {how}. Call one with {search.call_name} (or by its name)."
        ),
        annotations={"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
        thread=True,  # (building the index of a large catalog takes a while: never on the event loop)
        validate_output=False,
    )


class Searching:
    """The tool-search API of :class:`~mcpkit.server.app.MCPKit` (a base class of it)."""

    _tool_search: ToolSearch | None = None
    _routing: CallRouting | None = None
    if TYPE_CHECKING:
        name: str
        _tools: dict[str, Tool]
        _mounted_in: list[Any]
        _registries: dict[str, Mapping[str, Any]]
        _snapshots: dict[str, Snapshot[Any]]
        _list_caches: ListCache
        _visibility: Visibility | None
        handlers_version: int
        _interceptors: Any
        _intercepting: Any

        def add_tool(self, fn: Any, *, replace: bool = False, **options: Any) -> Tool:
            """:meth:`MCPKit.add_tool <mcpkit.server.app.MCPKit.add_tool>`."""
            ...

        def _changed(self, kind: str) -> None: ...

    def asked_too(self, method: str, params: Mapping[str, Any]) -> tuple[JSONDict, ...]:
        """What the authorization is asked about too for a request (:class:`mcpkit._asgi.AsksAuthorization`): a
        call of a caller tool (this app's ``call_tool``, a mounted app's ``<prefix>_call_tool``, or a tool derived
        from one that only maps its arguments) is the call of the tool it names, as this app serves it; so
        :func:`mcpkit.auth.protect`'s early look at a POST asks its scope rule about that call as well (HTTP 403
        with the step-up challenge, as for a direct call), and :attr:`scope_rule` asks for its scopes."""
        if self._routing is None or method != "tools/call":
            return ()
        routed = caller_route(self, params, True)
        if routed is None:
            return ()
        try:
            return (routed_params(self, *routed, params),)
        except MCPError:  # (refused before anything runs: nothing to ask about)
            return ()

    @property
    def asks_too(self) -> bool:
        """Whether :meth:`asked_too` may name a call: this app serves a caller tool (its own or a mounted app's).
        Until then the HTTP endpoint skips the check of the inner tool's headers (it reads this again when
        ``handlers_version`` changes)."""
        return self._routing is not None

    def _route_calls(self) -> None:
        """Route the calls of caller tools this app serves (its own, or a mounted app's), once."""
        if self._routing is None:
            self._routing = CallRouting(self)
            self._interceptors.add(self._routing, ("tools/call",), outermost=True)
            self._intercepting = self._interceptors
            self.handlers_version += 1  # (the transports read asks_too again)
        if self._registries["tools"] is self._tools:  # (a mounted app with tool search: list what it lists)
            self._list_tools_of(_MountedListed(self._tools))

    def _list_tools_of(self, listed: Mapping[str, Tool]) -> None:
        """Make ``tools/list`` show ``listed`` (a view of the registry)."""
        self._registries["tools"] = listed
        self._snapshots["tools"].invalidate()
        self._snapshots["tools"] = Snapshot(listed, self._list_caches, key=_name)
        if self._visibility is not None:
            self._visibility.invalidate(("tools",))

    @property
    def tool_search(self) -> ToolSearch | None:
        """The app's tool search (None until :meth:`add_tool_search`)."""
        return self._tool_search

    def add_tool_search(
        self,
        strategy: Literal["bm25", "keyword"] = "bm25",
        *,
        max_results: int = 10,
        always_visible: Iterable[str] = (),
        search_tool_name: str = "search_tools",
        call_tool_name: str = "call_tool",
        tags: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
    ) -> ToolSearch:
        """List a search tool and a caller tool instead of every tool (see :mod:`mcpkit.server.tool_search`).

        Args:
            strategy: ``"bm25"`` (ranked by relevance) or ``"keyword"`` (every word of the query must appear,
                case-insensitive; registration order).
            max_results: the most tools one search answers (its default ``limit``; at most 100).
            always_visible: names of tools listed as well (those registered, now or later). A tool whose
                definition declares ``x-mcp-header`` parameters is listed too without being named here (clients
                learn the headers it needs only from the list).
            search_tool_name, call_tool_name: the two tools' names.
            tags, scopes: labels of the two tools (visibility, OAuth scopes), as for ``add_tool``; a call through
                ``call_tool`` needs the inner tool's scopes too.

        Connected clients get ``tools/list_changed``. Calling it twice is a ``ValueError``.
        """
        if self._tool_search is not None:
            raise ValueError("this app has tool search already")
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
        if type(max_results) is not int or not 1 <= max_results <= MAX_RESULTS:
            raise ValueError(f"max_results must be an integer from 1 to {MAX_RESULTS}")
        if search_tool_name == call_tool_name:
            raise ValueError("the search tool and the caller tool need different names")
        pinned = tuple(dict.fromkeys(n for n in always_visible if n not in (search_tool_name, call_tool_name)))
        search = ToolSearch(self, strategy, max_results, search_tool_name, call_tool_name, pinned)
        self.add_tool(search.search_tool, tags=tags, scopes=scopes)
        try:
            self.add_tool(search.caller_tool, tags=tags, scopes=scopes)
        except ValueError:
            del self._tools[search_tool_name]
            raise
        self._tool_search = search
        self._list_tools_of(_Listed(self._tools, (search_tool_name, call_tool_name, *pinned)))
        self._route_calls()
        self._changed("tools")  # (the apps it is mounted into route its calls from now on: compose.refresh)
        return search


def _name(tool: Tool) -> str:
    return tool.name


__all__ = ["MAX_QUERY_CHARS", "MAX_RESULTS", "ExtraTools", "Searching", "ToolSearch"]
