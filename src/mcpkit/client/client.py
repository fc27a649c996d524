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
import functools
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import EllipsisType
from typing import Any, TypeVar

from ..engine import DEFAULT_MAX_BATCH_SIZE, ProgressCallback
from ..protocol.errors import (
    URL_ELICITATION_REQUIRED,
    CapabilityNotSupported,
    ConnectionClosed,
    MCPError,
    RequestTimeout,
    SessionExpired,
)
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import (
    CallToolResult,
    CompleteResult,
    ContentBlock,
    DiscoverResult,
    GetPromptResult,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
)
from ..transports.base import DEFAULT_MAX_MESSAGE_SIZE
from .lowlevel import DEFAULT_MAX_INPUT_REQUESTS, ClientSession, RootsProvider, Subscription
from .targets import OpenedTarget, ServerStartError, Target, open_target, parse_target

logger = logging.getLogger("mcpkit.client")

T = TypeVar("T")

__all__ = [
    "Client",
    "ElicitationContentError",
    "PaginationLimitExceeded",
    "SessionExpired",
    "ToolCallError",
    "ToolOutputError",
    "ToolResult",
    "Watch",
    "apply_schema_defaults",
]

# Requests that may be repeated after a re-initialization without changing anything on the server.
SAFE_METHODS = frozenset(
    (
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    )
)


class ToolCallError(MCPError):
    """``call_tool(..., raise_on_error=True)`` on a result with ``isError: true``; ``.result`` is the ToolResult."""

    def __init__(self, message: str, result: ToolResult) -> None:
        super().__init__(message)
        self.result = result


class ToolOutputError(MCPError):
    """The server's structured tool output does not match the tool's ``outputSchema`` (or is missing)."""

    def __init__(self, message: str, result: ToolResult) -> None:
        super().__init__(message)
        self.result = result


class ElicitationContentError(MCPError):
    """The elicitation handler's content does not match the requested schema (sent to the server as -32603 with
    this message instead of invalid data)."""


DEFAULT_MAX_URL_ELICITATIONS = 8
"""Default of ``Client(max_url_elicitations=...)``: URL elicitations one -32042 error may ask for."""
DEFAULT_MAX_LIST_BYTES = 64 * 1024 * 1024
"""Default of ``Client(max_list_bytes=...)``: estimated memory (bytes) one auto-paginating list call may collect."""


class PaginationLimitExceeded(MCPError):
    """A list call walked more pages or items than allowed; ``.items`` holds what was collected."""

    def __init__(self, message: str, items: list[Any]) -> None:
        super().__init__(message)
        self.items = items


class ToolResult:
    """The outcome of ``tools/call``.

    Attributes:
        content: the content blocks (typed models).
        structured: ``structuredContent`` as sent (validated against the tool's ``outputSchema`` when it has one).
        is_error: the tool reported an error (``isError``): the content then describes it.
        meta: the result's ``_meta``.
        raw: the :class:`~mcpkit.protocol.types.CallToolResult` model.
        validated: True when ``structured`` was checked against an output schema.
    """

    __slots__ = ("content", "is_error", "meta", "raw", "structured", "tool", "typed", "validated")

    def __init__(self, raw: CallToolResult, tool: Tool | None = None, validated: bool = False) -> None:
        self.typed: Any = _UNTYPED
        self.raw = raw
        self.content: list[ContentBlock] = raw.content
        self.structured: Any = raw.structured_content
        self.is_error = raw.is_error
        self.meta = raw.meta
        self.tool = tool
        self.validated = validated

    @property
    def text(self) -> str:
        """The text of every text content block, joined by newlines."""
        return "\n".join(c.text for c in self.content if isinstance(c, TextContent))

    @property
    def data(self) -> Any:
        """The most useful value: the structured output (unwrapped from ``{"result": x}`` when the output
        schema is the wrapper of a non-object return value, whatever that value is: ``-> int``, ``-> list[Model]``
        alike), else the text content; with ``call_tool(..., result_type=T)``, that value validated into ``T``.
        ``structured`` stays raw."""
        if self.typed is not _UNTYPED:
            return self.typed
        s = self.structured
        if s is not None and not (s == {} and self.tool is not None and self.tool.output_schema is None):
            schema = self.tool.output_schema if self.tool is not None else None
            if isinstance(schema, dict) and isinstance(s, dict) and set(s) == {"result"} and _is_wrapped(schema):
                return s["result"]
            return s
        return self.text

    def dump(self) -> JSONDict:
        """The wire form of the result."""
        return self.raw.dump()

    def __repr__(self) -> str:
        return f"ToolResult(is_error={self.is_error}, structured={self.structured!r}, text={self.text[:60]!r})"


