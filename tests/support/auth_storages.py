"""The OAuth storages the contract tests run over: in memory, on a real ``redis-server`` and on a real PostgreSQL.

``make_auth_storage`` (a fixture parametrized over ``memory``, ``redis`` and ``postgres``; import it into a test
module together with ``redis_url`` and ``postgres_url``) is a factory: ``make_auth_storage(**options)`` builds one
storage of the backend under test (each call on its own Redis key prefix or PostgreSQL table prefix, so two calls
are two separate storages; ``make_auth_storage.shared()`` builds another storage on the same prefix as the last
one: a second replica; ``make_auth_storage.replay_cache()`` builds the backend's replay cache there), closed at
teardown. ``make_auth_storage.kind`` names the backend.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcpkit.auth import (
    InMemoryAuthStorage,
    InMemoryReplayCache,
    PostgresAuthStorage,
    PostgresReplayCache,
    RedisAuthStorage,
    RedisReplayCache,
)

_PREFIXES = itertools.count()


class StorageMaker:
    """Builds storages of one backend (see the module docstring)."""

    def __init__(self, kind: str, url: str | None) -> None:
        self.kind = kind
        self.url = url
        self.made: list[Any] = []
        self._prefix = ""
        self._options: dict[str, Any] = {}

    def __call__(self, **options: Any) -> Any:
        self._prefix = f"t{time.time_ns()}_{next(_PREFIXES)}_"
        self._options = options
        return self._build(True)

    def shared(self) -> Any:
        """Another storage on the prefix of the last one made (with its options): what a second replica sees (in
        memory, the same object: one process)."""
        return self._build(False)

    def replay_cache(self) -> Any:
        """The backend's replay cache on the prefix of the last storage made: each call another replica's (in
        memory, one cache: one process)."""
        cache: Any
        if self.kind == "memory":
            found = [c for c in self.made if isinstance(c, InMemoryReplayCache)]
            if found:
                return found[0]
            cache = InMemoryReplayCache()
        elif self.kind == "redis":
            assert self.url is not None
            cache = RedisReplayCache(self.url, prefix=self._prefix.replace("_", ":") + "replay:")
        else:
            assert self.url is not None
            cache = PostgresReplayCache(self.url, prefix=self._prefix)
        self.made.append(cache)
        return cache

    def _build(self, new: bool) -> Any:
        options = self._options
        if self.kind == "memory":
            if not new:
                return [s for s in self.made if isinstance(s, InMemoryAuthStorage)][-1]
            storage: Any = InMemoryAuthStorage(**options)
        elif self.kind == "redis":
            assert self.url is not None
            storage = RedisAuthStorage(self.url, prefix=self._prefix.replace("_", ":"), **options)
        else:
            assert self.url is not None
            storage = PostgresAuthStorage(self.url, prefix=self._prefix, **options)
        self.made.append(storage)
        return storage

    async def aclose(self) -> None:
        for storage in self.made:
            if not isinstance(storage, (InMemoryAuthStorage, InMemoryReplayCache)):
                await storage.aclose()


@pytest.fixture(params=["memory", "redis", "postgres"])
async def make_auth_storage(request: pytest.FixtureRequest) -> AsyncIterator[StorageMaker]:
    kind: str = request.param
    url = None if kind == "memory" else request.getfixturevalue("redis_url" if kind == "redis" else "postgres_url")
    maker = StorageMaker(kind, url)
    try:
        yield maker
    finally:
        await maker.aclose()
