"""Resources: static ones (a URI → a function or fixed content) and RFC 6570 templates (variables → arguments).

What a resource function returns becomes ``contents`` (see :func:`to_contents`): ``str`` → text, ``bytes`` →
base64 ``blob``, resource contents models/dicts as is, a list of those, anything else → JSON text. ``mimeType``
is always sent: the one you gave, else guessed from the return annotation (``str`` → ``text/plain``,
``bytes`` → ``application/octet-stream``, objects → ``application/json``).
"""

from __future__ import annotations

import base64
import inspect
import types
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Union, get_origin

from .._options import check_choice
from ..protocol.errors import ResourceNotFound
from ..protocol.versions import Features
from .completions import Completer, gather_completions
from .content import annotations_for, dump_model, is_model, json_text, resource_contents_models
from .pagination import Listed
from .schema import FunctionInfo, function_name, unwrap_optional
from .sync_exec import SyncPolicy
from .uri_template import UriTemplate

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..protocol import types as t
    from .context import Context

JSONDict = dict[str, Any]


def mime_for_annotation(annotation: Any) -> str | None:
    """The MIME type a return annotation implies (None when it cannot tell, e.g. ``str | bytes``)."""
    tp, _ = unwrap_optional(annotation)
    if tp is bytes or tp is bytearray:
        return "application/octet-stream"
    if tp in (str, inspect.Signature.empty, Any):
        return "text/plain"
    if get_origin(tp) in (Union, types.UnionType):
        return None
    if isinstance(tp, type) and issubclass(tp, resource_contents_models()):
        return None
    return "application/json"


def to_contents(value: Any, uri: str, mime_type: str | None) -> list[JSONDict]:
    """Convert a resource function's return value into ``contents`` (wire form, ``mimeType`` always set)."""
    if isinstance(value, str):
        return [{"uri": uri, "mimeType": mime_type or "text/plain", "text": value}]
    if isinstance(value, (bytes, bytearray, memoryview)):
        blob = base64.b64encode(bytes(value)).decode("ascii")
        return [{"uri": uri, "mimeType": mime_type or "application/octet-stream", "blob": blob}]
    if is_model(value) and isinstance(value, resource_contents_models()):
        d = dump_model(value)
        d.setdefault("mimeType", mime_type or ("text/plain" if "text" in d else "application/octet-stream"))
        return [d]
    if isinstance(value, dict) and "uri" in value and ("text" in value or "blob" in value):
        d = dict(value)
        d.setdefault("mimeType", mime_type or ("text/plain" if "text" in d else "application/octet-stream"))
        return [d]
    if (
        isinstance(value, (list, tuple))
        and value
        and all(
            isinstance(v, resource_contents_models())
            or (isinstance(v, dict) and "uri" in v and ("text" in v or "blob" in v))
            for v in value
        )
    ):
        out: list[JSONDict] = []
        for v in value:
            out.extend(to_contents(v, uri, mime_type))
        return out
    return [{"uri": uri, "mimeType": mime_type or "application/json", "text": json_text(value)}]


async def _call(fn: Callable[..., Any], sync: SyncPolicy | None, kwargs: dict[str, Any]) -> Any:
    if sync is None:
        return await fn(**kwargs)
    return await sync(**kwargs)


def _sync_policy(info: FunctionInfo, fn: Callable[..., Any], what: str, thread: bool | None) -> SyncPolicy | None:
    if info.is_async:
        return None
    return SyncPolicy(fn, what, thread, learnable=info.context_param is None)


def cache_hints(ttl_ms: int | None, scope: str | None) -> JSONDict:
    """Validated 2026-07-28 caching hints (``ttlMs``/``cacheScope``); empty when neither is given."""
    hints: JSONDict = {}
    if ttl_ms is not None:
        if not isinstance(ttl_ms, int) or ttl_ms < 0:
            raise ValueError("ttl_ms must be an integer >= 0")
        hints["ttlMs"] = ttl_ms
    if scope is not None:
        check_choice("cache_scope", scope, ("private", "public"))
        hints["cacheScope"] = scope
    return hints


