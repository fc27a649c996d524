"""stdio transport: newline-delimited JSON-RPC over a child process's stdin/stdout.

Server side (:class:`StdioServerTransport`): reads stdin, writes stdout. Before anything else it moves the real
stdout to a private file descriptor and points fd 1 at stderr, so a stray ``print`` in user code lands on stderr
instead of corrupting the protocol stream.

Client side (:class:`StdioClientTransport`, in :mod:`.stdio_client`, named here too): spawns the server in its
own process group, reads its stdout, keeps the last lines of its stderr for the caller, and on close: closes stdin,
waits, SIGTERM, waits, SIGKILL, and always reaps the child (no orphans, no zombies).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import IO, Any

from .._aio import running_loop as _running_loop
from .._runtime import read_in_chunks
from ..engine import BaseConnection, Outgoing
from ..protocol.errors import ConnectionClosed
from .base import DEFAULT_MAX_MESSAGE_SIZE
from .stdio_client import SAFE_ENV, StdioClientTransport, StdioServer
from .stdio_lines import PIPE_READ_SIZE, WRITE_HIGH_WATER, GuardedLineReader

__all__ = ["PIPE_READ_SIZE", "SAFE_ENV", "StdioClientTransport", "StdioServer", "StdioServerTransport"]

_COPY_LIMIT = 16 * 1024  # a message at least this long is written as is, then its newline (no copy)


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


class StdioServerTransport(BaseConnection):
    """The server end of stdio: read requests from stdin, write messages to stdout.

    A request read while nothing is queued runs right in the read callback (``feeds_in_reader``: no task; a call
    there that blocks has the loop handed over, and the stand-in reads on). Outgoing messages leave at once when
    nothing else is being worked on; while several requests run, or more lines of the same read follow, their
    answers are gathered and leave together (a burst of 32 answers is one system call, not 32), at the latest on
    the next pass of the event loop. Order is kept and :meth:`close` flushes what is left.

    Args:
        max_message_size: longest accepted line in bytes; longer lines are answered with an error and skipped.
        guard_stdout: redirect fd 1 to stderr after taking a private copy for the protocol (recommended).
    """

    network: str | None = "pipe"
    feeds_in_reader: bool = True  # (its reader hands its reading to the stand-in: stdio_lines.GuardedLineReader)

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
        self._lines = GuardedLineReader(max_message_size)
        self._write_transport: asyncio.WriteTransport | None = None
        self._flow: _FlowControl | None = None
        self._blocking_out: IO[bytes] | None = None
        self._blocking_in: _BlockingReader | None = None  # stdin is a regular file or /dev/null
        self._closed = False
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._flush_handle: asyncio.Handle | None = None
        self._load: Callable[[], int] | None = None
        # the write transport's buffer was past WRITE_HIGH_WATER after our last write to it: it only shrinks until our
        # next write, so while this is False a message that joins the burst needs no look at it
        self._tail_over = False

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
        waiting = self.send_now(data, msg)
        if waiting is not None:
            await waiting

    def send_now(self, data: bytes, msg: Outgoing | None = None) -> Awaitable[None] | None:
        """Write one message; None when that needed no waiting, else what to await: the client reads slower than
        the server writes (the caller waits holding its request's slot, so that the peer stops reading requests
        instead of buffering their answers without end)."""
        if self._closed:
            raise ConnectionClosed("stdout is closed")
        transport = self._write_transport
        if transport is not None:
            if self._flow is not None and self._flow.closed:
                raise ConnectionClosed("stdout is closed")
            load = self._load
            if (load is None or load() <= 1) and not self._lines.more:
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
                if self._out_bytes >= WRITE_HIGH_WATER:
                    self._flush()
                elif not self._tail_over or transport.get_write_buffer_size() <= WRITE_HIGH_WATER:
                    return None
            over = self._tail_over = transport.get_write_buffer_size() > WRITE_HIGH_WATER
            if over and self._flow is not None:
                return self._flow.drain()
            return None
        if self._blocking_out is not None:
            self._blocking_out.write(data + b"\n")
            return None
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
        transport = self._write_transport
        if len(out) == 1:
            transport.write(out[0] + b"\n")
        else:
            out.append(b"")
            transport.write(b"\n".join(out))
        out.clear()
        self._out_bytes = 0
        self._tail_over = transport.get_write_buffer_size() > WRITE_HIGH_WATER

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
