"""The inspector's connection to a Streamable HTTP server that restarts (in process, against a real server on
uvicorn at 127.0.0.1): the probe a shown page asks for brings the status back to "connected" however slowly the
server opens its new session, and nothing in between shows it as disconnected."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from mcpkit.inspector import Inspector
from mcpkit.inspector.events import Subscriber
from mcpkit.inspector.session import PROBE_MIN_INTERVAL, PROBE_TIMEOUT, PROBE_TIMEOUTS_UNREACHABLE
from mcpkit.server.lowlevel import Server, ServerRequestContext
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
    """A ping that outlives ``PROBE_TIMEOUT`` while the client re-initializes is one slow answer, not a dead server:
    the status stays "connected"; the next probe opens the session (the given-up ping no longer leaves a client
    that is closed)."""
    delays = [PROBE_TIMEOUT + 1.0]
    async with running(build_server()) as (base, app):
        inspector = Inspector(f"{base}/mcp", mode="handshake")
        try:
            assert await inspector.connect() is None, inspector.error
            await forget_sessions(app)
            open_sessions_with(app, lambda: asyncio.sleep(delays.pop() if delays else 0.0))
            assert await inspector.probe() == "connected", inspector.error
            assert await probe_after_interval(inspector) == "connected", inspector.error
            await asyncio.sleep(2 * WATCH)
            assert inspector.status == "connected", inspector.error
        finally:
            await inspector.aclose()


def slow_pings(delays: list[float]) -> Server:
    """The test server, its answer to each ``ping`` held back by the next of ``delays`` (none once they run out)."""
    server = build_server()

    @server.handler("ping")
    async def ping(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(delays.pop(0) if delays else 0.0)
        return {}

    return server


async def statuses_shown(events: Subscriber) -> list[str]:
    """The statuses of the ``state`` events a page was sent (the frames waiting for it)."""
    shown = []
    while True:
        try:
            event = orjson.loads((await asyncio.wait_for(events.next(), 0.1)).removeprefix(b"data: "))
        except TimeoutError:
            return shown
        if event["type"] == "state":
            shown.append(event["state"]["status"])


async def test_a_server_whose_ping_answer_comes_after_the_timeout_once_is_never_shown_not_answering() -> None:
    """Under load one ping answered after ``PROBE_TIMEOUT`` is not a dead server: the server that answers the next
    ping in time is never shown "not answering" (one late answer used to show it so until the next probe)."""
    async with running(slow_pings([PROBE_TIMEOUT + 1.0])) as (base, _):
        inspector = Inspector(f"{base}/mcp", mode="handshake")
        try:
            assert await inspector.connect() is None, inspector.error
            events = inspector.hub.subscribe()
            assert await inspector.probe() == "connected", inspector.error
            assert await probe_after_interval(inspector) == "connected", inspector.error
            assert "unreachable" not in await statuses_shown(events)
        finally:
            await inspector.aclose()


async def test_a_server_that_answers_no_ping_in_time_twice_in_a_row_is_shown_not_answering_until_it_answers() -> None:
    """A server that holds every ping (hung, not gone: nothing refuses the connection) is shown "not answering"
    after ``PROBE_TIMEOUTS_UNREACHABLE`` pings in a row got no answer in time, and "connected" once one does."""
    hung = [PROBE_TIMEOUT + 1.0] * PROBE_TIMEOUTS_UNREACHABLE
    async with running(slow_pings(hung)) as (base, _):
        inspector = Inspector(f"{base}/mcp", mode="handshake")
        try:
            assert await inspector.connect() is None, inspector.error
            for _ in range(PROBE_TIMEOUTS_UNREACHABLE - 1):
                assert await probe_after_interval(inspector) == "connected", inspector.error
            assert await probe_after_interval(inspector) == "unreachable"
            assert inspector.error is not None and "pings in a row got no answer" in inspector.error["message"]
            assert await probe_after_interval(inspector) == "connected", inspector.error
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
