"""Error handling and the size/time guard.

:class:`ErrorHandling` turns an unexpected exception (anything but an ``MCPError``) into an internal error whose
message is only an error id (the exception and its traceback go to the ``mcpkit.requests`` log with that id), or
into the ``MCPError`` its ``transform`` chooses; it counts errors per method and exception type, ``isError`` tool
results too (bounded). A tool's own exceptions are already ``isError`` results (masked the same way by the tool
machinery): what reaches this middleware is what a low-level handler or an inner middleware raised.

:class:`Guard` bounds what one request may take: the size of its params, the time it runs, the size of its
result. A tool call over a bound gets an ``isError`` result saying so (the model can read it); any other request
an error (-32602 for params, -32603 for time and result).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from ...protocol.errors import InternalError, InvalidParams, MCPError
from ..interceptors import Call, CallNext
from ..tools import error_result
from .base import Middleware

logger: logging.Logger = logging.getLogger("mcpkit.requests")
JSONDict = dict[str, Any]

DEFAULT_MAX_ERROR_KINDS = 256
"""How many (method, exception type) counters :class:`ErrorHandling` keeps (least recently used dropped)."""


class ErrorHandling(Middleware):
    """Mask unexpected exceptions behind an error id (see the module docstring).

    Args:
        transform: ``transform(exc, call)`` may return the ``MCPError`` to answer with (None: the masked internal
            error).
        max_kinds: counters kept.
    """

    name = "errors"

    def __init__(
        self,
        *,
        transform: Callable[[Exception, Call], MCPError | None] | None = None,
        max_kinds: int = DEFAULT_MAX_ERROR_KINDS,
    ) -> None:
        super().__init__()
        self.transform = transform
        self.max_kinds = max_kinds
        self._counts: OrderedDict[tuple[str, str], int] = OrderedDict()

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        try:
            result = await call_next(call)
        except MCPError as exc:
            self._count(call.method, type(exc).__name__)
            raise
        except Exception as exc:
            self._count(call.method, type(exc).__name__)
            if self.transform is not None:
                mapped = self.transform(exc, call)
                if mapped is not None:
                    raise mapped from None
            error_id = uuid.uuid4().hex[:12]
            logger.error("%s failed (error id %s)", call.method, error_id, exc_info=exc)
            raise InternalError(f"internal error (error id {error_id})") from None
        if type(result) is dict and result.get("isError") is True:
            self._count(call.method, "isError")
        return result

    def _count(self, method: str, kind: str) -> None:
        key = (method, kind)
        counts = self._counts
        counts[key] = counts.pop(key, 0) + 1
        if len(counts) > self.max_kinds:
            counts.popitem(last=False)

    def counts(self) -> dict[str, int]:
        """Errors seen, by ``"<method> <exception type>"``."""
        return {f"{m} {k}": n for (m, k), n in self._counts.items()}


class Guard(Middleware):
    """Bounds per request (see the module docstring).

    Args:
        timeout: seconds a request may run (a sync tool on a worker thread finishes in the background: the
            request is answered at once).
        tool_timeouts: per tool name, instead of ``timeout``.
        max_params_bytes: the largest params (as JSON).
        max_result_bytes: the largest result (as JSON, before shaping).
    """

    name = "guard"

    def __init__(
        self,
        *,
        timeout: float | None = None,
        tool_timeouts: Mapping[str, float] | None = None,
        max_params_bytes: int | None = None,
        max_result_bytes: int | None = None,
    ) -> None:
        super().__init__()
        for value in (timeout, max_params_bytes, max_result_bytes, *(tool_timeouts or {}).values()):
            if value is not None and value <= 0:
                raise ValueError("Guard bounds must be positive")
        self.timeout = timeout
        self.tool_timeouts: dict[str, float] = dict(tool_timeouts or {})
        self.max_params_bytes = max_params_bytes
        self.max_result_bytes = max_result_bytes

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        is_tool = call.method == "tools/call"
        limit = self.max_params_bytes
        if limit is not None and len(orjson.dumps(call.params)) > limit:
            message = f"{call.method}: params larger than {limit} bytes"
            if is_tool:
                return error_result(message)
            raise InvalidParams(message)
        timeout = self.timeout
        if is_tool and self.tool_timeouts:
            timeout = self.tool_timeouts.get(str(call.params.get("name")), timeout)
        if timeout is None:
            result = await call_next(call)
        else:
            deadline = asyncio.timeout(timeout)
            try:
                async with deadline:
                    result = await call_next(call)
            except TimeoutError:
                if not deadline.expired():
                    raise  # (the handler's own timeout, not this one)
                message = f"{call.method}: no answer within {timeout:g} s"
                if is_tool:
                    return error_result(message)
                raise InternalError(message) from None
        limit = self.max_result_bytes
        if limit is not None and type(result) is dict and len(orjson.dumps(result)) > limit:
            message = f"{call.method}: result larger than {limit} bytes"
            if is_tool:
                return error_result(message)
            raise InternalError(message)
        return result


__all__ = ["DEFAULT_MAX_ERROR_KINDS", "ErrorHandling", "Guard"]
