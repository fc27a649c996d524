"""``mcpkit inspect``, ``mcpkit dev`` and ``mcpkit install``: see a server in the browser, develop it with reload,
put it into an MCP host's configuration.

``register(group)`` adds the commands (``mcpkit.cli.main`` calls it). The inspector's modules load only when a
command runs.
"""

from __future__ import annotations

from typing import Any

import click

from ..protocol.versions import ALL_VERSIONS
from ._errors import CommandError, LoadError
from ._params import PORT, SECONDS
from .client_io import CLIError
from .install import HOSTS

INSPECT_TARGET_HELP = (
    "TARGET is what the other client commands take: a .py file (run with this Python), a command line in quotes, "
    "an http(s):// or ws:// URL, or mcp.json#NAME."
)


def _pairs(items: tuple[str, ...], sep: str, what: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, found, value = item.partition(sep)
        if not found or not key.strip():
            raise click.UsageError(f"{what} expects KEY{sep}VALUE, got {item!r}")
        out[key.strip()] = value.strip() if sep == ":" else value
    return out


@click.command("inspect", epilog=INSPECT_TARGET_HELP)
@click.argument("target")
@click.option("--no-browser", is_flag=True, help="Print the URL only; do not open a browser.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback address to listen on.")
@click.option("--port", "-p", type=PORT, default=0, help="Port of the page (default: a free one).")
@click.option(
    "--mode",
    type=click.Choice(["auto", "handshake", "modern"]),
    default="auto",
    show_default=True,
    help="Protocol era: negotiate, or force one (the page can reconnect in the other).",
)
@click.option(
    "--protocol-version",
    type=click.Choice(ALL_VERSIONS),
    default=None,
    help="Pin one protocol revision (e.g. 2025-06-18).",
)
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Environment for a stdio server.")
@click.option("-H", "--header", multiple=True, metavar="'NAME: VALUE'", help="HTTP header for a URL target.")
@click.option(
    "--transport", type=click.Choice(["http", "sse", "ws"]), default=None, help="Force the transport of a URL."
)
@click.option("--root", multiple=True, metavar="URI", help="Offer this root to the server (editable in the page).")
@click.option("--timeout", type=SECONDS, default=60.0, show_default=True, help="Seconds for each request but calls.")
@click.option(
    "--max-message-size",
    type=click.IntRange(min=1),
    default=None,
    metavar="BYTES",
    help="The largest message accepted from the server (default: 4 MiB).",
)
@click.option(
    "--auth",
    "use_oauth",
    is_flag=True,
    help="Sign in with mcpkit's OAuth client when the server asks for authorization: the browser flow, or with "
    "--client-id and --client-secret the client credentials grant (an http(s) URL only).",
)
@click.option("--client-id", default=None, help="With --auth: a registered OAuth client.")
@click.option(
    "--client-secret",
    default=None,
    envvar="MCPKIT_INSPECT_CLIENT_SECRET",
    help="With --auth: its secret (or MCPKIT_INSPECT_CLIENT_SECRET, which keeps it off the command line).",
)
@click.option(
    "--issuer",
    default=None,
    envvar="MCPKIT_INSPECT_ISSUER",
    help="With --auth: the authorization server (issuer) the client is registered with; without it a secret "
    "goes only to one on the server's own origin (or MCPKIT_INSPECT_ISSUER).",
)
def inspect_command(
    target: str,
    no_browser: bool,
    host: str,
    port: int,
    mode: str,
    protocol_version: str | None,
    env: tuple[str, ...],
    header: tuple[str, ...],
    transport: str | None,
    root: tuple[str, ...],
    timeout: float,
    max_message_size: int | None,
    use_oauth: bool,
    client_id: str | None,
    client_secret: str | None,
    issuer: str | None,
) -> None:
    """Open the inspector for the MCP server at TARGET: a local web page (127.0.0.1, a random port, a token in
    the URL) to list and call its tools, read its resources, get its prompts, answer its sampling and elicitation
    requests and watch every message, in either protocol era."""
    import asyncio

    from ..client.targets import TargetError
    from .connecting import check_era, cli_target, oauth_client

    try:
        from .._extras import require

        require("uvicorn", "mcpkit inspect")  # (start_inspector would name the library, not the command)
        from ..inspector import Inspector, start_inspector
        from ..inspector.serve import open_in_browser
    except ModuleNotFoundError as exc:
        from .._extras import explain

        err = explain(exc, "mcpkit inspect")
        if err is None:
            raise
        raise CommandError(str(err)) from None
    check_era(mode, protocol_version)
    if use_oauth and not target.startswith(("http://", "https://")):
        raise click.BadParameter("--auth needs an http(s) URL", param_hint="--auth")
    # one OAuth client for the run: the page's reconnects reuse its tokens instead of signing in again
    auth = oauth_client(target, client_id, client_secret, "mcpkit inspect", issuer) if use_oauth else None
    options: dict[str, Any] = {
        "mode": mode,
        "protocol_version": protocol_version,
        "roots": list(root),
        "timeout": timeout,
        "client_options": {
            "env": _pairs(env, "=", "--env") or None,
            "headers": _pairs(header, ":", "--header") or None,
            "transport": transport,
            "transport_options": {"max_message_size": max_message_size} if max_message_size else None,
            **({"auth": auth} if auth is not None else {}),
        },
    }

    async def main() -> None:
        running = await start_inspector(Inspector(cli_target(target, None), **options), host=host, port=port)
        click.echo(f"mcpkit inspect: {running.url}")
        if not no_browser:
            open_in_browser(running.url)
        await running.wait()

    # (not mcpkit.inspector.inspect, which ends quietly on Ctrl-C: here Ctrl-C exits 130, as every command does)
    try:
        asyncio.run(main())
    except TargetError as exc:  # (no such file or command: the command line names nothing usable)
        raise LoadError(str(exc)) from None
    except (CLIError, ValueError) as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


@click.command("dev")
@click.argument("server", metavar="SERVER.py[:OBJECT]")
@click.option("--no-browser", is_flag=True, help="Print the URL only; do not open a browser.")
@click.option("--port", "-p", type=PORT, default=0, help="Port of the inspector's page (default: a free one).")
@click.option(
    "--mode", type=click.Choice(["auto", "handshake", "modern"]), default="auto", show_default=True, help="Era."
)
@click.option("--watch", "watch", multiple=True, type=click.Path(exists=True), help="Watch this path too.")
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Environment for the server.")
@click.option("--root", multiple=True, metavar="URI", help="Offer this root to the server.")
def dev_command(
    server: str,
    no_browser: bool,
    port: int,
    mode: str,
    watch: tuple[str, ...],
    env: tuple[str, ...],
    root: tuple[str, ...],
) -> None:
    """Develop the server in SERVER.py: it runs with errors unmasked (as `mcpkit run --dev`) and the inspector
    attached, and starts again when a Python file in its folder (or a --watch path) changes. A change that does
    not load keeps the last good server running; the page shows the error."""
    import asyncio
    from pathlib import Path

    try:
        from ..inspector import Inspector, start_inspector
        from ..inspector.dev import DevLoop, dev_target
        from ..inspector.serve import open_in_browser
    except ModuleNotFoundError as exc:
        from .._extras import explain

        err = explain(exc, "mcpkit dev")
        if err is None:
            raise
        raise CommandError(str(err)) from None
    path = server.partition(":")[0] if not (len(server) > 2 and server[1] == ":") else server
    file = Path(path)
    if not file.is_file():
        raise LoadError(f"no such file: {path}")
    inspector = Inspector(
        dev_target(server),
        mode=mode,
        roots=list(root),
        client_options={"env": _pairs(env, "=", "--env") or None},
    )
    loop = DevLoop(inspector, [file.resolve().parent, *(Path(w) for w in watch)], shown=str(file))

    async def main() -> None:
        from .._extras import require

        require("watchfiles", "mcpkit dev")
        require("uvicorn", "mcpkit dev")  # (start_inspector would name the library, not the command)

        def configure(app: Any) -> None:
            app.startup_hooks.append(loop.start)
            app.shutdown_hooks.append(loop.stop)

        try:
            running = await start_inspector(inspector, port=port, configure=configure)
        except OSError as exc:
            raise CommandError(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
        click.echo(f"mcpkit dev: {running.url}")
        if not no_browser:
            open_in_browser(running.url)
        await running.wait()

    try:
        asyncio.run(main())  # (Ctrl-C goes on to the group: exit 130, as every command)
    except ModuleNotFoundError as exc:
        from .._extras import explain

        err = explain(exc, "mcpkit dev")
        if err is None:
            raise
        raise CommandError(str(err)) from None


RESTART = {
    "claude-desktop": "Quit and reopen Claude Desktop to load it.",
    "claude-code": "Claude Code loads it in its next session (`/mcp` lists it).",
    "cursor": "Cursor lists it under Settings > MCP (reload the window if it does not).",
    "vscode": "VS Code lists it in the MCP servers view (Start it from there or from mcp.json).",
    "gemini-cli": "Gemini CLI loads it when it starts next (`/mcp` lists it).",
    "windsurf": "Windsurf loads it after a refresh of the MCP servers in Cascade's settings.",
    "codex": "Codex starts it in its next session (`codex mcp list` lists it, `/mcp` inside Codex).",
    "goose": "goose loads it in its next session (`goose configure` lists it under extensions).",
}


@click.command("install")
@click.argument("host", type=click.Choice([*HOSTS, "mcp-json"]))
@click.argument("server", metavar="SERVER.py[:OBJECT]")
@click.option("--name", "-n", default=None, help="The server's name in the host (default: the server's own name).")
@click.option(
    "--scope",
    type=click.Choice(["user", "project", "local"]),
    default="user",
    show_default=True,
    help="user: every project; project: a file in the current directory (Claude Code, Cursor, VS Code, Gemini CLI, "
    "Codex); "
    "local: Claude Code, this directory only.",
)
@click.option("--config", "config_file", default=None, type=click.Path(dir_okay=False), help="Write this file instead.")
@click.option("--with", "with_packages", multiple=True, metavar="PKG", help="Run with this package too (through uv).")
@click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Environment variable for the server.")
@click.option("--env-file", default=None, type=click.Path(dir_okay=False), help="Environment variables from a file.")
@click.option("--dry-run", is_flag=True, help="Show what would be written; change nothing.")
def install_command(
    host: str,
    server: str,
    name: str | None,
    scope: str,
    config_file: str | None,
    with_packages: tuple[str, ...],
    env: tuple[str, ...],
    env_file: str | None,
    dry_run: bool,
) -> None:
    """Put the server defined in SERVER.py into HOST's MCP configuration (merged with what is there, after a
    backup), run by this Python; or, with HOST mcp-json, print its entry. --dry-run shows the file and the entry
    without writing. Where each host keeps its file, and how it loads the server: docs/guides/inspector.md,
    section "mcpkit install"."""
    import json
    from pathlib import Path

    from .install import InstallError, install, read_env_file, server_entry
    from .main import load_server

    try:
        variables = read_env_file(env_file) if env_file else {}
        variables.update(_pairs(env, "=", "--env"))
        entry = server_entry(server, host=host, with_packages=with_packages, env=variables or None)
        if name is None:
            try:
                name = str(load_server(server).name)
            except LoadError as exc:
                hint = "(--name NAME installs it without importing it)"
                raise InstallError(f"{exc.message}\n{hint}", usage=True) from None
        if not name.strip():  # (a host lists servers by name: an empty key is no name)
            raise InstallError("the server's name in the host is empty: give one with --name NAME")
        if host == "mcp-json":
            click.echo(json.dumps({name: entry}, indent=2, ensure_ascii=False))
            return
        done = install(host, name, entry, scope=scope, path=Path(config_file) if config_file else None, dry_run=dry_run)
    except InstallError as exc:
        raise (LoadError if exc.usage else CommandError)(str(exc)) from None
    if done.unchanged:
        click.echo(f"{name!r} is already in {done.path}, unchanged: nothing was written")
        return
    if dry_run:
        click.echo(f"would write {done.path}:")
        click.echo(done.text, nl=False)
        return
    verb = "replaced" if done.replaced else "added"
    keeping = f", keeping its {', '.join(done.kept)}" if done.kept else ""
    backup = f" (the previous file is {done.backup})" if done.backup else ""
    why = "the key goose makes of the name" if host == "goose" else "a name Codex's own commands accept"
    filed = f" (as {done.key!r}, {why})" if done.key != name else ""
    click.echo(f"{verb} {name!r}{filed} in {done.path}{keeping}{backup}")
    click.echo(RESTART[host])


COMMANDS: list[click.Command] = [inspect_command, dev_command, install_command]


def register(group: click.Group) -> None:
    """Add ``inspect``, ``dev`` and ``install`` to the ``mcpkit`` click group."""
    for cmd in COMMANDS:
        group.add_command(cmd)
