"""Asymmetric signing keys for the JWTs a client makes itself: ``private_key_jwt`` client assertions (RFC 7523 §2.2)
and DPoP proofs (RFC 9449), with their public JWK and RFC 7638 thumbprint.

    key = SigningKey.generate()                       # EC P-256, ES256
    key = SigningKey.from_pem(open("client.pem").read(), key_id="2024-01")
    key.public_jwk                                    # {"kty": "EC", "crv": "P-256", "x": ..., "y": ...}
    key.thumbprint                                    # the cnf.jkt a DPoP-bound token carries

Only asymmetric algorithms: ES256/384/512, RS256/384/512, PS256/384/512 and EdDSA (Ed25519). PyJWT and
``cryptography`` (the ``auth`` extra) do the work.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["ASYMMETRIC_ALGORITHMS", "SigningKey", "jwk_thumbprint"]

ASYMMETRIC_ALGORITHMS = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
)
_CURVES = {"ES256": ("P-256", 32), "ES384": ("P-384", 48), "ES512": ("P-521", 66)}
_THUMBPRINT_MEMBERS = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n"), "OKP": ("crv", "kty", "x")}


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_b64(n: int, size: int | None = None) -> str:
    return _b64(n.to_bytes(size or max(1, (n.bit_length() + 7) // 8), "big"))


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK (base64url): the hash of its required members, sorted,
    without whitespace. Raises ValueError for a key type or member set it does not know."""
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None or any(not isinstance(jwk.get(m), str) for m in members):
        raise ValueError("a JWK thumbprint needs an EC, RSA or OKP public key with its required members")
    canonical = orjson.dumps({m: jwk[m] for m in members}, option=orjson.OPT_SORT_KEYS)
    return _b64(hashlib.sha256(canonical).digest())


def _algorithm_for(key: Any) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, ec.EllipticCurvePrivateKey):
        by_curve = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
        try:
            return by_curve[key.curve.name]
        except KeyError:
            raise ValueError(f"unsupported elliptic curve {key.curve.name}") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    raise TypeError("a signing key must be an EC (P-256/384/521), RSA or Ed25519 private key")


