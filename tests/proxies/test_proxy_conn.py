"""Where what an upstream sends through the proxy goes (``mcpkit.proxy_conn``): what it asks when its client is gone,
its log messages when a client session's calls run side by side."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import mcpkit
from mcpkit import Client, Context, MCPKit
from mcpkit.client.lowlevel import ClientSession
from mcpkit.engine import ORIGIN
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.toolkit import build, serve_http

pytestmark = pytest.mark.timeout(60)


async def test_a_request_of_the_upstream_after_its_client_left_is_refused_in_words_and_logs_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """server-everything asks roots/list of every new session, and may do so as its client leaves: the proxy's
    answer was -32603 "Internal error" and an ERROR with a ConnectionClosed traceback in the proxy's log, once per
    session. The upstream now hears that the client has disconnected, and the log has no traceback."""
    upstream = MCPKit("upstream")
    outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    @upstream.tool()
    async def later(ctx: Context) -> str:
        session = ctx.request_context.session
        assert session is not None

        async def ask() -> None:
            await asyncio.sleep(0.3)
            try:
                outcome.set_result(await session.request("roots/list", {}))
            except MCPError as exc:
                outcome.set_result(exc)

        upstream._background.add(asyncio.get_running_loop().create_task(ask()))
        return "asked later"

    proxy = mcpkit.proxy(upstream, client_options={"mode": "handshake"})
    with caplog.at_level(logging.DEBUG, logger="mcpkit"):
        async with serve_http(proxy) as url:
            async with Client(url, mode="handshake", roots=["file:///work"]) as client:
                assert (await client.call_tool("later", {})).text == "asked later"
            refused = await asyncio.wait_for(outcome, 10)
    assert isinstance(refused, MCPError) and "disconnected" in refused.message, refused
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], [r.getMessage() for r in caplog.records]


async def test_a_handshake_sessions_concurrent_calls_get_the_upstreams_log_messages_on_their_own_streams() -> None:
    """A handshake-era client session's calls share its own upstream session. With two running, the upstream's log
    messages (each sent on the stream of the call it is about) went to the client session's standalone stream,
    related to neither call. Now each goes on the stream of the call it is about, as the upstream sent it (the
    client sees it while that call's ``ORIGIN`` is set)."""
    heard: list[tuple[Any, object | None]] = []

    def handler(message: Any) -> None:
        heard.append((message.data, ORIGIN.get()))

    async with serve_http(build("legacy-2025-06-18")) as upstream:
        p = mcpkit.proxy(upstream, client_options={"mode": "handshake"}, allow_private_network=True)
        async with (
            serve_http(p) as url,
            ClientSession(StreamableHTTPClientTransport(url), mode="handshake", logging_handler=handler) as session,
        ):

            async def call(name: str) -> str:
                ORIGIN.set(name)  # (this task's own: the call is sent on its behalf)
                return (await session.call_tool("chatty", {"name": name, "together": 2}, timeout=30)).text

            assert await asyncio.gather(call("Ada"), call("Bob")) == ["Ada", "Bob"]
    assert sorted(heard) == sorted((f"{name}: {i}", name) for name in ("Ada", "Bob") for i in range(5))
