"""The fan-out every backend shares (``mcpkit.stores.log_fanout.LogFanout``), run on each backend it serves: a real
redis-server, a real three-primary Redis Cluster and a real PostgreSQL. Every worker delivers every event once, in
one order, with its position; a worker cut off from the store catches up from where it was. (What differs by
backend: tests/stores/test_redis_fanout.py and test_postgres_fanout.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from mcpkit.stores.log import SharedFanout, position_order
from mcpkit.stores.log_fanout import LogFanout
from support.fanout_recorder import recording
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)
from support.tcp_proxy import TcpProxy


@dataclass
class Backend:
    """One backend's fan-outs: ``url`` of the store, made ``via`` another port (a TCP proxy) when asked."""

    name: str
    url: str

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1].split("/")[0])

    def via(self, port: int) -> str:
        return self.url.replace(f":{self.port}/", f":{port}/")

    def prefix(self) -> str:
        return f"t{secrets.token_hex(4)}" + ("_" if self.name == "postgres" else ":")

    def make(self, url: str, prefix: str, **options: Any) -> LogFanout[Any]:
        if self.name == "postgres":
            from mcpkit.stores.postgres import PostgresFanout

            return PostgresFanout(url, prefix=prefix, **options)
        from mcpkit.stores.redis import RedisFanout

        return RedisFanout(url, prefix=prefix, cluster=self.name == "cluster", **options)

    @contextlib.asynccontextmanager
    async def fanouts(self, urls: list[str], prefix: str, **options: Any) -> AsyncIterator[list[LogFanout[Any]]]:
        made = [self.make(url, prefix, **options) for url in urls]
        try:
            yield made
        finally:
            for fanout in made:
                await fanout.aclose()


_URLS = {"redis": "redis_url", "cluster": "redis_cluster_url", "postgres": "postgres_url"}
_MARKS = {"redis": pytest.mark.redis, "cluster": pytest.mark.redis, "postgres": pytest.mark.postgres}


def _backends(*names: str) -> Any:
    return pytest.mark.parametrize("backend", [pytest.param(n, marks=_MARKS[n]) for n in names], indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> Backend:
    return Backend(request.param, request.getfixturevalue(_URLS[request.param]))


@_backends("redis", "cluster", "postgres")
async def test_every_worker_delivers_every_event_once_in_one_order(backend: Backend) -> None:
    async with backend.fanouts([backend.url] * 3, backend.prefix()) as (a, b, c):
        assert isinstance(a, SharedFanout)
        recorders = [await recording(f) for f in (a, b, c)]
        assert len({a.worker, b.worker, c.worker}) == 3 and all(f.worker > 0 for f in (a, b, c))
        assert a.running  # the publisher delivers its own events from the log too: one order for all

        async def burst(fanout: LogFanout[Any], name: str) -> None:
            for i in range(30):
                await fanout.publish("resource_updated", f"mcpkit://{name}/{i}")

        await asyncio.gather(burst(a, "a"), burst(b, "b"), c.publish("list_changed", "tools"))
        for recorder in recorders:
            await recorder.until(61, timeout=30)
        await asyncio.sleep(0.3)  # nothing more comes (no event twice)
        first = recorders[0].events
        assert len(first) == 61 and len(set(first)) == 61
        for recorder in recorders[1:]:
            assert recorder.events == first  # the same events, in the same order, at the same positions
        positions = [position_order(p or "") for _, _, p in first]
        assert positions == sorted(positions) and all(positions)
        assert [v for _, v, _ in first if v.startswith("mcpkit://a/")] == [f"mcpkit://a/{i}" for i in range(30)]
        assert (a.published, b.published, c.published) == (30, 30, 1)
        assert a.received == 31 and c.received == 60  # from the other workers


@_backends("redis", "postgres")
async def test_a_worker_cut_off_catches_up_in_order(backend: Backend) -> None:
    prefix = backend.prefix()
    with TcpProxy(backend.port) as proxy:
        async with (
            backend.fanouts([backend.url], prefix) as (a,),
            backend.fanouts([backend.via(proxy.port)], prefix, timeout=1.0) as (b,),
        ):
            await recording(a)
            rb = await recording(b)
            await a.publish("list_changed", "tools")
            await rb.until(1, timeout=10)
            proxy.cut()  # B loses the store (its connections; PostgreSQL: its LISTEN too); A goes on publishing
            await asyncio.sleep(0.3)
            for i in range(50):
                await a.publish("resource_updated", f"mcpkit://r/{i}")
            await asyncio.sleep(0.5)
            assert len(rb.events) == 1
            proxy.restore()
            await rb.until(51, timeout=30)
            assert [v for _, v, _ in rb.events[1:]] == [f"mcpkit://r/{i}" for i in range(50)]
            assert rb.missed == 0
