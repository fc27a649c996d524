"""Resources and prompts as tools, for clients that speak tools only.

Many MCP clients (most agent hosts) call tools and nothing else: a server's resources and prompts are invisible
to them. ``app.add_resources_as_tools()`` adds two tools, ``list_resources`` (the resources and resource templates
the caller may see, a page at a time) and ``read_resource(uri)`` (the contents as tool content: text as text
blocks, binary contents as embedded resources); ``app.add_prompts_as_tools()`` adds ``list_prompts`` (the prompts
and their arguments, a page at a time) and ``get_prompt(name, arguments)`` (the rendered messages). The names are
yours to choose, and a ``prefix`` puts them apart (``docs_list_resources``).

Each call of these tools *is* a request of the app serving it, made for the same caller on the same request:

- the authorization installed for the request (:func:`mcpkit.auth.protect`'s, or any) is asked about the inner
  request (``resources/read`` of the URI, ``prompts/get`` of the name, the lists): a scope rule on a resource
  holds through ``read_resource`` exactly as for a direct read, and its refusal is the same JSON-RPC error;
- the inner request runs the app's interceptors and middleware for its own method (a ``ResourceRead`` call an
  interceptor sees, ``on_read_resource`` of a middleware), then the app's handler, so its views (tags,
  ``disable``, the view filter per principal) decide what is listed and what may be read, as they do directly;
- the lists are the app's own pages (its cursors, bound to the caller's view), cut to ``page_size`` entries per
  call: what a listing tool answers is bounded whatever the catalog's size, and live (a resource added later is
  listed at the next call, as ``resources/list`` would).

What the inner request refuses (an unknown URI or prompt, bad arguments, a bad cursor) is the tool's ``isError``
result, for the model to read; a refusal of the authorization is the JSON-RPC error of the direct request (the
client may step up and retry). An input round a resource or prompt asks for (2026-07-28 ``InputRequiredResult``)
is the tool call's own.

An app with these tools may be mounted or imported: the parent serves them under its prefix and they list and
read, with the parent's rules, what the parent serves *through that mount*, by the names and URIs the parent
gives them (so the parent's scope rule and view are asked about the names they know). Served behind a proxy, they
are tools like any other.
"""

from __future__ import annotations

import base64
import binascii
import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from ..protocol.errors import InvalidParams, MCPError, MethodNotFound
from ..protocol.jsonrpc import JSONDict
from .compose import MountedPrompt, MountedResource, MountedTemplate, MountedTool
from .interceptors import Call, call_for, run_chain
from .prefixes import check_prefix, prefixed_name
from .request_context import CURRENT_AUTHORIZATION
from .search_routing import mounts_serving
from .tools import CallRefused, SchemaTool, Tool

if TYPE_CHECKING:
    from .compose import Mount
    from .context import Context
    from .lowlevel import ServerRequestContext

#: entries one call of a listing tool answers by default, and at most (``page_size=``)
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500
#: the app's own list pages one call of a listing tool asks for at most, to fill its page
MAX_INNER_PAGES = 10
#: the longest cursor a listing tool takes, in characters (a longer one is refused as an invalid argument)
MAX_CURSOR_CHARS = 4096
_READ_ONLY = {"readOnlyHint": True, "openWorldHint": False}


# ---------------------------------------------------------------------------------------------- the inner request


async def inner_request(sctx: ServerRequestContext, method: str, params: JSONDict) -> JSONDict:
    """Run ``method`` with ``params`` on the app serving the request ``sctx`` (its handler, inside its
    interceptors for ``method``), for the same caller: the installed authorization is asked about it first. The
    result is the handler's, not shaped for a revision (a tool's content is shaped as the tool result)."""
    top: Any = sctx.server
    authz = CURRENT_AUTHORIZATION.get()
    if authz is not None:
        try:
            authz.check(method, params)
        except MCPError as exc:  # (the direct request's refusal, as the JSON-RPC error: the client may step up)
            raise CallRefused(exc) from None
    feats = sctx.features

    async def handle(call: Call) -> JSONDict:
        pending = top._call_handler(sctx, call.method, call.params, feats)
        result = await pending if inspect.isawaitable(pending) else pending
        if not isinstance(result, dict):  # (a pydantic model: a low-level handler's)
            result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        return result  # type: ignore[no-any-return]

    call = call_for(method, params, sctx)
    intercepting = top._intercepting
    chain = intercepting.chain(method) if intercepting is not None else ()
    if not chain:
        return await handle(call)
    result = await run_chain(chain, call, handle)
    if not isinstance(result, dict):
        raise TypeError(f"an interceptor of {method!r} returned {type(result).__name__}, not a result dict")
    return result


