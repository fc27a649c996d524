"""stdio transport guarantees, with real subprocesses."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import ConnectionClosed
from mcpkit.transports.stdio import StdioClientTransport, StdioServer, StdioServerTransport
from support.core import CORE_SERVER, open_session, raw_stdio
from support.paths import INTEROP


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0); look at its state
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.req("M013", "M014", "M015", "M016", "A004")
async def test_stray_print_goes_to_stderr_not_the_protocol_stream() -> None:
    async with raw_stdio() as (p, t):
        await p.initialize()
        r = await p.request(1, "tools/call", {"name": "shout", "arguments": {}})
        assert r["result"]["content"][0]["text"] == "shouted"
        assert (await p.request(2, "ping"))["result"] == {}
        await asyncio.sleep(0.1)
        assert "THIS MUST NOT REACH THE PROTOCOL STREAM" in t.stderr_text


@pytest.mark.req("M014", "M015", "M016")
async def test_every_stdout_line_is_one_valid_message() -> None:
    """Read the server's raw stdout bytes: newline-delimited, one JSON-RPC message per line, nothing else."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CORE_SERVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None
    msgs = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "shout", "arguments": {}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a\nb"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "big", "arguments": {"n": 300000}}},
    ]
    proc.stdin.write(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0
    lines = out.split(b"\n")
    assert lines[-1] == b""
    parsed = [orjson.loads(line) for line in lines[:-1]]
    assert sorted(m["id"] for m in parsed if "id" in m) == [1, 2, 3, 4]
    assert [m["method"] for m in parsed if "id" not in m] == ["notifications/message"]  # echo logs at info
    assert all(m["jsonrpc"] == "2.0" for m in parsed)
    assert b"THIS MUST NOT REACH" in err


@pytest.mark.req("S021")
async def test_oversized_line_is_refused_and_the_stream_stays_in_sync() -> None:
    code = textwrap.dedent(
        f"""
        import sys; sys.path.insert(0, {str(CORE_SERVER.parent)!r})
        from core_server import server
        server.run(max_message_size=64 * 1024)
        """
    )
    async with raw_stdio([sys.executable, "-c", code]) as (p, _t):
        await p.initialize()
        huge = (
            b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"'
            + b"x" * 200_000
            + b'"}}}'
        )
        await p.send(huge)
        e = await p.recv()
        assert e["error"]["code"] == -32600 and "limit" in e["error"]["message"]
        assert e["id"] == 1  # (recovered from the line's first bytes: the client's request fails at once)
        assert (await p.request(2, "ping"))["result"] == {}


_SMALL_LIMIT_SERVER = f"""
import sys; sys.path.insert(0, {str(CORE_SERVER.parent)!r})
from core_server import server
server.run(max_message_size=64 * 1024)
"""


@pytest.mark.req("S021")
async def test_an_oversized_request_is_refused_with_its_id_wherever_it_stands() -> None:
    async with raw_stdio([sys.executable, "-c", _SMALL_LIMIT_SERVER]) as (p, _t):
        await p.initialize()
        text = "x" * 200_000
        last = {"method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}, "jsonrpc": "2.0"}
        await p.send(orjson.dumps({**last, "id": "ts-style-7"}))
        e = await p.recv()
        assert e["id"] == "ts-style-7" and e["error"]["code"] == -32600
        # an id between two long members (neither in the first nor in the last bytes) is found too
        await p.send(
            orjson.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"t": text}, "id": 8, "x": text})
        )
        e = await p.recv()
        assert e["id"] == 8 and e["error"]["code"] == -32600
        # a nested object's id is not the request's
        await p.send(orjson.dumps({"jsonrpc": "2.0", "method": "tools/call", "params": {"t": text, "id": 9}}))
        e = await p.recv()
        assert e["id"] is None and e["error"]["code"] == -32600
        assert (await p.request(3, "ping"))["result"] == {}


