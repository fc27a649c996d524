"""The message tap: every JSON-RPC message a server's or a client's peer receives and sends, shown to an observer
with its bytes, what it is and when, on every transport and in both eras; a failing tap never breaks the peer;
:class:`TapRecorder` keeps the last events bounded in count and in bytes."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from typing import Any

import orjson
import pytest

from mcpkit import Client, MCPKit
from mcpkit.engine import IN, OUT, Outgoing
from mcpkit.engine.messages import RESULT
from mcpkit.engine.tap import QueuedTap, TapEvent, TapRecorder
from support.intercepted import make_app
from support.mcp_http import running
from support.paths import SERVERS

SERVER = SERVERS / "intercepted_server.py"
ERAS = ["2026-07-28", "2025-11-25"]


def _triples(recorder: TapRecorder | list[list[Any]]) -> list[tuple[str, str, str | None]]:
    events = recorder.events if isinstance(recorder, TapRecorder) else recorder
    return [
        (e.direction, e.kind, e.method) if isinstance(e, TapEvent) else (e[0], e[1], e[2])  # type: ignore[misc]
        for e in events
    ]


def _ids(recorder: TapRecorder, direction: str, kind: str) -> list[Any]:
    return [e.id for e in recorder.events if e.direction == direction and e.kind == kind]


async def _exercise(client: Client) -> None:
    await client.call_tool("echo", {"text": "hello"})
    await client.call_tool("slow", {}, on_progress=lambda *a: None)


def _check_server_side(server: TapRecorder) -> None:
    triples = _triples(server)
    assert (IN, "request", "tools/call") in triples
    assert (OUT, "result", None) in triples
    # every tools/call request that came in was answered, with its id
    calls = [e.id for e in server.events if e.direction == IN and e.method == "tools/call"]
    assert len(calls) >= 2 and set(calls) <= set(_ids(server, OUT, "result"))
    echo = next(e for e in server.events if e.direction == IN and e.method == "tools/call")
    assert orjson.loads(echo.data)["params"]["name"] == "echo"  # the message's bytes
    assert echo.message.params is not None and echo.message.params["arguments"] == {"text": "hello"}
    assert all(e.timestamp > 1_600_000_000 for e in server.events)


def _check_client_side(client: TapRecorder) -> None:
    triples = _triples(client)
    assert (OUT, "request", "tools/call") in triples
    assert (IN, "result", None) in triples
    assert (IN, "notification", "notifications/progress") in triples
    sent = [e.id for e in client.events if e.direction == OUT and e.method == "tools/call"]
    assert set(sent) <= set(_ids(client, IN, "result"))


@pytest.mark.parametrize("era", ERAS)
async def test_the_tap_sees_both_directions_in_memory(era: str) -> None:
    app, _, server = make_app()
    client = TapRecorder()
    async with Client(app, protocol_version=era, tap=client) as c:
        await _exercise(c)
    _check_server_side(server)
    _check_client_side(client)
    assert (OUT, "notification", "notifications/progress") in _triples(server)


@pytest.mark.parametrize("era", ERAS)
async def test_the_tap_sees_both_directions_over_stdio(era: str) -> None:
    client = TapRecorder()
    async with Client([sys.executable, str(SERVER)], protocol_version=era, tap=client) as c:
        await _exercise(c)
        seen = json.loads((await c.call_tool("seen_so_far", {})).content[0].text)  # type: ignore[union-attr]
    _check_client_side(client)
    triples = _triples(seen["tap"])
    assert (IN, "request", "tools/call") in triples and (OUT, "result", None) in triples
    assert (OUT, "notification", "notifications/progress") in triples


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
@pytest.mark.parametrize("era", ERAS)
async def test_the_tap_sees_both_directions_over_streamable_http(era: str, json_response: bool) -> None:
    app, _, server = make_app()
    client = TapRecorder()
    async with (
        running(app, json_response=json_response) as (base, _),
        Client(base + "/mcp", protocol_version=era, tap=client) as c,
    ):
        await _exercise(c)
    _check_server_side(server)
    if not json_response:
        _check_client_side(client)
    else:
        assert (OUT, "request", "tools/call") in _triples(client) and (IN, "result", None) in _triples(client)


@pytest.mark.parametrize("era", ["2026-07-28", "2025-06-18"])
async def test_the_tap_sees_both_directions_over_stateless_streamable_http(era: str) -> None:
    app, _, server = make_app()
    client = TapRecorder()
    async with running(app, stateless=True) as (base, _), Client(base + "/mcp", protocol_version=era, tap=client) as c:
        await _exercise(c)
    _check_server_side(server)
    _check_client_side(client)


async def test_the_tap_sees_both_directions_over_legacy_sse() -> None:
    app, _, server = make_app()
    client = TapRecorder()
    async with (
        running(app, sse=True) as (base, _),
        Client(base + "/sse", transport="sse", protocol_version="2024-11-05", tap=client) as c,
    ):
        await _exercise(c)
    _check_server_side(server)
    _check_client_side(client)


@pytest.mark.parametrize("era", ERAS)
async def test_the_tap_sees_both_directions_over_websocket(era: str) -> None:
    app, _, server = make_app()
    client = TapRecorder()
    async with (
        running(app, ws=True) as (base, _),
        Client(base.replace("http://", "ws://") + "/ws", protocol_version=era, tap=client) as c,
    ):
        await _exercise(c)
    _check_server_side(server)
    _check_client_side(client)


def _plain_app() -> tuple[MCPKit, TapRecorder]:
    """No interceptor: a plain def tool's call is answered at once, with no coroutine, on every path."""
    app = MCPKit("plain")

    @app.tool(thread=False)
    def echo(text: str) -> str:
        return text

    recorder = TapRecorder()
    app.add_tap(recorder)
    return app, recorder


