"""`mcpkit run server.py -t http --workers N --redis URL`: N processes on one port sharing one Redis serve both protocol
eras; connections reach different workers; a task started on one worker is read on another; SIGTERM stops them all
gracefully; a worker that keeps dying is restarted a bounded number of times; the flags are refused where they mean
nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from mcpkit import Client
from support.paths import SERVERS
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.procs import stop
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.scale import EVERYTHING, REPO

pytestmark = pytest.mark.redis

MCPKIT = [sys.executable, "-m", "mcpkit.cli.main"]
SCALE_SERVER = SERVERS / "scale_server.py"


def _started(proc: subprocess.Popen[bytes], timeout: float = 30) -> str:
    """The URL the parent announces on stderr."""
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    line = b""
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        match = re.search(rb"serving http on (\S+) \((\d+) workers\)", line)
        if match:
            return match.group(1).decode()
        if not line and proc.poll() is not None:
            break
    raise AssertionError(f"no announcement: {line!r} (exit {proc.poll()})")


async def test_workers_on_one_port_serve_both_eras_and_stop_together(redis_url: str, tmp_path: Path) -> None:  # noqa: F811
    env = {**os.environ, "MCPKIT_REDIS_PREFIX": "cli-workers:"}
    env.pop("MCPKIT_STATE_KEYS", None)  # one host: the parent generates the shared key ring
    proc = subprocess.Popen(
        [*MCPKIT, "run", str(EVERYTHING), "-t", "http", "--workers", "2", "--redis", redis_url, "--port", "0"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = _started(proc)
        base = url.rsplit("/", 1)[0]
        workers: set[int] = set()
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient(timeout=10) as http:
            while len(workers) < 2:  # a fresh connection each time: the kernel hands them to both workers
                assert time.monotonic() < deadline, workers
                try:
                    ready = await http.get(base + "/readyz", headers={"connection": "close"})
                except httpx.TransportError:
                    time.sleep(0.1)
                    continue
                if ready.status_code == 200:
                    workers.add(ready.json()["worker"])
        for mode in ("handshake", "modern"):
            async with Client(url, mode=mode) as client:
                assert (await client.call_tool("add", {"a": 2, "b": 3})).structured == {"result": 5}
                tools = [t.name for t in await client.list_tools()]
                assert "sample" in tools
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        stop(proc)
    children = subprocess.run(
        ["pgrep", "-f", f"--worker-fd.*{url.rsplit(':', 1)[1].split('/')[0]}"], capture_output=True
    )
    assert children.stdout == b""  # no worker left behind


def _workers_of(parent: int) -> list[int]:
    done = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True)
    return [int(pid) for pid in done.stdout.split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(FileNotFoundError):  # (a zombie waiting for its new parent to reap it is gone too)
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    return False


async def test_workers_stop_when_their_parent_is_killed(redis_url: str) -> None:  # noqa: F811
    """The parent killed (SIGKILL, the OOM killer): its workers must not go on serving the port as orphans, with a
    key ring and a code version the next deployment on that port does not share."""
    env = {**os.environ, "MCPKIT_REDIS_PREFIX": "cli-orphans:"}
    proc = subprocess.Popen(
        [*MCPKIT, "run", str(EVERYTHING), "-t", "http", "--workers", "2", "--redis", redis_url, "--port", "0"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    workers: list[int] = []
    try:
        url = _started(proc)
        workers = _workers_of(proc.pid)
        assert len(workers) == 2
        proc.kill()
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert not [pid for pid in workers if _alive(pid)], "workers outlived their parent"
        async with httpx.AsyncClient(timeout=2) as http:
            with pytest.raises(httpx.TransportError):
                await http.get(url.rsplit("/", 1)[0] + "/healthz")
    finally:
        stop(proc)
        for pid in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_a_second_deployment_cannot_join_the_port_of_a_running_one(redis_url: str) -> None:  # noqa: F811
    """Two `--workers` deployments on one port would split its connections between two apps (two key rings, maybe
    two versions of the code) without a word: the second is refused, like any server on a port in use."""
    env = {**os.environ, "MCPKIT_REDIS_PREFIX": "cli-twice:"}
    command = [*MCPKIT, "run", str(EVERYTHING), "-t", "http", "--workers", "2", "--redis", redis_url]
    first = subprocess.Popen(
        [*command, "--port", "0"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        port = _started(first).rsplit(":", 1)[1].split("/")[0]
        second = subprocess.run([*command, "--port", port], cwd=REPO, env=env, capture_output=True, timeout=60)
        assert second.returncode != 0 and b"serving" not in second.stderr, second.stderr
        assert b"in use" in second.stderr, second.stderr
    finally:
        stop(first)


@pytest.mark.parametrize("backend", ["redis", "postgres"])
async def test_a_task_started_through_one_worker_is_read_through_the_other(
    backend: str, request: pytest.FixtureRequest
) -> None:
    """The task store is one of what the configured workers share: the server enables tasks without naming a
    store, and ``--redis`` (or ``--postgres``) keeps them there, not in each worker's memory."""
    env = {**os.environ, "MCPKIT_REDIS_PREFIX": "cli-tasks:", "MCPKIT_POSTGRES_PREFIX": "cli_tasks_"}
    env.pop("MCPKIT_STATE_KEYS", None)
    shared = ["--redis", request.getfixturevalue("redis_url")]
    if backend == "postgres":
        shared = ["--postgres", request.getfixturevalue("postgres_url")]
    proc = subprocess.Popen(
        [*MCPKIT, "run", str(SCALE_SERVER), "-t", "http", "--workers", "2", *shared, "--port", "0"],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = _started(proc)
        async with contextlib.AsyncExitStack() as stack:
            by_worker: dict[int, Client] = {}  # one client (one kept-alive connection) per worker process
            for _ in range(40):
                client = await stack.enter_async_context(Client(url, mode="modern"))
                by_worker.setdefault((await client.call_tool("whoami")).structured["result"], client)
                if len(by_worker) == 2:
                    break
            assert len(by_worker) == 2, by_worker
            (pid_a, a), (pid_b, b) = by_worker.items()
            started = await a.call_tool_as_task("whoami_later", {"seconds": 0.3})
            assert (await b.call_tool("whoami")).structured == {"result": pid_b}  # (b still reaches the other)
            followed = await b.task(started.task_id)
            result = await asyncio.wait_for(followed.result(), 15)
            assert result.structured == {"result": pid_a}  # ran on a's worker, read through b's
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        stop(proc)


def test_a_worker_that_keeps_dying_is_restarted_a_bounded_number_of_times(
    redis_url: str,  # noqa: F811
    tmp_path: Path,
) -> None:
    server = tmp_path / "dies.py"
    server.write_text(
        "import os\nfrom mcpkit import MCPKit\napp = MCPKit('dies')\n"
        "if os.environ.get('MCPKIT_WORKER_INDEX'):\n    os._exit(3)  # every worker dies at once\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    done = subprocess.run(
        [*MCPKIT, "run", str(server), "-t", "http", "--workers", "2", "--redis", redis_url, "--port", "0"],
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.decode().splitlines()
    # the give-up is an error as the CLI prints every other one ("error: "); each restart is a notice before it
    assert lines[-1] == "error: workers keep dying (the last exited with status 3); stopping", lines[-3:]
    assert lines.count("mcpkit: worker 0 exited with status 3; starting another") >= 1, lines
    assert done.stderr.count(b"starting another") == 10  # mcpkit.cli.workers.MAX_RESTARTS
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-t", "http", "--workers", "2"], b"--workers N shares sessions and notifications through Redis"),
        (["--redis", "redis://127.0.0.1:1/0"], b"are for the HTTP transports"),
        (["-t", "http", "--workers", "2", "--redis", "localhost:6379"], b"not a Redis URL"),
        (["-t", "http", "--workers", "2", "--redis", "http://127.0.0.1:6379/0"], b"not a Redis URL"),
    ],
)
def test_the_scale_flags_are_refused_where_they_mean_nothing(args: list[str], message: bytes) -> None:
    done = subprocess.run([*MCPKIT, "run", str(EVERYTHING), *args], capture_output=True, timeout=60)
    assert done.returncode == 2 and message in done.stderr, done.stderr


