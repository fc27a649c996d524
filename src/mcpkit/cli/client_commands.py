"""Client commands of the ``mcpkit`` CLI: tools, call, resources, read, prompts, prompt, ping.

Every command takes a TARGET: a command line in one argument (``"python server.py"``), a ``*.py`` file, an
``http(s)://`` or ``ws://`` URL, or ``mcp.json#name``. Human output uses rich (tables, syntax-coloured JSON);
``--json`` prints machine-readable JSON on stdout instead. Errors go to stderr with exit code 1 (2 when the
server could not be found).

``mcpkit call TARGET TOOL key=value ...``: each value is parsed as JSON when it parses (``n=3`` is a number,
``flag=true`` a boolean, ``tags=["a"]`` a list) and is a string otherwise. ``--json '{...}'`` (or ``--args``)
passes the whole arguments object instead; a bare ``--json`` asks for JSON output.

``register(group)`` adds the commands to a click group (``mcpkit.cli.main`` calls it). rich and click are
imported only when a command runs or is registered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from rich.console import Console

    from ..client.client import Client

T = TypeVar("T")
_JSON_FLAG = "\x00json-output"  # the value click gives a bare --json on `call`


TARGET_HELP = (
    "TARGET is a command line in quotes ('python server.py', 'npx -y @scope/server'), a .py file, an http(s):// "
    "URL (Streamable HTTP, falling back to the legacy HTTP+SSE transport), a ws:// URL, or mcp.json#NAME."
)


class CLIError(Exception):
    def __init__(self, message: str, code: int = 1, detail: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.detail = detail


# ---------------------------------------------------------------------------------------------- helpers


def parse_value(raw: str) -> Any:
    """``"3"`` -> 3, ``"true"`` -> True, ``'{"a":1}'`` -> dict, anything that is not JSON -> the string itself."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def parse_pairs(pairs: tuple[str, ...], *, json_values: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CLIError(f"expected key=value, got {pair!r}", code=2)
        out[key] = parse_value(value) if json_values else value
    return out


def _stdout() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=False)


def _stderr() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _print_json(value: Any, *, machine: bool) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    if machine:
        click.echo(text)
        return
    from rich.syntax import Syntax

    _stdout().print(Syntax(text, "json", theme="ansi_dark", background_color="default", word_wrap=True))


def _client_options(ctx_obj: dict[str, Any]) -> dict[str, Any]:
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
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
    if interactive:
        opts["elicitation_handler"] = ask_user
    return opts


def _prompt_value(name: str, prop: dict[str, Any], required: bool) -> Any:
    """Ask for one form field on the terminal (stderr), honouring its type, enum/oneOf choices and default."""
    from rich.prompt import Confirm, FloatPrompt, IntPrompt, Prompt

    err = _stderr()
    label = str(prop.get("title") or name) + ("" if required else " (optional)")
    if prop.get("description"):
        label += f" [dim]- {prop['description']}[/]"
    default = prop.get("default")
    kind = prop.get("type")
    choices: list[str] | None = None
    titles: dict[str, str] = {}
    if isinstance(prop.get("enum"), list):
        choices = [str(c) for c in prop["enum"]]
    elif isinstance(prop.get("oneOf") or prop.get("anyOf"), list):
        options: list[Any] = prop.get("oneOf") or prop.get("anyOf") or []
        choices = [str(o.get("const")) for o in options if isinstance(o, dict) and "const" in o]
        titles = {str(o.get("const")): str(o.get("title", o.get("const"))) for o in options if isinstance(o, dict)}
    if kind == "array":
        items = prop.get("items") or {}
        allowed = items.get("enum") or [o.get("const") for o in items.get("anyOf") or items.get("oneOf") or []]
        hint = ", ".join(str(a) for a in allowed)
        raw = Prompt.ask(
            f"{label} (comma-separated: {hint})",
            console=err,
            default=",".join(str(d) for d in default) if isinstance(default, list) else None,
        )
        return [part.strip() for part in (raw or "").split(",") if part.strip()]
    if titles:
        label += " (" + ", ".join(f"{c}={t}" for c, t in titles.items()) + ")"
    if kind == "boolean":
        return Confirm.ask(label, console=err, default=bool(default) if default is not None else False)
    if kind == "integer" and not choices:
        return IntPrompt.ask(label, console=err, default=default)
    if kind == "number" and not choices:
        return FloatPrompt.ask(label, console=err, default=default)
    answer = Prompt.ask(label, console=err, choices=choices, default=None if default is None else str(default))
    return answer


