"""The stdio server's line framing, its fast path into the engine, and the engine's request slots.

The framing is exercised through the protocol object the pipe feeds (deterministic chunking); the slot test runs
a real engine whose reader sees a request and its cancellation before the request's task ever starts."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from mcpkit.engine import Peer, RequestContext
from mcpkit.protocol.errors import FrameTooLarge
from mcpkit.transports.stdio_lines import MAX_QUEUED_FRAME_BYTES, MAX_QUEUED_FRAMES, LineReader


class _FakePipe:
    def __init__(self) -> None:
        self.paused = 0
        self.resumed = 0

    def pause_reading(self) -> None:
        self.paused += 1

    def resume_reading(self) -> None:
        self.resumed += 1


async def _drain(reader: LineReader) -> list[bytes | str]:
    out: list[bytes | str] = []
    while True:
        try:
            line = await reader.receive()
        except FrameTooLarge:
            out.append("TOO LARGE")
            continue
        if line is None:
            return out
        out.append(line)


@pytest.mark.req("M014", "M015")
async def test_lines_split_anywhere_are_reassembled_exactly() -> None:
    wire = b'{"a":1}\r\n\n  \n{"b":"x y"}\n{"c":[1,2,3]}\n'
    reader = LineReader(1024)
    for i in range(len(wire)):  # one byte per chunk: every possible split point
        reader.data_received(wire[i : i + 1])
    reader.eof_received()
    assert await _drain(reader) == [b'{"a":1}', b'{"b":"x y"}', b'{"c":[1,2,3]}']


async def test_a_last_line_without_newline_still_counts_at_end_of_input() -> None:
    reader = LineReader(1024)
    reader.data_received(b'{"a":1}\n{"b":')
    reader.data_received(b"2}")
    reader.connection_lost(None)
    assert await _drain(reader) == [b'{"a":1}', b'{"b":2}']


async def test_an_oversized_line_is_dropped_as_it_streams_and_the_next_line_survives() -> None:
    limit = 100
    reader = LineReader(limit)
    big = b'{"x":"' + b"y" * 1000 + b'"}'
    for i in range(0, len(big), 30):
        reader.data_received(big[i : i + 30])
        assert reader._partial <= limit  # memory stays bounded while the line streams in
    reader.data_received(b'\n{"ok":1}\n' + b"z" * 150 + b'\n{"ok":2}\n')
    reader.eof_received()
    assert await _drain(reader) == ["TOO LARGE", b'{"ok":1}', "TOO LARGE", b'{"ok":2}']


async def test_an_oversized_request_is_refused_with_its_id_wherever_the_pipe_splits_it() -> None:
    """The id is found wherever the line has it (first, last, between long members), whatever the chunks; a
    response's id, a nested one, or text that only looks like an id inside a string, is not."""
    filler = b"y" * 5000
    lines = [
        b'{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"t":"' + filler + b'"}}',
        b'{"method":"tools/call","params":{"t":"' + filler + b'"},"jsonrpc":"2.0","id":"last"}',
        b'{"jsonrpc":"2.0","id":43,"result":{"t":"' + filler + b'"}}',
        b'{"method":"tools/call","params":{"t":"' + filler + b'","id":44}}',
        b'{"method":"tools/call","params":{"t":"' + filler + b'"},"id":45,"x":"' + filler + b'"}',
        b'{"method":"tools/call","params":{"t":"' + filler + b'\\",\\"id\\":46,\\""}}',
    ]
    wire = b"".join(line + b"\n" for line in lines) + b'{"ok":1}\n' + lines[0][:-2]  # (the last one ends with EOF)
    for size in (1, 7, 100, 511, 512, 513, 4096, len(wire)):
        reader = LineReader(1000)
        for i in range(0, len(wire), size):
            reader.data_received(wire[i : i + size])
        reader.eof_received()
        got: list[object] = []
        while True:
            try:
                line = await reader.receive()
            except FrameTooLarge as exc:
                got.append(("TOO LARGE", exc.request_id))
                continue
            if line is None:
                break
            got.append(line)
        assert got == [
            ("TOO LARGE", 41),
            ("TOO LARGE", "last"),
            ("TOO LARGE", None),
            ("TOO LARGE", None),
            ("TOO LARGE", 45),
            ("TOO LARGE", None),
            b'{"ok":1}',
            ("TOO LARGE", 41),
        ], size
        assert not reader.oversized


async def test_a_line_of_exactly_the_limit_is_accepted() -> None:
    reader = LineReader(10)
    reader.data_received(b"0123456789\n01234567890\n")
    reader.eof_received()
    assert await _drain(reader) == [b"0123456789", "TOO LARGE"]


