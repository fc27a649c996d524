"""The app lifespan: one ``async with lifespan(app)`` shared by everything that serves the app.

Entering is counted: the first user (a served connection, an ASGI app's startup, or the first request of a
transport that never said it was starting) runs the lifespan's entry, the last one out runs its exit. The lock is
re-created per event loop, so an app can be served by successive ``asyncio.run`` calls (tests do). The apps
mounted into this one (``app.mount``) are its children: their ``startup()`` runs after this lifespan's entry, their
``shutdown()`` before its exit.

The last one out first waits for the sync calls still running on the loop's worker threads, bounded by the
worker grace (:meth:`mcpkit._runtime.WorkerPool.settle`, where ``mcpkit.run`` installed the pool): a ``def``
tool still running when serving stopped finds what the lifespan opened still open.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from .._runtime import pool_of

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | Callable[[Any], AsyncIterator[Any]]


class LifespanHolder:
    """Counts the users of a lifespan; ``state`` is what it yielded while held (None otherwise)."""

    def __init__(self, app: Any, lifespan: Lifespan | None) -> None:
        self._app = app
        self._lifespan = lifespan
        self.configured: bool = lifespan is not None  # (an attribute, not a property: read on every request)
        self.children: list[Any] = []  # mounted apps, entered and left with this lifespan
        self.state: Any = None
        self.users: int = 0
        self._cm: contextlib.AbstractAsyncContextManager[Any] | None = None
        self._entered: list[Any] = []
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._held_for_requests = False

    def lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock = asyncio.Lock()
            self._loop = loop
        return self._lock

    def add_child(self, app: Any) -> None:
        """Run ``app.startup()`` / ``app.shutdown()`` inside this lifespan from now on (a mounted app)."""
        self.children.append(app)
        self.configured = True

    def remove_child(self, app: Any) -> None:
        """Stop running ``app``'s lifespan with this one (an unmounted app; left as it is if entered now)."""
        self.children = [c for c in self.children if c is not app]

    async def enter_child(self, app: Any) -> None:
        """Start ``app`` (added with :meth:`add_child` while this lifespan is held): it is left with the rest."""
        async with self.lock():
            if self.users > 0 and app in self.children and app not in self._entered:
                await app.startup()
                self._entered.append(app)

    async def enter(self) -> None:
        async with self.lock():
            await self.enter_locked()

    async def enter_locked(self) -> None:
        """Enter with :meth:`lock` already held."""
        if self.users == 0:
            if self._lifespan is not None:
                factory: Any = self._lifespan
                if inspect.isasyncgenfunction(factory):
                    factory = contextlib.asynccontextmanager(factory)
                cm = factory(self._app)
                self.state = await cm.__aenter__()
                self._cm = cm
            entered: list[Any] = []
            try:
                for child in list(self.children):
                    await child.startup()
                    entered.append(child)
            except BaseException:
                for child in reversed(entered):
                    with contextlib.suppress(Exception):
                        await child.shutdown()
                await self._leave()
                raise
            self._entered = entered
        self.users += 1

    async def hold_for_requests(self) -> bool:
        """Enter for a transport that never said it was starting (e.g. an ASGI app without lifespan events): the
        first request enters, :meth:`release_for_requests` (server shutdown) leaves. True when this call entered."""
        if self.users == 0 and self.configured:
            async with self.lock():
                if self.users == 0:
                    await self.enter_locked()
                    self._held_for_requests = True
                    return True
        return False

    async def release_for_requests(self) -> None:
        """Leave what :meth:`hold_for_requests` entered, if it did."""
        if self._held_for_requests:
            self._held_for_requests = False
            await self.exit()

    async def exit(self) -> None:
        async with self.lock():
            if self.users == 0:
                return
            self.users -= 1
            if self.users == 0:
                if self._cm is not None or self._entered:  # (something to clean up: not under a call in flight)
                    pool = pool_of(asyncio.get_running_loop())
                    if pool is not None:
                        await pool.settle()
                entered, self._entered = self._entered, []
                try:
                    for child in reversed(entered):
                        await child.shutdown()
                finally:
                    await self._leave()

    async def _leave(self) -> None:
        if self._cm is not None:
            cm, self._cm = self._cm, None
            try:
                await cm.__aexit__(None, None, None)
            finally:
                self.state = None


__all__ = ["Lifespan", "LifespanHolder"]
