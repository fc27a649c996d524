"""How every Redis store reaches Redis: the one place that makes a client (timeouts, retries, Redis Cluster), the
one key scheme (hash tags), and the breaker that makes an unreachable or stalled Redis fail fast.

A :class:`RedisConnection` is shared by the stores of one worker (``create_app`` builds one from the configuration
and hands it to each store; a store built from a URL makes its own). What it guarantees:

* **Bounded waits.** Every command has ``timeout`` seconds to connect and ``timeout`` seconds to be answered
  (``socket_connect_timeout`` / ``socket_timeout``); a connection that broke while idle (Redis restarted) is retried
  once, a timeout is not. Blocking reads (:meth:`RedisConnection.blocking`) wait at most :data:`BLOCK` seconds for
  news plus ``timeout`` for the answer, so a stalled Redis is noticed within ``BLOCK + timeout`` there too.
* **Fail fast.** A command that fails for want of Redis (refused, reset, timed out, cluster down) raises
  :class:`StoreUnavailable`, and for ``breaker`` seconds afterwards every guarded command raises it at once, without
  waiting again; the first command after that window tries Redis again (recovery needs nothing but Redis coming
  back).
* **One slot per session.** Keys are ``<prefix>{<tag>}:<kind>[:<rest>]`` (:class:`KeyScheme`): the hash tag is the
  session id for everything of one session (its record, its event streams, its direct messages), the worker for a
  worker's inbox, the channel for the notification log. Under Redis Cluster each session's keys share a slot, so the
  stores' scripts (several keys, one call) work there unchanged, and a replay stays scoped to its session.

A new store plugs in by taking a :class:`RedisConnection` (or a URL, see :func:`connection_for`), naming its keys
with ``conn.keys.key(tag, kind, rest)`` (tag = what must share a slot, e.g. a session or a task id) and running its
commands inside ``async with conn.guard("what it is"):`` so that an unavailable Redis is reported the same way
everywhere.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias

from ..base import Breaker, StoreUnavailable

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.asyncio.cluster import RedisCluster

    #: A Redis client the stores accept: a single Redis (or a primary) or a Redis Cluster.
    RedisClient: TypeAlias = Redis | RedisCluster

#: Default seconds to connect to Redis and to get an answer to one command.
DEFAULT_TIMEOUT = 1.0
#: Seconds a blocking read (the notification log, a worker's inbox, a followed event stream) waits for news before
#: it asks again.
BLOCK = 2.0

__all__ = [
    "BLOCK",
    "DEFAULT_TIMEOUT",
    "KeyScheme",
    "OnConnection",
    "RedisConnection",
    "StoreUnavailable",
    "connection_for",
]


class KeyScheme:
    """The names of every key: ``<prefix>{<tag>}:<kind>[:<rest>]``.

    ``tag`` is what must live in one Redis Cluster slot (a session id, a worker, a channel); ``prefix`` lets several
    applications share one Redis and must not contain ``{`` or ``}`` (the first ``{...}`` of a key is its hash tag).
    """

    def __init__(self, prefix: str = "mcpkit:") -> None:
        if "{" in prefix or "}" in prefix:
            raise ValueError("the Redis key prefix must not contain '{' or '}' (they mark a key's hash tag)")
        self.prefix = prefix

    def key(self, tag: str, kind: str, rest: str | None = None) -> str:
        """The key of ``kind`` (and ``rest``) in the slot of ``tag``."""
        base = f"{self.prefix}{{{tag}}}:{kind}"
        return base if rest is None else f"{base}:{rest}"

    def worker(self, worker: int, kind: str) -> str:
        """A key of one worker (its inbox, its heartbeat)."""
        return self.key(f"w{worker}", kind)


def _redis_errors() -> tuple[type[BaseException], ...]:
    from redis import exceptions as rx

    errors: list[type[BaseException]] = [rx.ConnectionError, rx.TimeoutError, OSError, asyncio.TimeoutError]
    for name in ("ClusterDownError", "RedisClusterException", "TryAgainError", "MasterDownError"):
        error = getattr(rx, name, None)  # (not in every redis-py version)
        if isinstance(error, type) and issubclass(error, BaseException):
            errors.append(error)
    return tuple(errors)


def make_client(url: str, *, cluster: bool = False, timeout: float = DEFAULT_TIMEOUT, block: float = 0.0) -> Any:
    """A ``redis.asyncio`` client (``RedisCluster`` when ``cluster``) for ``url`` with bounded waits: ``timeout``
    seconds to connect and to be answered (plus ``block`` for a client that makes blocking reads); a broken
    connection is retried once, a timeout is not. Bytes responses (``decode_responses=False``)."""
    import redis.asyncio as redis_asyncio
    from redis.asyncio.cluster import RedisCluster
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff
    from redis.exceptions import ConnectionError as RedisConnectionError

    retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
    options: dict[str, Any] = {
        "decode_responses": False,
        "socket_timeout": timeout + block,
        "socket_connect_timeout": timeout,
        "retry": retry,
    }
    if cluster:
        return RedisCluster.from_url(url, **options)
    return redis_asyncio.Redis.from_url(url, **options)


class RedisConnection(Breaker):
    """The Redis clients of one worker's stores, their key scheme and their breaker (see the module docstring and
    :class:`~mcpkit.stores.base.Breaker`: :meth:`guard`, :meth:`check`, :attr:`available`).

    Args:
        redis: a URL (``redis://host:port/db``, ``rediss://...``; with ``cluster=True`` any node of the cluster) or
            a ``redis.asyncio`` client (``Redis`` or ``RedisCluster``, created with ``decode_responses=False``).
        cluster: the URL names a Redis Cluster node (``RedisCluster``); ignored for a client.
        prefix: prepended to every key (see :class:`KeyScheme`).
        timeout: seconds to connect and to be answered (default 1).
        breaker: seconds during which commands fail at once after Redis failed one (default: ``timeout``).
    """

    backend: ClassVar[str] = "Redis"

    def __init__(
        self,
        redis: str | RedisClient,
        *,
        cluster: bool = False,
        prefix: str = "mcpkit:",
        timeout: float = DEFAULT_TIMEOUT,
        breaker: float | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        from ..._extras import require

        require("redis.asyncio", "mcpkit.stores.redis")  # (one line naming the extra when redis is missing)
        super().__init__(timeout if breaker is None else breaker, _redis_errors())
        self.keys: KeyScheme = KeyScheme(prefix)
        self.timeout = timeout
        self._url: str | None
        if isinstance(redis, str):
            self._url = redis
            self._cluster = cluster
            self.client: Any = make_client(redis, cluster=cluster, timeout=timeout)
            self._owns = True
        else:
            self._url = None
            from redis.asyncio.cluster import RedisCluster

            self._cluster = isinstance(redis, RedisCluster)
            self.client = redis
            self._owns = False
        self._blocking: Any = None
        self._closed = False

    @property
    def cluster(self) -> bool:
        """Whether this is a Redis Cluster."""
        return self._cluster

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self.keys.prefix

    def blocking(self) -> tuple[Any, float]:
        """The client for blocking reads (``XREAD BLOCK``) and how long one may block, in seconds. Built from a URL,
        it is a second client whose answer timeout covers the block; given a client, that client with 1 s blocks
        (its ``socket_timeout`` must then be above 1 s, or None)."""
        if self._url is None:
            return self.client, 1.0
        if self._blocking is None:
            self._blocking = make_client(self._url, cluster=self._cluster, timeout=self.timeout, block=BLOCK)
        return self._blocking, BLOCK

    async def ping(self) -> None:
        """One round trip (raises :class:`StoreUnavailable`)."""
        async with self.guard("ping"):
            await self.client.ping()

    async def aclose(self) -> None:
        """Close the clients this connection made (a client given to it stays open)."""
        if self._closed:
            return
        self._closed = True
        blocking, self._blocking = self._blocking, None
        if blocking is not None:
            await blocking.aclose()
        if self._owns:
            await self.client.aclose()


def connection_for(
    redis: str | RedisClient | RedisConnection,
    *,
    prefix: str = "mcpkit:",
    cluster: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[RedisConnection, bool]:
    """``(connection, owned)``: ``redis`` itself when it is a :class:`RedisConnection` (shared: not owned; its own
    prefix applies), else a new connection to it (owned: the store closes it)."""
    if isinstance(redis, RedisConnection):
        return redis, False
    return RedisConnection(redis, prefix=prefix, cluster=cluster, timeout=timeout), True


class OnConnection:
    """A store on a :class:`RedisConnection` (``conn``, made by :func:`connection_for`): its client and key prefix."""

    conn: RedisConnection

    @property
    def redis(self) -> Any:
        """The Redis client."""
        return self.conn.client

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self.conn.prefix