# "$defs": ``-> list[Model]`` is wrapped too, with the model's schema in the wrapper's root $defs (so $refs resolve)
_WRAPPER_KEYS = frozenset(
    ("type", "properties", "required", "$schema", "$defs", "title", "description", "additionalProperties")
)


def _is_wrapped(schema: JSONDict) -> bool:
    """Did the server wrap a non-object return value as ``{"result": value}``? Yes when the schema says so with a
    marker (``x-mcpkit-wrap-result``, ``x-fastmcp-wrap-result``), or when it has exactly the wrapper shape that
    mcpkit, the official SDKs and fastmcp generate: one required property ``result`` and nothing else."""
    if any(schema.get(key) for key in ("x-mcpkit-wrap-result", "x-fastmcp-wrap-result")):
        return True
    props = schema.get("properties")
    return (
        set(schema) <= _WRAPPER_KEYS
        and isinstance(props, dict)
        and set(props) == {"result"}
        and schema.get("required") == ["result"]
    )


class SchemaError(ValueError):
    """A schema the server sent is not a valid JSON Schema (it cannot be used to validate anything)."""


_UNTYPED: Any = object()


def _typed(name: str, result: ToolResult, result_type: Any) -> Any:
    """``result.data`` validated into ``result_type`` (pydantic), or :class:`ToolOutputError` saying why not."""
    from pydantic import TypeAdapter, ValidationError

    value = result.data
    if isinstance(value, str) and result.structured is None and result_type is not str:
        try:
            import orjson

            value = orjson.loads(value)  # a server without structured output: its text may still be JSON
        except orjson.JSONDecodeError:
            pass
    try:
        adapter = _adapter(result_type)
    except TypeError:  # unhashable: not cached
        adapter = TypeAdapter(result_type)
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = "/".join(str(p) for p in first["loc"]) or "(root)"
        kind = getattr(result_type, "__name__", repr(result_type))
        raise ToolOutputError(
            f"tool {name!r}: its result does not fit result_type={kind} at {where}: {first['msg']}", result
        ) from None


RESULT_TYPE_CACHE_SIZE = 128
"""How many ``call_tool(..., result_type=T)`` validators (pydantic TypeAdapters) the client keeps (LRU)."""


