"""The contract of a :class:`~mcpkit.stores.SessionStore`: :class:`SessionStoreContract`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ...stores import BaseSessionStore, SessionStore
from ._contract import Contract

#: a session's state as the Streamable HTTP endpoint saves it (every JSON type, text beyond ASCII)
STATE: dict[str, Any] = {
    "version": "2025-11-25",
    "initialized": True,
    "client_capabilities": {"roots": {"listChanged": True}, "sampling": {}},
    "client_info": {"name": "client é", "version": "1.0"},
    "log_level": None,
    "subscriptions": ["file:///a", "mcpkit://b ✓"],
    "n": 3,
    "ratio": 0.5,
}


class SessionStoreContract(Contract[SessionStore]):
    """The behaviour the Streamable HTTP endpoint relies on from a session store (handshake-era sessions served by
    any worker). Subclass it in your test suite and build your store in :meth:`~Contract.make_store`::

        class TestMySessionStore(SessionStoreContract):
            async def make_store(self) -> SessionStore:
                return MySessionStore(dsn, table=f"t{secrets.token_hex(4)}")

    The endpoint saves a session's whole state when it changes, re-reads it on every request (so a DELETE on
    one worker is a 404 on all), renews its TTL with that read (:meth:`~mcpkit.stores.BaseSessionStore.touch` on
    a store derived from :class:`~mcpkit.stores.BaseSessionStore`, else ``load`` then ``save``) and counts the
    TTL from the session's last activity. A store that is not a ``BaseSessionStore`` skips the ``touch`` tests.
    """

    #: the TTL (seconds) the expiry test gives its sessions; it waits about three times as long. Raise it for a
    #: backend whose expiry is coarse (it must still expire an idle session within the test's waits).
    ttl: float = 1.0

    async def test_a_saved_session_loads_as_it_was_saved(self, store: SessionStore) -> None:
        """``load`` gives back the state ``save`` kept, every JSON type intact, for as many sessions as are saved:
        another worker restores the session from it (version, capabilities, log level, subscriptions)."""
        await store.save("contract-a", STATE, 60)
        await store.save("contract-b", {"version": "2025-03-26"}, None)
        assert await store.load("contract-a") == STATE
        assert await store.load("contract-b") == {"version": "2025-03-26"}

    async def test_an_unknown_session_loads_as_none(self, store: SessionStore) -> None:
        """``load`` of a session never saved is None (not an empty state): the endpoint answers 404 for it."""
        assert await store.load("contract-never-saved") is None
        await store.save("contract-known", STATE, 60)
        assert await store.load("contract-know") is None

    async def test_save_replaces_the_whole_state(self, store: SessionStore) -> None:
        """A second ``save`` replaces the state (a key the new state lacks is gone, not merged back): the endpoint
        saves the whole state whenever a client changes it (``logging/setLevel``, ``resources/unsubscribe``)."""
        await store.save("contract-s", STATE, 60)
        changed = {k: v for k, v in STATE.items() if k != "subscriptions"} | {"log_level": "debug"}
        await store.save("contract-s", changed, 60)
        assert await store.load("contract-s") == changed

    async def test_delete_forgets_the_session_and_nothing_else(self, store: SessionStore) -> None:
        """After ``delete`` the session loads as None (a DELETE on one worker is a 404 on every worker); other
        sessions stay; deleting an unknown session is no error."""
        await store.save("contract-gone", STATE, 60)
        await store.save("contract-stays", STATE, 60)
        await store.delete("contract-gone")
        await store.delete("contract-never-saved")
        assert await store.load("contract-gone") is None
        assert await store.load("contract-stays") == STATE

    async def test_touch_reads_the_state_and_never_brings_back_a_deleted_session(self, store: SessionStore) -> None:
        """``touch`` returns the state (what ``load`` would), None for a session unknown or deleted, and does not
        recreate it: the endpoint reads every request's session with it."""
        if not isinstance(store, BaseSessionStore):
            pytest.skip("not a BaseSessionStore: the endpoint reads it with load and renews it with save")
        await store.save("contract-t", STATE, 60)
        assert await store.touch("contract-t", 60) == STATE
        assert await store.touch("contract-never-saved", 60) is None
        await store.delete("contract-t")
        assert await store.touch("contract-t", 60) is None
        assert await store.load("contract-t") is None

    async def test_an_idle_session_expires_and_activity_renews_it(self, store: SessionStore) -> None:
        """A session saved with a TTL loads as None once it has been idle longer than that; each ``save`` (and each
        ``touch``) counts the TTL again from then (the endpoint's idle timeout counts from the last request, on
        any worker); ``ttl=None`` never expires, and a ``touch`` with ``ttl=None`` makes a session permanent."""
        ttl = self.ttl
        for name in ("idle", "saved", "touched", "pinned"):
            await store.save(f"contract-{name}", {"name": name}, ttl)
        await store.save("contract-forever", {"name": "forever"}, None)
        if isinstance(store, BaseSessionStore):
            assert await store.touch("contract-pinned", None) == {"name": "pinned"}
        for n in range(3):  # (gaps of 0.4 TTL: a late wake-up on a loaded machine has 0.6 TTL of room)
            await asyncio.sleep(0.4 * ttl)
            await store.save("contract-saved", {"name": "saved", "n": n}, ttl)
            if isinstance(store, BaseSessionStore):
                assert await store.touch("contract-touched", ttl) == {"name": "touched"}
        await asyncio.sleep(0.4 * ttl)
        assert await store.load("contract-idle") is None, "a session idle for 1.6x its TTL still loads"
        assert await store.load("contract-saved") == {"name": "saved", "n": 2}, "save did not renew the TTL"
        if isinstance(store, BaseSessionStore):
            assert await store.load("contract-touched") == {"name": "touched"}, "touch did not renew the TTL"
            assert await store.load("contract-pinned") == {"name": "pinned"}, "touch(ttl=None) did not keep it"
        await asyncio.sleep(1.2 * ttl)
        assert await store.load("contract-saved") is None, "a session idle for 1.2x its TTL still loads"
        assert await store.load("contract-forever") == {"name": "forever"}, "a session saved with ttl=None expired"
        if isinstance(store, BaseSessionStore):
            assert await store.touch("contract-touched", ttl) is None, "touch brought back an expired session"
