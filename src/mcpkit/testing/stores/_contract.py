"""What every contract class shares: the fixture that builds the backend under test and closes it, the marker that
runs its async tests under pytest-asyncio in either mode, and bounded waits."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import pytest

try:
    import pytest_asyncio
except ImportError as exc:  # pragma: no cover (the testing extra brings it)
    raise ImportError("mcpkit.testing.stores needs pytest-asyncio: pip install 'mcpkit[testing]'") from exc

T = TypeVar("T")


@runtime_checkable
class _Closable(Protocol):
    async def aclose(self) -> None: ...


class Contract(Generic[T]):
    """The base of the contract classes: :meth:`make_store` (yours) builds a fresh backend for each test, the
    ``store`` fixture hands it to the test and :meth:`close_store` closes it afterwards.

    The class name does not start with ``Test``, so pytest collects only your subclass; its async tests carry
    the ``asyncio`` marker, so they run whether pytest-asyncio is in ``auto`` or ``strict`` mode."""

    pytestmark: list[pytest.MarkDecorator] = [pytest.mark.asyncio]

    async def make_store(self) -> T:
        """A fresh, empty backend for one test (override it). Build it with the bounds this class declares (the
        class attributes of each contract), and keep tests apart: a fresh key prefix, table or database."""
        raise NotImplementedError(f"{type(self).__name__}: override make_store() to build the backend under test")

    async def close_store(self, store: T) -> None:
        """Release what :meth:`make_store` built; by default ``await store.aclose()`` when it has one."""
        if isinstance(store, _Closable):
            await store.aclose()

    @pytest_asyncio.fixture
    async def store(self) -> AsyncIterator[T]:
        """The backend under test: :meth:`make_store`, closed by :meth:`close_store` after the test."""
        made = await self.make_store()
        try:
            yield made
        finally:
            await self.close_store(made)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Wait until ``check()`` is true, at most ``timeout`` seconds (polled every 50 ms); fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} (waited {timeout:.1f}s)")
        await asyncio.sleep(0.05)


def same(got: Any, want: Any) -> bool:
    """Equal, with the keys ``want`` names (a backend may add bookkeeping keys of its own to a record)."""
    return isinstance(got, dict) and all(k in got and got[k] == v for k, v in want.items())
