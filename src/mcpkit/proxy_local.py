"""A proxy's own components (:mod:`mcpkit.proxies`): the tools, resources, templates and prompts registered on the
:class:`~mcpkit.proxies.ProxyServer` itself (``p.add_tool(...)``, ``p.add_resources_as_tools()``,
``p.add_tool_search()``) are served beside the upstream's.

- Lists: the proxy's own items come first, in pages of its own list (``page_size``), then the upstream's pages; the
  cursor of a list is the proxy's, sealed, carrying the page of whichever list comes next (with or without a list
  of its own: a walk goes on when that list appears or empties meanwhile).
- A name (or URI) both have is the proxy's: the upstream's item is left out of the list, with one warning per name,
  and a request of it is answered by the proxy's own.
- Requests of the proxy's own components (a call, a read, a ``prompts/get``, a completion of one) are answered by
  its registries, inside its own dispatch: its interceptors, middleware and authorization see them as they see
  every request it forwards.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .protocol.jsonrpc import JSONDict

logger: logging.Logger = logging.getLogger("mcpkit.proxy")

__all__ = ["OWN_KINDS", "drop_shadowed", "own_handler", "own_kinds_of", "owns_uri"]

#: the list methods and the registry of the proxy's own items each lists
OWN_KINDS = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resource_templates",
    "prompts/list": "prompts",
}
_WORD = {"tools": "tool", "resources": "resource", "resource_templates": "resource template", "prompts": "prompt"}


def owns_uri(app: Any, uri: Any) -> bool:
    """Whether the proxy serves ``uri`` itself: one of its own resources, or a URI one of its own templates
    matches (its reads, subscriptions and updates are the proxy's, not the upstream's)."""
    if not isinstance(uri, str):
        return False
    return uri in app._resources or any(t.match(uri) is not None for t in list(app._templates.values()))


def own_handler(app: Any, method: str, params: JSONDict) -> Callable[..., Any] | None:
    """The proxy's own handler of a request (``method``, ``params``) naming one of its own components, or None:
    the request goes upstream."""
    if method == "tools/call":
        return app._call_tool if params.get("name") in app._tools else None
    if method == "prompts/get":
        return app._get_prompt if params.get("name") in app._prompts else None
    if method == "resources/read":
        return app._read_resource if owns_uri(app, params.get("uri")) else None
    if method == "completion/complete":
        ref = params.get("ref")
        if isinstance(ref, dict) and (ref.get("name") in app._prompts or ref.get("uri") in app._templates):
            complete: Callable[..., Any] = app._complete
            return complete
    return None


def own_kinds_of(app: Any) -> set[str]:
    """The capabilities the proxy's own components need (``tools``, ``resources``, ``prompts``, ``completions``)."""
    kinds = {"tools"} if app._tools else set()
    if app._resources or app._templates:
        kinds.add("resources")
    if app._prompts:
        kinds.add("prompts")
    if app._prompts or app._templates:
        kinds.add("completions")
    return kinds


def drop_shadowed(app: Any, kind: str, items: list[Any], key: str, warned: set[tuple[str, str]]) -> list[Any]:
    """The upstream's ``items`` less those named as one of the proxy's own of registry ``kind`` (the proxy's
    wins); the first time a name is seen so, a warning says so (``warned``: the names already told of, at most one
    per name the proxy registered itself)."""
    own = {
        "tools": app._tools,
        "resources": app._resources,
        "resource_templates": app._templates,
        "prompts": app._prompts,
    }[kind]
    if not own:
        return items
    kept = []
    for item in items:
        name = item.get(key) if isinstance(item, dict) else None
        if name is None or name not in own:
            kept.append(item)
            continue
        if (kind, name) not in warned:
            warned.add((kind, name))
            logger.warning(
                "the upstream's %s %r is not served: the proxy has a %s of its own of that name, which wins",
                _WORD[kind],
                name,
                _WORD[kind],
            )
    return kept
