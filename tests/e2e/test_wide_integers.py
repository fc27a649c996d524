"""Integers beyond 64 bits on the wire (JSON numbers have no size limit; orjson reads such a literal as a float and
writes none): a request whose id is one is answered with the very same id, digit for digit, on every transport and
in both eras, and the numbers of that message arrive exact. Real servers: a stdio subprocess, uvicorn on 127.0.0.1
(Streamable HTTP, legacy SSE, WebSocket), and a ClientSession answering a server's request."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.memory import create_memory_pair
from support.core import raw_stdio
from support.mcp_http import (
    handshake_headers,
    initialize_body,
    modern_body,
    modern_headers,
    open_session,
    running,
    sse_events,
)
from support.sse import make_server

WIDE = 123456789012345678901234567890  # 30 digits
NEGATIVE = -(2**63) - 1  # the first integer below the 64-bit range
V = "2025-11-25"


def call(rid: int, value: int) -> dict[str, Any]:
    """A tools/call of the echo tool (it logs its argument, then answers its text)."""
    params = {"name": "echo", "arguments": {"text": value}}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def assert_echoed(rid: int, value: int, replies: list[bytes]) -> None:
    """The raw replies hold the answer with the same id digits, and the argument arrived exact (in the log
    notification's data and in the result's text)."""
    decoded = [json.loads(r) for r in replies]
    answers = [m for m in decoded if m.get("id") == rid and "method" not in m]
    assert answers, replies
    assert b'"id":%d' % rid in b"".join(replies)
    assert answers[0]["result"]["content"][0]["text"] == str(value)
    logs = [m for m in decoded if m.get("method") == "notifications/message"]
    assert [m["params"]["data"] for m in logs] == [{"echo": value}]


@pytest.mark.req("M006")
async def test_stdio_answers_a_wide_id_with_the_same_digits_in_both_eras() -> None:
    async with raw_stdio() as (_, transport):
        await transport.send(dumps(initialize_body(V, rid=WIDE)))
        reply = await asyncio.wait_for(transport.receive(), 10)
        assert reply is not None and reply.startswith(b'{"jsonrpc":"2.0","id":%d,"result":' % WIDE), reply
        await transport.send(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await transport.send(dumps(call(NEGATIVE, WIDE)))
        replies = [await asyncio.wait_for(transport.receive(), 10) for _ in range(2)]
        assert_echoed(NEGATIVE, WIDE, [r for r in replies if r is not None])

    async with raw_stdio() as (_, transport):  # the stateless era: no initialize
        body = modern_body("tools/call", call(0, -WIDE)["params"], rid=WIDE, log_level="debug")
        await transport.send(dumps(body))
        replies = []
        while not replies or b'"result"' not in replies[-1]:
            reply = await asyncio.wait_for(transport.receive(), 10)
            assert reply is not None
            replies.append(reply)
        assert_echoed(WIDE, -WIDE, replies)


@pytest.mark.req("M006")
async def test_streamable_http_answers_a_wide_id_with_the_same_digits_in_both_eras() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        r = await http.post(url, content=dumps(initialize_body(V, rid=WIDE)), headers=handshake_headers())
        assert r.status_code == 200 and b'"id":%d' % WIDE in r.content, r.content
        sid = await open_session(http, url, V)
        r = await http.post(url, content=dumps(call(WIDE, NEGATIVE)), headers=handshake_headers(sid, V))
        assert r.status_code == 200
        assert_echoed(WIDE, NEGATIVE, [e["data"].encode() for e in sse_events(r.text) if e.get("data")])

        body = modern_body("tools/call", call(0, WIDE)["params"], rid=NEGATIVE, log_level="debug")
        r = await http.post(url, content=dumps(body), headers=modern_headers("tools/call", "echo"))
        assert r.status_code == 200, r.text
        assert_echoed(NEGATIVE, WIDE, [e["data"].encode() for e in sse_events(r.text) if e.get("data")])


@pytest.mark.req("M006")
async def test_legacy_sse_answers_a_wide_id_with_the_same_digits() -> None:
    async with (
        running(make_server(), sse=True) as (base, _),
        httpx.AsyncClient(timeout=10) as http,
        http.stream("GET", base + "/sse") as stream,
    ):
        lines = stream.aiter_lines()

        async def data() -> bytes:
            async for line in lines:
                if line.startswith("data: "):
                    return line[6:].encode()
            raise EOFError

        endpoint = (await asyncio.wait_for(data(), 5)).decode()
        post = base + endpoint
        r = await http.post(post, content=dumps(initialize_body("2024-11-05", rid=WIDE)))
        assert r.status_code == 202
        reply = await asyncio.wait_for(data(), 5)
        assert b'"id":%d' % WIDE in reply and b'"result"' in reply, reply
        await http.post(post, content=dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        await http.post(post, content=dumps(call(NEGATIVE, -WIDE)))
        replies = [await asyncio.wait_for(data(), 5) for _ in range(2)]
        assert_echoed(NEGATIVE, -WIDE, replies)


@pytest.mark.req("M006")
async def test_websocket_answers_a_wide_id_with_the_same_digits() -> None:
    async with (
        running(make_server(), ws=True) as (base, _),
        connect(base.replace("http", "ws") + "/ws", subprotocols=["mcp"]) as ws,  # type: ignore[list-item]
    ):
        await ws.send(dumps(initialize_body(V, rid=NEGATIVE)).decode())
        reply = await asyncio.wait_for(ws.recv(), 5)
        assert f'"id":{NEGATIVE}' in reply and '"result"' in reply, reply
        await ws.send(dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).decode())
        await ws.send(dumps(call(WIDE, WIDE)).decode())
        replies = [await asyncio.wait_for(ws.recv(), 5) for _ in range(2)]
        assert_echoed(WIDE, WIDE, [r.encode() if isinstance(r, str) else r for r in replies])


@pytest.mark.parametrize("rid", [WIDE, NEGATIVE])
@pytest.mark.req("M006")
async def test_client_answers_a_servers_request_with_a_wide_id_with_the_same_digits(rid: int) -> None:
    client_end, server_end = create_memory_pair()

    async def serve() -> bytes:
        init = json.loads(await server_end.receive() or b"null")
        result = {"protocolVersion": V, "capabilities": {}, "serverInfo": {"name": "raw", "version": "0"}}
        await server_end.send(dumps({"jsonrpc": "2.0", "id": init["id"], "result": result}))
        assert b"notifications/initialized" in (await server_end.receive() or b"")
        await server_end.send(dumps({"jsonrpc": "2.0", "id": rid, "method": "ping"}))
        reply = await server_end.receive()
        assert reply is not None
        return reply

    served = asyncio.create_task(serve())
    async with ClientSession(client_end, mode="handshake", protocol_version=V):
        reply = await asyncio.wait_for(served, 5)
    assert reply == b'{"jsonrpc":"2.0","id":%d,"result":{}}' % rid
