"""A server stopped while a plain ``def`` tool runs on a worker thread: it waits for the tool a bounded grace
(``worker_grace``, 1 s by default), then exits without it, and still runs what runs at exit.

The stdio shutdown of the spec (lifecycle, Shutdown/stdio) is: close stdin, wait, SIGTERM, then SIGKILL if the
server does not exit "within a reasonable time"; the clients of mcpkit and of the official SDKs wait 2 s at each
step. A server that waited for its worker threads (``asyncio.run`` joined them, then the interpreter's exit did
again) took as long as the slowest tool, 30 s with a 30 s call, and was SIGKILLed: no ``atexit`` handler ran. Real
processes throughout: the test server is ``tests/support/servers/sync_sleeper_server.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from mcpkit.transports.stdio import StdioClientTransport, StdioServer
from support.paths import SERVERS

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SLEEPER = str(SERVERS / "sync_sleeper_server.py")
MCPKIT = [sys.executable, "-m", "mcpkit.cli.main", "run"]
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
MARGIN = 4.0  # (seconds beyond the grace: the lifespan's cleanup, the interpreter's exit, a loaded machine)


def _msg(method: str, params: dict[str, object] | None = None, id: int | None = None) -> dict[str, object]:
    m: dict[str, object] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        m["params"] = params
    if id is not None:
        m["id"] = id
    return m


def _wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path.name} never appeared"
        time.sleep(0.02)


def _start(argv: list[str], marks: Path, grace: float | None) -> subprocess.Popen[bytes]:
    env = {**os.environ, "SLEEPER_MARKS": str(marks)}
    if grace is not None:
        env["SLEEPER_GRACE"] = str(grace)
        if argv[: len(MCPKIT)] == MCPKIT:
            argv = [*argv, "--worker-grace", str(grace)]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def _call_over_stdio(proc: subprocess.Popen[bytes], seconds: float, tool: str = "nap") -> list[object]:
    """Call ``tool`` over stdio; its answer, if any, is read from stdout once the process ended (none here)."""
    assert proc.stdin is not None and proc.stdout is not None
    for m in (
        _msg("initialize", INIT, 0),
        _msg("notifications/initialized"),
        _msg("tools/call", {"name": tool, "arguments": {"seconds": seconds}}, 1),
    ):
        proc.stdin.write(json.dumps(m).encode() + b"\n")
        proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["id"] == 0
    return []


def _call_over_http(proc: subprocess.Popen[bytes], seconds: float, tool: str = "nap") -> list[object]:
    """Call ``tool`` over HTTP from a thread; the list gets ``(status, body)`` of its answer, or the error."""
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    found = re.search(r"serving http on (\S+)", line)
    assert found, line
    url = found.group(1)
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    with httpx.Client(timeout=10) as client:
        r = client.post(url, json=_msg("initialize", INIT, 0), headers=headers)
        if sid := r.headers.get("mcp-session-id"):
            headers["mcp-session-id"] = sid
        client.post(url, json=_msg("notifications/initialized"), headers=headers)

    answers: list[object] = []

    def call() -> None:  # (its answer is not awaited: the server is stopped while it runs)
        try:
            with httpx.Client(timeout=seconds + 10) as c:
                r = c.post(
                    url, json=_msg("tools/call", {"name": tool, "arguments": {"seconds": seconds}}, 1), headers=headers
                )
                answers.append((r.status_code, r.text))
        except httpx.HTTPError as exc:
            answers.append(exc)

    threading.Thread(target=call, daemon=True).start()
    return answers


LAUNCHES = {
    "app.run() stdio": ([sys.executable, SLEEPER], _call_over_stdio),
    "mcpkit run stdio": ([*MCPKIT, SLEEPER], _call_over_stdio),
    "app.run('http')": ([sys.executable, SLEEPER, "http"], _call_over_http),
    "mcpkit run -t http": ([*MCPKIT, SLEEPER, "-t", "http", "--port", "0", "--drain-timeout", "0.5"], _call_over_http),
}


class Stopped(NamedTuple):
    proc: subprocess.Popen[bytes]
    took: float  # seconds from the SIGTERM to the exit
    err: str
    marks: Path
    answers: list[object]  # the tool call's answers: JSON-RPC messages (stdio), (status, body) or an error (HTTP)


def _stop_with_sigterm(launch: str, tmp_path: Path, seconds: float, grace: float | None, tool: str = "nap") -> Stopped:
    argv, call = LAUNCHES[launch]
    marks = tmp_path / "marks"
    proc = _start(argv, marks, grace)
    try:
        answers = call(proc, seconds, tool)
        _wait_for(Path(f"{marks}.started"), proc)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=(grace or 1.0) + 20)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        took = time.monotonic() - t0
        answers += [m for m in map(json.loads, out.decode().splitlines()) if m.get("id") == 1]
        for _ in range(500):  # (the HTTP call's thread: its answer, or the error of its connection)
            if answers or "http" not in launch:
                break
            time.sleep(0.01)
        return Stopped(proc, took, err.decode(), marks, answers)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("launch", list(LAUNCHES))
def test_sigterm_does_not_wait_for_a_long_sync_tool_past_the_grace(launch: str, tmp_path: Path) -> None:
    proc, took, err, marks, _ = _stop_with_sigterm(launch, tmp_path, 30, None)
    drain = 0.5 if "--drain-timeout" in LAUNCHES[launch][0] else 5.0 if "http" in launch else 0.0
    assert took < drain + 1.0 + MARGIN, (took, err)
    assert proc.returncode == 0, err
    assert Path(f"{marks}.atexit").exists(), err  # atexit handlers ran: the process was neither killed nor _exit-ed
    assert not Path(f"{marks}.tool").exists()
    if launch.startswith("app.run"):
        assert Path(f"{marks}.after").exists(), err  # the code after app.run() ran
    (warning,) = [line for line in err.splitlines() if "still running on worker threads" in line]
    assert "tool 'nap'" in warning and "worker_grace" in warning
    assert "Traceback" not in err, err  # (over HTTP too: the call cut off at the deadline is answered, not cancelled)


def test_an_http_call_cut_off_at_the_drain_timeout_gets_a_json_rpc_error_not_a_500(tmp_path: Path) -> None:
    """A call still running when the drain timeout ends is answered with a JSON-RPC error naming the shutdown,
    with its id (it used to get a bare 500, and uvicorn logged an ERROR with a CancelledError traceback)."""
    stopped = _stop_with_sigterm("mcpkit run -t http", tmp_path, 30, None)
    ((status, body),) = stopped.answers  # type: ignore[misc]
    assert status == 503, stopped
    answer = json.loads(body)
    assert answer["id"] == 1 and "shutting down" in answer["error"]["message"], answer
    assert "Traceback" not in stopped.err and "ERROR" not in stopped.err, stopped.err
    assert stopped.proc.returncode == 0 and stopped.took < 0.5 + 1.0 + MARGIN, stopped


@pytest.mark.parametrize("launch", ["app.run() stdio", "mcpkit run stdio", "mcpkit run -t http"])
def test_a_sync_tool_that_ends_within_the_grace_finishes_its_work(launch: str, tmp_path: Path) -> None:
    proc, took, err, marks, _ = _stop_with_sigterm(launch, tmp_path, 1.5, 10.0)
    assert Path(f"{marks}.tool").read_text() == "nap done", err
    assert took < 10.0 + MARGIN, (took, err)
    assert proc.returncode == 0, err
    assert Path(f"{marks}.atexit").exists(), err
    assert "still running on worker threads" not in err, err


def _result_text(answer: object) -> str:
    """The text of a tools/call answer: a JSON-RPC message (stdio) or an HTTP answer's (status, body)."""
    if isinstance(answer, tuple):
        status, body = answer
        assert status == 200, answer
        if body.startswith(("event:", "data:", "id:")):  # (an SSE answer: its last data line)
            body = [line[5:] for line in body.splitlines() if line.startswith("data:")][-1]
        answer = json.loads(body)
    assert isinstance(answer, dict), answer
    return str(answer["result"]["content"][0]["text"])


