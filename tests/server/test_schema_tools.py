"""Tools without a Python signature (``Tool.from_schema``): a name, the JSON Schemas and a caller of the arguments
dict and the request's Context, served over real Streamable HTTP in both eras like any decorated tool."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from mcpkit import Client, Context, MCPKit, Tool
from mcpkit.server.interceptors import Call, CallNext, ToolCall
from support.toolkit import ERAS, serve_http

pytestmark = pytest.mark.timeout(60)

INPUT = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "description": "Where"},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city"],
    "additionalProperties": False,
    "x-custom": {"kept": True},
}
OUTPUT = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city", "days"],
}


async def forecast(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
    await ctx.report_progress(1, 2)
    await ctx.info(f"forecast for {arguments['city']}")
    await ctx.report_progress(2, 2)
    return {"city": arguments["city"], "days": arguments.get("days", 3)}


def _app() -> MCPKit:
    app = MCPKit("schemas")
    app.add_tool(
        Tool.from_schema(
            "forecast",
            INPUT,
            forecast,
            output_schema=OUTPUT,
            title="Forecast",
            description="The weather ahead.",
            annotations={"readOnlyHint": True},
            meta={"vendor/x": 1},
        )
    )

    async def ask(arguments: dict[str, Any], ctx: Context) -> str:
        answer = await ctx.elicit("Which city?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"you chose {answer.data['name']}" if answer.action == "accept" else answer.action

    app.add_tool(Tool.from_schema("ask", {"type": "object"}, ask))

    def broken(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:  # (a sync caller: on a worker thread)
        return {"city": 5} if arguments.get("wrong") else {"city": "x", "days": 1}

    app.add_tool(Tool.from_schema("broken", {"type": "object"}, broken, output_schema=OUTPUT))

    @app.tool
    def decorated(city: str, days: int = 3) -> str:
        return city

    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_a_schema_tool_lists_its_schemas_exactly_and_refuses_bad_arguments_like_a_decorated_tool(
    mode: str,
) -> None:
    async with serve_http(_app()) as url, Client(url, mode=mode) as client:
        tools = {t.name: t for t in await client.list_tools()}
        listed = tools["forecast"]
        assert listed.input_schema == INPUT  # exactly as given, its unknown keywords too
        assert listed.output_schema == OUTPUT
        assert listed.description == "The weather ahead."
        assert listed.title == "Forecast" or (listed.annotations and listed.annotations.title == "Forecast")
        assert listed.annotations is not None and listed.annotations.read_only_hint is True
        assert listed.meta == {"vendor/x": 1}
        assert tools["ask"].input_schema == {"type": "object"} and tools["ask"].output_schema is None

        missing = await client.call_tool("forecast", {}, raise_on_error=False)
        assert missing.is_error
        assert missing.text == "Invalid arguments for tool 'forecast': missing required argument 'city'"
        decorated = await client.call_tool("decorated", {}, raise_on_error=False)
        assert decorated.text == missing.text.replace("'forecast'", "'decorated'")  # the same words
        unexpected = await client.call_tool("forecast", {"city": "Oslo", "when": 1}, raise_on_error=False)
        assert unexpected.is_error and unexpected.text.endswith("unexpected argument 'when'")
        wrong = await client.call_tool("forecast", {"city": "Oslo", "days": 9}, raise_on_error=False)
        assert wrong.is_error and wrong.text.startswith("Invalid arguments for tool 'forecast': days: ")

        ok = await client.call_tool("forecast", {"city": "Oslo"})
        assert ok.structured == {"city": "Oslo", "days": 3} and not ok.is_error


@pytest.mark.parametrize("mode", ERAS)
async def test_a_schema_tools_caller_gets_the_request_context_progress_logging_elicitation(mode: str) -> None:
    logs: list[Any] = []
    async with (
        serve_http(_app()) as url,
        Client(
            url,
            mode=mode,
            logging_handler=logs.append,
            log_level="info",
            elicitation_handler=lambda params: {"name": "Bergen"},
        ) as client,
    ):
        progress: list[float] = []
        result = await client.call_tool(
            "forecast", {"city": "Paris", "days": 2}, on_progress=lambda p, total, message: progress.append(p)
        )
        assert result.structured == {"city": "Paris", "days": 2}
        assert progress == [1, 2]
        assert (await client.call_tool("ask", {})).text == "you chose Bergen"
    assert "forecast for Paris" in [e["data"] for e in logs]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_schema_tools_structured_output_is_checked_against_its_output_schema(mode: str) -> None:
    async with serve_http(_app()) as url, Client(url, mode=mode) as client:
        good = await client.call_tool("broken", {})
        assert good.structured == {"city": "x", "days": 1}
        bad = await client.call_tool("broken", {"wrong": True}, raise_on_error=False)
        assert bad.is_error and bad.structured is None
        assert "Error in tool 'broken' (result conversion)" in bad.text  # as a decorated tool's bad return


@pytest.mark.parametrize("mode", ERAS)
async def test_interceptors_see_a_schema_tools_call_like_any_other(mode: str) -> None:
    app = _app()
    seen: list[tuple[str | None, dict[str, Any]]] = []

    async def watch(call: Call, call_next: CallNext) -> Any:
        if isinstance(call, ToolCall):
            seen.append((call.name, call.arguments))
        return await call_next(call)

    app.add_interceptor(watch, methods="tools/call")
    async with serve_http(app) as url, Client(url, mode=mode) as client:
        await client.call_tool("forecast", {"city": "Rome"})
        await client.call_tool("forecast", {}, raise_on_error=False)
    assert seen == [("forecast", {"city": "Rome"}), ("forecast", {})]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_schema_tool_that_allows_tasks_runs_as_a_task(mode: str) -> None:
    app = MCPKit("tasks")
    release = asyncio.Event()

    async def slow(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
        await ctx.become_task()
        await asyncio.wait_for(release.wait(), 10)
        return {"city": arguments["city"], "days": 1}

    app.add_tool(Tool.from_schema("slow", INPUT, slow, output_schema=OUTPUT, task=True))
    async with serve_http(app) as url, Client(url, mode=mode) as client:
        if mode == "handshake":  # (2025-11-25 lists execution.taskSupport; on 2026-07-28 the server decides)
            listed = (await client.list_tools())[0]
            assert listed.execution is not None and listed.execution.task_support == "optional"
        handle = await client.call_tool_as_task("slow", {"city": "Lima"})
        started = time.monotonic()
        release.set()
        assert (await asyncio.wait_for(handle.result(), 10)).structured == {"city": "Lima", "days": 1}
        assert time.monotonic() - started < 10


def test_a_schema_tool_refuses_schemas_that_are_not_json_schema_objects() -> None:
    async def caller(arguments: dict[str, Any], ctx: Context) -> str:
        return ""

    with pytest.raises(ValueError, match="input schema"):
        Tool.from_schema("t", {"type": "array"}, caller)
    with pytest.raises(ValueError, match="input schema"):
        Tool.from_schema("t", {"type": "object", "properties": {"a": {"type": 5}}}, caller)
    with pytest.raises(ValueError, match="output schema"):
        Tool.from_schema("t", {"type": "object"}, caller, output_schema={"type": "string"})
    with pytest.raises(TypeError, match="caller"):
        Tool.from_schema("t", {"type": "object"}, "not callable")  # type: ignore[arg-type]