def ask_user(params: dict[str, Any]) -> Any:
    """Elicitation handler for a terminal: URL mode asks for consent; form mode asks field by field.

    Fields left empty keep their schema default (the client fills it in) or are omitted when optional."""
    from rich.markup import escape
    from rich.prompt import Confirm

    err = _stderr()
    err.print(f"[bold yellow]The server asks:[/] {escape(str(params.get('message', '')))}")
    if params.get("mode") == "url":
        err.print(f"  open: [link]{escape(str(params.get('url')))}[/link]")
        return {"action": "accept" if Confirm.ask("Did you complete it?", console=err, default=True) else "decline"}
    schema = params.get("requestedSchema") or {}
    required = set(schema.get("required") or [])
    content: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, dict):
            continue
        value = _prompt_value(name, prop, name in required)
        if value in (None, "") and name not in required:
            continue
        content[name] = value
    return {"action": "accept", "content": content}


def _run(opts: dict[str, Any], target: str, body: Callable[[Client], Awaitable[T]]) -> T:
    """Connect, run ``body``, map every failure to a clear CLIError."""
    from ..client.client import Client, ToolOutputError
    from ..client.targets import ServerNotFound, ServerStartError, TargetError
    from ..protocol.errors import CapabilityNotSupported, ConnectionClosed, MCPError, RequestTimeout

    async def main() -> T:
        async with Client(target, **opts) as client:
            return await body(client)

    try:
        return asyncio.run(main())
    except ServerNotFound as exc:
        raise CLIError(str(exc), code=2) from None
    except ServerStartError as exc:
        raise CLIError(
            exc.message + (f" (exit code {exc.returncode})" if exc.returncode is not None else ""), detail=exc.stderr
        ) from None
    except TargetError as exc:
        raise CLIError(str(exc), code=2) from None
    except (RequestTimeout, TimeoutError) as exc:
        what = f" waiting for {exc.method}" if isinstance(exc, RequestTimeout) else ""
        raise CLIError(f"timed out after {opts.get('timeout')}s{what}") from None
    except ToolOutputError as exc:
        raise CLIError(str(exc)) from None
    except MCPError as exc:
        raise CLIError(f"the server answered with error {exc.code}: {exc.message}") from None
    except CapabilityNotSupported as exc:
        raise CLIError(str(exc)) from None
    except ConnectionClosed as exc:
        raise CLIError(f"the connection to the server was lost: {exc}") from None
    except OSError as exc:
        raise CLIError(f"cannot connect to {target}: {exc}") from None


def _fail(exc: CLIError) -> None:
    err = _stderr()
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
    if exc.detail.strip():
        err.print("[dim]--- server stderr ---[/]")
        err.print(escape(exc.detail.rstrip()), soft_wrap=True)
    sys.exit(exc.code)


def _dump(model: Any) -> Any:
    return model.dump() if hasattr(model, "dump") else model


def _describe_args(schema: dict[str, Any]) -> str:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    parts = []
    for name, prop in props.items():
        typ = prop.get("type", "any") if isinstance(prop, dict) else "any"
        if isinstance(typ, list):
            typ = "|".join(str(t) for t in typ)
        parts.append(f"{name}{'*' if name in required else ''}: {typ}")
    return ", ".join(parts)


