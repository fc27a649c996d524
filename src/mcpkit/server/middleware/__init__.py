"""Server middleware: typed hooks on the interceptor chain, and what production needs, ready to install.

    from mcpkit.server.middleware import ErrorHandling, RateLimit, RequestLogging, ResponseCache, Timing

    timing = Timing()
    app.add_middleware(ErrorHandling(), RequestLogging(), timing, RateLimit(rate=5, burst=10), ResponseCache())

Outermost first. See :mod:`.base` (writing one), :mod:`.observe` (logging, timing), :mod:`.safety` (error
handling, the size/time guard), :mod:`.ratelimit`, :mod:`.cache`. Nothing here is imported until used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


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
