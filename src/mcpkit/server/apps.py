"""MCP Apps on the server: views (``ui://`` resources of type ``text/html;profile=mcp-app``) and the tools that link
to them (``@app.tool(ui=...)``). Mixed into :class:`~mcpkit.server.app.MCPKit`.

    app.add_view("ui://clock/view", html="<!doctype html>...", csp={"connectDomains": ["https://api.example.com"]})

    @app.tool(ui="ui://clock/view")                       # the model calls it, the host renders the view
    def now() -> dict[str, str]: ...

    @app.tool(ui={"visibility": ["app"]})                 # only the view may call it (its buttons)
    def refresh() -> dict[str, str]: ...

A view's document comes from an HTML string, a file, a function returning HTML (``@app.view``) or a directory of
built assets (``directory=``, ``entry="index.html"``): its local scripts, stylesheets (their local ``@import``
rules too), images (``srcset`` too) and fonts are inlined into one document (a view is one document: the host loads
it from ``resources/read``), so that it behaves as its files did: a ``defer`` script runs from the end of the body.
A path that leaves the directory (``..``, an absolute path, a symlink out of it) is an error; so is a document
over ``max_bytes``, and a script that imports another file of the directory (a code-split chunk: build the view as
one file, with Vite ``vite-plugin-singlefile``).

Mistakes are found when the view or the tool is registered, not when a host renders it: a view URI that is not
``ui://``, a MIME type other than ``text/html;profile=mcp-app`` (the default for every ``ui://`` resource), a CSP
source a host cannot enforce, a permission MCP Apps does not define, a tool whose ``resourceUri`` is not a
registered view, a visibility other than ``model``/``app``.
"""

from __future__ import annotations

import base64
import mimetypes
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

from ..protocol.apps import (
    APP_MIME_TYPE,
    LEGACY_RESOURCE_URI_KEY,
    PERMISSIONS,
    VISIBILITIES,
    check_view_meta,
    is_view_uri,
)
from ..protocol.extensions import UI_EXTENSION

if TYPE_CHECKING:
    from .resources import Resource, ResourceTemplate

JSONDict = dict[str, Any]
F = TypeVar("F", bound=Callable[..., Any])

#: Largest view document (bytes of UTF-8) a view may have, inlined assets included.
DEFAULT_MAX_VIEW_BYTES = 8 * 1024 * 1024
#: Most local assets one directory view may inline.
MAX_VIEW_ASSETS = 256

_SCRIPT = re.compile(r"<script\b(?P<attrs>[^>]*)>\s*</script\s*>", re.I)
_LINK = re.compile(r"<link\b(?P<attrs>[^>]*?)/?>", re.I)
_MEDIA = re.compile(r"<(?P<tag>img|source|audio|video)\b(?P<attrs>[^>]*?)(?P<end>/?)>", re.I)
_ATTR = re.compile(r"""([A-Za-z_:][-A-Za-z0-9_:.]*)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
# one candidate of a srcset: its URL (no whitespace; a trailing comma ends it), then its descriptor, if any
_SRCSET = re.compile(r"\s*(?P<url>[^\s,][^\s]*?),?(?=\s|$)(?P<rest>[^,]*)(?:,|$)")
_CSS_IMPORT = re.compile(
    r"""@import\s+(?:url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)|"([^"]*)"|'([^']*)')(?P<media>[^;]*);""", re.I
)
#: how deep a directory view's stylesheets may @import one another (a cycle ends here too)
MAX_CSS_IMPORT_DEPTH = 8
_CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)\s]*))\s*\)""", re.I)
_EXTERNAL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|//|#)")


# a module a script loads by a relative URL: `import x from "./a.js"`, `import "./a.js"`, `export {x} from "./a.js"`,
# `import("./a.js")` (minified or not)
_IMPORT = re.compile(
    r"""(?:\bimport\s*(?:\(\s*|[\w$*{}\s,]*?\bfrom\s*)?|\bexport\s*[\w$*{}\s,]*?\bfrom\s*)"""
    r"""(?:"((?:\.{1,2})?/[^"\n]*)"|'((?:\.{1,2})?/[^'\n]*)'|`((?:\.{1,2})?/[^`$\n]*)`)"""
)
# what would end an inline script element ("</script") or stop its end tag from ending it ("<!--", then "<script")
_SCRIPT_CLOSE = re.compile(r"</(script)", re.I)
_COMMENT_OPEN = re.compile(r"(?<!\\)((?:\\\\)*)\\?<!--")


