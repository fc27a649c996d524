"""Running the inspector: :func:`start_inspector` serves the page for an :class:`~.session.Inspector` on loopback
(a random port by default), with a new token, behind mcpkit's guarded uvicorn stack
(:func:`mcpkit.transports.http.build_asgi_server`: header and body timeouts, connection cap); :func:`inspect`
is the blocking form ``mcpkit inspect`` uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .._extras import require
from ..transports.http.security import is_loopback
from .sandbox import SandboxApp
from .session import Inspector
from .web import InspectorApp

__all__ = ["RunningInspector", "inspect", "open_in_browser", "start_inspector"]


@dataclass
class RunningInspector:
    """An inspector that listens: its ``url`` (with the token in its fragment), ``port``, the ``app`` and the
    ``inspector``. ``await stop()`` ends it (the connection to the server included)."""

    url: str
    port: int
    app: InspectorApp
    inspector: Inspector
    server: Any
    task: asyncio.Task[Any]
    sandbox: tuple[Any, asyncio.Task[Any]] | None = None  # the MCP Apps sandbox's server (its own port)

    async def stop(self) -> None:
        self.server.should_exit = True
        if self.sandbox is not None:
            self.sandbox[0].should_exit = True
        for task in (self.task, *((self.sandbox[1],) if self.sandbox is not None else ())):
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 10)
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def wait(self) -> None:
        """Until the server stops (Ctrl-C); then the rest (the sandbox, the connection) stops too."""
        try:
            await self.task
        finally:
            await self.stop()


async def start_inspector(
    inspector: Inspector,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    configure: Callable[[InspectorApp], None] | None = None,
) -> RunningInspector:
    """Serve the page for ``inspector`` on ``host:port`` (loopback only; port 0 picks a free one) and connect it
    to its target. ``configure`` may add startup/shutdown hooks or handlers to the app before it starts."""
    require("uvicorn", "mcpkit.inspector")
    from ..transports.http import build_asgi_server

    if not is_loopback(host):
        raise ValueError(f"the inspector listens on loopback only (127.0.0.1, ::1), not {host!r}")
    app = InspectorApp(inspector, token=token or secrets.token_urlsafe(32))
    if configure is not None:
        configure(app)
    shown = f"[{host}]" if ":" in host else host
    if port:
        _check_free(host, port)
    # the MCP Apps sandbox: its own port, so its origin is not the page's (inspector/sandbox.py)
    sandbox = build_asgi_server(SandboxApp(lambda: app.origins), host, 0, log_level="warning")
    # Only the page's server takes the process's signals (Ctrl-C): two uvicorn servers that both do, stopped in
    # the other order, leave SIGTERM pointing at a stopped server.
    sandbox.capture_signals = contextlib.nullcontext
    sandbox_task = await _serving(sandbox, "the MCP Apps sandbox")
    inspector.views.sandbox_origin = f"http://{shown}:{_port(sandbox)}"
    server = build_asgi_server(app, host, port, log_level="warning")
    try:
        task = await _serving(server, "the inspector's server")
    except BaseException:
        sandbox.should_exit = True
        await sandbox_task
        raise
    actual = _port(server)
    app.bind(actual, host)
    url = f"http://{shown}:{actual}/#token={app._token.decode()}"
    return RunningInspector(
        url=url, port=actual, app=app, inspector=inspector, server=server, task=task, sandbox=(sandbox, sandbox_task)
    )


async def _serving(server: Any, what: str) -> asyncio.Task[Any]:
    task: asyncio.Task[Any] = asyncio.ensure_future(server.serve())
    while not server.started and not task.done():
        await asyncio.wait({task}, timeout=0.02)
    if task.done():
        try:
            task.result()  # raises why it did not start
        except SystemExit:  # uvicorn exits when it cannot listen (it logged why)
            raise OSError(f"{what} could not listen") from None
        raise RuntimeError(f"{what} stopped before it listened")
    return task


def _check_free(host: str, port: int) -> None:
    """Raise the :class:`OSError` of binding ``host:port`` (a port in use, say) before uvicorn tries: uvicorn
    logs it and exits the process from inside its serving task instead."""
    import socket

    with socket.create_server((host.strip("[]"), port), family=socket.AF_INET6 if ":" in host else socket.AF_INET):
        pass


def _port(server: Any) -> int:
    return int(server.servers[0].sockets[0].getsockname()[1])


def open_in_browser(url: str) -> None:
    """Open ``url`` in a new browser tab, without waiting for the browser (``mcpkit inspect`` and ``mcpkit dev``)."""
    import webbrowser

    def go() -> None:
        with contextlib.suppress(Exception):
            webbrowser.open(url, new=2)

    threading.Thread(target=go, daemon=True).start()


def inspect(
    target: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    open_browser: bool = True,
    announce: Callable[[str], None] | None = None,
    **inspector_options: Any,
) -> None:
    """Inspect ``target`` (anything ``Client`` accepts) until interrupted: serve the page, print its URL (through
    ``announce``, else on stdout) and open it in the browser unless ``open_browser`` is false."""

    async def main() -> None:
        running = await start_inspector(Inspector(target, **inspector_options), host=host, port=port)
        (announce or _print)(running.url)
        if open_browser:
            open_in_browser(running.url)
        await running.wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


def _print(url: str) -> None:
    print(f"mcpkit inspect: {url}", file=sys.stdout, flush=True)
