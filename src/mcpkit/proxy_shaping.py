"""How a proxy shapes what crosses it (:mod:`mcpkit.proxies`): the params it sends upstream, less what belongs to
the client's hop, and the upstream's results for the client's revision, names and URIs under a gateway member's
prefix."""

from __future__ import annotations

from .protocol.apps import relinked_tool_meta
from .protocol.jsonrpc import JSONDict
from .protocol.versions import META_SERVER_INFO, Features
from .server.content import downgrade_content
from .server.lowlevel import ServerRequestContext
from .server.prefixes import prefixed_content, prefixed_name, prefixed_uri

__all__ = ["LISTS", "shape_item", "shape_result", "upstream_params"]

#: list methods and the key of their items
LISTS = {
    "tools/list": ("tools", "name"),
    "resources/list": ("resources", "uri"),
    "resources/templates/list": ("resourceTemplates", "uriTemplate"),
    "prompts/list": ("prompts", "name"),
}


def shape_result(method: str, result: JSONDict, feats: Features, prefix: str | None) -> JSONDict:
    """An upstream's result for the client's revision: this hop's ``_meta`` and era fields out, names and URIs under
    the member's ``prefix`` (None: a plain proxy's upstream)."""
    result = dict(result)
    meta = result.get("_meta")
    if isinstance(meta, dict) and META_SERVER_INFO in meta:
        rest = {k: v for k, v in meta.items() if k != META_SERVER_INFO}
        if rest:
            result["_meta"] = rest
        else:
            result.pop("_meta")
    if result.get("resultType") == "complete" and not feats.modern:
        result.pop("resultType")
    if method in LISTS:
        field, key = LISTS[method]
        items = result.get(field)
        result[field] = (
            [shape_item(method, item, key, prefix, feats) for item in items if isinstance(item, dict)]
            if isinstance(items, list)
            else []
        )
    elif method == "tools/call":
        content = result.get("content")
        blocks = (
            [prefixed_content(c, prefix) for c in content if isinstance(c, dict)] if isinstance(content, list) else []
        )
        result["content"] = downgrade_content(blocks, feats)
    elif method == "prompts/get":
        messages = result.get("messages")
        if isinstance(messages, list):
            for m in messages:
                if isinstance(m, dict) and isinstance(m.get("content"), dict):
                    m["content"] = downgrade_content([prefixed_content(m["content"], prefix)], feats)[0]
    elif method == "resources/read" and prefix is not None:
        contents = result.get("contents")
        if isinstance(contents, list):
            result["contents"] = [
                {**c, "uri": prefixed_uri(prefix, c["uri"])}
                if isinstance(c, dict) and isinstance(c.get("uri"), str)
                else c
                for c in contents
            ]
    if not feats.modern:
        result.pop("ttlMs", None)
        result.pop("cacheScope", None)
    return result


def upstream_params(params: JSONDict, sctx: ServerRequestContext) -> JSONDict:
    """The params to send upstream: the client's own, less what belongs to this hop (the era's ``_meta`` keys, the
    progress token, the input rounds' answers and state)."""
    out = {k: v for k, v in params.items() if k not in ("_meta", "requestState", "inputResponses")}
    meta = params.get("_meta")
    if isinstance(meta, dict):
        kept = {k: v for k, v in meta.items() if k != "progressToken" and not k.startswith("io.modelcontextprotocol/")}
        if kept:
            out["_meta"] = kept
    return out


def shape_item(method: str, item: JSONDict, key: str, prefix: str | None, feats: Features) -> JSONDict:
    """An upstream list item for the client's revision, under its prefixed name or URI."""
    out = dict(item)
    value = out.get(key)
    if isinstance(value, str) and prefix is not None:
        out[key] = prefixed_name(prefix, value) if key == "name" else prefixed_uri(prefix, value)
    out.pop("execution", None)  # (tasks: not relayed)
    if not feats.titles:
        title = out.pop("title", None)
        if method == "tools/list" and title is not None and feats.tool_annotations:
            annotations = dict(out.get("annotations") or {})
            annotations.setdefault("title", title)
            out["annotations"] = annotations
    if method == "tools/list":
        if prefix is not None and "_meta" in out:  # (the member's view is served under the prefix: linked there)
            out["_meta"] = relinked_tool_meta(out["_meta"], lambda uri: prefixed_uri(prefix, uri))
        if not feats.structured_output:
            out.pop("outputSchema", None)
        if not feats.tool_annotations:
            out.pop("annotations", None)
    if not feats.icons:
        out.pop("icons", None)
    return out
