"""Reading what the scripted server recorded: the messages of a connection by kind, the HTTP headers of an entry,
and the small tests the judges share."""

from __future__ import annotations

import json
from typing import Any

from ...protocol.versions import META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION
from ...transports.http.headers import NAME_FIELD
from ...transports.http.wire import accepts_types
from .hosts import header_value
from .scripted import Conn, Entry

JSON = dict[str, Any]


def short(obj: Any, limit: int = 200) -> str:
    """A value as compact JSON (a string as is), cut at ``limit`` characters."""
    text = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"), default=str)
    return text if len(text) <= limit else text[:limit] + "..."


def items(entry: Entry) -> list[Any]:
    """The messages of an entry (a batch gives its items)."""
    return entry.data if isinstance(entry.data, list) else [entry.data]


def is_int(v: Any) -> bool:
    """An integer, not a boolean."""
    return isinstance(v, int) and not isinstance(v, bool)


def requests_of(conn: Conn) -> list[tuple[Entry, JSON]]:
    """(entry, message) of every request the client sent on ``conn``."""
    return [(e, m) for e in conn.incoming() for m in items(e) if isinstance(m, dict) and "method" in m and "id" in m]


def notifications_of(conn: Conn, method: str | None = None) -> list[tuple[Entry, JSON]]:
    """(entry, message) of every notification the client sent on ``conn`` (of ``method`` only, when given)."""
    return [
        (e, m)
        for e in conn.incoming()
        for m in items(e)
        if isinstance(m, dict) and "method" in m and "id" not in m and (method is None or m["method"] == method)
    ]


def obj(value: Any) -> JSON:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def headers_of(entry: Entry) -> dict[str, str]:
    """The request headers an HTTP entry recorded (lower-case names); {} for none."""
    headers = (entry.http or {}).get("headers")
    return headers if isinstance(headers, dict) else {}


def accepts(entry: Entry, *types: str) -> bool:
    """The request's Accept admits every one of ``types`` (a range of weight 0 does not: RFC 9110 12.4.2)."""
    return all(accepts_types(headers_of(entry).get("accept", ""), *types))


def carries_request(entry: Entry) -> bool:
    """The entry holds a request or a notification (a method)."""
    return any(isinstance(m, dict) and "method" in m for m in items(entry))


def is_modern(msg: JSON) -> bool:
    """The message carries a 2026-07-28 ``_meta`` protocol version."""
    meta = (msg.get("params") or {}).get("_meta") if isinstance(msg.get("params"), dict) else None
    return isinstance(meta, dict) and META_PROTOCOL_VERSION in meta


def has_modern_meta(msg: JSON) -> bool:
    """The message carries the required 2026-07-28 ``_meta``: protocolVersion and clientCapabilities."""
    meta = (msg.get("params") or {}).get("_meta") if isinstance(msg.get("params"), dict) else None
    return (
        isinstance(meta, dict)
        and isinstance(meta.get(META_PROTOCOL_VERSION), str)
        and isinstance(meta.get(META_CLIENT_CAPABILITIES), dict)
    )


def header_problem(entry: Entry, msg: JSON) -> str | None:
    """What is wrong with the 2026-07-28 request-metadata headers of a POST (None: nothing)."""
    headers = (entry.http or {}).get("headers") or {}
    meta = (msg.get("params") or {}).get("_meta") or {}
    version = headers.get("mcp-protocol-version")
    if version != meta.get(META_PROTOCOL_VERSION):
        return f"MCP-Protocol-Version {version!r} is not the _meta version {meta.get(META_PROTOCOL_VERSION)!r}"
    if headers.get("mcp-method") != msg.get("method"):
        return f"Mcp-Method {headers.get('mcp-method')!r}"
    field = NAME_FIELD.get(str(msg.get("method")))
    if field is not None:
        want = (msg.get("params") or {}).get(field)
        got = header_value(headers, "mcp-name")
        if got != want:
            return f"Mcp-Name {headers.get('mcp-name')!r} is not {want!r}"
    return None
