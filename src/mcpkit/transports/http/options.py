"""The options of the HTTP server side, as typed dictionaries: what ``app.run("http", ...)``, :func:`serve`,
:func:`build_server` and :func:`create_app` accept besides their named parameters, layer by layer.

Each layer checks what it is given against these keys when it is called (:func:`mcpkit._options.check_options`),
so a misspelled option is a ``TypeError`` naming the closest one at startup; type checkers and IDEs see the same
names through ``**options: Unpack[...]``. No uvicorn here: importing this module costs nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from ...hosting import Fanout
    from ...stores import EventStore, SessionStore
    from ...stores.config import ScaleConfig
    from .modern import ToolHeaders

__all__ = [
    "AppOptions",
    "EndpointOptions",
    "EngineOptions",
    "GuardOptions",
    "RunHTTPOptions",
    "ServeOptions",
    "UvicornOptions",
    "keys",
]


class EngineOptions(TypedDict, total=False):
    """The engine's bounds for every session of every endpoint (``/mcp``, ``/sse``, ``/ws``)."""

    max_concurrency: int
    """Requests of one session handled at once (default 256)."""
    max_waiting: int
    """Requests of one session (a WebSocket connection, a legacy SSE stream) that wait for a slot while all are
    taken, the connection still read meanwhile (default: ``max_concurrency``)."""
    max_waiting_bytes: int
    """Bytes of the frames of those waiting requests (default 16 MiB)."""
    max_batch_size: int
    """Longest JSON-RPC batch accepted (2025-03-26 sessions; default 100)."""
    default_timeout: float | None
    """Default timeout of server-to-client requests, seconds (default 60)."""
    max_timeout: float | None
    """Hard maximum of a request's timeout, progress resets included, seconds (default 600)."""
    cancel_timeout: float
    """How long a cancelled handler may take to stop, seconds (default 5)."""


class EndpointOptions(EngineOptions, total=False):
    """The Streamable HTTP endpoint's options that :func:`create_app` passes on as given."""

    get_stream: bool
    """Serve the handshake era's GET stream (default True)."""
    retry_interval: int | None
    """The SSE ``retry:`` field, milliseconds (2025-11-25 polling; default none)."""
    keepalive: float
    """Seconds between SSE keepalive comments (default 15)."""
    queue_size: int
    """Messages buffered per SSE stream or WebSocket connection (default 256)."""
    queue_bytes: int
    """Bytes buffered per SSE stream or WebSocket connection (default 16 MiB; the message that crosses the bound is
    still buffered)."""
    max_requests_per_session: int
    """Requests of one session in flight at once (default 1024; then queued)."""
    max_queued_per_session: int
    """Requests of one session waiting for their turn (default 768; 429 beyond)."""
    max_queued_bytes_per_session: int
    """Bytes of the requests waiting in one session's turn queue (default 4 MiB; 429 beyond)."""
    tool_headers: ToolHeaders | None
    """``tool name -> {parameter: [header names]}`` for 2026-07-28 ``Mcp-Param-*`` headers (default: from the
    tools' schemas)."""
    cors: bool
    """Answer CORS preflights and add CORS headers for allowed origins (default True)."""


class AppOptions(EndpointOptions, total=False):
    """Everything :func:`create_app` takes (its named parameters and :class:`EndpointOptions`)."""

    path: str
    stateless: bool
    json_response: bool
    event_store: EventStore | None
    session_store: SessionStore | None
    session_idle_timeout: float
    max_sessions: int
    max_sessions_per_client: int
    allowed_origins: Iterable[str] | str | None
    allowed_hosts: Iterable[str] | str | None
    max_body: int
    sse: bool
    ws: bool
    sse_path: str
    messages_path: str
    ws_path: str
    fanout: Fanout | None
    config: ScaleConfig | None
    health_path: str | None
    ready_path: str | None
    max_followers: int | None


class UvicornOptions(TypedDict, total=False):
    """The uvicorn settings :func:`build_server` passes on (see uvicorn's documentation)."""

    log_level: str | int | None
    """uvicorn's own log level (default "warning"); not MCP logging."""
    access_log: bool
    timeout_keep_alive: int
    timeout_graceful_shutdown: int | None
    limit_concurrency: int | None
    backlog: int
    ssl_keyfile: str | None
    ssl_certfile: str | None
    proxy_headers: bool
    forwarded_allow_ips: list[str] | str | None
    root_path: str
    loop: str
    http: str | type[Any]
    h11_max_incomplete_event_size: int | None


class GuardOptions(TypedDict, total=False):
    """The connection guard of :mod:`.limits` (slow and idle connections)."""

    header_timeout: float | None
    body_timeout: float
    send_timeout: float
    max_connections: int | None
    max_header_bytes: int


class ServeOptions(AppOptions, UvicornOptions, GuardOptions, total=False):
    """Everything :func:`build_server` and :func:`serve` take besides ``transport``, ``host`` and ``port``."""


class RunHTTPOptions(ServeOptions, total=False):
    """What ``app.run("http" | "sse" | "ws", ...)`` takes: :class:`ServeOptions` plus where to listen."""

    host: str
    """Interface to bind (default 127.0.0.1)."""
    port: int
    """Port to listen on (default 8000; 0 picks a free one)."""
    announce: bool
    """Print ``mcpkit: serving ... on <url>`` to stderr once listening (default True)."""
    sockets: list[socket.socket] | None
    """Serve on these sockets, already listening (``host`` and ``port`` are then ignored)."""
    worker_grace: float
    """Seconds the sync functions still running on worker threads get once uvicorn has shut down, before the
    process exits without waiting for them (default 1; see the transports guide)."""


def keys(options: type[Any]) -> frozenset[str]:
    """The option names of one of these typed dictionaries."""
    names: frozenset[str] = options.__required_keys__ | options.__optional_keys__
    return names
