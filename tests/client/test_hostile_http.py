"""Issue 15 (HTTP side) and 14.4: a hostile Streamable HTTP server cannot exhaust, hang or confuse the client.

The hostile server is a real process (``tests/support/servers/hostile_http.py``, raw HTTP/1.1 on 127.0.0.1); each tool
name is one attack. Floods are bounded at 64 MiB (16x the client's 4 MiB ``max_message_size``); while one runs,
this process's resident memory is sampled every 5 ms and its growth must stay under ``RSS_BOUND``. Every request
must end within its deadline (each test is wrapped in ``asyncio.wait_for``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import orjson
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import ConnectionClosed, MCPError, RequestTimeout
from mcpkit.transports.http import StreamableHTTPClientTransport
from mcpkit.transports.http.lite import LiteHTTPError, LitePool
from mcpkit.transports.http.sse_client import SSEClientTransport
from support.paths import SERVERS

SERVER = SERVERS / "hostile_http.py"
RSS_BOUND = 32 * 1024 * 1024  # peak memory growth of this process while a 64 MiB flood runs (limit: 4 MiB)
PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, str(SERVER)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.kill()
        proc.wait(10)


def _rss() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * PAGE


class PeakRSS:
    """Inside ``async with``: this process's RSS sampled every 5 ms, and the peak of Python allocations
    (tracemalloc, which memory freed earlier and reused by the allocator cannot hide). ``growth`` is the larger of
    the RSS peak over its start and the allocation peak over the start."""

    def __init__(self) -> None:
        self.start = self.peak = self.traced = 0
        self._task: asyncio.Task[None] | None = None

    async def _sample(self) -> None:
        while True:
            self.peak = max(self.peak, _rss())
            await asyncio.sleep(0.005)

    async def __aenter__(self) -> PeakRSS:
        tracemalloc.start()
        self._traced_start = tracemalloc.get_traced_memory()[0]
        self.start = self.peak = _rss()
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self.peak = max(self.peak, _rss())
        self.traced = tracemalloc.get_traced_memory()[1] - self._traced_start
        tracemalloc.stop()

    @property
    def growth(self) -> int:
        return max(self.peak - self.start, self.traced)


@contextlib.asynccontextmanager
async def session(base: str, **options: Any) -> AsyncIterator[ClientSession]:
    transport = StreamableHTTPClientTransport(base + "/mcp", **options)
    async with transport, ClientSession(transport, mode="handshake", timeout=20) as cs:
        yield cs


async def stats(base: str) -> dict[str, Any]:
    async with httpx.AsyncClient() as client:
        data: dict[str, Any] = (await client.get(base + "/stats")).json()
        return data


ENGINES = [pytest.param(True, id="lite-engine"), pytest.param(False, id="httpx-engine")]


# ---------------------------------------------------------------------------------------------- 15.1 sizes


@pytest.mark.parametrize("fast", ENGINES)
@pytest.mark.parametrize("attack", ["huge_declared", "huge_chunk", "endless_data", "endless_line"])
async def test_http_answers_bounded_by_max_message_size(hostile: str, fast: bool, attack: str) -> None:
    """A 10 GB Content-Length, a FFFFFFFFFF chunk, an SSE event of endless data lines and one endless SSE line
    (64 MiB each, on both HTTP engines) fail the request with an error naming max_message_size, within 10 s,
    while the client grows by less than 32 MiB."""

    async def run() -> None:
        async with session(hostile, fast_path=fast) as cs, PeakRSS() as mem:
            t0 = time.monotonic()
            with pytest.raises(MCPError, match="max_message_size=4194304"):
                await cs.call_tool(attack, {})
            assert time.monotonic() - t0 < 10
            assert await cs.call_tool("fine", {})  # the session goes on
        print(f"{attack} fast={fast}: peak memory growth {mem.growth / 2**20:.1f} MiB, {time.monotonic() - t0:.2f}s")
        assert mem.growth < RSS_BOUND, f"client grew by {mem.growth / 2**20:.0f} MiB"

    await asyncio.wait_for(run(), 30)


async def test_legacy_sse_client_line_flood(hostile: str) -> None:
    """The legacy HTTP+SSE client checks the size while a line arrives: a 64 MiB line ends the connection (every
    pending request fails at once) and the client grows by less than 32 MiB."""

    async def run() -> None:
        async with PeakRSS() as mem, SSEClientTransport(hostile + "/sse-flood") as conn:
            with pytest.raises(ConnectionClosed, match="max_message_size"):  # the end of input, saying why
                await asyncio.wait_for(conn.receive(), 10)
            assert await asyncio.wait_for(conn.receive(), 1) is None
        print(f"legacy SSE line flood: peak memory growth {mem.growth / 2**20:.1f} MiB")
        assert mem.growth < RSS_BOUND, f"client grew by {mem.growth / 2**20:.0f} MiB"

    await asyncio.wait_for(run(), 30)


# ---------------------------------------------------------------------------------------------- 15.3 timeouts


async def test_legacy_sse_timeout_holds_when_the_post_is_never_answered(hostile: str) -> None:
    """Legacy HTTP+SSE: a server that takes a request's POST and never answers it does not stretch the call's
    timeout to the HTTP client's (30 s): the call fails at its own deadline, and the session goes on."""

    async def run() -> None:
        async with SSEClientTransport(hostile + "/sse-stall") as conn, ClientSession(conn, mode="handshake") as cs:
            assert (await cs.call_tool("fine", {})).content
            started = time.monotonic()
            with pytest.raises(RequestTimeout):
                await cs.call_tool("stall", {}, timeout=1)
            assert time.monotonic() - started < 3
            assert (await cs.call_tool("fine", {})).content

    await asyncio.wait_for(run(), 20)


