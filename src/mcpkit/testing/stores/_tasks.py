"""The contract of a :class:`~mcpkit.tasks.TaskStore`: :class:`TaskStoreContract`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ...protocol.errors import TaskLimitReached
from ...tasks.model import CANCELLED, COMPLETED, TaskRecord, new_record, now_ms
from ...tasks.store import TaskStore
from ._contract import Contract, eventually, same

#: caps on tasks in progress large enough not to matter where a test is about another bound
_ANY = {"max_live": 1_000, "max_live_per_owner": 1_000}


def _task(owner: str | None, *, ttl_ms: int = 60_000, created: int | None = None) -> TaskRecord:
    record = new_record(owner=owner, method="tools/call", name="contract", ttl_ms=ttl_ms, poll_ms=100)
    if created is not None:
        record["created"] = record["updated"] = created
    return record


def _complete(result: Any) -> Any:
    def change(record: TaskRecord) -> bool:
        record["status"], record["result"] = COMPLETED, result
        return True

    return change


class TaskStoreContract(Contract[TaskStore]):
    """The behaviour the task engine (:class:`~mcpkit.tasks.TaskEngine`) relies on from a task store: tasks
    created on one worker are polled, answered, cancelled and read on any other. Subclass it and build your store
    with this class's bounds::

        class TestMyTaskStore(TaskStoreContract):
            async def make_store(self) -> TaskStore:
                return MyTaskStore(dsn, max_records_per_owner=self.max_records_per_owner, max_records=self.max_records)

    The engine makes every change through ``update`` (status, result, error, input requests and answers, a
    cancellation), expects the caps it passes to ``create`` enforced atomically, a task's record kept until its
    time to live ends (one still in progress a margin longer, so the engine can record it stopped), and every
    change told to the listeners of ``subscribe`` (a ``tasks/result`` waiting for the end wakes up on them).
    """

    #: tasks kept per owner, in progress or finished (build the store with it; keep it below max_records)
    max_records_per_owner: int = 3
    #: tasks kept in all, every owner together (build the store with it)
    max_records: int = 6
    #: the time to live (milliseconds) the expiry test gives its tasks; it waits about twice as long
    ttl_ms: int = 1_000

    async def test_a_created_task_reads_back_by_id_as_a_copy(self, store: TaskStore) -> None:
        """After ``create`` returns, ``get`` finds the record (every field as created; a store may add its own);
        changing what ``get`` returned changes nothing stored; an unknown id is None."""
        record = _task("p:alice")
        want = dict(record)
        await store.create(record, **_ANY)
        got = await store.get(want["id"])
        assert same(got, want), f"got {got}, created {want}"
        assert got is not None
        got["status"] = CANCELLED
        assert same(await store.get(want["id"]), want), "a change to the record get returned was stored"
        assert await store.get("contract-unknown-task") is None

    async def test_update_applies_a_change_and_returns_the_record_after_it(self, store: TaskStore) -> None:
        """``update`` applies the change and returns the record as it is after it (what the engine answers with);
        a change that returns False stores nothing; an unknown task gives None. A result and a cancellation are
        changes like any other."""
        done, cancelled = _task("p:alice"), _task("p:alice")
        await store.create(done, **_ANY)
        await store.create(cancelled, **_ANY)
        after = await store.update(done["id"], _complete({"content": [], "isError": False}))
        assert after is not None and after["status"] == COMPLETED
        assert same(await store.get(done["id"]), {"status": COMPLETED, "result": {"content": [], "isError": False}})

        def refuse(record: TaskRecord) -> bool:
            record["status"] = CANCELLED
            return False

        unchanged = await store.update(done["id"], refuse)
        assert unchanged is not None
        assert same(await store.get(done["id"]), {"status": COMPLETED}), "a change that returned False was stored"

        def cancel(record: TaskRecord) -> bool:
            record["status"], record["message"] = CANCELLED, "cancelled by the requestor"
            return True

        await store.update(cancelled["id"], cancel)
        assert same(await store.get(cancelled["id"]), {"status": CANCELLED, "message": "cancelled by the requestor"})
        assert await store.update("contract-unknown-task", cancel) is None

    async def test_concurrent_updates_of_one_task_are_all_applied(self, store: TaskStore) -> None:
        """Twenty updates of one task at once all apply (none overwrites another's with a stale copy): answers to
        input requests, a cancellation and progress may reach one task from several workers at the same moment."""
        record = _task("p:alice")
        await store.create(record, **_ANY)

        def bump(r: TaskRecord) -> bool:
            r["asked"] = int(r["asked"]) + 1
            return True

        await asyncio.gather(*(store.update(record["id"], bump) for _ in range(20)))
        assert same(await store.get(record["id"]), {"asked": 20}), "an update was lost"

    async def test_the_caps_on_tasks_in_progress_hold_and_an_ended_task_frees_its_place(self, store: TaskStore) -> None:
        """``create`` refuses (:class:`~mcpkit.protocol.errors.TaskLimitReached`) a task past ``max_live_per_owner``
        of its owner's tasks in progress, or past ``max_live`` of all; a task that ends, or is deleted, frees its
        place at once."""
        caps = {"max_live": 3, "max_live_per_owner": 2}
        a1, a2, b1 = _task("p:alice"), _task("p:alice"), _task("p:bob")
        for record in (a1, a2, b1):
            await store.create(record, **caps)
        with pytest.raises(TaskLimitReached):
            await store.create(_task("p:alice"), **caps)  # alice's two
        with pytest.raises(TaskLimitReached):
            await store.create(_task("p:carol"), **caps)  # three in all
        await store.update(a1["id"], _complete({}))
        await store.create(_task("p:alice"), **caps)
        await store.delete(b1["id"])
        assert await store.get(b1["id"]) is None
        await store.create(_task("p:carol"), **caps)

    async def test_list_pages_through_one_owners_tasks_in_creation_order(self, store: TaskStore) -> None:
        """``list(owner, after, limit)`` gives that owner's tasks only, ordered by (creation time, id), from just
        after the position ``after``, at most ``limit``: ``tasks/list`` pages with it."""
        base = now_ms() - 1_000  # (distinct creation times, in another order than the creations)
        mine = [_task("p:alice", created=base + n) for n in reversed(range(self.max_records_per_owner))]
        for record in mine:
            await store.create(record, **_ANY)
        await store.create(_task("p:bob", created=base + 1), **_ANY)
        order = [r["id"] for r in sorted(mine, key=lambda r: (r["created"], r["id"]))]
        page = max(1, len(order) - 1)
        first = await store.list("p:alice", None, page)
        assert [r["id"] for r in first] == order[:page]
        rest = await store.list("p:alice", (int(first[-1]["created"]), str(first[-1]["id"])), page)
        assert [r["id"] for r in rest] == order[page:]
        assert await store.list("p:nobody", None, 10) == []

    async def test_an_owner_past_its_kept_tasks_loses_its_own_oldest_finished_one(self, store: TaskStore) -> None:
        """Past ``max_records_per_owner`` tasks of one owner a new one drops that owner's oldest finished task (by
        creation time, then id), never another owner's; with none finished it is refused: one caller's flood
        pushes out only its own."""
        bound = self.max_records_per_owner
        base = now_ms() - 1_000  # ("oldest": by creation time, then id, as tasks/list orders them)
        other = _task("p:bob", created=base)
        await store.create(other, **_ANY)
        await store.update(other["id"], _complete({}))
        mine = [_task("p:alice", created=base + 1 + n) for n in range(bound)]
        for record in mine:
            await store.create(record, **_ANY)
        await store.update(mine[0]["id"], _complete({}))
        await store.update(mine[1]["id"], _complete({}))
        newest = _task("p:alice")
        await store.create(newest, **_ANY)
        assert await store.get(mine[0]["id"]) is None, "the owner's oldest finished task was kept past the bound"
        for record in (mine[1], *mine[2:], newest, other):
            assert await store.get(record["id"]) is not None, "a task was dropped that the bound did not require"
        await store.delete(mine[1]["id"])
        await store.create(_task("p:alice"), **_ANY)  # (back at the bound, every task in progress)
        with pytest.raises(TaskLimitReached):
            await store.create(_task("p:alice"), **_ANY)
        assert await store.get(other["id"]) is not None

    async def test_the_store_past_its_total_loses_the_oldest_finished_task_of_anyone(self, store: TaskStore) -> None:
        """Past ``max_records`` tasks in all a new one drops the oldest finished task (by creation time, then id),
        whoever made it (the bound
        for callers the per-owner one cannot tell apart); with none finished it is refused."""
        base = now_ms() - 1_000  # ("oldest": by creation time, then id, as tasks/list orders them)
        tasks = [_task(f"p:caller-{n}", created=base + n) for n in range(self.max_records)]
        for record in tasks:
            await store.create(record, **_ANY)
        await store.update(tasks[1]["id"], _complete({}))
        await store.update(tasks[2]["id"], _complete({}))
        await store.create(_task("p:newcomer"), **_ANY)
        assert await store.get(tasks[1]["id"]) is None, "the oldest finished task was kept past max_records"
        for record in (tasks[0], *tasks[2:]):
            assert await store.get(record["id"]) is not None, "a task was dropped that the bound did not require"
        await store.delete(tasks[2]["id"])
        await store.create(_task("p:newcomer-2"), **_ANY)  # (back at the bound, every task in progress)
        with pytest.raises(TaskLimitReached):
            await store.create(_task("p:newcomer-3"), **_ANY)

    async def test_a_finished_task_goes_at_the_end_of_its_time_to_live(self, store: TaskStore) -> None:
        """A finished task reads as unknown (``get`` None, not listed) once its time to live has passed; one still in
        progress is kept past it (the engine records it stopped there, and that record must be found)."""
        ttl = self.ttl_ms
        finished, running = _task("p:alice", ttl_ms=ttl), _task("p:alice", ttl_ms=ttl)
        await store.create(finished, **_ANY)
        await store.create(running, **_ANY)
        await store.update(finished["id"], _complete({}))
        assert await store.get(finished["id"]) is not None

        async def gone() -> bool:
            return await store.get(finished["id"]) is None

        await eventually(gone, ttl / 1000 + 2.0, f"a finished task outlived its time to live of {ttl} ms")
        assert [r["id"] for r in await store.list("p:alice", None, 10)] == [running["id"]]
        assert await store.get(running["id"]) is not None, "a task in progress went at the end of its time to live"

    async def test_listeners_hear_of_every_change_until_they_unsubscribe(self, store: TaskStore) -> None:
        """A listener is called with the task's id after its creation and after each change (a ``tasks/result``
        waiting for the end wakes up on it); once unsubscribed it hears nothing more."""
        heard: list[str] = []
        unsubscribe = store.subscribe(heard.append)
        record = _task("p:alice")
        await store.create(record, **_ANY)
        assert record["id"] in heard, "create was not told"
        heard.clear()
        await store.update(record["id"], _complete({}))
        assert record["id"] in heard, "update was not told"
        unsubscribe()
        unsubscribe()  # (twice is harmless)
        await asyncio.sleep(0.1)  # (a backend's own feed may still be delivering the changes above)
        heard.clear()

        def annotate(r: TaskRecord) -> bool:
            r["message"] = "later"
            return True

        await store.update(record["id"], annotate)
        await asyncio.sleep(0.2)
        assert heard == [], "an unsubscribed listener was told"
