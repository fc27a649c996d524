"""RedisFanout (Redis Streams), RedisConnection (bounded waits, the breaker) and the followable event store, against
a real redis-server and a real three-primary Redis Cluster: a worker cut off from Redis past the log's bound tells
its clients to look again; answers are forwarded to the worker that waits for them; an unreachable or stalled Redis
fails fast and recovers by itself. (What every backend's fan-out does alike, on Redis, Redis Cluster and
PostgreSQL: tests/stores/test_log_fanout.py.)"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcpkit.stores.log import position_order, worker_of
from mcpkit.stores.redis import RedisConnection, RedisEventStore, RedisFanout, RedisSessionStore, StoreUnavailable
from support.fanout_recorder import Recorder, cut_off_past_the_log_bound, recording, the_outbox_keeps_its_bound
from support.redis_server import redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)
from support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.redis


@pytest.fixture(params=["redis", "cluster"])
def url_and_cluster(request: pytest.FixtureRequest) -> tuple[str, bool]:
    name = "redis_url" if request.param == "redis" else "redis_cluster_url"
    return request.getfixturevalue(name), request.param == "cluster"


@contextlib.asynccontextmanager
async def fanouts(url: str, n: int, *, cluster: bool = False, **options: Any) -> AsyncIterator[list[RedisFanout]]:
    prefix = f"t{secrets.token_hex(4)}:"
    made = [RedisFanout(url, prefix=prefix, cluster=cluster, **options) for _ in range(n)]
    try:
        yield made
    finally:
        for fanout in made:
            await fanout.aclose()


async def test_request_ids_name_the_worker_that_waits_for_the_answer(url_and_cluster: tuple[str, bool]) -> None:
    url, cluster = url_and_cluster
    async with fanouts(url, 2, cluster=cluster) as (a, b):
        await recording(a)
        await recording(b)
        got: list[Any] = []
        arrived = asyncio.Event()

        async def inbox(entry: Any) -> None:
            got.append(entry)
            arrived.set()

        a.on_session_event(inbox)
        rid = a.id_base + 7  # what a session peer of worker A numbers its 7th request
        assert worker_of(rid) == a.worker and worker_of(7) is None and rid < 2**53
        assert await b.forward(worker_of(rid) or 0, "sess-1", b'{"jsonrpc":"2.0","id":1,"result":{}}')
        await asyncio.wait_for(arrived.wait(), 5)
        assert [(e.kind, e.value, e.data) for e in got] == [
            ("forward", "sess-1", b'{"jsonrpc":"2.0","id":1,"result":{}}')
        ]
        assert await b.alive(a.worker)
        gone = a.worker
        await a.aclose()
        assert not await b.alive(gone)
        assert not await b.forward(gone, "sess-1", b"{}")  # nobody waits there any more: refused, not queued


async def test_a_worker_never_takes_the_number_of_a_live_worker_when_redis_lost_the_counter(
    url_and_cluster: tuple[str, bool],
) -> None:
    # Redis restarted without persistence, or the counter was evicted (allkeys-lru): the live workers beat again
    # and keep their numbers, the next worker to start must not take one of them (their inboxes, request ids and
    # SSE stream numbers would be shared by two processes)
    url, cluster = url_and_cluster
    async with fanouts(url, 3, cluster=cluster) as (a, b, c):
        await recording(a)
        await recording(b)
        await a.conn.client.unlink(a._seq_key)  # what a restart without persistence loses
        await recording(c)
        assert c.worker not in (a.worker, b.worker)
        arrived = asyncio.Event()
        got: list[Any] = []

        async def inbox(entry: Any) -> None:
            got.append(entry)
            arrived.set()

        a.on_session_event(inbox)
        assert await c.forward(a.worker, "s", b"answer")  # A's inbox survived C's start
        await asyncio.wait_for(arrived.wait(), 5)
        assert [e.data for e in got] == [b"answer"]


async def test_session_messages_are_logged_for_whichever_worker_holds_the_stream(
    url_and_cluster: tuple[str, bool],
) -> None:
    url, cluster = url_and_cluster
    async with fanouts(url, 2, cluster=cluster) as (a, b):
        await recording(a)
        await recording(b)
        seen: list[Any] = []
        b.on_session_event(lambda e: _append(seen, e))
        before = b.position
        assert before is not None
        big = b"x" * 100_000
        pos = await a.post("sess-2", "direct", big)
        cancel = await a.post("sess-2", "cancel", b'{"method":"notifications/cancelled"}')
        assert position_order(before) < position_order(pos) < position_order(cancel)
        deadline = time.monotonic() + 5
        while len(seen) < 2:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        direct, cancelled = seen
        assert (direct.kind, direct.value, direct.position) == ("direct", "sess-2", pos)
        assert direct.data is None and await b.payload(direct) == big  # the bytes stay in the session's own key
        assert (cancelled.kind, cancelled.data) == ("cancel", b'{"method":"notifications/cancelled"}')
        entries = await b.read(before)  # any worker reads the log back from a position
        assert entries is not None and [e.position for e in entries] == [pos, cancel]
        with pytest.raises(ValueError):
            await a.post("sess-2", "cancel", b"y" * 5000)  # inline messages are bounded


async def _append(seen: list[Any], entry: Any) -> None:
    seen.append(entry)


async def test_a_worker_cut_off_past_the_log_bound_tells_its_clients_to_look_again(redis_url: str) -> None:  # noqa: F811
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy(port) as proxy:
        async with (
            fanouts(redis_url, 1, max_log=100) as (a,),
            fanouts(f"redis://127.0.0.1:{proxy.port}/0", 1, max_log=100) as (b,),
        ):
            b.conn.keys, b.log_key, b._seq_key = a.conn.keys, a.log_key, a._seq_key
            await cut_off_past_the_log_bound(a, b, proxy, 600, timeout=15)
            assert (await b.read(a.position or "0-0")) == []


async def test_publish_without_redis_tells_this_workers_clients_now_and_the_others_later(
    redis_url: str,  # noqa: F811
) -> None:
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy(port) as proxy:
        async with (
            fanouts(redis_url, 1) as (a,),
            fanouts(f"redis://127.0.0.1:{proxy.port}/0", 1, timeout=0.3) as (b,),
        ):
            b.conn.keys, b.log_key, b._seq_key = a.conn.keys, a.log_key, a._seq_key
            ra = await recording(a)
            rb = await recording(b)
            proxy.cut()
            started = time.monotonic()
            await b.publish("list_changed", "prompts")  # the log is unreachable: B's clients are told at once
            await b.publish("resource_updated", "mcpkit://late")
            assert time.monotonic() - started < 2.0
            assert rb.events == [("list_changed", "prompts", ""), ("resource_updated", "mcpkit://late", "")]
            assert "unavailable" in (await b.check() or "") or "lost" in (await b.check() or "")
            await asyncio.sleep(0.3)
            assert ra.events == []
            proxy.restore()
            await ra.until(2, timeout=15)  # the others get them when B reaches the log again, in order
            assert [(k, v) for k, v, _ in ra.events] == [
                ("list_changed", "prompts"),
                ("resource_updated", "mcpkit://late"),
            ]
            deadline = time.monotonic() + 10
            while await b.check() is not None:  # ready again by itself
                assert time.monotonic() < deadline
                await asyncio.sleep(0.1)
            await asyncio.sleep(0.3)
            assert len(rb.events) == 2  # and B's clients were not told twice


async def test_a_fanout_started_while_redis_is_down_starts_by_itself_when_it_is_back(
    redis_url: str,  # noqa: F811
) -> None:
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy(port) as proxy:
        proxy.cut()
        async with fanouts(f"redis://127.0.0.1:{proxy.port}/0", 1, timeout=0.3) as (b,):
            recorder = Recorder()
            b.bind(recorder)
            with pytest.raises(StoreUnavailable):
                await b.start()
            assert not b.running and await b.check() is not None
            proxy.restore()
            deadline = time.monotonic() + 15
            while not b.running:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert b.worker > 0
            # Started is not yet ready: the log reader opens its own blocking connection, which can time out once
            # more on a loaded machine (then it retries and the check says why meanwhile); ready comes by itself.
            while (why := await b.check()) is not None:
                assert time.monotonic() < deadline, why
                await asyncio.sleep(0.05)


async def test_a_stalled_redis_fails_fast_and_recovery_needs_nothing(redis_url: str) -> None:  # noqa: F811
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy(port) as proxy:
        conn = RedisConnection(f"redis://127.0.0.1:{proxy.port}/0", prefix=f"t{secrets.token_hex(4)}:", timeout=0.3)
        store = RedisSessionStore(conn)
        try:
            await store.save("s", {"v": 1}, 60)
            proxy.stall()  # Redis takes the connection and never answers
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="session store: Redis is unavailable"):
                await store.load("s")
            assert time.monotonic() - started < 1.5  # bounded: the socket timeout, not forever
            started = time.monotonic()
            with pytest.raises(StoreUnavailable, match="session store: Redis is unavailable"):
                await store.load("s")  # the breaker is open: no second wait
            assert time.monotonic() - started < 0.05
            proxy.restore()
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert await store.load("s") == {"v": 1}
                    break
                except StoreUnavailable:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.1)
            assert conn.available
        finally:
            await conn.aclose()


async def test_an_unreachable_redis_fails_at_once() -> None:
    from support.redis_server import _free_port

    store = RedisSessionStore(f"redis://127.0.0.1:{_free_port()}/0", timeout=0.5)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match=r"refused|Connect|connect"):
            await store.load("s")
        assert time.monotonic() - started < 1.0
    finally:
        await store.aclose()


async def test_a_stream_is_followed_by_another_worker_until_its_last_event(
    url_and_cluster: tuple[str, bool],
) -> None:
    url, cluster = url_and_cluster
    prefix = f"t{secrets.token_hex(4)}:"
    writer = RedisEventStore(url, prefix=prefix, cluster=cluster)
    reader = RedisEventStore(url, prefix=prefix, cluster=cluster)
    try:
        await writer.append("sid/5", 1, b"progress 1")
        got, ended = await reader.follow("sid/5", 0, timeout=0) or ([], True)
        assert (got, ended) == ([(1, b"progress 1")], False)

        async def write_later() -> None:
            await asyncio.sleep(0.3)
            await writer.append("sid/5", 2, b"progress 2")
            await writer.append_last("sid/5", 3, b"the answer")

        task = asyncio.create_task(write_later())
        events: list[tuple[int, bytes]] = []
        last = 1
        while True:
            followed = await reader.follow("sid/5", last, timeout=5)
            assert followed is not None
            new, ended = followed
            events += new
            if new:
                last = new[-1][0]
            if ended:
                break
        await task
        assert events == [(2, b"progress 2"), (3, b"the answer")]
        assert await reader.replay("sid/5", 0) == [(1, b"progress 1"), (2, b"progress 2"), (3, b"the answer")]
        assert await reader.follow("sid/5", 3, timeout=0.1) == ([], False)
        assert await reader.follow("gone/1", 0, timeout=0.1) is None
    finally:
        await writer.aclose()
        await reader.aclose()


async def test_a_streams_request_id_beyond_64_bits_is_kept_exactly(url_and_cluster: tuple[str, bool]) -> None:
    """A request id is any JSON integer: one beyond 64 bits (that orjson neither writes nor reads as an integer)
    is kept and given back digit for digit, so a resumed stream is still matched to its request."""
    url, cluster = url_and_cluster
    store = RedisEventStore(url, prefix=f"t{secrets.token_hex(4)}:", cluster=cluster, ttl=30)
    try:
        for n, rid in enumerate((2**64, -(2**63) - 1, 10**40)):
            await store.append_first(f"sid/{n}", 1, b"progress 1", rid)
            assert await store.request_of(f"sid/{n}") == rid
    finally:
        await store.aclose()


async def test_a_streams_request_id_is_kept_with_it_bounded_expiring_and_forgotten_with_the_session(
    url_and_cluster: tuple[str, bool],
) -> None:
    from mcpkit.stores import RequestEventStore
    from mcpkit.stores.redis.events import MAX_REQUEST_ID_BYTES

    url, cluster = url_and_cluster
    prefix = f"t{secrets.token_hex(4)}:"
    writer = RedisEventStore(url, prefix=prefix, cluster=cluster, ttl=30)
    reader = RedisEventStore(url, prefix=prefix, cluster=cluster)
    try:
        assert isinstance(writer, RequestEventStore)
        await writer.append_first("sid/5", 1, b"progress 1", 42)
        await writer.append_first("sid/6", 1, b"progress 1", "req-a")
        await writer.append_first("sid/7", 1, b"progress 1", "x" * MAX_REQUEST_ID_BYTES)  # too long: not kept
        await writer.append("sid/8", 1, b"progress 1")
        assert await reader.request_of("sid/5") == 42
        assert await reader.request_of("sid/6") == "req-a"
        assert await reader.request_of("sid/7") is None
        assert await reader.request_of("sid/8") is None
        assert await reader.replay("sid/5", 0) == [(1, b"progress 1")]  # (the event itself, as append keeps it)
        hash_key = writer.conn.keys.key("sid", "evr")
        assert 0 < await writer.conn.client.pttl(hash_key) <= 30_000
        await writer.forget("sid/")
        assert await reader.request_of("sid/5") is None
        assert not await writer.conn.client.exists(hash_key)
    finally:
        await writer.aclose()
        await reader.aclose()


async def test_a_sessions_streams_are_bounded_the_oldest_going_with_its_request_id(
    url_and_cluster: tuple[str, bool],
) -> None:
    # Every answer streamed as SSE (a tool reporting progress) is one Redis stream, about 4.7 KB, kept an hour: a
    # session calling such a tool without pause grew Redis without a bound but time. Its streams are capped; the one
    # written least recently goes (events and request id: a resume of it finds nothing), the others stay.
    url, cluster = url_and_cluster
    prefix = f"t{secrets.token_hex(4)}:"
    store = RedisEventStore(url, prefix=prefix, cluster=cluster, max_streams_per_session=3)
    try:
        for n in range(1, 6):
            await store.append_first(f"sid/{n}", 1, b"progress", n)
            await store.append_last(f"sid/{n}", 2, b"answer")
        await store.append("other/1", 1, b"another session's")
        assert await store.replay("sid/1", 0) is None and await store.replay("sid/2", 0) is None
        assert await store.request_of("sid/1") is None and await store.request_of("sid/2") is None
        for n in (3, 4, 5):
            assert await store.replay(f"sid/{n}", 0) == [(1, b"progress"), (2, b"answer")]
            assert await store.request_of(f"sid/{n}") == n
        assert await store.replay("other/1", 0) == [(1, b"another session's")]
        await store.append("sid/3", 3, b"a late event")  # (a stream still written to is kept before older ones)
        await store.append_first("sid/6", 1, b"progress", 6)
        assert await store.replay("sid/3", 0) is not None and await store.replay("sid/4", 0) is None
        await store.forget("sid/")  # every stream of the session goes, and its bookkeeping
        keys = store.conn.keys
        for key in (keys.key("sid", "ev", "3"), keys.key("sid", "ev", "6"), keys.key("sid", "evo")):
            assert not await store.conn.client.exists(key), key
    finally:
        await store.aclose()


async def test_a_sessions_stored_events_stay_within_its_byte_budget_the_oldest_streams_going_first(
    url_and_cluster: tuple[str, bool],
) -> None:
    # The count of streams alone let one session keep 1,000 streams of up to 1,000 events each, whatever their size
    # (large tool results streamed as SSE): Redis grew by gigabytes for one session. Past its byte budget the
    # streams it wrote least recently go first (as past the count), then the oldest events of the one written now
    # (never the event just kept); events trimmed by max_events_per_stream leave the count; another session's stay.
    url, cluster = url_and_cluster
    prefix = f"t{secrets.token_hex(4)}:"
    store = RedisEventStore(url, prefix=prefix, cluster=cluster, max_bytes_per_session=1000, max_events_per_stream=2)
    event = b"e" * 400
    try:
        await store.append("other/1", 1, event)
        for n in range(1, 4):
            await store.append_first(f"sid/{n}", 1, event, n)
        assert await store.replay("sid/1", 0) is None and await store.request_of("sid/1") is None
        assert await store.replay("sid/2", 0) == [(1, event)] and await store.replay("sid/3", 0) == [(1, event)]
        for seq in range(2, 12):  # (trimmed to 2 events by max_events_per_stream: 800 bytes counted, not 4,400)
            await store.append("sid/3", seq, event)
        assert await store.replay("sid/3", 9) == [(10, event), (11, event)]
        assert await store.replay("sid/2", 0) is None  # (sid/2 and two events of sid/3 > 1,000: sid/2 went)
        await store.append("sid/3", 12, b"b" * 2000)  # alone past the budget: its own older events go, not this one
        assert await store.replay("sid/3", 11) == [(12, b"b" * 2000)] and await store.replay("sid/3", 10) is None
        await store.append_first("sid/4", 1, event, 4)
        assert await store.replay("sid/3", 11) is None and await store.replay("sid/4", 0) == [(1, event)]
        assert await store.replay("other/1", 0) == [(1, event)]
        await store.forget("sid/")
        keys = store.conn.keys
        for key in (keys.key("sid", "ev", "4"), keys.key("sid", "evo"), keys.key("sid", "evb")):
            assert not await store.conn.client.exists(key), key
    finally:
        await store.aclose()


async def test_one_sessions_keys_share_a_cluster_slot(redis_cluster_url: str) -> None:  # noqa: F811
    from redis.asyncio.cluster import RedisCluster

    conn = RedisConnection(redis_cluster_url, cluster=True, prefix="slots:")
    try:
        assert isinstance(conn.client, RedisCluster)
        events = RedisEventStore(conn)
        sessions = RedisSessionStore(conn)
        sid = secrets.token_urlsafe(24)
        keys = [events.key(f"{sid}/0"), events.key(f"{sid}/17"), sessions.key(sid), conn.keys.key(sid, "out")]
        slots = {conn.client.keyslot(k) for k in keys}
        assert len(slots) == 1
        other = {conn.client.keyslot(sessions.key(secrets.token_urlsafe(24))) for _ in range(20)}
        assert len(other) > 1  # sessions spread over the cluster
        with pytest.raises(ValueError):
            RedisConnection(redis_cluster_url, cluster=True, prefix="bad{prefix}:")
    finally:
        await conn.aclose()


async def test_inboxes_and_session_messages_are_bounded_and_expire(redis_url: str) -> None:  # noqa: F811
    async with fanouts(redis_url, 2, max_inbox=100, max_messages_per_session=100, message_ttl=30) as (a, b):
        await recording(a)
        await recording(b)
        a._event_listeners.clear()  # (nobody reads A's inbox messages: only the bound keeps it small)
        for i in range(1000):
            assert await b.forward(a.worker, "s", f"answer {i}".encode())
            await b.post("s", "direct", f"message {i}".encode())
        client = a.conn.client
        inbox = a.conn.keys.worker(a.worker, "in")
        out = a.conn.keys.key("s", "out")
        # MAXLEN ~ trims whole stream nodes (100 entries each): "about" the bound, never the 1000 written
        assert await client.xlen(inbox) <= 200 and await client.xlen(out) <= 200
        assert 0 < await client.pttl(inbox) <= 30_000 and 0 < await client.pttl(out) <= 30_000
        assert await client.xlen(a.log_key) <= a.max_log + 100


async def test_the_outbox_of_events_waiting_for_the_log_is_bounded(redis_url: str) -> None:  # noqa: F811
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy(port) as proxy:
        async with (
            fanouts(redis_url, 1) as (a,),
            fanouts(f"redis://127.0.0.1:{proxy.port}/0", 1, timeout=0.3, max_unsent=3) as (b,),
        ):
            b.conn.keys, b.log_key, b._seq_key = a.conn.keys, a.log_key, a._seq_key
            await the_outbox_keeps_its_bound(a, b, proxy, timeout=15)


async def test_a_stalled_log_is_noticed_within_a_block_and_a_timeout(redis_url: str) -> None:  # noqa: F811
    from mcpkit.stores.redis import BLOCK

    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy(port) as proxy:
        async with fanouts(f"redis://127.0.0.1:{proxy.port}/0", 1, timeout=0.3) as (b,):
            await recording(b)
            assert await b.check() is None
            proxy.stall()
            started = time.monotonic()
            while b._reading:  # the blocking read gives up after BLOCK + timeout
                assert time.monotonic() - started < BLOCK + 0.3 + 1.0
                await asyncio.sleep(0.05)
            assert "lost Redis" in (await b.check() or "")


async def test_concurrent_session_touches_share_a_pipeline_and_each_gets_its_own(
    url_and_cluster: tuple[str, bool],
) -> None:
    url, cluster = url_and_cluster
    store = RedisSessionStore(url, prefix=f"t{secrets.token_hex(4)}:", cluster=cluster)
    try:
        for i in range(10):
            await store.save(f"s{i}", {"n": i}, 60)
        touched = await asyncio.gather(*(store.touch(f"s{i}", 30 if i % 2 else None) for i in range(12)))
        assert touched == [{"n": i} for i in range(10)] + [None, None]  # each its own record; unknown ones None
        client = store.redis
        assert 25_000 < await client.pttl(store.key("s1")) <= 30_000  # renewed to its own TTL
        assert await client.pttl(store.key("s0")) == -1  # (None: no expiry)
        assert await store.touch("s3", 60) == {"n": 3}  # a lone one too
    finally:
        await store.aclose()


async def test_concurrent_session_touches_all_fail_fast_without_redis() -> None:
    from support.redis_server import _free_port

    store = RedisSessionStore(f"redis://127.0.0.1:{_free_port()}/0", timeout=0.5)
    try:
        results = await asyncio.gather(*(store.touch(f"s{i}", 60) for i in range(8)), return_exceptions=True)
        assert all(isinstance(r, StoreUnavailable) for r in results), results
    finally:
        await store.aclose()


async def test_a_worker_that_stops_logs_what_waited_on_its_way_out(redis_url: str) -> None:  # noqa: F811
    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    with TcpProxy(port) as proxy:
        async with fanouts(redis_url, 1) as (a,):
            b = RedisFanout(f"redis://127.0.0.1:{proxy.port}/0", prefix=a.conn.prefix, timeout=0.3)
            ra = await recording(a)
            await recording(b)
            proxy.cut()
            await b.publish("list_changed", "tools")  # waits in B's outbox
            assert len(b._unsent) == 1
            proxy.restore()
            await b.aclose()  # stopped before its reader flushed: the last try logs it
            await ra.until(1)
            assert ra.events[0][:2] == ("list_changed", "tools")


def test_a_position_with_non_ascii_digits_orders_as_nothing() -> None:
    # what a client's Last-Event-ID ("g<position>") may carry: latin-1 superscripts pass str.isdigit(), not int()
    assert position_order("\xb2-1") == 0
    assert position_order("1-\xb9") == 0
    assert position_order("12-3") == (12 << 32) + 3
