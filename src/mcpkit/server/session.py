"""One connection's server session in the handshake era: :class:`ServerSession` (the engine peer, the negotiated
revision, the client's capabilities and info, and what the client sends before and during ``initialize``).

Every request of the session goes to the server's dispatcher (``Server.dispatch``, or ``Server.dispatch_modern``
for a request carrying 2026-07-28 ``_meta``); ``initialize`` and a request before it are answered here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from ..engine import MODERN_BATCH_REFUSAL, Outbox, Peer, RequestContext
from ..hosting import HostedServer
from ..protocol import versions
from ..protocol.errors import CapabilityNotSupported, InvalidParams, InvalidRequest, MethodNotFound
from ..protocol.jsonrpc import JSONDict
from ..protocol.shaping import shape_implementation
from ..protocol.versions import META_PROTOCOL_VERSION, MODERN_ONLY, Features
from .interceptors import Call, Interceptor, Interceptors, NotificationCall, call_for, run_chain
from .request_context import (
    CLIENT_CAPABILITY_FOR,
    CURRENT_AUTHORIZATION,
    ServerRequestContext,
    level_index,
    log_message,
)

if TYPE_CHECKING:
    from ..engine.tap import TapHub

# Appended to the refusal of a batch sent before initialize to a server that also speaks the handshake era.
NO_SESSION_BATCH_REFUSAL = "; in the handshake era, batches exist only after initialize"

_current_authorization = CURRENT_AUTHORIZATION.get
logger: logging.Logger = logging.getLogger("mcpkit.server")


def _nothing() -> None:
    return None


class SessionServer(HostedServer, Protocol):
    """What a :class:`ServerSession` needs of its server (``Server``)."""

    @property
    def info(self) -> JSONDict: ...  # (read only here: a property of Server, whose setter encodes it)

    instructions: str | None
    max_client_metadata: int
    _intercepting: Interceptors | None
    _tap: TapHub | None
    _notification_handlers: dict[str, Callable[[ServerSession, JSONDict | None], Awaitable[None]]]

    def register_session(self, session: ServerSession) -> None: ...

    @property
    def dispatch(self) -> Callable[..., Awaitable[JSONDict] | JSONDict]:
        """``Server.dispatch(rc, session, features, client_capabilities, client_info, log_level)``."""
        ...

    def dispatch_modern(
        self, rc: RequestContext, session: ServerSession | None = None, meta: JSONDict | None = None
    ) -> Awaitable[JSONDict] | JSONDict: ...


class ServerSession:
    """One connection to a client: the engine peer plus handshake-era state."""

    def __init__(self, server: SessionServer, outbox: Outbox, **peer_options: Any) -> None:
        self.server = server
        self.version: str | None = None
        self.features: Features | None = None
        self.client_capabilities: JSONDict = {}
        self.client_info: JSONDict | None = None
        self.initialized: bool = False
        self._initialized_event: asyncio.Event | None = None
        # notifications/initialized read while initialize was taken but not yet run (a client that writes both at
        # once: requests run as tasks, notifications at once): it counts once initialize has chosen the revision
        self._initialized_early = False
        #: the capabilities its initialize answer declared: the lists it is told about (None: not known here, a
        #: session restored on another worker or a stateless one; the server's current ones then)
        self.server_capabilities: JSONDict | None = None
        self.log_level: str | None = None
        self.subscriptions: set[str] = set()
        self.state: dict[str, Any] = {}
        # A session that stands for no one client (stateless HTTP runs every client's requests on one): what a
        # request sets in it is not kept (session_state is per request; logging/setLevel and resources/subscribe
        # keep nothing), so no client reaches another's state
        self.stateless = False
        self._closed = False
        self._on_close: dict[int, Callable[[], None]] | None = None  # what to undo when it ends (task watchers)
        self.peer: Peer = Peer(
            outbox,
            request_handler=self._on_request,
            notification_handler=self._on_notification,
            batch_policy=self._batch_policy,
            name=f"server:{server.name}",
            tap=server._tap,
            **peer_options,
        )
        self.peer.batch_refusal = (
            MODERN_BATCH_REFUSAL if not server.handshake_versions else MODERN_BATCH_REFUSAL + NO_SESSION_BATCH_REFUSAL
        )
        server.register_session(self)

    @property
    def closed(self) -> bool:
        """The session has ended (its connection closed, a DELETE or its expiry): nothing more is sent to it."""
        return self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        self._closed = value
        callbacks = self._on_close
        if value and callbacks:
            self._on_close = None
            for callback in callbacks.values():
                try:
                    callback()
                except Exception:
                    logger.exception("a callback at the end of a session failed")

    def on_close(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` once when the session ends (at once when it has); returns what cancels that."""
        if self._closed:
            callback()
            return _nothing
        if self._on_close is None:
            self._on_close = {}
        key = id(callback)
        self._on_close[key] = callback

        def cancel() -> None:
            if self._on_close is not None and self._on_close.get(key) is callback:
                del self._on_close[key]

        return cancel

    def _batch_policy(self) -> bool:
        # Batches are accepted in a handshake-era session once initialize has chosen its revision
        # (interoperability with 2025-03-26 peers); modern requests inside such a batch are refused one by one in
        # dispatch_modern. Before initialize a batch cannot be valid in any era (initialize itself must not be
        # batched, and 2026-07-28 has no batches): it is refused whole, in one error, never answered as an array.
        version = self.version
        return version is not None and not versions.is_modern(version)

    def mark_initialized(self) -> None:
        """The client sent ``notifications/initialized`` (or another worker saw it): requests waiting go on."""
        self.initialized = True
        if self._initialized_event is not None:
            self._initialized_event.set()

    async def wait_initialized(self, timeout: float = 10.0) -> None:
        """Server→client requests wait for ``notifications/initialized`` (only ping and logging may go before)."""
        if self.initialized:
            return
        if self._initialized_event is None:
            self._initialized_event = asyncio.Event()
        try:
            await asyncio.wait_for(self._initialized_event.wait(), timeout)
        except TimeoutError:
            raise CapabilityNotSupported("the client has not sent notifications/initialized") from None

    def declared_list_changed(self, kind: str) -> bool:
        """Whether this session was declared ``listChanged`` for the ``kind`` list ("tools", "resources",
        "prompts"): only then is it sent ``notifications/<kind>/list_changed``."""
        caps = self.server_capabilities
        if caps is None:
            feats = self.features
            if feats is None:
                return True  # (nothing is known of what it was told: it is told, as before)
            caps = self.server.capabilities(feats)
        entry = caps.get(kind)
        return isinstance(entry, dict) and entry.get("listChanged") is True

    async def notify(self, method: str, params: JSONDict | None = None) -> None:
        """Send a notification on the session's own channel (not related to a request)."""
        await self.peer.notify(method, params)

    async def request(self, method: str, params: JSONDict | None = None, **kw: Any) -> JSONDict:
        """A server→client request outside any client request (handshake era)."""
        if self.features is None or self.features.modern:
            raise RuntimeError("server-to-client requests need an initialized handshake-era session")
        cap = CLIENT_CAPABILITY_FOR.get(method)
        if cap is not None and not isinstance(self.client_capabilities.get(cap), dict):
            raise CapabilityNotSupported(f"the client did not declare the {cap!r} capability")
        if method != "ping":
            await self.wait_initialized()
        return await self.peer.request(method, params, **kw)

    async def log(self, level: str, data: Any, logger_name: str | None = None) -> bool:
        """Session-level log message (respects ``logging/setLevel``)."""
        if self.features is None or self.features.modern or "logging" not in self.server.capabilities(self.features):
            return False
        if self.log_level is not None and level_index(level) < level_index(self.log_level):
            return False
        await self.peer.notify("notifications/message", log_message(level, data, logger_name))
        return True

    def _on_request(self, rc: RequestContext) -> Awaitable[JSONDict] | JSONDict:
        # It returns the dispatcher's answer or coroutine (hot path: docs/architecture.md), and its checks raise
        # when called, which the engine treats like a raise on await.
        server = self.server
        method = rc.method
        params = rc.params
        meta = params.get("_meta") if params is not None else None
        if type(meta) is dict:
            if META_PROTOCOL_VERSION in meta:
                if rc.sink is None and server.modern_versions:  # dispatch_modern's checks, without its frame
                    era, caps, info, level = server.modern_context(meta)
                    return server.dispatch(rc, self, era, caps, info, level)
                return server.dispatch_modern(rc, self, meta)
        elif method in MODERN_ONLY:
            return server.dispatch_modern(rc, self)
        feats = self.features
        if feats is None or method == "initialize":
            if server._intercepting is not None and (chain := server._intercepting.chain(method)):
                return self._before_initialized_intercepted(chain, rc)
            return self._before_initialized(rc, params)  # answered at once
        return server.dispatch(rc, self, feats, self.client_capabilities, self.client_info, None)

    async def _before_initialized_intercepted(self, chain: tuple[Interceptor, ...], rc: RequestContext) -> JSONDict:
        """``initialize`` (or a request before it) inside the interceptors' chain: its context has the features of
        the revision the server answers with (its newest, when the request names none it serves)."""
        server = self.server
        feats = self.features
        if feats is None:
            requested = (rc.params or {}).get("protocolVersion")
            served = server.handshake_versions or server.modern_versions
            version = versions.negotiate_handshake(requested, served) if isinstance(requested, str) else None
            feats = versions.features(version or max(served))
        p = rc.params or {}
        sctx = ServerRequestContext(server, self, rc, feats, p.get("capabilities") or {}, p.get("clientInfo"), None)
        authz = _current_authorization()
        if authz is not None:
            sctx.principal = authz.principal

        async def handle(call: Call) -> JSONDict:
            return self._before_initialized(rc, call.params)

        result: JSONDict = await run_chain(chain, call_for(rc.method, p, sctx), handle)
        return result

    def _before_initialized(self, rc: RequestContext, params: JSONDict | None) -> JSONDict:
        if rc.method == "initialize":
            return self._initialize(rc, params)
        if rc.method == "ping":
            return {}
        raise InvalidRequest(
            "not initialized: send initialize first (or, for protocol 2026-07-28, "
            f"put {META_PROTOCOL_VERSION!r} in params._meta)"
        )

    def _initialize(self, rc: RequestContext, params: JSONDict | None) -> JSONDict:
        server = self.server
        if rc.sink is not None:
            raise InvalidRequest("initialize MUST NOT be part of a batch")
        if not server.handshake_versions:
            raise MethodNotFound(
                "Method not found: initialize. This server speaks only protocol " + ", ".join(server.modern_versions),
                {"supported": server.supported_versions},
            )
        p = params or {}
        early, self._initialized_early = self._initialized_early, False  # (an initialize that fails drops it)
        requested = p.get("protocolVersion")
        if not isinstance(requested, str):
            raise InvalidParams("initialize: protocolVersion must be a string")
        caps = p.get("capabilities", {})
        if not isinstance(caps, dict):
            raise InvalidParams("initialize: capabilities must be an object")
        info = p.get("clientInfo")
        if info is not None and not isinstance(info, dict):
            raise InvalidParams("initialize: clientInfo must be an object")
        if self.version is not None:
            raise InvalidRequest("already initialized")
        try:
            metadata_size = len(orjson.dumps((caps, info)))
        except orjson.JSONEncodeError:  # nested deeper than orjson writes (254): no client needs that
            metadata_size = server.max_client_metadata + 1
        if metadata_size > server.max_client_metadata:
            raise InvalidParams(
                f"initialize: capabilities and clientInfo larger than {server.max_client_metadata} bytes "
                "(the server's max_client_metadata option)"
            )
        version = versions.negotiate_handshake(requested, server.handshake_versions)
        feats = versions.features(version)
        self.version = version
        self.features = feats
        self.client_capabilities = caps
        self.client_info = info
        if early:
            self.mark_initialized()
        declared = server.capabilities(feats)
        if self.stateless:
            declared = _deliverable_statelessly(declared)
        tasks = declared.get("tasks")
        if tasks is not None and "list" in tasks and self.stateless:
            authz = _current_authorization()
            if authz is None or authz.principal is None:
                # 2025-11-25 tasks: "receivers that cannot identify requestors SHOULD NOT declare the tasks.list
                # capability"; a stateless endpoint identifies a caller by its principal only
                declared = {**declared, "tasks": {k: v for k, v in tasks.items() if k != "list"}}
        self.server_capabilities = declared
        result: JSONDict = {
            "protocolVersion": version,
            "capabilities": declared,
            "serverInfo": shape_implementation(server.info, feats),
        }
        if server.instructions:
            result["instructions"] = server.instructions
        return result

    async def _on_notification(self, method: str, params: JSONDict | None) -> None:
        intercepting = self.server._intercepting
        if intercepting is not None and (chain := intercepting.chain(method, notification=True)):
            authz = _current_authorization()
            principal = authz.principal if authz is not None else None
            call = NotificationCall(method, params or {}, self, self.features, principal)

            async def handle(call: Call) -> None:
                await self._notified(call.method, call.params)

            await run_chain(chain, call, handle)
            return
        await self._notified(method, params)

    async def _notified(self, method: str, params: JSONDict | None) -> None:
        if method == "notifications/initialized":
            if self.version is not None:
                self.mark_initialized()
            elif self.peer.is_running_method("initialize"):
                self._initialized_early = True
            return
        handler = self.server._notification_handlers.get(method)
        if handler is not None:
            await handler(self, params)


__all__ = ["NO_SESSION_BATCH_REFUSAL", "ServerSession", "SessionServer"]


def _deliverable_statelessly(declared: JSONDict) -> JSONDict:
    """``declared`` without what a stateless endpoint cannot deliver: it has no session and no stream of its own
    (GET is 405), so no ``notifications/resources/updated`` or ``*/list_changed`` reaches a client (a notification
    about a request still goes in that request's response stream)."""
    out = dict(declared)
    for key in ("tools", "resources", "prompts"):
        settings = out.get(key)
        if isinstance(settings, dict) and ("listChanged" in settings or "subscribe" in settings):
            out[key] = {k: v for k, v in settings.items() if k not in ("listChanged", "subscribe")}
    return out
