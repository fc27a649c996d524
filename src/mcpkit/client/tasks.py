"""Tasks on the client: following a server's task (both protocol forms), and running a server's requests as tasks.

- :class:`TaskHandle`: what ``Client.call_tool_as_task`` returns. ``status()`` reads the task (``tasks/get``),
  ``result()`` waits for its end and returns the tool's result, ``cancel()`` cancels it; progress and status
  callbacks follow it meanwhile. 2026-07-28 (the tasks extension): ``result()`` polls ``tasks/get`` (at once, then
  sooner than the server's interval for the first few looks, then at that interval), answers the task's input
  requests with the client's handlers (``tasks/update``) and reads the result inlined in the final state; a plain
  ``call_tool`` does the same transparently when a server answers it with a task. 2025-11-25: ``result()`` calls
  ``tasks/result``, which blocks until the end (the server sends the task's input requests on it, answered by the
  same handlers), while a poller reports status.
- :class:`ClientTasks`: the receiving side of 2025-11-25 (``tasks.requests.sampling.createMessage`` and
  ``tasks.requests.elicitation.create``): a server's ``sampling/createMessage`` or ``elicitation/create`` with
  ``params.task`` is answered with a ``CreateTaskResult`` at once, the handler runs as a task of the client's own
  :class:`~mcpkit.tasks.TaskEngine`, and the server's ``tasks/get``, ``tasks/result``, ``tasks/list`` and
  ``tasks/cancel`` are answered from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Coroutine, Generator, Iterator
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from ..protocol.errors import (
    CapabilityNotSupported,
    ConnectionClosed,
    InvalidParams,
    MCPError,
    MethodNotFound,
    RequestTimeout,
    error_from_response,
)
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import CallToolResult, Task
from ..protocol.versions import META_RELATED_TASK, TASKS_EXTENSION, Features
from ..tasks import InMemoryTaskStore, TaskEngine
from ..tasks.model import CANCELLED, PROGRESS_META, TERMINAL, legacy_task, list_cursor, read_cursor
from .results import ToolResult, checked

if TYPE_CHECKING:
    from types import EllipsisType

    from .handlers import InputTracer

logger: logging.Logger = logging.getLogger("mcpkit.client")

MIN_POLL = 0.05  # seconds: the fastest a handle polls, whatever the server suggests
MAX_POLL = 5.0  # the slowest (a server suggesting an hour is not followed that far)
DEFAULT_POLL = 0.5
#: ``(progress, total, message)``, as for a request's progress
ProgressCallback = Callable[[float, "float | None", "str | None"], Any]
#: receives each new state of the task (a :class:`~mcpkit.protocol.types.Task`)
StatusCallback = Callable[[Task], Any]


class TaskCancelled(MCPError):
    """The task ended ``cancelled``: it has no result."""


class Session(Protocol):
    """What a handle needs of its client session (a :class:`~mcpkit.client.lowlevel.ClientSession`)."""

    features: Features | None
    server_capabilities: JSONDict
    peer: Any  # its engine peer (ids, the default timeout)
    input_tracer: InputTracer | None  # (telemetry: a handle's requests are later rounds of the call that made it)

    async def request(
        self,
        method: str,
        params: JSONDict | None = None,
        *,
        timeout: float | EllipsisType | None = ...,
        raw_task: bool = False,
    ) -> JSONDict: ...

    async def _answer_input_requests(self, requests: JSONDict, call: str, about: JSONDict | None) -> JSONDict: ...


class SeenProgress:
    """Relays a request's progress reports to ``on_progress``, remembering the last value: the task the request
    may become reports the same progress again (its state keeps the last report), and only what follows is new."""

    __slots__ = ("last", "on_progress")

    def __init__(self, on_progress: ProgressCallback) -> None:
        self.on_progress: ProgressCallback = on_progress
        self.last: float | None = None

    def __call__(self, progress: float, total: float | None, message: str | None) -> Any:
        self.last = progress
        return self.on_progress(progress, total, message)


async def follow(
    session: Session,
    task: Task,
    timeout: Any,
    on_progress: ProgressCallback | None,
    seen: SeenProgress | None = None,
) -> JSONDict:
    """A 2026-07-28 task a server answered ``tools/call`` with, followed to its end: its result (the deadline
    ``timeout``, or the session's default, covers the whole wait; the task is cancelled when it passes).
    ``seen``: the progress the request already reported (not reported again)."""
    handle: TaskHandle[Any] = TaskHandle(session, task, modern=True, on_progress=on_progress)
    if seen is not None:
        handle._last_progress = seen.last
    limit = session.peer.default_timeout if timeout is ... else timeout
    try:
        result = await handle._raw_result(limit)
    except TimeoutError:
        with contextlib.suppress(Exception):
            await handle.cancel()
        raise RequestTimeout("tools/call", float(limit or 0)) from None
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await asyncio.shield(handle.cancel())
        raise
    return result


async def start_tool_task(
    session: Session,
    tasks: ClientTasks,
    name: str,
    arguments: JSONDict | None,
    ttl: int | None,
    meta: JSONDict | None,
    on_progress: ProgressCallback | None,
    on_status: StatusCallback | None,
) -> TaskHandle[Any]:
    """``tools/call`` as a task: 2025-11-25 with ``params.task`` (the server must declare
    ``tasks.requests.tools.call``); 2026-07-28 (the server must declare the tasks extension) the server decides,
    ``ttl`` included (ignored here, said in one debug line), and a call it answers at once gives a handle that is
    already done."""
    feats = session.features
    if feats is None:
        raise ConnectionClosed("not connected")
    params: JSONDict = {"name": name, "arguments": arguments or {}}
    user_meta = dict(meta or {})
    caps = session.server_capabilities
    if feats.modern:
        if not isinstance((caps.get("extensions") or {}).get(TASKS_EXTENSION), dict):
            raise CapabilityNotSupported(f"the server did not declare the {TASKS_EXTENSION} extension")
        if ttl is not None:  # (no such field in 2026-07-28: the server decides how long it keeps a task)
            logger.debug("call_tool_as_task(%r, ttl=%d): ttl is ignored in 2026-07-28, the server decides", name, ttl)
        if user_meta:
            params["_meta"] = user_meta
        with _rounds(session) as trail:
            raw = await session.request("tools/call", params, raw_task=True)
        if raw.get("resultType") != "task":  # ended at once: a handle that is already done
            done = Task(task_id="", status="completed", result=raw)
            return TaskHandle(session, done, modern=True, on_progress=on_progress, on_status=on_status, final=raw)
        task = checked(Task, raw, "tools/call")
        return TaskHandle(session, task, modern=True, on_progress=on_progress, on_status=on_status, trail=trail)
    declared = caps.get("tasks")
    tools = ((declared or {}).get("requests") or {}).get("tools") if isinstance(declared, dict) else None
    if not feats.tasks or not isinstance(tools, dict) or not isinstance(tools.get("call"), dict):
        raise CapabilityNotSupported("the server did not declare tasks.requests.tools.call (2025-11-25 tasks)")
    params["task"] = {"ttl": ttl} if ttl is not None else {}
    token: str | int | None = None
    if on_progress is not None:
        token = user_meta.setdefault("progressToken", f"task-{session.peer.next_id()}")
    if user_meta:
        params["_meta"] = user_meta
    with _rounds(session) as trail:
        raw = await session.request("tools/call", params)
    task = checked(Task, raw.get("task") or {}, "tools/call", "task")
    handle: TaskHandle[Any] = TaskHandle(
        session, task, modern=False, on_progress=on_progress, on_status=on_status, trail=trail
    )
    if token is not None:
        tasks.follow_progress(token, handle)
    return handle


def _rounds(session: Session, trail: Any = None) -> contextlib.AbstractContextManager[Any]:
    """The session's telemetry rounds of one call (:meth:`mcpkit.telemetry.Telemetry.rounds`), yielding its trail;
    nothing (None) without telemetry."""
    tracer = session.input_tracer
    return contextlib.nullcontext() if tracer is None else tracer.rounds(trail)


T = TypeVar("T")


class TaskHandle(Generic[T]):
    """A task of the server (see the module docstring). ``task`` is its last known state; ``task_id`` its id.
    Awaiting the handle is ``await handle.result()``, the :class:`~mcpkit.client.results.ToolResult`:
    ``TaskHandle[T]`` (its ``data`` a ``T``) from ``call_tool_as_task(..., result_type=T)``. With telemetry, the
    requests it sends are spans in the trace of the call that made the task (children of that call's span)."""

    def __init__(
        self,
        session: Session,
        task: Task,
        *,
        modern: bool,
        on_progress: ProgressCallback | None = None,
        on_status: StatusCallback | None = None,
        finish: Callable[[JSONDict], ToolResult[T]] | None = None,
        final: JSONDict | None = None,
        trail: Any = None,
    ) -> None:
        self._session = session
        self._trail = trail  # (telemetry: the call that made the task, which the handle's requests continue)
        self.task: Task = task
        self.modern = modern
        self.on_progress = on_progress
        self.on_status = on_status
        self._finish = finish  # what turns the final result dict into the caller's value (a ToolResult)
        self._final = final  # the result, when the call ended at once (no task was made)
        self._answered: set[str] = set()
        self._last_progress: float | None = None
        self._last_seen: tuple[str, str | None] | None = None

    @property
    def task_id(self) -> str:
        """The task's id (keep it: another client, or this one after a restart, can follow it with it)."""
        return self.task.task_id

    def __repr__(self) -> str:
        return f"TaskHandle({self.task_id!r}, status={self.task.status!r})"

    def __await__(self) -> Generator[Any, None, ToolResult[T]]:
        return self.result().__await__()

    @contextlib.contextmanager
    def _in_trace(self) -> Iterator[None]:
        """Around the handle's requests: later rounds of the call that made the task (the first one traced, when
        that call was not: a handle made from a task id)."""
        with _rounds(self._session, self._trail) as trail:
            self._trail = trail
            yield

    async def status(self) -> Task:
        """The task's state now (``tasks/get``); progress and status callbacks see it too."""
        if self._final is not None:
            return self.task
        with self._in_trace():
            raw = await self._session.request("tasks/get", {"taskId": self.task_id})
        task = checked(Task, raw, "tasks/get")
        await self._observe(task)
        return task

    async def cancel(self) -> None:
        """Cancel the task (``tasks/cancel``); a task that already ended is left as it is."""
        if self._final is not None or self.task.terminal:
            return
        try:
            with self._in_trace():
                raw = await self._session.request("tasks/cancel", {"taskId": self.task_id})
        except InvalidParams:
            return  # (2025-11-25: it ended meanwhile)
        if not self.modern:
            self.task = checked(Task, raw, "tasks/cancel")

    async def result(self, *, timeout: float | None = None) -> ToolResult[T]:
        """Wait for the task to end and return its result: the tool call's
        :class:`~mcpkit.client.results.ToolResult`. Raises the JSON-RPC error a failed task ended with,
        :class:`TaskCancelled` for a cancelled one, ``TimeoutError`` after ``timeout`` seconds (the task goes on:
        call again, or cancel it)."""
        raw = await self._raw_result(timeout)
        if self._finish is not None:
            return self._finish(raw)
        return ToolResult(checked(CallToolResult, raw, "tools/call"))

    async def _raw_result(self, timeout: float | None) -> JSONDict:
        """The task's result as the server sent it (what :meth:`result` makes a ToolResult of)."""
        if self._final is not None:
            return self._final
        with self._in_trace():
            waiting = self._wait_modern() if self.modern else self._wait_legacy()
            return await (asyncio.wait_for(waiting, timeout) if timeout is not None else waiting)

    # ------------------------------------------------------------------ 2026-07-28

    async def _wait_modern(self) -> JSONDict:
        task = self.task
        if (task.status == "completed" and task.result is None) or (task.status == "failed" and task.error is None):
            task = await self.status()  # (a CreateTaskResult may say the task ended; tasks/get carries the outcome)
        polls = 0
        while True:
            if task.status == "completed":
                return dict(task.result or {})
            if task.status == "failed":
                raise error_from_response(task.error or {"code": -32603, "message": task.status_message or "failed"})
            if task.status == "cancelled":
                raise TaskCancelled(f"task {self.task_id} was cancelled", {"taskId": self.task_id})
            if task.status == "input_required" and task.input_requests:
                fresh = {k: v for k, v in task.input_requests.items() if k not in self._answered}
                if fresh:
                    answers = await self._session._answer_input_requests(
                        fresh, "tasks/update", {"taskId": self.task_id}
                    )
                    self._answered.update(fresh)
                    await self._session.request("tasks/update", {"taskId": self.task_id, "inputResponses": answers})
                    task = await self.status()
                    continue
            # the first looks come sooner than the server's interval (a short task is often done at once): 0 s,
            # 50 ms, 100 ms, ... up to it
            await asyncio.sleep(0 if polls == 0 else min(self._interval(task), MIN_POLL * 2 ** (polls - 1)))
            polls += 1
            task = await self.status()

    # ------------------------------------------------------------------ 2025-11-25

    async def _wait_legacy(self) -> JSONDict:
        poller = asyncio.get_running_loop().create_task(self._poll_legacy())
        try:
            raw = await self._session.request("tasks/result", {"taskId": self.task_id}, timeout=None)
        except MCPError:
            with contextlib.suppress(Exception):
                await self.status()
            if self.task.status == "cancelled":
                raise TaskCancelled(f"task {self.task_id} was cancelled", {"taskId": self.task_id}) from None
            raise
        finally:
            poller.cancel()
            with contextlib.suppress(BaseException):
                await poller
        with contextlib.suppress(Exception):
            await self.status()
        return raw

    async def _poll_legacy(self) -> None:
        """Status and progress callbacks while ``tasks/result`` blocks."""
        if self.on_progress is None and self.on_status is None:
            return
        while True:
            await asyncio.sleep(self._interval(self.task))
            with contextlib.suppress(MCPError):
                if (await self.status()).terminal:
                    return

    # ------------------------------------------------------------------ callbacks

    def _interval(self, task: Task) -> float:
        ms = task.poll_interval_ms
        return DEFAULT_POLL if ms is None else min(MAX_POLL, max(MIN_POLL, ms / 1000))

    async def _observe(self, task: Task) -> None:
        self.task = task
        seen = (task.status, task.status_message)
        if seen != self._last_seen:
            self._last_seen = seen
            if self.on_status is not None:
                await _call(self.on_status, task)
        progress = (task.meta or {}).get(PROGRESS_META)
        if isinstance(progress, dict):
            await self.progress(progress.get("progress"), progress.get("total"), progress.get("message"))

    async def progress(self, value: Any, total: Any = None, message: Any = None) -> None:
        """Hand a progress report to ``on_progress`` (only increasing values, as for a request's progress)."""
        if self.on_progress is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        if self._last_progress is not None and value <= self._last_progress:
            return
        self._last_progress = float(value)
        total_f = float(total) if isinstance(total, (int, float)) and not isinstance(total, bool) else None
        await _call(self.on_progress, float(value), total_f, message if isinstance(message, str) else None)


async def _call(fn: Callable[..., Any], *args: Any) -> None:
    try:
        outcome = fn(*args)
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        logger.exception("task callback failed")


# ---------------------------------------------------------------------------------------------- the receiving side


class ClientTasks:
    """A client's own tasks: the server's ``sampling/createMessage`` and ``elicitation/create`` run as tasks when
    it asks (2025-11-25), on a :class:`~mcpkit.tasks.TaskEngine` of the client's (in memory by default: one
    connection's)."""

    METHODS = ("sampling/createMessage", "elicitation/create")

    MAX_FOLLOWED = 1024  # handles whose 2025-11-25 progress notifications are routed (the oldest are dropped)

    def __init__(self, engine: TaskEngine | None = None) -> None:
        self._engine = engine
        self._progress: dict[str | int, TaskHandle[Any]] = {}

    def follow_progress(self, token: str | int, handle: TaskHandle[Any]) -> None:
        """Route ``notifications/progress`` for ``token`` (the task's request's token) to ``handle``."""
        self._progress[token] = handle
        while len(self._progress) > self.MAX_FOLLOWED:
            self._progress.pop(next(iter(self._progress)))

    def progress(self, params: JSONDict) -> None:
        """A progress notification for a token no request waits on (the engine's ``unclaimed_progress``)."""
        token = params.get("progressToken")
        handle = self._progress.get(token) if isinstance(token, (str, int)) else None
        if handle is None:
            return
        if handle.task.terminal:
            del self._progress[token]  # type: ignore[arg-type]
            return
        report = handle.progress(params.get("progress"), params.get("total"), params.get("message"))
        asyncio.get_running_loop().create_task(report).add_done_callback(lambda t: t.cancelled() or t.exception())

    @property
    def engine(self) -> TaskEngine:
        if self._engine is None:
            # (its one caller is the server: the store's bounds per caller are its bounds in total)
            store = InMemoryTaskStore(max_records_per_owner=10_000, max_bytes_per_owner=256 * 1024 * 1024)
            self._engine = TaskEngine(store, max_tasks=256, max_tasks_per_principal=256)
        return self._engine

    @staticmethod
    def capability(declared: JSONDict) -> JSONDict:
        """The 2025-11-25 ``capabilities.tasks`` a client with these tasks declares: task-augmented requests of
        the kinds it ``declared`` a capability (a handler) for, sampling and elicitation."""
        requests: JSONDict = {}
        if "sampling" in declared:
            requests["sampling"] = {"createMessage": {}}
        if "elicitation" in declared:
            requests["elicitation"] = {"create": {}}
        return {"list": {}, "cancel": {}, "requests": requests}

    def takes(
        self, method: str, params: JSONDict, feats: Features | None, capabilities: Callable[..., JSONDict]
    ) -> bool:
        """Whether a request of the server is one of these (2025-11-25): its ``tasks/*`` methods, and its requests
        with ``params.task`` of a kind the client declared (``capabilities(feats)``: sampling, elicitation)."""
        if feats is None or not feats.tasks:
            return False
        if method.startswith("tasks/"):
            return True
        return "task" in params and method in self.METHODS and method.split("/")[0] in capabilities(feats)

    async def answer(
        self, method: str, params: JSONDict, serve: Callable[[str, JSONDict], Coroutine[Any, Any, JSONDict]]
    ) -> JSONDict:
        """Answer what :meth:`takes`: a ``tasks/*`` method, or a request to run as a task with ``serve``."""
        if method.startswith("tasks/"):
            return await self.serve(method, params)
        return await self.create(method, params, lambda p: serve(method, p))

    async def create(
        self, method: str, params: JSONDict, work: Callable[[JSONDict], Coroutine[Any, Any, JSONDict]]
    ) -> JSONDict:
        """Answer a task-augmented request: the task made, ``work(params)`` running as it."""
        task_param = params.get("task")
        if not isinstance(task_param, dict):
            raise InvalidParams("params.task must be an object")
        plain = {k: v for k, v in params.items() if k != "task"}
        engine = self.engine
        record = await engine.create(owner=None, method=method, ttl_ms=task_param.get("ttl"))
        control = engine.control()
        engine.adopt(record, control, asyncio.ensure_future(work(plain)))
        return {"task": legacy_task(record)}

    async def serve(self, method: str, params: JSONDict) -> JSONDict:
        """Answer the server's ``tasks/get``, ``tasks/result``, ``tasks/list`` or ``tasks/cancel``."""
        engine = self.engine
        if method == "tasks/list":
            after = None
            cursor = params.get("cursor")
            if cursor is not None and (after := read_cursor(cursor)) is None:
                raise InvalidParams("Invalid cursor")
            records = await engine.list(None, after, 51)
            out: JSONDict = {"tasks": [legacy_task(r) for r in records[:50]]}
            if len(records) > 50:
                out["nextCursor"] = list_cursor(records[49])
            return out
        record = await engine.get(params.get("taskId"), None)
        if record is None:
            raise InvalidParams("Failed to retrieve task: Task not found")
        task_id = record["id"]
        if method == "tasks/get":
            return legacy_task(record)
        if method == "tasks/cancel":
            final = record if record["status"] in TERMINAL else await engine.cancel(task_id)
            if final is None:
                raise InvalidParams("Failed to retrieve task: Task not found")
            if final["status"] != CANCELLED:  # terminal before, or ended meanwhile (a shared store)
                raise InvalidParams(f"Cannot cancel task: already in terminal status '{final['status']}'")
            return legacy_task(final)
        if method != "tasks/result":
            raise MethodNotFound(f"Method not found: {method}")
        while record["status"] not in TERMINAL:
            fut = engine.watch(task_id)
            try:
                fresh = await engine.store.get(task_id)
                if fresh is None:
                    raise InvalidParams("Failed to retrieve task: Task has expired")
                record = fresh
                if record["status"] not in TERMINAL:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(fut), 2.0)
            finally:
                engine.unwatch(task_id, fut)
        if record.get("result") is not None:
            result = dict(record["result"])
            meta = result.get("_meta")
            related = {META_RELATED_TASK: {"taskId": task_id}}
            result["_meta"] = {**meta, **related} if isinstance(meta, dict) else related
            return result
        if record.get("error") is not None:
            raise error_from_response(record["error"])
        raise MCPError("The task was cancelled: it has no result", {"taskId": task_id})

    async def aclose(self) -> None:
        if self._engine is not None:
            await self._engine.drain(0.5)


__all__ = [
    "ClientTasks",
    "ProgressCallback",
    "StatusCallback",
    "TaskCancelled",
    "TaskHandle",
    "follow",
    "start_tool_task",
]