def _refused(exc: MCPError) -> JSONDict:
    """The ``isError`` result of an inner request's refusal (an authorization refusal is raised as the direct
    request's JSON-RPC error instead)."""
    if isinstance(exc, CallRefused):
        raise exc
    return {"content": [{"type": "text", "text": exc.message}], "isError": True}


# ---------------------------------------------------------------------------------------------- mounts


def _served_through(sctx: ServerRequestContext, target: Tool, installer: Any) -> tuple[Mount, ...]:
    """The mounts through which the app serving ``sctx`` serves ``target`` (one of ``installer``'s tools): empty
    when the installer serves the request itself."""
    top: Any = sctx.server
    if top is installer:
        return ()
    return mounts_serving(
        top, sctx, target, f"{target.name!r} is served more than once here: call it by the name the server lists"
    )


def _reaches(entry: Any, mounts: tuple[Mount, ...], wrapper: type[Any]) -> bool:
    """Whether ``entry`` (of the serving app) is a component the installer serves, through ``mounts``."""
    for mount in mounts:
        if not (isinstance(entry, wrapper) and entry.mount is mount):
            return False
        entry = entry.inner
    return entry is not None


def _resource_reached(sctx: ServerRequestContext, uri: str, mounts: tuple[Mount, ...]) -> bool:
    """Whether the component the serving app reads ``uri`` from for this caller (its static resource, else its
    first template that matches, among those the caller may see) is the installer's, through ``mounts``."""
    top: Any = sctx.server
    static = top._resources.get(uri)
    if static is not None and top._visible("resources", uri, static, sctx):
        return _reaches(static, mounts, MountedResource)
    for key, template in list(top._templates.items()):
        if template.match(uri) is not None and top._visible("resource_templates", key, template, sctx):
            return _reaches(template, mounts, MountedTemplate)
    return False


# ---------------------------------------------------------------------------------------------- paging


def _cursor_in(arguments: JSONDict, lists: int) -> tuple[int, str | None, int]:
    """A listing tool's cursor: the list (of ``lists``), the app's own cursor in it, the entries of that page
    taken."""
    cursor = arguments.get("cursor")
    if cursor is None:
        return 0, None, 0
    try:
        phase, inner, skip = orjson.loads(base64.urlsafe_b64decode(str(cursor).encode()))
        well_formed = type(phase) is int and (inner is None or type(inner) is str) and type(skip) is int
        if well_formed and 0 <= phase < lists and skip >= 0:
            return phase, inner, skip
    except (ValueError, TypeError, binascii.Error, orjson.JSONDecodeError):
        pass
    raise InvalidParams("invalid cursor: pass the nextCursor of the previous call as it is")


def _cursor_out(phase: int, inner: str | None, skip: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([phase, inner, skip])).decode()


async def _page(
    sctx: ServerRequestContext,
    lists: tuple[tuple[str, str], ...],
    arguments: JSONDict,
    page_size: int,
    kept: Any,
) -> JSONDict:
    """One page of a listing tool: the entries of the app's lists ``lists`` (``(method, field)``, walked in
    turn) from the cursor on, ``page_size`` at most, those ``kept(field, entry)`` approves. The app's own pages
    are asked for one after another until ``page_size`` entries are taken or the lists end, at most
    :data:`MAX_INNER_PAGES` of them per call (past it the page holds fewer; ``nextCursor`` says there are more)."""
    phase, inner, skip = _cursor_in(arguments, len(lists))
    out: JSONDict = {field: [] for _, field in lists}
    room = page_size
    for _ in range(MAX_INNER_PAGES):
        method, field = lists[phase]
        try:
            page = await inner_request(sctx, method, {"cursor": inner} if inner is not None else {})
        except MethodNotFound:  # (the app serves no such list: it has none of these)
            page = {}
        # (a page's items are ready JSON texts: read back, the page only, a bounded one)
        items = orjson.loads(orjson.dumps(page.get(field) or []))
        taken = items[skip : skip + room]
        out[field].extend(item for item in taken if kept(field, item))
        room -= len(taken)
        if skip + len(taken) < len(items):  # (the page did not fit)
            out["nextCursor"] = _cursor_out(phase, inner, skip + len(taken))
            return out
        following = page.get("nextCursor")
        if type(following) is str:
            inner, skip = following, 0
        elif phase + 1 < len(lists):
            phase, inner, skip = phase + 1, None, 0
        else:
            return out  # (the end of the last list)
        if room == 0:
            break
    out["nextCursor"] = _cursor_out(phase, inner, skip)
    return out


