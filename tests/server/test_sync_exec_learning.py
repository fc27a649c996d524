"""How a plain ``def`` learns where it runs (``mcpkit.server.sync_exec``): on a worker thread first, inline on the
event loop once its calls have proven fast; a function slow once while it learns is not kept off the loop for good.
(The guarantees with a real server, and the judgment of long inline calls, are in ``test_sync_exec.py``.)"""

from __future__ import annotations

import time

from mcpkit.server.sync_exec import DEFAULT_LEARN_CALLS, INLINE, LEARN_STRIKES, THREAD, SyncPolicy


def spin_for(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def test_one_slow_learning_call_does_not_keep_a_fast_function_off_the_loop_for_good() -> None:
    """A function slow once while it learns (a cold cache, a first-time import) goes to the worker thread at once,
    as before, but its calls are still measured there, and once twice ``learn_calls`` of them in a row are fast it
    runs inline; one that blocks every tenth call never runs inline, and after LEARN_STRIKES long calls it stays on
    the thread for good (its calls are no longer measured)."""
    calls = [0]

    def cold_then_fast() -> str:
        calls[0] += 1
        if calls[0] == 1:
            time.sleep(0.05)  # (a cold cache)
        else:
            spin_for(20e-6)
        return "ok"

    p = SyncPolicy(cold_then_fast, "cold", None)  # the defaults: long_ms=2, learn_calls=20
    assert await p() == "ok" and p.mode == THREAD  # one long learning call: on the thread, as before
    inline_at = 0
    while calls[0] < 201:
        assert await p() == "ok"
        if p.mode == INLINE:
            inline_at = calls[0]
            break
    # back inline, and not before 2 * learn_calls fast calls in a row (a preempted call restarts the count)
    assert 2 * DEFAULT_LEARN_CALLS + 1 <= inline_at <= 201, inline_at

    n = [0]
    blocking = [True]

    def blocks_now_and_then() -> str:
        n[0] += 1
        if blocking[0] and n[0] % 10 == 0:
            time.sleep(0.005)  # (past long_ms: a wait of its own)
        else:
            spin_for(20e-6)
        return "ok"

    q = SyncPolicy(blocks_now_and_then, "sometimes", None)
    for _ in range(200):
        assert await q() == "ok"
        assert q.mode != INLINE, n[0]  # never ran inline
    assert q.mode == THREAD
    blocking[0] = False
    for _ in range(2 * (DEFAULT_LEARN_CALLS << (LEARN_STRIKES - 1))):  # enough fast calls to come back, were it
        assert await q() == "ok"  # still learning
    assert q.mode == THREAD  # for good
