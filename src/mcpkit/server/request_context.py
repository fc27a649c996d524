"""What a server handler sees of the request it is handling, in either era (:class:`ServerRequestContext`)."""

from __future__ import annotations

import asyncio
import contextvars
import secrets
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from ..engine import RequestContext
from ..hosting import SESSION_BINDING
from ..protocol.errors import CapabilityNotSupported, MCPError, MissingRequiredClientCapability
from ..protocol.extensions import declared_settings
from ..protocol.jsonrpc import JSONDict
from ..protocol.versions import INPUT_REQUIRED_METHODS as INPUT_REQUIRED_METHODS
from ..protocol.versions import LOG_LEVELS, Features

if TYPE_CHECKING:
    from ..hosting import HostedServer, HostedSession
    from ..tasks import TaskControl

# server -> client request methods and the client capability each needs
CLIENT_CAPABILITY_FOR = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
_NO_ANSWERS: dict[str, JSONDict] = {}  # shared by every request without input responses: read, never written


FORBIDDEN = -32003  # mcpkit's JSON-RPC code for "the caller's credentials do not allow this request"
#: why a request (-32003), a stream or a WebSocket (close 1008) opened with a token that has expired is refused
TOKEN_EXPIRED = "the access token this connection was opened with has expired: reconnect with a fresh token"


class Forbidden(MCPError):
    """-32003: the authenticated caller lacks what this request needs (e.g. an OAuth scope). ``data`` names the
    missing scopes: ``{"error": "insufficient_scope", "scopes": [...]}``; get a token with them and retry."""

    code = FORBIDDEN
    default_message = "Forbidden"


class ConfigurationError(RuntimeError):
    """A deployment mistake a handler met (``ctx.upstream_token()`` without an OAuth proxy in front, a setting of
    yours missing): its message, the fix, goes to the server log; the client is told the server is misconfigured
    and the error id, not the message (unless in development, ``MCPKit(debug=True)``), so the user does not sign
    in again or retry for nothing and learns nothing of the server's insides."""


class Authorization(Protocol):
    """The authorization decision for one caller, applied by the dispatcher to every JSON-RPC request it runs
    (each item of a batch included), whatever transport carried it: POST /mcp, /messages, /ws, stdio.

    ``principal`` identifies the caller (it binds a modern ``requestState`` to it); ``check`` raises
    :class:`Forbidden` (or any :class:`MCPError`) to refuse the request. An HTTP middleware such as
    :func:`mcpkit.auth.protect` installs one per request or connection with :func:`authorize_as`; an embedder can
    do the same around ``Server.run_stdio_async()``."""

    @property
    def principal(self) -> str | None: ...

    def check(self, method: str, params: JSONDict) -> None: ...


CURRENT_AUTHORIZATION: contextvars.ContextVar[Authorization | None] = contextvars.ContextVar(
    "mcpkit_authorization", default=None
)


class UpstreamCredentials(Protocol):
    """The upstream credentials of the caller of a request: what an OAuth proxy
    (:class:`~mcpkit.auth.upstream_login.UpstreamLogin`) installs with :func:`provide_upstream` for the requests it
    passes on to its app, and :meth:`~mcpkit.server.context.Context.upstream_token` reads."""

    async def upstream_token(self) -> str | None:
        """The identity provider's access token of the request's caller; None when none is kept."""
        ...


CURRENT_UPSTREAM: contextvars.ContextVar[UpstreamCredentials | None] = contextvars.ContextVar(
    "mcpkit_upstream_credentials", default=None
)


def provide_upstream(credentials: UpstreamCredentials | None) -> contextvars.Token[UpstreamCredentials | None]:
    """Install ``credentials`` for the requests handled from this context. Returns the token for
    ``CURRENT_UPSTREAM.reset``."""
    return CURRENT_UPSTREAM.set(credentials)