def _cursor_schema() -> JSONDict:
    return {
        "type": "string",
        "maxLength": MAX_CURSOR_CHARS,
        "description": "The nextCursor of the previous call, for the next page (none: the first page).",
    }


def _listing_output(*fields: str) -> JSONDict:
    properties: JSONDict = {field: {"type": "array", "items": {"type": "object"}} for field in fields}
    properties["nextCursor"] = {"type": "string"}
    return {"type": "object", "properties": properties, "required": list(fields)}


class _InnerTool(SchemaTool):
    """The reading or getting tool (``read_resource``, ``get_prompt``): a call of it is a request of the app
    serving it, which :attr:`MCPKit.scope_rule <mcpkit.server.visibility.Rules.scope_rule>` asks about too."""

    def __init__(self, name: str, input_schema: JSONDict, caller: Any, method: str, **options: Any) -> None:
        super().__init__(name, input_schema, caller, **options)
        self.method: str = method

    def inner_params(self, arguments: Any) -> JSONDict | None:
        """The params of the request a call with ``arguments`` makes (None: arguments it refuses anyway)."""
        if type(arguments) is not dict:
            return None
        if self.method == "resources/read":
            uri = arguments.get("uri")
            return {"uri": uri} if type(uri) is str else None
        name, args = arguments.get("name"), arguments.get("arguments")
        if type(name) is not str:
            return None
        return {"name": name, "arguments": args if type(args) is dict else {}}


# ---------------------------------------------------------------------------------------------- resources


def _as_content(contents: list[JSONDict]) -> list[JSONDict]:
    """Resource contents as tool content: text as text blocks, binary contents as embedded resources."""
    blocks: list[JSONDict] = []
    for item in contents:
        if isinstance(item.get("text"), str):
            blocks.append({"type": "text", "text": item["text"]})
        else:
            blocks.append({"type": "resource", "resource": item})
    return blocks


class _AsToolsPair(ABC):
    """What a listing tool and its reading or getting tool share: the listing tool (a page of the app's ``lists``
    at a time, cut to what the installer serves through the mounts of the call) and the call of the second tool
    (the app's ``method`` request, refused as not there when the serving app reads it from elsewhere). A subclass
    states what differs: the names, the lists, the second tool, what it reaches through a mount and the result."""

    #: the app's lists the listing tool walks in turn: ``(method, field of the entries)``
    lists: ClassVar[tuple[tuple[str, str], ...]]
    _second: _InnerTool  # (the reading or getting tool)

    def __init__(self, app: Any, list_name: str, page_size: int, description: str) -> None:
        self.app: Any = app
        self.page_size: int = page_size
        self.list_tool: Tool = Tool.from_schema(
            list_name,
            {"type": "object", "properties": {"cursor": _cursor_schema()}},
            self.list,
            output_schema=_listing_output(*(field for _, field in self.lists)),
            description=description,
            annotations=_READ_ONLY,
            validate_output=False,
        )

    @abstractmethod
    def _listed_through(self, top: Any, field: str, item: JSONDict, mounts: tuple[Mount, ...]) -> bool:
        """Whether the serving app's entry ``item`` of ``field`` is the installer's, through ``mounts``."""

    @abstractmethod
    def _reached(self, sctx: ServerRequestContext, params: JSONDict, mounts: tuple[Mount, ...]) -> bool:
        """Whether what the inner request ``params`` reads or gets is the installer's, through ``mounts``."""

    @abstractmethod
    def _shaped(self, result: JSONDict) -> JSONDict:
        """The second tool's result, from the inner request's."""

    async def list(self, arguments: JSONDict, ctx: Context) -> JSONDict:
        """The listing tool: a page of the entries of the app's lists the caller may see."""
        sctx = ctx.request_context
        top: Any = sctx.server
        mounts = _served_through(sctx, self.list_tool, self.app)

        def kept(field: str, item: Any) -> bool:
            return not mounts or self._listed_through(top, field, item, mounts)

        try:
            return await _page(sctx, self.lists, arguments, self.page_size, kept)
        except MCPError as exc:
            return _refused(exc)

    async def _call(self, arguments: JSONDict, ctx: Context, not_there: str) -> JSONDict:
        """The second tool: the app's own request, as :meth:`_shaped` answers it (``not_there``: the refusal of
        what the serving app reads or gets from elsewhere)."""
        sctx, tool = ctx.request_context, self._second
        params = tool.inner_params(arguments)
        assert params is not None  # (arguments the tool's input schema checked)
        try:
            mounts = _served_through(sctx, tool, self.app)
            if mounts and not self._reached(sctx, params, mounts):
                raise InvalidParams(not_there)
            result = await inner_request(sctx, tool.method, params)
        except MCPError as exc:
            return _refused(exc)
        return self._shaped(result)