STDIO = ["app.run() stdio", "mcpkit run stdio"]


@pytest.mark.parametrize("launch", [*STDIO, "app.run('http')"])
def test_a_sync_tool_that_ends_within_the_grace_is_answered_after_sigterm(launch: str, tmp_path: Path) -> None:
    """SIGTERM while a ``def`` tool runs that ends within the grace: its answer is written before the exit (over
    HTTP, the requests in flight get the drain timeout, 5 s by default)."""
    stopped = _stop_with_sigterm(launch, tmp_path, 1.5, 10.0)
    assert [_result_text(a) for a in stopped.answers] == ["rested"], stopped
    assert stopped.proc.returncode == 0 and stopped.took < 1.5 + MARGIN, stopped


@pytest.mark.parametrize("launch", STDIO)
def test_an_async_tool_that_ends_within_the_grace_is_answered_after_sigterm(launch: str, tmp_path: Path) -> None:
    stopped = _stop_with_sigterm(launch, tmp_path, 1.5, 10.0, tool="anap")
    assert Path(f"{stopped.marks}.atool").exists(), stopped.err
    assert [_result_text(a) for a in stopped.answers] == ["rested"], stopped
    assert stopped.proc.returncode == 0 and stopped.took < 1.5 + MARGIN, stopped


@pytest.mark.parametrize("launch", STDIO)
def test_an_async_tool_still_running_at_the_end_of_the_grace_is_cancelled_unanswered(
    launch: str, tmp_path: Path
) -> None:
    stopped = _stop_with_sigterm(launch, tmp_path, 30, 1.0, tool="anap")
    assert stopped.took < 1.0 + MARGIN, stopped
    assert stopped.proc.returncode == 0, stopped.err
    assert stopped.answers == [] and not Path(f"{stopped.marks}.atool").exists(), stopped
    assert Path(f"{stopped.marks}.atexit").exists(), stopped.err