def _escape_script(code: str) -> str:
    """A script's text made safe to inline, as the HTML standard advises: ``</script`` as ``<\\/script`` and ``<!--``
    as ``\\x3C!--`` (the same characters in a string, a template or a regular expression, even one with the ``u``
    flag, where ``<\\!--`` is a SyntaxError; a backslash that escaped the ``<`` is replaced with it)."""
    return _COMMENT_OPEN.sub(r"\1\\x3C!--", _SCRIPT_CLOSE.sub(r"<\\/\1", code))


def _attrs(text: str) -> dict[str, str]:
    return {
        m[1].lower(): (m[2] if m[2] is not None else m[3] if m[3] is not None else m[4] or "")
        for m in _ATTR.finditer(text)
    }


def _render_attrs(attrs: Mapping[str, str], drop: Iterable[str]) -> str:
    skip = set(drop)  # (a value keeps its entities as written; a double quote of a single-quoted one is escaped)
    return "".join(
        f' {k}="{v.replace(chr(34), "&quot;")}"' if v != "" else f" {k}" for k, v in attrs.items() if k not in skip
    )


class _Inliner:
    """One directory view being built: every local reference resolved inside ``root``, counted and bounded."""

    def __init__(self, root: Path, max_bytes: int) -> None:
        self.root = root.resolve()
        self.max_bytes = max_bytes
        self.assets = 0
        self.total = 0

    def resolve(self, ref: str, base: Path) -> Path | None:
        """The file a local reference names (None: not local, left as it is); ValueError when it leaves root."""
        ref = ref.strip()
        if not ref or _EXTERNAL.match(ref):
            return None
        path = unquote(ref.split("#", 1)[0].split("?", 1)[0])
        if "\\" in path or "\x00" in path or re.match(r"^/*[A-Za-z]:", path):
            raise ValueError(f"view asset {ref!r}: not a path inside the view's directory")
        # "/assets/x.js" (a bundler's default base) is read from the directory's root, never the file system's
        target = (self.root / path.lstrip("/") if path.startswith("/") else base / path).resolve()
        if not target.is_relative_to(self.root):
            raise ValueError(f"view asset {ref!r} is outside the view's directory {str(self.root)!r}")
        if not target.is_file():
            raise ValueError(f"view asset {ref!r} not found in {str(self.root)!r}")
        return target

    def read(self, path: Path) -> bytes:
        self.assets += 1
        if self.assets > MAX_VIEW_ASSETS:
            raise ValueError(f"the view inlines more than {MAX_VIEW_ASSETS} assets")
        data = path.read_bytes()
        self.total += len(data)
        if self.total > self.max_bytes:
            raise ValueError(f"the view is larger than {self.max_bytes} bytes with its assets (max_bytes)")
        return data

    def data_url(self, path: Path) -> str:
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return f"data:{mime};base64,{base64.b64encode(self.read(path)).decode('ascii')}"

    def refuse_chunks(self, code: str, script: Path) -> None:
        """ValueError when ``script`` imports another file of the directory (a code-split chunk): the view is one
        document in a sandbox with nothing to fetch it from, and its CSP allows no module URL to stand in for it."""
        for m in _IMPORT.finditer(code):
            ref = next(g for g in m.groups() if g is not None)
            path = unquote(ref.split("#", 1)[0].split("?", 1)[0])
            chunk = (self.root / path.lstrip("/") if path.startswith("/") else script.parent / path).resolve()
            if chunk.is_relative_to(self.root) and chunk.is_file():
                raise ValueError(
                    f"view script {script.relative_to(self.root).as_posix()!r} imports "
                    f"{chunk.relative_to(self.root).as_posix()!r}: a view is one document, and a code-split chunk "
                    "cannot be loaded in the host's sandbox; build the view as a single file (with Vite: "
                    "vite-plugin-singlefile, as the MCP Apps quickstart does)"
                )

    def css(self, text: str, base: Path, depth: int = 0) -> str:
        def imported(m: re.Match[str]) -> str:  # the file in place of its @import (media: an @media block)
            ref = next(g for g in m.groups()[:5] if g is not None)
            target = self.resolve(ref, base)
            if target is None:
                return m[0]
            if depth >= MAX_CSS_IMPORT_DEPTH:
                raise ValueError(f"view stylesheet {ref!r}: @import nested deeper than {MAX_CSS_IMPORT_DEPTH}")
            inner = self.css(self.read(target).decode("utf-8"), target.parent, depth + 1)
            condition = m["media"].strip()
            return f"@media {condition} {{\n{inner}\n}}" if condition else inner

        text = _CSS_IMPORT.sub(imported, text)

        def one(m: re.Match[str]) -> str:
            ref = m[1] if m[1] is not None else m[2] if m[2] is not None else m[3]
            target = self.resolve(ref, base)
            return m[0] if target is None else f'url("{self.data_url(target)}")'

        return _CSS_URL.sub(one, text)

    def document(self, entry: Path) -> str:
        html = self.read(entry).decode("utf-8")
        base = entry.parent
        deferred: list[str] = []

        def script(m: re.Match[str]) -> str:
            attrs = _attrs(m["attrs"])
            target = self.resolve(attrs.get("src", ""), base)
            if target is None:
                return m[0]
            code = self.read(target).decode("utf-8")
            self.refuse_chunks(code, target)
            code = _escape_script(code)
            classic = attrs.get("type", "").strip().lower() != "module"  # (a module script is deferred inline too)
            if classic and "defer" in attrs and "async" not in attrs:
                # an inline script ignores defer: it runs once the document is parsed only from the end of the body
                deferred.append(
                    f"<script{_render_attrs(attrs, ('src', 'integrity', 'crossorigin', 'defer'))}>{code}</script>"
                )
                return ""
            return f"<script{_render_attrs(attrs, ('src', 'integrity', 'crossorigin'))}>{code}</script>"

        def link(m: re.Match[str]) -> str:
            attrs = _attrs(m["attrs"])
            rel = attrs.get("rel", "").lower().split()
            target = self.resolve(attrs.get("href", ""), base)
            if target is None:
                return m[0]
            if "stylesheet" in rel:
                css = self.css(self.read(target).decode("utf-8"), target.parent)
                kept = {k: v for k, v in attrs.items() if k in ("media", "title", "nonce")}  # (print-only stays so)
                return (
                    f"<style{_render_attrs(kept, ())}>" + re.sub(r"</(style)", r"<\\/\1", css, flags=re.I) + "</style>"
                )
            if "modulepreload" in rel or "preload" in rel or "prefetch" in rel:
                return ""  # (what it preloads is inlined, or not needed)
            return f"<link{_render_attrs({**attrs, 'href': self.data_url(target)}, ())}>"

        def srcset(value: str) -> str:  # "a.png 1x, b.png 2x": each local candidate inlined, its descriptor kept
            out = []
            for candidate in _SRCSET.finditer(value):
                target = self.resolve(candidate["url"], base)
                out.append((candidate["url"] if target is None else self.data_url(target)) + candidate["rest"])
            return ", ".join(out)

        def media(m: re.Match[str]) -> str:
            attrs = _attrs(m["attrs"])
            changed = dict(attrs)
            target = self.resolve(attrs.get("src", ""), base)
            if target is not None:
                changed["src"] = self.data_url(target)
            if attrs.get("srcset"):  # (a browser loads a candidate of srcset before src)
                changed["srcset"] = srcset(attrs["srcset"])
            if changed == attrs:
                return m[0]
            return f"<{m['tag']}{_render_attrs(changed, ())}{m['end']}>"

        html = _SCRIPT.sub(script, html)
        html = _LINK.sub(link, html)
        html = _MEDIA.sub(media, html)
        if deferred:  # in their order, after everything the document holds (before </body> when there is one)
            end = [m.start() for m in re.finditer(r"</body\s*>", html, re.I)]
            at = end[-1] if end else len(html)
            html = html[:at] + "".join(deferred) + html[at:]
        return html


