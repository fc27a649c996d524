"""HTTP transports (needs ``mcpkit[http]``): Streamable HTTP (both eras), legacy HTTP+SSE and WebSocket.

Server: :func:`create_app` builds one plain ASGI app; :func:`serve` runs it with uvicorn. Client:
:class:`~.streamable_client.StreamableHTTPClientTransport`. Imports are lazy so ``import mcpkit`` pulls in neither
uvicorn nor httpx.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Unpack

from ..._lazy import lazy_getattr
from ..._options import check_choice, check_options
from ..._runtime import DEFAULT_WORKER_GRACE
from .options import GuardOptions, ServeOptions, UvicornOptions, keys

if TYPE_CHECKING:
    from ...hosting import HostedServer
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

_UVICORN_KEYS = keys(UvicornOptions)
_GUARD_KEYS = keys(GuardOptions)
_SERVE_KEYS = keys(ServeOptions)

#: The name of an HTTP transport (every one is served by the same app; the name says which URL is announced).
HTTPTransport: TypeAlias = Literal["http", "streamable-http", "sse", "ws"]
HTTP_TRANSPORTS: tuple[str, ...] = ("http", "streamable-http", "sse", "ws")
_SEE = "mcpkit.transports.http.options"
_CUT_SEND = 1  # seconds the answers of the requests cut off at the end of the graceful shutdown get to go out (x2)


if not TYPE_CHECKING:  # (a type checker reads the imports above: a misspelled name is an error there)
    __getattr__ = lazy_getattr(__name__, _LAZY)


def build_server(
    server: HostedServer,
    transport: HTTPTransport = "http",
    host: str = "127.0.0.1",
    port: int = 8000,
    **options: Unpack[ServeOptions],
) -> Any:
    """A configured ``uvicorn.Server`` (not started) serving :func:`create_app` for ``server``.

    Connection limits (see :mod:`.limits`; each is an option here, of :func:`serve`, ``Server.run`` and
    ``mcpkit run``): ``header_timeout`` (10 s: a connection without a complete request head is closed),
    ``body_timeout`` (30 s: a request body not whole by then closes the connection), ``send_timeout`` (30 s: a
    connection whose peer takes none of what it is sent for that long is aborted), ``max_header_bytes`` (64 KiB:
    a longer request head closes the connection), ``max_connections`` (1024, or the open-file limit minus 200 when
    lower: beyond it the connection waiting longest for a request head is closed to make room), ``backlog`` (2048:
    the kernel's queue of connections not yet accepted), uvicorn's ``limit_concurrency`` (1100: 503 beyond) and
    ``timeout_keep_alive`` (5 s). ``header_timeout=None`` turns the guard off (uvicorn's own behaviour for slow
    clients and connection counts).

    uvicorn's ``http`` option (default ``"auto"``) picks httptools, which the ``http`` extra installs (its server
    CPU per call is about a third of h11's); the guard wraps either. ``http="h11"`` pins the pure-Python parser.

    Every option is checked here, before anything listens: a misspelled one is a ``TypeError`` naming the
    closest (see :class:`~.options.ServeOptions` for them all)."""
    check_choice("the HTTP transport", transport, HTTP_TRANSPORTS)
    check_options(f"the {transport!r} transport", options, _SERVE_KEYS | {"host", "port"}, see=_SEE)
    from .app import create_app
    from .security import default_policy

    rest: dict[str, Any] = dict(options)
    uv = {k: rest.pop(k) for k in list(rest) if k in _UVICORN_KEYS or k in _GUARD_KEYS}
    if transport in ("sse", "ws") and "path" in rest:
        rest[f"{transport}_path"] = rest.pop("path")  # ``--path`` names the chosen transport's route
    origins, hosts = default_policy(host, rest.pop("allowed_origins", None), rest.pop("allowed_hosts", None))
    app = create_app(server, allowed_origins=origins, allowed_hosts=hosts, **rest)
    return build_asgi_server(app, host, port, **app.uvicorn_options(), **uv)


def build_asgi_server(app: Any, host: str = "127.0.0.1", port: int = 8000, **options: Any) -> Any:
    """A configured ``uvicorn.Server`` (not started) for any ASGI ``app``, behind the same connection guard and
    limits as :func:`build_server` (``header_timeout``, ``body_timeout``, ``send_timeout``, ``max_header_bytes``,
    ``max_connections``, ``backlog``, ``limit_concurrency``, ``timeout_keep_alive``; the other ``options`` go to
    ``uvicorn.Config``). mcpkit's own web faces (the inspector) are served this way. ``X-Forwarded-For`` and
    ``-Proto`` count only from the addresses named in ``forwarded_allow_ips`` (or uvicorn's ``FORWARDED_ALLOW_IPS``
    variable): uvicorn's own default, 127.0.0.1, is not trusted unasked."""
    import uvicorn

    from .app import MCPApp
    from .limits import (
        ACCEPT_BURST,
        DEFAULT_BACKLOG,
        DEFAULT_BODY_TIMEOUT,
        DEFAULT_HEADER_TIMEOUT,
        DEFAULT_LIMIT_CONCURRENCY,
        DEFAULT_MAX_HEADER_BYTES,
        DEFAULT_SEND_TIMEOUT,
        DEFAULT_TIMEOUT_KEEP_ALIVE,
        ConnectionGuard,
        guarded_protocol,
        relisten,
        resolve_protocol,
    )

    uv = dict(options)
    guard_options = {k: uv.pop(k) for k in list(uv) if k in _GUARD_KEYS}
    uv.setdefault("log_level", "warning")
    uv.setdefault("timeout_graceful_shutdown", 5)
    uv.setdefault("limit_concurrency", DEFAULT_LIMIT_CONCURRENCY)
    uv.setdefault("timeout_keep_alive", DEFAULT_TIMEOUT_KEEP_ALIVE)
    header_timeout = guard_options.get("header_timeout", DEFAULT_HEADER_TIMEOUT)
    max_connections = guard_options.get("max_connections")  # None: the default (open-file limit aware)
    max_header_bytes = guard_options.get("max_header_bytes") or DEFAULT_MAX_HEADER_BYTES
    uv.setdefault("h11_max_incomplete_event_size", max_header_bytes)
    guard: ConnectionGuard | None = None
    backlog = DEFAULT_BACKLOG  # the kernel's accept queue, which a guarded server sets itself
    if header_timeout is not None:
        base = resolve_protocol(uv.get("http", "auto"))
        if base is not None:
            guard = ConnectionGuard(
                header_timeout=header_timeout,
                body_timeout=guard_options.get("body_timeout") or DEFAULT_BODY_TIMEOUT,
                send_timeout=guard_options.get("send_timeout") or DEFAULT_SEND_TIMEOUT,
                max_connections=max_connections,
                max_header_bytes=max_header_bytes,
            )
            uv["http"] = guarded_protocol(base, guard)
            if isinstance(app, MCPApp):
                from .lane import lane_protocol

                uv["http"] = lane_protocol(uv["http"], app, guard, uv["timeout_keep_alive"])  # (httptools: see .lane)
            backlog = uv.get("backlog") or DEFAULT_BACKLOG
            uv["backlog"] = min(ACCEPT_BURST, backlog)  # asyncio's accept burst; the kernel queue is set below
    uv.setdefault("lifespan", "on")
    if not uv.get("forwarded_allow_ips") and not os.environ.get("FORWARDED_ALLOW_IPS"):
        # uvicorn trusts X-Forwarded-For (and -Proto) from 127.0.0.1 unless told otherwise: any client reaching
        # the server through loopback (a tunnel, a port-forward, a local proxy passing the header on) would choose
        # the address its rate limit and session quota are keyed by. Only named balancers are trusted.
        uv.setdefault("proxy_headers", False)
    config = uvicorn.Config(app, host=host, port=port, **uv)
    mcp = app if isinstance(app, MCPApp) else None

    class DrainingServer(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            # Graceful: stop accepting, end the SSE streams with a retry hint (clients resume elsewhere), wait for
            # the requests in flight (timeout_graceful_shutdown), answer those still running with an error naming
            # the shutdown, then uvicorn runs the lifespan's end.
            for listening in self.servers:  # (uvicorn shuts down only a server that started)
                listening.close()
            grace = self.config.timeout_graceful_shutdown
            if mcp is not None:
                with contextlib.suppress(Exception):
                    await mcp.drain(timeout=grace)
                if grace is not None and await self.cut_after(grace):
                    self.config.timeout_graceful_shutdown = _CUT_SEND  # (their answers' time to go out)
            try:
                await super().shutdown(sockets)
            finally:
                self.config.timeout_graceful_shutdown = grace

        async def cut_after(self, grace: float) -> bool:
            """Wait ``grace`` seconds at most for the requests in flight; cancel those still running, the app told
            first (:meth:`MCPApp.cut`), so that each is answered (uvicorn would cancel them under the app: a bare
            500 each, and an ERROR with a traceback in the log). Whether any was."""
            assert mcp is not None
            state = self.server_state
            loop = asyncio.get_running_loop()
            deadline = loop.time() + grace
            while state.tasks and not self.force_exit and loop.time() < deadline:
                await asyncio.sleep(0.05)
            if not state.tasks or self.force_exit:
                return False
            mcp.cut()
            cut = list(state.tasks)
            for task in cut:
                task.cancel(msg="mcpkit: the server is shutting down")
            await asyncio.wait(cut, timeout=_CUT_SEND)
            for connection in list(state.connections):  # (uvicorn would wait on them, then log an ERROR)
                transport = connection.transport
                if transport is not None and transport.get_write_buffer_size():
                    transport.abort()  # a client that took nothing of what it was sent for that long
            return True

    if guard is None:
        return DrainingServer(config)

    class GuardedServer(DrainingServer):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if not self.should_exit:  # (it listens)
                relisten(self.servers, backlog)

    userver = GuardedServer(config)
    userver.mcpkit_guard = guard  # type: ignore[attr-defined]  # (diagnostics and tests)
    return userver


def serve(
    server: HostedServer,
    transport: HTTPTransport = "http",
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    announce: bool = True,
    sockets: list[socket.socket] | None = None,
    worker_grace: float = DEFAULT_WORKER_GRACE,
    **options: Unpack[ServeOptions],
) -> None:
    """Serve ``server`` over HTTP with uvicorn (blocking). Every transport is mounted on the one app; ``transport``
    only names the one the caller means (``http``: Streamable HTTP at ``/mcp``; ``sse``: ``/sse``; ``ws``: ``/ws``).
    Binds 127.0.0.1 by default; ``options`` go to :func:`create_app` or to uvicorn (``log_level``, ...), checked
    by :func:`build_server` before anything listens.

    Once uvicorn listens, ``mcpkit: serving <transport> on <url>`` is printed to stderr (the real port when
    ``port=0``); ``announce=False`` leaves it out. ``sockets=[...]``: serve on sockets that already listen (host
    and port are then ignored). On SIGTERM or SIGINT the shutdown is graceful: the app drains
    (:meth:`~mcpkit.transports.http.MCPApp.drain`), then requests in flight get ``timeout_graceful_shutdown``
    seconds (5 by default); the sync functions still running on worker threads after that get ``worker_grace``
    seconds (1 by default) before the process exits without waiting for them (one warning names them), and
    ``serve`` returns (after SIGTERM too: the code after it and the ``atexit`` handlers run). ``Server.run`` and
    ``mcpkit run`` come here, through a server class's own ``run()`` override too."""
    from ..._runtime import install_pool

    path = options.get("path")
    endpoint = {"sse": path or "/sse", "ws": path or "/ws"}.get(transport, path or "/mcp")
    # ``sockets``: already listening (the workers of ``mcpkit run --workers``)
    uv = build_server(server, transport, host, port, **options)

    async def serving() -> int | str | None:
        install_pool(worker_grace)  # (sync functions still running at the end get worker_grace, not for ever)
        try:
            await uv.serve(sockets=sockets)
        except SystemExit as exc:  # uvicorn could not start (it logged why, e.g. the port is taken): its exit code,
            return exc.code  # raised below, outside the loop (raised in this task, it left a traceback behind)
        return None

    async def main() -> int | str | None:
        task = asyncio.ensure_future(serving())
        if not announce:
            return await task
        while not uv.started and not task.done():
            await asyncio.wait({task}, timeout=0.02)
        if uv.started and uv.servers and uv.servers[0].sockets:
            bound = uv.servers[0].sockets[0].getsockname()
            shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
            scheme = "ws" if transport == "ws" else "http"
            print(
                f"mcpkit: serving {transport} on {scheme}://{shown}:{bound[1]}{endpoint}", file=sys.stderr, flush=True
            )
        return await task

    with _sigterm_ends_serving(uv):
        try:  # the event loop uvicorn itself would pick (uvloop when configured), as uvicorn.Server.run does
            from uvicorn._compat import asyncio_run

            loop_factory = uv.config.get_loop_factory()
        except (ImportError, AttributeError):  # another uvicorn version: the default loop
            code = asyncio.run(main())
        else:
            code = asyncio_run(main(), loop_factory=loop_factory)
    if code is not None:
        raise SystemExit(code)


@contextlib.contextmanager
def _sigterm_ends_serving(uv: Any) -> Iterator[None]:
    """SIGTERM ends serving and :func:`serve` returns, so the code after it and the ``atexit`` handlers run.

    uvicorn handles SIGTERM while it serves, then raises it again once it has shut down, to "exit as the signal
    would": under the default disposition that killed the process on the spot (no ``atexit`` handler ran, no
    telemetry was flushed). Over the default disposition only (a program's own handler is left alone), in the
    main thread: the first SIGTERM stops uvicorn (before it listens, too) and the one it raises again is taken;
    a later one, while the sync functions still running get their grace, kills the process as usual."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not (
        signal.SIG_DFL
    ):
        yield
        return
    taken = False

    def terminated(signum: int, frame: Any) -> None:
        nonlocal taken
        if taken:  # (a second SIGTERM: the default disposition, now)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
        taken = True
        uv.should_exit = True

    signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


__all__ = [
    "HTTP_TRANSPORTS",
    "HTTPTransport",
    "MCPApp",
    "SessionExpired",
    "StreamableHTTPClientTransport",
    "StreamableHTTPEndpoint",
    "build_asgi_server",
    "build_server",
    "close_sse_stream",
    "create_app",
    "serve",
]
