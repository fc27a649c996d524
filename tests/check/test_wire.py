"""The checker's raw wire (mcpkit.check.wire) against a real stdio server whose errors carry no id (the 2025-11-25
schema makes the id optional on an error response): such an error is no response to any request, yet when nothing
else of ours is open it can only be the answer to the one request waited for, and that wait ends at once; while
anything else may still be answered (a request that timed out, a malformed line sent raw) it ends no wait."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from mcpkit.check.wire import StdioWire
from support.paths import REPO

FRAGILE = [sys.executable, str(REPO / "tests" / "support" / "servers" / "fragile_server.py"), "--error-without-id"]
INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
LONG = 60.0  # a wait the server's answer must end long before (a busy machine takes seconds, not 60)

pytestmark = pytest.mark.timeout(300)


@asynccontextmanager
async def fragile(*flags: str) -> AsyncIterator[StdioWire]:
    wire = StdioWire([*FRAGILE, *flags])
    await wire.start()
    try:
        yield wire
    finally:
        await wire.close()


async def test_an_error_without_an_id_ends_the_wait_of_the_one_request_open_and_stays_a_stray() -> None:
    async with fragile() as wire:
        assert await wire.request("initialize", INIT, timeout=LONG) is not None
        await wire.notify("notifications/initialized")
        t0 = time.monotonic()
        assert await wire.request("mcpkit-check/no-such-method", timeout=LONG) is None
        assert time.monotonic() - t0 < LONG / 2
        # judged as before: not a response to the request (no id), kept as a stray for M001 and M006
        assert [s.data for s in wire.strays] == [
            {"jsonrpc": "2.0", "error": {"code": -32601, "message": "Method not found"}}
        ]
        assert wire.responses.keys() == {wire.key(1)}
        ping = await wire.request("ping", timeout=LONG)  # the session goes on
        assert ping is not None and ping.data["result"] == {}


async def test_an_error_without_an_id_ends_no_wait_while_a_request_that_timed_out_may_still_be_answered() -> None:
    # the server answers a request before initialize after 3 s: the first request's wait (1 s) ends before that,
    # and its late id-less answer comes while initialize is open; it is not initialize's answer
    async with fragile("--slow-first-request", "3") as wire:
        assert await wire.request("tools/list", timeout=1.0) is None
        t0 = time.monotonic()
        init = await wire.request("initialize", INIT, timeout=LONG)
        assert init is not None and init.data["result"]["protocolVersion"] == "2025-11-25", init
        assert time.monotonic() - t0 < LONG / 2
        assert [s.data["error"]["code"] for s in wire.strays] == [-32600]


async def test_an_error_without_an_id_ends_no_wait_while_a_malformed_line_may_still_be_answered() -> None:
    async with fragile() as wire:
        assert await wire.request("initialize", INIT, timeout=LONG) is not None
        await wire.notify("notifications/initialized")
        await wire.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": \n')
        ping = await wire.request("ping", timeout=LONG)  # its parse error (no id) may come while the ping is open
        assert ping is not None and ping.data["result"] == {}, wire.strays
        assert [s.data["error"]["code"] for s in wire.strays] == [-32700]
        assert wire.raw_unanswered == 0


async def test_until_ends_as_what_it_waits_for_arrives_and_at_its_bound_otherwise() -> None:
    """``Wire.until`` is how a check looks for something the server may send (the -32700 for a line that is not
    JSON waited a fixed 0.3 s): it returns as soon as a recorded payload makes its condition hold, and False once
    its bound has passed without."""
    async with fragile() as wire:
        assert await wire.request("initialize", INIT, timeout=LONG) is not None
        await wire.send_raw(b"{not json\n")
        t0 = time.monotonic()
        assert await wire.until(lambda: any(i.data and "error" in i.data for i in wire.incoming), LONG)
        assert time.monotonic() - t0 < LONG / 2
        t0 = time.monotonic()
        assert not await wire.until(lambda: False, 0.2)
        assert 0.2 <= time.monotonic() - t0 < LONG / 2
