"""Where tasks are kept: the :class:`TaskStore` interface and the bounded in-memory default.

A store keeps task records (:mod:`.model`) between the request that creates a task and the requests that poll,
answer, cancel or read it, which may come to another worker (a shared store: ``mcpkit.stores.redis.RedisTaskStore``).
It knows nothing of the protocol: the engine (:mod:`.engine`) decides what a change is; the store applies it
atomically, enforces the caps on tasks in progress, expires records at their time to live, and tells listeners
which task changed (changes made by other workers included) so that a runner waiting for an answer, or a
``tasks/result`` waiting for the end, wakes up.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import orjson

from ..protocol.errors import TaskLimitReached
from .model import TaskRecord, after_cursor, expired, is_terminal, kept_until, now_ms

#: ``change(record) -> bool``: mutate the record in place and return True to keep the change (False: no change).
#: A shared store may call it more than once (an optimistic retry), so it must depend on the record only.
Change = Callable[[TaskRecord], bool]
Listener = Callable[[str], None]


class Listeners(list[Listener]):
    """The listeners a store tells which task changed: :meth:`TaskStore.subscribe` for every store."""

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; the function returned removes it (twice is harmless)."""
        self.append(listener)

        def unsubscribe() -> None:
            with contextlib.suppress(ValueError):
                self.remove(listener)

        return unsubscribe

    def tell(self, task_id: str) -> None:
        """Call every listener with ``task_id`` (a listener may unsubscribe while it is called)."""
        for listener in list(self):
            listener(task_id)


@runtime_checkable
class TaskStore(Protocol):
    """Keeps task records for the task engine (see the module docstring)."""

    async def create(self, record: TaskRecord, *, max_live: int, max_live_per_owner: int) -> None:
        """Keep a new task, unless ``max_live`` tasks are already in progress (not terminal), or
        ``max_live_per_owner`` of ``record["owner"]``'s: then raise :class:`~mcpkit.protocol.errors.TaskLimitReached`.
        When this returns, :meth:`get` finds the task on every worker sharing the store."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task's record (a copy), None if unknown or past its time to live."""
        ...

    async def update(self, task_id: str, change: Change) -> TaskRecord | None:
        """Apply ``change`` atomically; the record as it is afterwards (None if unknown or expired)."""
        ...

    async def delete(self, task_id: str) -> None:
        """Forget the task (its place among the tasks in progress is free again)."""
        ...

    async def list(self, owner: str | None, after: tuple[int, str] | None, limit: int) -> list[TaskRecord]:
        """Up to ``limit`` of ``owner``'s tasks that come after the position ``after`` (creation time, id), in
        that order. Tasks without an owner (None) need not be listed: no requestor may list them."""
        ...

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(task_id)`` after every change of a task, made here or by another worker (it must not
        block); returns the function that unsubscribes."""
        ...

    async def aclose(self) -> None:
        """Release what the store holds (connections, background readers)."""
        ...


def _size(record: TaskRecord) -> int:
    """The bytes a record's payloads take, estimated from their JSON (result, error, input requests)."""
    size = 256
    for key in ("result", "error", "requests", "answers"):
        value = record.get(key)
        if value:
            size += len(orjson.dumps(value))
    return size


#: the tasks a store keeps per caller (in progress and finished), and the bytes of their payloads: a caller past
#: either loses its own oldest finished task, never another caller's
MAX_RECORDS_PER_OWNER = 1_000
MAX_BYTES_PER_OWNER = 32 * 1024 * 1024
#: the tasks a store keeps, all callers together, and their bytes: past either the oldest finished tasks go,
#: whoever made them (a backstop for callers the bound per caller cannot tell apart: a client that opens
#: session after session gets a new count with each)
MAX_RECORDS = 10_000
MAX_BYTES = 256 * 1024 * 1024


