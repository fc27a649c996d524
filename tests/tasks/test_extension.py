"""Tasks on the server, 2026-07-28 form: the extension ``io.modelcontextprotocol/tasks`` (SEP-2663), checked from
its words (the official conformance scenarios ``tasks-*`` check the same over HTTP: tests/conformance)."""

from __future__ import annotations

import asyncio
from typing import Any

from mcpkit import Context
from mcpkit.protocol.versions import TASKS_EXTENSION
from support.tasks import TASK_CAPS, make_app, modern, raw, wait_status

MODERN_FORM = ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs")


async def start(peer: Any, rid: Any, name: str, args: dict[str, Any] | None = None, **params: Any) -> dict[str, Any]:
    reply = await modern(peer, rid, "tools/call", {"name": name, "arguments": args or {}, **params})
    result: dict[str, Any] = reply["result"]
    return result


async def test_the_extension_is_advertised_under_extensions_and_the_2025_slot_is_not() -> None:
    """Capability negotiation: the server includes the extension in its server/discover capabilities; the
    2025-11-25 capability declarations are not part of the extension."""
    app, _ = make_app()
    async with raw(app) as peer:
        caps = (await modern(peer, 1, "server/discover"))["result"]["capabilities"]
        assert caps["extensions"] == {TASKS_EXTENSION: {}} and "tasks" not in caps
        tools = (await modern(peer, 2, "tools/list"))["result"]["tools"]
        assert all("execution" not in t for t in tools)


async def test_create_task_result_is_flat_with_result_type_task_and_the_ms_fields() -> None:
    """CreateTaskResult = Result & Task with resultType "task": taskId, status, createdAt, lastUpdatedAt, ttlMs,
    pollIntervalMs at the top level (integer milliseconds), no nested task, no ttl/pollInterval, no requestState."""
    app, _ = make_app()
    async with raw(app) as peer:
        created = await start(peer, 1, "slow", {"seconds": 0.3})
        assert created["resultType"] == "task" and "task" not in created
        assert all(k in created for k in MODERN_FORM)
        assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
        assert not {"ttl", "pollInterval", "requestState", "result", "error", "inputRequests"} & set(created)
        now = await modern(peer, 2, "tasks/get", {"taskId": created["taskId"]})  # durable before it was answered
        assert now["result"]["resultType"] == "complete" and now["result"]["status"] == "working"
        assert "result" not in now["result"] and "error" not in now["result"]


async def test_tasks_get_inlines_the_result_the_error_or_the_input_requests() -> None:
    """tasks/get: a completed task inlines result (no related-task _meta on it); a tool error is completed with
    result.isError; a JSON-RPC error is failed with error and no result."""
    app, _ = make_app()
    async with raw(app) as peer:
        created = await start(peer, 1, "slow", {"seconds": 0.05})
        done = await wait_status(peer, created["taskId"], ("completed",), era="modern")
        assert done["result"]["content"] == [{"type": "text", "text": "slept 0.05"}]
        assert "io.modelcontextprotocol/related-task" not in (done["result"].get("_meta") or {})
        created = await start(peer, 2, "toolfail")
        done = await wait_status(peer, created["taskId"], ("completed", "failed"), era="modern")
        assert done["status"] == "completed" and done["result"]["isError"] is True
        created = await start(peer, 3, "protofail")
        done = await wait_status(peer, created["taskId"], ("completed", "failed"), era="modern")
        assert done["status"] == "failed" and done["error"]["code"] == -32010 and "result" not in done


