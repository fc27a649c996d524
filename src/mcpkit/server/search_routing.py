"""The caller tool of tool search (``call_tool``) and how a call of it is routed (:mod:`mcpkit.server.tool_search`):
the call becomes ``tools/call`` of the tool it names, as the app serving the request serves it (through the mounts
that serve a mounted app's caller tool, ``ops_call_tool``), so that app's rules, interceptors and telemetry see the
real tool's call. :class:`CallRouting` is the outermost interceptor doing it; :func:`routed_params` the rewrite
(also asked by :meth:`Searching.asked_too <mcpkit.server.tool_search.Searching.asked_too>` for the scopes the inner
tool needs, and by the caller tool's own function when it runs without the rewrite)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..protocol.errors import InvalidParams, UnknownTool
from ..protocol.jsonrpc import JSONDict
from .compose import Mount, MountedTool, prefixed_name
from .interceptors import Call, CallNext
from .request_context import CURRENT_AUTHORIZATION
from .tools import SchemaTool, Tool
from .transform import TransformedTool

__all__ = ["CallRouting", "CallerTool", "RoutedSearch", "caller_route", "mounts_serving", "routed_params"]


class RoutedSearch(Protocol):
    """What the routing needs of a tool search (:class:`~mcpkit.server.tool_search.ToolSearch`)."""

    search_name: str
    call_name: str
    synthetic: frozenset[str]

    def serves_extra(self, name: str) -> bool:
        """Whether ``call_tool`` of ``name``, not a tool of the app's, is the app's ``tools/call`` of it."""
        ...

    async def call(self, arguments: JSONDict, ctx: Any) -> Any:
        """The caller tool's own function."""
        ...


def _path(tool: Tool | None, target: Tool) -> tuple[Mount, ...] | None:
    """The mounts through which ``tool`` (an app's entry) runs ``target`` (None: it does not run it)."""
    mounts: list[Mount] = []
    while tool is not None and tool is not target:
        if isinstance(tool, MountedTool):
            mounts.append(tool.mount)
            tool = tool.inner
        else:
            tool = tool.original if isinstance(tool, TransformedTool) else None
    return None if tool is None else tuple(mounts)


def mounts_serving(top: Any, sctx: Any, target: Tool, refusal: str) -> tuple[Mount, ...]:
    """The mounts through which ``top`` (the app serving the request ``sctx``) serves ``target`` (a tool of an app
    it mounts, or its own: empty): through the tool the request names, else the one way ``top`` serves it;
    ``InvalidParams(refusal)`` when there are several (which prefix the names take is not known)."""
    name = (sctx.rc.params or {}).get("name")
    path = _path(top._tools.get(name) if type(name) is str else None, target)
    if path is not None:
        return path
    paths = {p for tool in list(top._tools.values()) if (p := _path(tool, target)) is not None}
    if len(paths) == 1:
        return paths.pop()
    raise InvalidParams(refusal)


def caller_route(
    app: Any, params: Mapping[str, Any], derived: bool
) -> tuple[RoutedSearch, tuple[Mount, ...], JSONDict] | None:
    """Whether ``params`` (of a ``tools/call`` that ``app`` serves) call a caller tool, through the mounts (and,
    ``derived``, tools derived from it that only map their arguments): its search, the mounts, and the caller
    tool's own arguments, when they name a tool (None: another tool; or its own input check refuses them)."""
    name = params.get("name")
    tool = app._tools.get(name) if type(name) is str else None
    arguments = params.get("arguments")
    mounts: list[Mount] = []
    while tool is not None:
        if isinstance(tool, MountedTool):
            mounts.append(tool.mount)
            tool = tool.inner
        elif isinstance(tool, CallerTool):
            if type(arguments) is not dict or type(arguments.get("name")) is not str:
                return None
            return tool.search, tuple(mounts), arguments
        elif derived and isinstance(tool, TransformedTool):
            arguments = tool.original_arguments(arguments)
            tool = tool.original if arguments is not None else None
        else:
            return None
    return None


def routed_params(
    app: Any, search: RoutedSearch, mounts: tuple[Mount, ...], arguments: JSONDict, params: Mapping[str, Any]
) -> JSONDict:
    """The ``tools/call`` params of the call ``app`` serves for a call of ``search``'s caller tool (reached through
    ``mounts``) with ``arguments``: the tool they name, as ``app`` serves it. Refuses a tool of another catalog
    (a name ``app`` serves not through ``mounts``) as one that does not exist (``UnknownTool``, as its direct call
    is refused when it does not exist), and a synthetic tool (``InvalidParams``). The entry reached is the one
    ``app`` serves: for an import, the copy taken then, even once the imported app replaced or removed it."""
    name: str = arguments["name"]
    tool: Any = app._tools.get(name)
    for mount in mounts:
        tool = tool.inner if isinstance(tool, MountedTool) and tool.mount is mount else None
    if tool is None:
        if not mounts and search.serves_extra(name):  # (a proxy's upstream tool)
            return {**params, "name": name, "arguments": arguments.get("arguments", {})}
        raise UnknownTool(name)
    if tool.name in search.synthetic:
        caller = search.call_name
        for mount in reversed(mounts):
            caller = prefixed_name(mount.prefix, caller)
        raise InvalidParams(f"{caller} cannot call {name!r}: call it directly")
    # the request's other params stay (its _meta: progress token, trace context; a 2025-11-25 task)
    return {**params, "name": name, "arguments": arguments.get("arguments", {})}


class CallRouting:
    """The outermost ``tools/call`` interceptor of an app that serves a caller tool (its own, or a mounted app's):
    the call of a caller tool becomes the call of the tool it names, as this app serves it, so this app's rules
    (scope rule, view, interceptors, middleware, telemetry, tasks) apply to the real tool's call. Only the app
    serving the request routes: in a mounted app's chain the call was routed already (or comes by other means,
    e.g. a derived tool: the caller tool's own function routes it then, see
    :meth:`ToolSearch.call <mcpkit.server.tool_search.ToolSearch.call>`)."""

    __slots__ = ("app",)

    def __init__(self, app: Any) -> None:
        self.app: Any = app

    async def __call__(self, call: Call, call_next: CallNext) -> Any:
        if call.context.server is self.app:
            params = call.params
            routed = caller_route(self.app, params, False)
            if routed is not None:
                inner = routed_params(self.app, *routed, params)
                authz = CURRENT_AUTHORIZATION.get()
                if authz is not None:  # (asked already about the caller tool's call, now about the inner one's)
                    authz.check("tools/call", inner)
                call = call.replace(params=inner)
        return await call_next(call)


class CallerTool(SchemaTool):
    """The ``call_tool`` tool (a call of it needs the inner tool's scopes too: :meth:`Searching.asked_too`)."""

    def __init__(self, search: RoutedSearch) -> None:
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
        self.search: RoutedSearch = search
