"""``mcpkit call`` of a task: the task's id, status and progress on stderr, the result on stdout; Ctrl-C cancels
the task on the server (a real CLI process, a real server over stdio)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.paths import SERVERS

SERVER = str(SERVERS / "tasks_cli_server.py")
# `python -m mcpkit.cli.main` as a terminal starts it, Ctrl-C at its default: a run of the suite that inherited
# SIGINT ignored (a background job of a non-interactive shell) passes that on to its children, and a CLI started so
# rightly ignores Ctrl-C
CLI_AS_FROM_A_TERMINAL = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('mcpkit.cli.main', run_name='__main__', alter_sys=True)"
)


def _env(marker: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FORCE_COLOR"}
    env.update(NO_COLOR="1", COLUMNS="200", TASKS_MARKER=str(marker))
    return env


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_call_task_shows_its_id_status_and_progress_then_the_result(version: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpkit.cli.main",
            "call",
            SERVER,
            "crunch",
            "steps=3",
            "--task",
            "--protocol-version",
            version,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path / "marker"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "crunched 3"
    lines = proc.stderr.splitlines()
    assert any(line.startswith("task ") and line.endswith(" started") for line in lines), proc.stderr
    assert any(line.startswith("progress: ") and "step" in line for line in lines), proc.stderr
    assert any("completed" in line for line in lines if line.startswith("task ")), proc.stderr
    machine = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcpkit.cli.main",
            "call",
            SERVER,
            "crunch",
            "steps=1",
            "--task",
            "--json",
            "--protocol-version",
            version,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(tmp_path / "marker"),
    )
    assert json.loads(machine.stdout)["content"][0]["text"] == "crunched 1"


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
def test_ctrl_c_cancels_the_task_on_the_server(version: str, tmp_path: Path) -> None:
    """A tool that requires a task runs as one without --task; Ctrl-C sends tasks/cancel and exits 130."""
    marker = tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI_AS_FROM_A_TERMINAL, "call", SERVER, "hold", "--protocol-version", version],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(marker),
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    seen = ""
    while "started" not in seen and time.monotonic() < deadline:
        seen += proc.stderr.readline()
    assert "started" in seen, seen
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=30)
    assert proc.returncode == 130, seen + rest
    assert "interrupted: task" in rest and "cancelled" in rest
    for _ in range(50):
        if marker.exists():
            break
        time.sleep(0.1)
    assert marker.read_text() == "cancelled"


async def test_a_stdio_server_finishes_its_tasks_after_the_client_leaves(tmp_path: Path) -> None:
    """The client disconnecting does not cancel a task: a stdio server whose input ended drains its tasks (up to
    drain_timeout) before it exits."""
    from mcpkit import Client, StdioServer

    marker = tmp_path / "marker"
    server = StdioServer([sys.executable, SERVER], env={"TASKS_MARKER": str(marker)})
    async with Client(server, protocol_version="2025-11-25") as client:
        handle = await client.call_tool_as_task("mark", {"seconds": 1.0})
        assert handle.task.status == "working"
    for _ in range(100):
        if marker.exists():
            break
        time.sleep(0.05)
    assert marker.read_text() == "done"
