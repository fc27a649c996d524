"""The revocations at the upstream provider of an OAuth proxy (:mod:`mcpkit.auth.upstream_login`): when the proxy
revokes a grant, that sign-in's upstream tokens are revoked at the provider's RFC 7009 revocation endpoint, in the
background (the answer that revoked the grant does not wait for a slow provider), at most
:data:`REVOCATION_CONCURRENCY` at a time per process, at most ``max_queued`` waiting or running (past it, one runs
in the request that revoked its grant: never dropped).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from .._asgi import Receive
from .upstream import UpstreamProvider, UpstreamTokens

logger = logging.getLogger(__name__)

__all__ = ["REVOCATION_CONCURRENCY", "UpstreamRevocations"]

#: upstream revocations running at once in the background, per process
REVOCATION_CONCURRENCY: int = 4


class UpstreamRevocations:
    """The upstream revocations of one proxy. ``counts``: ``queued``, ``inline``, ``done`` (the provider answered
    200) and ``failed``."""

    def __init__(self, provider: UpstreamProvider, *, max_queued: int) -> None:
        self.provider = provider
        self.max_queued = max_queued
        self.counts: dict[str, int] = {"queued": 0, "inline": 0, "done": 0, "failed": 0}
        self._running: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(REVOCATION_CONCURRENCY)

    async def revoke(self, tokens: UpstreamTokens) -> None:
        """Revoke ``tokens`` at the provider in the background; with ``max_queued`` waiting or running, here."""
        if not self.provider.revocation_url:
            return
        if len(self._running) >= self.max_queued:
            self.counts["inline"] += 1
            logger.warning(
                "%d upstream revocations are already queued (max_queued_revocations): this one runs in its request",
                len(self._running),
            )
            await self._revoke(tokens, queued=False)
            return
        self.counts["queued"] += 1
        task = asyncio.create_task(self._revoke(tokens, queued=True))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _revoke(self, tokens: UpstreamTokens, queued: bool) -> None:
        try:
            if queued:
                async with self._slots:
                    done = await self.provider.revoke(tokens)
            else:
                done = await self.provider.revoke(tokens)
        except Exception:  # (a bug: logged, never an unretrieved task exception)
            logger.exception("revoking an upstream token at %s failed", self.provider.name)
            done = False
        else:
            if not done:
                logger.warning("%s refused or did not answer a revocation (best effort)", self.provider.name)
        self.counts["done" if done else "failed"] += 1

    async def drain(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the revocations still running in the background."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=timeout)

    def lifespan(self, receive: Receive) -> Receive:
        """``receive`` of the ASGI lifespan, waiting for :meth:`drain` (bounded by the provider's ``timeout``)
        before it hands on the shutdown."""

        async def wrapped() -> Any:
            message = await receive()
            if message.get("type") == "lifespan.shutdown":
                await self.drain(self.provider.timeout)
            return message

        return wrapped
