"""The server of the scale-out fault tests (served by `mcpkit run tests/support/servers/scale_server.py -t http` with
the MCPKIT_* configuration): notifications a test can tell apart (one URI each), and tools that say which worker
process answered or ran a task."""

from __future__ import annotations

import asyncio
import os

from mcpkit import MCPKit

app = MCPKit("scale-faults")


@app.resource("mcpkit://item/{n}", name="item", mime_type="text/plain")
def item(n: int) -> str:
    """Item ``n``."""
    return f"item {n}"


@app.tool
async def touch(uri: str) -> str:
    """Tell the subscribers of ``uri`` that it changed (on every worker)."""
    await app.notify_resource_updated(uri)
    return f"touched {uri}"


@app.tool
def whoami() -> int:
    """The process id of the worker that answered."""
    return os.getpid()


@app.tool
async def slow(seconds: float) -> str:
    """Work for ``seconds`` (a request in flight while the worker is told to stop)."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@app.tool(task=True)
async def whoami_later(seconds: float = 0.2) -> int:
    """Work for ``seconds`` (as a task when asked), then say which worker process ran it."""
    await asyncio.sleep(seconds)
    return os.getpid()
