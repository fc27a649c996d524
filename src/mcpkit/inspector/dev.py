"""``mcpkit dev server.py``: the server runs (stdio, errors unmasked) with the inspector attached, and starts again
whenever a watched file changes.

:class:`DevLoop` watches the server's folder (Python files; ``watchfiles``, from the ``cli`` extra) and, after a
change, opens a connection to a fresh server process with the new code. Only once that process answered does it
replace the running one (the page reloads its lists); when the new code does not load or does not answer, the
last good server keeps running and the page shows why (the error and the server's stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._extras import require
from ..transports.stdio import StdioServer
from .session import Inspector

logger = logging.getLogger("mcpkit.inspector")

__all__ = ["DevLoop", "dev_target"]


def dev_target(spec: str, python: str | None = None) -> StdioServer:
    """The server of ``spec`` (``path.py[:object]``) as ``mcpkit run --dev`` runs it, with this Python."""
    return StdioServer([python or sys.executable, "-m", "mcpkit.cli.main", "run", "--dev", spec])


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
        self.paths = [p.resolve() for p in paths]
        self.shown = shown
        self.debounce_ms = debounce_ms
        self.reloads = 0
        self.last_reload: float | None = None
        self.error: str | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reloading: asyncio.Task[None] | None = None
        self._dirty = False

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
            changed = sorted({Path(p).name for _, p in changes})
            logger.info("changed: %s: reloading", ", ".join(changed))
            # The reload runs beside the watcher, never inside this loop: watchfiles forgets what changed while
            # nobody waits on it, so an edit saved during a reload (a second or so) was lost and the server kept
            # the code before it. Changes seen while a reload runs make one more reload after it.
            self._dirty = True
            if self._reloading is None or self._reloading.done():
                self._reloading = asyncio.get_running_loop().create_task(self._reload_while_changed())

    async def _reload_while_changed(self) -> None:
        while self._dirty:
            self._dirty = False
            await self.reload()

    async def reload(self) -> bool:
        """Start the server again with the code as it is now; keep the running one when that fails."""
        failure = await self.inspector.connect(keep_on_failure=True)
        if failure is None and self.inspector.status == "connected":
            self.reloads += 1
            self.last_reload = time.time()
            self.error = None
            self.publish()
            return True
        self.error = _describe(failure or {"message": "the server did not connect"})
        self.publish()
        return False
