"""What waits on the inspector's page, a base class of :class:`~mcpkit.inspector.session.Inspector`: the tool calls
that run (started at once, their progress and status published at most ~20 times a second, a cancel, the finished
ones kept within ``max_kept_results`` / ``max_kept_result_bytes``) and the requests the server makes of the person
at the page (sampling, elicitation: published, then held until the page answers; beyond ``max_pending_requests``
one more is declined at once).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from ..client import watch_sent
from ..client.client import ToolOutputError
from ..client.tasks import TaskCancelled
from ..protocol.errors import MCPError
from .asks import SAMPLING_REJECTED, Call, HumanRequest, InspectorError, run_as_task, settle, validation
from .failures import describe_failure

if TYPE_CHECKING:
    from .events import EventHub

logger: logging.Logger = logging.getLogger("mcpkit.inspector")


class CallsAndAsks:
    """The tool calls and the person's answers of :class:`~mcpkit.inspector.session.Inspector` (its base class; see
    the module docstring). ``Inspector.__init__`` makes the state they work on."""

    if TYPE_CHECKING:
        hub: EventHub
        max_running_calls: int
        max_pending_requests: int
        max_kept_results: int
        max_kept_result_bytes: int
        _ids: itertools.count[int]
        _calls: dict[str, Call]
        _finished: deque[Call]
        _finished_bytes: int
        _pending: dict[str, HumanRequest]

        def _require(self) -> Any: ...

        def server_name(self) -> str: ...

    # ------------------------------------------------------------------ tool calls

    async def start_call(self, name: str, arguments: dict[str, Any], *, as_task: bool = False) -> str:
        """Start ``tools/call``; returns the call's id at once (its progress and outcome come as events). With
        ``as_task`` the server runs it as a task (``Client.call_tool_as_task``): its status comes as events too,
        and a cancel cancels the task."""
        client = self._require()
        if not isinstance(name, str) or not name or not isinstance(arguments, dict):
            raise InspectorError("name must be a non-empty string and arguments an object")
        if len(self._calls) >= self.max_running_calls:
            raise InspectorError(f"{self.max_running_calls} calls are already running: wait or cancel one", 429)
        call = Call(id=f"call-{next(self._ids)}", name=name, arguments=arguments, started=time.time())
        call.as_task = as_task
        with contextlib.suppress(Exception):  # (its definition from the start: the page shows its MCP Apps view)
            known = await client.get_tool(name)
            call.tool = known.dump() if known is not None else None
        self._calls[call.id] = call
        call.task = asyncio.get_running_loop().create_task(self._run_call(client, call))
        self.hub.publish("call", call=call.public())
        return call.id

    async def _run_call(self, client: Any, call: Call) -> None:
        last = 0.0

        def on_progress(done: float, total: float | None, message: str | None) -> None:
            nonlocal last
            call.progress = {"progress": done, "total": total, "message": message}
            now = time.monotonic()
            if now - last >= 0.05 or (total is not None and done >= total):  # at most ~20 updates a second
                last = now
                self.hub.publish("call", call=call.public())

        def on_status(task: Any) -> None:
            call.task_state = {"taskId": task.task_id, "status": task.status, "statusMessage": task.status_message}
            self.hub.publish("call", call=call.public())

        def on_sent(method: str, request_id: Any) -> None:  # (the id the server sees: an Apps view is told it)
            if method == "tools/call" and call.request_id is None:
                call.request_id = request_id
                self.hub.publish("call", call=call.public())

        tool: dict[str, Any] | None = None
        try:
            with watch_sent(on_sent):
                if call.as_task:
                    result = await run_as_task(client, call, on_progress, on_status)
                else:
                    result = await client.call_tool(call.name, call.arguments, timeout=None, on_progress=on_progress)
            call.outcome = {"result": result.raw.dump(), "validation": validation(result)}
            call.status = "done"
            tool = result.tool.dump() if result.tool is not None else None
        except ToolOutputError as exc:
            call.outcome = {
                "result": exc.result.raw.dump(),
                "validation": {"state": "invalid", "message": exc.message},
            }
            call.status = "done"
        except (asyncio.CancelledError, TaskCancelled):
            call.status = "cancelled"
        except Exception as exc:
            call.outcome = {"error": describe_failure(exc)}
            call.status = "failed"
        call.outcome["ended"] = time.time()
        if tool is not None:
            call.outcome["tool"] = tool
        self._calls.pop(call.id, None)
        self._keep(call)
        self.hub.publish("call", call=call.public())

    def _keep(self, call: Call) -> None:
        import orjson

        try:
            call.size = len(orjson.dumps(call.outcome))
        except (TypeError, orjson.JSONEncodeError):
            call.size = 0
        self._finished.append(call)
        self._finished_bytes += call.size
        while len(self._finished) > self.max_kept_results or self._finished_bytes > self.max_kept_result_bytes:
            old = self._finished.popleft()
            self._finished_bytes -= old.size

    def cancel_call(self, call_id: str) -> bool:
        """Cancel a running call (the server gets ``notifications/cancelled``); False when it is not running."""
        call = self._calls.get(call_id)
        if call is None or call.task is None or call.task.done():
            return False
        call.task.cancel()
        return True

    def forget_calls(self) -> None:
        """Forget the finished calls (the page's "clear")."""
        self._finished.clear()
        self._finished_bytes = 0

    # ------------------------------------------------------------------ the person's answers

    async def _on_sampling(self, params: dict[str, Any]) -> Any:
        return await self._ask("sampling", params)

    async def _on_elicitation(self, params: dict[str, Any]) -> Any:
        return await self._ask("elicitation", params)

    async def _ask(self, kind: str, params: dict[str, Any]) -> Any:
        if len(self._pending) >= self.max_pending_requests:
            logger.warning("declined a %s request: %d already wait for an answer", kind, len(self._pending))
            if kind == "elicitation":
                return {"action": "decline"}
            raise MCPError("too many requests already wait for the user's answer", code=SAMPLING_REJECTED)
        req = HumanRequest(
            id=f"ask-{next(self._ids)}",
            kind=kind,
            params=params,
            created=time.time(),
            future=asyncio.get_running_loop().create_future(),
        )
        self._pending[req.id] = req
        self.hub.publish("ask", request=req.public(self.server_name()))
        try:
            return await req.future
        finally:
            self._pending.pop(req.id, None)
            self.hub.publish("asked", id=req.id)

    def answer(self, request_id: str, answer: dict[str, Any]) -> None:
        """Answer a waiting request with what the person chose (see :func:`.asks.settle` for the shapes)."""
        req = self._pending.get(request_id)
        if req is None or req.future.done():
            raise InspectorError("no such request is waiting (it was answered, withdrawn or timed out)", 404)
        settle(req, answer)


__all__ = ["CallsAndAsks"]
