"""The legacy SSE and WebSocket endpoints as mounted by ``create_app`` (the one ASGI app for every HTTP
transport): ``/sse`` + ``/messages`` + ``/message`` and ``/ws`` on one real uvicorn server, one shared policy."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import build_server
from mcpkit.transports.http.app import create_app
from mcpkit.transports.http.sse_client import SSEClientTransport
from mcpkit.transports.http.ws_client import WebSocketClientTransport
from support.mcp_http import (
    Probe,
    handshake_headers,
    messages,
    modern_body,
    modern_headers,
    open_session,
    silent_prompt,
    sse_events,
)
from support.mcp_http import make_server as mcp_server
from support.sse import client_handlers, eventually, make_server, serve

V = "2025-11-25"


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


@pytest.mark.parametrize("stateless", [False, True], ids=["sessions", "stateless"])
async def test_requests_still_running_when_the_graceful_shutdown_ends_get_an_error_naming_it(
    stateless: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """What SIGTERM does (``should_exit``) while requests hang past ``timeout_graceful_shutdown``: each is answered
    with a JSON-RPC error naming the shutdown, with its id, as a 503 or as the last event of its SSE stream, in both
    eras, stateful or stateless; no ERROR in the log (uvicorn used to cancel them under the app: a bare 500 each
    and a traceback)."""
    probe = Probe()
    server = mcp_server(probe)
    server.handler("prompts/get")(silent_prompt(probe))  # answers with JSON: it sends nothing before
    userver = build_server(server, "http", "127.0.0.1", 0, timeout_graceful_shutdown=0.5, stateless=stateless)
    caplog.set_level(logging.WARNING)
    logging.getLogger("uvicorn").addHandler(caplog.handler)  # (its logging config does not propagate to the root)
    serving = asyncio.get_running_loop().create_task(userver.serve())
    try:
        await eventually(lambda: userver.started)
        url = f"http://127.0.0.1:{userver.servers[0].sockets[0].getsockname()[1]}/mcp"
        async with httpx.AsyncClient(timeout=10) as http:
            sid = None if stateless else await open_session(http, url, V)
            old = handshake_headers(sid, V)
            hang = {"name": "hang", "arguments": {}}
            posts = {
                "json": (old, {"jsonrpc": "2.0", "id": "json", "method": "prompts/get", "params": {"name": "p"}}),
                "sse": (old, {"jsonrpc": "2.0", "id": "sse", "method": "tools/call", "params": hang}),
                "modern json": (
                    modern_headers("prompts/get", "p"),
                    modern_body("prompts/get", {"name": "p"}, rid="modern json"),  # type: ignore[arg-type]
                ),
                "modern sse": (
                    modern_headers("tools/call", "hang"),
                    modern_body("tools/call", hang, rid="modern sse", log_level="info"),  # type: ignore[arg-type]
                ),
            }
            calls = {k: asyncio.ensure_future(http.post(url, json=body, headers=h)) for k, (h, body) in posts.items()}
            await eventually(lambda: len(userver.server_state.tasks) == len(calls))
            await asyncio.sleep(0.2)  # (each has begun)
            t0 = asyncio.get_running_loop().time()
            userver.should_exit = True  # what SIGTERM does
            answers = {k: await asyncio.wait_for(c, 5) for k, c in calls.items()}
            await asyncio.wait_for(serving, 5)
            took = asyncio.get_running_loop().time() - t0
    finally:
        userver.should_exit = True
        await asyncio.wait_for(serving, 10)
        logging.getLogger("uvicorn").removeHandler(caplog.handler)
    for kind, r in answers.items():
        if kind.endswith("sse"):
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream"), (kind, r.text)
            last = messages(sse_events(r.text))[-1]
        else:
            assert r.status_code == 503, (kind, r.status_code, r.text)
            last = r.json()
        assert last["id"] == kind, (kind, last)  # (a stateless handshake-era POST's too: its body was parsed)
        assert "shutting down" in last["error"]["message"], (kind, last)
    assert took < 0.5 + 1.5, took
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
