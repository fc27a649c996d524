"""Single-use checks for JWTs that must not be accepted twice within their lifetime: DPoP proofs (RFC 9449 §11.1),
``private_key_jwt`` client assertions and jwt-bearer grants (RFC 7523 §3).

A :class:`ReplayCache` answers "first time?" for a key (the verifier derives it from the JWT's ``jti`` and key),
remembering it until the JWT could no longer be accepted anyway. :class:`InMemoryReplayCache` is bounded in count
and in time; :class:`~mcpkit.auth.redis_storage.RedisReplayCache` and
:class:`~mcpkit.auth.postgres_storage.PostgresReplayCache` share one cache between workers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["InMemoryReplayCache", "ReplayCache"]


@runtime_checkable
class ReplayCache(Protocol):
    """Remembers the keys of accepted one-time JWTs until they expire."""

    async def first_use(self, key: str, issued_at: float, expires_at: float) -> bool:
        """Record ``key`` (a JWT issued at ``issued_at`` and acceptable until ``expires_at``, epoch seconds);
        False when it was recorded before, or when the cache can no longer tell (the JWT must then be refused).

        The cache judges ``expires_at`` on one clock of its own (a shared cache: its server's), never the caller's:
        it keeps a key until then, and refuses a JWT past it (a replica whose clock is behind still accepts that
        JWT, and the key of its first use may be forgotten already)."""
        ...


class InMemoryReplayCache:
    """A process-local replay cache: at most ``max_entries`` keys, each kept until its ``expires_at``.

    When it is full of live entries, the oldest is dropped and its ``issued_at`` becomes a floor: from then on a JWT
    issued at or before the floor is refused (it might be the one forgotten). Nothing that was accepted can be
    accepted again; the cost of a cache too small for the traffic is that proofs made in the same second as the
    forgotten one are refused (a DPoP client then retries with a fresh proof). Size it for ``requests per second x
    the acceptance window``; the default holds 100,000 keys (about 15 MB)."""

    def __init__(self, max_entries: int = 100_000, *, clock: Callable[[], float] = time.time) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.clock = clock
        self._entries: dict[str, tuple[float, float]] = {}  # key -> (issued_at, expires_at), oldest first
        self.floor: float = float("-inf")  # JWTs issued at or before this time are refused (see the class docstring)
        self.evicted: int = 0  # live entries dropped to stay within max_entries (observability, tests)

    def __len__(self) -> int:
        return len(self._entries)

    def _prune(self, now: float) -> None:
        entries = self._entries
        while entries:
            key = next(iter(entries))
            if entries[key][1] > now:
                return
            del entries[key]

    async def first_use(self, key: str, issued_at: float, expires_at: float) -> bool:
        now = self.clock()
        self._prune(now)
        if key in self._entries or issued_at <= self.floor:
            return False
        if expires_at <= now:
            return False  # past its expiry: were it used before, its key is forgotten (the cache can no longer tell)
        while len(self._entries) >= self.max_entries:
            oldest = next(iter(self._entries))
            old_issued, old_expires = self._entries.pop(oldest)
            if old_expires > now:
                self.evicted += 1
                self.floor = max(self.floor, old_issued)
        if issued_at <= self.floor:
            return False
        self._entries[key] = (issued_at, expires_at)
        return True
