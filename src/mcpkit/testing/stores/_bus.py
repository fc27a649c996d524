"""The contract of a :class:`~mcpkit.stores.bus.Bus`: :class:`BusContract`."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from ...stores.bus import Bus, Subscription

try:
    import pytest_asyncio
except ImportError as exc:  # pragma: no cover (the testing extra brings it)
    raise ImportError("mcpkit.testing.stores needs pytest-asyncio: pip install 'mcpkit[testing]'") from exc


async def _take(sub: Subscription, n: int, timeout: float = 5.0) -> list[bytes]:
    """The next ``n`` messages of ``sub`` (fails after ``timeout`` seconds)."""
    out: list[bytes] = []

    async def run() -> None:
        async for data in sub:
            out.append(data)
            if len(out) == n:
                return

    try:
        await asyncio.wait_for(run(), timeout)
    except TimeoutError:
        pytest.fail(f"{len(out)} of {n} messages arrived within {timeout:.0f}s: {out[:5]}...")
    return out


async def _nothing_more(sub: Subscription, wait: float = 0.2) -> None:
    with contextlib.suppress(TimeoutError):
        extra = await asyncio.wait_for(sub.__anext__(), wait)
        pytest.fail(f"a message arrived that should not have: {extra!r}")


class BusContract:
    """The behaviour :class:`~mcpkit.stores.bus.BusFanout` (change notifications between workers) and your own
    channels rely on from a bus. Subclass it; :meth:`make_bus` is called once per worker a test simulates::

        class TestMyBus(BusContract):
            queue_size = 4

            async def make_bus(self) -> Bus:
                return MyBus(dsn, queue_size=self.queue_size)

    Delivery is at most once, but while a subscriber keeps up it gets every message of its channel, in
    publication order, whichever worker published it; each subscriber's queue is bounded (one that falls behind
    loses its oldest messages, never the newest). The class name does not start with ``Test``: pytest collects
    only your subclass.
    """

    pytestmark: list[pytest.MarkDecorator] = [pytest.mark.asyncio]

    #: the most messages a subscriber's queue holds (build the bus with it); None: the test of the bound is
    #: skipped (then the bus must be bounded some other way)
    queue_size: int | None = 4

    async def make_bus(self) -> Bus:
        """A bus as one worker sees it, on the backend every bus of this test shares (override it). For a bus in
        one process, return the same instance each time; keep tests apart (a fresh channel prefix)."""
        raise NotImplementedError(f"{type(self).__name__}: override make_bus() to build the bus under test")

    async def close_bus(self, bus: Bus) -> None:
        """Close a bus :meth:`make_bus` returned (once per distinct bus)."""
        await bus.aclose()

    @pytest_asyncio.fixture
    async def buses(self) -> AsyncIterator[tuple[Bus, Bus]]:
        """Two workers' buses (:meth:`make_bus` twice), closed after the test."""
        made = (await self.make_bus(), await self.make_bus())
        try:
            yield made
        finally:
            for bus in {id(b): b for b in made}.values():
                await self.close_bus(bus)

    async def test_every_subscriber_on_every_worker_gets_its_channels_messages_in_order(
        self, buses: tuple[Bus, Bus]
    ) -> None:
        """A message published on one worker reaches every subscriber of its channel, on that worker and the
        others, in publication order and byte for byte; a subscriber of another channel gets none of them."""
        one, two = buses
        subs = [await one.subscribe("contract-news"), await one.subscribe("contract-news")]
        subs.append(await two.subscribe("contract-news"))
        other = await two.subscribe("contract-newsletter")
        messages = [b"m%d" % n for n in range(50)] + [b"\x00\xff binary", b""]
        batch = self.queue_size or 16  # (a subscriber reads as they come: never more than its queue holds)
        for at in range(0, len(messages), batch):
            for data in messages[at : at + batch]:
                await two.publish("contract-news", data)
            for sub in subs:
                assert await _take(sub, len(messages[at : at + batch])) == messages[at : at + batch]
        await one.publish("contract-newsletter", b"other")
        assert await _take(other, 1) == [b"other"]
        for sub in (*subs, other):
            await sub.aclose()

    async def test_a_closed_subscription_ends_and_the_channel_goes_on(self, buses: tuple[Bus, Bus]) -> None:
        """After ``aclose`` a subscription's iteration ends and gets nothing published later; the other subscribers
        of the channel go on, and a channel every subscriber left works again for a new one."""
        bus, _ = buses
        keep, gone = await bus.subscribe("contract-c"), await bus.subscribe("contract-c")
        await bus.publish("contract-c", b"1")
        assert await _take(gone, 1) == [b"1"]
        await gone.aclose()
        await bus.publish("contract-c", b"2")
        assert await _take(keep, 2) == [b"1", b"2"]
        assert [m async for m in gone] == [], "a closed subscription got a message"
        await keep.aclose()
        late = await bus.subscribe("contract-c")
        await bus.publish("contract-c", b"3")
        assert await _take(late, 1) == [b"3"]
        await late.aclose()

    async def test_a_subscriber_that_falls_behind_keeps_the_newest_messages(self, buses: tuple[Bus, Bus]) -> None:
        """A subscriber that reads nothing while more than ``queue_size`` messages are published then gets the
        newest ``queue_size`` of them, in order, and no more: a slow reader costs bounded memory and still sees
        the latest changes."""
        size = self.queue_size
        if size is None:
            pytest.skip("queue_size is None: the bus declares no bound on a subscriber's queue")
        bus, _ = buses
        slow = await bus.subscribe("contract-slow")
        sent = [b"%d" % n for n in range(size + 6)]
        for data in sent:
            await bus.publish("contract-slow", data)
        await asyncio.sleep(0.2)  # (a backend's reader delivers meanwhile)
        assert await _take(slow, size) == sent[-size:]
        await _nothing_more(slow)
        await slow.aclose()
