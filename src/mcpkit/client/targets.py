"""What a client can connect to, and how: target parsing and opening.

A *target* is anything :class:`~mcpkit.client.client.Client` accepts:

* a command line (``"python server.py --flag"``, shell-split) or an argv list, or a
  :class:`~mcpkit.transports.stdio.StdioServer`: the server is launched as a subprocess and spoken to over stdio;
  a command line whose program is ``python`` or ``python3`` runs under the caller's interpreter
  (``sys.executable``, so the server sees the same virtual environment); any other program (``uv``,
  ``/usr/bin/python3.12``, ``node``) runs as written, and so does the ``command`` of an ``mcp.json`` entry;
* a ``*.py`` file path: run with the current Python interpreter over stdio (a path with spaces is a file when
  one exists there, else a command line);
* an ``http://`` / ``https://`` URL: Streamable HTTP, falling back to the legacy HTTP+SSE transport when the
  server answers the first POST with 400, 404 or 405 (spec, backwards compatibility);
* a ``ws://`` / ``wss://`` URL: the WebSocket extension transport;
* an in-process server object (a low-level :class:`~mcpkit.server.lowlevel.Server` or an ``MCPKit`` app): it is
  served over an in-memory pair, so every message still crosses the wire as encoded bytes;
* an ``mcp.json``-style entry: ``{"command": ..., "args": [...], "env": {...}, "cwd": ...}`` or
  ``{"url": ..., "headers": {...}, "type": "http" | "sse" | "ws"}``; a whole ``{"mcpServers": {...}}`` document
  with one entry; or a path ``"mcp.json"`` / ``"mcp.json#name"``;
* an already-open :class:`~mcpkit.transports.base.Connection` (anything with ``receive``/``send``/``close``).

:func:`parse_target` turns any of these into a :class:`Target`; :func:`open_target` opens it and returns an
:class:`OpenedTarget` (the connection plus what is needed to close it and to explain a failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._options import check_options
from ..protocol.errors import ConnectionClosed
from ..transports.stdio import StdioClientTransport, StdioServer

__all__ = [
    "OpenedTarget",
    "ServerNotFound",
    "ServerStartError",
    "Target",
    "TargetError",
    "load_config",
    "open_target",
    "parse_target",
]

STDIO, HTTP, SSE, WS, MEMORY, CONNECTION = "stdio", "http", "sse", "ws", "memory", "connection"
_HTTP_TYPES = {
    "http": HTTP,
    "streamable-http": HTTP,
    "streamablehttp": HTTP,
    "streamable_http": HTTP,
    "sse": SSE,
    "ws": WS,
    "websocket": WS,
    "stdio": STDIO,
}


class TargetError(ValueError):
    """The target could not be understood (bad config entry, unknown type...)."""


class ServerNotFound(TargetError):
    """The server does not exist: command not on PATH, file missing, config entry missing."""


class ServerStartError(ConnectionError):
    """The server could not be started or died before the connection was established.

    ``stderr`` holds the last lines the process wrote to its stderr (stdio targets), ``returncode`` its exit code,
    ``timeout`` the connect timeout (seconds) when that is what ended the start (None otherwise).
    """

    def __init__(
        self, message: str, *, stderr: str = "", returncode: int | None = None, timeout: float | None = None
    ) -> None:
        self.stderr = stderr
        self.returncode = returncode
        self.timeout = timeout
        full = message
        if returncode is not None:
            full += f" (exit code {returncode})"
        if stderr.strip():
            full += "\n--- server stderr ---\n" + stderr.rstrip()
        super().__init__(full)
        self.message = message


@dataclass
class Target:
    """A parsed target: ``kind`` is one of "stdio", "http", "sse", "ws", "memory", "connection"."""

    kind: str
    stdio: StdioServer | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    server: Any = None
    connection: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    @property
    def description(self) -> str:
        if self.kind == STDIO and self.stdio is not None:
            argv = self.stdio.argv
            return " ".join(argv)
        if self.url is not None:
            return self.url
        if self.kind == MEMORY:
            return f"in-process server {getattr(self.server, 'name', type(self.server).__name__)!r}"
        return self.kind

    @property
    def is_http(self) -> bool:
        return self.kind in (HTTP, SSE)


def _is_server_object(obj: Any) -> bool:
    return callable(getattr(obj, "serve", None)) and callable(getattr(obj, "create_session", None))


def _is_connection(obj: Any) -> bool:
    return all(callable(getattr(obj, a, None)) for a in ("receive", "send", "close"))


def load_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read an ``mcp.json`` file; returns its ``mcpServers`` mapping (or the document when it has none)."""
    p = Path(path)
    if not p.is_file():
        raise ServerNotFound(f"config file not found: {p}")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TargetError(f"{p}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise TargetError(f"{p}: expected a JSON object")
    servers = doc.get("mcpServers", doc.get("servers", doc))
    if not isinstance(servers, dict):
        raise TargetError(f"{p}: mcpServers must be an object")
    return servers


def _from_entry(entry: Mapping[str, Any], *, name: str | None, base_dir: Path | None) -> Target:
    if "mcpServers" in entry or "servers" in entry:
        servers = entry.get("mcpServers", entry.get("servers"))
        if not isinstance(servers, Mapping) or not servers:
            raise TargetError("mcpServers must be a non-empty object")
        if name is None:
            if len(servers) != 1:
                raise TargetError(f"the config has {len(servers)} servers ({', '.join(servers)}): pick one by name")
            name = next(iter(servers))
        if name not in servers:
            raise ServerNotFound(f"no server named {name!r} in the config (have: {', '.join(servers)})")
        sub = servers[name]
        if not isinstance(sub, Mapping):
            raise TargetError(f"server {name!r}: the entry must be an object")
        return _from_entry(sub, name=name, base_dir=base_dir)
    kind = str(entry.get("type", entry.get("transport", ""))).lower() or None
    if kind is not None and kind not in _HTTP_TYPES:
        raise TargetError(f"unknown transport type {kind!r} (expected stdio, http, sse or ws)")
    if "command" in entry:
        command = entry["command"]
        args = entry.get("args") or []
        if not isinstance(command, str) or not isinstance(args, list):
            raise TargetError("'command' must be a string and 'args' a list")
        env = entry.get("env")
        if env is not None and not isinstance(env, Mapping):
            raise TargetError("'env' must be an object")
        cwd = entry.get("cwd")
        if cwd is not None and base_dir is not None and not os.path.isabs(cwd):
            cwd = str(base_dir / cwd)
        argv = [command, *[str(a) for a in args]]
        stdio = StdioServer(
            argv, env={str(k): (None if v is None else str(v)) for k, v in (env or {}).items()}, cwd=cwd
        )
        return Target(STDIO, stdio=stdio, name=name)
    if "url" in entry:
        url = entry["url"]
        if not isinstance(url, str):
            raise TargetError("'url' must be a string")
        target = parse_target(url)
        if kind is not None and kind != STDIO:
            target.kind = _HTTP_TYPES[kind]
        headers = entry.get("headers") or {}
        if not isinstance(headers, Mapping):
            raise TargetError("'headers' must be an object")
        target.headers.update({str(k): str(v) for k, v in headers.items()})
        target.name = name
        return target
    raise TargetError("a config entry needs 'command' (stdio) or 'url' (http, sse, ws)")


def parse_target(
    target: Any,
    *,
    env: Mapping[str, str | None] | None = None,
    cwd: str | None = None,
    headers: Mapping[str, str] | None = None,
    transport: str | None = None,
) -> Target:
    """Turn anything :class:`Client` accepts into a :class:`Target` (see the module docstring)."""
    t = _parse(target)
    if env and t.stdio is not None:
        merged: dict[str, str | None] = dict(t.stdio.env or {})
        merged.update(env)
        t.stdio.env = merged
    if cwd is not None and t.stdio is not None:
        t.stdio.cwd = cwd
    if headers:
        t.headers.update(headers)
    if transport is not None:
        kind = _HTTP_TYPES.get(transport.lower())
        if kind is None or (kind == STDIO) != (t.kind == STDIO) or t.kind in (MEMORY, CONNECTION):
            raise TargetError(f"transport {transport!r} does not fit target {t.description!r}")
        t.kind = kind
    return t


# A command line starting with one of these runs under the caller's interpreter (sys.executable), so
# ``Client("python server.py")`` finds mcpkit in the caller's virtual environment even when the ``python`` on
# PATH is another one (a system Python without mcpkit).
_PYTHON_NAMES = frozenset(("python", "python3"))


def _python_script(argv: list[str]) -> list[str]:
    """``python server.py`` (or ``python3 ...``) and ``server.py --flag`` (a script that is not executable
    itself) run with this Python (``sys.executable``); any other command line runs as given."""
    if argv and argv[0] in _PYTHON_NAMES:
        return [sys.executable, *argv[1:]]
    if argv and argv[0].endswith(".py") and os.path.isfile(argv[0]) and not os.access(argv[0], os.X_OK):
        return [sys.executable, *argv]
    return argv


def _parse(target: Any) -> Target:
    if isinstance(target, Target):
        return target
    if isinstance(target, StdioServer):
        return Target(STDIO, stdio=target)
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if isinstance(target, str):
        s = target.strip()
        if not s:
            raise TargetError("empty target")
        low = s.lower()
        if low.startswith(("http://", "https://")):
            return Target(HTTP, url=s)
        if low.startswith(("ws://", "wss://")):
            return Target(WS, url=s)
        path, _, fragment = s.partition("#")
        # a path with spaces is a file when one exists there, else a command line ("my dir/mcp.json" is a file)
        if path.endswith(".json") and (" " not in path or Path(path).is_file()):
            p = Path(path)
            servers = load_config(p)
            return _from_entry({"mcpServers": servers}, name=fragment or None, base_dir=p.parent)
        if s.endswith(".py") and (" " not in s or Path(s).is_file()):
            if not Path(s).is_file():
                raise ServerNotFound(f"server file not found: {s}")
            return Target(STDIO, stdio=StdioServer([sys.executable, s]))
        return Target(STDIO, stdio=StdioServer(_python_script(shlex.split(s))))
    if isinstance(target, Mapping):
        return _from_entry(target, name=None, base_dir=None)
    if isinstance(target, Sequence) and not isinstance(target, (bytes, bytearray)):
        argv = [str(a) for a in target]
        if not argv:
            raise TargetError("empty command line")
        return Target(STDIO, stdio=StdioServer(_python_script(argv)))
    if _is_server_object(target):
        return Target(MEMORY, server=target)
    if _is_connection(target):
        return Target(CONNECTION, connection=target)
    raise TargetError(f"cannot connect to a {type(target).__name__}: expected a command, URL, config entry or server")


# ---------------------------------------------------------------------------------------------- opening


class OpenedTarget:
    """An open connection to a target, plus how to close it and explain failures."""

    def __init__(
        self,
        target: Target,
        conn: Any,
        *,
        stdio: StdioClientTransport | None = None,
        server_task: asyncio.Task[None] | None = None,
    ) -> None:
        self.target = target
        self.conn = conn
        self.stdio = stdio
        self.server_task = server_task

    @property
    def stderr(self) -> str:
        return self.stdio.stderr_text if self.stdio is not None else ""

    @property
    def returncode(self) -> int | None:
        return self.stdio.returncode if self.stdio is not None else None

    async def process_exited(self, wait: float = 0.0) -> bool:
        """True when the stdio server process has ended (waiting up to ``wait`` seconds for it)."""
        proc = self.stdio.process if self.stdio is not None else None
        if proc is None:
            return False
        if proc.returncode is None and wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), wait)
        return proc.returncode is not None

    async def server_error(self, wait: float = 1.0) -> BaseException | None:
        """The exception an in-process server's serving ended with (its startup's, as a rule), waiting up to
        ``wait`` seconds for it to end; None when it goes on, ended without one, or the target is not in-process.
        """
        task = self.server_task
        if task is None:
            return None
        if not task.done():
            await asyncio.wait({task}, timeout=wait)
        if not task.done() or task.cancelled():
            return None
        return task.exception()

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()
        task = self.server_task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), 2.0)
            except (TimeoutError, Exception):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


