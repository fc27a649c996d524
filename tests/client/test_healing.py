"""The client's self-healing while it re-initializes a session the server forgot (a restarted Streamable HTTP
server): what others see of the client meanwhile, and what a call given up half-way leaves behind.

Servers are real: mcpkit's ASGI app on uvicorn bound to 127.0.0.1 (port 0); a server that is slow to open a new
session answers its ``initialize`` late, as a server still starting (or one on a loaded machine) does."""

from __future__ import annotations

import asyncio

from mcpkit.client.client import Client
from mcpkit.client.lowlevel import ClientSession
from support.mcp_http import forget_sessions, open_sessions_with, running
from support.servers.client_server import build_server


async def test_the_client_keeps_its_session_while_it_opens_a_new_one_for_a_server_that_forgot_it() -> None:
    """Before, the client dropped its session before opening the new one, so for as long as the server took to
    answer ``initialize`` it looked closed to everyone reading ``client.session`` (the inspector's watch then
    showed a restarted server as disconnected, for good)."""
    async with running(build_server()) as (base, app), Client(f"{base}/mcp", mode="handshake") as client:
        await client.ping()
        await forget_sessions(app)
        open_sessions_with(app, lambda: asyncio.sleep(1.0))
        seen: list[ClientSession | BaseException] = []
        ping = asyncio.ensure_future(client.ping())
        while not ping.done():
            try:
                seen.append(client.session)
            except Exception as exc:
                seen.append(exc)
            await asyncio.sleep(0.05)
        await ping
        assert client.reconnects == 1
        errors = [s for s in seen if isinstance(s, BaseException)]
        assert errors == [] and len(seen) >= 10  # (watched all through the second it took)
        assert client.connected and client.session.ended is None


async def test_a_call_given_up_while_the_client_re_initializes_leaves_a_client_whose_next_call_works() -> None:
    """A caller's timeout that ends a call while the client re-initializes must not leave a client that says
    "not connected" to every later call (the inspector's probe gives its ping 5 s: a server slower than that to
    open a session, once, showed as "not answering" for good although it was back)."""
    delays = [3.0]
    async with running(build_server()) as (base, app), Client(f"{base}/mcp", mode="handshake") as client:
        await client.ping()
        await forget_sessions(app)
        open_sessions_with(app, lambda: asyncio.sleep(delays.pop() if delays else 0.0))
        try:
            await asyncio.wait_for(client.ping(), 0.5)
        except TimeoutError:
            pass
        else:
            raise AssertionError("the ping came back before the slow session was opened")
        await client.ping()
        assert len(await client.list_tools()) == 27
        assert client.connected and client.reconnects == 1
