"""Option types shared by the commands: a value no run can use is refused by click (exit 2, naming the option)
before anything starts."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click

#: A TCP port (0: any free one).
PORT = click.IntRange(0, 65535)


if TYPE_CHECKING:
    _ParamType = click.ParamType[float]  # (generic from click 8.2; the base class at run time stays plain)
else:
    _ParamType = click.ParamType


class Seconds(_ParamType):
    """A duration in seconds: a number greater than 0 (or at least 0 with ``zero=True``), not NaN."""

    name = "seconds"

    def __init__(self, *, zero: bool = False) -> None:
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        """``value`` as a float, or a usage error naming the option."""
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if math.isnan(seconds) or seconds < 0 or (seconds == 0 and not self.zero):
            least = "0 or more" if self.zero else "greater than 0"
            self.fail(f"{value!r} is not a duration: give a number of seconds {least}", param, ctx)
        return seconds


SECONDS = Seconds()
#: A duration that may be 0 (e.g. no grace at shutdown).
SECONDS_OR_ZERO = Seconds(zero=True)
#: A bound on a count: at least 1.
COUNT = click.IntRange(min=1)
#: A logging level (the names of :mod:`logging`, any case).
LOG_LEVEL = click.Choice(["debug", "info", "warning", "error", "critical"], case_sensitive=False)
