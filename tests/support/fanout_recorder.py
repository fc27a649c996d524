"""What a fan-out delivers, recorded: :class:`Recorder` (a FanoutTarget) bound to a fan-out that
:func:`recording` starts. For the tests of every backend's fan-out (tests/stores/test_log_fanout.py,
test_redis_fanout.py, test_postgres_fanout.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from mcpkit.stores.log import LOG_POSITION
from mcpkit.stores.log_fanout import LogFanout


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


async def recording(fanout: LogFanout[Any]) -> Recorder:
    """A :class:`Recorder` bound to ``fanout``, which is started."""
    recorder = Recorder()
    fanout.bind(recorder)
    await fanout.start()
    return recorder
