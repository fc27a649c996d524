"""The client's handlers just work, in both eras: a logging handler alone receives the server's log messages (in
2026-07-28 a request gets log messages only when its ``_meta`` asks for a level, so the client asks), with no
handler the messages go to Python's ``logging``, and sampling and elicitation handlers receive typed parameter
objects (the wire dict still reachable). Real servers: in process over the framed memory transport and over HTTP on
uvicorn."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

import pytest

import mcpkit
from mcpkit import (
    Client,
    Context,
    ElicitationHandler,
    ElicitationParams,
    LoggingHandler,
    LogMessage,
    MCPKit,
    SamplingHandler,
    SamplingParams,
)

ERAS = ("handshake", "modern")


def make_app() -> MCPKit:
    app = MCPKit("handlers")

    @app.tool
    async def chatty(ctx: Context) -> str:
        """Log at three levels."""
        await ctx.debug("tiny detail", logger="db")
        await ctx.info("working")
        await ctx.warning({"disk": "almost full"})
        return "done"

    @app.tool
    async def ask_llm(question: str, ctx: Context) -> str:
        """Sample the client's model."""
        answer = await ctx.sample(question, max_tokens=64, system_prompt="be brief", temperature=0.5)
        return answer.text

    @app.tool
    async def ask_user(ctx: Context) -> str:
        """Elicit a name."""
        answer = await ctx.elicit(
            "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        )
        return str(answer.data["name"]) if answer.action == "accept" else answer.action

    return app


async def _settle() -> None:
    await asyncio.sleep(0.05)  # (notifications that arrived with the result are delivered by now)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_logging_handler_alone_receives_every_level_in_both_eras(mode: str) -> None:
    logs: list[LogMessage] = []
    async with Client(make_app(), mode=mode, logging_handler=logs.append) as client:  # type: ignore[arg-type]
        assert (await client.call_tool("chatty")).text == "done"
        await _settle()
    assert [(m.level, m.logger, m.data) for m in logs] == [
        ("debug", "db", "tiny detail"),
        ("info", None, "working"),
        ("warning", None, {"disk": "almost full"}),
    ]
    assert all(isinstance(m, LogMessage) for m in logs)
    assert logs[0].wire == {"level": "debug", "logger": "db", "data": "tiny detail"} == logs[0]


@pytest.mark.parametrize("mode", ERAS)
async def test_log_level_still_filters_with_a_handler(mode: str) -> None:
    logs: list[LogMessage] = []
    async with Client(make_app(), mode=mode, logging_handler=logs.append, log_level="info") as client:  # type: ignore[arg-type]
        await client.call_tool("chatty")
        await _settle()
    assert [m.level for m in logs] == ["info", "warning"]


@pytest.mark.parametrize("mode", ERAS)
async def test_over_http_a_logging_handler_alone_receives_logs(mode: str) -> None:
    pytest.importorskip("uvicorn")
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    logs: list[LogMessage] = []
    async with serve_asgi(create_app(make_app())) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, logging_handler=logs.append) as client:  # type: ignore[arg-type]
            await client.call_tool("chatty")
            await _settle()
    assert [m.level for m in logs] == ["debug", "info", "warning"]


@pytest.mark.parametrize("mode", ERAS)
async def test_without_a_handler_server_logs_go_to_python_logging(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="mcpkit.client.server_log")
    async with Client(make_app(), mode=mode) as client:  # type: ignore[arg-type]
        await client.call_tool("chatty")
        await _settle()
    got = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "mcpkit.client.server_log"]
    assert got == [(logging.INFO, "working"), (logging.WARNING, "{'disk': 'almost full'}")]


@pytest.mark.parametrize("mode", ERAS)
async def test_the_sampling_handler_receives_typed_params_with_the_wire_dict(mode: str) -> None:
    seen: list[SamplingParams] = []

    async def llm(params: SamplingParams) -> str:
        seen.append(params)
        return f"answer to: {params.text}"

    async with Client(make_app(), mode=mode, sampling_handler=llm) as client:  # type: ignore[arg-type]
        assert (await client.call_tool("ask_llm", {"question": "Capital of France?"})).text == (
            "answer to: Capital of France?"
        )
    (params,) = seen
    assert isinstance(params, SamplingParams)
    assert params.max_tokens == 64 and params.system_prompt == "be brief" and params.temperature == 0.5
    assert params.messages[0].role == "user"
    assert params.wire["maxTokens"] == 64 and params["systemPrompt"] == "be brief" and "messages" in params


@pytest.mark.parametrize("mode", ERAS)
async def test_the_elicitation_handler_receives_typed_params_with_the_wire_dict(mode: str) -> None:
    seen: list[ElicitationParams] = []

    def user(params: ElicitationParams) -> dict[str, Any]:
        seen.append(params)
        return {"name": "Ada"}

    async with Client(make_app(), mode=mode, elicitation_handler=user) as client:  # type: ignore[arg-type]
        assert (await client.call_tool("ask_user")).text == "Ada"
    (params,) = seen
    assert isinstance(params, ElicitationParams) and not params.is_url
    assert params.message == "Your name?"
    assert params.requested_schema is not None and params.requested_schema["required"] == ["name"]
    assert params["requestedSchema"] == params.wire["requestedSchema"] == params.requested_schema


