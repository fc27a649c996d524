"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865, stable 2026-01-26): the wire shapes both sides share.

A tool links to a view, a ``ui://`` resource of MIME type ``text/html;profile=mcp-app``, through ``_meta.ui``::

    {"resourceUri": "ui://weather/dashboard", "visibility": ["model", "app"]}

(``visibility`` defaults to both: ``"model"`` tools are offered to the model, ``"app"`` tools may be called by the
view). The view's resource carries ``_meta.ui`` too, in its listing and in its ``resources/read`` contents: the
domains its Content-Security-Policy must allow (``csp``), the browser permissions it asks for (``permissions``), a
dedicated sandbox origin (``domain``) and whether the host draws a border (``prefersBorder``).

This module checks those shapes (:func:`tool_ui`, :func:`check_view_meta`) and builds what a host enforces from
them (:func:`content_security_policy`, :func:`permission_policy`). A CSP source is accepted only as an origin a host
can enforce: ``https://`` or ``wss://`` with a host name (``*.`` allowed as its first label), a port and a path;
``http://``/``ws://`` only for loopback hosts (development servers); scheme and host in any case (the scheme is kept
in lower case); never a keyword, a bare ``*``, a scheme alone (``data:``, ``blob:``), quotes, commas or semicolons.
Each list keeps at most :data:`MAX_CSP_SOURCES` entries.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

JSONDict = dict[str, Any]

#: The MIME type of an MCP Apps view (HTML).
APP_MIME_TYPE = "text/html;profile=mcp-app"
#: The scheme of every view's URI.
UI_SCHEME = "ui://"
#: The Apps protocol revision this module follows (``ui/initialize``'s ``protocolVersion``).
APPS_PROTOCOL_VERSION = "2026-01-26"
#: The deprecated flat key some hosts still read (``_meta["ui/resourceUri"]``); servers send both.
LEGACY_RESOURCE_URI_KEY = "ui/resourceUri"
#: Who may call a tool: the model (offered in its tool list) and/or the view (``tools/call`` from the app).
VISIBILITIES = ("model", "app")
#: The CSP domain lists of ``_meta.ui.csp`` and the directive each maps to.
CSP_LISTS = {
    "connectDomains": "connect-src",
    "resourceDomains": "script-src style-src img-src font-src media-src",
    "frameDomains": "frame-src",
    "baseUriDomains": "base-uri",
}
#: The permissions a view may ask for and the Permission Policy feature each maps to.
PERMISSIONS = {
    "camera": "camera",
    "microphone": "microphone",
    "geolocation": "geolocation",
    "clipboardWrite": "clipboard-write",
}
MAX_CSP_SOURCES = 32
MAX_CSP_SOURCE_LENGTH = 512
MAX_DOMAIN_LENGTH = 253

_LOOPBACK = ("localhost", "127.0.0.1", "[::1]")
_SOURCE = re.compile(
    r"^(?P<scheme>(?i:https|wss|http|ws))://"
    r"(?P<host>(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*|\[::1\])"
    r"(?::(?:\d{1,5}|\*))?"
    r"(?:/[A-Za-z0-9._~!$&()*+=:@%/-]*)?$"
)
_DOMAIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*$")


def is_view_uri(uri: object) -> bool:
    """Whether ``uri`` is a view's URI (``ui://...`` with something after the scheme)."""
    return isinstance(uri, str) and uri.startswith(UI_SCHEME) and len(uri) > len(UI_SCHEME)


def csp_source_problem(source: object) -> str | None:
    """Why ``source`` cannot be allowed in a view's CSP, or None when it can (see the module docstring)."""
    if not isinstance(source, str):
        return f"{source!r} is not a string"
    if len(source) > MAX_CSP_SOURCE_LENGTH:
        return f"{source[:40]!r}... is longer than {MAX_CSP_SOURCE_LENGTH} characters"
    match = _SOURCE.match(source)
    if match is None:
        return f"{source!r} is not an https:// or wss:// origin (keywords, '*', data:, blob: are never allowed)"
    if match["scheme"].lower() in ("http", "ws") and match["host"].lower() not in _LOOPBACK:
        return f"{source!r}: plain http:// and ws:// are allowed for localhost only"
    return None


def _check_csp(csp: object, problems: list[str]) -> JSONDict:
    if not isinstance(csp, Mapping):
        problems.append("csp is not an object")
        return {}
    kept: JSONDict = {}
    for key, value in csp.items():
        if key not in CSP_LISTS:
            problems.append(f"csp.{key} is not a CSP list of MCP Apps (ignored)")
            continue
        if not isinstance(value, list):
            problems.append(f"csp.{key} is not a list")
            continue
        good: list[str] = []
        for source in value:
            why = csp_source_problem(source)
            if why is not None:
                problems.append(f"csp.{key}: {why}")
            else:  # (a scheme is case-insensitive: sent in lower case, as CSP writes it)
                scheme, rest = source.split("://", 1)
                source = f"{scheme.lower()}://{rest}"
                if source not in good:
                    good.append(source)
        if len(good) > MAX_CSP_SOURCES:
            problems.append(f"csp.{key}: {len(good)} sources, only the first {MAX_CSP_SOURCES} are kept")
            good = good[:MAX_CSP_SOURCES]
        if good:
            kept[key] = good
    return kept


