"""A gateway's Skills (``io.modelcontextprotocol/skills``) of its members (:mod:`mcpkit.proxies`): what it declares
of theirs, and their results with every skill URI under the member's prefix, where the gateway serves the member's
files (a skill entry's ``uri`` and each of its ``resources[].uri``, a directory listing's children). What a host
checks of an entry holds under the prefix: the files' digests and sizes are the member's, and the prefix goes in
before the skill's path, whose last segment is still the skill's name."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .protocol.extensions import SKILLS_EXTENSION, declared_settings
from .protocol.jsonrpc import JSONDict
from .server.prefixes import prefixed_uri

__all__ = ["SKILLS_METHODS", "gateway_settings", "prefixed_skills_result", "serves_skills"]

#: The Skills requests: ``skills/list`` is merged across the members, the others go to the member a URI names.
SKILLS_METHODS = ("skills/list", "skills/get", "resources/directory/read")


def serves_skills(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a member declares the Skills extension."""
    return declared_settings(capabilities, SKILLS_EXTENSION) is not None


def gateway_settings(members: Iterable[Mapping[str, Any] | None]) -> JSONDict | None:
    """The Skills settings a gateway declares for its members' ``capabilities``: none when no member declares it;
    ``directoryRead`` when one does (the others answer a directory read of theirs as they would directly)."""
    found = [s for s in (declared_settings(c, SKILLS_EXTENSION) for c in members) if s is not None]
    if not found:
        return None
    return {"directoryRead": True} if any(s.get("directoryRead") is True for s in found) else {}


def _entry(entry: Any, prefix: str) -> Any:
    if not isinstance(entry, dict):
        return entry
    out = dict(entry)
    if isinstance(out.get("uri"), str):
        out["uri"] = prefixed_uri(prefix, out["uri"])
    resources = out.get("resources")
    if isinstance(resources, list):
        out["resources"] = [_item(r, prefix) for r in resources]
    return out


def _item(item: Any, prefix: str) -> Any:
    if isinstance(item, dict) and isinstance(item.get("uri"), str):
        return {**item, "uri": prefixed_uri(prefix, item["uri"])}
    return item


def prefixed_skills_result(method: str, result: JSONDict, prefix: str) -> JSONDict:
    """A member's answer to a Skills request (``method``) with its skill URIs under ``prefix``; anything that is
    not the shape the extension gives is passed as it came (the client checks an entry before it uses it)."""
    out = dict(result)
    if method == "skills/list" and isinstance(out.get("skills"), list):
        out["skills"] = [_entry(e, prefix) for e in out["skills"]]
    elif method == "skills/get":
        out["skill"] = _entry(out.get("skill"), prefix)
    elif method == "resources/directory/read" and isinstance(out.get("resources"), list):
        out["resources"] = [_item(r, prefix) for r in out["resources"]]
    return out
