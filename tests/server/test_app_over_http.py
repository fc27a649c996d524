"""MCPKit behind the Streamable HTTP transport (real uvicorn on 127.0.0.1): the lifespan runs although the ASGI app
never calls serve(), and everything.py works in both eras."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from mcpkit import Context, MCPKit
from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import StreamableHTTPClientTransport
from support.everything import MODES, Recorder, new_app, text_of
from support.mcp_http import running


async def test_lifespan_is_held_from_first_request_to_shutdown() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: MCPKit) -> AsyncIterator[str]:
        events.append("start")
        yield "ready"
        events.append("stop")

    app = MCPKit("http-life", lifespan=lifespan)

    @app.tool
    async def state(ctx: Context) -> str:
        return str(ctx.lifespan_state)

    async with running(app) as (base, _):
        for version in ("2025-11-25", "2026-07-28"):
            async with ClientSession(StreamableHTTPClientTransport(base + "/mcp"), protocol_version=version) as cs:
                assert text_of(await cs.call_tool("state", {})) == "ready"
        assert events == ["start"]
    assert events == ["start", "stop"]


@pytest.mark.parametrize("mode", MODES)
async def test_everything_over_streamable_http(mode: str) -> None:
    rec = Recorder()
    async with running(new_app()) as (base, _):
        transport = StreamableHTTPClientTransport(base + "/mcp")
        async with ClientSession(
            transport,
            mode=mode,
            sampling_handler=rec.on_sampling,
            elicitation_handler=rec.on_elicit,
            roots=["file:///h"],
            notification_handler=rec.on_notification,
        ) as cs:
            assert text_of(await cs.call_tool("ask_name", {})) == "Hello, Ada!"
            assert text_of(await cs.call_tool("sample", {"prompt": "x"})) == "The answer is 42."
            steps: list[float] = []
            await cs.call_tool("slow", {"steps": 2, "delay_ms": 1}, on_progress=lambda p, t, m: steps.append(p))
            assert steps == [1, 2]
            pages = 0
            cursor = None
            while True:
                page = await cs.list_resources(cursor)
                pages += 1
                cursor = page.next_cursor
                if not cursor:
                    break
            assert pages == 11
            if mode == "modern":
                async with cs.listen(resource_uris=["mcpkit://counter"]) as sub:
                    await cs.call_tool("touch", {})
                    assert (await sub.next(timeout=5))[0] == "notifications/resources/updated"
