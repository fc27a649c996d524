"""Tasks on the server: ``tools/call`` as a task, and the ``tasks/*`` methods, in both protocol forms.

One :class:`~mcpkit.tasks.TaskEngine` (owned by the server, over a :class:`~mcpkit.tasks.TaskStore`) runs the tasks
of both forms; this module is what the protocol makes of it. Its entry is an interceptor of ``tools/call``
(:meth:`ServerTasks.intercept`, on the server's one dispatch seam: after the authorization decision, so a tool's
scopes are checked before any task exists), installed by ``enable_tasks``; a server without tasks has none.

- **2025-11-25** (experimental, in the core): the server declares ``capabilities.tasks`` (``list``, ``cancel``,
  ``requests.tools.call``) and each task tool's ``execution.taskSupport``. A ``tools/call`` with ``params.task``
  becomes a task at once (``CreateTaskResult {task}``); ``tasks/get``, ``tasks/list``, ``tasks/cancel`` read and
  cancel it; ``tasks/result`` blocks until it ends, forwarding its input requests to the client on the way (with
  ``_meta["io.modelcontextprotocol/related-task"]``), and answers what the call would have answered. A tool that
  does not support tasks asked for as one, or a tool that requires one called plainly, gets -32601.
  ``notifications/tasks/status`` tells the session each change of status, and progress reports reach it as
  ``notifications/progress`` for the call's progress token.
- **2026-07-28** (the extension ``io.modelcontextprotocol/tasks``, SEP-2663): declared under
  ``capabilities.extensions``. The server decides: when the request's client capabilities include the extension,
  a task tool's call runs its first step inside the request; a call that ends there is answered as it is
  (input requests included: they are the ordinary ``input_required`` round trips, before any task exists), one
  that has to wait becomes a task (``resultType: "task"``). A tool that requires a task answers a client without
  the extension -32021. ``tasks/get`` inlines the result, the error or the outstanding input requests;
  ``tasks/update`` delivers answers; ``tasks/cancel`` acknowledges; ``subscriptions/listen`` with ``taskIds``
  streams ``notifications/tasks``. ``tasks/result`` and ``tasks/list`` do not exist there (-32601).

Who may reach a task: the caller that created it, by principal when the request is authenticated, else by its
handshake-era session; a 2026-07-28 request without a principal has only the unguessable id (on every transport:
that era has no sessions). Another caller's task id reads exactly as an unknown one.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.errors import (
    InvalidParams,
    MCPError,
    MethodNotFound,
    MissingRequiredClientCapability,
    RequestTimeout,
    error_from_response,
)
from ..protocol.extensions import declares
from ..protocol.jsonrpc import JSONDict
from ..protocol.shaping import shape_result
from ..protocol.versions import META_RELATED_TASK, MODERN_VERSIONS, TASKS_EXTENSION, Features
from ..tasks import TaskControl, TaskEngine, TaskStore
from ..tasks.engine import FALLBACK_POLL
from ..tasks.model import (
    CANCELLED,
    TERMINAL,
    TaskRecord,
    extension_task,
    legacy_status,
    legacy_task,
    list_cursor,
    now_ms,
    read_cursor,
)
from .request_context import ServerRequestContext, session_binding

if TYPE_CHECKING:
    from ..hosting import HostedSession
    from .builtins import Listener


class Tool(Protocol):
    """What the task entry reads of a tool (a :class:`~mcpkit.server.tools.Tool`; typed here so that this module,
    which the server imports, imports nothing of the tools back)."""

    name: str
    task_support: str | None
    sync: Any  # a plain def's SyncPolicy, None for an async def


logger: logging.Logger = logging.getLogger("mcpkit.server.tasks")

LIST_PAGE_SIZE = 50
#: how long a ``tasks/result``'s claim to be the one asking an input request lasts unless renewed (milliseconds):
#: renewed while it asks; a claim whose worker died lapses after it, and another waiter asks
ASK_LEASE_MS = 10_000
TASK_NOT_FOUND = "Failed to retrieve task: Task not found"
_REQUIRED: JSONDict = {"extensions": {TASKS_EXTENSION: {}}}
_LEGACY_CAPABILITY: JSONDict = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def declares_extension(client_capabilities: JSONDict) -> bool:
    """Whether a request's client capabilities include the tasks extension."""
    return declares(client_capabilities, TASKS_EXTENSION)


