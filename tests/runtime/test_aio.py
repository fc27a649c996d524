"""mcpkit._aio: the running loop and task without asyncio's per-call getpid() on 3.11, and never a wrong answer; the
queue bounded in bytes."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import pytest

from mcpkit._aio import SizedQueue, current_task, running_loop


def test_same_answers_as_asyncio_across_loops_in_one_thread() -> None:
    seen = []
    for _ in range(3):  # a new loop each time: the one remembered from the last run must not be returned

        async def main() -> None:
            assert running_loop() is asyncio.get_running_loop()
            assert current_task() is asyncio.current_task()
            child = asyncio.get_running_loop().create_task(_task_pair())
            inner, expected = await child
            assert inner is expected
            seen.append(asyncio.get_running_loop())

        asyncio.run(main())
    assert len({id(loop) for loop in seen}) == 3


async def _task_pair() -> tuple[object, object]:
    return current_task(), asyncio.current_task()


def test_outside_a_loop_raises_like_asyncio() -> None:
    asyncio.run(asyncio.sleep(0))  # remember a loop, then stop it
    with pytest.raises(RuntimeError):
        running_loop()
    with pytest.raises(RuntimeError):
        current_task()


def test_loops_in_other_threads_are_told_apart() -> None:
    """Two loops running at once in two threads: each thread gets its own."""
    errors: list[str] = []
    barrier = threading.Barrier(2)

    def worker() -> None:
        async def main() -> None:
            for _ in range(200):
                if running_loop() is not asyncio.get_running_loop():
                    errors.append("wrong loop")
                if current_task() is not asyncio.current_task():
                    errors.append("wrong task")
                await asyncio.sleep(0)

        barrier.wait()
        asyncio.run(main())

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert errors == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_see_the_parents_loop() -> None:
    """Forked from inside a running loop, the child's copy of that loop still names the forking thread; the child
    must not be handed it."""

    async def main() -> int:
        running_loop()  # remembered
        pid = os.fork()
        if pid == 0:  # child: no loop runs here
            code = 1
            try:
                running_loop()
            except RuntimeError:
                code = 0
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)

    if sys.version_info >= (3, 12):
        pytest.skip("3.12+ uses asyncio.get_running_loop itself")
    assert asyncio.run(main()) == 0


async def test_a_sized_queue_is_full_by_bytes_before_its_item_count() -> None:
    q: SizedQueue[bytes] = SizedQueue(256, 100, len)
    q.put_nowait(b"x" * 60)
    q.put_nowait(b"x" * 60)  # taken: the queue was under its bytes; now over them, so full
    assert q.queued_bytes == 120 and q.full() and q.qsize() == 2
    with pytest.raises(asyncio.QueueFull):
        q.put_nowait(b"x")
    waiting = asyncio.ensure_future(q.put(b"y" * 10))
    await asyncio.sleep(0)
    assert not waiting.done()  # put waits for room in bytes, as for room in items
    assert q.get_nowait() == b"x" * 60
    await asyncio.wait_for(waiting, 1)
    assert q.queued_bytes == 70 and q.qsize() == 2
    while not q.empty():
        q.get_nowait()
    assert q.queued_bytes == 0
    q.put_nowait(b"z" * 1000)  # one item larger than the bound passes alone
    assert q.full()


async def test_a_sized_queue_is_still_full_by_item_count() -> None:
    q: SizedQueue[bytes] = SizedQueue(2, 1 << 20, len)
    q.put_nowait(b"a")
    q.put_nowait(b"b")
    with pytest.raises(asyncio.QueueFull):
        q.put_nowait(b"c")
    with pytest.raises(ValueError):
        SizedQueue(2, 0, len)
