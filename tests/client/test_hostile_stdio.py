"""A hostile stdio server, run as a real process (tests/support/servers/hostile_cli_server.py), cannot exhaust the
client's memory through its stderr, make it run the user's handler thousands of times, or grow a list walk without
bound."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import pytest

from mcpkit.client.client import Client, PaginationLimitExceeded
from mcpkit.protocol.errors import ConnectionClosed, MCPError, RequestTimeout
from support.paths import SERVERS

HOSTILE = str(SERVERS / "hostile_cli_server.py")
MiB = 1024 * 1024


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PeakRSS:
    """Samples this process's RSS every 10 ms while it runs: ``growth`` is the peak over the starting value."""

    def __init__(self) -> None:
        self.start = rss()
        self.peak = self.start
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PeakRSS:
        async def sample() -> None:
            while True:
                self.peak = max(self.peak, rss())
                await asyncio.sleep(0.01)

        self._task = asyncio.get_running_loop().create_task(sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self.peak = max(self.peak, rss())
        self._task.cancel()

    @property
    def growth(self) -> int:
        return self.peak - self.start


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
async def test_stdio_stderr_is_bounded_in_bytes() -> None:
    """Issue 15.4: 40 stderr lines of 3 MiB each (each under the 4 MiB line limit, 120 MiB in all) keep at most
    ``stderr_bytes`` (256 KiB) in the client, and the client's memory stays within +40 MB while they arrive."""
    async with PeakRSS() as mem:  # (the flood starts before the server answers initialize)
        client = Client([sys.executable, HOSTILE, "stderr-flood", "40"], mode="handshake", timeout=30)
        await client.connect()
        deadline = time.monotonic() + 60
        while "flood done" not in client.stderr and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
    assert mem.growth < 40 * MiB, f"client grew by {mem.growth / MiB:.1f} MiB"
    async with client:
        assert "flood done" in client.stderr
        assert len(client.stderr) <= 256 * 1024 + 2048
        assert "more bytes of this line dropped: StdioServer(stderr_line_bytes=...)" in client.stderr
        assert await client.ping() >= 0  # the session goes on


async def test_url_elicitation_flood_is_capped() -> None:
    """Issue 15.6: one -32042 error listing 10,000 URL elicitations does not run the handler 10,000 times: the list
    is refused whole (``max_url_elicitations``, default 8) with an error that names the option."""
    calls: list[dict[str, Any]] = []

    def handler(params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params)
        return {"action": "accept"}

    target = [sys.executable, HOSTILE, "url-flood", "10000"]
    async with Client(target, mode="handshake", elicitation_handler=handler, timeout=20) as client:
        started = time.monotonic()
        with pytest.raises(MCPError) as info:
            await client.call_tool("add", {})
        assert time.monotonic() - started < 10
        assert calls == []
        assert info.value.code == -32042 and "max_url_elicitations=8" in info.value.message
        assert "10000 URL elicitations" in info.value.message
        assert await client.ping() >= 0
        assert client.max_url_elicitations == 8  # the default


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
async def test_list_walk_is_bounded_in_bytes() -> None:
    """Issue 15.6: a list walk is bounded in bytes, not only pages and items: pages of 0.5 MiB of nested empty lists
    (one item each, ~22x larger once parsed) stop at ``max_list_bytes`` (default 64 MiB of estimated memory) with
    an error naming the option, the client growing by less than 100 MB (the unbounded walk: +234 MB in 20 pages)."""
    async with Client([sys.executable, HOSTILE, "fat-pages", "0.5"], mode="handshake", timeout=30) as client:
        async with PeakRSS() as mem:
            with pytest.raises(PaginationLimitExceeded) as info:
                await client.list_tools(max_pages=20)
        assert "max_list_bytes" in str(info.value) and "67108864 bytes" in str(info.value)
        assert mem.growth < 100 * MiB, f"client grew by {mem.growth / MiB:.1f} MiB"
        assert await client.ping() >= 0
        await asyncio.sleep(0.3)  # the server logged each page before it answered the ping: let stderr catch up
        served = client.stderr.count("served page")
        assert 5 <= served <= 7, client.stderr  # ~11.7 MB estimated per page: the 6th passes 64 MiB
        client.max_list_bytes = 4 * MiB
        with pytest.raises(PaginationLimitExceeded):
            await client.list_tools(max_pages=20)
        await client.ping()
        await asyncio.sleep(0.3)
        assert client.stderr.count("served page") == served + 1  # a lower bound stops at the first page


async def test_calls_after_the_server_exits_fail_at_once() -> None:
    """A server that closes its output and exits in the middle of a call fails that call with ConnectionClosed, and
    every later call fails the same way at once: none is written to a server that can no longer answer, to wait
    out its timeout (or, without one, forever)."""
    async with Client([sys.executable, HOSTILE, "exit-on-call"], mode="handshake", timeout=None) as client:
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(client.call_tool("add", {"a": 1}), 10)
        for _ in range(3):
            for call in (lambda: client.call_tool("add", {"a": 1}), client.ping):
                started = time.monotonic()
                with pytest.raises(ConnectionClosed):
                    await asyncio.wait_for(call(), 10)
                assert time.monotonic() - started < 1


@pytest.mark.parametrize("answer", ["null", "list", "both", "bad-error", "version"])
async def test_invalid_answer_fails_its_request_at_once(answer: str) -> None:
    """A response that carries the request's id but is not a valid JSON-RPC response (``"result": null``, a list,
    both result and error, an error without a message, ``"jsonrpc": "1.0"``) fails that request at once with an
    error saying what was wrong with it, instead of leaving it to wait out its timeout (or forever); the client
    does not answer the response as if it were a request; the session goes on."""
    async with Client([sys.executable, HOSTILE, "invalid-answer"], mode="handshake", timeout=None) as client:
        started = time.monotonic()
        with pytest.raises(MCPError, match="invalid response") as info:
            await asyncio.wait_for(client.call_tool(answer, {}), 10)
        assert time.monotonic() - started < 5
        assert "tools/call" in info.value.message
        assert (await client.call_tool("add", {"a": 1})).text == "ok"
        await asyncio.sleep(0.3)  # (stderr is read apart from stdout: let it catch up)
        assert "got " not in client.stderr


async def test_a_call_times_out_while_a_server_that_stopped_reading_blocks_its_send() -> None:
    """A server that stops reading its stdin: a call whose message does not fit in the pipe waits in its send; its
    timeout holds all the same (RequestTimeout, not a hang), later calls time out too, and closing does not hang."""
    started = time.monotonic()
    client = Client([sys.executable, HOSTILE, "deaf"], mode="handshake", timeout=None)
    await asyncio.wait_for(client.__aenter__(), 10)
    try:
        for size in (3 * MiB, 10):  # (the first fills the pipe; the second waits behind it)
            t0 = time.monotonic()
            with pytest.raises(RequestTimeout):
                await asyncio.wait_for(client.call_tool("add", {"a": "x" * size}, timeout=1), 10)
            assert time.monotonic() - t0 < 4
    finally:
        await asyncio.wait_for(client.__aexit__(None, None, None), 15)
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(("kind", "calls_back"), [("list_changed", True), ("message", True), ("message", False)])
async def test_a_handler_that_calls_the_client_back_survives_a_notification_storm(
    kind: str, calls_back: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A server sends 3,000 notifications (``tools/list_changed``, or distinct log messages) before its answer, and
    the handler of each calls the client back (re-lists the tools, pings). More notifications waited than the
    handlers' queue holds (1,024), so the reader stopped reading while the handler waited for an answer only the
    reader could read: the session hung for good, the call timed out and nothing answered again. Now equal
    changes waiting merge (the handler re-lists once for them), and a distinct notification that finds the queue
    full while a handler waits on the client is dropped with a warning: the call ends, the session goes on. A
    handler that does not call back still gets every one (the reader waits for room: nothing is dropped)."""
    seen: list[str] = []
    holder: list[Client] = []

    async def on_change(method: str, params: Any) -> None:
        seen.append(method)
        await holder[0].list_tools()

    async def on_log(message: Any) -> None:
        seen.append(message.data)
        if calls_back:
            await holder[0].ping()
        else:
            await asyncio.sleep(0)

    handlers: dict[str, Any] = {"on_notification": on_change} if kind == "list_changed" else {"logging_handler": on_log}
    target = [sys.executable, HOSTILE, "storm", "3000"]
    async with Client(target, mode="handshake", timeout=30, **handlers) as client:
        holder.append(client)
        result = await asyncio.wait_for(client.call_tool(kind, {}), 60)
        assert result.text == "stormed"
        assert await asyncio.wait_for(client.ping(), 10) >= 0  # the session goes on
    assert seen and len(seen) <= 3000
    if kind == "list_changed":
        assert "dropped" not in caplog.text  # equal changes merge: nothing is lost
    elif not calls_back:
        assert seen == [f"log {i}" for i in range(3000)] and "dropped" not in caplog.text
    else:
        assert seen[:1] == ["log 0"] and len(set(seen)) == len(seen)  # in order, none twice
        if len(seen) < 3000:
            assert "dropped" in caplog.text and "notifications/message" in caplog.text


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
async def test_notifications_waiting_for_a_slow_handler_are_bounded_in_bytes() -> None:
    """A server sends 48 log messages of 2 MiB each (96 MiB, each under the 4 MiB message limit) to a handler that
    takes its time. The handlers' queue was bounded by count only (1,024 entries, up to 4 GiB), so the client read
    them all and held them: its memory grew by the whole storm. Now at most 16 MiB of them wait
    (``MAX_QUEUED_NOTIFICATION_BYTES``), at most 8 MiB of lines wait unparsed on the pipe, and the client stops
    reading until the handler catches up: its memory stays within +56 MiB (36 measured), and the handler still gets
    every message, in order."""
    seen: list[str] = []
    holder: list[Client] = []

    async def on_log(message: Any) -> None:
        if not seen:  # slow at first: the server sends everything it can meanwhile
            deadline = time.monotonic() + 3
            while "storm sent" not in holder[0].stderr and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
        seen.append(message.data.rstrip())

    async with Client(
        [sys.executable, HOSTILE, "storm", "48"], mode="handshake", timeout=60, logging_handler=on_log
    ) as client:
        holder.append(client)
        async with PeakRSS() as mem:
            result = await asyncio.wait_for(client.call_tool("big", {}), 120)
        assert result.text == "stormed"
        assert await asyncio.wait_for(client.ping(), 10) >= 0  # the session goes on
    assert seen == [f"log {i}" for i in range(48)]
    assert mem.growth < 56 * MiB, f"client grew by {mem.growth / MiB:.1f} MiB"  # (about 125 MiB before)


async def test_an_elicitation_answer_holds_only_the_values_an_elicit_result_may_carry() -> None:
    """An elicitation answer's content holds strings, numbers, booleans and lists of strings (schema.ts,
    ElicitResult). A handler's answer with an object or a list of numbers under a key the requested schema does not
    constrain passed the schema check and went to the server, which (the TypeScript SDK) refuses the whole result;
    the client now refuses it as it refuses content that does not match the schema, naming the key. A list of
    strings still goes."""
    answers: list[dict[str, Any]] = [
        {"name": "Ada", "extra": {"deep": 1}},
        {"name": "Ada", "tags": [1, 2]},
        {"name": "Ada", "tags": ["a", "b"], "age": 36, "ok": True},
    ]
    async with Client(
        [sys.executable, HOSTILE, "elicit"], mode="handshake", elicitation_handler=lambda p: answers.pop(0), timeout=20
    ) as client:
        for key in ("extra", "tags"):
            sent = json.loads((await client.call_tool("ask", {})).text)
            assert sent.get("code") == -32603 and f"at {key}" in sent["message"], sent
        sent = json.loads((await client.call_tool("ask", {})).text)
        assert sent == {"action": "accept", "content": {"name": "Ada", "tags": ["a", "b"], "age": 36, "ok": True}}
