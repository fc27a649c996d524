"""The MCP client side of OAuth 2.1: an ``httpx.Auth`` that authorizes on demand.

``OAuthClient(server_url, client_metadata=..., storage=..., redirect_handler=..., callback_handler=...)`` is passed
as ``auth=`` to :class:`~mcpkit.transports.http.streamable_client.StreamableHTTPClientTransport` (or to any httpx
client). On a 401 (or a 403 ``insufficient_scope``) it:

1. discovers the Protected Resource Metadata (RFC 9728): the ``resource_metadata`` of the ``WWW-Authenticate``
   challenge, else ``/.well-known/oauth-protected-resource/<mcp-path>``, else ``/.well-known/oauth-protected-resource``
   (2025-11-25), and checks its ``resource`` matches the server URL;
2. discovers the authorization server metadata: RFC 8414 and OpenID Connect discovery, with the path-insertion
   variants for an issuer with a path; checks the document's ``issuer`` equals the one it was looked up for, and
   that S256 PKCE is advertised. Without PRM (a 2025-03-26 server) the authorization base URL is the server URL with
   its path discarded, and when that has no metadata either the defaults ``/authorize``, ``/token`` and
   ``/register`` are used;
3. registers with Dynamic Client Registration (RFC 7591) unless it already has credentials for that issuer
   (pre-registered ``client_id``, a Client ID Metadata Document URL, or an earlier registration in ``storage``);
4. runs the authorization code grant with PKCE S256, ``state``, the RFC 8707 ``resource`` parameter and the scopes
   of the challenge (else the PRM ``scopes_supported``); validates the RFC 9207 ``iss`` of the redirect;
5. exchanges the code, stores the tokens keyed by issuer, and retries the request once with
   ``Authorization: Bearer`` (the only place a token ever goes).

Expired access tokens are refreshed before use (``refresh_token`` grant, rotation honoured). Every discovery
request carries ``MCP-Protocol-Version``. A :class:`HeadlessBrowser` plays the user-agent in tests.

What a hostile MCP server (or metadata document) names is never fetched blindly (SSRF): every URL the flow
requests must be https (plain http only on a loopback host); a ``resource_metadata`` URL of a challenge is used only
on the MCP server's own origin; a target on a private, link-local (``169.254.169.254``), shared or reserved address
is refused unless the MCP server itself is on that kind of address or ``allow_private_network=True``; and every
document read is capped at ``max_document_size`` bytes.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import os
import secrets
import socket
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import httpx
import orjson

from ..protocol.errors import MCPError
from ..protocol.versions import LATEST_HANDSHAKE, META_PROTOCOL_VERSION
from ._util import (
    DocumentTooLarge,
    canonical_resource,
    fetch_capped,
    is_secure_url,
    parse_www_authenticate,
    pkce_pair,
)

__all__ = [
    "HeadlessBrowser",
    "LoopbackCallback",
    "InMemoryTokenStorage",
    "OAuthClient",
    "OAuthFlowError",
    "TokenSet",
    "TokenStorage",
]


_SPECIAL_V4 = ipaddress.ip_network("100.64.0.0/10")  # shared address space (carrier-grade NAT)


def _ip_class(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_private or (isinstance(ip, ipaddress.IPv4Address) and ip in _SPECIAL_V4):
        return "private"
    if ip.is_multicast or ip.is_reserved or ip.is_unspecified:
        return "reserved"
    return "public"


_RANK = {"public": 0, "loopback": 1, "private": 2, "reserved": 3, "link-local": 4}


async def _address_class(host: str | None) -> str:
    """``public``, ``loopback``, ``private``, ``reserved`` or ``link-local`` for a host: an IP literal as is, a name
    by what it resolves to (the most sensitive of its addresses). An unresolvable name is ``public`` (the request
    will fail by itself)."""
    if not host:
        return "reserved"
    host = host.strip("[]")
    try:
        return _ip_class(ipaddress.ip_address(host))
    except ValueError:
        pass
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return "loopback"
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return "public"
    kinds = {_ip_class(ipaddress.ip_address(str(info[4][0]).split("%")[0])) for info in infos}
    return max(kinds, key=_RANK.__getitem__) if kinds else "public"


class OAuthFlowError(MCPError):
    """Authorization could not be obtained (discovery failed, the AS refused, a security check failed).

    An :class:`~mcpkit.protocol.errors.MCPError` so that the HTTP transport answers the pending request with it
    even when the exchange already runs in the background (an authorization takes longer than the transport's
    answer window): the caller gets an error instead of waiting forever."""


class InvalidClientError(OAuthFlowError):
    """The token endpoint does not accept the client's credentials (``invalid_client``)."""