async def test_reading_pauses_while_lines_pile_up_and_resumes_when_they_are_consumed() -> None:
    reader = LineReader(1024)
    pipe = _FakePipe()
    reader.connection_made(pipe)  # type: ignore[arg-type]
    reader.data_received(b"{}\n" * (MAX_QUEUED_FRAMES + 10))
    assert pipe.paused == 1 and pipe.resumed == 0
    taken = 0
    while pipe.resumed == 0:
        assert await reader.receive() == b"{}"
        taken += 1
    assert taken > 0 and len(reader.frames) < MAX_QUEUED_FRAMES // 4
    reader.eof_received()
    assert len(await _drain(reader)) == MAX_QUEUED_FRAMES + 10 - taken


async def test_reading_pauses_while_large_lines_pile_up_in_bytes_not_only_in_count() -> None:
    """Lines waited by count only (512), each up to the 4 MiB message limit: 2 GiB could wait unread. Now reading
    also pauses once ``MAX_QUEUED_FRAME_BYTES`` wait, and resumes once a quarter of them is left."""
    line = b'"' + b"x" * (1024 * 1024) + b'"\n'
    reader = LineReader(4 * 1024 * 1024)
    pipe = _FakePipe()
    reader.connection_made(pipe)  # type: ignore[arg-type]
    count = 0
    while not pipe.paused:
        reader.data_received(line)
        count += 1
        assert count <= MAX_QUEUED_FRAME_BYTES // len(line) + 1
    assert count < MAX_QUEUED_FRAMES and pipe.resumed == 0
    taken = 0
    while pipe.resumed == 0:
        assert len(await reader.receive() or b"") == len(line) - 1
        taken += 1
    assert 0 < taken < count and (count - taken) * len(line) < MAX_QUEUED_FRAME_BYTES // 4
    reader.eof_received()
    assert len(await _drain(reader)) == count - taken


async def test_the_fast_path_takes_a_line_only_when_nothing_is_ahead_of_it() -> None:
    """Order is kept: once a line waits in the queue (the fast path declined it), the lines after it wait too."""
    fed: list[bytes] = []

    def feed(line: bytes) -> bool:
        fed.append(line)
        return b"method" in line and b'"id"' in line  # take requests, decline notifications

    reader = LineReader(1024)
    reader.feed = feed
    req1 = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
    req2 = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
    reader.data_received(req1 + b"\n" + note + b"\n" + req2 + b"\n")
    assert fed == [req1, note]  # req2 was not offered: the notification is ahead of it
    assert await reader.receive() == note
    # the consumer holds the notification: a new line still waits its turn
    reader.data_received(b'{"jsonrpc":"2.0","id":3,"method":"ping"}\n')
    assert fed == [req1, note]
    assert await reader.receive() == req2
    assert await reader.receive() == b'{"jsonrpc":"2.0","id":3,"method":"ping"}'
    # the consumer is back waiting and nothing is queued: the next request goes the fast way
    waiting = asyncio.ensure_future(reader.receive())
    await asyncio.sleep(0)
    reader.data_received(b'{"jsonrpc":"2.0","id":4,"method":"ping"}\n')
    assert fed[-1] == b'{"jsonrpc":"2.0","id":4,"method":"ping"}'
    reader.eof_received()
    assert await waiting is None


class _Collect:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.event = asyncio.Event()

    async def send(self, data: bytes, msg: object = None) -> None:
        self.sent.append(orjson.loads(data))
        self.event.set()


@pytest.mark.req("M056", "M057")
async def test_a_request_cancelled_before_its_task_starts_gives_back_its_slot() -> None:
    """The reader sees request 1 and its cancellation in one go, so request 1's task is cancelled before its
    first step. Its concurrency slot and in-flight entry must still be released, or request 2 (which needs the
    only slot) would wait forever."""
    started: list[Any] = []

    async def handler(ctx: RequestContext) -> dict[str, Any]:
        started.append(ctx.id)
        if ctx.id == 1:
            await asyncio.sleep(3600)
        return {"id": ctx.id}

    out = _Collect()
    peer = Peer(out, request_handler=handler, max_concurrency=1)
    frames = [
        orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "slow"}),
        orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "fast"}),
    ]
    done = asyncio.Event()

    async def receive() -> bytes | None:
        if frames:
            return frames.pop(0)  # no suspension: the reader runs ahead of the tasks it starts
        await done.wait()
        return None

    runner = asyncio.ensure_future(peer.run(receive))
    await asyncio.wait_for(out.event.wait(), 5)
    assert out.sent == [{"jsonrpc": "2.0", "id": 2, "result": {"id": 2}}]  # nothing at all for the cancelled 1
    assert peer.inflight_count() == 0
    done.set()
    await asyncio.wait_for(runner, 5)


