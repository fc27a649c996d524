"""One worker of a task server on a shared Redis (tests/stores/test_redis_tasks.py): ``REDIS_URL`` and ``TASKS_PREFIX``
from the environment, served by ``mcpkit run tests/support/servers/tasks_worker.py --transport http --port N``."""

from __future__ import annotations

import asyncio
import os
import sys

from mcpkit import Context, MCPKit
from mcpkit.stores.redis import RedisTaskStore

NAME = os.environ.get("WORKER_NAME", "?")
app = MCPKit(f"tasks-worker-{NAME}", request_state_keys=[b"k" * 32])
app.enable_tasks(
    RedisTaskStore(
        os.environ["REDIS_URL"],
        prefix=os.environ.get("TASKS_PREFIX", "tasks:"),
        runner_timeout=float(os.environ.get("TASKS_RUNNER_TIMEOUT", "10")),
    )
)


@app.tool(task=True)
async def slow(seconds: float = 0.3) -> str:
    """Sleeps, then says which worker ran it."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} on {NAME}"


@app.tool(task=True)
async def confirm(ctx: Context, what: str = "it") -> str:
    """Becomes a task, then asks the user; says which worker ran it."""
    await ctx.become_task()
    answer = await ctx.elicit(f"Delete {what}?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
    ok = answer.accepted and bool((answer.content or {}).get("ok"))
    return f"{'deleted' if ok else 'kept'} {what} on {NAME}"


@app.tool(task=True)
async def hold(seconds: float = 30.0) -> str:
    """Runs long; tells stderr when it is cancelled."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        print(f"hold cancelled on {NAME}", file=sys.stderr, flush=True)
        raise
    return "held"
