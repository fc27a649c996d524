"""Requests that arrive while every one of a connection's request slots is taken wait in a bounded line, and the
connection goes on being read meanwhile: cancellations, progress and the answers to the server's own requests are
handled at once. Tried against a real server process (tests/support/servers/limits_server.py over stdio) with two
slots (``max_concurrency=2``)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from typing import Any

import orjson
import pytest
import websockets

from support.limits import (
    ENV,
    INITIALIZED,
    LIMITS_SERVER,
    WsPeer,
    initialize,
    raw_peer,
    server_process,
    stats,
    stats_of,
)


def call(rid: int, name: str, **args: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": args}}


def cancel(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid}}


async def answers_until(peer: Any, rid: int, timeout: float) -> dict[int, dict[str, Any]]:
    """Every answer read up to (and with) the one to ``rid``, by id; fails after ``timeout`` seconds."""
    got: dict[int, dict[str, Any]] = {}

    async def read() -> None:
        while rid not in got:
            msg = await peer.recv()
            if "id" in msg:
                got[msg["id"]] = msg

    await asyncio.wait_for(read(), timeout)
    return got


async def test_a_cancellation_is_read_while_every_slot_is_taken_and_frees_a_slot() -> None:
    """Two calls take both slots for a minute and a third waits for one; a cancellation of the first, sent after
    the third, is read at once: the first gets no answer, and the third runs in the slot it freed."""
    async with raw_peer("stdio", "max_concurrency=2") as peer:
        await peer.send(call(1, "slow", ms=60_000))
        await peer.send(call(2, "slow", ms=60_000))
        await peer.send(call(3, "slow", ms=10))
        await peer.send(cancel(1))
        got = await answers_until(peer, 3, 10)
        assert got[3]["result"]["content"][0]["text"] == "ok"
        assert 1 not in got and 2 not in got


async def test_a_request_cancelled_while_it_waits_for_a_slot_never_runs_and_its_id_is_free_again() -> None:
    """A call waiting for a slot is cancelled: it is taken out of the line without an answer and never runs, and
    its id may be used again at once (a request with it is not refused as a duplicate)."""
    async with raw_peer("stdio", "max_concurrency=2") as peer:
        await peer.send(call(1, "slow", ms=60_000))
        await peer.send(call(2, "slow", ms=60_000))
        await asyncio.sleep(0.5)  # (both running: none is cancelled before it starts)
        await peer.send(call(3, "slow", ms=60_000))  # waits
        await peer.send(cancel(3))
        await peer.send(call(3, "slow", ms=10))  # the same id, waiting again: not a duplicate
        await peer.send(cancel(1))  # frees a slot: the second request 3 runs
        got = await answers_until(peer, 3, 10)
        assert got[3]["result"]["content"][0]["text"] == "ok"
        await peer.send(stats(4))
        counts = stats_of((await answers_until(peer, 4, 10))[4])
        assert counts["calls"] == 3  # 1, 2 and the second 3: the cancelled one never ran


@pytest.mark.parametrize("bound", ["max_waiting=1", "max_waiting_bytes=1"])
async def test_when_the_waiting_line_is_full_the_reader_waits(bound: str) -> None:
    """The line is bounded in requests and in bytes (one request either way here; a request always fits an empty
    line). With it full, a fourth call stops the reader (backpressure): the cancellation behind it is not read
    until a slot frees, so the first call, cancelled too late, is answered after all."""
    async with raw_peer("stdio", "max_concurrency=2", bound) as peer:
        until = time.time() + 1.5
        t0 = time.monotonic()
        await peer.send(call(1, "slow", until=until))
        await peer.send(call(2, "slow", until=until))
        await peer.send(call(3, "slow", ms=10))  # waits: the line is full
        await peer.send(call(4, "slow", ms=10))  # the reader waits for room in the line
        await peer.send(cancel(1))
        got = await answers_until(peer, 4, 20)
        got.update(await answers_until(peer, 1, 20) if 1 not in got else {})
        assert got[1]["result"]["content"][0]["text"] == "ok"
        assert time.monotonic() - t0 >= 1.2
        assert got[3]["result"] and got[4]["result"]


async def test_requests_waiting_for_a_slot_at_the_end_of_input_are_still_answered() -> None:
    """Stdin closes while two calls run and two wait: all four are answered before the process ends."""
    async with raw_peer("stdio", "max_concurrency=2") as peer:
        for rid in (1, 2, 3, 4):
            await peer.send(call(rid, "slow", ms=300 if rid < 3 else 10))
        peer.proc.stdin.close()
        rest = await asyncio.wait_for(peer.proc.stdout.read(), 20)
        assert sorted(orjson.loads(line)["id"] for line in rest.splitlines()) == [1, 2, 3, 4]
        assert await asyncio.wait_for(peer.proc.wait(), 20) == 0


async def test_answers_to_the_servers_requests_are_read_while_every_slot_is_taken() -> None:
    """Handshake era: three calls on two slots, each asking the client for its roots while it runs. The client's
    answers reach the server although a third call waits for a slot: all three are answered within seconds (they
    used to wait until the server's requests timed out, since the reader waited for a slot instead of reading)."""
    from mcpkit import Client
    from mcpkit.transports.stdio import StdioServer

    target = StdioServer([sys.executable, str(LIMITS_SERVER), "stdio", "max_concurrency=2"], env=ENV, stderr="devnull")
    async with Client(target, protocol_version="2025-03-26", roots=["file:///a", "file:///b"], timeout=60) as client:
        results = await asyncio.wait_for(
            asyncio.gather(*(client.call_tool("ask", {"timeout": 30}) for _ in range(3))), 10
        )
    assert [r.content[0].text for r in results] == ["2", "2", "2"]  # type: ignore[union-attr]


async def test_a_batch_sent_while_every_slot_waits_on_the_client_is_answered_once_the_client_answers() -> None:
    """Handshake era (2025-03-26, which has batches): two calls take both slots, each asking the client for its
    roots; a batch with a third such call comes next. The client answers every roots request it gets: all three
    calls are answered within seconds, the third in the batch's array (the batch's item used to wait for a slot
    inside the reader, which then read no answer: all stopped until the server's requests timed out)."""
    from support.limits import INITIALIZED, initialize

    async with raw_peer("stdio", "max_concurrency=2", handshake=False) as peer:
        init = initialize()
        init["params"]["capabilities"] = {"roots": {"listChanged": False}}
        await peer.send(init)
        assert "result" in await peer.recv()
        await peer.send(INITIALIZED)
        await peer.send(call(1, "ask", timeout=30))
        await peer.send(call(2, "ask", timeout=30))
        await peer.send([call(3, "ask", timeout=30)])
        answered: dict[int, Any] = {}

        async def serve() -> None:
            while len(answered) < 3:
                msg = await peer.recv()
                if isinstance(msg, list):
                    for item in msg:
                        answered[item["id"]] = item
                elif msg.get("method") == "roots/list":
                    await peer.send({"jsonrpc": "2.0", "id": msg["id"], "result": {"roots": [{"uri": "file:///a"}]}})
                elif "id" in msg and "method" not in msg:
                    answered[msg["id"]] = msg

        await asyncio.wait_for(serve(), 10)
        assert sorted(answered) == [1, 2, 3]
        assert all(a["result"]["content"][0]["text"] == "1" for a in answered.values())


async def test_a_batch_item_cancelled_while_it_waits_for_a_slot_never_runs_and_its_batch_answers_without_it() -> None:
    """Two calls take both slots for a minute; a batch of two short calls waits for slots, and the cancellation of
    its first item, sent after it, is read at once (the reader used to wait for a slot inside the batch). Once a
    running call is cancelled, the other item runs, and the batch's array holds its answer alone."""
    async with raw_peer("stdio", "max_concurrency=2") as peer:
        await peer.send(call(1, "slow", ms=60_000))
        await peer.send(call(2, "slow", ms=60_000))
        await asyncio.sleep(0.5)  # (both running)
        await peer.send([call(3, "slow", ms=10), call(4, "slow", ms=10)])
        await peer.send(cancel(3))
        await peer.send(cancel(1))
        answer = await asyncio.wait_for(peer.recv(), 10)
        assert isinstance(answer, list) and [a["id"] for a in answer] == [4]
        assert answer[0]["result"]["content"][0]["text"] == "ok"


async def test_a_request_still_waiting_when_the_drain_gives_up_is_answered_that_it_never_ran() -> None:
    """Stdin closes while two calls run for a minute and a third waits for a slot; the drain gives up after its
    second: the running calls are cancelled unanswered (as before), the waiting one is answered with an error
    saying it never ran (it was dropped silently), and it never runs once the cancellations free the slots."""
    async with raw_peer("stdio", "max_concurrency=2", "drain_timeout=1") as peer:
        await peer.send(call(1, "slow", ms=60_000))
        await peer.send(call(2, "slow", ms=60_000))
        await peer.send(call(3, "slow", ms=10))
        await peer.send(call(4, "slow", ms=10))
        await peer.send(cancel(4))  # cancelled while it waits: left unanswered (spec)
        peer.proc.stdin.close()
        rest = await asyncio.wait_for(peer.proc.stdout.read(), 20)
        answers = [orjson.loads(line) for line in rest.splitlines()]
        assert [a["id"] for a in answers] == [3], answers
        assert answers[0]["error"]["code"] == -32603 and "never ran" in answers[0]["error"]["message"]
        assert await asyncio.wait_for(peer.proc.wait(), 20) == 0


async def test_requests_running_or_waiting_when_the_graceful_shutdown_ends_are_answered_with_its_error() -> None:
    """A WebSocket server gets SIGTERM while two calls run for a minute, a third waits for a slot and a fourth,
    waiting too, was cancelled: once ``timeout_graceful_shutdown`` is over, the three are answered with the error
    naming the shutdown before the socket closes; the cancelled one gets nothing."""
    async with raw_peer("ws", "max_concurrency=2", "timeout_graceful_shutdown=1") as peer:
        for rid in (1, 2, 3, 4):
            await peer.send(call(rid, "slow", ms=60_000))
        await peer.send(cancel(4))
        await asyncio.sleep(0.5)  # (every message read: the reader is never held up here)
        os.kill(peer.pid, signal.SIGTERM)
        got: dict[int, dict[str, Any]] = {}
        with pytest.raises(websockets.ConnectionClosed):
            while True:
                msg = await peer.recv()
                got[msg["id"]] = msg
        assert sorted(got) == [1, 2, 3], got
        for rid in (1, 2, 3):
            assert "shutting down" in got[rid]["error"]["message"], got[rid]


async def test_a_request_waiting_when_its_connection_closes_never_runs() -> None:
    """A WebSocket closes while two calls run for a minute and a third waits: the third is not started in the
    slots the closing frees (the server's call count, read over another connection afterwards, says two)."""
    async with server_process("http", "max_concurrency=2") as (_, port):
        url = f"ws://127.0.0.1:{port}/ws"
        async with websockets.connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
            peer = WsPeer(ws, 0)
            await peer.send(initialize())
            await peer.recv()
            await peer.send(INITIALIZED)
            for rid in (1, 2, 3):
                await peer.send(call(rid, "slow", ms=60_000))
            await asyncio.sleep(0.5)  # (all three read: two run, one waits)
        await asyncio.sleep(0.5)  # (the server closed that session)
        async with websockets.connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
            peer = WsPeer(ws, 0)
            await peer.send(initialize())
            await peer.recv()
            await peer.send(INITIALIZED)
            await peer.send(stats(1))
            assert stats_of(await peer.recv())["calls"] == 2


async def test_a_batch_cut_off_at_the_end_of_the_graceful_shutdown_is_answered_as_one_array() -> None:
    """A 2025-03-26 batch over a WebSocket whose items run (two) or wait for a slot (one) when the graceful shutdown
    ends: its answer is still one array (JSON-RPC), every item in it answered with the error naming the shutdown."""
    async with raw_peer("ws", "max_concurrency=2", "timeout_graceful_shutdown=1") as peer:
        await peer.send([call(rid, "slow", ms=60_000) for rid in (1, 2, 3)])
        await asyncio.sleep(0.5)  # (all read: two run, one waits)
        os.kill(peer.pid, signal.SIGTERM)
        got = []
        with pytest.raises(websockets.ConnectionClosed):
            while True:
                got.append(await peer.recv())
        assert len(got) == 1 and isinstance(got[0], list), got
        assert sorted(a["id"] for a in got[0]) == [1, 2, 3], got
        assert all("shutting down" in a["error"]["message"] for a in got[0]), got