@functools.lru_cache(maxsize=RESULT_TYPE_CACHE_SIZE)
def _adapter(result_type: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(result_type)


def _validator(schema: JSONDict) -> Any:
    """A compiled JSON Schema validator (jsonschema-rs: 2020-12 unless ``$schema`` names another draft; formats
    checked). ``iter_errors(x)`` yields errors with ``.message`` and ``.instance_path``."""
    try:
        import jsonschema_rs
    except ModuleNotFoundError:  # a dependency of mcpkit: only an environment installed before it was added lacks it
        raise ModuleNotFoundError(
            "validating tool output needs jsonschema-rs, a dependency of mcpkit that this environment lacks: "
            "pip install jsonschema-rs (or reinstall mcpkit, e.g. pip install -e '.[dev]' in a checkout)",
            name="jsonschema_rs",
        ) from None
    try:
        return jsonschema_rs.validator_for(schema, validate_formats=True)
    except (ValueError, TypeError) as exc:
        raise SchemaError(f"not a valid JSON Schema: {exc}") from None


def _first_error(validator: Any, instance: Any) -> Any:
    """The first validation error (the one with the shortest instance path), or None when ``instance`` is valid."""
    if validator.is_valid(instance):  # the common case: one native call, no error objects
        return None
    return min(validator.iter_errors(instance), key=lambda e: len(e.instance_path), default=None)


def apply_schema_defaults(schema: JSONDict | None, content: JSONDict | None) -> JSONDict:
    """Fill the properties ``content`` lacks with the ``default`` values of the elicitation ``schema``."""
    out = dict(content or {})
    props = (schema or {}).get("properties")
    if isinstance(props, dict):
        for key, prop in props.items():
            if key not in out and isinstance(prop, dict) and "default" in prop:
                out[key] = prop["default"]
    return out


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


def _sampling_result(value: Any) -> Any:
    """Let a sampling handler return a plain string (an assistant text message)."""
    if isinstance(value, str):
        return {
            "role": "assistant",
            "content": {"type": "text", "text": value},
            "model": "unknown",
            "stopReason": "endTurn",
        }
    return value


def _elicitation_result(value: Any, params: JSONDict) -> JSONDict:
    """Normalize what an elicitation handler returned and finish it: schema defaults applied, content validated.

    Accepted returns: an ``ElicitResult`` (model or dict with ``action``), a dict of content (means accept),
    ``None`` (means decline).
    """
    from pydantic import BaseModel

    if value is None:
        return {"action": "decline"}
    if isinstance(value, BaseModel):
        value = value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if not isinstance(value, dict):
        raise TypeError(f"elicitation handler returned {type(value).__name__}; expected a dict, ElicitResult or None")
    result: JSONDict = dict(value) if "action" in value else {"action": "accept", "content": dict(value)}
    mode = params.get("mode", "form")
    if result["action"] != "accept":
        result.pop("content", None)
        return result
    if mode == "url":
        result.pop("content", None)  # URL mode: the answer is only the user's consent
        return result
    schema = params.get("requestedSchema")
    given = result.get("content")
    content = apply_schema_defaults(
        schema if isinstance(schema, dict) else None, given if isinstance(given, dict) else None
    )
    if isinstance(schema, dict):
        full = {"type": "object", **schema}
        try:
            e = _first_error(_validator(full), content)
        except SchemaError as exc:
            raise ElicitationContentError(f"the server's requestedSchema is {exc}") from None
        if e is not None:
            where = ".".join(str(p) for p in e.instance_path) or "content"
            raise ElicitationContentError(
                f"elicitation content does not match the requested schema at {where}: {e.message}"
            )
    result["content"] = content
    return result


_LIST_CHANGED = {
    "tools": "notifications/tools/list_changed",
    "prompts": "notifications/prompts/list_changed",
    "resources": "notifications/resources/list_changed",
}


class Watch:
    """Server change notifications, the same way in both eras (see :meth:`Client.watch`).

    ``async for method, params in watch`` or ``await watch.next(timeout)``; ``method`` is one of
    ``notifications/{tools,prompts,resources}/list_changed`` or ``notifications/resources/updated``.
    """

    def __init__(
        self,
        queue: asyncio.Queue[tuple[str, JSONDict]],
        methods: frozenset[str],
        uris: frozenset[str],
        subscription: Subscription | None = None,
    ) -> None:
        self._queue = queue
        self.methods = methods
        self.uris = uris
        self.subscription = subscription

    def offer(self, method: str, params: JSONDict | None) -> None:
        if method in self.methods or (
            method == "notifications/resources/updated" and isinstance(params, dict) and params.get("uri") in self.uris
        ):
            try:
                self._queue.put_nowait((method, params or {}))
            except asyncio.QueueFull:
                logger.warning("watch: slow consumer, dropped %s", method)

    async def next(self, timeout: float | None = None) -> tuple[str, JSONDict]:
        """The next change ``(method, params)``; ``timeout`` in seconds (``TimeoutError`` when it passes)."""
        if self.subscription is not None:
            return await self.subscription.next(timeout)
        return await asyncio.wait_for(self._queue.get(), timeout)

    def __aiter__(self) -> Watch:
        return self

    async def __anext__(self) -> tuple[str, JSONDict]:
        if self.subscription is not None:
            return await self.subscription.__anext__()
        return await self._queue.get()


class Client:
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
        validate_output: check ``structuredContent`` against each tool's ``outputSchema``.
        max_pages, max_items: bounds for the auto-paginating list calls.
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
    """

    def __init__(
        self,
        target: Any,
        *,
        mode: str = "auto",
        protocol_version: str | None = None,
        client_info: JSONDict | None = None,
        roots: RootsProvider | None = None,
        sampling_handler: Callable[[JSONDict], Any] | None = None,
        sampling_tools: bool = False,
        elicitation_handler: Callable[[JSONDict], Any] | None = None,
        elicitation_url: bool = True,
        logging_handler: Callable[[JSONDict], Any] | None = None,
        log_level: str | None = None,
        on_notification: Callable[[str, JSONDict | None], Any] | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 30.0,
        discover_timeout: float = 5.0,
        validate_output: bool = True,
        max_pages: int = 100,
        max_items: int = 100_000,
        max_input_rounds: int = 8,
        max_input_requests: int = DEFAULT_MAX_INPUT_REQUESTS,
        max_input_reply_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_concurrency: int = 256,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        url_elicitation_wait: float = 2.0,
        max_url_elicitations: int = DEFAULT_MAX_URL_ELICITATIONS,
        max_list_bytes: int = DEFAULT_MAX_LIST_BYTES,
        reconnect: bool = True,
        max_reconnect_attempts: int = 3,
        backoff_initial: float = 0.1,
        backoff_max: float = 2.0,
        env: Mapping[str, str | None] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        transport: str | None = None,
        transport_options: Mapping[str, Any] | None = None,
        experimental: JSONDict | None = None,
    ) -> None:
        self.target: Target = parse_target(target, env=env, cwd=cwd, headers=headers, transport=transport)
        # an http(s) URL whose transport was not forced may fall back to legacy HTTP+SSE
        self._legacy_fallback = self.target.kind == "http" and transport is None
        self._session_options: dict[str, Any] = {
            "mode": mode,
            "protocol_version": protocol_version,
            "client_info": client_info,
            "sampling_tools": sampling_tools,
            "elicitation_url": elicitation_url,
            "log_level": None,
            "timeout": timeout,
            "discover_timeout": discover_timeout,
            "max_input_rounds": max_input_rounds,
            "max_input_requests": max_input_requests,
            "max_input_reply_size": max_input_reply_size,
            "max_concurrency": max_concurrency,
            "max_batch_size": max_batch_size,
            "experimental": experimental,
        }
        if mode not in ("auto", "handshake", "modern"):
            raise ValueError("mode must be 'auto', 'handshake' or 'modern'")
        self._roots = roots
        self._sampling_handler = sampling_handler
        self._elicitation_handler = elicitation_handler
        self._logging_handler = logging_handler
        self._on_notification = on_notification
        self.log_level = log_level
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.validate_output = validate_output
        self.max_pages = max_pages
        self.max_items = max_items
        self.reconnect_enabled = reconnect
        self.max_reconnect_attempts = max(1, max_reconnect_attempts)
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.transport_options = dict(transport_options or {})
        self._opened: OpenedTarget | None = None
        self._session: ClientSession | None = None
        self._tools: dict[str, Tool] = {}
        self._tools_complete = False
        self._validators: dict[str, Any] = {}
        self._lock = asyncio.Lock()
        self.reconnects = 0  # how many times the client re-initialized after a stale session
        self.url_elicitation_wait = url_elicitation_wait
        self.max_url_elicitations = max_url_elicitations
        self.max_list_bytes = max_list_bytes
        self._completed_elicitations: set[str] = set()
        self._elicitation_event = asyncio.Event()
        self._watches: set[Watch] = set()
        self._subscriptions: set[str] = set()

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Client:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Open the target and negotiate (called by ``async with``)."""
        if self._session is not None:
            return
        self._session, self._opened = await self._open()

    async def aclose(self) -> None:
        """Close the session and the transport (stdio: close stdin, then signal; HTTP: DELETE the session)."""
        session, opened = self._session, self._opened
        self._session = self._opened = None
        if session is not None:
            with contextlib.suppress(Exception):
                await session.aclose()
        if opened is not None:
            await opened.aclose()

    async def _open(self) -> tuple[ClientSession, OpenedTarget]:
        try:
            return await self._open_once()
        except Exception as exc:
            status = getattr(exc, "status", None)
            if not (self.target.kind == "http" and self._legacy_fallback and status in (400, 404, 405)):
                raise
        # Spec (transports, backwards compatibility): the POST of the first message failed with 400/404/405, so
        # the server may be an old HTTP+SSE one: GET the same URL expecting an SSE stream with an endpoint event.
        logger.info("%s answered HTTP %s: falling back to the legacy HTTP+SSE transport", self.target.url, status)
        self.target.kind = "sse"
        try:
            return await self._open_once()
        except BaseException:
            self.target.kind = "http"
            raise

    async def _open_once(self) -> tuple[ClientSession, OpenedTarget]:
        opened = await open_target(self.target, **self.transport_options)
        session = self._new_session(opened.conn)
        try:
            if self.connect_timeout is not None:
                await asyncio.wait_for(session.__aenter__(), self.connect_timeout)
            else:
                await session.__aenter__()
            if self.log_level is not None:
                await session.set_logging_level(self.log_level)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await session.aclose()
            error = await self._explain_start_failure(opened, exc)
            await opened.aclose()
            if error is not None:
                raise error from exc
            raise
        return session, opened

    async def _explain_start_failure(self, opened: OpenedTarget, exc: BaseException) -> BaseException | None:
        if not isinstance(exc, (ConnectionClosed, TimeoutError, RequestTimeout, OSError)):
            return None
        if opened.stdio is None:
            if opened.target.url is None:
                return None
            if isinstance(exc, (TimeoutError, RequestTimeout)):
                return ServerStartError(f"{opened.target.url} did not answer within {self.connect_timeout}s")
            return ServerStartError(f"cannot connect to {opened.target.url}: {exc}")
        if isinstance(exc, (TimeoutError, RequestTimeout)):
            # (closing the session has already stopped the process: its exit code would be our own signal)
            return ServerStartError(
                f"the server {opened.target.description!r} did not complete initialization within "
                f"{self.connect_timeout}s",
                stderr=opened.stderr,
            )
        if await opened.process_exited(wait=1.0):
            return ServerStartError(
                f"the server {opened.target.description!r} exited before the connection was established",
                stderr=opened.stderr,
                returncode=opened.returncode,
            )
        return ServerStartError(f"lost the connection to {opened.target.description!r}: {exc}", stderr=opened.stderr)

    def _new_session(self, conn: Any) -> ClientSession:
        opts = dict(self._session_options)
        return ClientSession(
            conn,
            roots=self._roots,
            sampling_handler=self._sample if self._sampling_handler is not None else None,
            elicitation_handler=self._elicit if self._elicitation_handler is not None else None,
            logging_handler=self._logging_handler,
            notification_handler=self._notification,
            **opts,
        )

    async def _sample(self, params: JSONDict) -> Any:
        assert self._sampling_handler is not None
        return _sampling_result(await _maybe_await(self._sampling_handler(params)))

    async def _elicit(self, params: JSONDict) -> JSONDict:
        assert self._elicitation_handler is not None
        return _elicitation_result(await _maybe_await(self._elicitation_handler(params)), params)

    async def _notification(self, method: str, params: JSONDict | None) -> None:
        if method == "notifications/elicitation/complete" and params is not None:
            eid = params.get("elicitationId")
            if isinstance(eid, str):
                if len(self._completed_elicitations) > 1024:
                    self._completed_elicitations.clear()
                self._completed_elicitations.add(eid)
                self._elicitation_event.set()
        for watch in list(self._watches):
            watch.offer(method, params)
        if method == "notifications/tools/list_changed":
            self._tools_complete = False
            self._tools.clear()
            self._validators.clear()
        if self._on_notification is not None:
            await _maybe_await(self._on_notification(method, params))

    # ------------------------------------------------------------------ state

    @property
    def session(self) -> ClientSession:
        """The live low-level session (raises when not connected)."""
        if self._session is None:
            raise ConnectionClosed("the client is not connected (use `async with Client(...)`)")
        return self._session

    @property
    def connected(self) -> bool:
        """True between :meth:`connect` and :meth:`aclose`."""
        return self._session is not None

    @property
    def protocol_version(self) -> str | None:
        """The negotiated protocol revision (None before connecting)."""
        return self._session.protocol_version if self._session is not None else None

    @property
    def modern(self) -> bool:
        """True when the connection speaks the stateless 2026-07-28 era, False in a handshake-era session."""
        return self._session is not None and self._session.modern

    @property
    def server_info(self) -> JSONDict | None:
        """The server's ``serverInfo`` (name, version, ...)."""
        return self.session.server_info

    @property
    def server_capabilities(self) -> JSONDict:
        """The capabilities the server declared."""
        return self.session.server_capabilities

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model, if it gave any."""
        return self.session.instructions

    @property
    def stderr(self) -> str:
        """What a stdio server wrote to its stderr lately (empty for other transports)."""
        return self._opened.stderr if self._opened is not None else ""

    # ------------------------------------------------------------------ self-healing

    def _is_stale_session(self, exc: BaseException) -> bool:
        """A 404 for our session id, as the Streamable HTTP client transport reports it."""
        if self.target.kind != "http":
            return False
        return isinstance(exc, SessionExpired) and not exc.reinitialized

    async def _call(self, method: str, op: Callable[[ClientSession], Awaitable[T]], *, safe: bool | None = None) -> T:
        session = self.session
        try:
            return await op(session)
        except Exception as exc:
            if isinstance(exc, MCPError) and exc.code == URL_ELICITATION_REQUIRED and self._handles_url_elicitation:
                if await self._complete_url_elicitations(exc):
                    return await op(self.session)  # one retry: a second -32042 goes to the caller
                raise
            if not (self.reconnect_enabled and self._is_stale_session(exc)):
                raise
            failed = exc
        await self._reinitialize(session)
        if safe is None:
            safe = method in SAFE_METHODS
        if not safe:
            expired = SessionExpired(
                f"the server dropped the session; {method!r} was not retried because it is not safe to repeat "
                "(the client has re-initialized: call again to retry)"
            )
            expired.reinitialized = True
            raise expired from failed
        return await op(self.session)

    async def _reinitialize(self, stale: ClientSession) -> None:
        async with self._lock:
            if self._session is not stale:
                return  # another task already replaced the session
            old_opened = self._opened
            self._session = None
            with contextlib.suppress(Exception):
                await stale.aclose()
            if old_opened is not None:
                with contextlib.suppress(Exception):
                    await old_opened.aclose()
            self._opened = None
            delay = self.backoff_initial
            last: BaseException | None = None
            for attempt in range(self.max_reconnect_attempts):
                if attempt:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.backoff_max)
                try:
                    self._session, self._opened = await self._open()
                    self.reconnects += 1
                    self._tools_complete = False
                    logger.info("re-initialized the session with %s", self.target.description)
                    await self._restore_subscriptions()
                    return
                except (OSError, MCPError, TimeoutError, RequestTimeout) as exc:
                    last = exc
            raise ConnectionClosed(f"could not re-initialize the session with {self.target.description}: {last}")

    async def _restore_subscriptions(self) -> None:
        """A new session knows nothing of the old one's ``resources/subscribe``: subscribe again."""
        session = self._session
        if session is None or session.modern:
            return
        for uri in sorted(self._subscriptions):
            try:
                await session.subscribe_resource(uri)
            except Exception as exc:  # the resource may be gone: keep the rest
                logger.warning("could not re-subscribe to %s after re-initializing: %s", uri, exc)

    # ------------------------------------------------------------------ URL elicitation required (-32042)

    @property
    def _handles_url_elicitation(self) -> bool:
        return self._elicitation_handler is not None and bool(self._session_options["elicitation_url"])

    async def _complete_url_elicitations(self, exc: MCPError) -> bool:
        """Spec 2025-11-25: a -32042 error lists URL elicitations to finish before the request can be retried.

        Each goes to the elicitation handler (``mode: "url"``; return accept once the user is done in the
        browser). When all are accepted, wait (at most ``url_elicitation_wait`` seconds) for the server's
        ``notifications/elicitation/complete`` of each id, then retry the request once. Returns False (the error
        goes to the caller) when one is declined, cancelled or malformed."""
        data = exc.data if isinstance(exc.data, dict) else {}
        items = data.get("elicitations")
        if not isinstance(items, list) or not items:
            return False
        if len(items) > self.max_url_elicitations:
            raise MCPError(
                f"the server asks for {len(items)} URL elicitations in one -32042 error, more than "
                f"max_url_elicitations={self.max_url_elicitations}: none was shown "
                "(raise Client(max_url_elicitations=...) to allow more)",
                code=exc.code,
            ) from exc
        ids: list[str] = []
        for item in items:
            if not isinstance(item, dict) or item.get("mode") != "url" or not isinstance(item.get("url"), str):
                return False
            answer = await self._elicit(item)
            if answer.get("action") != "accept":
                return False
            if isinstance(item.get("elicitationId"), str):
                ids.append(item["elicitationId"])
        if ids and self.url_elicitation_wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._elicitations_completed(ids), self.url_elicitation_wait)
        return True

    async def _elicitations_completed(self, ids: list[str]) -> None:
        while not all(i in self._completed_elicitations for i in ids):
            self._elicitation_event.clear()
            await self._elicitation_event.wait()

    # ------------------------------------------------------------------ generic

    async def request(
        self,
        method: str,
        params: JSONDict | None = None,
        *,
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        reset_timeout_on_progress: bool = False,
    ) -> JSONDict:
        """Any request, raw result (era envelope and ``InputRequiredResult`` rounds handled).

        ``timeout`` is a deadline; ``reset_timeout_on_progress=True`` lets each progress notification restart it,
        never past the hard maximum (600 s by default)."""
        return await self._call(
            method,
            lambda s: s.request(
                method,
                params,
                timeout=timeout,
                on_progress=on_progress,
                reset_timeout_on_progress=reset_timeout_on_progress,
            ),
        )

    async def ping(self, *, timeout: float | None = 10.0) -> float:
        """Ping the server (``server/discover`` in 2026-07-28); returns the round-trip time in seconds."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        await self._call("ping", lambda s: s.ping(timeout=timeout))
        return loop.time() - start

    async def discover(self) -> DiscoverResult:
        """``server/discover`` (2026-07-28): the server's revisions, capabilities and info."""
        return await self._call("server/discover", lambda s: s.discover())

    # ------------------------------------------------------------------ pagination

    async def _page(self, method: str, cursor: str | None) -> JSONDict:
        params = {"cursor": cursor} if cursor is not None else None
        return await self._call(method, lambda s: s.request(method, params))

    async def _walk(self, method: str, key: str, max_pages: int | None, max_items: int | None) -> list[JSONDict]:
        pages = self.max_pages if max_pages is None else max_pages
        limit = self.max_items if max_items is None else max_items
        items: list[JSONDict] = []
        cursor: str | None = None
        seen: set[str] = set()
        size = 0
        for _ in range(pages):
            page = await self._page(method, cursor)
            batch = page.get(key) or []
            if not isinstance(batch, list):
                raise MCPError(f"{method}: {key!r} is not a list")
            size += _parsed_size(batch)
            if size > self.max_list_bytes:
                raise PaginationLimitExceeded(
                    f"{method}: the pages would take more than {self.max_list_bytes} bytes of memory "
                    "(raise Client(max_list_bytes=...) to allow more)",
                    items,
                )
            items.extend(batch)
            if len(items) > limit:
                raise PaginationLimitExceeded(f"{method}: more than {limit} items", items[:limit])
            nxt = page.get("nextCursor")
            if not isinstance(nxt, str) or not nxt:
                return items
            if nxt in seen:
                raise MCPError(f"{method}: the server returned the cursor {nxt!r} twice (pagination loop)")
            seen.add(nxt)
            cursor = nxt
        raise PaginationLimitExceeded(f"{method}: more than {pages} pages", items)

    # ------------------------------------------------------------------ tools

    async def list_tools(self, *, max_pages: int | None = None, max_items: int | None = None) -> list[Tool]:
        """Every tool (all pages, bounded by ``max_pages``/``max_items``); refreshes the output-schema cache."""
        raw = await self._walk("tools/list", "tools", max_pages, max_items)
        tools = [Tool.model_validate(t) for t in raw]
        self._tools = {t.name: t for t in tools}
        self._validators.clear()
        self._tools_complete = True
        return tools

    async def list_tools_page(self, cursor: str | None = None) -> tuple[list[Tool], str | None]:
        """One raw page: ``(tools, next_cursor)``."""
        page = await self._page("tools/list", cursor)
        tools = [Tool.model_validate(t) for t in page.get("tools") or []]
        for t in tools:
            self._tools[t.name] = t
        return tools, page.get("nextCursor") or None

    async def get_tool(self, name: str) -> Tool | None:
        """The tool's definition (from the cache, listing the tools once when unknown)."""
        tool = self._tools.get(name)
        if tool is None and not self._tools_complete:
            await self.list_tools()
            tool = self._tools.get(name)
        return tool

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        meta: JSONDict | None = None,
        result_type: Any = None,
        raise_on_error: bool = False,
        validate: bool | None = None,
        reset_timeout_on_progress: bool = False,
    ) -> ToolResult:
        """Call a tool; returns a :class:`ToolResult` (``content``, ``structured``, ``data``, ``is_error``, ``text``).

        ``result_type``: a type pydantic can validate (a pydantic model, a dataclass, a TypedDict, ``list[Model]``,
        ``int``, ...): ``result.data`` is then the tool's value validated into it (the same unwrapped value
        ``data`` always is), and a value that does not fit raises :class:`ToolOutputError`. Not applied to
        ``isError`` results.

        The structured output is validated against the tool's ``outputSchema`` (``validate=False`` or the client's
        ``validate_output=False`` skips it): a mismatch raises :class:`ToolOutputError`. ``raise_on_error`` turns
        ``isError: true`` into :class:`ToolCallError`. Cancelling the awaiting task sends
        ``notifications/cancelled``; so does a timeout (then :class:`~mcpkit.protocol.errors.RequestTimeout`).
        ``timeout`` is a deadline: progress does not extend it unless ``reset_timeout_on_progress=True`` (then
        never past the hard maximum, 600 s by default).
        """
        check = self.validate_output if validate is None else validate
        tool = self._tools.get(name)
        if tool is None and (check or self.target.is_http) and not self._tools_complete:
            with contextlib.suppress(MCPError):
                tool = await self.get_tool(name)
        safe = bool(tool and tool.annotations and (tool.annotations.read_only_hint or tool.annotations.idempotent_hint))
        args = dict(arguments or {})
        raw = await self._call(
            "tools/call",
            lambda s: s.call_tool(
                name,
                args,
                timeout=timeout,
                on_progress=on_progress,
                meta=meta,
                reset_timeout_on_progress=reset_timeout_on_progress,
            ),
            safe=safe,
        )
        result = ToolResult(raw, tool)
        if check and tool is not None and tool.output_schema is not None and not result.is_error:
            self._check_output(tool, result)
        if result_type is not None and not result.is_error:
            result.typed = _typed(name, result, result_type)
        if raise_on_error and result.is_error:
            raise ToolCallError(f"tool {name!r} failed: {result.text or '(no message)'}", result)
        return result

    def _check_output(self, tool: Tool, result: ToolResult) -> None:
        assert tool.output_schema is not None
        if result.structured is None:
            raise ToolOutputError(
                f"tool {tool.name!r} declares an outputSchema but returned no structuredContent", result
            )
        validator = self._validators.get(tool.name)
        if validator is None:
            try:
                validator = self._validators[tool.name] = _validator(tool.output_schema)
            except SchemaError as exc:
                raise ToolOutputError(
                    f"tool {tool.name!r}: its outputSchema is {exc} (call_tool(..., validate=False) skips the check)",
                    result,
                ) from None
        e = _first_error(validator, result.structured)
        if e is not None:
            where = "/".join(str(p) for p in e.instance_path) or "(root)"
            raise ToolOutputError(
                f"tool {tool.name!r}: structuredContent does not match its outputSchema at {where}: {e.message}",
                result,
            )
        result.validated = True

    # ------------------------------------------------------------------ resources

    async def list_resources(self, *, max_pages: int | None = None, max_items: int | None = None) -> list[Resource]:
        """Every resource (all pages, bounded by ``max_pages``/``max_items``)."""
        raw = await self._walk("resources/list", "resources", max_pages, max_items)
        return [Resource.model_validate(r) for r in raw]

    async def list_resources_page(self, cursor: str | None = None) -> tuple[list[Resource], str | None]:
        """One raw page of resources: ``(resources, next_cursor)``."""
        page = await self._page("resources/list", cursor)
        return [Resource.model_validate(r) for r in page.get("resources") or []], page.get("nextCursor") or None

    async def list_resource_templates(
        self, *, max_pages: int | None = None, max_items: int | None = None
    ) -> list[ResourceTemplate]:
        """Every resource template (all pages, bounded by ``max_pages``/``max_items``)."""
        raw = await self._walk("resources/templates/list", "resourceTemplates", max_pages, max_items)
        return [ResourceTemplate.model_validate(r) for r in raw]

    async def list_resource_templates_page(
        self, cursor: str | None = None
    ) -> tuple[list[ResourceTemplate], str | None]:
        """One raw page of resource templates: ``(templates, next_cursor)``."""
        page = await self._page("resources/templates/list", cursor)
        items = [ResourceTemplate.model_validate(r) for r in page.get("resourceTemplates") or []]
        return items, page.get("nextCursor") or None

    async def read_resource(self, uri: str, *, timeout: float | EllipsisType | None = ...) -> ReadResourceResult:
        """``resources/read``: the resource's contents (text and/or blobs)."""

        async def op(s: ClientSession) -> ReadResourceResult:
            return ReadResourceResult.model_validate(await s.request("resources/read", {"uri": uri}, timeout=timeout))

        return await self._call("resources/read", op)

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
        await self._call("resources/subscribe", lambda s: s.subscribe_resource(uri))
        self._subscriptions.add(uri)

    async def unsubscribe_resource(self, uri: str) -> None:
        """``resources/unsubscribe`` (handshake era)."""
        self._subscriptions.discard(uri)
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
    ) -> AsyncIterator[Watch]:
        """Watch list changes and resource updates with one API in both eras.

        2026-07-28: one ``subscriptions/listen`` stream with that filter. Handshake era: ``resources/subscribe``
        for each URI (unsubscribed on exit) and the session's notifications, filtered. Yields a :class:`Watch`.
        """
        uris = tuple(dict.fromkeys(resource_uris))
        if self.modern:
            async with self.session.listen(
                tools=tools, prompts=prompts, resources=resources, resource_uris=uris, maxsize=maxsize
            ) as sub:
                yield Watch(asyncio.Queue(1), frozenset(), frozenset(uris), sub)
            return
        methods = frozenset(
            m for kind, m in _LIST_CHANGED.items() if {"tools": tools, "prompts": prompts, "resources": resources}[kind]
        )
        w = Watch(asyncio.Queue(maxsize), methods, frozenset(uris))
        self._watches.add(w)
        subscribed: list[str] = []
        try:
            for uri in uris:
                await self.subscribe_resource(uri)
                subscribed.append(uri)
            yield w
        finally:
            self._watches.discard(w)
            for uri in subscribed:
                with contextlib.suppress(Exception):
                    await self.unsubscribe_resource(uri)

    # ------------------------------------------------------------------ prompts

    async def list_prompts(self, *, max_pages: int | None = None, max_items: int | None = None) -> list[Prompt]:
        """Every prompt (all pages, bounded by ``max_pages``/``max_items``)."""
        raw = await self._walk("prompts/list", "prompts", max_pages, max_items)
        return [Prompt.model_validate(p) for p in raw]

    async def list_prompts_page(self, cursor: str | None = None) -> tuple[list[Prompt], str | None]:
        """One raw page of prompts: ``(prompts, next_cursor)``."""
        page = await self._page("prompts/list", cursor)
        return [Prompt.model_validate(p) for p in page.get("prompts") or []], page.get("nextCursor") or None

    async def get_prompt(self, name: str, arguments: Mapping[str, Any] | None = None) -> GetPromptResult:
        """``prompts/get``; argument values that are not strings are sent as JSON text (prompt args are strings)."""
        args = {k: v if isinstance(v, str) else _json_text(v) for k, v in (arguments or {}).items()}
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

    async def set_logging_level(self, level: str) -> None:
        """Ask for log messages at ``level`` and above (``logging/setLevel``, or ``_meta`` in 2026-07-28)."""
        self.log_level = level
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


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _parsed_size(value: Any) -> int:
    """Estimated memory of a parsed JSON value: its encoded size plus ~64 bytes per list/object and ~48 per string
    (close to CPython's real cost; nested empty lists take ~22x their JSON size). A value nested deeper than orjson
    encodes is weighed by an iterative walk, so no recursion limit applies."""
    import orjson

    try:
        encoded = orjson.dumps(value)
    except (TypeError, orjson.JSONEncodeError):
        pass
    else:
        containers = encoded.count(b"[") + encoded.count(b"{")
        return len(encoded) + 64 * containers + 24 * encoded.count(b'"')
    total = 0
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            total += 64 + 16 * len(v)
            for k, item in v.items():
                total += 50 + len(str(k))
                stack.append(item)
        elif isinstance(v, list):
            total += 64 + 8 * len(v)
            stack.extend(v)
        else:
            total += 50 + len(str(v))
    return total
