"""The Streamable HTTP client transport's parts that are not its state machine
(:mod:`.streamable_client`): the response interface both HTTP engines give (httpx and :mod:`.lite`), which engine a
URL gets (:func:`fast_path_applies`), the errors the transport raises, one request's POST exchange, and the readers
of an answer's bytes. Public names are re-exported by :mod:`.streamable_client`, their import path.
"""

from __future__ import annotations

import asyncio
import urllib.request
from collections.abc import AsyncIterator, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
import orjson

from ...protocol.errors import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MCPError,
)
from .lite import LiteHTTPError
from .sse_decoder import SSEDecoder, SSEEvent

# what either HTTP engine raises when a connection fails or the server breaks HTTP
_IO_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, LiteHTTPError)


class _Response(Protocol):
    """The part of a streaming ``httpx.Response`` the transport uses (a ``LiteResponse`` has the same)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


def fast_path_applies(url: str) -> bool:
    """Whether ``fast_path=None`` picks the lean HTTP/1.1 engine for ``url`` (given no auth and no client):
    a plain ``http://`` URL that no proxy from the environment applies to."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    bypass: Any = getattr(urllib.request, "proxy_bypass_environment")  # noqa: B009 (not in typeshed)
    return bool(bypass(parts.hostname, proxies))


class ResponseTooLarge(MCPError):
    """A server's answer (JSON body or SSE event) is larger than the transport's ``max_message_size``."""

    code = INTERNAL_ERROR

    def __init__(self, limit: int, what: str = "answer") -> None:
        super().__init__(
            f"the server's {what} is larger than max_message_size={limit} bytes; to accept it, raise "
            "max_message_size (Client(..., transport_options={'max_message_size': N}))",
            {"limit": limit},
        )
        self.limit = limit


class HTTPTransportError(MCPError):
    """The server answered an HTTP error without a JSON-RPC answer to our message."""

    code = INVALID_REQUEST

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}", {"status": status})
        self.status = status


class _Exchange:
    """One request's POST, running in its own task."""

    __slots__ = ("cancelled", "detached", "modern", "streaming", "task")

    def __init__(self, modern: bool) -> None:
        self.modern = modern
        self.detached = False
        self.cancelled = False
        self.task: asyncio.Task[None] = None  # type: ignore[assignment]
        self.streaming: asyncio.Future[None] = None  # type: ignore[assignment]


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def _json_rpc_error(body: bytes) -> tuple[Any, Any] | None:
    """(id, error) when ``body`` is a JSON-RPC error response."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(obj, dict) and obj.get("jsonrpc") == "2.0" and isinstance(obj.get("error"), dict):
        return obj.get("id"), obj["error"]
    return None


def _answers(raw: bytes, rid: Any) -> bool:
    if b'"method"' in raw and b'"result"' not in raw and b'"error"' not in raw:
        return False
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    if isinstance(obj, list):
        return any(isinstance(o, dict) and o.get("id") == rid and "method" not in o for o in obj)
    return isinstance(obj, dict) and obj.get("id") == rid and "method" not in obj


async def read_capped(resp: _Response, limit: int) -> bytes:
    """The whole body of a streamed ``httpx`` response, at most ``limit`` bytes: a declared ``Content-Length`` above
    it is refused before anything is read, a body that grows past it as soon as it does (:class:`ResponseTooLarge`).
    The caller closes the response."""
    declared = resp.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ResponseTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ResponseTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)


async def _events(resp: _Response, decoder: SSEDecoder) -> AsyncIterator[SSEEvent]:
    """The SSE events of a response, through the shared bounded decoder."""
    async for chunk in resp.aiter_bytes():
        for event in decoder.feed(chunk):
            yield event


__all__ = ["HTTPTransportError", "ResponseTooLarge", "fast_path_applies", "read_capped"]
