"""How ``@app.tool``, ``@app.prompt`` and ``@app.resource`` are spelled, and what a wrong spelling gets: an error
at decoration (when the module is imported), with the fix in its message, never a server that silently lacks a
tool or a resource.

    @app.tool                          # fine: bare
    @app.tool(name="add", title=...)   # fine: configured
    @app.tool("add")                   # TypeError: the name is a keyword: @app.tool(name='add')
    @app.resource                      # TypeError: @app.resource needs the URI: @app.resource("scheme://...")
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from .._options import check_options

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["bare_or_configured", "check_duplicate", "checked_resource_uri", "overload_options"]


@functools.cache
def overload_options(fn: Callable[..., Any]) -> frozenset[str]:
    """The keyword-only parameters of ``fn``'s ``@overload`` signatures (read once per function)."""
    return frozenset(
        name
        for variant in typing.get_overloads(fn)
        for name, param in inspect.signature(variant).parameters.items()
        if param.kind is inspect.Parameter.KEYWORD_ONLY
    )


def bare_or_configured(
    kind: str, add: Callable[..., Any], fn: Any, options: dict[str, Any], decorator: Callable[..., Any]
) -> Any:
    """One decorator, two spellings: ``@app.tool`` registers ``fn`` now; ``@app.tool(...)`` returns a decorator.
    ``kind`` ("tool", "prompt") names the decorator in errors; its options are the keyword-only parameters of
    ``decorator``'s overloads (so the typed spelling and the check cannot drift apart)."""
    check_options(f"@app.{kind}()", options, overload_options(decorator))
    if isinstance(fn, str):
        raise TypeError(
            f"@app.{kind}({fn!r}): the name is a keyword argument; write @app.{kind}(name={fn!r}) "
            f"(or a bare @app.{kind} to use the function's name)"
        )
    if fn is not None:
        if not callable(fn):
            raise TypeError(f"@app.{kind} decorates a function, not {type(fn).__name__} {fn!r}")
        add(fn, **options)
        return fn

    def register(f: F) -> F:
        if not callable(f):
            raise TypeError(f"@app.{kind}(...) decorates a function, not {type(f).__name__} {f!r}")
        add(f, **options)
        return f

    return register


def checked_resource_uri(uri: object) -> str:
    """The URI ``@app.resource(uri)`` was given, or a ``TypeError`` saying how to write it (a bare
    ``@app.resource`` hands the decorator the function itself)."""
    if isinstance(uri, str):
        return uri
    if callable(uri):
        name = getattr(uri, "__name__", "fn")
        raise TypeError(
            f'@app.resource needs the resource\'s URI: write @app.resource("scheme://path") above def {name}'
            f'(...) (a URI with {{name}} parts, e.g. "items://{{id}}", makes a template whose variables are the '
            f"function's parameters); as written, {name} would be registered as nothing"
        )
    raise TypeError(f"@app.resource(uri): the URI must be a string, not {type(uri).__name__}")


def check_duplicate(kind: str, key: str, existing: Collection[str], replace: bool, remover: str) -> None:
    """A second registration under the same name or URI is a ``ValueError`` unless ``replace`` is true."""
    if key in existing and not replace:
        raise ValueError(
            f"a {kind} named {key!r} is already registered; pass replace=True to replace it "
            f"(or call app.{remover}({key!r}) first)"
        )
