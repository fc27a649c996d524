"""PostgresEventStore's follow across workers, against a real PostgreSQL: a worker following a stream another
worker writes is woken by the append's notification (well before its next read by the clock), and still reads
the stream while it cannot listen. (The store kit's event contract runs in tests/testing/test_stores.py.)"""

from __future__ import annotations

import asyncio
import secrets
import time

import pytest

from mcpkit.stores.postgres import PostgresEventStore
from mcpkit.stores.postgres.events import FOLLOW_POLL
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.postgres


async def test_a_follower_on_another_worker_is_woken_by_the_append_not_by_its_poll(postgres_url: str) -> None:  # noqa: F811
    prefix = f"t{secrets.token_hex(4)}_"
    writer, follower = PostgresEventStore(postgres_url, prefix=prefix), PostgresEventStore(postgres_url, prefix=prefix)
    try:
        await writer.append("s/1", 1, b"first")
        assert await follower.follow("s/1", 1, 0.2) == ([], False)  # (its LISTEN connection is open from here)
        for seq in (2, 3):
            waiting = asyncio.ensure_future(follower.follow("s/1", seq - 1, 5.0))
            await asyncio.sleep(0.3)  # (the follower has read, found nothing and waits)
            await writer.append("s/1", seq, b"event %d" % seq)
            appended = time.monotonic()
            assert await asyncio.wait_for(waiting, 10) == ([(seq, b"event %d" % seq)], False)
            # woken by the notification: a follower that only read every FOLLOW_POLL seconds would get it about
            # FOLLOW_POLL - 0.3 s after the append
            assert time.monotonic() - appended < FOLLOW_POLL / 2, seq
        # the answer, appended with a stream name too long for a notification, wakes every follower all the same
        name = "s/" + "x" * 2000
        await writer.append(name, 1, b"first")
        waiting = asyncio.ensure_future(follower.follow(name, 1, 5.0))
        await asyncio.sleep(0.3)
        await writer.append_last(name, 2, b"answer")
        appended = time.monotonic()
        assert await asyncio.wait_for(waiting, 10) == ([(2, b"answer")], True)
        assert time.monotonic() - appended < FOLLOW_POLL / 2
    finally:
        await writer.aclose()
        await follower.aclose()


async def test_a_follower_that_lost_its_listen_connection_still_reads_the_stream(postgres_url: str) -> None:  # noqa: F811
    """The poll is the safety net: with its LISTEN connection cut, a follower still gets the event (within the
    poll interval), and listens again on its next follow."""
    prefix = f"t{secrets.token_hex(4)}_"
    writer, follower = PostgresEventStore(postgres_url, prefix=prefix), PostgresEventStore(postgres_url, prefix=prefix)
    try:
        await writer.append("s/1", 1, b"first")
        assert await follower.follow("s/1", 1, 0.2) == ([], False)
        listener = follower._listener
        assert listener is not None
        async with writer.conn.acquire("test") as db:  # (cut by the server, as a failover or a restart would)
            await db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1", listener.get_server_pid()
            )
        waiting = asyncio.ensure_future(follower.follow("s/1", 1, 5.0))
        await asyncio.sleep(0.3)
        await writer.append("s/1", 2, b"second")
        assert await asyncio.wait_for(waiting, 10) == ([(2, b"second")], False)
        assert await follower.follow("s/1", 2, 0.2) == ([], False)
        assert follower._listener is not None and not follower._listener.is_closed()  # (listening again)
    finally:
        await writer.aclose()
        await follower.aclose()
