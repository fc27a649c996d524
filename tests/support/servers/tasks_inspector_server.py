"""A server with a tool that runs as a task (both protocol forms), for the inspector's task tests."""

from __future__ import annotations

import asyncio

from mcpkit import Context, MCPKit

app = MCPKit("tasks-demo")


@app.tool(task=True)
async def brew(ctx: Context, steps: int = 3, delay_ms: int = 100) -> str:
    """Brew slowly, as a task, reporting each step.

    Args:
        steps: How many steps.
        delay_ms: Milliseconds per step.
    """
    for i in range(steps):
        await asyncio.sleep(delay_ms / 1000)
        await ctx.report_progress(i + 1, steps, f"step {i + 1}")
    return f"brewed in {steps} steps"


if __name__ == "__main__":
    app.run()
