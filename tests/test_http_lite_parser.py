"""The fast path's HTTP/1.1 response parsing on httptools (llhttp): what llhttp leaves to its caller.

llhttp is strict about syntax but has no size limits, reads a response whose ``Transfer-Encoding`` is not chunked
to the end of the connection, and knows nothing of the request (HEAD) or of reuse. ``transports/http/lite.py``
adds those checks; each test here serves raw bytes from a hand-written asyncio server on 127.0.0.1 and talks to
it through :class:`LitePool`, the engine the Streamable HTTP client uses for plain ``http://`` URLs. The memory
tests send a payload 256 times the bound and hold Python's allocation peak (tracemalloc, client and server in
this process) under a stated figure.
"""

from __future__ import annotations

import asyncio
import contextlib
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from mcpkit.transports.http.lite import LiteHTTPError, LitePool
from support.extras import HTTP_CLIENT_CODE, one_line_error, run_without
from support.rawhttp import raw_server

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
async def test_issue15_item7_framing_llhttp_would_pass_or_we_add_is_refused(name: str) -> None:
    """Each response carries a body a lenient reading would deliver; the fast path refuses it with "broke
    HTTP/1.1" and the next request on the same pool works."""
    async with serving({name: canned(REFUSED[name], close=True), "ok": canned(OK)}) as pool:
        with pytest.raises(LiteHTTPError, match=r"broke HTTP/1\.1"):
            await asyncio.wait_for(get(pool, name), 5)
        assert await get(pool, "ok") == (200, b"ok")


async def test_issue15_item7_truncated_bodies_are_errors_close_delimited_is_not() -> None:
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


async def test_issue15_item7_reuse_only_after_a_clean_keep_alive_exchange() -> None:
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
async def test_issue15_item1_head_and_chunk_framing_floods_bounded(name: str, prefix: bytes) -> None:
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


async def test_issue15_item6_interim_flood_bounded_and_head_bound_per_response() -> None:
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