@dataclass
class TokenSet:
    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    resource: str | None = None

    def expired(self, skew: float = 30.0) -> bool:
        return self.expires_at is not None and time.time() + skew >= self.expires_at


class TokenStorage(Protocol):
    """Where tokens and client registrations live, keyed by issuer (credentials are never reused across
    authorization servers)."""

    async def get_tokens(self, issuer: str) -> TokenSet | None: ...
    async def set_tokens(self, issuer: str, tokens: TokenSet | None) -> None: ...
    async def get_client_info(self, issuer: str) -> dict[str, Any] | None: ...
    async def set_client_info(self, issuer: str, info: dict[str, Any] | None) -> None:
        """Store a registration (None forgets it: the client registers again)."""
        ...


class InMemoryTokenStorage:
    def __init__(self) -> None:
        self.tokens: dict[str, TokenSet] = {}
        self.clients: dict[str, dict[str, Any]] = {}

    async def get_tokens(self, issuer: str) -> TokenSet | None:
        return self.tokens.get(issuer)

    async def set_tokens(self, issuer: str, tokens: TokenSet | None) -> None:
        if tokens is None:
            self.tokens.pop(issuer, None)
        else:
            self.tokens[issuer] = tokens

    async def get_client_info(self, issuer: str) -> dict[str, Any] | None:
        return self.clients.get(issuer)

    async def set_client_info(self, issuer: str, info: dict[str, Any] | None) -> None:
        if info is None:
            self.clients.pop(issuer, None)
        else:
            self.clients[issuer] = info


