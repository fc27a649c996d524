"""Which app a Redis key prefix serves: each worker leaves its app's fingerprint under the prefix when it starts
(one key, ``<prefix>{app}:fingerprint``, kept :data:`FINGERPRINT_TTL` seconds), writes it again every half of that
while it runs (:class:`PrefixClaim`), so the key is there as long as a worker of the app is, and a worker that
finds another app's there logs one warning (at its start, or at a later refresh: another app's worker wrote it in
between). Why, and what the warning means: :mod:`mcpkit.stores.fingerprint`.
"""

from __future__ import annotations

import logging

from ..fingerprint import FINGERPRINT_TTL, HeldClaim, fingerprint, warn_shared
from .connection import RedisConnection

logger: logging.Logger = logging.getLogger("mcpkit.stores.redis")

__all__ = ["FINGERPRINT_TTL", "PrefixClaim", "claim_prefix", "fingerprint"]


async def claim_prefix(conn: RedisConnection, mine: str, ttl: float = FINGERPRINT_TTL) -> str | None:
    """Write ``mine`` (see :func:`~mcpkit.stores.fingerprint.fingerprint`) under the connection's prefix, kept
    ``ttl`` seconds, and return the fingerprint it replaced, when another app's (a different name, or the same name
    with other tools: a rolling deploy, or another app of that name) wrote it; a WARNING says so. Redis errors
    propagate (the caller logs them)."""
    key = conn.keys.key("app", "fingerprint")
    previous = await conn.client.set(key, mine.encode(), px=max(1, int(ttl * 1000)), get=True)
    if previous is None:
        return None
    theirs = previous.decode(errors="replace") if isinstance(previous, bytes) else str(previous)
    if theirs == mine:
        return None
    settings = "MCPKIT_REDIS_PREFIX, mcpkit run --redis-prefix"
    warn_shared(logger, "Redis key prefix", conn.prefix, theirs, mine, settings)
    return theirs


class PrefixClaim(HeldClaim):
    """One worker's fingerprint under its Redis prefix, held while the worker runs (see
    :class:`~mcpkit.stores.fingerprint.HeldClaim`): each write is one ``SET`` bounded by the connection's
    timeout."""

    def __init__(self, conn: RedisConnection, mine: str, ttl: float = FINGERPRINT_TTL) -> None:
        super().__init__(lambda: claim_prefix(conn, mine, ttl), ttl, logger)
        self.conn: RedisConnection = conn
        self.mine: str = mine
