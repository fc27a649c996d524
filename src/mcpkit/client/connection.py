"""The connection half of the high-level :class:`~mcpkit.client.client.Client`: opening the target and negotiating,
the callbacks a session is built with, its state; self-healing (a stale HTTP session re-initialized once, safe
requests retried, URL elicitations completed and the refused request retried) is its base class ``SelfHealing``
(:mod:`mcpkit.client.healing`). ``Client`` adds the typed MCP calls on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, TypeAlias, TypeVar

from .._options import named_options
from ..engine import DEFAULT_MAX_BATCH_SIZE, ProgressCallback, RequestTracer
from ..engine.tap import Tap, TapEvent, checked_tap
from ..protocol.errors import (
    ConnectionClosed,
    MCPError,
    RequestTimeout,
)
from ..protocol.extensions import Extensions, as_extensions, declared_settings
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import (
    Tool,
)
from ..protocol.versions import LogLevel, undeclared_capability
from ..transports.base import DEFAULT_MAX_MESSAGE_SIZE
from .cache import ResponseCache
from .handlers import (
    ClientMode,
    ElicitationHandler,
    ElicitationParams,
    InputTracer,
    LoggingHandler,
    SamplingHandler,
    SamplingParams,
    ServerInfo,
    Watch,
    check_client_options,
    elicitation_result,
    maybe_await,
    sampling_result,
)
from .healing import SAFE_METHODS as SAFE_METHODS
from .healing import SelfHealing
from .lowlevel import DEFAULT_MAX_INPUT_REQUESTS, ClientSession, RootsProvider
from .middleware import ClientMiddleware
from .targets import (
    HTTP,
    SSE,
    WS,
    OpenedTarget,
    ServerStartError,
    Target,
    connect_reason,
    open_target,
    parse_target,
    root_os_error,
)

if TYPE_CHECKING:
    import httpx

logger: logging.Logger = logging.getLogger("mcpkit.client")

T = TypeVar("T")

#: ``Client(url, transport=...)``: force one HTTP transport for a URL.
ClientTransport: TypeAlias = Literal["http", "streamable-http", "sse", "ws"]
#: ``Client(url, auth=...)``: ``"oauth"`` (an OAuth 2.1 flow in the browser), a bearer token, or an ``httpx.Auth``
#: flow such as :class:`~mcpkit.auth.client.OAuthClient`.
ClientAuth: TypeAlias = "str | httpx.Auth"


DEFAULT_MAX_URL_ELICITATIONS = 8
"""Default of ``Client(max_url_elicitations=...)``: URL elicitations one -32042 error may ask for."""
DEFAULT_MAX_LIST_BYTES = 64 * 1024 * 1024
"""Default of ``Client(max_list_bytes=...)``: estimated memory (bytes) one auto-paginating list call may collect."""
DEFAULT_MAX_PAGES = 10_000
"""Default of ``Client(max_pages=...)``: pages one auto-paginating list call may ask for (round trips)."""
DEFAULT_MAX_ITEMS = 1_000_000
"""Default of ``Client(max_items=...)``: items one auto-paginating list call may collect. With the two defaults
above, the memory bound is the one that decides: any list whose items fit in ``max_list_bytes`` is walked whole
from a server paging by 100 items or more (mcpkit's servers page by 1,000, the official SDKs answer in one page)."""


def _may_ask_for_logs(session: ClientSession) -> bool:
    """Whether the ``log_level`` wish can be told to this server: always in 2026-07-28 (it rides on ``_meta``); in
    the handshake era only when the server declared ``logging``. A server without it gets no ``logging/setLevel``
    (the connection must not fail over a wish), and whatever log messages it sends are still delivered."""
    feats = session.features
    return (
        feats is None
        or feats.modern
        or undeclared_capability("logging/setLevel", session.server_capabilities, feats) is None
    )


class ClientTelemetry(InputTracer, Protocol):
    """What ``Client(telemetry=...)`` takes (:class:`mcpkit.telemetry.Telemetry`): a tracer for each session's
    outgoing requests, what a session's :class:`~mcpkit.client.handlers.InputTracer` does, the span of one call
    that sends other requests before its own, and a tap for the requests the server sends."""

    def client_tracer(self, session: ClientSession, transport: str | None = None) -> RequestTracer: ...

    def call(self, method: str, params: JSONDict) -> contextlib.AbstractContextManager[None]: ...

    def tap(self, event: TapEvent) -> None: ...


def _both(first: Tap | None, second: Tap) -> Tap:
    if first is None:
        return second

    def tap(event: TapEvent) -> None:
        first(event)
        second(event)

    return tap


class ClientConnection(SelfHealing):
    """Opens, heals and closes one client connection (the base of :class:`~mcpkit.client.client.Client`, whose
    docstring lists the options)."""

    @named_options
    def __init__(
        self,
        target: Any,
        *,
        mode: ClientMode = "auto",
        protocol_version: str | None = None,
        client_info: JSONDict | None = None,
        roots: RootsProvider | None = None,
        sampling_handler: SamplingHandler | None = None,
        sampling_tools: bool = False,
        elicitation_handler: ElicitationHandler | None = None,
        elicitation_url: bool = True,
        logging_handler: LoggingHandler | None = None,
        log_level: LogLevel | None = None,
        on_notification: Callable[[str, JSONDict | None], Any] | None = None,
        timeout: float | None = 60.0,
        connect_timeout: float | None = 30.0,
        discover_timeout: float = 5.0,
        validate_output: bool = True,
        max_pages: int = DEFAULT_MAX_PAGES,
        max_items: int = DEFAULT_MAX_ITEMS,
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
        transport: ClientTransport | None = None,
        transport_options: Mapping[str, Any] | None = None,
        experimental: JSONDict | None = None,
        relay_answers: bool = False,
        cache: ResponseCache | bool = True,
        middleware: Sequence[ClientMiddleware] = (),
        extensions: Extensions | Mapping[str, JSONDict | None] | None = None,
        tasks: bool = True,
        tap: Tap | None = None,
        auth: ClientAuth | None = None,
        telemetry: ClientTelemetry | None = None,
    ) -> None:
        check_client_options(mode, log_level, protocol_version)
        self._telemetry = telemetry
        if tap is not None:
            checked_tap(tap)  # (here, before it is joined to telemetry's: an async tap is refused either way)
        if telemetry is not None:
            tap = _both(tap, telemetry.tap)
        self.target: Target = parse_target(target, env=env, cwd=cwd, headers=headers, transport=transport)
        self._auth = auth
        self._own_oauth: Any = None  # the OAuthClient auth="oauth" made (closed with the client)
        if auth is not None:
            self._check_auth(auth)
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
            "relay_answers": relay_answers,
            "tasks": tasks,
            "tap": tap,
        }
        #: the extensions this client declares (``capabilities.extensions``, both eras): ``{id: settings}``;
        #: :meth:`declare_extension` adds one (it applies from the next connection on)
        self.extensions: Extensions = as_extensions(extensions)
        self._roots = roots
        self._sampling_handler = sampling_handler
        self._elicitation_handler = elicitation_handler
        self._logging_handler = logging_handler
        self._relay_answers = relay_answers
        # the 2026-07-28 caching hints honoured (client/cache.py); the call chain (client/middleware.py)
        self.cache: ResponseCache | None = ResponseCache() if cache is True else (cache or None)
        self._middleware = tuple(middleware)
        self._on_notification = on_notification
        self.log_level: LogLevel | None = log_level
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.validate_output = validate_output
        self.max_pages = max_pages
        self.max_items = max_items
        self.reconnect_enabled = reconnect
        self.max_reconnect_attempts: int = max(1, max_reconnect_attempts)
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.transport_options: dict[str, Any] = dict(transport_options or {})
        if isinstance(auth, str) and auth != "oauth":
            self.target.headers["Authorization"] = f"Bearer {auth}"
        elif auth is not None and auth != "oauth":
            self.transport_options["auth"] = auth
        self._opened: OpenedTarget | None = None
        self._session: ClientSession | None = None
        self._lost: str | None = None  # why the last re-initialization failed (the next call tries again)
        self._stale: ClientSession | None = None  # a session being replaced (see SelfHealing._reinitialize)
        self._tools: dict[str, Tool] = {}
        self._tools_complete = False
        self._listing: asyncio.Future[list[Tool]] | None = None  # the tools/list lookups share (Client.get_tool)
        self._validators: dict[str, Any] = {}
        self._lock = asyncio.Lock()
        self.reconnects = 0  # how many times the client re-initialized after a stale session
        self.url_elicitation_wait = url_elicitation_wait
        self.max_url_elicitations = max_url_elicitations
        self.max_list_bytes = max_list_bytes
        self._completed_elicitations: set[str] = set()
        self._elicitation_event = asyncio.Event()
        self._watches: set[Watch] = set()
        self._subscriptions: set[str] = set()  # every resources/subscribe made (renewed on a new session)
        self._held_subscriptions: set[str] = set()  # those made by subscribe_resource: a watch's end keeps them

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        """Open the target and negotiate (called by ``async with``)."""
        if self._session is not None:
            return
        self._session, self._opened = await self._open()
        self._lost = None

    async def aclose(self) -> None:
        """Close the session and the transport (stdio: close stdin, then signal; HTTP: DELETE the session)."""
        session, opened = self._session, self._opened
        self._session = self._opened = self._stale = None
        self._lost = None
        self._end_watches(ConnectionClosed("the client was closed"))
        if session is not None:
            with contextlib.suppress(Exception):
                await session.aclose()
        if opened is not None:
            await opened.aclose()
        if self._own_oauth is not None:
            with contextlib.suppress(Exception):
                await self._own_oauth.aclose()  # (its HTTP client; the tokens stay for a reconnect)

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

    def _check_auth(self, auth: object) -> None:
        if self.target.kind not in (HTTP, SSE, WS):
            raise ValueError(
                f"auth= applies to http(s):// and ws(s):// servers, not to {self.target.description!r} (a stdio server "
                "takes its credentials from its environment: env={...})"
            )
        if isinstance(auth, str):
            if not auth.strip():
                raise ValueError("auth: an empty token")
            return
        if not callable(getattr(auth, "async_auth_flow", None)):
            raise TypeError(
                f'auth must be "oauth", a bearer token (str) or an httpx.Auth flow such as OAuthClient, not {auth!r}'
            )

    def _oauth_flow(self) -> Any:
        """``auth="oauth"``: an :class:`~mcpkit.auth.client.OAuthClient` for this URL that signs in through the
        browser (a one-shot listener on 127.0.0.1 receives the redirect); tokens live as long as the client."""
        from .._extras import require

        require("httpx", 'Client(url, auth="oauth")')
        from ..auth.client import LoopbackCallback, OAuthClient

        callback = LoopbackCallback()
        url = self.target.url
        assert url is not None
        if self.target.kind == WS:  # (the server's URL as HTTP: the upgrade is authorized as a GET of it would be)
            url = "http" + url[2:]
        return OAuthClient(
            url,
            client_metadata={"client_name": "mcpkit", "redirect_uris": [callback.redirect_uri]},
            redirect_handler=callback.redirect_handler,
            callback_handler=callback.callback_handler,
        )

    async def _open_once(self) -> tuple[ClientSession, OpenedTarget]:
        if self._auth == "oauth" and self._own_oauth is None:
            # made once: a re-initialization (or a second connect) keeps its registration and tokens
            self._own_oauth = self.transport_options["auth"] = self._oauth_flow()
        loop = asyncio.get_running_loop()
        started = loop.time()
        opened = await self._open_target()
        session = self._new_session(opened.conn)
        try:
            if self.connect_timeout is not None:
                # (one bound for the whole connect to a network server: what opening the socket took is not given
                # again; a stdio server's spawn is not counted, its interpreter's start is in the handshake's time)
                spent = loop.time() - started if self.target.url is not None else 0.0
                left = max(self.connect_timeout - spent, 0.0)
                await asyncio.wait_for(session.__aenter__(), left)
            else:
                await session.__aenter__()
            if self.log_level is not None and _may_ask_for_logs(session):
                await session.set_logging_level(self.log_level)
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await session.aclose()
            failed = await opened.server_error() if isinstance(exc, ConnectionClosed) else None
            error = await self._explain_start_failure(opened, exc)
            await opened.aclose()
            if failed is not None:  # an in-process server that could not start: its own error, as the cause
                reason = f"{type(failed).__name__}: {failed}".splitlines()[0]
                raise ServerStartError(f"the {opened.target.description} failed to start: {reason}") from failed
            if error is not None:
                # one short line; the cause kept is the deepest OSError (the socket's own, without the frames of
                # asyncio's connect), not each layer's restatement of it (the transport's, the engine's)
                root = root_os_error(exc)
                raise error from (root.with_traceback(None) if root is not None else exc)
            raise
        return session, opened

    async def _open_target(self) -> OpenedTarget:
        """:func:`open_target`, bounded by ``connect_timeout`` for a server on the network: a peer that accepts the
        connection and then says nothing (a hung server, a proxy that swallows) would otherwise hold the legacy
        SSE stream's wait for its headers for ever and a WebSocket handshake for its own 10 s."""
        if self.connect_timeout is None or self.target.url is None:
            return await open_target(self.target, **self.transport_options)
        try:
            return await asyncio.wait_for(open_target(self.target, **self.transport_options), self.connect_timeout)
        except TimeoutError:
            raise ServerStartError(
                f"{self.target.url} did not answer within {self.connect_timeout}s", timeout=self.connect_timeout
            ) from None

    async def _explain_start_failure(self, opened: OpenedTarget, exc: BaseException) -> BaseException | None:
        if not isinstance(exc, (ConnectionClosed, TimeoutError, RequestTimeout, OSError)):
            return None
        if opened.stdio is None:
            if opened.target.url is None:  # in process: its own error is the cause when it failed; a hang is told
                if isinstance(exc, (TimeoutError, RequestTimeout)):
                    return ServerStartError(
                        f"the {opened.target.description} did not complete initialization within "
                        f"{self.connect_timeout}s",
                        timeout=self.connect_timeout,
                    )
                return None
            if isinstance(exc, (TimeoutError, RequestTimeout)):
                return ServerStartError(
                    f"{opened.target.url} did not answer within {self.connect_timeout}s", timeout=self.connect_timeout
                )
            return ServerStartError(f"cannot connect to {opened.target.url}: {connect_reason(exc)}")
        if isinstance(exc, (TimeoutError, RequestTimeout)):
            # (closing the session has already stopped the process: its exit code would be our own signal)
            return ServerStartError(
                f"the server {opened.target.description!r} did not complete initialization within "
                f"{self.connect_timeout}s",
                stderr=opened.stderr,
                timeout=self.connect_timeout,
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
        if self.cache is not None:
            self.cache.clear()  # (a new connection: nothing the old one cached is known to hold)
        session = ClientSession(
            conn,
            extensions=self.extensions,
            roots=self._roots,
            sampling_handler=self._sample if self._sampling_handler is not None else None,
            elicitation_handler=self._elicit if self._elicitation_handler is not None else None,
            logging_handler=self._logging_handler,
            notification_handler=self._notification,
            **opts,
        )
        if self.cache is not None:
            session.seen = self.cache.invalidate  # every notification, listen streams' included
        session.on_end = functools.partial(self._session_ended, session)
        if self._telemetry is not None:
            session.peer.tracer = self._telemetry.client_tracer(session, self.target.kind)
            session.input_tracer = self._telemetry
        return session

    def _session_ended(self, session: ClientSession, reason: str) -> None:
        """The connection of ``session`` ended: unless it was replaced (re-initialized) or closed here, the watches
        end with ConnectionClosed (no change can reach them any more)."""
        if self._session is session:
            self._end_watches(ConnectionClosed(reason))

    def _end_watches(self, exc: ConnectionClosed) -> None:
        for watch in list(self._watches):
            watch.fail(exc)

    async def _sample(self, params: SamplingParams) -> Any:
        assert self._sampling_handler is not None
        return sampling_result(await maybe_await(self._sampling_handler(params)))

    async def _elicit(self, params: ElicitationParams) -> JSONDict:
        assert self._elicitation_handler is not None
        answer = await maybe_await(self._elicitation_handler(params))
        if self._relay_answers and isinstance(answer, dict) and "action" in answer:
            return answer  # a proxy relays its own client's answer as it is (no defaults filled in)
        return elicitation_result(answer, params)

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
            await maybe_await(self._on_notification(method, params))

    # ------------------------------------------------------------------ state

    @property
    def session(self) -> ClientSession:
        """The live low-level session (raises when not connected)."""
        if self._session is None:
            if self._lost is not None:
                raise ConnectionClosed(self._lost + " (the next call tries again)")
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
    def server_info(self) -> ServerInfo | None:
        """The server's ``serverInfo``, typed (``.name``, ``.version``, ``.title``, ...) and still the dict it sent
        (``["name"]``); None when a 2026-07-28 server gave none (or gave one without a name and version)."""
        info = self.session.server_info
        if info is None:
            return None
        try:
            return ServerInfo(info)
        except MCPError:  # (an invalid one from a modern server's _meta: no typed view of it)
            return None

    @property
    def server_capabilities(self) -> JSONDict:
        """The capabilities the server declared."""
        return self.session.server_capabilities

    def declare_extension(
        self, extension_id: str, settings: JSONDict | None = None, *, versions: Iterable[str] | None = None
    ) -> None:
        """Declare that this client supports the extension ``extension_id`` with its ``settings`` (``{}`` by
        default), in the revisions ``versions`` (default: every one): sent from the next connection (or, in
        2026-07-28, the next request) on."""
        self.extensions.declare(extension_id, settings, versions=versions)

    def server_extension(self, extension_id: str) -> JSONDict | None:
        """The settings the server declared for the extension ``extension_id``, or None when it did not."""
        return declared_settings(self.session.server_capabilities, extension_id)

    def server_supports_extension(self, extension_id: str) -> bool:
        """Whether the server declared the extension ``extension_id`` (``capabilities.extensions``)."""
        return self.server_extension(extension_id) is not None

    @property
    def instructions(self) -> str | None:
        """The server's instructions for the model, if it gave any."""
        return self.session.instructions

    @property
    def stderr(self) -> str:
        """What a stdio server wrote to its stderr lately (empty for other transports)."""
        return self._opened.stderr if self._opened is not None else ""

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
