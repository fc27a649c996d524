"""Where an OAuth proxy (:mod:`mcpkit.auth.upstream_login`) keeps its state: the pending consents and logins, and
the upstream tokens of its users. Both go into the authorization server's storage when it implements
:class:`UpstreamStateStorage` (:class:`~mcpkit.auth.storage.InMemoryAuthStorage`,
:class:`~mcpkit.auth.redis_storage.RedisAuthStorage` and :class:`~mcpkit.auth.postgres_storage.PostgresAuthStorage`
do), so with Redis or PostgreSQL a login started on one replica may end on another and a tool on any replica reads
the user's upstream token.

Every record is sealed before it is stored (:class:`Sealer`: AES-256-GCM under a key derived from
``UpstreamLogin(secret=)``, the record's storage key as associated data): a storage, a dump or ``SCAN`` holds no
upstream token, refresh token or PKCE verifier in clear, and a record moved under another key does not open. The
keys are SHA-256 digests of the ``state``, form id or user, never the values themselves.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections import OrderedDict
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "InMemoryUpstreamState",
    "RefreshLeaseStorage",
    "RevocationRecordStorage",
    "Sealer",
    "UpstreamStateStorage",
    "state_key",
]


def state_key(*parts: str) -> str:
    """The storage key of a pending login or a user's upstream tokens: the hex SHA-256 of ``parts``."""
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


class Sealer:
    """AES-256-GCM sealing of the proxy's records; the key is derived (HKDF-SHA256) from ``secret``, so every
    replica given the same secret opens what another sealed."""

    def __init__(self, secret: bytes) -> None:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=b"mcpkit upstream state v1").derive(secret)
        self._aead = AESGCM(key)

    def seal(self, key: str, data: bytes) -> bytes:
        """``data`` encrypted and authenticated, bound to its storage ``key``: a fresh 96-bit nonce, then the
        ciphertext and tag."""
        nonce = secrets.token_bytes(12)
        return nonce + self._aead.encrypt(nonce, data, key.encode())

    def open(self, key: str, sealed: bytes) -> bytes | None:
        """What :meth:`seal` sealed under ``key``; None when it was not (another key or secret, altered)."""
        from cryptography.exceptions import InvalidTag

        if len(sealed) < 28:
            return None
        try:
            return self._aead.decrypt(sealed[:12], sealed[12:], key.encode())
        except InvalidTag:
            return None


@runtime_checkable
class UpstreamStateStorage(Protocol):
    """A storage that keeps an OAuth proxy's state (sealed records, by digest). ``now`` is the proxy's clock;
    ``expires_at`` when a record is forgotten.

    Pending consents and logins: at most ``max_pending`` live ones (:meth:`put_pending` answers False past it),
    each taken once. Upstream tokens: at most ``max_tokens`` users', the least recently used going first."""

    async def put_pending(self, key: str, sealed: bytes, expires_at: float, now: float, max_pending: int) -> bool:
        """Keep a pending record; False (nothing kept) when ``max_pending`` live ones are kept already."""
        ...

    async def peek_pending(self, key: str, now: float) -> bytes | None:
        """The pending record, left in place; None when there is none (or it expired)."""
        ...

    async def take_pending(self, key: str, now: float) -> bytes | None:
        """Take (remove and return) the pending record, once across every replica; None when there is none."""
        ...

    async def put_upstream(self, key: str, sealed: bytes, expires_at: float, now: float, max_tokens: int) -> None:
        """Keep (or replace) a user's upstream tokens; past ``max_tokens`` the least recently used go."""
        ...

    async def get_upstream(self, key: str, now: float) -> bytes | None:
        """A user's upstream tokens (now their most recent use); None when none are kept."""
        ...

    async def drop_upstream(self, key: str) -> None:
        """Forget a user's upstream tokens."""
        ...


@runtime_checkable
class RefreshLeaseStorage(Protocol):
    """A storage whose leases make the refresh of one sign-in's expired upstream tokens single-flight across every
    replica sharing it (:class:`InMemoryUpstreamState`, :class:`~mcpkit.auth.redis_storage.RedisAuthStorage` and
    :class:`~mcpkit.auth.postgres_storage.PostgresAuthStorage` are). An :class:`UpstreamStateStorage` without it
    still works: the refresh is then one at a time per process only, and two replicas may both refresh (a warning at
    startup says so)."""

    async def acquire_lease(self, key: str, owner: str, ttl: float) -> bool:
        """Take the lease ``key`` for ``owner`` for ``ttl`` seconds (real time) unless another owner holds a live
        one (False then). A lease whose owner died ends by itself at its expiry."""
        ...

    async def release_lease(self, key: str, owner: str) -> None:
        """End ``owner``'s lease ``key`` (a lease another owner took after this one expired is left alone)."""
        ...


