"""How the client commands of the ``mcpkit`` CLI connect: the options they share (:func:`connection_options`),
the client's options made from them (:func:`collect`), the target as typed (:func:`cli_target`), and one run of a
client with every failure turned into a :class:`~.client_io.CLIError` with a clear line (:func:`run_client`,
:func:`guard`). ``client_commands``, ``skills_command`` and ``inspector_command`` build on it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ..protocol import versions
from ..protocol.versions import ALL_VERSIONS
from ._params import SECONDS
from .client_io import Answers, CLIError, ask_user, parse_pairs, stderr_console

if TYPE_CHECKING:
    from ..client.client import Client
    from ..client.targets import ServerStartError

T = TypeVar("T")

STDERR_PASSTHROUGH_BYTES = 1024 * 1024
"""Default of ``--stderr-limit``: how much of the server's stderr ``--stderr`` shows live."""


TARGET_HELP = (
    "TARGET is a command line in quotes ('python server.py', 'npx -y @scope/server'), a .py file (served as "
    "'mcpkit run FILE.py[:object]' does, with this Python), an http(s):// URL (Streamable HTTP, falling back to the "
    "legacy HTTP+SSE transport), a ws:// URL, or mcp.json#NAME."
)


def check_era(mode: str, protocol_version: str | None) -> None:
    """``--mode`` against ``--protocol-version``: a revision of the other era is a usage error."""
    if protocol_version is not None and mode != "auto" and (mode == "modern") != versions.is_modern(protocol_version):
        raise click.UsageError(f"--mode {mode} contradicts --protocol-version {protocol_version}: drop one of them")


def oauth_client(
    url: str, client_id: str | None, client_secret: str | None, client_name: str, issuer: str | None = None
) -> Any:
    """mcpkit's OAuth client for ``url`` (``--auth`` of ``mcpkit check`` and ``mcpkit inspect``): the client
    credentials grant when both are given, else the browser flow (dynamic registration as ``client_name``, or the
    registered ``client_id``; a loopback listener receives the redirect). ``issuer`` (``--issuer``): the
    authorization server the client is registered with; a secret goes to no other, and without it only to one on
    the server's own origin."""
    from ..auth import LoopbackCallback, OAuthClient

    if client_id and client_secret:
        return OAuthClient(
            url, grant_type="client_credentials", client_id=client_id, client_secret=client_secret, issuer=issuer
        )
    callback = LoopbackCallback()
    return OAuthClient(
        url,
        client_id=client_id,
        issuer=issuer,
        client_metadata={"client_name": client_name, "redirect_uris": [callback.redirect_uri]},
        redirect_handler=callback.redirect_handler,
        callback_handler=callback.callback_handler,
    )


def modern_refused(server_said: str, code: int, pinned: bool) -> str:
    """What the client commands say when a connection forced to 2026-07-28 is refused as a handshake-era server
    refuses it (:class:`~mcpkit.ModernEraRefused`): the server's words, and the options that connect."""
    how = (
        "drop --protocol-version 2026-07-28 (auto mode falls back to the handshake era) or pin a handshake "
        "revision, e.g. --protocol-version 2025-11-25"
        if pinned
        else "use --mode auto, which falls back to the handshake era, or --mode handshake"
    )
    return (
        f"the server does not seem to speak protocol 2026-07-28: it answered server/discover with error {code} "
        f"({server_said}); {how}"
    )


def client_options(ctx_obj: dict[str, Any]) -> dict[str, Any]:
    env: dict[str, str | None] = {}
    for item in ctx_obj["env"]:
        k, sep, v = item.partition("=")
        if not sep:
            raise CLIError(f"--env expects KEY=VALUE, got {item!r}", code=2)
        env[k] = v
    headers: dict[str, str] = {}
    for item in ctx_obj["header"]:
        k, sep, v = item.partition(":")
        if not sep:
            raise CLIError(f"--header expects 'Name: value', got {item!r}", code=2)
        headers[k.strip()] = v.strip()
    check_era(ctx_obj["mode"], ctx_obj["protocol_version"])
    opts: dict[str, Any] = {
        "mode": ctx_obj["mode"],
        "protocol_version": ctx_obj["protocol_version"],
        "timeout": ctx_obj["timeout"],
        "connect_timeout": ctx_obj["timeout"],
        "env": env or None,
        "headers": headers or None,
        "transport": ctx_obj["transport"],
    }
    if ctx_obj.get("root"):
        opts["roots"] = list(ctx_obj["root"])
    interactive = ctx_obj.get("interactive")
    answers = parse_pairs(tuple(ctx_obj.get("answer") or ()), json_values=False)
    if interactive and answers:
        raise CLIError("--answer and --interactive exclude each other: pick one way to answer the server", code=2)
    if interactive is None:
        interactive = not answers and sys.stdin.isatty() and sys.stderr.isatty()
    if interactive:
        opts["elicitation_handler"] = ask_user
    else:
        opts["elicitation_handler"] = Answers(answers)
    return opts