def authorize_as(authz: Authorization | None) -> contextvars.Token[Authorization | None]:
    """Install ``authz`` for the requests dispatched from this context (tasks created from here inherit it).
    Returns the token for ``CURRENT_AUTHORIZATION.reset``."""
    return CURRENT_AUTHORIZATION.set(authz)


class ScopeAuthorization:
    """An :class:`Authorization` from granted scopes and a rule ``(method, params) -> scopes needed``.
    ``expires_at`` (epoch seconds): after it every request is refused, and the HTTP transports end a long-lived
    stream or WebSocket opened with it then, so none outlives the token it was opened with."""

    __slots__ = ("expires_at", "granted", "principal", "rule")

    def __init__(
        self, principal: str | None, granted: Iterable[str], rule: Any = None, expires_at: float | None = None
    ) -> None:
        self.principal: str | None = principal
        self.granted: frozenset[str] = frozenset(granted)
        self.rule: Any = rule
        self.expires_at: float | None = expires_at

    def missing(self, method: str, params: JSONDict) -> list[str]:
        """The scopes ``method``/``params`` needs that the caller was not granted (the one scope decision)."""
        if self.rule is None:
            return []
        out: list[str] = []
        for scope in self.rule(method, params):
            if scope not in self.granted and scope not in out:
                out.append(scope)
        return out

    def check(self, method: str, params: JSONDict) -> None:
        if self.expires_at is not None and time.time() > self.expires_at:
            raise Forbidden(TOKEN_EXPIRED, {"error": "invalid_token"})
        missing = self.missing(method, params)
        if missing:
            raise Forbidden(
                f"this request needs scope {' '.join(missing)}: obtain a token that grants it and retry",
                {"error": "insufficient_scope", "scopes": missing},
            )


def at_token_expiry(end: Callable[[], object]) -> asyncio.TimerHandle | None:
    """Call ``end`` when the access token that authorized this request expires (the authorization
    :func:`mcpkit.auth.protect` installed: the token's ``exp`` plus the tolerated clock skew), so a long-lived
    stream or connection does not outlive it. None when no token, or one that never expires, authorized it. The
    caller cancels the returned timer when its stream ends (one timer per stream, gone with it)."""
    authz = CURRENT_AUTHORIZATION.get()
    if not isinstance(authz, ScopeAuthorization) or authz.expires_at is None:
        return None
    return asyncio.get_running_loop().call_later(max(0.0, authz.expires_at - time.time()), end)


def session_binding(session: HostedSession | None) -> str | None:
    """A random name of ``session`` (None without one) that a sealed ``requestState`` carries, so a state sealed
    for one session is refused on another."""
    if session is None:
        return None
    binding = session.state.get(SESSION_BINDING)
    if binding is None:
        binding = session.state[SESSION_BINDING] = secrets.token_urlsafe(12)
    return str(binding)


def log_message(level: str, data: Any, logger_name: str | None) -> JSONDict:
    """The params of one ``notifications/message`` (a session's log and a request's log send the same)."""
    params: JSONDict = {"level": level, "data": data}
    if logger_name is not None:
        params["logger"] = logger_name
    return params


def level_index(level: str) -> int:
    try:
        return LOG_LEVELS.index(level)
    except ValueError:
        return 0


class InputRequired(BaseException):
    """Raised inside a modern-era handler that needs client input: becomes an ``InputRequiredResult``. ``state``
    (JSON) rides in the sealed ``requestState`` and comes back as ``ServerRequestContext.input_state`` when the
    client retries (a handler that keeps work between rounds finds it again with it).

    Like :class:`asyncio.CancelledError` it derives from :class:`BaseException`: it unwinds the handler, and a
    tool's ``except Exception`` around ``ctx.elicit``/``ctx.sample`` does not swallow the question."""

    def __init__(self, requests: dict[str, JSONDict], state: Any = None) -> None:
        super().__init__("input required")
        self.requests = requests
        self.state = state


