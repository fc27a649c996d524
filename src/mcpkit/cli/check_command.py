"""``mcpkit check TARGET``: run the black-box requirement checks against a server (command line or URL)."""

from __future__ import annotations

import asyncio
import json
import sys

import click


def register(group: click.Group) -> None:
    group.add_command(check)


@click.command()
@click.argument("target", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--protocol-version", default=None, help="Revision to request in initialize (default: latest).")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for each response.")
@click.option("--header", "-H", multiple=True, help="Extra HTTP header 'Name: value' (HTTP targets).")
@click.option("--verbose", "-v", is_flag=True, help="Show every finding, not only the deciding one.")
@click.option(
    "--no-stateless",
    is_flag=True,
    help="Skip the second pass in a stateless 2026-07-28 session (run when server/discover offers it).",
)
def check(
    target: tuple[str, ...],
    as_json: bool,
    protocol_version: str | None,
    timeout: float,
    header: tuple[str, ...],
    verbose: bool,
    no_stateless: bool,
) -> None:
    """Check the MCP server TARGET against the MCP specification's requirements.

    Each requirement is a MUST (IDs M001...), SHOULD (S001...) or MAY (A001...) statement of the specification
    that a client can observe from outside the server; the report names each one with its text.

    TARGET is a command line that starts a stdio server (quote it, or put it after --) or an http(s):// URL of a
    Streamable HTTP endpoint. Exit code 1 when any applicable MUST requirement fails.

    The checks run in an initialize-handshake session (plus short sessions for version negotiation and, at
    2025-03-26, batches); when the server offers 2026-07-28 they run again statelessly ([2026-07-28] evidence).
    """
    from ..check import run_checks
    from ..protocol.versions import HANDSHAKE_VERSIONS, LATEST_HANDSHAKE

    version = protocol_version or LATEST_HANDSHAKE
    if version not in HANDSHAKE_VERSIONS:
        raise click.BadParameter(f"choose one of {', '.join(HANDSHAKE_VERSIONS)}", param_hint="--protocol-version")
    headers: dict[str, str] = {}
    for item in header:
        name, sep, value = item.partition(":")
        if not sep:
            raise click.BadParameter(f"{item!r} is not 'Name: value'", param_hint="--header")
        headers[name.strip()] = value.strip()
    spec: str | list[str] = target[0] if len(target) == 1 else list(target)
    report = asyncio.run(
        run_checks(spec, protocol_version=version, timeout=timeout, headers=headers or None, modern=not no_stateless)
    )
    from .safe import json_visible, visible

    # the report quotes what the server sent: shown through the CLI's one sanitizer
    if as_json:
        click.echo(json_visible(json.dumps(report.as_dict(), indent=2, ensure_ascii=False)))
    else:
        click.echo(visible(report.render_text(verbose=verbose)))
    sys.exit(1 if report.failed_musts() else 0)
