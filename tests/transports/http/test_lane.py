"""The lane (``transports/http/lane.py``): a POST that mcpkit's app answers at once is answered in the served
httptools protocol, with no ASGI cycle run; everything else goes the ASGI way, with the body in hand.

Each test serves through ``build_server`` (the lane) and, where bytes are compared, the same app mounted on stock
uvicorn with httptools (the ASGI way): the responses must be byte for byte the same, ``date`` masked. Whether a
request took the lane is seen from uvicorn's side: ``RequestResponseCycle.run_asgi`` runs for every request the
ASGI way and for none on the lane.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
import socket
import ssl
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn
from uvicorn.protocols.http import httptools_impl

from mcpkit import MCPKit
from mcpkit.engine import TapRecorder
from mcpkit.transports.http import build_server, create_app
from mcpkit.transports.http.security import default_policy
from mcpkit.transports.http.streamable import StreamableHTTPEndpoint
from support.mcp_http import handshake_headers, initialize_body, modern_body, modern_headers

V = "2025-11-25"
TAG: contextvars.ContextVar[str | None] = contextvars.ContextVar("TAG", default=None)


def make_app() -> MCPKit:
    app = MCPKit("lane")

    @app.tool(thread=False)
    def add(a: int, b: int) -> str:
        return str(a + b)

    @app.tool(thread=False)
    def tag(value: str) -> str:
        """Sets TAG; returns what TAG was when it started."""
        before = TAG.get()
        TAG.set(value)
        return str(before)

    @app.tool()
    async def later(text: str) -> str:
        await asyncio.sleep(0)
        return text

    @app.tool(thread=False)
    def slow(seconds: float) -> str:
        time.sleep(seconds)  # blocks inline: the loop is handed over meanwhile
        return "slept"

    @app.tool(thread=False)
    def big(size: int) -> str:
        return "x" * size

    return app


@pytest.fixture
def cycles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The requests uvicorn ran an ASGI cycle for (``run_asgi``), as ``"METHOD path"``."""
    ran: list[str] = []
    real = httptools_impl.RequestResponseCycle.run_asgi

    async def counted(self: Any, app: Any) -> None:
        ran.append(f"{self.scope['method']} {self.scope['path']}")
        await real(self, app)

    monkeypatch.setattr(httptools_impl.RequestResponseCycle, "run_asgi", counted)
    return ran


@contextlib.asynccontextmanager
async def serving(
    stock: bool = False, app: MCPKit | None = None, json_response: bool = True, **options: Any
) -> AsyncIterator[tuple[int, Any]]:
    """``make_app()`` served in this loop, through ``build_server`` (the lane) or, ``stock``, its ASGI app on stock
    uvicorn with httptools; yields (port, uvicorn server). ``json_response``: the endpoint's option (False, the
    default of ``app.run``: an answer made at once is one JSON body, anything sent before it makes it SSE)."""
    served = app or make_app()
    options.setdefault("timeout_graceful_shutdown", 1)
    if stock:
        origins, hosts = default_policy("127.0.0.1", None, None)
        asgi = create_app(served, json_response=json_response, allowed_origins=origins, allowed_hosts=hosts)
        config = uvicorn.Config(
            asgi, host="127.0.0.1", port=0, http="httptools", loop="asyncio", **{"log_level": "warning", **options}
        )
        userver = uvicorn.Server(config)
    else:
        userver = build_server(served, "http", "127.0.0.1", 0, json_response=json_response, **options)
    task = asyncio.get_running_loop().create_task(userver.serve())
    while not userver.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield userver.servers[0].sockets[0].getsockname()[1], userver
    finally:
        userver.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)


