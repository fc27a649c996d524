"""Legacy HTTP+SSE transport (2024-11-05): real uvicorn servers on 127.0.0.1, real clients (mcpkit's
SSEClientTransport + ClientSession, raw httpx for the status-code rules, the official Python SDK's sse_client)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import ConnectionClosed
from mcpkit.transports.http.sse import LegacySSEEndpoint, sse_event
from mcpkit.transports.http.sse_client import SSEClientTransport
from support.asgi import read_body
from support.sse import client_handlers, eventually, make_server, serve

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


class RawStream:
    """A raw SSE reader over httpx: yields (event, data) pairs."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.aiter_lines()

    async def next(self, timeout: float = 5.0) -> tuple[str, str]:
        return await asyncio.wait_for(self._next(), timeout)

    async def _next(self) -> tuple[str, str]:
        event, data = "message", []
        async for line in self._lines:
            if line == "":
                if data:
                    return event, "\n".join(data)
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
        raise EOFError("stream ended")

    async def next_message(self, timeout: float = 5.0) -> Any:
        event, data = await self.next(timeout)
        assert event == "message", (event, data)
        return orjson.loads(data)


@contextlib.asynccontextmanager
async def raw_stream(client: httpx.AsyncClient, url: str, **kw: Any) -> AsyncIterator[tuple[RawStream, str]]:
    async with client.stream("GET", url, **kw) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = RawStream(response)
        event, data = await stream.next()
        assert event == "endpoint", "the first event must be the endpoint event"
        yield stream, data


@contextlib.asynccontextmanager
async def sse_server(**options: Any) -> AsyncIterator[tuple[LegacySSEEndpoint, str]]:
    endpoint = LegacySSEEndpoint(make_server(), **options)
    async with serve(endpoint) as port:
        yield endpoint, f"http://127.0.0.1:{port}"


async def test_a_burst_of_concurrent_calls_reuses_the_clients_connections() -> None:
    """Each POST's "Accepted" body was left unread, which closed its connection: 600 concurrent calls opened 600
    connections (600 sockets in TIME_WAIT, ~20 s on a loaded machine). The body is read and the pool keeps as
    many connections alive as it may open (``max_connections``), so two bursts of 200 calls use at most that
    many connections, the stream's included."""
    endpoint = LegacySSEEndpoint(make_server())
    peers: set[Any] = set()

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            peers.add(tuple(scope["client"]))  # (one (host, port) per TCP connection)
        await endpoint(scope, receive, send)

    async with (
        serve(app) as port,
        SSEClientTransport(f"http://127.0.0.1:{port}/sse", max_connections=20) as conn,
        ClientSession(conn, mode="handshake") as session,
    ):
        for _ in range(2):
            calls = [session.call_tool("echo", {"text": str(i)}) for i in range(200)]
            results = await asyncio.gather(*calls)
            assert [r.content[0].text for r in results] == [str(i) for i in range(200)]  # type: ignore[union-attr]
        assert len(peers) <= 20, len(peers)


# ---------------------------------------------------------------- the endpoint event and the POST status codes


@pytest.mark.req("S005")
async def test_first_event_is_the_endpoint_with_a_fresh_random_session_id() -> None:
    async with sse_server() as (endpoint, base), httpx.AsyncClient(timeout=10) as client:
        async with raw_stream(client, base + "/sse") as (_, ep1), raw_stream(client, base + "/sse") as (_, ep2):
            assert re.fullmatch(r"/messages\?session_id=[0-9a-f]{32}", ep1), ep1
            assert re.fullmatch(r"/messages\?session_id=[0-9a-f]{32}", ep2), ep2
            assert ep1 != ep2
            assert endpoint.session_count == 2
        await eventually(lambda: endpoint.session_count == 0)


