"""``mcpkit codegen TARGET -o module.py``: a typed client module for the tools of the server at TARGET (see
:func:`mcpkit.client.codegen.generate`), connecting as every client command does (:mod:`mcpkit.cli.connecting`)."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any

import click

from .client_io import CLIError, stderr_console
from .connecting import TARGET_HELP, collect, connection_options, guard, run_client

if TYPE_CHECKING:
    from ..client.client import Client


@click.command("codegen", epilog=TARGET_HELP)
@connection_options
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    default="-",
    show_default=True,
    help="The module to write ('-': stdout).",
)
@click.option("--class-name", default=None, help="The class's name (default: <ServerName>Tools).")
@click.option(
    "--max-tools",
    type=click.IntRange(min=1),
    default=None,
    help="Refuse a server listing more tools than this [1000].",
)
def codegen_command(target: str, output: str, class_name: str | None, max_tools: int | None, **kw: Any) -> None:
    """Write a typed Python client for the tools of the server at TARGET: a TypedDict for each tool's arguments
    (and structured result), and a class whose async methods call the tools with typed keyword arguments. The
    module passes mypy --strict; see docs/guides/cli.md."""
    import keyword

    from ..client.codegen import MAX_TOOLS, generate
    from ..client.results import PaginationLimitExceeded

    limit = max_tools or MAX_TOOLS
    if class_name is not None and (not class_name.isidentifier() or keyword.iskeyword(class_name)):
        raise click.BadParameter(f"{class_name!r} is not a Python identifier", param_hint="--class-name")

    async def body(client: Client) -> tuple[list[Any], Any]:
        try:
            tools = await client.list_tools(max_items=limit)
        except PaginationLimitExceeded:
            raise CLIError(f"the server lists more than {limit} tools (--max-tools)") from None
        return tools, client.server_info

    def go() -> None:
        tools, info = run_client(collect(target, **kw), target, body)
        name = info.name if info is not None else "server"
        version = info.version if info is not None else None
        source = generate(tools, server_name=name, server_version=version, class_name=class_name, max_tools=limit)
        if output == "-":
            sys.stdout.write(source)
            return
        _write(output, source)
        stderr_console().print(f"wrote {len(tools)} tools to {output}", markup=False)

    guard(go)


def _write(path: str, source: str) -> None:
    """``source`` to ``path``, whole or not at all (a temporary file beside it, then renamed)."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, temporary = tempfile.mkstemp(dir=folder, prefix=".codegen-", suffix=".py")
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(source)
        os.replace(temporary, path)
    except OSError as exc:
        os.unlink(temporary)
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None


def register(group: click.Group) -> None:
    """Add ``mcpkit codegen`` to the ``mcpkit`` click group."""
    group.add_command(codegen_command)
