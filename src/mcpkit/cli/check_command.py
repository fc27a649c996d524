"""``mcpkit check TARGET``: judge a server from outside; ``mcpkit check-client COMMAND``: judge a client.

Both print a report (``--format text|json|junit|markdown``; ``--output FILE`` writes it there too) and exit 1 when
a requirement of the level ``--fail-on`` names failed (``must``, the default: any MUST; ``should``: any MUST or
SHOULD), 0 otherwise.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import click

from ._errors import CommandError
from ._params import PORT, SECONDS
from .connecting import oauth_client

FORMATS = ("text", "json", "junit", "markdown")  # mcpkit.check.report.FORMATS (not imported: mcpkit run starts fast)


def register(group: click.Group) -> None:
    group.add_command(check)
    group.add_command(check_client)


def _headers(header: tuple[str, ...]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in header:
        name, sep, value = item.partition(":")
        if not sep:
            raise click.BadParameter(f"{item!r} is not 'Name: value'", param_hint="--header")
        headers[name.strip()] = value.strip()
    return headers


def _emit(report: object, fmt: str, verbose: bool, output: str | None) -> None:
    from ..check.report import Report, render

    assert isinstance(report, Report)
    text = render(report, fmt, verbose=verbose)
    click.echo(text)
    if output:
        try:
            Path(output).write_text(text + "\n", encoding="utf-8")
        except OSError as exc:  # (its directory was checked before the run; this is the rare late failure)
            raise CommandError(f"could not write the report to {output}: {exc.strerror or exc}") from None


def _writable(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--output``: refused before the run when the report could not be written there."""
    if value is None:
        return None
    path = Path(value)
    if path.is_dir():
        raise click.BadParameter(f"{value} is a directory", ctx, param)
    if not path.parent.is_dir():
        raise click.BadParameter(f"the directory {path.parent} does not exist", ctx, param)
    return value


_format = click.option(
    "--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True, help="Report format."
)
_fail_on = click.option(
    "--fail-on",
    type=click.Choice(["must", "should"]),
    default="must",
    show_default=True,
    help="Exit 1 when a requirement of this level (or a stronger one) fails.",
)
_output = click.option("--output", "-o", default=None, callback=_writable, help="Also write the report to this file.")


@click.command()
@click.argument("target", nargs=-1, required=True)
@_format
@_fail_on
@_output
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--protocol-version", default=None, help="Revision to request in initialize (default: latest).")
@click.option("--timeout", type=SECONDS, default=10.0, show_default=True, help="Seconds to wait for each response.")
@click.option(
    "--transport",
    type=click.Choice(["http", "sse", "ws"]),
    default=None,
    help="For a URL: Streamable HTTP, legacy HTTP+SSE or WebSocket (default: ws:// is WebSocket, a path ending in "
    "/sse is legacy HTTP+SSE, anything else Streamable HTTP).",
)
@click.option("--header", "-H", multiple=True, help="Extra HTTP header 'Name: value' (sent to the target only).")
@click.option("--token", default=None, envvar="MCPKIT_CHECK_TOKEN", help="Bearer token for a protected server.")
@click.option(
    "--auth",
    "use_oauth",
    is_flag=True,
    help="Get a token with mcpkit's OAuth client: the browser flow, or with --client-id and --client-secret the "
    "client credentials grant.",
)
@click.option("--client-id", default=None, envvar="MCPKIT_CHECK_CLIENT_ID", help="With --auth: a registered client.")
@click.option("--client-secret", default=None, envvar="MCPKIT_CHECK_CLIENT_SECRET", help="With --auth: its secret.")
@click.option(
    "--issuer",
    default=None,
    envvar="MCPKIT_CHECK_ISSUER",
    help="With --auth: the authorization server (issuer) the client is registered with; without it a secret "
    "goes only to one on the server's own origin.",
)
@click.option("--verbose", "-v", is_flag=True, help="Show every finding, not only the deciding one.")
@click.option(
    "--no-stateless",
    is_flag=True,
    help="Skip the second pass in a stateless 2026-07-28 session (run when server/discover offers it).",
)
def check(
    target: tuple[str, ...],
    fmt: str,
    fail_on: str,
    output: str | None,
    as_json: bool,
    protocol_version: str | None,
    timeout: float,
    transport: str | None,
    header: tuple[str, ...],
    token: str | None,
    use_oauth: bool,
    client_id: str | None,
    client_secret: str | None,
    issuer: str | None,
    verbose: bool,
    no_stateless: bool,
) -> None:
    """Check the MCP server TARGET against the MCP specification's requirements.

    Each requirement is a MUST (IDs M001...), SHOULD (S001...) or MAY (A001...) statement of the specification
    that a client can observe from outside the server (MX/SX: rules of the official specification beyond that
    list); the report names each one with its text and the message that proved or broke it.

    TARGET is a server file (server.py[:object], served as 'mcpkit run' serves it), a command line that starts a
    stdio server (quote it, or put it after --) or a URL: http(s):// for
    Streamable HTTP (a path ending in /sse: legacy HTTP+SSE), ws(s):// for WebSocket. A server that asks for
    authorization has its authorization rules checked; --token lets the checker in for the rest.
    """
    from ..check import run_checks
    from ..protocol.versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE

    version = protocol_version or LATEST_HANDSHAKE
    if version not in HANDSHAKE_VERSIONS:
        raise click.BadParameter(f"choose one of {', '.join(HANDSHAKE_VERSIONS)}", param_hint="--protocol-version")
    spec: str | list[str] = target[0] if len(target) == 1 else list(target)
    spec = _server_file(spec)
    _names_a_server(spec, transport)
    if use_oauth and not (isinstance(spec, str) and spec.startswith(("http://", "https://"))):
        raise click.BadParameter("--auth needs an http(s) URL", param_hint="--auth")

    async def main() -> object:
        auth = oauth_client(str(spec), client_id, client_secret, "mcpkit check", issuer) if use_oauth else None
        try:
            return await run_checks(
                spec,
                protocol_version=version,
                timeout=timeout,
                headers=_headers(header) or None,
                modern=not no_stateless,
                transport=transport,
                token=token,
                auth=auth,
            )
        finally:
            if auth is not None:
                await auth.aclose()

    try:
        report = asyncio.run(main())
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="TARGET") from None
    from ..check.report import Report

    assert isinstance(report, Report)
    _emit(report, "json" if as_json else fmt, verbose, output)
    sys.exit(report.exit_code(fail_on))


