"""Registry sizes for the growth cases (``list_*``): the bench sets ``BENCH_TOOLS=N`` or ``BENCH_RESOURCES=R``
in a server's environment and the server registers that many extra tools (``t0``, ``t1``, ... taking one
string) or static text resources (``bench://r/0``, ...), each through its framework's ordinary API."""

from __future__ import annotations

import os


def extra_tools() -> int:
    return int(os.environ.get("BENCH_TOOLS", "0") or 0)


def extra_resources() -> int:
    return int(os.environ.get("BENCH_RESOURCES", "0") or 0)


def resource_uri(i: int) -> str:
    return f"bench://r/{i}"