@pytest.mark.npm
async def test_a_typescript_client_gets_its_oversized_request_refused_at_once(node_bin: Path, tmp_path: Path) -> None:
    """The TypeScript SDK writes a request's id last; the refusal carries it, so the call fails at once instead of
    waiting out the SDK's request timeout, and the session goes on."""
    server = tmp_path / "server.py"
    server.write_text(_SMALL_LIMIT_SERVER)
    script = tmp_path / "script.json"
    steps = [
        {"op": "callTool", "name": "echo", "arguments": {"text": "x" * 200_000}, "timeoutMs": 60_000},
        {"op": "callTool", "name": "echo", "arguments": {"text": "after"}},
    ]
    script.write_text(json.dumps({"steps": steps}))
    proc = await asyncio.create_subprocess_exec(
        str(node_bin),
        str(INTEROP / "ts_client.mjs"),
        "--stdio",
        f"{sys.executable} {server}",
        "--script",
        str(script),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    started = time.monotonic()
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, (out.decode()[-2000:], err.decode()[-2000:])
    results = json.loads(out)["results"]
    assert results[0]["error"]["code"] == -32600 and "limit" in results[0]["error"]["message"], results[0]
    assert results[1]["content"][0]["text"] == "after"
    assert elapsed < 30, elapsed


async def test_large_answers_arrive_whole_one_per_line() -> None:
    """Answers past the transport's copy limit (written without joining their newline) still arrive as one line
    each, in order, among small ones."""
    async with raw_stdio([sys.executable, str(CORE_SERVER)]) as (p, _t):
        await p.initialize()
        for i, size in enumerate((20_000, 10, 300_000, 16 * 1024, 16 * 1024 - 1, 1), start=2):
            text = "y" * size
            r = await p.request(i, "tools/call", {"name": "echo", "arguments": {"text": text}})
            assert r["id"] == i and r["result"]["content"][0]["text"] == text


@pytest.mark.req("S001")
async def test_on_stdin_eof_the_server_answers_everything_received_then_exits() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CORE_SERVER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None
    msgs = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}]
    msgs += [
        {
            "jsonrpc": "2.0",
            "id": i,
            "method": "tools/call",
            "params": {"name": "slow", "arguments": {"steps": 3, "delay_ms": 100}},
        }
        for i in range(1, 6)
    ]
    proc.stdin.write(b"".join(orjson.dumps(m) + b"\n" for m in msgs))
    proc.stdin.close()  # EOF right away: the five slow calls are still running
    t0 = time.monotonic()
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0
    ids = sorted(orjson.loads(line)["id"] for line in out.splitlines())
    assert ids == [0, 1, 2, 3, 4, 5]
    assert time.monotonic() - t0 < 10


async def test_on_stdin_eof_a_call_waiting_on_the_client_ends_at_once_and_the_server_exits() -> None:
    """The tool waits on an elicitation the client took and never answers; stdin closes: the elicitation fails
    at once (ConnectionClosed: no answer can arrive any more), the call is answered with the error, and the
    process exits promptly rather than after the request timeout (300 s)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CORE_SERVER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t"}}
    for m in (
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask", "arguments": {}}},
    ):
        proc.stdin.write(orjson.dumps(m) + b"\n")
    while orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 10)).get("method") != "elicitation/create":
        pass
    proc.stdin.close()
    t0 = time.monotonic()
    out, _ = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0
    assert time.monotonic() - t0 < 5
    (answer,) = [orjson.loads(line) for line in out.splitlines()]
    assert answer["id"] == 1 and ("error" in answer or answer["result"]["isError"]), answer


@pytest.mark.req("M012", "S001")
async def test_client_close_shuts_a_well_behaved_server_down_by_closing_stdin() -> None:
    t = StdioClientTransport(StdioServer([sys.executable, str(CORE_SERVER)]))
    await t.start()
    async with ClientSession(t, mode="handshake") as cs:
        await cs.ping()
    assert t.process is not None
    assert t.returncode == 0  # exited by itself after stdin closed (no signal)


async def test_client_close_escalates_to_sigterm_then_sigkill_and_reaps_everything(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = textwrap.dedent(
        f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stubborn = "import time, signal; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
        child = subprocess.Popen([sys.executable, "-c", stubborn])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        sys.stderr.write("ready\\n"); sys.stderr.flush()
        while True:
            time.sleep(1)
        """
    )
    t = StdioClientTransport(StdioServer([sys.executable, "-c", code], shutdown_timeout=0.5))
    await t.start()
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text():
            break
        await asyncio.sleep(0.05)
    child_pid = int(pidfile.read_text())
    assert t.process is not None
    server_pid = t.process.pid
    t0 = time.monotonic()
    await t.close()
    assert time.monotonic() - t0 < 5
    assert t.returncode == -signal.SIGKILL
    assert not _alive(server_pid)
    for _ in range(50):
        if not _alive(child_pid):
            break
        await asyncio.sleep(0.05)
    assert not _alive(child_pid), "grandchild left behind"
    assert "ready" in t.stderr_text


