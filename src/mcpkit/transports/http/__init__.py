"""HTTP transports (needs ``mcpkit[http]``): Streamable HTTP (both eras), legacy HTTP+SSE and WebSocket.

Server: :func:`create_app` builds one plain ASGI app; :func:`serve` runs it with uvicorn. Client:
:class:`~.streamable_client.StreamableHTTPClientTransport`. Imports are lazy so ``import mcpkit`` pulls in neither
uvicorn nor httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...server.lowlevel import Server
    from .app import MCPApp, create_app
    from .streamable import StreamableHTTPEndpoint, close_sse_stream
    from .streamable_client import SessionExpired, StreamableHTTPClientTransport

_LAZY = {
    "create_app": ".app",
    "MCPApp": ".app",
    "StreamableHTTPEndpoint": ".streamable",
    "close_sse_stream": ".streamable",
    "StreamableHTTPClientTransport": ".streamable_client",
    "SessionExpired": ".streamable_client",
}

_UVICORN_KEYS = frozenset(
    (
        "log_level",
        "access_log",
        "timeout_keep_alive",
        "timeout_graceful_shutdown",
        "limit_concurrency",
        "backlog",
        "ssl_keyfile",
        "ssl_certfile",
        "proxy_headers",
        "forwarded_allow_ips",
        "root_path",
        "loop",
        "http",
    )
)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def build_server(
    server: Server, transport: str = "http", host: str = "127.0.0.1", port: int = 8000, **options: Any
) -> Any:
    """A configured ``uvicorn.Server`` (not started) serving :func:`create_app` for ``server``."""
    import uvicorn

    from .app import create_app
    from .security import default_policy

    if transport not in ("http", "streamable-http", "sse", "ws"):
        raise ValueError(f"unknown HTTP transport {transport!r} (expected 'http', 'sse' or 'ws')")
    uv = {k: options.pop(k) for k in list(options) if k in _UVICORN_KEYS}
    if transport in ("sse", "ws") and "path" in options:
        options[f"{transport}_path"] = options.pop("path")  # ``--path`` names the chosen transport's route
    origins, hosts = default_policy(host, options.pop("allowed_origins", None), options.pop("allowed_hosts", None))
    app = create_app(server, allowed_origins=origins, allowed_hosts=hosts, **options)
    uv.setdefault("log_level", "warning")
    uv.setdefault("timeout_graceful_shutdown", 5)
    config = uvicorn.Config(app, host=host, port=port, lifespan="on", **app.uvicorn_options(), **uv)
    return uvicorn.Server(config)


def serve(server: Server, transport: str = "http", host: str = "127.0.0.1", port: int = 8000, **options: Any) -> None:
    """Serve ``server`` over HTTP with uvicorn (blocking). Every transport is mounted on the one app; ``transport``
    only names the one the caller means (``http``: Streamable HTTP at ``/mcp``; ``sse``: ``/sse``; ``ws``: ``/ws``).
    Binds 127.0.0.1 by default; ``options`` go to :func:`create_app` or to uvicorn (``log_level``, ...)."""
    build_server(server, transport, host, port, **options).run()


__all__ = [
    "MCPApp",
    "SessionExpired",
    "StreamableHTTPClientTransport",
    "StreamableHTTPEndpoint",
    "build_server",
    "close_sse_stream",
    "create_app",
    "serve",
]