class FileTokenStorage:
    """Tokens and registrations in one JSON file (mode 0600, replaced atomically), so a restarted client keeps
    its refresh tokens and its dynamic registration. One process per file."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {"tokens": {}, "clients": {}}
        return data if isinstance(data, dict) else {"tokens": {}, "clients": {}}

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(tmp, self.path)

    async def get_tokens(self, issuer: str) -> TokenSet | None:
        raw = self._load().get("tokens", {}).get(issuer)
        return TokenSet(**raw) if isinstance(raw, dict) else None

    async def set_tokens(self, issuer: str, tokens: TokenSet | None) -> None:
        data = self._load()
        table = data.setdefault("tokens", {})
        if tokens is None:
            table.pop(issuer, None)
        else:
            table[issuer] = asdict(tokens)
        self._save(data)

    async def get_client_info(self, issuer: str) -> dict[str, Any] | None:
        raw = self._load().get("clients", {}).get(issuer)
        return raw if isinstance(raw, dict) else None

    async def set_client_info(self, issuer: str, info: dict[str, Any] | None) -> None:
        data = self._load()
        table = data.setdefault("clients", {})
        if info is None:
            table.pop(issuer, None)
        else:
            table[issuer] = info
        self._save(data)


class HeadlessBrowser:
    """A user-agent for tests and unattended use: GETs the authorization URL without following the final redirect
    to the client's ``redirect_uri`` and hands its query parameters to the OAuth client. Use the same object for
    both handlers: ``OAuthClient(..., redirect_handler=b.redirect_handler, callback_handler=b.callback_handler)``."""

    def __init__(self, *, max_hops: int = 5, timeout: float = 10.0) -> None:
        self.max_hops = max_hops
        self.timeout = timeout
        self.visited: list[str] = []
        self._result: dict[str, str] | None = None

    async def redirect_handler(self, url: str) -> None:
        self.visited.append(url)
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            for _ in range(self.max_hops):
                resp = await client.get(url)
                location = resp.headers.get("location")
                if resp.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise OAuthFlowError(
                        f"the authorization endpoint answered HTTP {resp.status_code} "
                        f"without a redirect: {resp.text[:200]}"
                    )
                target = str(httpx.URL(url).join(location))
                parts = urlsplit(target)
                query = dict(parse_qsl(parts.query))
                if "code" in query or "error" in query:
                    self._result = query
                    return
                url = target
        raise OAuthFlowError("too many redirects during authorization")

    async def callback_handler(self) -> dict[str, str]:
        if self._result is None:
            raise OAuthFlowError("no authorization response was received")
        result, self._result = self._result, None
        return result


class LoopbackCallback:
    """The interactive flow for native apps (RFC 8252): a one-shot HTTP listener on 127.0.0.1 receives the
    redirect, and ``open_url`` (default: :func:`webbrowser.open`) shows the user the authorization page.

        cb = LoopbackCallback()                       # picks a free port
        auth = OAuthClient(url, client_metadata={"client_name": "my-app", "redirect_uris": [cb.redirect_uri]},
                           redirect_handler=cb.redirect_handler, callback_handler=cb.callback_handler)

    The listener starts in :meth:`redirect_handler` and stops after one callback (or ``timeout`` seconds). The
    port is reserved at construction, so the redirect URI is known before registration (an AS following RFC 8252
    §7.3 accepts any loopback port anyway)."""

    def __init__(
        self,
        *,
        port: int = 0,
        path: str = "/callback",
        timeout: float = 300.0,
        open_url: Callable[[str], Any] | None = None,
        success_page: str = "Authorization complete. You can close this window.",
    ) -> None:
        self._sock: socket.socket | None = self._bind(port)
        self.port: int = self._sock.getsockname()[1]
        self.path = path
        self.redirect_uri = f"http://127.0.0.1:{self.port}{path}"
        self.timeout = timeout
        self.open_url = open_url
        self.success_page = success_page
        self._result: asyncio.Future[dict[str, str]] | None = None
        self._server: asyncio.base_events.Server | None = None

    @staticmethod
    def _bind(port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        return sock

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
            parts = urlsplit(target)
            if parts.path != self.path:
                body, status = b"Not Found", b"404 Not Found"
            else:
                body, status = self.success_page.encode(), b"200 OK"
                if self._result is not None and not self._result.done():
                    self._result.set_result(dict(parse_qsl(parts.query)))
            writer.write(
                b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
                b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
            )
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, IndexError, ConnectionError):
            pass
        finally:
            writer.close()

    async def redirect_handler(self, url: str) -> None:
        loop = asyncio.get_running_loop()
        self._result = loop.create_future()
        if self._server is None:
            sock = self._sock or self._bind(self.port)  # again after an earlier callback: the same redirect URI
            self._sock = None
            sock.listen(8)
            self._server = await asyncio.start_server(self._handle, sock=sock)
        if self.open_url is not None:
            opened = self.open_url(url)
            if asyncio.iscoroutine(opened):
                await opened
        else:
            import webbrowser

            if not await asyncio.to_thread(webbrowser.open, url):
                print(f"Open this URL to authorize: {url}")

    async def callback_handler(self) -> dict[str, str]:
        if self._result is None:
            raise OAuthFlowError("no authorization request is pending")
        try:
            return await asyncio.wait_for(self._result, self.timeout)
        except TimeoutError:
            raise OAuthFlowError("no authorization response within the time limit") from None
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None


@dataclass
class _Discovery:
    issuer: str
    metadata: dict[str, Any]
    resource: str | None
    scopes: list[str] | None
    prm: dict[str, Any] | None
    legacy: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


RedirectHandler = Callable[[str], Awaitable[None]]
CallbackHandler = Callable[[], Awaitable[Mapping[str, str]]]


class OAuthClient(httpx.Auth):
    """See the module docstring.

    Args:
        server_url: the MCP endpoint URL.
        client_metadata: RFC 7591 metadata for DCR (``redirect_uris`` required; ``client_name``, ``scope``,
            ``token_endpoint_auth_method`` default ``none``, ``application_type`` default ``native``).
        storage: token/registration storage (in memory by default).
        redirect_handler: sends the user to the authorization URL (opens a browser, or :class:`HeadlessBrowser`).
        callback_handler: returns the query parameters the redirect URI received (``code``, ``state``, ``iss``).
        client_id / client_secret: pre-registered credentials (used for every issuer unless ``storage`` has some).
        client_metadata_url: a Client ID Metadata Document URL, used as ``client_id`` when the AS advertises
            ``client_id_metadata_document_supported``.
        scope: scopes to request when neither the challenge nor the PRM names any.
        protocol_version: the ``MCP-Protocol-Version`` sent during discovery when the failed request carried none.
        grant_type: ``authorization_code`` (a user authorizes in a browser) or ``client_credentials``
            (machine-to-machine, the ``io.modelcontextprotocol/oauth-client-credentials`` extension: needs
            ``client_id`` and ``client_secret``; no redirect handlers).
        max_step_up: how many 403 ``insufficient_scope`` re-authorizations one request may trigger.
        offline_access: add ``offline_access`` to the requested scopes when the AS lists it (SEP-2207).
        allow_private_network: fetch metadata/endpoints on private or link-local addresses even when the MCP server
            is not on such an address itself (default False: SSRF protection).
        max_document_size: the largest metadata, registration or token response read, in bytes (default 256 KiB).
    """

    requires_response_body = False

    def __init__(
        self,
        server_url: str,
        *,
        client_metadata: Mapping[str, Any] | None = None,
        storage: TokenStorage | None = None,
        redirect_handler: RedirectHandler | None = None,
        callback_handler: CallbackHandler | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        token_endpoint_auth_method: str | None = None,
        client_metadata_url: str | None = None,
        scope: str | None = None,
        protocol_version: str = LATEST_HANDSHAKE,
        max_step_up: int = 1,
        offline_access: bool = True,
        grant_type: str = "authorization_code",
        http_client: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        allow_private_network: bool = False,
        max_document_size: int = 256 * 1024,
    ) -> None:
        self.server_url = server_url
        self.allow_private_network = allow_private_network
        self.max_document_size = max_document_size
        self._server_network: str | None = None  # the address class of the MCP server (resolved once)
        if grant_type not in ("authorization_code", "client_credentials"):
            raise ValueError("grant_type must be 'authorization_code' or 'client_credentials'")
        self.grant_type = grant_type
        self.client_metadata = dict(client_metadata or {})
        self._auth_method_given = "token_endpoint_auth_method" in self.client_metadata
        self.client_metadata.setdefault("token_endpoint_auth_method", "none")
        self.client_metadata.setdefault("application_type", "native")
        self.client_metadata.setdefault("grant_types", ["authorization_code", "refresh_token"])
        self.client_metadata.setdefault("response_types", ["code"])
        if grant_type == "client_credentials":
            if not client_id or not client_secret:
                raise ValueError("the client_credentials grant needs client_id and client_secret")
        elif not self.client_metadata.get("redirect_uris"):
            raise ValueError("client_metadata needs redirect_uris")
        self.storage: TokenStorage = storage or InMemoryTokenStorage()
        self.redirect_handler = redirect_handler
        self.callback_handler = callback_handler
        self.preregistered = (
            {
                "client_id": client_id,
                "client_secret": client_secret,
                "token_endpoint_auth_method": token_endpoint_auth_method
                or ("client_secret_basic" if client_secret else "none"),
            }
            if client_id
            else None
        )
        self.client_metadata_url = client_metadata_url
        self.scope = scope
        self.protocol_version = protocol_version
        self.max_step_up = max_step_up
        self._http = http_client
        self.timeout = timeout
        self._lock = asyncio.Lock()
        self.issuer: str | None = None  # the issuer whose tokens are in use
        self._discovery: _Discovery | None = None
        self.offline_access = offline_access
        self._requested: dict[str, list[str]] = {}  # issuer -> scopes last requested there
        self.log: list[str] = []  # every URL the flow requested, in order (observability, tests)

    # ------------------------------------------------------------------ httpx.Auth
    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        server = httpx.URL(self.server_url)
        if (request.url.scheme, request.url.host, request.url.port) != (server.scheme, server.host, server.port):
            yield request  # the token is for the MCP server only: never hand it to another origin
            return
        tokens = await self._usable_tokens()
        if tokens is not None:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"
        response = yield request
        for attempt in range(1 + self.max_step_up):
            if response.status_code == 401:
                challenge = self._challenge(response)
                async with self._lock:
                    await self._authorize(request, challenge, stale=tokens)
            elif response.status_code == 403 and attempt < self.max_step_up:
                challenge = self._challenge(response)
                if challenge.get("error") != "insufficient_scope":
                    return
                async with self._lock:
                    await self._authorize(request, challenge, stale=tokens, step_up=True)
            else:
                return
            tokens = await self._usable_tokens()
            if tokens is None:
                return
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"
            response = yield request
            if response.status_code == 401:
                return  # a fresh token refused again: do not loop

    def sync_auth_flow(self, request: httpx.Request) -> Any:
        raise RuntimeError("OAuthClient works with httpx.AsyncClient only")

    @staticmethod
    def _challenge(response: httpx.Response) -> dict[str, str]:
        value = response.headers.get("www-authenticate", "")
        scheme, params = parse_www_authenticate(value) if value else ("", {})
        return params if scheme == "bearer" else {}

    # ------------------------------------------------------------------ tokens
    async def _usable_tokens(self) -> TokenSet | None:
        if self.issuer is None:
            return None
        async with self._lock:
            tokens = await self.storage.get_tokens(self.issuer)
            if tokens is None:
                return None
            if tokens.expired():
                tokens = await self._refresh(tokens)
            return tokens

    async def _refresh(self, tokens: TokenSet) -> TokenSet | None:
        assert self.issuer is not None
        if not tokens.refresh_token or self._discovery is None:
            await self.storage.set_tokens(self.issuer, None)
            return None
        client = await self.storage.get_client_info(self.issuer) or self.preregistered
        if client is None:
            return None
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
        if tokens.resource:
            form["resource"] = tokens.resource
        try:
            fresh = await self._token_request(self._discovery, client, form, tokens.resource)
        except OAuthFlowError as exc:
            self.log.append(f"refresh failed: {exc}")
            await self.storage.set_tokens(self.issuer, None)
            return None
        if fresh.refresh_token is None:
            fresh.refresh_token = tokens.refresh_token  # the AS did not rotate it
        if fresh.scope is None:
            fresh.scope = tokens.scope
        await self.storage.set_tokens(self.issuer, fresh)
        return fresh

    # ------------------------------------------------------------------ the flow
    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=self.timeout, follow_redirects=False)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _version_for(self, request: httpx.Request) -> str:
        version = request.headers.get("mcp-protocol-version")
        if version:
            return str(version)
        try:
            body = orjson.loads(request.content) if request.content else None
        except (orjson.JSONDecodeError, httpx.RequestNotRead):
            body = None
        if isinstance(body, dict) and isinstance(body.get("params"), dict):
            params = body["params"]
            if isinstance(params.get("protocolVersion"), str):
                return str(params["protocolVersion"])
            meta = params.get("_meta")
            if isinstance(meta, dict) and isinstance(meta.get(META_PROTOCOL_VERSION), str):
                return str(meta[META_PROTOCOL_VERSION])
        return self.protocol_version

    async def _get_json(self, url: str, version: str) -> dict[str, Any] | None:
        await self._check_target(url, "metadata URL")
        self.log.append("GET " + url)
        try:
            status, body = await self._fetch(
                "GET", url, headers={"mcp-protocol-version": version, "accept": "application/json"}
            )
        except httpx.HTTPError as exc:
            self.log.append(f"  failed: {exc}")
            return None
        if status != 200:
            return None
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return None
        return data if isinstance(data, dict) else None

    async def _fetch(self, method: str, url: str, **kw: Any) -> tuple[int, bytes]:
        """One request whose answer is read up to ``max_document_size`` bytes (larger: :class:`OAuthFlowError`)."""
        try:
            return await fetch_capped(self._client(), method, url, self.max_document_size, **kw)
        except DocumentTooLarge as exc:
            raise OAuthFlowError(f"{exc}; refusing to read it (OAuthClient(max_document_size=...))") from None

    async def _check_target(self, url: str, what: str) -> None:
        """Refuse a URL the flow must not fetch: not https (loopback excepted), or on a private / link-local /
        reserved address unless the MCP server itself is on that kind of address or the user allowed it."""
        if not is_secure_url(url):
            raise OAuthFlowError(f"the {what} {url!r} must be https (plain http only on a loopback host)")
        if self.allow_private_network:
            return
        kind = await _address_class(urlsplit(url).hostname)
        if kind == "public":
            return
        if self._server_network is None:
            self._server_network = await _address_class(urlsplit(self.server_url).hostname)
        if kind == self._server_network:
            return
        raise OAuthFlowError(
            f"the {what} {url!r} is on a {kind} address and the MCP server is not; refusing to fetch it "
            "(OAuthClient(allow_private_network=True) allows it)"
        )

    async def _authorize(
        self, request: httpx.Request, challenge: Mapping[str, str], *, stale: TokenSet | None, step_up: bool = False
    ) -> None:
        # another request may have re-authorized while we waited for the lock
        if self.issuer is not None and not step_up:
            current = await self.storage.get_tokens(self.issuer)
            if current is not None and (stale is None or current.access_token != stale.access_token):
                return
        version = self._version_for(request)
        discovery = await self._discover(challenge, version)
        if not step_up and (self.issuer is None or self.issuer != discovery.issuer):
            # tokens this storage already holds for that issuer and resource (an earlier run): use them
            existing = await self.storage.get_tokens(discovery.issuer)
            if (
                existing is not None
                and existing.resource == discovery.resource
                and (stale is None or existing.access_token != stale.access_token)
            ):
                self.issuer = discovery.issuer
                self._discovery = discovery
                if not existing.expired() or await self._refresh(existing) is not None:
                    return
        if self.issuer is not None and self.issuer != discovery.issuer:
            # credentials are bound to their issuer: the new AS gets its own registration and tokens
            self.log.append(f"authorization server changed: {self.issuer} -> {discovery.issuer}")
        elif self.issuer is not None and not step_up:
            current = await self.storage.get_tokens(self.issuer)
            if current is not None and current.refresh_token:
                current.expires_at = 0
                self._discovery = discovery
                if await self._refresh(current) is not None:
                    return
        self.issuer = discovery.issuer
        self._discovery = discovery
        client = await self._registration(discovery, version)
        scopes = self._select_scopes(challenge, discovery)
        if step_up and scopes is not None:
            # SEP-2350: keep what was granted before, add what the challenge asks for
            earlier = set(stale.scope.split()) if stale is not None and stale.scope else set()
            earlier |= set(self._requested.get(discovery.issuer, ()))
            scopes = sorted(earlier | set(scopes))
        supported = discovery.metadata.get("scopes_supported")
        wants_refresh = self.offline_access and self.grant_type == "authorization_code"
        if (
            scopes
            and wants_refresh
            and isinstance(supported, list)
            and "offline_access" in supported
            and "offline_access" not in scopes
        ):
            scopes = [*scopes, "offline_access"]  # SEP-2207: ask for a refresh token where the AS supports it
        if scopes is not None:
            self._requested[discovery.issuer] = list(scopes)
        if self.grant_type == "client_credentials":
            form = {"grant_type": "client_credentials"}
            if scopes:
                form["scope"] = " ".join(scopes)
            if discovery.resource:
                form["resource"] = discovery.resource
            tokens = await self._token_request(discovery, client, form, discovery.resource)
        else:
            try:
                tokens = await self._code_flow(discovery, client, scopes)
            except InvalidClientError:
                # a dynamic registration the AS no longer honours (secret rotated, client purged): register
                # again and authorize once more; pre-registered credentials are the user's to fix
                if (
                    self.preregistered is not None
                    or await self.storage.get_client_info(discovery.issuer) is None
                    or client.get("client_id") == self.client_metadata_url
                ):
                    raise
                self.log.append("the AS refused our registration: registering again")
                await self.storage.set_client_info(discovery.issuer, None)
                client = await self._registration(discovery, version)
                tokens = await self._code_flow(discovery, client, scopes)
        await self.storage.set_tokens(discovery.issuer, tokens)

    def _select_scopes(self, challenge: Mapping[str, str], discovery: _Discovery) -> list[str] | None:
        if challenge.get("scope"):
            return challenge["scope"].split()
        if discovery.scopes:
            return list(discovery.scopes)
        if self.scope:
            return self.scope.split()
        if self.client_metadata.get("scope"):
            return str(self.client_metadata["scope"]).split()
        return None

    async def _discover(self, challenge: Mapping[str, str], version: str) -> _Discovery:
        server = urlsplit(self.server_url)
        origin = f"{server.scheme}://{server.netloc}"
        path = server.path.rstrip("/")
        prm: dict[str, Any] | None = None
        candidates: list[str] = []
        named = challenge.get("resource_metadata")
        if named:
            theirs = urlsplit(named)
            if (theirs.scheme, theirs.netloc) == (server.scheme, server.netloc):
                candidates.append(named)
            else:  # a metadata URL elsewhere than the MCP server itself: never fetched (SSRF)
                self.log.append(f"ignored resource_metadata on another origin: {named}")
        if path:
            candidates.append(origin + "/.well-known/oauth-protected-resource" + path)
        candidates.append(origin + "/.well-known/oauth-protected-resource")
        for url in candidates:
            prm = await self._get_json(url, version)
            if prm is not None:
                break
        if prm is not None:
            resource = prm.get("resource")
            if not isinstance(resource, str) or not self._resource_matches(resource):
                raise OAuthFlowError(
                    f"the protected resource metadata names resource {resource!r}, which is not {self.server_url}"
                )
            servers = prm.get("authorization_servers") or []
            if not servers or not isinstance(servers[0], str):
                raise OAuthFlowError("the protected resource metadata names no authorization server")
            issuer = servers[0]
            await self._check_target(issuer, "authorization server")
            metadata = await self._as_metadata(issuer, version)
            if metadata is None:
                raise OAuthFlowError(f"no authorization server metadata for {issuer}")
            if metadata.get("issuer") != issuer:
                raise OAuthFlowError(f"the metadata issuer {metadata.get('issuer')!r} is not {issuer!r}")
            scopes = prm.get("scopes_supported")
            self._check_metadata(metadata)
            return _Discovery(
                issuer, metadata, resource, [str(s) for s in scopes] if isinstance(scopes, list) else None, prm
            )
        # 2025-03-26: the authorization base URL is the server URL without its path
        metadata = await self._as_metadata(origin, version, legacy=True)
        if metadata is not None:
            # 2025-03-26 predates the strict issuer rule; some servers name a path issuer (``<origin>/oauth``)
            # at the root document. Accept an issuer on the same origin, never a foreign one.
            issuer = metadata.get("issuer") or origin
            parts = urlsplit(str(issuer))
            if f"{parts.scheme}://{parts.netloc}" != origin:
                raise OAuthFlowError(f"the metadata issuer {issuer!r} is not on {origin!r}")
            self._check_metadata(metadata, legacy=True)
            return _Discovery(str(issuer).rstrip("/"), metadata, None, None, None, legacy=True)
        self.log.append("no metadata: default endpoints")
        defaults = {
            "issuer": origin,
            "authorization_endpoint": origin + "/authorize",
            "token_endpoint": origin + "/token",
            "registration_endpoint": origin + "/register",
            "code_challenge_methods_supported": ["S256"],
        }
        return _Discovery(origin, defaults, None, None, None, legacy=True)

    def _resource_matches(self, resource: str) -> bool:
        mine = urlsplit(canonical_resource(self.server_url))
        theirs = urlsplit(canonical_resource(resource))
        if (mine.scheme, mine.netloc) != (theirs.scheme, theirs.netloc):
            return False
        base = theirs.path.rstrip("/")
        return mine.path == base or mine.path.startswith(base + "/") or not base

    async def _as_metadata(self, issuer: str, version: str, *, legacy: bool = False) -> dict[str, Any] | None:
        parts = urlsplit(issuer)
        origin = f"{parts.scheme}://{parts.netloc}"
        path = parts.path.rstrip("/")
        if path and not legacy:
            urls = [
                origin + "/.well-known/oauth-authorization-server" + path,
                origin + "/.well-known/openid-configuration" + path,
                origin + path + "/.well-known/openid-configuration",
            ]
        elif legacy:
            urls = [origin + "/.well-known/oauth-authorization-server"]
        else:
            urls = [origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"]
        for url in urls:
            doc = await self._get_json(url, version)
            if doc is not None:
                return doc
        return None

    @staticmethod
    def _check_metadata(metadata: Mapping[str, Any], legacy: bool = False) -> None:
        methods = metadata.get("code_challenge_methods_supported")
        if methods is None and legacy:
            return  # 2025-03-26 metadata need not advertise it; PKCE S256 is used regardless
        if not isinstance(methods, list) or "S256" not in methods:
            raise OAuthFlowError("the authorization server does not advertise PKCE S256; refusing to proceed")
        for key in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
            url = metadata.get(key)
            if url is not None and (not isinstance(url, str) or not is_secure_url(url)):
                raise OAuthFlowError(f"{key} must be an https URL: {url!r}")

    async def _registration(self, discovery: _Discovery, version: str) -> dict[str, Any]:
        stored = await self.storage.get_client_info(discovery.issuer)
        expires = stored.get("client_secret_expires_at") if stored is not None else None
        if stored is not None and isinstance(expires, (int, float)) and 0 < expires <= time.time():
            self.log.append("the registered client secret expired: registering again")
            stored = None
            await self.storage.set_client_info(discovery.issuer, None)
        if stored is not None:
            return stored
        if self.preregistered is not None:
            return self.preregistered
        if self.client_metadata_url and discovery.metadata.get("client_id_metadata_document_supported"):
            info = {"client_id": self.client_metadata_url, "token_endpoint_auth_method": "none"}
            await self.storage.set_client_info(discovery.issuer, info)
            return info
        endpoint = discovery.metadata.get("registration_endpoint")
        if not endpoint:
            raise OAuthFlowError("no client credentials and the authorization server offers no registration")
        body = dict(self.client_metadata)
        supported = discovery.metadata.get("token_endpoint_auth_methods_supported")
        if not self._auth_method_given and isinstance(supported, list) and supported and "none" not in supported:
            # a public client where the AS allows it, else the first secret-based method it offers
            body["token_endpoint_auth_method"] = next(
                (m for m in ("client_secret_basic", "client_secret_post") if m in supported), str(supported[0])
            )
        await self._check_target(str(endpoint), "registration endpoint")
        self.log.append("POST " + endpoint)
        try:
            status, raw = await self._fetch("POST", str(endpoint), json=body, headers={"mcp-protocol-version": version})
        except httpx.HTTPError as exc:
            raise OAuthFlowError(f"registration failed: {exc}") from exc
        if status not in (200, 201):
            raise OAuthFlowError(f"registration failed: HTTP {status} {raw[:200].decode('utf-8', 'replace')}")
        try:
            info = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise OAuthFlowError("registration answer is not JSON") from None
        if not isinstance(info, dict) or not info.get("client_id"):
            raise OAuthFlowError("registration answer without client_id")
        if not info.get("token_endpoint_auth_method"):
            method = body["token_endpoint_auth_method"]
            if info.get("client_secret") and method == "none":
                method = "client_secret_post" if supported == ["client_secret_post"] else "client_secret_basic"
            info["token_endpoint_auth_method"] = method
        await self.storage.set_client_info(discovery.issuer, info)
        return info

    async def _code_flow(self, discovery: _Discovery, client: Mapping[str, Any], scopes: list[str] | None) -> TokenSet:
        if self.redirect_handler is None or self.callback_handler is None:
            raise OAuthFlowError("authorization needs a redirect_handler and a callback_handler")
        verifier, challenge = pkce_pair()
        state = secrets.token_urlsafe(24)
        redirect_uri = str(self.client_metadata["redirect_uris"][0])
        params: dict[str, str] = {
            "response_type": "code",
            "client_id": str(client["client_id"]),
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if scopes:
            params["scope"] = " ".join(scopes)
        if discovery.resource:
            params["resource"] = discovery.resource
        endpoint = str(discovery.metadata["authorization_endpoint"])
        sep = "&" if urlsplit(endpoint).query else "?"
        self.log.append("AUTHORIZE " + endpoint)
        await self.redirect_handler(endpoint + sep + urlencode(params))
        answer = dict(await self.callback_handler())
        if answer.get("state") != state:
            raise OAuthFlowError("the authorization response state does not match (possible CSRF)")
        # RFC 9207: a present iss must be the recorded issuer, exactly; required when the AS advertises it
        if "iss" in answer:
            if answer["iss"] != discovery.metadata.get("issuer", discovery.issuer):
                raise OAuthFlowError(
                    f"the authorization response comes from issuer {answer['iss']!r}, not {discovery.issuer!r}"
                )
        elif discovery.metadata.get("authorization_response_iss_parameter_supported") is True:
            raise OAuthFlowError("the authorization server promised an iss parameter and sent none")
        if "error" in answer:
            raise OAuthFlowError(f"authorization refused: {answer.get('error')} {answer.get('error_description', '')}")
        code = answer.get("code")
        if not code:
            raise OAuthFlowError("the authorization response has no code")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        }
        if discovery.resource:
            form["resource"] = discovery.resource
        tokens = await self._token_request(discovery, client, form, discovery.resource)
        if tokens.scope is None and scopes:
            tokens.scope = " ".join(scopes)  # the AS granted what was asked (RFC 6749 §5.1)
        return tokens

    async def _token_request(
        self, discovery: _Discovery, client: Mapping[str, Any], form: dict[str, str], resource: str | None
    ) -> TokenSet:
        endpoint = str(discovery.metadata["token_endpoint"])
        headers = {"accept": "application/json", "content-type": "application/x-www-form-urlencoded"}
        method = client.get("token_endpoint_auth_method") or "none"
        secret = client.get("client_secret")
        form = dict(form)
        if method == "client_secret_basic" and secret:
            pair = f"{quote(str(client['client_id']), safe='')}:{quote(str(secret), safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        else:
            form["client_id"] = str(client["client_id"])
            if method == "client_secret_post" and secret:
                form["client_secret"] = str(secret)
        await self._check_target(endpoint, "token endpoint")
        self.log.append("POST " + endpoint + " " + form["grant_type"])
        try:
            status, raw = await self._fetch("POST", endpoint, content=urlencode(form), headers=headers)
        except httpx.HTTPError as exc:
            raise OAuthFlowError(f"token request failed: {exc}") from exc
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = {}
        if status != 200 or not isinstance(data, dict) or not data.get("access_token"):
            error = data.get("error") if isinstance(data, dict) else None
            kind = InvalidClientError if error == "invalid_client" else OAuthFlowError
            raise kind(f"token request refused: HTTP {status} {data}")
        if str(data.get("token_type", "")).lower() != "bearer":
            raise OAuthFlowError(f"unsupported token_type {data.get('token_type')!r}")
        expires_in = data.get("expires_in")
        return TokenSet(
            access_token=str(data["access_token"]),
            refresh_token=data.get("refresh_token"),
            expires_at=time.time() + float(expires_in) if isinstance(expires_in, (int, float)) else None,
            scope=data.get("scope") or form.get("scope"),
            resource=resource,
        )