def kept_refused(max_records_per_owner: int) -> TaskLimitReached:
    """The error of a task refused because its caller's kept tasks are at the bound and none has finished."""
    return TaskLimitReached(
        f"{max_records_per_owner} tasks of yours are kept, as many as this server keeps per caller "
        "(max_records_per_owner), and none has finished: wait for one to finish or cancel one"
    )


def total_refused(max_records: int) -> TaskLimitReached:
    """The error of a task refused because the store keeps ``max_records`` tasks and none has finished."""
    return TaskLimitReached(
        f"the server keeps {max_records} tasks, as many as it keeps in all (max_records), and none has finished: "
        "retry later"
    )


class KeptBounds:
    """The four bounds on what a task store keeps, checked and set once for every store (in memory, Redis,
    PostgreSQL): see :class:`InMemoryTaskStore` for their meaning."""

    max_records: int
    max_bytes: int
    max_records_per_owner: int
    max_bytes_per_owner: int

    def _keep_within(
        self, max_records: int, max_bytes: int, max_records_per_owner: int, max_bytes_per_owner: int
    ) -> None:
        if min(max_records, max_bytes, max_records_per_owner, max_bytes_per_owner) < 1:
            raise ValueError("max_records, max_bytes and their per-owner bounds must be positive")
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.max_records_per_owner = max_records_per_owner
        self.max_bytes_per_owner = max_bytes_per_owner


