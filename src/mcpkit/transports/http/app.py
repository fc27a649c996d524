"""The one ASGI app for every HTTP transport: Streamable HTTP at ``/mcp`` (both eras), legacy HTTP+SSE at
``/sse`` + ``/messages`` + ``/message``, WebSocket at ``/ws``. Plain ASGI: mount it in Starlette/FastAPI or serve
it with uvicorn (:func:`mcpkit.transports.http.serve`). One DNS-rebinding policy covers every route."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..._asgi import ASGIApp, Receive, Scope, Send, lifespan
from ..base import DEFAULT_MAX_MESSAGE_SIZE
from .security import make_request_check
from .streamable import StreamableHTTPEndpoint

if TYPE_CHECKING:
    from ...hosting import Fanout, HostedServer
    from ...stores import EventStore, SessionStore


class MCPApp:
    """The routing table (exact paths, ``root_path`` aware) plus the lifespan that shuts every endpoint down."""

    def __init__(
        self,
        routes: dict[str, ASGIApp],
        closers: list[Callable[[], Awaitable[None]]],
        server: HostedServer | None = None,
    ) -> None:
        self.routes = routes
        self.server = server  # its fan-out starts at lifespan startup and stops at shutdown
        self._closers = closers
        self.streamable: StreamableHTTPEndpoint | None = None
        self.sse: Any = None
        self.ws: Any = None

    async def _startup(self) -> None:
        if self.server is not None:
            await self.server.start_fanout()

    async def _shutdown(self) -> None:
        try:
            await self.aclose()
        finally:
            if self.server is not None:
                with contextlib.suppress(Exception):
                    await self.server.fanout.aclose()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "lifespan":
            await lifespan(receive, send, self._shutdown, self._startup)
            return
        path: str = scope.get("path", "")
        root = scope.get("root_path", "")
        # an exact path without a root_path (the usual case) needs no normalization
        app = None if root else self.routes.get(path)
        if app is None:
            if root and path.startswith(root):
                path = path[len(root) :] or "/"
            if len(path) > 1 and path.endswith("/"):
                path = path[:-1]
            app = self.routes.get(path)
        if app is None:
            if kind == "websocket":
                await send({"type": "websocket.close", "code": 1000})
                return
            body = b"Not Found"
            await send(
                {
                    "type": "http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"text/plain"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    async def aclose(self) -> None:
        for close in self._closers:
            with contextlib.suppress(Exception):
                await close()

    def uvicorn_options(self) -> dict[str, Any]:
        """Options the mounted endpoints need from uvicorn (WebSocket ping/size settings)."""
        if self.ws is not None and hasattr(self.ws, "uvicorn_options"):
            return dict(self.ws.uvicorn_options())
        return {}


# Options of every session's engine (mcpkit.engine.Peer), passed to the legacy SSE and WebSocket endpoints too.
_ENGINE_OPTIONS = ("max_concurrency", "max_batch_size", "default_timeout", "max_timeout", "cancel_timeout")


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
    **options: Any,
) -> MCPApp:
    """Build the ASGI app. ``options`` go to :class:`StreamableHTTPEndpoint` (``retry_interval``, ``keepalive``,
    ``queue_size``, ``get_stream``, ``tool_headers``, peer options). ``max_sessions`` and
    ``max_sessions_per_client`` bound the sessions of ``/mcp`` and, separately, the streams of legacy ``/sse``.
    The engine options among them (``max_concurrency``, ``max_batch_size``, timeouts) apply to the sessions of
    every endpoint: ``/mcp``, ``/sse`` and ``/ws``. ``fanout`` (e.g. :class:`~mcpkit.stores.redis.RedisFanout`)
    is given to the server (``server.set_fanout``) so its change notifications reach every worker's clients; the
    app's ASGI lifespan starts it and stops it. Without it the server keeps the one it has (in process by
    default)."""
    if fanout is not None:
        server.set_fanout(fanout)
    check = make_request_check(allowed_origins, allowed_hosts)
    # the engine's own bounds apply to every endpoint's sessions, not only to /mcp's
    engine = {key: options[key] for key in _ENGINE_OPTIONS if key in options}
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
            **engine,
        )
        routes["/" + sse_path.strip("/")] = legacy
        routes["/" + messages_path.strip("/")] = legacy
        if messages_path.strip("/") == "messages":
            routes["/message"] = legacy  # the singular form some clients use
        closers.append(legacy.aclose)
    if ws:
        from .ws import WebSocketEndpoint

        websocket = WebSocketEndpoint(server, max_message=max_body, check_request=check, **engine)
        routes["/" + ws_path.strip("/")] = websocket
        if hasattr(websocket, "aclose"):
            closers.append(websocket.aclose)
    app = MCPApp(routes, closers, server)
    app.streamable = streamable
    app.sse = legacy
    app.ws = websocket
    return app
