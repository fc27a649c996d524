"""The high-level client: connect to anything, typed calls, auto-pagination, validated tool output, self-healing.

    async with Client("python server.py") as client:           # or a URL, a server object, an mcp.json entry
        tools = await client.list_tools()                       # walks every page (bounded)
        result = await client.call_tool("add", {"a": 1, "b": 2})
        result.data, result.text, result.is_error

Built on :class:`~mcpkit.client.lowlevel.ClientSession`, which negotiates the era (``server/discover`` probe, then
``initialize``) and answers the server's requests (handshake era) or ``InputRequiredResult`` rounds (2026-07-28)
with the same handlers.

Self-healing (HTTP targets only): when the server answers 404 for a stale ``Mcp-Session-Id`` the client opens a
new connection, initializes again once and retries the request -- but only when the request is safe to repeat:
``ping``, the list calls, ``resources/read``, ``prompts/get``, ``completion/complete``, ``server/discover``, and
``tools/call`` for tools annotated ``readOnlyHint`` or ``idempotentHint``. Anything else raises
:class:`SessionExpired` after the client has reconnected, so the *next* call works and the caller decides about
the failed one. Re-connection attempts back off (bounded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from types import EllipsisType
from typing import Any, TypeVar

from ..protocol.errors import (
    CapabilityNotSupported,
    MCPError,
    SessionExpired,
)
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import (
    CompleteResult,
    DiscoverResult,
    GetPromptResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextResourceContents,
    Tool,
)
from ..protocol.versions import LogLevel
from .apps import DEFAULT_MAX_VIEW_BYTES, AppView, read_view
from .changes import MAX_WAITING_CHANGE_BYTES
from .connection import DEFAULT_MAX_LIST_BYTES as DEFAULT_MAX_LIST_BYTES
from .connection import DEFAULT_MAX_URL_ELICITATIONS as DEFAULT_MAX_URL_ELICITATIONS
from .connection import SAFE_METHODS as SAFE_METHODS
from .handlers import (
    LIST_CHANGED,
    ElicitationHandler,
    ElicitationParams,
    LoggingHandler,
    LogMessage,
    SamplingHandler,
    SamplingParams,
    ServerInfo,
    Watch,
)
from .lowlevel import ClientSession, RootsProvider, Subscription
from .pages import walk
from .results import RESULT_TYPE_CACHE_SIZE as RESULT_TYPE_CACHE_SIZE
from .results import (
    ElicitationContentError,
    InputHandlerError,
    InvalidServerResult,
    ModernEraRefused,
    PaginationLimitExceeded,
    ResultType,
    ToolCallError,
    ToolOutputError,
    ToolResult,
    apply_schema_defaults,
    checked,
    checked_items,
    json_text,
)
from .skills import SkillMethods
from .targets import ServerStartError
from .tasks import TaskCancelled, TaskHandle
from .tools import ToolMethods

logger: logging.Logger = logging.getLogger("mcpkit.client")

T = TypeVar("T")

__all__ = [
    "Client",
    "ElicitationContentError",
    "ElicitationHandler",
    "ElicitationParams",
    "LogMessage",
    "InputHandlerError",
    "InvalidServerResult",
    "LoggingHandler",
    "ModernEraRefused",
    "PaginationLimitExceeded",
    "ResultType",
    "SamplingHandler",
    "SamplingParams",
    "ServerInfo",
    "ServerStartError",
    "SessionExpired",
    "TaskCancelled",
    "TaskHandle",
    "ToolCallError",
    "ToolOutputError",
    "ToolResult",
    "Watch",
    "apply_schema_defaults",
]


class Client(SkillMethods, ToolMethods):
    """A high-level MCP client for one server (see the module docstring).

    Args:
        target: a command line / argv list / ``StdioServer`` / ``*.py`` path (stdio), an ``http(s)://`` URL
            (Streamable HTTP, legacy HTTP+SSE fallback), a ``ws://`` URL, an in-process ``Server``/``MCPKit``, an
            ``mcp.json`` entry or path, or an open ``Connection``.
        mode: "auto" (negotiate), "handshake" (``initialize``) or "modern" (2026-07-28).
        protocol_version: pin one revision (implies its era).
        roots: the client's roots (URIs, ``Root`` objects or dicts), or a callable returning them.
        sampling_handler: ``(params) -> CreateMessageResult | dict | str`` (sync or async).
        sampling_tools: the sampling handler understands ``tools``/``toolChoice`` (declares ``sampling.tools``).
        elicitation_handler: ``(params) -> ElicitResult | dict | None`` (a plain dict is accepted content,
            None declines). Schema defaults are filled in and the content is validated before it is sent.
        elicitation_url: declare URL-mode elicitation too (default True). A request refused with -32042 (URL
            elicitation required) then has its elicitations handed to the handler and is retried once.
        url_elicitation_wait: after those URL elicitations were accepted, how long to wait for the server's
            ``notifications/elicitation/complete`` before the retry.
        max_url_elicitations: most URL elicitations one -32042 error may list (default 8); a longer list is refused
            whole, without asking the handler, so a server cannot make it run thousands of times.
        logging_handler: receives each ``notifications/message`` params dict.
        log_level: ask the server for log messages at this level and above.
        on_notification: ``(method, params)`` for every other server notification.
        timeout: default per-request timeout in seconds (None: none). Expiry sends ``notifications/cancelled``.
        connect_timeout: bound on opening the connection and negotiating.
        discover_timeout: with ``mode="auto"``, how long the 2026-07-28 ``server/discover`` probe may take before
            the client falls back to the handshake era (default 5 s).
        experimental: declared as the client's ``capabilities.experimental``.
        validate_output: check ``structuredContent`` against each tool's ``outputSchema``.
        max_pages, max_items: bounds for the auto-paginating list calls (default 10,000 pages and 1,000,000 items:
            with them ``max_list_bytes`` decides, so every list whose items fit in it is walked whole).
        max_input_requests, max_input_reply_size: bounds on one 2026-07-28 input round (the input requests one
            ``InputRequiredResult`` may list, default 32; the bytes of their answers, default 4 MiB).
        max_concurrency: server→client requests (sampling, elicitation, roots, input-round answers, batch items)
            handled at once (default 256).
        max_batch_size: longest JSON-RPC batch accepted from a server (handshake era; default 100).
        max_list_bytes: bound on the memory everything one auto-paginating list call collects may take, estimated
            from its JSON (its size plus the overhead of each parsed list, object and string; default 64 MiB).
        reconnect: re-initialize after a stale-session 404 (HTTP) and retry safe requests.
        max_reconnect_attempts, backoff_initial, backoff_max: bounded exponential backoff of reconnection.
        env, cwd: extra environment / working directory for a stdio server.
        headers: extra HTTP headers (HTTP/SSE/WS targets).
        transport: force "http", "sse" or "ws" for a URL.
        transport_options: passed to the transport constructor.
        cache: the 2026-07-28 caching hints honoured (default on): list pages and reads reused while fresh, per
            ``cacheScope``, dropped on ``list_changed`` (see :mod:`mcpkit.client.cache`); False turns it off, a
            :class:`~mcpkit.client.cache.ResponseCache` sets its bounds or its identity.
        middleware: a chain around every call (see :mod:`mcpkit.client.middleware`: ``Retry``, ``CallLogging``).
        relay_answers: send the sampling and elicitation handlers' answers as they are (checked, but without the
            requested schema's defaults filled in or default fields added): what a proxy does with its own
            client's answers.
        extensions: the extensions this client supports, ``{id: settings}``, declared under
            ``capabilities.extensions`` in both eras (``{UI_EXTENSION: {"mimeTypes": [APP_MIME_TYPE]}}`` for an
            MCP Apps host); :meth:`declare_extension` adds one, :meth:`server_extension` reads the server's.
        tap: ``fn(event)``, shown every JSON-RPC message of the connection, sent and received, synchronously (a
            :class:`~mcpkit.engine.tap.TapEvent`; :class:`~mcpkit.engine.tap.TapRecorder` keeps them bounded); it
            must not block, and what it raises is logged. It stays on across reconnections.
        telemetry: a :class:`mcpkit.telemetry.Telemetry`: an OpenTelemetry span per request sent (its trace context
            in ``_meta``) and per request the server sends (needs ``mcpkit[otel]``).
    """

    async def ping(self, *, timeout: float | None = 10.0) -> float:
        """Ping the server (``server/discover`` in 2026-07-28); returns the round-trip time in seconds."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        await self._call("ping", lambda s: s.ping(timeout=timeout))
        return loop.time() - start

    async def discover(self) -> DiscoverResult:
        """``server/discover`` (2026-07-28): the server's revisions, capabilities and info, which the client knows
        from then on (``server_capabilities``, ``server_supports_extension``)."""
        return await self._call("server/discover", lambda s: s.discover())

    # ------------------------------------------------------------------ pagination

    async def _page(self, method: str, cursor: str | None) -> JSONDict:
        params = {"cursor": cursor} if cursor is not None else None
        cache = self.cache
        if cache is not None and (hit := cache.get(method, params)) is not None:
            return hit
        page = await self._call(method, lambda s: s.request(method, params))
        if cache is not None:
            cache.put(method, params, page)
        return page

    async def _walk(self, method: str, key: str, max_pages: int | None, max_items: int | None) -> list[JSONDict]:
        pages = self.max_pages if max_pages is None else max_pages
        limit = self.max_items if max_items is None else max_items
        return await walk(lambda cursor: self._page(method, cursor), method, key, pages, limit, self.max_list_bytes)

    # ------------------------------------------------------------------ tools (the rest: ToolMethods, client/tools.py)

    async def read_view(self, tool: str | Tool | JSONDict, *, max_bytes: int = DEFAULT_MAX_VIEW_BYTES) -> AppView:
        """The MCP Apps view of ``tool`` (a tool name, its definition, or a ``ui://`` URI), fetched with
        ``resources/read`` and checked (:class:`~mcpkit.client.apps.ViewError` when a host must not render it; see
        :mod:`mcpkit.client.apps`)."""
        return await read_view(self, tool, max_bytes=max_bytes)

    # ------------------------------------------------------------------ resources

    async def list_resources(self, *, max_pages: int | None = None, max_items: int | None = None) -> list[Resource]:
        """Every resource (all pages, bounded by ``max_pages``/``max_items``)."""
        raw = await self._walk("resources/list", "resources", max_pages, max_items)
        return checked_items(Resource, raw, "resources/list", "resources")

    async def list_resources_page(self, cursor: str | None = None) -> tuple[list[Resource], str | None]:
        """One raw page of resources: ``(resources, next_cursor)``."""
        page = await self._page("resources/list", cursor)
        items = checked_items(Resource, page.get("resources") or [], "resources/list", "resources")
        return items, page.get("nextCursor") or None

    async def list_resource_templates(
        self, *, max_pages: int | None = None, max_items: int | None = None
    ) -> list[ResourceTemplate]:
        """Every resource template (all pages, bounded by ``max_pages``/``max_items``)."""
        raw = await self._walk("resources/templates/list", "resourceTemplates", max_pages, max_items)
        return checked_items(ResourceTemplate, raw, "resources/templates/list", "resourceTemplates")

    async def list_resource_templates_page(
        self, cursor: str | None = None
    ) -> tuple[list[ResourceTemplate], str | None]:
        """One raw page of resource templates: ``(templates, next_cursor)``."""
        page = await self._page("resources/templates/list", cursor)
        items = checked_items(
            ResourceTemplate, page.get("resourceTemplates") or [], "resources/templates/list", "resourceTemplates"
        )
        return items, page.get("nextCursor") or None

    async def read_resource(self, uri: str, *, timeout: float | EllipsisType | None = ...) -> ReadResourceResult:
        """``resources/read``: the resource's contents (text and/or blobs)."""

        params = {"uri": uri}
        cache = self.cache
        if cache is not None and (hit := cache.get("resources/read", params)) is not None:
            return checked(ReadResourceResult, hit, "resources/read")

        async def op(s: ClientSession) -> JSONDict:
            return await s.request("resources/read", params, timeout=timeout)

        raw = await self._call("resources/read", op)
        if cache is not None:
            cache.put("resources/read", params, raw)
        return checked(ReadResourceResult, raw, "resources/read")

    async def read_text(self, uri: str) -> str:
        """The text of a resource (its text contents joined); raises for a binary-only resource."""
        result = await self.read_resource(uri)
        texts = [c.text for c in result.contents if isinstance(c, TextResourceContents)]
        if not texts and result.contents:
            raise MCPError(f"{uri} has only binary contents")
        return "".join(texts)

    async def subscribe_resource(self, uri: str) -> None:
        """``resources/subscribe`` (handshake era; see :meth:`watch` for both eras). Subscriptions are renewed
        when the client re-initializes after a lost session."""
        await self._subscribe(uri)
        self._held_subscriptions.add(uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        """``resources/unsubscribe`` (handshake era)."""
        self._subscriptions.discard(uri)
        self._held_subscriptions.discard(uri)
        await self._call("resources/unsubscribe", lambda s: s.unsubscribe_resource(uri))

    def listen(self, **filters: Any) -> contextlib.AbstractAsyncContextManager[Subscription]:
        """``subscriptions/listen`` (2026-07-28): see :meth:`ClientSession.listen`."""
        return self.session.listen(**filters)

    @contextlib.asynccontextmanager
    async def watch(
        self,
        *,
        tools: bool = False,
        prompts: bool = False,
        resources: bool = False,
        resource_uris: Sequence[str] = (),
        maxsize: int = 1024,
        maxbytes: int = MAX_WAITING_CHANGE_BYTES,
    ) -> AsyncIterator[Watch]:
        """Watch list changes and resource updates with one API in both eras.

        2026-07-28: one ``subscriptions/listen`` stream with that filter. Handshake era: ``resources/subscribe``
        for each URI (on exit unsubscribed unless still wanted) and the session's notifications, filtered.

        ``maxsize``: how many distinct changes may wait unread; ``maxbytes``: how many bytes of them (each counted
        as its parameters encoded as JSON: a server may send an update with megabytes of ``_meta``; one larger
        than it still waits alone). Equal ones coalesce (a list's change, an update of one URI: the application
        re-reads once); when distinct ones overflow either bound, the watch ends with
        :class:`~mcpkit.client.changes.WatchFellBehind` once what it holds is read (never a silent loss): watch
        again, then list again and read again what it watches.
        """
        uris = tuple(dict.fromkeys(resource_uris))
        if self.modern:
            async with self.session.listen(
                tools=tools,
                prompts=prompts,
                resources=resources,
                resource_uris=uris,
                maxsize=maxsize,
                maxbytes=maxbytes,
            ) as sub:
                yield Watch(1, frozenset(), frozenset(uris), sub)
            return
        methods = frozenset(
            m for kind, m in LIST_CHANGED.items() if {"tools": tools, "prompts": prompts, "resources": resources}[kind]
        )
        w = Watch(maxsize, methods, frozenset(uris), maxbytes=maxbytes)
        self._watches.add(w)
        subscribed: list[str] = []
        try:
            for uri in uris:
                await self._subscribe(uri)
                subscribed.append(uri)
            yield w
        finally:
            self._watches.discard(w)
            for uri in subscribed:
                if not self._still_wanted(uri):
                    with contextlib.suppress(Exception):
                        await self.unsubscribe_resource(uri)

    # ------------------------------------------------------------------ prompts

    async def list_prompts(self, *, max_pages: int | None = None, max_items: int | None = None) -> list[Prompt]:
        """Every prompt (all pages, bounded by ``max_pages``/``max_items``)."""
        raw = await self._walk("prompts/list", "prompts", max_pages, max_items)
        return checked_items(Prompt, raw, "prompts/list", "prompts")

    async def list_prompts_page(self, cursor: str | None = None) -> tuple[list[Prompt], str | None]:
        """One raw page of prompts: ``(prompts, next_cursor)``."""
        page = await self._page("prompts/list", cursor)
        items = checked_items(Prompt, page.get("prompts") or [], "prompts/list", "prompts")
        return items, page.get("nextCursor") or None

    async def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> GetPromptResult:
        """``prompts/get``; argument values that are not strings are sent as JSON text (prompt args are strings)."""
        args = {k: v if isinstance(v, str) else json_text(v) for k, v in (arguments or {}).items()}
        return await self._call("prompts/get", lambda s: s.get_prompt(name, args or None))

    # ------------------------------------------------------------------ completion, logging, roots

    async def complete(
        self,
        ref: JSONDict | str,
        argument: str,
        value: str = "",
        context: Mapping[str, str] | None = None,
    ) -> CompleteResult:
        """``completion/complete``. ``ref`` is a reference dict, a prompt name, or a resource template URI
        (anything containing ``://``)."""
        if isinstance(ref, str):
            ref = {"type": "ref/resource", "uri": ref} if "://" in ref else {"type": "ref/prompt", "name": ref}
        ctx = dict(context) if context else None
        ref_d: JSONDict = ref
        return await self._call("completion/complete", lambda s: s.complete(ref_d, argument, value, ctx))

    async def set_logging_level(self, level: LogLevel) -> None:
        """Ask for log messages at ``level`` and above (``logging/setLevel``, or ``_meta`` in 2026-07-28)."""
        self.log_level: LogLevel | None = level
        await self._call("logging/setLevel", lambda s: s.set_logging_level(level))

    async def set_roots(self, roots: RootsProvider) -> None:
        """Replace the roots; in the handshake era the server gets ``notifications/roots/list_changed``.

        The ``roots`` capability is declared when connecting, so a client created without ``roots=`` cannot
        announce roots later (create it with ``roots=[]``): that raises :class:`CapabilityNotSupported`."""
        if self._roots is None:
            raise CapabilityNotSupported(
                "this client did not declare the roots capability (pass roots=[] to Client to change roots later)"
            )
        self._roots = roots
        await self.session.set_roots(roots)

    @property
    def roots(self) -> RootsProvider | None:
        """The roots this client offers (None when it declared no roots capability)."""
        return self._roots