async def test_stderr_of_a_server_that_fails_to_start_is_readable() -> None:
    t = StdioClientTransport(
        StdioServer([sys.executable, "-c", "import sys; sys.stderr.write('boom: no config\\n'); sys.exit(3)"])
    )
    await t.start()
    with pytest.raises(ConnectionClosed):
        async with ClientSession(t, mode="handshake", timeout=5):
            pass
    assert "boom: no config" in t.stderr_text
    assert t.returncode == 3


@pytest.mark.req("M017")
async def test_client_writes_only_valid_messages_to_stdin(tmp_path: Path) -> None:
    """A recording shim sits between the client and the real server and keeps every line the client wrote."""
    record = tmp_path / "stdin.log"
    shim = textwrap.dedent(
        f"""
        import subprocess, sys, threading
        srv = subprocess.Popen([sys.executable, {str(CORE_SERVER)!r}], stdin=subprocess.PIPE, stdout=sys.stdout.buffer)
        log = open({str(record)!r}, "wb")
        for line in sys.stdin.buffer:
            log.write(line); log.flush()
            srv.stdin.write(line); srv.stdin.flush()
        srv.stdin.close(); srv.wait()
        """
    )
    t = StdioClientTransport(StdioServer([sys.executable, "-c", shim]))
    await t.start()
    async with ClientSession(t, mode="auto", elicitation_handler=lambda p: {"action": "decline"}) as cs:
        await cs.list_tools()
        await cs.call_tool("echo", {"text": "multi\nline"})
        call = asyncio.create_task(cs.call_tool("slow", {"steps": 50, "delay_ms": 20}))
        await asyncio.sleep(0.1)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
    lines = record.read_bytes().split(b"\n")
    assert lines[-1] == b""
    for line in lines[:-1]:
        m = orjson.loads(line)
        assert m["jsonrpc"] == "2.0" and ("method" in m or "result" in m or "error" in m)
    assert len(lines) > 4


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_large_payloads_round_trip(mode: str) -> None:
    async with open_session("stdio", mode=mode) as cs:
        r = await cs.call_tool("big", {"n": 1_000_000})
        assert len(r.content[0].text) == 1_000_000  # type: ignore[union-attr]


_CHATTY_SERVER = textwrap.dedent(
    """
    import sys
    from mcpkit import MCPKit

    print("a stray line printed while the server module loads")
    sys.stdout.write("and one written without a newline")

    app = MCPKit("chatty")

    @app.tool
    def hello() -> str:
        print("printed by a tool")
        return "hi"

    app.run()
    """
)


def test_text_printed_before_serving_goes_to_stderr_not_into_the_protocol_stream() -> None:
    """The stdout of a stdio server carries only MCP messages (a MUST of the transport): text a server module
    printed before ``app.run()`` (still in Python's buffer, as it is when stdout is a pipe) goes to stderr, like
    what its tools print while serving; it used to be flushed ahead of the first answer. (With PYTHONUNBUFFERED
    such text has left before the server could move stdout: nothing can take it back.)"""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hello", "arguments": {}}},
    ]
    done = subprocess.run(
        [sys.executable, "-c", _CHATTY_SERVER],
        input=b"".join(orjson.dumps(m) + b"\n" for m in lines),
        capture_output=True,
        env=env,
        timeout=30,
        check=True,
    )
    answers = [orjson.loads(line) for line in done.stdout.splitlines()]  # every line is a JSON-RPC message
    assert sorted(a["id"] for a in answers) == [0, 1]
    assert b"a stray line printed while the server module loads" in done.stderr
    assert b"and one written without a newline" in done.stderr
    assert b"printed by a tool" in done.stderr


