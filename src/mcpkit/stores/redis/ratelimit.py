"""Rate-limit buckets in Redis: one token bucket per caller for every worker behind one endpoint.

    from mcpkit.server.middleware import RateLimit
    from mcpkit.stores.redis.ratelimit import buckets_from_env

    app.add_middleware(RateLimit(rate=5, burst=20, store=buckets_from_env()))

A :class:`RedisBuckets` keeps each bucket in one small hash (``<prefix>{rl:<digest of the caller>}:bucket``),
updated by one script (refill by Redis' own clock, then take), so concurrent requests on several workers share it
exactly. Each key expires once its bucket would be full again: the table is bounded by time (callers active in the
last ``burst / rate`` seconds), each key about 100 bytes. Commands run under the connection's guard: when Redis is
unreachable :class:`~mcpkit.stores.redis.StoreUnavailable` is raised at once, and ``RateLimit`` lets the
request through or refuses it (``fail_open``).

:func:`buckets_from_env` is Redis-backed exactly when the stores are: when ``MCPKIT_REDIS_URL`` (the setting
``create_app`` and ``mcpkit run --workers`` read) names a Redis; without one it returns None (buckets in memory).
"""

from __future__ import annotations

import hashlib
from typing import Any

from .connection import DEFAULT_TIMEOUT, RedisConnection, connection_for

_TAKE = """
local cost = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local held = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(held[1])
local at = tonumber(held[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
local wait = 0
if tokens >= cost then
  tokens = tokens - cost
else
  wait = (cost - tokens) * 1000 / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
return tostring(wait)
"""


class RedisBuckets:
    """Token buckets in Redis (see the module docstring): a ``BucketStore`` for ``RateLimit(store=...)``.

    Args:
        redis: a URL, a ``redis.asyncio`` client or a shared :class:`RedisConnection` (the one the other stores
            use).
        prefix, cluster, timeout: as for the other Redis stores (when ``redis`` is not a connection).
    """

    def __init__(
        self,
        redis: str | Any | RedisConnection,
        *,
        prefix: str = "mcpkit:",
        cluster: bool = False,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.conn: RedisConnection
        self.conn, self._owns = connection_for(redis, prefix=prefix, cluster=cluster, timeout=timeout)
        self._take = self.conn.client.register_script(_TAKE)

    def key(self, caller: str) -> str:
        """The Redis key of ``caller``'s bucket."""
        digest = hashlib.sha256(caller.encode()).hexdigest()[:32]
        return self.conn.keys.key(f"rl:{digest}", "bucket")

    async def take(self, key: str, cost: float, rate: float, burst: float) -> float:
        """0 when ``cost`` tokens were taken from ``key``'s bucket; else the seconds until they are there."""
        async with self.conn.guard("rate limit"):
            wait = await self._take(keys=[self.key(key)], args=[repr(cost), repr(rate), repr(burst)])
        return float(wait) / 1000

    async def aclose(self) -> None:
        """Close the connection if this store made it."""
        if self._owns:
            await self.conn.aclose()


def buckets_from_env(environ: Any = None) -> RedisBuckets | None:
    """:class:`RedisBuckets` on the Redis the ``MCPKIT_*`` settings name, or None when they name none."""
    from ..config import ScaleConfig

    config = ScaleConfig.from_env(environ)
    if not config.shared:
        return None
    store = RedisBuckets(config.connect())
    store._owns = True  # (its own connection: aclose() closes it)
    return store


__all__ = ["RedisBuckets", "buckets_from_env"]
