"""A griffe extension for the documentation site: turn the reST roles of mcpkit's docstrings into cross-references.

mcpkit's docstrings name other objects the Sphinx way (``:class:`~mcpkit.server.lowlevel.Server```, relative
``:meth:`.serve```). mkdocstrings renders Markdown, where those roles would show as raw text. This extension rewrites
each role, when the docstrings are loaded, into an *optional* autorefs cross-reference: a link when the target is
documented somewhere on the site, plain code when it is not (so a role naming a private helper never breaks the
strict build). Used by mkdocs.yml (``extensions:`` of the python handler); not part of the package.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(?P<target>[^`]+)`")


def _module_path(obj: Any) -> tuple[str, bool]:
    module = obj if obj.is_module else obj.module
    return module.path, bool(module.is_init_module)


def _resolve(target: str, obj: Any) -> str:
    """The full dotted path ``target`` names, seen from ``obj`` (Python's relative-import rules for leading dots)."""
    if target.startswith("."):
        dots = len(target) - len(target.lstrip("."))
        module, is_package = _module_path(obj)
        parts = module.split(".")
        up = dots - 1 if is_package else dots
        base = parts[: len(parts) - up] if up else parts
        return ".".join([*base, target.lstrip(".")])
    if "." not in target:
        owner = obj.parent if obj.is_function or obj.is_attribute else obj
        if owner is not None and owner.is_class:
            return f"{owner.path}.{target}"
        return f"{_module_path(obj)[0]}.{target}"
    return target


def rewrite(text: str, obj: Any) -> str:
    """``text`` with every reST role replaced by an optional cross-reference."""

    def one(match: re.Match[str]) -> str:
        raw = match.group("target").strip()
        short = raw.startswith("~")
        target = raw.lstrip("~")
        identifier = _resolve(target, obj)
        title = target.lstrip(".").rsplit(".", 1)[-1] if short else target.lstrip(".")
        return f'<autoref identifier="{html.escape(identifier)}" optional><code>{html.escape(title)}</code></autoref>'

    return ROLE.sub(one, text)


class RstRoles(griffe.Extension):
    """Rewrite the reST roles of every docstring griffe loads."""

    def on_object(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = rewrite(obj.docstring.value, obj)
