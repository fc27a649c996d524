"""Which app a PostgreSQL table prefix serves: each worker leaves its app's fingerprint in ``<prefix>meta`` (the row
``fingerprint``: when it ends, then the fingerprint) when it starts, writes it again every half of
:data:`~mcpkit.stores.fingerprint.FINGERPRINT_TTL` while it runs (:class:`PostgresPrefixClaim`), and a worker that
finds another app's there, not yet ended, logs one warning. Why, and what the warning means:
:mod:`mcpkit.stores.fingerprint`.
"""

from __future__ import annotations

import logging

from ..fingerprint import FINGERPRINT_TTL, HeldClaim, warn_shared
from .connection import PostgresConnection

logger: logging.Logger = logging.getLogger("mcpkit.stores.postgres")

__all__ = ["PostgresPrefixClaim", "claim_prefix"]


async def claim_prefix(conn: PostgresConnection, mine: str, ttl: float = FINGERPRINT_TTL) -> str | None:
    """Write ``mine`` (see :func:`~mcpkit.stores.fingerprint.fingerprint`) under the connection's prefix, kept
    ``ttl`` seconds (by the database's clock), and return the fingerprint it replaced when another app's, not yet
    ended, was there; a WARNING says so. One statement; errors propagate (the caller logs them)."""
    meta = conn.tables["meta"]
    async with conn.acquire("prefix fingerprint") as db:
        row = await db.fetchrow(
            f"INSERT INTO {meta} (key, value) VALUES ('fingerprint', "
            "(extract(epoch FROM clock_timestamp()) + $2)::text || ' ' || $1) ON CONFLICT (key) DO UPDATE SET "
            f"value = EXCLUDED.value RETURNING (SELECT value FROM {meta} WHERE key = 'fingerprint') AS previous, "
            "extract(epoch FROM clock_timestamp()) AS now",
            mine,
            float(ttl),
        )
    until, _, theirs = (row["previous"] or "").partition(" ")
    try:
        alive = float(until) > float(row["now"])
    except ValueError:
        return None
    if not alive or theirs == mine:
        return None
    settings = "MCPKIT_POSTGRES_PREFIX, mcpkit run --postgres-prefix"
    warn_shared(logger, "PostgreSQL table prefix", conn.prefix, theirs, mine, settings)
    return theirs


class PostgresPrefixClaim(HeldClaim):
    """One worker's fingerprint under its PostgreSQL table prefix, held while the worker runs (see
    :class:`~mcpkit.stores.fingerprint.HeldClaim`): each write is one statement bounded by the connection's
    timeout."""

    def __init__(self, conn: PostgresConnection, mine: str, ttl: float = FINGERPRINT_TTL) -> None:
        super().__init__(lambda: claim_prefix(conn, mine, ttl), ttl, logger)
        self.conn: PostgresConnection = conn
        self.mine: str = mine