def build_view_document(
    *,
    html: str | None = None,
    file: str | Path | None = None,
    directory: str | Path | None = None,
    entry: str = "index.html",
    max_bytes: int = DEFAULT_MAX_VIEW_BYTES,
) -> str:
    """A view's HTML document from exactly one of ``html``, ``file`` or ``directory`` (its ``entry`` with every local
    script, stylesheet, image and font inlined; see the module docstring). ValueError on anything wrong."""
    if sum(x is not None for x in (html, file, directory)) != 1:
        raise ValueError("a view needs exactly one of html=, file= or directory=")
    if html is not None:
        text = html
    elif file is not None:
        path = Path(file)
        if not path.is_file():
            raise ValueError(f"view file {str(path)!r} not found")
        text = path.read_bytes().decode("utf-8")
    else:
        root = Path(directory)  # type: ignore[arg-type]
        if not root.is_dir():
            raise ValueError(f"view directory {str(root)!r} not found")
        inliner = _Inliner(root, max_bytes)
        target = inliner.resolve(entry, inliner.root)
        if target is None:
            raise ValueError(f"view entry {entry!r} must be a file of the directory")
        text = inliner.document(target)
    if len(text.encode("utf-8")) > max_bytes:
        raise ValueError(f"the view document is larger than {max_bytes} bytes (max_bytes)")
    return text


