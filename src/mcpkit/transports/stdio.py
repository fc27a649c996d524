"""stdio transport: newline-delimited JSON-RPC over a child process's stdin/stdout.

Server side (:class:`StdioServerTransport`): reads stdin, writes stdout. Before anything else it moves the real
stdout to a private file descriptor and points fd 1 at stderr, so a stray ``print`` in user code lands on stderr
instead of corrupting the protocol stream.

Client side (:class:`StdioClientTransport`): spawns the server in its own process group, reads its stdout,
keeps the last lines of its stderr for the caller, and on close: closes stdin, waits, SIGTERM, waits, SIGKILL,
and always reaps the child (no orphans, no zombies).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sys
from collections import deque
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from .._aio import running_loop as _running_loop
from .._runtime import read_in_chunks
from ..engine import BaseConnection, Outgoing
from ..protocol.errors import ConnectionClosed, FrameTooLarge
from ..protocol.oversize import RequestIdScanner
from .base import DEFAULT_MAX_MESSAGE_SIZE

logger: logging.Logger = logging.getLogger("mcpkit.stdio")

_WRITE_HIGH_WATER = 1024 * 1024
_COPY_LIMIT = 16 * 1024  # a message at least this long is written as is, then its newline (no copy)
#: Bytes read from a pipe at a time. asyncio's default (256 KiB) is above glibc malloc's mmap threshold (128 KiB),
#: so each read maps a fresh buffer and unmaps it again: three system calls, a page fault and a TLB flush per
#: message. 64 KiB comes from the heap and is reused (measured, sequential tools/call over stdio: about 20 µs
#: less server CPU per call, 20% more calls/s). Longer messages just take more reads.
PIPE_READ_SIZE = 64 * 1024


class _FlowControl(asyncio.Protocol):
    def __init__(self, on_lost: Callable[[], None] | None = None) -> None:
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False
        self._on_lost = on_lost

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.resume_writing()
        if self._on_lost is not None:
            self._on_lost()

    async def drain(self) -> None:
        if self._paused:
            # one future for every writer waiting (each request's task may be one): a second drain must not replace
            # the first's future, which would then never be resolved; shielded, so that a waiter cancelled does not
            # cancel it for the others
            waiter = self._waiter
            if waiter is None or waiter.done():
                waiter = self._waiter = asyncio.get_running_loop().create_future()
            await asyncio.shield(waiter)


class _TooLarge:
    """Queue marker for a line that exceeded the limit (it was discarded up to its newline; its first and last
    bytes wait in ``_LineReader.oversized``, in the same order)."""


_TOO_LARGE = _TooLarge()
_MAX_QUEUED_FRAMES = 512  # past this many parsed-but-unread lines, stop reading the pipe until the peer catches up


class _BlockingReader(asyncio.ReadTransport):
    """Standard input the event loop cannot watch (a regular file, ``/dev/null``): epoll refuses them, and a server
    started with ``< /dev/null`` used to hang. Read in a worker thread instead, one chunk at a time, honouring
    ``pause_reading`` so memory stays bounded as with a pipe."""

    def __init__(self, fd: int, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._fd = fd
        self._protocol = protocol
        self._go = asyncio.Event()
        self._go.set()
        self._closing = False
        protocol.connection_made(self)
        self._task = asyncio.get_running_loop().create_task(self._pump())

    def pause_reading(self) -> None:
        self._go.clear()

    def resume_reading(self) -> None:
        self._go.set()

    def is_reading(self) -> bool:
        return self._go.is_set() and not self._closing

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._go.set()

    async def _pump(self) -> None:
        error: Exception | None = None
        try:
            while not self._closing:
                await self._go.wait()
                if self._closing:
                    break
                chunk = await asyncio.to_thread(os.read, self._fd, 65536)
                if not chunk:
                    self._protocol.eof_received()
                    break
                self._protocol.data_received(chunk)
        except OSError as exc:
            error = exc
        self._protocol.connection_lost(error)


def _pollable(fd: int) -> bool:
    """Can the event loop watch ``fd``? Pipes, sockets and terminals yes; regular files and other character
    devices (``/dev/null``) no."""
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return True  # let connect_read_pipe report it
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


class _LineReader(asyncio.Protocol):
    """Newline framing done where the bytes arrive: every complete line of a chunk is queued at once, so a burst of
    requests costs one wake-up, not one per line. Memory is bounded: an over-long line is discarded as it streams
    (only a marker is queued once the line ends, with the request id a :class:`RequestIdScanner` found in it as it
    streamed, to answer the request with its id) and reading pauses while too many lines wait to be consumed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.frames: deque[bytes | _TooLarge] = deque()
        self._parts: list[bytes] = []  # the unfinished line, in chunks (no quadratic re-copying)
        self._partial = 0
        self._skipping = False  # inside an over-long line: drop bytes until its newline
        self._scanner = RequestIdScanner()  # follows the over-long line being dropped, for its request id
        self.oversized: deque[int | str | None] = deque()  # the request id of each queued _TOO_LARGE
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False
        self.feed: Callable[[bytes], bool] | None = None
        self._consumer_busy = False  # the consumer holds a line it has not finished with

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        frames = self.frames
        start = 0
        nl = data.find(b"\n")
        while nl != -1:
            if self._skipping:
                self._skipping = False
                self._scanner.feed(data[start:nl])
                self._too_large(self._scanner.request_id())
            elif self._parts:
                self._parts.append(data[start:nl])
                line = b"".join(self._parts)
                self._parts.clear()
                self._partial = 0
                self._queue_line(line)
            else:
                self._queue_line(data[start:nl])
            start = nl + 1
            nl = data.find(b"\n", start)
        if start < len(data):
            if self._skipping:  # (first, so the usual case jumps no more)
                self._scanner.feed(data[start:] if start else data)
            else:
                rest = data[start:] if start else data
                self._partial += len(rest)
                if self._partial > self.limit:
                    self._skip_line(rest)
                else:
                    self._parts.append(rest)
        if frames:
            self._wake()
            if len(frames) >= _MAX_QUEUED_FRAMES and not self._paused and self._transport is not None:
                self._paused = True
                self._transport.pause_reading()

    def _skip_line(self, rest: bytes) -> None:
        """The line being read is over the limit: follow its bytes for its request id, drop them up to its newline
        (its marker is queued at its end, when the whole line has been seen)."""
        scanner = self._scanner = RequestIdScanner()
        for part in self._parts:
            scanner.feed(part)
        scanner.feed(rest)
        self._parts.clear()
        self._partial = 0
        self._skipping = True

    def _too_large(self, request_id: int | str | None) -> None:
        self.oversized.append(request_id)
        self.frames.append(_TOO_LARGE)

    def _queue_line(self, line: bytes) -> None:
        if len(line) > self.limit:
            scanner = RequestIdScanner()
            scanner.feed(line)
            self._too_large(scanner.request_id())
            return
        line = line.strip()
        if not line:
            return
        feed = self.feed
        if feed is not None and not self.frames and not self._consumer_busy:
            # nothing ahead of this line: the peer may take it right here (a request starts without a reader hop)
            try:
                if feed(line):
                    return
            except Exception:
                logger.exception("stdio: fast path failed; the line goes the usual way")
        self.frames.append(line)

    def eof_received(self) -> bool | None:
        self._finish()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if self._eof:
            return
        if self._skipping:  # input ended inside an over-long line
            self._skipping = False
            self._too_large(self._scanner.request_id())
        elif self._parts:
            rest = b"".join(self._parts).strip()  # a last line without its newline still counts
            if rest:
                self.frames.append(rest)
        self._parts.clear()
        self._eof = True
        self._wake()

    def close(self) -> None:
        """Stop reading (the pipe is closed); a waiting :meth:`receive` returns None."""
        if self._transport is not None:
            self._transport.close()
        self._finish()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None:
            self._waiter = None
            if not w.done():
                w.set_result(None)

    async def receive(self) -> bytes | None:
        frames = self.frames
        self._consumer_busy = False
        while not frames:
            if self._eof:
                return None
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None
        item = frames.popleft()
        self._consumer_busy = True
        if self._paused and len(frames) < _MAX_QUEUED_FRAMES // 4 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        if item is _TOO_LARGE:
            raise FrameTooLarge(self.limit, self.oversized.popleft())
        return item  # type: ignore[return-value]


