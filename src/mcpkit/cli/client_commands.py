"""Client commands of the ``mcpkit`` CLI: tools, call, resources, read, prompts, prompt, ping.

Every command takes a TARGET: a command line in one argument (``"python server.py"``), a ``*.py`` file, an
``http(s)://`` or ``ws://`` URL, or ``mcp.json#name``. Human output uses rich (tables, syntax-coloured JSON);
``--json`` prints machine-readable JSON on stdout instead. Errors go to stderr with exit code 1 (2 when the
server could not be found).

``mcpkit call TARGET TOOL key=value ...``: each value is parsed as JSON when it parses (``n=3`` is a number,
``flag=true`` a boolean, ``tags=["a"]`` a list) and is a string otherwise. ``--args '{...}'`` passes the whole
arguments object instead. ``--json`` has one meaning on every command: print JSON on stdout (a flag, no value).

Everything the server sends that reaches the terminal goes through :func:`mcpkit.cli.safe.visible` (control
characters made visible, never parsed as rich markup); the server's stderr is bounded in bytes.

``register(group)`` adds the commands to a click group (``mcpkit.cli.main`` calls it). rich and click are
imported only when a command runs or is registered.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import TYPE_CHECKING, Any

import click

from ..client.display import display_name, shown_description
from ..protocol.versions import TASKS_EXTENSION
from .client_io import MAX_SHOWN_DEPTH as MAX_SHOWN_DEPTH
from .client_io import (
    NAMED_WITH_ARGUMENTS,
    CLIError,
    coerce_arguments,
    describe_args,
    described,
    follow_task,
    is_result_wrapper,
    parse_pairs,
    print_content,
    print_json,
    print_table,
    result_dict,
    same_as_text,
    stderr_console,
    stdout_console,
)
from .connecting import (
    JSON_HELP,
    TARGET_HELP,
    check_target,
    collect,
    connection_options,
    guard,
    run_client,
)

if TYPE_CHECKING:
    from ..client.client import Client


# ---------------------------------------------------------------------------------------------- commands


@click.command("tools", epilog=TARGET_HELP)
@connection_options
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def tools_command(target: str, as_json: bool, **kw: Any) -> None:
    """List the tools of the server at TARGET (every page)."""

    def go() -> None:
        opts = collect(target, **kw)
        tools = run_client(opts, target, lambda c: c.list_tools())
        if as_json:
            print_json([t.dump() for t in tools], machine=True)
            return
        from ..client.safe import text

        def row(t: Any) -> list[Any]:
            title = display_name(t)
            return [
                text(t.name, one_line=True),
                described(title if title != t.name else None, t.description),
                text(describe_args(t.input_schema), one_line=True),
            ]

        print_table(f"{len(tools)} tools", NAMED_WITH_ARGUMENTS, [row(t) for t in tools])

    guard(go)


@click.command("call", epilog=TARGET_HELP)
@connection_options
@click.argument("tool")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option("--args", "args_json", default=None, metavar="'{...}'", help="The arguments as one JSON object.")
@click.option(
    "-o", "--output", type=click.Choice(["human", "json"]), default="human", show_default=True, help="-o json = --json."
)
@click.option("--no-validate", is_flag=True, help="Do not check structured output against the outputSchema.")
@click.option("--task", "as_task", is_flag=True, help="Run the call as a task (its id is shown; Ctrl-C cancels it).")
@click.option(
    "--ttl",
    type=int,
    default=None,
    metavar="MS",
    help="With --task: how long the server should keep the task (2025-11-25; 2026-07-28 servers decide alone).",
)
def call_command(
    target: str,
    tool: str,
    pairs: tuple[str, ...],
    as_json: bool,
    args_json: str | None,
    output: str,
    no_validate: bool,
    as_task: bool,
    ttl: int | None,
    **kw: Any,
) -> None:
    """Call TOOL on the server at TARGET with KEY=VALUE arguments, each read as the tool's input schema says
    (isbn=978 stays text for a string parameter; n=3 is a number for an integer one).

    --timeout is a hard bound on the call: progress notifications do not extend it. A call that runs as a task
    (--task, a tool that requires one, or a 2026-07-28 server that answers with one) shows the task's status and
    progress; Ctrl-C or the timeout cancels the task on the server."""

    def go() -> None:
        check_target(target)
        machine = output == "json" or as_json
        arguments: dict[str, Any] = {}
        if args_json is not None:
            try:
                parsed = json.loads(args_json)
            except ValueError as exc:
                raise CLIError(f"--args: not valid JSON: {exc}", code=2) from None
            if not isinstance(parsed, dict):
                raise CLIError("--args: the arguments must be a JSON object", code=2)
            arguments.update(parsed)
        typed = parse_pairs(pairs, json_values=False)  # read by the tool's input schema once connected
        opts = collect(target, **kw)
        opts["validate_output"] = not no_validate
        deadline = float(kw["timeout"])
        result = run_client(
            opts, target, lambda c: _call_with_progress(c, tool, arguments, machine, deadline, as_task, ttl, typed)
        )
        if machine:
            print_json(result_dict(result), machine=True)
        else:
            blocks = [b.dump() for b in result.content]
            structured = result.structured
            if structured is None or structured == {}:
                print_content(blocks)
            elif same_as_text(blocks, structured):  # the text only repeats the structured value: print it once
                value = structured["result"] if is_result_wrapper(structured) else structured
                if value is None or isinstance(value, (str, int, float, bool)):
                    print_content([{"type": "text", "text": value if isinstance(value, str) else json.dumps(value)}])
                else:
                    print_json(value, machine=False)
            else:
                print_content(blocks)
                stderr_console().print(
                    "[dim]structured content" + (" (validated)" if result.validated else "") + ":[/]"
                )
                print_json(structured, machine=False)
        if result.is_error:
            if not machine:
                from ..client.safe import text

                stderr_console().print(text("error: ", "bold red") + text(f"the tool {tool!r} reported an error"))
            sys.exit(1)

    guard(go)


async def _call_with_progress(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    machine: bool,
    deadline: float,
    as_task: bool = False,
    ttl: int | None = None,
    pairs: dict[str, str] | None = None,
) -> Any:
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from ..client.safe import visible

    err = stderr_console()
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        TextColumn("{task.fields[msg]}", markup=False),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=machine or not err.is_terminal,
    )
    task_id = progress.add_task(f"calling {visible(tool, one_line=True)}", total=None, msg="")

    def on_progress(done: float, total: float | None, message: str | None) -> None:
        shown = visible(message or "", one_line=True, limit=200)
        progress.update(task_id, completed=done, total=total, msg=shown)
        if not err.is_terminal and not machine:
            pct = f" ({done / total:.0%})" if total else ""
            line = f"progress: {done:g}{'/' + format(total, 'g') if total else ''}{pct} {shown}".rstrip()
            err.print(line, markup=False)

    if pairs:  # key=value arguments, read by the tool's input schema
        found = await client.get_tool(tool)
        arguments = {**arguments, **coerce_arguments(pairs, found.input_schema if found is not None else None)}

    def on_status(task: Any) -> None:
        label = f"task {visible(task.task_id[:12], one_line=True)} {visible(task.status, one_line=True)}"
        progress.update(task_id, description=label, msg=visible(task.status_message or "", one_line=True, limit=200))
        if not err.is_terminal and not machine:
            err.print(f"{label}: {visible(task.status_message or '', one_line=True, limit=200)}".rstrip(": "))

    with progress:
        if not as_task:  # a tool that requires a task (2025-11-25); any call a 2026-07-28 server may make one
            definition = await client.get_tool(tool)
            execution = definition.execution if definition is not None else None
            as_task = execution is not None and execution.task_support == "required"
            as_task = as_task or (
                client.modern and TASKS_EXTENSION in (client.server_capabilities.get("extensions") or {})
            )
        if as_task:
            return await follow_task(client, tool, arguments, deadline, ttl, (on_progress, on_status), machine)
        try:
            async with asyncio.timeout(deadline):
                return await client.call_tool(tool, arguments, on_progress=on_progress)
        except TimeoutError:
            raise CLIError(
                f"timed out after {deadline}s waiting for tools/call (--timeout is a hard bound, progress does not "
                "extend it)"
            ) from None


@click.command("resources", epilog=TARGET_HELP)
@connection_options
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def resources_command(target: str, as_json: bool, **kw: Any) -> None:
    """List the resources and resource templates of the server at TARGET."""

    async def body(c: Client) -> tuple[list[Any], list[Any]]:
        resources = await c.list_resources()
        templates = await c.list_resource_templates()
        return resources, templates

    def go() -> None:
        resources, templates = run_client(collect(target, **kw), target, body)
        if as_json:
            print_json(
                {"resources": [r.dump() for r in resources], "resourceTemplates": [t.dump() for t in templates]},
                machine=True,
            )
            return
        from ..client.safe import text

        uri_column = {"style": "bold cyan", "overflow": "fold"}
        print_table(
            f"{len(resources)} resources",
            [("URI", uri_column), ("Name", {}), ("MIME type", {"style": "green"}), ("Description", {})],
            [
                [
                    text(r.uri, one_line=True),
                    text(r.title or r.name, one_line=True),
                    text(r.mime_type or "", one_line=True),
                    described(None, shown_description(r.description, r.title or r.name)),
                ]
                for r in resources
            ],
        )
        if templates:
            print_table(
                f"{len(templates)} resource templates",
                [("URI template", uri_column), ("Name", {}), ("Description", {})],
                [
                    [
                        text(t.uri_template, one_line=True),
                        text(t.title or t.name, one_line=True),
                        described(None, shown_description(t.description, t.title or t.name)),
                    ]
                    for t in templates
                ],
            )

    guard(go)


@click.command("read", epilog=TARGET_HELP)
@connection_options
@click.argument("uri")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the (first) contents to this file (binary resources are decoded).",
)
def read_command(target: str, uri: str, as_json: bool, out: str | None, **kw: Any) -> None:
    """Read the resource URI from the server at TARGET."""

    def go() -> None:
        result = run_client(collect(target, **kw), target, lambda c: c.read_resource(uri))
        contents = [c.dump() for c in result.contents]
        if out is not None:
            if not contents:
                raise CLIError(f"{uri} has no contents")
            first = contents[0]
            data = first["text"].encode() if "text" in first else base64.b64decode(first.get("blob", ""))
            try:
                with open(out, "wb") as fh:
                    fh.write(data)
            except OSError as exc:
                raise CLIError(f"cannot write {out}: {exc.strerror or exc}") from None
            if not as_json:
                stderr_console().print(f"wrote {len(data)} bytes to {out}", markup=False)
        if as_json:
            print_json(result.dump(), machine=True)
            return
        if out is not None:
            return
        from ..client.safe import text

        console = stdout_console()
        for c in contents:
            if "text" in c:
                console.print(text(c["text"]))
            else:
                size = len(base64.b64decode(c.get("blob", "")))
                console.print(text(f"[binary {c.get('mimeType') or 'data'}, {size} bytes: use --out FILE]", "cyan"))

    guard(go)


@click.command("prompts", epilog=TARGET_HELP)
@connection_options
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def prompts_command(target: str, as_json: bool, **kw: Any) -> None:
    """List the prompts of the server at TARGET."""

    def go() -> None:
        prompts = run_client(collect(target, **kw), target, lambda c: c.list_prompts())
        if as_json:
            print_json([p.dump() for p in prompts], machine=True)
            return
        from ..client.safe import text

        def row(p: Any) -> list[Any]:
            args = ", ".join(a.name + ("*" if a.required else "") for a in p.arguments or [])
            title = display_name(p)
            return [
                text(p.name, one_line=True),
                described(title if title != p.name else None, p.description),
                text(args, one_line=True),
            ]

        print_table(f"{len(prompts)} prompts", NAMED_WITH_ARGUMENTS, [row(p) for p in prompts])

    guard(go)


@click.command("prompt", epilog=TARGET_HELP)
@connection_options
@click.argument("name")
@click.argument("pairs", nargs=-1, metavar="[KEY=VALUE]...")
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
def prompt_command(target: str, name: str, pairs: tuple[str, ...], as_json: bool, **kw: Any) -> None:
    """Get the prompt NAME from the server at TARGET with KEY=VALUE arguments (values are strings)."""

    def go() -> None:
        arguments = parse_pairs(pairs, json_values=False)
        result = run_client(collect(target, **kw), target, lambda c: c.get_prompt(name, arguments))
        if as_json:
            print_json(result.dump(), machine=True)
            return
        from ..client.safe import text

        console = stdout_console()
        if result.description:
            console.print(text(result.description, "dim"))
        for m in result.messages:
            console.print(text(f"{m.role}:", "bold magenta", one_line=True))
            print_content([m.content.dump()])

    guard(go)


@click.command("ping", epilog=TARGET_HELP)
@connection_options
@click.option("--json", "as_json", is_flag=True, help=JSON_HELP)
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
        info = run_client(collect(target, **kw), target, body)
        if as_json:
            print_json(info, machine=True)
            return
        server = info["server"] or {}
        from ..client.safe import text

        stdout_console().print(
            text("pong", "green")
            + text(f" from {server.get('name', '?')} {server.get('version', '')}", one_line=True)
            + text(f" (protocol {info['protocolVersion']}) in {info['roundTripMs']:.1f} ms", one_line=True)
        )

    guard(go)


COMMANDS = (tools_command, call_command, resources_command, read_command, prompts_command, prompt_command, ping_command)


def register(group: click.Group) -> None:
    """Add the client commands to the ``mcpkit`` click group."""
    for cmd in COMMANDS:
        group.add_command(cmd)
