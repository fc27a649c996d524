"""Apps with server middleware for the middleware tests, served over stdio by
``python tests/support/servers/middleware_apps.py <name>`` and over HTTP in-process (``build(name)``).

What a test needs to see of the server (its log lines, its timing table, how often a handler ran) it reads through
a tool of the app, so the same test drives stdio and HTTP alike.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

from mcpkit import Context, MCPKit
from mcpkit.protocol.errors import InvalidParams
from mcpkit.server.interceptors import CallNext, ListCall, ToolCall
from mcpkit.server.middleware import ErrorHandling, Guard, Middleware, RateLimit, RequestLogging, ResponseCache, Timing
from mcpkit.server.tools import ToolError


class Captured(logging.Handler):
    """Every log record of the process, formatted, at DEBUG (bounded: the last 2,000)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s %(mcp)s", defaults={"mcp": ""}))

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        if record.exc_info:
            text += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(text)
        del self.lines[:-2000]


class NoNegatives(Middleware):
    """A typed hook: refuses negative arguments of ``add`` and marks every tools/list page."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
        self.seen.append(f"call {call.name} as {call.principal}")
        if call.name == "add" and any(isinstance(v, int) and v < 0 for v in call.arguments.values()):
            raise InvalidParams("add: negative numbers are refused here")
        return await call_next(call)

    async def on_list_tools(self, call: ListCall, call_next: CallNext) -> Any:
        self.seen.append("list tools")
        result = await call_next(call)
        return {**result, "_meta": {"com.example/checked": True}}


class Buggy(Middleware):
    """An inner middleware with a bug: it raises on ``explode``."""

    async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
        if call.name == "explode":
            raise RuntimeError("the secret internals of explode")
        return await call_next(call)


def observed_app() -> MCPKit:
    """ErrorHandling, RequestLogging, Timing and a typed hook around a few tools; tools read what they saw."""
    app = MCPKit("observed")
    captured = Captured()
    root = logging.getLogger()
    root.addHandler(captured)
    root.setLevel(logging.DEBUG)
    timing = Timing()
    errors = ErrorHandling()
    hooks = NoNegatives()
    app.add_middleware(errors, RequestLogging(include_arguments=True), timing, hooks, Buggy())

    @app.tool
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool
    async def crash() -> str:
        raise RuntimeError("the secret internals of crash")

    @app.tool
    def explode() -> str:
        return "never reached"

    @app.tool
    def refuse() -> str:
        raise ToolError("not today")

    @app.tool
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"hello {answer.content['name'] if answer.content else answer.action}"

    @app.tool
    def log_lines() -> list[str]:
        return list(captured.lines)

    @app.tool
    def timing_stats() -> dict[str, Any]:
        return timing.stats()

    @app.tool
    def hook_seen() -> list[str]:
        return list(hooks.seen)

    @app.tool
    def error_counts() -> dict[str, int]:
        return errors.counts()

    return app


def limited_app() -> MCPKit:
    """A token bucket of 3, refilled at 1 a second, per caller; initialize and tools/list are free."""
    app = MCPKit("limited")
    app.add_middleware(RateLimit(1, burst=3, costs={"tools/list": 0}))

    @app.tool
    def hit() -> str:
        return "hit"

    return app


def cached_app() -> MCPKit:
    """ResponseCache over a public list (60 s) and a private resource naming its reader; counters of the work."""
    app = MCPKit("cached", list_ttl_ms=60_000, list_cache_scope="public")
    cache = ResponseCache()
    app.add_middleware(cache)
    counts = {"tools/list": 0, "reads": 0}

    @app.resource("data://me", ttl_ms=60_000, cache_scope="private")
    def me(ctx: Context) -> str:
        counts["reads"] += 1
        return f"you are {ctx.request_context.principal} (read {counts['reads']})"

    @app.resource("data://news", ttl_ms=60_000, cache_scope="public")
    def news() -> str:
        counts["reads"] += 1
        return f"news {counts['reads']}"

    @app.tool
    def asked() -> dict[str, int]:
        return {**counts, "entries": len(cache)}

    @app.tool
    def grow(name: str) -> str:
        app.add_tool(lambda: name, name=name)
        return "grown"

    @app.tool
    async def touch() -> str:
        await app.notify_resource_updated("data://news")
        return "touched"

    original = app._handlers["tools/list"]

    def counting(ctx: Any, params: Any) -> Any:
        counts["tools/list"] += 1
        return original(ctx, params)

    app.set_handler("tools/list", counting)
    return app


def guarded_app() -> MCPKit:
    """Guard: 3 s per request (the size checks run well within it on a loaded machine), results up to 2,000 bytes,
    params up to 1,000 bytes."""
    app = MCPKit("guarded")
    app.add_middleware(Guard(timeout=3, max_result_bytes=2_000, max_params_bytes=1_000))

    @app.tool
    async def nap(seconds: float) -> str:
        await asyncio.sleep(seconds)
        return "rested"

    @app.tool
    def blob(n: int) -> str:
        return "x" * n

    @app.tool
    def echo(text: str) -> str:
        return text

    @app.resource("data://big")
    def big() -> str:
        return "y" * 5_000

    return app


class Abandons(Middleware):
    """A middleware whose call of ``dropped`` ends in a ``CancelledError`` that is no cancellation of the request
    (what awaiting a task or future that other code cancelled gives)."""

    async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
        if call.name == "dropped":
            raise asyncio.CancelledError()
        return await call_next(call)


def stray_app() -> MCPKit:
    """Requests whose handlers end in a ``CancelledError`` of their own: ``orphan`` awaits a future other code
    cancelled, ``dropped`` is ended so by a middleware; ``ok`` answers."""
    app = MCPKit("stray")
    app.add_middleware(Abandons())

    @app.tool
    async def orphan() -> str:
        shared: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        shared.cancel()  # (the other code that owned it gave up)
        return await shared

    @app.tool
    def dropped() -> str:
        return "never"

    @app.tool
    def ok() -> str:
        return "ok"

    return app


APPS = {
    "observed": observed_app,
    "limited": limited_app,
    "cached": cached_app,
    "guarded": guarded_app,
    "stray": stray_app,
}


def build(name: str) -> MCPKit:
    """A fresh instance of the app called ``name``."""
    return APPS[name]()


if __name__ == "__main__":
    build(sys.argv[1]).run()