async def test_legacy_sse_a_post_that_times_out_says_why(hostile: str) -> None:
    """Legacy HTTP+SSE: a POST that fails with an HTTP client error of no text of its own (a read timeout) named
    nothing ('POST to ... failed: '); the error names its kind."""
    stall = orjson.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "stall"}})
    async with SSEClientTransport(hostile + "/sse-stall", timeout=0.5) as conn:
        with pytest.raises(ConnectionClosed, match=r"failed: ReadTimeout$"):
            await asyncio.wait_for(conn.send(stall), 20)  # (no Outgoing: send waits for the POST itself)


@pytest.mark.parametrize("fast", ENGINES)
async def test_close_does_not_wait_for_an_unanswered_delete(hostile: str, fast: bool) -> None:
    """Closing a handshake-era session sends DELETE; a server that never answers it does not make close() hang:
    the DELETE is a courtesy, bounded by a few seconds."""

    async def run() -> float:
        transport = StreamableHTTPClientTransport(hostile + "/mcp", fast_path=fast)
        async with ClientSession(transport, mode="handshake", timeout=10) as cs:
            assert (await cs.call_tool("hold_delete", {})).content
            started = time.monotonic()  # (leaving the block closes the session: DELETE)
        return time.monotonic() - started

    assert await asyncio.wait_for(run(), 20) < 8


async def test_abandoned_streams_closed_in_handshake_era(hostile: str) -> None:
    """Handshake era, 3 connections at most: 5 requests whose SSE answers never come each time out, and the
    6th request (a ping) still gets through: the abandoned streams were closed, not left holding the pool."""

    async def run() -> None:
        async with session(hostile, max_connections=3) as cs:
            for _ in range(5):
                with pytest.raises(RequestTimeout):
                    await cs.call_tool("silent_stream", {}, timeout=0.3)
            await cs.ping(timeout=3)

    await asyncio.wait_for(run(), 15)


async def test_timeout_does_not_wait_for_the_cancellation_post(hostile: str) -> None:
    """The server takes the notifications/cancelled POST and never answers it: the caller's timeout still
    raises on time (the cancellation is sent in the background)."""

    async def run() -> None:
        async with session(hostile) as cs:
            t0 = time.monotonic()
            with pytest.raises(RequestTimeout):
                await cs.call_tool("silent_cancel_hang", {}, timeout=0.3)
            assert time.monotonic() - t0 < 1.5

    await asyncio.wait_for(run(), 15)


async def test_pool_slot_wait_has_a_deadline(hostile: str) -> None:
    """All connections busy (one, held by a never-ending answer): the next request fails after ``timeout``
    with an error naming max_connections, instead of waiting forever."""

    async def run() -> None:
        pool, target = LitePool.for_url(hostile + "/mcp", timeout=0.5, max_connections=1)
        body = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "silent_stream"}})
        held = await pool.request("POST", target, {"content-type": "application/json"}, body)
        t0 = time.monotonic()
        with pytest.raises(LiteHTTPError, match="max_connections=1"):
            await pool.request("POST", target, {"content-type": "application/json"}, body)
        assert time.monotonic() - t0 < 2
        await held.aclose()
        await pool.aclose()

    await asyncio.wait_for(run(), 10)


