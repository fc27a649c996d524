"""WebSocket transport (a custom transport: one JSON-RPC message per text frame, subprotocol ``mcp``, at ``/ws``):
real uvicorn servers on 127.0.0.1, mcpkit's WebSocketClientTransport + ClientSession in both eras, the
``websockets`` library and a hand-rolled socket client for the close-code and keep-alive rules."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import hashlib
import logging
import os
import socket
import struct
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed as WSClosed
from websockets.exceptions import InvalidStatus

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import ConnectionClosed
from mcpkit.transports.http.ws import WebSocketEndpoint
from mcpkit.transports.http.ws_client import WebSocketClientTransport
from support.sse import client_handlers, eventually, make_server, serve

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


@contextlib.asynccontextmanager
async def ws_server(
    uvicorn_options: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[tuple[WebSocketEndpoint, str]]:
    endpoint = WebSocketEndpoint(make_server(), **options)
    async with serve(
        endpoint, **(uvicorn_options if uvicorn_options is not None else endpoint.uvicorn_options())
    ) as port:
        yield endpoint, f"ws://127.0.0.1:{port}/ws"


async def recv_json(ws: Any, timeout: float = 5.0) -> Any:
    return orjson.loads(await asyncio.wait_for(ws.recv(), timeout))


# ---------------------------------------------------------------- a hand-rolled client (frames a library won't send)


class RawWS:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int, protocol: str = "mcp") -> RawWS:
        reader, writer, head = await cls.handshake(port, protocol=protocol)
        assert head.startswith(b"HTTP/1.1 101"), head
        return cls(reader, writer)

    @staticmethod
    async def handshake(
        port: int, *, protocol: str = "mcp", host: str | None = None
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET /ws HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Sec-WebSocket-Protocol: {protocol}\r\n\r\n"
            ).encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        return reader, writer, head

    def send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    async def read_frame(self, timeout: float = 5.0) -> tuple[int, bytes]:
        async def read() -> tuple[int, bytes]:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack("!H", await self.reader.readexactly(2))
            elif n == 127:
                (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
            return b0 & 0x0F, await self.reader.readexactly(n)

        return await asyncio.wait_for(read(), timeout)

    async def close_code(self, timeout: float = 5.0) -> int:
        """Read until the server's close frame; return its code."""
        while True:
            opcode, payload = await self.read_frame(timeout)
            if opcode == 0x8:
                return int(struct.unpack("!H", payload[:2])[0])

    def close(self) -> None:
        self.writer.close()


# ---------------------------------------------------------------- both eras through mcpkit's client


async def test_handshake_era_over_websocket() -> None:
    async with ws_server() as (endpoint, url):
        logs: list[Any] = []
        async with (
            WebSocketClientTransport(url) as conn,
            ClientSession(conn, mode="handshake", logging_handler=logs.append, **client_handlers()) as session,
        ):
            assert conn.ws is not None and conn.ws.subprotocol == "mcp"
            assert session.protocol_version == "2025-11-25" and not session.modern
            assert endpoint.connection_count == 1
            assert len((await session.list_tools()).tools) == 5
            r = await session.call_tool("echo", {"text": "héllo"})
            assert r.content[0].text == "héllo"  # type: ignore[union-attr]
            await eventually(lambda: len(logs) == 1)
            progress: list[float] = []
            r = await session.call_tool("slow", {"steps": 3}, on_progress=lambda p, t, m: progress.append(p))
            assert progress == [1, 2, 3]
            r = await session.call_tool("ask")  # server->client requests over the same socket
            assert r.content[0].text == "accept:Ada|4|file:///work"  # type: ignore[union-attr]
            results = await asyncio.gather(*(session.call_tool("echo", {"text": str(i)}) for i in range(50)))
            assert [x.content[0].text for x in results] == [str(i) for i in range(50)]  # type: ignore[union-attr]
            big = await session.call_tool("big", {"n": 3_000_000})
            assert len(big.content[0].text) == 3_000_000  # type: ignore[union-attr]
        await eventually(lambda: endpoint.connection_count == 0)


