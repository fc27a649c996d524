"""Who the :class:`~mcpkit.auth.client.OAuthClient` is to an authorization server: the credentials it uses there
(pre-registered ones only with the authorization server they belong to, an earlier registration from storage, a
Client ID Metadata Document URL) or a Dynamic Client Registration (RFC 7591) it makes. A refused registration is
told with an excerpt of the answer that never shows a credential."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from .client_discovery import Discovered
from .client_errors import OAuthFlowError
from .client_token_endpoint import TokenEndpointMixin, refusal_excerpt
from .client_tokens import TokenStorage


class RegistrationMixin(TokenEndpointMixin):
    """Client credentials per authorization server for :class:`~mcpkit.auth.client.OAuthClient` (the attributes
    below are set by its ``__init__``)."""

    storage: TokenStorage
    grant_type: str
    client_metadata: dict[str, Any]
    client_metadata_url: str | None
    preregistered: dict[str, Any] | None
    _preregistered_issuer: str | None
    _auth_method_given: bool

    async def _registration(self, discovery: Discovered, version: str) -> dict[str, Any]:
        stored = await self.storage.get_client_info(discovery.issuer)
        expires = stored.get("client_secret_expires_at") if stored is not None else None
        if stored is not None and isinstance(expires, (int, float)) and 0 < expires <= time.time():
            self.log.append("the registered client secret expired: registering again")
            stored = None
            await self.storage.set_client_info(discovery.issuer, None)
        if stored is not None:
            return stored
        preregistered = self._preregistration_for(discovery.issuer)
        if preregistered is not None:
            return preregistered
        foreign = self._foreign_credentials(discovery.issuer)
        if foreign is not None:
            self.log.append(foreign)
            if self.grant_type != "authorization_code" or self._preregistered_issuer is None:
                raise OAuthFlowError(foreign)  # cannot register, or the user must say where the credentials belong
        if self.client_metadata_url and discovery.metadata.get("client_id_metadata_document_supported"):
            info = {"client_id": self.client_metadata_url, "token_endpoint_auth_method": "none"}
            await self.storage.set_client_info(discovery.issuer, info)
            return info
        endpoint = discovery.metadata.get("registration_endpoint")
        if not endpoint:
            if foreign is not None:
                raise OAuthFlowError(foreign + ", and it offers no registration")
            raise OAuthFlowError("no client credentials and the authorization server offers no registration")
        body = dict(self.client_metadata)
        supported = discovery.metadata.get("token_endpoint_auth_methods_supported")
        if self.private_key is not None:
            # register the public key: the client authenticates with private_key_jwt (RFC 7591 jwks)
            body["token_endpoint_auth_method"] = "private_key_jwt"
            body["jwks"] = self.private_key.jwks()
        elif not self._auth_method_given and isinstance(supported, list) and supported and "none" not in supported:
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
            raise OAuthFlowError(f"registration failed: HTTP {status} {refusal_excerpt(raw)}")
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

    def _preregistration_for(self, issuer: str) -> dict[str, Any] | None:
        """The pre-registered credentials when they belong to ``issuer``, else None. Without ``issuer=`` they are
        bound to the first authorization server they are used with; confidential ones (a secret or a private key)
        only when that server is on the MCP server's origin, since a first contact can lie about its authorization
        server."""
        if self.preregistered is None or not self.preregistered.get("client_id"):
            return self.preregistered  # none, or a jwt_bearer grant without a client identity: nothing to bind
        if self._preregistered_issuer is None:
            if self._unbound_secret_refused(issuer):
                return None
            self._preregistered_issuer = issuer
        return self.preregistered if _same_issuer(self._preregistered_issuer, issuer) else None

    def _unbound_secret_refused(self, issuer: str) -> bool:
        """Whether confidential pre-registered credentials not bound by ``issuer=`` must be kept from ``issuer``:
        an authorization server on another origin than the MCP server's."""
        assert self.preregistered is not None
        confidential = bool(self.preregistered.get("client_secret")) or self.private_key is not None
        return confidential and self._preregistered_issuer is None and not _same_origin(issuer, self.server_url)

    def _foreign_credentials(self, issuer: str) -> str | None:
        """Why the pre-registered credentials are not used with ``issuer`` (None: there are none, or they are
        for it)."""
        bound = self._preregistered_issuer
        if self.preregistered is None or not self.preregistered.get("client_id"):
            return None
        if bound is None:
            if not self._unbound_secret_refused(issuer):
                return None
            origin = _origin(self.server_url)
            return (
                f"the pre-registered client {self.preregistered['client_id']!r} authenticates with a "
                f"{'private key' if self.private_key is not None else 'client secret'}, and the MCP server names "
                f"the authorization server {issuer!r}, not on its own origin {origin!r}: without "
                f"OAuthClient(issuer=...) the credentials go only to an authorization server on {origin!r}; if they "
                f"were registered with {issuer!r}, pass issuer={issuer!r}"
            )
        if _same_issuer(bound, issuer):
            return None
        return (
            f"the pre-registered client {self.preregistered['client_id']!r} was registered with {bound!r}, and the "
            f"MCP server's authorization server is {issuer!r}: its credentials are not sent there "
            "(OAuthClient(issuer=...) names the authorization server they belong to)"
        )


def _origin(url: str) -> str:
    """``scheme://host[:port]`` of a URL, lower-cased, the default port left out."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    return f"{scheme}://{host}" + ("" if port is None or port == {"https": 443, "http": 80}.get(scheme) else f":{port}")


def _same_origin(a: str, b: str) -> bool:
    """Whether two URLs share scheme, host and port (RFC 6454)."""
    try:
        return _origin(a) == _origin(b)
    except ValueError:  # a port that is no number
        return False


def _same_issuer(a: str, b: str) -> bool:
    """Whether two issuer identifiers name the same authorization server (a trailing slash aside)."""
    return a.rstrip("/") == b.rstrip("/")
