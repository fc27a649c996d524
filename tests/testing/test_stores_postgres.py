"""The store contract kit (:mod:`mcpkit.testing.stores`) applied to the PostgreSQL stores on a real PostgreSQL
(initdb + postgres on 127.0.0.1, tests/support/postgres_server.py), each test on tables of a fresh prefix."""

from __future__ import annotations

import secrets

import pytest

from mcpkit.stores import EventStore, SessionStore
from mcpkit.testing.stores import EventStoreContract, SessionStoreContract
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)


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
