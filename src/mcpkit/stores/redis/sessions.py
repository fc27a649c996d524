"""Handshake-era session records in Redis: :class:`RedisSessionStore`."""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING, Any

import orjson

from ..base import BaseSessionStore
from .connection import DEFAULT_TIMEOUT, OnConnection, RedisConnection, connection_for

if TYPE_CHECKING:
    from .connection import RedisClient

__all__ = ["RedisSessionStore"]


def _ms(seconds: float) -> int:
    return max(1, math.ceil(seconds * 1000))


def _getex(client: Any, key: str, ttl: float | None) -> Any:
    """``GETEX`` renewing the TTL to ``ttl`` (None: no expiry) on a client or a pipeline."""
    return client.getex(key, persist=True) if ttl is None else client.getex(key, px=_ms(ttl))


def _state(raw: bytes | None) -> dict[str, Any] | None:
    if raw is None:
        return None
    state = orjson.loads(raw)
    return state if isinstance(state, dict) else None


class RedisSessionStore(BaseSessionStore, OnConnection):
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
        self.conn: RedisConnection
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)
        self._touches: list[tuple[str, float | None, asyncio.Future[Any]]] = []  # waiting for this loop turn's batch
        self._tasks: set[asyncio.Task[None]] = set()

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
        """The session's state (None if gone), its TTL renewed to ``ttl`` in the same command (``GETEX``).

        The endpoint calls this for every request of a handshake session: the calls made in one turn of the event
        loop go to Redis as one pipeline (measured here: a ``GETEX`` alone costs the worker ~85 us of CPU through
        redis-py, one of 16 in a pipeline ~22 us), a lone call as one command."""
        self.conn.check("session store")
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        self._touches.append((self.key(session_id), ttl, done))
        if len(self._touches) == 1:
            loop.call_soon(self._send_touches)
        return _state(await done)

    def _send_touches(self) -> None:
        batch, self._touches = self._touches, []
        task = asyncio.get_running_loop().create_task(self._touch_all(batch))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _touch_all(self, batch: list[tuple[str, float | None, asyncio.Future[Any]]]) -> None:
        try:
            async with self.conn.guard("session store"):
                if len(batch) == 1:
                    key, ttl, _ = batch[0]
                    replies = [await _getex(self.conn.client, key, ttl)]
                else:
                    pipe = self.conn.client.pipeline(transaction=False)
                    for key, ttl, _ in batch:
                        _getex(pipe, key, ttl)
                    replies = await pipe.execute()
        except BaseException as exc:
            for _, _, done in batch:
                if not done.done():
                    done.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, _, done), raw in zip(batch, replies, strict=True):
            if not done.done():
                done.set_result(raw)

    async def delete(self, session_id: str) -> None:
        async with self.conn.guard("session store"):
            await self.conn.client.unlink(self.key(session_id))

    async def aclose(self) -> None:
        """Close the connection if this store made it."""
        if self._owns:
            await self.conn.aclose()
