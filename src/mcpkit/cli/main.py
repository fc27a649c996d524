"""The ``mcpkit`` command line.

``mcpkit run path/to/server.py[:app]`` serves an MCP server (stdio by default, or ``--transport http|sse|ws``).
Client commands (``tools``, ``call``, ``read``, ...) live in :mod:`mcpkit.cli.client_commands` (how they connect:
:mod:`mcpkit.cli.connecting`).
Heavy imports (rich, httpx, uvicorn) happen inside the commands that need them, so ``mcpkit run`` starts fast.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from .._version import __version__
from ._errors import CommandError, LoadError
from ._params import COUNT, LOG_LEVEL, PORT, SECONDS, SECONDS_OR_ZERO


def load_module(path: str) -> ModuleType:
    """Import a Python file as a module, with clear errors for a missing file or a broken module."""
    file = Path(path)
    if file.is_dir():
        candidate = file / "server.py"
        if not candidate.is_file():
            raise LoadError(f"{path} is a directory without a server.py")
        file = candidate
    if not file.is_file():
        raise LoadError(f"no such file: {path}")
    if file.suffix != ".py":
        raise LoadError(f"{path} is not a Python file (.py)")
    module_name = f"mcpkit_user_{file.stem}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    parent = str(file.resolve().parent)
    if parent not in sys.path:
        sys.path.insert(0, parent)  # let the server import its sibling modules
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        code = (exc.text or "").rstrip()
        raise LoadError(f"syntax error in {exc.filename}, line {exc.lineno}: {exc.msg}\n  {code}") from None
    except SystemExit:
        raise LoadError(f"{path} called sys.exit() while being imported") from None
    except Exception as exc:
        # the traceback from the user's file on (the import machinery's and mcpkit's frames above it say nothing)
        frames = exc.__traceback__
        while frames is not None and frames.tb_frame.f_code.co_filename != spec.origin:
            frames = frames.tb_next
        tb = "".join(traceback.format_exception(type(exc), exc, frames or exc.__traceback__))
        raise LoadError(f"{path} failed while being imported: {type(exc).__name__}: {exc}\n{tb}") from None
    return module


def load_server(spec: str) -> Any:
    """Find the server object in ``path.py[:name]``: the named object, else ``app``/``mcp``/``server``, else the
    only Server instance in the module."""
    path, _, name = spec.partition(":")
    if not name and len(path) > 2 and path[1] == ":" and path[0].isalpha():  # C:\\ style path: keep it whole
        path, name = spec, ""
    module = load_module(path)
    from ..server.locate import find_server

    return find_server(module, name, path, LoadError)


class _Commands(click.Group):
    """The ``mcpkit`` group: Ctrl-C ends any command with 130, as a shell reports an interrupted program (click
    alone exits 1, the code ``mcpkit check`` gives a failed MUST)."""

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; an interrupt is said in one word and exits 130."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("\nAborted!", err=True)
            sys.exit(130)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mcpkit")
def cli() -> None:
    """mcpkit: build, run, inspect and check MCP servers."""


@cli.command()
@click.argument("target")
@click.option(
    "--transport",
    "-t",
    type=click.Choice(["stdio", "http", "sse", "ws"]),
    default="stdio",
    show_default=True,
    help="stdio, Streamable HTTP (/mcp), legacy HTTP+SSE (/sse) or WebSocket (/ws).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (HTTP transports).")
@click.option("--port", "-p", type=PORT, default=8000, show_default=True, help="Port (HTTP transports; 0 = any).")
@click.option("--path", default=None, help="Endpoint path for Streamable HTTP (default /mcp).")
@click.option("--stateless", is_flag=True, help="Streamable HTTP: no sessions in the handshake era.")
@click.option("--json-response", is_flag=True, help="Streamable HTTP: answer with JSON instead of SSE when possible.")
@click.option(
    "--log-level", type=LOG_LEVEL, default="warning", show_default=True, help="Server-side logging level (to stderr)."
)
@click.option("--max-sessions", type=COUNT, default=None, help="HTTP: sessions at most, /mcp and /sse each [10000].")
@click.option("--max-sessions-per-client", type=COUNT, default=None, help="HTTP: sessions per principal/address [100].")
@click.option("--max-connections", type=COUNT, default=None, help="HTTP: open connections at most [1024].")
@click.option("--header-timeout", type=SECONDS, default=None, help="HTTP: seconds to send a request head [10].")
@click.option("--body-timeout", type=SECONDS, default=None, help="HTTP: seconds to send a request body [30].")
@click.option(
    "--send-timeout", type=SECONDS, default=None, help="HTTP: seconds a peer may read nothing, then it is cut off [30]."
)
@click.option(
    "--max-header-bytes",
    type=click.IntRange(min=1024),
    default=None,
    help="HTTP: largest request head in bytes [65536].",
)
@click.option("--limit-concurrency", type=COUNT, default=None, help="HTTP: uvicorn's 503 threshold [1100].")
@click.option("--timeout-keep-alive", type=SECONDS, default=None, help="HTTP: idle keep-alive seconds [5].")
@click.option(
    "--workers",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    envvar="MCPKIT_WORKERS",
    help="HTTP: worker processes sharing the port (more than 1 needs --redis or --postgres).",
)
@click.option(
    "--redis", "redis_url", default=None, envvar="MCPKIT_REDIS_URL", help="HTTP: Redis URL the workers share."
)
@click.option(
    "--redis-cluster", is_flag=True, envvar="MCPKIT_REDIS_CLUSTER", help="HTTP: --redis names a Redis Cluster."
)
@click.option("--redis-prefix", default=None, envvar="MCPKIT_REDIS_PREFIX", help="HTTP: Redis key prefix [mcpkit:].")
@click.option(
    "--redis-timeout", type=SECONDS, default=None, envvar="MCPKIT_REDIS_TIMEOUT", help="HTTP: Redis timeout [1]."
)
@click.option(
    "--postgres",
    "postgres_url",
    default=None,
    envvar="MCPKIT_POSTGRES_URL",
    help="HTTP: PostgreSQL URL the workers share (instead of --redis).",
)
@click.option(
    "--postgres-prefix", default=None, envvar="MCPKIT_POSTGRES_PREFIX", help="HTTP: PostgreSQL table prefix [mcpkit_]."
)
@click.option(
    "--postgres-timeout",
    type=SECONDS,
    default=None,
    envvar="MCPKIT_POSTGRES_TIMEOUT",
    help="HTTP: PostgreSQL timeout [5].",
)
@click.option(
    "--state-keys-file",
    type=click.Path(dir_okay=False),
    default=None,
    envvar="MCPKIT_STATE_KEYS_FILE",
    help="HTTP: key ring sealing requestState and cursors, one key a line (or MCPKIT_STATE_KEYS).",
)
@click.option(
    "--forwarded-allow-ips",
    default=None,
    envvar="MCPKIT_FORWARDED_ALLOW_IPS",
    help="HTTP: balancer addresses whose X-Forwarded-For/-Proto are trusted (comma-separated).",
)
@click.option(
    "--drain-timeout",
    type=SECONDS_OR_ZERO,
    default=None,
    help="Seconds requests in flight get at shutdown: HTTP [5]; stdio, once stdin ends [30].",
)
@click.option(
    "--worker-grace",
    type=SECONDS_OR_ZERO,
    default=None,
    help="Seconds sync tools still running on worker threads get at shutdown, then the process exits [1].",
)
@click.option(
    "--dev",
    is_flag=True,
    help="Development mode: debug logging, and tool errors shown unmasked (sets MCPKIT_DEBUG=1 for the server).",
)
@click.option("--script-fallback", is_flag=True, hidden=True, help="Run TARGET as a script when it defines no server.")
@click.option("--worker-fd", type=int, default=None, hidden=True, help="(a worker of --workers: the shared socket)")
def run(
    target: str,
    transport: str,
    host: str,
    port: int,
    path: str | None,
    stateless: bool,
    json_response: bool,
    log_level: str,
    dev: bool,
    script_fallback: bool,
    workers: int,
    redis_url: str | None,
    redis_cluster: bool,
    redis_prefix: str | None,
    redis_timeout: float | None,
    postgres_url: str | None,
    postgres_prefix: str | None,
    postgres_timeout: float | None,
    state_keys_file: str | None,
    forwarded_allow_ips: str | None,
    drain_timeout: float | None,
    worker_grace: float | None,
    worker_fd: int | None,
    **limits: Any,
) -> None:
    """Serve the MCP server defined in TARGET (path/to/server.py[:object]).

    With --transport http, sse or ws the URL it serves on is printed to stderr once it listens. --dev sets the
    environment variable MCPKIT_DEBUG=1 before the server is imported (MCPKit apps then show tool exceptions to
    the client instead of masking them) and logs at debug level: never use it in production.

    Several workers: --redis URL (or MCPKIT_REDIS_URL), or --postgres URL (or MCPKIT_POSTGRES_URL), makes the
    workers of one deployment share sessions, SSE events and notifications, on one host (--workers N) or on
    several behind a load balancer; they also share the key ring that seals requestState and list cursors
    (MCPKIT_STATE_KEYS or --state-keys-file; --workers N on one host generates one when none is given).
    --workers, the --redis and --postgres options, --state-keys-file and --forwarded-allow-ips also come from
    their MCPKIT_* environment variables (MCPKIT_WORKERS, ...)."""
    import logging
    import os

    postgres = (postgres_url, postgres_prefix, postgres_timeout)
    scale = _scale_config(redis_url, redis_cluster, redis_prefix, redis_timeout, state_keys_file, postgres)
    if transport == "stdio":
        ctx = click.get_current_context()
        given = [
            name
            for name in ("redis_url", "postgres_url")
            if ctx.params.get(name) and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
        ]
        if workers > 1 or given:
            raise click.UsageError("--workers, --redis and --postgres are for the HTTP transports (-t http, sse or ws)")
    if workers > 1 and not scale.shared:
        raise click.UsageError(
            "--workers N shares sessions and notifications through Redis or PostgreSQL: give --redis URL (or "
            "MCPKIT_REDIS_URL) or --postgres URL (or MCPKIT_POSTGRES_URL)"
        )

    if dev:
        os.environ["MCPKIT_DEBUG"] = "1"
        log_level = "debug"

    # Our own logs go to stderr only, through a handler on the "mcpkit" logger (never the root logger).
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    lib_logger = logging.getLogger("mcpkit")
    lib_logger.addHandler(handler)
    lib_logger.setLevel(log_level.upper())
    if workers > 1 and worker_fd is None:
        _run_workers(click.get_current_context(), scale, workers, transport, host, port, path)
        return
    try:
        server = load_server(target)
    except LoadError as exc:
        if not (script_fallback and "defines no mcpkit server" in exc.message):
            raise
        import runpy

        runpy.run_path(target, run_name="__main__")  # a script that builds and runs its server itself
        # (said when it ends: a file with no server at all ends at once, and the client then knows why)
        click.echo(f"mcpkit: {exc.message}; it ran as a script, which has ended", err=True)
        return
    options: dict[str, Any] = {}
    if worker_grace is not None:
        options["worker_grace"] = worker_grace
    if transport == "stdio":
        if drain_timeout is not None:
            options["drain_timeout"] = drain_timeout
        server.run(**options)
        return
    if path:
        options["path"] = path
    if stateless:
        options["stateless"] = True
    if json_response:
        options["json_response"] = True
    options.update({name: value for name, value in limits.items() if value is not None})
    if forwarded_allow_ips:  # the client address (per-client quotas) from X-Forwarded-For, from these peers only
        options.update(proxy_headers=True, forwarded_allow_ips=forwarded_allow_ips)
    if drain_timeout is not None:
        options["timeout_graceful_shutdown"] = drain_timeout
    if scale.shared or scale.state_keys:  # (else create_app finds the same defaults itself)
        options["config"] = scale
    if worker_fd is not None:  # one of the workers of `--workers N`: the parent announced the URL
        from .workers import PARENT_ENV, watch_parent, worker_socket

        parent = os.environ.get(PARENT_ENV, "")
        if parent.isdigit():
            watch_parent(int(parent))
        options.update(sockets=[worker_socket(worker_fd)], announce=False)
    # Through the server's own run(): a class that customizes it (e.g. adds an event store) is served as documented;
    # the HTTP serve it reaches prints the URL once it listens.
    server.run(transport, host=host, port=port, **options)


def _scale_config(
    url: str | None,
    cluster: bool,
    prefix: str | None,
    timeout: float | None,
    keys_file: str | None,
    postgres: tuple[str | None, str | None, float | None] = (None, None, None),
) -> Any:
    """The shared configuration: the MCPKIT_* environment, overridden by the flags."""
    from ..stores.config import ENV, ScaleConfig

    env = dict(os.environ)
    pg_url, pg_prefix, pg_timeout = postgres
    given = {"redis_url": url, "redis_prefix": prefix, "state_keys_file": keys_file}
    given |= {"postgres_url": pg_url, "postgres_prefix": pg_prefix}
    env.update({ENV[name]: value for name, value in given.items() if value})
    if timeout is not None:
        env[ENV["redis_timeout"]] = str(timeout)
    if pg_timeout is not None:
        env[ENV["postgres_timeout"]] = str(pg_timeout)
    if cluster:
        env[ENV["redis_cluster"]] = "1"
    try:
        return ScaleConfig.from_env(env)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


_SHARED_OPTIONS = frozenset(
    ("redis_url", "redis_cluster", "redis_prefix", "redis_timeout", "state_keys_file", "postgres_url")
) | {"postgres_prefix", "postgres_timeout"}


def _run_workers(
    ctx: click.Context, scale: Any, workers: int, transport: str, host: str, port: int, path: str | None
) -> None:
    """The parent of ``--workers N``: bind once, start the workers (see :mod:`mcpkit.cli.workers`)."""
    from ..stores.config import generate_key
    from .workers import Listeners, child_environment, python_command, supervise

    if not scale.state_keys:  # one host: one generated key ring for its workers
        scale = scale.with_keys([generate_key().encode()])
    try:
        listeners = Listeners(host, port)
    except OSError as exc:  # (a port in use, an address this host does not have)
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    bound = listeners.address
    endpoint = {"sse": path or "/sse", "ws": path or "/ws"}.get(transport, path or "/mcp")
    scheme = "ws" if transport == "ws" else "http"
    shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
    announce = f"mcpkit: serving {transport} on {scheme}://{shown}:{bound[1]}{endpoint} ({workers} workers)"
    command = [*python_command(), "run"]
    for param in ctx.command.params:
        name = param.name
        if name in ("workers", "worker_fd", "script_fallback") or not isinstance(param, click.Option):
            continue
        value = ctx.params.get(name)
        if value is None or value is False or name in _SHARED_OPTIONS:
            continue  # (the shared configuration goes through the environment)
        flag = param.opts[0] if param.opts[0].startswith("--") else param.opts[-1]
        command += [flag] if value is True else [flag, str(bound[1]) if name == "port" else str(value)]
    command.insert(len(python_command()) + 1, ctx.params["target"])
    grace = ctx.params.get("drain_timeout") or 5.0
    sys.exit(supervise(command, workers, listeners, child_environment(scale.to_env()), grace, announce))


def _register_optional() -> None:
    for module in (
        "client_commands",
        "codegen_command",
        "skills_command",
        "check_command",
        "inspector_command",
        "proxy_command",
    ):
        try:
            mod = importlib.import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.endswith(module):
                continue
            raise
        mod.register(cli)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``mcpkit`` command."""
    _register_optional()
    cli.main(args=argv, prog_name="mcpkit")


if __name__ == "__main__":
    main()
