"""A server for tests/cli/test_tasks.py: a task that reports progress, and one that waits until it is cancelled
(it writes ``cancelled`` to the file named by ``TASKS_MARKER`` then)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from mcpkit import Context, MCPKit

app = MCPKit("tasks-cli")


@app.tool(task=True)
async def crunch(ctx: Context, steps: int = 3) -> str:
    """Reports progress, then answers."""
    await ctx.become_task()
    for i in range(steps):
        await asyncio.sleep(0.3)
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return f"crunched {steps}"


@app.tool(task="required")
async def hold() -> str:
    """Runs until cancelled."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        Path(os.environ["TASKS_MARKER"]).write_text("cancelled")
        raise
    return "held"


@app.tool(task=True)
async def mark(seconds: float = 1.0) -> str:
    """Writes ``done`` to the file named by ``TASKS_MARKER`` after ``seconds``."""
    await asyncio.sleep(seconds)
    Path(os.environ["TASKS_MARKER"]).write_text("done")
    return "marked"


if __name__ == "__main__":
    app.run()
