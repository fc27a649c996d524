"""``MCPKit``: the high-level server. Decorate functions; they become tools, resources and prompts.

    from mcpkit import MCPKit, Context

    app = MCPKit("demo", version="1.0.0")

    @app.tool
    def add(a: int, b: int) -> int:
        '''Add two numbers.'''
        return a + b

    @app.resource("demo://greeting/{name}")
    def greeting(name: str) -> str:
        return f"Hello, {name}!"

    @app.prompt
    def review(code: str) -> str:
        return f"Please review:\\n{code}"

    if __name__ == "__main__":
        app.run()        # stdio; app.run("http", port=8000) for Streamable HTTP

``MCPKit`` is a :class:`~mcpkit.server.lowlevel.Server`, so every transport serves it and both protocol eras
work. Functions may be sync (on a worker thread, or inline once proven fast: see ``sync_exec``) or async.
Everything can be added and removed while serving; clients are told (``notifications/*/list_changed``, in both eras).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
import os
import re
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .._aio import running_loop
from .._options import named_options
from ..engine import RequestContext
from ..protocol.errors import InternalError, InvalidParams, MCPError, ResourceNotFound
from ..protocol.jsonrpc import JSONDict
from ..protocol.versions import ALL_VERSIONS, Features
from . import compose
from .apps import Apps, check_ui_resource
from .completions import Completer, complete, completer_plan
from .context import Context
from .decorators import bare_or_configured, check_duplicate, checked_resource_uri
from .lifespan import Lifespan, LifespanHolder
from .lowlevel import InputRequired, Server, ServerRequestContext, ServerSession
from .openapi import OpenAPIImport
from .pagination import DEFAULT_PAGE_SIZE, ListCache, Paginator, Snapshot, list_result
from .prompts import Prompt
from .resources import Resource, ResourceTemplate, cache_hints
from .skills import Skills
from .sync_exec import DEFAULT_LEARN_CALLS, DEFAULT_LONG_MS, SyncPolicy, check_sync_limits
from .tools import Tool, ToolError, internal_error_message, tool_param_headers
from .uri_template import UriTemplate
from .visibility import Rules, Visibility, everything, pop_labels

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..protocol import types as t

logger: logging.Logger = logging.getLogger("mcpkit.server.app")

F = TypeVar("F", bound=Callable[..., Any])
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
_LIST_KINDS: tuple[str, ...] = ("tools", "resources", "resource_templates", "prompts")


class MCPKit(Server, compose.Mounting, Rules, Apps, Skills, OpenAPIImport):
    """A high-level MCP server.

    Args:
        name, version: the server's name and version (``serverInfo``).
        instructions: optional instructions for clients.
        debug: development mode: an unexpected exception in a tool, resource, prompt or completer shows its
            type and message to the client (in production, the default, the client sees only an error id and
            the details go to the server log). Default: on when the environment has ``MCPKIT_DEBUG=1`` (which
            ``mcpkit run --dev`` sets), else off.
        lifespan: ``async with lifespan(app) as state:`` runs around serving (once while any connection is
            served, shared by every session); ``state`` is :attr:`lifespan_state` (``ctx.lifespan_state``).
            An ``@asynccontextmanager`` function or a plain async generator function.
        page_size: items per page of every list (default 1,000), or a mapping such as ``{"resources": 10}``
            (keys: tools, resources, resource_templates, prompts; missing keys use 1,000).
        list_ttl_ms, list_cache_scope: the 2026-07-28 caching hints of every list result (default 0 ms,
            "private": clients re-fetch and rely on list_changed); "public" only when every caller sees the same
            lists. Per resource: ``ttl_ms=``/``cache_scope=`` on ``@app.resource``.
        cursor_key: HMAC key for list cursors (share it between workers behind one endpoint); by default derived
            from the ``requestState`` key ring (``request_state_keys``, or ``MCPKIT_STATE_KEYS`` through
            ``create_app``), which rotates them too, else random per process.
        include_tags, exclude_tags: show only the tools, resources, templates and prompts that have one of
            ``include_tags``, and none of ``exclude_tags`` (see :mod:`mcpkit.server.visibility`; hidden ones cannot
            be called, read or got either). Tag components with ``tags=`` on their decorators.
        sync_long_ms, sync_learn_calls: how plain ``def`` functions are run (see :mod:`mcpkit.server.sync_exec`):
            after ``sync_learn_calls`` (default 20) fast, non-waiting calls on a worker thread a function runs
            inline on the event loop; an inline call longer than ``sync_long_ms`` (default 2 ms) sends it back
            to the worker thread for good, with a warning.
        title, description, website_url, icons: more of the server's ``Implementation`` info.
        versions, request_state_keys, request_timeout, listen_queue_size, logging_enabled: as for
            :class:`~mcpkit.server.lowlevel.Server`.
    """

    @named_options
    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        instructions: str | None = None,
        debug: bool | None = None,
        lifespan: Lifespan | None = None,
        page_size: int | Mapping[str, int] = DEFAULT_PAGE_SIZE,
        cursor_key: bytes | None = None,
        list_ttl_ms: int = 0,
        list_cache_scope: Literal["private", "public"] = "private",
        sync_long_ms: float = DEFAULT_LONG_MS,
        sync_learn_calls: int = DEFAULT_LEARN_CALLS,
        include_tags: Iterable[str] | None = None,
        exclude_tags: Iterable[str] | None = None,
        title: str | None = None,
        description: str | None = None,
        website_url: str | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        versions: Iterable[str] = ALL_VERSIONS,
        request_state_keys: list[bytes] | None = None,
        request_timeout: float = 300.0,
        listen_queue_size: int = 256,
        logging_enabled: bool = True,
    ) -> None:
        super().__init__(
            name,
            version,
            instructions=instructions,
            title=title,
            description=description,
            website_url=website_url,
            icons=icons,
            versions=versions,
            request_state_keys=request_state_keys,
            request_timeout=request_timeout,
            listen_queue_size=listen_queue_size,
            logging_enabled=logging_enabled,
        )
        self.debug: bool = debug_from_env() if debug is None else debug
        self._tools: dict[str, Tool] = {}
        self._resources: dict[str, Resource] = {}
        self._templates: dict[str, ResourceTemplate] = {}
        self._prompts: dict[str, Prompt] = {}
        self._completers: dict[tuple[str, str, str], Completer] = {}
        # ordered list views for paging, rebuilt once per change (per-page cost independent of registry size); what
        # they and the per-principal views keep is bounded in bytes by one ListCache (pagination.py)
        self._list_caches = ListCache()
        self._registries: dict[str, dict[str, Any]] = dict(
            zip(_LIST_KINDS, (self._tools, self._resources, self._templates, self._prompts), strict=True)
        )
        self._snapshots: dict[str, Snapshot[Any]] = {
            k: Snapshot(r, self._list_caches, key=_LIST_KEYS[k]) for k, r in self._registries.items()
        }
        check_sync_limits(sync_long_ms, sync_learn_calls)
        self._sync_limits = (sync_long_ms, sync_learn_calls)
        if isinstance(page_size, int):
            sizes = dict.fromkeys(_LIST_KINDS, page_size)
        else:
            unknown = set(page_size) - set(_LIST_KINDS)
            if unknown:
                raise ValueError(f"page_size: unknown lists {sorted(unknown)}; use {', '.join(_LIST_KINDS)}")
            sizes = {k: page_size.get(k, DEFAULT_PAGE_SIZE) for k in _LIST_KINDS}
        if any(v < 1 for v in sizes.values()):
            raise ValueError("page_size must be at least 1")
        self.page_sizes = sizes
        # workers that share requestState keys share cursors too (keys derived from that ring, never the same ones)
        self._paginator = Paginator(cursor_key, ring=self.request_state)
        self._list_cache = cache_hints(list_ttl_ms, list_cache_scope)
        self._lifespan = LifespanHolder(self, lifespan)
        self._pending_changes: dict[str, asyncio.Task[None]] = {}
        self._serving_loop: asyncio.AbstractEventLoop | None = None
        # (a lifespan to enter at the first request of a transport that did not: see Server._lazy_lifespan)
        self._lazy_lifespan = self._lifespan if self._lifespan.configured else None
        self._background: set[asyncio.Task[None]] = set()
        # composition (server/compose.py) and visibility (server/visibility.py): none of it costs anything unused
        self._mounts: dict[str | None, compose.Mount] = {}
        self._mounted_in: list[tuple[MCPKit, compose.Mount]] = []
        self._visibility: Visibility | None = None
        if include_tags is not None or exclude_tags is not None:
            self._visibility = Visibility(include_tags, exclude_tags)
        self._private_list_cache = {**self._list_cache, "cacheScope": "private"}

    # ================================================================== tools

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        replace: bool = False,
        title: str | None = None,
        description: str | None = None,
        annotations: JSONDict | t.ToolAnnotations | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        structured_output: bool | None = None,
        thread: bool | None = None,
        tags: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
        enabled: bool = True,
        ui: str | JSONDict | Resource | None = None,
        task: bool | str | None = None,
    ) -> Callable[[F], F]: ...

    def tool(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a function as a tool: ``@app.tool`` or ``@app.tool(name=..., title=..., annotations=...)``.

        The input schema comes from the type hints (descriptions from the docstring's ``Args:`` section or
        ``Annotated[..., Field(description=...)]``), the output schema from the return annotation. A plain
        ``def`` starts on a worker thread so a blocking call cannot stall the server, and runs inline once its
        calls prove fast and non-blocking (see :mod:`mcpkit.server.sync_exec`, the worst case included);
        ``thread=True`` keeps it on the thread always (for functions that can block), ``thread=False`` runs it
        inline always (for functions that never block). ``async def`` functions run on the loop.
        ``tags`` label it for visibility rules, ``scopes`` name the OAuth scopes a call needs (see
        :attr:`scope_rule`), ``enabled=False`` registers it disabled (:meth:`enable` shows it). ``ui`` links it to
        an MCP Apps view (see :mod:`mcpkit.server.apps`): a ``ui://`` URI, or ``{"resourceUri", "visibility"}``.
        ``task=True`` / ``"required"``: it may / must run as a task (the tasks guide; :meth:`enable_tasks`).
        """
        return bare_or_configured("tool", self.add_tool, fn, options, MCPKit.tool)

    def add_tool(self, fn: Callable[..., Any] | Tool, *, replace: bool = False, **options: Any) -> Tool:
        """Register a tool, at any time. Connected clients get ``tools/list_changed``.

        A second tool with the same name is a ``ValueError`` unless ``replace=True`` (then it replaces the first).
        A parameter type that cannot become a JSON Schema is a ``TypeError`` naming the parameter.
        """
        labels = pop_labels(options)  # tags, scopes, enabled (server/visibility.py)
        self._link_view(options)  # ui= (server/apps.py)
        tool = fn if isinstance(fn, Tool) else Tool(fn, **options)
        self._label("tools", tool.name, tool, labels)
        self._tune(tool.sync)
        if not _TOOL_NAME.match(tool.name):
            logger.warning("tool name %r should be 1-128 characters of A-Z a-z 0-9 _ - .", tool.name)
        check_duplicate("tool", tool.name, self._tools, replace, "remove_tool")
        tool.debug = self.debug
        if tool.task_support is not None and self.tasks is None:
            self.enable_tasks()  # (the first tool that may run as a task)
        self._tools[tool.name] = tool
        self._serve_lists(("tools",))
        self._changed("tools")
        return tool

    def remove_tool(self, name: str) -> None:
        """Remove a tool (KeyError if there is none). Connected clients get ``tools/list_changed``."""
        del self._tools[name]
        self._changed("tools")

    def get_tool(self, name: str) -> Tool | None:
        """The registered tool called ``name``, or None."""
        return self._tools.get(name)

    tool_param_headers = tool_param_headers  # (a tool's Mcp-Param-* headers, from its schema: server/tools.py)

    def task_tool(self, name: Any, ctx: ServerRequestContext) -> Tool | None:
        """The tool a ``tools/call`` of ``name`` would run for the caller of ``ctx`` (None: none it may see)."""
        tool = self._tools.get(name) if type(name) is str else None
        return tool if tool is not None and self._visible("tools", name, tool, ctx) else None

    @property
    def tools(self) -> list[Tool]:
        """The registered tools, in registration order."""
        return list(self._tools.values())

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

    def _call_tool(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict | Coroutine[Any, Any, JSONDict]:
        # Checks raise when called (the dispatcher treats it like a raise on await); an inline result comes back itself.
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("tools/call: name must be a string")
        tool = self._tools.get(name)
        if tool is None or (self._visibility is not None and not self._visible("tools", name, tool, ctx)):
            raise InvalidParams(f"Unknown tool: {name!r}", {"name": name})  # (a hidden tool does not exist)
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise InvalidParams("tools/call: arguments must be an object")
        # a Context is built only for a tool that takes one (nothing else sees it)
        context = Context(self, ctx) if tool.info.context_param is not None else None
        result = tool.call(arguments, context, ctx.features)
        if type(result) is not dict and not tool.info.is_async:
            # a sync tool on a worker thread: its add_tool() reaches the serving loop through this
            self._serving_loop = running_loop()
        return result

    # ================================================================== resources

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        replace: bool = False,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: JSONDict | BaseModel | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        completions: dict[str, Completer] | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        thread: bool | None = None,
        tags: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
        enabled: bool = True,
    ) -> Callable[[F], F]:
        """Register a resource: ``@app.resource("file:///readme")``; a URI with ``{...}`` makes a template
        whose variables are the function's arguments (``@app.resource("items://{id}")``). ``thread``: where a
        plain ``def`` runs; ``tags``, ``scopes``, ``enabled``: as for :meth:`tool`. A bare ``@app.resource`` (no
        URI) is a ``TypeError`` saying so."""
        checked_resource_uri(uri)

        def register(fn: F) -> F:
            self.add_resource(
                uri,
                fn,
                name=name,
                replace=replace,
                title=title,
                description=description,
                mime_type=mime_type,
                size=size,
                annotations=annotations,
                icons=icons,
                meta=meta,
                completions=completions,
                ttl_ms=ttl_ms,
                cache_scope=cache_scope,
                thread=thread,
                tags=tags,
                scopes=scopes,
                enabled=enabled,
            )
            return fn

        return register

    def add_resource(
        self,
        uri: str,
        source: Callable[..., Any] | str | bytes,
        *,
        completions: dict[str, Completer] | None = None,
        size: int | None = None,
        replace: bool = False,
        **options: Any,
    ) -> Resource | ResourceTemplate:
        """Register a resource at any time: ``source`` is a function, or fixed text/bytes for a static URI.
        Connected clients get ``resources/list_changed``. A second resource (or template) with the same URI is
        a ``ValueError`` unless ``replace=True``."""
        item: Resource | ResourceTemplate
        labels = pop_labels(check_ui_resource(uri, options))  # (a ui:// resource is an MCP Apps view: its MIME)
        # (two membership tests, not a union of the key sets: registering n resources stays O(n))
        if uri in self._templates:
            check_duplicate("resource", uri, self._templates, replace, "remove_resource")
        check_duplicate("resource", uri, self._resources, replace, "remove_resource")
        if UriTemplate.is_template(uri):
            if not callable(source):
                raise TypeError(f"resource template {uri!r} needs a function")
            item = ResourceTemplate(uri, source, completions=completions, **options)
            self._label("resource_templates", uri, item, labels)
            self._tune(item.sync)
            self._templates[uri] = item
            if item.completions:
                self._enable_completion()
        else:
            if completions:
                raise ValueError(f"static resource {uri!r} has no arguments to complete")
            if callable(source):
                item = Resource(uri, source, size=size, **options)
                self._tune(item.sync)
            else:
                options.pop("thread", None)
                item = Resource(uri, content=source, size=size, **options)
            self._label("resources", uri, item, labels)
            self._resources[uri] = item
        self._serve_lists(("resources",))
        self._changed("resources")
        return item

    def remove_resource(self, uri: str) -> None:
        """Remove a static resource or a template by its URI (KeyError if none)."""
        if uri in self._resources:
            del self._resources[uri]
        else:
            del self._templates[uri]
        self._changed("resources")

    @property
    def resources(self) -> list[Resource]:
        """The registered static resources."""
        return list(self._resources.values())

    @property
    def resource_templates(self) -> list[ResourceTemplate]:
        """The registered resource templates."""
        return list(self._templates.values())

    def _list_resources(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return self._list_page("resources", "resources", _uri, ctx, params)

    def _list_templates(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return self._list_page("resource_templates", "resourceTemplates", _template_uri, ctx, params)

    async def _read_resource(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri:
            raise InvalidParams("resources/read: uri must be a non-empty string")
        item, contents = await self._read(uri, Context(self, ctx), ctx)
        result: JSONDict = {"contents": contents}
        result.update(item.cache_hints)  # modern era only: shaping drops them for handshake sessions
        return result

    async def read_resource_contents(self, uri: str, ctx: Context | None = None) -> list[JSONDict]:
        """Read one of this app's resources (what ``resources/read`` answers); ResourceNotFound if none. With
        ``ctx`` (a request being served), only what that request's caller may read is there, as for its own
        ``resources/read``; without it (the app's own code, outside a request), everything."""
        return (await self._read(uri, ctx, ctx.request_context if ctx is not None else None))[1]

    async def _read(
        self, uri: str, ctx: Context | None, caller: ServerRequestContext | None = None
    ) -> tuple[Resource | ResourceTemplate, list[JSONDict]]:
        # caller: the request whose visibility applies (None: the app itself reads, everything is there)
        shown = self._visible if caller is not None else everything
        try:
            static = self._resources.get(uri)
            if static is not None and shown("resources", uri, static, caller):
                return static, await static.read(ctx)
            for key, template in self._templates.items():
                variables = template.match(uri)
                if variables is not None and shown("resource_templates", key, template, caller):
                    return template, await template.read(uri, variables, ctx)
        except (MCPError, InputRequired):
            raise
        except ToolError as exc:
            raise InternalError(str(exc)) from None
        except Exception as exc:
            raise InternalError(internal_error_message(f"resource {uri!r}", exc, self.debug)) from None
        raise ResourceNotFound(uri)

    # ================================================================== prompts

    @overload
    def prompt(self, fn: F, /) -> F: ...

    @overload
    def prompt(
        self,
        fn: None = None,
        /,
        *,
        name: str | None = None,
        replace: bool = False,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        completions: dict[str, Completer] | None = None,
        thread: bool | None = None,
        tags: Iterable[str] | None = None,
        scopes: Iterable[str] | None = None,
        enabled: bool = True,
    ) -> Callable[[F], F]: ...

    def prompt(self, fn: Any = None, /, **options: Any) -> Any:
        """Register a prompt: ``@app.prompt`` or ``@app.prompt(name=..., completions={"arg": [...]})``.
        ``thread``: where a plain ``def`` runs; ``tags``, ``scopes``, ``enabled``: as for :meth:`tool`."""
        return bare_or_configured("prompt", self.add_prompt, fn, options, MCPKit.prompt)

    def add_prompt(self, fn: Callable[..., Any] | Prompt, *, replace: bool = False, **options: Any) -> Prompt:
        """Register a prompt at any time. Connected clients get ``prompts/list_changed``. A second prompt with
        the same name is a ``ValueError`` unless ``replace=True``."""
        labels = pop_labels(options)
        prompt = fn if isinstance(fn, Prompt) else Prompt(fn, **options)
        self._label("prompts", prompt.name, prompt, labels)
        self._tune(prompt.sync)
        check_duplicate("prompt", prompt.name, self._prompts, replace, "remove_prompt")
        self._prompts[prompt.name] = prompt
        self._serve_lists(("prompts",))
        if prompt.completions:
            self._enable_completion()
        self._changed("prompts")
        return prompt

    def remove_prompt(self, name: str) -> None:
        """Remove a prompt (KeyError if none). Connected clients get ``prompts/list_changed``."""
        del self._prompts[name]
        self._changed("prompts")

    @property
    def prompts(self) -> list[Prompt]:
        """The registered prompts."""
        return list(self._prompts.values())

    def _list_prompts(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return self._list_page("prompts", "prompts", _name, ctx, params)

    async def _get_prompt(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        name = params.get("name")
        if not isinstance(name, str):
            raise InvalidParams("prompts/get: name must be a string")
        prompt = self._prompts.get(name)
        if prompt is None or not self._visible("prompts", name, prompt, ctx):
            raise InvalidParams(f"Unknown prompt: {name!r}", {"name": name})
        arguments = params.get("arguments") or {}
        if not isinstance(arguments, dict):
            raise InvalidParams("prompts/get: arguments must be an object")
        try:
            return await prompt.render(arguments, Context(self, ctx), ctx.features)
        except (MCPError, InputRequired):
            raise
        except Exception as exc:
            raise InternalError(internal_error_message(f"prompt {name!r}", exc, self.debug)) from None

    # ================================================================== completion

    def completion(
        self, *, argument: str, prompt: str | None = None, template: str | None = None, thread: bool | None = None
    ) -> Callable[[F], F]:
        """Register a completer for a prompt argument or a template variable::

            @app.completion(prompt="greet", argument="style")
            def styles(value: str, context: dict[str, str]) -> list[str]: ...

        The function gets what the user typed and (optionally) the other arguments already chosen; it returns the
        values, most relevant first (100 are sent), or a ``Completion`` with its own total. Static choices: give
        ``completions={"arg": [...]}`` to ``@app.prompt``/``@app.resource``; ``Literal``/``Enum`` arguments
        complete automatically. ``thread``: where a plain ``def`` runs, as for :meth:`tool`.
        """
        if (prompt is None) == (template is None):
            raise ValueError("give exactly one of prompt= or template=")
        key = ("ref/prompt", prompt, argument) if prompt is not None else ("ref/resource", template, argument)

        def register(fn: F) -> F:
            self._completers[(key[0], str(key[1]), key[2])] = fn
            self._tune(completer_plan(fn, thread)[0])
            self._enable_completion()
            compose.completions_changed(self, "prompts" if key[0] == "ref/prompt" else "resources")  # type: ignore[arg-type]
            return fn

        return register

    def _enable_completion(self) -> None:
        if not self.has_handler("completion/complete"):
            self.set_handler("completion/complete", self._complete)

    async def _complete(self, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        return await complete(self, ctx, params, internal_error_message, compose.mounted_completion)

    # ================================================================== change notifications

    def _tune(self, policy: SyncPolicy | None) -> None:
        if policy is not None:
            policy.configure(*self._sync_limits)

    async def notify_resource_updated(self, uri: str) -> None:
        """Tell the subscribers of ``uri`` that it changed, in both eras, on this worker and every other; the
        subscribers of the apps this one is mounted into are told too, under the URI they know it by."""
        await super().notify_resource_updated(uri)
        for parent, mount in list(self._mounted_in):
            await parent.notify_resource_updated(compose.prefixed_uri(mount.prefix, uri))

    def _changed(self, kind: str) -> None:
        """Coalesce list changes made in one loop iteration into one notification per list. Safe to call from
        a sync tool (worker thread): the change is handed to the serving loop."""
        names = ("resources", "resource_templates") if kind == "resources" else (kind,)
        for name in names:
            snapshot = self._snapshots.get(name)
            if snapshot is not None:
                snapshot.invalidate()  # the next page rebuilds it (before telling anyone)
        if self._visibility is not None:
            self._visibility.invalidate(names)
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
    async def running(self) -> AsyncIterator[MCPKit]:
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
_LIST_KEYS = dict(zip(_LIST_KINDS, (_name, _uri, _template_uri, _name), strict=True))  # (what items are keyed by)


def debug_from_env() -> bool:
    """Whether the environment asks for development mode (``MCPKIT_DEBUG=1``; ``mcpkit run --dev`` sets it)."""
    return os.environ.get("MCPKIT_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


__all__ = ["Context", "MCPKit", "ToolError"]
