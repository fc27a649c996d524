"""Which app a shared store's prefix serves, for every backend: an app's fingerprint (:func:`fingerprint`), the one
warning when another app's is found under the prefix (:func:`warn_shared`), and the claim a worker holds while it
runs (:class:`HeldClaim`: written at start, then again every half of its TTL). The backends store it their way:
:mod:`mcpkit.stores.redis.fingerprint` (one key), :mod:`mcpkit.stores.postgres.fingerprint` (one row of
``<prefix>meta``).

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
from collections.abc import Awaitable, Callable, Iterable

FINGERPRINT_TTL = 7 * 24 * 3600
"""Seconds a fingerprint is kept after the last write under the prefix: a worker's start, then every half of it
while the worker runs (:class:`HeldClaim`)."""

__all__ = ["FINGERPRINT_TTL", "HeldClaim", "fingerprint", "warn_shared"]


def fingerprint(name: str, names: Iterable[str]) -> str:
    """An app's fingerprint: its name and a digest of the names of its tools, resources and prompts."""
    digest = hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()[:12]
    return f"{name} {digest}"


def warn_shared(logger: logging.Logger, what: str, prefix: str, theirs: str, mine: str, settings: str) -> None:
    """The WARNING that ``what`` (e.g. "Redis key prefix") ``prefix`` was last used by the app of fingerprint
    ``theirs``, and this worker is ``mine``; ``settings`` names where a prefix is set."""
    their_name, _, their_digest = theirs.rpartition(" ")
    my_name, _, my_digest = mine.rpartition(" ")
    logger.warning(
        "the %s %r was last used by app %r (tools/resources/prompts %s), and this worker is app %r (%s): apps "
        "sharing a prefix act as one (sessions, change notifications and task caps are shared). Give each app its "
        "own prefix (%s). During a rolling deploy that changed this app's tools, resources or prompts this is "
        "expected: the workers still start.",
        what,
        prefix,
        their_name,
        their_digest,
        my_name,
        my_digest,
        settings,
    )


class HeldClaim:
    """One worker's fingerprint under its prefix, held while the worker runs: :meth:`start` writes it (awaited: a
    warning about another app is logged before the worker serves), then one task writes it again every ``ttl / 2``
    seconds until :meth:`aclose`. Without the refreshes the mark ended ``ttl`` after the last start, and an app
    started later on the prefix of a worker running longer than that was not warned about.

    ``write`` is one bounded write of the backend (it warns itself); one that fails (the backend away) is logged at
    DEBUG and tried again at the next one. The mark outlives the last worker of the app by ``ttl`` at most."""

    def __init__(self, write: Callable[[], Awaitable[object]], ttl: float, logger: logging.Logger) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl: float = ttl
        self._write_once = write
        self._logger = logger
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Write the fingerprint now (warning about another app's), and keep it written until :meth:`aclose`."""
        await self._write()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._refresh(), name="mcpkit-prefix-claim")

    async def _write(self) -> None:
        try:
            await self._write_once()
        except Exception as exc:  # (the worker serves without it: the fan-out says the backend is away, readyz too)
            self._logger.debug("could not check which app uses the prefix: %s", exc)

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 2)
            await self._write()

    async def aclose(self) -> None:
        """Stop writing (the mark then ends ``ttl`` after the last write, unless another worker writes it)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
