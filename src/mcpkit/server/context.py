"""``Context``: what a tool, resource or prompt function can ask of the request it is serving.

Declare a parameter annotated ``Context`` (any name, ``Context | None = None`` works too) and it is injected::

    @app.tool
    async def slow(steps: int, ctx: Context) -> str:
        for i in range(steps):
            await ctx.report_progress(i + 1, steps)
        await ctx.info("done")
        return "ok"

Everything works in both eras through the same call: ``elicit``, ``sample`` and ``list_roots`` are server→client
requests in a handshake-era session and ``InputRequiredResult`` round trips in the 2026-07-28 era (there the
function is run again from the start once the client has answered, so do side effects after the questions).
In a tool that runs as a task they are the task's input requests instead (the task turns ``input_required``
until the client answers), in both eras; ``report_progress`` and ``report_status`` then update the task.
Context methods are coroutines: await them in ``async def`` functions; a sync function (run in a worker thread)
calls them through ``ctx.run(ctx.report_progress(1, 2))``.
"""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, overload

from ..hosting import RequestHeaders, http_request_headers
from ..protocol.errors import CapabilityNotSupported
from ..protocol.versions import LogLevel
from .content import dump_model

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..protocol.types import CreateMessageResult, Root
    from .elicitation import AcceptedElicitation as AcceptedElicitation
    from .elicitation import CancelledElicitation as CancelledElicitation
    from .elicitation import DeclinedElicitation as DeclinedElicitation
    from .elicitation import ElicitationResult as ElicitationResult
    from .request_context import ServerRequestContext

JSONDict = dict[str, Any]
T = TypeVar("T")


class ContextApp(Protocol):
    """What a :class:`Context` knows of the app serving its request (an :class:`~mcpkit.server.app.MCPKit`; typed
    by these members so that this module, which the app imports, imports nothing of the app back; for anything
    else of the app, ``typing.cast(MCPKit, ctx.app)``)."""

    name: str

    @property
    def lifespan_state(self) -> Any:
        """What the app's lifespan yielded, while it is held (None otherwise)."""
        ...

    async def read_resource_contents(self, uri: str, ctx: Context | None = None) -> list[JSONDict]:
        """Read one of the app's resources (what ``resources/read`` answers; with ``ctx``, as its caller may)."""
        ...

    async def notify_list_changed(self, kind: str) -> None:
        """Tell every client that the ``kind`` list changed."""
        ...

    async def notify_resource_updated(self, uri: str) -> None:
        """Tell the subscribers of ``uri`` that it changed."""
        ...


