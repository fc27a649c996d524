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
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from .._options import named_options
from ..protocol.jsonrpc import JSONDict
from ..protocol.versions import ALL_VERSIONS
from . import compose
from .app_serving import LIST_KEYS, LIST_KINDS, AppServing
from .apps import Apps, check_ui_resource
from .as_tools import AsTools
from .completions import Completer, completer_plan
from .context import Context
from .decorators import bare_or_configured, check_duplicate, checked_resource_uri
from .files import Files
from .lifespan import Lifespan, LifespanHolder
from .lowlevel import ServerRequestContext
from .openapi import OpenAPIImport
from .pagination import DEFAULT_PAGE_SIZE, ListCache, Paginator, Snapshot
from .prompts import Prompt
from .resources import Resource, ResourceTemplate, cache_hints
from .skills import Skills
from .sync_exec import DEFAULT_LEARN_CALLS, DEFAULT_LONG_MS, SyncPolicy, check_sync_limits
from .tool_search import Searching
from .tools import Tool, ToolError, tool_param_headers
from .uri_template import UriTemplate
from .visibility import Rules, Visibility, pop_labels

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..protocol import types as t

logger: logging.Logger = logging.getLogger("mcpkit.server.app")

F = TypeVar("F", bound=Callable[..., Any])
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


class MCPKit(AppServing, compose.Mounting, Rules, Searching, AsTools, Apps, Skills, Files, OpenAPIImport):
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
        self._registries: dict[str, Mapping[str, Any]] = dict(
            zip(LIST_KINDS, (self._tools, self._resources, self._templates, self._prompts), strict=True)
        )
        self._snapshots: dict[str, Snapshot[Any]] = {
            k: Snapshot(r, self._list_caches, key=LIST_KEYS[k]) for k, r in self._registries.items()
        }
        check_sync_limits(sync_long_ms, sync_learn_calls)
        self._sync_limits = (sync_long_ms, sync_learn_calls)
        if isinstance(page_size, int):
            sizes = dict.fromkeys(LIST_KINDS, page_size)
        else:
            unknown = set(page_size) - set(LIST_KINDS)
            if unknown:
                raise ValueError(f"page_size: unknown lists {sorted(unknown)}; use {', '.join(LIST_KINDS)}")
            sizes = {k: page_size.get(k, DEFAULT_PAGE_SIZE) for k in LIST_KINDS}
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

    def component_names(self) -> list[str]:
        """The names of its tools and prompts and the URIs of its resources and templates, each with its kind (the
        app's fingerprint under a shared Redis prefix: :mod:`mcpkit.stores.redis.fingerprint`)."""
        names = [f"tool:{name}" for name in self._tools] + [f"prompt:{name}" for name in self._prompts]
        return names + [f"resource:{uri}" for uri in self._resources] + [f"template:{uri}" for uri in self._templates]

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
        source: Callable[..., Any] | str | bytes | Resource,
        *,
        completions: dict[str, Completer] | None = None,
        size: int | None = None,
        replace: bool = False,
        **options: Any,
    ) -> Resource | ResourceTemplate:
        """Register a resource at any time: ``source`` is a function, fixed text/bytes for a static URI, or a
        :class:`~mcpkit.server.resources.Resource` made already (e.g. a :class:`~mcpkit.server.files.FileResource`).
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
            if isinstance(source, Resource):  # (made already, e.g. a FileResource: add_file, add_directory)
                if options or size is not None or source.uri != uri:
                    raise TypeError(f"resource {uri!r}: a Resource object takes no options and keeps its own URI")
                item = source
            elif callable(source):
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

    # ================================================================== change notifications

    def _tune(self, policy: SyncPolicy | None) -> None:
        if policy is not None:
            policy.configure(*self._sync_limits)


def debug_from_env() -> bool:
    """Whether the environment asks for development mode (``MCPKIT_DEBUG=1``; ``mcpkit run --dev`` sets it)."""
    return os.environ.get("MCPKIT_DEBUG", "").strip().lower() in ("1", "true", "yes", "on")


__all__ = ["Context", "MCPKit", "ToolError"]
