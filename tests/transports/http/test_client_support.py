"""The parts of the Streamable HTTP client transport beside its state machine (``client_support``): here, how the
server's requests and log messages are related to the request of the client whose SSE stream they arrived on
(:class:`Relations`), which a proxy needs to tell which of its clients the upstream asks or logs for. A real
handshake-era server over HTTP."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from mcpkit import Context, MCPKit
from mcpkit.client.lowlevel import ClientSession
from mcpkit.engine import ORIGIN
from mcpkit.transports.http.client_support import MAX_RELATED, MAX_RELATED_ID, Relations
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.toolkit import serve_http


def _asking_app() -> MCPKit:
    app = MCPKit("asks", versions=["2025-06-18"])
    later: set[asyncio.Task[Any]] = set()

    @app.tool
    async def ask(ctx: Context) -> int:
        """Asks the client for its roots within the call (on the call's own stream)."""
        return len(await ctx.list_roots())

    @app.tool
    async def ask_apart(ctx: Context) -> str:
        """Asks the client for its roots after the call ended (on the standalone GET stream)."""
        session = ctx.request_context.session
        assert session is not None

        async def ask_later() -> None:
            await asyncio.sleep(0.2)
            await session.request("roots/list", None)

        task = asyncio.get_running_loop().create_task(ask_later())
        later.add(task)
        task.add_done_callback(later.discard)
        return "asked later"

    @app.tool
    async def chat(ctx: Context) -> str:
        """Logs twice within the call (on the call's own stream)."""
        await ctx.warning("one")
        await ctx.warning("two")
        return "said"

    @app.tool
    async def chat_apart(ctx: Context) -> str:
        """Logs after the call ended (on the standalone GET stream)."""
        session = ctx.request_context.session
        assert session is not None

        async def log_later() -> None:
            await asyncio.sleep(0.2)
            await session.log("warning", "later")

        task = asyncio.get_running_loop().create_task(log_later())
        later.add(task)
        task.add_done_callback(later.discard)
        return "saying later"

    return app


async def test_the_servers_requests_are_related_to_the_request_whose_stream_they_came_on_within_a_bound() -> None:
    """A request sent on someone's behalf (``ORIGIN`` set around it) makes the server's requests on its SSE stream
    known to be about it while the client answers them; a request sent for nobody, and a server's request on the
    standalone stream, relate to nobody. At most ``MAX_RELATED`` are kept, the oldest forgotten first, and no string id
    longer than ``MAX_RELATED_ID``."""
    seen: list[object | None] = []
    asked = asyncio.Event()

    def roots() -> list[str]:
        seen.append(ORIGIN.get())
        asked.set()
        return ["file:///work"]

    async with serve_http(_asking_app()) as url:
        transport = StreamableHTTPClientTransport(url)
        assert transport.relates_requests
        async with ClientSession(transport, mode="handshake", roots=roots) as session:
            token = ORIGIN.set("first")
            try:
                assert (await session.call_tool("ask", {})).structured_content == {"result": 1}
            finally:
                ORIGIN.reset(token)
            assert seen == ["first"]
            assert (await session.call_tool("ask", {})).structured_content == {"result": 1}
            assert seen == ["first", None]
            asked.clear()
            token = ORIGIN.set("second")
            try:
                await session.call_tool("ask_apart", {})
            finally:
                ORIGIN.reset(token)
            await asyncio.wait_for(asked.wait(), 10)
            assert seen == ["first", None, None]

    relations = Relations()
    for i in range(MAX_RELATED + 10):
        relations.note(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "roots/list"}), f"origin {i}")
    relations.note(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}}), "nobody")
    assert [relations.pop(i) for i in (0, 9)] == [None, None]  # (forgotten: the oldest, past the bound)
    assert relations.pop(10) == "origin 10" and relations.pop(10) is None  # (asked once)
    relations.note(orjson.dumps({"jsonrpc": "2.0", "id": 20, "method": "roots/list"}), "again")
    assert relations.pop(20) is None  # (an id twice in flight relates to neither)
    long_id = "x" * (MAX_RELATED_ID + 1)  # (the server's to choose: as long as a message may be; not kept)
    relations.note(orjson.dumps({"jsonrpc": "2.0", "id": long_id, "method": "roots/list"}), "long")
    assert relations.pop(long_id) is None


async def test_the_servers_log_messages_are_related_to_the_request_whose_stream_they_came_on() -> None:
    """The logging handler runs with ``ORIGIN`` set to the request whose SSE stream the log message arrived on (the
    origin travels with the message through the transport's inbox and the session's handler queue); a message of a
    request sent for nobody, and one on the standalone stream, relate to nobody, and so does the next message after
    a related one (nothing lingers)."""
    seen: list[tuple[object, object | None]] = []
    later = asyncio.Event()

    def heard(message: Any) -> None:
        seen.append((message.data, ORIGIN.get()))
        if message.data == "later":
            later.set()

    async with serve_http(_asking_app()) as url:
        transport = StreamableHTTPClientTransport(url)
        async with ClientSession(transport, mode="handshake", logging_handler=heard) as session:
            token = ORIGIN.set("first")
            try:
                assert (await session.call_tool("chat", {})).text == "said"
            finally:
                ORIGIN.reset(token)
            assert seen == [("one", "first"), ("two", "first")]
            assert (await session.call_tool("chat", {})).text == "said"
            assert seen[2:] == [("one", None), ("two", None)]
            token = ORIGIN.set("second")
            try:
                assert (await session.call_tool("chat_apart", {})).text == "saying later"
            finally:
                ORIGIN.reset(token)
            await asyncio.wait_for(later.wait(), 10)
            assert seen[4:] == [("later", None)]
