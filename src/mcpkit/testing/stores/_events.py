"""The contract of an :class:`~mcpkit.stores.EventStore` (and of the followable kinds): :class:`EventStoreContract`."""

from __future__ import annotations

import asyncio

import pytest

from ...stores import EventStore, FollowableEventStore, RequestEventStore
from ._contract import Contract


def _events(last: int, first: int = 1) -> list[tuple[int, bytes]]:
    """Events ``first..last`` as the endpoint writes them (one JSON-RPC message each)."""
    return [
        (n, b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"n":%d}}' % n)
        for n in range(first, last + 1)
    ]


class EventStoreContract(Contract[EventStore]):
    """The behaviour the Streamable HTTP endpoint relies on from an event store (SSE streams resumed with
    ``Last-Event-ID``, on any worker). Subclass it and build your store with this class's bounds::

        class TestMyEventStore(EventStoreContract):
            max_events_per_stream = 3
            ttl = 1.0

            async def make_store(self) -> EventStore:
                return MyEventStore(dsn, max_events_per_stream=self.max_events_per_stream, ttl=self.ttl)

    A stream is named ``<session>/<n>`` and numbered from 1 by the endpoint, which appends every event it sends,
    replays those after a client's last one, and refuses the resumption (HTTP 400) when ``replay`` returns None:
    so a replay must never have a hole. When the session ends it calls ``forget("<session>/")``. A
    :class:`~mcpkit.stores.FollowableEventStore` and a :class:`~mcpkit.stores.RequestEventStore` are held to
    their extra methods too (the tests of a kind the store is not are skipped).
    """

    #: events the store keeps per stream (build the store with it)
    max_events_per_stream: int = 3
    #: streams the store keeps per session, the least recently written going first (build the store with it);
    #: None: the store has no such bound (the test is skipped)
    max_streams_per_session: int | None = None
    #: seconds after its last append (or replay) when a stream expires (build the store with it); None: the
    #: store has no TTL (the test is skipped; then it must be bounded otherwise, as the in-memory store is by bytes)
    ttl: float | None = None

    async def test_replay_returns_the_events_after_an_id_in_order(self, store: EventStore) -> None:
        """``replay(stream, after)`` is every event numbered above ``after``, in order, data untouched; after the
        last event it is ``[]`` (nothing missed: the client is up to date), not None."""
        events = _events(3)
        for seq, data in events:
            await store.append("contract/0", seq, data)
        assert await store.replay("contract/0", 0) == events
        assert await store.replay("contract/0", 1) == events[1:]
        assert await store.replay("contract/0", 3) == []
        assert await store.replay("contract/0", 50) == []

    async def test_an_unknown_stream_replays_as_none(self, store: EventStore) -> None:
        """A stream never written (even one beside a known stream, or whose name starts like one) replays as None:
        the endpoint refuses to resume it rather than pretend it was empty."""
        assert await store.replay("contract/0", 0) is None
        await store.append("contract/1", 1, b"x")
        assert await store.replay("contract/2", 0) is None
        assert await store.replay("contract/", 0) is None
        assert await store.replay("contract/10", 0) is None

    async def test_streams_are_independent_and_event_bytes_are_kept_exactly(self, store: EventStore) -> None:
        """Interleaved appends to two streams stay apart, and any bytes (NUL, CR LF, non-UTF-8, empty) replay as
        they were appended: an event is a message already encoded for the wire."""
        odd = bytes(range(256)) + b"\r\n\n\x00"
        await store.append("contract-a/0", 1, odd)
        await store.append("contract-b/0", 1, b"b1")
        await store.append("contract-a/0", 2, b"")
        await store.append("contract-b/0", 2, b"b2")
        assert await store.replay("contract-a/0", 0) == [(1, odd), (2, b"")]
        assert await store.replay("contract-b/0", 0) == [(1, b"b1"), (2, b"b2")]

    async def test_a_stream_that_starts_late_refuses_a_replay_from_before_its_start(self, store: EventStore) -> None:
        """A stream may start above 1 (a worker continues a stream another worker began): replay from just before
        its first event works; from earlier, the events in between were never kept, so it is None."""
        events = _events(4, first=3)
        for seq, data in events:
            await store.append("contract/5", seq, data)
        assert await store.replay("contract/5", 2) == events
        assert await store.replay("contract/5", 3) == events[1:]
        assert await store.replay("contract/5", 1) is None

    async def test_a_stream_keeps_its_last_events_and_refuses_a_replay_with_a_gap(self, store: EventStore) -> None:
        """Past ``max_events_per_stream`` the oldest events go; a replay that would need one of them is None (the
        client gets an error, not a stream with a hole), one that needs only what is kept works."""
        keep = self.max_events_per_stream
        events = _events(keep + 4)
        for seq, data in events:
            await store.append("contract/0", seq, data)
        last = len(events)
        assert await store.replay("contract/0", last - keep) == events[-keep:]
        assert await store.replay("contract/0", last - keep - 1) is None
        assert await store.replay("contract/0", 0) is None

    async def test_forget_drops_the_streams_of_a_session_and_nothing_else(self, store: EventStore) -> None:
        """``forget("<session>/")`` (the session ended) drops every stream of that session and no other (not those of
        a session whose id only starts the same); a stream forgotten starts over from scratch."""
        for name in ("s1/0", "s1/1", "s1/27", "s10/0", "s2/0"):
            await store.append(f"contract-{name}", 1, name.encode())
        await store.forget("contract-s1/")
        for name in ("s1/0", "s1/1", "s1/27"):
            assert await store.replay(f"contract-{name}", 0) is None, f"{name} outlived forget"
        for name in ("s10/0", "s2/0"):
            assert await store.replay(f"contract-{name}", 0) == [(1, name.encode())], f"forget dropped {name}"
        await store.forget("contract-nothing/")
        await store.append("contract-s1/0", 1, b"again")
        assert await store.replay("contract-s1/0", 0) == [(1, b"again")]

    async def test_a_session_keeps_its_latest_streams_up_to_its_bound(self, store: EventStore) -> None:
        """Past ``max_streams_per_session`` streams of one session (each answer streamed is one) the least recently
        written go whole, so one session cannot fill the store; the latest stay resumable."""
        bound = self.max_streams_per_session
        if bound is None:
            pytest.skip("max_streams_per_session is None: the store declares no such bound")
        for n in range(bound + 2):
            await store.append(f"contract/{n}", 1, b"%d" % n)
        for n in (0, 1):
            assert await store.replay(f"contract/{n}", 0) is None, f"stream {n} of {bound + 2} was kept"
        for n in range(2, bound + 2):
            assert await store.replay(f"contract/{n}", 0) == [(1, b"%d" % n)], f"stream {n} was dropped"

    async def test_an_abandoned_stream_expires_and_appends_keep_a_stream_alive(self, store: EventStore) -> None:
        """A stream not written for longer than ``ttl`` replays as None (a client that never comes back costs
        nothing for long); each append counts the TTL again."""
        ttl = self.ttl
        if ttl is None:
            pytest.skip("ttl is None: the store declares no TTL")
        await store.append("contract-idle/0", 1, b"x")
        await store.append("contract-busy/0", 1, b"y")
        for seq in (2, 3, 4):
            await asyncio.sleep(0.4 * ttl)
            await store.append("contract-busy/0", seq, b"y")
        await asyncio.sleep(0.4 * ttl)
        assert await store.replay("contract-idle/0", 0) is None, "a stream idle for 1.6x its TTL still replays"
        assert await store.replay("contract-busy/0", 3) == [(4, b"y")], "a stream kept alive by appends expired"
        await asyncio.sleep(1.2 * ttl)
        assert await store.replay("contract-busy/0", 3) is None, "a stream idle for 1.2x its TTL still replays"

    async def test_a_followed_stream_gives_its_events_and_says_when_the_last_came(self, store: EventStore) -> None:
        """(A :class:`~mcpkit.stores.FollowableEventStore`.) ``follow`` gives the events after ``after`` and whether
        the one kept by ``append_last`` (the answer) is among them; ``([], False)`` when nothing comes within the
        timeout; None for a stream that is gone. A worker resuming another worker's stream stops at the answer."""
        if not isinstance(store, FollowableEventStore):
            pytest.skip("not a FollowableEventStore")
        await store.append("contract/0", 1, b"a")
        assert await store.follow("contract/0", 0, 0) == ([(1, b"a")], False)
        assert await store.follow("contract/0", 1, 0.2) == ([], False)
        waiting = asyncio.ensure_future(store.follow("contract/0", 1, 5.0))
        await asyncio.sleep(0.1)
        await store.append_last("contract/0", 2, b"answer")
        assert await asyncio.wait_for(waiting, 6.0) == ([(2, b"answer")], True)
        assert await store.follow("contract/0", 0, 0) == ([(1, b"a"), (2, b"answer")], True)
        assert await store.follow("contract/9", 0, 0) is None

    async def test_the_request_a_stream_answers_is_kept_with_it(self, store: EventStore) -> None:
        """(A :class:`~mcpkit.stores.RequestEventStore`.) ``request_of`` gives the id ``append_first`` kept, string or
        integer as it was; None for a stream without one: a follower whose writer died answers that request."""
        if not isinstance(store, RequestEventStore):
            pytest.skip("not a RequestEventStore")
        await store.append_first("contract/1", 1, b"first", "req-1")
        await store.append_first("contract/2", 1, b"first", 7)
        await store.append("contract/3", 1, b"first")
        assert await store.request_of("contract/1") == "req-1"
        assert await store.request_of("contract/2") == 7
        assert await store.request_of("contract/3") is None
        assert await store.replay("contract/1", 0) == [(1, b"first")]
