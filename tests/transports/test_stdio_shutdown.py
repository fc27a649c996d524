"""How the stdio client ends the server it launched, with real process trees (spec, lifecycle: close stdin, wait,
SIGTERM, SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.transports.stdio import SAFE_ENV, StdioClientTransport, StdioServer
from support.paths import TESTS


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0); look at its state
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _server_leaving_a_child(pidfile: Path, *, ignore_sigterm: bool) -> list[str]:
    """A server that starts a helper process (inheriting its stdout and stderr, as a launcher's child or a browser
    does), then exits as soon as its stdin ends."""
    helper = "import signal, time\n"
    if ignore_sigterm:
        helper += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    helper += "time.sleep(60)\n"
    code = textwrap.dedent(
        f"""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", {helper!r}])
        open({str(pidfile)!r}, "w").write(str(child.pid))
        sys.stderr.write("ready\\n"); sys.stderr.flush()
        sys.stdin.buffer.read()
        """
    )
    return [sys.executable, "-c", code]


async def _start(argv: list[str], pidfile: Path, shutdown_timeout: float) -> tuple[StdioClientTransport, int]:
    t = StdioClientTransport(StdioServer(argv, shutdown_timeout=shutdown_timeout))
    await t.start()
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text() and "ready" in t.stderr_text:
            break
        await asyncio.sleep(0.05)
    return t, int(pidfile.read_text())


async def test_a_server_that_exits_on_end_of_input_is_not_signalled_while_its_helper_holds_its_pipes(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "child.pid"
    t, child = await _start(_server_leaving_a_child(pidfile, ignore_sigterm=False), pidfile, shutdown_timeout=5.0)
    t0 = time.monotonic()
    await t.close()
    elapsed = time.monotonic() - t0
    assert t.returncode == 0  # it ended by itself when its stdin closed: no signal was needed for it
    assert elapsed < 2.5, f"close() waited {elapsed:.1f}s for pipes a helper holds, not for the server"
    for _ in range(100):
        if not _alive(child):
            break
        await asyncio.sleep(0.05)
    assert not _alive(child), "the helper was left running"


async def test_a_helper_that_ignores_sigterm_is_killed_once_the_server_has_exited(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    t, child = await _start(_server_leaving_a_child(pidfile, ignore_sigterm=True), pidfile, shutdown_timeout=0.5)
    try:
        t0 = time.monotonic()
        await t.close()
        assert time.monotonic() - t0 < 5
        assert t.returncode == 0
        for _ in range(100):
            if not _alive(child):
                break
            await asyncio.sleep(0.05)
        assert not _alive(child), "a helper that ignores SIGTERM outlived close(): it was never sent SIGKILL"
    finally:
        if _alive(child):
            os.kill(child, 9)


async def test_the_server_inherits_the_environment_unless_told_to_get_only_the_safe_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MCPKIT_TEST_SECRET", "s3cret")
    show = "import json, os, sys; sys.stderr.write(json.dumps(dict(os.environ)) + '\\n')"

    async def child_env(**options: Any) -> dict[str, str]:
        t = StdioClientTransport(
            StdioServer([sys.executable, "-c", show], stderr_line_bytes=1 << 20, stderr_bytes=1 << 20, **options)
        )
        await t.start()
        await t.close()
        return dict(json.loads(t.stderr_text))

    inherited = await child_env(env={"EXTRA": "1"})
    assert inherited["MCPKIT_TEST_SECRET"] == "s3cret" and inherited["EXTRA"] == "1"
    safe = await child_env(inherit_env=False, env={"EXTRA": "1", "PATH": "/bin"})
    assert "MCPKIT_TEST_SECRET" not in safe
    assert safe["EXTRA"] == "1" and safe["PATH"] == "/bin"
    assert set(safe) - {"EXTRA", "LC_CTYPE"} <= set(SAFE_ENV)  # (the interpreter may set LC_CTYPE itself)
    assert os.environ.get("HOME") is None or safe["HOME"] == os.environ["HOME"]


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
}


def _listen(rid: str | int) -> bytes:
    """A 2026-07-28 ``subscriptions/listen`` request for tool list changes, as one line's JSON."""
    params = {"notifications": {"toolsListChanged": True}, "_meta": MODERN_META}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "subscriptions/listen", "params": params}).encode()


@contextlib.asynccontextmanager
async def _everything_over_stdio() -> AsyncIterator[asyncio.subprocess.Process]:
    """``mcpkit run examples/everything.py`` with its stdin and stdout piped to the test (killed if still running)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mcpkit.cli.main",
        "run",
        str(Path(__file__).parents[2] / "examples" / "everything.py"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _close_stdin_and_read_to_the_end(proc: asyncio.subprocess.Process) -> list[dict[str, Any]]:
    """Close the server's stdin (the client is gone) and read what it writes until it exits: within 5 s (30 s at
    most to see it fail). The messages it wrote."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    t0 = time.monotonic()
    rest = await asyncio.wait_for(proc.stdout.read(), 30)
    await asyncio.wait_for(proc.wait(), 30)
    took = time.monotonic() - t0
    assert took < 5, f"the server took {took:.1f}s to exit"
    return [json.loads(line) for line in rest.splitlines() if line.strip()]


