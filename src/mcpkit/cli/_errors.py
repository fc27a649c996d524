"""The errors mcpkit's commands print themselves: one line on stderr, ``error: <message>``, as the client commands
print theirs (:func:`mcpkit.cli.connecting.fail`) and as a missing extra is said (:func:`mcpkit.cli.main`). Usage
errors (a bad option or argument) stay in click's own format, ``Error: ...`` after the usage line."""

from __future__ import annotations

from typing import IO, Any

import click

#: What every error mcpkit itself prints starts with.
PREFIX = "error: "


class CommandError(click.ClickException):
    """A command could not do its work (the server did not start, a port is taken...): exit code 1."""

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``error: <message>`` on stderr (click prints ``Error: <message>``)."""
        click.echo(PREFIX + self.format_message(), file=file, err=file is None)


class LoadError(CommandError):
    """A user-facing error while loading the server module, or a server file that does not exist (exit code 2)."""

    exit_code = 2