def view_meta(
    csp: Mapping[str, Iterable[str]] | None = None,
    permissions: Iterable[str] | Mapping[str, Any] | None = None,
    domain: str | None = None,
    prefers_border: bool | None = None,
    meta: Mapping[str, Any] | None = None,
) -> JSONDict:
    """A view resource's ``_meta`` with its ``ui`` entry, checked strictly (ValueError names every problem)."""
    ui: JSONDict = {}
    if csp is not None:
        ui["csp"] = {key: list(value) for key, value in csp.items()}
    if permissions is not None:
        names = list(permissions.keys()) if isinstance(permissions, Mapping) else list(permissions)
        ui["permissions"] = {name: {} for name in names}
        unknown = [n for n in names if n not in PERMISSIONS]
        if unknown:
            raise ValueError(f"unknown view permissions {unknown}: use {', '.join(PERMISSIONS)}")
    if domain is not None:
        ui["domain"] = domain
    if prefers_border is not None:
        ui["prefersBorder"] = prefers_border
    out = dict(meta or {})
    if not ui:
        return out
    checked, problems = check_view_meta({"ui": ui})
    if problems:
        raise ValueError("view _meta.ui: " + "; ".join(problems))
    if "csp" in ui:
        ui["csp"] = checked["csp"]  # (each scheme in lower case, each source once)
    out["ui"] = ui
    return out


def tool_ui_meta(ui: Any, meta: Mapping[str, Any] | None, has_view: Callable[[str], bool]) -> JSONDict:
    """A tool's ``_meta`` with ``ui`` (and the flat ``ui/resourceUri`` older hosts read) from ``ui=``: a view URI,
    the view's resource, or ``{"resourceUri": ..., "visibility": [...]}`` (ValueError when it is not right)."""
    uri = getattr(ui, "uri", None)
    if isinstance(ui, str) or uri is not None:
        ui = {"resourceUri": uri if uri is not None else ui}
    if not isinstance(ui, Mapping):
        raise TypeError("ui= takes a view URI, a view, or {'resourceUri': ..., 'visibility': [...]}")
    unknown = sorted(set(ui) - {"resourceUri", "visibility"})
    if unknown:
        raise ValueError(f"ui=: unknown keys {unknown} (resourceUri, visibility)")
    out: JSONDict = {}
    resource_uri = ui.get("resourceUri")
    if resource_uri is not None:
        if not is_view_uri(resource_uri):
            raise ValueError(f"ui=: the view URI {resource_uri!r} must start with ui://")
        if not has_view(resource_uri):
            raise ValueError(
                f"ui=: no view is registered at {resource_uri!r}; register it first with "
                f"app.add_view({resource_uri!r}, html=...) (or @app.view)"
            )
        out["resourceUri"] = resource_uri
    visibility = ui.get("visibility")
    if visibility is not None:
        visibility = [visibility] if isinstance(visibility, str) else list(visibility)
        if not visibility or any(v not in VISIBILITIES for v in visibility) or len(set(visibility)) != len(visibility):
            raise ValueError(f"ui=: visibility must list 'model' and/or 'app' once each, not {visibility!r}")
        out["visibility"] = visibility
    merged = dict(meta or {})
    merged["ui"] = out
    if resource_uri is not None:
        merged[LEGACY_RESOURCE_URI_KEY] = resource_uri
    return merged


