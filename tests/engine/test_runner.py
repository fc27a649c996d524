"""The end of a peer's requests (:func:`mcpkit.engine.runner.drain`), with real tasks on a real event loop."""

from __future__ import annotations

import asyncio
import time

import pytest

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
