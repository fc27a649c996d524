"""Task security and bounds: ids nobody can guess, tasks bound to who created them, caps on tasks in progress, on
their time to live and on what a store keeps (each bound is a row of docs/security.md)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest

from mcpkit import Client, MCPError
from mcpkit.tasks import InMemoryTaskStore
from mcpkit.tasks.model import TASK_OVERRUN_GRACE_MS, new_record, new_task_id
from support.mcp_http import handshake_headers, initialize_body, messages, running, sse_events
from support.tasks import LEGACY, MODERN, TASK_CAPS, Probe, call, make_app, modern, raw, wait_status

UNKNOWN = {"code": -32602, "message": "Failed to retrieve task: Task not found"}


async def test_task_ids_are_unguessable() -> None:
    """Task ids come from the OS's CSPRNG: 192 bits, URL-safe, never repeated."""
    ids = {new_task_id() for _ in range(5000)}
    assert len(ids) == 5000
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{32}", i) for i in ids)


async def test_another_principals_task_id_gets_the_same_answer_as_an_unknown_one() -> None:
    """Receivers MUST reject tasks/get, tasks/result and tasks/cancel for tasks of another authorization context,
    and tasks/list lists only the requestor's: mallory learns nothing from alice's id, in either form."""
    app, probe = make_app()
    async with raw(app, "alice") as alice, raw(app, "mallory") as mallory:
        await alice.initialize(LEGACY)
        await mallory.initialize(LEGACY)
        reply = await call(alice, 1, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        task_id = reply["result"]["task"]["taskId"]
        for i, method in enumerate(("tasks/get", "tasks/result", "tasks/cancel")):
            theirs = await call(mallory, 10 + i, method, {"taskId": task_id})
            unknown = await call(mallory, 20 + i, method, {"taskId": "x" * 32})
            assert theirs["error"] == unknown["error"] == UNKNOWN, method
        assert (await call(mallory, 30, "tasks/list"))["result"]["tasks"] == []
        extension = await modern(alice, 40, "tools/call", {"name": "hold", "arguments": {}})
        modern_id = extension["result"]["taskId"]
        for i, (method, params) in enumerate(
            (("tasks/get", {}), ("tasks/cancel", {}), ("tasks/update", {"inputResponses": {"k": {}}}))
        ):
            theirs = await modern(mallory, 50 + i, method, {"taskId": modern_id, **params})
            unknown = await modern(mallory, 60 + i, method, {"taskId": "y" * 32, **params})
            assert theirs["error"] == unknown["error"] == UNKNOWN, method
        assert (await call(alice, 70, "tasks/get", {"taskId": task_id}))["result"]["status"] == "working"
        assert probe.cancelled == []  # mallory's cancels reached nothing
        probe.release.set()


async def test_a_flood_of_task_creations_stops_at_the_per_principal_cap_and_others_still_get_in() -> None:
    """max_tasks_per_principal bounds a caller's tasks in progress (-32600 beyond it); another caller is not
    affected; a finished or cancelled task frees its place. max_tasks bounds all callers together."""
    app, probe = make_app(Probe(), max_tasks=7, max_tasks_per_principal=5)
    async with raw(app, "flood") as flood, raw(app, "other") as other, raw(app, "third") as third:
        for peer in (flood, other, third):
            await peer.initialize(LEGACY)
        ids = []
        for i in range(5):
            ids.append(
                (await call(flood, i, "tools/call", {"name": "hold", "arguments": {}, "task": {}}))["result"]["task"][
                    "taskId"
                ]
            )
        refused = await call(flood, 99, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        assert refused["error"]["code"] == -32600 and "max_tasks_per_principal" in refused["error"]["message"]
        extension = await modern(flood, 98, "tools/call", {"name": "hold", "arguments": {}})
        assert extension["error"]["code"] == -32600
        assert probe.calls["hold"] == 5  # the refused calls did not run
        for i in range(2):
            ok = await call(other, i, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
            assert ok["result"]["task"]["status"] == "working"
        total = await call(third, 1, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        assert total["error"]["code"] == -32600 and "max_tasks" in total["error"]["message"]
        await call(flood, 100, "tasks/cancel", {"taskId": ids[0]})
        again = await call(flood, 101, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        assert again["result"]["task"]["status"] == "working"
        probe.release.set()


async def test_the_tools_scope_is_checked_when_the_task_is_created() -> None:
    """A token without the tool's scope is refused at creation (-32003): no task exists, nothing ran."""
    app, probe = make_app()

    def rule(method: str, params: dict[str, object]) -> list[str]:
        return ["deploy"] if method == "tools/call" and params.get("name") == "hold" else []

    from mcpkit.server.request_context import CURRENT_AUTHORIZATION, ScopeAuthorization, authorize_as
    from mcpkit.transports.memory import create_memory_pair
    from support.core import RawPeer

    c, s = create_memory_pair()
    token = authorize_as(ScopeAuthorization("carol", ["read"], rule))
    server = asyncio.get_running_loop().create_task(app.serve(s))
    CURRENT_AUTHORIZATION.reset(token)
    peer = RawPeer(c)
    try:
        await peer.initialize(LEGACY)
        r = await call(peer, 1, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        assert r["error"]["code"] == -32003 and r["error"]["data"]["scopes"] == ["deploy"]
        r = await modern(peer, 2, "tools/call", {"name": "hold", "arguments": {}})
        assert r["error"]["code"] == -32003
        assert "hold" not in probe.calls
        assert (await call(peer, 3, "tasks/list"))["result"]["tasks"] == []
    finally:
        await c.close()
        await asyncio.wait_for(server, 5)


async def test_a_result_larger_than_max_result_bytes_fails_the_task() -> None:
    app, _ = make_app(Probe(), max_result_bytes=1000)
    async with raw(app) as peer:
        await peer.initialize(LEGACY)
        small = (await call(peer, 1, "tools/call", {"name": "big", "arguments": {"size": 10}, "task": {}}))["result"]
        assert (await wait_status(peer, small["task"]["taskId"], ("completed",)))["status"] == "completed"
        large = (await call(peer, 2, "tools/call", {"name": "big", "arguments": {"size": 5000}, "task": {}}))["result"]
        failed = await wait_status(peer, large["task"]["taskId"], ("failed",))
        assert "max_result_bytes" in failed["statusMessage"]
        r = await call(peer, 3, "tasks/result", {"taskId": large["task"]["taskId"]})
        assert r["error"]["code"] == -32603


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_a_task_still_running_at_the_end_of_its_ttl_is_stopped_and_its_failure_is_kept_for_a_while(
    era: str,
) -> None:
    """A task stopped at its time to live is recorded ``failed`` and that record outlives the limit by a bounded
    grace period (reported as its new ``ttl``): a client waiting on it gets the failure, not "Task not found"."""
    app, probe = make_app(Probe(), default_ttl_ms=1000, max_ttl_ms=1000)
    async with Client(app, protocol_version=era) as client:
        handle = await client.call_tool_as_task("hold", ttl=10**8)
        assert handle.task.ttl == 1000
        with pytest.raises(MCPError) as exc:
            await asyncio.wait_for(handle.result(), 10)  # (a blocked tasks/result in 2025, polling in 2026)
        assert exc.value.code == -32603 and "time to live" in exc.value.message
        assert probe.cancelled == ["hold"]
        await asyncio.sleep(0.3)
        task = await handle.status()  # read again after the limit: still there, failed, its ttl says how long
        assert task.status == "failed" and "time to live" in (task.status_message or "")
        assert task.ttl is not None and 1000 + TASK_OVERRUN_GRACE_MS <= task.ttl <= 1000 + TASK_OVERRUN_GRACE_MS + 2000
    app, _ = make_app(Probe(), default_ttl_ms=1000, max_ttl_ms=1000, overrun_grace_ms=200)  # a bound: then it goes
    async with raw(app) as peer:
        await peer.initialize(LEGACY)
        task_id = (await call(peer, 1, "tools/call", {"name": "hold", "arguments": {}, "task": {}}))["result"]["task"]
        failed = await wait_status(peer, task_id["taskId"], ("failed",))
        assert 1000 + 200 <= failed["ttl"] <= 1000 + 200 + 2000
        await asyncio.sleep(0.5)
        r = await call(peer, 2, "tasks/get", {"taskId": task_id["taskId"]})
        assert r["error"] == UNKNOWN


async def test_oversized_task_ids_and_cursors_are_refused_without_a_lookup() -> None:
    app, _ = make_app()
    async with raw(app) as peer:
        await peer.initialize(LEGACY)
        assert (await call(peer, 1, "tasks/get", {"taskId": "z" * 100_000}))["error"] == UNKNOWN
        assert (await call(peer, 2, "tasks/get", {"taskId": 12}))["error"] == UNKNOWN
        assert (await call(peer, 3, "tasks/list", {"cursor": "c" * 5000}))["error"]["code"] == -32602


async def test_the_in_memory_store_is_bounded_in_records_and_bytes_and_keeps_tasks_in_progress() -> None:
    """InMemoryTaskStore drops the oldest finished tasks beyond max_records / max_bytes, never one in progress."""
    store = InMemoryTaskStore(max_records=20, max_bytes=50_000)
    live = new_record(owner="o", method="tools/call", name="t", ttl_ms=60_000, poll_ms=100)
    await store.create(live, max_live=100, max_live_per_owner=100)
    for _ in range(40):
        record = new_record(owner="o", method="tools/call", name="t", ttl_ms=60_000, poll_ms=100)
        await store.create(record, max_live=100, max_live_per_owner=100)

        def finish(r: dict[str, object]) -> bool:
            r["status"] = "completed"
            r["result"] = {"content": [{"type": "text", "text": "r" * 4000}]}
            return True

        await store.update(record["id"], finish)
        assert len(store) <= 20 and store.size_bytes <= 50_000
    assert await store.get(live["id"]) is not None


async def test_the_in_memory_store_gives_back_expired_records_without_waiting_for_its_bounds() -> None:
    """A finished task whose time to live ended is dropped by the in-memory store on its own, even when nothing
    else happens: a server that ran a burst of tasks does not keep their dead results (up to max_bytes) forever."""
    store = InMemoryTaskStore()

    def finish(r: dict[str, object]) -> bool:
        r["status"] = "completed"
        r["result"] = {"content": [{"type": "text", "text": "r" * 10_000}]}
        return True

    for _ in range(300):
        record = new_record(owner="o", method="tools/call", name="t", ttl_ms=50, poll_ms=100)
        await store.create(record, max_live=1000, max_live_per_owner=1000)
        await store.update(record["id"], finish)
    kept = new_record(owner="o", method="tools/call", name="t", ttl_ms=60_000, poll_ms=100)
    await store.create(kept, max_live=1000, max_live_per_owner=1000)
    assert len(store) == 301
    for _ in range(100):  # (the records' time to live ends 50 ms after they were made)
        if len(store) == 1:
            break
        await asyncio.sleep(0.02)
    assert len(store) == 1 and store.size_bytes < 1000
    assert await store.get(kept["id"]) is not None
    await store.aclose()


async def test_shutdown_drains_the_running_tasks_then_cancels_what_is_left() -> None:
    """At shutdown (close_listeners) the tasks running get drain_timeout seconds; a task still running then is
    cancelled and recorded failed, one that finishes in time keeps its result."""
    app, probe = make_app(Probe(), drain_timeout=0.5)
    async with raw(app) as peer:
        await peer.initialize(LEGACY)
        quick = await call(peer, 1, "tools/call", {"name": "slow", "arguments": {"seconds": 0.2}, "task": {}})
        stuck = await call(peer, 2, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        loop = asyncio.get_running_loop()
        start = loop.time()
        await app.close_listeners()
        assert 0.4 < loop.time() - start < 3.0
        store = app.tasks.engine.store
        done = await store.get(quick["result"]["task"]["taskId"])
        left = await store.get(stuck["result"]["task"]["taskId"])
        assert done["status"] == "completed"
        assert left["status"] == "failed" and left["error"]["message"] == "the server shut down"
        assert probe.cancelled == ["hold"]


async def test_listening_to_more_task_ids_than_max_subscriptions_is_refused() -> None:
    app, _ = make_app()
    app.max_subscriptions = 3
    async with raw(app) as peer:
        r = await modern(peer, 1, "subscriptions/listen", {"notifications": {"taskIds": ["a", "b", "c", "d"]}})
        assert r["error"]["code"] == -32602 and "max_subscriptions" in r["error"]["message"]


async def test_a_call_that_ends_before_becoming_a_task_gives_its_place_back() -> None:
    """2026-07-28: a call answered in its first step (an input_required round trip, an error, a plain result)
    leaves no task behind: with room for one task per caller, later tasks still get in."""
    app, probe = make_app(Probe(), max_tasks_per_principal=1)
    async with raw(app, "dora") as peer:
        for i in range(3):
            r = await modern(peer, i, "tools/call", {"name": "asks_first", "arguments": {}})
            assert r["result"]["resultType"] == "input_required"
        no_elicitation = {"extensions": TASK_CAPS["extensions"]}
        for i in range(3):
            r = await modern(peer, 10 + i, "tools/call", {"name": "asks_first", "arguments": {}}, caps=no_elicitation)
            assert r["error"]["code"] == -32021
        held = await modern(peer, 20, "tools/call", {"name": "hold", "arguments": {}})
        assert held["result"]["resultType"] == "task"
        probe.release.set()


async def test_a_sessions_task_status_watchers_end_with_the_session() -> None:
    """A 2025-11-25 session's task is followed for notifications/tasks/status while the session lives: when the
    session ends (its connection closes, or a DELETE ends it over HTTP) with its tasks still working, none of their
    watchers is left behind (they were kept until each task changed again: as long as the task ran)."""
    app, probe = make_app()
    engine = app.tasks.engine
    async with raw(app) as peer:
        await peer.initialize(LEGACY)
        for i in range(3):
            reply = await call(peer, i + 1, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
            assert reply["result"]["task"]["status"] == "working"
        assert engine.watchers == 3
    assert engine.watchers == 0 and engine.running == 3  # the tasks go on; nobody is told of them any more
    async with running(app) as (base, _), httpx.AsyncClient(timeout=10) as http:
        r = await http.post(base + "/mcp", json=initialize_body(LEGACY), headers=handshake_headers())
        sid = r.headers["mcp-session-id"]
        headers = handshake_headers(sid, LEGACY)
        await http.post(base + "/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        body = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "hold", "arguments": {}, "task": {}},
        }
        r = await http.post(base + "/mcp", json=body, headers=headers)
        assert r.status_code == 200 and engine.watchers == 1
        assert (await http.delete(base + "/mcp", headers=headers)).status_code == 200
        assert engine.watchers == 0
        probe.release.set()  # (before the server stops: its shutdown drains the tasks running)


async def _stateless_call(http: httpx.AsyncClient, url: str, rid: int, method: str, params: dict) -> dict:
    r = await http.post(
        url,
        json={"jsonrpc": "2.0", "id": rid, "method": method, "params": params},
        headers=handshake_headers(None, LEGACY),
    )
    assert r.status_code == 200, r.text
    return messages(sse_events(r.text))[-1] if r.text.startswith(("event:", "id:", "data:")) else r.json()


async def test_a_stateless_endpoint_never_lists_one_anonymous_callers_tasks_to_another() -> None:
    """Stateless HTTP runs every client's handshake-era requests on one shared session, so it identifies no
    requestor: tasks/list must not hand alice's task ids (and through tasks/result her results) to bob. Without a
    principal the id alone reaches a task, as in 2026-07-28."""
    app, probe = make_app()
    async with running(app, stateless=True) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        reply = await _stateless_call(http, url, 1, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        task_id = reply["result"]["task"]["taskId"]
        assert (await _stateless_call(http, url, 2, "tasks/list", {}))["result"]["tasks"] == []
        got = await _stateless_call(http, url, 3, "tasks/get", {"taskId": task_id})
        assert got["result"]["status"] == "working"  # the id still reaches it
        probe.release.set()


async def test_a_stateless_endpoint_declares_tasks_list_only_to_a_caller_it_can_identify() -> None:
    """2025-11-25 tasks, Security: "receivers that cannot identify requestors SHOULD NOT declare the tasks.list
    capability". A stateless endpoint identifies a caller only by its principal: an anonymous initialize is answered
    without tasks.list (tasks/get, tasks/cancel and task-augmented tools/call stay), an authenticated one with it; a
    session of a stateful endpoint identifies its client, and declares it."""
    from mcpkit.server.request_context import CURRENT_AUTHORIZATION, ScopeAuthorization, authorize_as

    def as_alice(asgi: Any) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            token = authorize_as(ScopeAuthorization("alice", ()))
            try:
                await asgi(scope, receive, send)
            finally:
                CURRENT_AUTHORIZATION.reset(token)

        return app

    async def declared(base: str, http: httpx.AsyncClient) -> dict:
        r = await http.post(base + "/mcp", json=initialize_body(LEGACY), headers=handshake_headers())
        assert r.status_code == 200, r.text
        body = messages(sse_events(r.text))[-1] if r.text.startswith(("event:", "id:", "data:")) else r.json()
        return body["result"]["capabilities"]["tasks"]

    app, _ = make_app()
    async with httpx.AsyncClient(timeout=10) as http:
        async with running(app, stateless=True) as (base, _):
            assert await declared(base, http) == {"cancel": {}, "requests": {"tools": {"call": {}}}}
        async with running(app, stateless=True, wrap=as_alice) as (base, _):
            assert await declared(base, http) == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
        async with running(app) as (base, _):
            assert "list" in await declared(base, http)
    async with raw(app) as peer:  # (a stdio-like connection is one client)
        reply = await peer.initialize(LEGACY)
        assert "list" in reply["result"]["capabilities"]["tasks"]


async def test_a_stateless_task_started_on_one_worker_is_found_on_another() -> None:
    """Two stateless workers sharing a task store: the task created through one is read through the other (the
    shared session of each worker is nobody's: it binds no task)."""
    store = InMemoryTaskStore()
    app_a, probe = make_app()
    app_b, _ = make_app(probe)
    app_a.enable_tasks(store)
    app_b.enable_tasks(store)
    async with (
        running(app_a, stateless=True) as (base_a, _),
        running(app_b, stateless=True) as (base_b, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        reply = await _stateless_call(
            http, base_a + "/mcp", 1, "tools/call", {"name": "hold", "arguments": {}, "task": {}}
        )
        task_id = reply["result"]["task"]["taskId"]
        got = await _stateless_call(http, base_b + "/mcp", 2, "tasks/get", {"taskId": task_id})
        assert got.get("result", {}).get("status") == "working", got
        probe.release.set()


async def test_one_callers_finished_tasks_never_push_another_callers_results_out_of_memory() -> None:
    """Two clients over real HTTP, each its own handshake session (so its own owner): the flooder's thousands of
    instant tasks evict only its own oldest results (past its per-caller bound), never the other client's result
    before its time to live. The store used to drop the oldest finished records of all callers together."""
    store = InMemoryTaskStore(max_records=60, max_records_per_owner=20)
    app, _ = make_app()
    app.enable_tasks(store)
    async with running(app) as (base, _), Client(base + "/mcp", protocol_version=LEGACY) as victim:
        kept = await victim.call_tool_as_task("big", {"size": 100})
        assert (await kept.result(timeout=10)).text == "x" * 100
        async with Client(base + "/mcp", protocol_version=LEGACY) as flooder:
            first = await flooder.call_tool_as_task("big", {"size": 100})
            await first.result(timeout=10)
            for _ in range(80):
                await (await flooder.call_tool_as_task("big", {"size": 100})).result(timeout=10)
            with pytest.raises(MCPError, match="Task not found"):  # its own oldest went: read as an expired task
                await (await flooder.task(first.task_id)).result(timeout=10)
        assert (await (await victim.task(kept.task_id)).result(timeout=10)).text == "x" * 100
        assert len(store) <= 21


async def test_a_caller_past_its_byte_budget_loses_its_own_oldest_results_and_never_the_one_just_made() -> None:
    """max_bytes_per_owner: large results of one caller push out that caller's oldest finished ones (down to the
    budget), keep the newest even when it alone is past the budget, and leave another caller's alone."""
    store = InMemoryTaskStore(max_bytes_per_owner=60_000)
    app, _ = make_app()
    app.enable_tasks(store)
    async with raw(app, "alice") as alice, raw(app, "bob") as bob:
        for peer in (alice, bob):
            await peer.initialize(LEGACY)

        async def big(peer: Any, rid: int, size: int) -> str:
            reply = await call(peer, rid, "tools/call", {"name": "big", "arguments": {"size": size}, "task": {}})
            task_id: str = reply["result"]["task"]["taskId"]
            await wait_status(peer, task_id, ("completed",))
            return task_id

        bobs = await big(bob, 1, 20_000)
        alices = [await big(alice, i, 20_000) for i in range(6)]
        found = [await call(alice, 100 + i, "tasks/get", {"taskId": t}) for i, t in enumerate(alices)]
        assert ["result" in f for f in found] == [False, False, False, False, True, True]  # 2 x 20 kB fit in 60 kB
        assert found[0]["error"] == UNKNOWN
        huge = await big(alice, 50, 100_000)  # (alone past the budget: kept, the others go)
        assert "result" in await call(alice, 200, "tasks/result", {"taskId": huge})
        for i, task_id in enumerate(alices):
            assert (await call(alice, 300 + i, "tasks/get", {"taskId": task_id}))["error"] == UNKNOWN
        assert (await call(bob, 400, "tasks/get", {"taskId": bobs}))["result"]["status"] == "completed"


async def test_a_caller_whose_kept_tasks_are_all_in_progress_is_refused_a_new_one() -> None:
    """Past max_records_per_owner with none of its tasks finished, a new task is refused (-32600), nothing runs."""
    app, probe = make_app()
    app.enable_tasks(InMemoryTaskStore(max_records_per_owner=3))
    async with raw(app, "alice") as alice:
        await alice.initialize(LEGACY)
        for i in range(3):
            assert "result" in await call(alice, i, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        refused = await call(alice, 9, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        assert refused["error"]["code"] == -32600 and "max_records_per_owner" in refused["error"]["message"]
        assert probe.calls["hold"] == 3
        probe.release.set()


async def test_a_client_opening_session_after_session_stays_within_the_in_memory_stores_total() -> None:
    """An unauthenticated client gets a new owner with every handshake session: session after session of instant
    tasks stays within max_records (the oldest finished results of all go first, the newest are kept); with the
    store at max_records and none finished, a new task is refused with the error of the per-caller bound (the
    store used to take it past its bound)."""
    store = InMemoryTaskStore(max_records=30, max_records_per_owner=20)
    app, probe = make_app()
    app.enable_tasks(store)
    async with running(app) as (base, _):
        for _ in range(4):
            async with Client(base + "/mcp", protocol_version=LEGACY) as churner:
                for _ in range(15):
                    last = await churner.call_tool_as_task("big", {"size": 100})
                    await last.result(timeout=10)
                assert (await (await churner.task(last.task_id)).result(timeout=10)).text == "x" * 100
            assert len(store) <= 30
    full = InMemoryTaskStore(max_records=3)
    app.enable_tasks(full)
    async with raw(app, "alice") as alice, raw(app, "bob") as bob:
        await alice.initialize(LEGACY)
        await bob.initialize(LEGACY)
        for i in range(3):
            assert "result" in await call(alice, i, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        refused = await call(bob, 9, "tools/call", {"name": "hold", "arguments": {}, "task": {}})
        assert refused["error"]["code"] == -32600 and "max_records" in refused["error"]["message"]
        assert probe.calls["hold"] == 3 and len(full) == 3
        probe.release.set()
