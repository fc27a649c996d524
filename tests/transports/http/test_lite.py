"""The Streamable HTTP client's lean HTTP/1.1 engine (``transports/http/lite.py``) and when it is used.

Hand-written HTTP/1.1 servers on 127.0.0.1 (raw asyncio streams) make the server behave exactly as a test needs:
chunked bodies, an SSE event cut into many small writes, a keep-alive connection dropped while idle, a request
taken and never answered, an oversized head. The full ClientSession behaviour over a real uvicorn server (both
eras, resumption, sessions, cancellation) is what tests/client/test_http.py and friends prove with the fast path on
by default; the last tests here run one session per engine and compare.

The fast path's HTTP/1.1 response parsing on httptools (llhttp): what llhttp leaves to its caller.

llhttp is strict about syntax but has no size limits, reads a response whose ``Transfer-Encoding`` is not chunked
to the end of the connection, and knows nothing of the request (HEAD) or of reuse. ``transports/http/lite.py``
adds those checks; each test here serves raw bytes from a hand-written asyncio server on 127.0.0.1 and talks to
it through :class:`LitePool`, the engine the Streamable HTTP client uses for plain ``http://`` URLs. The memory
tests send a payload 256 times the bound and hold Python's allocation peak (tracemalloc, client and server in
this process) under a stated figure."""

from __future__ import annotations

import asyncio
import contextlib
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import ConnectionClosed
from mcpkit.transports.http import StreamableHTTPClientTransport
from mcpkit.transports.http.lite import LiteHTTPError, LitePool
from mcpkit.transports.http.sse_decoder import SSEDecoder, SSEEventTooLarge
from mcpkit.transports.http.streamable_client import fast_path_applies
from support.extras import HTTP_CLIENT_CODE, one_line_error, run_without
from support.mcp_http import make_server, running
from support.rawhttp import raw_server

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, "RawServer"], Awaitable[None]]


