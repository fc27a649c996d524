"""The MCP client side of OAuth 2.1: an ``httpx.Auth`` that authorizes on demand.

``OAuthClient(server_url, client_metadata=..., storage=..., redirect_handler=..., callback_handler=...)`` is passed
as ``auth=`` to :class:`~mcpkit.transports.http.streamable_client.StreamableHTTPClientTransport` (or to any httpx
client). On a 401 (or a 403 ``insufficient_scope``) it:

1. discovers the Protected Resource Metadata (RFC 9728): the ``resource_metadata`` of the ``WWW-Authenticate``
   challenge, else ``/.well-known/oauth-protected-resource/<mcp-path>``, else ``/.well-known/oauth-protected-resource``
   (2025-11-25), and checks its ``resource`` is the server URL, or the identifier of the well-known URL it came
   from when that contains the server (RFC 9728 §3.3: the root document may name the origin);
2. discovers the authorization server metadata: RFC 8414 and OpenID Connect discovery, with the path-insertion
   variants for an issuer with a path; checks the document's ``issuer`` equals the one it was looked up for, and
   that S256 PKCE is advertised. Without PRM (a 2025-03-26 server) the authorization base URL is the server URL with
   its path discarded, and when that has no metadata either the defaults ``/authorize``, ``/token`` and
   ``/register`` are used;
3. registers with Dynamic Client Registration (RFC 7591) unless it already has credentials for that issuer
   (pre-registered ``client_id``, a Client ID Metadata Document URL, or an earlier registration in ``storage``);
4. runs the authorization code grant with PKCE S256, ``state``, the RFC 8707 ``resource`` parameter and the scopes
   of the challenge (else the PRM ``scopes_supported``); validates the RFC 9207 ``iss`` of the redirect;
5. exchanges the code, stores the tokens keyed by issuer and resource, and retries the request once with
   ``Authorization: Bearer`` (the only place a token ever goes).

Expired access tokens are refreshed before use (``refresh_token`` grant, rotation honoured). Every discovery
request carries ``MCP-Protocol-Version``. A :class:`HeadlessBrowser` plays the user-agent in tests.

Besides the authorization code grant, a machine client uses ``grant_type="client_credentials"`` (the OAuth client
credentials extension) or ``grant_type="jwt_bearer"`` with an ``assertion`` (RFC 7523 §2.1: a workload identity
JWT, or an ID-JAG that :class:`~mcpkit.auth.client_grants.IdJagExchange` obtains from an enterprise identity
provider). A client authenticates with a secret (``client_secret_basic``/``_post``) or a signed JWT
(``private_key=``: ``private_key_jwt``, RFC 7523 §2.2, the assertion's audience the issuer). DPoP (RFC 9449):
``dpop="auto"`` (default) binds tokens to a key of the client's whenever the MCP server takes DPoP (it challenges
with the ``DPoP`` scheme or its resource metadata lists ``dpop_signing_alg_values_supported``); the token request and
every MCP request then carry a fresh proof, and a server's ``use_dpop_nonce`` answer is retried once with its nonce.

What a hostile MCP server (or metadata document) names is never fetched blindly (SSRF): every URL the flow
requests must be https (plain http only on a loopback host); a ``resource_metadata`` URL of a challenge is used only
on the MCP server's own origin; a target on a private, link-local (``169.254.169.254``), shared or reserved address
is refused unless the MCP server itself is on that kind of address or ``allow_private_network=True``, at the moment
of connecting (the address checked is the address connected to: no DNS rebinding; through a proxy of the
environment, before handing the request over, since the proxy resolves the name); and every document read is
capped at ``max_document_size`` bytes.

This module is the ``httpx.Auth`` flow itself; it re-exports the pieces it is built from: token storage
(:mod:`~mcpkit.auth.client_tokens`), the loopback callback server and headless browser
(:mod:`~mcpkit.auth.client_loopback`), metadata discovery under the SSRF/size rules
(:mod:`~mcpkit.auth.client_discovery`), token requests, client authentication and DPoP
(:mod:`~mcpkit.auth.client_token_endpoint`), the client's credentials and registration per authorization server
(:mod:`~mcpkit.auth.client_registration`), jwt-bearer assertions (:mod:`~mcpkit.auth.client_grants`) and the
errors (:mod:`~mcpkit.auth.client_errors`).
"""

