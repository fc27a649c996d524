"""Streamable HTTP server, the bytes on the wire: request headers, bodies (and what a POST holds), plain answers, CORS.

Shared by the endpoint (:mod:`.streamable`) and its parts; nothing here knows about sessions or streams.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, overload

from ..._asgi import Message, Receive, Scope, Send
from ...protocol import jsonrpc
from ...protocol.errors import INVALID_REQUEST
from ...protocol.jsonrpc import Batch, Invalid, JSONDict, Request

JSON_TYPE = b"application/json"
TEXT_TYPE = b"text/plain; charset=utf-8"


CONTENT_TYPE_JSON = (b"content-type", JSON_TYPE)


# The Content-Length field of an answer, by its length: most answers of a server have a handful of sizes
# (hot path: docs/architecture.md).
LENGTHS: dict[int, tuple[bytes, bytes]] = {}


def content_length(n: int) -> tuple[bytes, bytes]:
    """The ``(b"content-length", b"<n>")`` field (the hot callers look in ``LENGTHS`` themselves first)."""
    field = (b"content-length", str(n).encode("ascii"))
    if len(LENGTHS) >= 4096:
        LENGTHS.clear()
    LENGTHS[n] = field
    return field


_WANTED = frozenset(
    (
        b"accept",
        b"content-type",
        b"content-length",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"last-event-id",
        b"mcp-method",
        b"mcp-name",
        b"host",
        b"origin",
    )
)


Headers = dict[bytes, bytes]  # lower-case name -> raw value (latin-1 bytes), the first of duplicates (Accept: all)


def request_headers(scope: Scope) -> Headers:
    """The request headers, by lower-case name; values are the raw bytes (most are compared, few are decoded).

    A field value excludes the whitespace around it (RFC 9110 §5.5): h11 strips it, httptools (llhttp) keeps what
    trails. Values are kept as sent here and trimmed where they are read: :func:`text` trims what it decodes, and
    a value compared byte for byte (the 2026-07-28 headers' quick test) that carries whitespace fails that test
    and goes to the step-by-step check, which trims. ASGI servers send a list of lower-case names (the ASGI spec
    requires it): without duplicates that is one ``dict()``. Anything else takes the careful pass, which
    lower-cases names, joins the lines of ``Accept`` (a list) and keeps the first of other duplicates. (A POST
    names its Content-Type: finding it is the sign that the names are lower-case.)"""
    raw = scope.get("headers", ())
    if type(raw) is list:
        h = dict(raw)
        if len(h) == len(raw) and b"content-type" in h:
            return h
    return _headers_careful(raw)


def _headers_careful(raw: Iterable[tuple[bytes, bytes]]) -> Headers:
    h: Headers = {}
    for key, value in raw:
        k = bytes(key).lower()
        if k in _WANTED:
            if k not in h:
                h[k] = bytes(value)  # (trimmed where read, as in request_headers)
            elif k == b"accept":
                # a list-based field sent on several lines is one list (RFC 9110 §5.3): Go's Header.Add and
                # Java's HttpRequest.Builder.header send each media type on a line of its own
                h[k] += b", " + bytes(value)
    return h


@overload
def text(value: bytes) -> str: ...
@overload
def text(value: bytes | None) -> str | None: ...
def text(value: bytes | None) -> str | None:
    """A header value as text, without the whitespace around it (see :func:`request_headers`)."""
    return None if value is None else value.strip(b" \t").decode("latin-1")


_ACCEPT_CACHE: dict[bytes, tuple[bool, bool]] = {}


def accepts(accept: bytes | None) -> tuple[bool, bool]:
    """(accepts application/json, accepts text/event-stream)."""
    if not accept:
        return False, False
    cached = _ACCEPT_CACHE.get(accept)
    if cached is not None:
        return cached
    verdict = _parse_accept(accept)
    if len(_ACCEPT_CACHE) >= 256:
        _ACCEPT_CACHE.clear()
    _ACCEPT_CACHE[accept] = verdict
    return verdict


def _parse_accept(accept: bytes) -> tuple[bool, bool]:
    """RFC 9110 12.5.1: for each type, the most specific media range that matches it gives its weight (``q``, 1
    when absent), and a weight of 0 means "not acceptable" (12.4.2)."""
    js, sse = accepts_types(accept.decode("latin-1"), "application/json", "text/event-stream")
    return js, sse


def _weight(params: list[str]) -> float:
    """The ``q`` of a media range's parameters (1 when absent; 1 when malformed: be lenient in what is read)."""
    for param in params:
        name, _, value = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 1.0
    return 1.0


def accepts_types(accept: str, *types: str) -> tuple[bool, ...]:
    """For each of ``types`` (``type/subtype``, lower case), whether an ``Accept`` value admits it: the most specific
    range that matches (``type/subtype`` over ``type/*`` over ``*/*``) has a weight above 0 (RFC 9110 12.5.1,
    12.4.2)."""
    best: list[tuple[int, float]] = [(0, 0.0)] * len(types)  # (specificity of the best match, its weight)
    for part in accept.split(","):
        range_, *params = part.split(";")
        mt = range_.strip().lower()
        if not mt:
            continue
        q = _weight(params) if params else 1.0
        for i, t in enumerate(types):
            if mt == t:
                rank = 3
            elif mt == "*/*":
                rank = 1
            elif mt.endswith("/*") and t.startswith(mt[:-1]):
                rank = 2
            else:
                continue
            b_rank, b_q = best[i]
            if rank > b_rank or (rank == b_rank and q > b_q):
                best[i] = (rank, q)
    return tuple(rank > 0 and q > 0 for rank, q in best)


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    content_type: bytes | None = JSON_TYPE,
    extra: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    headers = [LENGTHS.get(len(body)) or content_length(len(body)), *extra]
    if content_type is not None and body:
        headers.append((b"content-type", content_type))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def unsupported_header(hv: str) -> bytes:
    return error_body(None, INVALID_REQUEST, f"Bad Request: unsupported MCP-Protocol-Version {hv!r}")


def bad(code: int, message: str) -> bytes:
    return error_body(None, code, message)


TOO_BUSY = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"too many requests in flight for this session: '
    b"wait for answers before sending more (the limits are the max_requests_per_session and max_queued_per_session "
    b'options)"}}'
)


