"""The task engine: runs work that outlives the request that started it, over a :class:`~.store.TaskStore`.

One engine per server (and one in a client that runs a server's requests as tasks). It is independent of the
wire forms (2025-11-25 and the 2026-07-28 extension: the server shapes records for each, :mod:`.model`) and of
what the work is: the server hands it a coroutine that runs a ``tools/call``.

- **Creating.** :meth:`TaskEngine.create` makes the record durable in the store (the caps on tasks in progress
  are checked there) and returns it; only then may the requestor be told the id.
- **Running.** :meth:`TaskEngine.adopt` takes the ``asyncio.Task`` that runs the work (started before or after
  the record: the server starts a call, and makes it a task when it does not end at once) and supervises it in a
  task of its own, not a child of any request: a client that disconnects, or the request that created it ending,
  does not stop it. The supervisor bounds it by the task's time to live (work still running then is stopped and
  recorded ``failed``, that record kept ``overrun_grace_ms`` longer) and records its outcome: the result
  (``completed``; one larger than ``max_result_bytes`` fails instead), a JSON-RPC error (``failed``), or nothing
  when it was cancelled.
- **Talking to the requestor.** The work reaches its task through :class:`TaskControl`: status messages,
  progress, and :meth:`TaskControl.ask` (an input request: the task turns ``input_required`` until the answer is
  delivered with :meth:`TaskEngine.answer`, from ``tasks/update``, or from a ``tasks/result`` that forwarded the
  request to the client).
- **Cancelling.** :meth:`TaskEngine.cancel` marks the record ``cancelled`` (terminal: nothing changes it later);
  the worker running it, this one or another (it learns it from the store's change feed), cancels the work.
- **Shutting down.** :meth:`TaskEngine.drain` waits (bounded) for the work in progress, then cancels what is
  left and records it ``failed``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

import orjson

from ..protocol.errors import MCPError, error_from_response
from .model import (
    CANCELLED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    TASK_OVERRUN_GRACE_MS,
    TERMINAL,
    WORKING,
    JSONDict,
    TaskRecord,
    expires_at,
    is_terminal,
    new_record,
    now_ms,
)
from .store import InMemoryTaskStore, TaskStore

logger: logging.Logger = logging.getLogger("mcpkit.tasks")

INTERNAL_ERROR = -32603
#: how often a waiter re-reads a shared store even without a change event (a lost pub/sub message costs this)
FALLBACK_POLL = 2.0


class TaskControl:
    """What the work of one task sees of it: its id, its cancellation, and the calls that report status and
    progress or ask the requestor for input. Made before the record exists (the server may start a call and make
    it a task when it does not end at once): every call waits for :meth:`ready`."""

    __slots__ = ("_created", "_engine", "active", "cancel_requested", "data", "on_progress")

    def __init__(self, engine: TaskEngine) -> None:
        self._engine = engine
        self._created: asyncio.Future[TaskRecord] = asyncio.get_running_loop().create_future()
        #: True once the call is a task (its input requests go through the task, not through the request)
        self.active: bool = False
        self.cancel_requested: bool = False
        #: what the server keeps with the task for itself (e.g. the session to send status notifications to)
        self.data: dict[str, Any] = {}
        #: an extra receiver of progress reports (the server's 2025-11-25 ``notifications/progress``)
        self.on_progress: Callable[[float, float | None, str | None], Any] | None = None

    @property
    def id(self) -> str | None:
        """The task id (None until the record exists)."""
        if self._created.done() and not self._created.cancelled() and self._created.exception() is None:
            return str(self._created.result()["id"])
        return None

    async def ready(self) -> TaskRecord:
        """The record as created (waits for its creation)."""
        return await asyncio.shield(self._created)

    def _set_created(self, record: TaskRecord) -> None:
        if not self._created.done():
            self._created.set_result(record)

    def _set_failed(self, exc: BaseException) -> None:
        if not self._created.done():
            self._created.set_exception(exc)
            self._created.exception()  # (retrieved: nobody may wait for it)

    @property
    def cancelled(self) -> bool:
        """True once the requestor cancelled the task (the work should stop; its outcome is not recorded)."""
        return self.cancel_requested

    async def status(self, message: str | None) -> None:
        """Set the task's status message (shown by ``tasks/get``)."""
        record = await self.ready()

        def change(r: TaskRecord) -> bool:
            if is_terminal(r):
                return False
            r["message"] = message
            r["updated"] = now_ms()
            return True

        await self._engine.store.update(record["id"], change)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Record a progress report (and hand it to :attr:`on_progress`); ``message`` also becomes the status
        message."""
        record = await self.ready()
        report: JSONDict = {"progress": progress}
        if total is not None:
            report["total"] = total
        if message is not None:
            report["message"] = message

        def change(r: TaskRecord) -> bool:
            if is_terminal(r):
                return False
            r["progress"] = report
            if message is not None:
                r["message"] = message
            r["updated"] = now_ms()
            return True

        await self._engine.store.update(record["id"], change)
        if self.on_progress is not None:
            with contextlib.suppress(Exception):
                outcome = self.on_progress(progress, total, message)
                if asyncio.iscoroutine(outcome):
                    await outcome

    async def ask(self, method: str, params: JSONDict) -> JSONDict:
        """Ask the requestor (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) and wait for the
        answer: the task is ``input_required`` meanwhile, the request listed under a key never used before in
        this task. Raises the error the requestor answered with; ``asyncio.CancelledError`` when the task ends
        meanwhile."""
        record = await self.ready()
        return await self._engine._ask(record["id"], method, params)


class _Run:
    __slots__ = ("control", "runner", "supervisor")

    def __init__(self, control: TaskControl, runner: asyncio.Task[Any]) -> None:
        self.control = control
        self.runner = runner
        self.supervisor: asyncio.Task[None] | None = None


class TaskEngine:
    """Creates, runs, cancels and reads tasks over one store (see the module docstring).

    Args:
        store: where tasks are kept (default: a bounded :class:`~.store.InMemoryTaskStore`); a shared store
            lets every worker serve every task.
        max_tasks: tasks in progress (not terminal) at once, all callers together (default 1,000).
        max_tasks_per_principal: tasks in progress at once per caller (default 100): per principal, per
            handshake session without one, and one bucket for callers with neither.
        default_ttl_ms: how long a task is kept from its creation when the requestor asks for nothing (1 hour).
        max_ttl_ms: the longest time to live granted (24 hours); a task still running then is stopped and fails.
        overrun_grace_ms: how long the record of a task stopped at the end of its time to live is kept after that
            (1 minute; its ``ttl`` grows by as much), so a requestor waiting on it reads the failure.
        poll_interval_ms: the polling interval suggested to requestors (default 500 ms).
        max_result_bytes: the largest result (or error) kept, in bytes of JSON (default 4 MiB, the default
            message size): a larger one fails the task with -32603.
        drain_timeout: at shutdown, how long tasks in progress may take to finish before they are cancelled
            (default 10 s).
    """

    def __init__(
        self,
        store: TaskStore | None = None,
        *,
        max_tasks: int = 1000,
        max_tasks_per_principal: int = 100,
        default_ttl_ms: int = 3_600_000,
        max_ttl_ms: int = 86_400_000,
        overrun_grace_ms: int = TASK_OVERRUN_GRACE_MS,
        poll_interval_ms: int = 500,
        max_result_bytes: int = 4 * 1024 * 1024,
        drain_timeout: float = 10.0,
    ) -> None:
        if min(max_tasks, max_tasks_per_principal, default_ttl_ms, max_ttl_ms, max_result_bytes) < 1:
            raise ValueError("task limits must be positive")
        self.store: TaskStore = store if store is not None else InMemoryTaskStore()
        self._default_store = store is None  # (a deployment's shared store may take its place: use_shared_store)
        self.max_tasks = max_tasks
        self.max_tasks_per_principal = max_tasks_per_principal
        self.default_ttl_ms: int = min(default_ttl_ms, max_ttl_ms)
        self.max_ttl_ms = max_ttl_ms
        self.overrun_grace_ms: int = max(0, overrun_grace_ms)
        self.poll_interval_ms = poll_interval_ms
        self.max_result_bytes = max_result_bytes
        self.drain_timeout = drain_timeout
        self._runs: dict[str, _Run] = {}
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}
        self._watchers: dict[str, list[Callable[[str], None]]] = {}
        self._reacting: set[str] = set()
        self._closed = False
        self._unsubscribe = self.store.subscribe(self._on_change)

    def use_shared_store(self, store: TaskStore) -> bool:
        """Keep tasks in ``store`` (the one every worker of a deployment shares) instead of the in-memory default.
        Only an engine built without a store, that has kept no task yet, moves: a store given explicitly stays.
        True when it moved."""
        old = self.store
        if not self._default_store or not isinstance(old, InMemoryTaskStore) or len(old) or self._runs:
            return False
        self._unsubscribe()
        self.store = store
        self._default_store = False
        self._unsubscribe = store.subscribe(self._on_change)
        return True

    # ------------------------------------------------------------------ creating and running

    def ttl_for(self, requested: Any) -> int:
        """The time to live granted for a requested one (milliseconds; a missing or invalid request gets the
        default, a longer one is cut to ``max_ttl_ms``)."""
        if isinstance(requested, bool) or not isinstance(requested, (int, float)) or requested <= 0:
            return self.default_ttl_ms
        return max(1000, min(int(requested), self.max_ttl_ms))

    def control(self, record: TaskRecord | None = None) -> TaskControl:
        """A control for work that may become a task (see :class:`TaskControl`); given the ``record`` made for it
        already, what the work reports before it is a task (status, progress) is kept with that record."""
        control = TaskControl(self)
        if record is not None:
            control._set_created(record)
        return control

    async def create(
        self, *, owner: str | None, method: str, name: str | None = None, ttl_ms: int | None = None
    ) -> TaskRecord:
        """Make a task durable (``working``) and return its record; raises ``TaskLimitReached`` past the caps."""
        if self._closed:
            raise MCPError("the server is shutting down: no new tasks")
        record = new_record(
            owner=owner,
            method=method,
            name=name,
            ttl_ms=self.ttl_for(ttl_ms),
            poll_ms=self.poll_interval_ms,
        )
        await self.store.create(record, max_live=self.max_tasks, max_live_per_owner=self.max_tasks_per_principal)
        logger.info("task %s created (%s %s, owner %s)", record["id"][:8], method, name or "", _who(owner))
        return record

    async def discard(self, task_id: str) -> None:
        """Forget a task nobody was told about (its call ended before it had to be one): its place is free again."""
        await self.store.delete(task_id)

    def adopt(self, record: TaskRecord, control: TaskControl, runner: asyncio.Task[Any]) -> None:
        """Supervise ``runner`` (the task's work, already started) as task ``record``: bounded by its time to live,
        its outcome recorded when it ends."""
        control._set_created(record)
        control.active = True
        run = _Run(control, runner)
        self._runs[record["id"]] = run
        run.supervisor = asyncio.get_running_loop().create_task(self._supervise(record, run))

    async def _supervise(self, record: TaskRecord, run: _Run) -> None:
        task_id = record["id"]
        runner = run.runner
        end = expires_at(record)
        timeout = None if end is None else max(0.0, (end - now_ms()) / 1000)
        try:
            try:
                done, _ = await asyncio.wait({runner}, timeout=timeout)
            except asyncio.CancelledError:  # drain gave up on it: stop the work, record why
                runner.cancel()
                with contextlib.suppress(BaseException):
                    await runner
                await self._finish(task_id, error={"code": INTERNAL_ERROR, "message": "the server shut down"})
                raise
            if not done:
                runner.cancel()
                with contextlib.suppress(BaseException):
                    await runner
                await self._finish(
                    task_id,
                    error={"code": INTERNAL_ERROR, "message": "the task ran past its time to live"},
                    keep_ms=self.overrun_grace_ms,
                )
                return
            await self._record_outcome(task_id, run)
        finally:
            self._runs.pop(task_id, None)

    async def _record_outcome(self, task_id: str, run: _Run) -> None:
        runner = run.runner
        if runner.cancelled():
            if not run.control.cancel_requested:
                await self._finish(task_id, error={"code": INTERNAL_ERROR, "message": "the task was stopped"})
            return
        exc = runner.exception()
        if exc is None:
            result = runner.result()
            if not isinstance(result, dict):  # a pydantic model (the server's handlers may return one)
                dump = getattr(result, "model_dump", None)
                result = dump(by_alias=True, exclude_none=True, mode="json") if dump is not None else {}
            await self._finish(task_id, result=result)
        elif isinstance(exc, MCPError):
            await self._finish(task_id, error=exc.to_error())
        else:
            error_id = uuid.uuid4().hex[:12]
            logger.error("task %s failed (error id %s)", task_id[:8], error_id, exc_info=exc)
            message = f"the task failed: an internal error occurred (error id {error_id})"
            await self._finish(task_id, error={"code": INTERNAL_ERROR, "message": message})

    async def _finish(
        self,
        task_id: str,
        *,
        result: JSONDict | None = None,
        error: JSONDict | None = None,
        keep_ms: int | None = None,
    ) -> None:
        """Record the outcome (unless the task is already terminal: a cancelled task stays cancelled); ``keep_ms``:
        keep the record at least that long from now (its ``ttl`` grows to cover it)."""
        if result is not None:
            size = len(orjson.dumps(result))
            if size > self.max_result_bytes:
                result = None
                error = {
                    "code": INTERNAL_ERROR,
                    "message": f"the result ({size} bytes) is larger than this server keeps ({self.max_result_bytes} "
                    "bytes, max_result_bytes)",
                }

        def change(r: TaskRecord) -> bool:
            if is_terminal(r):
                return False
            if result is not None:
                r["status"] = COMPLETED
                r["result"] = result
            else:
                r["status"] = FAILED
                r["error"] = error
                if r.get("message") is None and error is not None:
                    r["message"] = str(error.get("message") or "")
            r["requests"] = {}
            r["answers"] = {}
            r.pop("asking", None)
            r["updated"] = now_ms()
            if keep_ms is not None and r.get("ttl") is not None:
                r["ttl"] = max(int(r["ttl"]), r["updated"] - int(r["created"]) + keep_ms)
            return True

        try:
            await self.store.update(task_id, change)
        except Exception:
            logger.exception("task %s: could not record its outcome", task_id[:8])
        logger.info("task %s ended %s", task_id[:8], "completed" if result is not None else "failed")

    async def complete_now(self, record: TaskRecord, result: JSONDict) -> TaskRecord:
        """Record ``result`` for a task whose work already ended (it was made a task only for the form's sake)."""
        await self._finish(record["id"], result=result)
        return await self.store.get(record["id"]) or record

    # ------------------------------------------------------------------ what requestors do

    async def get(self, task_id: Any, owner: str | None) -> TaskRecord | None:
        """The task ``task_id`` if it exists and belongs to ``owner`` (anything else reads as unknown: another
        caller's task id tells nothing about that task)."""
        if not isinstance(task_id, str) or not task_id or len(task_id) > 256:
            return None
        record = await self.store.get(task_id)
        if record is None or record.get("owner") != owner:
            return None
        return record

    async def list(self, owner: str | None, after: tuple[int, str] | None, limit: int) -> builtins.list[TaskRecord]:
        """``owner``'s tasks after a position, in creation order (``limit``: at most this many)."""
        return await self.store.list(owner, after, limit)

    async def cancel(self, task_id: str) -> TaskRecord | None:
        """Mark a task ``cancelled`` (a terminal one is left as it is) and stop its work wherever it runs; the
        record as it is afterwards."""

        def change(r: TaskRecord) -> bool:
            if is_terminal(r):
                return False
            r["status"] = CANCELLED
            r["message"] = "The task was cancelled by request."
            r["requests"] = {}
            r["answers"] = {}
            r.pop("asking", None)
            r["updated"] = now_ms()
            return True

        record = await self.store.update(task_id, change)
        run = self._runs.get(task_id)
        if run is not None and record is not None and record["status"] == CANCELLED:
            self._stop(run)
        return record

    async def answer(self, task_id: str, answers: dict[str, JSONDict]) -> builtins.list[str]:
        """Deliver answers to outstanding input requests (``{key: {"result": ...}}`` or ``{key: {"error": ...}}``);
        keys not outstanding are ignored. Returns the keys taken. The task turns ``working`` again when nothing
        is outstanding any more."""
        taken: list[str] = []

        def change(r: TaskRecord) -> bool:
            taken.clear()
            if is_terminal(r):
                return False
            requests = r.get("requests") or {}
            asking = r.get("asking") or {}
            for key, value in answers.items():
                if key in requests:
                    del requests[key]
                    asking.pop(key, None)
                    r.setdefault("answers", {})[key] = value
                    taken.append(key)
            if not taken:
                return False
            r["requests"] = requests
            if not requests and r["status"] == INPUT_REQUIRED:
                r["status"] = WORKING
            r["updated"] = now_ms()
            return True

        await self.store.update(task_id, change)
        return list(taken)

    async def wait_change(self, task_id: str, timeout: float = FALLBACK_POLL) -> None:
        """Return after the next change of ``task_id`` (or after ``timeout``: callers read again either way)."""
        fut = self._watch(task_id)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            self._unwatch(task_id, fut)

    def watch(self, task_id: str) -> asyncio.Future[None]:
        """A future resolved at the next change of ``task_id``: take it BEFORE reading the record, then await it,
        and no change is missed between the read and the wait. Release it with :meth:`unwatch`."""
        return self._watch(task_id)

    def unwatch(self, task_id: str, fut: asyncio.Future[None]) -> None:
        """Release a future from :meth:`watch`."""
        self._unwatch(task_id, fut)

    def add_watcher(self, task_id: str, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(task_id)`` after every change of that task (it must not block); returns the remover."""
        self._watchers.setdefault(task_id, []).append(callback)

        def remove() -> None:
            callbacks = self._watchers.get(task_id)
            if callbacks is not None:
                with contextlib.suppress(ValueError):
                    callbacks.remove(callback)
                if not callbacks:
                    del self._watchers[task_id]

        return remove

    # ------------------------------------------------------------------ input requests

    async def _ask(self, task_id: str, method: str, params: JSONDict) -> JSONDict:
        keys: list[str] = []

        def add(r: TaskRecord) -> bool:
            keys.clear()
            if is_terminal(r):
                return False
            r["asked"] = int(r.get("asked") or 0) + 1
            key = f"{method.split('/')[0]}-{r['asked']}"
            r.setdefault("requests", {})[key] = {"method": method, "params": params}
            r["status"] = INPUT_REQUIRED
            r["updated"] = now_ms()
            keys.append(key)
            return True

        record = await self.store.update(task_id, add)
        if record is None or not keys:
            raise asyncio.CancelledError
        key = keys[0]
        while True:
            fut = self._watch(task_id)
            try:
                record = await self.store.get(task_id)
                if record is None or record["status"] in TERMINAL:
                    raise asyncio.CancelledError
                answer = (record.get("answers") or {}).get(key)
                if answer is not None:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(fut), FALLBACK_POLL)
            finally:
                self._unwatch(task_id, fut)

        def take(r: TaskRecord) -> bool:
            answers = r.get("answers") or {}
            if key not in answers:
                return False
            del answers[key]
            return True

        await self.store.update(task_id, take)
        if isinstance(answer.get("error"), dict):
            raise error_from_response(answer["error"])
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    # ------------------------------------------------------------------ change feed

    def _watch(self, task_id: str) -> asyncio.Future[None]:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(task_id, []).append(fut)
        return fut

    def _unwatch(self, task_id: str, fut: asyncio.Future[None]) -> None:
        futures = self._waiters.get(task_id)
        if futures is not None:
            with contextlib.suppress(ValueError):
                futures.remove(fut)
            if not futures:
                del self._waiters[task_id]
        if not fut.done():
            fut.cancel()

    def _on_change(self, task_id: str) -> None:
        for fut in self._waiters.pop(task_id, ()):
            if not fut.done():
                fut.set_result(None)
        for callback in list(self._watchers.get(task_id, ())):
            try:
                callback(task_id)
            except Exception:
                logger.exception("task %s: a watcher failed", task_id[:8])
        run = self._runs.get(task_id)
        if run is not None and not run.control.cancel_requested and task_id not in self._reacting:
            # a task running here changed, perhaps on another worker: was it cancelled there?
            self._reacting.add(task_id)
            task = asyncio.get_running_loop().create_task(self._react(task_id))
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _react(self, task_id: str) -> None:
        try:
            record = await self.store.get(task_id)
        finally:
            self._reacting.discard(task_id)
        run = self._runs.get(task_id)
        if run is not None and record is not None and record["status"] == CANCELLED:
            self._stop(run)

    def _stop(self, run: _Run) -> None:
        run.control.cancel_requested = True
        if not run.runner.done():
            run.runner.cancel()

    # ------------------------------------------------------------------ shutdown

    @property
    def running(self) -> int:
        """How many tasks this engine runs now."""
        return len(self._runs)

    @property
    def watchers(self) -> int:
        """How many change callbacks (:meth:`add_watcher`) are registered now: one per task a live 2025-11-25
        session follows or a ``subscriptions/listen`` stream watches."""
        return sum(len(callbacks) for callbacks in self._watchers.values())

    async def drain(self, timeout: float | None = None) -> None:
        """Refuse new tasks, wait up to ``timeout`` (default :attr:`drain_timeout`) for the tasks running here,
        then cancel what is left (recorded ``failed``: the server shut down). New tasks are accepted again once
        it returns (a server may be served again)."""
        self._closed = True
        try:
            limit = self.drain_timeout if timeout is None else timeout
            supervisors = [r.supervisor for r in list(self._runs.values()) if r.supervisor is not None]
            if supervisors:
                _, pending = await asyncio.wait(supervisors, timeout=limit)
                for task in pending:
                    task.cancel()
                if pending:
                    await asyncio.wait(pending, timeout=5.0)
        finally:
            self._closed = False

    async def aclose(self) -> None:
        """Drain, stop listening to the store and close it."""
        await self.drain()
        self._unsubscribe()
        await self.store.aclose()


def _who(owner: str | None) -> str:
    if owner is None:
        return "anonymous"
    kind, _, name = owner.partition(":")
    return f"{kind}:{name[:24]}"


__all__ = ["FALLBACK_POLL", "TaskControl", "TaskEngine"]
