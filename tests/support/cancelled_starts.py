"""A user's program whose ``asyncio.run`` ends on an exception while stdio connections start: ``N`` clients start,
one per loop turn, and a sibling task raises after ``k`` turns, so ``asyncio.run`` cancels every task in one sweep
(some of them inside the start of their server). It does so for ``k`` = 1 .. ``rounds``, printing ``round k ended``
and the number of child processes left after each round, then ``done``. A start that cannot be cancelled hangs it.

python cancelled_starts.py ROUNDS N
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

from mcpkit import Client
from mcpkit.transports.stdio import StdioServer

SERVER = ["sh", "-c", "cat > /dev/null"]  # (answers nothing, ends when its stdin closes: a start costs no import)


class Boom(Exception):
    pass


async def _connect(turns: int) -> None:
    for _ in range(turns):
        await asyncio.sleep(0)
    async with Client(StdioServer(SERVER, shutdown_timeout=0.5), connect_timeout=30):
        await asyncio.sleep(30)


async def _round(n: int, after: int) -> None:
    async def boom() -> None:
        for _ in range(after):
            await asyncio.sleep(0)
        raise Boom

    await asyncio.gather(boom(), *(_connect(i) for i in range(n)))


def _children() -> list[str]:
    """This process's children (zombies too), each as ``pid state``."""
    me = os.getpid()
    tasks = Path(f"/proc/{me}/task")
    pids = [p for t in tasks.iterdir() for p in (t / "children").read_text().split()]
    states = []
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):
            states.append(f"{pid} {Path(f'/proc/{pid}/stat').read_text().split(')')[-1].split()[0]}")
    return states


def _settled() -> list[str]:
    """:func:`_children` once none is on its way out: a server SIGKILLed by a start cancelled twice (the sweep
    cancels the start's own wait for the reap too) runs its exit (``R``, ``D``) and is reaped (``Z``) by the
    reaper thread a moment after ``asyncio.run`` returns; a server left running waits on its stdin (``S``) and
    counts at once. At most 2 s."""
    deadline = time.monotonic() + 2
    left = _children()
    while left and time.monotonic() < deadline and any(not c.endswith(" S") for c in left):
        time.sleep(0.01)
        left = _children()
    return left


def main() -> None:
    rounds, n = int(sys.argv[1]), int(sys.argv[2])
    for after in range(1, rounds + 1):
        try:
            asyncio.run(_round(n, after))
        except Boom:
            pass
        left = _settled()
        print(f"round {after} ended; children left: {len(left)} {left}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