@pytest.mark.req("S006", "A014", "S002")
async def test_post_status_codes_and_answers_on_the_stream() -> None:
    async with sse_server(max_body=2048) as (endpoint, base), httpx.AsyncClient(timeout=10) as client:
        async with raw_stream(client, base + "/sse") as (stream, ep):
            url = base + ep
            r = await client.post(base + "/messages", json=INIT)
            assert r.status_code == 400  # no session_id
            r = await client.post(base + "/messages?session_id=" + "0" * 32, json=INIT)
            assert r.status_code == 404  # unknown session
            r = await client.post(url, json=INIT)
            assert r.status_code == 202
            reply = await stream.next_message()
            assert reply["id"] == 1 and reply["result"]["protocolVersion"] == "2024-11-05"
            r = await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert r.status_code == 202
            # the singular path /message is accepted too (some clients use it)
            r = await client.post(
                base + ep.replace("/messages", "/message"), json={"jsonrpc": "2.0", "id": 2, "method": "ping"}
            )
            assert r.status_code == 202
            assert await stream.next_message() == {"jsonrpc": "2.0", "id": 2, "result": {}}
            # not JSON: 400 carrying the JSON-RPC parse error, and the same error on the stream
            r = await client.post(url, content=b"{not json", headers={"content-type": "application/json"})
            assert r.status_code == 400
            assert r.json()["error"]["code"] == -32700 and r.json()["id"] is None
            err = await stream.next_message()
            assert err["error"]["code"] == -32700
            # JSON but not JSON-RPC: accepted, answered on the stream with -32600
            r = await client.post(url, json={"hello": "world"})
            assert r.status_code == 202
            assert (await stream.next_message())["error"]["code"] == -32600
            # body limits: declared and streamed
            r = await client.post(url, content=b"x" * 4096)
            assert r.status_code == 413

            async def chunks() -> AsyncIterator[bytes]:
                for _ in range(10):
                    yield b" " * 512

            r = await client.post(url, content=chunks())
            assert r.status_code == 413
            r = await client.request("PUT", url, json={})
            assert r.status_code == 405
            # the session still works after all of that
            r = await client.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
            assert r.status_code == 202
            assert len((await stream.next_message())["result"]["tools"]) == 5
        # the stream closed: the session is gone, its id now answers 404
        await eventually(lambda: endpoint.session_count == 0)
        r = await client.post(url, json={"jsonrpc": "2.0", "id": 4, "method": "ping"})
        assert r.status_code == 404


async def test_origin_and_host_validation() -> None:
    async with sse_server(allowed_origins=["https://app.example"]) as (_, base), httpx.AsyncClient(timeout=10) as c:
        evil = {"Origin": "http://evil.example"}
        r = await c.get(base + "/sse", headers=evil)
        assert r.status_code == 403
        r = await c.get(base + "/sse", headers={"Origin": "null"})
        assert r.status_code == 403
        r = await c.get(base + "/sse", headers={"Host": "evil.example"})
        assert r.status_code == 403  # DNS rebinding: a foreign name resolving to 127.0.0.1
        for ok in ("http://localhost:3000", "http://127.0.0.1:9", "https://app.example"):
            async with raw_stream(c, base + "/sse", headers={"Origin": ok}) as (stream, ep):
                r = await c.post(base + ep, json=INIT, headers=evil)
                assert r.status_code == 403
                r = await c.post(base + ep, json=INIT, headers={"Origin": ok})
                assert r.status_code == 202
                assert (await stream.next_message())["id"] == 1


# ---------------------------------------------------------------- mcpkit's client over the transport


