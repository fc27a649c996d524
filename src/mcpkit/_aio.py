"""Small asyncio helpers shared by the engine and the transports (no mcpkit imports).

On CPython 3.11, :func:`asyncio.get_running_loop` (and so :func:`asyncio.current_task`) makes a ``getpid()``
system call on every call, to notice a fork. On a hot path that is one system call per request; from 3.12 on the
check is gone. :func:`running_loop` and :func:`current_task` give the same answers without it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from typing import Any

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


__all__ = ["current_task", "running_loop"]