class ServerRequestContext:
    """Everything a handler may need about the request it is handling, in either era.

    ``ask`` is the era-portable way to get input from the client (elicitation, sampling, roots): a
    server→client request in the handshake era, an ``InputRequiredResult`` round trip in the modern era.
    """

    __slots__ = (
        "_answers",
        "_ask_counter",
        "client_capabilities",
        "client_info",
        "features",
        "input_state",
        "log_level",
        "principal",
        "rc",
        "server",
        "session",
        "task",
    )

    def __init__(
        self,
        server: HostedServer,
        session: HostedSession | None,
        rc: RequestContext,
        feats: Features,
        client_capabilities: JSONDict,
        client_info: JSONDict | None,
        log_level: str | None,
    ) -> None:
        self.server: HostedServer = server
        self.session: HostedSession | None = session
        self.rc: RequestContext = rc
        self.features: Features = feats
        self.client_capabilities: JSONDict = client_capabilities
        self.client_info: JSONDict | None = client_info
        self.log_level: str | None = log_level
        self._answers: dict[str, JSONDict] = _NO_ANSWERS  # replaced (never mutated) when answers come in
        self._ask_counter = 0
        self.principal: str | None = None
        self.input_state: Any = None  # what the handler's InputRequired(state=...) sealed in the previous round
        #: the task this call runs as (None: a plain request); its input requests, progress and status go
        #: through the task once it is one (``task.active``)
        self.task: TaskControl | None = None

    # --- request facts
    @property
    def request_id(self) -> str | int:
        return self.rc.id

    @property
    def method(self) -> str:
        return self.rc.method

    @property
    def params(self) -> JSONDict:
        return self.rc.params or {}

    @property
    def meta(self) -> JSONDict:
        return self.rc.meta or {}

    @property
    def protocol_version(self) -> str:
        return self.features.version

    @property
    def modern(self) -> bool:
        return self.features.modern

    @property
    def cancelled(self) -> bool:
        task = self.task
        if task is not None and task.active:
            return task.cancelled
        return self.rc.cancelled

    # --- extensions the client declared (capabilities.extensions: initialize, or this request's _meta)
    def client_extension(self, extension_id: str) -> JSONDict | None:
        """The settings the client declared for the extension ``extension_id``, or None when it did not."""
        return declared_settings(self.client_capabilities, extension_id)

    def client_supports_extension(self, extension_id: str) -> bool:
        """Whether the client declared the extension ``extension_id`` (in either era)."""
        return declared_settings(self.client_capabilities, extension_id) is not None

    # --- outgoing, related to this request
    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Progress for this request (sent only if the client asked for it, strictly increasing); in a task, kept
        with the task too (``tasks/get`` shows it)."""
        task = self.task
        if task is not None:
            if task.active:
                await task.progress(progress, total, message)
                return True
            if task.id is not None:  # the first step of a call its task is made for (2026-07-28): kept there too
                await task.progress(progress, total, message)
        return await self.rc.report_progress(progress, total, message if self.features.progress_message else None)

    async def report_status(self, message: str) -> bool:
        """Set the status message of the task this call runs as, or of the task made for its first step
        (2026-07-28); False, and nothing sent, outside a task."""
        task = self.task
        if task is None or (not task.active and task.id is None):
            return False
        await task.status(message)
        return True

    async def notify(self, method: str, params: JSONDict | None = None) -> None:
        await self.rc.notify(method, params)

    def log_enabled(self, level: str) -> bool:
        if "logging" not in self.server.capabilities(self.features):
            return False
        if self.features.modern:
            # 2026-07-28: no log notifications unless this request asked for them with _meta logLevel.
            return self.log_level is not None and level_index(level) >= level_index(self.log_level)
        threshold = self.session.log_level if self.session is not None else None
        return threshold is None or level_index(level) >= level_index(threshold)

    async def log(self, level: str, data: Any, logger_name: str | None = None) -> bool:
        """Send ``notifications/message`` if logging is enabled at ``level`` for this request/session."""
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}")
        if not self.log_enabled(level):
            return False
        task = self.task
        if task is not None and task.active:  # the request was answered: the task's own channel, if it has one
            send = task.data.get("notify")
            if send is None:
                return False  # (2026-07-28: no log messages from a task)
            await send("notifications/message", log_message(level, data, logger_name))
            return True
        await self.rc.notify("notifications/message", log_message(level, data, logger_name))
        return True

    def has_client_capability(self, name: str) -> bool:
        return isinstance(self.client_capabilities.get(name), dict)

    async def ask(self, method: str, params: JSONDict, *, timeout: float | None = None) -> JSONDict:
        """Ask the client for input (``elicitation/create``, ``sampling/createMessage`` or ``roots/list``)."""
        cap = CLIENT_CAPABILITY_FOR.get(method)
        if cap is None:
            raise ValueError(f"{method!r} is not a server-to-client request")
        # A capability the client did not declare is -32021 naming it, in every era: 2026-07-28 requires that
        # answer, and the handshake revisions only forbid using what was not negotiated, so the same server code
        # gets the same outcome in both (a revision without the feature is another matter: CapabilityNotSupported)
        if not self.has_client_capability(cap):
            if self.session is not None and self.session.stateless and not self.features.modern:
                raise CapabilityNotSupported(
                    f"this server runs stateless (no session), so it cannot send {method!r} to the client: serve "
                    "it with sessions, or have the client speak 2026-07-28"
                )
            raise MissingRequiredClientCapability({cap: {}})
        if cap == "elicitation" and not self.features.elicitation:
            raise CapabilityNotSupported(f"elicitation does not exist in protocol {self.features.version}")
        if method == "sampling/createMessage" and ("tools" in params or "toolChoice" in params):
            if not self.features.sampling_tools:
                raise CapabilityNotSupported(f"sampling with tools does not exist in protocol {self.features.version}")
            sampling = self.client_capabilities.get("sampling") or {}
            if not isinstance(sampling, dict) or "tools" not in sampling:
                raise MissingRequiredClientCapability({"sampling": {"tools": {}}})
        if cap == "elicitation" and params.get("mode") == "url":
            if not self.features.url_elicitation:
                raise CapabilityNotSupported(f"URL elicitation does not exist in protocol {self.features.version}")
            elicitation = self.client_capabilities.get("elicitation") or {}
            if not isinstance(elicitation, dict) or "url" not in elicitation:
                raise MissingRequiredClientCapability({"elicitation": {"url": {}}})
        task = self.task
        if task is not None and task.active:  # a task asks through its own input requests, in both forms
            return await task.ask(method, params)
        if self.features.modern:
            return self._ask_modern(method, params)
        assert self.session is not None
        await self.session.wait_initialized()
        return await self.rc.request(
            method, params, timeout=timeout if timeout is not None else self.server.request_timeout
        )

    def _ask_modern(self, method: str, params: JSONDict) -> JSONDict:
        if self.rc.method not in INPUT_REQUIRED_METHODS:
            raise RuntimeError(f"client input can only be requested while handling {sorted(INPUT_REQUIRED_METHODS)}")
        self._ask_counter += 1
        key = f"{method.split('/')[0]}-{self._ask_counter}"
        answer = self._answers.get(key)
        if answer is not None:
            return answer
        raise InputRequired({key: {"method": method, "params": params}})

    async def elicit(self, message: str, requested_schema: JSONDict) -> JSONDict:
        return await self.ask("elicitation/create", {"message": message, "requestedSchema": requested_schema})

    async def sample(self, params: JSONDict) -> JSONDict:
        return await self.ask("sampling/createMessage", params)

    async def list_roots(self) -> JSONDict:
        return await self.ask("roots/list", {})
