"""``mcpkit proxy``: serve one MCP server (or several, under prefixes) through another transport and era.

mcpkit proxy "python legacy_server.py" -t http --port 8000
mcpkit proxy fs="npx server-fs /tmp" web=https://example.com/mcp -t http --auth-token "$TOKEN"
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import TYPE_CHECKING, Any, cast

import click

from ._errors import CommandError
from ._params import COUNT, LOG_LEVEL, PORT, SECONDS, SECONDS_OR_ZERO

if TYPE_CHECKING:
    from ..transports.http import HTTPTransport


def _targets(specs: tuple[str, ...]) -> dict[str | None, str]:
    """``target`` (one, no prefix) or ``prefix=target`` (a gateway)."""
    if len(specs) == 1 and not _named(specs[0]):
        return {None: specs[0]}
    out: dict[str | None, str] = {}
    for spec in specs:
        if not _named(spec):
            raise click.UsageError(f"with several targets, name each one: PREFIX=TARGET (got {spec!r})")
        prefix, _, target = spec.partition("=")
        out[prefix] = target
    return out


def _named(spec: str) -> bool:
    prefix, eq, _ = spec.partition("=")
    return bool(eq) and prefix.replace("_", "").replace("-", "").replace(".", "").isalnum() and " " not in prefix


def _headers(values: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for value in values:
        name, colon, content = value.partition(":")
        if not colon or not name.strip():
            raise click.UsageError(f"--upstream-header takes 'Name: value' (got {value!r})")
        headers[name.strip()] = content.strip()
    return headers


def register(cli: click.Group) -> None:
    """Add ``proxy`` to the ``mcpkit`` command."""

    @cli.command("proxy")
    @click.argument("targets", nargs=-1, required=True)
    @click.option(
        "--transport",
        "-t",
        type=click.Choice(["stdio", "http", "sse", "ws"]),
        default="stdio",
        show_default=True,
        help="Transport the proxy serves its clients on: stdio, Streamable HTTP, legacy HTTP+SSE or WebSocket.",
    )
    @click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind (HTTP transports).")
    @click.option("--port", "-p", type=PORT, default=8000, show_default=True, help="Port (HTTP transports; 0 = any).")
    @click.option("--path", default=None, help="Endpoint path of the chosen transport [/mcp, /sse or /ws].")
    @click.option("--auth-token", multiple=True, help="HTTP: a bearer token the proxy accepts (repeatable).")
    @click.option("--resource", default=None, help="HTTP with --auth-token: this endpoint's URL (token audience).")
    @click.option("--upstream-header", multiple=True, help="'Name: value' sent upstream (the proxy's credentials).")
    @click.option(
        "--mode",
        type=click.Choice(["auto", "handshake", "modern"]),
        default="auto",
        show_default=True,
        help="Era spoken upstream: auto (probe server/discover, fall back to initialize), handshake or modern.",
    )
    @click.option("--allow-private-network", is_flag=True, help="Allow URL targets on private/link-local addresses.")
    @click.option(
        "--reconnect-attempts",
        type=COUNT,
        default=10,
        show_default=True,
        help="Attempts to connect again to an upstream whose connection ended, in one round (the first at once; "
        "after the last, one every --reconnect-max-delay seconds in the background, and a request starts a new "
        "round).",
    )
    @click.option(
        "--reconnect-delay",
        type=SECONDS_OR_ZERO,
        default=0.5,
        show_default=True,
        help="Seconds before the second attempt, doubling after each failed one (with jitter).",
    )
    @click.option(
        "--reconnect-max-delay",
        type=SECONDS,
        default=30.0,
        show_default=True,
        help="The longest wait between two attempts, in seconds (at least --reconnect-delay).",
    )
    @click.option(
        "--pool-size",
        type=COUNT,
        default=1,
        show_default=True,
        help="Upstream connections (stdio: processes) per handshake-era target that 2026-07-28 requests lease, one "
        "request at a time each (1: one per set of client capabilities the requests declare). More than 1, in all, "
        "only for a server whose connections are interchangeable: one keeps state of its own (a tool a call "
        "added) that the requests served by another would not see.",
    )
    @click.option(
        "--require-all",
        is_flag=True,
        help="A gateway: refuse to start unless every member answers (by default it starts with those that do, "
        "logs one line per missing member and connects it in the background).",
    )
    @click.option(
        "--log-level", type=LOG_LEVEL, default="warning", show_default=True, help="The proxy's own logging (stderr)."
    )
    def proxy_command(
        targets: tuple[str, ...],
        transport: str,
        host: str,
        port: int,
        path: str | None,
        auth_token: tuple[str, ...],
        resource: str | None,
        upstream_header: tuple[str, ...],
        mode: str,
        allow_private_network: bool,
        reconnect_attempts: int,
        reconnect_delay: float,
        reconnect_max_delay: float,
        pool_size: int,
        require_all: bool,
        log_level: str,
    ) -> None:
        """Serve TARGETS (commands, URLs, mcp.json entries; PREFIX=TARGET for several) through one MCP endpoint.

        Each side negotiates its own protocol era: a handshake-era stdio server becomes a 2026-07-28 Streamable
        HTTP endpoint (and the other way round). The token clients present is never sent upstream."""
        import logging

        from ..proxies import ProxyServer

        if reconnect_max_delay < reconnect_delay:
            raise click.BadParameter(
                f"{reconnect_max_delay:g} is less than --reconnect-delay {reconnect_delay:g}",
                param_hint="'--reconnect-max-delay'",
            )

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        lib_logger = logging.getLogger("mcpkit")
        lib_logger.addHandler(handler)
        lib_logger.setLevel(log_level.upper())
        client_options: dict[str, Any] = {"mode": mode}
        headers = _headers(upstream_header)
        if headers:
            client_options["headers"] = headers
        if transport == "stdio" and auth_token:
            raise click.UsageError("--auth-token applies to HTTP transports (stdio takes no tokens)")
        from ..client.targets import ServerStartError, TargetError

        try:
            app = ProxyServer(
                _targets(targets),
                allow_private_network=allow_private_network,
                reconnect_attempts=reconnect_attempts,
                reconnect_delay=reconnect_delay,
                reconnect_max_delay=reconnect_max_delay,
                pool_size=pool_size,
                require_all=require_all,
                client_options=client_options,
            )
        except TargetError as exc:  # no such file or command, a bad mcp.json entry: as the client commands say it
            raise _UpstreamMissing(str(exc)) from None
        except ValueError as exc:  # prefixes a gateway cannot use
            raise click.UsageError(str(exc)) from None
        try:
            if transport == "stdio":
                app.run()
                return
            asyncio.run(_serve_http(app, transport, host, port, path, auth_token, resource))
        except TargetError as exc:  # no such file or command, a bad mcp.json entry, a URL the SSRF rule refuses
            raise _UpstreamMissing(str(exc)) from None
        except ServerStartError as exc:  # did not start or answer (its text: why, its exit code, its stderr)
            raise CommandError(str(exc)) from None


class _UpstreamMissing(CommandError):
    """An upstream that does not exist (no such file or command, no such mcp.json entry) or that the proxy may not
    reach (a URL on a private address): exit code 2, as the client commands say it."""

    exit_code = 2


async def _serve_http(
    app: Any, transport: str, host: str, port: int, path: str | None, tokens: tuple[str, ...], resource: str | None
) -> None:
    from ..transports.http import build_server

    await app.startup()  # connect upstream first: the capabilities clients see mirror the upstream's
    sockets = None
    try:
        if tokens and resource is None and port == 0:
            # the resource clients are told (the token audience) names the port: take one before saying it
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sockets = [socket.create_server((host, 0), family=family)]
            port = sockets[0].getsockname()[1]
        kind = cast("HTTPTransport", transport)  # (a click.Choice)
        # (build_server puts --path on the chosen transport's route; without it each has its own default)
        uv = build_server(app, kind, host, port, path=path) if path else build_server(app, kind, host, port)
        endpoint = {"sse": path or "/sse", "ws": path or "/ws"}.get(transport, path or "/mcp")
        if tokens:
            from ..auth import StaticTokenVerifier, protect

            url = resource or f"http://{host}:{port}{endpoint}"
            verifier = StaticTokenVerifier.simple(dict.fromkeys(tokens, ()), audience=url)
            uv.config.app = protect(uv.config.app, resource=url, verifier=verifier)
        task = asyncio.ensure_future(uv.serve(sockets=sockets))
        while not uv.started and not task.done():
            await asyncio.wait({task}, timeout=0.02)
        if uv.started and uv.servers:
            bound = uv.servers[0].sockets[0].getsockname()
            scheme = "ws" if transport == "ws" else "http"
            print(f"mcpkit: proxying on {scheme}://{bound[0]}:{bound[1]}{endpoint}", file=sys.stderr, flush=True)
        await task
    finally:
        for sock in sockets or ():
            sock.close()
        await app.shutdown()


__all__ = ["register"]
