"""What a transport, a fan-out and a request context need of a server: the interface below ``server/``.

``mcpkit.server`` holds the server (:class:`~mcpkit.server.lowlevel.Server`, ``ServerSession``); the transports,
:mod:`mcpkit.run`, the fan-out backends in ``stores/`` and the request context hold a server only through these
protocols, so none of them imports ``mcpkit.server`` back and ``Server.run()`` (server -> run -> transports, an
import inside the method) closes no import circle: every arrow from those modules ends here, below ``server/``
(hosting -> engine -> protocol).

A protocol here names only what its users touch; ``Server`` and ``ServerSession`` satisfy them structurally (mypy
checks it wherever a ``Server`` is handed to a transport). Nothing here runs on a message's path.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .engine import Connection, Outbox, Peer
    from .protocol.jsonrpc import JSONDict
    from .protocol.versions import Features
    from .tasks import TaskStore

#: The key of ``HostedSession.state`` under which a session's binding is kept: a stable, unguessable name of the
#: session for what belongs to it (a sealed ``requestState``, tasks created without a principal). A transport whose
#: sessions are restored on other workers sets it from the session id, so that every worker names a session alike.
SESSION_BINDING = "_request_state_binding"

#: What a modern request's ``_meta`` says once validated (``server.modern_context(meta)``): the features of its
#: revision, the client capabilities, the client info and the log level.
ModernContext = tuple["Features", "JSONDict", "JSONDict | None", "str | None"]


class FanoutTarget(Protocol):
    """Where a fan-out delivers the events of other workers (a server): local delivery only, never re-published."""

    async def deliver_list_changed(self, kind: str) -> None:
        """Tell this worker's clients that the ``kind`` list changed."""
        ...

    async def deliver_resource_updated(self, uri: str) -> None:
        """Tell this worker's subscribers of ``uri`` that it changed."""
        ...

    async def deliver_missed(self) -> None:
        """Events of other workers may have been lost (this worker was cut off longer than they are kept): tell this
        worker's clients to look again (every list changed, every subscribed resource updated)."""
        ...


