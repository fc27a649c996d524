"""Serve a server on a real transport for a test, connect a client to it in either era, and stop everything.

* :func:`connect` yields a connected :class:`~mcpkit.Client` for a server over one of :data:`TRANSPORTS`, in one
  of the eras (a handshake revision, or ``2026-07-28``): ``memory`` serves the object in this event loop over an
  in-memory pair (every message still encoded and decoded); ``stdio`` runs it in a subprocess of this interpreter;
  ``http``, ``sse`` and ``ws`` serve it through the public, guarded :func:`~mcpkit.transports.http.build_server`
  (default limits, the Host/Origin policy of a loopback server) on 127.0.0.1, a port the system picks.
* :func:`serve` is that HTTP server on its own (for raw HTTP requests, or several clients); :func:`serve_asgi`
  serves any ASGI app (a Starlette or FastAPI app with the MCP endpoint mounted in it) behind the same guard.

Each stops what it started when the block ends, within a bound: uvicorn shuts down (its port closed), a stdio
server is closed through its stdin, then signalled, and reaped.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from ..client.client import Client
from ..protocol.versions import LATEST_HANDSHAKE
from ._eras import ERA_ALIASES, ERAS, TRANSPORTS, check_transport, era_revision
from ._load import load_server, stdio_command, subprocess_env

if TYPE_CHECKING:
    from ..transports.http.app import MCPApp

HTTP_PATHS: Final = {"http": "/mcp", "sse": "/sse", "ws": "/ws"}
"""Where :func:`~mcpkit.transports.http.create_app` serves each network transport."""
START_TIMEOUT = 15.0
"""Seconds a server may take to listen before :func:`serve` gives up."""
STOP_TIMEOUT = 10.0
"""Seconds uvicorn may take to shut down before it is forced (connections cancelled)."""


@dataclass
class Served:
    """A server listening on 127.0.0.1 for a test.

    Attributes:
        url: the endpoint of the transport it was served for (``http://127.0.0.1:PORT/mcp``, ``.../sse``,
            ``ws://127.0.0.1:PORT/ws``); for :func:`serve_asgi`, the app's root (``http://127.0.0.1:PORT``).
        port: the port the system picked.
        transport: ``"http"``, ``"sse"`` or ``"ws"`` (``"asgi"`` for :func:`serve_asgi`).
        app: the ASGI app served (for :func:`serve`: the :class:`~mcpkit.transports.http.MCPApp`).
    """

    url: str
    port: int
    transport: str
    app: Any = field(repr=False, default=None)

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    def client(self, path: str | None = None, *, era: str = LATEST_HANDSHAKE, **options: Any) -> Client:
        """A :class:`~mcpkit.Client` (not yet connected: ``async with``) for this server in ``era``; ``path``
        (e.g. ``"/api/mcp"``) is joined to :attr:`base_url`, else :attr:`url` is used. A path ending in ``/sse``
        uses the legacy HTTP+SSE transport, ``ws`` URLs WebSocket."""
        url = self.base_url + "/" + path.lstrip("/") if path is not None else self.url
        options.setdefault("protocol_version", era_revision(era))
        if "transport" not in options and url.startswith("http") and url.rstrip("/").endswith("/sse"):
            options["transport"] = "sse"
        return Client(url, **options)


class _StartupFailed(Exception):
    """uvicorn exited because the app's lifespan startup failed (its ``sys.exit(3)``, caught in the task)."""


async def _serving(uv: Any, sockets: list[socket.socket] | None) -> None:
    serving = getattr(uv, "_serve", None) or uv.serve
    try:
        await serving(sockets=sockets)
    except SystemExit as exc:
        # uvicorn's exit when the app's startup failed: raised in a task, it would escape the test's event loop
        raise _StartupFailed(exc.code) from None


async def _start(
    uv: Any,
    what: str,
    sockets: list[socket.socket] | None = None,
    startup_error: Callable[[], BaseException | None] = lambda: None,
) -> asyncio.Task[Any]:
    """Start a built ``uvicorn.Server`` in this loop (without taking the process's signal handlers) and return
    once it listens; raise why it did not (when its startup failed, ``startup_error()`` as the cause)."""
    before = asyncio.all_tasks()
    task: asyncio.Task[Any] = asyncio.ensure_future(_serving(uv, sockets))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while not uv.started:
        if task.done():
            if isinstance(task.exception(), _StartupFailed):
                error = startup_error()
                reason = f"{type(error).__name__}: {error}".splitlines()[0] if error is not None else "see its log"
                raise RuntimeError(f"{what} failed to start: {reason}") from error
            task.result()
            raise RuntimeError(f"{what} stopped before it listened")
        if loop.time() > deadline:
            starting = await _abandon(uv, task, before)
            why = "its startup (the app's lifespan) did not finish" if starting else "it did not listen"
            raise RuntimeError(f"{what} did not start within {START_TIMEOUT:g} s: {why}")
        await asyncio.wait({task}, timeout=0.01)
    return task


async def _abandon(uv: Any, task: asyncio.Task[Any], before: set[asyncio.Task[Any]]) -> bool:
    """Stop a server that never listened (no connection to let finish: nothing is waited for) and its lifespan,
    still starting, cancelled (its cleanup runs), instead of left waiting in the test's loop; True when there was
    such a lifespan."""
    uv.should_exit = uv.force_exit = True
    starting = [t for t in asyncio.all_tasks() - before if _runs(t, "LifespanOn.main")]  # (uvicorn's, unnamed)
    for stuck in (task, *starting):
        stuck.cancel()
    await asyncio.wait({task, *starting}, timeout=STOP_TIMEOUT)
    return bool(starting)


def _runs(task: asyncio.Task[Any], qualname: str) -> bool:
    return getattr(task.get_coro(), "__qualname__", None) == qualname


async def _stop(uv: Any, task: asyncio.Task[Any]) -> None:
    """Shut uvicorn down (graceful within its own timeout), forced after :data:`STOP_TIMEOUT` seconds."""
    uv.should_exit = True
    try:
        await asyncio.wait_for(asyncio.shield(task), STOP_TIMEOUT)
    except TimeoutError:
        uv.force_exit = True
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    except Exception:
        pass  # (it stopped; how is not the test's business)


def _port(uv: Any) -> int:
    return int(uv.servers[0].sockets[0].getsockname()[1])


@contextlib.asynccontextmanager
async def serve(server: Any, transport: str = "http", **options: Any) -> AsyncIterator[Served]:
    """Serve ``server`` (an object, a file or an import path) over HTTP on 127.0.0.1, a free port, through
    :func:`~mcpkit.transports.http.build_server` (its default limits and the loopback Host/Origin policy; every
    transport is mounted, ``transport`` only says which endpoint :attr:`Served.url` names). ``options`` are
    :func:`~mcpkit.transports.http.build_server`'s (checked by it). Stopped when the block ends."""
    from .._extras import require

    require("uvicorn", "mcpkit.testing.serve")
    from ..transports.http import build_server

    if transport not in HTTP_PATHS:
        raise ValueError(f"serve() runs a network transport: one of {', '.join(HTTP_PATHS)}, not {transport!r}")
    options.setdefault("log_level", "warning")
    uv = build_server(load_server(server), transport, "127.0.0.1", 0, **options)  # type: ignore[arg-type]
    app: MCPApp = uv.config.app
    task = await _start(uv, f"the {transport} server", startup_error=lambda: app.startup_error)
    port = _port(uv)
    scheme = "ws" if transport == "ws" else "http"
    try:
        yield Served(f"{scheme}://127.0.0.1:{port}{HTTP_PATHS[transport]}", port, transport, uv.config.app)
    finally:
        await _stop(uv, task)


@contextlib.asynccontextmanager
async def serve_asgi(app: Any, *, sock: socket.socket | None = None, **options: Any) -> AsyncIterator[Served]:
    """Serve any ASGI ``app`` (a Starlette or FastAPI app with :func:`~mcpkit.transports.http.create_app`
    mounted in it, its lifespan included) on 127.0.0.1, a free port, behind the connection guard and limits of
    :func:`~mcpkit.transports.http.build_asgi_server`; ``options`` go there (uvicorn's ``lifespan``, ...).
    :attr:`Served.url` is the app's root: ``served.client("/mcp")`` connects to an endpoint in it.

    ``sock``: a listening socket bound beforehand (when the app must know its own URL before it is built, as an
    OAuth-protected resource does); it is closed when the block ends."""
    from .._extras import require

    require("uvicorn", "mcpkit.testing.serve_asgi")
    from ..transports.http import build_asgi_server

    options.setdefault("log_level", "warning")
    uv = build_asgi_server(app, "127.0.0.1", 0, **options)
    try:
        task = await _start(uv, "the ASGI server", [sock] if sock is not None else None)
        port = _port(uv)
        try:
            yield Served(f"http://127.0.0.1:{port}", port, "asgi", app)
        finally:
            await _stop(uv, task)
    finally:
        if sock is not None:
            sock.close()


def _client_options(era: str, options: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(options)
    if "protocol_version" not in merged and "mode" not in merged:
        merged["protocol_version"] = era_revision(era)
    return merged


@contextlib.asynccontextmanager
async def connect(
    server: Any,
    transport: str = "memory",
    era: str = LATEST_HANDSHAKE,
    *,
    serve_options: Mapping[str, Any] | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """A connected :class:`~mcpkit.Client` for ``server`` over ``transport`` (one of :data:`TRANSPORTS`) in
    ``era`` (a revision, ``"handshake"`` or ``"modern"``), stopped with everything it started when the block ends.

    ``server`` is a server object, a file (``"server.py"``, ``"server.py:app"``) or an import path
    (``"package.module:app"``). Over stdio the server runs in a subprocess of this interpreter, loaded from its
    file or module (an object is found in the module that defines it). ``client_options`` go to ``Client``
    (handlers, ``tap``, timeouts, ...); ``serve_options`` to :func:`serve` for the network transports."""
    check_transport(transport)
    options = _client_options(era, client_options)
    if transport == "memory":
        async with _connected(Client(load_server(server), **options)) as client:
            yield client
        return
    if transport == "stdio":
        env = {**subprocess_env(), **dict(options.pop("env", None) or {})}
        async with _connected(Client(stdio_command(server), env=env, **options)) as client:
            yield client
        return
    async with serve(server, transport, **dict(serve_options or {})) as served:
        if transport == "sse":
            options.setdefault("transport", "sse")
        async with _connected(Client(served.url, **options)) as client:
            yield client


def _stacks() -> str:
    """Every task of the running loop with where it waits (its chain of awaits): what a hang report shows."""
    lines = []
    current = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is current or task.done():
            continue
        frames: list[str] = []
        coro: Any = task.get_coro()
        while coro is not None and len(frames) < 40:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if frame is not None:
                frames.append(
                    f"{frame.f_code.co_name} ({frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno})"
                )
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
        lines.append(f"  {task.get_name()}: " + " > ".join(frames))
    return "\n".join(lines)


@contextlib.asynccontextmanager
async def _connected(client: Client) -> AsyncIterator[Client]:
    """``client`` connected, then closed within :data:`STOP_TIMEOUT` seconds: a close that hangs fails with the
    tasks of the loop and where each waits, instead of hanging the test run."""
    await client.connect()
    try:
        yield client
    finally:
        closing = asyncio.ensure_future(client.aclose())
        done, _ = await asyncio.wait({closing}, timeout=STOP_TIMEOUT)
        if not done:
            where = _stacks()
            closing.cancel()
            with contextlib.suppress(BaseException):
                await closing
            raise RuntimeError(f"the client did not close within {STOP_TIMEOUT:g} s; the tasks of the loop:\n{where}")
        closing.result()


__all__ = [
    "ERAS",
    "ERA_ALIASES",
    "HTTP_PATHS",
    "START_TIMEOUT",
    "STOP_TIMEOUT",
    "TRANSPORTS",
    "Served",
    "check_transport",
    "connect",
    "era_revision",
    "serve",
    "serve_asgi",
]
