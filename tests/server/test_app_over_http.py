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


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_integers_beyond_64_bits_reach_the_client_digit_for_digit(version: str) -> None:
    """JSON numbers have no size limit: a tool's result (structured and as text) and a log message holding an
    integer beyond 64 bits reach an HTTP client exactly, in both eras, not as an internal error."""
    import json

    import httpx

    from support.mcp_http import handshake_headers, modern_body, modern_headers, open_session, sse_events

    app = MCPKit("big-numbers")

    @app.tool
    async def power(exponent: int, ctx: Context) -> int:
        await ctx.info({"n": -(2**80)})
        return 2**exponent

    call = {"name": "power", "arguments": {"exponent": 70}}
    async with running(app) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        if version == "2026-07-28":
            body = modern_body("tools/call", call, log_level="info")
            r = await http.post(url, json=body, headers=modern_headers("tools/call", "power"))
        else:
            sid = await open_session(http, url, version)
            headers = handshake_headers(sid, version)
            await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel", "params": {"level": "info"}},
                headers=headers,
            )
            r = await http.post(
                url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}, headers=headers
            )
        assert r.status_code == 200, r.text
        got = (
            [json.loads(e["data"]) for e in sse_events(r.text) if e.get("data")]
            if r.text.startswith(("event:", "id:", "data:"))
            else [r.json()]
        )
    (answer,) = [m["result"] for m in got if m.get("id") == 1]
    assert not answer["isError"] and answer["structuredContent"] == {"result": 2**70}, answer
    assert json.loads(answer["content"][0]["text"]) == {"result": 2**70}
    assert [m["params"]["data"] for m in got if m.get("method") == "notifications/message"] == [{"n": -(2**80)}]


async def test_answers_too_large_for_the_request_state_are_refused_at_once_with_the_reason() -> None:
    """A 2026-07-28 tool that asks twice carries the first answer in its sealed ``requestState``. A first answer
    too large for the state (a 300 KB sampling answer: the state accepts 256 KiB) used to be sealed anyway, and the
    retry that echoed it was refused as 'invalid requestState', as if the client had tampered with it; now the
    round that would seal it is refused, naming the size and the bound. Answers that fit still go through."""
    from mcpkit.protocol.errors import MCPError

    app = MCPKit("twice")

    @app.tool
    async def twice(ctx: Context) -> str:
        first = await ctx.sample("first")
        second = await ctx.sample("second")
        return f"{len(first.content.text)} {len(second.content.text)}"  # type: ignore[union-attr]

    size = [1000]

    def answer(params: object) -> dict[str, object]:
        return {"role": "assistant", "content": {"type": "text", "text": "x" * size[0]}, "model": "m"}

    async with running(app) as (base, _):
        transport = StreamableHTTPClientTransport(base + "/mcp")
        async with ClientSession(transport, mode="modern", sampling_handler=answer) as cs:
            assert text_of(await cs.call_tool("twice", {})) == "1000 1000"
            size[0] = 300_000
            with pytest.raises(MCPError) as caught:
                await cs.call_tool("twice", {})
            assert caught.value.code == -32602
            assert "too large" in caught.value.message and str(app.request_state.max_size) in caught.value.message
            size[0] = 1000
            assert text_of(await cs.call_tool("twice", {})) == "1000 1000"  # the session goes on