_LIFESPAN_SERVER = textwrap.dedent(
    """
    import asyncio
    import contextlib
    import sys
    from mcpkit import MCPKit

    @contextlib.asynccontextmanager
    async def lifespan(app):
        try:
            yield {}
        finally:
            print("lifespan closed", file=sys.stderr, flush=True)

    app = MCPKit("terminated", lifespan=lifespan)

    @app.tool
    async def wait() -> str:
        await asyncio.sleep(60)
        return "waited"

    app.run()
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_sigterm_ends_a_stdio_server_through_its_lifespan() -> None:
    """SIGTERM is the step after closing stdin in the stdio shutdown sequence (and what process managers send): the
    server stops at once, a running call included, and its lifespan's cleanup runs, as at the end of its input; it
    used to die on the spot and leave the cleanup undone."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _LIFESPAN_SERVER,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "wait", "arguments": {}}},
    ]
    proc.stdin.write(b"".join(orjson.dumps(m) + b"\n" for m in lines))
    await proc.stdin.drain()
    assert orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 20))["id"] == 0
    await asyncio.sleep(0.5)  # (the call is running)
    proc.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(proc.wait(), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
    stderr = (await proc.stderr.read()).decode()
    assert "lifespan closed" in stderr
    assert "Traceback" not in stderr
    assert proc.returncode == 0


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_ctrl_c_ends_app_run_with_130_and_no_traceback(tmp_path: Path, transport: str) -> None:
    """A server script run with ``app.run()`` (``python server.py``) and stopped with Ctrl-C leaves its lifespan
    (its cleanup runs) and exits 130, as a shell reports an interrupted program, with no KeyboardInterrupt
    traceback."""
    script = tmp_path / "server.py"
    script.write_text(
        "import contextlib, sys\n"
        "from mcpkit import MCPKit\n"
        "@contextlib.asynccontextmanager\n"
        "async def life(app):\n"
        "    print('started', file=sys.stderr, flush=True)\n"
        "    yield\n"
        "    print('cleaned up', file=sys.stderr, flush=True)\n"
        "app = MCPKit('x', lifespan=life)\n"
        "@app.tool\n"
        "def echo(text: str) -> str:\n"
        "    return text\n"
        "if __name__ == '__main__':\n"
        f"    app.run({transport!r}{', port=0' if transport == 'http' else ''})\n"
    )
    terminal = (  # started as from a terminal: SIGINT at its default, whatever this test run inherited
        "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_path(sys.argv[1], run_name='__main__')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", terminal, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if transport == "stdio":  # (the lifespan is entered with the first session)
        assert proc.stdin is not None
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        proc.stdin.write(
            orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}).decode() + "\n"
        )
        proc.stdin.flush()
    deadline = time.monotonic() + 20
    seen = ""
    assert proc.stderr is not None
    while "started" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    err = seen + err
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "cleaned up" in err, err


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the server's memory from /proc")
async def test_a_client_that_does_not_read_holds_the_server_back_instead_of_growing_its_memory() -> None:
    """A client pipelining requests faster than it reads the answers: once the pipe and the server's write buffer
    are full, the server stops reading requests (answers wait in the bounded write buffer, not in memory without
    end); when the client reads again, every answer arrives, once."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(CORE_SERVER), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    proc.stdin.write(orjson.dumps(init) + b"\n")
    await proc.stdout.readline()
    baseline = _rss_kib(proc.pid)
    count, size = 10_000, 10_000  # 100 MB of answers
    call = {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "big", "arguments": {"n": size}}}
    requests = b"".join(orjson.dumps({**call, "id": i}) + b"\n" for i in range(1, count + 1))

    async def write() -> None:
        assert proc.stdin is not None
        proc.stdin.write(requests)
        await proc.stdin.drain()

    writer = asyncio.create_task(write())
    try:
        await asyncio.sleep(3)  # the client reads nothing meanwhile
        grown = _rss_kib(proc.pid) - baseline
        assert grown < 30 * 1024, f"the server buffered {grown} KiB of answers nobody reads"
        ids = []
        for _ in range(count):
            line = await asyncio.wait_for(proc.stdout.readline(), 10)
            answer = orjson.loads(line)
            assert len(answer["result"]["content"][0]["text"]) == size
            ids.append(answer["id"])
        assert sorted(ids) == list(range(1, count + 1))
        await asyncio.wait_for(writer, 20)
        for i in range(count + 1, count + 301):  # and the server goes on: no request is left waiting for ever
            proc.stdin.write(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + b"\n")
            assert orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 10)) == {
                "jsonrpc": "2.0",
                "id": i,
                "result": {},
            }
    finally:
        writer.cancel()
        proc.kill()
        await asyncio.wait_for(proc.communicate(), 20)


async def test_every_answer_waiting_for_a_slow_reader_goes_on_once_the_reader_catches_up() -> None:
    """Several answers waiting at once for the client to read (the pipe and the write buffer full): each of them
    returns when the client reads again; none is left waiting for ever (holding its request's slot)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    transport = StdioServerTransport(stdin=os.fdopen(in_r, "rb"), stdout=os.fdopen(out_w, "wb"))
    await transport.start()
    transport.set_fast_path(None, lambda: 8)  # answers of concurrent requests: the gathered path
    try:
        message = b"x" * 600_000
        sends = [asyncio.create_task(transport.send(message)) for _ in range(8)]
        await asyncio.sleep(0.2)
        assert not all(s.done() for s in sends)  # nobody reads: the writers wait
        received = 0
        loop = asyncio.get_running_loop()
        while received < 8 * (len(message) + 1):
            received += len(await loop.run_in_executor(None, os.read, out_r, 1 << 20))
        await asyncio.wait_for(asyncio.gather(*sends), 5)
    finally:
        await transport.close()
        os.close(in_w)
        os.close(out_r)


async def test_a_write_that_waits_for_nothing_returns_nothing_to_await_and_one_behind_a_slow_reader_does() -> None:
    """send_now writes at once and returns None while the client keeps up (no coroutine for the peer to run); once
    the write buffer is past its high-water mark it returns what to await, which ends when the client reads."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    transport = StdioServerTransport(stdin=os.fdopen(in_r, "rb"), stdout=os.fdopen(out_w, "wb"))
    await transport.start()
    transport.set_fast_path(None, lambda: 1)  # one request at a time: each answer leaves at once
    try:
        assert transport.send_now(b'{"a":1}') is None
        assert os.read(out_r, 100) == b'{"a":1}\n'
        message = b"x" * 600_000
        waiting = None
        written = 0
        while waiting is None:  # nobody reads: the pipe, then the write buffer, fill up
            waiting = transport.send_now(message)
            written += len(message) + 1
            assert written < 64 * len(message)
        task = asyncio.ensure_future(waiting)
        await asyncio.sleep(0.1)
        assert not task.done()
        loop = asyncio.get_running_loop()
        while written:
            written -= len(await loop.run_in_executor(None, os.read, out_r, 1 << 20))
        await asyncio.wait_for(task, 5)
    finally:
        await transport.close()
        os.close(in_w)
        os.close(out_r)


async def test_the_answers_to_the_requests_of_one_read_leave_in_one_write_in_order() -> None:
    """Twenty pings reach the stdio server in one read. They run one after the other right in its read callback
    (no task), and while more lines of that read follow, their answers are gathered: the twenty leave in one
    write, in order. A request read alone is answered by a write of its own, at once."""
    from mcpkit.server.lowlevel import Server

    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    transport = StdioServerTransport(stdin=os.fdopen(in_r, "rb"), stdout=os.fdopen(out_w, "wb"))
    await transport.start()
    pipe = transport._write_transport
    assert pipe is not None
    writes: list[bytes] = []
    write = pipe.write
    pipe.write = lambda data: (writes.append(bytes(data)), write(data))[1]  # type: ignore[method-assign]
    serving = asyncio.create_task(Server("burst").serve(transport))
    loop = asyncio.get_running_loop()

    async def answers(count: int) -> list[int]:
        got = b""
        while got.count(b"\n") < count:
            got += await asyncio.wait_for(loop.run_in_executor(None, os.read, out_r, 1 << 16), 10)
        return [orjson.loads(line)["id"] for line in got.splitlines()]

    try:
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
        os.write(in_w, orjson.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}) + b"\n")
        assert await answers(1) == [0]
        os.write(in_w, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        os.write(in_w, b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n')
        assert await answers(1) == [1]
        writes.clear()
        burst = b"".join(orjson.dumps({"jsonrpc": "2.0", "id": i, "method": "ping"}) + b"\n" for i in range(2, 22))
        os.write(in_w, burst)
        assert await answers(20) == list(range(2, 22))
        assert len(writes) == 1, [w[:60] for w in writes]
        os.write(in_w, b'{"jsonrpc":"2.0","id":22,"method":"ping"}\n')
        assert await answers(1) == [22]
        assert len(writes) == 2
    finally:
        os.close(in_w)
        await asyncio.wait_for(serving, 10)
        await transport.close()
        os.close(out_r)


async def test_a_server_whose_client_stopped_reading_its_output_ends_as_at_end_of_input() -> None:
    """The client is gone but its end of the server's stdin is still held open (by a child it left behind, say):
    the server's stdout is closed, so nothing it does can ever reach anyone. It ends as it does at end of input
    (its lifespan left) instead of running requests for nobody for ever."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(CORE_SERVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
        proc.stdin.write(orjson.dumps(init) + b"\n")
        await asyncio.wait_for(proc.stdout.readline(), 10)
        transport = proc._transport  # type: ignore[attr-defined]
        transport.get_pipe_transport(1).close()  # our read end of its stdout; its stdin stays open
        assert await asyncio.wait_for(proc.wait(), 10) == 0
        assert b"Traceback" not in await proc.stderr.read()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


_BIG_NUMBERS_SERVER = textwrap.dedent(
    """
    from mcpkit import Context, MCPKit

    app = MCPKit("big-numbers")

    @app.tool
    def power(exponent: int) -> int:
        return 2**exponent

    @app.tool
    async def untyped(ctx: Context):
        await ctx.info({"n": -(2**80)})
        return [2**70, 1]

    app.run()
    """
)


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_integers_beyond_64_bits_reach_the_client_digit_for_digit(tmp_path: Path, version: str) -> None:
    """JSON numbers have no size limit: a tool's result (structured and as text) and a log message holding an
    integer beyond 64 bits reach the client exactly, not as an internal error."""
    import json

    from support.mcp_http import modern_body

    script = tmp_path / "big_numbers.py"
    script.write_text(_BIG_NUMBERS_SERVER)
    lines: list[dict[str, object]] = []
    if version == "2026-07-28":
        for rid, (name, args) in enumerate([("power", {"exponent": 70}), ("untyped", {})], 1):
            lines.append(modern_body("tools/call", {"name": name, "arguments": args}, rid=rid, log_level="info"))
    else:
        init = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
        lines.append({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        lines.append({"jsonrpc": "2.0", "method": "notifications/initialized"})
        lines.append({"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel", "params": {"level": "info"}})
        for rid, (name, args) in enumerate([("power", {"exponent": 70}), ("untyped", {})], 1):
            lines.append(
                {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": args}}
            )
    stdin = "".join(json.dumps(line) + "\n" for line in lines)
    proc = subprocess.run([sys.executable, str(script)], input=stdin, capture_output=True, text=True, timeout=60)
    got = [json.loads(line) for line in proc.stdout.splitlines()]
    answers = {m["id"]: m["result"] for m in got if m.get("id") in (1, 2)}
    assert answers[1]["structuredContent"] == {"result": 2**70}, proc.stderr
    assert answers[1]["content"][0]["text"] == json.dumps({"result": 2**70}, separators=(",", ":"))
    assert not answers[1]["isError"] and not answers[2]["isError"], proc.stderr
    assert json.loads(answers[2]["content"][0]["text"]) == [2**70, 1]
    logged = [m["params"]["data"] for m in got if m.get("method") == "notifications/message"]
    assert logged == [{"n": -(2**80)}]
