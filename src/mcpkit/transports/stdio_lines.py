"""Newline framing of the stdio pipes, shared by both ends of the stdio transport (:mod:`.stdio`,
:mod:`.stdio_client`): lines split where the bytes arrive, an over-long line dropped as it streams."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from .._runtime import reader_calls
from ..protocol.errors import FrameTooLarge
from ..protocol.oversize import RequestIdScanner

logger: logging.Logger = logging.getLogger("mcpkit.stdio")

WRITE_HIGH_WATER = 1024 * 1024
#: Bytes read from a pipe at a time. asyncio's default (256 KiB) is above glibc malloc's mmap threshold (128 KiB),
#: so each read maps a fresh buffer and unmaps it again: three system calls, a page fault and a TLB flush per
#: message. 64 KiB comes from the heap and is reused (measured, sequential tools/call over stdio: about 20 µs
#: less server CPU per call, 20% more calls/s). Longer messages just take more reads.
PIPE_READ_SIZE = 64 * 1024


class _TooLarge:
    """Queue marker for a line that exceeded the limit (it was discarded up to its newline; its first and last
    bytes wait in ``LineReader.oversized``, in the same order)."""


_TOO_LARGE = _TooLarge()
_BOM = b"\xef\xbb\xbf"
MAX_QUEUED_FRAMES = 512  # past this many parsed-but-unread lines, stop reading the pipe until the peer catches up
MAX_QUEUED_FRAME_BYTES = 8 * 1024 * 1024  # ... or this many bytes of them (lines may be 4 MiB each)


class LineReader(asyncio.Protocol):
    """Newline framing done where the bytes arrive: every complete line of a chunk is queued at once, so a burst of
    requests costs one wake-up, not one per line. Memory is bounded: an over-long line is discarded as it streams
    (only a marker is queued once the line ends, with the request id a :class:`RequestIdScanner` found in it as it
    streamed, to answer the request with its id) and reading pauses while too many lines, or too many bytes of them,
    wait to be consumed."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.frames: deque[bytes | _TooLarge] = deque()
        self._queued = 0  # the bytes of the lines in ``frames``
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
        self._head: bytes | None = b""  # the stream's first bytes while they may still be a BOM; None after
        #: a line is being fed and more lines follow it in the same chunk (a transport gathers its answers meanwhile)
        self.more: bool = False
        self._chunk: bytes | None = None  # the chunk whose lines are being fed, and where the next line starts
        self._at = 0
        self._epoch = 0  # counts hand-overs that took a chunk's rest from its callback (see taken_over)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._head is not None:  # (the stream's start only: RFC 8259 lets a parser ignore a byte order mark)
            data = self._head + data
            if len(data) < len(_BOM) and _BOM.startswith(data):
                self._head = data
                return
            self._head = None
            if data.startswith(_BOM):
                data = data[len(_BOM) :]
        frames = self.frames
        start = 0
        nl = data.find(b"\n")
        if nl != -1:
            # each line may be taken (and run) right here by ``feed``: where the next one starts, in case a hand-over
            # of the loop takes the rest of the chunk from this callback (see taken_over), and whether more follow
            epoch = self._epoch
            self._chunk = data
            while nl != -1:
                after = data.find(b"\n", nl + 1)
                self.more = after != -1
                self._at = nl + 1
                if self._skipping or self._parts:
                    self._end_long_line(data[start:nl])
                else:
                    self._queue_line(data[start:nl])
                if self._epoch != epoch:
                    return  # (the stand-in has the rest)
                start = nl + 1
                nl = after
            self.more = False
            self._chunk = None
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
            if (
                (len(frames) >= MAX_QUEUED_FRAMES or self._queued >= MAX_QUEUED_FRAME_BYTES)
                and not self._paused
                and self._transport is not None
            ):
                self._paused = True
                self._transport.pause_reading()

    def taken_over(self) -> None:
        """The event loop was handed over to a stand-in thread (:mod:`mcpkit._runtime.handoff`) while a line this
        callback fed runs inline on the loop's own thread (a sync tool that blocks). Called on the stand-in: reading
        goes on there, so that other requests are served meanwhile. The callback still under way stops after its
        line (it sees the count of hand-overs change) and the rest of its chunk is fed on the stand-in, first; the
        pipe is watched again through a new read handle (the stand-in cannot run the interrupted one, whose context
        is entered on the other thread). No two threads touch the reader at once: the call's thread waits for the
        stand-in's turn to end before it goes on."""
        self._epoch += 1
        self.more = False
        chunk, self._chunk = self._chunk, None
        transport = self._transport
        if transport is not None and not self._paused and not transport.is_closing():
            transport.pause_reading()
            transport.resume_reading()
        if chunk is not None and self._at < len(chunk):
            asyncio.get_running_loop().call_soon(self.data_received, chunk[self._at :])

    def _end_long_line(self, piece: bytes) -> None:
        """``piece`` ends a line that began in an earlier chunk: one over the limit is dropped (its marker queued),
        else its parts are joined and queued."""
        if self._skipping:
            self._skipping = False
            self._scanner.feed(piece)
            self._too_large(self._scanner.request_id())
        else:
            self._parts.append(piece)
            line = b"".join(self._parts)
            self._parts.clear()
            self._partial = 0
            self._queue_line(line)

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
        self._queued += len(line)

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
                self._queued += len(rest)
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
        if item is not _TOO_LARGE:
            self._queued -= len(item)  # type: ignore[arg-type]
        if (
            self._paused
            and len(frames) < MAX_QUEUED_FRAMES // 4
            and self._queued < MAX_QUEUED_FRAME_BYTES // 4
            and self._transport is not None
        ):
            self._paused = False
            self._transport.resume_reading()
        if item is _TOO_LARGE:
            raise FrameTooLarge(self.limit, self.oversized.popleft())
        return item  # type: ignore[return-value]


class _Interrupted:
    """The reading that :class:`GuardedLineReader` names to a hand-over (see :func:`mcpkit._runtime.reader_calls`):
    pausing the interrupted callback's reading hands the rest of its chunk, and the pipe, to the stand-in
    (:meth:`LineReader.taken_over`); reading never stops, so there is nothing to resume."""

    __slots__ = ("_lines",)

    def __init__(self, lines: LineReader) -> None:
        self._lines = lines

    def is_reading(self) -> bool:
        return not self._lines._eof

    def pause_reading(self) -> None:
        self._lines.taken_over()

    def resume_reading(self) -> None:
        return None

    def is_closing(self) -> bool:
        return self._lines._eof


class GuardedLineReader(LineReader):
    """The stdio server's reader: the requests it feeds may run right in its callback (a plain ``def`` tool run
    inline, without a task: see :meth:`mcpkit.engine.runner.RequestRunner.queue`); a call that blocks there has the
    loop handed over, and the stand-in reads on (:meth:`LineReader.taken_over`)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self._reading = _Interrupted(self)

    def data_received(self, data: bytes) -> None:
        reader_calls(self._reading, LineReader.data_received, self, data)