async def test_a_server_whose_stdin_ends_ends_its_listen_streams_and_exits_at_once() -> None:
    """A 2026-07-28 ``subscriptions/listen`` never ends by itself: at the end of stdin (the client closed it, or died:
    ``mcpkit dev`` killed by SIGHUP) the server waited out its 30 s drain for it before exiting. It now ends the
    connection's listen streams gracefully (their result is written) and exits as soon as real work is done."""
    async with _everything_over_stdio() as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_listen(7) + b"\n")
        await proc.stdin.drain()
        ack = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
        assert ack["method"] == "notifications/subscriptions/acknowledged", ack
        final = await _close_stdin_and_read_to_the_end(proc)
        assert any(m.get("id") == 7 and "result" in m for m in final), final


async def test_a_connection_full_of_listen_streams_still_reads_its_client_and_ends_with_its_stdin() -> None:
    """Each ``subscriptions/listen`` holds one of the connection's request slots for as long as it is open. With
    one per slot (256), the server stopped reading stdin for good: no request was answered, a cancellation of one
    of the streams was never read, and closing stdin no longer ended the process. The listen streams one connection
    may hold are now bounded well below its slots; one past the bound is refused."""
    from mcpkit.server.builtins import MAX_LISTENS_PER_CONNECTION

    async with _everything_over_stdio() as proc:
        assert proc.stdin is not None and proc.stdout is not None
        stdout = proc.stdout

        async def until(pred: Any) -> dict[str, Any]:
            while True:
                msg = json.loads(await asyncio.wait_for(stdout.readline(), 30))
                if pred(msg):
                    return msg  # type: ignore[no-any-return]

        count = 256 + 1  # (every request slot of the connection, and one more)
        proc.stdin.write(b"\n".join(_listen(f"L{i}") for i in range(count)) + b"\n")
        ping = {"jsonrpc": "2.0", "id": "list", "method": "tools/list", "params": {"_meta": MODERN_META}}
        proc.stdin.write(json.dumps(ping).encode() + b"\n")
        await proc.stdin.drain()
        refused = await until(lambda m: m.get("id") == f"L{MAX_LISTENS_PER_CONNECTION}")
        assert refused["error"]["code"] == -32600
        assert str(MAX_LISTENS_PER_CONNECTION) in refused["error"]["message"]
        assert "tools" in (await until(lambda m: m.get("id") == "list"))["result"]
        cancel = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": "L0", "_meta": MODERN_META},
        }
        proc.stdin.write(json.dumps(cancel).encode() + b"\n" + _listen("again") + b"\n")
        await proc.stdin.drain()
        ack = await until(
            lambda m: (
                m.get("method") == "notifications/subscriptions/acknowledged"
                and m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "again"
            )
        )
        assert ack["params"]["notifications"] == {"toolsListChanged": True}
        ended = {m.get("id") for m in await _close_stdin_and_read_to_the_end(proc) if "result" in m}
        assert {f"L{i}" for i in range(1, MAX_LISTENS_PER_CONNECTION)} | {"again"} <= ended


async def test_a_program_ending_on_an_error_while_connections_start_neither_hangs_nor_leaves_a_server() -> None:
    """A user's ``asyncio.run`` ends on an exception while stdio connections start (a sibling task raised): asyncio
    cancels every task in one sweep. With asyncio's own subprocess transport, a start caught in that sweep together
    with the task it made to connect its pipes waited forever for the process's end (CPython issues 125502 and
    133536), so the program never exited; a start cancelled just after the spawn left its server running. Twelve
    such programs, twelve connections each, the error raised a different number of loop turns in."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path, str(TESTS)])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(TESTS / "support" / "cancelled_starts.py"),
        "12",
        "12",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        out, _ = await proc.communicate()
        pytest.fail(f"the program hung after: {out.decode()[-2000:]}")
    lines = out.decode().splitlines()
    assert lines[-1:] == ["done"], out.decode()[-2000:]
    assert [line for line in lines if line.startswith("round")] == [
        f"round {k} ended; children left: 0 []" for k in range(1, 13)
    ]


async def test_a_send_to_a_server_that_stops_reading_waits_and_fails_once_the_server_is_gone() -> None:
    """The server's stdin is bounded: past the write buffer's high-water mark a send waits for the server to read;
    when the server goes away instead, the waiting send fails with ConnectionClosed (it does not wait forever)."""
    from mcpkit.protocol.errors import ConnectionClosed
    from mcpkit.transports.stdio_lines import WRITE_HIGH_WATER

    t = StdioClientTransport(StdioServer(["sleep", "60"], shutdown_timeout=0.2))
    await t.start()
    chunk = b"x" * (256 * 1024)
    sent = 0
    sending = asyncio.ensure_future(asyncio.sleep(0))
    try:
        while sent <= 4 * WRITE_HIGH_WATER:
            sending = asyncio.ensure_future(t.send(chunk))
            done, _ = await asyncio.wait({sending}, timeout=1.0)
            if not done:
                break  # (waiting for the server to read)
            sending.result()
            sent += len(chunk)
        assert not sending.done(), f"{sent} bytes went into a pipe nobody reads"
        assert t.process is not None
        t.process.kill()
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(sending, 10)
        assert await asyncio.wait_for(t.process.wait(), 10) == -9
    finally:
        await t.close()
