"""The stores on every backend (in-memory, a real redis-server and a real Redis Cluster on 127.0.0.1): what the
public contract kit (tests/testing/test_stores.py applies :mod:`mcpkit.testing.stores` to the same backends) does not
cover, or what a requirement of the matrix is traced to.

EventStore: ordered replay after a sequence number, None for an unknown stream, the per-stream bound held in Redis
itself, forget by prefix leaving no key behind, glob characters in a prefix. Bus: fan-out of many messages, a
closed subscription (and Redis unsubscribing the last one), the dropped count of a slow subscriber; fan-out
(BusFanout, deprecated attach_bus): a change on one worker reaches the clients of every worker, exactly once each.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcpkit import MCPKit
from mcpkit.client.lowlevel import ClientSession
from mcpkit.stores import EventStore, InMemoryEventStore
from mcpkit.stores.bus import Bus, BusBridge, BusFanout, InMemoryBus, LocalFanout, attach_bus
from mcpkit.transports.memory import create_memory_pair
from support.redis_server import redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)

BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("redis", id="redis", marks=pytest.mark.redis),
    pytest.param("cluster", id="cluster", marks=pytest.mark.redis),
]


class Backend:
    """Builds event stores and buses of one kind; closes them at teardown. Redis ones share a fresh key prefix;
    "cluster" ones talk to a three-primary Redis Cluster through ``redis.asyncio.RedisCluster``."""

    def __init__(self, kind: str, url: str | None) -> None:
        self.kind = kind
        self.url = url
        self.prefix = f"t{secrets.token_hex(4)}:"
        self._closers: list[Any] = []
        self._memory_bus: InMemoryBus | None = None

    @property
    def cluster(self) -> bool:
        return self.kind == "cluster"

    def event_store(self, *, max_events_per_stream: int = 1000, ttl: float | None = 3600.0) -> EventStore:
        if self.kind == "memory":
            return InMemoryEventStore(max_events_per_stream=max_events_per_stream)
        from mcpkit.stores.redis import RedisEventStore

        assert self.url is not None
        store = RedisEventStore(
            self.url, prefix=self.prefix, max_events_per_stream=max_events_per_stream, ttl=ttl, cluster=self.cluster
        )
        self._closers.append(store.aclose)
        return store

    def bus(self) -> Bus:
        """A bus as one worker sees it: for memory every worker shares one instance; for Redis each worker has
        its own connection to the same server."""
        if self.kind == "memory":
            if self._memory_bus is None:
                self._memory_bus = InMemoryBus()
                self._closers.append(self._memory_bus.aclose)
            return self._memory_bus
        if self.kind == "cluster":
            pytest.skip("RedisBus is Redis pub/sub for one Redis; RedisFanout (Streams) is what serves a cluster")
        from mcpkit.stores.redis import RedisBus

        assert self.url is not None
        bus = RedisBus(self.url, prefix=self.prefix)
        self._closers.append(bus.aclose)
        return bus

    async def aclose(self) -> None:
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                await close()


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest) -> AsyncIterator[Backend]:
    url = {"redis": "redis_url", "cluster": "redis_cluster_url"}.get(request.param)
    url = request.getfixturevalue(url) if url else None
    b = Backend(request.param, url)
    try:
        yield b
    finally:
        await b.aclose()


def _events(n: int, start: int = 1) -> list[tuple[int, bytes]]:
    return [(seq, f'{{"jsonrpc":"2.0","method":"m","params":{{"n":{seq}}}}}'.encode()) for seq in range(start, n + 1)]


# ---------------------------------------------------------------------------------------------- EventStore


@pytest.mark.req("A011", "A012")
async def test_replay_returns_the_events_after_a_sequence_number_in_order(backend: Backend) -> None:
    store = backend.event_store()
    assert isinstance(store, EventStore)
    events = _events(7)
    for seq, data in events:
        await store.append("sid/0", seq, data)
    assert await store.replay("sid/0", 0) == events
    assert await store.replay("sid/0", 4) == events[4:]
    assert await store.replay("sid/0", 6) == events[6:]
    assert await store.replay("sid/0", 7) == []
    assert await store.replay("sid/0", 100) == []


@pytest.mark.req("A012")
async def test_unknown_stream_replays_as_none(backend: Backend) -> None:
    store = backend.event_store()
    assert await store.replay("never-seen/0", 0) is None
    await store.append("known/0", 1, b"x")
    assert await store.replay("known/1", 0) is None  # a sibling of a known stream is still unknown


async def test_each_stream_is_bounded_and_a_gap_is_refused(backend: Backend) -> None:
    store = backend.event_store(max_events_per_stream=3)
    events = _events(10)
    for seq, data in events:
        await store.append("s/0", seq, data)
    await store.append("s/1", 1, b"other")
    assert await store.replay("s/0", 7) == events[7:]  # exactly the last three are kept
    assert await store.replay("s/0", 8) == events[8:]
    assert await store.replay("s/0", 6) is None  # event 7 was evicted
    assert await store.replay("s/0", 0) is None
    assert await store.replay("s/1", 0) == [(1, b"other")]
    if backend.kind != "memory":
        from mcpkit.stores.redis import RedisEventStore

        assert isinstance(store, RedisEventStore)
        assert await store.redis.xlen(store.key("s/0")) == 3  # the bound is on the server, not a filter


async def test_forget_drops_every_stream_under_a_prefix_and_nothing_else(backend: Backend) -> None:
    store = backend.event_store()
    for key in ("s1/0", "s1/1", "s1/27", "s10/0", "s2/0", "plain"):
        await store.append(key, 1, key.encode())
    await store.forget("s1/")  # what the HTTP server calls when session s1 ends
    for key in ("s1/0", "s1/1", "s1/27"):
        assert await store.replay(key, 0) is None
    for key in ("s10/0", "s2/0", "plain"):
        assert await store.replay(key, 0) == [(1, key.encode())]
    await store.forget("pl")  # any other prefix works too
    assert await store.replay("plain", 0) is None
    await store.forget("s")
    assert await store.replay("s10/0", 0) is None and await store.replay("s2/0", 0) is None
    await store.forget("nothing-here/")  # forgetting nothing is fine
    await store.append("s1/0", 1, b"again")  # a forgotten key can start over
    assert await store.replay("s1/0", 0) == [(1, b"again")]
    if backend.kind != "memory":
        from mcpkit.stores.redis import RedisEventStore

        assert isinstance(store, RedisEventStore)
        await store.forget("s1/")
        left = [k async for k in store.redis.scan_iter(match=backend.prefix + "*")]
        assert left == []  # streams and their group sets are gone


async def test_forget_prefix_with_glob_characters_is_literal(backend: Backend) -> None:
    store = backend.event_store()
    await store.append("a*b/0", 1, b"1")
    await store.append("axb/0", 1, b"2")
    await store.append("a[x]c", 1, b"3")
    await store.append("axc", 1, b"4")
    await store.forget("a*")
    await store.forget("a[x]")
    assert await store.replay("a*b/0", 0) is None and await store.replay("a[x]c", 0) is None
    assert await store.replay("axb/0", 0) == [(1, b"2")] and await store.replay("axc", 0) == [(1, b"4")]


# ---------------------------------------------------------------------------------------------- Bus


async def _take(sub: Any, n: int, timeout: float = 5.0) -> list[bytes]:
    out: list[bytes] = []

    async def run() -> None:
        async for data in sub:
            out.append(data)
            if len(out) == n:
                return

    await asyncio.wait_for(run(), timeout)
    return out


async def test_bus_fans_out_to_every_subscriber_in_order(backend: Backend) -> None:
    bus_a, bus_b = backend.bus(), backend.bus()  # two workers
    assert isinstance(bus_a, Bus)
    subs = [await bus_a.subscribe("news"), await bus_a.subscribe("news"), await bus_b.subscribe("news")]
    other = await bus_b.subscribe("sport")
    messages = [f"m{i}".encode() for i in range(200)] + [b"\x00binary\xff"]
    for m in messages:
        await bus_b.publish("news", m)
    await bus_a.publish("sport", b"goal")
    for sub in subs:
        assert await _take(sub, len(messages)) == messages
    assert await _take(other, 1) == [b"goal"]  # "sport" got none of the news
    for sub in subs:
        await sub.aclose()
    await other.aclose()


async def test_a_closed_subscription_gets_nothing_more(backend: Backend) -> None:
    bus = backend.bus()
    keep, gone = await bus.subscribe("c"), await bus.subscribe("c")
    if backend.kind == "redis":
        from mcpkit.stores.redis import RedisBus

        assert isinstance(bus, RedisBus)
        assert await bus.redis.pubsub_numsub(f"{backend.prefix}bus:c") == [(f"{backend.prefix}bus:c".encode(), 1)]
    await bus.publish("c", b"1")
    assert await _take(gone, 1) == [b"1"]
    await gone.aclose()
    await bus.publish("c", b"2")
    assert await _take(keep, 2) == [b"1", b"2"]
    assert [m async for m in gone] == []  # ended, nothing after the close
    await keep.aclose()
    late = await bus.subscribe("c")  # the channel works again after every subscriber left
    await bus.publish("c", b"3")
    assert await _take(late, 1) == [b"3"]
    await late.aclose()
    if backend.kind == "redis":
        channel = f"{backend.prefix}bus:c"
        for _ in range(100):  # the last subscriber leaving unsubscribes the connection (no leak per channel)
            ((_, count),) = await bus.redis.pubsub_numsub(channel)
            if count == 0:
                break
            await asyncio.sleep(0.01)
        assert count == 0


async def test_a_subscriber_that_falls_behind_loses_the_oldest_messages_only(backend: Backend) -> None:
    bus = InMemoryBus(queue_size=4) if backend.kind == "memory" else None
    if backend.kind == "cluster":
        pytest.skip("RedisBus is Redis pub/sub for one Redis")
    if bus is None:
        from mcpkit.stores.redis import RedisBus

        assert backend.url is not None
        bus = RedisBus(backend.url, prefix=backend.prefix, queue_size=4)  # type: ignore[assignment]
    assert bus is not None
    try:
        slow = await bus.subscribe("c")
        for i in range(10):
            await bus.publish("c", str(i).encode())
        await asyncio.sleep(0.2)  # let the Redis reader deliver
        assert await _take(slow, 4) == [b"6", b"7", b"8", b"9"]
        assert getattr(slow, "dropped", None) == 6
    finally:
        await bus.aclose()


# ---------------------------------------------------------------------------------------------- fan-out


def _worker(name: str) -> MCPKit:
    app = MCPKit(name)

    @app.tool
    def add_tool(name: str) -> str:
        """Register a new tool (changes the tool list)."""

        def extra() -> str:
            return "extra"

        app.add_tool(extra, name=name)
        return "added"

    @app.resource("mcpkit://doc")
    def doc() -> str:
        return "doc"

    return app


class Seen:
    def __init__(self) -> None:
        self.items: list[tuple[str, Any]] = []
        self.event = asyncio.Event()

    def __call__(self, method: str, params: Any) -> None:
        self.items.append((method, params))
        self.event.set()

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.items if m == method)


@contextlib.asynccontextmanager
async def _connect(app: MCPKit, mode: str, seen: Seen) -> AsyncIterator[ClientSession]:
    client_end, server_end = create_memory_pair()
    task = asyncio.get_running_loop().create_task(app.serve(server_end))
    try:
        async with ClientSession(client_end, mode=mode, notification_handler=seen) as cs:
            yield cs
    finally:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task


async def _settle(bridges: list[BusFanout], seen: list[Seen], method: str, expect: int) -> None:
    """Wait until every client saw ``method`` ``expect`` times, then a little more (to catch duplicates)."""
    deadline = asyncio.get_running_loop().time() + 5
    while any(s.count(method) < expect for s in seen):
        assert asyncio.get_running_loop().time() < deadline, [s.items for s in seen]
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)


async def test_a_bus_fanout_reaches_every_worker_exactly_once(backend: Backend) -> None:
    apps = [_worker("w1"), _worker("w2"), _worker("w3")]
    await asyncio.sleep(0.01)  # built inside the loop: let their own registration notices pass before attaching
    bridges = [BusFanout(backend.bus()) for _ in apps]
    for app, fanout in zip(apps, bridges, strict=True):
        app.set_fanout(fanout)
    for bridge in bridges:
        await bridge.start()
    seen = [Seen() for _ in apps]
    async with contextlib.AsyncExitStack() as stack:
        sessions = [
            await stack.enter_async_context(_connect(app, "handshake", s)) for app, s in zip(apps, seen, strict=True)
        ]
        modern_seen = Seen()
        modern = await stack.enter_async_context(_connect(apps[2], "modern", modern_seen))
        sub = await stack.enter_async_context(modern.listen(tools=True, resource_uris=["mcpkit://doc"]))
        await sessions[1].subscribe_resource("mcpkit://doc")

        await sessions[0].call_tool("add_tool", {"name": "t1"})  # worker 1 changes its tool list
        await _settle(bridges, seen, "notifications/tools/list_changed", 1)
        for s in seen:
            assert s.count("notifications/tools/list_changed") == 1, s.items  # the origin too: not twice
        method, _ = await sub.next(timeout=5)
        assert method == "notifications/tools/list_changed"

        await apps[2].notify_resource_updated("mcpkit://doc")  # worker 3 announces a resource change
        await _settle(bridges, [seen[1]], "notifications/resources/updated", 1)
        assert seen[1].count("notifications/resources/updated") == 1
        assert seen[0].count("notifications/resources/updated") == 0  # not subscribed
        method, params = await sub.next(timeout=5)
        assert method == "notifications/resources/updated" and params["uri"] == "mcpkit://doc"
        with pytest.raises(asyncio.TimeoutError):
            await sub.next(timeout=0.3)  # and nothing twice on the listen stream
    assert [b.published for b in bridges] == [1, 0, 1]
    assert [b.received for b in bridges] == [1, 2, 1]
    for bridge in bridges:
        await bridge.aclose()


async def test_a_fanout_starts_by_itself_with_the_first_listen_or_session(backend: Backend) -> None:
    """Issue 14 item 3: no server method is replaced to start the subscriber; a ``subscriptions/listen`` stream
    (or a registered session) starts it, and the server keeps its own methods throughout."""
    a, b = _worker("a"), _worker("b")
    await asyncio.sleep(0.01)
    fan_a, fan_b = BusFanout(backend.bus()), BusFanout(backend.bus())
    a.set_fanout(fan_a)
    b.set_fanout(fan_b)
    assert not fan_b.running and not fan_a.running
    async with _connect(b, "modern", Seen()) as cs_b, cs_b.listen(tools=True) as sub:
        assert fan_b.running  # started before the stream was acknowledged
        async with _connect(a, "modern", Seen()) as cs_a:
            await cs_a.call_tool("add_tool", {"name": "t"})
        assert (await sub.next(timeout=5))[0] == "notifications/tools/list_changed"
    async with _connect(a, "handshake", Seen()):  # a handshake session starts A's subscriber soon after
        deadline = asyncio.get_running_loop().time() + 5
        while not fan_a.running:
            assert asyncio.get_running_loop().time() < deadline
            await asyncio.sleep(0.01)
    for name in ("notify_list_changed", "notify_resource_updated", "dispatch", "register_session"):
        assert name not in vars(a) and name not in vars(b)
    await fan_a.aclose()
    await fan_b.aclose()
    assert fan_a.published == 1 and fan_b.received == 1


async def test_attach_bus_is_a_deprecated_wrapper_that_sets_the_fanout(backend: Backend) -> None:
    """Issue 14 item 3: ``attach_bus`` still works for one release: it warns and gives the server a fan-out,
    replacing none of its methods."""
    a, b = _worker("a"), _worker("b")
    await asyncio.sleep(0.01)
    assert isinstance(a.fanout, LocalFanout)
    with pytest.warns(DeprecationWarning, match="create_app"):
        bridge_a = attach_bus(a, backend.bus())
    with pytest.warns(DeprecationWarning):
        bridge_b = attach_bus(b, backend.bus())
    assert a.fanout is bridge_a and isinstance(bridge_a, BusFanout) and isinstance(bridge_a, BusBridge)
    assert [k for k, v in vars(a).items() if inspect.ismethod(v)] == []  # no bound-method overrides
    from mcpkit.transports.http import create_app

    served = create_app(a)
    assert bridge_a.asgi(served) is served  # its lifespan starts the server's fan-out (this bridge) itself
    assert bridge_b.asgi(served) is not served  # another server's app: wrapped, so the lifespan starts bridge_b
    await bridge_b.start()
    async with _connect(b, "modern", Seen()) as cs_b, cs_b.listen(tools=True) as sub:
        async with _connect(a, "modern", Seen()) as cs_a:
            await cs_a.call_tool("add_tool", {"name": "t"})
        assert (await sub.next(timeout=5))[0] == "notifications/tools/list_changed"
    await bridge_a.aclose()
    await bridge_b.aclose()


@pytest.mark.redis
async def test_redis_event_store_reloads_its_scripts_after_a_script_flush(redis_url: str) -> None:  # noqa: F811
    from mcpkit.stores.redis import RedisEventStore

    store = RedisEventStore(redis_url, prefix=f"t{secrets.token_hex(4)}:")
    try:
        await store.append("f/0", 1, b"one")
        await store.redis.script_flush()  # e.g. a Redis restart or failover empties the script cache
        await store.append("f/0", 2, b"two")
        assert await store.replay("f/0", 0) == [(1, b"one"), (2, b"two")]
        assert await store.redis.pttl(store.key("f/0")) > 3_000_000  # the default 1 h TTL is set
        with pytest.raises(Exception, match="equal or smaller"):
            await store.append("f/0", 2, b"again")  # a sequence number never goes back (a transport bug)
    finally:
        await store.aclose()


@pytest.mark.redis
async def test_redis_bus_resubscribes_by_itself_after_redis_restarts() -> None:
    from mcpkit.stores.redis import RedisBus
    from support.redis_server import RedisServer, require_redis_server

    binary = require_redis_server()
    server = RedisServer(binary)  # its own server: this test kills it
    a, b = RedisBus(server.url), RedisBus(server.url)
    try:
        sub = await b.subscribe("c")
        await a.publish("c", b"before")
        assert await _take(sub, 1) == [b"before"]
        server.stop()
        await asyncio.sleep(0.3)  # the subscriber notices and retries
        server = RedisServer(binary, server.port)
        got: list[bytes] = []
        for _ in range(50):  # messages published before the resubscription are lost (at most once): retry
            with contextlib.suppress(Exception):
                await a.publish("c", b"after")
                got = await _take(sub, 1, timeout=0.2)
                break
        assert got == [b"after"]
    finally:
        await a.aclose()
        await b.aclose()
        server.stop()


def test_redis_is_imported_only_when_a_redis_backend_is_built() -> None:
    import subprocess
    import sys

    code = (
        "import sys, mcpkit, mcpkit.stores, mcpkit.stores.bus, mcpkit.stores.redis\n"
        "assert not any(m == 'redis' or m.startswith('redis.') for m in sys.modules), 'redis imported'\n"
        "mcpkit.stores.redis.RedisBus('redis://127.0.0.1:1/0')\n"
        "assert 'redis.asyncio' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_in_memory_event_store_holds_what_max_bytes_counts() -> None:
    """Events encoded by orjson keep their whole encode buffer (about 4 KiB for a small message with orjson 3.13):
    the store keeps a right-sized copy, so 20,000 small events take about what ``max_bytes`` counts, not 80 MB."""
    import tracemalloc

    import orjson

    from mcpkit.stores import InMemoryEventStore

    store = InMemoryEventStore(max_events_per_stream=100_000)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(20_000):
            data = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"n": i}})
            await store.append("s", i, data)
        del data
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert store.size_bytes < 2_000_000
    assert held < 8 * 1024 * 1024, f"{held / 1e6:.1f} MB held for {store.size_bytes / 1e6:.1f} MB of events"


async def test_in_memory_event_store_max_bytes_holds_for_a_single_stream() -> None:
    """One long stream (a session's GET stream, a tool logging large messages) is held to ``max_bytes`` too: its
    oldest events go, and a resumption that needs them is refused (no replay with a hole)."""
    from mcpkit.stores import InMemoryEventStore

    store = InMemoryEventStore(max_events_per_stream=1000, max_bytes=10_000)
    for i in range(1, 101):
        await store.append("only/1", i, b"x" * 1000)
    assert store.size_bytes <= 10_000
    assert await store.replay("only/1", 95) == [(i, b"x" * 1000) for i in range(96, 101)]
    assert await store.replay("only/1", 1) is None
    # the same when the stream written to is the oldest of several
    store = InMemoryEventStore(max_events_per_stream=1000, max_bytes=10_000)
    await store.append("old/1", 1, b"o" * 1000)
    await store.append("new/1", 1, b"n" * 1000)
    for i in range(2, 101):
        await store.append("old/1", i, b"o" * 1000)
    assert store.size_bytes <= 10_000
    assert (await store.replay("old/1", 99)) == [(100, b"o" * 1000)]
    # an event larger than the whole budget is kept alone (the stream's newest event stays resumable)
    await store.append("old/1", 101, b"b" * 20_000)
    assert await store.replay("old/1", 100) == [(101, b"b" * 20_000)]
    assert store.size_bytes == 20_000
