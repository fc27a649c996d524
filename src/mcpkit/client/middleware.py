"""Client middleware: a chain around every call a :class:`~mcpkit.client.client.Client` makes.

    from mcpkit import Client
    from mcpkit.client.middleware import CallLogging, Retry

    async with Client(url, middleware=[CallLogging(), Retry(attempts=3)]) as client: ...

A middleware is ``async def mw(call: ClientCall, call_next) -> result``: it may look at ``call`` (the method, whether
it is safe to repeat, the attempt), call ``await call_next()`` zero or more times, and return or raise. The first
in the list is the outermost. Shipped: :class:`Retry` (exponential backoff with jitter, only for calls that are
safe to repeat: the list calls, reads, ``prompts/get``, completion, and tools annotated read-only or idempotent)
and :class:`CallLogging` (method, duration, outcome; never arguments, results or tokens).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..protocol.errors import ConnectionClosed, RequestTimeout

logger: logging.Logger = logging.getLogger("mcpkit.client.calls")


@dataclass
class ClientCall:
    """One call as the middleware sees it: the MCP ``method``, whether it is ``safe`` to repeat, the ``attempt``
    (1 for the first)."""

    method: str
    safe: bool
    attempt: int = 1


CallNext = Callable[[], Awaitable[Any]]


class ClientMiddleware(Protocol):
    """``async (call, call_next) -> result`` (called positionally: any parameter names)."""

    async def __call__(self, call: ClientCall, call_next: CallNext, /) -> Any: ...


async def run_chain(chain: Sequence[ClientMiddleware], call: ClientCall, last: CallNext) -> Any:
    """Run ``last`` inside ``chain`` (first = outermost)."""
    if not chain:
        return await last()

    async def step(i: int) -> Any:
        if i == len(chain):
            return await last()
        return await chain[i](call, lambda: step(i + 1))

    return await step(0)


class Retry:
    """Repeat a safe call that failed for a transient reason (connection lost, timeout, ``OSError``) after
    ``backoff`` seconds, doubled each time up to ``max_backoff``, with jitter; at most ``attempts`` tries in all."""

    def __init__(
        self,
        attempts: int = 3,
        *,
        backoff: float = 0.1,
        max_backoff: float = 2.0,
        retry_on: tuple[type[BaseException], ...] = (ConnectionClosed, RequestTimeout, TimeoutError, OSError),
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self.attempts = attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.retry_on = retry_on

    async def __call__(self, call: ClientCall, call_next: CallNext) -> Any:
        delay = self.backoff
        while True:
            try:
                return await call_next()
            except self.retry_on as exc:
                if not call.safe or call.attempt >= self.attempts:
                    raise
                logger.info("%s failed (%s); retrying in %.2fs", call.method, type(exc).__name__, delay)
                await asyncio.sleep(delay * (0.5 + random.random() / 2))
                delay = min(delay * 2, self.max_backoff)
                call.attempt += 1


class CallLogging:
    """Log every call: its method, duration and outcome, at ``level`` (``mcpkit.client.calls`` logger)."""

    def __init__(self, level: int = logging.INFO) -> None:
        self.level = level

    async def __call__(self, call: ClientCall, call_next: CallNext) -> Any:
        start = time.perf_counter()
        try:
            result = await call_next()
        except BaseException as exc:
            ms = (time.perf_counter() - start) * 1000
            logger.log(self.level, "%s failed after %.1f ms: %s", call.method, ms, type(exc).__name__)
            raise
        logger.log(self.level, "%s ok in %.1f ms", call.method, (time.perf_counter() - start) * 1000)
        return result


__all__ = ["CallLogging", "ClientCall", "ClientMiddleware", "Retry", "run_chain"]
