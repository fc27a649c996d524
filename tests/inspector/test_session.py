"""The inspector's connection to a Streamable HTTP server that restarts (in process, against a real server on
uvicorn at 127.0.0.1): the probe a shown page asks for brings the status back to "connected" however slowly the
server opens its new session, and nothing in between shows it as disconnected."""

from __future__ import annotations

import asyncio

from mcpkit.inspector import Inspector
from mcpkit.inspector.session import PROBE_MIN_INTERVAL, PROBE_TIMEOUT
from support.mcp_http import Refuse, forget_sessions, open_sessions_with, running
from support.servers.client_server import build_server

WATCH = 0.5  # how often the inspector looks whether its connection ended on its own (Inspector._watch_alive)


async def probe_after_interval(inspector: Inspector) -> str:
    await asyncio.sleep(PROBE_MIN_INTERVAL)  # (one ping per interval, however many ask)
    return await inspector.probe()


async def test_a_restarted_server_slow_to_open_a_session_is_connected_again_after_one_probe() -> None:
    """The failure CI saw on a loaded machine: the probe's ping re-initialized the session, and the inspector's
    watch, looking while the server was still answering ``initialize``, took the client for closed and showed
    the server as disconnected for good ("the connection was closed")."""
    async with running(build_server()) as (base, app):
        inspector = Inspector(f"{base}/mcp", mode="handshake")
        try:
            assert await inspector.connect() is None, inspector.error
            await forget_sessions(app)
            open_sessions_with(app, lambda: asyncio.sleep(4 * WATCH))
            assert await inspector.probe() == "connected", inspector.error
            await asyncio.sleep(2 * WATCH)
            assert inspector.status == "connected", inspector.error
            assert inspector.client.reconnects == 1
        finally:
            await inspector.aclose()


async def test_a_server_slower_than_the_probe_to_open_a_session_is_connected_again_at_the_next_probe() -> None:
    """A ping that outlives ``PROBE_TIMEOUT`` while the client re-initializes shows "not answering"; the next
    probe opens the session and shows "connected" (the given-up ping no longer leaves a client that is closed)."""
    delays = [PROBE_TIMEOUT + 1.0]
    async with running(build_server()) as (base, app):
        inspector = Inspector(f"{base}/mcp", mode="handshake")
        try:
            assert await inspector.connect() is None, inspector.error
            await forget_sessions(app)
            open_sessions_with(app, lambda: asyncio.sleep(delays.pop() if delays else 0.0))
            assert await inspector.probe() == "unreachable"
            assert await probe_after_interval(inspector) == "connected", inspector.error
            await asyncio.sleep(2 * WATCH)
            assert inspector.status == "connected", inspector.error
        finally:
            await inspector.aclose()


async def test_a_restarted_server_that_refuses_new_sessions_for_a_while_is_connected_again_once_it_accepts() -> None:
    """While every attempt to open a new session fails the status is "not answering" (not "disconnected", which
    would stop the probe); once the server accepts sessions again the next probe shows "connected"."""
    refusing = [True]

    async def gate() -> None:
        if refusing[0]:
            raise Refuse

    async with running(build_server()) as (base, app):
        inspector = Inspector(f"{base}/mcp", mode="handshake")
        try:
            assert await inspector.connect() is None, inspector.error
            await forget_sessions(app)
            open_sessions_with(app, gate)
            assert await inspector.probe() == "unreachable"
            assert inspector.error is not None and "could not re-initialize" in inspector.error["message"]
            await asyncio.sleep(2 * WATCH)
            assert inspector.status == "unreachable", inspector.error
            refusing[0] = False
            assert await probe_after_interval(inspector) == "connected", inspector.error
            assert (await inspector.client.ping()) is not None
        finally:
            await inspector.aclose()
