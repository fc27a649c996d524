"""Tool search (progressive disclosure): a server with hundreds of tools lists two, and the model finds the rest
on demand.

``app.add_tool_search()`` makes ``tools/list`` show a search tool (``search_tools``), a caller tool
(``call_tool``) and the tools named ``always_visible``. ``search_tools(query, limit?)`` answers the definitions of
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
- an app with tool search is never mounted nor imported (nor gets tool search once mounted): its caller tool would
  run its tools under the parent's name of the caller tool, past the parent's own rules for them. Tool search goes
  on the app served, where ``call_tool`` names each tool as that app serves it.

An app without tool search pays nothing: ``tools/call`` runs as before (the interceptor exists only once
``add_tool_search`` was called). The index (:class:`~mcpkit.server.search_index.SearchIndex`) is built at the
first search and again after the catalog changed (a tool added, removed or replaced, a mount's change); a search
runs on a worker thread, so building the index of a large catalog never holds up the event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

import orjson

from ..protocol.errors import (
    InvalidParams,
    MCPError,
    MissingRequiredClientCapability,
    TaskFailed,
    URLElicitationRequired,
)
from ..protocol.jsonrpc import JSONDict
from .compose import UNMOUNTABLE_SEARCH
from .interceptors import Call, CallNext
from .pagination import Snapshot
from .request_context import CURRENT_AUTHORIZATION
from .search_index import SearchIndex
from .tools import CallRefused, SchemaTool, Tool

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
    """What ``tools/list`` shows under tool search: the registered tools among ``names``, in that order (a live
    view of the registry: a name registered later shows then)."""

    __slots__ = ("_names", "_tools")

    def __init__(self, tools: dict[str, Tool], names: tuple[str, ...]) -> None:
        self._tools = tools
        self._names = names

    def __getitem__(self, key: str) -> Tool:
        if key not in self._names:
            raise KeyError(key)
        return self._tools[key]

    def __iter__(self) -> Iterator[str]:
        return (name for name in self._names if name in self._tools)

    def __len__(self) -> int:
        return sum(1 for name in self._names if name in self._tools)


class ToolSearch:
    """The tool search of one app (what :meth:`Searching.add_tool_search` installs)."""

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

    # ------------------------------------------------------------------ the catalog

    def catalog_changed(self) -> None:
        """Forget the index (the next search builds it again)."""
        with self._lock:
            self._generation += 1
            self._index = None

    def index(self) -> SearchIndex:
        """The index of the catalog as it is now (built here when there is none)."""
        index = self._index
        if index is None:
            generation = self._generation
            registered = list(self.app._tools.items())  # (a copy in one step: the loop may register meanwhile)
            index = SearchIndex((tool for name, tool in registered if name not in self.synthetic), self.keyword)
            with self._lock:
                if self._generation == generation:
                    self._index = index
        return index

    # ------------------------------------------------------------------ the search tool

    def search(self, arguments: JSONDict, ctx: Context) -> JSONDict:
        """``search_tools``: the definitions of the tools matching ``query`` that the caller may see."""
        sctx = ctx.request_context
        limit = arguments.get("limit")
        limit = self.max_results if limit is None else min(int(limit), self.max_results)
        app = self.app
        visible: Callable[[Tool], bool] | None = None
        if app._visibility is not None:
            rules: Visibility = app._visibility
            principal = sctx.principal

            def shown(tool: Tool) -> bool:
                return rules.allows("tools", tool.name, tool, principal)

            visible = shown

        feats = sctx.features
        found = self.index().search(str(arguments["query"]), limit, visible)
        return {"tools": [orjson.loads(tool.listed(feats)) for tool in found]}

    # ------------------------------------------------------------------ the caller tool

    def inner(self, params: JSONDict, sctx: Any) -> JSONDict | None:
        """The ``tools/call`` params of the tool a ``call_tool`` call names (None: the call's arguments are not of
        the caller tool's form; its own input check refuses them). Refuses a call of a synthetic tool, and asks the
        installed authorization (a scope rule of its own) about the inner call."""
        arguments = params.get("arguments")
        if type(arguments) is not dict or type(name := arguments.get("name")) is not str:
            return None
        if name in self.synthetic:
            raise InvalidParams(f"{self.call_name} cannot call {name!r}: call it directly")
        # the request's other params stay (its _meta: progress token, trace context; a 2025-11-25 task)
        inner: JSONDict = {**params, "name": name, "arguments": arguments.get("arguments", {})}
        authz = CURRENT_AUTHORIZATION.get()
        if authz is not None:  # (the app serves its tools under these names: it is never mounted, see compose)
            authz.check("tools/call", inner)
        return inner

    async def intercept(self, call: Call, call_next: CallNext) -> Any:
        """The outermost interceptor of ``tools/call``: a call of the caller tool becomes the inner tool's call."""
        params = call.params
        if params.get("name") == self.call_name:
            inner = self.inner(params, call.context)
            if inner is not None:
                call = call.replace(params=inner)
        return await call_next(call)

    async def call(self, arguments: JSONDict, ctx: Context) -> Any:
        """``call_tool`` reached without the interceptor (the tool run by other means, e.g. ``forward()`` of a tool
        derived from it): the inner call under the same rules, without the chain."""
        sctx = ctx.request_context
        try:
            inner = self.inner({"name": self.call_name, "arguments": arguments}, sctx)
            assert inner is not None  # (its input check passed: name is a string)
            result = self.app._call_tool(sctx, inner)
            return result if type(result) is dict else await result
        except (MissingRequiredClientCapability, TaskFailed, URLElicitationRequired, CallRefused):
            raise  # (protocol signals: the tool running this one answers them as it answers its own)
        except MCPError as exc:  # the refusal of the call (unknown, hidden, synthetic, a scope): as when direct
            raise CallRefused(exc) from None

    def scope_rule(self, rule: Callable[[str, Mapping[str, Any]], Iterable[str]]) -> ScopeRuleFn:
        """A scope rule of your own (``(method, params) -> scopes``, naming the tools as called directly) that
        also asks ``rule`` about the tool a ``call_tool`` call names, for :func:`mcpkit.auth.protect`: its early
        look at an HTTP POST then answers 403 with the step-up challenge for ``call_tool(purge)`` exactly as for
        ``purge`` called directly. (Unwrapped, ``rule`` is asked about the inner tool by the dispatcher only: the
        refusal is JSON-RPC -32003, since ``protect`` runs before any server and knows nothing of ``call_tool``.)"""

        def wrapped(method: str, params: Mapping[str, Any]) -> list[str]:
            needed = list(dict.fromkeys(rule(method, params)))
            inner = self.inner_params(params) if method == "tools/call" else None
            if inner is not None:
                needed.extend(s for s in rule(method, inner) if s not in needed)
            return needed

        return wrapped

    def inner_params(self, params: Mapping[str, Any]) -> JSONDict | None:
        """The ``tools/call`` params of the tool a call of the caller tool names (None: ``params`` call another
        tool, or name no tool, or a synthetic one)."""
        if params.get("name") != self.call_name:
            return None
        arguments = params.get("arguments")
        if type(arguments) is not dict or type(name := arguments.get("name")) is not str or name in self.synthetic:
            return None
        return {**params, "name": name, "arguments": arguments.get("arguments", {})}

    def scopes_for(self, arguments: Any) -> tuple[str, ...]:
        """The scopes a ``call_tool`` call with ``arguments`` needs: those of the tool it names."""
        name = arguments.get("name") if type(arguments) is dict else None
        tool = self.app._tools.get(name) if type(name) is str and name not in self.synthetic else None
        return tool.needed_scopes(arguments.get("arguments")) if tool is not None else ()  # type: ignore[union-attr]


class _CallerTool(SchemaTool):
    """The ``call_tool`` tool: its scopes are the inner tool's too (see :meth:`Tool.needed_scopes`)."""

    def __init__(self, search: ToolSearch) -> None:
        super().__init__(
            search.call_name,
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": f"The tool's name, as {search.search_name} gave it."},
                    "arguments": {"type": "object", "description": "The tool's arguments."},
                },
                "required": ["name"],
            },
            search.call,
            description=f"Call a tool found with {search.search_name}, by its name, with its arguments.",
        )
        self.search = search

    def needed_scopes(self, arguments: Any) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*self.scopes, *self.search.scopes_for(arguments))))


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
    if TYPE_CHECKING:
        name: str
        _tools: dict[str, Tool]
        _mounted_in: list[Any]
        _registries: dict[str, Mapping[str, Any]]
        _snapshots: dict[str, Snapshot[Any]]
        _list_caches: ListCache
        _visibility: Visibility | None
        _interceptors: Any
        _intercepting: Any

        def add_tool(self, fn: Any, *, replace: bool = False, **options: Any) -> Tool: ...

        def _changed(self, kind: str) -> None: ...

    def asked_too(self, method: str, params: Mapping[str, Any]) -> tuple[JSONDict, ...]:
        """What the authorization is asked about too for a request (:class:`mcpkit._asgi.AsksAuthorization`): a
        ``call_tool`` call is the call of the tool it names, so :func:`mcpkit.auth.protect`'s early look at a POST
        asks its scope rule about that call as well (HTTP 403 with the step-up challenge, as for a direct call)."""
        search = self._tool_search
        inner = search.inner_params(params) if search is not None and method == "tools/call" else None
        return () if inner is None else (inner,)

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
            always_visible: names of tools listed as well (those registered, now or later).
            search_tool_name, call_tool_name: the two tools' names.
            tags, scopes: labels of the two tools (visibility, OAuth scopes), as for ``add_tool``; a call through
                ``call_tool`` needs the inner tool's scopes too.

        Connected clients get ``tools/list_changed``. Calling it twice is a ``ValueError``.
        """
        if self._tool_search is not None:
            raise ValueError("this app has tool search already")
        if self._mounted_in:  # (its call_tool would show in the parent, past the parent's rules for its tools)
            raise ValueError(UNMOUNTABLE_SEARCH.format(self.name))
        if strategy not in STRATEGIES:
            raise ValueError(f"strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
        if type(max_results) is not int or not 1 <= max_results <= MAX_RESULTS:
            raise ValueError(f"max_results must be an integer from 1 to {MAX_RESULTS}")
        if search_tool_name == call_tool_name:
            raise ValueError("the search tool and the caller tool need different names")
        pinned = tuple(dict.fromkeys(n for n in always_visible if n not in (search_tool_name, call_tool_name)))
        search = ToolSearch(self, strategy, max_results, search_tool_name, call_tool_name, pinned)
        self.add_tool(_search_tool(search), tags=tags, scopes=scopes)
        try:
            self.add_tool(_CallerTool(search), tags=tags, scopes=scopes)
        except ValueError:
            del self._tools[search_tool_name]
            raise
        self._tool_search = search
        listed = _Listed(self._tools, (search_tool_name, call_tool_name, *pinned))
        self._registries["tools"] = listed
        self._snapshots["tools"].invalidate()
        self._snapshots["tools"] = Snapshot(listed, self._list_caches, key=_name)
        if self._visibility is not None:
            self._visibility.invalidate(("tools",))
        self._interceptors.add(search.intercept, ("tools/call",), outermost=True)
        self._intercepting = self._interceptors
        self._changed("tools")
        return search


def _name(tool: Tool) -> str:
    return tool.name


__all__ = ["MAX_QUERY_CHARS", "MAX_RESULTS", "Searching", "ToolSearch"]