@runtime_checkable
class Fanout(Protocol):
    """How a server's change notifications reach the clients of OTHER workers: the server is given one
    (``create_app(server, fanout=...)`` or ``server.set_fanout(...)``) and owns it.

    ``server.notify_list_changed`` / ``notify_resource_updated`` call :meth:`publish`, which delivers the event to
    this worker's sessions and listen streams (the bound server's ``deliver_list_changed`` /
    ``deliver_resource_updated``) and tells the other workers, whose fan-outs deliver it there the same way (local
    delivery only, never re-published). A fan-out that keeps one order for all (``RedisFanout``) delivers this
    worker's own events from that order too.
    Session-record announcements (``session_changed`` / ``on_session_changed``) keep the copies of a handshake
    session held by several workers in step (the Streamable HTTP endpoint uses them with a session store).
    """

    @property
    def running(self) -> bool:
        """True once events from other workers are being received (always True for ``LocalFanout``)."""
        ...

    def bind(self, server: FanoutTarget) -> None:
        """Called by ``server.set_fanout``: where events from other workers are delivered."""
        ...

    async def start(self) -> None:
        """Begin receiving other workers' events (idempotent)."""
        ...

    async def publish(self, event: str, value: str) -> None:
        """Deliver ``event`` ("list_changed" with a kind, "resource_updated" with a URI) to this worker's clients and
        tell the other workers."""
        ...

    async def session_changed(self, session_id: str) -> None:
        """Tell the other workers that session ``session_id``'s stored record changed (or that it ended)."""
        ...

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Call ``await listener(session_id)`` when another worker announces a session change."""
        ...

    async def aclose(self) -> None:
        """Stop receiving; later publications are dropped."""
        ...


class HostedSession(Protocol):
    """One connection's server session as its transport and request context see it (``ServerSession``)."""

    peer: Peer
    version: str | None
    features: Features | None
    client_capabilities: JSONDict
    client_info: JSONDict | None
    initialized: bool
    log_level: str | None
    subscriptions: set[str]
    state: dict[str, Any]
    stateless: bool  # it stands for no one client (stateless HTTP): requests keep nothing in it

    # (a property, as ServerSession's is: pyright holds a protocol's mutable attribute to be an attribute in the
    # class too, and refused every MCPKit as a HostedServer, so app.run() and create_app(app))
    @property
    def closed(self) -> bool:
        """The session has ended: nothing more is sent to it."""
        ...

    @closed.setter
    def closed(self, value: bool) -> None: ...

    def mark_initialized(self) -> None:
        """The client sent ``notifications/initialized`` (here, or on another worker: a restored session)."""
        ...

    async def wait_initialized(self, timeout: float = 10.0) -> None:
        """Return once the client sent ``notifications/initialized``."""
        ...

    def declared_list_changed(self, kind: str) -> bool:
        """Whether the session was declared ``listChanged`` for the ``kind`` list (only then is it sent
        ``notifications/<kind>/list_changed``)."""
        ...

    def on_close(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback()`` once when the session ends (at once when it has); returns what cancels that."""
        ...


class StateKeys(Protocol):
    """The key ring that seals a server's ``requestState`` (and, for ``MCPKit``, its list cursors)."""

    @property
    def generated(self) -> bool:
        """True while the ring is one random key of this process (not shared with other workers)."""
        ...

    def adopt(self, keys: Sequence[bytes]) -> bool:
        """Use the shared ring ``keys`` unless the server was given keys of its own; True when taken."""
        ...


class HostedServer(FanoutTarget, Protocol):
    """A server as the transports, :mod:`mcpkit.run` and a request context see it (``Server``, ``MCPKit``)."""

    name: str
    handshake_versions: tuple[str, ...]
    modern_versions: tuple[str, ...]
    handlers_version: int
    request_timeout: float
    fanout: Fanout

    @property
    def request_state(self) -> StateKeys:
        """The key ring of ``requestState`` and list cursors."""
        ...

    @property
    def supported_versions(self) -> list[str]:
        """Every revision served, newest first."""
        ...

    def capabilities(self, feats: Features) -> JSONDict:
        """The server capabilities shaped for a revision."""
        ...

    def implements(self, method: str, *, modern: bool) -> bool:
        """Whether the server answers ``method`` in the given era."""
        ...

    def tool_param_headers(self, name: str) -> Mapping[str, Sequence[str]] | None:
        """Tool ``name``'s ``Mcp-Param-*`` headers (``x-mcp-header`` annotations: header name -> argument path);
        None when it has none or is unknown (``Server``: None; ``MCPKit``: from the tool's input schema). The
        Streamable HTTP endpoint remembers the answer for a name until ``handlers_version`` changes: a server whose
        answer changes counts that there (``MCPKit`` does when its tools change)."""
        ...

    def component_names(self) -> list[str]:
        """The names of the tools, the URIs of the resources (and templates) and the names of the prompts it
        serves (``Server``: none; ``MCPKit``: its registries): the app's fingerprint under a shared Redis prefix."""
        ...

    def modern_context(self, meta: JSONDict | None) -> ModernContext:
        """Validate a modern request's ``_meta`` (raises the error the request gets)."""
        ...

    def create_session(self, outbox: Outbox, **peer_options: Any) -> HostedSession:
        """A session for one connection."""
        ...

    def stateless_peer(self) -> Peer:
        """The engine peer that runs stateless 2026-07-28 requests."""
        ...

    async def serve(self, conn: Connection, **peer_options: Any) -> None:
        """Serve one connection until its input ends."""
        ...

    def set_fanout(self, fanout: Fanout) -> None:
        """Give the server its fan-out."""
        ...

    async def start_fanout(self) -> None:
        """Start receiving other workers' events."""
        ...

    def use_task_store(self, store: TaskStore) -> None:
        """Keep tasks in the store every worker shares (unless the server chose a store itself)."""
        ...

    async def close_listeners(self) -> None:
        """End every ``subscriptions/listen`` stream (shutdown)."""
        ...

    async def startup(self) -> None:
        """Enter what serving needs (``MCPKit``: its lifespan; counted, paired with :meth:`shutdown`)."""
        ...

    async def shutdown(self) -> None:
        """Leave what :meth:`startup` entered."""
        ...


#: The ASGI scope of the HTTP request (or WebSocket upgrade) that carried the request being served, set by the HTTP
#: app (``mcpkit.transports.http.create_app``) around each ASGI call, one set per call whatever reads it; None
#: elsewhere (stdio, in-process). Tasks a handler starts inherit it. Read it through :func:`http_request_headers`
#: (``ctx.headers``: :class:`RequestHeaders`) and :func:`http_client_address`.
HTTP_REQUEST_SCOPE: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "mcpkit_http_request_scope", default=None
)


def http_request_headers() -> Sequence[tuple[bytes, bytes]] | None:
    """The raw headers of the HTTP request being served, as ASGI gives them (lowercase byte names, byte values);
    None outside HTTP."""
    scope = HTTP_REQUEST_SCOPE.get()
    return None if scope is None else scope.get("headers")


