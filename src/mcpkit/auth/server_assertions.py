"""Client authentication and the JWT side of the development authorization server (:mod:`mcpkit.auth.server`):
clients that authenticate with a secret (kept as its digest) or with ``private_key_jwt`` (RFC 7523 §2.2, keys
registered as ``jwks``), the jwt-bearer grant (RFC 7523 §2.1) for assertions of trusted issuers (workload
identity tokens, and ID-JAGs of an enterprise identity provider: SEP-990), and DPoP proofs at the token endpoint
(RFC 9449 §5: the tokens issued get bound to the proof's key).

Every assertion is single-use (its ``jti`` goes into a bounded :class:`~mcpkit.auth.replay.ReplayCache` until it
expires) and short-lived (``max_assertion_lifetime``); an untrusted issuer, a bad signature or audience, an expired
or replayed assertion is refused with ``invalid_client`` (client authentication) or ``invalid_grant`` (the grant).
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ._util import OAuthError, header
from .keys import ASYMMETRIC_ALGORITHMS
from .replay import ReplayCache
from .server_grants import TokenGrants
from .storage import AuthorizationRequest, ClientRecord

if TYPE_CHECKING:
    from .._asgi import Scope
    from .dpop import DPoPVerifier
    from .verifiers import JWTVerifier

__all__ = ["CLIENT_ASSERTION_TYPE", "ID_JAG_TYP", "JWT_BEARER_GRANT", "AssertionChecks"]

Approver = Callable[[AuthorizationRequest], Awaitable[str | None]]

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ID_JAG_TYP = "oauth-id-jag+jwt"
ID_JAG_PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"


class AssertionChecks(TokenGrants):
    """Client assertions, jwt-bearer grants and DPoP proofs for :class:`~mcpkit.auth.server.AuthorizationServer`
    (the attributes below are set by its ``__init__``)."""

    assertion_verifiers: dict[str, JWTVerifier]
    max_assertion_lifetime: float
    replay_cache: ReplayCache
    dpop: DPoPVerifier | None
    approver: Approver | None
    scopes_supported: list[str] | None
    _scopes: Callable[[str | None, ClientRecord], list[str]]

    def url(self, endpoint: str) -> str:
        raise NotImplementedError  # pragma: no cover - AuthorizationServer.url

    def _audiences(self) -> list[str]:
        """What an assertion's ``aud`` may name: the issuer identifier (RFC 7523bis) or the token endpoint URL
        (RFC 7523), with or without a trailing slash."""
        names = [self.issuer, self.url("/token")]
        return names + [n + "/" for n in names]

    async def _authenticate_client(
        self, scope: Scope, form: dict[str, str], lookup: Callable[[str], Awaitable[ClientRecord | None]]
    ) -> ClientRecord:
        """The client a token or introspection request authenticates as (``lookup`` finds a client by id): by
        assertion (``private_key_jwt``), by its secret (``client_secret_basic``/``_post``, compared with the stored
        digest) or by ``client_id`` alone (a public client); ``invalid_client`` (401) otherwise."""
        if _has_assertion(scope, form):
            return await self._assertion_client(form, lookup)  # private_key_jwt
        basic = header(scope, b"authorization")
        client_id = form.get("client_id")
        secret: str | None = None
        method = "none"
        if basic and basic.lower().startswith("basic "):
            try:
                raw = base64.b64decode(basic[6:].strip()).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                raise OAuthError("invalid_client", "malformed Basic credentials", 401) from None
            cid, _, sec = raw.partition(":")
            if client_id is not None and client_id != unquote(cid):
                raise OAuthError("invalid_client", "client_id mismatch", 401)
            client_id, secret, method = unquote(cid), unquote(sec), "client_secret_basic"
        elif "client_secret" in form:
            secret, method = form["client_secret"], "client_secret_post"
        if not client_id:
            raise OAuthError("invalid_client", "client authentication required", 401)
        client = await lookup(client_id)
        if client is None:
            raise OAuthError("invalid_client", "unknown client", 401)
        if client.token_endpoint_auth_method != method:
            raise OAuthError(
                "invalid_client", f"this client authenticates with {client.token_endpoint_auth_method}", 401
            )
        if client.has_secret:
            if not client.secret_matches(secret or ""):
                raise OAuthError("invalid_client", "bad client credentials", 401)
            if client.client_secret is not None:  # stored in clear by an earlier version: keep its digest now
                await self.storage.save_client(client.stored())
        return client

    async def _single_use(self, kind: str, who: str, claims: Mapping[str, Any], error: str, status: int) -> None:
        """The assertion is short-lived and never seen before (its ``jti`` is remembered until ``exp``)."""
        jti, exp = claims.get("jti"), claims.get("exp")
        iat = claims.get("iat", exp)
        now = self.clock()
        if not isinstance(jti, str) or not jti or len(jti) > 256:
            raise OAuthError(error, f"the {kind} needs a jti", status)
        if not isinstance(exp, (int, float)) or not isinstance(iat, (int, float)):
            raise OAuthError(error, f"the {kind} needs exp", status)
        if exp - now > self.max_assertion_lifetime:
            raise OAuthError(
                error,
                f"the {kind} lives longer than {self.max_assertion_lifetime:g} s (max_assertion_lifetime)",
                status,
            )
        key = hashlib.sha256(f"{kind}\0{who}\0{jti}".encode()).hexdigest()[:32]
        if not await self.replay_cache.first_use(key, float(iat), float(exp) + 30.0):
            raise OAuthError(error, f"the {kind} was used before (replay)", status)

    # ------------------------------------------------------------------ private_key_jwt (RFC 7523 §2.2)
    async def _assertion_client(self, form: dict[str, str], lookup: Any) -> ClientRecord:
        """The client a ``client_assertion`` authenticates, or ``invalid_client`` (401)."""
        import jwt

        if form.get("client_assertion_type") != CLIENT_ASSERTION_TYPE:
            raise OAuthError("invalid_client", "unsupported client_assertion_type", 401)
        assertion = form.get("client_assertion", "")
        try:
            head = jwt.get_unverified_header(assertion)
            unverified = jwt.decode(assertion, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise OAuthError("invalid_client", "malformed client assertion", 401) from None
        client_id = unverified.get("sub")
        if not isinstance(client_id, str) or unverified.get("iss") != client_id:
            raise OAuthError("invalid_client", "the client assertion's iss and sub must be the client_id", 401)
        if form.get("client_id", client_id) != client_id:
            raise OAuthError("invalid_client", "client_id mismatch", 401)
        client: ClientRecord | None = await lookup(client_id)
        if client is None or client.token_endpoint_auth_method != "private_key_jwt" or not client.jwks:
            raise OAuthError("invalid_client", "this client does not authenticate with private_key_jwt", 401)
        alg = head.get("alg")
        if alg not in ASYMMETRIC_ALGORITHMS:
            raise OAuthError("invalid_client", "the client assertion must use an asymmetric algorithm", 401)
        keys = [k for k in client.jwks.get("keys", []) if isinstance(k, dict)]
        kid = head.get("kid")
        candidates = [k for k in keys if kid is None or k.get("kid") == kid]
        claims: dict[str, Any] | None = None
        for jwk in candidates[:8]:
            try:
                key = jwt.PyJWK(jwk, algorithm=alg).key
                claims = jwt.decode(
                    assertion,
                    key,
                    algorithms=[alg],
                    audience=self._audiences(),
                    issuer=client_id,
                    leeway=30,
                    options={"require": ["exp", "iss", "sub", "aud"]},
                )
                break
            except (jwt.PyJWTError, ValueError, TypeError, KeyError):
                continue
        if claims is None:
            raise OAuthError("invalid_client", "the client assertion does not verify (key, audience or expiry)", 401)
        await self._single_use("client assertion", client_id, claims, "invalid_client", 401)
        return client

    # ------------------------------------------------------------------ the jwt-bearer grant (RFC 7523 §2.1)
    async def _verify_grant_assertion(self, assertion: str) -> tuple[dict[str, Any], bool]:
        """The claims of a jwt-bearer grant's assertion and whether it is an ID-JAG, or ``invalid_grant``."""
        import jwt

        from .verifiers import InvalidToken

        try:
            head = jwt.get_unverified_header(assertion)
            iss = jwt.decode(assertion, options={"verify_signature": False}).get("iss")
        except jwt.PyJWTError:
            raise OAuthError("invalid_grant", "malformed assertion") from None
        verifier = self.assertion_verifiers.get(iss) if isinstance(iss, str) else None
        if verifier is None:
            raise OAuthError("invalid_grant", "the assertion's issuer is not trusted")
        try:
            verified = await verifier.verify(assertion)
        except InvalidToken as exc:
            raise OAuthError("invalid_grant", f"the assertion does not verify: {exc}") from None
        claims = dict(verified.claims)
        aud = claims.get("aud")
        auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
        if not any(a in self._audiences() for a in auds):
            raise OAuthError("invalid_grant", "the assertion is for another audience")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise OAuthError("invalid_grant", "the assertion names no subject")
        await self._single_use("assertion", str(iss), claims, "invalid_grant", 400)
        return claims, head.get("typ") == ID_JAG_TYP

    async def _grant_jwt_bearer(
        self, client: ClientRecord | None, form: dict[str, str], jkt: str | None
    ) -> dict[str, Any]:
        """RFC 7523 §2.1: an access token for the subject of a trusted issuer's assertion. An ID-JAG must name the
        authenticated client; its ``resource`` is the token's audience and its ``scope`` caps what is granted."""
        claims, id_jag = await self._verify_grant_assertion(form.get("assertion", ""))
        resource = self._resource(form.get("resource"))
        if id_jag:
            if client is None or claims.get("client_id") != client.client_id:
                raise OAuthError("invalid_grant", "the ID-JAG was issued to another client")
            named = claims.get("resource")
            if named is not None:
                named_resource = self._resource(str(named))
                if resource is not None and resource != named_resource:
                    raise OAuthError("invalid_target", "resource differs from the ID-JAG's")
                resource = named_resource
        scopes = self._scopes(form.get("scope"), client) if client is not None else (form.get("scope") or "").split()
        if client is None and self.scopes_supported is not None:
            unknown = [s for s in scopes if s not in self.scopes_supported]
            if unknown:
                raise OAuthError("invalid_scope", "unknown scope: " + " ".join(unknown))
        allowed = claims.get("scope")
        if isinstance(allowed, str):  # SEP-990 §7.2.1: the intersection of what is asked and what the ID-JAG allows
            scopes = [s for s in scopes if s in allowed.split()] if form.get("scope") else allowed.split()
        request = AuthorizationRequest(
            client, "", scopes, resource, None, grant_type=JWT_BEARER_GRANT, assertion=claims
        )
        if self.approver is None or await self.approver(request) is None:
            raise OAuthError("access_denied", "the approver denied this jwt-bearer grant")
        client_id = client.client_id if client is not None else None
        return await self._tokens(client_id, str(claims["sub"]), scopes, resource, refresh=False, jkt=jkt)

    # ------------------------------------------------------------------ DPoP (RFC 9449 §5)
    async def _token_proof(self, scope: Scope, client: ClientRecord | None) -> str | None:
        """The thumbprint of the token request's verified DPoP proof (the key to bind tokens to), None without a
        proof; ``invalid_dpop_proof``/``use_dpop_nonce`` (400, with a ``DPoP-Nonce``) for a bad one."""
        from .dpop import DPoPError

        proofs = [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if bytes(k).lower() == b"dpop"]
        required = client is not None and client.metadata.get("dpop_bound_access_tokens") is True
        if self.dpop is None or not proofs:
            if required:
                raise OAuthError("invalid_dpop_proof", "this client's tokens must be DPoP-bound: send a DPoP proof")
            return None
        try:
            proof = await self.dpop.verify(proofs, method="POST", url=self.url("/token"))
        except DPoPError as exc:
            err = OAuthError(exc.error, exc.description)
            if exc.nonce is not None:
                err.headers.append((b"dpop-nonce", exc.nonce.encode("ascii")))
            raise err from None
        return proof.jkt


def _has_assertion(scope: Scope, form: Mapping[str, str]) -> bool:
    """The token request authenticates its client with a JWT (no Basic header)."""
    return "client_assertion" in form and not (header(scope, b"authorization") or "").lower().startswith("basic ")
