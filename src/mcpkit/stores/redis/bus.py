"""Redis pub/sub as a :class:`~mcpkit.stores.bus.Bus`: :class:`RedisBus` (at most once; one Redis, not a cluster).

For change notifications between workers use :class:`~mcpkit.stores.redis.RedisFanout` (Redis Streams: nothing is
lost while a worker is cut off). The bus stays for ``BusFanout(RedisBus(url))`` and for applications' own
channels, where "something changed, look again" may be missed now and then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ..bus import QueueSubscription, end_all
from .connection import RedisConnection, connection_for

if TYPE_CHECKING:
    from redis.asyncio.client import PubSub

    from .connection import RedisClient

logger: logging.Logger = logging.getLogger("mcpkit.stores.redis")

__all__ = ["RedisBus"]


class RedisBus:
    """A :class:`~mcpkit.stores.bus.Bus` over Redis pub/sub.

    One pub/sub connection per bus carries every subscription of this process (channels are multiplexed); each
    subscriber has its own bounded queue (the oldest message is dropped when a subscriber falls behind). Delivery
    is at most once, like Redis pub/sub itself: a worker that is disconnected misses what was published meanwhile
    (the reader reconnects and resubscribes by itself).
    """

    def __init__(
        self, redis: str | RedisClient | RedisConnection, *, prefix: str = "mcpkit:", queue_size: int = 1024
    ) -> None:
        self.conn: RedisConnection
        self.conn, self._owns = connection_for(redis, prefix=prefix)
        self._redis: Any = self.conn.client
        self.prefix: str = self.conn.prefix
        self.queue_size = queue_size
        self._pubsub: PubSub | None = None
        self._reader: asyncio.Task[None] | None = None
        self._subs: dict[bytes, set[QueueSubscription]] = {}
        self._pending: dict[bytes, asyncio.Future[None]] = {}
        self._lock = asyncio.Lock()
        self._closed = False

    def _channel(self, channel: str) -> bytes:
        return f"{self.prefix}bus:{channel}".encode()

    async def publish(self, channel: str, data: bytes) -> None:
        await self._redis.publish(self._channel(channel), data)

    async def subscribe(self, channel: str) -> QueueSubscription:
        """Subscribe; the subscription is live (Redis confirmed it) when this returns."""
        if self._closed:
            raise RuntimeError("the bus is closed")
        name = self._channel(channel)
        sub = QueueSubscription(self.queue_size, lambda s: self._drop(name, s))
        async with self._lock:
            subs = self._subs.get(name)
            if subs is not None:
                subs.add(sub)
                return sub
            self._subs[name] = {sub}
            pubsub = self._pubsub
            if pubsub is None:
                pubsub = self._pubsub = self._redis.pubsub()
            confirmed = asyncio.get_running_loop().create_future()
            self._pending[name] = confirmed
            await pubsub.subscribe(name)
            if self._reader is None:
                self._reader = asyncio.get_running_loop().create_task(self._read(pubsub))
        try:
            await asyncio.wait_for(asyncio.shield(confirmed), 10.0)
        except BaseException:
            await sub.aclose()
            raise
        return sub

    def _drop(self, name: bytes, sub: QueueSubscription) -> None:
        subs = self._subs.get(name)
        if subs is None:
            return
        subs.discard(sub)
        if not subs and not self._closed:
            del self._subs[name]
            pubsub = self._pubsub
            if pubsub is not None:
                task = asyncio.get_running_loop().create_task(self._unsubscribe(pubsub, name))
                task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _unsubscribe(self, pubsub: PubSub, name: bytes) -> None:
        async with self._lock:
            if name not in self._subs:
                await pubsub.unsubscribe(name)

    async def _read(self, pubsub: PubSub) -> None:
        delay = 0.05
        while not self._closed:
            try:
                msg = await pubsub.get_message(timeout=1.0)  # (a bounded wait: the client has socket timeouts)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection lost: redis-py reconnects and resubscribes on the next read
                logger.warning("redis bus: %s; retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            if msg is None:
                continue
            kind = msg.get("type")
            name: Any = msg.get("channel")  # (bytes, as redis-py gives it: one not subscribed to matches nothing)
            if kind == "message":
                for sub in list(self._subs.get(name, ())):
                    sub.put(msg["data"])
            elif kind == "subscribe":
                fut = self._pending.pop(name, None)
                if fut is not None and not fut.done():
                    fut.set_result(None)

    async def aclose(self) -> None:
        """End every subscription and close the pub/sub connection (and the client if the bus owns it)."""
        self._closed = True
        end_all(self._subs)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None
        if self._pubsub is not None:
            with contextlib.suppress(Exception):
                await self._pubsub.aclose()  # type: ignore[no-untyped-call]
            self._pubsub = None
        if self._owns:
            await self.conn.aclose()

    @property
    def redis(self) -> Any:
        """The Redis client."""
        return self._redis
