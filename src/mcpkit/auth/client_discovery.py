"""Discovery for the OAuth client: Protected Resource Metadata (RFC 9728) and authorization server metadata
(RFC 8414 / OpenID Connect), fetched under the SSRF and size rules.

Every URL fetched must be https (plain http only on a loopback host); a target on a private, link-local, shared
or reserved address is refused unless the MCP server itself is on that kind of address or
``allow_private_network=True``; every document read is capped at ``max_document_size`` bytes.

The address rule is enforced where the connection is made (:class:`CheckedAddressTransport`): a host name is
resolved once, every address it resolves to is checked, and the connection goes to a checked address (TLS still
verifies the certificate for the name, and ``Host`` is the name). A name that resolved to a public address for the
check and to ``169.254.169.254`` for the connection (DNS rebinding) cannot reach the second.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx
import orjson

from ..protocol.versions import features, is_supported
from ._util import (
    DocumentTooLarge,
    canonical_resource,
    fetch_capped,
    is_secure_url,
)
from .client_errors import OAuthFlowError, shown_safely

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


async def address_class(host: str | None) -> str:
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


#: a resolver: (host, port) -> the IP addresses to connect to, in order
Resolver = Callable[[str, int], Awaitable[list[str]]]


async def _system_resolve(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[str] = []
    for info in infos:
        ip = str(info[4][0]).split("%")[0]
        if ip not in found:
            found.append(ip)
    return found


class _AddressRule:
    """The SSRF rule on addresses: public, or the MCP server's own kind, or anything with ``allow_private_network``."""

    def __init__(
        self,
        server_url: str,
        allow_private_network: bool,
        owner: tuple[str, str] = ("the MCP server", "OAuthClient"),
    ) -> None:
        self._server_host = urlsplit(server_url).hostname
        self._server_kind: str | None = None
        self.allow_private = allow_private_network
        self._owner = owner  # who the rule protects (whose address kind is allowed) and whose option lifts it

    async def refusal(self, host: str, ip: str) -> str | None:
        """Why ``host`` (at ``ip``) must not be reached (None: it may)."""
        if self.allow_private:
            return None
        if self._server_kind is None:
            self._server_kind = await address_class(self._server_host)
        kind = _ip_class(ipaddress.ip_address(ip))
        if kind in ("public", self._server_kind):
            return None
        return (
            f"{host} resolves to {ip}, a {kind} address, and {self._owner[0]} is not on one; refusing to connect "
            f"({self._owner[1]}(allow_private_network=True) allows it)"
        )


