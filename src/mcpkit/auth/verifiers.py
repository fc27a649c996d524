"""Access-token verifiers for the resource server: who presented which token, for what audience, until when.

A verifier turns the opaque string of an ``Authorization: Bearer`` header into an :class:`AccessToken` or raises
:class:`InvalidToken`. The middleware (:mod:`mcpkit.auth.resource`) then checks expiry, audience (RFC 8707) and
scopes itself, so every verifier gets the same policy.

- :class:`StaticTokenVerifier`: a fixed table (tests, development).
- :class:`JWTVerifier`: signed JWTs (PyJWT, ``mcpkit[auth]``) with a JWKS URL or static keys; issuer, audience and
  ``exp`` checked; the JWKS is cached with a bound and re-fetched (rate-limited) when an unknown ``kid`` appears.
- :class:`IntrospectionVerifier`: RFC 7662 token introspection over httpx.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import orjson

from ._util import DocumentTooLarge, fetch_capped

__all__ = [
    "AccessToken",
    "IntrospectionVerifier",
    "InvalidToken",
    "JWTVerifier",
    "StaticTokenVerifier",
    "TokenRevocation",
    "TokenVerifier",
]


class InvalidToken(Exception):
    """The presented token is unknown, malformed, badly signed, expired or meant for another resource."""


@dataclass(frozen=True)
class AccessToken:
    """A verified access token: the principal handlers see (``mcpkit.auth.current_access_token()``)."""

    token: str
    client_id: str | None = None
    subject: str | None = None
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None  # epoch seconds: the token's own expiry (``exp``), without any leeway
    audience: tuple[str, ...] = ()
    issuer: str | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)
    leeway: float = 0.0  # the clock skew (seconds) the verifier tolerated on ``expires_at``

    def expired(self, now: float | None = None, leeway: float = 0.0) -> bool:
        """Whether the token is past ``expires_at + leeway`` (``now``: epoch seconds, default the clock)."""
        return self.expires_at is not None and (now if now is not None else time.time()) > self.expires_at + leeway


@runtime_checkable
class TokenVerifier(Protocol):
    async def verify(self, token: str) -> AccessToken:
        """The token's claims, or raise :class:`InvalidToken`."""
        ...


@runtime_checkable
class TokenRevocation(Protocol):
    """Whether a verified access token was revoked since it was issued: what a resource server asks, besides the
    token's own signature and expiry, when it can know (``protect(..., revocation=...)``). The development
    authorization server provides one for a resource server in the same process (``AuthorizationServer.revocation``:
    its ledger of revoked grants)."""

    async def revoked(self, token: AccessToken) -> bool:
        """True when ``token`` must no longer be accepted."""
        ...


def _scopes(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, (list, tuple)):
        return frozenset(str(v) for v in value)
    return frozenset()


def _audience(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value)
    return ()


class StaticTokenVerifier:
    """Tokens from a table: ``StaticTokenVerifier({"tok-1": AccessToken("tok-1", audience=(url,), ...)})``, or
    ``StaticTokenVerifier.simple({"tok-1": ["read"]}, audience=url)``."""

    def __init__(self, tokens: Mapping[str, AccessToken]) -> None:
        self.tokens: dict[str, AccessToken] = dict(tokens)

    @classmethod
    def simple(
        cls,
        tokens: Mapping[str, Iterable[str]],
        *,
        audience: str | Sequence[str],
        client_id: str = "static-client",
        expires_at: float | None = None,
    ) -> StaticTokenVerifier:
        aud = (audience,) if isinstance(audience, str) else tuple(audience)
        return cls(
            {
                tok: AccessToken(
                    tok,
                    client_id=client_id,
                    subject=client_id,
                    scopes=frozenset(scopes),
                    expires_at=expires_at,
                    audience=aud,
                )
                for tok, scopes in tokens.items()
            }
        )

    async def verify(self, token: str) -> AccessToken:
        found = self.tokens.get(token)
        if found is None:
            raise InvalidToken("unknown token")
        return found