def start_failure(exc: ServerStartError) -> str:
    """One line for a server that could not be started or reached. When ``--timeout`` ended the wait, the line
    says so first and names the option that gives a slow server longer."""
    message = exc.message
    if exc.timeout is not None:
        what = message.removesuffix(f" within {exc.timeout}s")
        message = f"timed out after {exc.timeout}s: {what} (a larger --timeout gives it longer)"
    return message + (f" (exit code {exc.returncode})" if exc.returncode is not None else "")


def cli_target(target: str, stderr_sink: Callable[[str], Any] | None) -> Any:
    """The target the CLI connects to: a ``file.py[:object]`` runs as ``mcpkit run file.py[:object]`` (so a file
    without ``app.run()`` works, with the caller's Python), and ``--stderr`` gets the server's stderr lines."""
    import os

    from ..client.targets import parse_target
    from ..transports.stdio import StdioServer

    path, colon, obj = target.strip().partition(":")
    # (an existing file is that file, spaces in its path or not: "my servers/server.py" is no command line)
    if path.endswith(".py") and (not colon or obj.isidentifier()) and os.path.isfile(path):
        argv = [sys.executable, "-m", "mcpkit.cli.main", "run", "--script-fallback", target.strip()]
        t = parse_target(StdioServer(argv))
    else:
        t = parse_target(target)
    if stderr_sink is not None and t.stdio is not None:
        t.stdio.on_stderr = stderr_sink
    return t


