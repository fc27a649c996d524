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
from support.mcp_http import make_server, running


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


async def test_a_client_closed_from_another_task_as_its_get_stream_opens_does_not_hang() -> None:
    """A handshake-era client opens its GET stream right after initialize. Served and connected in one task and
    closed at once from another (a pytest fixture's setup and teardown), the close's cancellation met the stream's
    connect as it completed; asyncio.wait_for (Python 3.11) lost it, and the close waited on the open stream
    forever."""
    import contextlib
    from collections.abc import AsyncIterator

    from mcpkit import Client

    @contextlib.asynccontextmanager
    async def connected() -> AsyncIterator[Client]:
        async with running(make_server()) as (base, _app):
            client = Client(f"{base}/mcp", protocol_version="2025-11-25")
            await client.connect()
            try:
                yield client
            finally:
                closing = asyncio.ensure_future(client.aclose())
                done, _ = await asyncio.wait({closing}, timeout=10)
                assert done, "the client did not close"
                closing.result()

    for _ in range(3):
        fixture = connected()
        await asyncio.wait_for(fixture.__aenter__(), 20)  # set up in a task of its own, which ends here
        await asyncio.ensure_future(fixture.__aexit__(None, None, None))  # torn down from another
