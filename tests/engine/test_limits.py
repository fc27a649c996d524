"""A peer's limits on batches and requests in flight, tried as a hostile peer would: on the server side against a
real process (tests/support/servers/limits_server.py over stdio and WebSocket on 127.0.0.1), on the client side
against a hostile stdio server (tests/support/servers/hostile_server.py). The same limits over Streamable HTTP, where
a session's cap and the HTTP edges add their own, are in tests/transports/http/test_limits.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol import errors
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.stdio import StdioClientTransport, StdioServer
from support.limits import (
    MODERN,
    PeakRSS,
    batches,
    flood,
    raw_peer,
    stats,
    stats_of,
)
from support.paths import SERVERS

# ---------------------------------------------------------------- raw peers over each transport


# ---------------------------------------------------------------- 12.3: batches count against the caps


@pytest.mark.req("M011")
@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_batch_items_count_against_caps(transport: str) -> None:
    """Issue 12.3: every request of a batch takes one of the connection's 256 slots, like a single request: 600
    batched calls of a 300 ms tool never run more than 256 at once (on 91956f7 all 600 ran at once), and every one
    is still answered, each batch as one array."""
    async with raw_peer(transport) as peer:
        answers = await flood(peer, batches(6, 100, 300))
        assert all(isinstance(a, list) and len(a) == 100 for a in answers)
        assert all("result" in r for a in answers for r in a)
        await peer.send(stats(1))
        seen = stats_of(await peer.recv())
        assert seen["calls"] == 600
        assert seen["peak"] <= 256, seen


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_batch_flood_memory_is_bounded(transport: str) -> None:
    """Issue 12.3: 30,000 batched calls (300 batches of 100) of a tool that holds each call for up to 3 s, sent as
    fast as the transport takes them: the reader stops while the 256 slots are taken, so the server's memory stays
    flat (on 91956f7 all 30,000 were in flight at once: +210 MB)."""
    async with raw_peer(transport) as peer:
        assert len(await flood(peer, batches(3, 100, 1, first_id=10))) == 3  # warm-up
        until = time.time() + 3.0  # every call waits until then: what the server admits stays in flight until then
        work = [
            [{**c, "params": {"name": "slow", "arguments": {"until": until}}} for c in b] for b in batches(300, 100, 0)
        ]
        async with PeakRSS(peer.pid) as rss:
            answers = await flood(peer, work)
        assert sum(len(a) for a in answers) == 30_000
        print(f"{transport}: 30,000 batched calls, server RSS +{rss.growth_mb:.1f} MB")
        assert rss.growth_mb < 40, rss.growth_mb


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_batch_longer_than_max_batch_size_is_refused(transport: str) -> None:
    """Issue 12.3: a batch of more than max_batch_size (100) messages is answered with one -32600 error naming the
    limit and its option, none of it runs, and the session goes on."""
    async with raw_peer(transport) as peer:
        await peer.send(batches(1, 101, 1)[0])
        err = await peer.recv()
        assert isinstance(err, dict) and err["error"]["code"] == -32600 and err["id"] is None
        assert "max_batch_size" in err["error"]["message"] and "100" in err["error"]["message"]
        await peer.send(stats(1))
        assert stats_of(await peer.recv())["calls"] == 0
        await peer.send(batches(1, 100, 1)[0])
        assert len(await peer.recv()) == 100


# ---------------------------------------------------------------- over Streamable HTTP


# ---------------------------------------------------------------- 16: queue before refusing


# ---------------------------------------------------------------- 12.12: modern batches


@pytest.mark.parametrize("transport", ["stdio", "ws"])
async def test_modern_batch_over_stdio_and_ws_says_batches_do_not_exist(transport: str) -> None:
    """Issue 12.12 on stdio and WebSocket: a batch sent to a server that speaks only 2026-07-28 is refused with
    -32600 "batches do not exist in 2026-07-28" (on 91956f7: "JSON-RPC batches are not allowed", member by member),
    and a batch sent before initialize to a server of both eras is refused whole in the same words."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    item = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    async with raw_peer(transport, "modern_only=1", handshake=False) as peer:
        await peer.send([item, {**item, "id": 2}])
        err = await peer.recv()
        assert isinstance(err, dict) and err["error"]["code"] == -32600
        assert "batches do not exist in 2026-07-28" in err["error"]["message"]
        await peer.send(item)
        assert "tools" in (await peer.recv())["result"]
    async with raw_peer(transport, handshake=False) as peer:
        # a server of both eras, no initialize yet: no batch can be valid in any era; one error, never an array
        await peer.send([item, {**item, "id": 2}])
        err = await peer.recv()
        assert isinstance(err, dict) and err["id"] is None and err["error"]["code"] == -32600
        assert "batches do not exist in 2026-07-28" in err["error"]["message"]
        assert "only after initialize" in err["error"]["message"]