def _server_file(spec: str | list[str]) -> str | list[str]:
    """A ``server.py[:object]`` target is served as every ``mcpkit`` command serves it (``mcpkit run``, with this
    Python: a file without an ``app.run()`` block works, a script that serves by itself too); anything else is
    the command line it says."""
    if not isinstance(spec, str):
        return spec
    path, colon, obj = spec.strip().partition(":")
    if path.endswith(".py") and (not colon or obj.isidentifier()) and os.path.isfile(path):  # (spaces or not)
        return [sys.executable, "-m", "mcpkit.cli.main", "run", "--script-fallback", spec.strip()]
    return spec


def _names_a_server(spec: str | list[str], transport: str | None) -> None:
    """A command-line TARGET must name a server before anything is judged: no such file or command, an mcp.json
    that does not parse or lacks the entry, is the caller's to fix (exit 2), not a rule the server broke."""
    from ..check.wire import target_transport
    from ..client.targets import check_command, parse_target

    try:
        if target_transport(spec, transport) == "stdio":
            stdio = parse_target(spec if isinstance(spec, str) else list(spec)).stdio
            if stdio is not None:
                check_command(stdio)  # (no such file, or not on PATH: as the client commands say it)
    except ValueError as exc:  # (the client's TargetError, ServerNotFound: ValueErrors)
        raise click.BadParameter(str(exc), param_hint="TARGET") from None


@click.command("check-client")
@click.argument("command", nargs=-1, required=False)
@_format
@_fail_on
@_output
@click.option("--url", "serve_url", is_flag=True, help="Judge the client over Streamable HTTP: serve on 127.0.0.1.")
@click.option("--port", type=PORT, default=0, show_default=True, help="With --url: the port to serve on (0: any).")
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    help="Run only these scenarios (repeatable; default: every scenario of the transport but auth, which runs only "
    "by name: handshake, modern, version, batch, cancel; over HTTP also expiry, resume, auth).",
)
@click.option("--timeout", type=SECONDS, default=30.0, show_default=True, help="Seconds each run of the client gets.")
@click.option("--verbose", "-v", is_flag=True, help="Show every finding, not only the deciding one.")
def check_client(
    command: tuple[str, ...],
    fmt: str,
    fail_on: str,
    output: str | None,
    serve_url: bool,
    port: int,
    scenarios: tuple[str, ...],
    timeout: float,
    verbose: bool,
) -> None:
    """Check an MCP client against the MCP specification's client requirements.

    mcpkit plays scripted servers and runs COMMAND once per scenario. Over stdio (the default) COMMAND must launch
    the server command it is given: write {server} where the client takes it (one argument, a command line), or
    read it from $MCPKIT_CHECK_SERVER. With --url COMMAND connects to the URL it is given ({url}, or
    $MCPKIT_CHECK_URL); without COMMAND, --url serves one scripted server and waits for any client to connect
    (the run ends once it has been quiet for 10 s, or after --timeout seconds).

    The client is expected to connect, list the tools (following the pages) and call each tool it is offered,
    then close. The command runs in its own process group and is always reaped.
    """
    from ..check.clients import run_client_checks

    if not command and not serve_url:
        raise click.UsageError("give the client command to run, or --url to serve and wait for a client")
    spec: str | list[str] | None = None
    if command:
        spec = command[0] if len(command) == 1 else list(command)
    try:
        report = asyncio.run(
            run_client_checks(
                spec,
                transport="http" if serve_url else "stdio",
                port=port,
                scenarios=list(scenarios) or None,
                timeout=timeout,
                announce=lambda url: click.echo(f"mcpkit check-client: serving {url}", err=True),
            )
        )
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    _emit(report, fmt, verbose, output)
    sys.exit(report.exit_code(fail_on))
