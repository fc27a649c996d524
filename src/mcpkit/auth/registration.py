"""Client registration for the development authorization server (:mod:`mcpkit.auth.server`): clients registered in
code and the RFC 7591 ``/register`` endpoint with its hardening (issue 12: the registration policy's scopes only, no
``client_credentials`` unless enabled, size capped, rate limited per address, bounded without evicting a
pre-registered client). :class:`ClientRegistration` is the base class of ``AuthorizationServer``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from .._asgi import Receive, Scope, Send
from ._util import (
    OAuthError,
    read_body,
    send_json,
    valid_redirect_uri,
)
from .storage import (
    AuthStorage,
    ClientRecord,
)

__all__ = ["AUTH_METHODS", "ClientRegistration"]

AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post", "private_key_jwt")
_MAX_KEYS = 8  # public keys one private_key_jwt client may register
_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})
#: the client metadata a self-registered client keeps beyond what its record holds (redirect URIs, grant types,
#: auth method, scope, keys): RFC 7591 §2 and the IANA registry's members this server has use for, with the JSON
#: type each must have. Anything else (language-tagged variants, an unverified ``software_statement``, members
#: of other profiles) is ignored (RFC 7591 §3.2.1): the response shows what was registered.
_KEPT_MEMBERS: dict[str, type] = {
    "client_name": str,
    "client_uri": str,
    "logo_uri": str,
    "tos_uri": str,
    "policy_uri": str,
    "contacts": list,
    "software_id": str,
    "software_version": str,
    "application_type": str,  # OpenID Connect Dynamic Client Registration
    "dpop_bound_access_tokens": bool,  # RFC 9449 §5.2
}


def _kept_metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The members of ``_KEPT_MEMBERS`` present with their type (``contacts``: strings only)."""
    kept = {k: v for k, v in meta.items() if k in _KEPT_MEMBERS and type(v) is _KEPT_MEMBERS[k]}
    contacts = kept.get("contacts")
    if isinstance(contacts, list) and not all(isinstance(c, str) for c in contacts):
        del kept["contacts"]
    return kept


def public_jwks(jwks: Any) -> dict[str, Any]:
    """A registered JWK Set, checked: at most 8 asymmetric public keys that load (no private or symmetric key)."""
    import jwt

    keys = jwks.get("keys") if isinstance(jwks, Mapping) else None
    if not isinstance(keys, list) or not keys or len(keys) > _MAX_KEYS:
        raise ValueError(f"jwks must be a JWK Set of 1 to {_MAX_KEYS} public keys")
    for key in keys:
        if not isinstance(key, dict) or key.get("kty") not in ("EC", "RSA", "OKP") or _PRIVATE_MEMBERS & set(key):
            raise ValueError("jwks must hold asymmetric public keys only")
        try:
            jwt.PyJWK(key, algorithm=key.get("alg"))
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError):
            raise ValueError("a key of jwks does not load") from None
    return {"keys": [dict(k) for k in keys]}


