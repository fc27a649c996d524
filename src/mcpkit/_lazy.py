"""A package's public names imported on first use (PEP 562): :func:`lazy_getattr`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str], *, needs: str | None = None) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``name`` is imported from ``table[name]`` (a module of the
    package, ``"app"`` or ``".app"``) when it is first used, and kept in the package; any other name is an
    ``AttributeError``. ``needs``: the third-party module the names need (the package's extra); without it, the
    first use fails with the one line naming ``pip install 'mcpkit[x]'`` (:mod:`mcpkit._extras`)."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if needs is not None:
            from ._extras import require

            require(needs, package)
        try:
            value = getattr(importlib.import_module(module if module.startswith(".") else "." + module, package), name)
        except ModuleNotFoundError as exc:
            from ._extras import explain

            err = explain(exc, package) if needs is not None else None
            if err is None:
                raise
            raise err from None
        namespace[name] = value
        return value

    return __getattr__
