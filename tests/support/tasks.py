"""Shared by the task tests: a server with task tools of every kind, and raw peers that speak to it."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from mcpkit import Context, MCPKit, TaskFailed, ToolError
from mcpkit.protocol.versions import TASKS_EXTENSION
from mcpkit.server.request_context import ScopeAuthorization, authorize_as
from mcpkit.transports.memory import create_memory_pair
from support.core import RawPeer

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
TASK_CAPS = {"elicitation": {"form": {}}, "extensions": {TASKS_EXTENSION: {}}}


def modern_meta(caps: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": TASK_CAPS if caps is None else caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    }


class Probe:
    """What the tools of :func:`make_app` record: calls, threads, cancellations (shared with the test)."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.threads: list[str] = []
        self.cancelled: list[str] = []
        self.release = asyncio.Event()

    def hit(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1


def make_app(probe: Probe | None = None, **engine: Any) -> tuple[MCPKit, Probe]:
    """A server with: a plain tool, task tools (optional, required, a plain def one), one that asks the user, one
    that fails as a tool, one that fails with a JSON-RPC error, one that waits for the test to release it."""
    probe = probe or Probe()
    app = MCPKit("tasks-test")
    if engine:
        app.enable_tasks(**engine)

    @app.tool
    def plain(x: int = 1) -> str:
        """Never a task."""
        probe.hit("plain")
        return str(x * 2)

    @app.tool(task=True)
    async def slow(ctx: Context, seconds: float = 0.2, steps: int = 2) -> str:
        """Reports progress while it sleeps."""
        probe.hit("slow")
        try:
            for i in range(steps):
                await asyncio.sleep(seconds / max(steps, 1))
                await ctx.report_progress(i + 1, steps, f"step {i + 1}")
        except asyncio.CancelledError:
            probe.cancelled.append("slow")
            raise
        return f"slept {seconds}"

    @app.tool(task="required")
    async def must(ctx: Context) -> str:
        """Runs only as a task."""
        probe.hit("must")
        await ctx.become_task()
        return "done as a task"

    @app.tool(task=True)
    def crunch(n: int = 3) -> int:
        """A plain def task tool: runs on a worker thread."""
        probe.hit("crunch")
        probe.threads.append(threading.current_thread().name)
        return sum(range(n))

    @app.tool(task=True)
    async def confirm(ctx: Context, what: str = "it") -> str:
        """Becomes a task, then asks the user."""
        await ctx.become_task()
        await ctx.report_status("waiting for the user")
        answer = await ctx.elicit(f"Delete {what}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        ok = answer.accepted and bool((answer.content or {}).get("ok"))
        return f"{'deleted' if ok else 'kept'} {what}"

    @app.tool(task=True)
    async def toolfail() -> str:
        """Fails as a tool (isError)."""
        await asyncio.sleep(0.01)
        raise ToolError("nope")

    @app.tool(task=True)
    async def protofail() -> str:
        """Fails with a JSON-RPC error."""
        await asyncio.sleep(0.01)
        raise TaskFailed("broken", {"why": "test"}, code=-32010)

    @app.tool(task=True)
    async def hold(ctx: Context) -> str:
        """Waits until the test releases it (or it is cancelled)."""
        probe.hit("hold")
        try:
            await probe.release.wait()
        except asyncio.CancelledError:
            probe.cancelled.append("hold")
            raise
        return "released"

    @app.tool(task=True)
    async def asks_first(ctx: Context) -> str:
        """Asks before it waits (2026-07-28: an input_required round trip, before any task exists)."""
        answer = await ctx.elicit("Go?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        await asyncio.sleep(0.01)
        return f"went: {answer.action}"

    @app.tool(task=True)
    async def big(size: int = 10) -> str:
        await asyncio.sleep(0)
        return "x" * size

    return app, probe


@contextlib.asynccontextmanager
async def raw(app: MCPKit, principal: str | None = None, scopes: tuple[str, ...] = ()) -> AsyncIterator[RawPeer]:
    """A raw JSON-RPC peer on an in-memory connection to ``app`` (as ``principal`` when given)."""
    c, s = create_memory_pair()
    token = authorize_as(ScopeAuthorization(principal, scopes)) if principal is not None else None
    try:
        task = asyncio.get_running_loop().create_task(app.serve(s))
    finally:
        if token is not None:
            from mcpkit.server.request_context import CURRENT_AUTHORIZATION

            CURRENT_AUTHORIZATION.reset(token)
    try:
        yield RawPeer(c)
    finally:
        await c.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 5)


async def call(peer: RawPeer, rid: Any, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One request; returns the response (result or error)."""
    reply: dict[str, Any] = await peer.request(rid, method, params, timeout=10)
    return reply


async def modern(peer: RawPeer, rid: Any, method: str, params: dict[str, Any] | None = None, caps: Any = None) -> Any:
    """A 2026-07-28 request (the tasks extension declared unless ``caps`` says otherwise)."""
    p = dict(params or {})
    p["_meta"] = {**p.get("_meta", {}), **modern_meta(caps)}
    return await call(peer, rid, method, p)


async def wait_status(
    peer: RawPeer, task_id: str, statuses: tuple[str, ...], *, era: str = LEGACY, timeout: float = 10.0
) -> dict[str, Any]:
    """Poll tasks/get until the task is in one of ``statuses``; returns that result."""
    deadline = asyncio.get_running_loop().time() + timeout
    n = 0
    while True:
        n += 1
        rid = f"poll-{task_id[:6]}-{n}"
        reply = await (
            call(peer, rid, "tasks/get", {"taskId": task_id})
            if era == LEGACY
            else modern(peer, rid, "tasks/get", {"taskId": task_id})
        )
        result: dict[str, Any] = reply["result"]
        if result["status"] in statuses:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"task {task_id} stayed {result['status']}")
        await asyncio.sleep(0.02)