class ClientRegistration:
    """Client registration, the base of :class:`AuthorizationServer`: pre-registering a client in code
    (:meth:`register_client`) and the RFC 7591 ``/register`` endpoint with its policy (scopes, rate per address,
    metadata size). The attributes it reads are set by ``AuthorizationServer.__init__``."""

    storage: AuthStorage
    clock: Callable[[], float]
    scopes_supported: list[str] | None
    registration_scopes: list[str] | None
    registration_client_credentials: bool
    registration_rate: tuple[int, float] | None
    max_client_metadata: int
    _registrations: dict[str, list[float]]

    async def register_client(
        self,
        *,
        redirect_uris: Iterable[str] = (),
        token_endpoint_auth_method: str = "none",
        grant_types: Iterable[str] = ("authorization_code", "refresh_token"),
        client_id: str | None = None,
        client_secret: str | None = None,
        scope: str | None = None,
        resource_server: bool = False,
        dynamic: bool = False,
        jwks: Mapping[str, Any] | None = None,
        dpop_bound_access_tokens: bool = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> ClientRecord:
        """Pre-register a client (what /register does for DCR). ``scope`` bounds what it may ever be granted (None:
        any scope); ``resource_server=True`` lets it introspect every token (an MCP server using
        :class:`~mcpkit.auth.verifiers.IntrospectionVerifier`). A ``private_key_jwt`` client gives its public keys
        as ``jwks`` (``SigningKey.jwks()``); ``dpop_bound_access_tokens=True`` makes every token request of the
        client carry a DPoP proof (RFC 9449 §5.2). ``metadata``: RFC 7591 members to keep with it (``client_name``,
        ``client_uri``, ``contacts``...; others are ignored).

        The returned record holds the client secret (given, or generated for a ``client_secret_*`` client) in
        clear: the only time it is shown. The storage keeps its SHA-256 only."""
        uris = list(redirect_uris)
        for uri in uris:
            if not valid_redirect_uri(uri):
                raise ValueError(f"redirect URI must be https or localhost: {uri}")
        if token_endpoint_auth_method not in AUTH_METHODS:
            raise ValueError("unsupported token_endpoint_auth_method")
        keys = public_jwks(jwks) if jwks is not None else None
        if (token_endpoint_auth_method == "private_key_jwt") != (keys is not None):
            raise ValueError("a private_key_jwt client needs its public keys (jwks), and only it has some")
        secret = None
        if token_endpoint_auth_method in ("client_secret_basic", "client_secret_post"):
            secret = client_secret or secrets.token_urlsafe(32)
        record = ClientRecord(
            client_id or secrets.token_urlsafe(16),
            secret,
            uris,
            token_endpoint_auth_method,
            list(grant_types),
            scope,
            dynamic=dynamic,
            resource_server=resource_server,
            jwks=keys,
            metadata=_kept_metadata(metadata or {}),
        )
        if dpop_bound_access_tokens:
            record.metadata["dpop_bound_access_tokens"] = True
        await self.storage.save_client(record.stored())
        return record

    @staticmethod
    async def _body(receive: Receive, limit: int, option: str) -> bytes:
        try:
            return await read_body(receive, limit)
        except ValueError:
            raise OAuthError(
                "invalid_request",
                f"the request body is larger than {limit} bytes (AuthorizationServer({option}=...))",
                413,
            ) from None

    async def _register(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            raise OAuthError("invalid_request", "use POST", 405)
        self._registration_allowed(scope)
        try:
            meta = orjson.loads(await self._body(receive, self.max_client_metadata, "max_client_metadata"))
        except orjson.JSONDecodeError:
            raise OAuthError("invalid_client_metadata", "the body must be a JSON object") from None
        if not isinstance(meta, dict):
            raise OAuthError("invalid_client_metadata", "the body must be a JSON object")
        uris = meta.get("redirect_uris") or []
        grant_types = meta.get("grant_types") or ["authorization_code", "refresh_token"]
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise OAuthError("invalid_redirect_uri", "redirect_uris must be a list of strings")
        if not isinstance(grant_types, list) or not all(isinstance(g, str) for g in grant_types):
            raise OAuthError("invalid_client_metadata", "grant_types must be a list of strings")
        if "authorization_code" in grant_types and not uris:
            raise OAuthError("invalid_redirect_uri", "redirect_uris are required for the authorization code grant")
        bad = [u for u in uris if not valid_redirect_uri(u)]
        if bad:
            raise OAuthError("invalid_redirect_uri", "redirect URIs must be https or localhost: " + " ".join(bad))
        method = meta.get("token_endpoint_auth_method", "client_secret_basic")
        if method not in AUTH_METHODS:
            raise OAuthError("invalid_client_metadata", f"unsupported token_endpoint_auth_method {method!r}")
        if "jwks_uri" in meta:
            # the server would fetch a URL a stranger named (SSRF): keys are registered by value
            raise OAuthError("invalid_client_metadata", "jwks_uri is not supported: register the keys as jwks")
        jwks: dict[str, Any] | None = None
        if method == "private_key_jwt" or "jwks" in meta:
            try:
                jwks = public_jwks(meta.get("jwks"))
            except ValueError as exc:
                raise OAuthError("invalid_client_metadata", str(exc)) from None
            if method != "private_key_jwt":
                raise OAuthError("invalid_client_metadata", "jwks are for private_key_jwt clients")
        allowed_grants = {"authorization_code", "refresh_token", "client_credentials"}
        if not isinstance(grant_types, list) or any(g not in allowed_grants for g in grant_types):
            raise OAuthError("invalid_client_metadata", "unsupported grant_types")
        if "client_credentials" in grant_types and method == "none":
            raise OAuthError("invalid_client_metadata", "client_credentials needs client authentication")
        if "client_credentials" in grant_types and not self.registration_client_credentials:
            raise OAuthError(
                "invalid_client_metadata",
                "self-registered clients may not use client_credentials: pre-register the client "
                "(or AuthorizationServer(registration_client_credentials=True))",
            )
        scope_value = meta.get("scope") if isinstance(meta.get("scope"), str) else None
        if scope_value is not None and self.scopes_supported is not None:
            unknown = [s for s in scope_value.split() if s not in self.scopes_supported and s != "openid"]
            if unknown:
                raise OAuthError("invalid_client_metadata", "unknown scope: " + " ".join(unknown))
        granted = self._registration_grant(scope_value)
        record = await self.register_client(
            redirect_uris=uris,
            token_endpoint_auth_method=method,
            grant_types=grant_types,
            scope=granted,
            dynamic=True,
            jwks=jwks,
            metadata=meta,
        )
        body: dict[str, Any] = dict(record.metadata)
        if jwks is not None:
            body["jwks"] = jwks
        if granted is not None:
            body["scope"] = granted  # RFC 7591 §3.2.1: what was granted, which may differ from what was asked
        body.update(
            {
                "client_id": record.client_id,
                "client_id_issued_at": int(self.clock()),
                "redirect_uris": uris,
                "grant_types": grant_types,
                "token_endpoint_auth_method": method,
                "response_types": ["code"] if "authorization_code" in grant_types else [],
            }
        )
        if record.client_secret is not None:
            body["client_secret"] = record.client_secret
            body["client_secret_expires_at"] = 0
        await send_json(send, 201, body)

    def _registration_grant(self, requested: str | None) -> str | None:
        """The scope a self-registered client gets: the whole registration policy (``registration_scopes``, else
        ``scopes_supported``; None: any scope), whatever it asked for. MCP clients register with the resource's
        minimal ``scopes_supported`` and add scopes later by step-up (MCP 2025-11-25, scope selection): keeping
        what they asked for as their cap refused every step-up. Each authorization still asks for its own scopes
        and goes to the approver (RFC 7591 §3.2.1 lets the server replace the requested value)."""
        policy = self.registration_scopes if self.registration_scopes is not None else self.scopes_supported
        return None if policy is None else " ".join(policy)

    def _registration_allowed(self, scope: Scope) -> None:
        if self.registration_rate is None:
            return
        count, window = self.registration_rate
        client = scope.get("client")
        address = str(client[0]) if client else "?"
        now = self.clock()
        recent = [t for t in self._registrations.pop(address, ()) if t > now - window]
        if len(recent) >= count:
            self._registrations[address] = recent
            raise OAuthError(
                "slow_down",
                f"too many registrations from this address ({count} per {window:g} s: "
                "AuthorizationServer(registration_rate=...))",
                429,
            )
        recent.append(now)
        self._registrations[address] = recent  # (re)inserted last: the oldest address is evicted first
        if len(self._registrations) > 10_000:
            self._registrations.pop(next(iter(self._registrations)))
