"""A package's public names imported on first use (PEP 562): :func:`lazy_getattr`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, table: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``name`` is imported from ``table[name]`` (a module of the
    package, ``"app"`` or ``".app"``) when it is first used, and kept in the package; any other name is an
    ``AttributeError``."""
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module if module.startswith(".") else "." + module, package), name)
        namespace[name] = value
        return value

    return __getattr__
