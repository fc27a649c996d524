"""A small OAuth 2.1 authorization server (ASGI) for development and tests.

Endpoints (relative to the issuer URL, which may have a path such as ``/tenant1``):
``/authorize`` (authorization code + PKCE S256 only; RFC 9207 ``iss`` in the redirect), ``/token``
(``authorization_code``, ``refresh_token`` with rotation, ``client_credentials``), ``/register`` (RFC 7591 dynamic
client registration), ``/introspect`` (RFC 7662), ``/jwks``; metadata (RFC 8414) at
``/.well-known/oauth-authorization-server[/<path>]`` plus the OpenID Connect discovery aliases
(``/.well-known/openid-configuration[/<path>]`` and ``<path>/.well-known/openid-configuration``).

Access tokens are JWTs (RFC 9068 shape) signed with an EC P-256 key published at ``/jwks``; their ``aud`` is the
resource (RFC 8707) the client named, so a :class:`~mcpkit.auth.verifiers.JWTVerifier` on the MCP server can check
them offline. Storage is pluggable (:class:`AuthStorage`); the in-memory default refuses ``production=True`` unless
``allow_in_memory=True`` (codes, clients and refresh tokens would vanish with the process).

Besides the authorization code, ``refresh_token`` and ``client_credentials`` grants: clients authenticating with
``private_key_jwt`` (their public keys registered as ``jwks``), the jwt-bearer grant for assertions of
``assertion_issuers`` (workload identity tokens; ID-JAGs of an enterprise IdP, bound to the client and resource they
name), and DPoP (``dpop=True``: a token request with a valid proof gets a DPoP-bound token, ``cnf.jkt``; a public
client's refresh token is bound to the same key). :attr:`AuthorizationServer.revocation` lets a resource server in
the same process refuse the access tokens of a revoked grant (``protect(..., revocation=authz.revocation)``).

Hardening (issue 12): the approver decides every grant (``client_credentials`` included); a self-registered client
gets only the scopes of the registration policy and no ``client_credentials`` unless enabled; /register is size
capped, rate limited per address and bounded without ever evicting a pre-registered client; a replayed code or a
reused refresh token revokes its grant family; /introspect answers only the token's own client or a designated
resource server; every form body is size capped (413).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from .._asgi import ASGIApp, Receive, Scope, Send, lifespan
from ..server.request_context import CURRENT_UPSTREAM, provide_upstream
from ._util import (
    COLOCATED_ISSUER,
    OAuthError,
    canonical_resource,
    header,
    is_secure_url,
    send_json,
    send_preflight,
)
from .keys import ASYMMETRIC_ALGORITHMS
from .registration import ClientRegistration
from .replay import InMemoryReplayCache, ReplayCache
from .server_assertions import ID_JAG_PROFILE, JWT_BEARER_GRANT, AssertionChecks
from .server_authorize import Approver, AuthorizeEndpoint
from .server_documents import ClientDocuments
from .storage import (
    AuthorizationRequest,
    AuthStorage,
    ClientRecord,
    ClientUseStorage,
    CodeGrant,
    InMemoryAuthStorage,
    KeyBoundRefreshStorage,
    LedgerRevocation,
    RefreshGrant,
    RevocationLedger,
)

if TYPE_CHECKING:
    from .dpop import DPoPVerifier
    from .upstream_login import UpstreamLogin
    from .verifiers import JWTVerifier

__all__ = [
    "AuthStorage",
    "AuthorizationRequest",
    "AuthorizationServer",
    "ClientRecord",
    "ClientUseStorage",
    "CodeGrant",
    "InMemoryAuthStorage",
    "KeyBoundRefreshStorage",
    "LedgerRevocation",
    "RefreshGrant",
    "RevocationLedger",
]


_GRANTS = frozenset({"authorization_code", "refresh_token", "client_credentials"})  # besides jwt-bearer
#: what each endpoint's 405 names in ``Allow`` (RFC 9110 §15.5.6)
#: (also the methods a CORS preflight is told); the metadata and the JWKS are read-only documents
_ALLOW = {
    "authorize": b"GET, POST, OPTIONS",
    "metadata": b"GET, HEAD, OPTIONS",
    "jwks": b"GET, HEAD, OPTIONS",
    "callback": b"GET",
}
_READ_ONLY = frozenset({"metadata", "jwks"})


def _b64url(n: int, size: int) -> str:
    return base64.urlsafe_b64encode(n.to_bytes(size, "big")).rstrip(b"=").decode("ascii")


class AuthorizationServer(ClientRegistration, AssertionChecks, ClientDocuments, AuthorizeEndpoint):
    """The ASGI authorization server. ``app`` (optional) receives every request this server does not route, so one
    origin can host both the AS and the MCP endpoint (the 2025-03-26 layout).

    Args:
        issuer: the issuer URL (``https://auth.example`` or ``http://127.0.0.1:PORT[/path]`` for development).
        resources: the resource URIs tokens may be issued for; a request naming another ``resource`` is refused
            (``invalid_target``). ``default_resource`` is the audience when the client names none.
        approver: decides an authorization request: returns the subject, or None to deny. ``auto_approve=True``
            approves everything as ``"test-user"`` (tests); without either /authorize answers ``access_denied``.
        scopes_supported: advertised and enforced (a request for an unknown scope → ``invalid_scope``).
        access_token_ttl / refresh_token_ttl / code_ttl: lifetimes in seconds. ``refresh_token_ttl=None``: refresh
            tokens never expire (the storage then bounds how many it keeps, the least recently issued going first).
        clock_skew: how long after a token's ``exp`` (on this replica's clock) someone may still accept it, in
            seconds: the leeway of the resource servers' verifiers (a :class:`~mcpkit.auth.verifiers.JWTVerifier`'s
            ``leeway``, 30 s by default) plus how far their clocks, and the other replicas', may run behind this
            one's. The replay ledger keeps a revoked grant (and a spent code or refresh token) this much longer
            than the longest lifetime of a token the grant can hold (a refresh token's, or with none its access
            token's), so a token of a revoked grant is refused wherever it is still taken
            for unexpired; past it the entries end. ``/revoke`` revokes the grant of a token expired up to this
            long ago. Default 60 (30 s of leeway, 30 s of skew).
        default_scopes: the scopes asked for when a request names none (of them, those a client registered with a
            ``scope`` may have).
        signing_key: the EC P-256 private key that signs access tokens (default: a new one per process); give the
            same key, and a shared ``storage``, to every replica.
        clock: the time source (seconds since the epoch) for lifetimes and checks.
        metadata: serve the discovery documents (False mimics a 2025-03-26 server without metadata: the client must
            fall back to the default ``/authorize``, ``/token`` and ``/register``).
        registration: enable /register (RFC 7591).
        registration_scopes: the policy for self-registered clients: the scopes one may ever be granted. A client
            registering gets the whole policy whatever ``scope`` it asked for (it steps up within it later; the
            response says what was granted). None: every scope of ``scopes_supported`` (any scope when that is
            None too); every grant still goes to the approver.
        registration_client_credentials: let self-registered clients use ``client_credentials`` (default False:
            a machine client without a user must be pre-registered with :meth:`register_client`).
        max_client_metadata: the largest /register body in bytes (413 beyond it; default 16 KiB).
        max_dynamic_clients: how many self-registered clients the default in-memory storage keeps: beyond it the
            oldest self-registered client is dropped (it registers again, as :class:`OAuthClient` does by itself on
            ``invalid_client``); a pre-registered client is never evicted. A durable storage bounds its own tables.
        max_dynamic_client_bytes: the same storage's budget for all self-registered clients together (their
            records' JSON; default 16 MiB): past it the oldest self-registered clients go.
        registration_rate: ``(count, seconds)``: at most ``count`` registrations per client address per ``seconds``
            (429 beyond it, with ``retry-after``); None disables the limit.
        max_form: the largest /token, /introspect or /authorize body in bytes (413 beyond it; default 64 KiB).
        issue_refresh_tokens: hand out refresh tokens with the authorization-code grant.
        production: refuse to start with in-memory storage unless ``allow_in_memory``.
        dpop: accept DPoP proofs at /token and bind the tokens issued to their key (True, or a
            :class:`~mcpkit.auth.dpop.DPoPVerifier` for its algorithms, nonce and replay cache).
        assertion_issuers: the issuers whose JWTs the jwt-bearer grant accepts, one
            :class:`~mcpkit.auth.verifiers.JWTVerifier` each (its ``issuer`` and keys; ``audience=None``: the server
            checks that ``aud`` names it). An ID-JAG (``typ`` ``oauth-id-jag+jwt``) must name the authenticated
            client (``client_id``) and sets the token's resource; its ``scope`` caps the grant.
        max_assertion_lifetime: the longest an accepted client assertion or grant assertion may still live, in
            seconds (default 600): its ``jti`` is remembered that long.
        replay_cache: where used assertion ``jti`` values are remembered (default: in memory, bounded); share one
            between replicas.
        client_metadata_documents: accept a ``client_id`` that is an https URL and describe the client by the
            document there (Client ID Metadata Documents; advertised as ``client_id_metadata_document_supported``).
        allow_private_network: fetch such documents from private or link-local addresses even when this server is
            not on that kind of address (default False: SSRF protection).
        max_client_document / max_client_documents: the largest document read (bytes; default 5 KiB) and how many
            resolved documents (and failures) are cached (default 1,000).
        client_document_timeout: the longest a document fetch may take as a whole, connecting to the last byte
            (seconds; default 5).
        upstream: an :class:`~mcpkit.auth.upstream_login.UpstreamLogin`: an OAuth proxy, logging users in at an
            upstream identity provider (GitHub, Google, any OpenID provider) after a consent page, instead of asking
            the approver (served: ``/consent`` and ``/upstream/callback``).

    Grants: the approver decides every grant, ``client_credentials`` included (it sees an
    :class:`AuthorizationRequest` with ``grant_type="client_credentials"``; None denies). A replayed authorization
    code revokes every token issued from it; a reused (already rotated) refresh token revokes its whole family;
    revoked access tokens introspect as inactive (a JWT checked offline stays valid until it expires: keep
    ``access_token_ttl`` short). /introspect answers only for the caller's own tokens, except for clients
    pre-registered with ``resource_server=True``.
    """

    def __init__(
        self,
        issuer: str,
        *,
        resources: Iterable[str] = (),
        default_resource: str | None = None,
        approver: Approver | None = None,
        auto_approve: bool = False,
        scopes_supported: Iterable[str] | None = None,
        default_scopes: Iterable[str] = (),
        storage: AuthStorage | None = None,
        production: bool = False,
        allow_in_memory: bool = False,
        access_token_ttl: float = 3600.0,
        refresh_token_ttl: float | None = 30 * 86400.0,
        code_ttl: float = 60.0,
        clock_skew: float = 60.0,
        metadata: bool = True,
        registration: bool = True,
        registration_scopes: Iterable[str] | None = None,
        registration_client_credentials: bool = False,
        max_client_metadata: int = 16 * 1024,
        max_dynamic_clients: int = 10_000,
        max_dynamic_client_bytes: int = 16 * 1024 * 1024,
        registration_rate: tuple[int, float] | None = (20, 60.0),
        max_form: int = 64 * 1024,
        issue_refresh_tokens: bool = True,
        signing_key: Any = None,  # an EC P-256 private key; share it (and the storage) between replicas
        dpop: DPoPVerifier | bool | None = None,
        assertion_issuers: Iterable[JWTVerifier] = (),
        max_assertion_lifetime: float = 600.0,
        replay_cache: ReplayCache | None = None,
        client_metadata_documents: bool = True,
        allow_private_network: bool = False,
        max_client_document: int = 5 * 1024,
        max_client_documents: int = 1_000,
        client_document_timeout: float = 5.0,
        upstream: UpstreamLogin | None = None,
        app: ASGIApp | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec

        if storage is None:
            if production and not allow_in_memory:
                raise RuntimeError(
                    "AuthorizationServer(production=True) needs durable storage: pass storage=..., or "
                    "allow_in_memory=True to accept losing every client, code and refresh token on restart"
                )
            storage = InMemoryAuthStorage(
                max_dynamic_clients=max_dynamic_clients, max_dynamic_client_bytes=max_dynamic_client_bytes, clock=clock
            )
        if not clock_skew >= 0:
            raise ValueError("clock_skew must be a number of seconds, 0 or more")
        if not is_secure_url(issuer):
            raise ValueError("the issuer must be an https URL (plain http only on a loopback host)")
        self.issuer: str = issuer.rstrip("/")
        parts = urlsplit(self.issuer)
        self.origin: str = f"{parts.scheme}://{parts.netloc}"
        self.base_path: str = parts.path.rstrip("/")
        self.resources: set[str] = {canonical_resource(r) for r in resources}
        self.default_resource: str | None = canonical_resource(default_resource) if default_resource else None
        if self.default_resource:
            self.resources.add(self.default_resource)
        if approver is None and auto_approve:

            async def approve_all(_: AuthorizationRequest) -> str | None:
                return "test-user"

            approver = approve_all
        self.approver: Approver | None = approver
        self.scopes_supported: list[str] | None = list(scopes_supported) if scopes_supported is not None else None
        self.default_scopes: list[str] = list(default_scopes)
        self.storage: AuthStorage = storage
        self.access_token_ttl = access_token_ttl
        self.refresh_token_ttl = refresh_token_ttl
        self.code_ttl = code_ttl
        self.clock_skew = clock_skew
        self.serve_metadata = metadata
        self.registration = registration
        self.registration_scopes: list[str] | None = (
            list(registration_scopes) if registration_scopes is not None else None
        )
        self.registration_client_credentials = registration_client_credentials
        self.max_client_metadata = max_client_metadata
        self.max_dynamic_clients = max_dynamic_clients
        self.registration_rate = registration_rate
        self.max_form = max_form
        self._registrations: dict[str, list[float]] = {}  # client address -> recent registration times (bounded)
        self.ledger: RevocationLedger = (
            storage if isinstance(storage, RevocationLedger) else InMemoryAuthStorage(clock=clock)
        )
        # told when a self-registered client is used, so its budget evicts the least recently used one
        self._uses: ClientUseStorage | None = storage if isinstance(storage, ClientUseStorage) else None
        if dpop is True:
            from .dpop import DPoPVerifier

            dpop = DPoPVerifier(clock=clock)
        self.dpop: DPoPVerifier | None = dpop or None
        self.assertion_verifiers: dict[str, JWTVerifier] = {}
        for verifier in assertion_issuers:
            if not verifier.issuer:
                raise ValueError("every assertion issuer's JWTVerifier needs its issuer")
            self.assertion_verifiers[verifier.issuer] = verifier
        self.max_assertion_lifetime = max_assertion_lifetime
        self.replay_cache: ReplayCache = replay_cache if replay_cache is not None else InMemoryReplayCache(clock=clock)
        self.client_metadata_documents = client_metadata_documents
        self.allow_private_network = allow_private_network
        self.max_client_document = max_client_document
        self.max_client_documents = max_client_documents
        self.client_document_timeout = client_document_timeout
        self._documents = {}
        self.issue_refresh_tokens = issue_refresh_tokens
        self.app = app
        self.clock = clock
        self.upstream: UpstreamLogin | None = upstream
        if upstream is not None:
            upstream.bind(self)
        self.key: Any = signing_key or ec.generate_private_key(ec.SECP256R1())
        if not isinstance(self.key, ec.EllipticCurvePrivateKey) or not isinstance(self.key.curve, ec.SECP256R1):
            raise TypeError("signing_key must be an EC P-256 private key (tokens are signed with ES256)")
        numbers = self.key.public_key().public_numbers()
        self._jwk = {"crv": "P-256", "kty": "EC", "x": _b64url(numbers.x, 32), "y": _b64url(numbers.y, 32)}
        # RFC 7638 thumbprint: replicas sharing the key publish the same kid
        thumb = hashlib.sha256(orjson.dumps(self._jwk, option=orjson.OPT_SORT_KEYS)).digest()
        self.kid: str = base64.urlsafe_b64encode(thumb).rstrip(b"=").decode("ascii")
        self.counts: dict[str, int] = {}  # endpoint -> hits (observability, tests)

    # ------------------------------------------------------------------ metadata
    def url(self, endpoint: str) -> str:
        return self.issuer + endpoint

    def metadata(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": self.url("/authorize"),
            "token_endpoint": self.url("/token"),
            "jwks_uri": self.url("/jwks"),
            "introspection_endpoint": self.url("/introspect"),
            "revocation_endpoint": self.url("/revoke"),
            "revocation_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "private_key_jwt",
                "none",
            ],
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "private_key_jwt",
                "none",
            ],
            "token_endpoint_auth_signing_alg_values_supported": sorted(ASYMMETRIC_ALGORITHMS),
            "introspection_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post"],
            "authorization_response_iss_parameter_supported": True,
            # OpenID Connect discovery requires these; harmless for RFC 8414 readers
            "subject_types_supported": ["public"],
            "id_token_signing_alg_values_supported": ["ES256"],
            "claims_supported": ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce"],
        }
        if self.registration:
            doc["registration_endpoint"] = self.url("/register")
        if self.scopes_supported is not None:  # an OpenID provider supports openid whatever else it lists
            extra = [] if "openid" in self.scopes_supported else ["openid"]
            doc["scopes_supported"] = [*self.scopes_supported, *extra]
        if self.assertion_verifiers:
            doc["grant_types_supported"].append(JWT_BEARER_GRANT)
            doc["authorization_grant_profiles_supported"] = [ID_JAG_PROFILE]
        if self.dpop is not None:
            doc["dpop_signing_alg_values_supported"] = list(self.dpop.algorithms)
        if self.client_metadata_documents:
            doc["client_id_metadata_document_supported"] = True
        return doc

    @property
    def revocation(self) -> LedgerRevocation:
        """For a resource server in this process: ``protect(..., revocation=authz.revocation)`` refuses the access
        tokens of a revoked grant (a replayed code's, a reused refresh token's family) before they expire."""
        return LedgerRevocation(self.ledger, self.issuer)

    def jwks(self) -> dict[str, Any]:
        return {"keys": [{**self._jwk, "use": "sig", "alg": "ES256", "kid": self.kid}]}

    def _metadata_paths(self) -> set[str]:
        b = self.base_path
        return {
            "/.well-known/oauth-authorization-server" + b,
            "/.well-known/openid-configuration" + b,
            b + "/.well-known/openid-configuration",
        }

    # ------------------------------------------------------------------ tokens
    def issue_access_token(
        self,
        *,
        subject: str,
        client_id: str | None,
        scopes: list[str],
        resource: str | None,
        grant: str | None = None,
        jkt: str | None = None,
    ) -> str:
        """A signed access token (JWT). ``grant`` names the grant family it came from (revocation); ``jkt`` binds it
        to a DPoP key (``cnf.jkt``, RFC 9449 §6.1)."""
        import jwt

        now = int(self.clock())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "client_id": client_id,
            "iat": now,
            "nbf": now,
            "exp": now + int(self.access_token_ttl),
            "jti": secrets.token_urlsafe(12),
            "scope": " ".join(scopes),
        }
        if resource:
            claims["aud"] = resource
        if grant:
            claims["grant_id"] = grant
        if jkt:
            claims["cnf"] = {"jkt": jkt}
        if client_id is None:
            del claims["client_id"]
        return jwt.encode(claims, self.key, algorithm="ES256", headers={"kid": self.kid, "typ": "at+jwt"})

    # ------------------------------------------------------------------ ASGI
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            if self.upstream is not None:  # its upstream revocations still running end before the shutdown does
                receive = self.upstream._draining(receive)
            if self.app is not None:
                await self.app(scope, receive, send)
                return
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            if self.app is not None:
                scope[COLOCATED_ISSUER] = self.issuer
                await self._pass_on(scope, receive, send)
            return
        path: str = scope.get("path", "")
        if len(path) > 1 and path.endswith("/"):
            path = path[:-1]
        method = scope.get("method", "GET")
        b = self.base_path
        route: Callable[[Scope, Receive, Send], Awaitable[None]] | None = None
        if self.serve_metadata and path in self._metadata_paths():
            route = self._metadata
        elif path == b + "/authorize":
            route = self._authorize
        elif path == b + "/token":
            route = self._token
        elif path == b + "/register" and self.registration:
            route = self._register
        elif path == b + "/introspect":
            route = self._introspect
        elif path == b + "/revoke":
            route = self._revocation
        elif path == b + "/jwks":
            route = self._jwks
        elif self.upstream is not None and path in (b + "/consent", b + "/upstream/callback"):
            route = self._consent if path.endswith("/consent") else self._callback
        if route is None:
            if self.app is not None:
                scope[COLOCATED_ISSUER] = self.issuer  # the default authorization server of a protected app
                await self._pass_on(scope, receive, send)
            else:
                await send_json(send, 404, {"error": "not_found"})
            return
        name = route.__name__.lstrip("_")
        self.counts[name] = self.counts.get(name, 0) + 1
        allow = _ALLOW.get(name, b"POST, OPTIONS")
        if method == "OPTIONS" and name not in ("consent", "callback"):  # (pages of a browser, not of scripts)
            await send_preflight(send, allow, b"*")
            return
        try:
            if name in _READ_ONLY and method not in ("GET", "HEAD"):
                raise OAuthError("invalid_request", "this document is read with GET", 405)
            await route(scope, receive, send)
        except ConnectionError:
            return  # the client went away while sending its body
        except OAuthError as exc:
            extra: list[tuple[bytes, bytes]] = list(exc.headers)
            if exc.status == 401:
                extra.append((b"www-authenticate", b'Basic realm="oauth"'))
            elif exc.status == 405:
                extra.append((b"allow", allow))
            elif exc.status == 429 and self.registration_rate is not None:
                extra.append((b"retry-after", str(max(1, int(self.registration_rate[1]))).encode()))
            await send_json(send, exc.status, {"error": exc.error, "error_description": exc.description}, extra)

    async def _pass_on(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request for the app: an OAuth proxy's upstream credentials installed for it (``ctx.upstream_token()``)."""
        assert self.app is not None
        if self.upstream is None:
            await self.app(scope, receive, send)
            return
        installed = provide_upstream(self.upstream)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_UPSTREAM.reset(installed)

    async def _metadata(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 200, self.metadata(), [(b"access-control-allow-origin", b"*")])

    async def _jwks(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 200, self.jwks(), [(b"access-control-allow-origin", b"*")])

    async def _used(self, client: ClientRecord | None) -> None:
        """A self-registered client got a code or a token: the storage's budget evicts it last."""
        if client is not None and client.dynamic and self._uses is not None:
            await self._uses.client_used(client.client_id)

    def _scopes(self, requested: str | None, client: ClientRecord) -> list[str]:
        if requested:
            scopes = requested.split()
        elif client.scope is not None:  # the defaults this client may have
            allowed_default = set(client.scope.split())
            scopes = [s for s in self.default_scopes if s in allowed_default]
        else:
            scopes = list(self.default_scopes)
        if self.scopes_supported is not None:
            unknown = [s for s in scopes if s not in self.scopes_supported and s != "openid"]
            if unknown:
                raise OAuthError("invalid_scope", "unknown scope: " + " ".join(unknown))
        if client.scope is not None:
            allowed = set(client.scope.split())
            if any(s not in allowed and s != "openid" for s in scopes):
                raise OAuthError("invalid_scope", "scope not allowed for this client")
        return scopes

    def _resource(self, requested: str | None) -> str | None:
        if requested is None:
            return self.default_resource
        try:
            parts = urlsplit(requested)
            canonical = canonical_resource(requested)
        except ValueError:  # no URL at all (an unclosed "[", a port out of range)
            raise OAuthError("invalid_target", "resource must be an absolute URI without fragment") from None
        if parts.fragment or not parts.scheme:
            raise OAuthError("invalid_target", "resource must be an absolute URI without fragment")
        if self.resources and canonical not in self.resources:
            raise OAuthError("invalid_target", "unknown resource")
        return canonical

    async def _client_auth(self, scope: Scope, form: dict[str, str]) -> ClientRecord:
        return await self._authenticate_client(scope, form, self._client)

    async def _form(self, scope: Scope, receive: Receive) -> dict[str, str]:
        if scope.get("method") != "POST":
            raise OAuthError("invalid_request", "use POST", 405)
        ctype = (header(scope, b"content-type") or "").split(";")[0].strip().lower()
        if ctype != "application/x-www-form-urlencoded":
            raise OAuthError("invalid_request", "use application/x-www-form-urlencoded")
        body = (await self._body(receive, self.max_form, "max_form")).decode("utf-8", "replace")
        if bytes(scope.get("query_string", b"")):
            raise OAuthError("invalid_request", "parameters belong in the body, not the query string")
        pairs = parse_qsl(body, keep_blank_values=True)
        keys = [k for k, _ in pairs]
        if len(keys) != len(set(keys)):
            raise OAuthError("invalid_request", "repeated parameter")
        return dict(pairs)

    async def _token(self, scope: Scope, receive: Receive, send: Send) -> None:
        form = await self._form(scope, receive)
        grant = form.get("grant_type")
        if not grant:
            raise OAuthError("invalid_request", "grant_type is required")
        if grant not in _GRANTS and not (grant == JWT_BEARER_GRANT and self.assertion_verifiers):
            # RFC 6749 §5.2: a grant this server does not have at all (unauthorized_client is for one it has)
            raise OAuthError("unsupported_grant_type", f"unsupported grant_type {grant!r}")
        anonymous = not (form.get("client_id") or header(scope, b"authorization") or "client_assertion" in form)
        # a jwt-bearer grant may come without client authentication (workload identity: the assertion is all)
        client = None if grant == JWT_BEARER_GRANT and anonymous else await self._client_auth(scope, form)
        if client is not None and grant not in client.grant_types:
            raise OAuthError("unauthorized_client", f"grant {grant!r} not allowed for this client")
        jkt = await self._token_proof(scope, client)
        if grant == "authorization_code" and client is not None:
            result = await self._grant_code(client, form, jkt)
        elif grant == "refresh_token" and client is not None:
            result = await self._grant_refresh(client, form, jkt)
        elif grant == "client_credentials" and client is not None:
            if not client.has_secret and client.token_endpoint_auth_method != "private_key_jwt":
                raise OAuthError("unauthorized_client", "client_credentials needs a confidential client")
            if client.dynamic and not self.registration_client_credentials:
                raise OAuthError(
                    "unauthorized_client",
                    "self-registered clients may not use client_credentials "
                    "(AuthorizationServer(registration_client_credentials=True) allows it)",
                )
            scopes = self._scopes(form.get("scope"), client)
            resource = self._resource(form.get("resource"))
            request = AuthorizationRequest(client, "", scopes, resource, None, grant_type="client_credentials")
            if self.approver is None or await self.approver(request) is None:
                raise OAuthError("access_denied", "the approver denied this client_credentials grant")
            result = await self._tokens(client.client_id, client.client_id, scopes, resource, refresh=False, jkt=jkt)
        elif grant == JWT_BEARER_GRANT and self.assertion_verifiers:
            result = await self._grant_jwt_bearer(client, form, jkt)
        else:
            raise OAuthError("unsupported_grant_type", f"unsupported grant_type {grant!r}")
        await self._used(client)
        await send_json(send, 200, result, [(b"pragma", b"no-cache")])