class InMemoryTaskStore(KeptBounds):
    """A :class:`TaskStore` in this process (the default): bounded per caller and in total, in records and bytes.

    Args:
        max_records: records kept, whatever their status (default 10,000); beyond it the oldest finished tasks
            are dropped first, whoever made them (a task in progress is never dropped: with none finished a new
            task is refused, :class:`~mcpkit.protocol.errors.TaskLimitReached`). A backstop for the callers the
            bounds per caller cannot tell apart (a client opening handshake session after session).
        max_bytes: the bytes of results, errors and input requests kept (default 256 MiB, estimated from their
            JSON); beyond it the oldest finished tasks are dropped, so a result may go before its time to live
            when the budget is tight.
        max_records_per_owner: records kept per caller (the owner of :mod:`.model`: a principal, a handshake
            session, or one count for the callers neither identifies), in progress or finished (default 1,000):
            a new task past it drops that caller's oldest finished one; with none finished the task is refused
            (:class:`~mcpkit.protocol.errors.TaskLimitReached`).
        max_bytes_per_owner: the bytes of one caller's records (default 32 MiB: eight times the largest result an
            engine keeps by default); past it that caller's oldest finished tasks are dropped (never the one that
            just finished). So one caller's flood of tasks only ever pushes out its own results.

    A dropped task reads as unknown, as one past its time to live does (-32602 "Task not found"). A record is
    dropped when its time to live ends (one timer, set for the earliest end), not only when a bound is reached: a
    server that ran a burst of tasks gives their memory back.
    """

    def __init__(
        self,
        *,
        max_records: int = MAX_RECORDS,
        max_bytes: int = MAX_BYTES,
        max_records_per_owner: int = MAX_RECORDS_PER_OWNER,
        max_bytes_per_owner: int = MAX_BYTES_PER_OWNER,
    ) -> None:
        self._keep_within(max_records, max_bytes, max_records_per_owner, max_bytes_per_owner)
        self._owned: dict[str | None, dict[str, None]] = {}  # each owner's records, in creation order
        self._owned_bytes: dict[str | None, int] = {}
        self._records: dict[str, TaskRecord] = {}  # in creation order
        self._sizes: dict[str, int] = {}
        self._bytes = 0
        self._live: dict[str | None, set[str]] = {}  # tasks in progress, by owner
        self._live_count = 0
        self._listeners = Listeners()
        self._ends: list[tuple[int, str]] = []  # (when the record may go, task id), a heap: the expiry timer's list
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0

    @property
    def size_bytes(self) -> int:
        """The estimated bytes the records' payloads take."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._records)

    async def create(self, record: TaskRecord, *, max_live: int, max_live_per_owner: int) -> None:
        owner = record.get("owner")
        mine = self._live.get(owner)
        if mine:
            self._forget_expired(mine)
        if self._live_count >= max_live:
            self._sweep(force=True)
            if self._live_count >= max_live:
                raise TaskLimitReached(
                    f"the server has {max_live} tasks in progress, as many as it allows (max_tasks): retry later"
                )
        if mine is not None and len(mine) >= max_live_per_owner:
            raise TaskLimitReached(
                f"{max_live_per_owner} tasks of yours are in progress, as many as this server allows per caller "
                "(max_tasks_per_principal): wait for one to finish or cancel one"
            )
        owned = self._owned.get(owner)
        if owned is not None and len(owned) >= self.max_records_per_owner:
            self._forget_expired(set(owned))
            if len(owned) >= self.max_records_per_owner and not self._drop_oldest_finished(owner):
                raise kept_refused(self.max_records_per_owner)
        if len(self._records) >= self.max_records:
            self._sweep(force=True)  # (expired records first)
            if len(self._records) >= self.max_records and not self._drop_oldest_finished(None, everyone=True):
                raise total_refused(self.max_records)
        task_id = record["id"]
        kept = orjson.loads(orjson.dumps(record))
        self._records[task_id] = kept
        size = _size(kept)
        self._sizes[task_id] = size
        self._bytes += size
        self._owned.setdefault(owner, {})[task_id] = None
        self._owned_bytes[owner] = self._owned_bytes.get(owner, 0) + size
        self._live.setdefault(owner, set()).add(task_id)
        self._live_count += 1
        self._fit_owner(owner, task_id)
        if len(self._records) > self.max_records or self._bytes > self.max_bytes:
            self._sweep(force=False)
        self._expire_at(kept)
        self._changed(task_id)

    def _alive(self, task_id: str) -> TaskRecord | None:
        """The stored record of ``task_id``, or None when there is none or it expired (then it is dropped)."""
        record = self._records.get(task_id)
        if record is not None and expired(record):
            self._drop(task_id)
            return None
        return record

    async def get(self, task_id: str) -> TaskRecord | None:
        record = self._alive(task_id)
        if record is None:
            return None
        return orjson.loads(orjson.dumps(record))  # type: ignore[no-any-return]

    async def update(self, task_id: str, change: Change) -> TaskRecord | None:
        record = self._alive(task_id)
        if record is None:
            return None
        draft: TaskRecord = orjson.loads(orjson.dumps(record))
        if change(draft):
            self._records[task_id] = draft
            size = _size(draft)
            grown = size - self._sizes.get(task_id, 0)
            self._bytes += grown
            self._sizes[task_id] = size
            owner = draft.get("owner")
            self._owned_bytes[owner] = self._owned_bytes.get(owner, 0) + grown
            if is_terminal(draft) and not is_terminal(record):
                self._end_live(owner, task_id)
            if kept_until(draft) != kept_until(record):
                self._expire_at(draft)
            self._fit_owner(owner, task_id)
            if self._bytes > self.max_bytes:
                self._sweep(force=False)
            self._changed(task_id)
            return orjson.loads(orjson.dumps(draft))  # type: ignore[no-any-return]
        return draft

    async def delete(self, task_id: str) -> None:
        self._drop(task_id)

    async def list(self, owner: str | None, after: tuple[int, str] | None, limit: int) -> list[TaskRecord]:
        now = now_ms()
        mine = [r for r in self._records.values() if r.get("owner") == owner and after_cursor(r, after)]
        out: list[TaskRecord] = []
        for record in sorted(mine, key=lambda r: (int(r["created"]), str(r["id"]))):
            if expired(record, now):
                self._drop(record["id"])
                continue
            out.append(orjson.loads(orjson.dumps(record)))
            if len(out) >= limit:
                break
        return out

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        return self._listeners.subscribe(listener)

    async def aclose(self) -> None:
        self._listeners.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ------------------------------------------------------------------ bookkeeping

    def _expire_at(self, record: TaskRecord) -> None:
        """Have the record dropped when :func:`kept_until` says it may go (the timer is set for the earliest)."""
        end = kept_until(record)
        if end is None:
            return
        ends = self._ends
        if len(ends) > 2 * len(self._records) + 64:  # (entries of records already gone: rebuilt, so it stays bounded)
            ends[:] = [(e, t) for e, t in ends if t in self._records]
            heapq.heapify(ends)
        heapq.heappush(ends, (end, record["id"]))
        self._arm()

    def _arm(self) -> None:
        ends = self._ends
        if not ends:
            return
        first = ends[0][0]
        if self._timer is not None:
            if self._timer_at <= first:
                return
            self._timer.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # (used outside a loop: the bounds and the lookups still drop expired records)
            self._timer = None
            return
        self._timer_at = first
        self._timer = loop.call_later(max(first - now_ms(), 0) / 1000 + 0.001, self._reclaim)

    def _reclaim(self) -> None:
        self._timer = None
        now = now_ms()
        ends = self._ends
        while ends and ends[0][0] <= now:
            _, task_id = heapq.heappop(ends)
            record = self._records.get(task_id)
            if record is not None and expired(record, now):
                self._drop(task_id)
        self._arm()

    def _changed(self, task_id: str) -> None:
        self._listeners.tell(task_id)

    def _end_live(self, owner: str | None, task_id: str) -> None:
        mine = self._live.get(owner)
        if mine is not None and task_id in mine:
            mine.discard(task_id)
            self._live_count -= 1
            if not mine:
                del self._live[owner]

    def _drop(self, task_id: str) -> None:
        record = self._records.pop(task_id, None)
        if record is None:
            return
        size = self._sizes.pop(task_id, 0)
        self._bytes -= size
        owner = record.get("owner")
        owned = self._owned.get(owner)
        if owned is not None:
            owned.pop(task_id, None)
            left = self._owned_bytes.get(owner, 0) - size
            if owned:
                self._owned_bytes[owner] = left
            else:
                del self._owned[owner]
                self._owned_bytes.pop(owner, None)
        if not is_terminal(record):
            self._end_live(owner, task_id)

    def _drop_oldest_finished(self, owner: str | None, *, but: str | None = None, everyone: bool = False) -> bool:
        """Drop ``owner``'s oldest finished task (``everyone``: the oldest of all; not ``but``); False when there
        is none. Tasks in progress are skipped: at most the cap on them."""
        for task_id in self._records if everyone else self._owned.get(owner, ()):
            if task_id != but and is_terminal(self._records[task_id]):
                self._drop(task_id)
                self._changed(task_id)
                return True
        return False

    def _fit_owner(self, owner: str | None, task_id: str) -> None:
        """While ``owner``'s records take more than its byte budget, drop its oldest finished ones (``task_id``,
        the one just made or changed, stays: the caller is about to read it)."""
        while self._owned_bytes.get(owner, 0) > self.max_bytes_per_owner:
            if not self._drop_oldest_finished(owner, but=task_id):
                return

    def _forget_expired(self, ids: set[str]) -> None:
        now = now_ms()
        for task_id in [t for t in ids if expired(self._records[t], now)]:
            self._drop(task_id)

    def _sweep(self, *, force: bool) -> None:
        """Drop expired records; then, while over a bound, the oldest finished ones (down to 90% of the bounds,
        so a flood at the bound does not sweep on every create)."""
        now = now_ms()
        for task_id in [t for t, r in self._records.items() if expired(r, now)]:
            self._drop(task_id)
        if force:
            return
        records, budget = int(self.max_records * 0.9), int(self.max_bytes * 0.9)
        if len(self._records) <= self.max_records and self._bytes <= self.max_bytes:
            return
        for task_id in [t for t, r in self._records.items() if is_terminal(r)]:
            if len(self._records) <= records and self._bytes <= budget:
                break
            self._drop(task_id)


__all__ = ["Change", "InMemoryTaskStore", "KeptBounds", "Listener", "TaskStore"]
