"""MCP Apps on the client: fetch a tool's view and check it before a host renders it.

    async with Client(target, extensions={UI_EXTENSION: UI_HOST_SETTINGS}) as client:
        tool = await client.get_tool("show_weather")
        if tool is not None and tool.ui is not None and tool.ui.resource_uri:
            view = await client.read_view(tool)      # AppView: html, csp, permissions, ... and its problems

:func:`read_view` reads the ``ui://`` resource with ``resources/read`` and checks what the Apps spec requires of it:
a ``ui://`` URI, a content with MIME type ``text/html;profile=mcp-app``, given as ``text`` or base64 ``blob`` of UTF-8,
no larger than ``max_bytes``. Anything else is a :class:`ViewError` (a host must not render it). Softer findings
(no ``<!doctype html>``, a CSP source a host cannot enforce, an unknown permission: dropped, never loosened) are
listed in :attr:`AppView.problems`; :attr:`AppView.csp` and the rest hold only what can be honoured.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..protocol.apps import APP_MIME_TYPE, check_view_meta, content_security_policy, is_view_uri
from ..protocol.types import ReadResourceResult, Tool


class ViewReader(Protocol):
    """What :func:`read_view` needs of a client (:class:`~mcpkit.client.client.Client` has it)."""

    async def get_tool(self, name: str) -> Tool | None: ...

    async def read_resource(self, uri: str) -> ReadResourceResult: ...


JSONDict = dict[str, Any]

#: What a host declares for the MCP Apps extension (``extensions={UI_EXTENSION: UI_HOST_SETTINGS}``).
UI_HOST_SETTINGS: JSONDict = {"mimeTypes": [APP_MIME_TYPE]}
#: Largest view document :func:`read_view` accepts by default (bytes of UTF-8).
DEFAULT_MAX_VIEW_BYTES = 8 * 1024 * 1024

_DOCTYPE = re.compile(r"^\ufeff?\s*(?:<!--.*?-->\s*)*<!doctype\s+html\s*>", re.I | re.S)


class ViewError(Exception):
    """A tool's view that a host must not render (not ``ui://``, wrong MIME type, unreadable, too large)."""


@dataclass
class AppView:
    """A view's document and what the host may honour of its ``_meta.ui``."""

    uri: str
    html: str
    mime_type: str
    csp: JSONDict = field(default_factory=dict)
    permissions: JSONDict = field(default_factory=dict)
    domain: str | None = None
    prefers_border: bool | None = None
    problems: list[str] = field(default_factory=list)
    meta: JSONDict = field(default_factory=dict)

    @property
    def size(self) -> int:
        """The document's size in bytes (UTF-8)."""
        return len(self.html.encode("utf-8"))

    @property
    def content_security_policy(self) -> str:
        """The Content-Security-Policy a host enforces on it (:func:`mcpkit.protocol.apps.content_security_policy`)."""
        return content_security_policy(self.csp)

    def ui_meta(self) -> JSONDict:
        """What can be honoured of its ``_meta.ui``, in wire form."""
        out: JSONDict = {}
        if self.csp:
            out["csp"] = self.csp
        if self.permissions:
            out["permissions"] = self.permissions
        if self.domain is not None:
            out["domain"] = self.domain
        if self.prefers_border is not None:
            out["prefersBorder"] = self.prefers_border
        return out


def check_view_contents(uri: str, contents: list[JSONDict], max_bytes: int = DEFAULT_MAX_VIEW_BYTES) -> AppView:
    """The view at ``uri`` from the ``contents`` of its ``resources/read`` result, checked (see the module
    docstring); :class:`ViewError` when a host must not render it."""
    if not is_view_uri(uri):
        raise ViewError(f"{uri!r} is not a view: an MCP Apps view's URI starts with ui://")
    mine = [c for c in contents if isinstance(c, dict) and c.get("uri") == uri]
    if not mine:
        mine = [c for c in contents if isinstance(c, dict)] if len(contents) == 1 else []
    if not mine:
        raise ViewError(f"resources/read of {uri} returned no content for that URI")
    content = mine[0]
    mime = content.get("mimeType")
    if mime != APP_MIME_TYPE:
        raise ViewError(f"the view {uri} has MIME type {mime!r}: an MCP Apps view must be {APP_MIME_TYPE!r}")
    if isinstance(content.get("text"), str):
        html: str = content["text"]
        if len(html) > max_bytes or len(html.encode("utf-8")) > max_bytes:
            raise ViewError(f"the view {uri} is larger than {max_bytes} bytes")
    elif isinstance(content.get("blob"), str):
        blob: str = content["blob"]
        if len(blob) > (max_bytes + 2) // 3 * 4 + 4:
            raise ViewError(f"the view {uri} is larger than {max_bytes} bytes")
        try:
            html = base64.b64decode(blob, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise ViewError(f"the view {uri} is a blob that is not base64 of UTF-8 text") from None
    else:
        raise ViewError(f"the view {uri} has neither text nor blob")
    meta = content.get("_meta") if isinstance(content.get("_meta"), dict) else {}
    ui, problems = check_view_meta(meta)
    if not _DOCTYPE.match(html):
        problems.insert(0, "the document does not start with <!doctype html> (an MCP Apps view is an HTML5 document)")
    return AppView(
        uri=uri,
        html=html,
        mime_type=mime,
        csp=ui.get("csp", {}),
        permissions=ui.get("permissions", {}),
        domain=ui.get("domain"),
        prefers_border=ui.get("prefersBorder"),
        problems=problems,
        meta=dict(meta or {}),
    )


async def view_uri_of(client: ViewReader, tool: str | Tool | JSONDict) -> str:
    """The view URI ``tool`` links to: a ``ui://`` URI itself, a tool name (its definition looked up), a
    :class:`~mcpkit.protocol.types.Tool` or a tool's wire dict; :class:`ViewError` when it links to none."""
    if isinstance(tool, str) and tool.startswith("ui://"):
        return tool
    if isinstance(tool, str):
        found = await client.get_tool(tool)
        if found is None:
            raise ViewError(f"the server has no tool {tool!r}")
        tool = found
    definition = tool if isinstance(tool, Tool) else Tool.model_validate(tool)
    ui = definition.ui
    if ui is None or not ui.resource_uri:
        raise ViewError(f"the tool {definition.name!r} links to no view (no _meta.ui.resourceUri)")
    return ui.resource_uri


async def read_view(
    client: ViewReader, tool: str | Tool | JSONDict, *, max_bytes: int = DEFAULT_MAX_VIEW_BYTES
) -> AppView:
    """Fetch and check the view of ``tool`` (a tool name, a :class:`~mcpkit.protocol.types.Tool`, a tool dict, or
    a ``ui://`` URI): see the module docstring."""
    uri = await view_uri_of(client, tool)
    result = await client.read_resource(uri)
    return check_view_contents(uri, [c.dump() for c in result.contents], max_bytes)


__all__ = [
    "DEFAULT_MAX_VIEW_BYTES",
    "UI_HOST_SETTINGS",
    "AppView",
    "ViewError",
    "check_view_contents",
    "read_view",
    "view_uri_of",
]
