"""Shared by the client contenders. Contract: `python <client>.py CALLS SECONDS SERVER_ARGV...` connects to
the server command over stdio, calls echo once to check it, then calls it sequentially until CALLS calls
or SECONDS have passed, and prints one JSON line: {"calls", "seconds", "p50_ms", "p99_ms", "connect_s"}."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any


def args() -> tuple[int, float, list[str]]:
    return int(sys.argv[1]), float(sys.argv[2]), sys.argv[3:]


async def measure(call: Callable[[], Awaitable[Any]], calls: int, seconds: float, connect_s: float) -> None:
    lat: list[int] = []
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while len(lat) < calls and time.perf_counter() < deadline:
        s = time.perf_counter_ns()
        await call()
        lat.append(time.perf_counter_ns() - s)
    elapsed = time.perf_counter() - t0
    lat.sort()
    out = {
        "calls": len(lat),
        "seconds": elapsed,
        "p50_ms": lat[len(lat) // 2] / 1e6 if lat else None,
        "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1e6 if lat else None,
        "connect_s": connect_s,
    }
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()


def run(coro: Awaitable[None]) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]