def test_the_help_names_every_environment_variable() -> None:
    done = subprocess.run([*MCPKIT, "run", "--help"], capture_output=True, timeout=60, text=True)
    assert done.returncode == 0
    for flag in ("--workers", "--redis", "--redis-cluster", "--state-keys-file", "--forwarded-allow-ips"):
        assert flag in done.stdout
    assert json.dumps("MCPKIT_STATE_KEYS")[1:-1] in done.stdout


async def test_sigterm_lets_the_requests_in_flight_finish(redis_url: str) -> None:  # noqa: F811
    """Graceful shutdown: the worker stops accepting at once, and a request it is running still gets its answer
    (within --drain-timeout) before the process exits."""
    env = {**os.environ, "MCPKIT_STATE_KEYS": "k" * 40, "MCPKIT_REDIS_PREFIX": "cli-drain:"}
    proc = subprocess.Popen(
        [*MCPKIT, "run", str(SCALE_SERVER), "-t", "http", "--redis", redis_url, "--port", "0", "--drain-timeout", "10"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        url = re.search(rb"serving http on (\S+)", line).group(1).decode()  # type: ignore[union-attr]
        async with Client(url, mode="modern") as client:
            call = asyncio.create_task(client.call_tool("slow", {"seconds": 2.0}))
            await asyncio.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.3)
            async with httpx.AsyncClient(timeout=2) as http:
                with pytest.raises(httpx.TransportError):
                    await http.get(url.rsplit("/", 1)[0] + "/healthz", headers={"connection": "close"})
            assert (await call).text == "slept 2.0"  # answered, though the worker was told to stop
        assert proc.wait(timeout=15) in (0, -signal.SIGTERM)  # (uvicorn re-raises the signal once it is done)
    finally:
        stop(proc)


def test_the_supervisor_names_the_signal_that_killed_a_worker() -> None:
    from mcpkit.cli.workers import ended

    assert ended(-signal.SIGKILL) == "was killed by SIGKILL"  # (the OOM killer, kill -9)
    assert ended(3) == "exited with status 3"
