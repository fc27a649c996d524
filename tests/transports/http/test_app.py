"""The legacy SSE and WebSocket endpoints as mounted by ``create_app`` (the one ASGI app for every HTTP
transport): ``/sse`` + ``/messages`` + ``/message`` and ``/ws`` on one real uvicorn server, one shared policy."""

from __future__ import annotations

import logging

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http.app import create_app
from mcpkit.transports.http.sse_client import SSEClientTransport
from mcpkit.transports.http.ws_client import WebSocketClientTransport
from support.sse import client_handlers, eventually, make_server, serve


@pytest.mark.req("A007")
async def test_sse_and_ws_routes_of_create_app() -> None:
    app = create_app(make_server())
    async with serve(app, **app.uvicorn_options()) as port:
        base = f"http://127.0.0.1:{port}"
        async with (
            SSEClientTransport(base + "/sse") as conn,
            ClientSession(conn, mode="handshake", **client_handlers()) as session,
        ):
            assert conn.endpoint is not None and conn.endpoint.path == "/messages"
            r = await session.call_tool("ask")
            assert r.content[0].text == "accept:Ada|4|file:///work"  # type: ignore[union-attr]
            singular = str(conn.endpoint).replace("/messages", "/message")
            async with httpx.AsyncClient() as client:
                res = await client.post(singular, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
                assert res.status_code == 202
                res = await client.get(base + "/sse", headers={"Origin": "http://evil.example"})
                assert res.status_code == 403
        async with WebSocketClientTransport(f"ws://127.0.0.1:{port}/ws") as ws, ClientSession(ws) as modern:
            assert modern.modern
            r = await modern.call_tool("echo", {"text": "ws via create_app"})
            assert r.content[0].text == "ws via create_app"  # type: ignore[union-attr]
        await eventually(lambda: app.sse.session_count == 0 and app.ws.connection_count == 0)


async def test_a_websocket_upgrade_on_an_http_route_is_refused_quietly(caplog: pytest.LogCaptureFixture) -> None:
    # a client that tries WebSocket on /mcp or /sse (a wrong URL, a scanner) gets the 403 an unknown path gets, not
    # a 500 and a traceback in the server's log per attempt; the server goes on
    app = create_app(make_server())
    async with serve(app, **app.uvicorn_options()) as port:
        for path in ("/mcp", "/sse", "/messages", "/nope"):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(f"ws://127.0.0.1:{port}{path}", subprotocols=["mcp"]):  # type: ignore[list-item]
                    pass
            assert refused.value.response.status_code == 403, path
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
        async with WebSocketClientTransport(f"ws://127.0.0.1:{port}/ws") as ws, ClientSession(ws) as session:
            r = await session.call_tool("echo", {"text": "still serving"})
            assert r.content[0].text == "still serving"  # type: ignore[union-attr]


async def test_a_get_on_the_legacy_post_path_opens_no_session() -> None:
    """``/messages`` (and ``/message``) take the POSTs of the legacy transport; a GET there opened a new SSE
    stream and session as ``/sse`` does, so a client that mixed up the two URLs seemed to work and held a
    session it could never use. It is answered 405 (``Allow: POST``)."""
    app = create_app(make_server())
    async with serve(app, **app.uvicorn_options()) as port, httpx.AsyncClient(timeout=5) as client:
        for path in ("/messages", "/message"):
            res = await client.get(f"http://127.0.0.1:{port}{path}")
            assert res.status_code == 405 and res.headers["allow"] == "POST", (path, res.status_code)
        assert app.sse.session_count == 0
