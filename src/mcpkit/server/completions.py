"""Argument completion: a completer is a list of choices or a function ``(value, context_arguments) -> values``.

Choices are filtered by what the user typed (prefix matches first, then substring matches, both
case-insensitive: the most relevant first), and every answer is cut to 100 values with ``total`` and ``hasMore``
saying how many there were.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .tools import dump_model

JSONDict = dict[str, Any]
Completer = Sequence[str] | Callable[..., Any]
MAX_VALUES = 100


def rank(choices: Iterable[str], value: str) -> list[str]:
    """Choices matching ``value``: prefix matches first, then other substring matches, order otherwise kept."""
    v = value.casefold()
    if not v:
        return list(choices)
    prefix: list[str] = []
    inner: list[str] = []
    for c in choices:
        folded = str(c).casefold()
        if folded.startswith(v):
            prefix.append(str(c))
        elif v in folded:
            inner.append(str(c))
    return prefix + inner


async def run_completer(completer: Completer, value: str, context: dict[str, str]) -> list[str]:
    """Evaluate a completer (list, sync or async function) into ranked values."""
    if not callable(completer):
        return rank(completer, value)
    params = inspect.signature(completer).parameters
    args: list[Any] = [value]
    if len(params) >= 2:
        args.append(context)
    if inspect.iscoroutinefunction(completer):
        out = await completer(*args)
    else:
        out = await asyncio.to_thread(completer, *args)
        if inspect.isawaitable(out):
            out = await out
    out = dump_model(out)
    if isinstance(out, dict):
        values = out.get("values") or []
        return [str(v) for v in values]
    return [str(v) for v in out or ()]


def completion_result(values: list[str]) -> JSONDict:
    """The ``completion`` member: at most 100 values, with ``total`` and ``hasMore``."""
    return {"completion": {"values": values[:MAX_VALUES], "total": len(values), "hasMore": len(values) > MAX_VALUES}}


__all__ = ["MAX_VALUES", "Completer", "completion_result", "rank", "run_completer"]