class StdioServerTransport(BaseConnection):
    """The server end of stdio: read requests from stdin, write messages to stdout.

    Outgoing messages leave at once when nothing else is being worked on; while several requests run, their
    answers are gathered and leave together (a burst of 32 answers is one system call, not 32), at the latest on
    the next pass of the event loop. Order is kept and :meth:`close` flushes what is left.

    Args:
        max_message_size: longest accepted line in bytes; longer lines are answered with an error and skipped.
        guard_stdout: redirect fd 1 to stderr after taking a private copy for the protocol (recommended).
    """

    def __init__(
        self,
        *,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        guard_stdout: bool = True,
        stdin: IO[bytes] | None = None,
        stdout: IO[bytes] | None = None,
    ) -> None:
        self.max_message_size = max_message_size
        self._guard = guard_stdout
        self._stdin = stdin
        self._stdout = stdout
        self._lines = _LineReader(max_message_size)
        self._write_transport: asyncio.WriteTransport | None = None
        self._flow: _FlowControl | None = None
        self._blocking_out: IO[bytes] | None = None
        self._blocking_in: _BlockingReader | None = None  # stdin is a regular file or /dev/null
        self._closed = False
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._load: Callable[[], int] | None = None

    def set_fast_path(self, feed: Callable[[bytes], bool] | None, load: Callable[[], int] | None = None) -> None:
        """Optional shortcuts from the peer (``Peer.feed`` and ``Peer.inflight_count``).

        ``feed`` takes a line straight from the pipe when nothing is queued ahead of it and returns True if it
        handled it (a request started, a response matched); anything else goes through :meth:`receive` in order.
        ``load`` counts the requests being worked on: a message sent while it is at most 1 leaves immediately,
        otherwise it may wait a moment for company."""
        self._load = load
        self._lines.feed = feed

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        stdin = self._stdin if self._stdin is not None else sys.stdin.buffer
        if self._stdout is not None:
            out_fd = self._stdout.fileno()
        else:
            out_fd = os.dup(1)
            if self._guard:
                os.dup2(2, 1)  # stray writes to fd 1 (print, C extensions) now go to stderr
            with contextlib.suppress(Exception):
                sys.stdout.flush()  # (after the move: what the module printed before serving goes to stderr too)
        lines = self._lines
        lines.limit = self.max_message_size  # (the attribute may have been changed since __init__)
        if _pollable(stdin.fileno()):
            reading, _ = await loop.connect_read_pipe(lambda: lines, stdin)
            read_in_chunks(reading, PIPE_READ_SIZE)
        else:
            self._blocking_in = _BlockingReader(stdin.fileno(), lines)
        out_file = os.fdopen(out_fd, "wb", buffering=0, closefd=self._stdout is None)
        try:
            # the client's end of stdout closed (the client is gone, even if its end of stdin is still held open
            # by a process it left behind): nothing can be answered any more, so input ends here as at EOF
            flow = _FlowControl(on_lost=lines.close)
            transport, _ = await loop.connect_write_pipe(lambda: flow, out_file)
            self._flow = flow
            self._write_transport = transport
        except ValueError:
            # stdout is a regular file: asyncio cannot watch it, but writes to files never block for long.
            self._blocking_out = out_file

    def receive(self) -> Coroutine[Any, Any, bytes | None]:
        """The next line (stripped); None at end of input; :class:`FrameTooLarge` for an over-long line."""
        return self._lines.receive()

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        if self._closed:
            raise ConnectionClosed("stdout is closed")
        transport = self._write_transport
        if transport is not None:
            if self._flow is not None and self._flow.closed:
                raise ConnectionClosed("stdout is closed")
            load = self._load
            if load is None or load() <= 1:
                if self._out:
                    self._out.append(data)
                    self._flush()
                elif len(data) < _COPY_LIMIT:
                    transport.write(data + b"\n")
                else:  # a large message is not copied to add its newline
                    transport.write(data)
                    transport.write(b"\n")
            else:
                self._out.append(data)
                self._out_bytes += len(data) + 1
                if self._flush_handle is None:
                    self._flush_handle = _running_loop().call_soon(self._flush)
                if self._out_bytes >= _WRITE_HIGH_WATER:
                    self._flush()
                elif transport.get_write_buffer_size() <= _WRITE_HIGH_WATER:
                    return
                # (else the client reads slower than we write: wait below, holding the request's slot, so that the
                # peer stops reading requests instead of buffering their answers without end)
            if transport.get_write_buffer_size() > _WRITE_HIGH_WATER and self._flow is not None:
                await self._flow.drain()
        elif self._blocking_out is not None:
            self._blocking_out.write(data + b"\n")
        else:
            raise ConnectionClosed("transport not started")

    def _flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        out = self._out
        if not out or self._write_transport is None or self._write_transport.is_closing():
            out.clear()
            self._out_bytes = 0
            return
        if len(out) == 1:
            self._write_transport.write(out[0] + b"\n")
        else:
            out.append(b"")
            self._write_transport.write(b"\n".join(out))
        out.clear()
        self._out_bytes = 0

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._write_transport is not None:
            self._flush()
            if self._flow is not None and not self._flow.closed:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self._flow.drain(), 5.0)
            self._write_transport.close()
        if self._blocking_out is not None:
            with contextlib.suppress(Exception):
                self._blocking_out.flush()


