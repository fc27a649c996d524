"""The one ASGI app for every HTTP transport: Streamable HTTP at ``/mcp`` (both eras), legacy HTTP+SSE at
``/sse`` + ``/messages`` + ``/message``, WebSocket at ``/ws``. Plain ASGI: mount it in Starlette/FastAPI or serve
it with uvicorn (:func:`mcpkit.transports.http.serve`). One DNS-rebinding policy covers every route."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Unpack

import orjson

from ..._asgi import ASGIApp, AsksAuthorization, MakesInnerRequests, Receive, Scope, Send, lifespan
from ..._options import check_options
from ...hosting import HTTP_REQUEST_SCOPE
from ...stores.config import ScaleConfig
from ...stores.log import SharedFanout
from ..base import DEFAULT_MAX_MESSAGE_SIZE
from .options import EndpointOptions, keys
from .security import make_request_check
from .streamable import StreamableHTTPEndpoint

logger: logging.Logger = logging.getLogger("mcpkit.http")

if TYPE_CHECKING:
    from ...engine import Outgoing
    from ...hosting import Fanout, HostedServer
    from ...stores import EventStore, SessionStore
    from ...stores.config import SharedStores
    from ...stores.fingerprint import HeldClaim


class MCPApp:
    """The routing table (exact paths, ``root_path`` aware) plus the lifespan (startup: the server's fan-out and
    its own lifespan, ``server.startup()``; shutdown: every endpoint, then the server's lifespan and fan-out), the
    health and readiness endpoints, and the first half of a graceful shutdown (:meth:`drain`)."""

    def __init__(
        self,
        routes: dict[str, ASGIApp],
        closers: list[Callable[[], Awaitable[None]]],
        server: HostedServer | None = None,
        *,
        health_path: str | None = None,
        ready_path: str | None = None,
        shared: SharedStores | None = None,
    ) -> None:
        self.routes = routes
        self.server = server  # its fan-out starts at lifespan startup and stops at shutdown
        self._closers = closers
        self.streamable: StreamableHTTPEndpoint | None = None
        self.sse: Any = None
        self.ws: Any = None
        self.shared = shared  # the Redis pieces built from the configuration (closed after the fan-out)
        self.draining: bool = False
        self._started = False  # the ASGI lifespan entered the server's (startup), to leave at shutdown
        self._claim: HeldClaim | None = None  # this worker's fingerprint under the shared prefix, while it runs
        #: why the ASGI lifespan's startup failed (the server's fan-out or lifespan raised), else None
        self.startup_error: Exception | None = None
        probes: list[str] = []
        if health_path:
            probes.append("/" + health_path.strip("/"))
            routes[probes[-1]] = self._health
        if ready_path:
            probes.append("/" + ready_path.strip("/"))
            routes[probes[-1]] = self._readiness
        #: the probe paths (:class:`~mcpkit._asgi.HasProbes`): ``protect`` lets a GET of them through
        self.probe_paths: frozenset[str] = frozenset(probes)
        self._asks: AsksAuthorization | None = server if isinstance(server, AsksAuthorization) else None
        self._asked_too = server.asked_too if isinstance(server, AsksAuthorization) else None
        self._inner_requests = server.inner_requests if isinstance(server, MakesInnerRequests) else None

    @property
    def asks_too(self) -> bool:
        """Whether :meth:`asked_too` may name any request now (the server's answer)."""
        return self._asks is not None and self._asks.asks_too

    def asked_too(self, method: str, params: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
        """What the server's authorization is asked about too for this request (:class:`~mcpkit._asgi.
        AsksAuthorization`: tool search's ``call_tool`` is the call of the tool it names), for ``protect``."""
        return () if self._asked_too is None else self._asked_too(method, params)

    def inner_requests(self, method: str, params: Mapping[str, Any]) -> tuple[tuple[str, dict[str, Any]], ...]:
        """The requests of other methods the server makes for this request (:class:`~mcpkit._asgi.
        MakesInnerRequests`: ``read_resource`` of resources as tools is a ``resources/read``), for ``protect``."""
        return () if self._inner_requests is None else self._inner_requests(method, params)

    async def _startup(self) -> None:
        if self.server is not None:
            try:
                await self.server.start_fanout()
                await self.server.startup()  # the server's lifespan, held until shutdown
            except Exception as exc:
                self.startup_error = exc  # (uvicorn logs it and exits: a caller that started it can say why)
                raise
            self._started = True
            if self.shared is not None:
                # this app's fingerprint under the Redis or PostgreSQL prefix, warning when another app's was
                # there, written again while the worker runs (mcpkit.stores.fingerprint); the backend being away
                # only skips it
                from ...stores.fingerprint import fingerprint
                from ...stores.postgres.connection import PostgresConnection
                from ...stores.redis.connection import RedisConnection

                mine = fingerprint(self.server.name, self.server.component_names())
                conn = self.shared.connection
                if isinstance(conn, RedisConnection):
                    from ...stores.redis.fingerprint import PrefixClaim

                    self._claim = PrefixClaim(conn, mine)
                elif isinstance(conn, PostgresConnection):
                    from ...stores.postgres.fingerprint import PostgresPrefixClaim

                    self._claim = PostgresPrefixClaim(conn, mine)
                if self._claim is not None:
                    await self._claim.start()

    async def _shutdown(self) -> None:
        try:
            await self.aclose()
        finally:
            if self.server is not None:
                if self._started:
                    self._started = False
                    with contextlib.suppress(Exception):
                        await self.server.shutdown()
                with contextlib.suppress(Exception):
                    await self.server.fanout.aclose()
            if self.shared is not None:
                if self._claim is not None:
                    await self._claim.aclose()
                    self._claim = None
                with contextlib.suppress(Exception):
                    await self.shared.aclose()

    async def drain(self, retry_ms: int = 500, timeout: float | None = 5.0) -> None:
        """Graceful shutdown, first half (``mcpkit run`` and :func:`~mcpkit.transports.http.serve` call it when
        told to stop, after the listening socket closed, before uvicorn waits for the requests in flight): the
        readiness endpoint answers 503, GET streams end after a ``retry:`` hint of ``retry_ms`` so clients resume
        them elsewhere, ``subscriptions/listen`` streams end gracefully, and each legacy SSE stream and WebSocket
        ends (1001 for a WebSocket) once the requests in flight on it are answered, waiting at most ``timeout``
        seconds (None: no bound) for them. Under another process manager, call it from its shutdown hook."""
        self.draining = True
        ep = self.streamable
        if ep is not None:
            ep.draining = True  # new GET streams: 503, to be opened on another worker
            ep.sessions.close_streams(retry_ms)
        if self.server is not None:
            with contextlib.suppress(Exception):
                await self.server.close_listeners()
        # a legacy SSE stream or a WebSocket is its session: it ends once its answers are out (uvicorn would hold
        # a stream until its grace period runs out, then cut it, and would close a WebSocket at once, with 1012)
        ends = [ep.drain(timeout) for ep in (self.sse, self.ws) if ep is not None]
        if ends:
            await asyncio.gather(*ends, return_exceptions=True)

    def cut(self) -> None:
        """Graceful shutdown, last step, when the requests in flight had their time (``mcpkit run`` and
        :func:`~mcpkit.transports.http.serve` call it once ``timeout_graceful_shutdown`` is over, then cancel the
        requests still running): each request cancelled from then on is answered with a JSON-RPC error naming the
        shutdown, with its id (HTTP 503, or the last event of its SSE stream), instead of a bare 500. Under another
        process manager, call it just before the requests in flight are cancelled."""
        self.draining = True
        if self.streamable is not None:
            self.streamable.cut()

    async def not_ready(self) -> str | None:
        """Why this worker should get no traffic (None: ready): draining, or the shared fan-out's Redis is
        unreachable."""
        if self.draining:
            return "draining"
        fanout = self.server.fanout if self.server is not None else None
        if not isinstance(fanout, SharedFanout):
            return None
        return await fanout.check()

    async def _health(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Liveness: 200 while the process serves requests."""
        await _probe_answer(scope, send, 200, {"status": "ok"})

    async def _readiness(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Readiness: 200 when this worker should get traffic, else 503 with the reason."""
        reason = await self.not_ready()
        fanout = self.server.fanout if self.server is not None else None
        worker = fanout.worker if isinstance(fanout, SharedFanout) else None
        if reason is None:
            await _probe_answer(scope, send, 200, {"status": "ready", "worker": worker})
        else:
            await _probe_answer(scope, send, 503, {"status": "unavailable", "reason": reason, "worker": worker})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # an exact path of the table without a root_path: the usual request (hot path: docs/architecture.md)
        app = None if scope.get("root_path") else self.routes.get(scope.get("path", ""))
        if app is None:
            app = self._resolve(scope)
            if app is None:
                await self._unrouted(scope, receive, send)
                return
        token = HTTP_REQUEST_SCOPE.set(scope)  # (ctx.headers and RateLimit read it; nothing is copied here)
        try:
            await app(scope, receive, send)
        finally:
            HTTP_REQUEST_SCOPE.reset(token)

    def at_once(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> Outgoing | Awaitable[Any] | None:
        """The served protocol's lane (:mod:`.lane`): a POST whose whole ``body`` is in hand, routed as
        :meth:`__call__` routes it, answered by the Streamable HTTP endpoint's :meth:`~.StreamableHTTPEndpoint.
        at_once` (in the caller's context, which the lane copies for each request). None: not one for the lane
        (another route, a ``root_path``, a POST to screen); nothing was done, the ASGI way serves it."""
        ep = self.streamable
        if ep is None or scope.get("root_path") or self.routes.get(scope["path"]) is not ep:
            return None
        HTTP_REQUEST_SCOPE.set(scope)  # (as __call__ does; the lane's context is the request's own copy)
        return ep.at_once(scope, body, receive, send)

    def _resolve(self, scope: Scope) -> ASGIApp | None:
        """The route of a path under ``root_path`` or with a trailing ``/`` (None: none, or the lifespan)."""
        if scope["type"] == "lifespan":
            return None
        path: str = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if len(path) > 1 and path.endswith("/"):
            path = path[:-1]
        return self.routes.get(path)

    async def _unrouted(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The lifespan, and requests to a path without a route (404; a WebSocket is closed)."""
        kind = scope["type"]
        if kind == "lifespan":
            await lifespan(receive, send, self._shutdown, self._startup)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1000})
        else:
            body = b"Not Found"
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})

    async def aclose(self) -> None:
        for close in self._closers:
            with contextlib.suppress(Exception):
                await close()

    def uvicorn_options(self) -> dict[str, Any]:
        """Options the mounted endpoints need from uvicorn (WebSocket ping/size settings)."""
        if self.ws is not None:
            return dict(self.ws.uvicorn_options())
        return {}


async def _probe_answer(scope: Scope, send: Send, status: int, body: dict[str, Any]) -> None:
    if scope["type"] != "http":
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000})
        return
    headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
    if scope.get("method") not in ("GET", "HEAD"):
        status, body, headers = 405, {"error": "use GET"}, [*headers, (b"allow", b"GET, HEAD")]
    data = orjson.dumps(body)
    headers.append((b"content-length", str(len(data)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope.get("method") == "HEAD" else data})


# Options of every session's engine (mcpkit.engine.Peer), passed to the legacy SSE and WebSocket endpoints too.
_ENGINE_OPTIONS = (
    "max_concurrency",
    "max_waiting",
    "max_waiting_bytes",
    "max_batch_size",
    "default_timeout",
    "max_timeout",
    "cancel_timeout",
)
_ENDPOINT_KEYS = keys(EndpointOptions)


def create_app(
    server: HostedServer,
    *,
    path: str = "/mcp",
    stateless: bool = False,
    json_response: bool = False,
    event_store: EventStore | None = None,
    session_store: SessionStore | None = None,
    session_idle_timeout: float = 1800.0,
    max_sessions: int = 10_000,
    max_sessions_per_client: int = 100,
    allowed_origins: Iterable[str] | str | None = None,
    allowed_hosts: Iterable[str] | str | None = None,
    max_body: int = DEFAULT_MAX_MESSAGE_SIZE,
    sse: bool = True,
    ws: bool = True,
    sse_path: str = "/sse",
    messages_path: str = "/messages",
    ws_path: str = "/ws",
    fanout: Fanout | None = None,
    config: ScaleConfig | None = None,
    health_path: str | None = "/healthz",
    ready_path: str | None = "/readyz",
    max_followers: int | None = None,
    **options: Unpack[EndpointOptions],
) -> MCPApp:
    """Build the ASGI app. ``options`` go to :class:`StreamableHTTPEndpoint` (``retry_interval``, ``keepalive``,
    ``queue_size``, ``queue_bytes``, ``get_stream``, ``tool_headers``, peer options). ``max_sessions`` and
    ``max_sessions_per_client`` bound the sessions of ``/mcp`` and, separately, the streams of legacy ``/sse`` and
    the connections of ``/ws``.
    The engine options among them (``max_concurrency``, ``max_batch_size``, timeouts) apply to the sessions of
    every endpoint: ``/mcp``, ``/sse`` and ``/ws``, and so do the bounds of a connection's outgoing queue
    (``queue_size``, ``queue_bytes``). ``fanout`` (e.g. :class:`~mcpkit.stores.redis.RedisFanout`)
    is given to the server (``server.set_fanout``) so its change notifications reach every worker's clients; the
    app's ASGI lifespan starts it and stops it. Without it the server keeps the one it has (in process by
    default).

    ``config`` (default: :meth:`ScaleConfig.from_env() <mcpkit.stores.config.ScaleConfig.from_env>`, the
    ``MCPKIT_*`` environment variables) is what the workers of one deployment share: with a Redis URL, the session
    store, the event store and the fan-out not given here are built on one Redis connection (and the task store,
    which the server uses unless it chose one: ``Server.use_task_store``), and the key ring
    seals ``requestState`` and list cursors (required then, unless the server was given keys of its own). Without
    one, nothing changes (in-memory stores). ``health_path`` (liveness: 200) and ``ready_path`` (readiness: 503
    while draining or while the shared fan-out cannot reach Redis) answer GET without the Host/Origin checks;
    None leaves them out. ``max_followers``: with a shared fan-out, the streams of requests running on other
    workers one worker follows at once for clients that resume them there (default 256; see
    :mod:`~mcpkit.transports.http.shared`).

    Every option is checked here: a misspelled one is a ``TypeError`` naming the closest."""
    check_options("create_app()", options, _ENDPOINT_KEYS)
    config = ScaleConfig.from_env() if config is None else config
    if config.state_keys:
        server.request_state.adopt(config.state_keys)
    shared = None
    if config.shared:
        if server.request_state.generated:
            raise ValueError(
                "a Redis or PostgreSQL URL is configured (several workers share this endpoint) but no shared keys seal "
                "requestState and list cursors: set MCPKIT_STATE_KEYS (or MCPKIT_STATE_KEYS_FILE, mcpkit run "
                "--state-keys-file), or build the server with request_state_keys"
            )
        if fanout is None and isinstance(server.fanout, SharedFanout):
            fanout = server.fanout  # (given in the server's module: server.set_fanout(RedisFanout(...)))
        shared = config.build(session_store=session_store, event_store=event_store, fanout=fanout)
        assert shared is not None
        session_store, event_store, fanout = shared.session_store, shared.event_store, shared.fanout
        server.use_task_store(shared.task_store)
    if fanout is not None:
        server.set_fanout(fanout)
    check = make_request_check(allowed_origins, allowed_hosts)
    # the engine's own bounds apply to every endpoint's sessions, not only to /mcp's
    given: dict[str, Any] = dict(options)
    engine = {key: given[key] for key in _ENGINE_OPTIONS if key in given}
    # and the bounds of a connection's outgoing queue, to every endpoint's connections
    queues = {key: given[key] for key in ("queue_size", "queue_bytes") if key in given}
    streamable = StreamableHTTPEndpoint(
        server,
        stateless=stateless,
        json_response=json_response,
        event_store=event_store,
        session_store=session_store,
        session_idle_timeout=session_idle_timeout,
        max_sessions=max_sessions,
        max_sessions_per_client=max_sessions_per_client,
        check_request=check,
        max_body=max_body,
        **options,
    )
    routes: dict[str, ASGIApp] = {"/" + path.strip("/"): streamable}
    closers: list[Callable[[], Awaitable[None]]] = [streamable.aclose]
    legacy: Any = None
    websocket: Any = None
    if sse:
        from .sse import LegacySSEEndpoint

        legacy = LegacySSEEndpoint(
            server,
            messages_path=messages_path,
            max_body=max_body,
            check_request=check,
            max_sessions=max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            **queues,
            **engine,
        )
        # (the POST path takes POSTs only, unless it is the stream's path too)
        posts = legacy if messages_path.strip("/") == sse_path.strip("/") else legacy.messages_route
        routes["/" + messages_path.strip("/")] = posts
        routes["/" + sse_path.strip("/")] = legacy
        if messages_path.strip("/") == "messages":
            routes["/message"] = posts  # the singular form some clients use
        closers.append(legacy.aclose)
    if ws:
        from .ws import WebSocketEndpoint

        websocket = WebSocketEndpoint(
            server,
            max_message=max_body,
            check_request=check,
            max_sessions=max_sessions,
            max_sessions_per_client=max_sessions_per_client,
            **queues,
            **engine,
        )
        routes["/" + ws_path.strip("/")] = websocket
        closers.append(websocket.aclose)
    if streamable.shared is not None and max_followers is not None:
        streamable.shared.max_followers = max_followers
    app = MCPApp(routes, closers, server, health_path=health_path, ready_path=ready_path, shared=shared)
    app.streamable = streamable
    app.sse = legacy
    app.ws = websocket
    return app
