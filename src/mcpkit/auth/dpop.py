"""DPoP (RFC 9449): proofs of possession for sender-constrained access tokens.

Client side, :func:`make_proof` signs the ``DPoP`` header of one HTTP request with the client's
:class:`~mcpkit.auth.keys.SigningKey` (``htm``, ``htu``, ``iat``, a fresh ``jti``; ``ath`` when an access token goes
with it; the server's ``nonce`` when it asked for one). :class:`~mcpkit.auth.client.OAuthClient` does this by itself.

Server side, :class:`DPoPVerifier` checks a proof as RFC 9449 §4.3 says: one well-formed ``dpop+jwt``, an accepted
asymmetric algorithm, a public ``jwk`` (no private members) whose signature verifies, ``htm``/``htu`` matching the
request (query and fragment ignored), ``iat`` within ``max_age`` seconds either way, ``ath`` matching the presented
token and the key's thumbprint matching the token's ``cnf.jkt``, the server's nonce when it requires one
(:class:`NonceSource`: stateless, HMAC-signed timestamps), and a ``jti`` never seen before (a bounded
:class:`~mcpkit.auth.replay.ReplayCache`). Used by the resource server (:func:`~mcpkit.auth.resource.protect`,
``dpop=``) and the development authorization server's token endpoint.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .keys import ASYMMETRIC_ALGORITHMS, SigningKey, jwk_thumbprint
from .replay import InMemoryReplayCache, ReplayCache

__all__ = [
    "DPoPError",
    "DPoPProof",
    "DPoPVerifier",
    "NonceSource",
    "access_token_hash",
    "make_proof",
    "normalize_htu",
]

_PRIVATE_MEMBERS = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def access_token_hash(token: str) -> str:
    """The ``ath`` claim: base64url(SHA-256(the ASCII access token))."""
    return _b64(hashlib.sha256(token.encode("ascii", "replace")).digest())


def normalize_htu(url: str) -> str:
    """A request URI as ``htu`` compares: lower-case scheme and host, default port dropped, no query, no
    fragment, no trailing slash (RFC 9449 §4.3, RFC 3986 §6 normalization)."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:  # not a URL (an unclosed "[" of an IPv6 host): it matches no request URI
        return ""
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and (scheme, port) not in (("https", 443), ("http", 80)):
        host = f"{host}:{port}"
    return f"{scheme}://{host}{parts.path.rstrip('/')}"


def make_proof(
    key: SigningKey,
    method: str,
    url: str,
    *,
    access_token: str | None = None,
    nonce: str | None = None,
    now: float | None = None,
) -> str:
    """A fresh DPoP proof for one request (``htu`` is ``url`` without query and fragment)."""
    parts = urlsplit(url)
    claims: dict[str, Any] = {
        "jti": secrets.token_urlsafe(16),
        "htm": method.upper(),
        "htu": f"{parts.scheme}://{parts.netloc}{parts.path}",
        "iat": int(time.time() if now is None else now),
    }
    if access_token is not None:
        claims["ath"] = access_token_hash(access_token)
    if nonce is not None:
        claims["nonce"] = nonce
    return key.sign(claims, headers={"typ": "dpop+jwt", "jwk": key.public_jwk})


class DPoPError(Exception):
    """A refused proof: ``error`` is ``invalid_dpop_proof`` or ``use_dpop_nonce`` (then ``nonce`` is the one the
    client must use, for the ``DPoP-Nonce`` response header)."""

    def __init__(self, error: str, description: str, nonce: str | None = None) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.nonce = nonce


@dataclass(frozen=True)
class DPoPProof:
    """A verified proof: the thumbprint of its key (what a token gets bound to as ``cnf.jkt``) and its claims."""

    jkt: str
    claims: Mapping[str, Any] = field(default_factory=dict)


class NonceSource:
    """Server-provided DPoP nonces (RFC 9449 §8, §9) without server state: a nonce is a timestamp and its HMAC
    (16 bytes of SHA-256), valid for ``lifetime`` seconds. Workers that share ``secret`` accept each other's nonces;
    without one a random secret is made (one process)."""

    def __init__(
        self, secret: bytes | None = None, *, lifetime: float = 300.0, clock: Callable[[], float] = time.time
    ) -> None:
        if lifetime <= 0:
            raise ValueError("lifetime must be positive")
        self.secret: bytes = secret or secrets.token_bytes(32)
        self.lifetime = lifetime
        self.clock = clock

    def issue(self) -> str:
        stamp = struct.pack(">Q", int(self.clock()))
        return _b64(stamp + hmac.new(self.secret, stamp, hashlib.sha256).digest()[:16])

    def valid(self, nonce: Any) -> bool:
        if not isinstance(nonce, str) or len(nonce) != 32:
            return False
        try:
            raw = base64.urlsafe_b64decode(nonce + "==")
        except ValueError:
            return False
        stamp, mac = raw[:8], raw[8:]
        if len(raw) != 24 or not hmac.compare_digest(mac, hmac.new(self.secret, stamp, hashlib.sha256).digest()[:16]):
            return False
        age = self.clock() - float(struct.unpack(">Q", stamp)[0])
        return -5.0 <= age <= self.lifetime


class DPoPVerifier:
    """Checks DPoP proofs (see the module docstring).

    Args:
        algorithms: the accepted proof algorithms (asymmetric only; advertised as ``algs`` and
            ``dpop_signing_alg_values_supported``).
        max_age: how far ``iat`` may be from now, either way, in seconds (default 300, the MCP DPoP profile's ±5
            minutes); a seen ``jti`` is remembered this long after its ``iat``.
        nonce: require server-provided nonces: True (a fresh :class:`NonceSource`) or a shared one.
        replay_cache: where seen proofs are remembered (default: in memory, 100,000 entries); give every worker the
            same shared cache (``RedisReplayCache``, ``PostgresReplayCache``) or replays to another worker go unseen.
        max_proof_size: the largest ``DPoP`` header read, in bytes (default 8 KiB).
    """

    def __init__(
        self,
        *,
        algorithms: Iterable[str] = ("ES256", "ES384", "ES512", "EdDSA", "PS256", "RS256"),
        max_age: float = 300.0,
        nonce: bool | NonceSource = False,
        replay_cache: ReplayCache | None = None,
        max_proof_size: int = 8 * 1024,
        clock: Callable[[], float] = time.time,
    ) -> None:
        import jwt  # noqa: F401  (fail early with a clear message when mcpkit[auth] is missing)

        self.algorithms: list[str] = [a for a in algorithms]
        bad = [a for a in self.algorithms if a not in ASYMMETRIC_ALGORITHMS]
        if bad or not self.algorithms:
            raise ValueError(f"DPoP proofs use asymmetric algorithms only, not {bad or 'none'}")
        self.max_age = max_age
        self.nonces: NonceSource | None = (
            nonce if isinstance(nonce, NonceSource) else NonceSource(clock=clock) if nonce else None
        )
        self.replay_cache: ReplayCache = replay_cache if replay_cache is not None else InMemoryReplayCache(clock=clock)
        self.max_proof_size = max_proof_size
        self.clock = clock

    def new_nonce(self) -> str | None:
        """A nonce for the ``DPoP-Nonce`` header, when nonces are required."""
        return self.nonces.issue() if self.nonces is not None else None

    async def verify(
        self,
        proofs: str | Iterable[str] | None,
        *,
        method: str,
        url: str,
        access_token: str | None = None,
        jkt: str | None = None,
    ) -> DPoPProof:
        """The verified proof of one request (``proofs``: the ``DPoP`` header values; exactly one is allowed), or
        :class:`DPoPError`. ``access_token`` and ``jkt`` (the token's ``cnf.jkt``) when a token is presented."""
        import jwt

        values = [proofs] if isinstance(proofs, str) else list(proofs or ())
        if not values:
            raise DPoPError("invalid_dpop_proof", "the request carries no DPoP proof")
        if len(values) > 1 or "," in values[0]:
            raise DPoPError("invalid_dpop_proof", "a request carries exactly one DPoP proof")
        proof = values[0].strip()
        if len(proof) > self.max_proof_size:
            raise DPoPError("invalid_dpop_proof", f"the DPoP proof is larger than {self.max_proof_size} bytes")
        try:
            header = jwt.get_unverified_header(proof)
        except jwt.PyJWTError:
            raise DPoPError("invalid_dpop_proof", "the DPoP proof is not a well-formed JWT") from None
        if header.get("typ") != "dpop+jwt":
            raise DPoPError("invalid_dpop_proof", "the DPoP proof's typ must be dpop+jwt")
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise DPoPError("invalid_dpop_proof", f"the DPoP proof algorithm {alg!r} is not accepted")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict) or _PRIVATE_MEMBERS & set(jwk):
            raise DPoPError("invalid_dpop_proof", "the DPoP proof needs a public jwk header (no private key)")
        try:
            key = jwt.PyJWK(jwk, algorithm=alg).key
            thumbprint = jwk_thumbprint(jwk)
            claims = jwt.decode(
                proof,
                key,
                algorithms=[alg],
                options={
                    "verify_aud": False,
                    "verify_iat": False,
                    "verify_exp": False,
                    "verify_nbf": False,
                    "require": ["jti", "htm", "htu", "iat"],
                },
            )
        except (jwt.PyJWTError, ValueError, TypeError, KeyError):
            raise DPoPError("invalid_dpop_proof", "the DPoP proof's signature or claims are invalid") from None
        jti, htm, htu, iat = claims.get("jti"), claims.get("htm"), claims.get("htu"), claims.get("iat")
        if not isinstance(jti, str) or not 0 < len(jti) <= 256:
            raise DPoPError("invalid_dpop_proof", "the DPoP proof needs a jti")
        if htm != method.upper():
            raise DPoPError("invalid_dpop_proof", "the DPoP proof's htm does not match the request method")
        if not isinstance(htu, str) or not normalize_htu(htu) or normalize_htu(htu) != normalize_htu(url):
            raise DPoPError("invalid_dpop_proof", "the DPoP proof's htu does not match the request URI")
        now = self.clock()
        if not isinstance(iat, (int, float)) or isinstance(iat, bool) or abs(now - iat) > self.max_age:
            raise DPoPError("invalid_dpop_proof", f"the DPoP proof's iat is not within {self.max_age:g} s of now")
        if self.nonces is not None and not self.nonces.valid(claims.get("nonce")):
            raise DPoPError("use_dpop_nonce", "the server requires a DPoP nonce", self.nonces.issue())
        # compared as bytes: compare_digest refuses str with non-ASCII characters (TypeError), and ath is the sender's
        if access_token is not None and not hmac.compare_digest(
            str(claims.get("ath", "")).encode(), access_token_hash(access_token).encode()
        ):
            raise DPoPError("invalid_dpop_proof", "the DPoP proof's ath does not match the access token")
        if jkt is not None and not hmac.compare_digest(thumbprint.encode(), str(jkt).encode()):
            raise DPoPError("invalid_dpop_proof", "the DPoP proof's key is not the key the access token is bound to")
        replay_key = _b64(hashlib.sha256(f"{thumbprint}.{jti}".encode()).digest()[:16])
        if not await self.replay_cache.first_use(replay_key, float(iat), float(iat) + self.max_age):
            raise DPoPError("invalid_dpop_proof", "the DPoP proof was used before (replay)")
        return DPoPProof(thumbprint, claims)