def check_ui_resource(uri: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` of a resource: a ``ui://`` one gets the Apps MIME type by default, an error for another one."""
    if not uri.startswith("ui://"):
        return options
    mime = options.get("mime_type")
    if mime is None:
        options["mime_type"] = APP_MIME_TYPE
    elif mime != APP_MIME_TYPE:
        raise ValueError(f"ui:// resource {uri!r}: the MIME type of a view must be {APP_MIME_TYPE!r}, not {mime!r}")
    return options


class Apps:
    """MCP Apps for :class:`~mcpkit.server.app.MCPKit` (see the module docstring)."""

    extensions: Any
    add_resource: Callable[..., Resource | ResourceTemplate]
    _resources: dict[str, Resource]
    _templates: dict[str, ResourceTemplate]

    def add_view(
        self,
        uri: str,
        source: Callable[..., Any] | None = None,
        *,
        html: str | None = None,
        file: str | Path | None = None,
        directory: str | Path | None = None,
        entry: str = "index.html",
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        csp: Mapping[str, Iterable[str]] | None = None,
        permissions: Iterable[str] | Mapping[str, Any] | None = None,
        domain: str | None = None,
        prefers_border: bool | None = None,
        meta: Mapping[str, Any] | None = None,
        mime_type: str = APP_MIME_TYPE,
        max_bytes: int = DEFAULT_MAX_VIEW_BYTES,
        replace: bool = False,
        **options: Any,
    ) -> Resource:
        """Register a view: a ``ui://`` resource whose document is ``html``, the file ``file``, the directory
        ``directory`` (its ``entry`` with its assets inlined) or what the function ``source`` returns on each read.

        ``csp`` (``connectDomains``, ``resourceDomains``, ``frameDomains``, ``baseUriDomains``), ``permissions``
        (``camera``, ``microphone``, ``geolocation``, ``clipboardWrite``), ``domain`` and ``prefers_border`` go to
        its ``_meta.ui``, in its listing and its ``resources/read`` contents. Declares the MCP Apps extension.
        """
        if not is_view_uri(uri):
            raise ValueError(f"view URI {uri!r} must start with ui:// (MCP Apps views are ui:// resources)")
        check_ui_resource(uri, {"mime_type": mime_type})
        if "{" in uri:
            raise ValueError(f"view URI {uri!r}: a view is one document, not a template")
        full_meta = view_meta(csp, permissions, domain, prefers_border, meta)
        content: Any = source
        if source is None:
            content = build_view_document(html=html, file=file, directory=directory, entry=entry, max_bytes=max_bytes)
        elif any(x is not None for x in (html, file, directory)):
            raise ValueError("a view takes a function or one of html=, file=, directory=, not both")
        item = self.add_resource(
            uri,
            content,
            name=name or uri[len("ui://") :],
            title=title,
            description=description,
            mime_type=APP_MIME_TYPE,
            meta=full_meta or None,
            replace=replace,
            **options,
        )
        if UI_EXTENSION not in self.extensions:
            self.extensions.declare(UI_EXTENSION, {})
        return item  # type: ignore[return-value]

    def view(self, uri: str, **options: Any) -> Callable[[F], F]:
        """Decorator: a view whose document is what the function returns (HTML text), on each read; ``options`` as
        :meth:`add_view` takes them."""

        def register(fn: F) -> F:
            self.add_view(uri, fn, **options)
            return fn

        return register

    def _has_view(self, uri: str) -> bool:
        return uri in self._resources or any(t.match(uri) is not None for t in self._templates.values())

    def _link_view(self, options: dict[str, Any]) -> None:
        """``ui=`` of a tool being registered, merged into its ``meta`` (add_tool calls it)."""
        ui = options.pop("ui", None)
        if ui is not None:
            options["meta"] = tool_ui_meta(ui, options.get("meta"), self._has_view)


__all__ = ["DEFAULT_MAX_VIEW_BYTES", "Apps", "build_view_document", "check_ui_resource", "tool_ui_meta", "view_meta"]