class Context:
    """The request being served (injected by annotation into tools, resources and prompts)."""

    __slots__ = ("_app", "_ctx", "_loop", "_modern_state")
    # how schema recognises a Context parameter (it and its subclasses) without importing this module
    _injected_as_context: ClassVar[bool] = True

    def __init__(self, app: ContextApp, ctx: ServerRequestContext) -> None:
        self._app = app
        self._ctx = ctx
        self._modern_state: JSONDict | None = None
        self._loop = asyncio.get_running_loop()

    # ------------------------------------------------------------------ facts about the request

    @property
    def app(self) -> ContextApp:
        """The :class:`~mcpkit.server.app.MCPKit` app serving this request (typed as :class:`ContextApp`)."""
        return self._app

    @property
    def request_context(self) -> ServerRequestContext:
        """The low-level request context (escape hatch)."""
        return self._ctx

    @property
    def request_id(self) -> str | int:
        """The JSON-RPC id of the request."""
        return self._ctx.request_id

    @property
    def method(self) -> str:
        """The request's method (``tools/call``, ``resources/read``, ``prompts/get``, ...)."""
        return self._ctx.method

    @property
    def meta(self) -> JSONDict:
        """The request's ``params._meta`` (progress token, reserved modern-era keys, your own keys)."""
        return self._ctx.meta

    @property
    def progress_token(self) -> str | int | None:
        """The progress token the client sent (None when it asked for no progress)."""
        token = self._ctx.meta.get("progressToken")
        return token if isinstance(token, (str, int)) else None

    @property
    def protocol_version(self) -> str:
        """The protocol revision of this request (its session's, or the one in its ``_meta``)."""
        return self._ctx.protocol_version

    @property
    def modern(self) -> bool:
        """True for a stateless 2026-07-28 request, False inside a handshake-era session."""
        return self._ctx.modern

    @property
    def client_info(self) -> JSONDict | None:
        """The client's ``clientInfo`` (name, version), when it sent one."""
        return self._ctx.client_info

    @property
    def client_capabilities(self) -> JSONDict:
        """The capabilities the client declared (``initialize``, or the request's ``_meta``)."""
        return self._ctx.client_capabilities

    def client_extension(self, extension_id: str) -> JSONDict | None:
        """The settings the client declared for the extension ``extension_id`` (``capabilities.extensions``), or
        None when it did not declare it."""
        return self._ctx.client_extension(extension_id)

    def client_supports_extension(self, extension_id: str) -> bool:
        """Whether the client declared the extension ``extension_id`` (``capabilities.extensions``, in
        ``initialize`` or in this request's ``_meta``): e.g. ``ctx.client_supports_extension(UI_EXTENSION)``
        before relying on an interactive view, with a text fallback otherwise."""
        return self._ctx.client_supports_extension(extension_id)

    @property
    def cancelled(self) -> bool:
        """True once the client cancelled this request (``notifications/cancelled``, or over HTTP in 2026-07-28 by
        closing the response stream)."""
        return self._ctx.cancelled

    @property
    def headers(self) -> RequestHeaders | None:
        """The headers of the HTTP request that carried this request (the WebSocket upgrade's over WebSocket), read-
        only and case-insensitive (``ctx.headers.get("x-tenant")``); None over stdio and in-process. They include
        ``Authorization`` when the client sent one: never echo them to the model."""
        raw = http_request_headers()
        return RequestHeaders(raw) if raw is not None else None

    @property
    def lifespan_state(self) -> Any:
        """What the app's lifespan yielded (shared by every session), None without a lifespan."""
        return self._app.lifespan_state

    @property
    def session_state(self) -> JSONDict:
        """A dict for per-client state.

        Handshake era: one dict per session, stable across every call of that session; a stateless HTTP endpoint
        (``create_app(stateless=True)``) has no sessions, so a fresh dict per request there too.
        2026-07-28: the protocol has no session and forbids inferring one from the connection, so this is a fresh
        dict per request. Keep cross-call state behind an explicit handle your tools return and accept (the
        spec's "stateful tools" pattern), or in :attr:`lifespan_state`.
        """
        session = self._ctx.session
        if self._ctx.modern or session is None or session.stateless:
            if self._modern_state is None:
                self._modern_state = {}
            return self._modern_state
        return session.state

    def run(self, awaitable: Awaitable[T], timeout: float | None = None) -> T:
        """Run a Context coroutine from a sync function (they run in a worker thread) and return its result::

        @app.tool
        def crunch(n: int, ctx: Context) -> str:
            for i in range(n):
                ctx.run(ctx.report_progress(i + 1, n))
            return "done"
        """
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            if inspect.iscoroutine(awaitable):
                awaitable.close()
            raise RuntimeError("ctx.run() is for sync functions; in an async function, await the call instead")

        async def call() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(timeout)

    # ------------------------------------------------------------------ progress and logging

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Report progress (sent only if the client asked for it with a progress token; must increase). In a task
        the report is kept with the task as well: ``tasks/get`` shows it (its message as the status message),
        in both protocol forms."""
        return await self._ctx.report_progress(progress, total, message)

    async def report_status(self, message: str) -> bool:
        """Set the status message of the task this call runs as (what ``tasks/get`` shows the client, in both
        protocol forms). Outside a task it does nothing and returns False."""
        return await self._ctx.report_status(message)

    async def become_task(self) -> bool:
        """Make this call a task now, when it may be one: in 2026-07-28, a task tool called by a client that
        declared the tasks extension runs inside the request until it first waits (its questions until then are
        ordinary ``input_required`` round trips); this is such a wait, so the request is answered with the task
        and the function goes on in the background. Returns whether the call is a task (in 2025-11-25 it is one
        from the start when the client asked for it; otherwise this only yields to the event loop once)."""
        await asyncio.sleep(0)
        task = self._ctx.task
        return task is not None and task.active

    @property
    def task_id(self) -> str | None:
        """The id of the task this call runs as (None when it is a plain request, or not yet a task)."""
        task = self._ctx.task
        return task.id if task is not None and task.active else None

    async def log(self, level: LogLevel, data: Any, logger: str | None = None) -> bool:
        """Send a log message to the client if its level (setLevel / per-request ``_meta``) lets it through."""
        return await self._ctx.log(level, data, logger)

    async def debug(self, data: Any, logger: str | None = None) -> bool:
        """Send a ``debug`` log message to the client (see :meth:`log`)."""
        return await self.log("debug", data, logger)

    async def info(self, data: Any, logger: str | None = None) -> bool:
        """Send an ``info`` log message to the client (see :meth:`log`)."""
        return await self.log("info", data, logger)

    async def notice(self, data: Any, logger: str | None = None) -> bool:
        """Send a ``notice`` log message to the client (see :meth:`log`)."""
        return await self.log("notice", data, logger)

    async def warning(self, data: Any, logger: str | None = None) -> bool:
        """Send a ``warning`` log message to the client (see :meth:`log`)."""
        return await self.log("warning", data, logger)

    async def error(self, data: Any, logger: str | None = None) -> bool:
        """Send an ``error`` log message to the client (see :meth:`log`)."""
        return await self.log("error", data, logger)

    async def critical(self, data: Any, logger: str | None = None) -> bool:
        """Send a ``critical`` log message to the client (see :meth:`log`)."""
        return await self.log("critical", data, logger)

    async def alert(self, data: Any, logger: str | None = None) -> bool:
        """Send an ``alert`` log message to the client (see :meth:`log`)."""
        return await self.log("alert", data, logger)

    async def emergency(self, data: Any, logger: str | None = None) -> bool:
        """Send an ``emergency`` log message to the client (see :meth:`log`)."""
        return await self.log("emergency", data, logger)

    # ------------------------------------------------------------------ asking the client

    @overload
    async def elicit(self, message: str, schema: type[T], *, timeout: float | None = None) -> ElicitationResult[T]: ...

    @overload
    async def elicit(self, message: str, schema: None, *, timeout: float | None = None) -> ElicitationResult[None]: ...

    @overload
    async def elicit(
        self, message: str, schema: Sequence[str], *, timeout: float | None = None
    ) -> ElicitationResult[str]: ...

    @overload
    async def elicit(
        self, message: str, schema: JSONDict, *, timeout: float | None = None
    ) -> ElicitationResult[JSONDict]: ...

    @overload
    async def elicit(self, message: str, schema: object, *, timeout: float | None = None) -> ElicitationResult[Any]: ...

    async def elicit(self, message: str, schema: object, *, timeout: float | None = None) -> ElicitationResult[Any]:
        """Ask the user for input (form mode). ``schema`` says what, and ``data`` comes back in that type:

        - a pydantic model, dataclass or TypedDict of flat fields (strings, numbers, booleans, choices): an
          instance (a dict for a TypedDict);
        - ``bool``, ``str``, ``int``, ``float``: that value (``await ctx.elicit("Delete it?", bool)``);
        - a choice: ``Literal["a", "b"]``, an ``Enum`` with string values (its member comes back), a list of strings;
          ``list[Literal[...]]`` / ``list[AnEnum]`` for several (2025-11-25 on);
        - ``None``: nothing to fill in (accept, decline or cancel: a confirmation);
        - a JSON Schema dict (sent as given): the content dict.

        The result is :class:`AcceptedElicitation` (``data``, ``content``), :class:`DeclinedElicitation` or
        :class:`CancelledElicitation`: ``if result.action == "accept":`` narrows it (``result.data`` is then typed).
        A type that cannot be asked in a form is a ``TypeError`` raised here, before anything is sent; an answer
        that does not fit the type is :class:`~mcpkit.protocol.errors.InvalidParams` (the tool's call then ends with
        ``isError`` and that message, unless it catches it)."""
        if not self._ctx.features.elicitation:
            raise CapabilityNotSupported(f"elicitation does not exist in protocol {self._ctx.protocol_version}")
        from .elicitation import elicitation_form, elicitation_result  # (loaded by the first question only)

        form = elicitation_form(schema, self._ctx.features)
        raw = await self._ctx.ask(
            "elicitation/create", {"message": message, "requestedSchema": form.schema}, timeout=timeout
        )
        return elicitation_result(raw, form.read)

    async def elicit_url(
        self, message: str, url: str, *, elicitation_id: str | None = None, timeout: float | None = None
    ) -> ElicitationResult[None]:
        """Send the user to ``url`` (URL-mode elicitation, 2025-11-25 on: OAuth flows, payments, anything that
        must not pass through the client). The result says whether the user agreed to open it."""
        if not self._ctx.features.url_elicitation:
            raise CapabilityNotSupported(f"URL elicitation does not exist in protocol {self._ctx.protocol_version}")
        params: JSONDict = {
            "mode": "url",
            "message": message,
            "url": url,
            "elicitationId": elicitation_id or uuid.uuid4().hex,
        }
        raw = await self._ctx.ask("elicitation/create", params, timeout=timeout)
        from .elicitation import elicitation_result

        return elicitation_result(raw, _nothing)

    async def sample(
        self,
        messages: str | Sequence[str | JSONDict | BaseModel],
        *,
        max_tokens: int = 1024,
        system_prompt: str | None = None,
        temperature: float | None = None,
        stop_sequences: list[str] | None = None,
        model_preferences: JSONDict | BaseModel | None = None,
        include_context: str | None = None,
        metadata: JSONDict | None = None,
        tools: list[JSONDict] | None = None,
        tool_choice: JSONDict | None = None,
        timeout: float | None = None,
    ) -> CreateMessageResult:
        """Ask the client's LLM. ``messages``: a string (one user message) or a list of strings / messages."""
        if isinstance(messages, str):
            messages = [messages]
        wire: list[JSONDict] = []
        for m in messages:
            if isinstance(m, str):
                wire.append({"role": "user", "content": {"type": "text", "text": m}})
            else:
                wire.append(dump_model(m))
        params: JSONDict = {"messages": wire, "maxTokens": max_tokens}
        if system_prompt is not None:
            params["systemPrompt"] = system_prompt
        if temperature is not None:
            params["temperature"] = temperature
        if stop_sequences:
            params["stopSequences"] = stop_sequences
        if model_preferences is not None:
            params["modelPreferences"] = dump_model(model_preferences)
        if include_context is not None:
            params["includeContext"] = include_context
        if metadata is not None:
            params["metadata"] = metadata
        if tools is not None:
            params["tools"] = tools
        if tool_choice is not None:
            params["toolChoice"] = tool_choice
        raw = await self._ctx.ask("sampling/createMessage", params, timeout=timeout)
        from ..protocol.types import CreateMessageResult

        return CreateMessageResult.model_validate(raw)

    async def list_roots(self, *, timeout: float | None = None) -> list[Root]:
        """The client's roots (``roots/list``)."""
        raw = await self._ctx.ask("roots/list", {}, timeout=timeout)
        from ..protocol.types import Root

        return [Root.model_validate(r) for r in raw.get("roots") or []]

    async def upstream_token(self) -> str | None:
        """The upstream identity provider's access token (GitHub's, Google's...) of the user this request speaks
        for, when the app is served behind an OAuth proxy (``AuthorizationServer(upstream=UpstreamLogin(...),
        app=...)``): refreshed with the provider's refresh token when expired. It never leaves the server: call the
        provider's API with it, never return it. None when none is kept for this user (not signed in through the
        proxy, forgotten past its bounds, its grant revoked, or refused at refresh): the user signs in again.

        Raises :class:`~mcpkit.ConfigurationError` (a ``RuntimeError``) when no OAuth proxy serves this request
        (stdio, or an app not passed as the proxy's ``app=``): that is a deployment mistake, not a user without a
        token, so it is not hidden as None. Unhandled in a tool, the client is told the server is misconfigured
        (with the error id) and the server log says what to fix."""
        from .request_context import CURRENT_UPSTREAM, ConfigurationError

        credentials = CURRENT_UPSTREAM.get()
        if credentials is None:
            raise ConfigurationError(
                "ctx.upstream_token() needs the app served behind an OAuth proxy: "
                "AuthorizationServer(upstream=UpstreamLogin(...), app=<this app>)"
            )
        return await credentials.upstream_token()

    async def read_resource(self, uri: str) -> list[JSONDict]:
        """Read one of this app's resources (the ``contents`` list, wire form), as this request's caller may: a
        resource or template hidden from the caller (``exclude_tags``, ``app.disable``, the per-principal view
        filter) is ``ResourceNotFound`` exactly like one that does not exist, just as the caller's own
        ``resources/read`` would be, so a tool that reads a URI its caller gave cannot read past the rules. The
        app's own code outside a request reads everything with ``app.read_resource_contents(uri)``."""
        return await self._app.read_resource_contents(uri, self)


def _nothing(content: JSONDict) -> None:
    """A URL-mode answer carries no data (only the user's consent)."""
    return None


if not TYPE_CHECKING:  # (a type checker reads the imports above: a misspelled name is an error there)

    def __getattr__(name: str) -> Any:
        """The elicitation results, importable from here as before (they live in :mod:`.elicitation`, loaded
        late)."""
        if name in ("AcceptedElicitation", "CancelledElicitation", "DeclinedElicitation", "ElicitationResult"):
            from . import elicitation

            return getattr(elicitation, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Context", "ContextApp"]