class _StderrPassthrough:
    """``--stderr``: the server's stderr lines, shown live (made visible), at most ``limit`` bytes in all."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.shown = 0
        self.cut = False

    def __call__(self, line: str) -> None:
        from ..client.safe import visible

        if self.cut:
            return
        data = visible(line) + "\n"
        if self.shown + len(data) > self.limit:
            data = data[: max(0, self.limit - self.shown)]
            data += f"\n[server stderr: the rest is not shown (over --stderr-limit={self.limit} bytes)]\n"
            self.cut = True
        self.shown += len(data)
        sys.stderr.write(data)
        sys.stderr.flush()


def run_client(opts: dict[str, Any], target: str, body: Callable[[Client], Awaitable[T]]) -> T:
    """Connect, run ``body``, map every failure to a clear CLIError."""
    from pydantic import ValidationError

    from ..client.client import Client, InvalidServerResult, PaginationLimitExceeded, ToolOutputError
    from ..client.results import ModernEraRefused
    from ..client.targets import ServerNotFound, ServerStartError, TargetError
    from ..protocol.errors import CapabilityNotSupported, ConnectionClosed, MCPError, MessageTooLarge, RequestTimeout

    opts = dict(opts)
    sink = opts.pop("stderr_sink", None)

    async def main() -> T:
        async with Client(cli_target(target, sink), **opts) as client:
            return await body(client)

    try:
        return asyncio.run(main())
    except ServerNotFound as exc:
        raise CLIError(str(exc), code=2) from None
    except ServerStartError as exc:
        raise CLIError(start_failure(exc), detail=exc.stderr) from None
    except TargetError as exc:
        raise CLIError(str(exc), code=2) from None
    except (RequestTimeout, TimeoutError) as exc:
        what = f" waiting for {exc.method}" if isinstance(exc, RequestTimeout) else ""
        raise CLIError(f"timed out after {opts.get('timeout')}s{what}") from None
    except (ToolOutputError, InvalidServerResult) as exc:
        raise CLIError(str(exc)) from None
    except PaginationLimitExceeded as exc:
        raise CLIError(f"the server's list is too large: {exc}") from None
    except ModernEraRefused as exc:
        raise CLIError(modern_refused(exc.server_message, exc.code, opts.get("protocol_version") is not None)) from None
    except MCPError as exc:
        raise CLIError(f"the server answered with error {exc.code}: {exc.message}") from None
    except ValidationError as exc:
        errors = exc.errors()
        where = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
        why = errors[0]["msg"] if errors else "invalid"
        raise CLIError(
            f"the server sent an invalid {exc.title} ({exc.error_count()} problem(s); first: {where or 'value'}: {why})"
        ) from None
    except RecursionError:
        raise CLIError("the server sent a value nested too deeply to handle") from None
    except CapabilityNotSupported as exc:
        raise CLIError(str(exc)) from None
    except MessageTooLarge as exc:
        limit = f"the {exc.limit}-byte limit"
        raise CLIError(f"the server sent a message over {limit}; raise it with --max-message-size BYTES") from None
    except ConnectionClosed as exc:
        raise CLIError(f"the connection to the server was lost: {exc}") from None
    except OSError as exc:
        raise CLIError(f"cannot connect to {target}: {exc}") from None


def fail(exc: CLIError) -> None:
    from ..client.safe import text

    err = stderr_console()
    err.print(text("error: ", "bold red") + text(str(exc)), soft_wrap=True)
    if exc.detail.strip():
        err.print(text("--- server stderr ---", "dim"))
        err.print(text(exc.detail.rstrip()), soft_wrap=True)
    sys.exit(exc.code)


F = TypeVar("F", bound=Callable[..., Any])


def connection_options(fn: F) -> F:
    decorators = [
        click.argument("target"),
        click.option(
            "--timeout",
            type=SECONDS,
            default=30.0,
            show_default=True,
            help="Seconds to wait for the connection and for each request.",
        ),
        click.option(
            "--mode",
            type=click.Choice(["auto", "handshake", "modern"]),
            default="auto",
            show_default=True,
            help="Protocol era: negotiate, or force one.",
        ),
        click.option(
            "--protocol-version",
            type=click.Choice(ALL_VERSIONS),
            default=None,
            help="Pin one protocol revision (e.g. 2025-06-18).",
        ),
        click.option("-e", "--env", multiple=True, metavar="KEY=VALUE", help="Environment for a stdio server."),
        click.option("-H", "--header", multiple=True, metavar="'NAME: VALUE'", help="HTTP header for a URL target."),
        click.option(
            "--transport",
            type=click.Choice(["http", "sse", "ws"]),
            default=None,
            help="Force the transport of a URL target.",
        ),
        click.option("--root", multiple=True, metavar="URI", help="Offer this root to the server (repeatable)."),
        click.option(
            "--max-message-size",
            type=click.IntRange(min=1),
            default=None,
            metavar="BYTES",
            help="The largest message accepted from the server (default: 4 MiB).",
        ),
        click.option(
            "--interactive/--no-interactive",
            default=None,
            help="Answer the server's elicitation requests on the terminal (default: when it is a TTY).",
        ),
        click.option(
            "--answer",
            multiple=True,
            metavar="KEY=VALUE",
            help="Answer the server's form elicitations without a terminal: accept with these fields "
            "(repeatable; values parsed as JSON when they parse). URL elicitations need --interactive.",
        ),
        click.option(
            "--stderr",
            "show_stderr",
            is_flag=True,
            help="Show the stdio server's stderr as it arrives (made visible, bounded by --stderr-limit).",
        ),
        click.option(
            "--stderr-limit",
            type=click.IntRange(min=0),
            default=STDERR_PASSTHROUGH_BYTES,
            show_default=True,
            metavar="BYTES",
            help="With --stderr: show at most this much of the server's stderr.",
        ),
    ]
    for d in reversed(decorators):
        fn = d(fn)
    return fn


def check_target(target: str) -> None:
    if target.lstrip().startswith(("{", "[")):
        raise CLIError(
            f"TARGET looks like JSON ({target[:30]!r}): --json is a flag that prints JSON; pass tool arguments "
            "with --args '{...}'",
            code=2,
        )


def collect(
    target: str,
    timeout: float,
    mode: str,
    protocol_version: str | None,
    env: tuple[str, ...],
    header: tuple[str, ...],
    transport: str | None,
    root: tuple[str, ...] = (),
    interactive: bool | None = None,
    answer: tuple[str, ...] = (),
    show_stderr: bool = False,
    stderr_limit: int = STDERR_PASSTHROUGH_BYTES,
    max_message_size: int | None = None,
) -> dict[str, Any]:
    check_target(target)
    opts = client_options(
        {
            "mode": mode,
            "protocol_version": protocol_version,
            "timeout": timeout,
            "env": env,
            "header": header,
            "transport": transport,
            "root": root,
            "interactive": interactive,
            "answer": answer,
        }
    )
    if show_stderr:
        opts["stderr_sink"] = _StderrPassthrough(stderr_limit)
    if max_message_size is not None:
        opts["transport_options"] = {"max_message_size": max_message_size}
    return opts


def guard(fn: Callable[[], None]) -> None:
    try:
        fn()
    except CLIError as exc:
        fail(exc)


JSON_HELP = "Print JSON on stdout (for scripts)."
