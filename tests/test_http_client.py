"""mcpkit's Streamable HTTP client transport under ClientSession, against mcpkit's server on real uvicorn."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.server.lowlevel import Server
from mcpkit.stores import InMemoryEventStore
from mcpkit.transports.http import SessionExpired, StreamableHTTPClientTransport
from test_http_support import MODERN, make_server, running, silent_prompt


def answers() -> dict[str, Any]:
    return {"elicitation_handler": lambda p: {"action": "accept", "content": {"name": "Ada"}}}


class HeaderLog:
    """ASGI middleware recording (method, headers) of every HTTP request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []

    def __call__(self, app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                hdrs = {k.decode().lower(): v.decode("latin-1") for k, v in scope["headers"]}
                self.requests.append((scope["method"], hdrs))
            await app(scope, receive, send)

        return wrapped


@pytest.mark.parametrize("mode", ["handshake", "modern", "auto"])
async def test_client_session_over_streamable_http(mode: str) -> None:
    async with running(make_server()) as (base, app):
        transport = StreamableHTTPClientTransport(base + "/mcp")
        logs: list[Any] = []
        async with ClientSession(transport, mode=mode, logging_handler=logs.append, **answers()) as cs:
            assert cs.modern == (mode != "handshake")
            tools = await cs.list_tools()
            assert "echo" in [t.name for t in tools.tools]
            assert (await cs.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
            r = await cs.call_tool("progress", {"steps": 3})
            assert r.content[0].text == "done 3"  # type: ignore[union-attr]
            if mode == "handshake":
                assert [entry["data"] for entry in logs] == ["step 1", "step 2", "step 3"]  # via the POST's SSE
            assert (await cs.call_tool("ask")).content[0].text == "accept:Ada"  # type: ignore[union-attr]
            results = await asyncio.gather(*(cs.call_tool("echo", {"text": str(i)}) for i in range(32)))
            assert [x.content[0].text for x in results] == [str(i) for i in range(32)]  # type: ignore[union-attr]
        assert app.streamable.session_count == 0  # handshake sessions were DELETEd on close


@pytest.mark.req("M029", "S007", "M019", "M020")
async def test_session_id_echoed_and_deleted_on_close() -> None:
    log = HeaderLog()
    async with running(make_server(), wrap=log) as (base, app):
        transport = StreamableHTTPClientTransport(base + "/mcp")
        async with ClientSession(transport, mode="handshake") as cs:
            await cs.call_tool("echo", {"text": "x"})
            sid = transport.session_id
            assert sid is not None and app.streamable.session_ids() == [sid]
        posts = [h for m, h in log.requests if m == "POST"]
        assert all("application/json" in h["accept"] and "text/event-stream" in h["accept"] for h in posts)
        assert "mcp-session-id" not in posts[0]  # initialize
        assert all(h.get("mcp-session-id") == sid for h in posts[1:])
        gets = [h for m, h in log.requests if m == "GET"]
        assert gets and all("text/event-stream" in h["accept"] for h in gets)  # M024 on the standalone stream
        deletes = [h for m, h in log.requests if m == "DELETE"]
        assert len(deletes) == 1 and deletes[0]["mcp-session-id"] == sid
        assert app.streamable.session_count == 0


@pytest.mark.parametrize(
    ("version", "expected"), [("2025-03-26", None), ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25")]
)
async def test_protocol_version_header_only_from_2025_06_18(version: str, expected: str | None) -> None:
    log = HeaderLog()
    async with running(make_server(), wrap=log) as (base, _):
        async with ClientSession(StreamableHTTPClientTransport(base + "/mcp"), protocol_version=version) as cs:
            await cs.list_tools()
        after_init = [h for m, h in log.requests if m == "POST"][1:]
        assert after_init
        assert all(h.get("mcp-protocol-version") == expected for h in after_init)


async def test_modern_headers_and_x_mcp_header_mirroring() -> None:
    log = HeaderLog()
    async with running(make_server(), wrap=log) as (base, _):
        async with ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="modern") as cs:
            names = [t.name for t in (await cs.list_tools()).tools]
            assert "region" in names and "bad-header" not in names  # invalid x-mcp-header → tool excluded
            r = await cs.call_tool("region", {"region": "Zürich", "count": 7, "query": "q"})
            assert r.content[0].text == "Zürich/7"  # type: ignore[union-attr]
        h = next(h for m, h in log.requests if h.get("mcp-name") == "region")
        assert h["mcp-method"] == "tools/call" and h["mcp-protocol-version"] == MODERN
        assert h["mcp-param-region"] == "=?base64?WsO8cmljaA==?=" and h["mcp-param-count"] == "7"
        assert "mcp-param-query" not in h
        assert all("mcp-session-id" not in h for _, h in log.requests)


async def test_session_expired_is_signalled() -> None:
    async with running(make_server()) as (base, app):
        transport = StreamableHTTPClientTransport(base + "/mcp", get_stream=False)
        async with ClientSession(transport, mode="handshake") as cs:
            await cs.call_tool("echo", {"text": "x"})
            await app.streamable.aclose()  # the server forgets every session
            with pytest.raises(SessionExpired):
                await cs.call_tool("echo", {"text": "y"})
            assert transport.session_id is None  # ready for a fresh initialize


@pytest.mark.req("A008", "A011", "A012")
async def test_client_resumes_after_the_server_closes_the_connection() -> None:
    async with running(make_server(), event_store=InMemoryEventStore()) as (base, _):
        logs: list[Any] = []
        transport = StreamableHTTPClientTransport(base + "/mcp", reconnect_delay=5.0)
        async with ClientSession(transport, mode="handshake", logging_handler=logs.append) as cs:
            t0 = time.monotonic()
            r = await cs.call_tool("polled", {"n": 6})
            elapsed = time.monotonic() - t0
        assert r.content[0].text == "polled 6"  # type: ignore[union-attr]
        assert [entry["data"] for entry in logs] == [f"event {i}" for i in range(6)]  # nothing lost, nothing doubled
        assert 0.05 <= elapsed < 3  # waited the server's retry: 50 ms, not the 5 s default


async def test_standalone_get_stream_delivers_server_notifications() -> None:
    async with running(make_server()) as (base, _):
        seen: list[str] = []
        got = asyncio.Event()

        def on_note(method: str, params: Any) -> None:
            seen.append(method)
            got.set()

        transport = StreamableHTTPClientTransport(base + "/mcp")
        async with ClientSession(transport, mode="handshake", notification_handler=on_note) as cs:
            await asyncio.sleep(0.2)  # the GET stream is open
            await cs.call_tool("touch")
            await asyncio.wait_for(got.wait(), 5)
        assert seen == ["notifications/tools/list_changed"]


async def test_era_fallback_against_single_era_servers() -> None:
    legacy = make_server()
    legacy_only = Server("legacy", "1", versions=["2025-03-26", "2025-06-18", "2025-11-25"])
    for method in ("tools/list",):
        legacy_only.set_handler(method, legacy._handlers[method])
    async with (
        running(legacy_only) as (base, _),
        ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="auto") as cs,
    ):
        assert not cs.modern and cs.protocol_version == "2025-11-25"
        await cs.list_tools()
    modern_only = Server("modern", "1", versions=[MODERN])
    modern_only.set_handler("tools/list", legacy._handlers["tools/list"])
    async with (
        running(modern_only) as (base, _),
        ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="auto") as cs,
    ):
        assert cs.modern
        await cs.list_tools()