def _content_lines(blocks: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """(kind, payload) per content block, for human output."""
    out: list[tuple[str, Any]] = []
    for b in blocks:
        kind = b.get("type")
        if kind == "text":
            out.append(("text", b.get("text", "")))
        elif kind in ("image", "audio"):
            size = len(base64.b64decode(b.get("data", "") or "", validate=False)) if b.get("data") else 0
            out.append(("note", f"[{kind} {b.get('mimeType', '?')}, {size} bytes]"))
        elif kind == "resource_link":
            out.append(("note", f"[resource link] {b.get('uri')} ({b.get('name')})"))
        elif kind == "resource":
            res = b.get("resource") or {}
            if "text" in res:
                out.append(("note", f"[embedded resource {res.get('uri')}]"))
                out.append(("text", res["text"]))
            else:
                out.append(("note", f"[embedded binary resource {res.get('uri')}, {res.get('mimeType', '?')}]"))
        else:
            out.append(("json", b))
    return out


def _print_content(blocks: list[dict[str, Any]]) -> None:
    from rich.markup import escape

    console = _stdout()
    for kind, payload in _content_lines(blocks):
        if kind == "text":
            console.print(escape(str(payload)))
        elif kind == "note":
            console.print(f"[cyan]{escape(str(payload))}[/]")
        else:
            _print_json(payload, machine=False)


# ---------------------------------------------------------------------------------------------- options

F = TypeVar("F", bound=Callable[..., Any])


def _connection_options(fn: F) -> F:
    decorators = [
        click.argument("target"),
        click.option(
            "--timeout",
            type=float,
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
        click.option("--protocol-version", default=None, help="Pin one protocol revision (e.g. 2025-06-18)."),
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
            "--interactive/--no-interactive",
            default=None,
            help="Answer the server's elicitation requests on the terminal (default: when it is a TTY).",
        ),
    ]
    for d in reversed(decorators):
        fn = d(fn)
    return fn


def _collect(
    target: str,
    timeout: float,
    mode: str,
    protocol_version: str | None,
    env: tuple[str, ...],
    header: tuple[str, ...],
    transport: str | None,
    root: tuple[str, ...] = (),
    interactive: bool | None = None,
) -> dict[str, Any]:
    return _client_options(
        {
            "mode": mode,
            "protocol_version": protocol_version,
            "timeout": timeout,
            "env": env,
            "header": header,
            "transport": transport,
            "root": root,
            "interactive": interactive,
        }
    )


def _guard(fn: Callable[[], None]) -> None:
    try:
        fn()
    except CLIError as exc:
        _fail(exc)


# ---------------------------------------------------------------------------------------------- commands


@click.command("tools", epilog=TARGET_HELP)
@_connection_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
def tools_command(target: str, as_json: bool, **kw: Any) -> None:
    """List the tools of the server at TARGET (every page)."""

    def go() -> None:
        opts = _collect(target, **kw)
        tools = _run(opts, target, lambda c: c.list_tools())
        if as_json:
            _print_json([t.dump() for t in tools], machine=True)
            return
        from rich.table import Table

        table = Table(title=f"{len(tools)} tools", title_justify="left")
        table.add_column("Name", style="bold cyan", no_wrap=True)
        table.add_column("Description")
        table.add_column("Arguments (* = required)", style="green")
        for t in tools:
            desc = t.title + " - " + (t.description or "") if t.title else (t.description or "")
            table.add_row(t.name, desc.strip(), _describe_args(t.input_schema))
        _stdout().print(table)

    _guard(go)


@click.command("call", epilog=TARGET_HELP)
@_connection_options
@click.argument("tool")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option(
    "--json",
    "json_opt",
    is_flag=False,
    flag_value=_JSON_FLAG,
    default=None,
    metavar="['{...}']",
    help="With a value: the arguments as one JSON object. Bare: print the result as JSON.",
)
@click.option("--args", "args_json", default=None, metavar="'{...}'", help="The arguments as one JSON object.")
@click.option("-o", "--output", type=click.Choice(["human", "json"]), default="human", show_default=True)
@click.option("--no-validate", is_flag=True, help="Do not check structured output against the outputSchema.")
def call_command(
    target: str,
    tool: str,
    pairs: tuple[str, ...],
    json_opt: str | None,
    args_json: str | None,
    output: str,
    no_validate: bool,
    **kw: Any,
) -> None:
    """Call TOOL on the server at TARGET with KEY=VALUE arguments (values parsed as JSON when they parse)."""

    def go() -> None:
        machine = output == "json" or json_opt == _JSON_FLAG
        raw_json = args_json if args_json is not None else (json_opt if json_opt != _JSON_FLAG else None)
        arguments: dict[str, Any] = {}
        if raw_json is not None:
            try:
                parsed = json.loads(raw_json)
            except ValueError as exc:
                raise CLIError(f"--json/--args: not valid JSON: {exc}", code=2) from None
            if not isinstance(parsed, dict):
                raise CLIError("--json/--args: the arguments must be a JSON object", code=2)
            arguments.update(parsed)
        arguments.update(parse_pairs(pairs))
        opts = _collect(target, **kw)
        opts["validate_output"] = not no_validate
        result = _run(opts, target, lambda c: _call_with_progress(c, tool, arguments, machine))
        if machine:
            _print_json(result.dump(), machine=True)
        else:
            _print_content([b.dump() for b in result.content])
            if result.structured is not None and result.structured != {}:
                _stderr().print("[dim]structured content" + (" (validated)" if result.validated else "") + ":[/]")
                _print_json(result.structured, machine=False)
        if result.is_error:
            if not machine:
                _stderr().print(f"[bold red]error:[/] the tool {tool!r} reported an error")
            sys.exit(1)

    _guard(go)


async def _call_with_progress(client: Client, tool: str, arguments: dict[str, Any], machine: bool) -> Any:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    err = _stderr()
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[msg]}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=machine or not err.is_terminal,
    )
    task_id = progress.add_task(f"calling {tool}", total=None, msg="")
    reports: list[tuple[float, float | None, str | None]] = []

    def on_progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))
        progress.update(task_id, completed=done, total=total, msg=message or "")
        if not err.is_terminal and not machine:
            pct = f" ({done / total:.0%})" if total else ""
            err.print(f"progress: {done:g}{'/' + format(total, 'g') if total else ''}{pct} {message or ''}".rstrip())

    with progress:
        return await client.call_tool(tool, arguments, on_progress=on_progress)


