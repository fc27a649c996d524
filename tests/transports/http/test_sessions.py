"""A session's end, as its running requests see it: real uvicorn on 127.0.0.1 serving ``create_app`` (Streamable
HTTP, legacy SSE and WebSocket at once) under ``max_sessions=1``, raw clients (httpx, websockets) that take the
server's elicitation request and never answer it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from mcpkit import Context, MCPKit
from mcpkit.protocol.errors import ConnectionClosed
from support.mcp_http import handshake_headers, initialize_body, open_session, running
from support.sse import eventually

V = "2025-11-25"
ASK = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "ask", "arguments": {}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
CAPS = {"elicitation": {}}


def eliciting_app(seen: list[BaseException]) -> MCPKit:
    """A server whose tool ``ask`` elicits and records what its await raised."""
    app = MCPKit("session-end")

    @app.tool
    async def ask(ctx: Context) -> str:
        try:
            answer = await ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        except BaseException as exc:
            seen.append(exc)
            raise
        return str(answer)

    return app


Opener = Callable[[str, httpx.AsyncClient], Awaitable[int]]


@contextlib.asynccontextmanager
async def streamable_asked(base: str, http: httpx.AsyncClient) -> AsyncIterator[None]:
    """A Streamable HTTP session whose ``ask`` call waits on the client: ended by DELETE on exit."""
    url = base + "/mcp"
    sid = await open_session(http, url, V, caps=CAPS)
    async with http.stream("POST", url, json=ASK, headers=handshake_headers(sid, V)) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: ") and orjson.loads(line[6:]).get("method") == "elicitation/create":
                break
        yield
        assert (await http.delete(url, headers={"mcp-session-id": sid})).status_code == 200


@contextlib.asynccontextmanager
async def sse_asked(base: str, http: httpx.AsyncClient) -> AsyncIterator[None]:
    """A legacy SSE session whose ``ask`` call waits on the client: ended by closing the stream on exit."""
    async with http.stream("GET", base + "/sse", headers={"accept": "text/event-stream"}) as r:
        lines = r.aiter_lines()
        post = ""
        async for line in lines:
            if line.startswith("data: "):
                post = base + line[6:]
                break
        await http.post(post, json=initialize_body(V, caps=CAPS))
        await http.post(post, json=INITIALIZED)
        await http.post(post, json=ASK)
        async for line in lines:
            if line.startswith("data: ") and orjson.loads(line[6:]).get("method") == "elicitation/create":
                break
        yield


@contextlib.asynccontextmanager
async def ws_asked(base: str, http: httpx.AsyncClient) -> AsyncIterator[None]:
    """A WebSocket session whose ``ask`` call waits on the client: ended by closing the socket on exit."""
    async with connect(base.replace("http://", "ws://") + "/ws", subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
        await ws.send(orjson.dumps(initialize_body(V, caps=CAPS)).decode())
        await asyncio.wait_for(ws.recv(), 5)
        await ws.send(orjson.dumps(INITIALIZED).decode())
        await ws.send(orjson.dumps(ASK).decode())
        while orjson.loads(await asyncio.wait_for(ws.recv(), 5)).get("method") != "elicitation/create":
            pass
        yield


async def streamable_opens(base: str, http: httpx.AsyncClient) -> int:
    return (await http.post(base + "/mcp", json=initialize_body(V), headers=handshake_headers())).status_code


async def sse_opens(base: str, http: httpx.AsyncClient) -> int:
    async with http.stream("GET", base + "/sse", headers={"accept": "text/event-stream"}) as r:
        return r.status_code


async def ws_opens(base: str, http: httpx.AsyncClient) -> int:
    with contextlib.suppress(InvalidStatus):
        return await _ws_opens(base)
    return 503


async def _ws_opens(base: str) -> int:
    async with connect(base.replace("http://", "ws://") + "/ws", subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
        await ws.send(orjson.dumps(initialize_body(V)).decode())
        return 200 if "result" in orjson.loads(await asyncio.wait_for(ws.recv(), 5)) else 500


@pytest.mark.parametrize(
    ("asked", "opens"),
    [(streamable_asked, streamable_opens), (sse_asked, sse_opens), (ws_asked, ws_opens)],
    ids=["streamable-delete", "sse-stream-closed", "websocket-closed"],
)
async def test_a_session_ending_fails_its_requests_to_the_client_at_once_and_frees_its_slot(
    asked: Callable[[str, httpx.AsyncClient], contextlib.AbstractAsyncContextManager[None]], opens: Opener
) -> None:
    """The tool waiting on an elicitation the client never answers sees ConnectionClosed (saying the session
    ended) as soon as its session ends, not after request_timeout; the session's slot is free at once."""
    seen: list[BaseException] = []
    async with (
        running(eliciting_app(seen), sse=True, ws=True, max_sessions=1) as (base, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        async with asked(base, http):
            assert await opens(base, http) == 503  # the one slot is taken
        loop = asyncio.get_running_loop()
        ended = loop.time()
        await eventually(lambda: bool(seen), timeout=1.0)
        assert await opens(base, http) == 200
        assert loop.time() - ended < 1.0
    assert type(seen[0]) is ConnectionClosed, repr(seen[0])
    assert "session ended" in str(seen[0]), str(seen[0])
