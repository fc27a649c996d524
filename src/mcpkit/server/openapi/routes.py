"""Route rules: which operations of an OpenAPI document become tools, which resources, which nothing.

Rules are tried in order and the first that matches decides; an operation no rule matches becomes a tool. A rule
matches by method, by a regular expression searched in the path, by OpenAPI tags (all of them) and by operationId,
each only when given::

    routes = [
        Route(kind="exclude", tags={"admin"}),                 # never exposed
        Route(kind="resource", methods="GET", path=r"^/pets"),  # GET /pets -> resource, GET /pets/{id} -> template
    ]

``kind="resource"`` makes a ``GET`` operation a static resource when it has no parameter, a resource
template otherwise (path parameters are its variables, query parameters optional ``{?...}`` ones); it applies to
``GET`` only (reading a resource must not change anything), and an operation that needs a header, a cookie or a
body is left a tool. ``add_tags`` labels what the rule matched, for the server's visibility rules.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

KINDS = ("tool", "resource", "exclude")


def _set(values: Collection[str] | str | None) -> frozenset[str] | None:
    if values is None:
        return None
    return frozenset((values,) if isinstance(values, str) else values)


@dataclass(frozen=True)
class Route:
    """One rule (see the module docstring).

    Attributes:
        kind: "tool", "resource" or "exclude".
        methods: HTTP methods it applies to (any when None); case does not matter.
        path: a regular expression searched in the operation's path (``re.search``).
        tags: OpenAPI tags the operation must all have.
        operations: operationIds it applies to.
        add_tags: tags given to the components it makes (for ``include_tags``/``exclude_tags``, ``app.disable``).
    """

    kind: str = "tool"
    methods: Collection[str] | str | None = None
    path: str | None = None
    tags: Collection[str] | str | None = None
    operations: Collection[str] | str | None = None
    add_tags: Collection[str] | str = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Route kind must be one of {', '.join(KINDS)} (got {self.kind!r})")
        if self.path is not None:
            re.compile(self.path)

    def matches(self, method: str, path: str, tags: Collection[str], operation_id: str | None) -> bool:
        """Whether the rule applies to this operation."""
        methods = _set(self.methods)
        if methods is not None and method.lower() not in {m.lower() for m in methods}:
            return False
        if self.path is not None and re.search(self.path, path) is None:
            return False
        wanted = _set(self.tags)
        if wanted is not None and not wanted <= set(tags):
            return False
        ids = _set(self.operations)
        return ids is None or operation_id in ids

    @property
    def labels(self) -> frozenset[str]:
        """:attr:`add_tags` as a set."""
        return _set(self.add_tags) or frozenset()


RESOURCES_FOR_GET: tuple[Route, ...] = (Route(kind="resource", methods="GET"),)
"""Every ``GET`` operation a resource or template, everything else a tool."""


def route_for(routes: Collection[Route], method: str, path: str, op: dict[str, Any]) -> Route:
    """The first rule of ``routes`` that matches (a tool rule when none does)."""
    tags = [t for t in op.get("tags") or () if isinstance(t, str)]
    operation_id = op.get("operationId") if isinstance(op.get("operationId"), str) else None
    for route in routes:
        if route.matches(method, path, tags, operation_id):
            return route
    return _DEFAULT


_DEFAULT = Route()

__all__ = ["KINDS", "RESOURCES_FOR_GET", "Route", "route_for"]
