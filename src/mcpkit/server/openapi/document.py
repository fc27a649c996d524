"""An OpenAPI 3.0 or 3.1 document: loaded, checked and read through its local ``$ref`` pointers.

The document is the operator's (it comes from their configuration, not from a client), but it is still read with
bounds, so that a large or looping one fails with a message instead of a hang or a ``RecursionError``: at most
:data:`MAX_SPEC_BYTES` of text, ``$ref`` chains at most :data:`MAX_REF_HOPS` long, and only pointers into the
document itself (``#/...``): a reference to another file or a URL is never fetched (the operation that needs one is
left out, with a warning).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

JSONDict = dict[str, Any]

MAX_SPEC_BYTES = 16 * 1024 * 1024
"""The largest OpenAPI document read (its JSON or YAML text; a dict given directly is not measured)."""
MAX_REF_HOPS = 32
"""The longest chain of ``$ref`` pointing at ``$ref`` that is followed before the document is refused."""
MAX_OPERATIONS = 5_000
"""The most operations one document may hold."""

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class OpenAPIError(ValueError):
    """The OpenAPI document cannot be used (not 3.0/3.1, malformed, too large, an unresolvable reference)."""


class UnsupportedOperation(OpenAPIError):
    """One operation cannot become a component (an external ``$ref``, a parameter style mcpkit does not send, a
    body of a media type it cannot send); it is left out with a warning, the rest of the document is used."""


def load(spec: Mapping[str, Any] | str | bytes | os.PathLike[str]) -> JSONDict:
    """The document as a dict: ``spec`` is one already, JSON or YAML text, or the path of a ``.json`` /
    ``.yaml`` file (YAML needs PyYAML)."""
    if isinstance(spec, Mapping):
        return dict(spec)
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and _looks_like_path(spec)):
        path = Path(spec)
        if path.stat().st_size > MAX_SPEC_BYTES:
            raise OpenAPIError(f"{path}: larger than {MAX_SPEC_BYTES} bytes")
        text: str | bytes = path.read_bytes()
    else:
        text = spec
    if len(text) > MAX_SPEC_BYTES:
        raise OpenAPIError(f"the OpenAPI document is larger than {MAX_SPEC_BYTES} bytes")
    raw = text.decode("utf-8") if isinstance(text, bytes) else text
    stripped = raw.lstrip()
    if stripped.startswith("{"):
        try:
            loaded = json.loads(raw)
        except ValueError as exc:
            raise OpenAPIError(f"the OpenAPI document is not valid JSON: {exc}") from None
    else:
        try:
            import yaml  # type: ignore[import-untyped,unused-ignore]
        except ModuleNotFoundError:
            raise OpenAPIError(
                "a YAML OpenAPI document needs PyYAML (pip install pyyaml), or give it as JSON"
            ) from None
        try:
            loaded = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise OpenAPIError(f"the OpenAPI document is not valid YAML: {exc}") from None
    if not isinstance(loaded, dict):
        raise OpenAPIError("an OpenAPI document is an object")
    return loaded


def _looks_like_path(text: str) -> bool:
    return "\n" not in text and not text.lstrip().startswith("{") and text.endswith((".json", ".yaml", ".yml"))


class Document:
    """An OpenAPI document: its version (``"3.0"`` or ``"3.1"``), its operations, and its local references."""

    def __init__(self, raw: JSONDict) -> None:
        version = raw.get("openapi")
        if not isinstance(version, str) or not re.match(r"^3\.[01]\.\d+", version):
            found = version if version is not None else ("Swagger 2.0" if "swagger" in raw else "no 'openapi' field")
            raise OpenAPIError(f"an OpenAPI 3.0 or 3.1 document is needed (found {found!r})")
        self.raw = raw
        self.version: str = version[:3]
        paths = raw.get("paths") or {}
        if not isinstance(paths, dict):
            raise OpenAPIError("'paths' must be an object")
        self.paths: JSONDict = paths
        info = raw.get("info")
        self.info: JSONDict = info if isinstance(info, dict) else {}

    @property
    def title(self) -> str:
        """``info.title`` (or "openapi")."""
        title = self.info.get("title")
        return title if isinstance(title, str) and title.strip() else "openapi"

    def server_url(self) -> str | None:
        """The first ``servers[].url`` with its variables set to their defaults (None when there is none)."""
        servers = self.raw.get("servers")
        if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
            return None
        url = servers[0].get("url")
        if not isinstance(url, str):
            return None
        variables = servers[0].get("variables") or {}
        for key, var in variables.items() if isinstance(variables, dict) else ():
            if isinstance(var, dict) and isinstance(var.get("default"), str):
                url = url.replace("{" + key + "}", var["default"])
        return url

    def operations(self) -> Iterator[tuple[str, str, JSONDict, JSONDict]]:
        """Every ``(method, path, operation, path item)``, in the document's order."""
        count = 0
        for path, item in self.paths.items():
            if not isinstance(item, dict):
                continue
            item = self.resolve(item, f"paths.{path}")
            for method in HTTP_METHODS:
                op = item.get(method)
                if isinstance(op, dict):
                    count += 1
                    if count > MAX_OPERATIONS:
                        raise OpenAPIError(f"the document has more than {MAX_OPERATIONS} operations")
                    yield method, path, op, item

    def pointer(self, ref: str, where: str) -> Any:
        """What the local reference ``ref`` (``#/a/b``) points at."""
        if not ref.startswith("#"):
            raise UnsupportedOperation(f"{where}: the reference {ref!r} is not in this document (never fetched)")
        node: Any = self.raw
        for part in ref[1:].split("/")[1:] if ref != "#" else ():
            key = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise OpenAPIError(f"{where}: the reference {ref!r} points at nothing")
        return node

    def resolve(self, node: Any, where: str) -> Any:
        """``node`` with its ``$ref`` chain followed (for parameters, bodies, responses, path items)."""
        hops = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            hops += 1
            if hops > MAX_REF_HOPS:
                raise OpenAPIError(f"{where}: a $ref chain longer than {MAX_REF_HOPS} (a loop?)")
            node = self.pointer(node["$ref"], where)
        return node


__all__ = [
    "MAX_OPERATIONS",
    "MAX_REF_HOPS",
    "MAX_SPEC_BYTES",
    "Document",
    "OpenAPIError",
    "UnsupportedOperation",
    "load",
]