class _CheckedBackend(httpcore.AsyncNetworkBackend):
    """Connects to an address it checked: resolve once, refuse when any address is of a kind the rule refuses,
    connect to those very addresses (never to a second resolution of the name)."""

    def __init__(self, rule: _AddressRule, resolve: Resolver) -> None:
        self._rule = rule
        self._resolve = resolve
        # (pyright reads httpcore's stand-in for a missing anyio, not the backend; mypy reads the backend)
        self._inner: httpcore.AsyncNetworkBackend = httpcore.AnyIOBackend()  # pyright: ignore[reportAttributeAccessIssue]

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        bare = host.strip("[]")
        try:
            addresses = [str(ipaddress.ip_address(bare))]  # an IP literal: nothing to resolve
        except ValueError:
            try:
                addresses = await self._resolve(bare, port)
            except OSError as exc:
                raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host}")
        for ip in addresses:
            refusal = await self._rule.refusal(host, ip)
            if refusal is not None:
                raise httpcore.ConnectError(refusal)
        failure: httpcore.ConnectError | None = None
        for ip in addresses:
            try:
                return await self._inner.connect_tcp(
                    ip, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = httpcore.ConnectError(str(exc)) if isinstance(exc, httpcore.ConnectTimeout) else exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("the OAuth client connects to no Unix socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class CheckedAddressTransport(httpx.AsyncHTTPTransport):
    """An httpx transport that connects only to addresses the OAuth client's SSRF rule allows, checked at the
    moment of connecting (see the module docstring): each connection resolves the host once and goes to the
    address it checked, with TLS and ``Host`` still for the name. ``resolve`` replaces the system resolver."""

    def __init__(
        self,
        server_url: str,
        *,
        allow_private_network: bool = False,
        resolve: Resolver | None = None,
        _rule: _AddressRule | None = None,
    ) -> None:
        super().__init__()
        rule = _rule or _AddressRule(server_url, allow_private_network)
        backend = _CheckedBackend(rule, resolve or _system_resolve)
        self._pool = httpcore.AsyncConnectionPool(ssl_context=_ssl_context(), network_backend=backend)


def _ssl_context() -> Any:
    """The certificates httpx trusts by default: certifi's, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set."""
    import os
    import ssl

    import certifi

    return ssl.create_default_context(
        cafile=os.environ.get("SSL_CERT_FILE") or certifi.where(), capath=os.environ.get("SSL_CERT_DIR")
    )


class _ProxiedTransport(httpx.AsyncBaseTransport):
    """A request handed to a proxy from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``). The proxy
    resolves the target's name and connects, out of this machine's reach; what can be checked is checked before the
    request is handed over: an IP literal of a kind the rule refuses, or a name that resolves to one here, is refused.
    The proxy itself, named by the operator, is trusted as configured."""

    def __init__(self, proxy: str, rule: _AddressRule) -> None:
        self._rule = rule
        self._inner = httpx.AsyncHTTPTransport(proxy=proxy, verify=_ssl_context())

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if not self._rule.allow_private:
            bare = host.strip("[]")
            try:
                addresses = [str(ipaddress.ip_address(bare))]
            except ValueError:
                try:
                    addresses = await _system_resolve(bare, request.url.port or 443)
                except OSError:
                    addresses = []  # unknown here: the proxy resolves it, beyond this machine's reach
            for ip in addresses:
                refusal = await self._rule.refusal(host, ip)
                if refusal is not None:
                    raise httpx.ConnectError(
                        refusal + "; checked before handing the request to the proxy", request=request
                    )
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def checked_http_client(
    server_url: str,
    *,
    allow_private_network: bool = False,
    timeout: float = 30.0,
    resolve: Resolver | None = None,
    _owner: tuple[str, str] = ("the MCP server", "OAuthClient"),
) -> httpx.AsyncClient:
    """The httpx client of :class:`~mcpkit.auth.client.OAuthClient`'s own requests: no redirect followed, direct
    connections through :class:`CheckedAddressTransport`, and the proxies of the environment honoured as httpx honours
    them (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), each request checked before it is handed to a
    proxy (an IP literal or a name resolving here to a refused kind of address; the proxy's own resolution of a name
    is beyond reach)."""
    from httpx._utils import get_environment_proxies  # what httpx.AsyncClient(trust_env=True) itself reads

    rule = _AddressRule(server_url, allow_private_network, _owner)
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else _ProxiedTransport(proxy, rule)
        for pattern, proxy in get_environment_proxies().items()
    }
    return httpx.AsyncClient(
        timeout=timeout,
        follow_redirects=False,
        transport=CheckedAddressTransport(server_url, resolve=resolve, _rule=rule),
        mounts=mounts,
    )


async def fetch_refusal(
    url: str, server_url: str, *, what: str = "metadata URL", allow_private_network: bool = False
) -> str | None:
    """Why the OAuth client must not fetch ``url`` on behalf of the MCP server at ``server_url`` (None: it may):
    not https (plain http only on a loopback host), or on a private / link-local / shared / reserved address while
    the MCP server is not on that kind of address (unless ``allow_private_network``). The SSRF rule of every fetch
    of :class:`~mcpkit.auth.client.OAuthClient`, for other clients of the same servers (``mcpkit check``)."""
    try:
        urlsplit(url).port  # noqa: B018  (raises ValueError for what is no URL: an unclosed "[", a bad port)
    except ValueError:
        return f"the {what} {url!r} is not a URL"
    if not is_secure_url(url):
        return f"the {what} {url!r} must be https (plain http only on a loopback host)"
    if allow_private_network:
        return None
    kind = await address_class(urlsplit(url).hostname)
    if kind == "public" or kind == await address_class(urlsplit(server_url).hostname):
        return None
    return (
        f"the {what} {url!r} is on a {kind} address and the MCP server is not; refusing to fetch it "
        "(OAuthClient(allow_private_network=True) allows it)"
    )


@dataclass
class Discovered:
    """What discovery found for one resource: its authorization server (``issuer`` and its metadata), the
    resource and scopes to ask for, the protected resource metadata (``prm``), and whether the server predates RFC 9728
    (``legacy``). The token endpoint and registration steps read it."""

    issuer: str
    metadata: dict[str, Any]
    resource: str | None
    scopes: list[str] | None
    prm: dict[str, Any] | None
    legacy: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class DiscoveryMixin:
    """The metadata fetching of :class:`~mcpkit.auth.client.OAuthClient` (the attributes below are set by its
    ``__init__``): URL checks against SSRF, capped reads, PRM and authorization server metadata discovery."""

    server_url: str
    allow_private_network: bool
    max_document_size: int
    timeout: float
    log: list[str]
    _http: httpx.AsyncClient | None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = checked_http_client(
                self.server_url, allow_private_network=self.allow_private_network, timeout=self.timeout
            )
        return self._http

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
        """Refuse a URL the flow must not fetch (:func:`fetch_refusal`)."""
        refusal = await fetch_refusal(url, self.server_url, what=what, allow_private_network=self.allow_private_network)
        if refusal is not None:
            raise OAuthFlowError(refusal)

    async def _discover(self, challenge: Mapping[str, str], version: str, *, strict_pkce: bool = True) -> Discovered:
        """The resource metadata and its authorization server's, else (a 2025-03-26 server) the metadata at the
        authorization base URL, else its default endpoints. ``strict_pkce``: the server is held to the 2025-11-25 rule
        (an authorization server advertising no PKCE method is refused), which 2025-03-26 discovery does not know."""
        server = urlsplit(self.server_url)
        origin = f"{server.scheme}://{server.netloc}"
        path = server.path.rstrip("/")
        prm: dict[str, Any] | None = None
        candidates: list[str] = []
        named = challenge.get("resource_metadata")
        try:
            theirs = urlsplit(named) if named else None
        except ValueError:
            theirs = None
            self.log.append(f"ignored resource_metadata that is not a URL: {named}")
        if named and theirs is not None:
            if (theirs.scheme, theirs.netloc) == (server.scheme, server.netloc):
                candidates.append(named)
            else:  # a metadata URL elsewhere than the MCP server itself: never fetched (SSRF)
                self.log.append(f"ignored resource_metadata on another origin: {named}")
        if path:
            candidates.append(origin + "/.well-known/oauth-protected-resource" + path)
        candidates.append(origin + "/.well-known/oauth-protected-resource")
        fetched = ""
        for fetched in candidates:
            prm = await self._get_json(fetched, version)
            if prm is not None:
                break
        if prm is not None:
            resource = prm.get("resource")
            if not isinstance(resource, str) or not self._resource_matches(resource, fetched):
                raise OAuthFlowError(
                    f"the protected resource metadata at {fetched} names resource {shown_safely(repr(resource), 200)}, "
                    f"which is not {self.server_url}: RFC 9728 §3.3 wants the resource identical to the MCP server's "
                    "URL, or to the resource identifier the well-known URL was made from (at the root: the origin)"
                )
            servers = prm.get("authorization_servers")
            if not isinstance(servers, list) or not servers or not isinstance(servers[0], str):
                raise OAuthFlowError("the protected resource metadata names no authorization server")
            issuer = servers[0]
            await self._check_target(issuer, "authorization server")
            metadata = await self._as_metadata(issuer, version)
            if metadata is None:
                raise OAuthFlowError(f"no authorization server metadata for {issuer}")
            if metadata.get("issuer") != issuer:
                raise OAuthFlowError(f"the metadata issuer {metadata.get('issuer')!r} is not {issuer!r}")
            scopes = prm.get("scopes_supported")
            self._check_metadata(metadata, version=version)
            return Discovered(
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
            self._check_metadata(metadata, legacy=not strict_pkce, version=version)
            return Discovered(
                str(issuer).rstrip("/"), metadata, self._legacy_resource(version), None, None, legacy=True
            )
        if strict_pkce:
            raise OAuthFlowError(
                f"neither resource nor authorization server metadata at {origin}: the authorization server does not "
                f"advertise PKCE S256{_pkce_rule(version)}; refusing to proceed"
            )
        self.log.append("no metadata: default endpoints")
        defaults = {
            "issuer": origin,
            "authorization_endpoint": origin + "/authorize",
            "token_endpoint": origin + "/token",
            "registration_endpoint": origin + "/register",
            "code_challenge_methods_supported": ["S256"],
        }
        return Discovered(origin, defaults, self._legacy_resource(version), None, None, legacy=True)

    def _legacy_resource(self, version: str) -> str | None:
        """The ``resource`` to name without resource metadata: from 2025-06-18 on the client MUST name the MCP
        server's canonical URI in the authorization and token requests, whether or not the authorization server
        knows the parameter (RFC 8707); 2025-03-26 predates it."""
        if is_supported(version) and features(version).resource_indicators:
            return canonical_resource(self.server_url)
        return None

    def _resource_matches(self, resource: str, fetched: str) -> bool:
        """RFC 9728 §3.3: the metadata's ``resource`` is identical to the URL of the request (the MCP server) or to
        the resource identifier whose well-known URL ``fetched`` is (``/.well-known/oauth-protected-resource`` at
        the root: the origin, which the spec's fallback hosts the MCP server's metadata at), and that identifier
        contains the server (a path prefix on its origin). Compared in canonical form (case of scheme and host,
        default port, trailing slash)."""
        mine = canonical_resource(self.server_url)
        try:
            theirs = canonical_resource(resource)
            named = _identifier_of(fetched)
        except ValueError:  # not a URL
            return False
        if theirs == mine:
            return True
        if theirs != named:
            return False
        m, t = urlsplit(mine), urlsplit(theirs)
        base = t.path.rstrip("/")
        return (m.scheme, m.netloc) == (t.scheme, t.netloc) and (m.path.startswith(base + "/") or not base)

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
    def _check_metadata(metadata: Mapping[str, Any], legacy: bool = False, version: str | None = None) -> None:
        if metadata.get("token_endpoint") is None:
            raise OAuthFlowError("the authorization server metadata names no token_endpoint (RFC 8414 requires it)")
        # every authorization endpoint is https (plain http only on a loopback host), in every revision
        for key in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
            url = metadata.get(key)
            if url is not None and (not isinstance(url, str) or not is_secure_url(url)):
                raise OAuthFlowError(f"{key} must be an https URL: {url!r}")
        methods = metadata.get("code_challenge_methods_supported")
        if methods is None and legacy:
            return  # 2025-03-26 metadata need not advertise it; PKCE S256 is used regardless
        if methods is None:
            raise OAuthFlowError(
                "the authorization server does not advertise PKCE S256 (its metadata has no "
                f"code_challenge_methods_supported){_pkce_rule(version)}; refusing to proceed"
            )
        if not isinstance(methods, list) or "S256" not in methods:
            raise OAuthFlowError("the authorization server does not advertise PKCE S256; refusing to proceed")


def _pkce_rule(version: str | None) -> str:
    """Where the rule an authorization server failed comes from, for its error."""
    session = f"protocol {version}; " if version else ""
    return (
        f" ({session}from protocol 2025-11-25 on the client MUST refuse to proceed, and "
        "OAuthClient(require_advertised_pkce=True) holds every server to it)"
    )


_PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"


def _identifier_of(url: str) -> str | None:
    """The resource identifier whose RFC 9728 well-known URL ``url`` is (the suffix taken out of its path), in
    canonical form; None when ``url`` is no such URL (a ``resource_metadata`` of the challenge elsewhere)."""
    parts = urlsplit(url)
    if parts.path != _PRM_WELL_KNOWN and not parts.path.startswith(_PRM_WELL_KNOWN + "/"):
        return None
    return canonical_resource(f"{parts.scheme}://{parts.netloc}{parts.path[len(_PRM_WELL_KNOWN) :]}")