def check_command(stdio: StdioServer) -> None:
    """Raise :class:`ServerStartError` when a stdio target's command cannot be started (no command, no such
    file, not on PATH), before a process is spawned."""
    argv = stdio.argv
    if not argv:
        raise TargetError("empty command line")
    if stdio.cwd is not None and not os.path.isdir(stdio.cwd):
        # (else the launch fails with the same error as a missing program, and the message blamed the command)
        what = "is not a directory" if os.path.exists(stdio.cwd) else "does not exist"
        raise ServerNotFound(f"the server's working directory {what}: {stdio.cwd}")
    exe = argv[0]
    if os.sep in exe or (os.altsep and os.altsep in exe):
        base = Path(stdio.cwd or ".") / exe if not os.path.isabs(exe) else Path(exe)
        if not base.exists():
            raise ServerNotFound(f"server command not found: {exe}")
        return
    path = None
    if stdio.env and "PATH" in stdio.env and stdio.env["PATH"] is not None:
        path = stdio.env["PATH"]
    if shutil.which(exe, path=path) is None:
        raise ServerNotFound(f"server command not found on PATH: {exe}{_hint(exe, path)}")


def _hint(exe: str, path: str | None) -> str:
    """What to change in a config entry whose command could not be found, when the mistake is a common one."""
    first = exe.split()[0] if exe.split() else exe
    if first != exe and shutil.which(first, path=path) is not None:
        return " (the command holds its arguments: put the arguments in 'args', a list)"
    stem, dot, ext = exe.rpartition(".")
    if dot and ext.lower() in ("cmd", "bat", "exe") and sys.platform != "win32":
        found = shutil.which(stem, path=path)
        return f" (a Windows program name{f'; here it is {stem!r}' if found else ''})"
    return ""