async def test_one_app_serves_every_transport() -> None:
    """create_app mounts the legacy SSE endpoint (/sse, /messages, /message) and WebSocket (/ws) next to /mcp."""
    import httpx

    from mcpkit.transports.http.sse_client import SSEClientTransport
    from mcpkit.transports.http.ws_client import WebSocketClientTransport

    async with running(make_server(), sse=True, ws=True) as (base, _):
        async with ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="handshake") as cs:
            assert (await cs.call_tool("echo", {"text": "mcp"})).content[0].text == "mcp"  # type: ignore[union-attr]
        async with SSEClientTransport(base + "/sse") as conn, ClientSession(conn, mode="handshake") as cs:
            assert (await cs.call_tool("echo", {"text": "sse"})).content[0].text == "sse"  # type: ignore[union-attr]
        ws_url = base.replace("http://", "ws://") + "/ws"
        async with WebSocketClientTransport(ws_url) as conn, ClientSession(conn, mode="auto") as cs:
            assert (await cs.call_tool("echo", {"text": "ws"})).content[0].text == "ws"  # type: ignore[union-attr]
        async with httpx.AsyncClient() as http:
            assert (await http.get(base + "/nowhere")).status_code == 404
            assert (await http.post(base + "/message", json={})).status_code == 400  # legacy POST needs session_id
            r = await http.get(base + "/sse", headers={"origin": "http://evil.example"})
            assert r.status_code == 403  # one DNS-rebinding policy for every route