def _elapsed(t0: float) -> float:
    return time.monotonic() - t0


# ---------------------------------------------------------------- 15.2 / 15.6: the client against a hostile server

HOSTILE_SERVER = SERVERS / "hostile_server.py"


@contextlib.asynccontextmanager
async def hostile(mode: str, **kw: Any) -> AsyncIterator[ClientSession]:
    """A ClientSession to tests/support/servers/hostile_server.py MODE over stdio (a real process)."""
    t = StdioClientTransport(StdioServer([sys.executable, str(HOSTILE_SERVER), mode], stderr="devnull"))
    await t.start()
    era = "modern" if mode in ("many-inputs", "big-reply") else "handshake"
    async with ClientSession(t, mode=era, **kw) as cs:
        yield cs


class Gauge:
    """Counts how many calls of a handler run at once."""

    def __init__(self) -> None:
        self.now = self.peak = self.calls = 0

    def enter(self) -> None:
        self.now += 1
        self.calls += 1
        self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        self.now -= 1


async def test_batched_server_requests_take_client_slots() -> None:
    """Issue 15.2: server→client requests sent in batches (20 batches of 100 sampling requests) each take one of the
    client's 256 slots: never more than 256 sampling handlers run at once (on 91956f7 all 2,000 did), every one
    is answered, and a batch longer than max_batch_size (101) is refused with one -32600 naming the option."""
    gauge = Gauge()

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        gauge.enter()
        try:
            await asyncio.sleep(0.1)
        finally:
            gauge.leave()
        return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}

    async with hostile("batch-flood", sampling_handler=sample, timeout=60) as cs:
        result = await cs.call_tool("go")
    seen = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert seen["answered"] == 2000 and gauge.calls == 2000
    assert gauge.peak <= 256, gauge.peak
    assert seen["long"]["code"] == -32600 and "max_batch_size" in seen["long"]["message"]


async def test_batch_flood_from_a_server_that_never_reads_is_bounded() -> None:
    """Issue 15.2: a server sends 500 batches of 100 sampling requests and never reads the answers: the answers
    that cannot be written hold the client's slots, so the client stops reading and its memory stays flat (on
    91956f7 it read and answered every batch, holding every answer in memory: +290 MB)."""
    gauge = Gauge()

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        gauge.enter()
        gauge.leave()
        return {"role": "assistant", "content": {"type": "text", "text": "x" * 200}, "model": "m"}

    async with hostile("batch-no-read", sampling_handler=sample, timeout=10) as cs:
        async with PeakRSS(os.getpid()) as rss:
            await asyncio.sleep(4)
        handled = gauge.calls
        # 256 running and at most 256 waiting for a slot (the waiting line: batch items wait in it since 2e3ca44)
        assert cs.peer.inflight_count() <= 256 + 256
    print(f"client: {handled} sampling requests handled while the server does not read, RSS +{rss.growth_mb:.1f} MB")
    assert handled < 50_000, handled
    assert rss.growth_mb < 60, rss.growth_mb


async def test_async_progress_callbacks_do_not_spawn_a_task_each() -> None:
    """Issue 15.2: 20,000 progress notifications for one call with an async callback: at most one callback runs at
    a time and the tasks of the client stay few (on 91956f7 one task per notification: 20,000), and the callback
    still sees the last progress value."""
    gauge = Gauge()
    tasks_peak = 0
    last: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal tasks_peak
        gauge.enter()
        tasks_peak = max(tasks_peak, len(asyncio.all_tasks()))
        try:
            await asyncio.sleep(0.001)
        finally:
            gauge.leave()
        last.append(progress)

    async with hostile("progress-flood", timeout=60) as cs:
        await cs.call_tool("go", on_progress=on_progress)
        for _ in range(100):
            if last and last[-1] == 20_000:
                break
            await asyncio.sleep(0.02)
    assert gauge.peak == 1, gauge.peak
    assert tasks_peak < 50, tasks_peak
    assert last[-1] == 20_000


async def test_input_requests_per_round_are_capped() -> None:
    """Issue 15.2 (2026-07-28): an InputRequiredResult listing 5,000 sampling requests fails the call with an
    error naming max_input_requests, and no handler runs (on 91956f7: 5,000 handlers at once)."""
    gauge = Gauge()

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        gauge.enter()
        await asyncio.sleep(0.01)
        gauge.leave()
        return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}

    async with hostile("many-inputs", sampling_handler=sample, timeout=30) as cs:
        with pytest.raises(MCPError, match="max_input_requests"):
            await cs.call_tool("go")
        assert gauge.calls == 0
    async with hostile("many-inputs", sampling_handler=sample, timeout=30, max_input_requests=5000) as cs:
        await cs.call_tool("go")  # an explicit, higher bound lets them through (each still holds a slot)
        assert gauge.calls == 5000 and gauge.peak <= 256, gauge.peak