async def test_modern_era_over_websocket() -> None:
    async with ws_server() as (endpoint, url):
        async with WebSocketClientTransport(url) as conn, ClientSession(conn, **client_handlers()) as session:
            assert session.modern and session.protocol_version == "2026-07-28"
            r = await session.call_tool("echo", {"text": "modern"})
            assert r.content[0].text == "modern"  # type: ignore[union-attr]
            # elicitation/sampling/roots come back as InputRequiredResult rounds, retried on the same socket
            r = await session.call_tool("ask")
            assert r.content[0].text == "accept:Ada|4|file:///work"  # type: ignore[union-attr]
        await eventually(lambda: endpoint.connection_count == 0)


async def test_handshake_session_and_modern_requests_share_one_connection() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    }
    async with ws_server() as (_, url), connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
        await ws.send(orjson.dumps(INIT).decode())
        assert (await recv_json(ws))["result"]["protocolVersion"] == "2025-11-25"
        await ws.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        await ws.send(
            orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "m"}, "_meta": meta},
                }
            ).decode()
        )
        reply = await recv_json(ws)
        while "id" not in reply:  # skip the log notification
            reply = await recv_json(ws)
        assert reply["id"] == 2 and reply["result"]["resultType"] == "complete"


# ---------------------------------------------------------------- handshake-time rules


async def test_subprotocol_mcp_is_required_by_default() -> None:
    async with ws_server() as (_, url):
        for offered in (None, ["other"]):
            with pytest.raises(InvalidStatus) as exc:
                async with connect(url, subprotocols=offered):  # type: ignore[arg-type]
                    pass
            assert exc.value.response.status_code == 403
        async with connect(url, subprotocols=["other", "mcp"]) as ws:  # type: ignore[list-item]
            assert ws.subprotocol == "mcp"


async def test_subprotocol_can_be_optional() -> None:
    async with ws_server(require_subprotocol=False) as (_, url), connect(url) as ws:
        assert ws.subprotocol is None
        await ws.send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
        assert await recv_json(ws) == {"jsonrpc": "2.0", "id": 1, "result": {}}


async def test_origin_and_host_validation() -> None:
    async with ws_server(allowed_origins=["https://app.example"]) as (_, url):
        with pytest.raises(InvalidStatus) as exc:
            async with connect(url, subprotocols=["mcp"], origin="http://evil.example"):  # type: ignore[list-item, arg-type]
                pass
        assert exc.value.response.status_code == 403
        # DNS rebinding: a foreign Host name that resolved to 127.0.0.1
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        _, writer, head = await RawWS.handshake(port, host="evil.example")
        writer.close()
        assert head.startswith(b"HTTP/1.1 403"), head
        for origin in ("http://localhost:5173", "https://app.example"):
            async with connect(url, subprotocols=["mcp"], origin=origin) as ws:  # type: ignore[list-item, arg-type]
                await ws.send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
                assert (await recv_json(ws))["id"] == 1


async def test_connections_are_capped_per_client_and_in_all() -> None:
    """One client could open WebSockets until the server's connection limit, locking every other client out (the
    legacy SSE and Streamable HTTP routes cap each client's sessions). Now a client (the principal, else the
    address) gets 429 beyond ``max_sessions_per_client``, and everyone 503 beyond ``max_sessions``, before the
    upgrade; a closed connection gives its place back."""
    async with ws_server(max_sessions_per_client=3) as (endpoint, url):
        open_ = [await connect(url, subprotocols=["mcp"]) for _ in range(3)]  # type: ignore[list-item]
        with pytest.raises(InvalidStatus) as refused:
            await connect(url, subprotocols=["mcp"])  # type: ignore[list-item]
        assert refused.value.response.status_code == 429
        assert "max_sessions_per_client" in refused.value.response.body.decode()
        await open_.pop().close()
        await eventually(lambda: endpoint.connection_count == 2)
        async with connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
            await ws.send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
            assert (await recv_json(ws))["id"] == 1
        for ws in open_:
            await ws.close()
    async with ws_server(max_sessions=1) as (_, url), connect(url, subprotocols=["mcp"]):  # type: ignore[list-item]
        with pytest.raises(InvalidStatus) as refused:
            await connect(url, subprotocols=["mcp"])  # type: ignore[list-item]
        assert refused.value.response.status_code == 503