@pytest.mark.parametrize("launch", STDIO)
@pytest.mark.parametrize("seconds", [1.5, 30])
def test_sigterm_during_the_drain_after_the_end_of_stdin_gives_the_calls_the_grace(
    launch: str, seconds: float, tmp_path: Path
) -> None:
    """The spec's sequence: stdin closed (the drain begins, 30 s by default), then SIGTERM. From the SIGTERM the
    call has the grace (3 s here): one that ends within it is answered, one that does not is given up on."""
    argv, call = LAUNCHES[launch]
    marks = tmp_path / "marks"
    proc = _start(argv, marks, 3.0)
    try:
        call(proc, seconds)
        _wait_for(Path(f"{marks}.started"), proc)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        proc.stdin = None  # (closed: communicate() below has nothing to send)
        time.sleep(0.3)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    answers = [m for m in map(json.loads, out.decode().splitlines()) if m.get("id") == 1]
    assert proc.returncode == 0, err
    if seconds < 3:
        assert [_result_text(a) for a in answers] == ["rested"], (out, err)
        assert took < seconds + MARGIN
    else:
        assert answers == [] and took < 3.0 + MARGIN, (took, out, err)
        assert b"tool 'nap'" in err


@pytest.mark.parametrize("launch", list(LAUNCHES))
def test_a_sync_tool_running_at_sigterm_finds_the_lifespans_resources_still_open(launch: str, tmp_path: Path) -> None:
    """The lifespan's cleanup (here: closing a database) waits for the calls in flight, bounded by the grace: a
    ``def`` tool that sleeps, then writes to the database, succeeds (it used to find the database closed)."""
    stopped = _stop_with_sigterm(launch, tmp_path, 1.5, 10.0, tool="nap_then_write")
    failed = Path(f"{stopped.marks}.write-failed")
    assert not failed.exists(), failed.read_text()
    assert Path(f"{stopped.marks}.wrote").exists(), stopped.err
    assert stopped.proc.returncode == 0, stopped.err
    if "--drain-timeout" not in LAUNCHES[launch][0]:  # (over HTTP, cut by a 0.5 s drain)
        assert [_result_text(a) for a in stopped.answers] == ["written"], stopped


