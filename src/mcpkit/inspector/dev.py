"""``mcpkit dev server.py``: the server runs (stdio, errors unmasked) with the inspector attached, and starts again
whenever a watched file changes.

:class:`DevLoop` watches the server's folder (Python files; ``watchfiles``, from the ``cli`` extra) and, after a
change, opens a connection to a fresh server process with the new code. Only once that process answered does it
replace the running one (the page reloads its lists); when the new code does not load or does not answer, the
last good server keeps running and the page shows why (the error and the server's stderr). A change made while
a server is still starting abandons that start (it runs older code, and may hang) and starts the new code.

The polling watcher (``WATCHFILES_FORCE_POLLING``, and watchfiles' default on WSL) compares file times in whole
seconds: a file saved again within the second of a change it already reported is never reported. The loop looks
again at the files of each change once that second is over, and reloads when one was saved since without its time
moving to a later second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._extras import require
from ..transports.stdio import StdioServer
from .session import Inspector

logger: logging.Logger = logging.getLogger("mcpkit.inspector")

__all__ = ["DevLoop", "dev_target"]

#: How long after the end of the second of a change the loop looks at its files again (file times lag the clock a
#: little: they come from the kernel's coarse clock).
LOOK_AGAIN_MARGIN = 0.1

_Stat = tuple[int, int, int]  # (mtime_ns, size, inode): an editor that saves by renaming changes the inode


def _stat(path: str) -> _Stat | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _missed(before: _Stat | None, now: _Stat | None) -> bool:
    """Whether a file went from ``before`` to ``now`` unseen by a watcher that compares whole seconds: it changed,
    and its time did not move to a later second (a creation or a removal is always seen)."""
    if before is None or now is None or before == now:
        return False
    return now[0] // 1_000_000_000 <= before[0] // 1_000_000_000


def dev_target(spec: str, python: str | None = None) -> StdioServer:
    """The server of ``spec`` (``path.py[:object]``) as ``mcpkit run --dev`` runs it, with this Python.

    It writes no bytecode (``-B``): Python trusts cached bytecode whose source has the same time, in whole seconds,
    and size, so a same-size edit saved within the second of the version compiled before would run that version."""
    return StdioServer([python or sys.executable, "-B", "-m", "mcpkit.cli.main", "run", "--dev", spec])


def _describe(failure: dict[str, Any]) -> str:
    text = str(failure.get("message") or "the new code did not start")
    stderr = failure.get("stderr")
    if stderr:
        text += "\n\n" + str(stderr).rstrip()
    return text


class DevLoop:
    """Watch ``paths`` and reload ``inspector``'s server when a Python file among them changes."""

    def __init__(self, inspector: Inspector, paths: Sequence[Path], *, shown: str, debounce_ms: int = 300) -> None:
        self.inspector = inspector
        self.paths: list[Path] = [p.resolve() for p in paths]
        self.shown = shown
        self.debounce_ms = debounce_ms
        self.reloads: int = 0
        self.last_reload: float | None = None
        self.error: str | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reloading: asyncio.Task[None] | None = None
        self._dirty = False
        # The files of the changes of the last second or so, as they were when reported: looked at again (and
        # forgotten) once that second is over. At most the files of the changes watchfiles reported in that time.
        self._reported: dict[str, _Stat | None] = {}
        self._look_again: asyncio.TimerHandle | None = None
        self._look_again_at = 0.0

    def publish(self) -> None:
        self.inspector.set_extra(
            dev={
                "watching": self.shown,
                "reloads": self.reloads,
                "lastReload": self.last_reload,
                "error": self.error,
            }
        )

    async def start(self) -> None:
        """Start watching (in the background)."""
        require("watchfiles", "mcpkit dev")
        self.publish()
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def stop(self) -> None:
        self._stop.set()
        if self._look_again is not None:
            self._look_again.cancel()
            self._look_again = None
        for task in (self._task, self._reloading):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _watch(self) -> None:
        import watchfiles

        async for changes in watchfiles.awatch(
            *self.paths,
            watch_filter=watchfiles.PythonFilter(),
            debounce=self.debounce_ms,
            stop_event=self._stop,
        ):
            self._changed({p for _, p in changes})

    def _changed(self, paths: set[str]) -> None:
        logger.info("changed: %s: reloading", ", ".join(sorted({Path(p).name for p in paths})))
        for path in paths:
            self._reported[path] = _stat(path)
        self._schedule_look_again()
        # The reload runs beside the watcher, never inside its loop: watchfiles forgets what changed while nobody
        # waits on it, so an edit saved during a reload (a second or so) was lost and the server kept the code
        # before it. Changes seen while a reload runs make one more reload after it.
        self._dirty = True
        if self._reloading is None or self._reloading.done():
            self._reloading = asyncio.get_running_loop().create_task(self._reload_while_changed())
        else:  # a server still starting runs the code before this change (and may hang): start the new one now
            self.inspector.abandon_connect()

    def _schedule_look_again(self) -> None:
        """Look at the reported files again once the second of their change is over (by the clock and by their
        file times; at most two seconds from now, whatever a file's time says)."""
        now = time.time()
        seconds = [s[0] // 1_000_000_000 for s in self._reported.values() if s is not None]
        end = max([math.floor(now), *seconds]) + 1 + LOOK_AGAIN_MARGIN
        at = min(end, now + 2 + LOOK_AGAIN_MARGIN)
        if self._look_again is not None:
            if at <= self._look_again_at:
                return
            self._look_again.cancel()
        self._look_again_at = at
        self._look_again = asyncio.get_running_loop().call_later(at - now, self._look_at_reported)

    def _look_at_reported(self) -> None:
        self._look_again = None
        reported, self._reported = self._reported, {}
        missed = {path for path, before in reported.items() if _missed(before, _stat(path))}
        if missed and not self._stop.is_set():
            self._changed(missed)

    async def _reload_while_changed(self) -> None:
        while self._dirty:
            self._dirty = False
            await self.reload()

    async def reload(self) -> bool:
        """Start the server again with the code as it is now; keep the running one when that fails."""
        failure = await self.inspector.connect(keep_on_failure=True)
        if failure is not None and failure.get("abandoned"):
            return False  # (a newer change reloads next)
        if failure is None and self.inspector.status == "connected":
            self.reloads += 1
            self.last_reload = time.time()
            self.error = None
            self.publish()
            return True
        self.error = _describe(failure or {"message": "the server did not connect"})
        self.publish()
        return False
