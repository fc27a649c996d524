"""The upstream tokens an OAuth proxy (:mod:`mcpkit.auth.upstream_login`) keeps per sign-in, and their refresh.

Each sign-in's tokens are kept sealed (:class:`~mcpkit.auth.upstream_state.Sealer`) in the proxy's state storage
under the digest of its grant family (the ``grant_id`` of the proxy's tokens), with the user and client they belong
to. An expired access token is refreshed with the provider's refresh token once across every replica: the replica
that takes the storage's lease (:class:`~mcpkit.auth.upstream_state.RefreshLeaseStorage`) refreshes, the others
wait and read what it kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import secrets
import time
import weakref
from collections.abc import Callable

import orjson

from .upstream import UpstreamError, UpstreamProvider, UpstreamTokens
from .upstream_state import InMemoryUpstreamState, RefreshLeaseStorage, Sealer, UpstreamStateStorage, state_key

logger: logging.Logger = logging.getLogger(__name__)

__all__ = ["REFRESH_LEASE_MARGIN", "UpstreamTokenKeeper"]

#: how long a replica's lease on refreshing one sign-in's upstream tokens outlives the provider's ``timeout``
#: (seconds): a lease whose replica died mid-refresh ends by itself then
REFRESH_LEASE_MARGIN: float = 5.0


class UpstreamTokenKeeper:
    """The upstream tokens of an OAuth proxy's sign-ins: kept (at most ``max_tokens``, each ``token_ttl`` seconds
    after its login or last refresh, by the clock ``now``), read, refreshed once across replicas, and taken when
    their grant is revoked. :attr:`state` and :attr:`leases` are the storage's once the proxy is bound to its
    authorization server (its own, in this process, until then)."""

    def __init__(
        self,
        provider: UpstreamProvider,
        sealer: Sealer,
        now: Callable[[], float],
        *,
        max_tokens: int,
        token_ttl: float,
    ) -> None:
        self.provider = provider
        self.now = now
        self.max_tokens = max_tokens
        self.token_ttl = token_ttl
        own = InMemoryUpstreamState()
        self.state: UpstreamStateStorage = own
        self.leases: RefreshLeaseStorage = own
        self._sealer = sealer
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def keep(self, family: str, subject: str, client_id: str, tokens: UpstreamTokens) -> None:
        """Keep the upstream tokens of a sign-in, under its grant family (the ``grant_id`` of the proxy's tokens)."""
        key, now = state_key("upstream", family), self.now()
        kept_until = now + self.token_ttl
        record = {"tokens": dataclasses.asdict(tokens), "kept_until": kept_until, "user": [subject, client_id]}
        sealed = self._sealer.seal(key, orjson.dumps(record))
        await self.state.put_upstream(key, sealed, kept_until, now, self.max_tokens)

    async def take(self, family: str) -> UpstreamTokens | None:
        """The upstream tokens of the grant ``family``, forgotten here at once (its grant was revoked)."""
        key = state_key("upstream", family)
        tokens = await self._kept(key, None)
        await self.state.drop_upstream(key)
        return tokens

    async def access_token(self, family: str, subject: str, client_id: str) -> str | None:
        """The provider's access token of the sign-in ``family`` (of that user and client), refreshed when it
        expired; None when there is none (forgotten, or refused at refresh)."""
        key, user = state_key("upstream", family), [subject, client_id]
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        async with lock:  # one refresh at a time per sign-in in this process (and the lease: across replicas)
            tokens = await self._kept(key, user)
            if tokens is not None and self._expired(tokens):
                return await self._refresh(key, family, user)
            return tokens.access_token if tokens is not None else None

    async def _kept(self, key: str, user: list[str] | None) -> UpstreamTokens | None:
        """The upstream tokens kept under ``key``, if still kept (and, ``user`` given, of that subject and client)."""
        sealed = await self.state.get_upstream(key, self.now())
        data = self._sealer.open(key, sealed) if sealed is not None else None
        if data is None:
            return None
        record = orjson.loads(data)
        if record["kept_until"] < self.now():
            await self.state.drop_upstream(key)
            return None
        if user is not None and record.get("user") != user:
            return None
        return UpstreamTokens(**record["tokens"])

    def _expired(self, tokens: UpstreamTokens) -> bool:
        return tokens.expires_at is not None and tokens.expires_at - 30 <= self.now()

    async def _refresh(self, key: str, family: str, user: list[str]) -> str | None:
        """Refresh the expired upstream tokens of a sign-in once across every replica: the replica that takes the
        storage's lease refreshes (a provider rotating its refresh tokens refuses a second use of one); the others
        wait and read what it kept. A lease whose owner died ends after :data:`REFRESH_LEASE_MARGIN` seconds past
        the provider's ``timeout``; a waiter gives up (None) after twice that."""
        lease, owner = self.provider.timeout + REFRESH_LEASE_MARGIN, secrets.token_urlsafe(16)
        give_up, pause = time.monotonic() + 2 * lease, 0.02
        while True:
            if await self.leases.acquire_lease(key, owner, lease):
                try:
                    tokens = await self._kept(key, user)  # another replica may have refreshed them meanwhile
                    if tokens is None or not self._expired(tokens):
                        return tokens.access_token if tokens is not None else None
                    try:
                        tokens = await self.provider.refresh(tokens, self.now())
                    except UpstreamError:
                        await self.state.drop_upstream(key)
                        return None
                    await self.keep(family, user[0], user[1], tokens)
                    return tokens.access_token
                finally:
                    await self.leases.release_lease(key, owner)
            await asyncio.sleep(pause)  # another replica refreshes: read what it keeps
            pause = min(2 * pause, 0.25)
            tokens = await self._kept(key, user)
            if tokens is None or not self._expired(tokens):
                return tokens.access_token if tokens is not None else None
            if time.monotonic() > give_up:
                logger.warning("the upstream refresh of a sign-in was not done by another replica within %.0f s", lease)
                return None
