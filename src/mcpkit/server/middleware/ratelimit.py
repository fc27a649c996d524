"""Rate limiting: a token bucket per caller.

Each caller has a bucket of ``burst`` tokens refilled at ``rate`` tokens a second; a request takes ``cost`` tokens
(1 by default, per method with ``costs=``). A request that finds too few is refused with :class:`RateLimited`
(code -32010, ``data.retryAfterMs``), before its handler runs; the session goes on.

Who the caller is: ``key(call)`` when given, else the principal (the installed authorization's), else, over HTTP,
the client's address (every session and stateless request of one address shares its bucket: a caller cannot get
a fresh bucket by opening another session), else the connection (stdio, in process: its handshake-era session),
else one bucket shared by every other anonymous request. The buckets live in this
process (:class:`MemoryBuckets`, at most ``max_keys`` callers, least recently used dropped: a dropped caller
starts again with a full bucket) or, for several workers, in Redis
(:class:`mcpkit.stores.redis.ratelimit.RedisBuckets`: one bucket per caller for every worker, each key expiring
once its bucket would be full again). If the store cannot be reached the request is let through (``fail_open``,
logged) or refused.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from ...hosting import http_client_address
from ...protocol.errors import MCPError
from ..interceptors import Call, CallNext
from .base import Middleware, principal_label, session_label

logger: logging.Logger = logging.getLogger("mcpkit.requests")

RATE_LIMITED = -32010
_FREE = frozenset(("initialize", "server/discover", "ping"))  # (connecting and liveness cost nothing by default)
DEFAULT_MAX_KEYS = 10_000
"""How many callers' buckets :class:`MemoryBuckets` keeps (least recently used dropped)."""


class RateLimited(MCPError):
    """Too many requests: ``data.retryAfterMs`` says when enough tokens will be there."""

    code = RATE_LIMITED
    default_message = "Rate limit exceeded"


class BucketStore(Protocol):
    """Where buckets live: :meth:`take` takes ``cost`` tokens of ``key``'s bucket if it has them."""

    async def take(self, key: str, cost: float, rate: float, burst: float) -> float:
        """0 when taken; else the seconds until ``cost`` tokens are there (nothing taken)."""
        ...


class MemoryBuckets:
    """Buckets in this process, at most ``max_keys`` (least recently used dropped)."""

    def __init__(self, max_keys: int = DEFAULT_MAX_KEYS) -> None:
        if max_keys < 1:
            raise ValueError("max_keys must be at least 1")
        self.max_keys = max_keys
        self._buckets: OrderedDict[str, list[float]] = OrderedDict()  # key -> [tokens, last refill]

    def __len__(self) -> int:
        return len(self._buckets)

    async def take(self, key: str, cost: float, rate: float, burst: float) -> float:
        now = time.monotonic()
        buckets = self._buckets
        bucket = buckets.get(key)
        if bucket is None:
            bucket = buckets[key] = [burst, now]
            if len(buckets) > self.max_keys:
                buckets.popitem(last=False)
        else:
            buckets.move_to_end(key)
            bucket[0] = min(burst, bucket[0] + (now - bucket[1]) * rate)
            bucket[1] = now
        if bucket[0] >= cost:
            bucket[0] -= cost
            return 0.0
        return (cost - bucket[0]) / rate


def client_address(call: Call) -> str | None:
    """The host of the HTTP peer that sent ``call`` (the ASGI client address: behind a balancer, the address it
    forwards when its addresses are trusted, ``--forwarded-allow-ips``); None over stdio and in process."""
    return http_client_address()


def default_key(call: Call) -> str:
    """The caller: ``p:<digest of the principal>``, else ``a:<client address>`` over HTTP, else ``s:<session
    label>`` (stdio, in process: one bucket per connection), else ``anonymous``."""
    principal = call.principal
    if principal is not None:
        return "p:" + principal_label(principal)
    address = http_client_address()
    if address is not None:
        return "a:" + address
    session = session_label(call)
    return "s:" + session if session is not None else "anonymous"


class RateLimit(Middleware):
    """A token bucket per caller (see the module docstring).

    Args:
        rate: tokens added per second.
        burst: the bucket's size (default: ``rate``, at least 1).
        costs: tokens a request of a method takes (default 1, and 0 for ``initialize``, ``server/discover`` and
            ``ping``; 0 exempts a method).
        methods: the methods limited (default: every request but ``initialize``).
        key: ``key(call) -> str``: who the caller is (default :func:`default_key`).
        store: where buckets live (default :class:`MemoryBuckets`).
        fail_open: let requests through when the store fails (default True; False refuses them).
    """

    name = "ratelimit"

    def __init__(
        self,
        rate: float,
        *,
        burst: float | None = None,
        costs: Mapping[str, float] | None = None,
        methods: Iterable[str] | None = None,
        key: Callable[[Call], str] | None = None,
        store: BucketStore | None = None,
        fail_open: bool = True,
    ) -> None:
        super().__init__()
        if rate <= 0:
            raise ValueError("rate must be positive")
        self.rate = rate
        self.burst: float = burst if burst is not None else max(rate, 1.0)
        if self.burst <= 0:
            raise ValueError("burst must be positive")
        self.costs: dict[str, float] = dict(costs or {})
        self.only: frozenset[str] | None = frozenset(methods) if methods is not None else None
        self.key: Callable[[Call], str] = key or default_key
        self.store: BucketStore = store if store is not None else MemoryBuckets()
        self.fail_open = fail_open

    @property
    def methods(self) -> frozenset[str] | None:
        return self.only

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        method = call.method
        cost = self.costs.get(method, 0.0 if method in _FREE else 1.0)
        if cost > 0:
            try:
                wait = await self.store.take(self.key(call), cost, self.rate, self.burst)
            except Exception as exc:
                logger.warning(
                    "rate limit store failed (%s): %s",
                    type(exc).__name__,
                    "let through" if self.fail_open else "refused",
                )
                if not self.fail_open:
                    raise RateLimited("rate limit store unavailable", {"retryAfterMs": 1000}) from None
                wait = 0.0
            if wait > 0:
                raise RateLimited(data={"retryAfterMs": max(1, round(wait * 1000))})
        return await call_next(call)


__all__ = [
    "DEFAULT_MAX_KEYS",
    "RATE_LIMITED",
    "BucketStore",
    "MemoryBuckets",
    "RateLimit",
    "RateLimited",
    "client_address",
    "default_key",
]