@dataclass
class StdioServer:
    """How to launch a stdio MCP server: a command line (string, shell-split) or an argv list.

    ``env`` entries are added to the current environment (set a value to None to remove a variable).
    ``stderr`` is ``"capture"`` (kept in a bounded buffer, readable via ``transport.stderr_lines``),
    ``"inherit"`` (goes to our stderr) or ``"devnull"``.

    A captured stderr is bounded in bytes as well as lines, whatever the server writes: each line is cut to
    ``stderr_line_bytes`` bytes (the rest of it is dropped and counted), and the buffer keeps the newest lines that
    fit in ``stderr_bytes`` bytes and ``stderr_lines`` lines. ``on_stderr`` gets every (cut) line.
    """

    command: str | Sequence[str]
    env: Mapping[str, str | None] | None = None
    cwd: str | None = None
    stderr: str = "capture"
    on_stderr: Callable[[str], Any] | None = None
    shutdown_timeout: float = 2.0
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


class StdioClientTransport(BaseConnection):
    """The client end of stdio: spawns the server and talks to it over its stdin/stdout."""

    def __init__(self, server: StdioServer) -> None:
        self.server = server
        self.process: asyncio.subprocess.Process | None = None
        self.stderr_lines: deque[str] = deque(maxlen=server.stderr_lines)
        self._stderr_size = 0  # characters held in stderr_lines
        self._stderr_task: asyncio.Task[None] | None = None
        self._closed = False
        self._lines = _LineReader(server.max_message_size)

    def set_fast_path(self, feed: Callable[[bytes], bool] | None, load: Callable[[], int] | None = None) -> None:
        """``Peer.feed``: a line from the server's stdout is offered to it as it arrives (a response completes its
        request without a reader hop) when nothing is queued ahead of it; see :class:`StdioServerTransport`."""
        self._lines.feed = feed

    async def start(self) -> None:
        argv = self.server.argv
        if not argv:
            raise ValueError("empty command line")
        env = dict(os.environ)
        for k, v in (self.server.env or {}).items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        stderr: int | None
        if self.server.stderr == "inherit":
            stderr = None
        elif self.server.stderr == "devnull":
            stderr = asyncio.subprocess.DEVNULL
        else:
            stderr = asyncio.subprocess.PIPE
        # The server's stdout is our own pipe, read by a framing protocol (see _LineReader), not a StreamReader.
        out_r, out_w = os.pipe()
        try:
            self.process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=out_w,
                stderr=stderr,
                env=env,
                cwd=self.server.cwd,
                start_new_session=True,  # own process group: close() can signal the whole tree
                limit=self.server.max_message_size + 1,
            )
        except BaseException:
            os.close(out_r)
            raise
        finally:
            os.close(out_w)
        lines = self._lines
        lines.limit = self.server.max_message_size
        reading, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: lines, os.fdopen(out_r, "rb", buffering=0)
        )
        read_in_chunks(reading, PIPE_READ_SIZE)
        if self.process.stderr is not None:
            self._stderr_task = asyncio.get_running_loop().create_task(self._read_stderr(self.process.stderr))

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        """Split the server's stderr into lines, bounded in bytes: a line longer than ``stderr_line_bytes`` is cut
        (the rest is read and dropped, never buffered) and the kept lines fit in ``stderr_bytes``."""
        line_cap = max(1, self.server.stderr_line_bytes)
        partial = bytearray()
        dropped = 0  # bytes of the current line beyond line_cap
        while True:
            try:
                chunk = await stream.read(65536)
            except Exception:
                return
            if not chunk:
                if partial or dropped:
                    self._stderr_line(bytes(partial), dropped)
                return
            start = 0
            while start < len(chunk):
                nl = chunk.find(b"\n", start)
                end = len(chunk) if nl < 0 else nl
                room = line_cap - len(partial)
                if room > 0:
                    partial += chunk[start : min(end, start + room)]
                dropped += max(0, end - start - max(room, 0))
                if nl < 0:
                    break
                self._stderr_line(bytes(partial), dropped)
                partial.clear()
                dropped = 0
                start = nl + 1

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
        proc = self.process
        if self._closed or proc is None or proc.stdin is None or proc.stdin.is_closing():
            raise ConnectionClosed("the server's stdin is closed")
        proc.stdin.write(data + b"\n")
        transport = proc.stdin.transport
        if transport.get_write_buffer_size() > _WRITE_HIGH_WATER:  # type: ignore[attr-defined]
            try:
                await proc.stdin.drain()
            except (ConnectionResetError, BrokenPipeError) as exc:
                raise ConnectionClosed(f"the server's stdin is closed: {exc}") from None

    async def close(self) -> None:
        """Close stdin, wait; SIGTERM the process group, wait; SIGKILL; always reap."""
        if self._closed:
            return
        self._closed = True
        proc = self.process
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        t = self.server.shutdown_timeout
        if not await self._wait(t):
            self._signal(signal.SIGTERM)
            if not await self._wait(t):
                self._signal(signal.SIGKILL)
                await self._wait(None)
        else:
            # The server exited; its group may still hold grandchildren that inherited our pipes.
            self._signal(signal.SIGTERM)
        self._lines.close()  # a grandchild may still hold the pipe's write end: stop reading regardless
        if self._stderr_task is not None:
            try:
                await asyncio.wait_for(self._stderr_task, 1.0)
            except (TimeoutError, Exception):
                self._stderr_task.cancel()

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
