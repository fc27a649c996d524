"""An MCPKit app of plain ``def`` functions for the issue 16 (sync path) tests, served over stdio.

Each function sleeps ``seconds`` (0: returns at once, without a syscall) and answers where it ran: ``loop``
(inline, on the event loop's thread) or ``thread`` (a worker thread). ``aping`` is an async tool.
``python sync_server.py [sync_long_ms]``.
"""

from __future__ import annotations

import sys
import threading
import time

from mcpkit import MCPKit

_ARG = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1][:1].isdigit() else "2.0"  # (`mcpkit run` leaves its own argv)
app = MCPKit("sync-test", sync_long_ms=float(_ARG), sync_learn_calls=10)


def _nap(seconds: float) -> str:
    if seconds > 0:
        time.sleep(seconds)
    return "loop" if threading.current_thread() is threading.main_thread() else "thread"


@app.tool
def nap(seconds: float) -> str:
    """Sleep, then say where it ran (learned policy)."""
    return _nap(seconds)


@app.tool(thread=True)
def nap_thread(seconds: float) -> str:
    """Sleep on a worker thread always (declared)."""
    return _nap(seconds)


@app.tool
async def aping() -> str:
    return "pong"


@app.resource("nap://{seconds}")
def nap_resource(seconds: float) -> str:
    return _nap(seconds)


@app.prompt
def nap_prompt(seconds: str) -> str:
    return _nap(float(seconds))


@app.completion(prompt="nap_prompt", argument="seconds")
def nap_complete(value: str) -> list[str]:
    return [_nap(float(value or 0))]


if __name__ == "__main__":
    app.run()