@pytest.mark.req("A005", "A007", "S002", "S003")
async def test_client_session_handshake_era_over_sse() -> None:
    async with sse_server() as (endpoint, base):
        logs: list[Any] = []
        changed: list[str] = []
        async with (
            SSEClientTransport(base + "/sse") as conn,
            ClientSession(
                conn,
                mode="handshake",
                logging_handler=logs.append,
                notification_handler=lambda m, p: changed.append(m),
                **client_handlers(),
            ) as session,
        ):
            assert conn.endpoint is not None and conn.endpoint.path == "/messages"
            assert session.protocol_version == "2025-11-25"
            assert endpoint.session_count == 1
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == ["echo", "slow", "ask", "big", "notify"]
            r = await session.call_tool("echo", {"text": "héllo"})
            assert r.content[0].text == "héllo"  # type: ignore[union-attr]
            await eventually(lambda: len(logs) == 1)
            # progress notifications arrive on the stream before the response (A005)
            progress: list[float] = []
            r = await session.call_tool("slow", {"steps": 4}, on_progress=lambda p, t, m: progress.append(p))
            assert r.content[0].text == "done 4" and progress == [1, 2, 3, 4]  # type: ignore[union-attr]
            # server->client requests travel on the stream, their answers are POSTed back (A007)
            r = await session.call_tool("ask")
            assert r.content[0].text == "accept:Ada|4|file:///work"  # type: ignore[union-attr]
            # many concurrent requests: every one answered on the single stream (S002/S003)
            results = await asyncio.gather(*(session.call_tool("echo", {"text": str(i)}) for i in range(50)))
            assert [x.content[0].text for x in results] == [str(i) for i in range(50)]  # type: ignore[union-attr]
            big = await session.call_tool("big", {"n": 1_000_000})
            assert len(big.content[0].text) == 1_000_000  # type: ignore[union-attr]
            await session.call_tool("notify")
            await eventually(lambda: "notifications/tools/list_changed" in changed)
        await eventually(lambda: endpoint.session_count == 0)


@pytest.mark.req("A009", "A014")
async def test_client_says_why_the_stream_ended_on_a_too_large_message() -> None:
    """A result larger than the client's max_message_size ends the connection (nobody can tell which request it
    answered): the calls fail with an error naming the limit and the option, not a bare 'end of input'."""
    async with (
        sse_server() as (_endpoint, base),
        SSEClientTransport(base + "/sse", max_message_size=64 * 1024) as conn,
        ClientSession(conn, mode="handshake", timeout=10) as session,
    ):
        with pytest.raises(ConnectionClosed, match=r"larger than .*65536.*max_message_size"):
            await session.call_tool("big", {"n": 100_000})


async def test_client_closing_the_stream_ends_the_session() -> None:
    async with sse_server() as (endpoint, base), httpx.AsyncClient(timeout=10) as client:
        conn = SSEClientTransport(base + "/sse")
        await conn.start()
        async with ClientSession(conn, mode="handshake", protocol_version="2024-11-05") as session:
            await session.ping()
            assert session.protocol_version == "2024-11-05"
            post_url = str(conn.endpoint)
        await eventually(lambda: endpoint.session_count == 0)
        r = await client.post(post_url, json={"jsonrpc": "2.0", "id": 9, "method": "ping"})
        assert r.status_code == 404
        with pytest.raises(ConnectionClosed):
            await conn.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')


@pytest.mark.req("A008")
async def test_server_closing_the_stream_ends_the_client_connection() -> None:
    async with sse_server() as (endpoint, base):
        async with SSEClientTransport(base + "/sse") as conn, ClientSession(conn, mode="handshake") as session:
            await session.ping()
            await endpoint.aclose()
            assert await asyncio.wait_for(conn.receive(), 5) is None
            with pytest.raises(ConnectionClosed):
                await session.call_tool("echo", {"text": "x"})
        assert endpoint.session_count == 0