from __future__ import annotations

import asyncio
import secrets
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, Literal
from urllib.parse import urlencode, urlsplit

import httpx
import orjson

from ..protocol.versions import LATEST_HANDSHAKE, META_PROTOCOL_VERSION, features, is_supported
from ._util import pkce_pair
from .challenges import parse_challenges
from .client_discovery import Discovered
from .client_errors import AuthorizationServerUnavailable, InvalidClientError, OAuthFlowError, shown_safely
from .client_grants import JWT_BEARER_GRANT, AssertionProvider, AssertionRequest, IdJagExchange
from .client_loopback import HeadlessBrowser, LoopbackCallback
from .client_registration import RegistrationMixin
from .client_tokens import FileTokenStorage, InMemoryTokenStorage, TokenSet, TokenStorage
from .keys import SigningKey

__all__ = [
    "AssertionRequest",
    "AuthorizationServerUnavailable",
    "FileTokenStorage",
    "HeadlessBrowser",
    "IdJagExchange",
    "InMemoryTokenStorage",
    "InvalidClientError",
    "LoopbackCallback",
    "OAuthClient",
    "OAuthFlowError",
    "SigningKey",
    "TokenSet",
    "TokenStorage",
]

_GRANTS = {
    "authorization_code": "authorization_code",
    "client_credentials": "client_credentials",
    "jwt_bearer": "jwt_bearer",
    JWT_BEARER_GRANT: "jwt_bearer",
}

#: scopes per authorization server the client remembers its step-ups asked for (see ``OAuthClient._declined``), and
#: the most scopes one step-up asks for (the scopes asked for before and the challenge's, together)
MAX_STEPPED_UP_SCOPES = 256
#: the longest scope string (space-separated) a step-up asks for
MAX_SCOPE_STRING = 8 * 1024

RedirectHandler = Callable[[str], Awaitable[None]]
CallbackHandler = Callable[[], Awaitable[Mapping[str, str]]]


