"""OpenAPI -> MCP: an app whose tools (and, by route rules, resources and templates) call an HTTP API.

    import httpx
    from mcpkit import MCPKit
    from mcpkit.server.openapi import Route

    api = httpx.AsyncClient(base_url="https://api.example.com", headers={"Authorization": "Bearer ..."})
    app = MCPKit.from_openapi(spec, client=api, routes=[Route(kind="resource", methods="GET")])

Each operation's parameters and JSON or form body become the tool's input schema, its documented success answer
the output schema (OpenAPI 3.0 schemas converted to JSON Schema 2020-12); the client's headers, auth and cookies
pass through to the API and are never tool arguments; requests go to the base URL's origin (and
``allowed_origins``) only, each bounded in time and in the size of its answer. See :mod:`.operations`,
:mod:`.http`, :mod:`.components`, :mod:`.routes`.

An API in the same process (a FastAPI, Starlette or any ASGI app) is served without a socket, its lifespan inside
the MCP app's: ``MCPKit.from_fastapi(api)``, or ``MCPKit.from_asgi(app, spec)`` (see :mod:`.asgi`).

Importing this package costs nothing: the builder is loaded by :meth:`OpenAPIImport.from_openapi`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self

from ..._lazy import lazy_getattr

if TYPE_CHECKING:
    import httpx

    from .asgi import InProcessTransport
    from .components import OpenAPIResource, OpenAPITemplate, OpenAPITool
    from .document import OpenAPIError, UnsupportedOperation
    from .http import HTTPClient
    from .routes import RESOURCES_FOR_GET, Route

_LAZY = {
    "InProcessTransport": "asgi",
    "Route": "routes",
    "RESOURCES_FOR_GET": "routes",
    "OpenAPIError": "document",
    "UnsupportedOperation": "document",
    "OpenAPITool": "components",
    "OpenAPIResource": "components",
    "OpenAPITemplate": "components",
}


class OpenAPIImport:
    """The ``from_openapi`` constructor of :class:`~mcpkit.server.app.MCPKit`."""

    @classmethod
    def from_openapi(
        cls,
        spec: Mapping[str, Any] | str | bytes | os.PathLike[str],
        *,
        client: HTTPClient,
        name: str | None = None,
        routes: Collection[Route] = (),
        names: Mapping[str, str] | None = None,
        base_url: str | None = None,
        allowed_origins: Iterable[str] = (),
        timeout: float = 30.0,
        max_response_bytes: int = 4 * 1024 * 1024,
        uri_base: str | None = None,
        output_schemas: bool = True,
        validate_output: bool = True,
        forward_headers: Iterable[str] = (),
        path_slashes: Iterable[str] = (),
        **options: Any,
    ) -> Self:
        """An app whose components call the API that ``spec`` (an OpenAPI 3.0 or 3.1 document: a dict, JSON or
        YAML text, or a file path) describes, through ``client`` (an ``httpx.AsyncClient``).

        Args:
            client: sends every request: its headers, auth, cookies and TLS settings apply (the credentials the
                API needs go here; they are never tool arguments).
            name: the server's name (default: the document's ``info.title``).
            routes: :class:`~mcpkit.server.openapi.routes.Route` rules, first match wins; by default every
                operation is a tool.
            names: new names by operationId (or by default name).
            base_url: where the API is (default: the client's ``base_url``, with the document's first server
                resolved against it when that is relative, ``/v3``; else the document's first server).
            allowed_origins: other origins (``https://host:port``) requests may go to; the base URL's always.
            timeout: seconds one exchange may take, connecting to last byte.
            max_response_bytes: the largest answer read (decompressed).
            uri_base: the root of resource URIs (default ``openapi://<name>``).
            output_schemas: declare each tool's output schema from its documented success answer.
            validate_output: check JSON answers against that schema (a mismatch is an ``isError`` result).
            forward_headers: names of headers of the MCP client's HTTP request to send on to the API with each
                call it makes (``("authorization",)`` for an API that checks the same tokens itself). None by
                default, and opt in with care: a token the client presented was issued for this MCP server, and
                the MCP authorization rules forbid passing it through to another service (the confused-deputy
                problem) unless that service trusts the same tokens, which is yours to know. Over stdio there is
                no request to take them from. Hop-by-hop headers, ``Host`` and ``Content-Length`` are refused.
            path_slashes: names of path parameters whose values may hold ``/`` (a file path the API takes whole,
                ``/repos/{owner}/{repo}/contents/{path}``), sent as they are. Anywhere else a ``/`` or ``\\`` in a
                path argument is refused: the API decodes even an encoded ``/`` before it routes, so the model
                would choose which route it calls (``{"name": "a/delete"}`` reaching ``/files/{name}/delete``).
                A named parameter's parts are still refused when empty, ``.`` or ``..``.
            **options: passed to the app's constructor (``version``, ``instructions``, ``include_tags``, ...).
        """
        from .build import populate
        from .document import Document, load

        doc = Document(load(spec))
        app = cls(name or doc.title, **options)  # type: ignore[call-arg]
        populate(
            app,
            spec,
            client=client,
            routes=routes,
            names=names,
            base_url=base_url,
            allowed_origins=allowed_origins,
            timeout=timeout,
            max_response_bytes=max_response_bytes,
            uri_base=uri_base,
            output_schemas=output_schemas,
            validate_output=validate_output,
            forward_headers=forward_headers,
            path_slashes=path_slashes,
            document=doc,
        )
        return app

    @classmethod
    def from_fastapi(cls, api: Any, *, client: httpx.AsyncClient | None = None, **options: Any) -> Self:
        """An app whose components call ``api`` (a FastAPI app, or any ASGI app with an ``openapi()`` method
        returning its document) in this process: ``from_asgi(api, api.openapi(), ...)``.

        Args:
            api: the API app.
            client, **options: as for :meth:`from_asgi`.
        """
        try:
            document = api.openapi
        except AttributeError:
            raise TypeError(
                f"from_fastapi needs an app with an openapi() method returning its OpenAPI document (a FastAPI "
                f"app); a {type(api).__name__} has none: give its document to from_asgi(app, spec)"
            ) from None
        if not callable(document):
            raise TypeError(f"from_fastapi: {type(api).__name__}.openapi is not a method returning the document")
        spec = document()
        if not isinstance(spec, Mapping):
            raise TypeError(f"from_fastapi: {type(api).__name__}.openapi() gave a {type(spec).__name__}, not a dict")
        return cls.from_asgi(api, spec, client=client, **options)

    @classmethod
    def from_asgi(
        cls,
        app: Any,
        spec: Mapping[str, Any] | str | bytes | os.PathLike[str],
        *,
        client: httpx.AsyncClient | None = None,
        **options: Any,
    ) -> Self:
        """An app whose components call the ASGI ``app`` (FastAPI, Starlette, Litestar, ...) that ``spec``
        describes, in this process: no socket, no port. Requests go to ``app`` through an
        :class:`~mcpkit.server.openapi.asgi.InProcessTransport` (answers streamed, so ``max_response_bytes``
        bounds what is read of them), addressed to ``http://asgi.internal`` joined with the document's relative
        server URL. ``app``'s lifespan runs inside the MCP app's: its startup before the first call (a startup
        that fails is raised from the MCP server's start), its shutdown when the MCP server stops.

        Args:
            app: the API app (an ASGI callable).
            spec: its OpenAPI document, as for :meth:`from_openapi`.
            client: an ``httpx.AsyncClient`` with headers, auth or cookies of its own for the API; it must be
                built on this app's transport, ``httpx.AsyncClient(transport=InProcessTransport(app), ...)``
                (anything else is refused with a ``ValueError`` when the MCP server starts: one request through
                it, which only that transport answers, tells). Default: a plain one.
            startup_timeout: seconds ``app``'s lifespan startup may take (default 60): past it, the MCP server's
                start fails with a ``TimeoutError`` naming the app.
            **options: as for :meth:`from_openapi` (``routes``, ``names``, ``timeout``, ``max_response_bytes``,
                ``forward_headers``, the app's own options...), except ``base_url`` and ``allowed_origins``:
                every request goes to ``app`` itself.
        """
        from .asgi import in_process

        built: Self = in_process(cls, app, spec, client, options)
        return built


if not TYPE_CHECKING:  # (a type checker reads the imports above: a misspelled name is an error there)
    __getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "RESOURCES_FOR_GET",
    "InProcessTransport",
    "OpenAPIError",
    "OpenAPIImport",
    "OpenAPIResource",
    "OpenAPITemplate",
    "OpenAPITool",
    "Route",
    "UnsupportedOperation",
]