async def test_input_round_reply_is_bounded_in_size() -> None:
    """Issue 15.2 (2026-07-28): 30 roots/list requests in one round, each answered with ~200 KB of roots: the reply
    would be 6 MB, over max_input_reply_size (4 MiB), so the call fails with an error naming the option instead
    of sending it (on 91956f7 the reply was built and sent whatever its size)."""
    roots = [f"file:///data/{i:06d}/{'x' * 180}" for i in range(1000)]
    async with hostile("big-reply", roots=roots, timeout=30) as cs:
        with pytest.raises(MCPError, match="max_input_reply_size"):
            await cs.call_tool("go")
    async with hostile("big-reply", roots=roots[:10], timeout=30) as cs:
        result = await cs.call_tool("go")
        assert result.content[0].text == "answered"  # type: ignore[union-attr]


async def test_an_oversize_answer_to_a_servers_own_request_fails_it_at_once() -> None:
    """The other direction: a stdio server's tool asks the client to sample (a request sent for the tool's call),
    and the client's answer is one 5 MiB line, over the server's 4 MiB limit. The server dropped the line and
    answered it -32600, but its ctx.sample waited out its timeout (none by default: the tool hung) since only
    requests sent outside a call were failed; it fails at once now (with MessageTooLarge, naming the option)."""
    from mcpkit.client.client import Client

    async def huge(params: Any) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "x" * (5 * 1024 * 1024)}, "model": "m"}

    server = [sys.executable, str(SERVERS / "client_server.py")]
    async with Client(server, mode="handshake", sampling_handler=huge) as client:
        t0 = time.monotonic()
        with pytest.raises(MCPError, match="Internal error"):  # (the tool let ctx.sample's error go: -32603)
            await asyncio.wait_for(client.call_tool("sample", {"prompt": "q"}), 30)
        assert _elapsed(t0) < 15
        assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"


async def test_oversize_stdio_line_fails_the_pending_request() -> None:
    """Issue 15.6 (first bullet): the answer to a call is one 5 MiB line, over the client's 4 MiB limit: the call
    fails at once with MessageTooLarge naming the limit and the max_message_size option (on 91956f7 the line was
    dropped and the call waited out its timeout), and the connection goes on."""
    async with hostile("oversize", timeout=20) as cs:
        t0 = time.monotonic()
        with pytest.raises(ConnectionError, match="max_message_size") as info:
            await cs.call_tool("go")
        assert _elapsed(t0) < 5
        assert isinstance(info.value, errors.MessageTooLarge)
        assert info.value.limit == 4 * 1024 * 1024 and "4194304" in str(info.value)
        await cs.ping(timeout=5)


async def test_client_passes_the_session_bounds_through() -> None:
    """Issue 15.2: the high-level ``Client`` takes the same bounds as ``ClientSession`` (max_input_requests,
    max_concurrency, ...): with ``max_input_requests=5000`` the 5,000-request round of the hostile server runs,
    each request holding one of ``max_concurrency=16`` slots; with the default it is refused naming the option."""
    from mcpkit import Client
    from mcpkit.transports.stdio import StdioServer as Server

    gauge = Gauge()

    async def sample(params: dict[str, Any]) -> dict[str, Any]:
        gauge.enter()
        await asyncio.sleep(0.001)
        gauge.leave()
        return {"role": "assistant", "content": {"type": "text", "text": "ok"}, "model": "m"}

    target = Server([sys.executable, str(HOSTILE_SERVER), "many-inputs"], stderr="devnull")
    async with Client(target, mode="modern", sampling_handler=sample, timeout=30) as client:
        with pytest.raises(MCPError, match="max_input_requests"):
            await client.call_tool("go")
    async with Client(
        target, mode="modern", sampling_handler=sample, timeout=60, max_input_requests=5000, max_concurrency=16
    ) as client:
        await client.call_tool("go")
    assert gauge.calls == 5000 and gauge.peak <= 16, gauge.peak


@pytest.mark.parametrize("transport", ["ws"])
async def test_create_app_engine_options_reach_the_websocket(transport: str) -> None:
    """Issue 12.3: ``create_app(..., max_batch_size=3)`` bounds batches on /ws too, not only on /mcp (the option
    used to reach only the Streamable HTTP sessions): a batch of 4 is refused whole naming the option."""
    ping = {"jsonrpc": "2.0", "method": "ping"}
    async with raw_peer(transport, "max_batch_size=3") as peer:
        await peer.send([{**ping, "id": i} for i in range(4)])
        err = await peer.recv()
        assert isinstance(err, dict) and err["error"]["code"] == -32600
        assert "max_batch_size" in err["error"]["message"]
        await peer.send([{**ping, "id": i} for i in range(3)])
        answers = await peer.recv()
        assert sorted(a["id"] for a in answers) == [0, 1, 2]
