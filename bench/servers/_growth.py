"""Registry sizes for the growth cases (``list_*``): the bench sets ``BENCH_TOOLS=N`` or ``BENCH_RESOURCES=R``
in a server's environment and the server registers that many extra tools (``t0``, ``t1``, ... taking one
string) or static text resources (``bench://r/0``, ...), each through its framework's ordinary API.

With ``BENCH_SLOW_TOOL=1`` (the in-flight cases, ``inflight_*``) a server also registers ``sleep50``: an
``async def`` tool without arguments that awaits ``asyncio.sleep(SLOW_TOOL_SECONDS)`` and returns the text ``"ok"``,
the same in each contender (off by default, so every other case lists and serves the same two tools as before)."""

from __future__ import annotations

import os

SLOW_TOOL = "sleep50"
SLOW_TOOL_SECONDS = 0.05


def extra_tools() -> int:
    return int(os.environ.get("BENCH_TOOLS", "0") or 0)


def extra_resources() -> int:
    return int(os.environ.get("BENCH_RESOURCES", "0") or 0)


def resource_uri(i: int) -> str:
    return f"bench://r/{i}"


def slow_tool() -> bool:
    return os.environ.get("BENCH_SLOW_TOOL", "") == "1"
