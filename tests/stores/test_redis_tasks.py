"""Tasks on a shared Redis: a task started on one worker is polled, answered, cancelled and read on another, and
its result outlives the worker that ran it (a real redis-server; worker processes behind real HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from mcpkit import Client
from mcpkit.protocol.errors import MCPError, TaskLimitReached
from mcpkit.stores.redis import RedisTaskStore
from mcpkit.tasks import TaskEngine
from mcpkit.tasks.model import STOP_MARGIN_MS, new_record, now_ms
from support.core import RawPeer
from support.paths import SERVERS
from support.procs import stop, wait_listening
from support.redis_server import _free_port, redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)
from support.tasks import LEGACY, Probe, call, make_app, raw

pytestmark = pytest.mark.redis

WORKER = SERVERS / "tasks_worker.py"


def yes(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"ok": True}}


@contextlib.contextmanager
def workers(url: str, prefix: str, **env: str) -> Iterator[dict[str, tuple[str, subprocess.Popen[str]]]]:
    """Two worker processes of tests/support/servers/tasks_worker.py on one redis-server."""
    procs: dict[str, tuple[str, subprocess.Popen[str]]] = {}
    try:
        for name in ("A", "B"):
            port = _free_port()
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "mcpkit.cli.main",
                    "run",
                    str(WORKER),
                    "--transport",
                    "http",
                    "--port",
                    str(port),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "REDIS_URL": url, "TASKS_PREFIX": prefix, "WORKER_NAME": name, **env},
            )
            procs[name] = (f"http://127.0.0.1:{port}/mcp", proc)
            wait_listening(port, proc, timeout=30)
        yield procs
    finally:
        for _, proc in procs.values():
            stop(proc)
            if proc.stderr is not None:
                proc.stderr.close()


async def test_a_task_started_on_one_worker_is_answered_cancelled_and_read_on_another(redis_url: str) -> None:  # noqa: F811
    with workers(redis_url, "xw1:") as procs:
        url_a, proc_a = procs["A"]
        url_b, _ = procs["B"]
        async with (
            Client(url_a, protocol_version="2026-07-28", elicitation_handler=yes) as a,
            Client(url_b, protocol_version="2026-07-28", elicitation_handler=yes) as b,
        ):
            # input: asked on A, answered through B (tasks/update there), resumed on A, its result read on B
            started = await a.call_tool_as_task("confirm", {"what": "x.txt"})
            followed = await b.task(started.task_id)
            result = await asyncio.wait_for(followed.result(), 15)
            assert result.text == "deleted x.txt on A"
            # cancelled through B: the work on A stops
            long = await a.call_tool_as_task("hold")
            await asyncio.sleep(0.2)
            await (await b.task(long.task_id)).cancel()
            for _ in range(100):
                if (await long.status()).status == "cancelled":
                    break
                await asyncio.sleep(0.05)
            assert long.task.status == "cancelled"
            # a result outlives the worker that ran it
            short = await a.call_tool_as_task("slow", {"seconds": 0.2})
            for _ in range(100):
                if (await short.status()).terminal:
                    break
                await asyncio.sleep(0.05)
            task_id = short.task_id
        stop(proc_a)
        assert proc_a.stderr is not None and "hold cancelled on A" in proc_a.stderr.read()
        async with Client(url_b, protocol_version="2026-07-28") as b:
            result = await (await b.task(task_id)).result()
            assert result.text == "slept 0.2 on A"


async def test_a_task_whose_worker_was_killed_is_read_failed_on_another_worker(redis_url: str) -> None:  # noqa: F811
    """A worker killed mid-task (SIGKILL, the OOM killer) records nothing: its tasks must not read `working`, and
    block `tasks/result`, and hold a place under the caps, until their time to live (an hour by default)."""
    with workers(redis_url, "xw-killed:", TASKS_RUNNER_TIMEOUT="1.5") as procs:
        url_a, proc_a = procs["A"]
        url_b, _ = procs["B"]
        async with Client(url_a, protocol_version="2026-07-28") as a:
            started = await a.call_tool_as_task("slow", {"seconds": 600})
        proc_a.kill()
        proc_a.wait(timeout=10)
        async with Client(url_b, protocol_version="2026-07-28") as b:
            followed = await b.task(started.task_id)
            with pytest.raises(MCPError, match="the worker running the task is gone"):
                await asyncio.wait_for(followed.result(), 20)
            assert (await followed.status()).status == "failed"
            quick = await b.call_tool_as_task("slow", {"seconds": 0.1})  # (a worker alive is not taken for gone)
            assert (await asyncio.wait_for(quick.result(), 20)).text == "slept 0.1 on B"


@contextlib.asynccontextmanager
async def two_apps(url: str, prefix: str, **limits: Any) -> AsyncIterator[tuple[Any, Any, Probe]]:
    """Two apps in this process sharing one Redis task store (each with its own connection): two workers."""
    probe = Probe()
    stores = [RedisTaskStore(url, prefix=prefix), RedisTaskStore(url, prefix=prefix)]
    apps = [make_app(probe, engine=TaskEngine(store, **limits))[0] for store in stores]
    try:
        yield apps[0], apps[1], probe
    finally:
        for app in apps:
            await app.tasks.engine.aclose()


async def test_2025_tasks_result_on_another_worker_forwards_the_input_request_and_resumes_the_task(
    redis_url: str,  # noqa: F811
) -> None:
    """2025-11-25 across workers (one principal): created on A, its elicitation delivered through tasks/result on
    B, the answer resumes the task on A, B answers tasks/result with the outcome."""
    async with two_apps(redis_url, "xw2:") as (app_a, app_b, _), raw(app_a, "alice") as a, raw(app_b, "alice") as b:
        await a.initialize(LEGACY, {"elicitation": {"form": {}}})
        await b.initialize(LEGACY, {"elicitation": {"form": {}}})
        created = await call(a, 1, "tools/call", {"name": "confirm", "arguments": {"what": "y"}, "task": {}})
        task_id = created["result"]["task"]["taskId"]
        await _until(b, task_id, "input_required")
        await b.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}})
        request = await b.recv()
        assert request["method"] == "elicitation/create"
        await b.send({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"ok": True}}})
        result, _ = await b.recv_until(lambda m: m.get("id") == 2, timeout=10)
        assert result["result"]["content"][0]["text"] == "deleted y"
        listing = await call(b, 3, "tasks/list")
        assert task_id in [t["taskId"] for t in listing["result"]["tasks"]]


async def test_the_caps_on_tasks_in_progress_hold_across_workers(redis_url: str) -> None:  # noqa: F811
    async with (
        two_apps(redis_url, "xw3:", max_tasks_per_principal=2) as (app_a, app_b, probe),
        raw(app_a, "bob") as a,
        raw(app_b, "bob") as b,
    ):
        await a.initialize(LEGACY)
        await b.initialize(LEGACY)
        for i, peer in enumerate((a, b)):
            ok = await call(peer, i, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
            assert ok["result"]["task"]["status"] == "working"
        refused = await call(b, 9, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        assert refused["error"]["code"] == -32600
        probe.release.set()


async def test_a_store_change_wakes_the_other_workers_waiters(redis_url: str) -> None:  # noqa: F811
    """The change feed: an answer written by one worker's store reaches a task waiting on another at once (not
    at the next poll)."""
    one, two = RedisTaskStore(redis_url, prefix="xw4:"), RedisTaskStore(redis_url, prefix="xw4:")
    engine_a, engine_b = TaskEngine(one), TaskEngine(two)
    try:
        record = await engine_a.create(owner=None, method="tools/call", name="t")
        control = engine_a.control()

        async def work() -> dict[str, Any]:
            answer = await control.ask("elicitation/create", {"message": "?"})
            return {"content": [{"type": "text", "text": str(answer)}]}

        engine_a.adopt(record, control, asyncio.ensure_future(work()))
        for _ in range(100):
            seen = await engine_b.get(record["id"], None)
            if seen is not None and seen["requests"]:
                break
            await asyncio.sleep(0.02)
        assert seen is not None and list(seen["requests"]) == ["elicitation-1"]
        loop = asyncio.get_running_loop()
        start = loop.time()
        await engine_b.answer(record["id"], {"elicitation-1": {"result": {"action": "accept"}}})
        while (await engine_b.get(record["id"], None) or {}).get("status") != "completed":
            await asyncio.sleep(0.01)
        assert loop.time() - start < 1.0  # woken by the change feed, well before the fallback poll (2 s)
    finally:
        await engine_a.aclose()
        await engine_b.aclose()


async def test_records_expire_in_redis_at_their_ttl(redis_url: str) -> None:  # noqa: F811
    """A finished task's record goes at the end of its time to live; one still in progress STOP_MARGIN_MS later
    (the time its engine has to record it stopped: a task whose worker died is gone then)."""
    import redis.asyncio as redis

    store = RedisTaskStore(redis_url, prefix="xw5:")
    client = redis.from_url(redis_url)
    try:
        record = new_record(owner="o", method="tools/call", name="t", ttl_ms=300, poll_ms=100)
        await store.create(record, max_live=10, max_live_per_owner=10)
        running = new_record(owner="o", method="tools/call", name="t", ttl_ms=300, poll_ms=100)
        await store.create(running, max_live=10, max_live_per_owner=10)
        await store.update(record["id"], lambda r: r.update(status="completed", result={}) is None)
        assert await store.get(record["id"]) is not None
        assert 300 < await client.pttl(f"xw5:{{{running['id']}}}:task") <= 300 + STOP_MARGIN_MS
        await asyncio.sleep(0.5)
        assert await store.get(record["id"]) is None
    finally:
        await client.aclose()
        await store.aclose()


async def test_a_task_stopped_at_its_ttl_is_read_failed_on_another_worker_for_the_grace_period(
    redis_url: str,  # noqa: F811
) -> None:
    one, two = RedisTaskStore(redis_url, prefix="xw8:"), RedisTaskStore(redis_url, prefix="xw8:")
    engine_a = TaskEngine(one, default_ttl_ms=1000, max_ttl_ms=1000, overrun_grace_ms=3000)
    engine_b = TaskEngine(two)
    try:
        record = await engine_a.create(owner="p:bob", method="tools/call", name="hold")
        engine_a.adopt(record, engine_a.control(), asyncio.ensure_future(asyncio.sleep(3600)))
        seen = None
        for _ in range(100):  # (stopped at 1 s)
            seen = await engine_b.get(record["id"], "p:bob")
            if seen is None or seen["status"] == "failed":
                break
            await asyncio.sleep(0.05)
        assert seen is not None and seen["status"] == "failed" and "time to live" in seen["error"]["message"]
        # stopped at its ttl, and its new ttl covers the grace, 3 s from the stop (measured on the record: the time
        # this loop took to see it, long on a loaded machine, is not the engine's)
        assert seen["updated"] >= seen["created"] + 1000
        assert seen["created"] + seen["ttl"] == seen["updated"] + 3000, seen
        assert [r["id"] for r in await engine_b.list("p:bob", None, 10)] == [record["id"]]  # listed as long
        await asyncio.sleep((seen["created"] + seen["ttl"] - now_ms()) / 1000)
        # bounded: gone at that ttl (Redis counts it from when the stop was written, a moment later under load)
        deadline = asyncio.get_running_loop().time() + 2
        while (left := await engine_b.get(record["id"], "p:bob")) is not None:
            assert asyncio.get_running_loop().time() < deadline, left
            await asyncio.sleep(0.05)
    finally:
        await engine_a.aclose()
        await engine_b.aclose()


async def test_nothing_in_redis_keeps_a_task_past_its_ttl_but_the_capped_change_feed(redis_url: str) -> None:  # noqa: F811
    """Every task's id leaves Redis with its record (but for the change feed, capped at ~10,000 entries): the
    per-owner keys (listing index, tasks kept, their sizes) expire with the last record they list, anonymous tasks'
    (a 2026-07-28 caller without a principal, a stateless endpoint's) too. The index used to be kept 30 days after
    each creation, so a busy anonymous server grew it by every task for a month."""
    import redis.asyncio as redis

    store = RedisTaskStore(redis_url, prefix="xw7:")
    client = redis.from_url(redis_url)
    try:
        ids = []
        for owner in (None, None, "s:session-1", "p:alice"):
            record = new_record(owner=owner, method="tools/call", name="t", ttl_ms=300, poll_ms=100)
            await store.create(record, max_live=10, max_live_per_owner=10)
            await store.update(record["id"], lambda r: r.update(status="completed", result={}) is None)
            ids.append(record["id"])
        assert [r["id"] for r in await store.list("p:alice", None, 10)] == ids[3:]
        await asyncio.sleep(0.6)
        left: dict[str, list[bytes]] = {}
        async for key in client.scan_iter(match="xw7:*"):
            kind = (await client.type(key)).decode()
            if kind == "zset":
                left[key.decode()] = await client.zrange(key, 0, -1)
            elif kind == "hash":
                left[key.decode()] = list(await client.hkeys(key))
            elif kind != "stream":  # (the change feed)
                left[key.decode()] = [await client.get(key) or b""]
        # (and this live worker's runner mark, one per worker: it expires runner_timeout after the worker stops)
        assert 0 < await client.pttl(f"xw7:{{tasks}}:runner:{store.runner}") <= 10_000
        left.pop(f"xw7:{{tasks}}:runner:{store.runner}")
        assert left == {}
    finally:
        await client.aclose()
        await store.aclose()


async def _until(peer: RawPeer, task_id: str, status: str) -> None:
    for i in range(200):
        got = await call(peer, f"w{i}", "tasks/get", {"taskId": task_id})
        if got["result"]["status"] == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"task never became {status}")


async def test_a_handshake_session_task_without_a_principal_is_found_on_the_worker_the_session_moved_to(
    redis_url: str,  # noqa: F811
) -> None:
    """2025-11-25 over Streamable HTTP, no authentication: a task belongs to its session, and a session restored
    from the shared session store on another worker is the same session there (its binding comes from its id), so
    tasks/get and tasks/result on worker B reach the task worker A created."""
    import httpx

    from mcpkit.stores.redis import RedisSessionStore
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    probe = Probe()
    apps = [make_app(probe, engine=TaskEngine(RedisTaskStore(redis_url, prefix="xw6:")))[0] for _ in range(2)]
    endpoints = [create_app(app, session_store=RedisSessionStore(redis_url, prefix="xw6:")) for app in apps]
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    def body(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}

    try:
        async with serve_asgi(endpoints[0]) as port_a, serve_asgi(endpoints[1]) as port_b, httpx.AsyncClient() as http:
            a, b = f"http://127.0.0.1:{port_a}/mcp", f"http://127.0.0.1:{port_b}/mcp"
            init = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
            r = await http.post(a, json=body(1, "initialize", init), headers=headers)
            session = {**headers, "Mcp-Session-Id": r.headers["mcp-session-id"], "MCP-Protocol-Version": LEGACY}
            await http.post(a, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
            call_params = {"name": "slow", "arguments": {"seconds": 0.2}, "task": {}}
            created = (await http.post(a, json=body(2, "tools/call", call_params), headers=session)).json()
            task_id = created["result"]["task"]["taskId"]
            got = (await http.post(b, json=body(3, "tasks/get", {"taskId": task_id}), headers=session)).json()
            assert got["result"]["taskId"] == task_id
            result = await http.post(b, json=body(4, "tasks/result", {"taskId": task_id}), headers=session)
            assert "slept 0.2" in result.text
    finally:
        for app in apps:
            await app.tasks.engine.aclose()


async def test_the_task_store_works_on_a_redis_cluster(redis_cluster_url: str) -> None:  # noqa: F811
    """Redis Cluster: the caps' keys share one slot ({tasks}), each record its own; a change on one store wakes a
    task waiting on another; list and expiry as on one Redis."""
    one = RedisTaskStore(redis_cluster_url, prefix="xc1:", cluster=True)
    two = RedisTaskStore(redis_cluster_url, prefix="xc1:", cluster=True)
    engine_a, engine_b = TaskEngine(one, max_tasks_per_principal=2), TaskEngine(two, max_tasks_per_principal=2)
    try:
        record = await engine_a.create(owner="p:carol", method="tools/call", name="t")
        await engine_a.create(owner="p:carol", method="tools/call", name="t")
        with pytest.raises(TaskLimitReached):
            await engine_b.create(owner="p:carol", method="tools/call", name="t")
        control = engine_a.control()

        async def work() -> dict[str, Any]:
            answer = await control.ask("elicitation/create", {"message": "?"})
            return {"content": [{"type": "text", "text": answer["action"]}]}

        engine_a.adopt(record, control, asyncio.ensure_future(work()))
        for _ in range(200):
            seen = await engine_b.get(record["id"], "p:carol")
            if seen is not None and seen["requests"]:
                break
            await asyncio.sleep(0.02)
        await engine_b.answer(record["id"], {"elicitation-1": {"result": {"action": "accept"}}})
        for _ in range(200):
            done = await engine_b.get(record["id"], "p:carol")
            if done is not None and done["status"] == "completed":
                break
            await asyncio.sleep(0.02)
        assert done is not None and done["result"]["content"][0]["text"] == "accept"
        listed = await engine_b.list("p:carol", None, 10)
        assert record["id"] in [r["id"] for r in listed]
    finally:
        await engine_a.aclose()
        await engine_b.aclose()


async def test_a_2025_cancel_racing_the_tasks_completion_never_answers_a_finished_task(
    redis_url: str,  # noqa: F811
) -> None:
    """tasks/cancel on a shared store reads the task, then marks it cancelled: a task that completes between the
    two must get -32602 (the spec: a terminal task's cancel is rejected; a successful cancel answers the task
    cancelled), never a success answer whose task says completed. Each cancel is sent as the tool ends."""
    async with two_apps(redis_url, "xw-race:") as (app, _, _), raw(app, "carol") as peer:
        await peer.initialize(LEGACY)
        answers: list[str] = []
        for i in range(40):
            created = await call(
                peer, f"c{i}", "tools/call", {"name": "slow", "arguments": {"seconds": 0.01, "steps": 1}, "task": {}}
            )
            task_id = created["result"]["task"]["taskId"]
            await asyncio.sleep(0.008 + (i % 5) * 0.001)
            reply = await call(peer, f"x{i}", "tasks/cancel", {"taskId": task_id})
            after = (await call(peer, f"g{i}", "tasks/get", {"taskId": task_id}))["result"]["status"]
            if "error" in reply:
                assert reply["error"]["code"] == -32602 and after == "completed", (reply, after)
                answers.append("rejected")
            else:
                assert reply["result"]["status"] == after == "cancelled", (reply["result"]["status"], after)
                answers.append("cancelled")
        assert len(answers) == 40


async def _task_records(url: str, prefix: str) -> int:
    import redis.asyncio as redis

    client = redis.from_url(url)
    try:
        return len([key async for key in client.scan_iter(match=f"{prefix}{{*}}:task", count=1000)])
    finally:
        await client.aclose()


async def test_one_callers_finished_tasks_in_redis_are_bounded_and_never_push_out_another_callers(
    redis_url: str,  # noqa: F811
) -> None:
    """Two clients over real HTTP on an app keeping tasks in Redis, each its own handshake session (its own owner),
    each asking for a 24 h TTL: the flooder's instant tasks stay within its per-caller bound (its oldest result
    goes, read as unknown), the other client's result stays. Redis used to keep every finished task until its TTL,
    whoever made it: a caller filled Redis at ~2 KB (up to 4 MiB) a task, for a day."""
    from support.mcp_http import running

    store = RedisTaskStore(redis_url, prefix="xw-kept:", max_records_per_owner=20)
    app, _ = make_app(engine=TaskEngine(store))
    day = 86_400_000
    try:
        async with running(app) as (base, _), Client(base + "/mcp", protocol_version=LEGACY) as victim:
            kept = await victim.call_tool_as_task("big", {"size": 1000}, ttl=day)
            assert (await kept.result(timeout=10)).text == "x" * 1000
            async with Client(base + "/mcp", protocol_version=LEGACY) as flooder:
                first = await flooder.call_tool_as_task("big", {"size": 1000}, ttl=day)
                await first.result(timeout=10)
                for _ in range(60):
                    await (await flooder.call_tool_as_task("big", {"size": 1000}, ttl=day)).result(timeout=10)
                with pytest.raises(MCPError, match="Task not found"):
                    await (await flooder.task(first.task_id)).result(timeout=10)
            assert (await (await victim.task(kept.task_id)).result(timeout=10)).text == "x" * 1000
            assert await _task_records(redis_url, "xw-kept:") == 21
    finally:
        await app.tasks.engine.aclose()


async def _finished(store: RedisTaskStore, owner: str | None, size: int) -> str:
    """A task of ``owner`` created in ``store`` (24 h TTL) and completed with a result of ``size`` characters of
    text; its id."""
    record = new_record(owner=owner, method="tools/call", name="t", ttl_ms=86_400_000, poll_ms=100)
    await store.create(record, max_live=100, max_live_per_owner=100)
    result = {"content": [{"type": "text", "text": "r" * size}]}
    await store.update(record["id"], lambda r: r.update(status="completed", result=result) is None)
    return record["id"]


async def test_redis_keeps_a_callers_results_within_its_byte_budget_and_counts_anonymous_callers_together(
    redis_url: str,  # noqa: F811
) -> None:
    """max_bytes_per_owner: a caller's large results evict its own oldest finished ones (their records deleted from
    Redis), the one just ended stays even alone past the budget; the callers nothing identifies share one count;
    past max_records_per_owner with none finished a new task is refused."""
    import redis.asyncio as redis

    store = RedisTaskStore(redis_url, prefix="xw-bytes:", max_records_per_owner=5, max_bytes_per_owner=60_000)
    client = redis.from_url(redis_url)

    try:
        bobs = await _finished(store, "p:bob", 20_000)
        alices = [await _finished(store, "p:alice", 20_000) for _ in range(4)]
        assert [await store.get(t) is not None for t in alices] == [False, False, True, True]  # 2 x 20 kB fit
        assert await client.exists(f"xw-bytes:{{{alices[0]}}}:task") == 0  # (deleted, not left to its ttl)
        huge = await _finished(store, "p:alice", 100_000)
        assert await store.get(huge) is not None and all([await store.get(t) is None for t in alices])
        assert await store.get(bobs) is not None
        anonymous = [await _finished(store, None, 10) for _ in range(8)]
        assert [await store.get(t) is not None for t in anonymous] == [False] * 3 + [True] * 5
        assert await store.list(None, None, 10) == []  # (indexed for the bound, listed to nobody)
        for _ in range(5):
            running = new_record(owner="s:busy", method="tools/call", name="t", ttl_ms=60_000, poll_ms=100)
            await store.create(running, max_live=100, max_live_per_owner=100)
        with pytest.raises(TaskLimitReached, match="max_records_per_owner"):
            await store.create(running | {"id": "z" * 32}, max_live=100, max_live_per_owner=100)
        await store.delete(running["id"])  # (a deleted task frees its place)
        await store.create(running | {"id": "y" * 32}, max_live=100, max_live_per_owner=100)
    finally:
        await client.aclose()
        await store.aclose()


async def test_a_client_opening_session_after_session_cannot_grow_redis_past_the_stores_total(
    redis_url: str,  # noqa: F811
) -> None:
    """An unauthenticated client on a stateful endpoint gets a new owner with every handshake session, and the tasks
    of ended sessions are kept to their TTL: session after session of instant tasks (24 h TTL) stays within the
    store's total (max_records), the globally oldest finished results going first, the newest kept. Redis used to
    keep 1,000 records (32 MiB) per session ever opened, for a day."""
    from support.mcp_http import running

    store = RedisTaskStore(redis_url, prefix="xw-total:", max_records=30, max_records_per_owner=20)
    app, _ = make_app(engine=TaskEngine(store))
    day = 86_400_000
    try:
        async with running(app) as (base, _):
            firsts: list[str] = []
            for _ in range(4):
                async with Client(base + "/mcp", protocol_version=LEGACY) as churner:
                    for i in range(15):
                        handle = await churner.call_tool_as_task("big", {"size": 1000}, ttl=day)
                        await handle.result(timeout=10)
                        if i == 0:
                            firsts.append(handle.task_id)
                    last = handle
                    assert (await (await churner.task(last.task_id)).result(timeout=10)).text == "x" * 1000
                assert await _task_records(redis_url, "xw-total:") <= 30
            assert await store.get(firsts[0]) is None and await store.get(last.task_id) is not None
    finally:
        await app.tasks.engine.aclose()


async def test_redis_keeps_all_callers_results_within_the_stores_byte_total_and_refuses_when_none_finished(
    redis_url: str,  # noqa: F811
) -> None:
    """max_bytes: past the store's total the globally oldest finished records go (deleted from Redis, whoever
    made them; never the one that just ended); at max_records with none finished a new task is refused with the
    error of the per-caller bound; a task that ends frees the place."""
    import redis.asyncio as redis

    store = RedisTaskStore(redis_url, prefix="xw-gbytes:", max_records=4, max_bytes=70_000)
    client = redis.from_url(redis_url)

    try:
        ids = [await _finished(store, f"s:session-{i}", 20_000) for i in range(5)]
        assert [await store.get(t) is not None for t in ids] == [False, False, True, True, True]  # 3 x 20 kB fit
        assert await client.exists(f"xw-gbytes:{{{ids[0]}}}:task") == 0  # (deleted, not left to its ttl)
        huge = await _finished(store, "s:another", 100_000)  # (alone past the total: kept, every other one goes)
        assert await store.get(huge) is not None and all([await store.get(t) is None for t in ids])
        busy = []
        for i in range(4):
            running = new_record(owner=f"s:busy-{i}", method="tools/call", name="t", ttl_ms=60_000, poll_ms=100)
            await store.create(running, max_live=100, max_live_per_owner=100)
            busy.append(running)
        assert await store.get(huge) is None  # (the one finished record went for the fourth task in progress)
        extra = new_record(owner="s:late", method="tools/call", name="t", ttl_ms=60_000, poll_ms=100)
        with pytest.raises(TaskLimitReached, match="max_records"):
            await store.create(extra, max_live=100, max_live_per_owner=100)
        await store.update(busy[0]["id"], lambda r: r.update(status="completed", result={}) is None)
        await store.create(extra, max_live=100, max_live_per_owner=100)  # (the finished one makes room)
        assert await store.get(busy[0]["id"]) is None and await store.get(extra["id"]) is not None
    finally:
        await client.aclose()
        await store.aclose()


async def test_two_tasks_result_on_two_workers_ask_the_client_one_question_once(redis_url: str) -> None:  # noqa: F811
    """Two 2025-11-25 tasks/result on one input_required task, on two workers sharing Redis (a client that retried
    on another worker after its stream dropped): the newer one asks, the copy the older one sent is withdrawn
    (notifications/cancelled), as on one worker, and both get the task's result. Each worker used to keep its own
    table of what it was asking, so both prompted the user for the one question."""
    async with two_apps(redis_url, "xw-ask:") as (app_a, app_b, _), raw(app_a, "alice") as a, raw(app_b, "alice") as b:
        await a.initialize(LEGACY, {"elicitation": {"form": {}}})
        await b.initialize(LEGACY, {"elicitation": {"form": {}}})
        created = await call(a, 1, "tools/call", {"name": "confirm", "arguments": {"what": "z"}, "task": {}})
        task_id = created["result"]["task"]["taskId"]
        await _until(a, task_id, "input_required")
        await a.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task_id}})
        first = await a.recv(timeout=10)
        assert first["method"] == "elicitation/create"
        await b.send({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task_id}})
        second = await b.recv(timeout=10)
        assert second["method"] == "elicitation/create"
        withdrawn, _ = await a.recv_until(lambda m: m.get("method") == "notifications/cancelled", timeout=5)
        assert withdrawn["params"]["requestId"] == first["id"]
        await b.send({"jsonrpc": "2.0", "id": second["id"], "result": {"action": "accept", "content": {"ok": True}}})
        for peer, rid in ((b, 3), (a, 2)):
            result, seen = await peer.recv_until(
                lambda m, rid=rid: m.get("id") == rid and "method" not in m, timeout=10
            )
            assert result["result"]["content"][0]["text"] == "deleted z"
            assert not [m for m in seen if m.get("method") == "elicitation/create"], seen
        assert app_a.tasks.asking == 0 and app_b.tasks.asking == 0