@pytest.mark.parametrize(
    "bounds",
    [{"queue_size": 2}, {"queue_bytes": 3_000_000}],  # (bytes: a 256-message queue would take every answer)
    ids=["messages", "bytes"],
)
async def test_a_reader_that_stops_reading_is_dropped_and_memory_stays_bounded(
    caplog: pytest.LogCaptureFixture, bounds: dict[str, int]
) -> None:
    caplog.set_level("WARNING", logger="mcpkit.sse")
    async with (
        sse_server(stall_timeout=0.5, **bounds) as (endpoint, base),
        httpx.AsyncClient(timeout=10) as client,
        raw_stream(client, base + "/sse") as (_, ep),
    ):
        url = base + ep
        assert (await client.post(url, json=INIT)).status_code == 202
        # ~40 MB of answers that nobody reads: socket buffers fill, then the 2-slot queue, then the session is
        # dropped instead of buffering without bound
        for i in range(20):
            r = await client.post(
                url,
                json={
                    "jsonrpc": "2.0",
                    "id": 10 + i,
                    "method": "tools/call",
                    "params": {"name": "big", "arguments": {"n": 2_000_000}},
                },
            )
            if r.status_code == 404:
                break
        await eventually(lambda: endpoint.session_count == 0, timeout=15)
        r = await client.post(url, json={"jsonrpc": "2.0", "id": 99, "method": "ping"})
        assert r.status_code == 404
    assert any("reader is stuck" in rec.getMessage() for rec in caplog.records)