async def test_client_refuses_a_server_without_the_subprotocol() -> None:
    async def no_subprotocol(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.accept"})
            with contextlib.suppress(Exception):
                await receive()

    async with serve(no_subprotocol) as port:
        conn = WebSocketClientTransport(f"ws://127.0.0.1:{port}/ws")
        with pytest.raises(ConnectionError, match="subprotocol"):
            await conn.start()


async def test_plain_http_gets_426() -> None:
    async with ws_server() as (_, url), httpx.AsyncClient() as client:
        r = await client.get(url.replace("ws://", "http://"))
        assert r.status_code == 426


# ---------------------------------------------------------------- frames and close codes


async def test_binary_frame_closes_with_1003() -> None:
    async with ws_server() as (endpoint, url), connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
        await ws.send(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        with pytest.raises(WSClosed):
            await asyncio.wait_for(ws.recv(), 5)
        assert ws.close_code == 1003
        await eventually(lambda: endpoint.connection_count == 0)


async def test_oversized_message_closes_with_1009() -> None:
    # our own limit (uvicorn's frame limit left at its 16 MiB default)
    async with ws_server(uvicorn_options={}, max_message=1024) as (endpoint, url):
        async with connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
            await ws.send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
            assert (await recv_json(ws))["id"] == 1
            await ws.send('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"' + "é" * 600 + '"}}')
            with pytest.raises(WSClosed):
                await asyncio.wait_for(ws.recv(), 5)
            assert ws.close_code == 1009
        await eventually(lambda: endpoint.connection_count == 0)
    # uvicorn's limit from uvicorn_options(): far larger messages are cut before they are buffered
    async with ws_server(max_message=1024) as (endpoint, url):
        async with connect(url, subprotocols=["mcp"], max_size=None) as ws:  # type: ignore[list-item]
            await ws.send('{"jsonrpc":"2.0","id":2,"method":"ping","params":{"pad":"' + "x" * 200_000 + '"}}')
            with pytest.raises(WSClosed):
                await asyncio.wait_for(ws.recv(), 5)
            assert ws.close_code == 1009
        await eventually(lambda: endpoint.connection_count == 0)


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_client_says_why_a_websocket_closed_on_a_too_large_message(mode: str) -> None:
    """A result larger than the client's max_message_size (the client closes with 1009) fails the call with an
    error naming the limit and the option, as stdio and HTTP do; an argument larger than the server's limit (the
    server closes with 1009) fails it with the server's close code and reason, not a bare 'end of input'."""
    async with ws_server(max_message=1024 * 1024) as (_endpoint, url):
        async with (
            WebSocketClientTransport(url, max_message_size=64 * 1024) as conn,
            ClientSession(conn, mode=mode, timeout=10) as session,
        ):
            with pytest.raises(ConnectionClosed, match=r"larger than .*65536.*max_message_size"):
                await session.call_tool("big", {"n": 100_000})
        async with WebSocketClientTransport(url) as conn, ClientSession(conn, mode=mode, timeout=10) as session:
            with pytest.raises(ConnectionClosed, match=r"closed the WebSocket connection: 1009"):
                await session.call_tool("echo", {"text": "x" * 2_000_000})


async def test_invalid_utf8_closes_with_1007() -> None:
    async with ws_server() as (endpoint, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        raw = await RawWS.open(port)
        raw.send_frame(0x1, b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
        opcode, payload = await raw.read_frame()
        assert opcode == 0x1 and orjson.loads(payload)["id"] == 1
        await eventually(lambda: endpoint.connection_count == 1)
        raw.send_frame(0x1, b'{"jsonrpc":"2.0","id":2,"method":"\xff\xfe"}')
        assert await raw.close_code() == 1007
        raw.close()
        await eventually(lambda: endpoint.connection_count == 0)


async def test_text_that_is_not_json_gets_a_parse_error_and_the_connection_stays_open() -> None:
    async with ws_server() as (endpoint, url), connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
        await ws.send("{this is not json")
        err = await recv_json(ws)
        assert err["error"]["code"] == -32700 and err["id"] is None
        await ws.send('{"jsonrpc":"2.0","id":5,"method":"ping"}')
        assert await recv_json(ws) == {"jsonrpc": "2.0", "id": 5, "result": {}}
        assert endpoint.connection_count == 1


async def test_client_close_ends_the_session_cleanly() -> None:
    async with ws_server() as (endpoint, url):
        conn = WebSocketClientTransport(url)
        await conn.start()
        async with ClientSession(conn, mode="handshake") as session:
            await session.ping()
            assert endpoint.connection_count == 1
        assert conn.close_code == 1000
        await eventually(lambda: endpoint.connection_count == 0)
        with pytest.raises(ConnectionClosed):
            await conn.send(b'{"jsonrpc":"2.0","method":"x"}')


async def test_server_shutdown_closes_with_1001() -> None:
    async with (
        ws_server() as (endpoint, url),
        WebSocketClientTransport(url) as conn,
        ClientSession(conn, mode="handshake") as session,
    ):
        await session.ping()
        await endpoint.aclose()
        assert conn.ws is not None
        await asyncio.wait_for(conn.ws.wait_closed(), 5)
        assert conn.close_code == 1001
        with pytest.raises(ConnectionClosed):
            await session.call_tool("echo", {"text": "x"})


@pytest.mark.parametrize(
    "bounds",
    [{"queue_size": 2}, {"queue_bytes": 3_000_000}],  # (bytes: a 256-message queue would take every answer)
    ids=["messages", "bytes"],
)
async def test_a_client_that_stops_reading_is_dropped(bounds: dict[str, int]) -> None:
    async with ws_server(stall_timeout=0.5, **bounds) as (endpoint, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        raw = await RawWS.open(port)
        raw.send_frame(0x1, orjson.dumps(INIT))
        for i in range(20):  # ~40 MB of answers that are never read
            call = {
                "jsonrpc": "2.0",
                "id": 10 + i,
                "method": "tools/call",
                "params": {"name": "big", "arguments": {"n": 2_000_000}},
            }
            raw.send_frame(0x1, orjson.dumps(call))
        await raw.writer.drain()
        await eventually(lambda: endpoint.connection_count == 0, timeout=20)
        raw.close()


async def open_raw_not_reading(port: int) -> RawWS:
    """A raw WebSocket whose socket takes little and is never read (so what the server sends stays with it)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    key = base64.b64encode(os.urandom(16)).decode()
    writer.write(
        (
            f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n\r\n"
        ).encode()
    )
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 101"), head
    return RawWS(reader, writer)


async def test_a_peer_that_sends_pings_and_never_reads_the_pongs_is_cut_off() -> None:
    """uvicorn answers each ping at once: a peer that never read the pongs made the server buffer them all (245 MB
    for 260 MB of pings). Past ``MAX_UNREAD_REPLIES`` bytes of pongs waiting, the connection is aborted."""
    async with ws_server() as (endpoint, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        raw = await open_raw_not_reading(port)
        ping = struct.pack("!BB", 0x89, 0x80 | 125) + b"\0\0\0\0" + b"p" * 125
        chunk = ping * 2000  # 262 KB
        taken = 0
        with pytest.raises(ConnectionError):
            for _ in range(256):  # 64 MB at most
                raw.writer.write(chunk)
                await asyncio.wait_for(raw.writer.drain(), 5.0)
                taken += len(chunk)
        assert taken < 24_000_000, taken  # (the sockets' buffers on both sides and a MiB of pongs, then the end)
        await eventually(lambda: endpoint.connection_count == 0)
        raw.close()


async def test_a_peer_that_sends_a_large_message_before_reading_is_served() -> None:
    """Flow control must not deadlock a peer that writes a whole message before it reads: the server, whose
    write buffer is full of an answer the peer has not read yet, still reads the peer's message."""
    async with ws_server() as (endpoint, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        raw = await open_raw_not_reading(port)
        raw.send_frame(0x1, orjson.dumps(INIT))
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "big"}}
        call["params"]["arguments"] = {"n": 3_000_000}
        raw.send_frame(0x1, orjson.dumps(call))
        await raw.writer.drain()
        await asyncio.sleep(0.3)  # (the answer fills the sockets' buffers and the server's)
        padded = {"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"_meta": {"pad": "x" * 3_000_000}}}
        raw.send_frame(0x1, orjson.dumps(padded))
        await asyncio.wait_for(raw.writer.drain(), 10)  # (a server that stopped reading never takes it all)
        seen: set[Any] = set()
        while 3 not in seen:
            opcode, payload = await raw.read_frame(timeout=10)
            if opcode == 0x1:
                seen.add(orjson.loads(payload).get("id"))
        assert seen == {1, 2, 3}
        assert endpoint.connection_count == 1
        raw.close()


async def test_a_peer_dropped_for_not_reading_loses_its_connection_too() -> None:
    """The close frame of a dropped session waits behind the bytes the peer never read, and asyncio closes a
    socket only once those are out: the connection stayed open (buffers, handler) after its session was dropped,
    outside every count. It is aborted when the peer has read nothing for ``stall_timeout`` seconds."""
    async with ws_server(stall_timeout=0.5, queue_size=2) as (endpoint, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        raw = await open_raw_not_reading(port)
        raw.send_frame(0x1, orjson.dumps(INIT))
        for i in range(8):  # ~16 MB of answers that are never read
            call = {"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call"}
            call["params"] = {"name": "big", "arguments": {"n": 2_000_000}}
            raw.send_frame(0x1, orjson.dumps(call))
        await raw.writer.drain()
        await eventually(lambda: endpoint.connection_count == 0, timeout=10)

        async def aborted() -> bool:
            try:
                raw.send_frame(0x1, b'{"jsonrpc":"2.0","method":"notifications/x"}')
                await asyncio.wait_for(raw.writer.drain(), 1)
            except (ConnectionError, TimeoutError):
                return True
            return raw.writer.transport.is_closing()

        deadline = asyncio.get_running_loop().time() + 10
        while not await aborted():
            assert asyncio.get_running_loop().time() < deadline, "the server kept the connection open"
            await asyncio.sleep(0.2)
        raw.close()


# ---------------------------------------------------------------- keep-alive


async def test_pings_are_answered_and_a_silent_peer_is_dropped() -> None:
    fast = {"ws": "websockets-sansio", "ws_ping_interval": 0.2, "ws_ping_timeout": 0.3}
    async with ws_server(uvicorn_options=fast) as (endpoint, url):
        # a live client answers the server's pings automatically and stays connected; its own pings get pongs
        async with connect(url, subprotocols=["mcp"], ping_interval=None) as ws:  # type: ignore[list-item]
            await asyncio.sleep(1.2)
            pong = await ws.ping()
            latency = await asyncio.wait_for(pong, 2)
            assert latency >= 0
            await ws.send('{"jsonrpc":"2.0","id":1,"method":"ping"}')
            assert (await recv_json(ws))["id"] == 1
        await eventually(lambda: endpoint.connection_count == 0)
        # a peer that never answers pings is dropped by the server
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        raw = await RawWS.open(port)
        await eventually(lambda: endpoint.connection_count == 1)
        saw_ping = False
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                opcode, _ = await raw.read_frame(timeout=5)
                saw_ping = saw_ping or opcode == 0x9
        assert saw_ping
        await eventually(lambda: endpoint.connection_count == 0)
        raw.close()


async def accept_upgrade(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Play a WebSocket server's side of the opening handshake on a raw socket (subprotocol ``mcp``), for tests of
    servers that then misbehave."""
    head = await reader.readuntil(b"\r\n\r\n")
    key = next(
        line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key")
    )
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    writer.write(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Accept: " + accept + b"\r\nSec-WebSocket-Protocol: mcp\r\n\r\n"
    )


async def test_client_transport_keepalive_detects_a_dead_server() -> None:
    """The client pings; a server that stops answering (frozen event loop simulated by a raw socket server that
    completes the handshake then goes silent) is detected within ping_interval + ping_timeout."""
    accepted: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accept_upgrade(reader, writer)
        accepted.append(writer)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)

    srv = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        conn = WebSocketClientTransport(
            f"ws://127.0.0.1:{port}/ws", ping_interval=0.2, ping_timeout=0.3, close_timeout=0.5
        )
        await conn.start()
        started = asyncio.get_running_loop().time()
        assert await asyncio.wait_for(conn.receive(), 5) is None
        assert asyncio.get_running_loop().time() - started < 3  # the silent server would hold it for 30 s
        assert conn.ws is not None and conn.ws.protocol.close_sent is not None
        assert conn.ws.protocol.close_sent.code == 1011  # we closed it: "keepalive ping timeout"
        await conn.close()
    finally:
        for w in accepted:
            w.close()
        srv.close()


async def test_client_transport_cuts_off_a_server_that_floods_pings_and_never_reads() -> None:
    """websockets answers each ping at once: a server that sent pings and never read the pongs made the client
    buffer them all (100 MB for 100 MB of pings). Past a MiB of pongs waiting, the client drops the connection
    and says why."""
    sent: list[int] = [0]
    accepted: list[asyncio.StreamWriter] = []

    async def flooding(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accept_upgrade(reader, writer)
        accepted.append(writer)
        chunk = (struct.pack("!BB", 0x89, 125) + b"p" * 125) * 2000  # 254 KB of pings
        with contextlib.suppress(ConnectionError, TimeoutError, asyncio.CancelledError):
            for _ in range(256):  # 64 MB at most
                writer.write(chunk)
                # (a client slowed by a loaded machine still reads: the flood goes on until it is cut off)
                await asyncio.wait_for(writer.drain(), 30)
                sent[0] += len(chunk)

    srv = await asyncio.start_server(flooding, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        conn = WebSocketClientTransport(f"ws://127.0.0.1:{port}/ws")
        await conn.start()
        with pytest.raises(ConnectionClosed, match="not reading"):
            await asyncio.wait_for(conn.receive(), 60)
        assert sent[0] < 24_000_000, sent[0]
        await conn.close()
    finally:
        for w in accepted:
            w.close()
        srv.close()


async def test_abandoned_connections_release_their_sessions() -> None:
    server = make_server()
    endpoint = WebSocketEndpoint(server)
    async with serve(endpoint, **endpoint.uvicorn_options()) as port:
        url = f"ws://127.0.0.1:{port}/ws"
        sockets = [await connect(url, subprotocols=["mcp"]) for _ in range(50)]  # type: ignore[list-item]
        await eventually(lambda: endpoint.connection_count == 50)
        assert len(server.sessions) == 50
        for i, ws in enumerate(sockets):
            if i % 2:
                await ws.close()
            else:
                ws.transport.abort()  # vanish without a close frame
        await eventually(lambda: endpoint.connection_count == 0)
        # the last handlers may still be finishing; then nothing may keep a session alive
        await eventually(lambda: gc.collect() >= 0 and len(server.sessions) == 0)


async def test_shutdown_answers_the_requests_in_flight_then_closes_with_1001() -> None:
    """On SIGTERM a WebSocket is not closed at once (uvicorn's 1012, which would cancel the calls in flight while
    HTTP requests get the grace period): its requests in flight are answered, then it closes with 1001; an idle
    connection closes at once."""
    from mcpkit.transports.http import build_server

    userver = build_server(make_server(), "http", "127.0.0.1", 0, timeout_graceful_shutdown=8)
    task = asyncio.get_running_loop().create_task(userver.serve())
    try:
        await eventually(lambda: userver.started)
        url = f"ws://127.0.0.1:{userver.servers[0].sockets[0].getsockname()[1]}/ws"
        async with connect(url, subprotocols=["mcp"]) as busy, connect(url, subprotocols=["mcp"]) as idle:  # type: ignore[list-item]
            await busy.send(orjson.dumps(INIT), text=True)
            assert (await recv_json(busy))["id"] == 1
            await busy.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', text=True)
            call = {"name": "slow", "arguments": {"steps": 2, "delay": 0.5}, "_meta": {"progressToken": "p"}}
            await busy.send(
                orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}), text=True
            )
            assert (await recv_json(busy))["method"] == "notifications/progress"
            started = asyncio.get_running_loop().time()
            userver.should_exit = True  # what SIGTERM does
            await asyncio.wait_for(idle.wait_closed(), 3)
            assert idle.close_code == 1001
            seen = []
            with pytest.raises(WSClosed):
                while True:
                    seen.append(await recv_json(busy))
            assert seen[-1]["id"] == 2 and seen[-1]["result"]["content"][0]["text"] == "done 2"
            assert busy.close_code == 1001
            await asyncio.wait_for(task, 5)
            assert asyncio.get_running_loop().time() - started < 4  # not the 8 s grace period
    finally:
        userver.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 20)


async def test_a_call_still_running_when_the_drain_ends_is_answered_with_an_error_naming_the_shutdown() -> None:
    """A call still running when the graceful shutdown's time is over is cancelled; the socket carries, before its
    1001 close, the JSON-RPC error naming the shutdown with the call's id (as Streamable HTTP answers it)."""
    from mcpkit.transports.http import build_server

    userver = build_server(make_server(), "http", "127.0.0.1", 0, timeout_graceful_shutdown=1)
    task = asyncio.get_running_loop().create_task(userver.serve())
    try:
        await eventually(lambda: userver.started)
        url = f"ws://127.0.0.1:{userver.servers[0].sockets[0].getsockname()[1]}/ws"
        async with connect(url, subprotocols=["mcp"]) as busy:  # type: ignore[list-item]
            await busy.send(orjson.dumps(INIT), text=True)
            assert (await recv_json(busy))["id"] == 1
            await busy.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', text=True)
            call = {"name": "slow", "arguments": {"steps": 60, "delay": 0.5}, "_meta": {"progressToken": "p"}}
            await busy.send(
                orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}), text=True
            )
            assert (await recv_json(busy))["method"] == "notifications/progress"
            started = asyncio.get_running_loop().time()
            userver.should_exit = True  # what SIGTERM does
            seen = []
            with pytest.raises(WSClosed):
                while True:
                    seen.append(await recv_json(busy, 8))
            last = seen[-1]
            assert last["id"] == 2 and "shutting down" in last["error"]["message"], seen
            assert busy.close_code == 1001
            await asyncio.wait_for(task, 8)
            assert asyncio.get_running_loop().time() - started < 1 + 3  # the grace, then the answer's bounded send
    finally:
        userver.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 20)


async def test_shutdown_does_not_wait_on_a_client_that_does_not_read(caplog: pytest.LogCaptureFixture) -> None:
    """A connection whose reader is stuck (its outgoing queue full) holds its answers: the shutdown closes it when
    the grace period ends, not after the much longer ``stall_timeout``, quietly (no ERROR in the log)."""
    from mcpkit.transports.http import build_server

    userver = build_server(make_server(), "http", "127.0.0.1", 0, timeout_graceful_shutdown=1, queue_size=2)
    caplog.set_level(logging.WARNING)
    logging.getLogger("uvicorn").addHandler(caplog.handler)  # (its logging config does not propagate to the root)
    task = asyncio.get_running_loop().create_task(userver.serve())
    try:
        await eventually(lambda: userver.started)
        raw = await RawWS.open(userver.servers[0].sockets[0].getsockname()[1])
        raw.send_frame(0x1, orjson.dumps(INIT))
        for i in range(20):  # ~40 MB of answers that are never read
            call = {"name": "big", "arguments": {"n": 2_000_000}}
            raw.send_frame(0x1, orjson.dumps({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call", "params": call}))
        await raw.writer.drain()
        ws = userver.config.app.ws
        await eventually(lambda: any(c.outbox.queue.full() for c in ws._connections), timeout=20)
        started = asyncio.get_running_loop().time()
        userver.should_exit = True
        await asyncio.wait_for(task, 10)
        assert asyncio.get_running_loop().time() - started < 5  # stall_timeout is 30 s
        assert ws.connection_count == 0
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
        raw.close()
    finally:
        userver.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 40)
        logging.getLogger("uvicorn").removeHandler(caplog.handler)


async def test_a_connection_opened_while_draining_is_refused_with_503() -> None:
    async with ws_server() as (endpoint, url):
        await endpoint.drain(1.0)
        with pytest.raises(InvalidStatus) as refused:
            await connect(url, subprotocols=["mcp"])  # type: ignore[list-item]
        assert refused.value.response.status_code == 503
        assert endpoint.connection_count == 0


async def test_a_refused_upgrade_says_why() -> None:
    """A refused upgrade (a foreign Origin, no ``mcp`` subprotocol) was a bare 403: the answer now says why, and
    mcpkit's client shows it."""
    async with ws_server(allowed_origins=["https://app.example"]) as (_, url):
        for options, why in (
            ({"subprotocols": ["mcp"], "origin": "http://evil.example"}, "Origin not allowed"),
            ({"subprotocols": ["other"]}, "subprotocol"),
        ):
            with pytest.raises(InvalidStatus) as refused:
                await connect(url, **options)  # type: ignore[arg-type]
            assert refused.value.response.status_code == 403
            assert why in refused.value.response.body.decode()
        conn = WebSocketClientTransport(url, headers={"Origin": "http://evil.example"})
        with pytest.raises(ConnectionError, match="HTTP 403: Origin not allowed"):
            await conn.start()
