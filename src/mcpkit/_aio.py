"""Small asyncio helpers shared by the engine and the transports (no mcpkit imports)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

if sys.version_info >= (3, 12):
    current_task = asyncio.current_task  # implemented in C from 3.12
else:  # 3.11: asyncio.current_task is a Python function around this lookup; this skips its frame
    _current_tasks: dict[asyncio.AbstractEventLoop, asyncio.Task[Any]] = asyncio.tasks._current_tasks  # type: ignore[attr-defined]

    def current_task() -> asyncio.Task[Any] | None:
        """The running task (like :func:`asyncio.current_task` without arguments)."""
        return _current_tasks.get(asyncio.get_running_loop())


__all__ = ["current_task"]
