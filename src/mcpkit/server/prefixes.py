"""Names and URIs under a prefix: how a mounted server's (or a proxied upstream's) tools, prompts and resources
are named by the server that serves them (:mod:`mcpkit.server.compose`, the proxies and the gateway).

Names: ``<prefix>_<name>``; URIs: ``scheme://<prefix>/rest`` (``scheme:<prefix>/rest`` without ``//``,
``<prefix>/rest`` without a scheme).
"""

from __future__ import annotations

import re
from typing import Any

JSONDict = dict[str, Any]

_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# a URI's scheme (RFC 3986 3.1): what comes before the first colon is one only if it looks like this (``notes/q1:x``
# and ``{+path}`` have none)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")


def check_prefix(prefix: str) -> None:
    """Refuse (``ValueError``) a prefix that names and URIs cannot carry: 1-64 characters of A-Z a-z 0-9 _ . -,
    starting with a letter or digit."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise ValueError(f"prefix {prefix!r}: 1-64 characters of A-Z a-z 0-9 _ . -, starting with a letter or digit")


def prefixed_name(prefix: str | None, name: str) -> str:
    """A mounted tool's or prompt's name: ``<prefix>_<name>``."""
    return name if prefix is None else f"{prefix}_{name}"


def prefixed_uri(prefix: str | None, uri: str) -> str:
    """A mounted resource's URI (or URI template): ``scheme://<prefix>/rest``, ``scheme:<prefix>/rest``."""
    if prefix is None:
        return uri
    scheme, colon, rest = uri.partition(":")
    if not colon or not _SCHEME.match(scheme):
        return f"{prefix}/{uri}"
    if rest.startswith("//"):
        return f"{scheme}://{prefix}/{rest[2:]}"
    return f"{scheme}:{prefix}/{rest}"


def unprefixed_uri(prefix: str | None, uri: str) -> str | None:
    """The mounted server's URI for the parent's ``uri`` (None when ``uri`` does not carry ``prefix``)."""
    if prefix is None:
        return uri
    scheme, colon, rest = uri.partition(":")
    if not colon or not _SCHEME.match(scheme):
        head = f"{prefix}/"
        return uri[len(head) :] if uri.startswith(head) else None
    if rest.startswith("//"):
        head = f"//{prefix}/"
        return f"{scheme}://{rest[len(head) :]}" if rest.startswith(head) else None
    head = f"{prefix}/"
    return f"{scheme}:{rest[len(head) :]}" if rest.startswith(head) else None


def prefixed_content(block: JSONDict, prefix: str | None) -> JSONDict:
    """A content block of a mounted (or proxied) server's result naming a resource by the parent's URI: a resource
    link's ``uri``, an embedded resource's ``resource.uri`` (so the client reads it back through the parent, as
    the parent lists it); any other block as it is."""
    if prefix is None:
        return block
    kind = block.get("type")
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        return {**block, "uri": prefixed_uri(prefix, block["uri"])}
    resource = block.get("resource")
    if kind == "resource" and isinstance(resource, dict) and isinstance(resource.get("uri"), str):
        return {**block, "resource": {**resource, "uri": prefixed_uri(prefix, resource["uri"])}}
    return block


__all__ = ["check_prefix", "prefixed_content", "prefixed_name", "prefixed_uri", "unprefixed_uri"]