async def test_a_client_without_the_extension_gets_no_task_and_required_tools_answer_minus_32021() -> None:
    """A server MUST NOT return CreateTaskResult to a client that did not include the extension on its request; a
    request it can only serve as a task gets -32021 naming the extension; tasks/get, tasks/update, tasks/cancel
    from such a client get -32021 too. The legacy task param is ignored."""
    app, _ = make_app()
    async with raw(app) as peer:
        r = await modern(peer, 1, "tools/call", {"name": "slow", "arguments": {"seconds": 0.01}}, caps={})
        assert r["result"]["resultType"] == "complete" and "taskId" not in r["result"]
        r = await modern(peer, 2, "tools/call", {"name": "must", "arguments": {}}, caps={})
        assert r["error"]["code"] == -32021
        assert r["error"]["data"] == {"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}}
        for i, (method, params) in enumerate(
            (("tasks/get", {}), ("tasks/update", {"inputResponses": {}}), ("tasks/cancel", {}))
        ):
            r = await modern(peer, 10 + i, method, {"taskId": "any", **params}, caps={})
            assert r["error"]["code"] == -32021, method
        r = await modern(peer, 20, "tools/call", {"name": "plain", "arguments": {}, "task": {"ttl": 5}})
        assert r["result"]["resultType"] == "complete" and r["result"]["content"][0]["text"] == "2"


async def test_tasks_result_and_tasks_list_do_not_exist_in_the_extension_and_unknown_ids_are_minus_32602() -> None:
    app, _ = make_app()
    async with raw(app) as peer:
        assert (await modern(peer, 1, "tasks/result", {"taskId": "x"}))["error"]["code"] == -32601
        assert (await modern(peer, 2, "tasks/list", {}))["error"]["code"] == -32601
        for i, method in enumerate(("tasks/get", "tasks/cancel")):
            r = await modern(peer, 3 + i, method, {"taskId": "tasks-nonexistent"})
            assert r["error"]["code"] == -32602, method


async def test_cancel_is_an_ack_the_task_settles_cancelled_and_a_terminal_task_gets_the_same_ack() -> None:
    app, probe = make_app()
    async with raw(app) as peer:
        created = await start(peer, 1, "hold")
        ack = await modern(peer, 2, "tasks/cancel", {"taskId": created["taskId"]})
        assert set(ack["result"]) <= {"resultType", "_meta"} and ack["result"]["resultType"] == "complete"
        done = await wait_status(peer, created["taskId"], ("cancelled",), era="modern")
        assert done["status"] == "cancelled"
        await asyncio.sleep(0.05)
        assert probe.cancelled == ["hold"]
        again = await modern(peer, 3, "tasks/cancel", {"taskId": created["taskId"]})
        assert again["result"]["resultType"] == "complete" and "taskId" not in again["result"]


async def test_input_requests_surface_on_tasks_get_and_tasks_update_resumes_the_task() -> None:
    """input_required: tasks/get lists the outstanding requests under keys never reused; tasks/update answers
    them (ack only; unknown keys ignored); the task resumes to its end."""
    app, _ = make_app()
    async with raw(app) as peer:
        created = await start(peer, 1, "confirm", {"what": "b.txt"})
        waiting = await wait_status(peer, created["taskId"], ("input_required",), era="modern")
        [(key, request)] = waiting["inputRequests"].items()
        assert request["method"] == "elicitation/create" and "Delete b.txt?" in request["params"]["message"]
        assert waiting["statusMessage"] == "waiting for the user"
        ack = await modern(peer, 2, "tasks/update", {"taskId": created["taskId"], "inputResponses": {"bogus": {}}})
        assert ack["result"]["resultType"] == "complete"
        still = await modern(peer, 3, "tasks/get", {"taskId": created["taskId"]})
        assert still["result"]["status"] == "input_required" and list(still["result"]["inputRequests"]) == [key]
        answer = {key: {"action": "accept", "content": {"ok": True}}}
        await modern(peer, 4, "tasks/update", {"taskId": created["taskId"], "inputResponses": answer})
        done = await wait_status(peer, created["taskId"], ("completed",), era="modern")
        assert done["result"]["content"][0]["text"] == "deleted b.txt"
        r = await modern(peer, 5, "tasks/update", {"taskId": created["taskId"], "inputResponses": 3})
        assert r["error"]["code"] == -32602


async def test_input_required_before_the_task_exists_then_the_task() -> None:
    """Composition with multi round-trip requests: questions asked before the call waits are input_required round
    trips (no taskId); the round that does not end at once becomes the task (no requestState on it), and its
    result reflects the answers."""
    app = make_app()[0]

    @app.tool(task="required")
    async def named(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        await asyncio.sleep(0.01)
        return f"Hello, {(answer.content or {}).get('name')}"

    async with raw(app) as peer:
        r1 = (await modern(peer, 1, "tools/call", {"name": "named", "arguments": {}}))["result"]
        assert r1["resultType"] == "input_required" and "taskId" not in r1
        [key] = r1["inputRequests"]
        params = {
            "name": "named",
            "arguments": {},
            "inputResponses": {key: {"action": "accept", "content": {"name": "Zed"}}},
            "requestState": r1["requestState"],
        }
        r2 = (await modern(peer, 2, "tools/call", params))["result"]
        assert r2["resultType"] == "task" and "requestState" not in r2 and "inputRequests" not in r2
        done = await wait_status(peer, r2["taskId"], ("completed",), era="modern")
        assert done["result"]["content"][0]["text"] == "Hello, Zed"


async def test_status_and_progress_reported_before_the_first_wait_are_kept_with_the_task() -> None:
    """A task tool's first step runs inside the request: the status and progress it reports there belong to the
    task the request becomes, so tasks/get shows them (the message of the last report as the status message)."""
    app = make_app()[0]
    release = asyncio.Event()

    @app.tool(task="required")
    async def building(ctx: Context) -> str:
        await ctx.report_status("building docs")
        await ctx.report_progress(1, 3, "stage 1 of 3")
        await release.wait()
        return "built"

    @app.tool(task="required")
    async def starting(ctx: Context) -> str:
        await ctx.report_status("starting")
        await release.wait()
        return "started"

    async with raw(app) as peer:
        created = await start(peer, 1, "building")
        got = (await modern(peer, 2, "tasks/get", {"taskId": created["taskId"]}))["result"]
        assert got["status"] == "working" and got["statusMessage"] == "stage 1 of 3"
        assert got["_meta"]["dev.mcpkit/progress"] == {"progress": 1, "total": 3, "message": "stage 1 of 3"}
        created = await start(peer, 3, "starting")
        got = (await modern(peer, 4, "tasks/get", {"taskId": created["taskId"]}))["result"]
        assert got["status"] == "working" and got["statusMessage"] == "starting"
        release.set()
        done = await wait_status(peer, created["taskId"], ("completed",), era="modern")
        assert done["result"]["content"][0]["text"] == "started"


async def test_a_required_task_tool_that_ends_at_once_is_still_answered_with_a_task() -> None:
    app, _ = make_app()
    async with raw(app) as peer:
        created = await start(peer, 1, "must")
        assert created["resultType"] == "task"
        done = await wait_status(peer, created["taskId"], ("completed",), era="modern")
        assert done["result"]["content"][0]["text"] == "done as a task"


async def test_listen_streams_notifications_tasks_for_the_callers_tasks() -> None:
    """notifications/tasks via subscriptions/listen (taskIds): the acknowledgement names the task ids agreed to,
    each notification carries the whole DetailedTask; a client without the extension gets -32021."""
    app, probe = make_app()
    async with raw(app) as peer:
        created = await start(peer, 1, "hold")
        listen = {"notifications": {"taskIds": [created["taskId"], "someone-elses"]}}
        await peer.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "subscriptions/listen",
                "params": {**listen, "_meta": _meta(TASK_CAPS)},
            }
        )
        ack = await peer.recv()
        assert ack["method"] == "notifications/subscriptions/acknowledged"
        assert ack["params"]["notifications"]["taskIds"] == [created["taskId"]]
        probe.release.set()
        note = await peer.recv()
        while note["params"]["status"] != "completed":
            note = await peer.recv()
        assert note["method"] == "notifications/tasks" and note["params"]["taskId"] == created["taskId"]
        assert note["params"]["result"]["content"][0]["text"] == "released"
        r = await modern(peer, 3, "subscriptions/listen", {"notifications": {"taskIds": ["x"]}}, caps={})
        assert r["error"]["code"] == -32021


def _meta(caps: dict[str, Any]) -> dict[str, Any]:
    from support.tasks import modern_meta

    return modern_meta(caps)