@runtime_checkable
class RevocationRecordStorage(Protocol):
    """A storage keeping the revocations at the upstream provider that are not done yet (sealed records, by
    digest), so that none is lost when the replica trying it dies: each record is leased by the replica trying it
    (until ``until``, real time, renewed while it lives); a record whose lease ended is taken over by another.
    :class:`InMemoryUpstreamState`, :class:`~mcpkit.auth.redis_storage.RedisAuthStorage` and
    :class:`~mcpkit.auth.postgres_storage.PostgresAuthStorage` are (in memory, a record is only as durable as the
    process)."""

    async def put_revocation(self, key: str, sealed: bytes, until: float, expires_at: float, max_records: int) -> bool:
        """Record a pending revocation, leased until ``until``, forgotten at ``expires_at`` (real time) whatever
        happens; False (nothing kept) when ``max_records`` are kept already."""
        ...

    async def renew_revocations(self, keys: list[str], until: float) -> None:
        """Extend the lease of the records ``keys`` (those still kept) to ``until``."""
        ...

    async def claim_revocations(self, now: float, until: float, limit: int) -> list[tuple[str, bytes]]:
        """Take over at most ``limit`` records whose lease ended before ``now``: leased until ``until`` from now
        on (once across every replica), returned as (key, sealed record)."""
        ...

    async def drop_revocation(self, key: str) -> None:
        """Forget a record (its revocation is done, or failed for good)."""
        ...


class InMemoryUpstreamState:
    """:class:`UpstreamStateStorage` and :class:`RefreshLeaseStorage` in this process (one replica): the in-memory
    storage's, and the proxy's own when the server's storage keeps no such state."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[bytes, float]] = {}
        self._upstream: OrderedDict[str, tuple[bytes, float]] = OrderedDict()
        self._leases: dict[str, tuple[str, float]] = {}  # key -> (owner, monotonic expiry): the refreshes running
        self._revocations: dict[str, list[Any]] = {}  # key -> [sealed, leased until, forgotten at] (real time)

    async def put_pending(self, key: str, sealed: bytes, expires_at: float, now: float, max_pending: int) -> bool:
        for old in [k for k, (_, until) in self._pending.items() if until < now]:
            del self._pending[old]
        if key not in self._pending and len(self._pending) >= max_pending:
            return False
        self._pending[key] = (sealed, expires_at)
        return True

    async def peek_pending(self, key: str, now: float) -> bytes | None:
        found = self._pending.get(key)
        return found[0] if found is not None and found[1] >= now else None

    async def take_pending(self, key: str, now: float) -> bytes | None:
        found = self._pending.pop(key, None)
        return found[0] if found is not None and found[1] >= now else None

    async def put_upstream(self, key: str, sealed: bytes, expires_at: float, now: float, max_tokens: int) -> None:
        self._upstream.pop(key, None)
        self._upstream[key] = (sealed, expires_at)
        while len(self._upstream) > max_tokens:
            self._upstream.popitem(last=False)

    async def get_upstream(self, key: str, now: float) -> bytes | None:
        found = self._upstream.get(key)
        if found is None:
            return None
        if found[1] < now:
            del self._upstream[key]
            return None
        self._upstream.move_to_end(key)
        return found[0]

    async def drop_upstream(self, key: str) -> None:
        self._upstream.pop(key, None)

    async def acquire_lease(self, key: str, owner: str, ttl: float) -> bool:
        now = time.monotonic()
        held = self._leases.get(key)
        if held is not None and held[0] != owner and held[1] > now:
            return False
        for old in [k for k, (_, until) in self._leases.items() if until <= now]:
            del self._leases[old]  # (owners that never released: at most one per refresh that was running)
        self._leases[key] = (owner, now + ttl)
        return True

    async def release_lease(self, key: str, owner: str) -> None:
        held = self._leases.get(key)
        if held is not None and held[0] == owner:
            del self._leases[key]

    async def put_revocation(self, key: str, sealed: bytes, until: float, expires_at: float, max_records: int) -> bool:
        now = time.time()
        for old in [k for k, (_, _, end) in self._revocations.items() if end <= now]:
            del self._revocations[old]
        if key not in self._revocations and len(self._revocations) >= max_records:
            return False
        self._revocations[key] = [sealed, until, expires_at]
        return True

    async def renew_revocations(self, keys: list[str], until: float) -> None:
        for key in keys:
            if key in self._revocations:
                self._revocations[key][1] = until

    async def claim_revocations(self, now: float, until: float, limit: int) -> list[tuple[str, bytes]]:
        claimed: list[tuple[str, bytes]] = []
        for key, record in self._revocations.items():
            if len(claimed) >= limit:
                break
            if record[1] < now and record[2] > now:
                record[1] = until
                claimed.append((key, record[0]))
        return claimed

    async def drop_revocation(self, key: str) -> None:
        self._revocations.pop(key, None)
