"""The interpreter and event-loop tricks of mcpkit, behind one small interface (private: no public API).

What the rest of mcpkit asks of the runtime, and nothing else:

* :func:`run_inline` runs a sync function inline on the running event loop under the loop's hand-off guard (a
  call that runs long has the loop served by a stand-in thread meanwhile), times it and reports a long call to the
  function's :class:`InlinePolicy`, or says it cannot run it (:data:`ON_THREAD`: run it on a worker thread;
  :data:`EAGER`: yield one loop turn first). The server's sync policy (``mcpkit.server.sync_exec.SyncPolicy``)
  is its one caller, and judges what it is told.
* What a call cost its thread (:mod:`.usage`): :data:`clock`, :func:`thread_usage` (``getrusage``),
  :func:`run_delay` (the thread's time on the scheduler's run queue, where Linux says; :func:`others_delay` and
  :func:`delay_between`: the same of the process's other threads), the time of garbage
  collections (:data:`gc_time`, counted once :func:`hook_gc` ran).
* :data:`TICKS` counts the watchdog's wakes (where the scheduler's times cannot be read, a short GIL wait that
  overlaps one is not held against the function);
  :func:`running_guard` / :func:`handoff_for` give the guard of a loop, for diagnostics and tests;
  :func:`switch_interval` is the GIL's switch interval as it is while no loop is handed over (the hand-over holds it
  shorter meanwhile).
* :class:`WorkerPool` is the default executor of the event loops ``mcpkit.run`` creates: daemon threads, and a
  shutdown that waits a bounded grace for the work in flight (:func:`name_work` names it in the warning);
  :func:`pool_of` gives a loop's, whose ``settle()`` the server's lifespan awaits before its cleanup.
* :func:`reader_calls` makes a call from a transport's read callback (the HTTP lane, the stdio server) whose inline
  calls may be handed over: the reading of the interrupted callback pauses meanwhile (the stdio server's reading
  goes on on the stand-in instead: see ``transports.stdio_lines.LineReader.taken_over``).
* :func:`read_in_chunks` sets how much an asyncio read-pipe transport reads at once (the stdio transports).

How: :mod:`.handoff` (the guard: CPython 3.11-3.13 asyncio loops; it sets the running loop's thread id and
current task while a stand-in runs it) and :mod:`.loop_watch` (the helper process that watches inline calls without
taking the server's GIL). Nothing here imports the rest of mcpkit.
"""

from __future__ import annotations

from .handoff import (
    EAGER,
    IDLE_S,
    ON_THREAD,
    TICK_S,
    TICKS,
    InlinePolicy,
    LoopHandoff,
    handoff_for,
    in_eager_step,
    read_in_chunks,
    reader_calls,
    run_inline,
    running_guard,
    switch_interval,
)
from .usage import Usage, clock, delay_between, gc_time, hook_gc, others_delay, run_delay, thread_usage
from .workers import DEFAULT_WORKER_GRACE, WorkerPool, install_pool, name_work, pool_of

__all__ = [
    "DEFAULT_WORKER_GRACE",
    "EAGER",
    "IDLE_S",
    "ON_THREAD",
    "TICKS",
    "TICK_S",
    "InlinePolicy",
    "LoopHandoff",
    "Usage",
    "WorkerPool",
    "clock",
    "delay_between",
    "gc_time",
    "hook_gc",
    "handoff_for",
    "in_eager_step",
    "install_pool",
    "name_work",
    "others_delay",
    "pool_of",
    "read_in_chunks",
    "reader_calls",
    "run_delay",
    "run_inline",
    "running_guard",
    "switch_interval",
    "thread_usage",
]