def check_view_meta(meta: object) -> tuple[JSONDict, list[str]]:
    """``_meta.ui`` of a view's resource, checked: ``(what can be honoured, the problems found)``. Nothing wrong
    is kept (an invalid CSP source is dropped, not loosened); ``problems`` says what was dropped and why."""
    problems: list[str] = []
    ui = meta.get("ui") if isinstance(meta, Mapping) else None
    if ui is None:
        return {}, problems
    if not isinstance(ui, Mapping):
        return {}, ["_meta.ui is not an object"]
    out: JSONDict = {}
    if "csp" in ui:
        out["csp"] = _check_csp(ui["csp"], problems)
    permissions = ui.get("permissions")
    if permissions is not None:
        if not isinstance(permissions, Mapping):
            problems.append("permissions is not an object")
        else:
            granted: JSONDict = {}
            for key, value in permissions.items():
                if key not in PERMISSIONS:
                    problems.append(f"permissions.{key} is not a permission of MCP Apps (ignored)")
                elif not isinstance(value, Mapping):
                    problems.append(f"permissions.{key} is not an object")
                else:
                    granted[key] = {}
            if granted:
                out["permissions"] = granted
    domain = ui.get("domain")
    if domain is not None:
        if isinstance(domain, str) and len(domain) <= MAX_DOMAIN_LENGTH and _DOMAIN.match(domain):
            out["domain"] = domain
        else:
            problems.append(f"domain {domain!r} is not a host name")
    border = ui.get("prefersBorder")
    if border is not None:
        if isinstance(border, bool):
            out["prefersBorder"] = border
        else:
            problems.append("prefersBorder is not a boolean")
    return out, problems


def tool_ui(meta: object) -> JSONDict | None:
    """A tool's ``_meta.ui`` (``resourceUri``, ``visibility``), reading the deprecated flat ``ui/resourceUri`` too;
    None when the tool links to no view and sets no visibility. Values of the wrong type are left out."""
    if not isinstance(meta, Mapping):
        return None
    ui = meta.get("ui")
    out: JSONDict = {}
    if isinstance(ui, Mapping):
        uri = ui.get("resourceUri")
        if isinstance(uri, str):
            out["resourceUri"] = uri
        visibility = ui.get("visibility")
        if isinstance(visibility, list) and all(v in VISIBILITIES for v in visibility):
            out["visibility"] = list(visibility)
    legacy = meta.get(LEGACY_RESOURCE_URI_KEY)
    if "resourceUri" not in out and isinstance(legacy, str):
        out["resourceUri"] = legacy
    return out or None


def relinked_tool_meta(meta: Any, relink: Callable[[str], str]) -> Any:
    """A tool's ``_meta`` whose view link (``ui.resourceUri``, and the deprecated flat ``ui/resourceUri``) is
    ``relink(uri)``: what a server serving another server's tools and resources under URIs of its own (a mount's or
    a gateway's prefix) sends, so that the link names the view where it is served. ``meta`` itself (not copied)
    when it links to no view."""
    if not isinstance(meta, Mapping):
        return meta
    out: JSONDict | None = None
    ui = meta.get("ui")
    if isinstance(ui, Mapping) and isinstance(ui.get("resourceUri"), str):
        out = dict(meta)
        out["ui"] = {**ui, "resourceUri": relink(ui["resourceUri"])}
    legacy = meta.get(LEGACY_RESOURCE_URI_KEY)
    if isinstance(legacy, str):
        out = dict(meta) if out is None else out
        out[LEGACY_RESOURCE_URI_KEY] = relink(legacy)
    return meta if out is None else out


def visible_to(meta: object, who: str) -> bool:
    """Whether a tool with this ``_meta`` may be used by ``who`` (``"model"`` or ``"app"``); both by default."""
    ui = tool_ui(meta)
    visibility = ui.get("visibility") if ui is not None else None
    return visibility is None or who in visibility


def content_security_policy(csp: Mapping[str, Any] | None) -> str:
    """The Content-Security-Policy a host enforces on a view that declared ``csp`` (already checked): the spec's
    restrictive default plus exactly the declared domains; nested frames only from ``frameDomains``, ``base-uri``
    ``'self'`` unless ``baseUriDomains``, never plugins."""
    csp = csp or {}

    def listed(key: str) -> str:
        return " ".join(str(s) for s in csp.get(key) or ())

    res = listed("resourceDomains")
    extra = f" {res}" if res else ""
    connect = listed("connectDomains") or "'none'"
    frame = listed("frameDomains") or "'none'"
    base = listed("baseUriDomains") or "'self'"
    return (
        f"default-src 'none'; script-src 'self' 'unsafe-inline'{extra}; style-src 'self' 'unsafe-inline'{extra}; "
        f"img-src 'self' data:{extra}; font-src 'self' data:{extra}; media-src 'self' data:{extra}; "
        f"connect-src {connect}; frame-src {frame}; object-src 'none'; base-uri {base}; form-action 'none'"
    )


def permission_policy(permissions: Mapping[str, Any] | None) -> str:
    """The iframe ``allow`` attribute for the (checked) permissions a view asked for (empty: none)."""
    return "; ".join(PERMISSIONS[key] for key in PERMISSIONS if key in (permissions or {}))


__all__ = [
    "APPS_PROTOCOL_VERSION",
    "APP_MIME_TYPE",
    "CSP_LISTS",
    "LEGACY_RESOURCE_URI_KEY",
    "MAX_CSP_SOURCES",
    "PERMISSIONS",
    "UI_SCHEME",
    "VISIBILITIES",
    "check_view_meta",
    "content_security_policy",
    "csp_source_problem",
    "is_view_uri",
    "permission_policy",
    "relinked_tool_meta",
    "tool_ui",
    "visible_to",
]