def _every_request_answered(recorder: TapRecorder) -> None:
    asked = [e.id for e in recorder.events if e.direction == IN and e.kind == "request"]
    answered = [e.id for e in recorder.events if e.direction == OUT and e.kind in ("result", "error")]
    assert len(asked) >= 2 and sorted(asked, key=str) == sorted(answered, key=str)


@pytest.mark.parametrize("stateless", [False, True], ids=["session", "stateless"])
@pytest.mark.parametrize("era", ERAS)
async def test_the_tap_sees_answers_made_at_once_over_http(era: str, stateless: bool) -> None:
    app, recorder = _plain_app()
    async with (
        running(app, json_response=True, stateless=stateless) as (base, _),
        Client(base + "/mcp", protocol_version=era) as c,
    ):
        await c.call_tool("echo", {"text": "x"})
    _every_request_answered(recorder)


@pytest.mark.parametrize("era", ERAS)
async def test_the_tap_sees_answers_made_at_once_in_memory(era: str) -> None:
    app, recorder = _plain_app()
    async with Client(app, protocol_version=era) as c:
        await c.call_tool("echo", {"text": "x"})
    _every_request_answered(recorder)


async def test_a_tap_added_later_reaches_open_sessions_and_a_removed_one_sees_nothing() -> None:
    app = MCPKit("late")

    @app.tool(thread=False)
    def echo(text: str) -> str:
        return text

    recorder = TapRecorder()
    async with Client(app) as c:
        await c.call_tool("echo", {"text": "before"})
        remove = app.add_tap(recorder)
        await c.call_tool("echo", {"text": "during"})
        remove()
        await c.call_tool("echo", {"text": "after"})
    texts = [e.data for e in recorder.events if e.method == "tools/call"]
    assert len(texts) == 1 and b"during" in texts[0]
    assert _triples(recorder) == [(IN, "request", "tools/call"), (OUT, "result", None)]


async def test_a_failing_tap_is_logged_and_the_peer_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    app = MCPKit("failing")

    @app.tool(thread=False)
    def echo(text: str) -> str:
        return text

    def broken(event: TapEvent) -> None:
        raise RuntimeError("tap bug")

    recorder = TapRecorder()
    app.add_tap(broken)
    app.add_tap(recorder)
    with caplog.at_level(logging.ERROR, logger="mcpkit.engine"):
        async with Client(app, tap=broken) as c:
            assert (await c.call_tool("echo", {"text": "x"})).content[0].text == "x"  # type: ignore[union-attr]
    assert "a message tap failed" in caplog.text
    assert (OUT, "result", None) in _triples(recorder)  # the taps after the failing one still saw everything


def _event(size: int, n: int = 0) -> TapEvent:
    return TapEvent(IN, Outgoing(b"x" * size, RESULT, n), 0.0, "p", 1)


def test_the_recorder_is_bounded_in_count_and_in_bytes() -> None:
    by_count = TapRecorder(max_events=3, max_bytes=1_000)
    for n in range(5):
        by_count(_event(10, n))
    assert [e.id for e in by_count.events] == [2, 3, 4] and by_count.dropped == 2 and by_count.size == 30
    by_bytes = TapRecorder(max_events=100, max_bytes=25)
    for n in range(5):
        by_bytes(_event(10, n))
    assert [e.id for e in by_bytes.events] == [3, 4] and by_bytes.size == 20
    huge = TapRecorder(max_events=10, max_bytes=25)
    huge(_event(10, 1))
    huge(_event(100, 2))  # larger than the whole budget: kept without its bytes
    assert [(e.id, e.data) for e in huge.events] == [(1, b"x" * 10), (2, b"")] and huge.dropped_bytes == 100
    huge.clear()
    assert len(huge) == 0 and huge.size == 0
    with pytest.raises(ValueError):
        TapRecorder(max_events=0)