async def test_a_stream_dropped_for_not_reading_loses_its_connection_too() -> None:
    """The end of a dropped session's stream waits behind the bytes its reader never took, and asyncio closes a
    socket only once those are out: the connection (socket buffers, handler) stayed open after the session was
    dropped, outside every count. The server aborts a connection whose peer has read nothing for
    ``send_timeout`` seconds."""
    endpoint = LegacySSEEndpoint(make_server(), stall_timeout=0.5, queue_size=2)
    async with serve(endpoint, send_timeout=0.5) as port, httpx.AsyncClient(timeout=10) as client:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(f"GET /sse HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        await asyncio.wait_for(reader.readuntil(b"session_id="), 5)
        url = f"http://127.0.0.1:{port}/messages?session_id={(await reader.readexactly(32)).decode()}"
        assert (await client.post(url, json=INIT)).status_code == 202
        for i in range(8):  # ~16 MB of answers that are never read
            call = {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call"}
            call["params"] = {"name": "big", "arguments": {"n": 2_000_000}}
            if (await client.post(url, json=call)).status_code == 404:
                break
        await eventually(lambda: endpoint.session_count == 0, timeout=10)

        async def aborted() -> bool:
            try:
                writer.write(b"GET /sse HTTP/1.1\r\n")
                await asyncio.wait_for(writer.drain(), 1)
            except (ConnectionError, TimeoutError):
                return True
            return writer.transport.is_closing()

        deadline = asyncio.get_running_loop().time() + 10
        while not await aborted():
            assert asyncio.get_running_loop().time() < deadline, "the server kept the connection open"
            await asyncio.sleep(0.2)
        writer.close()


async def test_max_sessions_answers_503() -> None:
    async with (
        sse_server(max_sessions=1) as (_, base),
        httpx.AsyncClient(timeout=10) as client,
        raw_stream(client, base + "/sse"),
    ):
        r = await client.get(base + "/sse")
        assert r.status_code == 503


# ---------------------------------------------------------------- the client's endpoint handling


class FakeSSEServer:
    """An ASGI app that sends a chosen endpoint event and records the POSTs it gets."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.posts: list[tuple[str, bytes]] = []
        self.headers: list[dict[str, str]] = []
        self.queue: asyncio.Queue[bytes] = asyncio.Queue()

    async def aclose(self) -> None:
        self.queue.put_nowait(b"{}")  # let a waiting GET finish, so uvicorn stops at once

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        self.headers.append({k.decode(): v.decode() for k, v in scope["headers"]})
        if scope["method"] == "GET":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": b": hi\n\n" + sse_event(b"endpoint", self.endpoint.encode()),
                    "more_body": True,
                }
            )
            data = await self.queue.get()
            # a multi-line data field must be joined with newlines by the client
            await send(
                {
                    "type": "http.response.body",
                    "body": b"event: message\ndata: " + data.replace(b",", b",\ndata: ") + b"\n\n",
                    "more_body": True,
                }
            )
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        body = await read_body(receive)
        self.posts.append((scope["path"] + "?" + scope["query_string"].decode(), body))
        await self.queue.put(body)
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b""})


async def test_client_resolves_a_relative_endpoint_against_the_sse_url() -> None:
    fake = FakeSSEServer("messages?session_id=abc")
    async with (
        serve(fake) as port,
        SSEClientTransport(f"http://127.0.0.1:{port}/base/sse", headers={"Authorization": "Bearer t"}) as conn,
    ):
        assert str(conn.endpoint) == f"http://127.0.0.1:{port}/base/messages?session_id=abc"
        await conn.send(b'{"jsonrpc":"2.0","method":"x","params":{"a":1,"b":2}}')
        assert fake.posts == [
            ("/base/messages?session_id=abc", b'{"jsonrpc":"2.0","method":"x","params":{"a":1,"b":2}}')
        ]
        echoed = await asyncio.wait_for(conn.receive(), 5)
        assert echoed is not None
        assert orjson.loads(echoed) == {"jsonrpc": "2.0", "method": "x", "params": {"a": 1, "b": 2}}
        assert await asyncio.wait_for(conn.receive(), 5) is None  # the stream ended
        # the caller's headers go on the GET and on every POST
        assert [h.get("authorization") for h in fake.headers] == ["Bearer t", "Bearer t"]
        assert fake.headers[0]["accept"] == "text/event-stream"
        assert fake.headers[1]["content-type"] == "application/json"


@pytest.mark.parametrize(
    "endpoint", ["http://evil.example/messages?session_id=1", "//evil.example/m", "https://127.0.0.1/m"]
)
async def test_client_refuses_an_endpoint_on_another_origin(endpoint: str) -> None:
    fake = FakeSSEServer(endpoint)
    async with serve(fake) as port:
        conn = SSEClientTransport(f"http://127.0.0.1:{port}/sse", timeout=5)
        with pytest.raises(ValueError, match="another origin"):
            await conn.start()
        assert fake.posts == []


async def test_client_reports_a_refused_stream() -> None:
    async with sse_server() as (_, base):
        conn = SSEClientTransport(base + "/sse", headers={"Origin": "http://evil.example"})
        with pytest.raises(ConnectionError, match="403"):
            await conn.start()


# ---------------------------------------------------------------- interop: the official Python SDK's client


async def test_official_python_sdk_sse_client_against_our_server() -> None:
    from mcp.client.session import ClientSession as OfficialSession
    from mcp.client.sse import sse_client

    async with sse_server() as (endpoint, base):
        async with sse_client(base + "/sse") as (read, write), OfficialSession(read, write) as session:
            init = await session.initialize()
            assert init.server_info.name == "transport-test"
            assert endpoint.session_count == 1
            tools = await session.list_tools()
            assert [t.name for t in tools.tools] == ["echo", "slow", "ask", "big", "notify"]
            r = await session.call_tool("echo", {"text": "from the official SDK"})
            assert r.content[0].text == "from the official SDK"  # type: ignore[union-attr]
            r = await session.call_tool("slow", {"steps": 2})
            assert r.content[0].text == "done 2"  # type: ignore[union-attr]
        await eventually(lambda: endpoint.session_count == 0)


@pytest.mark.req("A009")
async def test_abandoned_streams_release_their_sessions() -> None:
    """100 clients open a stream and go away: every session ends and nothing stays referenced."""
    server = make_server()
    endpoint = LegacySSEEndpoint(server)
    async with serve(endpoint) as port, httpx.AsyncClient(limits=httpx.Limits(max_connections=None)) as client:
        opened = []
        for _ in range(100):
            response = await client.send(client.build_request("GET", f"http://127.0.0.1:{port}/sse"), stream=True)
            lines = response.aiter_lines()
            assert (await lines.__anext__()) == "event: endpoint"
            opened.append((response, lines))
        assert endpoint.session_count == 100
        assert len(server.sessions) == 100
        for response, _ in opened:
            await response.aclose()
        await eventually(lambda: endpoint.session_count == 0)
        # the last handlers may still be finishing; then nothing may keep a session alive
        await eventually(lambda: gc.collect() >= 0 and len(server.sessions) == 0)


@pytest.mark.req("A005", "S002")
async def test_every_message_on_the_stream_is_valid_2024_11_05() -> None:
    """A raw 2024-11-05 session: each server message read off the SSE stream passes the official schema."""
    from support.oracle import validate_message

    requests = [
        ("ping", None),
        ("tools/list", {}),
        ("tools/call", {"name": "echo", "arguments": {"text": "x"}}),
        ("tools/call", {"name": "slow", "arguments": {"steps": 2}, "_meta": {"progressToken": "p"}}),
    ]
    async with (
        sse_server() as (_, base),
        httpx.AsyncClient(timeout=10) as client,
        raw_stream(client, base + "/sse") as (stream, ep),
    ):
        url = base + ep
        assert (await client.post(url, json=INIT)).status_code == 202
        reply = await stream.next_message()
        validate_message(reply, "2024-11-05", sender="server", request_method="initialize")
        await client.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        seen: list[str] = []
        for i, (method, params) in enumerate(requests, start=2):
            msg: dict[str, Any] = {"jsonrpc": "2.0", "id": i, "method": method}
            if params is not None:
                msg["params"] = params
            assert (await client.post(url, json=msg)).status_code == 202
            while True:
                out = await stream.next_message()
                validate_message(out, "2024-11-05", sender="server", request_method=method if "id" in out else None)
                if out.get("id") == i:
                    break
                seen.append(out["method"])  # notifications come before the response they belong to
        assert seen == ["notifications/message", "notifications/progress", "notifications/progress"]


async def test_auto_negotiation_over_sse() -> None:
    """The SSE session's peer serves both eras, so an ``auto`` client's server/discover probe succeeds and it
    speaks 2026-07-28 (per-request ``_meta``) over the stream, as the TypeScript SDK v2 client does."""
    async with (
        sse_server() as (endpoint, base),
        SSEClientTransport(base + "/sse") as conn,
        ClientSession(conn, **client_handlers()) as session,
    ):
        assert session.modern and session.protocol_version == "2026-07-28"
        r = await session.call_tool("ask")  # InputRequiredResult rounds, retried over POST
        assert r.content[0].text == "accept:Ada|4|file:///work"  # type: ignore[union-attr]
        assert endpoint.session_count == 1


async def test_idle_stream_gets_keepalive_comments() -> None:
    async with (
        sse_server(keepalive=0.1) as (_, base),
        httpx.AsyncClient(timeout=10) as client,
        client.stream("GET", base + "/sse") as response,
    ):
        lines: list[str] = []

        async def collect() -> None:
            async for line in response.aiter_lines():
                lines.append(line)
                if line.startswith(":"):
                    return

        await asyncio.wait_for(collect(), 5)
        assert lines[0] == "event: endpoint" and lines[-1] == ": keepalive"


@contextlib.asynccontextmanager
async def built_server(grace: float) -> AsyncIterator[tuple[Any, str, asyncio.Task[None]]]:
    """``build_server`` (what ``app.run("http")`` and ``mcpkit run`` serve) in this loop; yields (uvicorn server,
    base URL, its serving task). Setting ``should_exit`` is what SIGTERM does."""
    from mcpkit.transports.http import build_server

    userver = build_server(make_server(), "http", "127.0.0.1", 0, timeout_graceful_shutdown=grace)
    task = asyncio.get_running_loop().create_task(userver.serve())
    await eventually(lambda: userver.started)
    port = userver.servers[0].sockets[0].getsockname()[1]
    try:
        yield userver, f"http://127.0.0.1:{port}", task
    finally:
        userver.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 20)


async def test_shutdown_answers_the_requests_in_flight_then_ends_every_stream_cleanly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On SIGTERM a legacy SSE stream is not held open until the grace period runs out (and then cut in the middle
    of its chunked body, with uvicorn logging an error): the answers of its requests in flight still go out on
    it, then it ends cleanly; an idle stream ends at once."""
    caplog.set_level("WARNING")
    async with (
        built_server(grace=8) as (userver, base, task),
        httpx.AsyncClient(timeout=10) as client,
        raw_stream(client, base + "/sse") as (busy, endpoint),
        raw_stream(client, base + "/sse") as (idle, _),
    ):
        post = base + endpoint
        assert (await client.post(post, json=INIT)).status_code == 202
        assert (await busy.next_message())["id"] == 1
        await client.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "slow", "arguments": {"steps": 2, "delay": 0.5}, "_meta": {"progressToken": "p"}}
        r = await client.post(post, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        assert r.status_code == 202
        assert (await busy.next_message())["method"] == "notifications/progress"
        started = asyncio.get_running_loop().time()
        userver.should_exit = True  # what SIGTERM does
        with pytest.raises(EOFError):  # the idle stream ends, cleanly (a cut body would raise httpx's error)
            await idle.next(timeout=3)
        seen = []
        with pytest.raises(EOFError):
            while True:
                seen.append(await busy.next_message(timeout=5))
        assert seen[-1]["id"] == 2 and seen[-1]["result"]["content"][0]["text"] == "done 2"
        await asyncio.wait_for(task, 5)
        assert asyncio.get_running_loop().time() - started < 4  # not the 8 s grace period
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text


async def test_a_call_still_running_when_the_drain_ends_is_answered_with_an_error_naming_the_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A call still running when the graceful shutdown's time is over is cancelled; its stream carries, before it
    ends, the JSON-RPC error naming the shutdown with the call's id (as Streamable HTTP answers it), not nothing."""
    caplog.set_level("WARNING")
    async with (
        built_server(grace=1) as (userver, base, task),
        httpx.AsyncClient(timeout=10) as client,
        raw_stream(client, base + "/sse") as (busy, endpoint),
    ):
        post = base + endpoint
        assert (await client.post(post, json=INIT)).status_code == 202
        assert (await busy.next_message())["id"] == 1
        await client.post(post, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"name": "slow", "arguments": {"steps": 60, "delay": 0.5}, "_meta": {"progressToken": "p"}}
        r = await client.post(post, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        assert r.status_code == 202
        assert (await busy.next_message())["method"] == "notifications/progress"
        started = asyncio.get_running_loop().time()
        userver.should_exit = True  # what SIGTERM does
        seen = []
        with pytest.raises(EOFError):  # the stream still ends cleanly
            while True:
                seen.append(await busy.next_message(timeout=8))
        last = seen[-1]
        assert last["id"] == 2 and "shutting down" in last["error"]["message"], seen
        await asyncio.wait_for(task, 8)
        assert asyncio.get_running_loop().time() - started < 1 + 3  # the grace, then the answer's bounded send
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text


async def test_a_stream_opened_while_draining_is_refused_with_503() -> None:
    """Once the drain has begun (its streams were taken then), a new stream (an EventSource that reconnects over a
    kept-alive connection) would be held open until the grace period ended and then cut: it gets 503 and
    Retry-After instead, to open its stream elsewhere."""
    async with sse_server() as (endpoint, base), httpx.AsyncClient(timeout=10) as client:
        await endpoint.drain(1.0)
        r = await client.get(base + "/sse")
        assert r.status_code == 503 and "retry-after" in r.headers
        assert endpoint.session_count == 0
