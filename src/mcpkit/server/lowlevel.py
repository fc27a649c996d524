"""The low-level server: method → handler, capabilities derived from what is registered, both eras.

One :class:`Server` holds the handlers and the things shared by every connection (capabilities, the
``requestState`` sealer, live sessions and ``subscriptions/listen`` streams for notification fan-out). Each
connection gets a :class:`ServerSession` with its own engine :class:`~mcpkit.engine.Peer`.

Era is decided per request: a request whose ``params._meta`` carries ``io.modelcontextprotocol/protocolVersion``
(or ``server/discover``) takes the stateless modern path; anything else belongs to the handshake session of its
connection (``initialize`` first).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import types
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from .._options import check_choice, named_options
from ..engine import MODERN_BATCH_REFUSAL, NULL_OUTBOX, BaseConnection, Outbox, Peer, RequestContext
from ..engine.tap import Tap, TapHub
from ..hosting import ModernContext as ModernContext
from ..protocol import versions
from ..protocol.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MCPError,
    MethodNotFound,
    ResourceNotFound,
    UnknownMethod,
    UnsupportedProtocolVersion,
)
from ..protocol.extensions import Extensions
from ..protocol.jsonrpc import JSONDict
from ..protocol.shaping import server_meta, shape_result
from ..protocol.versions import (
    HANDSHAKE_ONLY,
    LOG_LEVELS,
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_ONLY,
    Features,
)
from .builtins import BUILTINS as _BUILTINS
from .builtins import Listener, checked_queue_size
from .fanout import ChangeFanout, Fanout, LocalFanout
from .interceptors import Call, Interceptor, Interceptors, call_for, run_chain
from .request_context import (
    CURRENT_AUTHORIZATION,
    INPUT_REQUIRED_METHODS,
    InputRequired,
    ServerRequestContext,
    session_binding,
)
from .request_state import RequestStateSealer, request_digest
from .running import Runnable
from .session import NO_SESSION_BATCH_REFUSAL as NO_SESSION_BATCH_REFUSAL
from .session import ServerSession

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..engine import Connection
    from ..protocol.types import Icon
    from ..tasks import TaskStore
    from .tasks import ServerTasks

logger: logging.Logger = logging.getLogger("mcpkit.server")
_CoroutineType = types.CoroutineType

#: A request handler: ``async def handler(ctx, params)`` returning the result (a dict or a pydantic model); a plain
#: function may also return the result dict itself when it has it at once (no coroutine is awaited then).
Handler = Callable[["ServerRequestContext", JSONDict], "Awaitable[JSONDict | BaseModel] | JSONDict"]
F = TypeVar("F", bound=Callable[..., Any])

_current_authorization = CURRENT_AUTHORIZATION.get  # (bound once: the dispatcher's only per-request auth cost)
MAX_INPUT_ROUNDS_STATE = 64  # bound on answers carried in one requestState


class Server(ChangeFanout, Runnable):
    """A low-level MCP server: register handlers per method, serve any transport, both eras.

    Args:
        name, version, title, description, website_url, icons: the server's ``Implementation`` info.
        instructions: optional instructions for the client.
        versions: protocol revisions served (default: all five).
        request_state_keys: HMAC keys for ``requestState`` (share them between workers).
        request_timeout: default timeout for server→client requests (handshake era).
        listen_queue_size: notifications waiting for one ``subscriptions/listen`` stream, >= 1 (full: equal ones merge).
        logging_enabled: declare the ``logging`` capability (default True).

    A misspelled option is a ``TypeError`` naming the closest one.
    """

    #: resource subscriptions one session may hold, and URIs one ``subscriptions/listen`` may name (set it on the
    #: instance: ``server.max_subscriptions = n``); with ``max_subscription_uri`` it bounds what a session keeps
    #: (256 x 4096 characters: 1 MiB at most).
    max_subscriptions = 256
    #: longest subscription URI in characters (-32602 beyond; ``server.max_subscription_uri = n``).
    max_subscription_uri = 4096
    #: largest ``capabilities`` + ``clientInfo`` of an ``initialize``, in bytes of JSON (-32602 beyond): a session
    #: keeps them for its whole life (``server.max_client_metadata = n``).
    max_client_metadata = 64 * 1024
    #: a lifespan the first request enters when no transport did (an object with ``users``): checked at the top
    #: of :meth:`dispatch`; a subclass that sets it defines ``_dispatch_holding`` (dispatch's
    #: arguments; it enters the lifespan, then dispatches), as MCPKit does
    _lazy_lifespan: Any = None
    _dispatch_holding: Callable[..., Coroutine[Any, Any, JSONDict]]
    tasks: ServerTasks | None = None  #: its task support (enable_tasks); None: it runs and declares no tasks
    #: where tasks are kept when :meth:`enable_tasks` is given no store of its own (None: in memory); set by
    #: :meth:`use_task_store`
    task_store: TaskStore | None = None

    @named_options
    def __init__(
        self,
        name: str,
        version: str = "0.1.0",
        *,
        title: str | None = None,
        description: str | None = None,
        website_url: str | None = None,
        icons: Sequence[JSONDict | Icon] | None = None,
        instructions: str | None = None,
        versions: Iterable[str] = versions.ALL_VERSIONS,
        request_state_keys: list[bytes] | None = None,
        request_timeout: float = 300.0,
        listen_queue_size: int = 256,
        logging_enabled: bool = True,
    ) -> None:
        self.name = name
        self.version = version
        info: JSONDict = {"name": name, "version": version}
        if title:
            info["title"] = title
        if description:
            info["description"] = description
        if website_url:
            info["websiteUrl"] = website_url
        if icons:
            info["icons"] = [i if isinstance(i, dict) else i.dump() for i in icons]
        self.info = info
        self.instructions = instructions
        vs = tuple(v for v in versions)
        for v in vs:
            if not versions_is_supported(v):
                check_choice("each of versions", v, versions_mod().ALL_VERSIONS)
        self.handshake_versions: tuple[str, ...] = tuple(v for v in vs if v in versions_mod().HANDSHAKE_VERSIONS)
        self.modern_versions: tuple[str, ...] = tuple(v for v in vs if v in versions_mod().MODERN_VERSIONS)
        self.request_state: RequestStateSealer = RequestStateSealer(request_state_keys)
        self.request_timeout = request_timeout
        self.listen_queue_size: int = checked_queue_size(listen_queue_size)
        self.logging_enabled = logging_enabled
        self.fanout_timeout: float = 5.0
        self.fanout: Fanout = LocalFanout(self)  # how changes reach this worker's and other workers' clients
        self._fanout_start: asyncio.Task[None] | None = None
        self._fanout_warned = float("-inf")  # (loop time of the last "did not start" line: one per 10 s)
        self.experimental: JSONDict = {}
        self.resource_subscriptions = True
        self._handlers: dict[str, Handler] = {}
        self.handlers_version: int = 0  # counts set_handler/remove_handler calls (transports cache implements())
        self._modern_for: tuple[str, ...] | None = None  # the modern_versions _modern_features was built for
        self._modern_features: dict[str, Features] = {}
        self._notification_handlers: dict[str, Callable[[ServerSession, JSONDict | None], Awaitable[None]]] = {}
        self._sessions: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self._stateless_peer: Peer | None = None
        self._listeners: set[Listener] = set()
        self._caps_cache: dict[str, JSONDict] = {}
        #: the extensions declared under ``capabilities.extensions`` (both eras): ``server.extensions[id] = settings``
        self.extensions: Extensions = Extensions(self._caps_cache.clear)
        self._interceptors = Interceptors()
        self._intercepting: Interceptors | None = None  # the interceptors while there are any (dispatch tests it)
        #: ``observer(event, value)`` for every change delivered here ("list_changed", kind; "resource_updated", uri),
        #: whoever listens (a response cache drops what went stale)
        self.change_observers: list[Callable[[str, str], None]] = []
        self._taps = TapHub()
        self._tap: TapHub | None = None  # the taps while there are any (what each peer of this server is given)

    @property
    def info(self) -> JSONDict:
        """The server's ``Implementation`` (``serverInfo``: name, version, ...). Set it to change it, not its items:
        the ``_meta`` of the 2026-07-28 results is encoded from it once, when it is set."""
        return self._info

    @info.setter
    def info(self, info: JSONDict) -> None:
        self._meta_bytes = server_meta(info)  # (what shape_result puts in every modern result without a _meta)
        self._info = info

    def declare_extension(self, extension_id: str, settings: JSONDict | None = None, *, versions: Any = None) -> None:
        """Declare an extension (``{}`` settings by default) in the revisions ``versions`` (default: all); handlers
        see the client's with ``ctx.client_supports_extension(id)`` (:class:`mcpkit.protocol.extensions.Extensions`)."""
        self.extensions.declare(extension_id, settings, versions=versions)

    # ------------------------------------------------------------------ interceptors and taps

    def add_interceptor(
        self, fn: Interceptor, *, methods: Iterable[str] | str | None = None, notifications: bool = False
    ) -> Callable[[], None]:
        """Run ``async fn(call, call_next)`` around every request this server dispatches (``methods``: only those;
        ``notifications=True``: around the client's notifications too, those in ``methods`` if given, where
        ``"notifications/*"`` stands for every one). The first added is the outermost.
        Returns a function that removes it. See :mod:`mcpkit.server.interceptors` for what ``call`` holds and
        what the chain sees (results before they are shaped for the request's revision)."""
        remove = self._interceptors.add(fn, methods, notifications, served=self.has_handler)
        self._intercepting = self._interceptors

        def remover() -> None:
            remove()
            self._intercepting = self._interceptors if self._interceptors.entries else None

        return remover

    def add_middleware(self, *middleware: Any) -> Callable[[], None]:
        """Install each :class:`~mcpkit.server.middleware.Middleware` (outermost first) for the methods it hooks;
        returns a function that removes them all."""
        removers = [m.install(self) for m in middleware]

        def remove() -> None:
            for undo in removers:
                undo()

        return remove

    def add_tap(self, fn: Tap) -> Callable[[], None]:
        """Show every JSON-RPC message of this server, received and sent, to ``fn(event)`` (a
        :class:`~mcpkit.engine.tap.TapEvent`), synchronously: on every peer (each session, the stateless peer of
        2026-07-28 requests), every transport. ``fn`` must not block; what it raises is logged. Returns a function
        that removes it. :class:`~mcpkit.engine.tap.TapRecorder` is a bounded recorder to give it."""
        remove = self._taps.add(fn)
        self._set_tap(self._taps)

        def remover() -> None:
            remove()
            self._set_tap(self._taps if self._taps.taps else None)

        return remover

    def _set_tap(self, tap: TapHub | None) -> None:
        self._tap = tap
        for session in list(self._sessions):
            session.peer.tap = tap
        if self._stateless_peer is not None:
            self._stateless_peer.tap = tap

    # ------------------------------------------------------------------ registration

    def handler(self, method: str) -> Callable[[F], F]:
        """Decorator: register ``async def handler(ctx, params) -> dict`` for ``method``."""

        def register(fn: F) -> F:
            self.set_handler(method, fn)
            return fn

        return register

    def set_handler(self, method: str, fn: Handler) -> None:
        self._handlers[method] = fn
        self._caps_cache.clear()
        self.handlers_version += 1

    def remove_handler(self, method: str) -> None:
        self._handlers.pop(method, None)
        self._caps_cache.clear()
        self.handlers_version += 1

    def has_handler(self, method: str) -> bool:
        return method in self._handlers

    def notification_handler(self, method: str) -> Callable[[F], F]:
        """Decorator: ``async def handler(session, params)`` for an incoming notification."""

        def register(fn: F) -> F:
            self._notification_handlers[method] = fn
            return fn

        return register

    def capabilities(self, feats: Features) -> JSONDict:
        """The server capabilities, derived from the registered handlers, shaped for a revision."""
        cached = self._caps_cache.get(feats.version)
        if cached is not None:
            return cached
        h = self._handlers
        caps: JSONDict = {}
        if "tools/list" in h or "tools/call" in h:
            caps["tools"] = {"listChanged": True}
        if "resources/list" in h or "resources/read" in h or "resources/templates/list" in h:
            res: JSONDict = {"listChanged": True}
            if self.resource_subscriptions:
                res["subscribe"] = True
            caps["resources"] = res
        if "prompts/list" in h or "prompts/get" in h:
            caps["prompts"] = {"listChanged": True}
        if self.logging_enabled:
            caps["logging"] = {}
        if "completion/complete" in h and feats.completions_capability:
            caps["completions"] = {}
        if self.tasks is not None and feats.tasks:
            caps["tasks"] = self.tasks.capability(feats)
        if self.experimental:
            caps["experimental"] = self.experimental
        extensions = self.extensions.for_version(feats.version)
        if extensions is not None:
            caps["extensions"] = extensions
        self._caps_cache[feats.version] = caps
        return caps

    def task_tool(self, name: Any, ctx: ServerRequestContext) -> Any:
        """The tool a ``tools/call`` of ``name`` runs, for the task entry (a low-level server has none; MCPKit's)."""
        return None

    def enable_tasks(self, engine: Any = None, **options: Any) -> ServerTasks:
        """Run tools as tasks in both protocol forms: see :func:`mcpkit.server.tasks.enable_tasks`."""
        from .tasks import enable_tasks

        return enable_tasks(self, engine, **options)

    def use_task_store(self, store: TaskStore) -> None:
        """Keep tasks in ``store``, the store every worker of a deployment shares, unless :meth:`enable_tasks` was
        given a store or an engine of its own (that one is kept). ``create_app`` calls it with the
        ``RedisTaskStore`` its Redis configuration builds (``mcpkit run --workers N --redis URL``), so a task
        started on one worker is read, answered and cancelled on any other. Tasks enabled later without a store
        use it too."""
        self.task_store = store
        if self.tasks is not None:
            self.tasks.engine.use_shared_store(store)

    @property
    def supported_versions(self) -> list[str]:
        """Every revision served, newest first (modern ones lead)."""
        return sorted(self.modern_versions, reverse=True) + sorted(self.handshake_versions, reverse=True)

    def tool_param_headers(self, name: str) -> Mapping[str, Sequence[str]] | None:
        """Tool ``name``'s ``Mcp-Param-*`` headers, which the Streamable HTTP endpoint checks on 2026-07-28 calls:
        None here (a low-level server's tools are its handler's); ``MCPKit`` reads its tools' schemas."""
        return None

    def implements(self, method: str, *, modern: bool) -> bool:
        """Whether this server answers ``method`` in the given era (a registered handler or a built-in)."""
        if modern and method in HANDSHAKE_ONLY:
            return False
        if not modern and method in MODERN_ONLY:
            return False
        return method in self._handlers or method in _BUILTINS

    # ------------------------------------------------------------------ dispatch (shared by both eras)

    def dispatch(
        self,
        rc: RequestContext,
        session: ServerSession | None,
        feats: Features,
        client_caps: JSONDict,
        client_info: JSONDict | None,
        log_level: str | None,
    ) -> JSONDict | Coroutine[Any, Any, JSONDict]:
        """Run ``rc``'s handler and shape its result for the revision ``feats``. Returns the result itself when the
        handler answered at once (it returned a dict: e.g. a plain ``def`` tool that ran inline), otherwise the
        coroutine that awaits the handler and shapes what it returns; the engine awaits what is not a dict."""
        lazy = self._lazy_lifespan
        if lazy is not None and lazy.users == 0:
            return self._dispatch_holding(rc, session, feats, client_caps, client_info, log_level)
        method = rc.method
        params = rc.params or {}
        sctx = ServerRequestContext(self, session, rc, feats, client_caps, client_info, log_level)
        authz = _current_authorization()
        if authz is not None:  # one authorization decision for every transport and every batch item
            authz.check(method, params)
            sctx.principal = authz.principal
        if feats.modern and ("requestState" in params or "inputResponses" in params):
            self._load_answers(sctx, method, params)
        if self._intercepting is not None and (chain := self._intercepting.chain(method)):
            return self._intercepted(chain, sctx, method, params, feats)
        try:
            handler = self._handlers.get(method)
            if handler is not None and method not in (HANDSHAKE_ONLY if feats.modern else MODERN_ONLY):
                pending = handler(sctx, params)  # _call_handler's usual case (hot path: docs/architecture.md)
            else:
                pending = self._call_handler(sctx, method, params, feats)
            if type(pending) is not dict:
                return self._dispatched(pending, sctx, method, params, feats)
            result: JSONDict = pending
        except (InputRequired, ResourceNotFound) as exc:
            result = self._settle(exc, sctx, method, params, feats)
        return shape_result(method, result, feats, self._meta_bytes if feats.modern else None)

    def _call_handler(self, sctx: ServerRequestContext, method: str, params: JSONDict, feats: Features) -> Any:
        """Call the handler of ``method`` (a registered one, else the built-in): what it returns, a result or what
        to await for it. A method of the other era, or one nobody answers, is -32601."""
        if method in (HANDSHAKE_ONLY if feats.modern else MODERN_ONLY):  # a method of the other era
            raise MethodNotFound(f"Method not found: {method}")
        handler = self._handlers.get(method)
        if handler is not None:
            return handler(sctx, params)
        builtin = _BUILTINS.get(method)
        if builtin is None:
            raise UnknownMethod(f"Method not found: {method}")
        return builtin(self, sctx, params)

    async def _intercepted(
        self,
        chain: tuple[Interceptor, ...],
        sctx: ServerRequestContext,
        method: str,
        params: JSONDict,
        feats: Features,
    ) -> JSONDict:
        """:meth:`dispatch` with interceptors: the chain around the handler, then the shaping of what it returns."""

        async def handle(call: Call) -> JSONDict:
            # the innermost step: the handler with the call's params, its result unshaped (a requestState is bound
            # to the params the client sent)
            try:
                pending = self._call_handler(sctx, call.method, call.params, feats)
            except (InputRequired, ResourceNotFound) as exc:
                return self._settle(exc, sctx, method, params, feats)
            return await self._dispatched(pending, sctx, method, params, feats, shaped=False)

        result = await run_chain(chain, call_for(method, params, sctx), handle)
        if not isinstance(result, dict):
            raise TypeError(f"an interceptor of {method!r} returned {type(result).__name__}, not a result dict")
        # shaped as a copy: what the chain returned stays as it was (an interceptor may keep it, e.g. in a cache)
        return shape_result(method, dict(result), feats, self._meta_bytes if feats.modern else None)

    async def _dispatched(
        self,
        pending: Any,
        sctx: ServerRequestContext,
        method: str,
        params: JSONDict,
        feats: Features,
        shaped: bool = True,
    ) -> JSONDict:
        """The rest of :meth:`dispatch` for a handler that did not answer at once: await it, shape its result
        (``shaped=False``: the result as the handler made it, for the interceptors)."""
        try:
            result = await pending if type(pending) is _CoroutineType or inspect.isawaitable(pending) else pending
        except (InputRequired, ResourceNotFound) as exc:
            result = self._settle(exc, sctx, method, params, feats)
        if not isinstance(result, dict):
            # A pydantic model (checked by duck typing so importing the server does not import pydantic).
            result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        if not shaped:
            return result  # type: ignore[no-any-return]
        return shape_result(method, result, feats, self._meta_bytes if feats.modern else None)

    def _settle(
        self,
        exc: InputRequired | ResourceNotFound,
        sctx: ServerRequestContext,
        method: str,
        params: JSONDict,
        feats: Features,
    ) -> JSONDict:
        """What a handler's InputRequired or ResourceNotFound becomes: an ``input_required`` result (for the
        methods that may ask for input; another method's handler that asks gets -32603), InvalidParams
        (2026-07-28: a missing resource is -32602), else itself."""
        if isinstance(exc, InputRequired):
            if method in INPUT_REQUIRED_METHODS:
                return self._input_required(sctx, method, params, exc)
            raise InternalError(
                f"{method} cannot ask the client for input (only {', '.join(sorted(INPUT_REQUIRED_METHODS))})"
            )
        if isinstance(exc, ResourceNotFound) and feats.modern:
            raise InvalidParams(exc.message, exc.data) from None
        raise exc

    def _load_answers(self, sctx: ServerRequestContext, method: str, params: JSONDict) -> None:
        answers: dict[str, JSONDict] = {}
        token = params.get("requestState")
        if token is not None:
            state = self.request_state.open(token)
            if state.get("m") != method or state.get("d") != request_digest(method, params):
                raise InvalidParams("invalid requestState: it belongs to a different request")
            if state.get("p") != sctx.principal:
                raise InvalidParams("invalid requestState: it belongs to a different principal")
            if state.get("s") != session_binding(sctx.session):
                raise InvalidParams("invalid requestState: it belongs to a different session")
            prior = state.get("a") or {}
            if isinstance(prior, dict):
                answers.update(prior)
            sctx.input_state = state.get("x")
        responses = params.get("inputResponses")
        if responses is not None:
            if not isinstance(responses, dict) or not all(isinstance(v, dict) for v in responses.values()):
                raise InvalidParams("inputResponses must be an object of result objects")
            answers.update(responses)
        sctx._answers = answers

    def _input_required(self, sctx: ServerRequestContext, method: str, params: JSONDict, ir: InputRequired) -> JSONDict:
        if len(sctx._answers) >= MAX_INPUT_ROUNDS_STATE:
            raise InvalidRequest("too many input rounds for one request")
        state = self.request_state.seal(
            {
                "m": method,
                "d": request_digest(method, params),
                "a": sctx._answers,
                "p": sctx.principal,
                "s": session_binding(sctx.session),
                **({"x": ir.state} if ir.state is not None else {}),
            }
        )
        return {"resultType": "input_required", "inputRequests": ir.requests, "requestState": state}

    def modern_context(self, meta: JSONDict | None) -> ModernContext:
        """Validate the per-request ``_meta`` of a modern request; return (features, caps, client info, level).

        Raises the error the request gets (-32602 for a missing or malformed key, the unsupported-version error).
        A transport that has to answer these errors itself (HTTP: status 400) calls this before running the request
        and leaves the result in ``rc.validated_meta``, where :meth:`dispatch_modern` takes it instead of reading
        again."""
        try:
            # the usual request, read with one test per key (hot path: docs/architecture.md): a revision served,
            # capabilities, no log level; anything else is read below, which names what is wrong
            if (
                self._modern_for is self.modern_versions
                and type(caps := meta[META_CLIENT_CAPABILITIES]) is dict  # type: ignore[index]
                and META_LOG_LEVEL not in meta  # type: ignore[operator]
            ):
                info = meta.get(META_CLIENT_INFO)  # type: ignore[union-attr]
                served = self._modern_features[meta[META_PROTOCOL_VERSION]]  # type: ignore[index]
                return served, caps, info if type(info) is dict or isinstance(info, dict) else None, None
        except (KeyError, TypeError):  # (no key, no dict, an unhashable version: free until raised)
            pass
        version = meta.get(META_PROTOCOL_VERSION) if meta else None
        if self._modern_for is not self.modern_versions:  # (modern_versions was replaced)
            self._modern_for = self.modern_versions
            self._modern_features = {v: versions.features(v) for v in self.modern_versions}
        feats = self._modern_features.get(version) if type(version) is str else None
        if feats is None:
            if not isinstance(version, str):
                raise InvalidParams(f"missing _meta {META_PROTOCOL_VERSION!r}: required on every 2026-07-28 request")
            if version not in self.modern_versions:
                raise UnsupportedProtocolVersion(version, self.supported_versions)
            feats = versions.features(version)  # (a str subclass)
        assert meta is not None
        caps = meta.get(META_CLIENT_CAPABILITIES)
        if not isinstance(caps, dict):
            raise InvalidParams(f"missing _meta {META_CLIENT_CAPABILITIES!r}: required on every 2026-07-28 request")
        info = meta.get(META_CLIENT_INFO)
        level = meta.get(META_LOG_LEVEL)
        if level is not None and level not in LOG_LEVELS:
            raise InvalidParams(f"invalid log level {level!r}")
        return feats, caps, info if isinstance(info, dict) else None, level

    def dispatch_modern(
        self, rc: RequestContext, session: ServerSession | None = None, meta: JSONDict | None = None
    ) -> Awaitable[JSONDict] | JSONDict:
        """Handle one stateless 2026-07-28 request (used by every transport; ``session``: the connection's, if any;
        ``meta``: its ``_meta``, when the caller has read it already).

        Returns what :meth:`dispatch` returns: the result, or the coroutine that makes it (checks that fail
        raise at once, before anything is awaited)."""
        if rc.sink is not None:
            raise InvalidRequest(MODERN_BATCH_REFUSAL)
        if not self.modern_versions:
            raise MethodNotFound(f"Method not found: {rc.method}")
        read: ModernContext | None = rc.validated_meta  # what the transport read with modern_context(), if it did
        feats, caps, info, level = read if read is not None else self.modern_context(meta or rc.meta)
        return self.dispatch(rc, session, feats, caps, info, level)

    # ------------------------------------------------------------------ serving

    async def startup(self) -> None:
        """Enter what serving needs, for a transport that serves without :meth:`serve` (an ASGI app's lifespan
        calls it at startup): nothing for a low-level server; ``MCPKit`` enters its lifespan."""

    async def shutdown(self) -> None:
        """Leave what :meth:`startup` entered (an ASGI app's lifespan calls it at shutdown)."""

    def stateless_peer(self) -> Peer:
        """The one engine peer that runs this server's stateless 2026-07-28 requests for request-scoped transports
        (HTTP): each request gets a context from ``peer.detached(...)`` and answers on its own outbox."""
        peer = self._stateless_peer
        if peer is None:
            # the engine calls dispatch_modern(rc) directly (session None): no wrapper per request
            peer = self._stateless_peer = Peer(
                NULL_OUTBOX, request_handler=self.dispatch_modern, name=f"server:{self.name}:modern", tap=self._tap
            )
        return peer

    def create_session(self, outbox: Outbox, **peer_options: Any) -> ServerSession:
        """A session for one connection; feed it with ``session.peer`` (``run`` or ``handle``)."""
        return ServerSession(self, outbox, **peer_options)

    async def serve(
        self, conn: Connection, *, drain_timeout: float = 30.0, stop_grace: float = 0.0, **peer_options: Any
    ) -> None:
        """Serve one connection until its input ends, then its requests in flight for ``drain_timeout`` s at most
        (``stop_grace`` s when serving is cancelled, SIGTERM: see :meth:`mcpkit.engine.Peer.run`)."""
        session = self.create_session(conn, **peer_options)
        if isinstance(conn, BaseConnection):  # (its optional capabilities, declared)
            conn.set_fast_path(session.peer.feed, session.peer.inflight_count)
            session.peer.network = conn.network
            session.peer.feeds_in_reader = conn.feeds_in_reader
        session.peer.on_input_end = functools.partial(self._end_listeners, session)
        try:
            await session.peer.run(conn.receive, drain_timeout=drain_timeout, stop_grace=stop_grace)
        finally:
            session.closed = True
            await conn.close()


def versions_mod() -> Any:
    return versions


def versions_is_supported(v: str) -> bool:
    return versions.is_supported(v)


__all__ = [
    "MCPError",
    "InputRequired",
    "Server",
    "ServerRequestContext",
    "ServerSession",
]