class JWTVerifier:
    """Verify JWT access tokens (RFC 9068 profile) with PyJWT.

    Args:
        issuer: the expected ``iss``; None skips the check (not recommended).
        audience: the expected ``aud`` (this resource's canonical URI); None leaves it to the middleware.
        jwks_url: where to fetch the signing keys (``{"keys": [...]}``).
        keys: static keys instead of (or besides) a JWKS URL: JWK dicts, PEM strings or key objects; a mapping
            ``kid -> key`` or a list (a list entry without ``kid`` is tried for tokens without a ``kid``).
        algorithms: accepted ``alg`` values (never ``none``).
        leeway: clock skew tolerated on ``exp``/``nbf``/``iat`` ; the verified token's ``expires_at`` is its
            ``exp`` as issued and its ``leeway`` this value, which :func:`protect` counts once (unless it is given
            its own ``leeway``).
        jwks_ttl: how long a fetched JWKS is trusted; after it the next verification re-fetches.
        min_refresh_interval: an unknown ``kid`` triggers at most one re-fetch per this many seconds (so a flood of
            forged ``kid`` values cannot turn the verifier into a JWKS-fetching amplifier).
        max_keys: the bound on cached keys.
        max_document_size: the largest JWKS document read, in bytes (default 256 KiB).
        http_timeout: seconds one JWKS fetch may take (default 10).
    """

    def __init__(
        self,
        *,
        issuer: str | None,
        audience: str | Sequence[str] | None,
        jwks_url: str | None = None,
        keys: Mapping[str, Any] | Sequence[Any] | None = None,
        algorithms: Sequence[str] = ("RS256", "ES256", "PS256", "EdDSA"),
        leeway: float = 30.0,
        jwks_ttl: float = 300.0,
        min_refresh_interval: float = 10.0,
        max_keys: int = 64,
        http_timeout: float = 10.0,
        max_document_size: int = 256 * 1024,
    ) -> None:
        import jwt  # noqa: F401  (fail early with a clear message when mcpkit[auth] is missing)

        if not jwks_url and not keys:
            raise ValueError("JWTVerifier needs jwks_url or keys")
        if any(a.lower() == "none" for a in algorithms):
            raise ValueError("the 'none' algorithm is never accepted")
        self.issuer = issuer
        self.audience = audience
        self.jwks_url = jwks_url
        self.algorithms: list[str] = list(algorithms)
        self.leeway = leeway
        self.jwks_ttl = jwks_ttl
        self.min_refresh_interval = min_refresh_interval
        self.max_keys = max_keys
        self.http_timeout = http_timeout
        self.max_document_size = max_document_size
        self._static: dict[str | None, Any] = {}
        if isinstance(keys, Mapping):
            for kid, key in keys.items():
                self._static[kid] = self._load(key)
        elif keys:
            for key in keys:
                key_id: str | None = key.get("kid") if isinstance(key, Mapping) else None
                self._static[key_id] = self._load(key)
        self._jwks: dict[str, Any] = {}
        self._fetched_at = 0.0
        self._last_attempt = float("-inf")
        self._fetch_error: str | None = None  # why the last JWKS fetch failed (None: it did not)
        self._lock = asyncio.Lock()
        self.fetches: int = 0  # how many times the JWKS was fetched (observability, tests)

    @staticmethod
    def _load(key: Any) -> Any:
        import jwt

        if isinstance(key, Mapping):
            return jwt.PyJWK(dict(key)).key
        return key

    async def _refresh(self, *, force: bool) -> None:
        if not self.jwks_url:
            return
        async with self._lock:
            now = time.monotonic()
            fresh = self._jwks and now - self._fetched_at < self.jwks_ttl
            if fresh and not force:
                return
            if now - self._last_attempt < self.min_refresh_interval:
                # one attempt per interval, failed ones too: while the JWKS cannot be had, the requests waiting
                # here are refused at once instead of each fetching again, one after another
                if not self._jwks and self._fetch_error is not None:
                    raise InvalidToken(self._fetch_error)
                return
            self._last_attempt = now
            import httpx
            import jwt

            try:
                async with httpx.AsyncClient(timeout=self.http_timeout, follow_redirects=False) as client:
                    doc = await _fetch_json(
                        client, "cannot fetch the JWKS", "JWTVerifier", "GET", self.jwks_url, self.max_document_size
                    )
            except InvalidToken as exc:
                self._fetch_error = f"{exc} (next attempt within {self.min_refresh_interval:g} s)"
                raise
            self._fetch_error = None
            self.fetches += 1
            found = doc.get("keys") if isinstance(doc, dict) else None
            keys: dict[str, Any] = {}
            for jwk in (found if isinstance(found, list) else [])[: self.max_keys]:
                if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
                    continue
                try:
                    keys[str(jwk.get("kid", ""))] = jwt.PyJWK(jwk).key
                except (jwt.PyJWKError, ValueError, TypeError):
                    continue
            self._jwks = keys
            self._fetched_at = now

    async def _key_for(self, kid: str | None) -> Any:
        if kid in self._static:
            return self._static[kid]
        if not self.jwks_url:
            raise InvalidToken("unknown signing key")
        await self._refresh(force=False)
        if kid is None:
            if len(self._jwks) == 1:
                return next(iter(self._jwks.values()))
            raise InvalidToken("token without kid and several candidate keys")
        if kid not in self._jwks:
            await self._refresh(force=True)  # key rotation: re-fetch (rate-limited)
        try:
            return self._jwks[kid]
        except KeyError:
            raise InvalidToken("unknown signing key") from None

    async def verify(self, token: str) -> AccessToken:
        import jwt

        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as exc:
            raise InvalidToken(f"malformed token: {exc}") from exc
        if header.get("alg") not in self.algorithms:
            raise InvalidToken("signature algorithm not accepted")
        key = await self._key_for(header.get("kid"))
        options: dict[str, Any] = {"require": ["exp"], "verify_aud": self.audience is not None}
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=self.algorithms,
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options=options,  # type: ignore[arg-type]
            )
        except jwt.PyJWTError as exc:
            raise InvalidToken(str(exc)) from exc
        except (TypeError, ValueError, KeyError) as exc:
            # e.g. an HS256 token checked against an asymmetric key: the key type does not fit the algorithm
            raise InvalidToken(f"the token cannot be verified with the configured keys ({type(exc).__name__})") from exc
        return AccessToken(
            token,
            client_id=claims.get("client_id") or claims.get("azp"),
            subject=claims.get("sub"),
            scopes=_scopes(claims.get("scope", claims.get("scp"))),
            expires_at=float(claims["exp"]),  # the token's own expiry; the tolerance travels apart, counted once
            leeway=self.leeway,
            audience=_audience(claims.get("aud")),
            issuer=claims.get("iss"),
            claims=claims,
        )


