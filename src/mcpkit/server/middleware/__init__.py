"""Server middleware: typed hooks on the interceptor chain, and what production needs, ready to install.

    from mcpkit.server.middleware import ErrorHandling, RateLimit, RequestLogging, ResponseCache, Timing

    timing = Timing()
    app.add_middleware(ErrorHandling(), RequestLogging(), timing, RateLimit(rate=5, burst=10), ResponseCache())

Outermost first. See :mod:`.base` (writing one), :mod:`.observe` (logging, timing), :mod:`.safety` (error
handling, the size/time guard), :mod:`.ratelimit`, :mod:`.cache`. Nothing here is imported until used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_getattr

if TYPE_CHECKING:
    from .base import Middleware
    from .cache import ResponseCache
    from .observe import RequestLogging, Timing
    from .ratelimit import BucketStore, MemoryBuckets, RateLimit, RateLimited
    from .safety import ErrorHandling, Guard

_LAZY = {
    "Middleware": "base",
    "ResponseCache": "cache",
    "RequestLogging": "observe",
    "Timing": "observe",
    "BucketStore": "ratelimit",
    "MemoryBuckets": "ratelimit",
    "RateLimit": "ratelimit",
    "RateLimited": "ratelimit",
    "ErrorHandling": "safety",
    "Guard": "safety",
}


if not TYPE_CHECKING:  # (a type checker reads the imports above: a misspelled name is an error there)
    __getattr__ = lazy_getattr(__name__, _LAZY)


__all__ = [
    "BucketStore",
    "ErrorHandling",
    "Guard",
    "MemoryBuckets",
    "Middleware",
    "RateLimit",
    "RateLimited",
    "RequestLogging",
    "ResponseCache",
    "Timing",
]
