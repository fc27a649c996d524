"""The runner of a peer's requests: how it writes their answers, and their end (:func:`mcpkit.engine.runner.drain`),
with real tasks on a real event loop."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest

from mcpkit.engine import BaseConnection, Outgoing, Peer
from mcpkit.engine.runner import drain


async def test_a_stop_during_the_drain_leaves_the_requests_the_stop_grace_then_cancels_the_rest() -> None:
    quick = asyncio.ensure_future(asyncio.sleep(0.2, "answered"))
    slow = asyncio.ensure_future(asyncio.sleep(30))
    tasks = [quick, slow]
    draining = asyncio.ensure_future(drain(lambda: [t for t in tasks if not t.done()], 30.0, stop_grace=0.5))
    await asyncio.sleep(0.05)
    t0 = time.monotonic()
    draining.cancel()  # (SIGTERM during the drain at the end of the input)
    with pytest.raises(asyncio.CancelledError):
        await draining
    assert 0.4 < time.monotonic() - t0 < 2.0  # the stop grace, not the drain's 30 s, not 0
    assert quick.result() == "answered"  # ended within the grace: not cancelled
    assert slow.cancelled()


async def test_a_second_stop_during_the_drain_cancels_the_requests_at_once() -> None:
    slow = asyncio.ensure_future(asyncio.sleep(30))
    draining = asyncio.ensure_future(drain(lambda: [slow] if not slow.done() else [], 30.0, stop_grace=10.0))
    await asyncio.sleep(0.05)
    draining.cancel()
    await asyncio.sleep(0.05)
    t0 = time.monotonic()
    draining.cancel()
    with pytest.raises(asyncio.CancelledError):
        await draining
    assert time.monotonic() - t0 < 1.0
    await asyncio.sleep(0)
    assert slow.cancelled()


class _CountingConnection(BaseConnection):
    """A connection whose writes never wait: it counts how each answer reached it."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.coroutines = 0

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        self.coroutines += 1
        self.sent.append(data)

    def send_now(self, data: bytes, msg: Outgoing | None = None) -> None:
        self.sent.append(data)


async def test_answers_made_at_once_are_written_through_the_outbox_send_now_without_a_coroutine() -> None:
    """The runner writes the answer of a request its handler answered at once with the connection's send_now: a
    write that waits for nothing costs no coroutine (hot path: docs/architecture.md)."""
    conn = _CountingConnection()
    peer = Peer(conn, request_handler=lambda ctx: {"echo": ctx.params})
    for k in range(3):
        assert peer.feed(orjson.dumps({"jsonrpc": "2.0", "id": k, "method": "m", "params": {"k": k}}))
    for _ in range(3):
        await asyncio.sleep(0)
    assert [orjson.loads(d)["result"] for d in conn.sent] == [{"echo": {"k": k}} for k in range(3)]
    assert conn.coroutines == 0


async def test_a_connection_without_its_own_send_now_is_written_through_send() -> None:
    """BaseConnection's default send_now is its send: a connection that overrides only send gets every answer."""

    class SendOnly(BaseConnection):
        def __init__(self) -> None:
            self.sent: list[bytes] = []

        async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
            await asyncio.sleep(0)  # (a write that waits)
            self.sent.append(data)

    conn = SendOnly()
    peer = Peer(conn, request_handler=lambda ctx: {})
    assert peer.feed(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    for _ in range(5):
        await asyncio.sleep(0)
    assert [orjson.loads(d)["id"] for d in conn.sent] == [1]