def test_the_handler_protocols_and_params_are_exported() -> None:
    for name in ("SamplingHandler", "ElicitationHandler", "LoggingHandler"):
        proto = getattr(mcpkit, name)
        assert issubclass(proto, Protocol) and proto.__module__ == "mcpkit.client.handlers"  # type: ignore[arg-type]
    from mcpkit.client.client import ElicitationHandler as E2
    from mcpkit.client.client import SamplingParams as S2

    assert (ElicitationHandler, SamplingParams) == (E2, S2)
    assert {"SamplingHandler", "ElicitationHandler", "LoggingHandler", "LogMessage"} <= set(mcpkit.__all__)
    assert LoggingHandler is not SamplingHandler


def make_growing_app() -> MCPKit:
    app = MCPKit("grows")
    added: list[str] = []

    @app.tool
    async def grow(ctx: Context) -> str:
        """Add a tool (``notifications/tools/list_changed``), then log."""
        added.append(f"extra{len(added)}")

        def extra() -> str:
            return "x"

        app.add_tool(extra, name=added[-1])
        await ctx.info("grew")
        return "grown"

    return app


@pytest.mark.parametrize("over", ["memory", "http"])
@pytest.mark.parametrize("mode", ERAS)
async def test_handlers_may_call_the_client_back(mode: str, over: str) -> None:
    """A logging handler and an ``on_notification`` callback that call the client back (re-list the tools when
    they changed: the usual thing to do) get their answers: the session goes on reading while they wait, instead
    of waiting on them and never reading the answer they wait for (every call of the session then timed out). The
    call that caused a log message returns once its handler has run, as before."""
    seen: list[Any] = []
    client: Client

    async def on_log(message: LogMessage) -> None:
        seen.append(("log", message.data, sorted(t.name for t in await client.list_tools())))

    async def on_notification(method: str, params: Any) -> None:
        if method == "notifications/tools/list_changed":
            seen.append(("changed", sorted(t.name for t in await client.list_tools())))

    async def run(target: Any) -> None:
        nonlocal client
        client = Client(target, mode=mode, logging_handler=on_log, on_notification=on_notification, timeout=5)
        async with client:
            assert (await client.call_tool("grow")).text == "grown"
            assert ("log", "grew", ["extra0", "grow"]) in seen
            if mode == "handshake":  # (list_changed is not tied to the call: it may come after its answer)
                for _ in range(100):
                    if ("changed", ["extra0", "grow"]) in seen:
                        break
                    await asyncio.sleep(0.05)
                assert ("changed", ["extra0", "grow"]) in seen
            assert (await client.call_tool("extra0")).text == "x"

    if over == "memory":
        await asyncio.wait_for(run(make_growing_app()), 20)
        return
    pytest.importorskip("uvicorn")
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    async with serve_asgi(create_app(make_growing_app())) as port:
        await asyncio.wait_for(run(f"http://127.0.0.1:{port}/mcp"), 20)


@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_returns_after_the_handlers_of_its_log_messages(mode: str) -> None:
    """The log messages a tool sends before its result are handled before the call returns, even by a slow async
    handler: the handlers run apart from the reader, but the caller waits for them to catch up."""
    logs: list[str] = []

    async def slow_handler(message: LogMessage) -> None:
        await asyncio.sleep(0.1)
        logs.append(message.level)

    async with Client(make_app(), mode=mode, logging_handler=slow_handler) as client:
        assert (await client.call_tool("chatty")).text == "done"
        assert logs == ["debug", "info", "warning"]


def _raising(*args: Any) -> Any:
    raise ValueError("boom")


@pytest.mark.parametrize("what", ["sampling", "elicitation", "roots"])
@pytest.mark.parametrize("mode", ERAS)
async def test_a_handler_that_raises_is_reported_as_the_era_allows(mode: str, what: str) -> None:
    """A sampling, elicitation or roots handler that raises: in the handshake era the server gets -32603 and its
    tool decides what the call returns (here a failed call); 2026-07-28 has no error form for an input response, so
    the call raises InputHandlerError naming the handler and the call, the handler's exception as its cause (not
    that exception as if the call itself had raised it). The session goes on."""
    app = make_app()

    @app.tool
    async def where(ctx: Context) -> str:
        """List the client's roots."""
        return ", ".join(str(r.uri) for r in await ctx.list_roots())

    options: dict[str, Any] = {
        "sampling": {"sampling_handler": _raising},
        "elicitation": {"elicitation_handler": _raising},
        "roots": {"roots": _raising},
    }[what]
    tool, arguments, method = {
        "sampling": ("ask_llm", {"question": "q"}, "sampling/createMessage"),
        "elicitation": ("ask_user", {}, "elicitation/create"),
        "roots": ("where", {}, "roots/list"),
    }[what]
    async with Client(app, mode=mode, **options) as client:
        if mode == "handshake":
            result = await client.call_tool(tool, arguments)
            assert result.is_error, result.text
        else:
            with pytest.raises(mcpkit.InputHandlerError) as caught:
                await client.call_tool(tool, arguments)
            exc = caught.value
            assert isinstance(exc, mcpkit.MCPError)
            assert isinstance(exc.__cause__, ValueError) and str(exc.__cause__) == "boom"
            assert exc.handler == method and exc.method == "tools/call" and exc.name == tool
            assert method in str(exc) and f"tools/call {tool!r}" in str(exc) and "boom" in str(exc), str(exc)
        assert await client.ping() >= 0
