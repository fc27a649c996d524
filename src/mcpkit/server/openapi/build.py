"""Building an app's components from an OpenAPI document (what ``MCPKit.from_openapi`` runs)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

from ..uri_template import UriTemplate
from .components import OpenAPIResource, OpenAPITemplate, OpenAPITool
from .document import Document, OpenAPIError, UnsupportedOperation, load
from .http import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_TIMEOUT, Caller, HTTPClient, origin
from .operations import Operation, Reader
from .routes import Route, route_for

logger: logging.Logger = logging.getLogger("mcpkit.server.openapi")
JSONDict = dict[str, Any]
_VAR = re.compile(r"[^A-Za-z0-9_]+")


def joined(client_base: str, server: str | None) -> str:
    """The client's base URL with the document's server URL resolved against it when that is a relative one
    (``/v3``: OpenAPI reads it relative to where the document is; here, the API the client is given); the
    client's as it is otherwise, or when it already ends with that path (``https://host/v3``)."""
    if not client_base or server is None:
        return client_base
    parts = urlsplit(server)
    path = parts.path.rstrip("/")
    if parts.scheme or parts.netloc or not path or urlsplit(client_base).path.rstrip("/").endswith(path):
        return client_base
    return urljoin(client_base.rstrip("/") + "/", server)


def populate(
    app: Any,
    spec: Mapping[str, Any] | str | bytes | os.PathLike[str],
    *,
    client: HTTPClient,
    routes: Collection[Route] = (),
    names: Mapping[str, str] | None = None,
    base_url: str | None = None,
    allowed_origins: Iterable[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    uri_base: str | None = None,
    output_schemas: bool = True,
    validate_output: bool = True,
    forward_headers: Iterable[str] = (),
    path_slashes: Iterable[str] = (),
    document: Document | None = None,
) -> list[Operation]:
    """Register on ``app`` a component per operation of ``spec`` that the route rules expose; the operations
    registered (see ``MCPKit.from_openapi`` for the options)."""
    doc = document if document is not None else Document(load(spec))
    base = base_url or joined(str(client.base_url or ""), doc.server_url()) or doc.server_url()
    if not base:
        raise OpenAPIError("no base URL: give base_url=, a client with base_url=, or a document with 'servers'")
    try:
        origin(base)
    except ValueError:
        raise OpenAPIError(f"the base URL {base!r} is not an absolute http(s) URL") from None
    caller = Caller(
        client,
        base,
        allowed_origins=allowed_origins,
        timeout=timeout,
        max_response_bytes=max_response_bytes,
        forward_headers=forward_headers,
        path_slashes=path_slashes,
    )
    reader = Reader(
        doc,
        # (a forwarded header is set by the MCP request, never by the model, as the client's own are)
        client_headers=[*client.headers.keys(), *(k.decode() for k in caller.forward)],
        client_params=list(client.params.keys()),
        client_cookies=list(client.cookies.keys()),
        output_schemas=output_schemas,
    )
    renames = dict(names or {})
    used: set[str] = set(app._tools) | set(app._resources) | set(app._templates)
    uri_root = (uri_base or f"openapi://{_slug(app.name)}").rstrip("/")
    done: list[Operation] = []
    owners: dict[str, str] = {}  # name -> the operation it was given to
    for method, path, op_doc, item in doc.operations():
        route = route_for(routes, method, path, op_doc)
        if route.kind == "exclude":
            continue
        try:
            namer = _Namer(renames, op_doc, used)
            op = reader.read(method, path, op_doc, item, namer)
        except UnsupportedOperation as exc:
            logger.warning("openapi: %s; left out", exc)
            continue
        if op.name in used:  # (only a rename can do it: a default name is made unique)
            owner = owners.get(op.name, "one of the app's own components")
            raise OpenAPIError(f"names= calls {op.label} {op.name!r}, the name of {owner}: give each its own")
        used.add(op.name)
        owners[op.name] = op.label
        tags = frozenset(op.tags) | route.labels
        if route.kind == "resource" and _resource_fits(op):
            _add_resource(app, op, caller, uri_root, tags)
        else:
            if route.kind == "resource":
                logger.warning(
                    "openapi: %s cannot be a resource (GET only, no header, cookie or body); a tool", op.label
                )
            app.add_tool(OpenAPITool(op, caller, validate_output=validate_output), tags=tags)
        done.append(op)
    return done


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-") or "api"


class _Namer:
    """An operation's component name: renamed by operationId or default name, else the default made unique."""

    def __init__(self, renames: Mapping[str, str], op: JSONDict, used: set[str]) -> None:
        self.renames = renames
        self.op = op
        self.used = used

    def __call__(self, default: str) -> str:
        for key in (self.op.get("operationId"), default):
            if isinstance(key, str) and key in self.renames:
                return self.renames[key]
        name, n = default, 2
        while name in self.used:
            name, n = f"{default}_{n}", n + 1
        return name


def _resource_fits(op: Operation) -> bool:
    if op.method != "get" or op.body is not None:
        return False
    return not any(p.location in ("header", "cookie") and p.required for p in op.params)


def _add_resource(app: Any, op: Operation, caller: Caller, uri_root: str, tags: frozenset[str]) -> None:
    path_params = [p for p in op.params if p.location == "path"]
    query_params = [p for p in op.params if p.location == "query"]
    labels = (tags, None, True)
    if not op.params:
        uri = uri_root + op.path
        if uri in app._resources:
            raise OpenAPIError(f"{op.label}: a resource {uri!r} is already registered")
        item: Any = OpenAPIResource(op, caller, uri)
        app._label("resources", uri, item, labels)
        app._resources[uri] = item
        kind = "resources"
    else:
        variables: dict[str, str] = {}
        template = uri_root + op.path
        for param in path_params:
            var = _variable(param.arg, variables)
            variables[var] = param.arg
            template = template.replace("{" + param.name + "}", "{" + var + "}")
        query_vars = []
        for param in query_params:
            var = _variable(param.arg, variables)
            variables[var] = param.arg
            query_vars.append(var)
        if query_vars:
            template += "{?" + ",".join(query_vars) + "}"
        UriTemplate(template)  # (a ValueError names what is wrong)
        if template in app._templates:
            raise OpenAPIError(f"{op.label}: a resource template {template!r} is already registered")
        item = OpenAPITemplate(op, caller, template, variables)
        app._label("resource_templates", template, item, labels)
        app._templates[template] = item
        kind = "resources"
    app._serve_lists((kind,))
    app._changed(kind)


def _variable(arg: str, taken: Mapping[str, str]) -> str:
    var = _VAR.sub("_", arg).strip("_") or "v"
    name, n = var, 2
    while name in taken:
        name, n = f"{var}_{n}", n + 1
    return name


__all__ = ["populate"]
