"""Client ID Metadata Documents for the development authorization server (:mod:`mcpkit.auth.server`): a client
whose ``client_id`` is an https URL with a path is described by the JSON document at that URL (the MCP 2025-11-25
preferred registration, draft-ietf-oauth-client-id-metadata-document).

The server fetches what a stranger names, so the fetch follows the rules of mcpkit's OAuth client: https only
(plain http on a loopback host), no private, link-local or reserved address unless the authorization server is on
that kind of address itself (or ``allow_private_network=True``), checked again where the connection is made (the
address checked is the address connected to: no DNS rebinding), no redirect followed, the answer capped
(``max_client_document``, 5 KiB by default) and the whole fetch bounded in time (``client_document_timeout``, 5 s
by default, from connecting to the last byte). The document must name itself (``client_id`` equal to the URL), have
a ``client_name``, list its ``redirect_uris`` (an authorization request must use one of them) and hold no secret:
such a client is public (``none``) or authenticates with ``private_key_jwt`` and the ``jwks`` it lists by value.
Documents are cached as their ``Cache-Control`` says (60 s to 1 h, 5 min without one) and failures for a minute,
both bounded in entries.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from ._util import DocumentTooLarge, OAuthError, fetch_capped_response, is_secure_url, valid_redirect_uri
from .storage import AuthStorage, ClientRecord

if TYPE_CHECKING:
    from .client_discovery import Resolver

__all__ = ["ClientDocuments", "is_document_client_id"]

_MAX_AGE = re.compile(r"max-age\s*=\s*(\d+)", re.I)


def is_document_client_id(client_id: str) -> bool:
    """A ``client_id`` that is a Client ID Metadata Document URL: https (or http on loopback), a path, no fragment
    and no user info."""
    try:
        parts = urlsplit(client_id)
    except ValueError:
        return False
    return (
        is_secure_url(client_id)
        and parts.path not in ("", "/")
        and not parts.fragment
        and not parts.username
        and not parts.password
    )


class ClientDocuments:
    """Resolving a client: storage first, then (when enabled) its metadata document. The attributes below are set
    by ``AuthorizationServer.__init__``."""

    storage: AuthStorage
    issuer: str
    clock: Callable[[], float]
    client_metadata_documents: bool
    allow_private_network: bool
    max_client_document: int
    max_client_documents: int
    client_document_timeout: float
    _documents: dict[str, tuple[float, ClientRecord | None, str]]
    _resolve: Resolver | None = None  # the name resolver of document fetches (None: the system's)

    def _registration_grant(self, requested: str | None) -> str | None:
        raise NotImplementedError  # pragma: no cover - ClientRegistration._registration_grant

    async def _client(self, client_id: str) -> ClientRecord | None:
        """The registered client ``client_id``, or the one its metadata document describes; ``invalid_client``
        (401) when a document URL cannot be used (the reason in the description)."""
        client = await self.storage.get_client(client_id)
        if client is not None or not self.client_metadata_documents or not is_document_client_id(client_id):
            return client
        now = self.clock()
        hit = self._documents.get(client_id)
        if hit is not None and hit[0] > now:
            if hit[1] is None:
                raise OAuthError("invalid_client", hit[2], 401)
            return hit[1]
        try:
            record, ttl = await self._fetch_document(client_id)
        except OAuthError as exc:
            self._remember(client_id, now + 60.0, None, exc.description)
            raise
        if ttl > 0:
            self._remember(client_id, now + ttl, record, "")
        return record

    def _remember(self, url: str, until: float, record: ClientRecord | None, why: str) -> None:
        self._documents.pop(url, None)
        while len(self._documents) >= self.max_client_documents:
            self._documents.pop(next(iter(self._documents)))
        self._documents[url] = (until, record, why)

    async def _fetch_document(self, url: str) -> tuple[ClientRecord, float]:
        import httpx

        from .client_discovery import address_class, checked_http_client

        def refuse(why: str) -> OAuthError:
            return OAuthError("invalid_client", f"client metadata document {url}: {why}", 401)

        kind = await address_class(urlsplit(url).hostname)
        if kind != "public" and not self.allow_private_network:
            own = await address_class(urlsplit(self.issuer).hostname)
            if kind != own:
                raise refuse(f"it is on a {kind} address and this server is not (allow_private_network=True allows it)")
        try:
            # the address rule again where the connection is made: the name resolved once, every address checked
            # and the connection made to a checked one (no DNS rebinding between the check above and the fetch)
            async with checked_http_client(
                self.issuer,
                allow_private_network=self.allow_private_network,
                timeout=self.client_document_timeout,
                resolve=self._resolve,
                _owner=("this authorization server", "AuthorizationServer"),
            ) as http:
                status, headers, body = await fetch_capped_response(
                    http,
                    "GET",
                    url,
                    self.max_client_document,
                    deadline=self.client_document_timeout,
                    headers={"accept": "application/json"},
                )
        except DocumentTooLarge:
            raise refuse(f"larger than {self.max_client_document} bytes (max_client_document)") from None
        except httpx.TimeoutException:
            why = f"not fetched within {self.client_document_timeout:g} s (client_document_timeout)"
            raise refuse(why) from None
        except httpx.HTTPError as exc:
            raise refuse(f"cannot be fetched ({type(exc).__name__})") from None
        if status != 200:
            raise refuse(f"answered HTTP {status} (redirects are not followed)")
        try:
            meta = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise refuse("not JSON") from None
        if not isinstance(meta, dict):
            raise refuse("not a JSON object")
        return self._document_client(url, meta, refuse), cache_lifetime(headers.get("cache-control"))

    def _document_client(self, url: str, meta: dict[str, Any], refuse: Callable[[str], OAuthError]) -> ClientRecord:
        from .registration import public_jwks

        if meta.get("client_id") != url:
            raise refuse("its client_id is not its own URL")
        if "client_secret" in meta or "client_secret_expires_at" in meta:
            raise refuse("a metadata document holds no secret")
        if "jwks_uri" in meta:
            raise refuse("jwks_uri is not supported: list the keys as jwks")
        uris = meta.get("redirect_uris")
        if (
            not isinstance(uris, list)
            or not uris
            or not all(isinstance(u, str) and valid_redirect_uri(u) for u in uris)
        ):
            raise refuse("redirect_uris must list https or loopback URIs")
        method = meta.get("token_endpoint_auth_method", "none")
        if method not in ("none", "private_key_jwt"):
            raise refuse("token_endpoint_auth_method must be none or private_key_jwt")
        jwks = None
        if method == "private_key_jwt":
            try:
                jwks = public_jwks(meta.get("jwks"))
            except ValueError as exc:
                raise refuse(str(exc)) from None
        grant_types = meta.get("grant_types", ["authorization_code"])
        if not isinstance(grant_types, list) or any(
            g not in ("authorization_code", "refresh_token") for g in grant_types
        ):
            raise refuse("grant_types may be authorization_code and refresh_token only")
        name = meta.get("client_name")
        if not isinstance(name, str) or not name.strip():
            # MCP 2025-11-25: client_id, client_name and redirect_uris at least (the name is what a consent shows)
            raise refuse("client_name is required")
        scope = meta.get("scope") if isinstance(meta.get("scope"), str) else None
        return ClientRecord(
            url,
            None,
            list(uris),
            method,
            list(grant_types),
            self._registration_grant(scope),
            metadata={k: v for k, v in meta.items() if k not in ("client_id", "scope")},
            dynamic=True,
            jwks=jwks,
        )


def cache_lifetime(cache_control: str | None) -> float:
    """How long a document may be reused: its ``max-age`` within 60 s .. 1 h, 0 for ``no-store``, else 5 min."""
    if not cache_control:
        return 300.0
    if "no-store" in cache_control.lower():
        return 0.0
    m = _MAX_AGE.search(cache_control)
    return float(min(3600, max(60, int(m.group(1))))) if m else 300.0
