"""Command-line interface (click; rich only for client output).

The console script enters through :func:`main` here, so a missing ``cli`` extra (or any other extra a command
needs) ends in one line naming the install command instead of a traceback.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``mcpkit`` command (``mcpkit.cli.main.main`` once click is importable)."""
    from .._extras import explain

    try:
        from .main import main as run

        run(argv)
    except ModuleNotFoundError as exc:
        err = explain(exc, "the mcpkit command")
        if err is None:
            raise
        print(f"error: {err}", file=sys.stderr)  # (as mcpkit.cli._errors.PREFIX: click may be absent)
        raise SystemExit(1) from None
