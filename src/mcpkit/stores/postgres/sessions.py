"""Handshake-era session records in PostgreSQL: :class:`PostgresSessionStore`."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from ..base import BaseSessionStore
from .connection import DEFAULT_TIMEOUT, PostgresConnection
from .swept import SweptTable

__all__ = ["MAX_SWEEP", "PostgresSessionStore"]

#: Expired records one clean-up deletes at most (one clean-up at most every ``sweep_every`` seconds per worker, unless
#: the last found a full batch: see :class:`~mcpkit.stores.postgres.swept.SweptTable`).
MAX_SWEEP = 500


def _state(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    state = orjson.loads(raw)
    return state if isinstance(state, dict) else None


def _expiry(ttl: float | None) -> str:
    """The SQL of an expiry ``ttl`` seconds from now (``$2``), or none."""
    return "NULL" if ttl is None else "clock_timestamp() + make_interval(secs => $2)"


class PostgresSessionStore(SweptTable, BaseSessionStore):
    """A :class:`~mcpkit.stores.SessionStore`: one row per session in ``<prefix>sessions`` (the state as JSON,
    ``expires_at`` = the idle TTL from the last :meth:`save` or :meth:`touch`, on any worker). A row past its
    expiry is never read (every read checks it); expired rows are deleted by a clean-up that runs at most every
    ``sweep_every`` seconds per worker (at once again after one that found a full batch) and deletes at most
    :data:`MAX_SWEEP` of them. :meth:`touch` reads and renews in one ``UPDATE ... RETURNING``. Every call is bounded
    by the connection's timeout and raises :class:`~mcpkit.stores.base.StoreUnavailable` when PostgreSQL cannot be
    reached.

    Args:
        postgres: a URL or a shared :class:`~mcpkit.stores.postgres.PostgresConnection`.
        prefix, timeout: for a URL (see :class:`~mcpkit.stores.postgres.PostgresConnection`).
        sweep_every: seconds between two clean-ups of expired rows by this worker.
    """

    swept_name: ClassVar[str] = "sessions"
    swept_keys: ClassVar[str] = "id"
    swept_most: ClassVar[int] = MAX_SWEEP
    swept_what: ClassVar[str] = "session store"

    def __init__(
        self,
        postgres: str | PostgresConnection,
        *,
        prefix: str = "mcpkit_",
        timeout: float = DEFAULT_TIMEOUT,
        sweep_every: float = 60.0,
    ) -> None:
        super().__init__(postgres, prefix=prefix, timeout=timeout, sweep_every=sweep_every)
        self._alive: str = "(expires_at IS NULL OR expires_at > clock_timestamp())"

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        async with self._connection() as db:
            if ttl is not None and ttl <= 0:
                await db.execute(f"DELETE FROM {self.table} WHERE id = $1", session_id)  # already expired
                return
            data = orjson.dumps(state)
            query = (
                f"INSERT INTO {self.table} (id, state, expires_at) VALUES ($1, $3, {_expiry(ttl)}) "
                "ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, expires_at = EXCLUDED.expires_at"
            )
            if ttl is None:
                await db.execute(query.replace("$3", "$2"), session_id, data)
            else:
                await db.execute(query, session_id, float(ttl), data)
        await self._sweep()

    async def load(self, session_id: str) -> dict[str, Any] | None:
        async with self._connection() as db:
            raw = await db.fetchval(f"SELECT state FROM {self.table} WHERE id = $1 AND {self._alive}", session_id)
        return _state(raw)

    async def touch(self, session_id: str, ttl: float | None) -> dict[str, Any] | None:
        """The session's state (None if gone or expired), its TTL renewed to ``ttl`` in the same statement."""
        query = f"UPDATE {self.table} SET expires_at = {_expiry(ttl)} WHERE id = $1 AND {self._alive} RETURNING state"
        async with self._connection() as db:
            if ttl is None:
                raw = await db.fetchval(query, session_id)
            else:
                raw = await db.fetchval(query, session_id, float(ttl))
        return _state(raw)

    async def delete(self, session_id: str) -> None:
        async with self._connection() as db:
            await db.execute(f"DELETE FROM {self.table} WHERE id = $1", session_id)