class ResourcesAsTools(_AsToolsPair):
    """The two tools :meth:`AsTools.add_resources_as_tools` installs (``list_tool``, ``read_tool``)."""

    lists: ClassVar[tuple[tuple[str, str], ...]] = (
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    )

    def __init__(self, app: Any, list_name: str, read_name: str, page_size: int) -> None:
        super().__init__(
            app,
            list_name,
            page_size,
            f"List this server's resources (read one with {read_name} by its uri) and resource templates "
            f"(fill in a template's variables to make a uri for {read_name}). At most {page_size} entries "
            "per call: when the answer has a nextCursor, call again with it for more.",
        )
        self._second = _InnerTool(
            read_name,
            {
                "type": "object",
                "properties": {
                    "uri": {
                        "type": "string",
                        "minLength": 1,
                        "description": f"The resource's uri, as {list_name} gave it (or made from a template).",
                    }
                },
                "required": ["uri"],
            },
            self.read,
            "resources/read",
            description=f"Read one of this server's resources by its uri (find them with {list_name}).",
            annotations=_READ_ONLY,
        )
        self.read_tool: Tool = self._second

    async def read(self, arguments: JSONDict, ctx: Context) -> JSONDict:
        """``read_resource``: the contents of ``uri`` as tool content."""
        return await self._call(arguments, ctx, f"Resource not found: {arguments['uri'][:300]}")

    def _listed_through(self, top: Any, field: str, item: JSONDict, mounts: tuple[Mount, ...]) -> bool:
        if field == "resources":
            return _reaches(top._resources.get(item.get("uri")), mounts, MountedResource)
        return _reaches(top._templates.get(item.get("uriTemplate")), mounts, MountedTemplate)

    def _reached(self, sctx: ServerRequestContext, params: JSONDict, mounts: tuple[Mount, ...]) -> bool:
        return _resource_reached(sctx, params["uri"], mounts)

    def _shaped(self, result: JSONDict) -> JSONDict:
        return {"content": _as_content(result.get("contents") or []), "isError": False}


# ---------------------------------------------------------------------------------------------- prompts


class PromptsAsTools(_AsToolsPair):
    """The two tools :meth:`AsTools.add_prompts_as_tools` installs (``list_tool``, ``get_tool``)."""

    lists: ClassVar[tuple[tuple[str, str], ...]] = (("prompts/list", "prompts"),)

    def __init__(self, app: Any, list_name: str, get_name: str, page_size: int) -> None:
        super().__init__(
            app,
            list_name,
            page_size,
            f"List this server's prompts and their arguments (get one with {get_name}). At most {page_size} "
            "per call: when the answer has a nextCursor, call again with it for more.",
        )
        self._second = _InnerTool(
            get_name,
            {
                "type": "object",
                "properties": {
                    "name": {
                        "type": "string",
                        "minLength": 1,
                        "description": f"The prompt's name, as {list_name} gave it.",
                    },
                    "arguments": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "The prompt's arguments, by name (strings).",
                    },
                },
                "required": ["name"],
            },
            self.get,
            "prompts/get",
            output_schema={
                "type": "object",
                "properties": {"description": {"type": "string"}, "messages": {"type": "array"}},
                "required": ["messages"],
            },
            description="Get one of this server's prompts, by its name, with its arguments: its messages.",
            annotations=_READ_ONLY,
            validate_output=False,
        )
        self.get_tool: Tool = self._second

    async def get(self, arguments: JSONDict, ctx: Context) -> JSONDict:
        """``get_prompt``: the prompt's messages (and description)."""
        return await self._call(arguments, ctx, f"Unknown prompt: {arguments['name'][:300]}")

    def _listed_through(self, top: Any, field: str, item: JSONDict, mounts: tuple[Mount, ...]) -> bool:
        return _reaches(top._prompts.get(item.get("name")), mounts, MountedPrompt)

    def _reached(self, sctx: ServerRequestContext, params: JSONDict, mounts: tuple[Mount, ...]) -> bool:
        top: Any = sctx.server
        return _reaches(top._prompts.get(params["name"]), mounts, MountedPrompt)

    def _shaped(self, result: JSONDict) -> JSONDict:
        out: JSONDict = {"messages": result.get("messages") or []}
        if isinstance(result.get("description"), str):
            out["description"] = result["description"]
        return out


