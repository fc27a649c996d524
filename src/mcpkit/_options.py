"""Options checked where they are given: a misspelled keyword is a ``TypeError`` that names the closest valid one,
raised when the object is built (``MCPKit(...)``, ``Client(...)``, ``app.run(...)``, ``create_app(...)``), never a
failure later while serving.

Two tools: :func:`check_options` for a ``**options`` mapping checked against the keys of a ``TypedDict`` (options
passed through several layers, e.g. ``app.run("http", ...)`` -> uvicorn and the HTTP endpoint), and
:func:`named_options`, a decorator for functions whose options are all named parameters (Python 3.11's own
``TypeError`` does not suggest the closest name). A leaf: it imports nothing of mcpkit.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import ParamSpec, TypeVar

__all__ = ["check_choice", "check_options", "named_options", "unknown_option"]

P = ParamSpec("P")
R = TypeVar("R")


_LISTED = 12  # at most this many valid names are listed when none is close to the unknown one


def unknown_option(where: str, name: str, valid: Iterable[str], hint: str = "", see: str = "") -> TypeError:
    """The ``TypeError`` for option ``name`` of ``where``: the closest valid name when one is close enough, else
    ``hint``, else the valid names (or, when there are many, ``see``: where they are documented)."""
    import difflib  # (only when an option is wrong: not on the path of a correct call)

    names = sorted(valid)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    message = f"{where} got an unknown option {name!r}"
    if close:
        message += f"; did you mean {close[0]!r}?"
    elif hint:
        message += f"; {hint}"
    elif len(names) <= _LISTED or not see:
        message += f" (valid options: {', '.join(names)})"
    else:
        message += f" (its {len(names)} options are listed in {see})"
    return TypeError(message)


def check_options(
    where: str,
    given: Mapping[str, object],
    valid: Collection[str],
    hints: Mapping[str, str] | None = None,
    see: str = "",
) -> None:
    """Raise :func:`unknown_option` for the first key of ``given`` that is not in ``valid``. ``hints`` maps an
    invalid name to advice (e.g. ``port`` given to the stdio transport: which call takes it); ``see`` names
    where the options are documented when they are too many to list."""
    for name in given:
        if name not in valid:
            raise unknown_option(where, name, valid, (hints or {}).get(name, ""), see)


def check_choice(what: str, value: object, choices: Collection[str]) -> None:
    """Raise ``ValueError`` when ``value`` is not one of ``choices``, naming the closest one."""
    if isinstance(value, str) and value in choices:
        return
    import difflib

    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.6) if isinstance(value, str) else []
    listed = ", ".join(repr(c) for c in choices)
    suggestion = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"{what} must be one of {listed}, not {value!r}{suggestion}")


def named_options(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a function (or ``__init__``) whose options are named parameters: an unknown keyword raises a
    ``TypeError`` naming the closest parameter (``MCPKit() got an unknown option 'tittle'; did you mean
    'title'?``). A correct call costs one subset test of its keywords."""
    params = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        raise TypeError(f"named_options: {fn.__qualname__} takes **kwargs; check them with check_options")
    names = frozenset(
        n
        for n, p in params.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    )
    is_init = fn.__name__ == "__init__"
    qualname = fn.__qualname__

    @functools.wraps(fn)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        if kwargs and not names.issuperset(kwargs):
            # (the class being built, not the base class that defines __init__: "Client()", not "ClientConnection()")
            where = f"{type(args[0]).__name__}()" if is_init and args else f"{qualname}()"
            check_options(where, kwargs, names)
        return fn(*args, **kwargs)

    return checked
