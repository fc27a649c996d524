"""A ``subscriptions/listen`` stream that falls behind (2026-07-28): changes come faster than the stream writes
them (tests/support/servers/listen_server.py, over stdio, reports them in bursts; the client reads only after the
burst). It gets every change while its queue has room, each change once when it is full (equal ones merged, the
rule a client's watch follows too), and when distinct changes overflow its queue it ends with an error rather than
losing some silently."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import mcpkit
from mcpkit.protocol.errors import MCPError
from support.paths import SERVERS

LISTEN_SERVER = SERVERS / "listen_server.py"
ENV = {**os.environ, "PYTHONPATH": str(Path(mcpkit.__file__).resolve().parent.parent)}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}
NOTES = [f"note://{i}" for i in range(10)]


class Raw:
    """The listen server as a subprocess, spoken to with raw JSON lines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def send(self, rid: str | int, method: str, params: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**params, "_meta": META}}
        self.proc.stdin.write(orjson.dumps(msg) + b"\n")
        await self.proc.stdin.drain()

    async def listen(self, rid: str) -> None:
        await self.send(
            rid, "subscriptions/listen", {"notifications": {"toolsListChanged": True, "resourceSubscriptions": NOTES}}
        )
        ack = await self.recv()
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack

    async def burst(self, rid: int, uris: list[str]) -> None:
        await self.send(rid, "tools/call", {"name": "burst", "arguments": {"uris": uris, "tools_changed": True}})

    async def recv(self) -> Any:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), 20)
        assert line, "the server ended its output"
        return orjson.loads(line)

    async def until(self, rid: str | int) -> tuple[list[Any], Any]:
        """The notifications read before the answer to ``rid``, and that answer."""
        seen = []
        while "id" not in (msg := await self.recv()) or msg["id"] != rid:
            seen.append(msg)
        return seen, msg


@contextlib.asynccontextmanager
async def listen_server(queue_size: int) -> AsyncIterator[Raw]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(LISTEN_SERVER),
        str(queue_size),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=ENV,
    )
    try:
        yield Raw(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def changes(seen: list[Any]) -> list[str]:
    return [m["params"].get("uri", m["method"]) for m in seen if "method" in m]


async def test_a_listen_stream_that_falls_behind_gets_each_change_once() -> None:
    """Seven updates of three resources, then a tools list change, in one burst, on a stream whose queue holds 4:
    the stream gets each resource's update once and the list change (which used to be dropped once the repeats had
    filled the queue), and goes on."""
    async with listen_server(4) as raw:
        await raw.listen("L")
        await raw.burst(1, [NOTES[0], NOTES[1], NOTES[2]] * 2 + [NOTES[0]])
        before, _ = await raw.until(1)
        raw.proc.stdin.close()  # type: ignore[union-attr]
        seen, final = await raw.until("L")
        seen = before + seen
        assert changes(seen) == [NOTES[0], NOTES[1], NOTES[2], "notifications/tools/list_changed"]
        assert all(m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L" for m in seen)
        assert "result" in final


async def test_a_listen_stream_with_room_gets_every_change_even_repeats() -> None:
    """Four updates of one resource in one burst on a stream whose queue holds 10: the client gets all four (a
    count of updates stays exact), as a client's own watch does; equal changes are merged only when the queue is
    full (it used to merge them always, so the client got one)."""
    async with listen_server(10) as raw:
        await raw.listen("L")
        await raw.burst(1, [NOTES[0]] * 4)
        before, _ = await raw.until(1)
        raw.proc.stdin.close()  # type: ignore[union-attr]
        seen, final = await raw.until("L")
        assert changes(before + seen) == [NOTES[0]] * 4 + ["notifications/tools/list_changed"]
        assert "result" in final


async def test_a_listen_stream_that_falls_behind_by_more_than_its_queue_ends_with_an_error() -> None:
    """Ten distinct updates in one burst on a stream whose queue holds 4: instead of losing six of them silently,
    the stream ends with an error naming the bound; the client listens again on the same connection."""
    async with listen_server(4) as raw:
        await raw.listen("L")
        await raw.burst(1, NOTES)
        before, _ = await raw.until(1)
        if "L" in {m.get("id") for m in before}:  # (the stream may have ended before the call was answered)
            final = next(m for m in before if m.get("id") == "L")
        else:
            _, final = await raw.until("L")
        assert final["error"]["code"] == -32603
        assert "fell behind" in final["error"]["message"] and "listen_queue_size" in final["error"]["message"]
        await raw.listen("again")
        await raw.burst(2, NOTES[:2])
        before, _ = await raw.until(2)
        raw.proc.stdin.close()  # type: ignore[union-attr]
        seen, final = await raw.until("again")
        seen = before + seen
        assert changes(seen) == [NOTES[0], NOTES[1], "notifications/tools/list_changed"]
        assert "result" in final


async def test_a_clients_watch_that_fell_behind_raises_the_servers_error() -> None:
    """mcpkit's own client: a ``watch`` whose stream ended because it fell behind raises the server's error (after
    the changes it had received), so the application knows to watch again and re-read."""
    from mcpkit import Client
    from mcpkit.transports.stdio import StdioServer

    target = StdioServer([sys.executable, str(LISTEN_SERVER), "4"], env=ENV, stderr="devnull")
    async with Client(target, mode="modern", timeout=20) as client, client.watch(resource_uris=NOTES) as watch:
        await client.call_tool("burst", {"uris": NOTES})
        with pytest.raises(MCPError, match="fell behind"):
            while True:
                await watch.next(20)


async def test_a_stream_ended_while_its_queue_is_full_ends_after_what_waits() -> None:
    """``end()`` (the token the stream was opened with expired, or the input ended) when the queue is full: the
    stream still ends once the waiting notifications are written (the end used to be dropped with a full queue,
    so the stream stayed open past its token), and nothing offered after it is queued."""
    from mcpkit.server.builtins import Listener

    listener = Listener({"resourceSubscriptions": NOTES}, "L", 2)
    listener.offer("notifications/resources/updated", {"uri": NOTES[0]})
    listener.offer("notifications/resources/updated", {"uri": NOTES[1]})
    listener.end()
    listener.offer("notifications/tools/list_changed", {})
    got = [await asyncio.wait_for(listener.next(), 1) for _ in range(3)]
    assert got == [
        ("notifications/resources/updated", {"uri": NOTES[0]}),
        ("notifications/resources/updated", {"uri": NOTES[1]}),
        None,
    ]
