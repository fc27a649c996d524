"""The optional capabilities of a session store, declared with their defaults (:class:`BaseSessionStore`), and the
error every shared store raises when its backend cannot be reached (:class:`StoreUnavailable`), and the URL of a
backend as messages show it (:func:`without_password`)."""

from __future__ import annotations

from typing import Any


class StoreUnavailable(ConnectionError):
    """A shared store's backend (Redis, PostgreSQL) could not be reached in time, or failed less than its breaker's
    window ago. The HTTP endpoint answers a request that needs the store with 503 and this message. Importable as
    ``mcpkit.stores.redis.StoreUnavailable`` and ``mcpkit.stores.postgres.StoreUnavailable`` too (one class)."""


def without_password(url: str) -> str:
    """``url`` with the password of its user info masked (error messages end up in logs)."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{tail}"


class BaseSessionStore:
    """A :class:`~mcpkit.stores.SessionStore` with its optional capability declared: :meth:`touch`, with a default.

    The built-in stores derive from it and override :meth:`touch` (one step, one round trip). The Streamable HTTP
    endpoint calls :meth:`touch` on a store of this class; any other object with ``save``, ``load`` and
    ``delete`` (the :class:`~mcpkit.stores.SessionStore` protocol: a store written before this class existed) is
    read with ``load`` and renewed with ``save`` every third of its TTL, as before."""

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        """Record the session's state, its TTL renewed to ``ttl`` seconds (None: no expiry)."""
        raise NotImplementedError

    async def load(self, session_id: str) -> dict[str, Any] | None:
        """The session's state, or None when the store does not have it (or it expired)."""
        raise NotImplementedError

    async def delete(self, session_id: str) -> None:
        """Forget the session."""
        raise NotImplementedError

    async def touch(self, session_id: str, ttl: float | None) -> dict[str, Any] | None:
        """The session's state (None if gone or expired), its TTL renewed to ``ttl``. Default: :meth:`load`, then
        :meth:`save` of what it read; a store that reads and renews in one step overrides it."""
        state = await self.load(session_id)
        if state is not None:
            await self.save(session_id, state, ttl)
        return state
