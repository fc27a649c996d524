"""The client end of stdio: launch the server as a child process in its own process group, talk to it over its
stdin/stdout, keep the last lines of its stderr, and on close: close stdin, wait, SIGTERM, wait, SIGKILL, then the
same for anything the server left in its group; always reap (no orphans, no zombies)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._runtime import read_in_chunks
from ..engine import BaseConnection, Outgoing
from ..protocol.errors import ConnectionClosed
from .base import DEFAULT_MAX_MESSAGE_SIZE
from .stdio_lines import PIPE_READ_SIZE, WRITE_HIGH_WATER, LineReader
from .stdio_process import ChildProcess, PipeWriter

logger: logging.Logger = logging.getLogger("mcpkit.stdio")

#: How long a cancelled start or close waits for the server it SIGKILLed to be reaped.
ABANDON_REAP_WAIT = 5.0

#: What a server launched with ``StdioServer(inherit_env=False)`` gets of this process's environment.
_WINDOWS_ENV = "APPDATA HOMEDRIVE HOMEPATH LOCALAPPDATA PATH PATHEXT PROCESSOR_ARCHITECTURE SYSTEMDRIVE SYSTEMROOT TEMP"
SAFE_ENV: tuple[str, ...] = tuple(
    (_WINDOWS_ENV + " USERNAME USERPROFILE" if sys.platform == "win32" else "HOME LOGNAME PATH SHELL TERM USER").split()
)


@dataclass
class StdioServer:
    """How to launch a stdio MCP server: a command line (string, shell-split) or an argv list.

    The server inherits this process's whole environment, and ``env`` entries are added to it (set a value to None
    to remove a variable). With ``inherit_env=False`` it gets only the few variables a program needs to run
    (:data:`SAFE_ENV`: ``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``, the set the official SDKs pass by
    default) plus ``env``: nothing else of this process's environment (API keys, tokens) reaches the server.
    ``stderr`` is ``"capture"`` (kept in a bounded buffer, readable via ``transport.stderr_lines``),
    ``"inherit"`` (goes to our stderr) or ``"devnull"``.

    A captured stderr is bounded in bytes as well as lines, whatever the server writes: each line is cut to
    ``stderr_line_bytes`` bytes (the rest of it is dropped and counted), and the buffer keeps the newest lines that
    fit in ``stderr_bytes`` bytes and ``stderr_lines`` lines. ``on_stderr`` gets every (cut) line.

    ``extra`` is the caller's own data about this server (a label, where its config came from): mcpkit keeps it
    with the rest and never reads it.
    """

    command: str | Sequence[str]
    env: Mapping[str, str | None] | None = None
    cwd: str | None = None
    stderr: str = "capture"
    on_stderr: Callable[[str], Any] | None = None
    shutdown_timeout: float = 2.0
    inherit_env: bool = True
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    stderr_lines: int = 1000
    stderr_bytes: int = 256 * 1024
    stderr_line_bytes: int = 8 * 1024
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        if isinstance(self.command, str):
            return shlex.split(self.command)
        return list(self.command)


class _StderrReader(asyncio.Protocol):
    """Splits the server's stderr into lines as it arrives, bounded: a line longer than ``line_cap`` bytes is cut
    (the rest is counted and dropped, never buffered); each line goes to ``on_line(text_bytes, dropped)``."""

    def __init__(self, line_cap: int, on_line: Callable[[bytes, int], None], done: asyncio.Future[None]) -> None:
        self._cap = line_cap
        self._on_line = on_line
        self._partial = bytearray()
        self._dropped = 0  # bytes of the current line beyond the cap
        self._transport: asyncio.BaseTransport | None = None
        self.done = done  # resolved when the pipe ends (every writer gone) or is closed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        start = 0
        while start < len(data):
            nl = data.find(b"\n", start)
            end = len(data) if nl < 0 else nl
            room = self._cap - len(self._partial)
            if room > 0:
                self._partial += data[start : min(end, start + room)]
            self._dropped += max(0, end - start - max(room, 0))
            if nl < 0:
                return
            self._emit()
            start = nl + 1

    def _emit(self) -> None:
        raw, dropped = bytes(self._partial), self._dropped
        self._partial.clear()
        self._dropped = 0
        self._on_line(raw, dropped)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._partial or self._dropped:
            self._emit()
        if not self.done.done():
            self.done.set_result(None)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class StdioClientTransport(BaseConnection):
    """The client end of stdio: spawns the server and talks to it over its stdin/stdout."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server
        self.process: ChildProcess | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._writer: PipeWriter | None = None
        self.stderr_lines: deque[str] = deque(maxlen=server.stderr_lines)
        self._stderr_size = 0  # characters held in stderr_lines
        self._stderr: _StderrReader | None = None
        self._closed = False
        self._lines = LineReader(server.max_message_size)

    def set_fast_path(self, feed: Callable[[bytes], bool] | None, load: Callable[[], int] | None = None) -> None:
        """``Peer.feed``: a line from the server's stdout is offered to it as it arrives (a response completes its
        request without a reader hop) when nothing is queued ahead of it; see :class:`StdioServerTransport`."""
        self._lines.feed = feed

    async def start(self) -> None:
        argv = self.server.argv
        if not argv:
            raise ValueError("empty command line")
        if self.server.inherit_env:
            env = dict(os.environ)
        else:
            env = {k: os.environ[k] for k in SAFE_ENV if k in os.environ and not os.environ[k].startswith("()")}
        for k, v in (self.server.env or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        # Every pipe is our own, wrapped by the loop: the server's stdout and a captured stderr are read by
        # protocols (a helper the server started, a launcher's child or a browser, may hold them after the server
        # has exited: its exit is not theirs to delay), and the process is reaped by :class:`ChildProcess`, not by
        # asyncio's subprocess transport, which can hang forever when a start is cancelled (see stdio_process).
        stderr: int | None = None  # "inherit"
        err_r = -1
        if self.server.stderr == "devnull":
            stderr = subprocess.DEVNULL
        elif self.server.stderr != "inherit":
            err_r, stderr = os.pipe()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        ours = [in_w, out_r, *([err_r] if err_r >= 0 else [])]  # our ends, closed here until a transport owns one
        try:
            popen = subprocess.Popen(
                argv,
                stdin=in_r,
                stdout=out_w,
                stderr=stderr,
                env=env,
                cwd=self.server.cwd,
                start_new_session=True,  # own process group: close() can signal the whole tree
            )
        except BaseException:
            for fd in ours:
                os.close(fd)
            raise
        finally:
            os.close(in_r)
            os.close(out_w)
            if err_r >= 0:
                os.close(stderr)  # type: ignore[arg-type]
        loop = asyncio.get_running_loop()
        self.process = ChildProcess(popen, loop)
        try:
            # (a start cancelled from here on, or failing, ends the server it started: nobody else knows of it)
            writer = self._writer = PipeWriter()
            self._stdin, _ = await loop.connect_write_pipe(lambda: writer, os.fdopen(ours.pop(0), "wb", buffering=0))
            lines = self._lines
            lines.limit = self.server.max_message_size
            reading, _ = await loop.connect_read_pipe(lambda: lines, os.fdopen(ours.pop(0), "rb", buffering=0))
            read_in_chunks(reading, PIPE_READ_SIZE)
            if err_r >= 0:
                cap = max(1, self.server.stderr_line_bytes)
                reader = self._stderr = _StderrReader(cap, self._stderr_line, loop.create_future())
                await loop.connect_read_pipe(lambda: reader, os.fdopen(ours.pop(0), "rb", buffering=0))
        except BaseException:
            for fd in ours:
                os.close(fd)
            await self._abandon()
            raise

    async def _abandon(self) -> None:
        """A start that did not complete, or a close cancelled part way: SIGKILL the server's group, close what was
        opened, reap the server (within :data:`ABANDON_REAP_WAIT`; past it, the loop still reaps it when it ends)."""
        self._closed = True
        self._signal(signal.SIGKILL)
        if self._stdin is not None:
            self._stdin.abort()
        self._lines.close()
        if self._stderr is not None:
            self._stderr.close()
        assert self.process is not None
        with contextlib.suppress(Exception, asyncio.CancelledError):  # (cancelled again: it is killed all the same)
            await asyncio.wait_for(self.process.wait(), ABANDON_REAP_WAIT)

    def _stderr_line(self, raw: bytes, dropped: int) -> None:
        text = raw.decode("utf-8", "replace").rstrip("\r")
        if dropped:
            text += f" [... {dropped} more bytes of this line dropped: StdioServer(stderr_line_bytes=...)]"
        lines = self.stderr_lines
        if lines.maxlen is not None and len(lines) >= lines.maxlen > 0:
            self._stderr_size -= len(lines[0])  # the deque drops it on append
        lines.append(text)
        self._stderr_size += len(text)
        while self._stderr_size > self.server.stderr_bytes and len(lines) > 1:
            self._stderr_size -= len(lines.popleft())
        if self.server.on_stderr is not None:
            try:
                self.server.on_stderr(text)
            except Exception:
                logger.exception("stderr callback failed")

    @property
    def stderr_text(self) -> str:
        return "\n".join(self.stderr_lines)

    async def receive(self) -> bytes | None:
        assert self.process is not None, "start() first"
        return await self._lines.receive()

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        stdin = self._stdin
        if self._closed or stdin is None or stdin.is_closing():
            raise ConnectionClosed("the server's stdin is closed")
        stdin.write(data + b"\n")
        if stdin.get_write_buffer_size() > WRITE_HIGH_WATER:
            assert self._writer is not None
            try:
                await self._writer.drain()
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed(f"the server's stdin is closed: {exc}") from None

    async def close(self) -> None:
        """Close stdin, wait; SIGTERM the process group, wait; SIGKILL; always reap. A close cancelled part way
        (``asyncio.run`` cancelling every task as it ends, a timeout around it) SIGKILLs the group at once."""
        if self._closed:
            return
        self._closed = True
        if self.process is None:
            return
        try:
            await self._stop()
        except BaseException:
            await self._abandon()
            raise

    async def _stop(self) -> None:
        proc = self.process
        assert proc is not None
        if self._stdin is not None:
            with contextlib.suppress(Exception):
                self._stdin.close()
        t = self.server.shutdown_timeout
        if not await self._wait(t):
            self._signal(signal.SIGTERM)
            if not await self._wait(t):
                self._signal(signal.SIGKILL)
                await self._wait(None)
        # The server is gone; its group may still hold processes it started, which inherited our pipes: the same
        # steps for them (SIGTERM, wait, SIGKILL), so that nothing it started outlives the connection.
        if self._group_alive():
            self._signal(signal.SIGTERM)
            deadline = time.monotonic() + t
            while self._group_alive() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            if self._group_alive():
                self._signal(signal.SIGKILL)
        self._lines.close()  # a process outside the group may still hold the pipe's write end: stop reading
        if self._stderr is not None:
            with contextlib.suppress(TimeoutError):  # (its last lines, once every writer is gone)
                await asyncio.wait_for(asyncio.shield(self._stderr.done), 1.0)
            self._stderr.close()

    def _group_alive(self) -> bool:
        assert self.process is not None
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    async def _wait(self, timeout: float | None) -> bool:
        assert self.process is not None
        try:
            await asyncio.wait_for(self.process.wait(), timeout)
            return True
        except TimeoutError:
            return False

    def _signal(self, sig: int) -> None:
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, sig)

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.returncode
