"""What an upstream asks of its client through the proxy (``mcpkit.proxy_conn``) when that client is gone."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

import mcpkit
from mcpkit import Client, Context, MCPKit
from mcpkit.protocol.errors import MCPError
from support.toolkit import serve_http

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
