"""Deliberately broken stores: each has one bug a third-party backend could have, so the store contract kit
(:mod:`mcpkit.testing.stores`) is shown to catch it (tests/testing/test_stores.py). Never use them elsewhere."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcpkit.stores import InMemoryEventStore, InMemorySessionStore
from mcpkit.stores.bus import InMemoryBus
from mcpkit.tasks.model import TaskRecord
from mcpkit.tasks.store import Change, InMemoryTaskStore


class StaleTTLSessionStore(InMemorySessionStore):
    """Bug: a save of a session already stored keeps its first expiry (the TTL counts from creation, not from the
    last activity), so an active session expires under its client."""

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        kept = self._items.get(session_id)
        if kept is None:
            await super().save(session_id, state, ttl)
        else:
            self._items[session_id] = (kept[0], state)


class UndeadSessionStore(InMemorySessionStore):
    """Bug: ``load`` of an expired session still returns it (expiry never checked)."""

    async def load(self, session_id: str) -> dict[str, Any] | None:
        item = self._items.get(session_id)
        return None if item is None else item[1]


class GappyEventStore(InMemoryEventStore):
    """Bug: a replay that needs evicted events returns what is left instead of None, so a client resuming after a
    gap silently misses messages."""

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]] | None:
        kept = self._streams.get(stream)
        if kept is None:
            return None
        return [(seq, data) for seq, data in kept.events if seq > after]


class GreedyForgetEventStore(InMemoryEventStore):
    """Bug: ``forget("s1/")`` strips the slash and drops every stream starting with ``s1`` (``s10/0`` too)."""

    async def forget(self, prefix: str) -> None:
        await super().forget(prefix.rstrip("/"))


class LostUpdateTaskStore(InMemoryTaskStore):
    """Bug: ``update`` reads the record, awaits, then writes the changed copy back: two updates at once lose one
    (what a read-modify-write without a transaction or a version check does)."""

    async def update(self, task_id: str, change: Change) -> TaskRecord | None:
        draft = await self.get(task_id)
        if draft is None:
            return None
        await asyncio.sleep(0)  # (the round trip to the database)
        if not change(draft):
            return draft

        def write(record: TaskRecord) -> bool:
            record.clear()
            record.update(draft)
            return True

        return await super().update(task_id, write)


class ForgetfulOwnerTaskStore(InMemoryTaskStore):
    """Bug: past its per-owner bound a new task drops the oldest finished task of ANY owner (another caller's
    results go to make room for one caller's flood)."""

    def _drop_oldest_finished(self, owner: str | None, *, but: str | None = None, everyone: bool = False) -> bool:
        return super()._drop_oldest_finished(owner, but=but, everyone=True)


class EarlyExpiryTaskStore(InMemoryTaskStore):
    """Bug: a task still in progress reads as unknown at the end of its time to live (no margin for the engine to
    record it stopped)."""

    async def get(self, task_id: str) -> TaskRecord | None:
        record = await super().get(task_id)
        if record is not None and int(record["created"]) + int(record["ttl"]) <= int(time.time() * 1000):
            return None
        return record


class UnboundedBus(InMemoryBus):
    """Bug: a subscriber's queue is not bounded (whatever ``queue_size`` it was built with): a subscriber that
    stops reading makes the process grow without end."""

    def __init__(self, *, queue_size: int = 1024) -> None:
        super().__init__(queue_size=1_000_000)