def http_client_address() -> str | None:
    """The host of the peer that sent the HTTP request being served (or opened the WebSocket): ASGI's
    ``scope["client"][0]``, which uvicorn takes from ``X-Forwarded-For`` only when the connection comes from a
    trusted balancer (``--forwarded-allow-ips``); None outside HTTP and when the server does not know it (a Unix
    socket). ``RateLimit`` keys anonymous HTTP callers by it."""
    scope = HTTP_REQUEST_SCOPE.get()
    peer = None if scope is None else scope.get("client")
    return str(peer[0]) if peer else None


class RequestHeaders(Mapping[str, str]):
    """The headers of an HTTP request, read-only: names are case-insensitive (``headers["Authorization"]`` and
    ``headers["authorization"]`` are the same), values are text (latin-1, as HTTP defines them), a name sent
    several times reads as its values joined by ``", "`` (:meth:`get_all` gives them one by one)."""

    __slots__ = ("_map", "_raw")

    def __init__(self, raw: Sequence[tuple[bytes, bytes]]) -> None:
        self._raw = raw
        merged: dict[str, str] = {}
        for name, value in raw:
            key = name.decode("latin-1").lower()
            text = value.decode("latin-1")
            merged[key] = f"{merged[key]}, {text}" if key in merged else text
        self._map = merged

    def __getitem__(self, name: str) -> str:
        return self._map[name.lower()]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._map

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def get_all(self, name: str) -> list[str]:
        """Every value of header ``name``, in the order they came."""
        key = name.lower().encode("latin-1")
        return [value.decode("latin-1") for n, value in self._raw if n.lower() == key]

    def __repr__(self) -> str:
        return f"RequestHeaders({self._map!r})"


class LocalFanout:
    """The default :class:`Fanout`: one worker; a change is delivered to this worker's clients and told to nobody
    else."""

    running = True

    def __init__(self, server: FanoutTarget | None = None) -> None:
        self.server = server

    def bind(self, server: FanoutTarget) -> None:
        self.server = server

    async def start(self) -> None:
        pass

    async def publish(self, event: str, value: str) -> None:
        await deliver(self.server, event, value)

    async def session_changed(self, session_id: str) -> None:
        pass

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def deliver(server: FanoutTarget | None, event: str, value: str) -> None:
    """Deliver a published event to this worker's clients (``server.deliver_*``; nothing for an unknown event)."""
    if server is None:
        return
    if event == "list_changed":
        await server.deliver_list_changed(value)
    elif event == "resource_updated":
        await server.deliver_resource_updated(value)


MAX_KEYS = 8
"""Keys one ``requestState`` / cursor key ring holds at most (a forged state costs one HMAC per key): the server's
sealer and the workers' configuration both check it."""

MIN_KEY_BYTES = 32
"""The shortest key of such a ring, in bytes (256 bits, the size of the HMAC-SHA-256 it keys)."""

#: How to make a key, for the error that refuses one.
_MAKE_A_KEY = 'make one with: python -c "import secrets; print(secrets.token_urlsafe(32))"'


def check_key_ring(keys: Iterable[bytes], *, source: str = "key ring") -> list[bytes]:
    """``keys`` as a list, once checked: at most :data:`MAX_KEYS` keys, each ``bytes`` of at least
    :data:`MIN_KEY_BYTES`. Raises ``ValueError`` (``TypeError`` for a key that is not bytes) naming ``source``."""
    ring = list(keys)
    if len(ring) > MAX_KEYS:
        raise ValueError(f"{source}: {len(ring)} keys; a key ring holds at most {MAX_KEYS}")
    for key in ring:
        if not isinstance(key, bytes):
            raise TypeError(f"{source}: a key must be bytes, not {type(key).__name__} (e.g. text.encode())")
        if len(key) < MIN_KEY_BYTES:
            raise ValueError(
                f"{source}: a key has {len(key)} bytes, at least {MIN_KEY_BYTES} bytes are needed; {_MAKE_A_KEY}"
            )
    return ring


__all__ = [
    "HTTP_REQUEST_SCOPE",
    "http_client_address",
    "http_request_headers",
    "MAX_KEYS",
    "MIN_KEY_BYTES",
    "Fanout",
    "FanoutTarget",
    "HostedServer",
    "HostedSession",
    "LocalFanout",
    "ModernContext",
    "RequestHeaders",
    "SESSION_BINDING",
    "StateKeys",
    "check_key_ring",
    "deliver",
]
