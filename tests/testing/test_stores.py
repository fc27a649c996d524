"""The store contract kit (:mod:`mcpkit.testing.stores`) applied the way a user applies it: subclassed for the
in-memory stores, the Redis stores (a real redis-server on 127.0.0.1, and a real three-primary Redis Cluster for the
session and event stores) and the PostgreSQL session and event stores (a real PostgreSQL: initdb + postgres on
127.0.0.1), and shown to catch the deliberately broken stores of tests/support/broken_stores.py (a kit test that
cannot fail proves nothing). The guide's example runs as a user's project, in pytest-asyncio's strict mode."""

from __future__ import annotations

import re
import secrets
import textwrap
from typing import Any

import pytest

from mcpkit.stores import EventStore, InMemoryEventStore, InMemorySessionStore, SessionStore
from mcpkit.stores.bus import Bus, InMemoryBus
from mcpkit.tasks import InMemoryTaskStore, TaskStore
from mcpkit.testing.stores import BusContract, EventStoreContract, SessionStoreContract, TaskStoreContract
from support.broken_stores import (
    EarlyExpiryTaskStore,
    ForgetfulOwnerTaskStore,
    GappyEventStore,
    GreedyForgetEventStore,
    LostUpdateTaskStore,
    StaleTTLSessionStore,
    UnboundedBus,
    UndeadSessionStore,
)
from support.paths import REPO
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)
from support.user_pytest import run_pytest

# ---------------------------------------------------------------------------------------------- in memory


class TestInMemorySessionStore(SessionStoreContract):
    async def make_store(self) -> SessionStore:
        return InMemorySessionStore()


class TestInMemoryEventStore(EventStoreContract):
    max_streams_per_session = 4  # (max_streams bounds every session's streams together: here, one session's)

    async def make_store(self) -> EventStore:
        return InMemoryEventStore(max_events_per_stream=self.max_events_per_stream, max_streams=4)


class TestInMemoryTaskStore(TaskStoreContract):
    async def make_store(self) -> TaskStore:
        return InMemoryTaskStore(max_records_per_owner=self.max_records_per_owner, max_records=self.max_records)


class TestInMemoryBus(BusContract):
    _bus: InMemoryBus | None = None

    async def make_bus(self) -> Bus:
        if self._bus is None:  # (one process: every worker shares the instance)
            self._bus = InMemoryBus(queue_size=self.queue_size or 1024)
        return self._bus


# ---------------------------------------------------------------------------------------------- Redis


class OnRedis:
    """A fresh key prefix on the session's redis-server for each test (what a user does with a DSN fixture)."""

    url: str
    prefix: str
    cluster = False

    @pytest.fixture(autouse=True)
    def _on_redis(self, redis_url: str) -> None:  # noqa: F811
        self.url, self.prefix = redis_url, f"contract{secrets.token_hex(4)}:"


class OnRedisCluster(OnRedis):
    cluster = True

    @pytest.fixture(autouse=True)
    def _on_redis(self, redis_cluster_url: str) -> None:  # noqa: F811
        self.url, self.prefix = redis_cluster_url, f"contract{secrets.token_hex(4)}:"


@pytest.mark.redis
class TestRedisSessionStore(OnRedis, SessionStoreContract):
    async def make_store(self) -> SessionStore:
        from mcpkit.stores.redis import RedisSessionStore

        return RedisSessionStore(self.url, prefix=self.prefix, cluster=self.cluster)


@pytest.mark.redis
class TestRedisEventStore(OnRedis, EventStoreContract):
    max_streams_per_session = 4
    ttl = 1.0

    async def make_store(self) -> EventStore:
        from mcpkit.stores.redis import RedisEventStore

        store = RedisEventStore(
            self.url,
            prefix=self.prefix,
            cluster=self.cluster,
            max_events_per_stream=self.max_events_per_stream,
            max_streams_per_session=self.max_streams_per_session or 1000,
            ttl=self.ttl,
        )
        # The client of blocking reads connected now, as a worker's fan-out has it: made on the first follow, a
        # Redis Cluster client discovers the cluster first, which took over a second on a loaded machine, and the
        # streams of these tests expire 1 s after their last write (a followed stream then read as gone).
        await store.conn.blocking()[0].ping()
        return store


@pytest.mark.redis
class TestRedisClusterSessionStore(OnRedisCluster, TestRedisSessionStore):
    pass


@pytest.mark.redis
class TestRedisClusterEventStore(OnRedisCluster, TestRedisEventStore):
    pass


@pytest.mark.redis
class TestRedisTaskStore(OnRedis, TaskStoreContract):
    async def make_store(self) -> TaskStore:
        from mcpkit.stores.redis import RedisTaskStore

        return RedisTaskStore(
            self.url,
            prefix=self.prefix,
            max_records_per_owner=self.max_records_per_owner,
            max_records=self.max_records,
        )


@pytest.mark.redis
class TestRedisBus(OnRedis, BusContract):
    async def make_bus(self) -> Bus:
        from mcpkit.stores.redis import RedisBus

        return RedisBus(self.url, prefix=self.prefix, queue_size=self.queue_size or 1024)


# ---------------------------------------------------------------------------------------------- PostgreSQL


class OnPostgres:
    """Tables of a fresh prefix on the session's PostgreSQL for each test (what a user does with a DSN fixture)."""

    url: str
    prefix: str

    @pytest.fixture(autouse=True)
    def _on_postgres(self, postgres_url: str) -> None:  # noqa: F811
        self.url, self.prefix = postgres_url, f"contract{secrets.token_hex(4)}_"


