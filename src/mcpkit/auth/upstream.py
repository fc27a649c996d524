"""The upstream identity provider of an OAuth proxy (:mod:`mcpkit.auth.upstream_login`): where its endpoints are,
the client mcpkit's authorization server is registered as there, and the three HTTP exchanges made with it (the
code exchanged for tokens, a refresh, the user identified by a verified OIDC ``id_token`` or a userinfo endpoint).

Most identity providers (GitHub, Google, Azure, ...) have no Dynamic Client Registration: an MCP client cannot
register with them, and the MCP specification forbids passing their tokens through to it. The proxy is registered
once with the provider (a fixed ``client_id`` and secret, its own callback URL), logs the user in there, and issues
tokens of its own, audience-bound to the MCP server; the provider's tokens stay on the server.

Every answer of the provider is read bounded in size and time (``max_response`` bytes, ``timeout`` seconds for the
whole exchange); every endpoint must be https (plain http only on a loopback host, for tests).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import quote, urlencode

import orjson

from ._util import DocumentTooLarge, fetch_capped, fetch_capped_response, is_secure_url

__all__ = [
    "UpstreamError",
    "UpstreamIdentity",
    "UpstreamProvider",
    "UpstreamTokens",
    "auth0_issuer",
    "entra_issuer",
    "keycloak_issuer",
    "okta_issuer",
]

_ERROR_CODE = re.compile(r"[a-z_]{1,64}")
_TENANT_ID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?(?::[0-9]{1,5})?")


def _host(domain: str, vendor: str) -> str:
    domain = domain.strip().removeprefix("https://").rstrip("/")
    if not _HOST.fullmatch(domain):
        raise ValueError(f"{vendor}: {domain!r} is not a host name (e.g. 'example.{vendor.lower()}.com')")
    return domain


def entra_issuer(tenant: str) -> str:
    """Microsoft Entra ID's (Azure AD's) v2.0 issuer of a tenant: ``https://login.microsoftonline.com/<tenant
    id>/v2.0`` (https://learn.microsoft.com/entra/identity-platform/v2-protocols-oidc, "Find your app's OpenID
    configuration document URI"). ``tenant`` is the directory (tenant) id, a GUID: the multi-tenant endpoints
    (``common``, ``organizations``, ``consumers``) and a tenant's domain name publish a document whose ``issuer``
    is another string (a ``{tenantid}`` template, or the GUID), which OpenID discovery refuses (§4.3)."""
    if not _TENANT_ID.fullmatch(tenant):
        raise ValueError(
            "UpstreamProvider.microsoft needs the tenant's directory id (a GUID, Entra admin center > Overview): "
            "the 'common', 'organizations' and 'consumers' endpoints and domain names publish another issuer"
        )
    return f"https://login.microsoftonline.com/{tenant.lower()}/v2.0"


def auth0_issuer(domain: str) -> str:
    """An Auth0 tenant's issuer: ``https://<domain>/`` (with its trailing slash, as Auth0's discovery document
    names it; https://auth0.com/docs/get-started/applications/configure-applications-with-oidc-discovery)."""
    return f"https://{_host(domain, 'Auth0')}/"


def keycloak_issuer(base_url: str, realm: str) -> str:
    """A Keycloak realm's issuer: ``<base_url>/realms/<realm>`` (https://www.keycloak.org/securing-apps/oidc-layers,
    "Available endpoints"; a server older than Keycloak 17 has ``/auth`` in its ``base_url``)."""
    if not realm or "/" in realm or realm in (".", ".."):
        raise ValueError("a Keycloak realm is one path segment")
    return f"{base_url.rstrip('/')}/realms/{quote(realm, safe='')}"


def okta_issuer(domain: str, authorization_server: str | None = "default") -> str:
    """An Okta issuer: a custom authorization server's ``https://<domain>/oauth2/<authorization_server>`` (the
    ``default`` one by default), or the org authorization server's ``https://<domain>`` with
    ``authorization_server=None`` (https://developer.okta.com/docs/concepts/auth-servers/)."""
    host = _host(domain, "Okta")
    if authorization_server is None:
        return f"https://{host}"
    if not authorization_server or "/" in authorization_server:
        raise ValueError("an Okta authorization server id is one path segment")
    return f"https://{host}/oauth2/{quote(authorization_server, safe='')}"


class UpstreamError(Exception):
    """The identity provider refused, failed or answered something unusable. ``error`` is its OAuth error code when
    it gave a well-formed one (``access_denied``...), else ``server_error``; the message never holds a credential."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error: str = error if _ERROR_CODE.fullmatch(error) else "server_error"
        self.description: str = description


@dataclass(frozen=True)
class UpstreamTokens:
    """The provider's token answer, kept on the server (never shown to the MCP client)."""

    access_token: str
    refresh_token: str | None = None
    expires_at: float | None = None  # epoch seconds (``expires_in`` from the answer), None: not said
    id_token: str | None = None
    scope: str | None = None


@dataclass(frozen=True)
class UpstreamIdentity:
    """Who logged in at the provider: ``subject`` (the id_token's ``sub``, or the userinfo member named by
    :attr:`UpstreamProvider.subject_claim`) and every claim the provider told."""

    subject: str
    claims: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UpstreamProvider:
    """An OAuth 2 / OpenID Connect identity provider the proxy logs users in at, with the confidential client it is
    registered as there (register ``<issuer>/upstream/callback`` of the proxy as that client's redirect URI).

    Build one with :meth:`github`, :meth:`google` or :meth:`oidc` (discovery from the issuer), or give the endpoints.

    Args:
        authorize_url / token_url: the provider's endpoints.
        client_id / client_secret: the proxy's registration there.
        scopes: the scopes asked of the provider (what a tool may then do with the user's upstream token).
        userinfo_url: where the user is identified when the token answer has no ``id_token`` to verify.
        issuer / jwks_url: an OpenID provider's issuer and keys: an ``id_token`` is verified against them (its
            ``iss``, ``aud`` = ``client_id``, expiry and the login's ``nonce``), and an ``iss`` in the callback (RFC
            9207) must be this issuer.
        token_auth: how the proxy authenticates at the token endpoint (``client_secret_basic`` or ``_post``).
        subject_claim: the userinfo member that identifies the user (``sub``; GitHub's is ``id``).
        name: how the consent page names the provider ("GitHub").
        authorize_params: extra parameters of the authorization request (``{"prompt": "consent"}``...).
        userinfo_headers: extra headers of the userinfo request (GitHub's API wants a ``user-agent``).
        timeout / max_response: the longest an exchange with the provider may take as a whole (seconds) and the
            largest answer read (bytes).
        revocation_url: the provider's RFC 7009 revocation endpoint (OpenID discovery's ``revocation_endpoint``):
            when the proxy's grant is revoked, the user's upstream tokens are revoked there too, best effort.
    """

    authorize_url: str
    token_url: str
    client_id: str
    client_secret: str
    scopes: tuple[str, ...] = ()
    userinfo_url: str | None = None
    issuer: str | None = None
    jwks_url: str | None = None
    token_auth: Literal["client_secret_basic", "client_secret_post"] = "client_secret_basic"
    subject_claim: str = "sub"
    name: str = "the identity provider"
    authorize_params: Mapping[str, str] = field(default_factory=dict)
    userinfo_headers: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 10.0
    max_response: int = 64 * 1024
    revocation_url: str | None = None

    def __post_init__(self) -> None:
        for url in (self.authorize_url, self.token_url, self.userinfo_url, self.jwks_url, self.revocation_url):
            if url is not None and not is_secure_url(url):
                raise ValueError(f"an upstream endpoint must be https (plain http only on a loopback host): {url}")
        if not self.userinfo_url and not self.jwks_url:
            raise ValueError("the user is identified by a userinfo_url or by id_tokens verified with a jwks_url")
        if self.jwks_url and not self.issuer:
            raise ValueError("verifying id_tokens needs the provider's issuer")
        if self.token_auth not in ("client_secret_basic", "client_secret_post"):
            raise ValueError("token_auth is client_secret_basic or client_secret_post")

    @property
    def openid(self) -> bool:
        """Whether the login asks for an ``id_token`` (the ``openid`` scope, and keys to verify it with)."""
        return "openid" in self.scopes and self.jwks_url is not None

    # ------------------------------------------------------------------ presets
    @classmethod
    def github(
        cls, client_id: str, client_secret: str, *, scopes: tuple[str, ...] = ("read:user",)
    ) -> UpstreamProvider:
        """GitHub (an OAuth App or a GitHub App's user authorization; no OpenID Connect): the user is ``/user``'s
        numeric ``id``, the upstream token calls the GitHub API."""
        return cls(
            authorize_url="https://github.com/login/oauth/authorize",
            token_url="https://github.com/login/oauth/access_token",
            userinfo_url="https://api.github.com/user",
            client_id=client_id,
            client_secret=client_secret,
            scopes=scopes,
            token_auth="client_secret_post",
            subject_claim="id",
            name="GitHub",
            userinfo_headers={"accept": "application/vnd.github+json", "user-agent": "mcpkit-oauth-proxy"},
        )

    @classmethod
    async def google(
        cls, client_id: str, client_secret: str, *, scopes: tuple[str, ...] = ("openid", "email", "profile")
    ) -> UpstreamProvider:
        """Google, from its OpenID Connect discovery document (``accounts.google.com``). Add
        ``authorize_params={"access_type": "offline", "prompt": "consent"}`` with :func:`dataclasses.replace` for
        a refresh token."""
        return await cls.oidc("https://accounts.google.com", client_id, client_secret, scopes=scopes, name="Google")

    @classmethod
    async def oidc(
        cls,
        issuer: str,
        client_id: str,
        client_secret: str,
        *,
        scopes: tuple[str, ...] = ("openid", "email", "profile"),
        name: str | None = None,
        timeout: float = 10.0,
        max_response: int = 64 * 1024,
        **options: Any,
    ) -> UpstreamProvider:
        """Any OpenID provider, from ``<issuer>/.well-known/openid-configuration`` (read once, bounded, https only
        but on loopback; the document must name the same issuer). ``options`` are the other fields."""
        import httpx

        base = issuer.rstrip("/")
        if not is_secure_url(base):
            raise ValueError("the issuer must be an https URL (plain http only on a loopback host)")
        url = base + "/.well-known/openid-configuration"
        try:
            async with httpx.AsyncClient(timeout=timeout, follow_redirects=False) as http:
                status, body = await fetch_capped(http, "GET", url, max_response, deadline=timeout)
        except (httpx.HTTPError, DocumentTooLarge) as exc:
            raise UpstreamError("server_error", f"could not read {url}: {type(exc).__name__}") from None
        doc = _json_object(body) if status == 200 else None
        if doc is None:
            raise UpstreamError("server_error", f"{url} answered HTTP {status} without a JSON document")
        named = doc.get("issuer")
        if not isinstance(named, str) or named.rstrip("/") != base:
            raise UpstreamError("server_error", f"{url} names another issuer")  # (OpenID Discovery §4.3)
        issuer = named  # as the provider spells it (Auth0's ends with "/"): its id_tokens' iss is that string
        endpoints = {k: doc.get(k) for k in ("authorization_endpoint", "token_endpoint", "jwks_uri")}
        if not all(isinstance(v, str) for v in endpoints.values()):
            raise UpstreamError("server_error", f"{url} lacks an authorization, token or jwks endpoint")
        userinfo = doc.get("userinfo_endpoint")
        revocation = doc.get("revocation_endpoint")
        methods = doc.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        token_auth = "client_secret_basic" if "client_secret_basic" in methods else "client_secret_post"
        fields: dict[str, Any] = {
            "authorize_url": endpoints["authorization_endpoint"],
            "token_url": endpoints["token_endpoint"],
            "jwks_url": endpoints["jwks_uri"],
            "userinfo_url": userinfo if isinstance(userinfo, str) else None,
            "revocation_url": revocation if isinstance(revocation, str) else None,
            "issuer": issuer,
            "client_id": client_id,
            "client_secret": client_secret,
            "scopes": scopes,
            "token_auth": token_auth,
            "name": name or issuer,
            "timeout": timeout,
            "max_response": max_response,
        }
        fields.update(options)
        return cls(**fields)

    @classmethod
    async def microsoft(
        cls,
        tenant: str,
        client_id: str,
        client_secret: str,
        *,
        scopes: tuple[str, ...] = ("openid", "email", "profile", "offline_access"),
        **options: Any,
    ) -> UpstreamProvider:
        """Microsoft Entra ID (Azure AD) of one tenant, from its discovery document (:func:`entra_issuer`: the
        tenant's directory id). ``offline_access`` asks for a refresh token."""
        return await cls.oidc(
            entra_issuer(tenant), client_id, client_secret, scopes=scopes, **_named(options, "Microsoft")
        )

    @classmethod
    async def auth0(cls, domain: str, client_id: str, client_secret: str, **options: Any) -> UpstreamProvider:
        """An Auth0 tenant (``example.us.auth0.com``, or its custom domain), from its discovery document
        (:func:`auth0_issuer`). Add ``"offline_access"`` to ``scopes`` for a refresh token."""
        return await cls.oidc(auth0_issuer(domain), client_id, client_secret, **_named(options, "Auth0"))

    @classmethod
    async def keycloak(
        cls, base_url: str, realm: str, client_id: str, client_secret: str, **options: Any
    ) -> UpstreamProvider:
        """A Keycloak realm, from its discovery document (:func:`keycloak_issuer`)."""
        return await cls.oidc(keycloak_issuer(base_url, realm), client_id, client_secret, **_named(options, "Keycloak"))

    @classmethod
    async def okta(
        cls,
        domain: str,
        client_id: str,
        client_secret: str,
        *,
        authorization_server: str | None = "default",
        **options: Any,
    ) -> UpstreamProvider:
        """An Okta org (``example.okta.com``), from the discovery document of its ``default`` custom
        authorization server, another one, or (``authorization_server=None``) the org's (:func:`okta_issuer`)."""
        issuer = okta_issuer(domain, authorization_server)
        return await cls.oidc(issuer, client_id, client_secret, **_named(options, "Okta"))

    # ------------------------------------------------------------------ exchanges
    async def _post_token(self, form: dict[str, str]) -> dict[str, Any]:
        status, _, body = await self._post(self.token_url, form, "the token endpoint")
        doc = _json_object(body)
        if doc is None:
            raise UpstreamError("server_error", f"the token endpoint answered HTTP {status} without JSON")
        if status != 200 or "error" in doc:  # (GitHub answers its errors with 200)
            raise UpstreamError(str(doc.get("error", "server_error")), f"the token endpoint refused (HTTP {status})")
        return doc

    async def _post(self, url: str, form: dict[str, str], what: str) -> tuple[int, Mapping[str, str], bytes]:
        """A form POSTed to one of the provider's endpoints with the proxy's client authentication, its answer read
        bounded in size and time."""
        import httpx

        headers = {"accept": "application/json", "content-type": "application/x-www-form-urlencoded"}
        if self.token_auth == "client_secret_basic":  # RFC 6749 §2.3.1: each form-urlencoded, then Basic
            pair = f"{quote(self.client_id, safe='')}:{quote(self.client_secret, safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
        else:
            form = {**form, "client_id": self.client_id, "client_secret": self.client_secret}
        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as http:
                return await fetch_capped_response(
                    http,
                    "POST",
                    url,
                    self.max_response,
                    deadline=self.timeout,
                    content=urlencode(form).encode(),
                    headers=headers,
                )
        except (httpx.HTTPError, DocumentTooLarge) as exc:
            raise UpstreamError("server_error", f"{what} could not be read: {type(exc).__name__}") from None

    async def revoke(self, tokens: UpstreamTokens) -> bool:
        """Revoke ``tokens`` at the provider's :attr:`revocation_url` (RFC 7009: the refresh token when there is
        one, which ends the whole upstream grant, else the access token). One try, bounded like every exchange:
        True when the provider answered 200; False when it refused, failed or has no revocation endpoint."""
        if not self.revocation_url:
            return False
        try:
            status, _, _ = await self.revocation_answer(tokens)
        except UpstreamError:
            return False
        return status == 200

    async def revocation_answer(self, tokens: UpstreamTokens) -> tuple[int, Mapping[str, str], bytes]:
        """The provider's answer (status, headers, body) to one revocation of ``tokens`` at its
        :attr:`revocation_url`, for a caller that decides what it means (retries it: see
        :mod:`mcpkit.auth.upstream_revocation`); :class:`UpstreamError` when no answer could be read (the network,
        the ``timeout``, an answer past ``max_response``) or there is no revocation endpoint."""
        if not self.revocation_url:
            raise UpstreamError("server_error", "the provider has no revocation endpoint")
        if tokens.refresh_token:
            form = {"token": tokens.refresh_token, "token_type_hint": "refresh_token"}
        else:
            form = {"token": tokens.access_token, "token_type_hint": "access_token"}
        return await self._post(self.revocation_url, form, "the revocation endpoint")

    async def exchange_code(self, code: str, redirect_uri: str, verifier: str, now: float) -> UpstreamTokens:
        """The provider's tokens for an authorization code of the proxy's login (PKCE ``verifier``)."""
        doc = await self._post_token(
            {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri, "code_verifier": verifier}
        )
        return _tokens(doc, now, None)

    async def refresh(self, tokens: UpstreamTokens, now: float) -> UpstreamTokens:
        """New tokens for ``tokens.refresh_token`` (a provider that does not rotate it keeps the old one)."""
        if not tokens.refresh_token:
            raise UpstreamError("invalid_grant", "no upstream refresh token")
        doc = await self._post_token({"grant_type": "refresh_token", "refresh_token": tokens.refresh_token})
        return _tokens(doc, now, tokens.refresh_token)

    async def identify(self, tokens: UpstreamTokens, nonce: str | None) -> UpstreamIdentity:
        """Who logged in: the ``id_token`` verified against the provider's keys when there is one to verify (and
        then ``nonce`` must match), else the userinfo endpoint read with the access token."""
        if self.jwks_url and tokens.id_token:
            from .verifiers import InvalidToken, JWTVerifier

            verifier = JWTVerifier(
                issuer=self.issuer,
                audience=self.client_id,
                jwks_url=self.jwks_url,
                http_timeout=self.timeout,
                max_document_size=self.max_response,
            )
            try:
                claims = (await verifier.verify(tokens.id_token)).claims
            except InvalidToken as exc:
                raise UpstreamError("server_error", f"the id_token was refused: {exc}") from None
            if nonce is not None and claims.get("nonce") != nonce:
                raise UpstreamError("server_error", "the id_token is not this login's (nonce)")
            return _identity(claims, "sub")
        if not self.userinfo_url:
            raise UpstreamError("server_error", "the provider gave no id_token and has no userinfo endpoint")
        import httpx

        headers = {"accept": "application/json", **self.userinfo_headers}
        headers["authorization"] = "Bearer " + tokens.access_token
        try:
            async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as http:
                status, body = await fetch_capped(
                    http, "GET", self.userinfo_url, self.max_response, deadline=self.timeout, headers=headers
                )
        except (httpx.HTTPError, DocumentTooLarge) as exc:
            raise UpstreamError("server_error", f"userinfo could not be read: {type(exc).__name__}") from None
        doc = _json_object(body) if status == 200 else None
        if doc is None:
            raise UpstreamError("server_error", f"userinfo answered HTTP {status} without a JSON object")
        return _identity(doc, self.subject_claim)


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return doc if isinstance(doc, dict) else None


def _identity(claims: Mapping[str, Any], member: str) -> UpstreamIdentity:
    subject = claims.get(member)
    if isinstance(subject, bool) or not isinstance(subject, (str, int)) or subject == "":
        raise UpstreamError("server_error", f"the provider named no user ({member!r})")
    return UpstreamIdentity(str(subject), dict(claims))


def _tokens(doc: Mapping[str, Any], now: float, old_refresh: str | None) -> UpstreamTokens:
    access = doc.get("access_token")
    if not isinstance(access, str) or not access:
        raise UpstreamError("server_error", "the token endpoint gave no access_token")
    expires_in = doc.get("expires_in")
    expires_at = now + float(expires_in) if isinstance(expires_in, (int, float)) and expires_in > 0 else None
    refresh = doc.get("refresh_token")
    id_token = doc.get("id_token")
    scope = doc.get("scope")
    return UpstreamTokens(
        access,
        refresh if isinstance(refresh, str) and refresh else old_refresh,
        expires_at,
        id_token if isinstance(id_token, str) else None,
        scope if isinstance(scope, str) else None,
    )


def _named(options: dict[str, Any], name: str) -> dict[str, Any]:
    """``options`` with the consent page's name of the provider, unless given."""
    return {"name": name, **options}