class ResourceBase(Listed):
    """What a resource and a resource template share: identity, metadata, the function that reads them and
    how it runs."""

    def __init__(
        self,
        *,
        name: str,
        title: str | None,
        description: str | None,
        mime_type: str | None,
        annotations: JSONDict | BaseModel | None,
        icons: Sequence[JSONDict | t.Icon] | None,
        meta: JSONDict | None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
    ) -> None:
        self.cache_hints: JSONDict = cache_hints(ttl_ms, cache_scope)
        self.name = name
        self.title = title
        self.description = description
        self.mime_type = mime_type
        self.annotations: Any | None = dump_model(annotations) if annotations is not None else None
        self.icons: list[Any] | None = [dump_model(i) for i in icons] if icons else None
        self.meta = meta
        Listed.__init__(self)

    def _with_meta(self, contents: list[JSONDict]) -> list[JSONDict]:
        """``contents`` carrying the resource's ``_meta`` too (what a reader such as an MCP Apps host looks for
        there: a view's ``_meta.ui``); a content's own ``_meta`` keys win."""
        meta = self.meta
        if not meta:
            return contents
        for item in contents:
            own = item.get("_meta")
            item["_meta"] = {**meta, **own} if isinstance(own, dict) else dict(meta)
        return contents

    def _common(self, d: JSONDict, feats: Features) -> JSONDict:
        if self.title and feats.titles:
            d["title"] = self.title
        if self.description:
            d["description"] = self.description
        if self.mime_type:
            d["mimeType"] = self.mime_type
        if self.annotations:
            d["annotations"] = annotations_for(self.annotations, feats)
        if self.icons and feats.icons:
            d["icons"] = self.icons
        if self.meta:  # (every revision: no schema forbids a member it does not name)
            d["_meta"] = self.meta
        return d


class Resource(ResourceBase):
    """A static resource: one URI, read by calling ``fn`` (or serving fixed ``content``).

    A subclass that reads for itself (overrides :meth:`read`, e.g. :class:`~mcpkit.server.files.FileResource`) sets
    :attr:`reads_itself` and passes neither ``fn`` nor ``content``: it is built by this same constructor, so it has
    every field a resource has."""

    #: the class overrides :meth:`read`: its resources take neither ``fn`` nor ``content``
    reads_itself: ClassVar[bool] = False

    def __init__(
        self,
        uri: str,
        fn: Callable[..., Any] | None = None,
        *,
        content: str | bytes | None = None,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: JSONDict | BaseModel | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        thread: bool | None = None,
    ) -> None:
        if self.reads_itself:
            if fn is not None or content is not None:
                raise ValueError(f"{type(self).__name__} reads for itself: it takes no function or content")
        elif (fn is None) == (content is None):
            raise ValueError("a resource needs exactly one of a function or content")
        self.uri = uri
        self.fn: Callable[..., Any] | None = fn
        self.content = content
        self.info: FunctionInfo | None = None
        self.sync: SyncPolicy | None = None
        if fn is not None:
            self.info = FunctionInfo(fn, name=name or function_name(fn, uri))
            self.fn = fn = self.info.fn  # (what fills in its dependencies, when it declares any)
            self.sync = _sync_policy(self.info, fn, f"resource {uri!r}", thread)
            required = [p.name for p in self.info.params if p.required]
            if required:
                raise ValueError(f"static resource {uri!r}: its function takes required arguments {required}")
            if mime_type is None:
                mime_type = mime_for_annotation(self.info.return_annotation)
            if description is None:
                description = self.info.description
        elif content is not None:
            if mime_type is None:
                mime_type = "text/plain" if isinstance(content, str) else "application/octet-stream"
            if size is None:
                size = len(content.encode()) if isinstance(content, str) else len(content)
        super().__init__(
            name=name or (function_name(fn, uri) if fn is not None else uri),
            title=title,
            description=description,
            mime_type=mime_type,
            annotations=annotations,
            icons=icons,
            meta=meta,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
        )
        self.size = size

    def definition(self, feats: Features) -> JSONDict:
        cached = self._defs.get(feats.version)
        if cached is None:
            d: JSONDict = {"uri": self.uri, "name": self.name}
            self._common(d, feats)
            if self.size is not None:
                d["size"] = self.size
            cached = self._defs[feats.version] = d
        return cached

    async def read(self, ctx: Context | None) -> list[JSONDict]:
        if self.fn is None:
            return self._with_meta(to_contents(self.content, self.uri, self.mime_type))
        assert self.info is not None
        kwargs: dict[str, Any] = {}
        if self.info.context_param is not None:
            kwargs[self.info.context_param] = ctx
        value = await _call(self.fn, self.sync, kwargs)
        return self._with_meta(to_contents(value, self.uri, self.mime_type))


