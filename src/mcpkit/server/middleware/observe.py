"""Structured request logging and timing per method and per tool.

:class:`RequestLogging` writes one record per request to the ``mcpkit.requests`` logger: the method, what it was
about (a tool's or prompt's name, a resource's URI), the request id, a label of the session, the principal, the
protocol revision, the duration and the outcome (``ok``, ``tool_error`` for an ``isError`` result, ``error`` with
the JSON-RPC code). What it never writes: arguments' values, results, ``_meta``, ``requestState`` or
``inputResponses``, HTTP headers or tokens, the HTTP session id (a per-process label stands for the session).
``include_arguments=True`` adds the arguments' names (never their values).

:class:`Timing` keeps, per method and per tool (and prompt), the count, errors, mean, maximum and p50/p95/p99
(from a fixed log-scale histogram: constant memory per entry), in a table of at most ``max_entries`` labels, least
recently used dropped; ``stats()`` reads it.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import orjson

from ...protocol.errors import MCPError
from ..interceptors import Call, CallNext
from .base import Middleware, session_label, shown, target_of

JSONDict = dict[str, Any]
request_logger: logging.Logger = logging.getLogger("mcpkit.requests")

DEFAULT_MAX_TIMING_ENTRIES = 1_000
"""How many method/tool labels :class:`Timing` keeps (least recently used dropped)."""

# histogram bucket upper bounds, in ms: 0.01 ms .. ~20 min, 25% apart
_BOUNDS: tuple[float, ...] = tuple(0.01 * 1.25**i for i in range(85))


def _outcome(result: Any) -> str:
    return "tool_error" if type(result) is dict and result.get("isError") is True else "ok"


class RequestLogging(Middleware):
    """One structured record per request (see the module docstring).

    Args:
        level: the level of a request's record (errors: ``error_level``).
        logger: where records go (default ``mcpkit.requests``); each carries the record as ``record.mcp``.
        as_json: the message is the record as JSON (for log pipelines), else a short line.
        sink: also give each record (a dict) to ``sink(record)``.
        include_arguments: add the names of a call's arguments (never values).
    """

    name = "logging"

    def __init__(
        self,
        *,
        level: int = logging.INFO,
        error_level: int = logging.WARNING,
        logger: logging.Logger | None = None,
        as_json: bool = False,
        sink: Callable[[JSONDict], None] | None = None,
        include_arguments: bool = False,
    ) -> None:
        super().__init__()
        self.level = level
        self.error_level = error_level
        self.logger: logging.Logger = logger or request_logger
        self.as_json = as_json
        self.sink = sink
        self.include_arguments = include_arguments

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        logger = self.logger
        if self.sink is None and not logger.isEnabledFor(min(self.level, self.error_level)):
            return await call_next(call)
        start = time.perf_counter()
        try:
            result = await call_next(call)
        except BaseException as exc:
            code = exc.code if isinstance(exc, MCPError) else None
            kind = "cancelled" if not isinstance(exc, Exception) else type(exc).__name__
            self._emit(call, start, "error", code, kind)
            raise
        self._emit(call, start, _outcome(result), None, None)
        return result

    def _emit(self, call: Call, start: float, outcome: str, code: int | None, kind: str | None) -> None:
        ms = (time.perf_counter() - start) * 1000
        features = call.context.features
        record: JSONDict = {
            "method": call.method,
            "target": target_of(call),
            "id": call.request_id,
            "session": session_label(call),
            "principal": call.principal,
            "version": features.version,
            "era": "modern" if features.modern else "handshake",
            "ms": round(ms, 3),
            "outcome": outcome,
        }
        if code is not None:
            record["code"] = code
        if kind is not None:
            record["error"] = kind
        if self.include_arguments and call.method in ("tools/call", "prompts/get"):
            args = call.params.get("arguments")
            record["arguments"] = sorted(str(k) for k in args) if isinstance(args, dict) else []
        if self.sink is not None:
            self.sink(record)
        level = self.level if outcome != "error" else self.error_level
        logger = self.logger
        if not logger.isEnabledFor(level):
            return
        if self.as_json:
            msg, args = "%s", (orjson.dumps(record).decode(),)
        else:
            target = f" {record['target']}" if record["target"] is not None else ""
            tail = f" {code}" if code is not None else (f" {kind}" if kind else "")
            msg, args = "%s%s %s%s %.1f ms", (call.method, target, outcome, tail, ms)
        # made and handled directly: Logger.log would walk the stack for a caller's file and line (half its cost),
        # which would name this module anyway
        logger.handle(logger.makeRecord(logger.name, level, __file__, 0, msg, args, None, extra={"mcp": record}))


class _Stats:
    __slots__ = ("buckets", "count", "errors", "max_ms", "total_ms")

    def __init__(self) -> None:
        self.count = 0
        self.errors = 0
        self.total_ms = 0.0
        self.max_ms = 0.0
        self.buckets = [0] * (len(_BOUNDS) + 1)

    def add(self, ms: float, failed: bool) -> None:
        self.count += 1
        self.errors += failed
        self.total_ms += ms
        if ms > self.max_ms:
            self.max_ms = ms
        self.buckets[bisect.bisect_left(_BOUNDS, ms)] += 1

    def quantile(self, q: float) -> float:
        rank = q * self.count
        seen = 0
        for i, n in enumerate(self.buckets):
            seen += n
            if seen >= rank and n:
                return min(_BOUNDS[i] if i < len(_BOUNDS) else self.max_ms, self.max_ms)
        return self.max_ms

    def summary(self) -> JSONDict:
        return {
            "count": self.count,
            "errors": self.errors,
            "mean_ms": round(self.total_ms / self.count, 3) if self.count else 0.0,
            "max_ms": round(self.max_ms, 3),
            "p50_ms": round(self.quantile(0.5), 3),
            "p95_ms": round(self.quantile(0.95), 3),
            "p99_ms": round(self.quantile(0.99), 3),
        }


class Timing(Middleware):
    """Durations per method and per tool/prompt (see the module docstring).

    Args:
        max_entries: labels kept (``tools/list``, ``tools/call add``, ...), least recently used dropped.
        slow_ms: log a warning (``mcpkit.requests``) for a request slower than this (None: never).
    """

    name = "timing"

    def __init__(self, *, max_entries: int = DEFAULT_MAX_TIMING_ENTRIES, slow_ms: float | None = None) -> None:
        super().__init__()
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.slow_ms = slow_ms
        self._table: OrderedDict[str, _Stats] = OrderedDict()

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        start = time.perf_counter()
        failed = True
        try:
            result = await call_next(call)
            failed = type(result) is dict and result.get("isError") is True
            return result
        finally:
            self._record(call, (time.perf_counter() - start) * 1000, failed)

    def _record(self, call: Call, ms: float, failed: bool) -> None:
        method = call.method
        label = method
        if method == "tools/call" or method == "prompts/get":
            name = call.params.get("name")
            if type(name) is str:
                label = f"{method} {name[:128]}"
        table = self._table
        stats = table.get(label)
        if stats is None:
            stats = table[label] = _Stats()
            if len(table) > self.max_entries:
                table.popitem(last=False)
        else:
            table.move_to_end(label)
        stats.add(ms, failed)
        if self.slow_ms is not None and ms > self.slow_ms:
            request_logger.warning("slow request: %s took %.1f ms", shown(label), ms)

    def stats(self) -> dict[str, JSONDict]:
        """Per label (``tools/list``, ``tools/call <name>``, ...): count, errors, mean/max/p50/p95/p99 in ms."""
        return {label: stats.summary() for label, stats in self._table.items()}

    def reset(self) -> None:
        """Forget every measure."""
        self._table.clear()


__all__ = ["DEFAULT_MAX_TIMING_ENTRIES", "RequestLogging", "Timing", "request_logger"]