_STDIO_TRANSPORT_OPTIONS = ("max_message_size", "auth")


async def open_target(target: Target, **transport_options: Any) -> OpenedTarget:
    """Open ``target``: spawn the process, connect the socket, or start the in-process server."""
    options = {**target.options, **transport_options}
    if target.kind == STDIO:
        assert target.stdio is not None
        if options.get("auth") is not None:
            # The spec: stdio SHOULD NOT use the OAuth mechanism; a stdio server takes credentials from its
            # environment. Refuse rather than silently dropping the caller's auth.
            raise ValueError(
                "OAuth applies to HTTP transports only; give a stdio server its credentials through its "
                "environment (env={...} or an mcp.json 'env' entry)"
            )
        # (max_message_size is the one transport option a stdio target takes: another would be silently dropped)
        check_options("a stdio target", transport_options, _STDIO_TRANSPORT_OPTIONS)
        check_command(target.stdio)
        if options.get("max_message_size") is not None:
            target.stdio.max_message_size = int(options["max_message_size"])
        transport = StdioClientTransport(target.stdio)
        try:
            await transport.start()
        except FileNotFoundError as exc:
            raise ServerNotFound(f"server command not found: {target.stdio.argv[0]} ({exc.strerror})") from None
        except PermissionError as exc:
            raise ServerStartError(f"cannot execute {target.stdio.argv[0]}: {exc.strerror}") from None
        except OSError as exc:
            raise ServerStartError(f"cannot start {target.description}: {exc}") from None
        return OpenedTarget(target, transport, stdio=transport)
    if target.kind == MEMORY:
        from ..transports.memory import create_memory_pair

        client_end, server_end = create_memory_pair(tap=options.get("tap"))
        task = asyncio.get_running_loop().create_task(_serve_in_process(target.server, server_end))
        return OpenedTarget(target, client_end, server_task=task)
    if target.kind == CONNECTION:
        return OpenedTarget(target, target.connection)
    if target.kind in (HTTP, SSE, WS):
        return await _open_network(target, options)
    raise TargetError(f"unknown target kind {target.kind!r}")


