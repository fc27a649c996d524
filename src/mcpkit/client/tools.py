"""The tool methods of :class:`~mcpkit.client.client.Client`: listing and finding tools (the definitions it keeps,
whose output schemas check each result), calling one (its definition learned first within the call's deadline, a
tool that requires a task run as one, the result checked and typed), starting one as a task, and following a task.

``Client`` inherits them from :class:`ToolMethods`; everything else it calls (resources, prompts, completion,
logging, roots) is in :mod:`mcpkit.client.client`, the connection they all go through in
:mod:`mcpkit.client.connection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ..engine import ProgressCallback
from ..protocol.errors import MCPError, RequestTimeout
from ..protocol.jsonrpc import JSONDict
from ..protocol.types import CallToolResult, Task, Tool
from .connection import ClientConnection
from .results import ResultType, ToolCallError, ToolResult, check_output, checked, checked_items, typed_data
from .tasks import StatusCallback, TaskHandle, start_tool_task

T = TypeVar("T")


class ToolMethods(ClientConnection):
    """The tool methods of :class:`~mcpkit.client.client.Client` (a base class of it; see the module docstring)."""

    if TYPE_CHECKING:  # (Client's: the list pages, read through its response cache, walked within its bounds)

        async def _page(self, method: str, cursor: str | None) -> JSONDict: ...

        async def _walk(
            self, method: str, key: str, max_pages: int | None, max_items: int | None
        ) -> list[JSONDict]: ...

    async def list_tools(self, *, max_pages: int | None = None, max_items: int | None = None) -> list[Tool]:
        """Every tool (all pages, bounded by ``max_pages``/``max_items``); refreshes the output-schema cache."""
        raw = await self._walk("tools/list", "tools", max_pages, max_items)
        tools = checked_items(Tool, raw, "tools/list", "tools")
        self._tools = {t.name: t for t in tools}
        self._validators.clear()
        self._tools_complete = True
        return tools

    async def list_tools_page(self, cursor: str | None = None) -> tuple[list[Tool], str | None]:
        """One raw page: ``(tools, next_cursor)``."""
        page = await self._page("tools/list", cursor)
        tools = checked_items(Tool, page.get("tools") or [], "tools/list", "tools")
        for t in tools:
            self._tools[t.name] = t
        return tools, page.get("nextCursor") or None

    async def get_tool(self, name: str) -> Tool | None:
        """The tool's definition (from the cache, listing the tools once when unknown)."""
        tool = self._tools.get(name)
        if tool is None and not self._tools_complete:
            listing = self._listing
            if listing is None or listing.done():  # (calls looking up at once share one tools/list)
                listing = self._listing = asyncio.ensure_future(self.list_tools())
                listing.add_done_callback(_retrieved)
            await asyncio.shield(listing)  # (a caller that gives up does not stop the others' lookup)
            tool = self._tools.get(name)
        return tool

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        result_type: type[ResultType[T]],
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        meta: JSONDict | None = None,
        raise_on_error: bool = False,
        validate: bool | None = None,
        reset_timeout_on_progress: bool = False,
    ) -> ToolResult[T]: ...

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        result_type: type[T],
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        meta: JSONDict | None = None,
        raise_on_error: bool = False,
        validate: bool | None = None,
        reset_timeout_on_progress: bool = False,
    ) -> ToolResult[T]: ...

    @overload
    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        result_type: Any = None,
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        meta: JSONDict | None = None,
        raise_on_error: bool = False,
        validate: bool | None = None,
        reset_timeout_on_progress: bool = False,
    ) -> ToolResult[Any]: ...

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        result_type: Any = None,
        timeout: float | EllipsisType | None = ...,
        on_progress: ProgressCallback | None = None,
        meta: JSONDict | None = None,
        raise_on_error: bool = False,
        validate: bool | None = None,
        reset_timeout_on_progress: bool = False,
    ) -> ToolResult[Any]:
        """Call a tool; returns a :class:`ToolResult` (``content``, ``structured``, ``data``, ``is_error``, ``text``).

        ``result_type``: a type pydantic can validate (a pydantic model, a dataclass, a TypedDict, ``list[Model]``,
        ``int``, ...): ``result.data`` is then the tool's value validated into it (the same unwrapped value
        ``data`` always is), typed ``T`` for a type checker (``ToolResult[T]``), and a value that does not fit
        raises :class:`ToolOutputError`. A failed call (``isError``) has no ``data``: reading it raises
        :class:`ToolCallError`, and ``text`` holds the tool's message. A form that is not a class (``int | None``,
        ``Literal[...]``) validates too but is ``Any`` to a type checker; ``ResultType[int | None]`` keeps its type.

        The structured output is validated against the tool's ``outputSchema`` (``validate=False`` or the client's
        ``validate_output=False`` skips it): a mismatch raises :class:`ToolOutputError`. ``raise_on_error`` turns
        ``isError: true`` into :class:`ToolCallError`. Cancelling the awaiting task sends
        ``notifications/cancelled``; so does a timeout (then :class:`~mcpkit.protocol.errors.RequestTimeout`).
        ``timeout`` is a deadline: progress does not extend it unless ``reset_timeout_on_progress=True`` (then
        never past the hard maximum, 600 s by default).
        """
        check = self.validate_output if validate is None else validate
        tool = self._tools.get(name)
        lookup = tool is None and (check or self.target.is_http) and not self._tools_complete
        options = (timeout, on_progress, meta, check, result_type, raise_on_error, reset_timeout_on_progress)
        if lookup and self._telemetry is not None:  # (the tools/list sent first: a child of the call's span)
            with self._telemetry.call("tools/call", {"name": name}):
                return await self._call_tool(name, arguments, tool, lookup, *options)
        return await self._call_tool(name, arguments, tool, lookup, *options)

    async def _call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None,
        tool: Tool | None,
        lookup: bool,
        timeout: float | EllipsisType | None,
        on_progress: ProgressCallback | None,
        meta: JSONDict | None,
        check: bool,
        result_type: Any,
        raise_on_error: bool,
        reset_timeout_on_progress: bool,
    ) -> ToolResult[Any]:
        """:meth:`call_tool`, ``lookup``: whether the tool's definition is to be learned first."""
        limit: float | None = None  # the call's whole timeout, when the lookup below took part of it
        if lookup:
            # the tool's definition first (its output schema), within the call's deadline: the call gets the rest
            limit = self.timeout if timeout is ... else timeout
            started = time.monotonic()
            try:
                tool = await asyncio.wait_for(self.get_tool(name), limit)
            except MCPError:
                pass
            except TimeoutError:
                what = f"waiting for tools/list, to learn the output schema of {name!r}: the call was not sent"
                raise RequestTimeout("tools/call", float(limit or 0), what) from None
            if limit is not None:
                timeout = max(limit - (time.monotonic() - started), 0.001)
        safe = bool(tool and tool.annotations and (tool.annotations.read_only_hint or tool.annotations.idempotent_hint))
        args = dict(arguments or {})
        try:
            if tool is not None and tool.execution is not None and tool.execution.task_support == "required":
                task = (timeout, on_progress, meta, check, result_type, raise_on_error)
                return await self._call_required_task(name, args, tool, *task)
            raw = await self._call(
                "tools/call",
                lambda s: s.call_tool(
                    name,
                    args,
                    timeout=timeout,
                    on_progress=on_progress,
                    meta=meta,
                    reset_timeout_on_progress=reset_timeout_on_progress,
                ),
                safe=safe,
            )
        except RequestTimeout as exc:
            if limit is None or exc.timeout >= limit:
                raise
            # the error names the whole timeout the caller gave, not what was left of it after the lookup
            spent = limit - exc.timeout
            raise RequestTimeout("tools/call", limit, f"{spent:.2g}s of it went to tools/list first") from None
        return self._tool_result(name, raw, tool, check, result_type, raise_on_error)

    async def _call_required_task(
        self,
        name: str,
        args: JSONDict,
        tool: Tool,
        timeout: Any,
        on_progress: ProgressCallback | None,
        meta: JSONDict | None,
        check: bool,
        result_type: Any,
        raise_on_error: bool,
    ) -> ToolResult[Any]:
        """``call_tool`` of a tool that requires a task (2025-11-25 ``execution.taskSupport``): run as one and
        waited for; the deadline covers the whole wait and cancels the task when it passes."""
        handle = await self.call_tool_as_task(name, args, on_progress=on_progress, meta=meta, validate=check)
        handle._finish = lambda raw: self._tool_result(name, raw, tool, check, result_type, raise_on_error)
        limit = self.timeout if timeout is ... else timeout
        try:
            result: ToolResult[Any] = await handle.result(timeout=limit)
        except TimeoutError:
            with contextlib.suppress(Exception):
                await handle.cancel()
            raise RequestTimeout("tools/call", float(limit or 0)) from None
        return result

    def _tool_result(
        self, name: str, raw: Any, tool: Tool | None, check: bool, result_type: Any, raise_on_error: bool
    ) -> ToolResult[Any]:
        """What a call's result becomes: a ToolResult, its output checked, typed, raised on error if asked."""
        if isinstance(raw, dict):
            raw = checked(CallToolResult, raw, "tools/call")
        result: ToolResult[Any] = ToolResult(raw, tool, name=name)
        if check and tool is not None and tool.output_schema is not None and not result.is_error:
            check_output(tool, result, self._validators)
        if result_type is not None and not result.is_error:
            result.typed = typed_data(name, result, result_type)
        if raise_on_error and result.is_error:
            raise ToolCallError(f"tool {name!r} failed: {result.text or '(no message)'}", result)
        return result

    @overload
    async def call_tool_as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: int | None = None,
        on_progress: ProgressCallback | None = None,
        on_status: StatusCallback | None = None,
        meta: JSONDict | None = None,
        result_type: type[ResultType[T]],
        raise_on_error: bool = False,
        validate: bool | None = None,
    ) -> TaskHandle[T]: ...

    @overload
    async def call_tool_as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: int | None = None,
        on_progress: ProgressCallback | None = None,
        on_status: StatusCallback | None = None,
        meta: JSONDict | None = None,
        result_type: type[T],
        raise_on_error: bool = False,
        validate: bool | None = None,
    ) -> TaskHandle[T]: ...

    @overload
    async def call_tool_as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: int | None = None,
        on_progress: ProgressCallback | None = None,
        on_status: StatusCallback | None = None,
        meta: JSONDict | None = None,
        result_type: Any = None,
        raise_on_error: bool = False,
        validate: bool | None = None,
    ) -> TaskHandle[Any]: ...

    async def call_tool_as_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        ttl: int | None = None,
        on_progress: ProgressCallback | None = None,
        on_status: StatusCallback | None = None,
        meta: JSONDict | None = None,
        result_type: Any = None,
        raise_on_error: bool = False,
        validate: bool | None = None,
    ) -> TaskHandle[Any]:
        """Start a tool as a task; returns its :class:`~mcpkit.client.tasks.TaskHandle` at once: ``status()``,
        ``await handle.result()`` (the :class:`ToolResult`, checked as :meth:`call_tool` checks it), ``cancel()``,
        ``handle.task_id`` (keep it to follow the task later, from this client or another). ``on_progress``
        receives ``(progress, total, message)``, ``on_status`` each new :class:`~mcpkit.protocol.types.Task` state.

        2025-11-25: the call carries ``params.task`` (``ttl``: milliseconds the server should keep it); the server
        must declare ``tasks.requests.tools.call`` and the tool ``execution.taskSupport``. 2026-07-28: the server
        must declare the tasks extension; it decides, and a call it answers at once gives a handle already done.
        ``ttl`` is ignored there (the revision has no way to ask: the server decides how long it keeps the task, in
        ``handle.task.ttl``); the client says so in one debug line of the ``mcpkit.client`` logger.
        Otherwise :class:`~mcpkit.protocol.errors.CapabilityNotSupported`."""
        check = self.validate_output if validate is None else validate
        tool = self._tools.get(name)
        lookup = tool is None and check and not self._tools_complete
        scope = self._telemetry.call("tools/call", {"name": name}) if lookup and self._telemetry is not None else None
        with scope or contextlib.nullcontext():  # (the tools/list sent first: a child of the call's span)
            if lookup:
                with contextlib.suppress(MCPError):
                    tool = await self.get_tool(name)
            args = dict(arguments or {})
            handle: TaskHandle[Any] = await self._call(
                "tools/call", lambda s: start_tool_task(s, s._tasks, name, args, ttl, meta, on_progress, on_status)
            )
        handle._finish = lambda raw: self._tool_result(name, raw, tool, check, result_type, raise_on_error)
        return handle

    async def task(
        self, task_id: str, *, on_progress: ProgressCallback | None = None, on_status: StatusCallback | None = None
    ) -> TaskHandle[Any]:
        """A handle on a task this client (or another, with the same credentials) started earlier: its state now,
        then ``result()``, ``cancel()`` as for :meth:`call_tool_as_task`."""
        session = self.session
        modern = session.features is not None and session.features.modern
        placeholder = Task(task_id=task_id, status="working")
        handle: TaskHandle[Any] = TaskHandle(
            session, placeholder, modern=modern, on_progress=on_progress, on_status=on_status
        )
        handle._finish = lambda raw: self._tool_result("", raw, None, False, None, False)
        await handle.status()
        return handle


def _retrieved(done: asyncio.Future[Any]) -> None:
    """Reads the outcome of a shared lookup, so that one every caller gave up on logs no 'never retrieved'."""
    if not done.cancelled():
        done.exception()


__all__ = ["ToolMethods"]
