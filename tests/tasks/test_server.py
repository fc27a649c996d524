"""Tasks on the server, 2025-11-25 form (experimental core utility, ``basic/utilities/tasks.mdx``): every message
checked against the official schema of the revision, the rules checked from the spec's words."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from mcpkit import MCPKit
from support.oracle import validate_def, validate_message
from support.tasks import LEGACY, Probe, call, make_app, raw, wait_status

SCHEMA = "2025-11-25"


async def initialize(peer: Any, version: str = LEGACY, caps: dict[str, Any] | None = None) -> dict[str, Any]:
    reply: dict[str, Any] = await peer.initialize(version, caps)
    return reply


async def create(peer: Any, rid: Any, name: str, args: dict[str, Any] | None = None, **task: Any) -> dict[str, Any]:
    reply = await call(peer, rid, "tools/call", {"name": name, "arguments": args or {}, "task": task})
    validate_message(reply, SCHEMA, sender="server", request_method="tools/call")
    task_obj: dict[str, Any] = reply["result"]["task"]
    return task_obj


async def test_the_server_declares_tasks_for_tools_call_and_each_tools_task_support_in_2025_11_25_only() -> None:
    """Capabilities: a server supporting task-augmented tools/call declares tasks.requests.tools.call (and list,
    cancel); tools declare execution.taskSupport. Neither exists before 2025-11-25."""
    app, _ = make_app()
    async with raw(app) as peer:
        init = await initialize(peer)
        validate_message(init, SCHEMA, sender="server", request_method="initialize")
        assert init["result"]["capabilities"]["tasks"] == {
            "list": {},
            "cancel": {},
            "requests": {"tools": {"call": {}}},
        }
        tools = (await call(peer, 1, "tools/list"))["result"]["tools"]
        validate_message(
            {"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}},
            SCHEMA,
            sender="server",
            request_method="tools/list",
        )
        support = {t["name"]: t.get("execution", {}).get("taskSupport") for t in tools}
        assert support["plain"] is None and support["slow"] == "optional" and support["must"] == "required"
    async with raw(app) as peer:
        init = await initialize(peer, "2025-06-18")
        assert "tasks" not in init["result"]["capabilities"]
        tools = (await call(peer, 1, "tools/list"))["result"]["tools"]
        assert all("execution" not in t for t in tools)


async def test_a_task_augmented_call_answers_create_task_result_then_get_and_result_give_the_outcome() -> None:
    """Creating tasks: the response is a CreateTaskResult (task data, not the tool's result); tasks/get polls it
    (createdAt, lastUpdatedAt, ttl, pollInterval); tasks/result returns exactly what tools/call would have, with
    related-task _meta."""
    app, probe = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        task = await create(peer, 1, "slow", {"seconds": 0.2}, ttl=60_000)
        assert task["status"] == "working" and task["ttl"] == 60_000 and task["pollInterval"] > 0
        assert len(task["taskId"]) >= 32 and task["createdAt"].endswith("Z")
        got = await call(peer, 2, "tasks/get", {"taskId": task["taskId"]})
        validate_message(got, SCHEMA, sender="server", request_method="tasks/get")
        assert got["result"]["taskId"] == task["taskId"] and got["result"]["status"] == "working"
        done = await wait_status(peer, task["taskId"], ("completed",))
        assert done["lastUpdatedAt"] >= done["createdAt"]
        result = await call(peer, 3, "tasks/result", {"taskId": task["taskId"]})
        validate_message(result, SCHEMA, sender="server", request_method="tasks/result")
        validate_def(result["result"], SCHEMA, "CallToolResult")
        assert result["result"]["content"] == [{"type": "text", "text": "slept 0.2"}]
        assert result["result"]["isError"] is False
        assert result["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        assert probe.calls["slow"] == 1


async def test_tasks_result_blocks_until_the_task_is_terminal() -> None:
    """tasks/result on a working task MUST block the response until the task reaches a terminal status."""
    app, probe = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        task = await create(peer, 1, "hold")
        waiting = asyncio.ensure_future(call(peer, 2, "tasks/result", {"taskId": task["taskId"]}))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        probe.release.set()
        result = await asyncio.wait_for(waiting, 5)
        assert result["result"]["content"][0]["text"] == "released"


async def test_task_support_mismatches_are_method_not_found() -> None:
    """Tool-level negotiation: a tool without taskSupport called as a task, and a taskSupport "required" tool
    called plainly, get -32601 (and the tool does not run)."""
    app, probe = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        r = await call(peer, 1, "tools/call", {"name": "plain", "arguments": {}, "task": {}})
        assert r["error"]["code"] == -32601 and "plain" not in probe.calls
        r = await call(peer, 2, "tools/call", {"name": "must", "arguments": {}})
        assert r["error"]["code"] == -32601 and "must" not in probe.calls
        validate_message(r, SCHEMA, sender="server", request_method="tools/call")
        r = await call(peer, 3, "tools/call", {"name": "slow", "arguments": {}, "task": "soon"})
        assert r["error"]["code"] == -32602
        r = await call(peer, 4, "tools/call", {"name": "plain", "arguments": {"x": 2}})
        assert r["result"]["content"][0]["text"] == "4"


async def test_a_server_without_task_tools_ignores_params_task() -> None:
    """Receivers that do not declare the task capability for a request type MUST process it normally, ignoring
    the task-augmentation metadata."""
    app = MCPKit("no-tasks")

    @app.tool
    def double(x: int) -> str:
        return str(2 * x)

    async with raw(app) as peer:
        init = await initialize(peer)
        assert "tasks" not in init["result"]["capabilities"]
        r = await call(peer, 1, "tools/call", {"name": "double", "arguments": {"x": 4}, "task": {"ttl": 1000}})
        assert r["result"]["content"][0]["text"] == "8"
        r = await call(peer, 2, "tasks/get", {"taskId": "x"})
        assert r["error"]["code"] == -32601


async def test_protocol_errors_of_the_tasks_methods() -> None:
    """-32602 for an unknown taskId (get, result, cancel), for cancelling a terminal task and for a bad cursor;
    -32601 for the tasks methods outside 2025-11-25; tasks/update, the 2026-07-28 extension's, wants that era's
    _meta."""
    app, _ = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        for i, method in enumerate(("tasks/get", "tasks/result", "tasks/cancel")):
            r = await call(peer, i, method, {"taskId": "no-such-task"})
            assert r["error"]["code"] == -32602, r
            validate_message(r, SCHEMA, sender="server")
        task = await create(peer, 10, "crunch", {"n": 4})
        await wait_status(peer, task["taskId"], ("completed",))
        r = await call(peer, 11, "tasks/cancel", {"taskId": task["taskId"]})
        assert r["error"]["code"] == -32602 and "terminal" in r["error"]["message"]
        assert (await call(peer, 12, "tasks/list", {"cursor": "!!not-ours"}))["error"]["code"] == -32602
        update = await call(peer, 13, "tasks/update", {"taskId": task["taskId"], "inputResponses": {}})
        assert update["error"]["code"] == -32602 and "2026-07-28" in update["error"]["message"]  # (a modern method)
    async with raw(app) as peer:
        await initialize(peer, "2025-06-18")
        assert (await call(peer, 1, "tasks/get", {"taskId": task["taskId"]}))["error"]["code"] == -32601
        assert (await call(peer, 2, "tasks/list"))["error"]["code"] == -32601


async def test_tasks_list_pages_through_the_callers_tasks_only() -> None:
    """tasks/list is paginated (nextCursor while more remain) and lists what tasks/get can reach, no more."""
    app, probe = make_app()
    probe.release.set()
    async with raw(app) as peer:
        await initialize(peer)
        ids = [(await create(peer, i, "hold"))["taskId"] for i in range(55)]
        first = await call(peer, 100, "tasks/list")
        validate_message(first, SCHEMA, sender="server", request_method="tasks/list")
        page1 = [t["taskId"] for t in first["result"]["tasks"]]
        assert len(page1) == 50 and "nextCursor" in first["result"]
        second = await call(peer, 101, "tasks/list", {"cursor": first["result"]["nextCursor"]})
        page2 = [t["taskId"] for t in second["result"]["tasks"]]
        assert "nextCursor" not in second["result"]
        assert len(page1 + page2) == len(set(page1 + page2)) and set(page1 + page2) == set(ids)
    async with raw(app) as other:  # another session, no principal: none of them
        await initialize(other)
        assert (await call(other, 1, "tasks/list"))["result"]["tasks"] == []
        r = await call(other, 2, "tasks/get", {"taskId": ids[0]})
        assert r["error"] == {"code": -32602, "message": "Failed to retrieve task: Task not found"}


async def test_cancel_moves_the_task_to_cancelled_before_answering_stops_the_work_and_sticks() -> None:
    """Cancellation: the receiver MUST transition the task to cancelled before sending the response, SHOULD stop
    the work, and the task MUST remain cancelled."""
    app, probe = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        task = await create(peer, 1, "hold")
        await asyncio.sleep(0.05)
        r = await call(peer, 2, "tasks/cancel", {"taskId": task["taskId"]})
        validate_message(r, SCHEMA, sender="server", request_method="tasks/cancel")
        assert r["result"]["status"] == "cancelled"
        await asyncio.sleep(0.1)
        assert probe.cancelled == ["hold"]
        probe.release.set()
        got = await call(peer, 3, "tasks/get", {"taskId": task["taskId"]})
        assert got["result"]["status"] == "cancelled"
        r = await call(peer, 4, "tasks/result", {"taskId": task["taskId"]})
        assert r["error"]["code"] == -32603 and "cancelled" in r["error"]["message"]


async def test_tool_errors_fail_the_task_and_tasks_result_returns_exactly_the_underlying_answer() -> None:
    """A tool result with isError moves the task to failed; tasks/result returns that result. A JSON-RPC error
    during the call fails it too, and tasks/result MUST return that same error."""
    app, _ = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        task = await create(peer, 1, "toolfail")
        failed = await wait_status(peer, task["taskId"], ("failed",))
        validate_def(failed, SCHEMA, "GetTaskResult")
        r = await call(peer, 2, "tasks/result", {"taskId": task["taskId"]})
        assert r["result"]["isError"] is True and r["result"]["content"][0]["text"] == "nope"
        task = await create(peer, 3, "protofail")
        failed = await wait_status(peer, task["taskId"], ("failed",))
        assert failed["statusMessage"] == "broken"
        r = await call(peer, 4, "tasks/result", {"taskId": task["taskId"]})
        assert r["error"] == {"code": -32010, "message": "broken", "data": {"why": "test"}}


async def test_input_required_the_request_reaches_the_client_through_tasks_result_with_related_task_meta() -> None:
    """Input required: the task moves to input_required; the requestor calls tasks/result; the receiver sends
    elicitation/create with io.modelcontextprotocol/related-task; the answer moves the task back to working and on
    to its end."""
    app, _ = make_app()
    async with raw(app) as peer:
        await initialize(peer, caps={"elicitation": {"form": {}}})
        task = await create(peer, 1, "confirm", {"what": "a.txt"})
        waiting = await wait_status(peer, task["taskId"], ("input_required",))
        assert waiting["statusMessage"] == "waiting for the user"
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task["taskId"]}})
        request = await peer.recv()
        validate_message(request, SCHEMA, sender="server")
        assert request["method"] == "elicitation/create"
        assert request["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        await peer.send(
            {"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"ok": True}}}
        )
        result, _ = await peer.recv_until(lambda m: m.get("id") == 2)
        assert result["result"]["content"][0]["text"] == "deleted a.txt"


async def test_a_second_tasks_result_takes_over_the_input_request_and_the_first_copy_is_withdrawn() -> None:
    """Two tasks/result waiting on one task (a client that retried after its stream dropped, or awaits the task
    twice): the task's elicitation is asked on the newest one only; the copy sent on the first is withdrawn
    (notifications/cancelled), so the user is never left with two live prompts for one question, and both
    waiters get the task's result."""
    app, _ = make_app()
    async with raw(app) as peer:
        await initialize(peer, caps={"elicitation": {"form": {}}})
        task = await create(peer, 1, "confirm", {"what": "b.txt"})
        await wait_status(peer, task["taskId"], ("input_required",))
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task["taskId"]}})
        first = await peer.recv()
        assert first["method"] == "elicitation/create"
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task["taskId"]}})
        second, before = await peer.recv_until(lambda m: m.get("method") == "elicitation/create")
        later: list[dict[str, Any]] = []
        if not any(m.get("method") == "notifications/cancelled" for m in before):
            with contextlib.suppress(TimeoutError):
                later.append(await peer.recv(timeout=1.0))
        withdrawn = [m for m in before + later if m.get("method") == "notifications/cancelled"]
        assert [m["params"]["requestId"] for m in withdrawn] == [first["id"]], before + later
        assert second["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task["taskId"]}
        await peer.send({"jsonrpc": "2.0", "id": second["id"], "result": {"action": "accept", "content": {"ok": True}}})
        results: dict[Any, Any] = {}
        while len(results) < 2:
            message = await peer.recv(timeout=10)
            assert message.get("method") != "elicitation/create", message  # (asked once more: a duplicate)
            if message.get("id") in (2, 3) and "method" not in message:
                results[message["id"]] = message
        assert [results[i]["result"]["content"][0]["text"] for i in (2, 3)] == ["deleted b.txt"] * 2
        assert app.tasks is not None and app.tasks.asking == 0  # (the table of requests being asked is empty again)


async def test_when_the_newer_tasks_result_goes_away_unanswered_the_older_one_asks_again() -> None:
    """The waiter that took an input request over is cancelled before the user answered: the request is not lost,
    the waiter still there asks it again and gets the task's result."""
    app, _ = make_app()
    async with raw(app) as peer:
        await initialize(peer, caps={"elicitation": {"form": {}}})
        task = await create(peer, 1, "confirm", {"what": "c.txt"})
        await wait_status(peer, task["taskId"], ("input_required",))
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "tasks/result", "params": {"taskId": task["taskId"]}})
        first = await peer.recv()
        await peer.send({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task["taskId"]}})
        second, _ = await peer.recv_until(lambda m: m.get("method") == "elicitation/create")
        await peer.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
        third, _ = await peer.recv_until(lambda m: m.get("method") == "elicitation/create", timeout=10)
        assert third["id"] not in (first["id"], second["id"])
        await peer.send({"jsonrpc": "2.0", "id": third["id"], "result": {"action": "accept", "content": {"ok": True}}})
        result, _ = await peer.recv_until(lambda m: m.get("id") == 2 and "method" not in m, timeout=10)
        assert result["result"]["content"][0]["text"] == "deleted c.txt"
        assert app.tasks is not None and app.tasks.asking == 0


