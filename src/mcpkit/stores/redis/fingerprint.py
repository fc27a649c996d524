"""Which app a Redis key prefix serves: each worker leaves its app's fingerprint under the prefix when it starts
(one key, ``<prefix>{app}:fingerprint``, kept :data:`FINGERPRINT_TTL` seconds), writes it again every half of that
while it runs (:class:`PrefixClaim`), so the key is there as long as a worker of the app is, and a worker that
finds another app's there logs one warning (at its start, or at a later refresh: another app's worker wrote it in
between).

Two apps on one prefix act as one deployment: a session opened on one is served by the other's workers, change
notifications reach the clients of both, the caps on tasks in progress count the tasks of both. Nothing else would
say so. The warning does not stop the worker: a rolling deploy that changed the app's tools is the same app with a
new fingerprint, and its workers must start.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Iterable

from .connection import RedisConnection

logger: logging.Logger = logging.getLogger("mcpkit.stores.redis")

FINGERPRINT_TTL = 7 * 24 * 3600
"""Seconds the fingerprint is kept after the last write under the prefix: a worker's start, then every half of it
while the worker runs (:class:`PrefixClaim`)."""


def fingerprint(name: str, names: Iterable[str]) -> str:
    """An app's fingerprint: its name and a digest of the names of its tools, resources and prompts."""
    digest = hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:12]
    return f"{name} {digest}"


async def claim_prefix(conn: RedisConnection, mine: str, ttl: float = FINGERPRINT_TTL) -> str | None:
    """Write ``mine`` (see :func:`fingerprint`) under the connection's prefix, kept ``ttl`` seconds, and return the
    fingerprint it replaced, when another app's (a different name, or the same name with other tools: a rolling
    deploy, or another app of that name) wrote it; a WARNING says so. Redis errors propagate (the caller logs
    them)."""
    key = conn.keys.key("app", "fingerprint")
    previous = await conn.client.set(key, mine.encode(), px=max(1, int(ttl * 1000)), get=True)
    if previous is None:
        return None
    theirs = previous.decode(errors="replace") if isinstance(previous, bytes) else str(previous)
    if theirs == mine:
        return None
    their_name, _, their_digest = theirs.rpartition(" ")
    my_name, _, my_digest = mine.rpartition(" ")
    logger.warning(
        "the Redis key prefix %r was last used by app %r (tools/resources/prompts %s), and this worker is app %r "
        "(%s): apps sharing a prefix act as one (sessions, change notifications and task caps are shared). Give "
        "each app its own prefix (MCPKIT_REDIS_PREFIX, mcpkit run --redis-prefix). During a rolling deploy that "
        "changed this app's tools, resources or prompts this is expected: the workers still start.",
        conn.prefix,
        their_name,
        their_digest,
        my_name,
        my_digest,
    )
    return theirs


class PrefixClaim:
    """One worker's fingerprint under its prefix, held while the worker runs: :meth:`start` writes it (awaited: a
    warning about another app is logged before the worker serves), then one task writes it again every ``ttl / 2``
    seconds until :meth:`aclose`. Without the refreshes the key ended ``ttl`` after the last start, and an app
    started later on the prefix of a worker running longer than that was not warned about.

    A write that fails (Redis away) is logged at DEBUG and tried again at the next one; each write is one ``SET``
    bounded by the connection's timeout. The key outlives the last worker of the app by ``ttl`` at most."""

    def __init__(self, conn: RedisConnection, mine: str, ttl: float = FINGERPRINT_TTL) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.conn: RedisConnection = conn
        self.mine: str = mine
        self.ttl: float = ttl
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Write the fingerprint now (warning about another app's), and keep it written until :meth:`aclose`."""
        await self._write()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._refresh(), name="mcpkit-prefix-claim")

    async def _write(self) -> None:
        try:
            await claim_prefix(self.conn, self.mine, self.ttl)
        except Exception as exc:  # (the worker serves without it: the fan-out says Redis is away, readyz too)
            logger.debug("could not check which app uses the Redis prefix: %s", exc)

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 2)
            await self._write()

    async def aclose(self) -> None:
        """Stop writing (the key then ends ``ttl`` after the last write, unless another worker writes it)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


__all__ = ["FINGERPRINT_TTL", "PrefixClaim", "claim_prefix", "fingerprint"]