class ResourceTemplate(ResourceBase):
    """A parameterized resource: its URI template's variables become the function's arguments."""

    def __init__(
        self,
        uri_template: str,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        annotations: JSONDict | BaseModel | None = None,
        icons: Sequence[JSONDict | t.Icon] | None = None,
        meta: JSONDict | None = None,
        completions: dict[str, Completer] | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        thread: bool | None = None,
    ) -> None:
        self.template: UriTemplate = UriTemplate(uri_template)
        self.uri_template = uri_template
        self.info: FunctionInfo = FunctionInfo(fn, name=name or function_name(fn, uri_template))
        self.fn: Callable[..., Any] = self.info.fn  # (what fills in its dependencies, when it declares any)
        fn = self.fn
        self.sync: SyncPolicy | None = _sync_policy(self.info, fn, f"resource template {uri_template!r}", thread)
        variables = set(self.template.variables)
        params = {p.name for p in self.info.params}
        missing = [p.name for p in self.info.params if p.required and p.name not in variables]
        if missing:
            raise ValueError(
                f"resource template {uri_template!r}: the function's parameters {missing} are not variables of the "
                f"URI, so no request could give them a value: add {{{missing[0]}}} to the URI (or "
                f"{{?{missing[0]}}}, an optional query variable, with a default), or give {missing[0]} a default"
            )
        extra = sorted(variables - params)
        if extra:
            raise ValueError(
                f"resource template {uri_template!r}: the URI's variables {extra} are not parameters of "
                f"{getattr(fn, '__name__', 'the function')}(): add a parameter {extra[0]} (its value comes from "
                "the URI) or take it out of the URI"
            )
        unknown = f"resource template {uri_template!r}: completions for unknown variables"
        self.completions: dict[str, Completer] = gather_completions(self.info.params, completions, variables, unknown)
        super().__init__(
            name=name or function_name(fn, uri_template),
            title=title,
            description=description if description is not None else self.info.description,
            mime_type=mime_type or mime_for_annotation(self.info.return_annotation),
            annotations=annotations,
            icons=icons,
            meta=meta,
            ttl_ms=ttl_ms,
            cache_scope=cache_scope,
        )

    def definition(self, feats: Features) -> JSONDict:
        cached = self._defs.get(feats.version)
        if cached is None:
            d: JSONDict = {"uriTemplate": self.uri_template, "name": self.name}
            cached = self._defs[feats.version] = self._common(d, feats)
        return cached

    def match(self, uri: str) -> dict[str, str] | None:
        """The variables of ``uri`` when it is one of this template's resources, else None: it has the template's
        shape and :meth:`accepts` its values (``items://{id}`` of an ``id: int`` does not match ``items://abc``, so
        that a template registered after it, ``items://{name}``, serves that URI)."""
        variables = self.template.match(uri)
        if variables is None or not self.accepts(variables):
            return None
        return variables

    def accepts(self, variables: dict[str, str]) -> bool:
        """Whether the function takes these values (each converts to its parameter's type)."""
        from pydantic import ValidationError

        try:
            self.info.validate(variables)
        except ValidationError:
            return False
        return True

    async def read(self, uri: str, variables: dict[str, str], ctx: Context | None) -> list[JSONDict]:
        from pydantic import ValidationError

        try:
            kwargs = self.info.validate(variables)
        except ValidationError:
            # the URI has the template's shape but not a valid value (e.g. a non-number id): no such resource
            raise ResourceNotFound(uri) from None
        if self.info.context_param is not None:
            kwargs[self.info.context_param] = ctx
        value = await _call(self.fn, self.sync, kwargs)
        return self._with_meta(to_contents(value, uri, self.mime_type))


__all__ = ["Resource", "ResourceTemplate", "cache_hints", "mime_for_annotation", "to_contents"]