async def test_status_notifications_and_progress_reach_the_session_that_created_the_task() -> None:
    """notifications/tasks/status carries the whole Task when its status changes (no related-task _meta); the
    progressToken of the original request stays valid for the task's lifetime (related-task _meta on each)."""
    app, _ = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        reply = await call(
            peer,
            1,
            "tools/call",
            {"name": "slow", "arguments": {"seconds": 0.1, "steps": 2}, "task": {}, "_meta": {"progressToken": "p1"}},
        )
        task_id = reply["result"]["task"]["taskId"]
        note, seen = await peer.recv_until(lambda m: m.get("method") == "notifications/tasks/status", timeout=5)
        validate_message(note, SCHEMA, sender="server")
        assert note["params"]["taskId"] == task_id and note["params"]["status"] == "completed"
        assert "_meta" not in note["params"]
        progress = [m for m in seen if m.get("method") == "notifications/progress"]
        assert [p["params"]["progress"] for p in progress] == [1, 2]
        for p in progress:
            validate_message(p, SCHEMA, sender="server")
            assert p["params"]["progressToken"] == "p1"
            assert p["params"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}


async def test_a_plain_def_task_tool_runs_on_a_worker_thread_never_inline() -> None:
    """A plain def tool asked for as a task never runs on the event loop's thread (nor on the inline quick path):
    it runs on a worker thread, after the CreateTaskResult."""
    app, probe = make_app()
    async with raw(app) as peer:
        await initialize(peer)
        for i in range(30):  # (enough calls for the sync policy to learn to inline a fast plain def)
            task = await create(peer, i, "crunch", {"n": 5})
            done = await wait_status(peer, task["taskId"], ("completed",))
            assert done["status"] == "completed"
    main = [t for t in probe.threads if t == "MainThread"]
    assert main == [] and len(probe.threads) == 30


async def test_ttl_is_granted_within_the_servers_bounds() -> None:
    """Receivers MAY override the requested ttl; the actual ttl is in every task response. A requested ttl above
    max_ttl_ms is cut to it; none requested gets the default."""
    app, _ = make_app(Probe(), default_ttl_ms=5_000, max_ttl_ms=20_000)
    async with raw(app) as peer:
        await initialize(peer)
        assert (await create(peer, 1, "crunch"))["ttl"] == 5_000
        assert (await create(peer, 2, "crunch", ttl=10**9))["ttl"] == 20_000
        assert (await create(peer, 3, "crunch", ttl=7_000))["ttl"] == 7_000