RETRY_AFTER_1 = ((b"retry-after", b"1"),)


def refusal_headers(status: int) -> list[tuple[bytes, bytes]]:
    """The headers of a GET or DELETE refusal: ``Allow`` with a 405, ``Retry-After`` with a 503."""
    if status == 405:
        return [(b"allow", b"POST")]
    return list(RETRY_AFTER_1) if status == 503 else []


def error_body(rid: Any, code: int, message: str, data: Any = None) -> bytes:
    err: JSONDict = {"code": code, "message": message}
    if data is not None:
        err["data"] = data
    return jsonrpc.encode_error(rid, err)


def declared_too_large(declared: bytes | str | None, limit: int) -> bool:
    if declared is None:
        return False
    try:
        return int(declared) > limit
    except ValueError:
        return False


def refuse_post(
    h: Headers, json_response: bool, good_accepts: set[bytes | None], limit: int
) -> tuple[int, bytes] | None:
    """The status and body of a POST refused on its headers alone (Accept, Content-Type, Content-Length), or
    None. An Accept that lists both types joins ``good_accepts`` (bounded): the endpoint's quick test of the
    usual POST."""
    accept = h.get(b"accept")
    verdict = _ACCEPT_CACHE.get(accept) if accept is not None else None
    js, sse = verdict if verdict is not None else accepts(accept)
    if not js or (not sse and not json_response):
        return 406, error_body(
            None, INVALID_REQUEST, "Not Acceptable: Accept must list application/json and text/event-stream"
        )
    if sse and len(good_accepts) < 64:
        good_accepts.add(accept)  # (good whatever json_response says)
    ctype = h.get(b"content-type", b"")
    if ctype != JSON_TYPE and ctype.split(b";", 1)[0].strip().lower() != JSON_TYPE:
        return 415, error_body(None, INVALID_REQUEST, "Content-Type must be application/json")
    declared = h.get(b"content-length")
    # fewer characters than the limit has digits: below it whatever they say
    if declared is not None and len(declared) >= len(str(limit)) and declared_too_large(declared, limit):
        return 413, error_body(None, INVALID_REQUEST, f"request body larger than {limit} bytes")
    return None


_EXPOSED = b"mcp-session-id, mcp-protocol-version, www-authenticate"


async def preflight(scope: Scope, origin: str, send: Send) -> None:
    requested = b""
    for key, value in scope.get("headers", ()):
        if key == b"access-control-request-headers":
            requested = bytes(value)
    headers = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-allow-methods", b"GET, POST, DELETE, OPTIONS"),
        (b"access-control-allow-headers", requested or b"content-type, accept, mcp-session-id, mcp-protocol-version"),
        (b"access-control-max-age", b"600"),
        (b"vary", b"origin"),
    ]
    await respond(send, 204, b"", None, headers)


def with_cors(send: Send, origin: str) -> Send:
    extra = [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"access-control-expose-headers", _EXPOSED),
        (b"vary", b"origin"),
    ]

    async def cors_send(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), *extra]}
        await send(message)

    return cors_send


def request_count(msg: Any) -> int:
    """How many requests a POST's batch holds (at least 1: the POST itself is in flight)."""
    n = 0
    for item in msg:
        if type(item) is Request:
            n += 1
    return n or 1


def has_requests(msg: Any) -> bool:
    """Whether a POST's message (parsed from its body) holds anything to answer."""
    t = type(msg)
    if t is Request:
        return True
    if t is Batch:
        for item in msg:
            ti = type(item)
            if ti is Request or (ti is Invalid and not item.is_response):
                return True
    return False


async def wait_disconnect(receive: Receive) -> None:
    """Return when the client disconnects (what else the ASGI server sends meanwhile is dropped)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