class SigningKey:
    """A private key that signs JWTs with one asymmetric algorithm; ``key_id`` goes into the JWS ``kid`` header.

    Build it with :meth:`generate`, :meth:`from_pem`, :meth:`from_jwk` or :meth:`load` (any of those forms)."""

    def __init__(self, private_key: Any, *, algorithm: str | None = None, key_id: str | None = None) -> None:
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        natural = _algorithm_for(private_key)
        algorithm = algorithm or natural
        if algorithm not in ASYMMETRIC_ALGORITHMS:
            raise ValueError(f"{algorithm!r} is not an asymmetric JWS algorithm")
        fits = (
            (isinstance(private_key, ec.EllipticCurvePrivateKey) and algorithm == natural)
            or (isinstance(private_key, rsa.RSAPrivateKey) and algorithm[:2] in ("RS", "PS"))
            or (isinstance(private_key, ed25519.Ed25519PrivateKey) and algorithm == "EdDSA")
        )
        if not fits:
            raise ValueError(f"a {natural} key cannot sign with {algorithm}")
        self.private_key = private_key
        self.algorithm = algorithm
        self.key_id = key_id
        self.public_jwk: dict[str, str] = self._public_jwk()
        self.thumbprint: str = jwk_thumbprint(self.public_jwk)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def generate(cls, algorithm: str = "ES256", *, key_id: str | None = None) -> SigningKey:
        """A fresh key for ``algorithm`` (EC for ES*, 2048-bit RSA for RS*/PS*, Ed25519 for EdDSA)."""
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        key: Any
        if algorithm in _CURVES:
            curve = {"ES256": ec.SECP256R1(), "ES384": ec.SECP384R1(), "ES512": ec.SECP521R1()}[algorithm]
            key = ec.generate_private_key(curve)
        elif algorithm[:2] in ("RS", "PS") and algorithm in ASYMMETRIC_ALGORITHMS:
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif algorithm == "EdDSA":
            key = ed25519.Ed25519PrivateKey.generate()
        else:
            raise ValueError(f"{algorithm!r} is not an asymmetric JWS algorithm")
        return cls(key, algorithm=algorithm, key_id=key_id)

    @classmethod
    def from_pem(
        cls,
        pem: str | bytes,
        *,
        algorithm: str | None = None,
        key_id: str | None = None,
        password: bytes | None = None,
    ) -> SigningKey:
        """A PEM private key (PKCS#8, or the traditional EC/RSA forms); the algorithm follows the key unless given
        (an RSA key signs RS256 by default)."""
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        data = pem.encode("ascii") if isinstance(pem, str) else pem
        return cls(load_pem_private_key(data, password=password), algorithm=algorithm, key_id=key_id)

    @classmethod
    def from_jwk(cls, jwk: Mapping[str, Any], *, algorithm: str | None = None) -> SigningKey:
        """A private JWK (with ``d``); ``alg`` and ``kid`` are taken from it when present."""
        import jwt

        if "d" not in jwk:
            raise ValueError("a signing key needs a private JWK (with 'd')")
        alg = algorithm or jwk.get("alg")
        key = jwt.PyJWK(dict(jwk), algorithm=alg).key
        return cls(key, algorithm=alg, key_id=jwk.get("kid"))

    @classmethod
    def load(cls, value: Any, *, algorithm: str | None = None) -> SigningKey:
        """Whatever form a key was given in: a :class:`SigningKey`, PEM text, a private JWK or a ``cryptography``
        private key object."""
        if isinstance(value, SigningKey):
            return value
        if isinstance(value, (str, bytes)):
            return cls.from_pem(value, algorithm=algorithm)
        if isinstance(value, Mapping):
            return cls.from_jwk(value, algorithm=algorithm)
        return cls(value, algorithm=algorithm)

    # ------------------------------------------------------------------ use
    def _public_jwk(self) -> dict[str, str]:
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        public = self.private_key.public_key()
        if isinstance(public, ec.EllipticCurvePublicKey):
            crv, size = _CURVES[_algorithm_for(self.private_key)]
            numbers = public.public_numbers()
            return {"kty": "EC", "crv": crv, "x": _int_b64(numbers.x, size), "y": _int_b64(numbers.y, size)}
        if isinstance(public, rsa.RSAPublicKey):
            rsa_numbers = public.public_numbers()
            return {"kty": "RSA", "n": _int_b64(rsa_numbers.n), "e": _int_b64(rsa_numbers.e)}
        if isinstance(public, ed25519.Ed25519PublicKey):
            return {"kty": "OKP", "crv": "Ed25519", "x": _b64(public.public_bytes(Encoding.Raw, PublicFormat.Raw))}
        raise TypeError("unsupported key type")  # pragma: no cover - the constructor refused it already

    def jwks(self) -> dict[str, Any]:
        """The public key as a JWK Set (what a client registers as ``jwks`` for ``private_key_jwt``)."""
        jwk: dict[str, Any] = {**self.public_jwk, "alg": self.algorithm, "use": "sig"}
        if self.key_id:
            jwk["kid"] = self.key_id
        return {"keys": [jwk]}

    def sign(self, claims: Mapping[str, Any], *, headers: Mapping[str, Any] | None = None) -> str:
        """A compact JWS of ``claims`` (``kid`` added when the key has one; ``headers`` go in the header too)."""
        import jwt

        header: dict[str, Any] = dict(headers or {})
        if self.key_id and "kid" not in header:
            header["kid"] = self.key_id
        return jwt.encode(dict(claims), self.private_key, algorithm=self.algorithm, headers=header)

    def __repr__(self) -> str:
        return f"SigningKey({self.algorithm}, thumbprint={self.thumbprint!r})"