@pytest.mark.req("A008", "A012")
async def test_standalone_stream_resumes_after_the_server_drops_it() -> None:
    """The server drops the GET stream's connection; a notification sent meanwhile is kept in the event store;
    the client reconnects after ``retry:`` with Last-Event-ID and gets it exactly once."""
    server = make_server()
    async with running(server, event_store=InMemoryEventStore(), retry_interval=100) as (base, app):
        seen: list[str] = []
        transport = StreamableHTTPClientTransport(base + "/mcp", reconnect_delay=5.0)
        async with ClientSession(transport, mode="handshake", notification_handler=lambda m, p: seen.append(m)) as cs:
            ep = app.streamable
            hs = ep._sessions[transport.session_id]
            for _ in range(100):
                if hs.standalone is not None and hs.standalone.conn is not None:
                    break
                await asyncio.sleep(0.02)
            stream = hs.standalone
            assert stream is not None and stream.close_connection()
            await server.notify_list_changed("tools")  # nobody is connected: it waits in the event store
            t0 = time.monotonic()
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.02)
            assert seen == ["notifications/tools/list_changed"]
            assert time.monotonic() - t0 < 2  # the server's retry (100 ms), not the client's 5 s default
            await server.notify_list_changed("tools")  # and the resumed stream is live
            for _ in range(100):
                if len(seen) == 2:
                    break
                await asyncio.sleep(0.02)
            assert seen == ["notifications/tools/list_changed"] * 2
            await cs.call_tool("echo", {"text": "x"})


class WireTap:
    """ASGI middleware feeding a WireRecorder with every JSON-RPC message in HTTP bodies and SSE events."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder

    def __call__(self, app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            request: list[bytes] = []
            response: list[bytes] = []
            sse = False

            async def tap_receive() -> Any:
                message = await receive()
                if message["type"] == "http.request":
                    request.append(message.get("body", b""))
                return message

            async def tap_send(message: Any) -> None:
                nonlocal sse
                if message["type"] == "http.response.start":
                    sse = any(
                        k == b"content-type" and v.startswith(b"text/event-stream") for k, v in message["headers"]
                    )
                    if request and b"".join(request).strip():
                        self.recorder("client->server", b"".join(request))
                elif message["type"] == "http.response.body":
                    response.append(message.get("body", b""))
                    if not message.get("more_body", False):
                        self._flush(b"".join(response), sse)
                await send(message)

            await app(scope, tap_receive, tap_send)

        return wrapped

    def _flush(self, body: bytes, sse: bool) -> None:
        if not body.strip():
            return
        if not sse:
            self.recorder("server->client", body)
            return
        for block in body.split(b"\n\n"):
            data = [line[6:] for line in block.split(b"\n") if line.startswith(b"data: ")]
            if data and b"".join(data).strip():
                self.recorder("server->client", b"\n".join(data))


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25", MODERN])
async def test_http_wire_traffic_matches_the_official_schemas(version: str) -> None:
    from wire_recorder import WireRecorder

    recorder = WireRecorder()
    async with running(make_server(), wrap=WireTap(recorder)) as (base, _):
        kwargs = answers() if version != "2025-03-26" else {}
        async with ClientSession(
            StreamableHTTPClientTransport(base + "/mcp"), protocol_version=version, log_level="info", **kwargs
        ) as cs:
            await cs.list_tools()
            await cs.call_tool("echo", {"text": "x"})
            await cs.call_tool("progress", {"steps": 2})
            if version != "2025-03-26":
                await cs.call_tool("ask")
    assert recorder.validate(version) >= 8


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_timeouts_and_cancellation_reach_the_server(mode: str) -> None:
    """A silent slow handler: the client's timeout fires on time (the POST is not awaited to the end) and the
    server stops the work: via notifications/cancelled (handshake) or by the closed response stream (modern)."""
    from mcpkit.protocol.errors import RequestTimeout
    from test_http_support import Probe

    probe = Probe()
    server = make_server(probe)

    server.set_handler("prompts/get", silent_prompt(probe))

    async with running(server) as (base, _):
        transport = StreamableHTTPClientTransport(base + "/mcp", answer_window=0.1)
        async with ClientSession(transport, mode=mode) as cs:
            t0 = time.monotonic()
            with pytest.raises(RequestTimeout):
                await cs.request("prompts/get", {"name": "p"}, timeout=0.3)
            assert time.monotonic() - t0 < 2
            for _ in range(100):
                if probe.cancelled:
                    break
                await asyncio.sleep(0.02)
            assert len(probe.cancelled) == 1
            # cancelling the caller's task cancels the request on the server too
            task = asyncio.ensure_future(cs.request("prompts/get", {"name": "q"}, timeout=None))
            await asyncio.sleep(0.3)
            task.cancel()
            for _ in range(100):
                if len(probe.cancelled) == 2:
                    break
                await asyncio.sleep(0.02)
            assert len(probe.cancelled) == 2
            assert (await cs.call_tool("echo", {"text": "ok"})).content[0].text == "ok"  # type: ignore[union-attr]
