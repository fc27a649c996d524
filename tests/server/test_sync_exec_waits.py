"""How the sync policy (``mcpkit.server.sync_exec``) judges a learned-inline function's short waits while its own
threads run: the watchdog thread that looks at the inline calls every 5 ms (the watch where no helper process runs)
takes the GIL at each look and, on a busy CPU, waits for the CPU after each wake, yet a wait of the function's own
is still held against it. (The guarantees with a real server, and the other judgments of long inline calls, are in
``test_sync_exec.py``.)"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from mcpkit._runtime import handoff as loop_handoff
from mcpkit._runtime import run_delay, running_guard
from mcpkit.server.sync_exec import INLINE, THREAD, SyncPolicy
from support.cpu import crowded_cpu, pinned_to

#: The most inline calls that may sleep 5 ms before the function is demoted: three counted short waits make it
#: suspect, three measured ones demote it (a measured call the OS kept waiting for a CPU meanwhile may be judged
#: the OS's doing, which counts nothing); measured, 5-7 calls.
DEMOTED_WITHIN = 60


@pytest.fixture(autouse=True)
def watchdog_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch is the watchdog thread (where no helper process can run: ``MCPKIT_LOOP_WATCH=thread``, no POSIX)."""
    monkeypatch.setattr(loop_handoff, "WATCH_PROCESS", False)


def nap(seconds: float) -> str:
    if seconds:
        time.sleep(seconds)
    return "ok"


async def calls_until_demoted(seconds: float, most: int) -> int:
    """Learn a new policy of :func:`nap` inline, then call it inline, sleeping ``seconds`` each time, until it is
    demoted to the worker thread (``most`` calls at most); how many calls that took."""
    policy = SyncPolicy(nap, "nap", None, long_ms=2, learn_calls=1)
    for _ in range(100):  # (a learning call the OS delayed past 0.2 ms does not count)
        if await policy(0) == "ok" and policy.mode == INLINE:
            break
    assert policy.mode == INLINE
    assert await policy(0) == "ok"  # (the loop's first inline call starts the watch)
    guard = running_guard()
    assert guard is not None and guard._watchdog is not None and guard._cell is None  # the watchdog thread looks
    calls = 0
    while policy.mode == INLINE and calls < most:
        assert await policy(seconds) == "ok"
        calls += 1
        await asyncio.sleep(0.005)
    assert policy.mode in (INLINE, THREAD)
    return calls if policy.mode == THREAD else most + 1


async def test_a_function_that_sleeps_inline_is_demoted_while_the_watchdog_thread_looks() -> None:
    """A function learned inline starts sleeping 5 ms per call: short waits (under ``long_ms`` + two switch
    intervals), each of which may have been a wait for the GIL, so one is forgiven, but not three within 10 s. The
    watchdog thread wakes every 5 ms, so nearly every such call overlaps one of its wakes; a wake is no excuse for
    the wait (the thread holds the GIL for microseconds): the function is demoted within a few calls, and its calls
    run on a worker thread from then on."""
    calls = await calls_until_demoted(0.005, DEMOTED_WITHIN)
    assert calls <= DEMOTED_WITHIN, f"still inline after {DEMOTED_WITHIN} calls that each slept 5 ms on the loop"


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
@pytest.mark.skipif(run_delay() is None, reason="the scheduler's figures cannot be read here (no /proc)")
async def test_the_watchdog_threads_wait_for_a_cpu_does_not_excuse_a_functions_own_waits() -> None:
    """On a CPU five busy processes share, the watchdog thread, woken by its timer, waits for the CPU too, while the
    call sleeps and the GIL is free: that is no wait of the call's, so a suspect function's measured calls are not
    judged less it (they are less the wait of the threads a GIL hand-over can have made them wait for). Five
    functions that sleep 3 ms per inline call are demoted within 9 calls each on average (measured: 26-33 calls for
    the five; 62-121 when the watchdog's wait for a CPU was subtracted from the calls' waits)."""
    with crowded_cpu(5) as cpu, pinned_to(cpu):  # (the loop's threads start from here on: all on that CPU)
        calls = [await calls_until_demoted(0.003, 60) for _ in range(5)]
    assert sum(calls) <= 45, calls
