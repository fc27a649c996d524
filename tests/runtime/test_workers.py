"""The worker pool of served processes (:class:`mcpkit._runtime.WorkerPool`): real threads, real subprocesses."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from mcpkit._runtime import WorkerPool, install_pool, name_work


def test_shutdown_waits_the_grace_at_most_and_names_what_still_runs(caplog: pytest.LogCaptureFixture) -> None:
    pool = WorkerPool(grace=0.3)
    release = threading.Event()

    def stuck() -> None:
        release.wait(10)

    name_work(stuck, "tool 'stuck'")
    pool.submit(stuck)
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.sync"):
        pool.shutdown(wait=True)
    took = time.monotonic() - t0
    release.set()
    assert 0.25 < took < 2.0, took
    (record,) = caplog.records
    assert "1 call(s) still running" in record.getMessage() and "tool 'stuck'" in record.getMessage()


def test_shutdown_lets_work_that_ends_within_the_grace_end(caplog: pytest.LogCaptureFixture) -> None:
    pool = WorkerPool(grace=5)
    done: list[int] = []
    futures = [pool.submit(lambda i=i: (time.sleep(0.2), done.append(i))) for i in range(3)]
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.sync"):
        pool.shutdown(wait=True)
    assert sorted(done) == [0, 1, 2] and all(f.done() for f in futures)
    assert not caplog.records
    with pytest.raises(RuntimeError):
        pool.submit(print)


def test_no_more_threads_than_max_workers_and_queued_work_runs_in_order() -> None:
    pool = WorkerPool(max_workers=2, grace=5)
    gate = threading.Event()
    order: list[int] = []
    seen: set[str] = set()

    def job(i: int) -> int:
        seen.add(threading.current_thread().name)
        gate.wait(10)
        order.append(i)
        return i * i

    futures = [pool.submit(job, i) for i in range(6)]
    time.sleep(0.2)
    assert len(pool.running()) == 2
    gate.set()
    assert [f.result(10) for f in futures] == [i * i for i in range(6)]
    assert len(seen) == 2 and all(t.daemon for t in threading.enumerate() if t.name in seen)
    pool.shutdown()


def test_an_exception_reaches_the_caller_and_the_thread_goes_on() -> None:
    pool = WorkerPool(max_workers=1, grace=1)
    with pytest.raises(ZeroDivisionError):
        pool.submit(lambda: 1 / 0).result(5)
    assert pool.submit(lambda: "still here").result(5) == "still here"
    pool.shutdown()


def test_the_default_executor_of_asyncio_run_no_longer_holds_up_the_exit() -> None:
    """``asyncio.run`` shuts the default executor down (the grace, here 0.2 s) and the interpreter's exit joins
    none of its threads: a program whose worker sleeps 30 s ends at once, its atexit handlers run."""
    code = textwrap.dedent(
        """
        import asyncio, atexit, time
        from mcpkit._runtime import install_pool

        atexit.register(lambda: print("atexit ran", flush=True))

        async def main():
            install_pool(0.2)
            asyncio.get_running_loop().run_in_executor(None, time.sleep, 30)
            await asyncio.sleep(0.1)

        asyncio.run(main())
        print("after run", flush=True)
        """
    )
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert time.monotonic() - t0 < 10
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["after run", "atexit ran"]
    assert "sleep" in p.stderr  # (the warning names it by its qualified name: it was given no other)


def test_a_negative_grace_is_refused() -> None:
    with pytest.raises(ValueError, match="worker_grace"):
        WorkerPool(grace=-1)


async def test_run_in_executor_uses_the_installed_pool() -> None:
    pool = install_pool(1.0)
    name = await asyncio.get_running_loop().run_in_executor(None, lambda: threading.current_thread().name)
    assert name.startswith("mcpkit-worker-")
    assert pool.running() == []


async def test_settle_waits_for_work_in_flight_without_blocking_the_loop_and_no_longer_than_the_grace() -> None:
    # Counted in events, not in loop turns: the work in flight ends only when a task of the loop releases it, so
    # settle answers True only if it waited for the work AND let the loop run meanwhile (blocking the loop, it would
    # spend the whole grace, which no loaded machine's lateness reaches, and answer False).
    pool = WorkerPool(grace=30)
    try:
        first = threading.Event()
        job = pool.submit(first.wait, 10)

        async def release_once_settle_waits() -> None:
            await asyncio.sleep(0.05)
            first.set()

        releaser = asyncio.ensure_future(release_once_settle_waits())
        assert await pool.settle() is True
        ended = time.monotonic()
        assert releaser.done() and job.done() and job.result() is True  # (released by the loop, then awaited)
        assert pool.begin_grace() >= ended + 30  # the grace settle began ended unspent: a later one is whole
    finally:
        pool.shutdown(wait=False)
    pool = WorkerPool(grace=1.0)
    release = threading.Event()
    try:
        pool.submit(release.wait, 10)
        t0 = time.monotonic()
        assert await pool.settle() is False
        # all of the grace (it ends by time.monotonic, from within settle), and at the most the grace and the loop's
        # lateness, never the work's own 10 s
        assert 1.0 <= time.monotonic() - t0 < 5
        t0 = time.monotonic()
        pool.shutdown(wait=True)  # the grace was spent in settle: nothing more is waited for
        assert time.monotonic() - t0 < 0.5  # (not a second grace of 1 s)
    finally:
        release.set()
        pool.shutdown(wait=False)


def test_a_grace_begun_at_sigterm_bounds_the_shutdown_from_then() -> None:
    pool = WorkerPool(grace=0.5)
    release = threading.Event()
    pool.submit(release.wait, 10)
    end = pool.begin_grace()
    assert pool.begin_grace() == end  # (begun once)
    time.sleep(0.3)
    t0 = time.monotonic()
    pool.shutdown(wait=True)
    assert time.monotonic() - t0 < 0.4  # what was left of the grace, not all of it again
    assert time.monotonic() >= end - 0.01
    release.set()
