"""The serving side of :class:`~mcpkit.server.app.MCPKit`: ``AppServing``, its base class, answers the MCP methods
from the app's registries (the lists, a page at a time; ``tools/call``, ``resources/read``, ``prompts/get``,
``completion/complete``), tells connected clients when a list changes, and holds the app's lifespan while it serves.

What a user registers, and how (the decorators, ``add_*`` / ``remove_*``, the registries themselves), is
:mod:`mcpkit.server.app`; ``MCPKit.__init__`` makes the state this class works on (declared below for the type
checker).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import operator
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self

from .._aio import running_loop
from ..engine import RequestContext
from ..protocol.errors import (
    ConnectionClosed,
    InternalError,
    InvalidParams,
    MCPError,
    ResourceNotFound,
    UnknownPrompt,
    UnknownTool,
)
from ..protocol.jsonrpc import JSONDict
from ..protocol.versions import Features
from . import compose
from .completions import complete
from .context import Context
from .lowlevel import InputRequired, Server, ServerRequestContext, ServerSession
from .pagination import list_result
from .resources import Resource, ResourceTemplate
from .tools import ToolError, internal_error_message, session_ended
from .visibility import everything

if TYPE_CHECKING:
    from .lifespan import LifespanHolder
    from .pagination import ListCache, Paginator, Snapshot
    from .prompts import Prompt
    from .tool_search import ToolSearch
    from .tools import Tool
    from .visibility import Visibility

logger: logging.Logger = logging.getLogger("mcpkit.server.app")  # (the app's one logger, as before the split)

#: the lists an app serves, by the name :attr:`MCPKit.page_sizes` and the snapshots use
LIST_KINDS: tuple[str, ...] = ("tools", "resources", "resource_templates", "prompts")


class AppServing(Server):
    """What an :class:`~mcpkit.server.app.MCPKit` does while it serves (a base class of it; see the module
    docstring): answering from its registries, announcing their changes, holding its lifespan."""

    handlers_version: int

    if TYPE_CHECKING:  # made by MCPKit.__init__
        debug: bool
        page_sizes: dict[str, int]
        _tools: dict[str, Tool]
        _resources: dict[str, Resource]
        _templates: dict[str, ResourceTemplate]
        _prompts: dict[str, Prompt]
        _list_caches: ListCache
        _registries: dict[str, Mapping[str, Any]]
        _snapshots: dict[str, Snapshot[Any]]
        _paginator: Paginator
        _list_cache: JSONDict
        _private_list_cache: JSONDict
        _lifespan: LifespanHolder
        _pending_changes: dict[str, asyncio.Task[None]]
        _serving_loop: asyncio.AbstractEventLoop | None
        _background: set[asyncio.Task[None]]
        _mounted_in: list[tuple[Any, compose.Mount]]
        _visibility: Visibility | None
        _tool_search: ToolSearch | None

        def _visible(self, kind: str, key: str, item: Any, ctx: Any) -> bool: ...

    # ================================================================== answering from the registries

    def _list_page(
        self, kind: str, field: str, key: Callable[[Any], str], ctx: ServerRequestContext, params: JSONDict
    ) -> JSONDict:
        """The page of list ``kind`` (a key of :attr:`page_sizes`) that ``params`` asks for, its items under
        ``field``: the window from the list's snapshot, its text per revision, the next cursor."""
        snap, name, cache, visibility = self._snapshots[kind], kind, self._list_cache, self._visibility
        if visibility is not None:  # the caller's view: its own snapshot and cursors that name it (visibility.py)
            snap, name = visibility.view(kind, self._registries[kind], ctx.principal, self._list_caches, snap)
            cache = self._private_list_cache if visibility.per_principal else cache
        start, end, cursor = snap.window(self._paginator, name, params, self.page_sizes[kind], key)
        return list_result(field, snap.page_text(ctx.features, start, end), cursor, cache)

    def _list_tools(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return self._list_page("tools", "tools", _name, ctx, params)

    def _call_tool(
        self, ctx: ServerRequestContext, params: JSONDict, served: str | None = None
    ) -> JSONDict | Coroutine[Any, Any, JSONDict]:
        # Checks raise when called (the dispatcher treats it like a raise on await); an inline result comes back itself.
        # served: the tool's name where the client called it (a parent's, for a tool of a mounted server of it)
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("tools/call: name must be a string")
        tool = self._tools.get(name)
        if tool is None or (self._visibility is not None and not self._visible("tools", name, tool, ctx)):
            raise UnknownTool(name)  # (a hidden tool does not exist)
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("tools/call: arguments must be an object")
        # a Context is built only for a tool that takes one (nothing else sees it)
        context = Context(self, ctx) if tool.info.context_param is not None else None
        result = tool.call(arguments, context, ctx.features, served)
        if type(result) is not dict and not tool.info.is_async:
            # a sync tool on a worker thread: its add_tool() reaches the serving loop through this
            self._serving_loop = running_loop()
        return result

    def _list_resources(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return self._list_page("resources", "resources", _uri, ctx, params)

    def _list_templates(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return self._list_page("resource_templates", "resourceTemplates", _template_uri, ctx, params)

    async def _read_resource(
        self, ctx: ServerRequestContext, params: JSONDict, first: ResourceTemplate | None = None
    ) -> JSONDict:
        # first: the template to try before the others (the one a parent matched to a mounted template of this app)
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParams("resources/read: uri must be a non-empty string")
        item, contents = await self._read(uri, Context(self, ctx), ctx, first)
        result: JSONDict = {"contents": contents}
        result.update(item.cache_hints)  # modern era only: shaping drops them for handshake sessions
        visibility = self._visibility
        if visibility is not None and visibility.per_principal and result.get("cacheScope") == "public":
            result["cacheScope"] = "private"  # (who may read it differs per principal, as the lists do)
        return result

    async def read_resource_contents(self, uri: str, ctx: Context | None = None) -> list[JSONDict]:
        """Read one of this app's resources (what ``resources/read`` answers); ResourceNotFound if none. With
        ``ctx`` (a request being served), only what that request's caller may read is there, as for its own
        ``resources/read``; without it (the app's own code, outside a request), everything."""
        return (await self._read(uri, ctx, ctx.request_context if ctx is not None else None))[1]

    async def _read(
        self,
        uri: str,
        ctx: Context | None,
        caller: ServerRequestContext | None = None,
        first: ResourceTemplate | None = None,
    ) -> tuple[Resource | ResourceTemplate, list[JSONDict]]:
        # caller: the request whose visibility applies (None: the app itself reads, everything is there)
        shown = self._visible if caller is not None else everything
        try:
            static = self._resources.get(uri)
            if static is not None and shown("resources", uri, static, caller):
                return static, await static.read(ctx)
            templates: Iterable[tuple[str, ResourceTemplate]] = self._templates.items()
            if first is not None:
                templates = itertools.chain(((first.uri_template, first),), templates)
            for key, template in templates:
                variables = template.match(uri)
                if variables is not None and shown("resource_templates", key, template, caller):
                    return template, await template.read(uri, variables, ctx)
        except (MCPError, InputRequired):
            raise
        except ToolError as exc:
            raise InternalError(str(exc)) from None
        except Exception as exc:
            raise self._failure(f"resource {uri!r}", exc, caller) from None
        raise ResourceNotFound(uri)

    def _list_prompts(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return self._list_page("prompts", "prompts", _name, ctx, params)

    async def _get_prompt(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("prompts/get: name must be a string")
        prompt = self._prompts.get(name)
        if prompt is None or not self._visible("prompts", name, prompt, ctx):
            raise UnknownPrompt(name)
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise InvalidParams("prompts/get: arguments must be an object")
        try:
            return await prompt.render(arguments, Context(self, ctx), ctx.features)
        except (MCPError, InputRequired):
            raise
        except Exception as exc:
            raise self._failure(f"prompt {name!r}", exc, ctx) from None

    def _failure(self, what: str, exc: Exception, request: ServerRequestContext | None) -> InternalError:
        """The error answer of ``what`` that raised ``exc``: an internal error, logged; or, when ``exc`` is the end
        of the request's own session (it waited on the client), a plain one logged at INFO (nobody may read it)."""
        if isinstance(exc, ConnectionClosed) and request is not None and session_ended(exc, request):
            logger.info("%s stopped: its session ended while it waited on the client (%s)", what, exc)
            return InternalError(f"{what} stopped: the session ended while it waited on the client")
        return InternalError(internal_error_message(what, exc, self.debug))

    async def _complete(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return await complete(self, ctx, params, internal_error_message, compose.mounted_completion)

    # ================================================================== change notifications

    async def notify_resource_updated(self, uri: str) -> None:
        """Tell the subscribers of ``uri`` that it changed, in both eras, on this worker and every other; the
        subscribers of the apps this one is mounted into are told too, under the URI they know it by."""
        await super().notify_resource_updated(uri)
        for parent, mount in list(self._mounted_in):
            await parent.notify_resource_updated(compose.prefixed_uri(mount.prefix, uri))

    def _changed(self, kind: str) -> None:
        """Coalesce list changes made in one loop iteration into one notification per list. Safe to call from
        a sync tool (worker thread): the change is handed to the serving loop."""
        if kind == "tools":
            self.handlers_version += 1  # (tool_param_headers' answers changed: the HTTP endpoint caches them by it)
        names = ("resources", "resource_templates") if kind == "resources" else (kind,)
        for name in names:
            snapshot = self._snapshots.get(name)
            if snapshot is not None:
                snapshot.invalidate()  # the next page rebuilds it (before telling anyone)
        if self._visibility is not None:
            self._visibility.invalidate(names)
        if kind == "tools" and self._tool_search is not None:
            self._tool_search.catalog_changed()  # (the next search indexes the catalog again)
        for parent, mount in self._mounted_in:  # apps this one is mounted into show the change too
            compose.refresh(parent, mount, kind)
            parent._changed(kind)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            serving = self._serving_loop
            if serving is not None and serving.is_running():
                serving.call_soon_threadsafe(self._changed, kind)
            return  # not serving (yet): nobody to tell
        if getattr(loop, "_thread_id", None) not in (None, threading.get_ident()):
            # an inline sync function that runs while the loop is handed over to a stand-in thread (see
            # loop_handoff): the loop is not this thread's to touch until it is taken back
            loop.call_soon_threadsafe(self._changed, kind)
            return
        pending = self._pending_changes.get(kind)
        if pending is not None and not pending.done() and pending.get_loop() is loop:
            return  # one notification will cover this change too
        task = loop.create_task(self._flush_change(kind))
        self._pending_changes[kind] = task
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _flush_change(self, kind: str) -> None:
        await asyncio.sleep(0)
        self._pending_changes.pop(kind, None)
        try:
            await self.notify_list_changed(kind)
        except Exception:
            logger.exception("could not send %s list_changed", kind)

    # ================================================================== lifespan and serving

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Self]:
        """Hold the lifespan open (entered by the first user, exited by the last). Transports wrap serving in
        it; use it yourself to serve the app from custom code."""
        self._serving_loop = asyncio.get_running_loop()
        await self._lifespan.enter()
        try:
            yield self
        finally:
            await self._lifespan.exit()

    async def startup(self) -> None:
        """Enter the lifespan (counted: pair every call with :meth:`shutdown`). For transports that do not
        serve through :meth:`serve`, e.g. an ASGI app's ``lifespan.startup``."""
        self._serving_loop = asyncio.get_running_loop()
        await self._lifespan.enter()

    async def shutdown(self) -> None:
        """Leave the lifespan entered by :meth:`startup` (the last one out runs its exit)."""
        await self._lifespan.exit()

    @property
    def lifespan_state(self) -> Any:
        """What the lifespan yielded, while it is held (None otherwise)."""
        return self._lifespan.state

    async def _dispatch_holding(
        self,
        rc: RequestContext,
        session: ServerSession | None,
        feats: Features,
        client_caps: JSONDict,
        client_info: JSONDict | None,
        log_level: str | None,
    ) -> JSONDict:
        """The first request of a transport that did not enter the lifespan (Server.dispatch sends it here): it
        holds the lifespan from then until close_listeners() (server shutdown)."""
        if await self._lifespan.hold_for_requests():
            self._serving_loop = asyncio.get_running_loop()
        result = super().dispatch(rc, session, feats, client_caps, client_info, log_level)
        return result if type(result) is dict else await result  # type: ignore[misc]

    async def close_listeners(self) -> None:
        await super().close_listeners()
        await self._lifespan.release_for_requests()

    async def serve(self, conn: Any, **peer_options: Any) -> None:
        """Serve one connection (memory, stdio, ...) inside the app's lifespan."""
        async with self.running():
            await super().serve(conn, **peer_options)


# the key of an item of each list (its cursor position)
_name, _uri, _template_uri = (operator.attrgetter(key) for key in ("name", "uri", "uri_template"))
LIST_KEYS: dict[str, Callable[[Any], Any]] = dict(
    zip(LIST_KINDS, (_name, _uri, _template_uri, _name), strict=True)
)  # (what items are keyed by)


__all__ = ["LIST_KEYS", "LIST_KINDS", "AppServing"]
