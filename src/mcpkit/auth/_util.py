"""Small shared helpers: canonical resource URIs (RFC 8707), loopback checks, PKCE (RFC 7636), JSON responses."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson

from .._aio import read_capped
from .._asgi import Send
from .._asgi import header as header
from .._asgi import read_body as read_body

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})


def canonical_resource(url: str) -> str:
    """The canonical URI of an MCP server (RFC 8707 / MCP spec): lower-case scheme and host, no fragment, no
    query, no trailing slash (``https://mcp.example.com/mcp``). Default ports are dropped."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = parts.port
    if port is not None and not ((scheme == "https" and port == 443) or (scheme == "http" and port == 80)):
        host = f"{host}:{port}"
    path = parts.path.rstrip("/")
    return urlunsplit((scheme, host, path, "", ""))


def is_loopback_host(host: str | None) -> bool:
    host = (host or "").lower()
    return host in LOOPBACK_HOSTS or host.startswith("127.")


def is_secure_url(url: str) -> bool:
    """HTTPS, or plain HTTP to a loopback host (development). OAuth 2.1 requires TLS for every other endpoint. A
    string that does not parse as a URL is neither."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a port out of range or not a number)
    except ValueError:
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and is_loopback_host(parts.hostname)


def valid_redirect_uri(uri: str) -> bool:
    """MCP: redirect URIs are either localhost URLs or HTTPS URLs; no fragment (OAuth 2.1 §2.3)."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018  (raises ValueError for a port out of range or not a number)
    except ValueError:
        return False
    if parts.fragment or not parts.hostname:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname))


def pkce_pair() -> tuple[str, str]:
    """A fresh (code_verifier, S256 code_challenge)."""
    verifier = secrets.token_urlsafe(64)[:96]
    return verifier, s256(verifier)


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).rstrip(b"=").decode("ascii")


#: the ASGI scope key under which mcpkit's AuthorizationServer names itself (its issuer) to the app it hosts: the
#: authorization server a ``protect``-ed app in it names when none is configured
COLOCATED_ISSUER = "mcpkit.authorization_server"


async def send_json(send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = orjson.dumps(body) if body is not None else b""
    hdrs = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
        (b"cache-control", b"no-store"),
    ]
    if headers:
        hdrs.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": data})


async def send_preflight(send: Send, methods: bytes, allow_headers: bytes) -> None:
    """The 204 answer to a CORS preflight of a public endpoint (any origin)."""
    await send_json(
        send,
        204,
        None,
        [
            (b"access-control-allow-origin", b"*"),
            (b"access-control-allow-methods", methods),
            (b"access-control-allow-headers", allow_headers),
        ],
    )


class DocumentTooLarge(Exception):
    """An HTTP answer larger than the reader's cap (see :func:`fetch_capped`)."""


async def fetch_capped(
    client: Any, method: str, url: str, limit: int, *, deadline: float | None = None, **kw: Any
) -> tuple[int, bytes]:
    """``client.stream(method, url, **kw)`` (an ``httpx.AsyncClient``) read up to ``limit`` decoded bytes: returns
    (status, body); raises :class:`DocumentTooLarge` past the cap, which also stops a decompression bomb, and
    ``httpx.ReadTimeout`` when the whole exchange takes longer than ``deadline`` seconds (default: the client's
    read timeout)."""
    status, _, body = await fetch_capped_response(client, method, url, limit, deadline=deadline, **kw)
    return status, body


async def fetch_capped_response(
    client: Any, method: str, url: str, limit: int, *, deadline: float | None = None, **kw: Any
) -> tuple[int, Mapping[str, str], bytes]:
    """:func:`fetch_capped` with the response headers: (status, headers, body).

    The deadline bounds the whole exchange (connecting, the headers, every byte of the body): httpx's timeouts
    bound each read, so without it a server sending a byte every few seconds holds the caller for hours."""
    import httpx

    if deadline is None:
        deadline = client.timeout.read
    try:
        async with asyncio.timeout(deadline):
            async with client.stream(method, url, **kw) as resp:
                body = await read_capped(resp, limit)
                if body is None:
                    raise DocumentTooLarge(f"{url} answered more than {limit} bytes")
                return int(resp.status_code), resp.headers, body
    except TimeoutError:
        raise httpx.ReadTimeout(f"{url} did not answer in full within {deadline:g} s") from None


class OAuthError(Exception):
    """An OAuth error response of the authorization server: ``error`` code, description and HTTP status."""

    def __init__(self, error: str, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status
        self.headers: list[tuple[bytes, bytes]] = []  # extra response headers (a DPoP-Nonce)