def test_recorder_filters_by_direction_kind_and_method() -> None:
    recorder = TapRecorder()
    recorder(TapEvent(IN, Outgoing(b"{}", 1, 1, "tools/call", {}), 0.0, "p", 1))
    recorder(_event(2, 1))
    assert [e.kind for e in recorder.messages(IN)] == ["request", "result"]
    assert [e.method for e in recorder.messages(kind="request")] == ["tools/call"]
    assert recorder.messages(OUT) == [] and recorder.messages(method="ping") == []


async def test_an_async_tap_is_refused_where_it_is_added_not_silently_never_run() -> None:
    # (called synchronously, an `async def` tap made a coroutine nobody awaited: it saw nothing, and said so only in
    # a RuntimeWarning)
    async def observe(event: TapEvent) -> None:
        pass

    app = MCPKit("t")
    with pytest.raises(TypeError, match="QueuedTap"):
        app.add_tap(observe)
    with pytest.raises(TypeError, match="QueuedTap"):
        async with Client(app, tap=observe):
            pass


async def test_a_slow_observer_behind_a_queued_tap_neither_blocks_the_server_nor_grows_its_queue() -> None:
    seen: list[TapEvent] = []

    async def observe(event: TapEvent) -> None:
        await asyncio.sleep(0.05)  # (slower than the calls: the queue fills)
        seen.append(event)

    queued = QueuedTap(observe, max_queued=8)
    app = MCPKit("t")
    app.tool(lambda text: text, name="echo")
    app.add_tap(queued)
    longest = 0
    loop = asyncio.get_running_loop()
    start = loop.time()
    async with Client(app) as client:
        for _ in range(100):
            await client.call_tool("echo", {"text": "x"})
            longest = max(longest, len(queued))
    took = loop.time() - start
    assert took < 3, took  # (the observer alone needs 100 calls x 4 messages x 0.05 s = 20 s)
    assert longest <= 8 and queued.dropped > 0
    await asyncio.wait_for(queued.drain(), 5)
    assert len(queued) == 0 and len(seen) == queued.seen - queued.dropped > 0
    assert [e.direction for e in seen] and {e.kind for e in seen} <= {"request", "result", "notification"}


async def test_a_queued_tap_holds_at_most_its_byte_budget_of_large_messages_for_a_slow_observer() -> None:
    # (bounded by count alone, 1,000 waiting events of up to a whole message each could hold gigabytes)
    release = asyncio.Event()
    seen: list[int] = []

    async def observe(event: TapEvent) -> None:
        await release.wait()  # (stuck until the calls are over: everything waits in the queue)
        seen.append(len(event.data))

    budget = 1024 * 1024
    queued = QueuedTap(observe, max_bytes=budget)
    assert queued.max_queued == 1000 and queued.max_bytes == budget
    app = MCPKit("t")
    app.tool(lambda n: "x" * n, name="big")
    app.add_tap(queued)
    largest = 0
    async with Client(app) as client:
        for _ in range(20):  # (about 200 KiB each way: 20 calls make 8 MiB of message bytes)
            await client.call_tool("big", {"n": 200_000})
            largest = max(largest, queued.size)
            assert queued.size == sum(len(e.data) for e in queued._queue)
    assert 0 < largest <= budget
    assert queued.dropped > 0 and len(queued) + queued.dropped + (1 if queued._busy else 0) == queued.seen
    release.set()
    await asyncio.wait_for(queued.drain(), 5)
    assert queued.size == 0 and len(seen) == queued.seen - queued.dropped
    # a message larger than the whole budget is dropped on its own, counted with the others
    alone = QueuedTap(observe, max_bytes=10)
    app.add_tap(alone)
    async with Client(app) as client:
        await client.call_tool("big", {"n": 100})
    assert alone.seen > 0 and alone.dropped == alone.seen and alone.size == 0 and len(alone) == 0
    with pytest.raises(ValueError):
        QueuedTap(observe, max_bytes=0)


async def test_a_queued_tap_observer_that_fails_is_logged_and_the_next_events_still_reach_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen: list[str | None] = []

    def observe(event: TapEvent) -> None:
        if event.method == "tools/call":
            raise RuntimeError("observer broke")
        seen.append(event.method)

    queued = QueuedTap(observe)
    app = MCPKit("t")
    app.tool(lambda text: text, name="echo")
    app.add_tap(queued)
    with caplog.at_level(logging.ERROR, logger="mcpkit.engine"):
        async with Client(app) as client:
            await client.call_tool("echo", {"text": "x"})
            await client.list_tools()
        await asyncio.wait_for(queued.drain(), 5)
    assert "tools/list" in seen and "observer broke" in caplog.text
    with pytest.raises(ValueError):
        QueuedTap(observe, max_queued=0)
