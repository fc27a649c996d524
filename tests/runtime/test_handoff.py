"""Issue 16 item 1, the worst case: a sync function running inline on the event loop's thread that runs long.
The loop is handed to a stand-in thread (mcpkit.server.loop_handoff) and keeps serving; these tests drive
real asyncio loops and real threads: a ticker task measures how long the loop goes unserved."""

from __future__ import annotations

import asyncio
import gc
import itertools
import os
import random
import signal
import sys
import threading
import time
import types
from typing import Any

import pytest

from mcpkit._runtime import TICK_S, TICKS, LoopHandoff, handoff_for, running_guard
from mcpkit._runtime import handoff as loop_handoff
from mcpkit.server.sync_exec import INLINE, SyncPolicy
from support.runqueue import RunQueue, Sampled, children_by_parent

BOUND_S = 0.050  # the guarantee: the loop is never left unserved longer than this


class Ticker:
    """A task that wakes every 5 ms and records the gaps between its turns (and the threads it ran on), with the
    time the OS kept the threads that serve the loop waiting for a CPU meanwhile: every thread of this process
    (the loop's own runs it, and holds the GIL while an inline call computes; the stand-in; the watch's thread)
    and of its helper processes. ``sampled``: that time is read by a child process (see
    :class:`support.runqueue.Sampled`), not at each turn: for a loop served while a thread computes, where each
    reading here (system calls, which let go of the GIL) would wait a switch interval to take the GIL back."""

    def __init__(self, *, sampled: bool = False) -> None:
        self.stamps: list[tuple[float, float]] = []  # (the turn's time, the run-queue seconds so far)
        self.threads: set[str] = set()
        # (the loop-watch helpers named, which take part too: a kernel without /proc/<pid>/task/<tid>/children does
        # not list a process's children, and the run queue would not find them)
        helpers = _helpers() if sys.platform.startswith("linux") else set()
        self.sampled = Sampled(also=helpers) if sampled else None
        self.queued = None if sampled else RunQueue(os.getpid(), *helpers)
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            if self.queued is None:
                self.stamps.append((time.perf_counter(), 0.0))
            else:
                self.queued.refresh()  # (a helper process started meanwhile)
                self.stamps.append((time.perf_counter(), self.queued()))
            self.threads.add(threading.current_thread().name)
            assert asyncio.current_task() is self.task  # asyncio's task bookkeeping holds on any thread
            await asyncio.sleep(0.005)

    def gaps(self, since: float, *, its_own: bool = True) -> list[tuple[float, float]]:
        """Each gap between two turns that ends after ``since`` (the one ``since`` falls in too, unless not
        ``its_own``): (its wall seconds, the run-queue seconds within it)."""
        first = next((i for i, s in enumerate(self.stamps) if s[0] >= since), len(self.stamps))
        first = max(0, first - 1) if its_own else first
        stamps = self.stamps[first:]
        return [(b[0] - a[0], max(0.0, b[1] - a[1])) for a, b in itertools.pairwise(stamps)]

    def worst_gap(self, since: float = 0.0, *, its_own: bool = True) -> float:
        """The longest the loop went unserved after ``since``, net of the time the OS kept the threads that serve
        it (the loop's own, the stand-in, the watch's) waiting for a CPU meanwhile: on an idle machine, the wall
        time between two turns; on a loaded one, the part of it that was mcpkit's own doing."""
        return max((wall - queued for wall, queued in self.gaps(since, its_own=its_own)), default=0.0)

    def describe(self, since: float = 0.0) -> str:
        """The worst gap after ``since``, in words."""
        wall, queued = max(self.gaps(since), key=lambda g: g[0] - g[1], default=(0.0, 0.0))
        net, wall, queued = ((wall - queued) * 1000, wall * 1000, queued * 1000)
        return f"the loop went unserved {net:.1f} ms ({wall:.1f} ms, less {queued:.1f} ms waiting for a CPU)"

    async def stop(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task
        if self.sampled is not None:
            self.sampled.stop()
            self.stamps = [(t, self.sampled.at(t)) for t, _ in self.stamps]


def sleeper(seconds: float, guard: LoopHandoff | None = None, ticker: Ticker | None = None) -> Any:
    """An inline call that sleeps ``seconds``; with ``guard``, and then on until the loop is handed over (10 s at
    most): on a loaded machine the watch's ticks may come later than a fixed sleep would last, which is no fault of
    the hand-over (the ticker measures the loop's wait net of the OS's); with ``ticker`` too, on until the stand-in
    has served one of its turns (a stand-in that waits for a CPU past the end of the call serves none)."""

    def fn(args: tuple[Any, ...], kw: dict[str, Any]) -> str:
        time.sleep(seconds)
        deadline = time.monotonic() + 10
        while (
            guard is not None
            and (not guard.lost or (ticker is not None and "mcpkit-loop-stand-in" not in ticker.threads))
            and time.monotonic() < deadline
        ):
            time.sleep(0.05)  # (seldom: each wake of this thread may wait for a CPU, which the ticker subtracts)
        return threading.current_thread().name

    return fn


def spinner(seconds: float, guard: LoopHandoff) -> Any:
    """An inline call that computes ``seconds``, and on until the loop is handed over (10 s at most: see
    :func:`sleeper`)."""

    def fn(args: tuple[Any, ...], kw: dict[str, Any]) -> int:
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end or (not guard.lost and time.perf_counter() < end + 10):
            n += 1  # pure Python: holds the GIL but for the switch interval
        return n

    return fn


@pytest.fixture(params=["process", "thread"])
def watch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of watching inline calls: the helper process (where it can run) and the watchdog thread."""
    monkeypatch.setattr(loop_handoff, "WATCH_PROCESS", request.param == "process")
    return str(request.param)


def _inline(fn: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``fn(args, kw)`` inline on the running loop's thread under its hand-off guard: what the sync policy does for
    a function declared ``thread=False`` (the one inline path, ``SyncPolicy.try_inline``)."""
    return SyncPolicy(lambda *a, **k: fn(a, k), "test", thread=False).try_inline(args, kw)


async def _watched_by(guard: LoopHandoff, watch: str) -> None:
    """Wait (2 s at most) until the watch is the one asked for: the helper process, once it runs (the watchdog
    thread covers its start and then ends), or the thread."""
    deadline = time.monotonic() + 2
    while watch == "process" and (guard._cell is None or guard._watchdog is not None):
        if time.monotonic() > deadline:
            break
        _inline(lambda a, k: None, (), {})
        await asyncio.sleep(0.005)
    if watch == "process":
        assert guard._cell is not None and guard._watchdog is None
    else:
        assert guard._cell is None and guard._watchdog is not None


async def test_loop_keeps_serving_while_an_inline_call_sleeps(watch: str) -> None:
    """An inline call that sleeps 0.5 s on the loop's thread: the loop is handed over within two watchdog
    ticks, so no gap between the ticker's turns exceeds 50 ms; the call returns its value on the loop's own
    thread, which then runs the loop again."""
    loop = asyncio.get_running_loop()
    guard = handoff_for(loop)
    assert guard is not None and running_guard() is guard
    _inline(lambda a, k: None, (), {})  # the first inline call starts the watch
    await _watched_by(guard, watch)
    await asyncio.sleep(0.1)  # (the helper process starting)
    ticker = Ticker()
    await asyncio.sleep(0.03)
    t0 = time.perf_counter()
    h0 = guard.handovers  # (a short call before may have been handed over too: one the OS kept under way)
    ran_on = _inline(sleeper(0.5, guard, ticker), (), {})
    took = time.perf_counter() - t0
    assert ran_on == threading.current_thread().name and took >= 0.5
    assert asyncio.current_task() is not None  # the interrupted task is current again
    await asyncio.sleep(0.03)
    await ticker.stop()
    assert guard.handovers - h0 == 1 and not guard.lost
    assert ticker.worst_gap(t0) < BOUND_S, ticker.describe(t0)
    assert "mcpkit-loop-stand-in" in ticker.threads and threading.current_thread().name in ticker.threads
    assert loop._thread_id == threading.get_ident()  # type: ignore[attr-defined]


async def test_a_read_callbacks_call_is_handed_over_with_its_reading_paused_until_it_returns(watch: str) -> None:
    """``reader_calls`` (the HTTP lane: an inline call made by a transport's read callback, not a task): the hand-over
    pauses the transport's reading on the stand-in's first turn, and it is resumed once the call has returned; a
    transport that cannot say whether it reads is served as before, and its call still returns its value."""
    loop = asyncio.get_running_loop()
    guard = handoff_for(loop)
    assert guard is not None
    _inline(lambda a, k: None, (), {})
    await _watched_by(guard, watch)
    await asyncio.sleep(0.1)

    class Reader:
        def __init__(self, tells: bool) -> None:
            self.tells = tells
            self.reading = True
            self.log: list[str] = []

        def is_reading(self) -> bool:
            if not self.tells:
                raise NotImplementedError
            return self.reading

        def pause_reading(self) -> None:
            self.reading = False
            self.log.append(f"paused on {threading.current_thread().name}")

        def resume_reading(self) -> None:
            self.reading = True
            self.log.append(f"resumed on {threading.current_thread().name}")

        def is_closing(self) -> bool:
            return False

    for tells in (True, False):
        reader = Reader(tells)
        done: asyncio.Future[Any] = loop.create_future()

        def callback(reader: Reader = reader, done: asyncio.Future[Any] = done) -> None:
            assert asyncio.current_task() is None  # (a callback, as a transport's read callback is)
            try:
                done.set_result(loop_handoff.reader_calls(reader, _inline, sleeper(0.05, guard), (), {}))
            except BaseException as exc:  # (the test reads it below)
                done.set_exception(exc)

        h0 = guard.handovers
        loop.call_soon(callback)
        assert await asyncio.wait_for(done, 20) == threading.current_thread().name
        assert guard.handovers - h0 == 1 and not guard.lost and guard.reader is None
        me = threading.current_thread().name
        assert reader.log == (["paused on mcpkit-loop-stand-in", f"resumed on {me}"] if tells else []), reader.log


async def test_loop_keeps_serving_while_an_inline_call_computes(watch: str) -> None:
    """A CPU-bound inline call (pure Python, 0.5 s): the stand-in gets the GIL at least every switch
    interval, so the loop is still served within 50 ms."""
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None
    _inline(lambda a, k: None, (), {})
    await _watched_by(guard, watch)
    # (see Ticker: not read at each turn while the call computes) Its sampler is a process to start, which may take
    # a loaded machine a second; the call under test must not come a second or more after the last inline call,
    # or the helper looks only every 100 ms by then (see .loop_watch): an inline call after it, then at least one
    # look of the helper's (it looks every 5 ms once it sees one)
    ticker = Ticker(sampled=True)
    _inline(lambda a, k: None, (), {})
    await asyncio.sleep(0.15)
    t0 = time.perf_counter()
    h0 = guard.handovers
    assert _inline(spinner(0.5, guard), (), {}) > 0
    await asyncio.sleep(0.03)
    await ticker.stop()
    assert guard.handovers - h0 == 1
    # (the gap the call starts in too: the watch's looks, then each step of the hand-over waiting for the GIL of the
    # thread that computes, a short switch interval at a time)
    assert ticker.worst_gap(t0) < BOUND_S, ticker.describe(t0)


async def test_the_switch_interval_is_short_only_while_the_loop_is_handed_over(watch: str) -> None:
    """While a call is handed over, the threads serving the loop wait at most 1 ms for the GIL of a call that computes
    (the process's switch interval, held short); once the loop is back, the interval is the one set before, and one
    the program sets meanwhile is left as it set it."""
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None
    _inline(lambda a, k: None, (), {})
    await _watched_by(guard, watch)
    original = sys.getswitchinterval()

    def computes_then_reads(args: tuple[Any, ...], kw: dict[str, Any]) -> float:
        spinner(0, guard)(args, kw)  # (until handed over)
        return sys.getswitchinterval()

    def sets_its_own(args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        spinner(0, guard)(args, kw)
        sys.setswitchinterval(0.002)

    try:
        sys.setswitchinterval(0.004)
        assert _inline(computes_then_reads, (), {}) == loop_handoff.QUICK_SWITCH_S and guard.handovers
        assert sys.getswitchinterval() == 0.004
        _inline(sets_its_own, (), {})
        assert sys.getswitchinterval() == 0.002
    finally:
        sys.setswitchinterval(original)


async def test_a_late_second_hand_over_of_the_same_call_leaves_the_loops_return_alone() -> None:
    """While the helper process starts, the watchdog thread and the helper both watch: both may see one call run
    long, and the second may act on what it saw after the first has handed the loop over and the call has ended.
    Forced here: the second hand-over comes while the call's thread takes the loop back, once the stand-in has
    parked. It must change nothing: the call's thread still takes the loop back (it waited for ever when the late
    hand-over cleared the stand-in's word that it had parked) and the loop goes on."""
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None
    parked = guard._parked
    jobs: list[int] = []
    late: list[bool] = []

    class LateSecondWatch(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            assert parked.wait(10)  # (the stand-in has finished its turns)
            second = threading.Thread(target=guard._hand_over, args=(jobs[0],))
            second.start()
            second.join()
            took_back = parked.wait(5)  # (the real wait has no bound: it would never return)
            late.append(took_back)
            return True

        def set(self) -> None:
            parked.set()

        def clear(self) -> None:
            parked.clear()

    def call(args: tuple[Any, ...], kw: dict[str, Any]) -> str:
        jobs.append(guard._seq)
        guard._parked = LateSecondWatch()
        return str(sleeper(0, guard)(args, kw))

    try:
        assert _inline(call, (), {}) == threading.current_thread().name
    finally:
        guard._parked = parked
    assert late == [True] and not guard.lost
    assert await asyncio.wait_for(asyncio.sleep(0.01, "still served"), 1) == "still served"


@pytest.mark.parametrize("late", ["start", "running"], ids=["before its thread starts", "as its thread starts"])
async def test_a_hand_over_while_the_stand_in_starts_starts_no_second_one(
    late: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stand-in thread starts with the watch, at the loop's first inline call, while that call already holds the
    slot: on a loaded machine the new thread may wait for a CPU longer than the watch's two ticks, and the watch
    hands the call over meanwhile. Forced here: the stand-in's start waits until the loop is handed over, before
    its thread is started, or once its thread has its ident but does not count as alive yet. That hand-over must
    start no stand-in of its own: two would both run the loop at every hand-over, and the second went on running
    it after the loop's thread took it back (seen under load: "Cannot enter into task ... while another task ... is
    being executed", then a loop that never finished its tasks; and "pop from an empty deque" in the loop's turn)."""
    monkeypatch.setattr(loop_handoff, "WATCH_PROCESS", False)  # (the watchdog thread: it looks at the slot itself)
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None and guard._stand_in is None
    stand_ins: list[threading.Thread] = []

    def until_handed_over(thread: threading.Thread, now: str) -> None:
        if thread.name == "mcpkit-loop-stand-in" and now == late:
            stand_ins.append(thread)
            deadline = time.monotonic() + 10
            while not guard.lost and time.monotonic() < deadline:
                time.sleep(0.001)

    class LateStart(threading.Thread):
        def start(self) -> None:
            until_handed_over(self, "start")
            super().start()

        def _set_native_id(self) -> None:  # (on the new thread, after its ident is set, before it counts as started)
            super()._set_native_id()  # type: ignore[misc]
            until_handed_over(self, "running")

    shim = types.SimpleNamespace(**vars(threading))
    shim.Thread = LateStart
    monkeypatch.setattr(loop_handoff, "threading", shim)
    assert _inline(sleeper(0.01, guard), (), {}) == threading.current_thread().name
    assert guard.handovers == 1 and not guard.lost
    assert _inline(sleeper(0.01, guard), (), {}) == threading.current_thread().name  # (a second hand-over)
    assert guard.handovers == 2 and not guard.lost
    assert await asyncio.wait_for(asyncio.sleep(0.01, "still served"), 1) == "still served"
    assert len(stand_ins) == 1, stand_ins


async def test_short_inline_calls_are_never_handed_over() -> None:
    """Calls far below the watchdog's tick run inline without a hand-over, however many there are (but for a call
    the OS kept under way for a tick or more, which the watch rightly hands over: none on an idle machine)."""
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None
    _inline(lambda a, k: None, (), {})  # (the first starts the watch: a process and threads, slow on a loaded machine)
    h0 = guard.handovers
    end = time.perf_counter() + 4 * TICK_S * 10
    n = preempted = 0
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        assert _inline(lambda a, k: a[0] + 1, (n,), {}) == n + 1
        preempted += time.perf_counter() - t0 >= TICK_S
        n += 1
        if n % 1000 == 0:
            await asyncio.sleep(0)
    assert guard.handovers - h0 <= preempted and n > 1000, (guard.handovers - h0, preempted, n)


async def test_an_error_of_a_handed_over_call_reaches_its_caller() -> None:
    """The long call raises after the hand-over: its caller gets the exception, the loop is taken back and
    goes on serving."""
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None

    def boom(args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        sleeper(0.1, guard)(args, kw)
        raise LookupError("boom")

    with pytest.raises(LookupError, match="boom"):
        _inline(boom, (), {})
    assert guard.handovers == 1 and not guard.lost  # (its first inline call: none before it)
    assert await asyncio.wait_for(asyncio.sleep(0.01, "still served"), 1) == "still served"


async def test_many_hand_overs_among_busy_tasks_lose_nothing() -> None:
    """Tasks that sleep, create tasks and run inline calls, some of which run long (handed over), some not:
    every task finishes with the right result, each sees itself as the current task after its inline call,
    and the loop is never left unserved longer than 50 ms."""
    loop = asyncio.get_running_loop()
    guard = handoff_for(loop)
    assert guard is not None
    rng = random.Random(16)
    ticker = Ticker()
    t0 = time.perf_counter()

    made_long = [0]
    preempted = [0]  # short calls under way for a tick or more: the watch may rightly hand them over too

    async def worker(i: int) -> int:
        total = 0
        for _ in range(3):
            await asyncio.sleep(rng.random() * 0.2)
            long = rng.random() < 0.15 and not guard.lost
            made_long[0] += long
            fn = sleeper(0.06) if long else (lambda a, k: a[0])
            # (while the loop is handed over, SyncPolicy runs inline functions on a worker thread instead)
            t1 = time.perf_counter()
            out = _inline(fn, (i,), {}) if not guard.lost else i
            preempted[0] += not long and time.perf_counter() - t1 >= TICK_S
            assert asyncio.current_task() is me[i]
            total += 1 if out is not None else 0
            inner = asyncio.create_task(asyncio.sleep(0.001, i))
            assert await inner == i
        return total

    me: dict[int, asyncio.Task[int]] = {}
    for i in range(60):
        me[i] = asyncio.create_task(worker(i))
    results = await asyncio.wait_for(asyncio.gather(*me.values()), 30)
    await ticker.stop()
    assert results == [3] * 60
    # (a long call that ends before the watch has seen it on two ticks is not handed over: on a loaded machine the
    # helper's ticks come late; the loop went unserved meanwhile, which the ticker measures net of that wait)
    assert made_long[0] >= 3 and 1 <= guard.handovers <= made_long[0] + preempted[0] and not guard.lost
    assert ticker.worst_gap(t0) < BOUND_S, ticker.describe(t0)


def test_the_loop_stops_cleanly_while_handed_over() -> None:
    """The program ends (its main coroutine returns) while a handed-over call still sleeps: asyncio.run
    returns once the call is done, on the thread that called it; a second loop on the same thread works. (The call
    sleeps until the stand-in has run another task, 10 s at most: on a loaded machine the hand-over may come later
    than a fixed sleep would last.)"""
    done: list[str] = []
    finished = threading.Event()

    def until_finished(args: tuple[Any, ...], kw: dict[str, Any]) -> str:
        finished.wait(10)
        return threading.current_thread().name

    async def main() -> None:
        guard = handoff_for(asyncio.get_running_loop())
        assert guard is not None

        async def finisher() -> None:
            await asyncio.sleep(0.05)
            done.append("finisher ran on " + threading.current_thread().name)
            finished.set()

        task = asyncio.create_task(finisher())
        done.append(_inline(until_finished, (), {}))
        await task

    asyncio.run(main())
    assert done == ["finisher ran on mcpkit-loop-stand-in", threading.current_thread().name], done
    asyncio.run(asyncio.sleep(0))


async def test_a_loop_that_cannot_be_handed_over_keeps_learned_functions_on_threads() -> None:
    """On a loop that is not asyncio's own (uvloop, another implementation), a learned-inline function runs on
    a worker thread (no guarantee otherwise); a declared thread=False one still runs inline."""

    class OtherLoop(asyncio.AbstractEventLoop):  # not a BaseEventLoop: no _run_once to hand over
        pass

    assert handoff_for(OtherLoop()) is None
    main = threading.get_ident()
    learned = SyncPolicy(threading.get_ident, "tool 'learned'", None, learn_calls=1)
    declared = SyncPolicy(threading.get_ident, "tool 'declared'", False)
    assert await learned() != main and learned.mode == INLINE  # learned on the worker thread
    assert await learned() == main  # asyncio's loop here: inline, guarded
    real = asyncio.get_running_loop()
    real._mcpkit_handoff = None
    try:
        loop_handoff._unsupported.add(type(real))
        loop_handoff._by_thread.clear()
        assert learned.guard() is None and await learned() != main  # unsupported: back on a thread
        assert await declared() == main  # declared inline: inline anyway
    finally:
        loop_handoff._unsupported.discard(type(real))
        delattr(real, "_mcpkit_handoff")


async def _worst_gap_of_a_blocking_call(guard: LoopHandoff) -> tuple[float, str, int]:
    """The longest the loop went unserved (seconds, net of the OS: see Ticker.worst_gap) while an inline call slept
    0.3 s (and on until handed over), the gap's account, and the hand-overs meanwhile."""
    ticker = Ticker()
    await asyncio.sleep(0.03)
    t0 = time.perf_counter()
    h0 = guard.handovers
    _inline(sleeper(0.3, guard), (), {})
    handovers = guard.handovers - h0
    await asyncio.sleep(0.03)
    await ticker.stop()
    return ticker.worst_gap(t0), ticker.describe(t0), handovers


def _helpers() -> set[int]:
    """The pids of this process's loop-watch helpers (children running loop_watch.py)."""
    found = set()
    for pid in children_by_parent().get(os.getpid(), ()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"loop_watch.py" in f.read():
                    found.add(pid)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the helper process")
def test_inline_calls_are_watched_without_taking_the_servers_gil() -> None:
    """The watch runs in a helper process: while a loop makes a stream of short inline calls for 0.3 s (thirty
    ticks), no thread of this process wakes to look at them (the watchdog count stays put, but for the alarms of
    calls the OS kept under way for a tick or more, which the helper rightly reports: none on an idle machine); a
    call that then blocks is still handed over within the bound; and the helper ends when its loop is gone."""
    before = _helpers()

    async def main() -> tuple[int, int, tuple[float, str, int]]:
        guard = handoff_for(asyncio.get_running_loop())
        assert guard is not None
        _inline(lambda a, k: None, (), {})
        await _watched_by(guard, "process")
        ticks = TICKS[0]
        preempted = 0  # calls under way for a tick or more: the helper may see one on two ticks in a row
        end = time.perf_counter() + 30 * TICK_S
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            _inline(lambda a, k: None, (), {})
            preempted += time.perf_counter() - t0 >= TICK_S
            await asyncio.sleep(0)
        woken = TICKS[0] - ticks
        return woken, preempted, await _worst_gap_of_a_blocking_call(guard)

    woken, preempted, (gap, account, handovers) = asyncio.run(main())
    assert woken <= preempted, f"a thread of the server took the GIL {woken} times to watch ({preempted} preempted)"
    assert handovers == 1 and gap < BOUND_S, account
    deadline = time.monotonic() + 5
    while _helpers() - before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.05)
    assert not _helpers() - before, "the helper outlived its loop"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to find the helper process")
async def test_a_killed_helper_leaves_the_watch_to_a_thread() -> None:
    """If the helper process dies (killed, out of memory), the next inline call starts the watchdog thread, and a
    call that blocks is still handed over within the bound."""
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None
    before = _helpers()
    _inline(lambda a, k: None, (), {})
    await _watched_by(guard, "process")
    (helper,) = _helpers() - before if len(_helpers() - before) == 1 else (None,)
    assert helper is not None
    os.kill(helper, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while guard._cell is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert guard._cell is None
    _inline(lambda a, k: None, (), {})
    assert guard._watchdog is not None  # the thread took over the watch
    gap, account, handovers = await _worst_gap_of_a_blocking_call(guard)
    assert handovers == 1 and gap < BOUND_S, account


async def test_the_first_inline_call_is_watched_while_the_helper_starts(watch: str) -> None:
    """The very first inline call of a loop blocks: the watchdog thread watches until the helper process runs, so
    the loop is handed over within the bound all the same."""
    guard = handoff_for(asyncio.get_running_loop())
    assert guard is not None and guard._cell is None
    gap, account, handovers = await _worst_gap_of_a_blocking_call(guard)
    assert handovers == 1 and gap < BOUND_S, account
    await _watched_by(guard, watch)
