"""A client's ``watch`` that falls behind (the application reads its changes slower than the server sends them):
it gets each change once, and when distinct changes overflow its ``maxsize`` (or ``maxbytes``) it ends with an
error the application's loop sees, instead of losing changes silently. Both eras: a 2026-07-28 listen stream (the
session's queue for it) and a handshake-era watch (resource subscriptions and the session's notifications).

The server is tests/support/servers/listen_server.py over stdio (its own listen queue large enough: only the
client's overflows), or big_changes_server.py for updates of megabytes each (the byte bound); the tap tells when
every notification of a burst has been received, so the test reads only after the burst, as a slow application
would."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mcpkit import Client
from mcpkit.engine.tap import IN, TapEvent
from mcpkit.protocol.errors import MCPError

LISTEN_SERVER = Path(__file__).resolve().parent.parent / "support" / "servers" / "listen_server.py"
BIG_CHANGES_SERVER = LISTEN_SERVER.with_name("big_changes_server.py")
NOTES = [f"note://{n}" for n in range(10)]
UPDATED = "notifications/resources/updated"
TOOLS_CHANGED = "notifications/tools/list_changed"


class _Arrivals:
    """Counts the change notifications received (before the client handles them)."""

    def __init__(self) -> None:
        self.count = 0
        self.tools_changed = 0
        self.changed = asyncio.Event()

    def __call__(self, event: TapEvent) -> None:
        if event.direction == IN and event.method in (UPDATED, TOOLS_CHANGED):
            self.count += 1
            self.tools_changed += event.method == TOOLS_CHANGED
            self.changed.set()

    async def until(self, arrived: Callable[[], bool], client: Client) -> None:
        async with asyncio.timeout(20):
            while not arrived():
                self.changed.clear()
                await self.changed.wait()
        await client.ping()  # (every message read before its answer is handled by now)


async def _burst(client: Client, arrivals: _Arrivals, uris: list[str]) -> None:
    """Distinct updates (a server's listen stream sends each: it coalesces only equal ones)."""
    before = arrivals.count
    await client.call_tool("burst", {"uris": uris})
    await arrivals.until(lambda: arrivals.count >= before + len(uris), client)


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_watch_that_falls_behind_gets_each_change_once(mode: str) -> None:
    """Five updates of two resources and a tools list change, with room for three: each change arrives once, in
    the order it first came, and the list change is not lost (it used to be dropped, the queue full of repeats)."""
    arrivals = _Arrivals()
    async with (
        Client([sys.executable, str(LISTEN_SERVER)], mode=mode, tap=arrivals, timeout=20) as client,
        client.watch(tools=True, resource_uris=NOTES[:2], maxsize=3) as watch,
    ):
        # (a pause after each, so that a 2026-07-28 server writes each before the next: none coalesce there)
        repeats = [NOTES[0], NOTES[1], NOTES[0], NOTES[1], NOTES[0]]
        await client.call_tool("burst", {"uris": repeats, "tools_changed": True, "pause": 0.05})
        await arrivals.until(lambda: arrivals.tools_changed == 1, client)
        got = [await watch.next(5) for _ in range(3)]
        assert [(m, p.get("uri")) for m, p in got] == [(UPDATED, NOTES[0]), (UPDATED, NOTES[1]), (TOOLS_CHANGED, None)]
        with pytest.raises(TimeoutError):
            await watch.next(0.3)
        await _burst(client, arrivals, [NOTES[1]])  # (read: it is waited for again)
        method, params = await watch.next(5)
        assert (method, params["uri"]) == (UPDATED, NOTES[1])


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_watch_whose_distinct_changes_overflow_ends_with_an_error_naming_its_bound(mode: str) -> None:
    """Three distinct updates with room for two: the application reads the two, then its ``async for`` raises an
    error that names ``maxsize`` (the third used to be lost with no sign but a log line, or none at all)."""
    arrivals = _Arrivals()
    async with (
        Client([sys.executable, str(LISTEN_SERVER)], mode=mode, tap=arrivals, timeout=20) as client,
        client.watch(resource_uris=NOTES[:3], maxsize=2) as watch,
    ):
        await _burst(client, arrivals, NOTES[:3])
        got: list[str] = []
        with pytest.raises(MCPError, match="fell behind") as caught:
            async with asyncio.timeout(5):
                async for _, params in watch:
                    got.append(params["uri"])
        assert got == NOTES[:2]
        assert "maxsize=2" in str(caught.value) and "watch" in str(caught.value)
        with pytest.raises(MCPError, match="fell behind"):  # (it stays ended)
            await watch.next(1)
    async with (
        Client([sys.executable, str(LISTEN_SERVER)], mode=mode, tap=arrivals, timeout=20) as client,
        client.watch(resource_uris=NOTES[:3], maxsize=2) as watch,
    ):
        await _burst(client, arrivals, NOTES[:1])  # (a new watch after it works)
        assert (await watch.next(5))[1]["uri"] == NOTES[0]


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_watch_with_room_gets_every_change_even_repeats(mode: str) -> None:
    """While its queue has room, a watch read late gets every change, repeats of one resource included (a count of
    updates stays exact): equal changes are merged only when the queue is full."""
    arrivals = _Arrivals()
    async with (
        Client([sys.executable, str(LISTEN_SERVER)], mode=mode, tap=arrivals, timeout=20) as client,
        client.watch(resource_uris=NOTES[:1], maxsize=10) as watch,
    ):
        await client.call_tool("burst", {"uris": [NOTES[0]] * 4, "pause": 0.05})
        await arrivals.until(lambda: arrivals.count >= 4, client)
        got = [await watch.next(5) for _ in range(4)]
        assert [(m, p.get("uri")) for m, p in got] == [(UPDATED, NOTES[0])] * 4
        with pytest.raises(TimeoutError):
            await watch.next(0.3)


MIB = 1024 * 1024


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_watch_whose_large_changes_overflow_its_default_byte_bound_ends_naming_it(mode: str) -> None:
    """Ten distinct updates of 2 MiB each (the server may send up to 4 MiB each) at an application that does not
    read: the watch holds 16 MiB of them at most (seven), then ends naming ``maxbytes``, well within its count
    bound of 1,024 (it used to hold all of them: with the count bound only, 1,024 of 4 MiB, 4 GiB)."""
    arrivals = _Arrivals()
    uris = [f"note://{n}" for n in range(10)]
    async with (
        Client([sys.executable, str(BIG_CHANGES_SERVER)], mode=mode, tap=arrivals, timeout=30) as client,
        client.watch(resource_uris=uris) as watch,
    ):
        assert (await client.call_tool("burst", {"uris": uris, "size": 2 * MIB})).text == "sent 10"
        await arrivals.until(lambda: arrivals.count >= 10, client)
        got: list[str] = []
        with pytest.raises(MCPError, match="fell behind") as caught:
            async with asyncio.timeout(10):
                async for _, params in watch:
                    got.append(params["uri"])
                    assert len(params["_meta"]["example.com/pad"]) == 2 * MIB
        assert got == uris[:7]  # (16 MiB hold seven updates of 2 MiB and their URIs, not eight)
        assert f"maxbytes={16 * MIB}" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_watch_full_by_its_byte_bound_merges_an_equal_change_and_ends_on_a_distinct_one(mode: str) -> None:
    """The byte bound acts as the count bound does (``watch(maxbytes=)``): with the queue full by bytes, an update
    of a URI still waiting is merged into it (nothing ends); one change larger than the bound still goes when
    nothing waits; a distinct change finding no room ends the watch, naming the bound."""
    arrivals = _Arrivals()
    async with (
        Client([sys.executable, str(BIG_CHANGES_SERVER)], mode=mode, tap=arrivals, timeout=30) as client,
        client.watch(resource_uris=NOTES, maxbytes=MIB) as watch,
    ):
        size = 300 * 1024
        await client.call_tool("burst", {"uris": [NOTES[0], NOTES[1], NOTES[2], NOTES[0]], "size": size})
        await arrivals.until(lambda: arrivals.count >= 4, client)
        got = [(await watch.next(5))[1]["uri"] for _ in range(3)]
        assert got == NOTES[:3]
        with pytest.raises(TimeoutError):  # (the repeat of note://0 was merged into the first)
            await watch.next(0.3)
        await client.call_tool("burst", {"uris": [NOTES[3]], "size": 2 * MIB})  # (larger than the bound, alone)
        await arrivals.until(lambda: arrivals.count >= 5, client)
        assert (await watch.next(5))[1]["uri"] == NOTES[3]
        await client.call_tool("burst", {"uris": [NOTES[4], NOTES[5]], "size": 700 * 1024})
        await arrivals.until(lambda: arrivals.count >= 7, client)
        assert (await watch.next(5))[1]["uri"] == NOTES[4]
        with pytest.raises(MCPError, match="fell behind") as caught:
            await watch.next(5)
        assert f"maxbytes={MIB}" in str(caught.value), str(caught.value)