async def test_resume_storm_is_bounded(hostile: str) -> None:
    """Every stream carries one event with ``retry: 0`` and ends: the client resumes at most max_reconnects (5)
    times, backing off, then fails the request (it made thousands of GETs in 4 s before)."""

    async def run() -> None:
        before = (await stats(hostile))["gets"]
        async with session(hostile) as cs:
            with pytest.raises(MCPError, match="SSE stream ended"):
                await cs.call_tool("storm", {}, timeout=10)
        assert (await stats(hostile))["gets"] - before <= 5

    await asyncio.wait_for(run(), 20)


async def test_standalone_stream_storm_is_bounded(hostile: str) -> None:
    """The standalone GET stream of a handshake session gets one ``retry: 0`` event per stream: reconnections
    back off and stop after max_reconnects instead of looping at full speed."""

    async def run() -> None:
        before = await stats(hostile)
        async with session(hostile + "?standalone=storm", max_reconnects=3) as cs:
            await asyncio.sleep(2.5)  # backoff 0.1 + 0.2 + 0.4 s, then it gives up
            assert await cs.call_tool("fine", {})
            after = await stats(hostile)
        # the first stream, then 3 reconnections (each resuming with Last-Event-ID)
        assert after["standalone_gets"] - before["standalone_gets"] == 1
        assert after["gets"] - before["gets"] <= 3

    await asyncio.wait_for(run(), 15)


@pytest.mark.parametrize("fast", ENGINES)
async def test_a_get_stream_refused_409_once_is_opened_again(hostile: str, fast: bool) -> None:
    """Servers that allow one GET stream per session answer 409 to a second while they still hold the first (a
    half-open connection): the client tries again, backing off, and gets the stream's notifications."""
    token = f"t{fast}{time.monotonic_ns()}"
    seen: list[Any] = []
    got = asyncio.Event()

    def on_note(method: str, params: Any) -> None:
        seen.append((method, params.get("data")))
        got.set()

    async def run() -> None:
        transport = StreamableHTTPClientTransport(f"{hostile}/mcp?standalone=conflict&once={token}", fast_path=fast)
        async with transport, ClientSession(transport, mode="handshake", notification_handler=on_note) as cs:
            await asyncio.wait_for(got.wait(), 5)
            assert await cs.call_tool("fine", {})
        assert seen == [("notifications/message", token)]

    await asyncio.wait_for(run(), 15)


async def test_a_get_stream_refused_409_every_time_is_given_up_after_bounded_attempts_with_one_warning(
    hostile: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def run() -> None:
        before = (await stats(hostile))["conflict_gets"]
        with caplog.at_level("WARNING", logger="mcpkit"):
            url = f"{hostile}/mcp?standalone=conflict"
            transport = StreamableHTTPClientTransport(url, max_reconnects=3, reconnect_delay=0.1)
            async with transport, ClientSession(transport, mode="handshake", timeout=20) as cs:
                await asyncio.sleep(2.0)  # backoff 0.1 + 0.2 + 0.4 s, then it gives up
                assert await cs.call_tool("fine", {})
                after = (await stats(hostile))["conflict_gets"]
        assert after - before == 4  # the first GET, then 3 more
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and "409" in r.getMessage()]
        assert len(warnings) == 1, warnings

    await asyncio.wait_for(run(), 15)


# ---------------------------------------------------------------------------------------------- 15.6 clear failures


async def test_interim_response_flood_is_a_one_line_error(hostile: str) -> None:
    """2,000 interim ``100 Continue`` responses: a one-line error naming the bound, not a RecursionError."""

    async def run() -> None:
        async with session(hostile) as cs:
            with pytest.raises(ConnectionClosed, match="interim"):
                await cs.call_tool("interim", {})
            assert await cs.call_tool("fine", {})

    await asyncio.wait_for(run(), 10)


@pytest.mark.parametrize("fast", ENGINES)
async def test_deep_input_schema_lists_without_recursion_error(hostile: str, fast: bool) -> None:
    """A tools/list whose inputSchema nests 1,012 levels deep is read (the x-mcp-header scan is iterative)."""

    async def run() -> None:
        async with session(hostile, fast_path=fast) as cs:
            result = await cs.list_tools()
            assert [t.name for t in result.tools] == ["deep"]

    await asyncio.wait_for(run(), 10)