# ---------------------------------------------------------------------------------------------- the API


class AsTools:
    """The resources-as-tools and prompts-as-tools API of :class:`~mcpkit.server.app.MCPKit` (a base class)."""

    if TYPE_CHECKING:
        _tools: dict[str, Tool]

        def add_tool(self, fn: Any, *, replace: bool = False, **options: Any) -> Tool:
            """:meth:`MCPKit.add_tool <mcpkit.server.app.MCPKit.add_tool>`."""
            ...

        def remove_tool(self, name: str) -> None:
            """:meth:`MCPKit.remove_tool <mcpkit.server.app.MCPKit.remove_tool>`."""
            ...

    def inner_requests(self, method: str, params: Mapping[str, Any]) -> tuple[tuple[str, JSONDict], ...]:
        """The request of this app a request makes too: a ``tools/call`` of a reading or getting tool (this app's,
        or a mounted one's under its prefix) is the ``resources/read`` or ``prompts/get`` it makes, by the URI or
        name the caller gave, which names them as this app serves them (what :attr:`scope_rule` asks about too,
        so :func:`mcpkit.auth.protect`'s early look answers HTTP 403 with the step-up challenge, as for the
        direct request)."""
        if method != "tools/call":
            return ()
        name = params.get("name")
        tool: Any = self._tools.get(name) if type(name) is str else None
        while isinstance(tool, MountedTool):
            tool = tool.inner
        if not isinstance(tool, _InnerTool):
            return ()
        inner = tool.inner_params(params.get("arguments"))
        return () if inner is None else ((tool.method, inner),)

    def add_resources_as_tools(
        self,
        *,
        list_name: str = "list_resources",
        read_name: str = "read_resource",
        prefix: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        tags: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
    ) -> ResourcesAsTools:
        """Add a listing tool and a reading tool that serve this app's resources to clients that call tools
        only (see :mod:`mcpkit.server.as_tools`).

        Args:
            list_name, read_name: the two tools' names (``prefix``, if given, goes before each: ``docs_`` ...).
            page_size: the most entries one call of the listing tool answers (1 to 500; default 50).
            tags, scopes: labels of the two tools (visibility, OAuth scopes), as for ``add_tool``; a call needs
                the scopes of what it reads or lists too, as the direct request does.

        Returns the installed tools. A name taken already is a ``ValueError`` (nothing is added then).
        """
        names = _names(prefix, list_name, read_name)
        made = ResourcesAsTools(self, *names, _checked_page_size(page_size))
        self._add_pair(made.list_tool, made.read_tool, tags, scopes)
        return made

    def add_prompts_as_tools(
        self,
        *,
        list_name: str = "list_prompts",
        get_name: str = "get_prompt",
        prefix: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
        tags: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
    ) -> PromptsAsTools:
        """Add a listing tool and a getting tool that serve this app's prompts to clients that call tools only
        (see :mod:`mcpkit.server.as_tools`). Arguments as for :meth:`add_resources_as_tools`."""
        names = _names(prefix, list_name, get_name)
        made = PromptsAsTools(self, *names, _checked_page_size(page_size))
        self._add_pair(made.list_tool, made.get_tool, tags, scopes)
        return made

    def _add_pair(self, first: Tool, second: Tool, tags: Iterable[str] | None, scopes: Iterable[str] | None) -> None:
        self.add_tool(first, tags=tags, scopes=scopes)
        try:
            self.add_tool(second, tags=tags, scopes=scopes)
        except ValueError:
            self.remove_tool(first.name)
            raise


def _names(prefix: str | None, first: str, second: str) -> tuple[str, str]:
    if prefix is not None:
        check_prefix(prefix)
    names = prefixed_name(prefix, first), prefixed_name(prefix, second)
    if names[0] == names[1]:
        raise ValueError("the two tools need different names")
    return names


def _checked_page_size(page_size: int) -> int:
    if type(page_size) is not int or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ValueError(f"page_size must be an integer from 1 to {MAX_PAGE_SIZE}")
    return page_size


__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_CURSOR_CHARS",
    "MAX_INNER_PAGES",
    "MAX_PAGE_SIZE",
    "AsTools",
    "PromptsAsTools",
    "ResourcesAsTools",
    "inner_request",
]
