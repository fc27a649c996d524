"""A POST's answer turns into an SSE stream when something is sent before it. When that first message comes from
another task than the request's (a tool's side task reporting progress), the handler may end while the stream is
being opened: the answer must still be written, after the message, whatever the ASGI server's ``send`` does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest

from mcpkit import Client, Context, MCPKit
from mcpkit.transports.http import create_app
from support.asgi import serve_asgi

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]


def _app() -> MCPKit:
    app = MCPKit("sse-race")

    @app.tool
    async def side(ctx: Context) -> str:
        """Report progress from another task, then answer before that task has run far."""

        async def report() -> None:
            await ctx.report_progress(1, 2)

        task = asyncio.ensure_future(report())
        await asyncio.sleep(0)
        task.add_done_callback(lambda t: t.exception())
        return "answered"

    return app


def _yielding(inner: Callable[..., Awaitable[None]]) -> Callable[..., Awaitable[None]]:
    """An ASGI middleware whose ``send`` yields to the loop before passing each message on (as a middleware built on
    streams does, or a server applying backpressure)."""

    async def app(scope: Scope, receive: Callable[[], Awaitable[Message]], send: Callable[[Message], Awaitable[None]]):
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return

        async def slow_send(message: Message) -> None:
            await asyncio.sleep(0)
            await send(message)

        await inner(scope, receive, slow_send)

    return app


def _into(seen: list[float]) -> Callable[[float, float | None, str | None], None]:
    return lambda progress, total, message: seen.append(progress)


@pytest.mark.parametrize("mode", ["modern", "handshake"])
async def test_an_answer_that_ends_while_its_stream_opens_is_still_sent(mode: str) -> None:
    async with (
        serve_asgi(_yielding(create_app(_app()))) as port,
        Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client,
    ):  # type: ignore[arg-type]
        for _ in range(5):
            seen: list[float] = []
            result = await asyncio.wait_for(client.call_tool("side", {}, on_progress=_into(seen)), 10)
            assert result.text == "answered" and not result.is_error
            assert seen in ([], [1.0])  # (the side task may report after the answer: then nothing is sent)