class OAuthClient(RegistrationMixin, httpx.Auth):
    """See the module docstring.

    Args:
        server_url: the MCP endpoint URL.
        client_metadata: RFC 7591 metadata for DCR (``redirect_uris`` required; ``client_name``, ``scope``,
            ``token_endpoint_auth_method`` default ``none``, ``application_type`` default ``native``).
        storage: token/registration storage (in memory by default).
        redirect_handler: sends the user to the authorization URL (opens a browser, or :class:`HeadlessBrowser`).
        callback_handler: returns the query parameters the redirect URI received (``code``, ``state``, ``iss``).
        client_id / client_secret: pre-registered credentials, for the authorization server ``issuer`` only.
        issuer: the authorization server (its issuer identifier) the pre-registered credentials were registered
            with: they are sent to no other. Where an MCP server names another one, the client registers there
            dynamically (a Client ID Metadata Document or RFC 7591) when it can, and otherwise fails naming both
            issuers; a ``client_credentials`` or ``jwt_bearer`` client fails at once. Without it, credentials with a
            ``client_secret`` or ``private_key`` go only to an authorization server on the MCP server's own origin
            (any other is refused with an :class:`OAuthFlowError` naming ``issuer=``: a hostile MCP server could name
            an authorization server of its own at the first contact), and a public ``client_id`` is bound to the
            first authorization server this client authorizes with.
        client_metadata_url: a Client ID Metadata Document URL, used as ``client_id`` when the AS advertises
            ``client_id_metadata_document_supported``.
        scope: scopes to request when neither the challenge nor the PRM names any.
        protocol_version: the ``MCP-Protocol-Version`` sent during discovery when the failed request carried none.
        grant_type: ``authorization_code`` (a user authorizes in a browser), ``client_credentials``
            (machine-to-machine, the ``io.modelcontextprotocol/oauth-client-credentials`` extension: needs
            ``client_id`` and ``client_secret`` or ``private_key``; no redirect handlers) or ``jwt_bearer`` (RFC 7523
            §2.1: trade ``assertion`` for a token; ``client_id`` and a secret or key only when the authorization
            server wants the client authenticated too).
        private_key: authenticate the client with ``private_key_jwt`` (RFC 7523 §2.2): a
            :class:`~mcpkit.auth.keys.SigningKey`, PEM text or a private JWK. Each token request carries a fresh
            assertion (``iss``/``sub`` the client id, ``aud`` the authorization server's issuer, 60 s lifetime).
            Without ``client_id`` the client registers dynamically with its public key (``jwks``).
        assertion: the ``jwt_bearer`` grant's assertion: a JWT string, or an async callable given an
            :class:`~mcpkit.auth.client_grants.AssertionRequest` (e.g. :class:`~mcpkit.auth.client_grants.
            IdJagExchange` for enterprise-managed authorization). An assertion the authorization server refused is
            never sent again: the error surfaces, with no retry and no other grant.
        dpop: ``"auto"`` (use DPoP when the MCP server takes it), True (always), False
            (never) or the :class:`~mcpkit.auth.keys.SigningKey` to bind tokens to (keep it with persisted tokens:
            a token bound to another key is dropped).
        max_step_up: how many 403 ``insufficient_scope`` re-authorizations one request may trigger.
        offline_access: add ``offline_access`` to the requested scopes when the AS lists it (SEP-2207).
        allow_private_network: fetch metadata/endpoints on private or link-local addresses even when the MCP server
            is not on such an address itself (default False: SSRF protection).
        max_document_size: the largest metadata, registration or token response read, in bytes (default 256 KiB).
        require_advertised_pkce: refuse every authorization server whose metadata does not list
            ``code_challenge_methods_supported`` with ``S256`` (or that has no metadata at all). By default this
            holds wherever the client knows the server speaks 2025-11-25 or later (the spec's "MUST refuse to
            proceed"); a server without resource metadata met at the first 401 of negotiation, whose revision is
            not known yet, may still be a 2025-03-26 one, whose metadata need not list the field. True: always.
        http_client: the httpx client of the flow's own requests (discovery, registration, tokens). By default one
            whose transport applies the address rule where it connects
            (:class:`~mcpkit.auth.client_discovery.CheckedAddressTransport`: no DNS rebinding) and that honours the
            proxies of the environment, checking each target before handing it to the proxy (an IP literal or a
            name resolving here to a refused address; the proxy's own resolution is beyond reach). With a client
            of your own you own its transport: each URL is still checked before it is requested, but where the
            connection goes is your transport's decision.
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
        issuer: str | None = None,
        token_endpoint_auth_method: str | None = None,
        client_metadata_url: str | None = None,
        scope: str | None = None,
        protocol_version: str = LATEST_HANDSHAKE,
        max_step_up: int = 1,
        offline_access: bool = True,
        grant_type: str = "authorization_code",
        private_key: SigningKey | str | bytes | Mapping[str, Any] | None = None,
        assertion: str | AssertionProvider | None = None,
        dpop: bool | Literal["auto"] | SigningKey = "auto",
        http_client: httpx.AsyncClient | None = None,
        timeout: float = 30.0,
        allow_private_network: bool = False,
        max_document_size: int = 256 * 1024,
        require_advertised_pkce: bool = False,
    ) -> None:
        self.server_url = server_url
        self.require_advertised_pkce = require_advertised_pkce
        self._negotiated: str | None = None  # the revision the server is known to speak (see _version_of)
        self.allow_private_network = allow_private_network
        self.max_document_size = max_document_size
        if grant_type not in _GRANTS:
            raise ValueError("grant_type must be 'authorization_code', 'client_credentials' or 'jwt_bearer'")
        self.grant_type: str = _GRANTS[grant_type]
        grant_type = self.grant_type
        self.private_key: SigningKey | None = SigningKey.load(private_key) if private_key is not None else None
        self.assertion = assertion
        if dpop not in (True, False, "auto") and not isinstance(dpop, SigningKey):
            raise ValueError("dpop must be 'auto', True, False or a SigningKey")
        self.dpop: bool | str = dpop if not isinstance(dpop, SigningKey) else True
        self._dpop_key: SigningKey | None = dpop if isinstance(dpop, SigningKey) else None
        self._nonces: dict[str, str] = {}  # origin -> the latest DPoP-Nonce it sent (RFC 9449 §8, §9)
        self._rs_offers_dpop = False  # the MCP server challenged with the DPoP scheme
        self._refused: deque[str] = deque(maxlen=16)  # digests of assertions the authorization server refused
        self.client_metadata: dict[str, Any] = dict(client_metadata or {})
        self._auth_method_given = "token_endpoint_auth_method" in self.client_metadata
        self.client_metadata.setdefault("token_endpoint_auth_method", "none")
        self.client_metadata.setdefault("application_type", "native")
        self.client_metadata.setdefault("grant_types", ["authorization_code", "refresh_token"])
        self.client_metadata.setdefault("response_types", ["code"])
        if grant_type == "client_credentials":
            if not client_id or not (client_secret or self.private_key):
                raise ValueError("the client_credentials grant needs client_id and client_secret or private_key")
        elif grant_type == "jwt_bearer":
            if not assertion:
                raise ValueError("the jwt_bearer grant needs an assertion (a JWT, or a callable returning one)")
        elif not self.client_metadata.get("redirect_uris"):
            raise ValueError("client_metadata needs redirect_uris")
        if self.private_key is not None and client_secret:
            raise ValueError("give private_key or client_secret, not both")
        self.storage: TokenStorage = storage or InMemoryTokenStorage()
        self.redirect_handler = redirect_handler
        self.callback_handler = callback_handler
        default_method = "private_key_jwt" if self.private_key else "client_secret_basic" if client_secret else "none"
        self.preregistered: dict[str, Any] | None = (
            {
                "client_id": client_id,
                "client_secret": client_secret,
                "token_endpoint_auth_method": token_endpoint_auth_method or default_method,
            }
            if client_id
            else {"token_endpoint_auth_method": "none"}  # a jwt_bearer grant needs no client identity
            if grant_type == "jwt_bearer"
            else None
        )
        # the issuer the pre-registered credentials belong to (None: not bound yet, bound on first use)
        self._preregistered_issuer = issuer if client_id else None
        self.client_metadata_url = client_metadata_url
        self.scope = scope
        self.protocol_version = protocol_version
        self.max_step_up = max_step_up
        self._http = http_client
        self.timeout = timeout
        self._lock = asyncio.Lock()
        self.issuer: str | None = None  # the issuer whose tokens are in use
        self.resource: str | None = None  # the resource they were issued for (the MCP server; None: unnamed)
        self._discovery: Discovered | None = None
        self.offline_access = offline_access
        self._requested: dict[str, list[str]] = {}  # issuer -> scopes last requested there
        self._outages = 0  # refreshes that failed for now (AuthorizationServerUnavailable), the latest in _outage
        self._outage: str | None = None
        self._stepped_up: dict[str, set[str]] = {}  # issuer -> scopes a 403 insufficient_scope made us ask for
        self.log: list[str] = []  # every URL the flow requested, in order (observability, tests)

    # ------------------------------------------------------------------ httpx.Auth
    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        server = httpx.URL(self.server_url)
        if (request.url.scheme, request.url.host, request.url.port) != (server.scheme, server.host, server.port):
            yield request  # the token is for the MCP server only: never hand it to another origin
            return
        if (version := request.headers.get("mcp-protocol-version")) and version != self._negotiated:
            self._learn_version(request, version)
        tokens = await self._usable_tokens()
        self._present(request, tokens)
        response = yield request
        self._remember_nonce(request.url, response)
        nonce_retried = False
        authorized = False  # this request led to an authorization (a 401's or a step-up's): a 401 now is final
        step_ups = 0  # the 403 insufficient_scope re-authorizations it led to (at most max_step_up)
        while True:
            if response.status_code == 401 and self._wants_nonce(response, tokens):
                if nonce_retried:
                    return  # the server refuses the nonce it gave: a new token would not help
                # RFC 9449 §9: the MCP server wants its nonce in the proof; once per token, with a fresh proof
                nonce_retried = True
                self._present(request, tokens)
                response = yield request
                self._remember_nonce(request.url, response)
                continue
            if response.status_code == 401 and not authorized:
                challenge = self._challenge(response)
                async with self._lock:
                    await self._authorize(request, challenge, stale=tokens)
            elif response.status_code == 403 and step_ups < self.max_step_up:
                challenge = self._challenge(response)
                if challenge.get("error") != "insufficient_scope" or self._declined(tokens, challenge):
                    return
                step_ups += 1
                async with self._lock:
                    await self._authorize(request, challenge, stale=tokens, step_up=True)
            else:
                return  # done, or a fresh token refused again: do not loop
            authorized = True
            tokens = await self._usable_tokens()
            if tokens is None:
                return
            self._present(request, tokens)
            nonce_retried = False
            response = yield request
            self._remember_nonce(request.url, response)

    def _declined(self, tokens: TokenSet | None, challenge: Mapping[str, str]) -> bool:
        """Whether the authorization server already declined the scopes ``challenge`` asks for: a step-up asked for
        them all, and ``tokens`` came back without some of them. Asking again would send the user through the same
        authorization for the same answer on every call (the spec: track scope upgrade attempts to avoid repeated
        failures); the 403 is the answer. Scopes left out of a first, broader authorization are still asked for
        once, when an operation needs them (a user may have unticked them at first)."""
        wanted = set(challenge.get("scope", "").split())
        if tokens is None or tokens.scope is None or self.issuer is None or not wanted:
            return False
        if wanted <= set(tokens.scope.split()) or not wanted <= self._stepped_up.get(self.issuer, set()):
            return False
        self.log.append(f"not stepping up again: {self.issuer} declined {' '.join(sorted(wanted))} before")
        return True

    def sync_auth_flow(self, request: httpx.Request) -> Any:
        raise RuntimeError("OAuthClient works with httpx.AsyncClient only")

    def _challenge(self, response: httpx.Response) -> dict[str, str]:
        """The parameters of the server's challenge: the Bearer one, else the DPoP one (RFC 9449 §7.1)."""
        found = dict(parse_challenges(", ".join(response.headers.get_list("www-authenticate"))))
        if "dpop" in found:
            self._rs_offers_dpop = True
        return found.get("bearer") or found.get("dpop") or {}

    # ------------------------------------------------------------------ tokens
    async def _usable_tokens(self) -> TokenSet | None:
        if self.issuer is None:
            return None
        outages = self._outages  # refreshes that failed for now before this call waited for the lock
        async with self._lock:
            tokens = await self.storage.get_tokens(self.issuer, self.resource)
            if tokens is None:
                return None
            if not self._holds_key(tokens):
                await self.storage.set_tokens(
                    self.issuer, None, self.resource
                )  # bound to a key this client does not have
                return None
            if tokens.expired():
                if self._outages != outages and self._outage is not None:
                    # it failed while this call waited: one attempt for every call waiting
                    raise AuthorizationServerUnavailable(self._outage)
                tokens = await self._refresh(tokens)
            return tokens

    def _holds_key(self, tokens: TokenSet) -> bool:
        """A token bound to a DPoP key is usable only with that key (RFC 9449 §6)."""
        return tokens.dpop_jkt is None or (self._dpop_key is not None and self._dpop_key.thumbprint == tokens.dpop_jkt)

    async def _refresh(self, tokens: TokenSet) -> TokenSet | None:
        assert self.issuer is not None
        if not tokens.refresh_token or self._discovery is None:
            await self.storage.set_tokens(self.issuer, None, self.resource)
            return None
        client = await self.storage.get_client_info(self.issuer) or self._preregistration_for(self.issuer)
        if client is None:
            return None
        form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
        if tokens.resource:
            form["resource"] = tokens.resource
        try:
            fresh = await self._token_request(self._discovery, client, form, tokens.resource)
        except AuthorizationServerUnavailable as exc:
            # not a verdict on the refresh token: keep it for the next call rather than send the user to sign in
            # again (which an unavailable authorization server could not serve either)
            self.log.append(f"refresh failed for now: {exc}")
            self._outages += 1
            self._outage = f"{exc}; the refresh token is kept: try again later"
            raise AuthorizationServerUnavailable(self._outage) from None
        except OAuthFlowError as exc:
            self.log.append(f"refresh failed: {exc}")
            await self.storage.set_tokens(self.issuer, None, self.resource)
            return None
        if fresh.refresh_token is None:
            fresh.refresh_token = tokens.refresh_token  # the AS did not rotate it
        if fresh.scope is None:
            fresh.scope = tokens.scope
        await self.storage.set_tokens(self.issuer, fresh, self.resource)
        return fresh

    # ------------------------------------------------------------------ the flow

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def _version_of(self, request: httpx.Request) -> tuple[str, bool]:
        """The revision to discover with, and whether the server is known to speak it: a request's
        ``MCP-Protocol-Version`` is the negotiated one, except on the ``initialize`` or ``server/discover`` that
        opens a session, where it (or the body's version) is only proposed; a revision seen negotiated before
        stays known (a later ``server/discover``, the 2026-07-28 ping)."""
        body = _body(request)
        version = request.headers.get("mcp-protocol-version")
        if version:
            version = str(version)
            return version, version == self._negotiated or not _opens_session(body)
        if isinstance(body, dict) and isinstance(body.get("params"), dict):
            params = body["params"]
            if isinstance(params.get("protocolVersion"), str):
                return str(params["protocolVersion"]), False
            meta = params.get("_meta")
            if isinstance(meta, dict) and isinstance(meta.get(META_PROTOCOL_VERSION), str):
                version = str(meta[META_PROTOCOL_VERSION])
                return version, version == self._negotiated
        return self.protocol_version, False

    def _learn_version(self, request: httpx.Request, version: str) -> None:
        """A request other than the one opening a session carries the negotiated revision (the transport sends the
        header only once it is settled): remember it. Read until one such request went through, then never."""
        if not _opens_session(_body(request)):
            self._negotiated = version

    async def _authorize(
        self, request: httpx.Request, challenge: Mapping[str, str], *, stale: TokenSet | None, step_up: bool = False
    ) -> None:
        # another request may have re-authorized while we waited for the lock (for a step-up: with the scopes this
        # challenge asks for, or scopes it cannot tell; a token that still lacks them is met by the bounded retry)
        if self.issuer is not None:
            current = await self.storage.get_tokens(self.issuer, self.resource)
            if current is not None and (stale is None or current.access_token != stale.access_token):
                wanted = set(challenge.get("scope", "").split())
                if not step_up or current.scope is None or wanted <= set(current.scope.split()):
                    return
        version, known = self._version_of(request)
        strict = self.require_advertised_pkce or (known and is_supported(version) and features(version).pkce_advertised)
        discovery = await self._discover(challenge, version, strict_pkce=strict)
        same = self.issuer is not None and (self.issuer, self.resource) == (discovery.issuer, discovery.resource)
        if not step_up and not same:
            # tokens this storage already holds for that issuer and resource (an earlier run): use them
            existing = await self.storage.get_tokens(discovery.issuer, discovery.resource)
            if (
                existing is not None
                and existing.resource == discovery.resource
                and self._holds_key(existing)
                and (stale is None or existing.access_token != stale.access_token)
            ):
                self._use(discovery)
                if not existing.expired() or await self._refresh(existing) is not None:
                    return
        if self.issuer is not None and self.issuer != discovery.issuer:
            # credentials are bound to their issuer: the new AS gets its own registration and tokens
            self.log.append(f"authorization server changed: {self.issuer} -> {discovery.issuer}")
        elif same and not step_up:
            current = await self.storage.get_tokens(discovery.issuer, discovery.resource)
            if current is not None and current.refresh_token and self._holds_key(current):
                current.expires_at = 0
                self._discovery = discovery
                if await self._refresh(current) is not None:
                    return
        scopes = self._select_scopes(challenge, discovery)
        if step_up and scopes is not None:
            # SEP-2350: keep what was granted before, add what the challenge asks for
            earlier = set(stale.scope.split()) if stale is not None and stale.scope else set()
            earlier |= set(self._requested.get(discovery.issuer, ()))
            scopes = sorted(earlier | set(scopes))
        if scopes is not None:
            _check_scope_bounds(scopes, "step-up" if step_up else "authorization")
        self._use(discovery)
        client = await self._registration(discovery, version)
        if step_up:
            asked = self._stepped_up.setdefault(discovery.issuer, set())
            named = challenge.get("scope", "").split()
            if len(asked) + len(named) > MAX_STEPPED_UP_SCOPES:
                asked.clear()  # a server naming ever new scopes: forget the oldest (at worst, one more step-up)
            asked.update(named[:MAX_STEPPED_UP_SCOPES])
        supported = discovery.metadata.get("scopes_supported")
        wants_refresh = self.offline_access and self.grant_type == "authorization_code"
        if (
            scopes
            and wants_refresh
            and isinstance(supported, list)
            and "offline_access" in supported
            and "offline_access" not in scopes
            and _scope_bound_passed([*scopes, "offline_access"]) is None
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
        elif self.grant_type == "jwt_bearer":
            tokens = await self._jwt_bearer(discovery, client, scopes)
        else:
            try:
                tokens = await self._code_flow(discovery, client, scopes)
            except InvalidClientError:
                # a dynamic registration the AS no longer honours (secret rotated, client purged): register
                # again and authorize once more; pre-registered credentials are the user's to fix
                if (
                    self._preregistration_for(discovery.issuer) is not None
                    or await self.storage.get_client_info(discovery.issuer) is None
                    or client.get("client_id") == self.client_metadata_url
                ):
                    raise
                self.log.append("the AS refused our registration: registering again")
                await self.storage.set_client_info(discovery.issuer, None)
                client = await self._registration(discovery, version)
                tokens = await self._code_flow(discovery, client, scopes)
        await self.storage.set_tokens(discovery.issuer, tokens, discovery.resource)

    def _use(self, discovery: Discovered) -> None:
        """From now on, the tokens in use are those ``discovery``'s issuer issued for its resource."""
        self.issuer = discovery.issuer
        self.resource = discovery.resource
        self._discovery = discovery

    def _select_scopes(self, challenge: Mapping[str, str], discovery: Discovered) -> list[str] | None:
        if challenge.get("scope"):
            return challenge["scope"].split()
        if discovery.scopes:
            return list(discovery.scopes)
        if self.scope:
            return self.scope.split()
        if self.client_metadata.get("scope"):
            return str(self.client_metadata["scope"]).split()
        return None

    async def _code_flow(self, discovery: Discovered, client: Mapping[str, Any], scopes: list[str] | None) -> TokenSet:
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
        if not discovery.metadata.get("authorization_endpoint"):
            raise OAuthFlowError(
                "the authorization server metadata names no authorization_endpoint: it offers no authorization code "
                "grant (a machine client uses grant_type='client_credentials' or 'jwt_bearer')"
            )
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
            said = f"{answer.get('error')} {answer.get('error_description', '')}".rstrip()
            raise OAuthFlowError(f"authorization refused: {shown_safely(said, 300)}")
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


def _scope_bound_passed(scopes: list[str]) -> str | None:
    """Which bound an authorization asking for ``scopes`` would pass (None: none)."""
    if len(scopes) > MAX_STEPPED_UP_SCOPES:
        return f"it would ask for {len(scopes)} scopes, more than the {MAX_STEPPED_UP_SCOPES} scopes"
    length = len(" ".join(scopes))
    if length > MAX_SCOPE_STRING:
        return f"its scope string would be {length} characters, more than the {MAX_SCOPE_STRING} characters"
    return None


def _check_scope_bounds(scopes: list[str], what: str) -> None:
    """Refuse an authorization (``what``: a first one or a step-up) whose scopes pass a bound: a server naming
    new scopes on every 403 (a step-up asks for every scope asked for before, and the challenge's), or too many at
    once, would otherwise grow the authorization request without end."""
    passed = _scope_bound_passed(scopes)
    if passed is not None:
        raise OAuthFlowError(
            f"{what} refused: {passed} an authorization may ask for (the server names too many scopes)"
        )


def _body(request: httpx.Request) -> Any:
    """The JSON body of an MCP request (None when it has none, or none read yet)."""
    try:
        return orjson.loads(request.content) if request.content else None
    except (orjson.JSONDecodeError, httpx.RequestNotRead):
        return None


def _opens_session(body: Any) -> bool:
    """The request opens a session (``initialize``, or the 2026-07-28 ``server/discover``): its revision is a
    proposal the server has not answered yet."""
    return isinstance(body, dict) and body.get("method") in ("initialize", "server/discover")
