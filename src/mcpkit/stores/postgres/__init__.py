"""PostgreSQL backends for several workers (needs ``pip install 'mcpkit[postgres]'``; importing this package does
not import asyncpg, building a backend does).

* :class:`PostgresConnection` (:mod:`.connection`): the one bounded pool of a worker's stores (timeouts, the
  breaker that makes an unreachable or stalled database fail fast with
  :class:`~mcpkit.stores.base.StoreUnavailable`), the table names and the tables, made on first use.
* :class:`PostgresSessionStore`: handshake-era session records (one row per session, TTL renewed by activity).
* :class:`PostgresEventStore`: SSE events of resumable streams, followable across workers.
* :class:`PostgresFanout`: change notifications and cross-worker messages: an ordered log table every worker reads,
  woken by ``LISTEN``/``NOTIFY`` (the notification carries a position, never the message), worker numbers and
  inboxes.
* :class:`PostgresTaskStore` (:mod:`.tasks`): tasks every worker serves (the caps and bounds in one transaction).
* :mod:`.fingerprint`: which app a table prefix serves (a warning when two apps share one).

Each takes a URL or a shared :class:`PostgresConnection`; one built from a URL owns what it made
(``await store.aclose()``).
"""

from __future__ import annotations

from .connection import (
    DEFAULT_POOL_SIZE,
    DEFAULT_TIMEOUT,
    MAX_POOL_SIZE,
    SCHEMA_VERSION,
    PostgresConnection,
    StoreUnavailable,
)
from .events import PostgresEventStore
from .fanout import PostgresFanout
from .sessions import PostgresSessionStore
from .tasks import PostgresTaskStore

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_TIMEOUT",
    "MAX_POOL_SIZE",
    "SCHEMA_VERSION",
    "PostgresConnection",
    "PostgresEventStore",
    "PostgresFanout",
    "PostgresSessionStore",
    "PostgresTaskStore",
    "StoreUnavailable",
]
