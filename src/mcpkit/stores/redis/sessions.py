"""Handshake-era session records in Redis: :class:`RedisSessionStore`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import orjson

from .connection import DEFAULT_TIMEOUT, RedisConnection, connection_for

if TYPE_CHECKING:
    from .connection import RedisClient

__all__ = ["RedisSessionStore"]


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _state(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    state = orjson.loads(raw)
    return state if isinstance(state, dict) else None


class RedisSessionStore:
    """A :class:`~mcpkit.stores.SessionStore`: one JSON value per session (key ``<prefix>{<session>}:sess``, in
    the session's Redis Cluster slot) with ``PX`` = the idle TTL, renewed by every :meth:`save` and :meth:`touch`
    (so the TTL counts from the session's last activity on any worker). :meth:`touch` is ``GETEX`` (Redis >= 6.2):
    the Streamable HTTP endpoint re-reads a session on every request with it, one round trip that also renews the
    TTL. Every call is bounded by the connection's timeout and raises
    :class:`~mcpkit.stores.redis.StoreUnavailable` when Redis cannot be reached.

    Args:
        redis: a URL, a ``redis.asyncio`` client or a shared :class:`~mcpkit.stores.redis.RedisConnection`.
        prefix, cluster, timeout: for a URL or a client (see :class:`~mcpkit.stores.redis.RedisConnection`).
    """

    def __init__(
        self,
        redis: str | RedisClient | RedisConnection,
        *,
        prefix: str = "mcpkit:",
        cluster: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)

    @property
    def redis(self) -> Any:
        """The Redis client."""
        return self.conn.client

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self.conn.prefix

    def key(self, session_id: str) -> str:
        """The Redis key of a session's record."""
        return self.conn.keys.key(session_id, "sess")

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        key = self.key(session_id)
        async with self.conn.guard("session store"):
            if ttl is not None and ttl <= 0:
                await self.conn.client.unlink(key)  # already expired
                return
            await self.conn.client.set(key, orjson.dumps(state), px=_ms(ttl) if ttl is not None else None)

    async def load(self, session_id: str) -> dict[str, Any] | None:
        async with self.conn.guard("session store"):
            raw = await self.conn.client.get(self.key(session_id))
        return _state(raw)

    async def touch(self, session_id: str, ttl: float | None) -> dict[str, Any] | None:
        """The session's state (None if gone), its TTL renewed to ``ttl`` in the same command."""
        key = self.key(session_id)
        async with self.conn.guard("session store"):
            if ttl is None:
                raw = await self.conn.client.getex(key, persist=True)
            else:
                raw = await self.conn.client.getex(key, px=_ms(ttl))
        return _state(raw)

    async def delete(self, session_id: str) -> None:
        async with self.conn.guard("session store"):
            await self.conn.client.unlink(self.key(session_id))

    async def aclose(self) -> None:
        """Close the connection if this store made it."""
        if self._owns:
            await self.conn.aclose()