class TestPostgresSessionStore(OnPostgres, SessionStoreContract):
    async def make_store(self) -> SessionStore:
        from mcpkit.stores.postgres import PostgresSessionStore

        return PostgresSessionStore(self.url, prefix=self.prefix)


class TestPostgresEventStore(OnPostgres, EventStoreContract):
    max_streams_per_session = 4
    ttl = 1.0

    async def make_store(self) -> EventStore:
        from mcpkit.stores.postgres import PostgresEventStore

        return PostgresEventStore(
            self.url,
            prefix=self.prefix,
            max_events_per_stream=self.max_events_per_stream,
            max_streams_per_session=self.max_streams_per_session or 1000,
            ttl=self.ttl,
        )


class TestPostgresTaskStore(OnPostgres, TaskStoreContract):
    async def make_store(self) -> TaskStore:
        from mcpkit.stores.postgres import PostgresTaskStore

        return PostgresTaskStore(
            self.url,
            prefix=self.prefix,
            max_records_per_owner=self.max_records_per_owner,
            max_records=self.max_records,
        )


# ---------------------------------------------------------------------------------------------- the kit catches bugs


async def test_the_session_contract_catches_a_ttl_that_activity_does_not_renew() -> None:
    with pytest.raises(AssertionError, match="save did not renew the TTL"):
        await SessionStoreContract().test_an_idle_session_expires_and_activity_renews_it(StaleTTLSessionStore())


async def test_the_session_contract_catches_a_session_that_never_expires() -> None:
    with pytest.raises(AssertionError, match=r"idle for 1\.6x its TTL still loads"):
        await SessionStoreContract().test_an_idle_session_expires_and_activity_renews_it(UndeadSessionStore())


async def test_the_event_contract_catches_a_replay_with_a_gap() -> None:
    contract = EventStoreContract()
    store = GappyEventStore(max_events_per_stream=contract.max_events_per_stream)
    with pytest.raises(AssertionError):
        await contract.test_a_stream_keeps_its_last_events_and_refuses_a_replay_with_a_gap(store)
    with pytest.raises(AssertionError):
        await contract.test_a_stream_that_starts_late_refuses_a_replay_from_before_its_start(GappyEventStore())


async def test_the_event_contract_catches_a_forget_that_reaches_another_session() -> None:
    with pytest.raises(AssertionError, match="forget dropped s10/0"):
        await EventStoreContract().test_forget_drops_the_streams_of_a_session_and_nothing_else(GreedyForgetEventStore())


def _task_store(kind: type[InMemoryTaskStore], contract: TaskStoreContract) -> InMemoryTaskStore:
    return kind(max_records_per_owner=contract.max_records_per_owner, max_records=contract.max_records)


async def test_the_task_contract_catches_a_lost_update() -> None:
    contract = TaskStoreContract()
    with pytest.raises(AssertionError, match="an update was lost"):
        await contract.test_concurrent_updates_of_one_task_are_all_applied(_task_store(LostUpdateTaskStore, contract))


async def test_the_task_contract_catches_an_owner_bound_that_drops_another_owners_task() -> None:
    contract = TaskStoreContract()
    store = _task_store(ForgetfulOwnerTaskStore, contract)
    with pytest.raises(AssertionError):
        await contract.test_an_owner_past_its_kept_tasks_loses_its_own_oldest_finished_one(store)


async def test_the_task_contract_catches_a_task_in_progress_dropped_at_its_time_to_live() -> None:
    contract = TaskStoreContract()
    store = _task_store(EarlyExpiryTaskStore, contract)
    with pytest.raises(AssertionError):
        await contract.test_a_finished_task_goes_at_the_end_of_its_time_to_live(store)


async def test_the_bus_contract_catches_an_unbounded_subscriber_queue() -> None:
    contract, bus = BusContract(), UnboundedBus(queue_size=4)
    try:
        with pytest.raises(AssertionError):
            await contract.test_a_subscriber_that_falls_behind_keeps_the_newest_messages((bus, bus))
    finally:
        await bus.aclose()


async def test_a_contract_without_make_store_says_what_to_override() -> None:
    class HalfDone(SessionStoreContract):
        pass

    with pytest.raises(NotImplementedError, match="HalfDone: override make_store"):
        await HalfDone().make_store()


# ---------------------------------------------------------------------------------------------- the guide's example


def _guide_files() -> dict[str, str]:
    """The files of the guide's example: each Python block of "Testing your own store backend" whose first line is
    ``# <path>``."""
    guide = (REPO / "docs" / "guides" / "testing.md").read_text(encoding="utf-8")
    section = guide.split("## Testing your own store backend", 1)[1].split("\n## ", 1)[0]
    files: dict[str, str] = {}
    for block in re.findall(r"```python\n(.*?)```", section, re.S):
        first, _, body = block.partition("\n")
        if first.startswith("# ") and first.endswith(".py"):
            files[first[2:].strip()] = body
    return files


def test_the_guides_store_backend_example_passes_the_contract_in_strict_mode(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The example of docs/guides/testing.md (a SQLite session store and its contract test), run as a user's
    project with pytest-asyncio in its default strict mode: collected, run, every test passing."""
    monkeypatch.delenv("MCPKIT_COMPLIANCE_RESULTS", raising=False)
    files = _guide_files()
    assert sorted(files) == ["sqlite_sessions.py", "tests/test_sqlite_sessions.py"]
    for path, text in files.items():
        target = pytester.path / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text), encoding="utf-8")
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\npythonpath = .\n")
    result = run_pytest(pytester, "-q", timeout=120)
    outcomes: dict[str, Any] = result.parseoutcomes()
    assert outcomes.get("passed") == 6 and "failed" not in outcomes, result.stdout.str()