async def test_the_stdio_clients_close_ends_a_server_busy_in_a_sync_tool_before_sigkill(tmp_path: Path) -> None:
    """The spec's sequence as mcpkit's client runs it (stdin closed, 2 s, SIGTERM, 2 s, SIGKILL): the server exits
    after the SIGTERM, its atexit handler run, instead of being SIGKILLed 28 s before its tool would end."""
    marks = tmp_path / "marks"
    transport = StdioClientTransport(
        StdioServer([sys.executable, SLEEPER], env={"SLEEPER_MARKS": str(marks)}, shutdown_timeout=2.0)
    )
    await transport.start()
    try:
        for m in (
            _msg("initialize", INIT, 0),
            _msg("notifications/initialized"),
            _msg("tools/call", {"name": "nap", "arguments": {"seconds": 30}}, 1),
        ):
            await transport.send(json.dumps(m).encode())
        assert json.loads(await asyncio.wait_for(transport.receive(), 20) or b"null")["id"] == 0
        for _ in range(1000):
            if Path(f"{marks}.started").exists():
                break
            await asyncio.sleep(0.02)
        t0 = time.monotonic()
    finally:
        await transport.close()
    took = time.monotonic() - t0
    assert transport.process is not None
    assert transport.process.returncode == 0, transport.stderr_text  # (not -9: SIGTERM ended it)
    assert Path(f"{marks}.atexit").exists(), transport.stderr_text
    assert took < 2.0 + 2.0, took


def _end_stdin(launch: str, tmp_path: Path, seconds: float, drain: float) -> tuple[subprocess.Popen[bytes], float, str]:
    """Call ``nap(seconds)`` over stdio, close stdin once it runs (no signal: the first step of the spec's
    shutdown), and wait for the exit; the drain is set as each launch takes it."""
    argv, call = LAUNCHES[launch]
    marks = tmp_path / "marks"
    env = {**os.environ, "SLEEPER_MARKS": str(marks), "SLEEPER_DRAIN": str(drain)}
    if argv[: len(MCPKIT)] == MCPKIT:
        argv = [*argv, "--drain-timeout", str(drain)]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        call(proc, seconds)
        _wait_for(Path(f"{marks}.started"), proc)
        t0 = time.monotonic()
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        out = proc.stdout.read()
        proc.wait(timeout=drain + 20)
        took = time.monotonic() - t0
        assert proc.stderr is not None
        return proc, took, out.decode() + proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("launch", ["app.run() stdio", "mcpkit run stdio"])
def test_the_end_of_stdin_waits_for_requests_in_flight_no_longer_than_the_drain_timeout(
    launch: str, tmp_path: Path
) -> None:
    """stdin ends while a 30 s call runs: the server waits ``drain_timeout`` for it (30 s by default, not
    configurable before), then the worker grace (1 s), and exits cleanly."""
    proc, took, out = _end_stdin(launch, tmp_path, 30, 1.0)
    assert took < 1.0 + 1.0 + MARGIN, (took, out)
    assert proc.returncode == 0, out
    assert "tool 'nap'" in out  # (the worker grace's warning: the thread was given up on)


@pytest.mark.parametrize("launch", ["app.run() stdio", "mcpkit run stdio"])
def test_a_request_that_ends_within_the_drain_timeout_is_answered_after_the_end_of_stdin(
    launch: str, tmp_path: Path
) -> None:
    proc, took, out = _end_stdin(launch, tmp_path, 1.5, 10.0)
    answers = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [a["result"]["content"][0]["text"] for a in answers if a.get("id") == 1] == ["rested"], out
    assert took < 10.0 and proc.returncode == 0, (took, out)


@pytest.mark.parametrize("value", [-1, float("nan"), "5", True])
async def test_a_drain_timeout_that_is_not_seconds_is_refused_before_serving(value: object) -> None:
    from mcpkit import MCPKit
    from mcpkit.run import run_stdio_async

    with pytest.raises(ValueError, match="drain_timeout must be a number of seconds"):
        await run_stdio_async(MCPKit("x"), drain_timeout=value)  # type: ignore[arg-type]