def owner_of(sctx: ServerRequestContext) -> str | None:
    """Who a task belongs to: the principal when the request is authenticated, else its handshake-era session; a
    2026-07-28 request without a principal has no binding (that era has no sessions, whatever the transport), nor
    has one on a stateless endpoint (its one session runs every client's requests: it stands for nobody)."""
    if sctx.principal is not None:
        return f"p:{sctx.principal}"
    session = sctx.session
    if session is not None and not session.stateless and not sctx.features.modern:
        return f"s:{session_binding(session)}"
    return None


class ServerTasks:
    """A server's task support (``server.tasks``): the engine, the ``tasks/*`` handlers of both forms and the
    entry of a ``tools/call`` that may run as a task. Made by :meth:`~mcpkit.server.lowlevel.Server.enable_tasks`."""

    def __init__(self, server: Any, engine: TaskEngine) -> None:
        self.server = server
        self.engine = engine
        for method, handler in (
            ("tasks/get", self._get),
            ("tasks/cancel", self._cancel),
            ("tasks/result", self._result),
            ("tasks/list", self._list),
            ("tasks/update", self._update),
        ):
            server.set_handler(method, handler)
        # the extension exists in 2026-07-28 only (in 2025-11-25 tasks are the core's capabilities.tasks)
        server.declare_extension(TASKS_EXTENSION, {}, versions=MODERN_VERSIONS)
        #: the input requests a ``tasks/result`` here is asking the client now, by (task id, key): one at a time,
        #: the newest waiter's (entries leave when their request ends)
        self._asking: dict[tuple[str, str], asyncio.Task[None]] = {}
        #: removes the task entry from the server's interceptors
        self.remove: Callable[[], None] = server.add_interceptor(self.intercept, methods="tools/call")

    @property
    def asking(self) -> int:
        """How many of its tasks' input requests this worker's ``tasks/result`` waiters are asking clients now (one
        per request at most: a newer waiter takes it over)."""
        return len(self._asking)

    def capability(self, feats: Features) -> JSONDict | None:
        """The 2025-11-25 ``capabilities.tasks`` (None in other revisions)."""
        return dict(_LEGACY_CAPABILITY) if feats.tasks else None

    # ------------------------------------------------------------------ tools/call

    async def intercept(self, call: Any, call_next: Callable[[Any], Awaitable[JSONDict]]) -> JSONDict:
        """The task entry: an interceptor of ``tools/call`` (``Server.add_interceptor``). A call of a tool that may
        run as a task, or one that asks for a task, is decided by :meth:`call_tool`; any other goes on as it is."""
        params = call.params
        tool = self.server.task_tool(params.get("name"), call.context)
        if tool is None or (tool.task_support is None and "task" not in params) or not _arguments_ok(params):
            return await call_next(call)  # (an unknown or hidden tool, bad arguments: the handler answers)
        outcome = self.call_tool(call.context, params, tool, lambda: call_next(call))
        return await outcome if inspect.isawaitable(outcome) else outcome  # type: ignore[no-any-return]

    def call_tool(self, sctx: ServerRequestContext, params: JSONDict, tool: Tool, run: Callable[[], Any]) -> Any:
        """A ``tools/call`` of ``tool``, ``run()`` being the call itself: run as a task when the revision and the
        request say so, plainly otherwise, or refused (see the module docstring)."""
        feats = sctx.features
        support = tool.task_support
        if feats.tasks:
            asked = "task" in params
            if asked and support is None:
                raise MethodNotFound(
                    f"tool {tool.name!r} does not support task-augmented calls (execution.taskSupport)"
                )
            if not asked and support == "required":
                raise MethodNotFound(f"tool {tool.name!r} must be called as a task: add params.task")
            if asked:
                return self._legacy_call(sctx, params, tool, run)
            return run()
        if feats.tasks_extension and support is not None:
            if declares_extension(sctx.client_capabilities):
                return self._extension_call(sctx, tool, run)
            if support == "required":
                raise MissingRequiredClientCapability(
                    _REQUIRED, f"tool {tool.name!r} runs only as a task: declare the {TASKS_EXTENSION} extension"
                )
        return run()

    async def _legacy_call(
        self, sctx: ServerRequestContext, params: JSONDict, tool: Tool, run: Callable[[], Any]
    ) -> JSONDict:
        task_param = params.get("task")
        if not isinstance(task_param, dict):
            raise InvalidParams('params.task must be an object ({} or {"ttl": milliseconds})')
        engine = self.engine
        record = await engine.create(
            owner=owner_of(sctx), method="tools/call", name=tool.name, ttl_ms=task_param.get("ttl")
        )
        control = engine.control()
        control.active = True
        sctx.task = control
        self._follow_legacy(sctx, control, record)
        engine.adopt(record, control, asyncio.get_running_loop().create_task(_body(run)))
        return {"task": legacy_task(record)}

    async def _extension_call(self, sctx: ServerRequestContext, tool: Tool, run: Callable[[], Any]) -> JSONDict:
        engine = self.engine
        # The task is made first (the caps on tasks in progress are checked before any of the tool runs); a call
        # that ends in its first step gives its place back.
        record = await engine.create(owner=owner_of(sctx), method="tools/call", name=tool.name)
        control = engine.control(record)  # its first step's status and progress are kept with the record
        sctx.task = control  # not active yet: what the first step asks is an ordinary input_required round trip
        runner = asyncio.get_running_loop().create_task(_body(run))
        try:
            if tool.sync is None:  # an async def: its first step runs here, inside the request
                await asyncio.sleep(0)  # (the runner's first step runs before this coroutine resumes)
                if runner.done():
                    exc = runner.exception()
                    if exc is not None:
                        raise exc  # -32021, a TaskFailed error, ...: no task
                    result: JSONDict = runner.result()
                    if tool.task_support != "required" or result.get("resultType") == "input_required":
                        await engine.discard(record["id"])
                        return result  # done at once, or asks first (before any task exists): the plain answer
                    record = await engine.complete_now(record, runner.result())
                    return {"resultType": "task", **extension_task(record)}
        except BaseException:  # (the request was cancelled, or ended with its error): no task came of it
            if not runner.done():
                runner.cancel()
            with contextlib.suppress(Exception):
                await asyncio.shield(engine.discard(record["id"]))
            raise
        engine.adopt(record, control, runner)  # from here on its input requests, progress and status go to the task
        return {"resultType": "task", **extension_task(record)}

    def _follow_legacy(self, sctx: ServerRequestContext, control: TaskControl, record: TaskRecord) -> None:
        """2025-11-25 extras for a session's task: ``notifications/tasks/status`` at each change of status, and
        progress reports as ``notifications/progress`` for the call's token (the token stays valid for the task's
        lifetime)."""
        session = sctx.session
        if session is None:
            return
        task_id = record["id"]
        related = {META_RELATED_TASK: {"taskId": task_id}}

        async def notify(method: str, params: JSONDict) -> None:  # (what the task logs, with its related-task)
            if not session.closed:
                await session.peer.notify(method, {**params, "_meta": related})

        control.data["notify"] = notify
        token = sctx.rc.progress_token
        if token is not None:
            last: list[float] = []

            async def progress(value: float, total: float | None, message: str | None) -> None:
                if session.closed or (last and value <= last[0]):
                    return
                last[:] = [value]
                note: JSONDict = {"progressToken": token, "progress": value, "_meta": related}
                if total is not None:
                    note["total"] = total
                if message is not None and sctx.features.progress_message:
                    note["message"] = message
                await session.peer.notify("notifications/progress", note)

            control.on_progress = progress
        sent = [legacy_status(record)]

        def changed(_: str) -> None:
            if session.closed:
                stop()
                return
            task = asyncio.get_running_loop().create_task(self._status_note(session, task_id, sent, stop))
            task.add_done_callback(_quiet)

        def stop() -> None:
            unwatch()
            forget()

        unwatch = self.engine.add_watcher(task_id, changed)
        forget = session.on_close(unwatch)  # (the watcher ends with the session, or with the task)

    async def _status_note(
        self, session: HostedSession, task_id: str, sent: list[str], remove: Callable[[], None]
    ) -> None:
        record = await self.engine.store.get(task_id)
        if record is None:
            remove()
            return
        status = legacy_status(record)
        if status == sent[0]:
            return
        sent[0] = status
        if record["status"] in TERMINAL:
            remove()
        if not session.closed:
            await session.peer.notify("notifications/tasks/status", legacy_task(record))

    # ------------------------------------------------------------------ tasks/*

    async def _find(self, sctx: ServerRequestContext, params: JSONDict) -> TaskRecord:
        """The request's task, after the gate of its form: the tasks extension declared (2026-07-28, -32021
        otherwise), the revision that has tasks (2025-11-25, -32601 otherwise); an unknown task, or another
        caller's, is -32602."""
        feats = sctx.features
        if feats.tasks_extension:
            if not declares_extension(sctx.client_capabilities):
                raise MissingRequiredClientCapability(
                    _REQUIRED, f"{sctx.method} needs the {TASKS_EXTENSION} extension in the client capabilities"
                )
        elif not feats.tasks:
            raise MethodNotFound(f"Method not found: {sctx.method} (no tasks in protocol {feats.version})")
        record = await self.engine.get(params.get("taskId"), owner_of(sctx))
        if record is None:
            raise InvalidParams(TASK_NOT_FOUND)
        return record

    async def _get(self, sctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        record = await self._find(sctx, params)
        if sctx.features.tasks_extension:
            return extension_task(record, detailed=True)
        return legacy_task(record, detailed=True)

    async def _cancel(self, sctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        record = await self._find(sctx, params)
        if sctx.features.tasks_extension:
            await self.engine.cancel(record["id"])  # a finished task stays as it is: the ack is the same
            return {}
        if record["status"] in TERMINAL:
            raise InvalidParams(f"Cannot cancel task: already in terminal status '{legacy_status(record)}'")
        after = await self.engine.cancel(record["id"])
        if after is None:  # (its time to live ended meanwhile)
            raise InvalidParams(TASK_NOT_FOUND)
        if after["status"] != CANCELLED:  # it ended between the read and the cancel (a shared store): too late
            raise InvalidParams(f"Cannot cancel task: already in terminal status '{legacy_status(after)}'")
        return legacy_task(after)

    async def _update(self, sctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        record = await self._find(sctx, params)
        responses = params.get("inputResponses")
        if not isinstance(responses, dict) or not all(isinstance(v, dict) for v in responses.values()):
            raise InvalidParams("inputResponses must be an object of result objects")
        if responses and record["status"] not in TERMINAL:
            await self.engine.answer(record["id"], {str(k): {"result": v} for k, v in responses.items()})
        return {}

    async def _list(self, sctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        if not sctx.features.tasks:
            raise MethodNotFound(f"Method not found: tasks/list (no tasks in protocol {sctx.features.version})")
        cursor = params.get("cursor")
        after = None
        if cursor is not None:
            after = read_cursor(cursor)
            if after is None:
                raise InvalidParams("Invalid cursor")
        owner = owner_of(sctx)
        if owner is None:  # a requestor nothing identifies has no tasks of its own to list: never anyone else's
            return {"tasks": []}
        records = await self.engine.list(owner, after, LIST_PAGE_SIZE + 1)
        page = records[:LIST_PAGE_SIZE]
        result: JSONDict = {"tasks": [legacy_task(r) for r in page]}
        if len(records) > LIST_PAGE_SIZE:
            result["nextCursor"] = list_cursor(page[-1])
        return result

    async def _result(self, sctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        """``tasks/result`` (2025-11-25): blocks until the task ends, forwarding its input requests to the client
        on this request's channel, then answers what the call itself would have answered."""
        record = await self._find(sctx, params)
        task_id = record["id"]
        engine = self.engine
        delivering: dict[str, tuple[str, asyncio.Task[None]]] = {}  # key -> (this waiter's claim, its forward)
        try:
            while True:
                fut = engine.watch(task_id)  # (before the read: no change is missed between the two)
                try:
                    fresh = await engine.store.get(task_id)
                    if fresh is None:
                        raise InvalidParams("Failed to retrieve task: Task has expired")
                    record = fresh
                    if record["status"] in TERMINAL:
                        break
                    claims = record.get("asking") or {}
                    for key, request in (record.get("requests") or {}).items():
                        await self._deliver(sctx, task_id, key, request, claims.get(key), delivering)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(asyncio.shield(fut), FALLBACK_POLL)
                finally:
                    engine.unwatch(task_id, fut)
        finally:
            for _, task in delivering.values():
                task.cancel()
        related = {META_RELATED_TASK: {"taskId": task_id}}
        error = record.get("error")
        if record["status"] == CANCELLED or (record.get("result") is None and error is None):
            raise MCPError("The task was cancelled: it has no result", {"taskId": task_id})
        if record.get("result") is None:
            raise error_from_response(error)
        result = dict(record["result"])
        meta = result.get("_meta")
        result["_meta"] = {**meta, **related} if isinstance(meta, dict) else related
        return shape_result("tools/call", result, sctx.features)

    async def _deliver(
        self,
        sctx: ServerRequestContext,
        task_id: str,
        key: str,
        request: JSONDict,
        claim: Any,
        delivering: dict[str, tuple[str, asyncio.Task[None]]],
    ) -> None:
        """One waiter's part in asking input request ``key``, whatever the worker: the request is claimed in the
        task's record (``asking``: the asker's token and the end of its lease, renewed while it asks), so every
        worker's waiters see who asks. A waiter asks when it first sees the request (taking it over: the newest
        is the one the client listens to); it withdraws its copy once another waiter has claimed it; it asks
        again when the claim is gone (that waiter went away unanswered) or lapsed (its worker died)."""
        mine = delivering.get(key)
        by, until = (claim.get("by"), claim.get("until")) if isinstance(claim, dict) else (None, 0)
        now = now_ms()
        if mine is None or (mine[1].cancelled() and (by is None or not isinstance(until, int) or until <= now)):
            claimed = await self._claim(task_id, key)
            if claimed is not None:
                delivering[key] = (claimed, self._ask_client(sctx, task_id, key, request, claimed))
        elif not mine[1].done():
            if by != mine[0]:  # a newer waiter (here or on another worker) asks it now
                mine[1].cancel()
            elif isinstance(until, int) and until - now < ASK_LEASE_MS // 2:
                await self._claim(task_id, key, mine[0])

    async def _claim(self, task_id: str, key: str, token: str | None = None) -> str | None:
        """Record that a waiter asks input request ``key`` now (a new claim, or ``token``'s renewed); the claim's
        token, None when the request is no longer outstanding."""
        renew = token is not None
        token = token or secrets.token_hex(8)

        def claim(r: TaskRecord) -> bool:
            if r["status"] in TERMINAL or key not in (r.get("requests") or {}):
                return False
            asking = r.get("asking")
            if not isinstance(asking, dict):
                r["asking"] = asking = {}
            if renew and (asking.get(key) or {}).get("by") != token:
                return False  # (taken over meanwhile: the next look withdraws this copy)
            asking[key] = {"by": token, "until": now_ms() + ASK_LEASE_MS}
            return True

        after = await self.engine.store.update(task_id, claim)
        if after is None or key not in (after.get("requests") or {}):
            return None
        return token

    async def _release(self, task_id: str, key: str, token: str) -> None:
        """Drop ``token``'s claim on input request ``key`` (its waiter went away unanswered): another waiter asks."""

        def release(r: TaskRecord) -> bool:
            asking = r.get("asking")
            if not isinstance(asking, dict) or (asking.get(key) or {}).get("by") != token:
                return False
            del asking[key]
            return True

        await self.engine.store.update(task_id, release)

    def _ask_client(
        self, sctx: ServerRequestContext, task_id: str, key: str, request: JSONDict, token: str
    ) -> asyncio.Task[None]:
        """Forward one input request of the task on this ``tasks/result``. A copy another ``tasks/result`` of this
        worker is still waiting on is withdrawn at once (cancelled: the client gets ``notifications/cancelled``;
        one on another worker withdraws its copy when it sees the claim): the newest waiter is the one the client
        listens to (it retried after its stream dropped, say), and a user is never left with two live prompts for
        one question."""
        slot = (task_id, key)
        older = self._asking.get(slot)
        if older is not None:
            older.cancel()
        forward = asyncio.get_running_loop().create_task(self._forward(sctx, task_id, key, request, token))
        self._asking[slot] = forward

        def release(done: asyncio.Task[None]) -> None:
            if self._asking.get(slot) is done:
                del self._asking[slot]

        forward.add_done_callback(release)
        return forward

    async def _forward(self, sctx: ServerRequestContext, task_id: str, key: str, request: JSONDict, token: str) -> None:
        """Send one of the task's input requests to the client on this request's channel; its answer (or error)
        goes to the task. Unanswered (withdrawn, its waiter gone), its claim is released."""
        try:
            await self._ask_and_answer(sctx, task_id, key, request)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._release(task_id, key, token))
            raise

    async def _ask_and_answer(self, sctx: ServerRequestContext, task_id: str, key: str, request: JSONDict) -> None:
        method = request.get("method")
        params = dict(request.get("params") or {})
        meta = params.get("_meta")
        params["_meta"] = (
            {**meta, META_RELATED_TASK: {"taskId": task_id}}
            if isinstance(meta, dict)
            else {META_RELATED_TASK: {"taskId": task_id}}
        )
        try:
            if sctx.session is not None:
                await sctx.session.wait_initialized()
            answer: JSONDict = {
                "result": await sctx.rc.request(str(method), params, timeout=self.server.request_timeout)
            }
        except MCPError as exc:
            answer = {"error": exc.to_error()}
        except (RequestTimeout, TimeoutError):
            answer = {"error": {"code": -32001, "message": f"the client did not answer {method} in time"}}
        await self.engine.answer(task_id, {key: answer})

    # ------------------------------------------------------------------ subscriptions/listen (2026-07-28)

    async def listen_for(self, sctx: ServerRequestContext, ids: Any, listener: Listener) -> list[str]:
        """Agree to stream ``notifications/tasks`` for the caller's tasks among ``ids`` on ``listener``; returns
        the ids agreed to (unknown ones and other callers' are left out, without saying which)."""
        if not declares_extension(sctx.client_capabilities):
            raise MissingRequiredClientCapability(
                _REQUIRED, f"task notifications need the {TASKS_EXTENSION} extension in the client capabilities"
            )
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise InvalidParams("taskIds must be an array of strings")
        owner = owner_of(sctx)
        agreed: list[str] = []
        for task_id in dict.fromkeys(ids):
            if await self.engine.get(task_id, owner) is not None:
                agreed.append(task_id)
        for task_id in agreed:

            def changed(tid: str) -> None:
                task = asyncio.get_running_loop().create_task(self._offer(tid, listener))
                task.add_done_callback(_quiet)

            listener.removers.append(self.engine.add_watcher(task_id, changed))
        return agreed

    async def _offer(self, task_id: str, listener: Listener) -> None:
        record = await self.engine.store.get(task_id)
        if record is not None:
            listener.offer("notifications/tasks", extension_task(record, detailed=True))


def enable_tasks(server: Any, engine: TaskEngine | TaskStore | None = None, **options: Any) -> ServerTasks:
    """Make ``server`` run tools as tasks, in both protocol forms, and declare it (``Server.enable_tasks``).

    ``engine``: a :class:`~mcpkit.tasks.TaskEngine`, or the :class:`~mcpkit.tasks.TaskStore` to build one on (default:
    the store the deployment's workers share, :meth:`Server.use_task_store
    <mcpkit.server.lowlevel.Server.use_task_store>`, else in memory; a shared store such as
    ``mcpkit.stores.redis.RedisTaskStore`` lets every worker serve every task); ``options`` go to the engine
    (``max_tasks``, ``max_tasks_per_principal``, ``default_ttl_ms``, ``max_ttl_ms``, ``poll_interval_ms``,
    ``max_result_bytes``, ``drain_timeout``). Registering a tool with ``task=`` enables tasks with the defaults; call
    this before serving to choose."""
    if not isinstance(engine, TaskEngine):
        engine = TaskEngine(engine if engine is not None else server.task_store, **options)
    elif options:
        raise TypeError("give the engine's options to TaskEngine(...) itself")
    if server.tasks is not None:
        server.tasks.remove()  # (enabled again: the new engine replaces the old one)
    server.tasks = tasks = ServerTasks(server, engine)
    server._caps_cache.clear()
    return tasks


def _arguments_ok(params: JSONDict) -> bool:
    arguments = params.get("arguments")
    return arguments is None or type(arguments) is dict


async def _body(run: Callable[[], Any]) -> Any:
    """Start the call and await it (``run()`` answers at once with a dict, or returns what to await)."""
    value = run()
    if inspect.isawaitable(value):
        value = await value
    return value


def _quiet(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.warning("task notification failed: %s", task.exception())


__all__ = ["ServerTasks", "declares_extension", "enable_tasks", "owner_of"]