class IntrospectionVerifier:
    """RFC 7662 token introspection: POST the token to the AS, trust its ``active``/``aud``/``scope``/``exp``.

    ``client_id``/``client_secret`` authenticate the resource server to the introspection endpoint (HTTP Basic).
    ``cache_ttl`` > 0 caches active answers for that long (never beyond the token's ``exp``), at most
    ``max_cache`` of them; an answer larger than ``max_document_size`` bytes (default 64 KiB) is refused."""

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        issuer: str | None = None,
        timeout: float = 10.0,
        cache_ttl: float = 0.0,
        max_cache: int = 10_000,
        max_document_size: int = 64 * 1024,
    ) -> None:
        self.max_document_size = max_document_size
        self.endpoint = endpoint
        self.client_id = client_id
        self.client_secret = client_secret
        self.issuer = issuer
        self.timeout = timeout
        self.cache_ttl = cache_ttl
        self.max_cache = max_cache
        self._cache: dict[str, tuple[float, AccessToken]] = {}

    async def verify(self, token: str) -> AccessToken:
        import httpx

        now = time.time()
        hit = self._cache.get(token)
        if hit is not None and hit[0] > now:
            return hit[1]
        auth: httpx.Auth | None = httpx.BasicAuth(self.client_id, self.client_secret or "") if self.client_id else None
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            data = await _fetch_json(
                client,
                "introspection failed",
                "IntrospectionVerifier",
                "POST",
                self.endpoint,
                self.max_document_size,
                data={"token": token, "token_type_hint": "access_token"},
                auth=auth if auth is not None else httpx.USE_CLIENT_DEFAULT,
            )
        if not isinstance(data, dict) or data.get("active") is not True:
            raise InvalidToken("token is not active")
        if self.issuer is not None and data.get("iss") not in (None, self.issuer):
            raise InvalidToken("token from another issuer")
        exp = data.get("exp")
        result = AccessToken(
            token,
            client_id=data.get("client_id"),
            subject=data.get("sub"),
            scopes=_scopes(data.get("scope")),
            expires_at=float(exp) if isinstance(exp, (int, float)) else None,
            audience=_audience(data.get("aud")),
            issuer=data.get("iss"),
            claims=data,
        )
        if self.cache_ttl > 0:
            until = now + self.cache_ttl
            if result.expires_at is not None:
                until = min(until, result.expires_at)
            if len(self._cache) >= self.max_cache:
                self._cache.clear()
            self._cache[token] = (until, result)
        return result


async def _fetch_json(client: Any, failure: str, owner: str, method: str, url: str, limit: int, **kw: Any) -> Any:
    """The JSON document at ``url`` (at most ``limit`` bytes, ``fetch_capped``); any failure (transport, size,
    status other than 200, not JSON) is an :class:`InvalidToken` starting with ``failure``, and a document over the
    limit names the option (``owner(max_document_size=...)``)."""
    import httpx

    try:
        status, body = await fetch_capped(client, method, url, limit, headers={"accept": "application/json"}, **kw)
    except httpx.HTTPError as exc:
        raise InvalidToken(f"{failure}: {exc}") from exc
    except DocumentTooLarge as exc:
        raise InvalidToken(f"{failure}: {exc} ({owner}(max_document_size=...))") from None
    if status != 200:
        raise InvalidToken(f"{failure}: HTTP {status}")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InvalidToken(f"{failure}: the answer is not JSON") from None
