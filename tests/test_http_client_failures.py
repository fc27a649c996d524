"""A failure that reaches the Streamable HTTP client after it stopped waiting for the POST (the exchange runs in
the background) must still end the call with an error: never a call that waits forever."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

import httpx
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import MCPError
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from test_http_support import make_server, running


class FailsLate(httpx.Auth):
    """Lets the handshake through, then breaks the next request after the transport's answer window."""

    def __init__(self) -> None:
        self.calls = 0

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        self.calls += 1
        if self.calls > 3:
            await asyncio.sleep(0.6)  # longer than answer_window
            raise RuntimeError("token service exploded")
        yield request


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_late_unexpected_failure_fails_the_call(mode: str) -> None:
    async with running(make_server()) as (base, _app):
        transport = StreamableHTTPClientTransport(f"{base}/mcp", auth=FailsLate())
        async with ClientSession(transport, mode=mode, timeout=30) as cs:
            auth = transport.client.auth
            assert isinstance(auth, FailsLate)
            auth.calls = 10  # from now on every request fails late
            with pytest.raises(MCPError, match="token service exploded"):
                await asyncio.wait_for(cs.call_tool("echo", {"text": "x"}), 10)
