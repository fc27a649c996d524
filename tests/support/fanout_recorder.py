"""What a fan-out delivers, recorded: :class:`Recorder` (a FanoutTarget) bound to a fan-out that
:func:`recording` starts; and the cut-off scenarios each backend's fan-out must pass alike. For the tests of every
backend's fan-out (tests/stores/test_log_fanout.py, test_redis_fanout.py, test_postgres_fanout.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcpkit.stores.log import LOG_POSITION
from mcpkit.stores.log_fanout import LogFanout
from support.tcp_proxy import TcpProxy


class Recorder:
    """A FanoutTarget that records what a fan-out delivers, with the log position of each."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str | None]] = []
        self.missed = 0
        self.changed = asyncio.Event()

    async def deliver_list_changed(self, kind: str) -> None:
        self.events.append(("list_changed", kind, LOG_POSITION.get()))
        self.changed.set()

    async def deliver_resource_updated(self, uri: str) -> None:
        self.events.append(("resource_updated", uri, LOG_POSITION.get()))
        self.changed.set()

    async def deliver_missed(self) -> None:
        self.missed += 1
        self.changed.set()

    async def until(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.events) < count:
            assert time.monotonic() < deadline, f"{len(self.events)} of {count} events: {self.events[-5:]}"
            self.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), 0.2)

    async def until_missed(self, timeout: float, last: str | None = None) -> None:
        """Until the fan-out has said events were missed (its clients must look again) and, with ``last``, the
        last event recorded is the resource ``last``."""
        deadline = time.monotonic() + timeout
        while self.missed == 0 or (last is not None and (not self.events or self.events[-1][1] != last)):
            assert time.monotonic() < deadline, (self.missed, self.events[-3:])
            await asyncio.sleep(0.05)


async def recording(fanout: LogFanout[Any]) -> Recorder:
    """A :class:`Recorder` bound to ``fanout``, which is started."""
    recorder = Recorder()
    fanout.bind(recorder)
    await fanout.start()
    return recorder


async def cut_off_past_the_log_bound(
    a: LogFanout[Any],
    b: LogFanout[Any],
    proxy: TcpProxy,
    published: int,
    timeout: float,
    while_cut: Callable[[], Awaitable[None]] | None = None,
) -> Recorder:
    """B, cut off from the log (``proxy`` between them) while A publishes ``published`` events, far past what the
    log keeps, then reconnected: it tells its clients to look again once, then delivers what the log still had in
    order, up to the last (within ``timeout`` seconds); a position the log no longer holds reads as None.
    ``while_cut`` runs after the publishing, before B reconnects. B's recorder."""
    await recording(a)
    rb = await recording(b)
    proxy.cut()
    await asyncio.sleep(0.3)
    for i in range(published):
        await a.publish("resource_updated", f"mcpkit://r/{i}")
    if while_cut is not None:
        await while_cut()
    proxy.restore()
    await rb.until_missed(timeout, last=f"mcpkit://r/{published - 1}")
    assert rb.missed == 1 and b.missed == 1
    tail = [int(v.rsplit("/", 1)[1]) for _, v, _ in rb.events]
    assert tail == sorted(tail) and tail[-1] == published - 1
    assert await b.read("1-0") is None  # a position the log no longer holds: the caller must look again
    return rb


async def the_outbox_keeps_its_bound(a: LogFanout[Any], b: LogFanout[Any], proxy: TcpProxy, timeout: float) -> None:
    """B (``max_unsent=3``), cut off from the log, publishes 5 events: its own clients are told at once, its outbox
    keeps the last 3; reconnected, it logs them, and A's clients get those 3 and are told to look again for the two
    dropped (within ``timeout`` seconds)."""
    ra = await recording(a)
    rb = await recording(b)
    proxy.cut()
    started = time.monotonic()
    for i in range(5):  # two more than the outbox keeps
        await b.publish("resource_updated", f"mcpkit://r/{i}")
    assert time.monotonic() - started < 5.0
    assert [v for _, v, _ in rb.events] == [f"mcpkit://r/{i}" for i in range(5)]  # told at once
    assert len(b._unsent) == 3
    proxy.restore()
    await ra.until(3, timeout=timeout)
    await ra.until_missed(timeout)  # the two dropped ones: A's clients are told to look again
    assert [v for _, v, _ in ra.events] == [f"mcpkit://r/{i}" for i in (2, 3, 4)]
