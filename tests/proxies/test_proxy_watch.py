"""What a proxy watches upstream for its clients (:mod:`mcpkit.proxy_watch`): a 2026-07-28 client over a
handshake-era stdio upstream hears of a resource change its own call made, though the call ran in a pooled upstream
process and not in the primary's (each pooled process is subscribed to what the primary watches). Real stdio
upstream processes, our client."""

from __future__ import annotations

import asyncio
import sys

import pytest

import mcpkit
from mcpkit import Client
from support.toolkit import APPS_FILE

pytestmark = pytest.mark.timeout(120)


def _upstream(name: str) -> list[str]:
    return [sys.executable, str(APPS_FILE), name]


async def _pooled_watches(p: mcpkit.ProxyServer, want: frozenset[str], seconds: float = 10.0) -> list[frozenset[str]]:
    """The URIs each pooled connection watches, read again until each watches ``want`` (the listen stream's end
    reaches the proxy after the client's watch returned), for at most ``seconds``."""
    deadline = asyncio.get_running_loop().time() + seconds
    while True:
        watched = [c.watched for c in p.upstreams[0]._all if not c.primary and c.session is None]
        if all(w == want for w in watched) or asyncio.get_running_loop().time() > deadline:
            return watched
        await asyncio.sleep(0.05)


async def test_a_2026_client_hears_of_a_change_its_call_made_in_a_pooled_stdio_upstream_process() -> None:
    """It used to be lost: the watch was on the primary's process, the call ran in another one. Each update comes
    once; a pooled process opened before the watch and one opened during it are watched alike, and unwatched after."""
    p = mcpkit.proxy(_upstream("cached"), client_options={"mode": "handshake"}, pool_size=4)
    async with Client(p, mode="modern") as client:
        assert (await client.call_tool("process", {})).data != 0  # (a pooled process, opened before any watch)
        async with client.watch(resource_uris=["data://clock"]) as watch:
            assert await _pooled_watches(p, frozenset({"data://clock"})) != []
            for _ in range(2):
                assert (await client.call_tool("touch", {})).text == "touched"
                method, params = await watch.next(timeout=10)
                assert (method, params["uri"]) == ("notifications/resources/updated", "data://clock")
            # two calls at once: one runs in a pooled process opened now, subscribed before it serves
            await asyncio.gather(client.call_tool("touch", {}), client.call_tool("touch", {}))
            for _ in range(2):
                method, params = await watch.next(timeout=10)
                assert (method, params["uri"]) == ("notifications/resources/updated", "data://clock")
            with pytest.raises(TimeoutError):
                await watch.next(timeout=0.5)  # (each update once)
            assert len(await _pooled_watches(p, frozenset({"data://clock"}))) >= 1
        assert set(await _pooled_watches(p, frozenset())) <= {frozenset()}  # (the watch ended: unsubscribed)
