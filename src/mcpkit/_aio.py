"""Small asyncio helpers shared by the engine and the transports (no mcpkit imports): the running loop and task
without a system call, :func:`read_capped`, the one bounded read of a streamed HTTP response's body, and
:class:`SizedQueue`, the outgoing queues bounded in bytes as well as in messages.

On CPython 3.11, :func:`asyncio.get_running_loop` (and so :func:`asyncio.current_task`) makes a ``getpid()``
system call on every call, to notice a fork. On a hot path that is one system call per request; from 3.12 on the
check is gone. :func:`running_loop` and :func:`current_task` give the same answers without it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Protocol, TypeVar

_T = TypeVar("_T")

if sys.version_info >= (3, 12):
    current_task = asyncio.current_task  # implemented in C, no system call
    running_loop = asyncio.get_running_loop
else:  # 3.11
    _current_tasks: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] = asyncio.tasks._current_tasks  # type: ignore[attr-defined]
    _get_ident = threading.get_ident
    _get_running_loop = asyncio.get_running_loop
    _BaseEventLoop = asyncio.BaseEventLoop
    _last: list[Any] = [None]  # the loop found last (a BaseEventLoop: it records the thread that runs it)

    def running_loop() -> asyncio.AbstractEventLoop:
        """The running event loop (like :func:`asyncio.get_running_loop`).

        A :class:`asyncio.BaseEventLoop` sets ``_thread_id`` to the running thread while it runs and clears it when
        it stops; only one loop runs in a thread at a time. So if the loop found last is running in this thread, it
        is this thread's running loop, and no ``getpid()`` is needed to know it. A forked child forgets the loop
        (its copy may still say it runs in the forking thread, whose id the child's thread keeps)."""
        loop = _last[0]
        if loop is not None and loop._thread_id == _get_ident():
            return loop  # type: ignore[no-any-return]
        loop = _get_running_loop()
        # other loop classes (uvloop) keep no _thread_id we can read: they take the standard path each time
        _last[0] = loop if isinstance(loop, _BaseEventLoop) else None
        return loop

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: _last.__setitem__(0, None))

    def current_task() -> asyncio.Task[Any] | None:
        """The running task (like :func:`asyncio.current_task` without arguments)."""
        return _current_tasks.get(running_loop())


class StreamedBody(Protocol):
    """What :func:`read_capped` reads: a streamed ``httpx.Response`` (or mcpkit's lean HTTP client's response)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


async def read_capped(resp: StreamedBody, limit: int) -> bytes | None:
    """The whole body of a streamed response, or ``None`` when it is larger than ``limit`` bytes: a declared
    ``Content-Length`` above it is refused before anything is read, a body that grows past it as soon as it does
    (so a decompression bomb stops there too). The caller raises its own error and closes the response."""
    declared = resp.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class SizedQueue(asyncio.Queue[_T]):
    """An :class:`asyncio.Queue` bounded in bytes as well as in items: it is full once it holds ``maxsize`` items or
    once the sizes of its items (``size(item)``) add up to ``max_bytes``. An item is taken while the queue is not
    full, so the queued bytes stay under ``max_bytes`` plus one item, and an item larger than ``max_bytes`` passes
    alone. ``put`` waits and ``put_nowait`` raises :class:`asyncio.QueueFull`, as for a count-bounded queue."""

    def __init__(self, maxsize: int, max_bytes: int, size: Callable[[_T], int]) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        super().__init__(maxsize)
        self.max_bytes = max_bytes
        self.queued_bytes: int = 0
        self._size = size

    def full(self) -> bool:
        """Whether ``put`` would wait: ``maxsize`` items, or ``max_bytes`` bytes, are queued."""
        return self.queued_bytes >= self.max_bytes or super().full()

    def _put(self, item: _T) -> None:
        self.queued_bytes += self._size(item)
        super()._put(item)  # type: ignore[misc]

    def _get(self) -> _T:
        item: _T = super()._get()  # type: ignore[misc]
        self.queued_bytes -= self._size(item)
        return item


__all__ = ["SizedQueue", "StreamedBody", "current_task", "read_capped", "running_loop"]