async def _serve_in_process(server: Any, conn: Any) -> None:
    """Serve ``conn`` (the server's end of an in-memory pair) with ``server``, then close it: a server that
    failed before it served (its lifespan raised) never touched the connection, and the client would wait for
    an answer that cannot come; the client now sees the end at once (and :meth:`OpenedTarget.server_error` why)."""
    try:
        await server.serve(conn)
    finally:
        await conn.close()


_TRANSPORT_CLASSES = {
    HTTP: ("mcpkit.transports.http.streamable_client", "StreamableHTTPClientTransport"),
    SSE: ("mcpkit.transports.http.sse_client", "SSEClientTransport"),
    WS: ("mcpkit.transports.http.ws_client", "WebSocketClientTransport"),
}


def _transport_class(kind: str) -> Any:
    import importlib

    module, name = _TRANSPORT_CLASSES[kind]
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as exc:
        from .._extras import explain

        err = explain(exc, f"a {kind} client target")
        if err is not None:
            raise err from None
        raise TargetError(f"the {kind} client transport is not available: {exc}") from None
    except (ImportError, AttributeError) as exc:
        raise TargetError(f"the {kind} client transport is not available: {exc}") from None


async def _open_network(target: Target, options: dict[str, Any]) -> OpenedTarget:
    cls = _transport_class(target.kind)
    kwargs: dict[str, Any] = dict(options)
    kwargs.pop("tap", None)
    if target.headers:
        kwargs.setdefault("headers", dict(target.headers))
    transport = cls(target.url, **kwargs)
    start = getattr(transport, "start", None)
    if start is not None:
        try:
            await start()
        except ConnectionClosed:
            raise
        except OSError as exc:
            raise ServerStartError(f"cannot connect to {target.url}: {connect_reason(exc)}") from exc
    return OpenedTarget(target, transport)


def root_os_error(exc: BaseException) -> OSError | None:
    """The deepest ``OSError`` in ``exc``'s chain of causes (the socket's own error), if any."""
    found: OSError | None = None
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and not isinstance(current, ServerStartError):
            found = current
        current = current.__cause__ or current.__context__
    return found


def connect_reason(exc: BaseException) -> str:
    """Why a connection could not be made, in a few words."""
    root = root_os_error(exc)
    if isinstance(root, ConnectionRefusedError):
        return "connection refused (is the server running, and on that port?)"
    if root is not None and root.strerror:
        return root.strerror[:1].lower() + root.strerror[1:]
    return str(root or exc)
