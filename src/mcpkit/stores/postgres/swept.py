"""What a store kept in one table of expiring rows shares: :class:`SweptTable`, its connection (given and shared, or
made from a URL and then closed with the store) and the bounded clean-up of its expired rows.

A row past its ``expires_at`` is never read (each store's reads check it); the clean-up only reclaims the space.
It runs at most every ``sweep_every`` seconds per worker, from a write, and deletes at most the store's batch
(``most``) at a time; a clean-up that found a full batch lets the next write clean up again at once, so it keeps
pace with any rate of expiries (one batch a minute would fall behind past ``most`` expiries a minute).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, ClassVar

from .connection import PostgresConnection, delete_expired, postgres_for

__all__ = ["SweptTable"]


class SweptTable:
    """The connection and the clean-up of a store kept in one table (``<prefix><name>``) whose rows expire (see the
    module docstring); the session and event stores and the OAuth storage derive from it, each naming its table in
    the class attributes below.

    Args:
        postgres: a URL or a shared :class:`~mcpkit.stores.postgres.PostgresConnection`.
        prefix, timeout: for a URL (see :class:`~mcpkit.stores.postgres.PostgresConnection`).
        sweep_every: seconds between two clean-ups by this worker.
    """

    #: The table's name after the prefix.
    swept_name: ClassVar[str]
    #: Its key columns (``"id"``, ``"kind, key"``).
    swept_keys: ClassVar[str]
    #: The expired rows one clean-up deletes at most.
    swept_most: ClassVar[int]
    #: What the store is, in the breaker's messages.
    swept_what: ClassVar[str]

    def __init__(self, postgres: str | PostgresConnection, *, prefix: str, timeout: float, sweep_every: float) -> None:
        self.conn: PostgresConnection
        self.conn, self._owns = postgres_for(postgres, prefix=prefix, timeout=timeout)
        #: The table's qualified name.
        self.table: str = self.conn.table(self.swept_name)
        self.sweep_every: float = sweep_every

    def _connection(self) -> AbstractAsyncContextManager[Any]:
        """A pooled connection on which the table exists (here: one of the tables the connection makes itself)."""
        return self.conn.acquire(self.swept_what)

    async def sweep(self) -> int:
        """Delete at most the store's batch of expired rows now; how many went (a full batch: the next write
        cleans up again at once)."""
        async with self._connection() as db:
            gone = await delete_expired(db, self.table, self.swept_keys, self.swept_most)
        if gone >= self.swept_most:
            self.conn.sweep_soon(self.table)
        return gone

    async def _sweep(self) -> None:
        """Clean up when this worker's last clean-up of the table is ``sweep_every`` seconds old (after a write)."""
        if self.conn.sweep_due(self.table, self.sweep_every):
            await self.sweep()

    async def aclose(self) -> None:
        """Close the connection if it was made here from a URL (one given is the caller's to close)."""
        if self._owns:
            await self.conn.aclose()