def post(body: dict[str, Any], headers: dict[str, str], path: str = "/mcp", first: str = "HTTP/1.1") -> bytes:
    data = orjson.dumps(body)
    lines = [f"POST {path} {first}", "host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
    lines.append(f"content-length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


async def read_response(reader: asyncio.StreamReader) -> bytes:
    """One response with a Content-Length (or a 100 Continue line) from ``reader``."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    if head.startswith(b"HTTP/1.1 100"):
        return head + await read_response(reader)
    length = re.search(rb"content-length: (\d+)", head, re.I)
    return head + (await asyncio.wait_for(reader.readexactly(int(length.group(1))), 10) if length else b"")


class Conn:
    """One raw HTTP/1.1 connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Conn:
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def exchange(self, raw: bytes, answers: int = 1) -> list[bytes]:
        self.writer.write(raw)
        return [await read_response(self.reader) for _ in range(answers)]

    def close(self) -> None:
        self.writer.close()


@contextlib.contextmanager
def records(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records of logger ``name`` while the block runs (uvicorn's loggers do not propagate: caplog misses them;
    uvicorn configures its loggers when a server is made: enter this after that)."""
    logged: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = logged.append  # type: ignore[method-assign]
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield logged
    finally:
        logger.removeHandler(handler)


def masked(raw: bytes) -> bytes:
    return re.sub(rb"date: [^\r]*", b"date: -", raw)


def call(rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


async def session_of(conn: Conn) -> dict[str, str]:
    """Open a handshake session on ``conn``; the headers of its later POSTs."""
    (answer,) = await conn.exchange(post(initialize_body(V), handshake_headers()))
    sid = re.search(rb"mcp-session-id: ([^\r]+)", answer).group(1).decode()  # type: ignore[union-attr]
    headers = handshake_headers(sid, V)
    (done,) = await conn.exchange(post({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers))
    assert done.startswith(b"HTTP/1.1 202")
    return headers


def modern_call(rid: int, name: str, arguments: dict[str, Any]) -> bytes:
    body = modern_body("tools/call", {"name": name, "arguments": arguments}, rid=rid)
    return post(body, modern_headers("tools/call", name))


async def both(
    raws: list[Any], errors: list[logging.LogRecord] | None = None, json_response: bool = True
) -> tuple[list[bytes], list[bytes]]:
    """Each of ``raws`` (bytes, or ``fn(headers of a session) -> bytes``) sent on one connection to the lane and one
    to stock uvicorn; the answers of each, masked. ``errors``: gets the records of uvicorn's error log."""
    out: list[list[bytes]] = []
    for stock in (False, True):
        async with serving(stock, json_response=json_response) as (port, _):
            conn = await Conn.open(port)
            headers = await session_of(conn)
            got = []
            with records("uvicorn.error") as logged:
                for raw in raws:
                    got += await conn.exchange(raw(headers) if callable(raw) else raw)
            conn.close()
            out.append([masked(r) for r in got])
            if errors is not None:
                errors += logged
    return out[0], out[1]


# ------------------------------------------------------------------------------------------- the lane itself


@pytest.mark.parametrize("json_response", [True, False], ids=["json_response", "default"])
async def test_inline_calls_are_answered_with_the_bytes_of_the_asgi_way_without_a_cycle(
    json_response: bool, cycles: list[str]
) -> None:
    """Both eras, with ``json_response`` and without (the default): a plain def tool run inline is answered on the
    lane (no ASGI cycle for any of its calls) with the very bytes stock uvicorn sends for the mounted app, headers
    included; so is an error made at once (an unknown tool)."""
    raws = [
        *(lambda h, i=i: post(call(10 + i, "add", {"a": i, "b": 2}), h) for i in range(5)),
        *(modern_call(20 + i, "add", {"a": i, "b": 3}) for i in range(5)),
        lambda h: post(call(30, "add", {"a": "not a number", "b": 1}), h),  # (an isError result, at once too)
        modern_call(31, "nope", {}),  # (a JSON-RPC error made at once)
    ]
    lane, stock = await both(raws, json_response=json_response)
    assert lane == stock
    assert b'"text":"4"' in lane[2] and b"server: uvicorn" in lane[0] and b"date: -" in lane[0]
    # lane: initialize and notifications/initialized (a session to open, a notification: the ASGI way), then none;
    # stock: a cycle for every request
    assert cycles[:2] == ["POST /mcp", "POST /mcp"] and len(cycles) == 2 + 2 + len(raws)


async def test_a_request_answered_on_the_lane_makes_no_uvicorn_cycle(
    cycles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn's cycle (``RequestResponseCycle.__init__``, its event) is made for a request that goes the ASGI way
    only, when it does: none for the calls answered on the lane, one for an async tool (its answer is not made at
    once), made whole with the body the app had read."""
    made: list[str] = []
    real = httptools_impl.RequestResponseCycle.__init__

    def counted(self: Any, **kwargs: Any) -> None:
        made.append(kwargs["scope"]["path"])
        real(self, **kwargs)

    monkeypatch.setattr(httptools_impl.RequestResponseCycle, "__init__", counted)
    async with serving() as (port, _):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        answers = [(await conn.exchange(post(call(i, "add", {"a": i, "b": 1}), headers)))[0] for i in range(3)]
        answers += await conn.exchange(modern_call(7, "add", {"a": 7, "b": 1}))
        answers += await conn.exchange(post(call(8, "later", {"text": "eight"}), headers))
        conn.close()
    texts = [b"1", b"2", b"3", b"8", b"eight"]
    assert all(b'"text":"' + t + b'"' in a for a, t in zip(answers, texts, strict=True)), answers
    assert made == ["/mcp"] * 3  # initialize, notifications/initialized, the async tool's call
    assert len(cycles) == 3


async def test_the_tap_sees_both_directions_of_a_lane_call(cycles: list[str]) -> None:
    app = make_app()
    recorder = TapRecorder()
    app.add_tap(recorder)
    async with serving(app=app) as (port, _):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        (answer,) = await conn.exchange(post(call(7, "add", {"a": 1, "b": 1}), headers))
        (modern,) = await conn.exchange(modern_call(8, "add", {"a": 2, "b": 2}))
        conn.close()
    assert b'"text":"2"' in answer and b'"text":"4"' in modern
    assert len(cycles) == 2  # (the session's opening; both calls on the lane)
    calls = [(e.direction, e.kind) for e in recorder.events if e.id in (7, 8)]
    assert calls.count(("in", "request")) == 2 and calls.count(("out", "result")) == 2


async def test_interceptors_wrap_the_calls_the_lane_starts(cycles: list[str]) -> None:
    """An interceptor is a coroutine: a call the lane starts is no longer answered at once, and the rest of it runs
    the ASGI way (on the cycle, in a task), inside the chain, answered as before."""
    app = make_app()
    seen: list[str] = []

    async def interceptor(c: Any, call_next: Any) -> Any:
        seen.append(c.method)
        return await call_next(c)

    app.add_interceptor(interceptor)
    raws = [lambda h: post(call(7, "add", {"a": 1, "b": 1}), h), modern_call(8, "add", {"a": 2, "b": 2})]
    async with serving(app=app) as (port, _):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        answers = [(await conn.exchange(raw(headers) if callable(raw) else raw))[0] for raw in raws]
        conn.close()
    assert b'"text":"2"' in answers[0] and b'"text":"4"' in answers[1]
    assert seen.count("tools/call") == 2


async def test_a_contextvar_set_by_a_tool_stays_in_its_request(cycles: list[str]) -> None:
    """Each request on the lane runs in its own copy of the connection's context, as a task would."""
    async with serving() as (port, _):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        answers = [(await conn.exchange(post(call(i, "tag", {"value": f"v{i}"}), headers)))[0] for i in range(3)]
        answers += await conn.exchange(modern_call(9, "tag", {"value": "m"}))
        conn.close()
    assert all(b'"text":"None"' in a for a in answers), answers
    assert len(cycles) == 2


async def test_pipelined_requests_are_answered_in_order(cycles: list[str]) -> None:
    """Requests sent in one write: the first on the lane, those behind it the ASGI way once it is answered (an
    async tool among them), each answer in its place."""
    async with serving() as (port, _):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        raw = b"".join(
            [
                post(call(1, "add", {"a": 1, "b": 0}), headers),
                post(call(2, "later", {"text": "two"}), headers),
                post(call(3, "add", {"a": 3, "b": 0}), headers),
                modern_call(4, "add", {"a": 4, "b": 0}),
            ]
        )
        answers = await conn.exchange(raw, 4)
        # the connection goes on: the next request takes the lane again
        answers += await conn.exchange(post(call(5, "add", {"a": 5, "b": 0}), headers))
        conn.close()
    assert [orjson.loads(a.split(b"\r\n\r\n", 1)[1])["id"] for a in answers] == [1, 2, 3, 4, 5]
    texts = [b"1", b"two", b"3", b"4", b"5"]
    assert all(b'"text":"' + t + b'"' in a for a, t in zip(answers, texts, strict=True))
    assert len(cycles) == 2 + 3  # (the three pipelined behind the first)


# ------------------------------------------------------------------------------------------- the ASGI way


def _raw_cases() -> dict[str, Any]:
    def h(headers: dict[str, str], **extra: str) -> dict[str, str]:
        return {**headers, **extra}

    return {
        "connection close": lambda s: post(call(1, "add", {"a": 1, "b": 1}), h(s, connection="close")),
        "http/1.0": lambda s: post(call(1, "add", {"a": 1, "b": 1}), s, first="HTTP/1.0"),
        "expect 100-continue": lambda s: post(call(1, "add", {"a": 1, "b": 1}), h(s, expect="100-continue")),
        "a query": lambda s: post(call(1, "add", {"a": 1, "b": 1}), s, path="/mcp?x=1"),
        "a trailing slash": lambda s: post(call(1, "add", {"a": 1, "b": 1}), s, path="/mcp/"),
        "an origin": lambda s: post(call(1, "add", {"a": 1, "b": 1}), h(s, origin="http://localhost:1")),
        "an async tool": lambda s: post(call(1, "later", {"text": "hi"}), s),
        "a parse error": lambda s: post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": 5}, s),
        "an unknown session": lambda s: post(call(1, "add", {"a": 1, "b": 1}), handshake_headers("nope", V)),
        "a GET": lambda s: b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n",
    }


@pytest.mark.parametrize("case", list(_raw_cases()))
async def test_requests_the_lane_leaves_go_the_asgi_way_with_the_same_answer(case: str, cycles: list[str]) -> None:
    raw = _raw_cases()[case]
    lane, stock = await both([raw])
    assert lane == stock
    assert lane[0].startswith(b"HTTP/1.1 ")
    assert len(cycles) == 2 * (2 + 1)  # every request of both servers ran a cycle


async def test_an_app_that_uvicorn_wraps_goes_the_asgi_way(cycles: list[str]) -> None:
    """With ``forwarded_allow_ips`` uvicorn's proxy-headers middleware rewrites the scope before the app: the lane,
    which would ask the app directly, stays out."""
    async with serving(forwarded_allow_ips="127.0.0.1") as (port, _):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        (answer,) = await conn.exchange(post(call(1, "add", {"a": 1, "b": 1}), headers))
        conn.close()
    assert b'"text":"2"' in answer
    assert len(cycles) == 2 + 1


def _self_signed(where: Path) -> tuple[str, str]:
    """A key and a certificate for 127.0.0.1, written under ``where``."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    keyfile, certfile = where / "key.pem", where / "cert.pem"
    keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(keyfile), str(certfile)


async def test_a_tls_connection_goes_the_asgi_way(cycles: list[str], tmp_path: Path) -> None:
    """Over TLS the read callback is the socket's, below asyncio's TLS protocol, which a hand-over could not pause:
    the lane stays out."""
    keyfile, certfile = _self_signed(tmp_path)
    async with serving(ssl_keyfile=keyfile, ssl_certfile=certfile) as (port, _):
        context = ssl.create_default_context(cafile=certfile)
        conn = Conn(*await asyncio.open_connection("127.0.0.1", port, ssl=context))
        headers = await session_of(conn)
        (answer,) = await conn.exchange(post(call(1, "add", {"a": 1, "b": 1}), headers))
        conn.close()
    assert b'"text":"2"' in answer
    assert len(cycles) == 2 + 1


async def test_a_body_that_grows_past_64_kib_before_it_is_whole_is_read_by_the_app(cycles: list[str]) -> None:
    """The lane holds no more of a body than uvicorn's flow-control mark: past it, the app reads the rest (the ASGI
    way); the answer is the same."""
    async with serving() as (port, _):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        raw = post(call(1, "add", {"a": 1, "b": 1, "pad": "x" * 200_000}), headers)
        conn.writer.write(raw[:100_000])
        await conn.writer.drain()
        await asyncio.sleep(0.2)
        (answer,) = await conn.exchange(raw[100_000:])
        conn.close()
    assert answer.startswith(b"HTTP/1.1 200 ") and b"pad" in answer  # (an unexpected argument: an isError result)
    assert len(cycles) == 2 + 1


async def test_an_exception_in_the_lane_is_answered_as_uvicorn_answers_it(
    cycles: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    route = StreamableHTTPEndpoint.route

    def failing(self: Any, scope: Any, h: Any, body: bytes, receive: Any, send: Any) -> Any:
        if b'"boom"' in body:
            raise RuntimeError("boom")
        return route(self, scope, h, body, receive, send)

    monkeypatch.setattr(StreamableHTTPEndpoint, "route", failing)
    logged: list[logging.LogRecord] = []
    lane, stock = await both([lambda s: post(call(1, "add", {"a": "boom", "b": 1}), s)], logged)
    assert lane == stock and lane[0].startswith(b"HTTP/1.1 500 ") and b"connection: close" in lane[0]
    assert [r.getMessage() for r in logged].count("Exception in ASGI application\n") == 2


async def test_the_access_log_has_the_line_of_the_asgi_way(cycles: list[str]) -> None:
    lines = []
    for stock in (False, True):
        async with serving(stock, log_level="info") as (port, _):
            with records("uvicorn.access") as logged:
                conn = await Conn.open(port)
                headers = await session_of(conn)
                await conn.exchange(post(call(1, "add", {"a": 1, "b": 1}), headers))
                conn.close()
        lines.append(" ".join(re.sub(r":\d+ - ", ":- - ", r.getMessage()) for r in logged))
    assert len(cycles) == 2 + 3
    assert lines[0] == lines[1] and lines[0].count('"POST /mcp HTTP/1.1" 200') == 2


# ------------------------------------------------------------------------------------------- the connection


async def test_an_idle_connection_is_closed_after_the_keep_alive_timeout_by_the_guard_not_a_timer_per_answer(
    cycles: list[str],
) -> None:
    """uvicorn arms a keep-alive timer after every response; the lane's protocol leaves the idle connection to the
    guard's one timer per server, which closes it ``timeout_keep_alive`` seconds (up to half a second more) after
    its last answer, the ASGI way's answers (the handshake) and the lane's alike; a connection that keeps sending
    requests more often than that stays open."""
    async with serving(timeout_keep_alive=0.5) as (port, userver):
        guard = userver.mcpkit_guard
        conn = await Conn.open(port)
        headers = await session_of(conn)
        (proto,) = userver.server_state.connections
        assert proto.timeout_keep_alive_task is None and proto in guard.idle  # (after the ASGI way's answers)
        for i in range(6):  # 1.5 s of requests 0.25 s apart: never idle for 0.5 s
            (answer,) = await conn.exchange(post(call(i, "add", {"a": i, "b": 1}), headers))
            assert f'"text":"{i + 1}"'.encode() in answer
            assert proto.timeout_keep_alive_task is None and proto in guard.idle
            await asyncio.sleep(0.25)
        assert guard.closed_idle == 0
        t0 = time.monotonic()
        assert await asyncio.wait_for(conn.reader.read(), 10) == b""  # closed by the guard
        assert time.monotonic() - t0 < 1.5 and guard.closed_idle == 1 and not guard.idle
        conn.close()
    assert len(cycles) == 2


async def test_a_shutdown_while_a_body_comes_answers_it_and_closes_the_connection(cycles: list[str]) -> None:
    """uvicorn's graceful shutdown reaches a request whose head came and whose body has not: it is answered when
    the body is whole, with ``connection: close`` (the same bytes as the ASGI way), and the connection closes."""
    got = []
    for stock in (False, True):
        async with serving(stock) as (port, userver):
            conn = await Conn.open(port)
            headers = await session_of(conn)
            raw = post(call(1, "add", {"a": 1, "b": 1}), headers)
            conn.writer.write(raw[:-5])
            (proto,) = userver.server_state.connections
            while proto.cycle.response_complete:  # (the head has come: the request's cycle)
                await asyncio.sleep(0.01)
            userver.should_exit = True
            while proto.cycle.keep_alive:  # (uvicorn's shutdown reached the connection)
                await asyncio.sleep(0.01)
            (answer,) = await conn.exchange(raw[-5:])
            assert await asyncio.wait_for(conn.reader.read(), 10) == b""
            conn.close()
        got.append(masked(answer))
    assert got[0] == got[1] and b"connection: close\r\n" in got[0] and b'"text":"2"' in got[0]
    assert len(cycles) == 2 + 3  # (the lane's request needed none)


async def test_the_guards_body_timeout_holds_on_the_lane(cycles: list[str]) -> None:
    async with serving(body_timeout=0.3) as (port, userver):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        raw = post(call(1, "add", {"a": 1, "b": 1}), headers)
        conn.writer.write(raw[:-5])  # the body's last bytes never come
        assert await asyncio.wait_for(conn.reader.read(), 10) == b""
        assert userver.mcpkit_guard.closed_slow == 1
        conn.close()
    assert len(cycles) == 2


async def test_the_guards_send_timeout_holds_on_the_lane(cycles: list[str]) -> None:
    """A client that reads nothing of a large answer written on the lane is aborted after ``send_timeout``."""
    async with serving(send_timeout=0.3) as (port, userver):
        conn = await Conn.open(port)
        headers = await session_of(conn)
        sock: socket.socket = conn.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        conn.writer.write(post(call(1, "big", {"size": 32 * 1024 * 1024}), headers))
        for _ in range(1000):
            if userver.mcpkit_guard.aborted_stalled:
                break
            await asyncio.sleep(0.01)
        assert userver.mcpkit_guard.aborted_stalled == 1
        conn.close()
    assert len(cycles) == 2


async def test_a_long_inline_call_on_the_lane_is_handed_over_and_its_connection_waits(cycles: list[str]) -> None:
    """A def tool that blocks inline on the lane: the loop is handed over (other connections are served), the
    next request sent on its connection meanwhile waits for it (the stand-in never runs this connection's read
    callback, which is still under way), and both are answered in order."""
    from mcpkit._runtime import running_guard

    errors: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    try:
        async with serving() as (port, _):
            guard = running_guard()
            assert guard is not None
            conn, other = await Conn.open(port), await Conn.open(port)
            headers = await session_of(conn)
            other_headers = await session_of(other)
            h0 = guard.handovers
            conn.writer.write(post(call(1, "slow", {"seconds": 0.4}), headers))
            await asyncio.sleep(0.15)  # (served by the stand-in while the call blocks)
            conn.writer.write(post(call(2, "add", {"a": 2, "b": 0}), headers))
            (served,) = await other.exchange(post(call(3, "add", {"a": 3, "b": 0}), other_headers))
            answers = [await read_response(conn.reader), await read_response(conn.reader)]
            assert guard.handovers > h0
            conn.close()
            other.close()
    finally:
        loop.set_exception_handler(None)
    assert b'"text":"3"' in served
    assert b'"text":"slept"' in answers[0] and b'"text":"2"' in answers[1]
    assert errors == []
