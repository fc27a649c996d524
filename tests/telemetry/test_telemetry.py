"""OpenTelemetry (``mcpkit.telemetry``): spans for every request on both sides, W3C trace context carried in
``_meta`` across stdio and Streamable HTTP in both eras, incoming context checked and bounded as untrusted input,
and nothing imported or done without it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mcpkit import Client, InputHandlerError, MCPKit
from mcpkit.protocol.errors import InvalidParams, MCPError, RequestTimeout
from mcpkit.protocol.tracecontext import MAX_TRACESTATE_MEMBERS, parse_traceparent, parse_tracestate
from mcpkit.telemetry import Telemetry
from support.extras import run_without
from support.paths import SERVERS
from support.toolkit import ERAS, TRANSPORTS, serve_http

sys.path.insert(0, str(SERVERS))

import telemetry_app

BOTH = pytest.mark.parametrize("transport", TRANSPORTS)
ERA = pytest.mark.parametrize("mode", ERAS)
VALID = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def recorder() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@contextlib.asynccontextmanager
async def connect(transport: str, mode: str, incoming: str = "parent", **options: Any) -> AsyncIterator[Client]:
    if transport == "stdio":
        async with Client([sys.executable, str(SERVERS / "telemetry_app.py"), incoming], mode=mode, **options) as c:
            yield c
        return
    async with serve_http(telemetry_app.build(incoming)) as url, Client(url, mode=mode, **options) as client:
        yield client


async def server_spans(client: Client) -> list[dict[str, Any]]:
    result = await client.call_tool("spans", {})
    spans: list[dict[str, Any]] = result.structured["result"]
    return [s for s in spans if s["name"] != "tools/call spans"]


@BOTH
@ERA
async def test_one_trace_from_the_clients_span_to_the_tools_own(transport: str, mode: str) -> None:
    provider, exporter = recorder()
    telemetry = Telemetry(tracer_provider=provider)
    async with connect(transport, mode, telemetry=telemetry, cache=False) as client:
        await client.call_tool("forget", {})
        assert (await client.call_tool("add", {"a": 2, "b": 3})).data == 5
        remote = await server_spans(client)
    mine = [s for s in exporter.get_finished_spans() if s.name == "tools/call add"]
    assert len(mine) == 1 and mine[0].kind.name == "CLIENT"
    call = mine[0]
    served = next(s for s in remote if s["name"] == "tools/call add")
    inside = next(s for s in remote if s["name"] == "inside add")
    # the server's span continues the client's trace (traceparent in _meta), the tool's span nests in it
    assert served["trace"] == format(call.context.trace_id, "032x")
    assert served["parent"] == format(call.context.span_id, "016x") and served["remote_parent"]
    assert inside["trace"] == served["trace"] and inside["parent"] == served["span"]
    assert served["kind"] == "SERVER" and served["status"] == "UNSET"
    version = "2026-07-28" if mode == "modern" else "2025-11-25"
    for attrs in (served["attributes"], dict(call.attributes or {})):
        assert attrs["mcp.method.name"] == "tools/call"
        assert attrs["gen_ai.tool.name"] == "add" and attrs["gen_ai.operation.name"] == "execute_tool"
        assert attrs["mcp.protocol.version"] == version
        assert attrs["mcpkit.era"] == ("modern" if mode == "modern" else "handshake")
        assert "jsonrpc.request.id" in attrs
    if mode == "handshake":
        assert "mcp.session.id" in served["attributes"]


@BOTH
@ERA
async def test_failures_are_error_spans(transport: str, mode: str) -> None:
    provider, exporter = recorder()
    async with connect(transport, mode, telemetry=Telemetry(tracer_provider=provider), cache=False) as client:
        await client.call_tool("forget", {})
        assert (await client.call_tool("fail", {})).is_error
        with pytest.raises(InvalidParams):
            await client.session.call_tool("nonexistent", {})
        remote = await server_spans(client)
    failed = next(s for s in remote if s["name"] == "tools/call fail")
    assert failed["status"] == "ERROR" and failed["attributes"]["error.type"] == "tool_error"
    # a name the server has no tool for is the caller's word: the span is named by the method alone (low
    # cardinality), the name kept as an attribute
    unknown = next(s for s in remote if s["attributes"].get("gen_ai.tool.name") == "nonexistent")
    assert unknown["name"] == "tools/call"
    assert unknown["status"] == "ERROR" and unknown["attributes"]["error.type"] == "-32602"
    assert unknown["attributes"]["rpc.response.status_code"] == "-32602"
    client_side = {s.name: s for s in exporter.get_finished_spans()}
    assert client_side["tools/call nonexistent"].status.status_code.name == "ERROR"
    assert client_side["tools/call fail"].attributes["error.type"] == "tool_error"  # type: ignore[index]


async def test_names_a_caller_makes_up_do_not_become_span_names() -> None:
    # A caller controls the names it sends: on an endpoint open to anyone, naming spans after tools, prompts or
    # resources that do not exist would give a tracing backend as many span names as the caller likes.
    provider, exporter = recorder()
    app = MCPKit("names")
    app.add_middleware(Telemetry(tracer_provider=provider))
    app.tool(lambda: "x", name="real")
    app.prompt(lambda: "hello", name="greet")
    app.resource("note://a", name="a")(lambda: "a")
    async with Client(app) as client:
        for i in range(20):
            with pytest.raises(InvalidParams):
                await client.session.call_tool(f"made-up-{i}", {})
            with pytest.raises(MCPError):
                await client.session.get_prompt(f"made-up-{i}", {})
            with pytest.raises(MCPError):
                await client.session.read_resource(f"note://made-up-{i}")
        await client.session.call_tool("real", {})
        await client.session.get_prompt("greet", {})
        await client.session.read_resource("note://a")
    served = [s for s in exporter.get_finished_spans() if s.kind.name == "SERVER"]
    names = {s.name for s in served if s.name.startswith(("tools/", "prompts/", "resources/"))}
    assert names == {
        "tools/call",
        "prompts/get",
        "resources/read",
        "tools/call real",
        "prompts/get greet",
    }
    made_up = [s for s in served if s.name == "tools/call"]
    assert len(made_up) == 20 and made_up[0].attributes["gen_ai.tool.name"].startswith("made-up-")  # type: ignore[index,union-attr]
    assert all(s.status.status_code.name == "ERROR" for s in made_up)
    prompts = [s for s in served if s.name == "prompts/get"]
    assert len(prompts) == 20 and prompts[0].attributes["gen_ai.prompt.name"].startswith("made-up-")  # type: ignore[index,union-attr]


async def test_methods_a_caller_makes_up_do_not_become_span_names() -> None:
    # as the RPC conventions do for a method the server does not know: one name, _OTHER, the method kept (bounded)
    provider, exporter = recorder()
    app = MCPKit("methods")
    app.add_middleware(Telemetry(tracer_provider=provider))
    async with Client(app, mode="handshake") as client:
        for i in range(20):
            with pytest.raises(MCPError):
                await client.session.peer.request(f"made/up-{i}-" + "x" * 500, {})
    served = [s for s in exporter.get_finished_spans() if s.kind.name == "SERVER"]
    assert {s.name for s in served} == {"initialize", "_OTHER"}
    other = [s for s in served if s.name == "_OTHER"]
    assert len(other) == 20 and all(s.status.status_code.name == "ERROR" for s in other)
    attrs = other[0].attributes
    assert attrs is not None and attrs["mcp.method.name"] == "_OTHER" and attrs["error.type"] == "-32601"
    assert str(attrs["rpc.method_original"]).startswith("made/up-") and len(str(attrs["rpc.method_original"])) == 128


@BOTH
async def test_server_to_client_requests_are_spans_on_both_sides(transport: str) -> None:
    provider, exporter = recorder()
    telemetry = Telemetry(tracer_provider=provider)
    async with connect(transport, "handshake", telemetry=telemetry, sampling_handler=lambda p: "hi") as client:
        await client.call_tool("forget", {})
        assert (await client.call_tool("ask", {})).text == "model: hi"
        remote = await server_spans(client)
    tool = next(s for s in remote if s["name"] == "tools/call ask")
    asked = next(s for s in remote if s["name"] == "sampling/createMessage")
    assert asked["kind"] == "CLIENT" and asked["parent"] == tool["span"]  # the server's request, in the tool's span
    answered = next(s for s in exporter.get_finished_spans() if s.name == "sampling/createMessage")
    assert answered.kind.name == "SERVER"  # the client handled it: its span continues the server's
    assert format(answered.context.trace_id, "032x") == tool["trace"]
    assert answered.parent is not None and format(answered.parent.span_id, "016x") == asked["span"]


@BOTH
@ERA
async def test_the_clients_handler_of_a_server_request_runs_inside_its_span_in_one_trace(
    transport: str, mode: str
) -> None:
    # telemetry.md: a tool that asks the client makes the same trace in both eras, the client's handler's spans
    # inside the client's SERVER span for the question; with no span of the caller's current, too.
    provider, exporter = recorder()
    handler_tracer = provider.get_tracer("handler")

    def sample(params: Any) -> str:
        with handler_tracer.start_as_current_span("inside the handler"):
            return "hi"

    telemetry = Telemetry(tracer_provider=provider)
    async with connect(transport, mode, telemetry=telemetry, sampling_handler=sample) as client:
        await client.call_tool("forget", {})
        exporter.clear()
        assert (await client.call_tool("ask", {})).text == "model: hi"
        mine = [s for s in exporter.get_finished_spans() if s.name != "tools/call forget"]
    answered = next(s for s in mine if s.name == "sampling/createMessage")
    inside = next(s for s in mine if s.name == "inside the handler")
    assert inside.parent is not None and inside.parent.span_id == answered.context.span_id
    assert {s.context.trace_id for s in mine} == {answered.context.trace_id}, [s.name for s in mine]
    assert answered.attributes is not None and answered.attributes["mcpkit.era"] == mode
    assert answered.attributes["mcp.protocol.version"] == {"handshake": "2025-11-25", "modern": "2026-07-28"}[mode]


@BOTH
async def test_input_requests_of_2026_07_28_are_spans_on_both_sides(transport: str) -> None:
    # A 2026-07-28 server asks for input inside its result (InputRequiredResult), not with a request of its own; the
    # trace has the same shape as a handshake-era server-to-client request's: the tool's span, the server's CLIENT
    # span for what it asked, the client's SERVER span for answering it, and the client's handler inside that.
    provider, exporter = recorder()
    handler_tracer = provider.get_tracer("handler")

    def sample(params: Any) -> str:
        with handler_tracer.start_as_current_span("inside the handler"):
            return "hi"

    telemetry = Telemetry(tracer_provider=provider)
    async with connect(transport, "modern", telemetry=telemetry, sampling_handler=sample) as client:
        await client.call_tool("forget", {})
        assert (await client.call_tool("ask", {})).text == "model: hi"
        remote = await server_spans(client)
    rounds = [s for s in remote if s["name"] == "tools/call ask"]
    assert len(rounds) == 2  # the round that asked, the round that got the answer
    asked = next(s for s in remote if s["name"] == "sampling/createMessage")
    assert asked["kind"] == "CLIENT" and asked["parent"] in {r["span"] for r in rounds}
    assert asked["attributes"]["mcp.method.name"] == "sampling/createMessage"
    assert asked["attributes"]["mcp.protocol.version"] == "2026-07-28"
    mine = exporter.get_finished_spans()
    answered = next(s for s in mine if s.name == "sampling/createMessage")
    assert answered.kind.name == "SERVER"  # the client handled it: its span continues the server's
    assert format(answered.context.trace_id, "032x") == asked["trace"]
    assert answered.parent is not None and format(answered.parent.span_id, "016x") == asked["span"]
    assert answered.attributes is not None and answered.attributes["mcpkit.era"] == "modern"
    inside = next(s for s in mine if s.name == "inside the handler")
    assert inside.parent is not None and inside.parent.span_id == answered.context.span_id


@BOTH
@ERA
async def test_a_task_handles_requests_are_in_the_trace_of_the_call_that_made_the_task(
    transport: str, mode: str
) -> None:
    # One logical call is one trace: the requests a task handle sends later (tasks/get, tasks/result, tasks/update)
    # are children of the tools/call that made the task, and the server's spans for them join that trace through
    # the traceparent they carry; with no span of the caller's current, too.
    provider, exporter = recorder()
    telemetry = Telemetry(tracer_provider=provider)
    async with connect(transport, mode, telemetry=telemetry, sampling_handler=lambda p: "hi") as client:
        await client.call_tool("forget", {})
        exporter.clear()
        handle = await client.call_tool_as_task("ask_later", {})
        assert (await handle.result()).text == "later: hi"
        assert (await handle.status()).status == "completed"
        remote = [s for s in await server_spans(client) if s["name"] != "tools/call forget"]
    mine = [s for s in exporter.get_finished_spans() if s.name != "tools/call spans"]
    first = next(s for s in mine if s.name == "tools/call ask_later")
    later = [s for s in mine if s.name.startswith("tasks/")]
    assert later, [s.name for s in mine]
    for span in later:
        assert span.kind.name == "CLIENT" and span.parent is not None
        assert span.parent.span_id == first.context.span_id, span.name
    assert {s.context.trace_id for s in mine} == {first.context.trace_id}, [s.name for s in mine]
    assert any(s["name"].startswith("tasks/") for s in remote)
    assert {s["trace"] for s in remote} == {format(first.context.trace_id, "032x")}, [s["name"] for s in remote]


@BOTH
@ERA
async def test_the_tools_list_a_call_sends_first_is_a_child_of_the_calls_span(transport: str, mode: str) -> None:
    # call_tool of a tool the client has not listed yet sends tools/list first (its output schema, whether it must
    # run as a task): part of that call, so a child of its CLIENT span, in its trace, on both sides; with no span of
    # the caller's current, too. The same for call_tool_as_task.
    provider, exporter = recorder()
    telemetry = Telemetry(tracer_provider=provider)
    version = "2026-07-28" if mode == "modern" else "2025-11-25"
    async with connect(transport, mode, telemetry=telemetry) as client:
        assert (await client.call_tool("add", {"a": 2, "b": 3})).data == 5
        remote = await server_spans(client)
    opening = ("initialize", "server/discover", "tools/call spans")  # (the connection's own, and the test's)
    mine = [s for s in exporter.get_finished_spans() if s.name not in opening]
    call = next(s for s in mine if s.name == "tools/call add")
    listed = next(s for s in mine if s.name == "tools/list")
    assert call.kind.name == listed.kind.name == "CLIENT" and call.parent is None
    assert listed.parent is not None and listed.parent.span_id == call.context.span_id
    assert {s.context.trace_id for s in mine} == {call.context.trace_id}, [s.name for s in mine]
    attrs = dict(call.attributes or {})
    assert attrs["gen_ai.tool.name"] == "add" and attrs["mcp.protocol.version"] == version
    assert "jsonrpc.request.id" in attrs and call.start_time <= listed.start_time and listed.end_time <= call.end_time
    remote = [s for s in remote if s["name"] not in opening]
    assert {s["name"] for s in remote} == {"tools/list", "tools/call add", "inside add"}
    assert {s["trace"] for s in remote} == {format(call.context.trace_id, "032x")}, [s["name"] for s in remote]
    exporter.clear()
    async with connect(transport, mode, telemetry=telemetry, sampling_handler=lambda p: "hi") as client:
        handle = await client.call_tool_as_task("ask_later", {})
        assert (await handle.result()).text == "later: hi"
    mine = [s for s in exporter.get_finished_spans() if s.name not in opening]
    call = next(s for s in mine if s.name == "tools/call ask_later")
    listed = next(s for s in mine if s.name == "tools/list")
    assert listed.parent is not None and listed.parent.span_id == call.context.span_id
    assert {s.context.trace_id for s in mine} == {call.context.trace_id}, [s.name for s in mine]


async def finished(exporter: InMemorySpanExporter, name: str) -> Any:
    """The finished span called ``name``, waited for (bounded: 5 s)."""
    for _ in range(250):
        span = next((s for s in exporter.get_finished_spans() if s.name == name), None)
        if span is not None:
            return span
        await asyncio.sleep(0.02)
    raise AssertionError(f"no finished span {name!r}: {[s.name for s in exporter.get_finished_spans()]}")


@BOTH
async def test_a_server_request_the_server_gives_up_on_ends_the_clients_span(transport: str) -> None:
    # The server's sampling request times out: it sends notifications/cancelled and the client never answers it
    # (spec: no response to a cancelled request). The client's SERVER span for it ends then, as cancelled; it was
    # left open (never exported) until 4,096 other requests pushed it out.
    provider, exporter = recorder()

    async def sample(params: Any) -> str:
        await asyncio.sleep(5)
        return "too late"

    async with connect(
        transport, "handshake", telemetry=Telemetry(tracer_provider=provider), sampling_handler=sample
    ) as client:
        assert (await client.call_tool("ask_briefly", {})).text == "gave up"
        answered = await finished(exporter, "sampling/createMessage")
    assert answered.kind.name == "SERVER" and answered.status.status_code.name == "ERROR"
    assert answered.attributes is not None and answered.attributes["error.type"] == "cancelled"


@BOTH
async def test_a_server_request_unanswered_when_the_client_closes_ends_its_span(transport: str) -> None:
    provider, exporter = recorder()
    entered = asyncio.Event()

    async def sample(params: Any) -> str:
        entered.set()
        await asyncio.sleep(5)
        return "too late"

    async with connect(
        transport, "handshake", telemetry=Telemetry(tracer_provider=provider), sampling_handler=sample
    ) as client:
        asking = asyncio.create_task(client.call_tool("ask", {}))
        await asyncio.wait_for(entered.wait(), 10)
        asking.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asking
    answered = await finished(exporter, "sampling/createMessage")
    assert answered.status.status_code.name == "ERROR"
    assert answered.attributes is not None and answered.attributes["error.type"] == "cancelled"


def test_a_call_that_never_sends_its_request_still_ends_its_span_as_an_error() -> None:
    # (call_tool whose tools/list lookup timed out: "the call was not sent"; its span, started early, is ended)
    provider, exporter = recorder()
    telemetry = Telemetry(tracer_provider=provider)
    with pytest.raises(RequestTimeout), telemetry.call("tools/call", {"name": "slow"}):
        raise RequestTimeout("tools/call", 1.0, "waiting for tools/list")
    with telemetry.call("tools/call", {"name": "quiet"}):
        pass
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["tools/call slow"].status.status_code.name == "ERROR" and spans["tools/call slow"].end_time
    assert spans["tools/call quiet"].status.status_code.name == "UNSET" and spans["tools/call quiet"].end_time


@BOTH
async def test_a_failing_input_handler_is_an_error_span(transport: str) -> None:
    provider, exporter = recorder()

    def sample(params: Any) -> str:
        raise InvalidParams("no model here")

    async with connect(
        transport, "modern", telemetry=Telemetry(tracer_provider=provider), sampling_handler=sample
    ) as client:
        with pytest.raises(InputHandlerError) as failed:  # (2026-07-28 has no error answer to send)
            await client.session.call_tool("ask", {})
        assert isinstance(failed.value.__cause__, InvalidParams)
    answered = next(s for s in exporter.get_finished_spans() if s.name == "sampling/createMessage")
    assert answered.status.status_code.name == "ERROR"
    assert answered.attributes is not None and answered.attributes["error.type"] == "-32602"


@BOTH
async def test_the_clients_spans_for_a_server_request_carry_its_session_transport_and_error_message(
    transport: str,
) -> None:
    # The semantic conventions: mcp.session.id on every span of a session, network.transport (pipe for stdio, tcp
    # for HTTP), and an error span's status description the JSON-RPC error's message. The client's SERVER spans
    # (from its tap) had no session, no span had a transport, and the tap's error spans had no description.
    provider, exporter = recorder()

    def sample(params: Any) -> str:
        raise InvalidParams("no model here")

    async with connect(
        transport, "handshake", telemetry=Telemetry(tracer_provider=provider), sampling_handler=sample
    ) as client:
        await client.call_tool("forget", {})
        await client.session.call_tool("ask", {})
        remote = await server_spans(client)
    mine = {s.name: s for s in exporter.get_finished_spans()}
    called, answered = mine["tools/call ask"], mine["sampling/createMessage"]
    assert called.attributes is not None and answered.attributes is not None
    assert answered.attributes["mcp.session.id"] == called.attributes["mcp.session.id"]
    network = {"stdio": "pipe", "http": "tcp"}[transport]
    assert answered.attributes["network.transport"] == called.attributes["network.transport"] == network
    asked = next(s for s in remote if s["name"] == "sampling/createMessage")  # (the server's side of the same error)
    assert answered.status.status_code.name == "ERROR" and answered.attributes["error.type"] == "-32602"
    assert answered.status.description == "no model here" and asked["attributes"]["error.type"] == "-32602"


@BOTH
async def test_the_clients_spans_for_2026_input_requests_carry_its_session_and_transport(transport: str) -> None:
    # (the SERVER span around the client's handler of an InputRequiredResult's input request had neither: it was
    # made with no peer in hand)
    provider, exporter = recorder()
    async with connect(
        transport, "modern", telemetry=Telemetry(tracer_provider=provider), sampling_handler=lambda p: "hi"
    ) as client:
        await client.call_tool("ask", {})
    mine = {s.name: s for s in exporter.get_finished_spans()}
    called, answered = mine["tools/call ask"], mine["sampling/createMessage"]
    assert answered.kind.name == "SERVER" and answered.attributes is not None and called.attributes is not None
    assert "mcpkit.input.key" in answered.attributes
    assert answered.attributes["mcp.session.id"] == called.attributes["mcp.session.id"]
    network = {"stdio": "pipe", "http": "tcp"}[transport]
    assert answered.attributes["network.transport"] == called.attributes["network.transport"] == network


async def test_the_client_makes_a_server_span_for_each_request_of_a_batch_the_server_sends() -> None:
    # A 2025-03-26 server may send its requests in a JSON-RPC batch: the client's tap sees the batch as one message
    # and its members' answers leave together, so no member got a span; each now gets one around its handler, in the
    # trace its _meta names, with the session's attributes, an error span when its handler refuses it.
    provider, exporter = recorder()
    handler_tracer = provider.get_tracer("handler")

    def sample(params: Any) -> str:
        with handler_tracer.start_as_current_span("inside the handler"):
            return "hi"

    server = [sys.executable, str(SERVERS / "hostile_server.py"), "batch-traced"]
    async with Client(server, telemetry=Telemetry(tracer_provider=provider), sampling_handler=sample) as client:
        answers = json.loads((await client.call_tool("go", {})).text)
    assert sorted(a["id"] for a in answers) == ["b0", "b1", "b2"]
    mine = exporter.get_finished_spans()
    members = {str((s.attributes or {}).get("jsonrpc.request.id")): s for s in mine if s.kind.name == "SERVER"}
    assert sorted(members) == ["b0", "b1", "b2"]
    called = next(s for s in mine if s.name == "tools/call go")
    for rid, name in (("b0", "sampling/createMessage"), ("b1", "roots/list"), ("b2", "sampling/createMessage")):
        span = members[rid]
        assert span.name == name and span.attributes is not None and called.attributes is not None
        assert span.attributes["mcp.protocol.version"] == "2025-03-26" and span.attributes["mcpkit.era"] == "handshake"
        assert span.attributes["mcp.session.id"] == called.attributes["mcp.session.id"]
        assert span.attributes["network.transport"] == "pipe"
    assert format(members["b0"].context.trace_id, "032x") == VALID.split("-")[1]  # (its _meta's trace context)
    assert members["b1"].status.status_code.name == "ERROR" and members["b1"].attributes["error.type"] == "-32601"
    inside = [s for s in mine if s.name == "inside the handler"]
    assert sorted(s.parent.span_id for s in inside if s.parent) == sorted(
        members[rid].context.span_id for rid in ("b0", "b2")
    )


async def test_a_client_in_memory_names_no_network_transport() -> None:
    provider, exporter = recorder()
    app = MCPKit("t")
    app.tool(lambda: "x", name="x")
    async with Client(app, telemetry=Telemetry(tracer_provider=provider)) as client:
        await client.call_tool("x", {})
    called = next(s for s in exporter.get_finished_spans() if s.name == "tools/call x")
    assert called.attributes is not None and "network.transport" not in called.attributes
    async with Client(app) as plain:  # without telemetry: no tracer, no tap, nothing per message
        assert plain.session.peer.tracer is None and plain.session.peer.tap is None


# ---------------------------------------------------------------------------------------------- untrusted context


def test_traceparent_and_tracestate_are_checked_and_bounded() -> None:
    assert parse_traceparent(VALID) is not None
    bad = [
        None,
        42,
        "",
        VALID.upper(),
        "ff" + VALID[2:],
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
        VALID + "-extra",  # (version 00 has no more fields)
        "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",
        "01-" + VALID[3:] + "-" + "x" * 600,  # a later version, but too long
        VALID.replace("-", "_"),
    ]
    assert [parse_traceparent(v) for v in bad] == [None] * len(bad)
    later = parse_traceparent("cc-" + VALID[3:] + "-what-comes-later")
    assert later is not None and later.trace_id == int("0af7651916cd43dd8448eb211c80319c", 16)
    members = ",".join(f"k{i}=v{i}" for i in range(100))
    assert len(parse_tracestate(members)) <= MAX_TRACESTATE_MEMBERS
    assert parse_tracestate("ok=1,Bad=2,sp ace=3,x=a=b,dup=1,dup=2,t@s=4," + "a" * 600) == [
        ("ok", "1"),
        ("dup", "1"),
        ("t@s", "4"),
    ]
    assert parse_tracestate("k=" + "v" * 300) == []  # a value over 256 characters
    assert parse_tracestate(["k=v"]) == []


@BOTH
@ERA
async def test_an_incoming_trace_context_is_untrusted(transport: str, mode: str) -> None:
    """A client without telemetry sends hand-made trace context: a valid one is the parent, a malformed one
    starts a new trace, a long tracestate is cut to its valid members, baggage is never read."""
    hostile_state = ",".join([f"m{i}=v{i}" for i in range(40)] + ["BAD KEY=x", "z=" + "y" * 400])
    async with connect(transport, mode, cache=False) as client:
        await client.call_tool("forget", {})
        await client.session.call_tool(
            "add", {"a": 1, "b": 1}, meta={"traceparent": VALID, "tracestate": hostile_state}
        )
        for bad in ("00-00000000000000000000000000000000-b7ad6b7169203331-01", "junk", "x" * 100_000):
            await client.session.call_tool("add", {"a": 1, "b": 2}, meta={"traceparent": bad, "baggage": "k=v"})
        remote = [s for s in await server_spans(client) if s["name"] == "tools/call add"]
    adopted, *fresh = remote
    assert adopted["trace"] == VALID[3:35] and adopted["parent"] == VALID[36:52] and adopted["remote_parent"]
    members = adopted["state"].split(",")
    assert len(members) == MAX_TRACESTATE_MEMBERS and all(m.startswith("m") for m in members)
    assert len(fresh) == 3 and all(s["parent"] is None and s["trace"] != VALID[3:35] for s in fresh)


@ERA
async def test_link_and_ignore_keep_a_strangers_trace_out(mode: str) -> None:
    for incoming in ("link", "ignore"):
        async with connect("http", mode, incoming=incoming, cache=False) as client:
            await client.call_tool("forget", {})
            await client.session.call_tool("add", {"a": 1, "b": 1}, meta={"traceparent": VALID})
            span = next(s for s in await server_spans(client) if s["name"] == "tools/call add")
        assert span["parent"] is None and span["trace"] != VALID[3:35]
        assert span["links"] == ([VALID[3:35]] if incoming == "link" else [])


# ---------------------------------------------------------------------------------------------- cost


def test_nothing_is_imported_without_telemetry(tmp_path: Path) -> None:
    code = """
    import asyncio, sys
    import mcpkit
    from mcpkit import Client, MCPKit
    app = MCPKit("t")
    app.tool(lambda: "x", name="x")
    async def main():
        async with Client(app) as client:
            await client.call_tool("x", {})
    asyncio.run(main())
    assert not [m for m in sys.modules if m.startswith("opentelemetry") or m == "mcpkit.telemetry"], "imported"
    try:
        from mcpkit.telemetry import Telemetry
        Telemetry()
    except ModuleNotFoundError as exc:
        print(exc, file=sys.stderr)
        sys.exit(3)
    """
    proc = run_without(["opentelemetry"], code, tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "pip install 'mcpkit[otel]'" in proc.stderr.strip().splitlines()[-1]


def test_an_uninstrumented_peer_pays_one_attribute_test() -> None:
    from mcpkit.engine import NULL_OUTBOX, Peer

    # (no tracer unless one is set, nothing done per request then)
    assert Peer(NULL_OUTBOX, request_handler=lambda ctx: {}).tracer is None
