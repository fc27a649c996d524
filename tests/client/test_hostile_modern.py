"""The client against a 2026-07-28 server that breaks the spec (``support.servers.hostile_modern``, real uvicorn on
127.0.0.1): what it must not do is refused at once, the user's handlers are not run for it, and the client sends
nothing the revision forbids."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from mcpkit import Client
from mcpkit.protocol.errors import MCPError
from support.asgi import serve_asgi
from support.servers import hostile_modern


async def test_input_required_on_a_method_that_may_not_ask_fails_without_running_the_handlers() -> None:
    """Only tools/call, prompts/get and resources/read may answer ``input_required``: a ``tools/list`` that does
    (a list the host makes on its own, turned into a prompt for the user) fails at once, and the elicitation
    handler is never called (it was called once per round, 9 times, before the round limit stopped it)."""
    asked: list[Any] = []
    app = hostile_modern.create(list_asks=True)
    async with serve_asgi(app) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        handler = lambda params: asked.append(params) or {"action": "accept", "content": {}}  # noqa: E731
        async with Client(url, mode="modern", elicitation_handler=handler) as client:
            with pytest.raises(MCPError, match="tools/list") as caught:
                await client.list_tools()
            assert "input_required" in str(caught.value)
            assert asked == []
            lists = [b for b in app.received if b.get("method") == "tools/list"]
            assert len(lists) == 1  # no retry
            assert (await client.call_tool("t", {})).text == "ok"  # the session goes on


async def test_input_required_with_nothing_to_answer_fails_at_once() -> None:
    """An ``input_required`` result with neither ``inputRequests`` nor ``requestState`` (the spec requires one)
    fails at once, instead of being sent again unchanged until the round limit."""
    app = hostile_modern.create()
    async with serve_asgi(app) as port, Client(f"http://127.0.0.1:{port}/mcp", mode="modern") as client:
        with pytest.raises(MCPError, match="neither inputRequests nor requestState"):
            await client.call_tool("neither", {})
        assert len([b for b in app.received if b.get("method") == "tools/call"]) == 1


async def test_a_server_request_on_a_modern_stream_is_not_answered(caplog: pytest.LogCaptureFixture) -> None:
    """2026-07-28 has no server->client requests (a server MUST NOT send one, a client MUST NOT POST a response):
    one arriving on a call's stream is dropped with a warning; the roots handler is not run, nothing is POSTed
    back, and the call gets its answer. (The client used to answer it with its roots, and the server's refusal
    of that POST surfaced as 'Task exception was never retrieved'.)"""
    app = hostile_modern.create()
    caplog.set_level(logging.WARNING, logger="mcpkit")
    roots = ["file:///secret"]
    async with serve_asgi(app) as port, Client(f"http://127.0.0.1:{port}/mcp", mode="modern", roots=roots) as client:
        for _ in range(3):
            assert (await client.call_tool("request_on_stream", {})).text == "done"
        await asyncio.sleep(0.2)  # (an answer would be POSTed in the background)
    assert all(isinstance(b, dict) and "method" in b for b in app.received), app.received
    warnings = [r for r in caplog.records if "roots/list" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]  # once per session, not per request


async def test_notifications_naming_no_request_id_as_their_subscription_are_delivered_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A notification whose ``subscriptionId`` is not a request id (a list, an object, null, a float, true) belongs
    to no listen stream of the client: it is delivered like any other notification, without the traceback per
    notification the demultiplexing used to log ('unhashable type')."""
    app = hostile_modern.create()
    caplog.set_level(logging.WARNING, logger="mcpkit")
    async with serve_asgi(app) as port, Client(f"http://127.0.0.1:{port}/mcp", mode="modern") as client:
        for _ in range(2):
            assert (await client.call_tool("odd_subscription_ids", {})).text == "done"
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