class RawServer:
    """A bare HTTP/1.1 server: ``handler(reader, writer, server)`` owns each connection."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.first_reads: list[bytes] = []

    async def read_request(self, reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes] | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return None
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        req = (lines[0], headers, body)
        self.requests.append(req)
        return req

    @contextlib.asynccontextmanager
    async def serve(self) -> AsyncIterator[str]:
        async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            await self.handler(reader, writer, self)

        async with raw_server(on_conn) as port:
            yield f"http://127.0.0.1:{port}/mcp"


def answer_for(body: bytes) -> bytes:
    msg = orjson.loads(body)
    return orjson.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": {"echo": msg["params"]["n"]}})


def request(n: int) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"n": n}})


async def exchange(transport: StreamableHTTPClientTransport, n: int) -> Any:
    await transport.send(request(n))
    got = await asyncio.wait_for(transport.receive(), 5)
    assert got is not None
    return orjson.loads(got)


def json_head(length: int, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n{extra}\r\n".encode()


# ---------------------------------------------------------------------------------------------- path selection


def test_fast_path_selection_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert fast_path_applies("http://127.0.0.1:8000/mcp")
    assert fast_path_applies("http://example.com/mcp")
    assert not fast_path_applies("https://127.0.0.1:8000/mcp")  # TLS: httpx
    assert not fast_path_applies("ws://127.0.0.1/mcp")
    assert StreamableHTTPClientTransport("http://127.0.0.1:1/mcp").fast_path
    assert not StreamableHTTPClientTransport("https://127.0.0.1:1/mcp").fast_path
    assert not StreamableHTTPClientTransport("http://127.0.0.1:1/mcp", fast_path=False).fast_path
    assert not StreamableHTTPClientTransport("http://127.0.0.1:1/mcp", auth=httpx.BasicAuth("a", "b")).fast_path
    assert not StreamableHTTPClientTransport("http://127.0.0.1:1/mcp", client=httpx.AsyncClient()).fast_path
    with pytest.raises(ValueError):
        StreamableHTTPClientTransport("http://127.0.0.1:1/mcp", fast_path=True, auth=httpx.BasicAuth("a", "b"))
    with pytest.raises(ValueError):
        StreamableHTTPClientTransport("https://127.0.0.1:1/mcp", fast_path=True)
    # a proxy from the environment sends us to httpx (which honours it), unless NO_PROXY exempts the host
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    assert not fast_path_applies("http://example.com/mcp")
    assert not StreamableHTTPClientTransport("http://example.com/mcp").fast_path
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert fast_path_applies("http://127.0.0.1:8000/mcp")
    assert not fast_path_applies("http://example.com/mcp")
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setenv("ALL_PROXY", "http://proxy.invalid:3128")
    assert not fast_path_applies("http://example.com/mcp")


# ---------------------------------------------------------------------------------------------- bodies


@pytest.mark.req("M019", "M020")
async def test_chunked_json_and_keep_alive_in_one_write() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        srv.first_reads.append(await reader.read(65536))  # whatever arrived first: head and body in one write
        reader.feed_data(srv.first_reads[-1])  # put it back for read_request (StreamReader keeps it in order)
        while (req := await srv.read_request(reader)) is not None:
            body = answer_for(req[2])
            parts = [body[:5], body[5:17], body[17:]]
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json; charset=utf-8\r\n"
                b"transfer-encoding: chunked\r\n\r\n"
            )
            for i, part in enumerate(parts):
                ext = b";name=x" if i == 1 else b""
                writer.write(b"%x%s\r\n%s\r\n" % (len(part), ext, part))
                await writer.drain()
                await asyncio.sleep(0.01)
            writer.write(b"0\r\nx-trailer: 1\r\n\r\n")
            await writer.drain()

    srv = RawServer(handler)
    async with srv.serve() as url, StreamableHTTPClientTransport(url, get_stream=False) as transport:
        assert transport.fast_path
        for n in range(1, 4):
            got = await exchange(transport, n)
            assert got == {"jsonrpc": "2.0", "id": n, "result": {"echo": n}}
        assert srv.connections == 1  # one keep-alive connection for all three
        assert transport._pool is not None and transport._pool.connects == 1
        line, headers, body = srv.requests[0]
        assert line == "POST /mcp HTTP/1.1"
        assert headers["content-length"] == str(len(body))
        assert headers["accept"] == "application/json, text/event-stream"
        assert headers["content-type"] == "application/json"
        assert headers["host"] == url.split("/")[2]
        assert srv.first_reads[0].endswith(request(1))  # head + body arrived together


async def test_close_delimited_body_connection_close_interim_response() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        req = await srv.read_request(reader)
        assert req is not None
        n = orjson.loads(req[2])["id"]
        if n == 1:  # no length, no chunking: the body runs to the end of the connection
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + answer_for(req[2]))
        else:
            body = answer_for(req[2])
            if n == 3:  # an interim response first: skipped, the final one follows
                writer.write(b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n")
            writer.write(json_head(len(body), "connection: close\r\n") + body)
        await writer.drain()

    srv = RawServer(handler)
    async with srv.serve() as url, StreamableHTTPClientTransport(url, get_stream=False) as transport:
        for n in (1, 2, 3):
            assert (await exchange(transport, n))["result"] == {"echo": n}
        assert srv.connections == 3  # neither kind of connection was put back in the pool


# ---------------------------------------------------------------------------------------------- SSE


async def test_sse_split_across_reads() -> None:
    """An SSE answer cut into 1..7-byte writes (line ends split between \\r and \\n too) parses to the same events:
    comments skipped, multi-line data joined, id/retry/event read, the response routed."""
    notif = orjson.dumps(
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "a\nb"}}
    )

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        req = await srv.read_request(reader)
        assert req is not None
        answer = answer_for(req[2])
        stream = (
            b": a comment\r\n\r\nretry: 50\r\nid: e0\r\ndata:\r\n\r\n"  # priming event, no data
            b"event: message\r\nid: e1\r\ndata: " + notif + b"\r\n\r\n"
            b"id: e2\ndata: " + answer[:10] + b"\ndata:" + answer[10:] + b"\r\r"
        )
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        i = 0
        sizes = [1, 2, 3, 5, 7]
        while i < len(stream):
            part = stream[i : i + sizes[i % len(sizes)]]
            i += len(part)
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
            await asyncio.sleep(0)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        await srv.read_request(reader)  # keep the connection open until the client closes it

    srv = RawServer(handler)
    async with srv.serve() as url, StreamableHTTPClientTransport(url, get_stream=False) as transport:
        await transport.send(request(7))
        first = orjson.loads(await asyncio.wait_for(transport.receive(), 5) or b"null")
        assert first["method"] == "notifications/message"
        assert first["params"]["data"] == "a\nb"
        second = await asyncio.wait_for(transport.receive(), 5)
        assert second is not None
        # the two data lines are joined with "\n", which JSON parsing tolerates between tokens
        assert orjson.loads(second) == {"jsonrpc": "2.0", "id": 7, "result": {"echo": 7}}


async def test_sse_bytes_through_the_shared_decoder() -> None:
    """aiter_bytes of a hand-fed connection through the shared SSE decoder: every line-end kind, a \r\n split
    between reads, and an unterminated last event that is NOT dispatched (WHATWG)."""
    payloads = [b"data: a\r", b"\n\ndata: b\n", b"\ndata: c\r", b"\rdata: d\r\n\r", b"\n", b"data: tail"]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
        for p in payloads:
            writer.write(p)
            await writer.drain()
            await asyncio.sleep(0.01)

    srv = RawServer(handler)
    async with srv.serve() as url:
        pool, target = LitePool.for_url(url)
        resp = await pool.request("GET", target, {"accept": "text/event-stream"})
        decoder = SSEDecoder(1000)
        data = [ev.data async for chunk in resp.aiter_bytes() for ev in decoder.feed(chunk)]
        assert data == [b"a", b"b", b"c", b"d"]
        await resp.aclose()
        await pool.aclose()


# ---------------------------------------------------------------------------------------------- connections


async def test_dropped_idle_connection_is_replaced() -> None:
    """The server closes every connection once it answered (without saying so): each next request notices the
    dead idle connection and opens a fresh one; nothing is sent twice."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        req = await srv.read_request(reader)
        if req is not None:
            body = answer_for(req[2])
            writer.write(json_head(len(body)) + body)
            await writer.drain()

    srv = RawServer(handler)
    async with srv.serve() as url, StreamableHTTPClientTransport(url, get_stream=False) as transport:
        for n in range(1, 5):
            assert (await exchange(transport, n))["result"] == {"echo": n}
            await asyncio.sleep(0.05)  # the server's FIN reaches the idle connection
        assert srv.connections == 4
        assert [orjson.loads(r[2])["id"] for r in srv.requests] == [1, 2, 3, 4]


