"""Calling the API: one operation's arguments as one HTTP request, sent to the configured origins only.

The request goes through the ``httpx.AsyncClient`` the operator gave (its headers, auth, cookies, TLS settings
and connection pool), to the base URL joined with the operation's path. What the model supplies never chooses
where it goes: path parameters are percent-encoded as one segment each; a value that is empty, ``.`` or ``..`` is
refused, and so is one holding ``/`` or ``\\`` (ASGI servers, and most others, decode ``%2F`` before they route, so
even an encoded slash would choose another route) unless the operator named that parameter in ``path_slashes``
(its ``/`` are then sent as they are, each part refused when empty, ``.`` or ``..``); the URL built is checked
against the allowed origins before it is sent, and redirects are never followed. Each exchange is bounded: the
whole of it (connecting, sending, reading every byte) within ``timeout`` seconds, the answer's body to
``max_response_bytes`` (counted after decompression, so a compressed bomb stops at the bound).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import orjson

from ..._aio import read_capped
from ...hosting import http_request_headers
from .operations import FORM_TYPE, Operation, Param, is_json

logger: logging.Logger = logging.getLogger("mcpkit.server.openapi")
JSONDict = dict[str, Any]

DEFAULT_TIMEOUT = 30.0
"""Seconds one API exchange may take, from connecting to the last byte of the answer."""
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""The largest answer body read from the API (decompressed bytes)."""
_DEFAULT_PORTS = {"http": 80, "https": 443}
_COOKIE_SAFE = "!#$%&'()*+-./:<=>?@[]^_`{|}~"  # (RFC 6265 cookie-octets; the rest is percent-encoded)
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
NEVER_FORWARDED = frozenset(
    {
        "connection",
        "content-length",
        "host",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers ``forward_headers`` refuses: hop-by-hop ones (they describe one connection, not the request), ``Host``
(the API's is its own) and ``Content-Length`` (the request's body is not the MCP request's)."""


class HTTPClient(Protocol):
    """What is used of an ``httpx.AsyncClient``."""

    @property
    def base_url(self) -> object: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def params(self) -> Mapping[str, str]: ...

    @property
    def cookies(self) -> Mapping[str, str]: ...

    # (properties of callables, not methods taking ``**kwargs``: httpx's methods name their keywords, and a type
    # checker holds a protocol's ``**kwargs`` to mean any keyword, so it refused an httpx.AsyncClient)
    @property
    def build_request(self) -> Callable[..., Any]:
        """``build_request(method, url, params=, headers=, timeout=, content= | json= | data= | files=)``."""
        ...

    @property
    def send(self) -> Callable[..., Awaitable[Any]]:
        """``await send(request, stream=True, follow_redirects=False)``: the response."""
        ...


class APIError(Exception):
    """The exchange failed before an answer was read (its message is what the tool's caller is told)."""


@dataclass
class Answer:
    """The API's answer, read whole."""

    status: int
    reason: str
    content_type: str
    body: bytes
    location: str | None

    @property
    def ok(self) -> bool:
        """A 2xx status."""
        return 200 <= self.status < 300

    def text(self, limit: int | None = None) -> str:
        """The body as text (undecodable bytes replaced), cut at ``limit`` characters."""
        text = self.body.decode("utf-8", errors="replace")
        return text if limit is None or len(text) <= limit else text[:limit] + f"... ({len(text) - limit} more)"

    def json(self) -> Any:
        """The body parsed as JSON (``APIError`` when it is not JSON)."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError:
            raise APIError(f"the API said its answer is {self.content_type} but it is not valid JSON") from None

    @property
    def is_json(self) -> bool:
        """Whether the answer says it is JSON."""
        return is_json(self.content_type) if self.content_type else False


def origin(url: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of an absolute http(s) URL (``ValueError`` otherwise)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"{url!r} is not an absolute http(s) URL")
    return scheme, parts.hostname.lower(), parts.port or _DEFAULT_PORTS[scheme]


class Caller:
    """Sends operations to the API through ``client`` (see the module docstring)."""

    def __init__(
        self,
        client: HTTPClient,
        base_url: str,
        *,
        allowed_origins: Iterable[str] = (),
        timeout: float = DEFAULT_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        forward_headers: Iterable[str] = (),
        path_slashes: Iterable[str] = (),
    ) -> None:
        if timeout <= 0 or max_response_bytes < 1:
            raise ValueError("timeout and max_response_bytes must be positive")
        self.forward: frozenset[bytes] = frozenset(n.encode("latin-1") for n in forward_names(forward_headers))
        self.client = client
        self.base_url: str = base_url.rstrip("/")
        self.origins: set[tuple[str, str, int]] = {origin(base_url)} | {origin(o) for o in allowed_origins}
        self.timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.path_slashes: frozenset[str] = frozenset([path_slashes] if isinstance(path_slashes, str) else path_slashes)

    async def call(self, op: Operation, arguments: JSONDict) -> Answer:
        """Send ``op`` with ``arguments`` (already checked against its input schema) and read the answer."""
        url, query, headers, body = build_request(op, arguments, self.base_url, self.path_slashes)
        if self.forward:
            self._forwarded(headers)
        if op.accept is not None and self.client.headers.get("accept") in (None, "*/*"):
            headers["Accept"] = op.accept  # (JSON, documented for the answer: a client's own Accept stands)
        request = self.client.build_request(
            op.method.upper(), url, params=query or None, headers=headers or None, timeout=self.timeout, **body
        )
        where = request.url
        scheme = str(where.scheme).lower()
        port = where.port or _DEFAULT_PORTS.get(scheme, 0)
        if (scheme, str(where.host).lower(), port) not in self.origins:
            logger.warning("openapi: %s would go to %s, not an allowed origin: refused", op.label, where)
            raise APIError(f"{op.label}: the request would leave the API's allowed origins; refused")
        try:
            async with asyncio.timeout(self.timeout):
                return await self._exchange(request, op)
        except TimeoutError:
            raise APIError(f"{op.label}: the API did not answer within {self.timeout:g} s") from None

    def _forwarded(self, headers: dict[str, str]) -> None:
        """Add the ``forward_headers`` of the MCP request being served over HTTP (none over stdio)."""
        raw = http_request_headers()
        if raw is None:
            return
        named = {k.lower(): k for k in headers}  # (the request's own are spelled "Cookie", "Accept"...)
        for name, value in raw:
            key = name.lower()
            if key in self.forward:
                text, lower = value.decode("latin-1"), key.decode("latin-1")
                spelled = named.setdefault(lower, lower)
                seen = headers.get(spelled)
                # (repeated cookies join as one Cookie header does: "a=1; b=2"; other headers as lists: "x, y")
                headers[spelled] = text if seen is None else f"{seen}{'; ' if lower == 'cookie' else ', '}{text}"

    async def _exchange(self, request: Any, op: Operation) -> Answer:
        try:
            response = await self.client.send(request, stream=True, follow_redirects=False)
        except Exception as exc:  # (httpx's errors: the module imports no httpx)
            if isinstance(exc, TimeoutError):
                raise
            logger.warning("openapi: %s could not reach the API: %r", op.label, exc)
            raise APIError(f"{op.label}: the API could not be reached ({type(exc).__name__})") from None
        try:
            body = await read_capped(response, self.max_response_bytes)
            if body is None:
                raise APIError(f"{op.label}: the API's answer is larger than {self.max_response_bytes} bytes")
        except APIError:
            raise
        except Exception as exc:
            if isinstance(exc, TimeoutError):
                raise
            logger.warning("openapi: %s: reading the answer failed: %r", op.label, exc)
            raise APIError(f"{op.label}: the API's answer broke off ({type(exc).__name__})") from None
        finally:
            await response.aclose()
        return Answer(
            status=response.status_code,
            reason=str(getattr(response, "reason_phrase", "") or ""),
            content_type=response.headers.get("content-type", ""),
            body=body,
            location=response.headers.get("location"),
        )


def forward_names(names: Iterable[str]) -> list[str]:
    """``forward_headers`` checked: lowercased header names, none of :data:`NEVER_FORWARDED` (a ``ValueError``
    names what is wrong; a single string is one name)."""
    out: list[str] = []
    for name in [names] if isinstance(names, str) else names:
        key = str(name).strip().lower()
        if not key or not set(key) <= _TOKEN:
            raise ValueError(f"forward_headers: {name!r} is not a header name")
        if key in NEVER_FORWARDED:
            raise ValueError(
                f"forward_headers: {name!r} is never forwarded (hop-by-hop headers, Host and Content-Length are the "
                "MCP request's own)"
            )
        if key not in out:
            out.append(key)
    return out


# ---------------------------------------------------------------------------------------------- the request


def build_request(
    op: Operation, arguments: JSONDict, base_url: str, path_slashes: frozenset[str] = frozenset()
) -> tuple[str, list[tuple[str, str]], dict[str, str], JSONDict]:
    """``(url, query, headers, body keyword arguments)`` for ``op`` called with ``arguments``; ``path_slashes``:
    the path parameters whose values may hold ``/``."""
    path = op.path
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for param in op.params:
        if param.arg not in arguments or arguments[param.arg] is None:
            continue
        value = arguments[param.arg]
        if param.location == "path":
            path = path.replace("{" + param.name + "}", _path_value(param, value, param.name in path_slashes))
        elif param.location == "query":
            query.extend(_query_pairs(param, value))
        elif param.location == "header":
            headers[param.name] = _header_value(param, value)
        else:
            cookies.append(f"{quote(param.name, safe='')}={quote(_scalar_list(value, ','), safe=_COOKIE_SAFE)}")
    if cookies:
        headers["Cookie"] = "; ".join(cookies)
    body: JSONDict = {}
    spec = op.body
    if spec is not None:
        if spec.arg is not None:
            present = spec.arg in arguments
            payload = arguments.get(spec.arg)
        else:
            payload = {spec.fields[a]: v for a, v in arguments.items() if a in spec.fields}
            present = bool(payload) or spec.required
        if present:
            media = spec.media_type.split(";")[0].strip().lower()
            if is_json(media):
                body["content"] = orjson.dumps(payload)
                headers["Content-Type"] = spec.media_type
            elif media == FORM_TYPE:
                if not isinstance(payload, dict):
                    raise APIError(f"{op.label}: a form body must be an object")
                body["data"] = {k: _form_value(v) for k, v in payload.items() if v is not None}
            else:
                body["content"] = (payload if isinstance(payload, str) else _scalar(payload)).encode()
                headers["Content-Type"] = spec.media_type
    return base_url + path, query, headers, body


def _scalar(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return orjson.dumps(value).decode()
    return str(value)


def _scalar_list(value: Any, sep: str, explode_object: bool = False) -> str:
    if isinstance(value, list):
        return sep.join(_scalar(v) for v in value)
    if isinstance(value, dict):
        if explode_object:
            return sep.join(f"{k}={_scalar(v)}" for k, v in value.items())
        return sep.join(f"{k}{sep}{_scalar(v)}" for k, v in value.items())
    return _scalar(value)


def _path_value(param: Param, value: Any, slashes: bool = False) -> str:
    raw = _scalar_list(value, ",", explode_object=param.explode)
    if raw in ("", ".", ".."):
        raise APIError(f"path parameter {param.name!r} cannot be {raw!r}")
    if "/" in raw or "\\" in raw:
        # (an encoded slash is decoded before routing by ASGI servers and most others: it would choose the route)
        if not slashes or "\\" in raw:
            raise APIError(f"path parameter {param.name!r} cannot hold '/' or '\\\\'")
        if any(part in ("", ".", "..") for part in raw.split("/")):
            raise APIError(f"path parameter {param.name!r} cannot hold an empty, '.' or '..' part")
    encoded = quote(raw, safe="/" if slashes else "")
    if param.style == "label":
        return "." + encoded
    if param.style == "matrix":
        return f";{quote(param.name, safe='')}={encoded}"
    return encoded


def _query_pairs(param: Param, value: Any) -> list[tuple[str, str]]:
    name = param.name
    if param.style == "deepObject" and isinstance(value, dict):
        return [(f"{name}[{k}]", _scalar(v)) for k, v in value.items()]
    if isinstance(value, list):
        if param.style == "spaceDelimited":
            return [(name, " ".join(_scalar(v) for v in value))]
        if param.style == "pipeDelimited":
            return [(name, "|".join(_scalar(v) for v in value))]
        if param.explode:
            return [(name, _scalar(v)) for v in value]
        return [(name, ",".join(_scalar(v) for v in value))]
    if isinstance(value, dict):
        if param.explode:
            return [(str(k), _scalar(v)) for k, v in value.items()]
        return [(name, _scalar_list(value, ","))]
    return [(name, _scalar(value))]


def _header_value(param: Param, value: Any) -> str:
    text = _scalar_list(value, ",", explode_object=param.explode)
    if any(c in text for c in "\r\n\0"):
        raise APIError(f"header parameter {param.name!r} cannot hold a line break")
    return text


def _form_value(value: Any) -> str | list[str]:
    if isinstance(value, list):
        return [_scalar(v) for v in value]
    return _scalar(value)


__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_TIMEOUT",
    "NEVER_FORWARDED",
    "APIError",
    "Answer",
    "Caller",
    "HTTPClient",
    "build_request",
    "forward_names",
    "origin",
]
