"""A server whose every ``tools/call`` answer shows whether an interceptor ran around it, and which records its
messages with a tap (the server of tests/server/test_interceptors.py and tests/engine/test_tap.py, in process and as
the stdio script tests/support/servers/intercepted_server.py).

Tools: ``echo`` (a plain ``def`` that runs inline: the inline path), ``learned`` (a plain ``def`` with the default
policy, inline once learned), ``threaded`` (a plain ``def`` on a worker thread), ``slow`` (an ``async def`` that
reports progress first: an SSE answer over Streamable HTTP without ``json_response``), ``seen`` (what the
interceptor and the tap saw, as JSON text).
"""

from __future__ import annotations

import json
import threading
from typing import Any

from mcpkit import Context, MCPKit
from mcpkit.engine.tap import TapRecorder
from mcpkit.server.interceptors import Call, CallNext, ToolCall

MARK = "intercepted"


def make_app() -> tuple[MCPKit, list[tuple[str, str]], TapRecorder]:
    """The app, the list of (method, call type) its interceptor saw, and its tap's recorder."""
    app = MCPKit("intercepted", sync_learn_calls=1)
    seen: list[tuple[str, str]] = []
    recorder = TapRecorder(max_events=10_000)

    @app.tool(thread=False)
    def echo(text: str) -> str:
        seen.append(("inline" if threading.current_thread() is threading.main_thread() else "worker", "echo"))
        return text

    @app.tool
    def learned(text: str) -> str:
        return text

    @app.tool(thread=True)
    def threaded(text: str) -> str:
        return text

    @app.tool
    async def slow(ctx: Context) -> str:
        await ctx.report_progress(1, 2)
        return "slow"

    @app.tool(thread=False)
    def seen_so_far() -> str:
        events = [[e.direction, e.kind, e.method, e.id if not isinstance(e.id, float) else None] for e in recorder]
        return json.dumps({"seen": seen, "tap": events})

    async def mark(call: Call, call_next: CallNext) -> Any:
        seen.append((call.method, type(call).__name__))
        result = await call_next(call)
        if isinstance(call, ToolCall) and call.name != "seen_so_far":
            result = {**result, "content": [*result["content"], {"type": "text", "text": MARK}]}
        return result

    app.add_interceptor(mark)
    app.add_tap(recorder)
    return app, seen, recorder