# ---------------------------------------------------------------------------------------------- 15.7 / 14.4


@pytest.mark.parametrize(
    "attack", ["cl_plus", "cl_underscore", "chunk_0x", "chunk_plus", "chunk_minus", "te_notchunked", "status_plus"]
)
async def test_lenient_framing_refused(hostile: str, attack: str) -> None:
    """``content-length: +N`` and ``8_7``, chunk sizes ``0x57``, ``+57`` and ``-1``, ``Transfer-Encoding:
    notchunked`` and ``HTTP/1.1 +20`` are refused by the client's HTTP/1.1 parser (llhttp via httptools; the
    Transfer-Encoding check is our own, llhttp would read that body to EOF) with a clear error; each carries a
    valid answer that a lenient parser would have delivered."""

    async def run() -> None:
        async with session(hostile) as cs:
            with pytest.raises(ConnectionClosed, match=r"broke HTTP/1\.1"):
                await cs.call_tool(attack, {})
            assert await cs.call_tool("fine", {})

    await asyncio.wait_for(run(), 10)


async def test_unterminated_trailing_event_not_dispatched(hostile: str) -> None:
    """The answer arrives as an SSE event that the end of the stream cuts off (no blank line): per WHATWG it is
    not dispatched, so the request fails instead of taking a half-sent event as its answer."""

    async def run() -> None:
        async with session(hostile, max_reconnects=0) as cs:
            with pytest.raises(MCPError, match="SSE stream ended"):
                await cs.call_tool("trailing", {})

    await asyncio.wait_for(run(), 10)


async def test_event_id_with_nul_ignored(hostile: str) -> None:
    """``id: bad\\0id`` is ignored (WHATWG): the resumption GET carries the last good id, never the NUL one."""

    async def run() -> None:
        async with session(hostile, max_reconnects=1) as cs:
            with pytest.raises(MCPError):
                await cs.call_tool("nul_id", {})
        ids = (await stats(hostile))["last_event_ids"]
        assert "good" in ids
        assert not any("\0" in i for i in ids)

    await asyncio.wait_for(run(), 10)


@pytest.mark.parametrize("fast", ENGINES)
@pytest.mark.parametrize("attack", ["accepted", "empty_json", "bad_json", "text_plain", "other_id", "note_only"])
async def test_post_answer_without_the_response_fails_at_once(hostile: str, fast: bool, attack: str) -> None:
    """A request's POST answered 2xx with no response to it (202, an empty or broken JSON body, text/plain, a JSON
    response to another id, a lone notification) fails that request at once, saying what the server answered,
    instead of leaving it to wait out its timeout (the spec: the POST of a request is answered with its response,
    as JSON or on an SSE stream; no other stream may carry it). The session goes on."""

    async def run() -> None:
        transport = StreamableHTTPClientTransport(hostile + "/mcp", fast_path=fast)
        async with transport, ClientSession(transport, mode="handshake", timeout=None) as cs:
            started = time.monotonic()
            with pytest.raises(MCPError, match="no response to the request") as info:
                await cs.call_tool(attack, {})
            assert time.monotonic() - started < 5
            assert "with HTTP 20" in info.value.message
            assert (await cs.call_tool("fine", {})).content

    await asyncio.wait_for(run(), 10)


@pytest.mark.parametrize("fast", ENGINES)
@pytest.mark.parametrize("attack", ["hangup", "hangup_late"])
async def test_connection_lost_mid_call_is_connection_closed(hostile: str, fast: bool, attack: str) -> None:
    """The server closing the connection of a request's POST without answering fails that request with
    ConnectionClosed (what the docs promise when the connection ends), whether the call had lasted a moment
    (``hangup``) or longer than the transport's ``answer_window`` (``hangup_late``: its POST then runs in the
    background), never as a JSON-RPC error the server did not send. The session goes on."""

    async def run() -> None:
        transport = StreamableHTTPClientTransport(hostile + "/mcp", fast_path=fast)
        async with transport, ClientSession(transport, mode="handshake", timeout=20) as cs:
            with pytest.raises(ConnectionClosed, match=r"POST .* failed"):
                await cs.call_tool(attack, {})
            assert (await cs.call_tool("fine", {})).content

    await asyncio.wait_for(run(), 10)