@click.command("resources", epilog=TARGET_HELP)
@_connection_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
def resources_command(target: str, as_json: bool, **kw: Any) -> None:
    """List the resources and resource templates of the server at TARGET."""

    async def body(c: Client) -> tuple[list[Any], list[Any]]:
        resources = await c.list_resources()
        templates = await c.list_resource_templates()
        return resources, templates

    def go() -> None:
        resources, templates = _run(_collect(target, **kw), target, body)
        if as_json:
            _print_json(
                {"resources": [r.dump() for r in resources], "resourceTemplates": [t.dump() for t in templates]},
                machine=True,
            )
            return
        from rich.table import Table

        table = Table(title=f"{len(resources)} resources", title_justify="left")
        table.add_column("URI", style="bold cyan", overflow="fold")
        table.add_column("Name")
        table.add_column("MIME type", style="green")
        table.add_column("Description")
        for r in resources:
            table.add_row(r.uri, r.title or r.name, r.mime_type or "", r.description or "")
        console = _stdout()
        console.print(table)
        if templates:
            tt = Table(title=f"{len(templates)} resource templates", title_justify="left")
            tt.add_column("URI template", style="bold cyan", overflow="fold")
            tt.add_column("Name")
            tt.add_column("Description")
            for t in templates:
                tt.add_row(t.uri_template, t.title or t.name, t.description or "")
            console.print(tt)

    _guard(go)


