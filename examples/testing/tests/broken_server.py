"""The notes server with one rule of the MCP specification broken on purpose: it answers a ping with a result that
is not empty ("Receiver MUST respond promptly with empty response"). The conformance test must catch it."""

from __future__ import annotations

from typing import Any

from notes.server import create_app

app = create_app()


async def pong(call: Any, call_next: Any) -> Any:
    await call_next(call)
    return {"pong": True}


app.add_interceptor(pong, methods=["ping"])
