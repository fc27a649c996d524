"""Faults of a deployment of several workers on Redis, each with its written behaviour (docs/guides/redis.md,
"Faults, and what a client sees"):

* a worker SIGKILLed while it holds a client's GET stream: the client resumes on another worker with Last-Event-ID
  and gets every event, once;
* Redis restarted (SIGTERM, as an operator would) with persistence (AOF): sessions, their subscriptions and the
  log survive; the workers go on by themselves;
* Redis restarted without persistence: every handshake-era session is a 404 on every worker, clients start new
  ones (mcpkit's client by itself), and notifications flow again;
* Redis stalled or unreachable (between the workers and Redis: a proxy that stops forwarding or resets): a request
  that needs Redis gets 503 with a clear error within the timeout, others go on (2026-07-28 requests, a session
  the worker holds), readiness says 503; everything recovers by itself.

Real worker processes (`mcpkit run tests/support/servers/scale_server.py -t http`), a real redis-server.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit import Client
from mcpkit.client.client import SessionExpired
from support.paths import SERVERS
from support.redis_server import PersistentRedis, RedisServer, redis_url, require_redis_server  # noqa: F401
from support.scale import ACCEPT_BOTH, Workers, next_message, open_session, rpc, sse_events
from support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.redis

SERVER = SERVERS / "scale_server.py"
N = 60


async def _post(http: httpx.AsyncClient, url: str, headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
    return await http.post(url, json=body, headers={**headers, "accept": ACCEPT_BOTH})


async def _subscribe(http: httpx.AsyncClient, url: str, headers: dict[str, str], n: int) -> None:
    for i in range(n):
        done = await _post(http, url, headers, rpc("resources/subscribe", {"uri": f"mcpkit://item/{i}"}, rid=100 + i))
        assert done.status_code == 200, done.text


@pytest.mark.req("A011", "A012")
async def test_a_worker_killed_mid_stream_loses_and_repeats_nothing(redis_url: str) -> None:  # noqa: F811
    with Workers(redis_url, 3, server=SERVER) as workers:
        holder, producer, rescuer = workers.urls
        async with httpx.AsyncClient(timeout=20) as http:
            headers = await open_session(http, producer)
            await _subscribe(http, producer, headers, N)
            received: list[tuple[str, str]] = []

            async def produce() -> None:
                async with Client(producer, mode="modern") as client:  # changes made on another worker
                    for i in range(N):
                        await client.call_tool("touch", {"uri": f"mcpkit://item/{i}"})
                        await asyncio.sleep(0.02)

            async with http.stream("GET", holder, headers={**headers, "accept": "text/event-stream"}) as stream:
                assert stream.status_code == 200
                events = sse_events(stream.aiter_lines())
                producing = asyncio.create_task(produce())
                while len(received) < 20:
                    event_id, message = await next_message(events)
                    received.append((str(event_id), message["params"]["uri"]))
                workers.kill(0)  # SIGKILL: no drain, the connection just breaks
                with pytest.raises((httpx.HTTPError, AssertionError, asyncio.TimeoutError)):
                    while True:  # what the dead worker had already written, then the break
                        event_id, message = await next_message(events, timeout=5)
                        received.append((str(event_id), message["params"]["uri"]))
            resume = {**headers, "accept": "text/event-stream", "last-event-id": received[-1][0]}
            async with http.stream("GET", rescuer, headers=resume) as stream:
                assert stream.status_code == 200
                events = sse_events(stream.aiter_lines())
                while len(received) < N:
                    event_id, message = await next_message(events, timeout=15)
                    received.append((str(event_id), message["params"]["uri"]))
            await producing
            await asyncio.sleep(0.3)
        assert [uri for _, uri in received] == [f"mcpkit://item/{i}" for i in range(N)]  # none lost, none twice
        assert len({event_id for event_id, _ in received}) == N


@pytest.mark.npm
async def test_a_typescript_client_resuming_a_call_whose_worker_died_gets_an_error_at_once(
    redis_url: str,  # noqa: F811
    node_bin: Path,
) -> None:
    """The TypeScript SDK client's call runs on worker A, which dies mid-call; the client resumes the call's SSE
    stream (Last-Event-ID) on worker B, which finds A gone and answers the call with -32603 ("retry") before ending
    the stream: the call fails at once instead of waiting out the SDK's 60 s timeout, and the session goes on."""
    import json

    import redis.asyncio as aioredis

    from support.paths import INTEROP

    with Workers(redis_url, 2) as workers, TcpProxy(workers.ports[0]) as proxy:  # (examples/everything.py)
        steps = [
            {
                "op": "callTool",
                "name": "slow",
                "arguments": {"steps": 600, "delay_ms": 100},
                "progress": True,
                "timeoutMs": 60_000,
            },
            {"op": "callTool", "name": "echo", "arguments": {"text": "after"}},
        ]
        client = await asyncio.create_subprocess_exec(
            str(node_bin),
            str(INTEROP / "ts_client.mjs"),
            "--http",
            f"http://127.0.0.1:{proxy.port}/mcp",
            "--script",
            json.dumps({"steps": steps}),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        prefix = workers.env["MCPKIT_REDIS_PREFIX"]
        redis = aioredis.from_url(redis_url)
        try:
            deadline = time.monotonic() + 30
            while not [key async for key in redis.scan_iter(match=f"{prefix}*:evr")]:  # the call's stream began
                assert time.monotonic() < deadline, "the call never streamed"
                await asyncio.sleep(0.1)
        finally:
            await redis.aclose()
        proxy.target = ("127.0.0.1", workers.ports[1])  # (new connections: the balancer now picks worker B)
        workers.kill(0)
        killed = time.monotonic()
        out, err = await asyncio.wait_for(client.communicate(), 90)
        waited = time.monotonic() - killed
    assert client.returncode == 0, (out.decode()[-2000:], err.decode()[-2000:])
    results = json.loads(out)["results"]
    assert results[0]["error"]["code"] == -32603 and "gone" in results[0]["error"]["message"], results[0]
    assert results[1]["content"][0]["text"] == "after"
    assert waited < 30, waited


async def test_sessions_survive_a_redis_restart_with_persistence(tmp_path: Path) -> None:
    redis = PersistentRedis(require_redis_server(), str(tmp_path))
    try:
        with Workers(redis.url, 2, server=SERVER) as workers:
            a, b = workers.urls
            async with httpx.AsyncClient(timeout=20) as http:
                headers = await open_session(http, a)
                await _subscribe(http, a, headers, 2)
                async with http.stream("GET", a, headers={**headers, "accept": "text/event-stream"}) as stream:
                    events = sse_events(stream.aiter_lines())
                    assert (await _post(http, b, headers, _touch(0))).status_code == 200
                    last_id, first = await next_message(events)
                assert first["params"]["uri"] == "mcpkit://item/0"
                redis.restart()  # SIGTERM, then the same port and append-only file
                deadline = time.monotonic() + 20
                for url in (a, b):  # the workers reconnect by themselves
                    while (await http.get(url.rsplit("/", 1)[0] + "/readyz")).status_code != 200:
                        assert time.monotonic() < deadline, "not ready after the restart"
                        await asyncio.sleep(0.2)
                touched = await _post(http, b, headers, _touch(1))
                assert touched.status_code == 200, touched.text
                workers.restart(1)  # a worker that never held the session: it exists only in Redis now
                pong = await _post(http, b, headers, rpc("ping", rid=7))
                assert pong.status_code == 200, pong.text
                resume = {**headers, "accept": "text/event-stream", "last-event-id": str(last_id)}
                async with http.stream("GET", b, headers=resume) as stream:
                    assert stream.status_code == 200
                    _, second = await next_message(sse_events(stream.aiter_lines()))
                assert second["params"]["uri"] == "mcpkit://item/1"  # the log and the subscriptions survived too
    finally:
        redis.stop()


async def test_a_redis_restart_without_persistence_ends_the_sessions_and_clients_start_new_ones() -> None:
    redis = RedisServer(require_redis_server())
    try:
        with Workers(redis.url, 2, server=SERVER) as workers:
            a, b = workers.urls
            async with (
                httpx.AsyncClient(timeout=20) as http,
                Client(a, mode="handshake") as client,
                Client(b, mode="modern") as watcher,
                watcher.watch(resource_uris=["mcpkit://item/0"]) as changes,
            ):
                headers = await open_session(http, a)
                assert (await client.call_tool("whoami")).structured is not None
                port = redis.port
                redis.stop()
                redis = RedisServer(require_redis_server(), port)  # empty: every record is gone
                deadline = time.monotonic() + 20
                for url in (a, b):  # the session is gone everywhere: 404, the spec's "start a new session"
                    while (await _post(http, url, headers, rpc("ping", rid=9))).status_code != 404:
                        assert time.monotonic() < deadline, "the lost session is still served"
                        await asyncio.sleep(0.2)
                for _ in range(3):  # mcpkit's client starts a new session by itself (a tools/call is not repeated)
                    try:
                        assert (await client.call_tool("whoami")).structured is not None
                        break
                    except SessionExpired:
                        pass
                else:
                    raise AssertionError("the client did not recover")
                assert (await client.ping()) >= 0
                async with Client(b, mode="handshake") as fresh:  # new sessions are recorded again
                    await fresh.call_tool("touch", {"uri": "mcpkit://item/0"})
                method, _ = await asyncio.wait_for(anext(aiter(changes)), 10)  # (the log works again)
                assert method in ("notifications/resources/updated", "notifications/resources/list_changed")
    finally:
        redis.stop()


def _touch(i: int) -> dict[str, Any]:
    return rpc("tools/call", {"name": "touch", "arguments": {"uri": f"mcpkit://item/{i}"}}, rid=50 + i)


@pytest.mark.parametrize("fault", ["stalled", "unreachable"])
async def test_without_redis_requests_that_need_it_fail_fast_others_go_on_and_all_recovers(fault: str) -> None:
    redis = RedisServer(require_redis_server())
    try:
        with TcpProxy(redis.port) as proxy:
            via_proxy = f"redis://127.0.0.1:{proxy.port}/0"
            with Workers(via_proxy, 2, server=SERVER, env={"MCPKIT_REDIS_TIMEOUT": "0.5"}) as workers:
                a, b = workers.urls
                base_b = b.rsplit("/", 1)[0]
                async with httpx.AsyncClient(timeout=20) as http:
                    held = await open_session(http, a)  # a session worker A holds
                    stranger = await open_session(http, a)  # a session worker B has never seen
                    assert (await _post(http, b, held, rpc("ping", rid=1))).status_code == 200  # B holds `held` too
                    assert (await http.get(base_b + "/readyz")).status_code == 200
                    proxy.stall() if fault == "stalled" else proxy.cut()
                    await asyncio.sleep(0.2)

                    started = time.monotonic()
                    refused = await _post(http, b, stranger, rpc("ping", rid=2))  # needs Redis: restore
                    took = time.monotonic() - started
                    assert refused.status_code == 503 and refused.headers["retry-after"] == "1", refused.text
                    assert "Redis is unavailable" in refused.json()["error"]["message"]
                    assert took < 2.5  # bounded: ~timeout (0.5 s), not a hang
                    started = time.monotonic()
                    again = await _post(http, b, stranger, rpc("ping", rid=3))
                    assert again.status_code == 503 and time.monotonic() - started < 2.5

                    served = await _post(http, b, held, rpc("ping", rid=4))  # B's own copy: served
                    assert served.status_code == 200
                    async with Client(b, mode="modern") as client:  # 2026-07-28: no Redis needed
                        started = time.monotonic()
                        assert (await client.call_tool("whoami", {})).structured is not None
                        assert time.monotonic() - started < 2.5
                    ready = await http.get(base_b + "/readyz")
                    assert ready.status_code == 503 and ready.json()["status"] == "unavailable"

                    proxy.restore()
                    deadline = time.monotonic() + 20
                    while (await _post(http, b, stranger, rpc("ping", rid=5))).status_code != 200:
                        assert time.monotonic() < deadline, "did not recover"
                        await asyncio.sleep(0.2)
                    while (await http.get(base_b + "/readyz")).status_code != 200:
                        assert time.monotonic() < deadline, "not ready again"
                        await asyncio.sleep(0.2)
                    # and notifications flow between the workers again
                    await _subscribe(http, a, stranger, 1)
                    async with http.stream("GET", b, headers={**stranger, "accept": "text/event-stream"}) as stream:
                        events = sse_events(stream.aiter_lines())
                        assert (await _post(http, a, stranger, _touch(0))).status_code == 200
                        _, note = await next_message(events)
                    assert note["params"]["uri"] == "mcpkit://item/0"
    finally:
        redis.stop()