@click.command("read", epilog=TARGET_HELP)
@_connection_options
@click.argument("uri")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the (first) contents to this file (binary resources are decoded).",
)
def read_command(target: str, uri: str, as_json: bool, out: str | None, **kw: Any) -> None:
    """Read the resource URI from the server at TARGET."""

    def go() -> None:
        result = _run(_collect(target, **kw), target, lambda c: c.read_resource(uri))
        contents = [c.dump() for c in result.contents]
        if out is not None:
            if not contents:
                raise CLIError(f"{uri} has no contents")
            first = contents[0]
            data = first["text"].encode() if "text" in first else base64.b64decode(first.get("blob", ""))
            with open(out, "wb") as fh:
                fh.write(data)
            if not as_json:
                _stderr().print(f"wrote {len(data)} bytes to {out}")
        if as_json:
            _print_json(result.dump(), machine=True)
            return
        if out is not None:
            return
        console = _stdout()
        from rich.markup import escape

        for c in contents:
            if "text" in c:
                console.print(escape(c["text"]))
            else:
                size = len(base64.b64decode(c.get("blob", "")))
                note = f"[binary {c.get('mimeType') or 'data'}, {size} bytes: use --out FILE]"
                console.print(f"[cyan]{escape(note)}[/]")

    _guard(go)


@click.command("prompts", epilog=TARGET_HELP)
@_connection_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
def prompts_command(target: str, as_json: bool, **kw: Any) -> None:
    """List the prompts of the server at TARGET."""

    def go() -> None:
        prompts = _run(_collect(target, **kw), target, lambda c: c.list_prompts())
        if as_json:
            _print_json([p.dump() for p in prompts], machine=True)
            return
        from rich.table import Table

        table = Table(title=f"{len(prompts)} prompts", title_justify="left")
        table.add_column("Name", style="bold cyan", no_wrap=True)
        table.add_column("Description")
        table.add_column("Arguments (* = required)", style="green")
        for p in prompts:
            args = ", ".join(a.name + ("*" if a.required else "") for a in p.arguments or [])
            table.add_row(p.name, p.description or "", args)
        _stdout().print(table)

    _guard(go)


@click.command("prompt", epilog=TARGET_HELP)
@_connection_options
@click.argument("name")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
def prompt_command(target: str, name: str, pairs: tuple[str, ...], as_json: bool, **kw: Any) -> None:
    """Get the prompt NAME from the server at TARGET with KEY=VALUE arguments (values are strings)."""

    def go() -> None:
        arguments = parse_pairs(pairs, json_values=False)
        result = _run(_collect(target, **kw), target, lambda c: c.get_prompt(name, arguments))
        if as_json:
            _print_json(result.dump(), machine=True)
            return
        console = _stdout()
        if result.description:
            console.print(f"[dim]{result.description}[/]")
        for m in result.messages:
            console.print(f"[bold magenta]{m.role}:[/]")
            _print_content([m.content.dump()])

    _guard(go)


@click.command("ping", epilog=TARGET_HELP)
@_connection_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")
def ping_command(target: str, as_json: bool, **kw: Any) -> None:
    """Check that the server at TARGET answers; prints its name, protocol version and the round-trip time."""

    async def body(c: Client) -> dict[str, Any]:
        rtt = await c.ping()
        return {
            "ok": True,
            "server": c.server_info,
            "protocolVersion": c.protocol_version,
            "roundTripMs": round(rtt * 1000, 3),
        }

    def go() -> None:
        info = _run(_collect(target, **kw), target, body)
        if as_json:
            _print_json(info, machine=True)
            return
        server = info["server"] or {}
        from rich.markup import escape

        _stdout().print(
            f"[green]pong[/] from {escape(str(server.get('name', '?')))} {escape(str(server.get('version', '')))} "
            f"(protocol {info['protocolVersion']}) in {info['roundTripMs']:.1f} ms"
        )

    _guard(go)


COMMANDS = (tools_command, call_command, resources_command, read_command, prompts_command, prompt_command, ping_command)


def register(group: click.Group) -> None:
    """Add the client commands to the ``mcpkit`` click group."""
    for cmd in COMMANDS:
        group.add_command(cmd)
