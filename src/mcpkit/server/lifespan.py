"""The app lifespan: one ``async with lifespan(app)`` shared by everything that serves the app.

Entering is counted: the first user (a served connection, an ASGI app's startup, or the first request of a
transport that never said it was starting) runs the lifespan's entry, the last one out runs its exit. The lock is
re-created per event loop, so an app can be served by successive ``asyncio.run`` calls (tests do).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

Lifespan = Callable[[Any], contextlib.AbstractAsyncContextManager[Any]] | Callable[[Any], AsyncIterator[Any]]


class LifespanHolder:
    """Counts the users of a lifespan; ``state`` is what it yielded while held (None otherwise)."""

    def __init__(self, app: Any, lifespan: Lifespan | None) -> None:
        self._app = app
        self._lifespan = lifespan
        self.configured = lifespan is not None  # (an attribute, not a property: read on every request)
        self.state: Any = None
        self.users = 0
        self._cm: contextlib.AbstractAsyncContextManager[Any] | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def lock(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._loop is not loop:
            self._lock = asyncio.Lock()
            self._loop = loop
        return self._lock

    async def enter(self) -> None:
        if self._lifespan is None:
            return
        async with self.lock():
            await self.enter_locked()

    async def enter_locked(self) -> None:
        """Enter with :meth:`lock` already held."""
        assert self._lifespan is not None
        if self.users == 0:
            factory: Any = self._lifespan
            if inspect.isasyncgenfunction(factory):
                factory = contextlib.asynccontextmanager(factory)
            cm = factory(self._app)
            self.state = await cm.__aenter__()
            self._cm = cm
        self.users += 1

    async def exit(self) -> None:
        if self._lifespan is None:
            return
        async with self.lock():
            self.users -= 1
            if self.users == 0 and self._cm is not None:
                cm, self._cm = self._cm, None
                try:
                    await cm.__aexit__(None, None, None)
                finally:
                    self.state = None


__all__ = ["Lifespan", "LifespanHolder"]
