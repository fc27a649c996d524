"""Per-era wire shaping of outgoing results: one function, driven by :class:`~.versions.Features`.

Handlers produce one neutral result dict; :func:`shape_result` adapts it to the revision of the request:
the modern era gets ``resultType``, cache hints and ``_meta`` server info (encoded once per server:
:func:`server_meta`); the handshake era gets none of them,
plus the conventions of 2024-11-05/2025-03-26 sessions (``nextCursor: ""`` at the end of every list,
``structuredContent: {}`` on every ``tools/call`` result).
"""

from __future__ import annotations

from typing import Any

import orjson

from .jsonrpc import dumps_wide
from .versions import META_SERVER_INFO, Features

LIST_RESULT_KEYS: dict[str, str] = {
    "tools/list": "tools",
    "resources/list": "resources",
    "resources/templates/list": "resourceTemplates",
    "prompts/list": "prompts",
}
CACHEABLE_METHODS = frozenset(
    ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover")
)
MODERN_ONLY_KEYS = ("resultType", "ttlMs", "cacheScope")
# what a handshake-era result may carry that shaping takes out or looks into
_STRIPPED_KEYS = frozenset((*MODERN_ONLY_KEYS, "_meta"))


def shape_implementation(info: dict[str, Any], feats: Features) -> dict[str, Any]:
    """An ``Implementation`` (``serverInfo``) with only the fields ``feats``' revision defines (schema.ts): name and
    version, a ``title`` from 2025-06-18, ``icons``, ``description`` and ``websiteUrl`` from 2025-11-25; ``info``
    itself when it has no other (as tools, resources and prompts are shaped)."""
    if feats.implementation_details and feats.icons:
        return info
    return {
        k: v
        for k, v in info.items()
        if k in ("name", "version")
        or (k == "title" and feats.titles)
        or (k == "icons" and feats.icons)
        or (k in ("description", "websiteUrl") and feats.implementation_details)
    }


def server_meta(info: dict[str, Any]) -> orjson.Fragment:
    """The ``_meta`` of a 2026-07-28 result that has none of its own: the server's ``info`` (its ``Implementation``)
    under ``io.modelcontextprotocol/serverInfo``, encoded once (``Server.info``'s setter keeps it):
    :func:`shape_result` puts these bytes into every such result, where orjson writes them as they are.
    A TypeError for an ``info`` that is no JSON."""
    meta = {META_SERVER_INFO: info}
    try:
        return orjson.Fragment(orjson.dumps(meta))
    except TypeError as exc:  # (an upstream's info, for a proxy: beyond orjson's integers, say)
        return orjson.Fragment(dumps_wide(meta, exc))


def _decoded(meta: Any) -> Any:
    """A result's ``_meta`` as a dict when it is encoded (an ``orjson.Fragment``: the :func:`server_meta` of a
    result that was shaped before, e.g. a handler's own result dict returned again), else itself."""
    return orjson.loads(orjson.dumps(meta)) if type(meta) is orjson.Fragment else meta


def shape_result(
    method: str,
    result: dict[str, Any],
    feats: Features,
    server_info: orjson.Fragment | None = None,
    *,
    ttl_ms: int = 0,
    cache_scope: str = "private",
) -> dict[str, Any]:
    """Return ``result`` shaped for the revision ``feats`` (mutates and returns the same dict); ``server_info``: the
    server's :func:`server_meta`, for the modern era (a result with a ``_meta`` of its own gets the server's info
    added to a copy of it)."""
    if feats.result_type:
        complete = result.setdefault("resultType", "complete") == "complete"
        if complete and method in CACHEABLE_METHODS:
            result.setdefault("ttlMs", ttl_ms)
            result.setdefault("cacheScope", cache_scope)
        if server_info is not None:
            meta = result.get("_meta")
            if meta is None:
                result["_meta"] = server_info  # (hot path: docs/architecture.md)
            elif meta is not server_info:
                meta = _decoded(meta)
                if META_SERVER_INFO not in meta:
                    result["_meta"] = {**meta, **_decoded(server_info)}
        if method in LIST_RESULT_KEYS:
            if not result.get("nextCursor"):
                result.pop("nextCursor", None)
        elif complete and method == "tools/call":
            result.setdefault("isError", False)
        return result
    if not _STRIPPED_KEYS.isdisjoint(result):  # (the usual result has none of them: one test)
        for key in MODERN_ONLY_KEYS:
            result.pop(key, None)
        meta = _decoded(result.get("_meta"))
        if meta is not None and META_SERVER_INFO in meta:
            meta = {k: v for k, v in meta.items() if k != META_SERVER_INFO}
            if meta:
                result["_meta"] = meta
            else:
                del result["_meta"]
    if method in LIST_RESULT_KEYS:
        if feats.always_next_cursor:
            if not result.get("nextCursor"):
                result["nextCursor"] = ""
        elif not result.get("nextCursor"):
            result.pop("nextCursor", None)
    elif method == "tools/call" and "task" not in result:  # (a 2025-11-25 CreateTaskResult is not a tool's result)
        result.setdefault("isError", False)  # always sent, never required on receipt
        if feats.always_structured_content and result.get("structuredContent") is None:
            result["structuredContent"] = {}
    return result
