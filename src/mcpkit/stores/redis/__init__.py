"""Redis backends for several workers (needs ``pip install 'mcpkit[redis]'``; importing this package does not
import redis, building a backend does).

* :class:`RedisConnection` (:mod:`.connection`): the one place that makes Redis clients (timeouts, one retry of a
  broken connection, Redis Cluster), the key scheme (hash tags: one session's keys share a cluster slot) and the
  breaker that makes an unreachable or stalled Redis fail fast with :class:`StoreUnavailable`.
* :class:`RedisSessionStore`: handshake-era session records (one key per session, TTL renewed by activity).
* :class:`RedisEventStore`: SSE events of resumable streams (one Redis stream per SSE stream), followable across
  workers.
* :class:`RedisFanout`: change notifications and cross-worker messages over Redis Streams (an ordered log every
  worker reads, worker numbers and inboxes; nothing lost while a worker is cut off).
* :class:`RedisBus`: Redis pub/sub as a :class:`~mcpkit.stores.bus.Bus` (at most once; one Redis).
* :class:`RedisTaskStore` (:mod:`.tasks`): tasks every worker serves (``app.enable_tasks(RedisTaskStore(url))``).
* :mod:`.fingerprint`: which app a key prefix serves (a warning when two apps share one).

Each takes a URL, a ``redis.asyncio`` client (``Redis`` or ``RedisCluster``, bytes responses) or a shared
:class:`RedisConnection`; one built from a URL or a client owns what it made (``await store.aclose()``).
"""

from __future__ import annotations

from .bus import RedisBus
from .connection import BLOCK, DEFAULT_TIMEOUT, KeyScheme, RedisConnection, StoreUnavailable, connection_for
from .events import RedisEventStore
from .fanout import RedisFanout
from .sessions import RedisSessionStore
from .tasks import RedisTaskStore

__all__ = [
    "BLOCK",
    "DEFAULT_TIMEOUT",
    "KeyScheme",
    "RedisBus",
    "RedisConnection",
    "RedisEventStore",
    "RedisFanout",
    "RedisSessionStore",
    "RedisTaskStore",
    "StoreUnavailable",
    "connection_for",
]
