"""Tasks on the client: ``call_tool_as_task`` and its handle in both forms, the transparent following of a
2026-07-28 task by ``call_tool``, a task that outlives its client, and the client running a server's requests as
tasks (2025-11-25)."""

from __future__ import annotations

import asyncio
import logging
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, Context, MCPError, MCPKit, Server, ToolOutputError
from mcpkit.client.tasks import TaskCancelled
from mcpkit.protocol.errors import CapabilityNotSupported, RequestTimeout
from mcpkit.protocol.types import Task
from mcpkit.transports.http import create_app
from support.asgi import serve_asgi
from support.tasks import Probe, make_app
from support.typecheck import mypy_strict, revealed_types

MODES = {"legacy": "2025-11-25", "modern": "2026-07-28"}


def confirm_yes(params: dict[str, Any]) -> dict[str, Any]:
    return {"action": "accept", "content": {"ok": True}}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_call_tool_as_task_gives_a_handle_with_status_progress_and_result(era: str) -> None:
    app, _ = make_app()
    progress: list[tuple[float, float | None, str | None]] = []
    states: list[str] = []
    async with Client(app, protocol_version=MODES[era]) as client:
        handle = await client.call_tool_as_task(
            "slow",
            {"seconds": 0.6, "steps": 3},
            on_progress=lambda p, t, m: progress.append((p, t, m)),
            on_status=lambda task: states.append(task.status),
        )
        assert handle.task.status == "working" and len(handle.task_id) == 32
        status = await handle.status()
        assert isinstance(status, Task) and status.task_id == handle.task_id
        result = await handle.result()
        assert result.text == "slept 0.6" and not result.is_error
        assert handle.task.status == "completed" and states[-1] == "completed"
    assert progress and progress[-1][0] == 3 and progress[-1][1] == 3
    assert [p for p, _, _ in progress] == sorted({p for p, _, _ in progress})  # increasing, no repeats


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_handle_answers_the_tasks_input_requests_with_the_clients_handler(era: str) -> None:
    app, _ = make_app()
    asked: list[dict[str, Any]] = []

    def handler(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return confirm_yes(params)

    async with Client(app, protocol_version=MODES[era], elicitation_handler=handler) as client:
        handle = await client.call_tool_as_task("confirm", {"what": "c.txt"})
        result = await asyncio.wait_for(handle.result(), 10)
        assert result.text == "deleted c.txt"
    assert len(asked) == 1 and "Delete c.txt?" in asked[0]["message"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_handle_shows_the_tasks_ttl_and_poll_interval_in_both_eras(era: str) -> None:
    """``task.ttl`` and ``task.poll_interval`` (milliseconds) are what the server sent, whichever name the era gives
    them on the wire (2025-11-25 ``ttl``/``pollInterval``, 2026-07-28 ``ttlMs``/``pollIntervalMs``)."""
    app, _ = make_app(default_ttl_ms=120_000, poll_interval_ms=300)
    async with Client(app, protocol_version=MODES[era]) as client:
        handle = await client.call_tool_as_task("slow", {"seconds": 0.3})
        for task in (handle.task, await handle.status()):
            assert (task.ttl, task.poll_interval) == (120_000, 300)
            assert (task.ttl_ms, task.poll_interval_ms) == (120_000, 300)
            assert task.created_at and task.last_updated_at
        await handle.result()
        assert handle.task.status == "completed" and handle.task.ttl == 120_000
    unlimited = Task.model_validate({"taskId": "t", "status": "working", "ttlMs": None, "pollIntervalMs": 5})
    assert unlimited.ttl is None and unlimited.poll_interval == 5  # ttlMs null: unlimited


async def test_the_ttl_asked_for_is_sent_in_2025_11_25_and_in_2026_07_28_ignored_saying_so_once_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """2025-11-25: ``params.task.ttl`` asks the server to keep the task that long. 2026-07-28 has no such field
    ("the server decides per-request whether to create a task"): ``ttl=`` is ignored, which the client says in one
    debug line at the call, never a warning."""
    app, _ = make_app(default_ttl_ms=120_000)
    caplog.set_level(logging.DEBUG, logger="mcpkit")
    sent: list[dict[str, Any]] = []

    def tap(event: Any) -> None:
        if event.direction == "out" and event.method == "tools/call":
            sent.append(event.message.params)

    async with Client(app, protocol_version=MODES["legacy"], tap=tap) as client:
        handle = await client.call_tool_as_task("slow", {"seconds": 0.05}, ttl=5_000)
        assert handle.task.ttl == 5_000 and sent[-1]["task"] == {"ttl": 5_000}
        await handle.result()
    assert not [r for r in caplog.records if "ttl" in r.getMessage()]
    async with Client(app, protocol_version=MODES["modern"], tap=tap) as client:
        for _ in range(2):
            handle = await client.call_tool_as_task("slow", {"seconds": 0.05}, ttl=5_000)
            assert handle.task.ttl == 120_000 and "task" not in sent[-1]
            await handle.result()
        handle = await client.call_tool_as_task("slow", {"seconds": 0.05})
        await handle.result()
    about = [r for r in caplog.records if "ttl" in r.getMessage()]
    assert [r.levelno for r in about] == [logging.DEBUG, logging.DEBUG], [r.getMessage() for r in about]
    assert "ignored" in about[0].getMessage() and "2026-07-28" in about[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_cancel_through_the_handle(era: str) -> None:
    app, probe = make_app()
    async with Client(app, protocol_version=MODES[era]) as client:
        handle = await client.call_tool_as_task("hold")
        await asyncio.sleep(0.05)
        await handle.cancel()
        with pytest.raises(TaskCancelled):
            await asyncio.wait_for(handle.result(), 10)
        assert (await handle.status()).status == "cancelled"
    await asyncio.sleep(0.05)
    assert probe.cancelled == ["hold"]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_failed_task_raises_its_json_rpc_error(era: str) -> None:
    app, _ = make_app()
    async with Client(app, protocol_version=MODES[era]) as client:
        handle = await client.call_tool_as_task("protofail")
        with pytest.raises(MCPError) as info:
            await handle.result()
        assert info.value.code == -32010 and info.value.data == {"why": "test"}
        tool_error = await (await client.call_tool_as_task("toolfail")).result()
        assert tool_error.is_error and tool_error.text == "nope"


async def test_call_tool_follows_a_2026_task_to_its_end_transparently_and_its_deadline_cancels_it() -> None:
    """A client that declares the extension handles CreateTaskResult for tools/call: call_tool returns the final
    result, its progress callback fed from the task; past the call's timeout the task is cancelled."""
    app, probe = make_app()
    progress: list[float] = []
    async with Client(app, protocol_version="2026-07-28", elicitation_handler=confirm_yes) as client:
        result = await client.call_tool(
            "slow", {"seconds": 0.3, "steps": 3}, on_progress=lambda p, t, m: progress.append(p)
        )
        assert result.text == "slept 0.3"
        assert (await client.call_tool("confirm", {"what": "d"})).text == "deleted d"
        with pytest.raises(RequestTimeout):
            await client.call_tool("hold", timeout=0.5)
    await asyncio.sleep(0.1)
    assert probe.cancelled == ["hold"] and progress and progress[-1] == 3


async def test_call_tool_gives_each_progress_report_of_a_followed_2026_task_once() -> None:
    """A report made in the task's first step reaches the client twice (the request's progress notification, then
    the task's state on tasks/get): ``on_progress`` sees it once, then the later ones, increasing."""
    app = MCPKit("progress")

    @app.tool(task=True)
    async def staged(ctx: Context) -> str:
        await ctx.report_progress(1, 3, "stage 1")
        await asyncio.sleep(0.3)
        await ctx.report_progress(2, 3, "stage 2")
        await asyncio.sleep(0.6)
        return "staged"

    progress: list[float] = []
    async with Client(app, protocol_version="2026-07-28") as client:
        result = await client.call_tool("staged", on_progress=lambda p, t, m: progress.append(p))
    assert result.text == "staged"
    assert progress == [1, 2]


async def test_without_the_servers_task_support_call_tool_as_task_is_refused_locally() -> None:
    plain = Server("plain")
    async with Client(plain, protocol_version="2025-11-25") as client:
        with pytest.raises(CapabilityNotSupported):
            await client.call_tool_as_task("anything")
    app, _ = make_app()
    async with Client(app, protocol_version="2025-06-18") as client:
        with pytest.raises(CapabilityNotSupported):
            await client.call_tool_as_task("slow")


async def test_a_task_survives_its_clients_disconnect_and_a_reconnecting_client_fetches_it() -> None:
    """Over Streamable HTTP: the client that started the task goes away (its connection closed mid-task); the task
    runs on, and a new client reaches it by id and gets its result."""
    app, probe = make_app(Probe())
    async with serve_asgi(create_app(app)) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, protocol_version="2026-07-28") as first:
            handle = await first.call_tool_as_task("hold")
            task_id = handle.task_id
        probe.release.set()  # the first client is gone; the task goes on
        async with Client(url, protocol_version="2026-07-28") as second:
            later = await second.task(task_id)
            result = await asyncio.wait_for(later.result(), 10)
            assert result.text == "released"


async def test_the_client_runs_a_servers_sampling_request_as_a_task_when_asked() -> None:
    """2025-11-25, the client as receiver: it declares tasks.requests.sampling.createMessage; a task-augmented
    sampling/createMessage is answered with a CreateTaskResult; tasks/get, tasks/list and tasks/result answer from
    the client's task (tasks/result: the sampling result with related-task _meta)."""
    server = Server("asks")
    seen: dict[str, Any] = {}

    @server.handler("tools/call")
    async def call(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        seen["caps"] = ctx.client_capabilities.get("tasks")
        sample = {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5}
        created = await ctx.rc.request("sampling/createMessage", {**sample, "task": {"ttl": 30_000}})
        task_id = created["task"]["taskId"]
        seen["created"] = created["task"]
        seen["get"] = await ctx.rc.request("tasks/get", {"taskId": task_id})
        seen["list"] = await ctx.rc.request("tasks/list", {})
        result = await ctx.rc.request("tasks/result", {"taskId": task_id})
        seen["result"] = result
        return {"content": [{"type": "text", "text": result["content"]["text"]}]}

    @server.handler("tools/list")
    async def tools(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        return {"tools": []}

    async def sampler(params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.1)
        assert "task" not in params
        return {"role": "assistant", "content": {"type": "text", "text": "sampled"}, "model": "m"}

    async with Client(server, protocol_version="2025-11-25", sampling_handler=sampler) as client:
        result = await client.call_tool("anything", validate=False)
        assert result.text == "sampled"
    assert seen["caps"]["requests"]["sampling"] == {"createMessage": {}}
    assert seen["created"]["status"] == "working" and seen["created"]["ttl"] == 30_000
    assert seen["get"]["taskId"] == seen["created"]["taskId"]
    assert [t["taskId"] for t in seen["list"]["tasks"]] == [seen["created"]["taskId"]]
    assert seen["result"]["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": seen["created"]["taskId"]}


async def test_the_client_declares_task_support_only_for_the_requests_it_has_a_handler_for() -> None:
    """2025-11-25 capabilities.tasks.requests: task-augmented sampling/createMessage only with a sampling handler,
    elicitation/create only with an elicitation handler; neither handler, or tasks=False, declares no tasks."""
    app = MCPKit("caps")
    declared: list[Any] = []

    async def spy(call: Any, call_next: Any) -> Any:
        declared.append((call.params.get("capabilities") or {}).get("tasks"))
        return await call_next(call)

    app.add_interceptor(spy, methods="initialize")

    def sampler(params: dict[str, Any]) -> dict[str, Any]:
        return {"role": "assistant", "content": {"type": "text", "text": "x"}, "model": "m"}

    for options in (
        {"sampling_handler": sampler},
        {"elicitation_handler": confirm_yes},
        {"sampling_handler": sampler, "elicitation_handler": confirm_yes},
        {"sampling_handler": sampler, "tasks": False},
        {},
    ):
        async with Client(app, protocol_version="2025-11-25", **options):
            pass
    assert [(caps or {}).get("requests") for caps in declared] == [
        {"sampling": {"createMessage": {}}},
        {"elicitation": {"create": {}}},
        {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}},
        None,
        None,
    ]


def test_the_client_bounds_its_polling_and_the_handles_it_routes_progress_to() -> None:
    """A handle polls at the interval the server suggests, but never faster than 50 ms nor slower than 5 s; the
    client routes 2025-11-25 progress notifications to at most ClientTasks.MAX_FOLLOWED handles (oldest dropped)."""
    from mcpkit.client.tasks import MAX_POLL, MIN_POLL, ClientTasks, TaskHandle

    handle = TaskHandle(None, Task(task_id="t", status="working"), modern=True)  # type: ignore[arg-type]
    assert handle._interval(Task(task_id="t", status="working", pollInterval=1)) == MIN_POLL == 0.05
    assert handle._interval(Task(task_id="t", status="working", pollInterval=3_600_000)) == MAX_POLL == 5.0
    assert handle._interval(Task(task_id="t", status="working", pollIntervalMs=800)) == 0.8
    tasks = ClientTasks()
    for i in range(ClientTasks.MAX_FOLLOWED + 10):
        tasks.follow_progress(f"tok-{i}", handle)
    assert len(tasks._progress) == ClientTasks.MAX_FOLLOWED and "tok-0" not in tasks._progress


async def test_the_client_runs_at_most_256_of_a_servers_requests_as_tasks_at_once() -> None:
    from mcpkit.client.tasks import ClientTasks
    from mcpkit.protocol.errors import TaskLimitReached

    tasks = ClientTasks()
    gate = asyncio.Event()

    async def work(params: dict[str, Any]) -> dict[str, Any]:
        await gate.wait()
        return {"action": "accept"}

    for _ in range(256):
        created = await tasks.create("elicitation/create", {"message": "?", "task": {}}, work)
        assert created["task"]["status"] == "working" and created["task"]["ttl"] == 3_600_000
    with pytest.raises(TaskLimitReached):
        await tasks.create("elicitation/create", {"message": "?", "task": {}}, work)
    gate.set()
    await tasks.aclose()


async def test_call_tool_runs_a_tool_that_requires_a_task_as_one_in_2025_11_25() -> None:
    """A tool whose execution.taskSupport is "required" is called as a task by call_tool itself."""
    app, probe = make_app()
    async with Client(app, protocol_version="2025-11-25") as client:
        result = await client.call_tool("must")
        assert result.text == "done as a task" and probe.calls["must"] == 1


async def test_a_2025_task_logs_to_its_session_with_related_task_meta() -> None:
    app = MCPKit("logs")

    @app.tool(task=True)
    async def chatty(ctx: Context) -> str:
        await ctx.become_task()
        await ctx.info("working on it")
        return "ok"

    logs: list[dict[str, Any]] = []
    async with Client(app, protocol_version="2025-11-25", logging_handler=logs.append, log_level="info") as client:
        handle = await client.call_tool_as_task("chatty")
        assert (await handle.result()).text == "ok"
        for _ in range(50):
            if logs:
                break
            await asyncio.sleep(0.02)
    [log] = logs
    assert log["data"] == "working on it"
    assert log["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": handle.task_id}


async def test_a_short_2026_task_is_read_without_waiting_the_servers_poll_interval() -> None:
    """The first looks at a task come sooner than the interval the server suggests (0, 50, 100 ms ...): a task that
    ends at once is read in well under the 5 s the server suggests."""
    app, _ = make_app(Probe(), poll_interval_ms=5000)
    async with Client(app, protocol_version="2026-07-28") as client:
        loop = asyncio.get_running_loop()
        start = loop.time()
        handle = await client.call_tool_as_task("big", {"size": 3})
        assert (await handle.result()).text == "xxx"
        assert loop.time() - start < 1.0


async def test_a_2026_task_that_ended_before_its_creation_was_answered_gives_its_result() -> None:
    """The CreateTaskResult of a required task that ended within its request already says "completed" but carries
    no result (only tasks/get does): the client reads it there, for call_tool and for a handle alike."""
    app = MCPKit("quick")

    @app.tool(task="required")
    async def at_once(x: int) -> int:
        return x + 1

    async with Client(app, protocol_version="2026-07-28") as client:
        assert (await client.call_tool("at_once", {"x": 2})).structured == {"result": 3}
        handle = await client.call_tool_as_task("at_once", {"x": 4})
        assert (await handle.result()).structured == {"result": 5}


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_tasks_result_is_validated_into_result_type_as_call_tool_s_is(era: str) -> None:
    """``call_tool_as_task(..., result_type=T)``: ``await handle.result()`` (and ``await handle``) is the
    ``ToolResult[T]`` whose ``data`` is validated into ``T``; a value that does not fit is ToolOutputError."""
    app, _ = make_app()
    async with Client(app, protocol_version=MODES[era]) as client:
        handle = await client.call_tool_as_task("crunch", {"n": 4}, result_type=int)
        assert (await handle.result()).data == 6
        assert (await handle).data == 6
        refused = await client.call_tool_as_task("crunch", {"n": 2}, result_type=list[str])
        with pytest.raises(ToolOutputError):
            await refused.result()


def test_a_tasks_result_is_typed_by_result_type_for_mypy_strict(tmp_path: Path) -> None:
    """``TaskHandle[T]``: ``(await handle.result()).data`` is a ``T`` for ``mypy --strict`` (it was ``Any``)."""
    pytest.importorskip("mypy")
    program = tmp_path / "program.py"
    program.write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel

            from mcpkit import Client, TaskHandle, ToolResult

            class Seat(BaseModel):
                row: int

            async def main(client: Client) -> None:
                handle = await client.call_tool_as_task("book", {"row": 1}, result_type=Seat)
                reveal_type((await handle.result()).data)
                reveal_type((await handle).data)
                untyped = await client.call_tool_as_task("book")
                reveal_type(await untyped.result())
                later: TaskHandle[Seat] = handle
                done: ToolResult[Seat] = await later.result()
                reveal_type((await (await client.task("t-1")).result()).data)
            """
        )
    )
    proc = mypy_strict(program, tmp_path)
    revealed = revealed_types(proc.stdout)
    assert "error:" not in proc.stdout, proc.stdout
    assert revealed == ["program.Seat", "program.Seat", "mcpkit.client.results.ToolResult[Any]", "Any"], proc.stdout
