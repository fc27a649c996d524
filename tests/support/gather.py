"""Many asynchronous jobs at once (the checker's module fixtures judge dozens of servers and clients in one event
loop), a few at a time, with a deadline that ends them inside the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


async def gather_limited(jobs: Mapping[str, Callable[[], Awaitable[Any]]], limit: int, within: float) -> dict[str, Any]:
    """Run ``jobs`` (name -> a coroutine function), ``limit`` at a time; their results by name.

    The whole gather ends within ``within`` seconds: past it the jobs still running are cancelled and an
    AssertionError names the jobs that did not finish. A job that fails cancels the others first, then its error
    propagates (in an ExceptionGroup). Both happen here, inside the event loop, one job's cancellation at a time.
    That is the point: an exception that leaves ``asyncio.run`` with jobs still running (a pytest-timeout raised
    into the loop, or a plain ``gather`` whose first error leaves its siblings running) makes ``asyncio.run``
    cancel every task in one sweep. A process start caught in that sweep together with its own pipe-connecting
    task never finishes on CPython 3.11 to 3.13.0 (python/cpython#125502), and the worker hung there, idle, with
    nothing reported. So ``within`` must be shorter than the test's pytest timeout."""
    sem = asyncio.Semaphore(limit)
    results: dict[str, Any] = {}

    async def one(name: str, job: Callable[[], Awaitable[Any]]) -> None:
        async with sem:
            results[name] = await job()

    try:
        async with asyncio.timeout(within):
            async with asyncio.TaskGroup() as group:
                for name, job in jobs.items():
                    group.create_task(one(name, job))
    except TimeoutError:
        left = [name for name in jobs if name not in results]
        raise AssertionError(f"{len(left)} of {len(jobs)} jobs not done within {within:g}s: {left}") from None
    return {name: results[name] for name in jobs}