@pytest.mark.req("M014", "M015", "S001")
async def test_a_flood_of_requests_in_one_write_is_answered_completely_and_in_lines() -> None:
    """5,000 requests (echoes mixed with slow calls that overlap them, so answers are gathered into shared writes)
    arrive faster than they are served: reading pauses and resumes, every request gets exactly one answer, and
    every stdout line is one whole message."""
    import sys

    from support.core import CORE_SERVER

    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CORE_SERVER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None
    n = 5000
    msgs: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for i in range(1, n + 1):
        if i % 500 == 0:
            params: dict[str, Any] = {"name": "slow", "arguments": {"steps": 2, "delay_ms": 20}}
        else:
            params = {"name": "echo", "arguments": {"text": f"m{i}"}}
        msgs.append({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
    proc.stdin.write(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    proc.stdin.close()
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    answers = [orjson.loads(line) for line in out.splitlines()]
    by_id = {a["id"]: a for a in answers if "id" in a}
    assert sorted(by_id) == list(range(n + 1)) and len([a for a in answers if "id" in a]) == n + 1
    for i in range(1, n + 1):
        if i % 500:
            assert by_id[i]["result"]["content"][0]["text"] == f"m{i}", by_id[i]


async def test_stdin_is_read_64_kib_at_a_time_and_a_long_line_still_arrives_whole() -> None:
    """asyncio reads a pipe 256 KiB at a time, above glibc's mmap threshold (128 KiB): every read would map and
    unmap a fresh buffer (three system calls and a page fault per message). mcpkit's stdio transport reads
    ``PIPE_READ_SIZE`` (64 KiB) at a time, and a 512 KiB line sent in one write through a 1 MiB pipe (where one
    read could take 256 KiB at once) still arrives whole, followed by the next line."""
    import fcntl
    import os

    from mcpkit.transports.stdio import PIPE_READ_SIZE, StdioServerTransport

    r, w = os.pipe()
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: room for the whole line in the pipe
    except OSError:
        os.close(r)
        os.close(w)
        pytest.skip("this machine does not allow a 1 MiB pipe")
    sink = open(os.devnull, "wb", buffering=0)  # noqa: SIM115 (closed by the transport's close)
    transport = StdioServerTransport(stdin=os.fdopen(r, "rb", buffering=0), stdout=sink, guard_stdout=False)
    sizes: list[int] = []
    feed = transport._lines.data_received
    transport._lines.data_received = lambda data: (sizes.append(len(data)), feed(data))[1]  # type: ignore[method-assign]
    line = orjson.dumps({"jsonrpc": "2.0", "method": "x", "params": {"blob": "a" * (512 * 1024)}})
    os.write(w, line + b"\n" + b'{"jsonrpc":"2.0","method":"y"}\n')
    try:
        await transport.start()
        assert await asyncio.wait_for(transport.receive(), 5) == line
        assert await asyncio.wait_for(transport.receive(), 5) == b'{"jsonrpc":"2.0","method":"y"}'
    finally:
        os.close(w)
        await transport.close()
        sink.close()
    assert sizes and max(sizes) <= PIPE_READ_SIZE < 256 * 1024, sizes
    assert sum(sizes) == len(line) + 32


async def test_a_byte_order_mark_at_the_start_of_the_stream_is_ignored_wherever_the_pipe_splits_it() -> None:
    """RFC 8259 lets a parser ignore a BOM; a server whose console writes UTF-8 with one (.NET, PowerShell) put it
    before its first line, and that line (the initialize answer) was refused as a parse error."""
    wire = b'\xef\xbb\xbf{"a":1}\n{"b":2}\n'
    for split in range(len(wire)):
        reader = LineReader(1024)
        reader.data_received(wire[:split])
        reader.data_received(wire[split:])
        reader.eof_received()
        assert await _drain(reader) == [b'{"a":1}', b'{"b":2}'], split
    reader = LineReader(1024)  # only at the start: a BOM inside the stream is left to the parser to refuse
    reader.data_received(b'{"a":1}\n\xef\xbb\xbf{"b":2}\n')
    reader.eof_received()
    assert await _drain(reader) == [b'{"a":1}', b'\xef\xbb\xbf{"b":2}']
