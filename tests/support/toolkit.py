"""Connect a client to one of ``tests/support/servers/toolkit_apps.py``'s apps over stdio (a subprocess) or Streamable
HTTP (real uvicorn on 127.0.0.1), in either era, so every toolkit test runs on both transports and both eras.

    async with toolkit_client("compose", "stdio", "modern", elicitation_handler=...) as client: ...

Over HTTP the app object is the caller's to inspect (``app=`` gives it; else a fresh one is built), and a
header ``X-User: <name>`` makes the request's principal ``<name>`` (a stand-in for an authorization layer such
as :func:`mcpkit.auth.protect`, which installs the principal the same way).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from mcpkit import Client
from mcpkit.server.request_context import CURRENT_AUTHORIZATION, ScopeAuthorization, authorize_as
from support.paths import SERVERS

from .asgi import serve_asgi

TESTS = Path(__file__).resolve().parent.parent
APPS_FILE = SERVERS / "toolkit_apps.py"
TRANSPORTS = ("stdio", "http")
ERAS = ("handshake", "modern")


def apps_module() -> ModuleType:
    """``tests/support/servers/toolkit_apps.py`` as a module (imported once)."""
    name = "toolkit_apps"
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, APPS_FILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def build(name: str) -> Any:
    """A fresh app called ``name`` from toolkit_apps."""
    return apps_module().build(name)


class UserHeader:
    """ASGI wrapper: the ``X-User`` header names the request's principal (no header: anonymous), ``X-Scopes`` the
    scopes granted (space-separated), checked by ``rule`` (``(method, params) -> scopes needed``) when given."""

    def __init__(self, app: Any, rule: Any = None) -> None:
        self.app = app
        self.rule = rule

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        user = None
        granted: list[str] = []
        for key, value in scope.get("headers", ()):
            if key == b"x-user":
                user = value.decode()
            elif key == b"x-scopes":
                granted = value.decode().split()
        if user is None:
            await self.app(scope, receive, send)
            return
        token = authorize_as(ScopeAuthorization(user, granted, self.rule))
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_AUTHORIZATION.reset(token)


def tool_calls(app: Any) -> list[str]:
    """The names of the tools called on ``app`` (a server or proxy), in order: an interceptor of ``app`` adds
    each one as the call comes in."""
    called: list[str] = []

    async def record(call: Any, call_next: Any) -> Any:
        if call.method == "tools/call":
            called.append(call.params["name"])
        return await call_next(call)

    app.add_interceptor(record)
    return called


@contextlib.asynccontextmanager
async def serve_http(app: Any, rule: Any = None) -> AsyncIterator[str]:
    """Serve ``app`` over Streamable HTTP on 127.0.0.1 (with the ``X-User`` stand-in); yields the endpoint URL."""
    from mcpkit.transports.http import create_app

    async with serve_asgi(UserHeader(create_app(app), rule)) as port:
        yield f"http://127.0.0.1:{port}/mcp"


@contextlib.asynccontextmanager
async def toolkit_client(
    name: str, transport: str, mode: str, *, app: Any = None, user: str | None = None, **client_options: Any
) -> AsyncIterator[Client]:
    """A connected :class:`Client` to app ``name`` over ``transport`` ("stdio", "http") in ``mode``."""
    if transport == "stdio":
        async with Client([sys.executable, str(APPS_FILE), name], mode=mode, **client_options) as client:
            yield client
        return
    served = app if app is not None else build(name)
    async with serve_http(served) as url:
        headers = {"X-User": user} if user is not None else None
        async with Client(url, mode=mode, headers=headers, **client_options) as client:
            yield client


__all__ = ["ERAS", "TRANSPORTS", "UserHeader", "build", "serve_http", "toolkit_client"]


@contextlib.contextmanager
def serve_http_process(name: str) -> Iterator[str]:
    """App ``name`` served over Streamable HTTP by a process of its own (on a port it picks and says); yields the
    endpoint URL, and stops the process at the end."""
    import re
    import subprocess

    from support.procs import stderr_until, stop

    proc = subprocess.Popen([sys.executable, str(APPS_FILE), name, "http"], stderr=subprocess.PIPE, text=True)
    try:
        lines = stderr_until(proc, "mcpkit: serving http on ")
        match = re.search(r"serving http on (http://\S+)", "".join(lines))
        assert match, lines
        yield match.group(1)
    finally:
        stop(proc)


def processes_of(mark: str) -> set[int]:
    """The ids of the running toolkit app processes started with ``mark`` among their arguments (how many upstream
    processes a proxy holds)."""
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                args = (entry / "cmdline").read_bytes().split(b"\0")
                if str(APPS_FILE).encode() in args and mark.encode() in args:
                    found.add(int(entry.name))
    return found
