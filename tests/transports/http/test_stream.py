"""A POST's answer turns into an SSE stream when something is sent before it. When that first message comes from
another task than the request's (a tool's side task reporting progress), the handler may end while the stream is
being opened: the answer must still be written, after the message, whatever the ASGI server's ``send`` does."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import pytest

from mcpkit import Client, Context, MCPKit
from mcpkit.stores.redis import RedisEventStore
from mcpkit.transports.http import create_app
from support.asgi import serve_asgi
from support.redis_server import _free_port

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


async def test_an_event_store_that_keeps_failing_is_logged_once_a_while_not_once_per_event(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = MCPKit("store-down")

    @app.tool
    async def steps(ctx: Context) -> str:
        """Report progress twice (an SSE answer: three events to keep)."""
        await ctx.report_progress(1, 2)
        await ctx.report_progress(2, 2)
        return "done"

    store = RedisEventStore(f"redis://127.0.0.1:{_free_port()}/0", timeout=0.5)  # (Redis unreachable)
    caplog.set_level(logging.WARNING, logger="mcpkit.http")
    async with (
        serve_asgi(create_app(app, event_store=store)) as port,
        Client(f"http://127.0.0.1:{port}/mcp", mode="handshake") as client,
    ):
        for _ in range(20):  # 60 events the store refuses
            seen: list[float] = []
            result = await asyncio.wait_for(client.call_tool("steps", {}, on_progress=_into(seen)), 10)
            assert result.text == "done" and seen == [1.0, 2.0]  # (the live stream goes on)
    failures = [r for r in caplog.records if r.getMessage().startswith("event store: could not keep")]
    assert len(failures) == 1, [r.getMessage() for r in failures]  # (one line per 10 s, not one per event)
    assert "Redis is unavailable" in failures[0].getMessage()  # (the reason in the line itself)
    assert failures[0].exc_info is None  # (no traceback for an unavailable store: nothing to debug in mcpkit)
