"""Which app a Redis key prefix serves: each worker leaves its app's fingerprint under the prefix when it starts
(one key, ``<prefix>{app}:fingerprint``, kept :data:`FINGERPRINT_TTL` seconds after the last start), and a worker
that finds another app's there logs one warning.

Two apps on one prefix act as one deployment: a session opened on one is served by the other's workers, change
notifications reach the clients of both, the caps on tasks in progress count the tasks of both. Nothing else would
say so. The warning does not stop the worker: a rolling deploy that changed the app's tools is the same app with a
new fingerprint, and its workers must start.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable

from .connection import RedisConnection

logger: logging.Logger = logging.getLogger("mcpkit.stores.redis")

FINGERPRINT_TTL = 7 * 24 * 3600
"""Seconds the fingerprint is kept after the last worker start under the prefix (every start writes it again)."""


def fingerprint(name: str, names: Iterable[str]) -> str:
    """An app's fingerprint: its name and a digest of the names of its tools, resources and prompts."""
    digest = hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:12]
    return f"{name} {digest}"


async def claim_prefix(conn: RedisConnection, mine: str) -> str | None:
    """Write ``mine`` (see :func:`fingerprint`) under the connection's prefix and return the fingerprint it
    replaced, when another app's (a different name, or the same name with other tools: a rolling deploy, or
    another app of that name) wrote it; a WARNING says so. Redis errors propagate (the caller logs them)."""
    key = conn.keys.key("app", "fingerprint")
    previous = await conn.client.set(key, mine.encode(), ex=FINGERPRINT_TTL, get=True)
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


__all__ = ["FINGERPRINT_TTL", "claim_prefix", "fingerprint"]
