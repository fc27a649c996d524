"""Contract tests for store backends you write yourself: does your Postgres, DynamoDB, ... store behave as mcpkit's
code expects of a :class:`~mcpkit.stores.SessionStore`, an :class:`~mcpkit.stores.EventStore`, a
:class:`~mcpkit.tasks.TaskStore` or a :class:`~mcpkit.stores.bus.Bus`?

Subclass a contract in your own pytest suite, build your backend in ``make_store`` (``make_bus``) with the bounds
the class declares (small ones, so the tests run fast against any backend), and pytest runs every test of the
contract against it::

    from mcpkit.testing.stores import SessionStoreContract

    class TestPostgresSessionStore(SessionStoreContract):
        ttl = 1.0   # the TTL the expiry test uses (seconds)

        async def make_store(self):
            return PostgresSessionStore(DSN, table=f"sessions_{secrets.token_hex(4)}")

Each test's docstring says what of mcpkit relies on the behaviour it checks; mcpkit's own stores (in memory and
Redis) pass every one of them. Needs pytest and pytest-asyncio (``pip install 'mcpkit[testing]'``); the tests run
in pytest-asyncio's ``auto`` and ``strict`` modes. See the testing guide ("Testing your own store backend").
"""

from __future__ import annotations

from ._bus import BusContract
from ._contract import Contract
from ._events import EventStoreContract
from ._sessions import SessionStoreContract
from ._tasks import TaskStoreContract

__all__ = ["BusContract", "Contract", "EventStoreContract", "SessionStoreContract", "TaskStoreContract"]