async def test_request_taken_then_dropped_is_not_resent() -> None:
    """A connection that took the whole request and closes without an answer is an error, not a silent retry
    (the call may have run)."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        while (req := await srv.read_request(reader)) is not None:
            if orjson.loads(req[2])["id"] == 2:
                writer.transport.abort()
                return
            body = answer_for(req[2])
            writer.write(json_head(len(body)) + body)
            await writer.drain()

    srv = RawServer(handler)
    async with srv.serve() as url, StreamableHTTPClientTransport(url, get_stream=False) as transport:
        assert (await exchange(transport, 1))["result"] == {"echo": 1}
        with pytest.raises(ConnectionClosed):
            await transport.send(request(2))  # sent on the reused keep-alive connection
        assert [orjson.loads(r[2])["id"] for r in srv.requests] == [1, 2]  # exactly once
        assert (await exchange(transport, 3))["result"] == {"echo": 3}  # and the pool recovers


async def test_oversized_head_refused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        while (req := await srv.read_request(reader)) is not None:
            n = orjson.loads(req[2])["id"]
            body = answer_for(req[2])
            if n == 1:
                extra = "x-big: " + "a" * 100_000 + "\r\n"
            elif n == 2:
                extra = "".join(f"x-h{i}: v\r\n" for i in range(150))
            else:
                extra = ""
            writer.write(json_head(len(body), extra) + body)
            await writer.drain()

    srv = RawServer(handler)
    async with srv.serve() as url, StreamableHTTPClientTransport(url, get_stream=False) as transport:
        with pytest.raises(ConnectionClosed, match="larger than"):
            await transport.send(request(1))
        with pytest.raises(ConnectionClosed, match="header fields"):
            await transport.send(request(2))
        assert (await exchange(transport, 3))["result"] == {"echo": 3}


async def test_oversized_sse_line_refused() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: " + b"x" * 5000)
        await writer.drain()
        await reader.read()

    srv = RawServer(handler)
    async with srv.serve() as url:
        pool = LitePool("127.0.0.1", int(url.split(":")[2].split("/")[0]))
        resp = await pool.request("GET", "/mcp", {})
        decoder = SSEDecoder(1000)
        with pytest.raises(SSEEventTooLarge, match="1000-byte limit"):
            async for chunk in resp.aiter_bytes():
                decoder.feed(chunk)
        await resp.aclose()
        await pool.aclose()


async def test_head_timeout_and_refused_connection() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        await srv.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n")  # then nothing: the rest of the head never comes
        await writer.drain()
        await reader.read()  # until the client gives up and closes

    srv = RawServer(handler)
    async with (
        srv.serve() as url,
        StreamableHTTPClientTransport(url, get_stream=False, timeout=0.3, answer_window=5) as transport,
    ):
        t0 = time.monotonic()
        with pytest.raises(ConnectionClosed):
            await transport.send(request(1))
        assert time.monotonic() - t0 < 3
    # nobody listens on the port any more
    async with StreamableHTTPClientTransport(url, get_stream=False, timeout=2) as transport:
        with pytest.raises(ConnectionClosed, match="cannot connect"):
            await transport.send(request(1))


async def test_pool_is_bounded() -> None:
    """With max_connections=2, four concurrent slow requests use two connections, two at a time."""
    active = 0
    peak = 0

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, srv: RawServer) -> None:
        nonlocal active, peak
        while (req := await srv.read_request(reader)) is not None:
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.1)
            active -= 1
            body = answer_for(req[2])
            writer.write(json_head(len(body)) + body)
            await writer.drain()

    srv = RawServer(handler)
    async with srv.serve() as url:
        pool, target = LitePool.for_url(url, max_connections=2)

        async def one(n: int) -> bytes:
            resp = await pool.request("POST", target, {"content-type": "application/json"}, request(n))
            return await resp.aread()

        bodies = await asyncio.gather(*(one(n) for n in range(4)))
        assert [orjson.loads(b)["id"] for b in bodies] == [0, 1, 2, 3]
        assert peak == 2 and srv.connections == 2
        await pool.aclose()


# ---------------------------------------------------------------------------------------------- both engines


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("mode", ["handshake", "modern"])
@pytest.mark.req("M019", "M020", "M029", "S007")
async def test_session_on_either_engine(fast: bool, mode: str) -> None:
    async with running(make_server()) as (base, _):
        transport = StreamableHTTPClientTransport(base + "/mcp", fast_path=fast)
        assert transport.fast_path is fast
        async with ClientSession(transport, mode=mode) as cs:
            for i in range(20):
                result = await cs.call_tool("echo", {"text": f"t{i}"})
                assert result.content[0].text == f"t{i}"  # type: ignore[union-attr]
            tools = await cs.list_tools()
            assert any(t.name == "echo" for t in tools.tools)
        if fast:
            assert transport._pool is not None and transport._pool.connects <= 3  # kept alive, not per call


FLOOD = 16 * 1024 * 1024  # bytes a hostile server offers (256x the 64 KiB head bound)
PEAK_BOUND = 4 * 1024 * 1024  # Python allocation peak allowed while it runs
Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def serving(answers: dict[str, Answer]) -> AsyncIterator[LitePool]:
    """A server answering ``GET /<name>`` with ``answers[name]``; each request on its own connection read."""

    async def on_conn(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            name = head.split(b" ", 2)[1].decode().lstrip("/")
            await answers[name](reader, writer)
            await writer.drain()

    async with raw_server(on_conn) as port:
        pool = LitePool("127.0.0.1", port, timeout=5)
        try:
            yield pool
        finally:
            await pool.aclose()


def canned(data: bytes, close: bool = False) -> Answer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        if close:
            await writer.drain()
            writer.close()

    return answer


def flood(prefix: bytes) -> Answer:
    """``prefix`` then FLOOD bytes of ``a`` in 256 KiB writes, stopping when the client hangs up."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(prefix)
        piece = b"a" * (256 * 1024)
        for _ in range(FLOOD // len(piece)):
            writer.write(piece)
            await writer.drain()

    return answer


async def get(pool: LitePool, name: str, method: str = "GET") -> tuple[int, bytes]:
    resp = await pool.request(method, "/" + name, {})
    return resp.status_code, await resp.aread(4 * 1024 * 1024)


OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"

REFUSED = {
    # llhttp would read this body to the end of the connection; h11 refused it; we refuse it with our own check
    "te_gzip_chunked": b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "te_identity": b"HTTP/1.1 200 OK\r\ntransfer-encoding: identity\r\n\r\nok",
    # nobody asked to switch protocols
    "switching": b"HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\nok",
    "switching_bare": b"HTTP/1.1 101 Switching Protocols\r\n\r\nok",
    # request smuggling shapes llhttp refuses in its strict mode
    "cl_and_te": b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
    "cl_twice": b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\nok",
    "obs_fold": b"HTTP/1.1 200 OK\r\nx-a: 1\r\n 2\r\ncontent-length: 2\r\n\r\nok",
    "bare_lf": b"HTTP/1.1 200 OK\ncontent-length: 2\n\nok",
    "not_http": b"ICE/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
    "http09": b"HTTP/0.9 200 OK\r\ncontent-length: 2\r\n\r\nok",
    "http2": b"HTTP/2.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
    "status_099": b"HTTP/1.1 099 Odd\r\ncontent-length: 2\r\n\r\nok",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
async def test_framing_llhttp_would_pass_or_we_add_is_refused(name: str) -> None:
    """Each response carries a body a lenient reading would deliver; the fast path refuses it with "broke
    HTTP/1.1" and the next request on the same pool works."""
    async with serving({name: canned(REFUSED[name], close=True), "ok": canned(OK)}) as pool:
        with pytest.raises(LiteHTTPError, match=r"broke HTTP/1\.1"):
            await asyncio.wait_for(get(pool, name), 5)
        assert await get(pool, "ok") == (200, b"ok")


async def test_truncated_bodies_are_errors_close_delimited_is_not() -> None:
    """A body shorter than its Content-Length, or chunked without its last chunk, is an error when the server
    closes; a body with neither runs to the end of the connection (llhttp needs to be told of the EOF)."""
    answers = {
        "short_cl": canned(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nok", close=True),
        "short_chunked": canned(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n", close=True),
        "eof_body": canned(b"HTTP/1.1 200 OK\r\n\r\nall of it", close=True),
        "head_cut": canned(b"HTTP/1.1 200 OK\r\ncontent-le", close=True),
        "nothing": canned(b"", close=True),
    }
    async with serving(answers) as pool:
        for name in ("short_cl", "short_chunked"):
            with pytest.raises(LiteHTTPError, match="closed before the end of the body"):
                await get(pool, name)
        with pytest.raises(LiteHTTPError, match="middle of a response head"):
            await get(pool, "head_cut")
        with pytest.raises(LiteHTTPError, match="without a response"):
            await get(pool, "nothing")
        assert await get(pool, "eof_body") == (200, b"all of it")


async def test_reuse_only_after_a_clean_keep_alive_exchange() -> None:
    """Bytes after a response, ``Connection: close`` and an HTTP/1.0 answer without keep-alive each deliver the
    response and retire the connection; a clean HTTP/1.1 exchange (also one with interim responses, trailers and
    a 204) keeps it."""
    answers = {
        "ok": canned(OK),
        "interim_trailer": canned(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: <x>\r\n\r\n"
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1;ext=1\r\no\r\n1\r\nk\r\n0\r\nx-t: 1\r\n\r\n"
        ),
        "no_content": canned(b"HTTP/1.1 204 No Content\r\n\r\n"),
        "garbage_after": canned(OK + b"XYZ"),
        "second_response_after": canned(OK + OK),
        "close": canned(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"),
        "http10": canned(b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok"),
    }
    async with serving(answers) as pool:
        assert await get(pool, "ok") == (200, b"ok")
        assert await get(pool, "interim_trailer") == (200, b"ok")
        assert await get(pool, "no_content") == (204, b"")
        assert await get(pool, "ok") == (200, b"ok")
        assert pool.connects == 1
        for n, name in enumerate(("garbage_after", "second_response_after", "close", "http10"), start=2):
            assert await get(pool, name) == (200, b"ok")
            assert await get(pool, "ok") == (200, b"ok")
            assert pool.connects == n  # the tainted connection was not reused; the next one was fresh...
        assert await get(pool, "ok") == (200, b"ok")
        assert pool.connects == 5  # ...and that clean one is kept


async def test_head_response_has_no_body_whatever_it_declares() -> None:
    """A HEAD answer declaring ``content-length: 100`` ends with its head (llhttp cannot know the method)."""
    async with serving({"h": canned(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n"), "ok": canned(OK)}) as pool:
        assert await asyncio.wait_for(get(pool, "h", "HEAD"), 5) == (200, b"")
        assert await get(pool, "ok") == (200, b"ok")


@pytest.mark.parametrize(
    "name,prefix",
    [
        ("endless_header_value", b"HTTP/1.1 200 OK\r\nx-big: "),
        ("endless_header_name", b"HTTP/1.1 200 OK\r\nx-"),
        ("endless_trailer", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nx-t: "),
        ("endless_chunk_extension", b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2;x="),
    ],
)
async def test_head_and_chunk_framing_floods_bounded(name: str, prefix: bytes) -> None:
    """16 MiB of one header field, one trailer or one chunk extension (llhttp keeps no bound, httptools joins a
    field's pieces in memory) fail the request naming ``max_header_bytes``, with the allocation peak under 4 MiB."""
    async with serving({name: flood(prefix), "ok": canned(OK)}) as pool:
        tracemalloc.start()
        try:
            with pytest.raises(LiteHTTPError, match="max_header_bytes=65536"):
                await asyncio.wait_for(get(pool, name), 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < PEAK_BOUND, f"{peak / 2**20:.1f} MiB allocated at peak"
        assert await get(pool, "ok") == (200, b"ok")


async def test_interim_flood_bounded_and_head_bound_per_response() -> None:
    """17 interim responses fail naming MAX_INTERIM; 16 (each under the head bound) are read past."""
    interim = b"HTTP/1.1 103 Early Hints\r\nlink: <" + b"a" * 40_000 + b">\r\n\r\n"
    answers = {"many": canned(interim * 17 + OK), "enough": canned(interim * 16 + OK)}
    async with serving(answers) as pool:
        with pytest.raises(LiteHTTPError, match="more than 16 interim"):
            await get(pool, "many")
        assert await get(pool, "enough") == (200, b"ok")


def test_http_client_target_without_httptools_names_the_extra(tmp_path: Path) -> None:
    """httptools is part of the ``http`` extra: a client for an http:// URL without it says
    ``pip install 'mcpkit[http]'`` in one line (issue 13 (a)'s rule, for the new dependency)."""
    proc = run_without(["httptools"], HTTP_CLIENT_CODE, tmp_path)
    assert proc.returncode == 3, proc.stderr
    line = one_line_error(proc)
    assert "pip install 'mcpkit[http]'" in line and "httptools" in line
