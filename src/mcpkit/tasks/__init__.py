"""Tasks: requests that outlive the request that started them (both protocol forms share this engine).

- :mod:`.model`: a task record and its wire forms (2025-11-25 ``Task``; the 2026-07-28 extension's ``Task`` and
  ``DetailedTask``).
- :mod:`.store`: :class:`TaskStore` (where records are kept) and :class:`InMemoryTaskStore`, the default;
  ``mcpkit.stores.redis.RedisTaskStore`` shares tasks between workers.
- :mod:`.engine`: :class:`TaskEngine` (create, run, cancel, answer, drain) and :class:`TaskControl` (what the
  work of one task sees).

This package sits beside the engine: it imports only ``protocol`` and is imported by the server, the client and
the stores.
"""

from __future__ import annotations

from .engine import TaskControl, TaskEngine
from .store import InMemoryTaskStore, TaskStore

__all__ = ["InMemoryTaskStore", "TaskControl", "TaskEngine", "TaskStore"]
