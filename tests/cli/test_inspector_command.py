"""``mcpkit inspect``, ``mcpkit dev`` and ``mcpkit install`` as a user runs them (real subprocesses): the exit code
convention every other command follows (2: the command line names nothing usable; 130: Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.extras import one_line_error, run_without
from support.paths import SERVERS

SERVER = str(SERVERS / "client_server.py")


def _mcpkit(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", *args], capture_output=True, text=True, timeout=60, env=env
    )


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "no_such_server.py", "--no-browser"],
        ["dev", "no_such_server.py", "--no-browser"],
        ["install", "cursor", "no_such_server.py"],
        ["install", "mcp-json", "no_such_server.py"],
    ],
)
def test_a_server_file_that_does_not_exist_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    """``mcpkit run``, ``tools``, ``check``, ``proxy`` and ``skills`` end with 2 on a missing server file, as on
    any command line that names nothing usable; ``inspect``, ``dev`` and ``install`` ended with 1, the code of a
    server that failed."""
    proc = _mcpkit(*command, home=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("error: ") and "no_such_server.py" in first, proc.stderr  # (as every mcpkit error)
    assert "no_such_server.py" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / ".cursor").exists()


def test_install_of_a_file_that_fails_to_import_is_a_usage_error_as_run_says(tmp_path: Path) -> None:
    """``mcpkit run broken.py`` ends with 2; ``mcpkit install HOST broken.py`` said the same words with 1."""
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    proc = _mcpkit("install", "mcp-json", str(broken), home=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "boom" in proc.stderr and "--name" in proc.stderr, proc.stderr


def test_ctrl_c_ends_inspect_with_130_and_stops_its_server(tmp_path: Path) -> None:
    """Ctrl-C ends every other command with 130, as a shell reports an interrupted program; ``mcpkit inspect``
    ended with 0, so ``mcpkit inspect ... && next`` went on to ``next``."""
    terminal = (  # started as from a terminal: SIGINT at its default, whatever this test run inherited
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('mcpkit.cli.main', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", terminal, "inspect", SERVER, "--no-browser"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("mcpkit inspect: http://127.0.0.1:")
    children = subprocess.run(["ps", "--ppid", str(proc.pid), "-o", "pid="], capture_output=True, text=True)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err
    for pid in children.stdout.split():  # the server it started ended with it
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            continue
        assert state == "Z", f"the server {pid} outlived mcpkit inspect"


@pytest.mark.parametrize("command", ["inspect", "dev"])
def test_without_uvicorn_the_error_names_the_command_the_user_ran(command: str, tmp_path: Path) -> None:
    """``mcpkit dev`` without the http extra said "mcpkit inspect needs ... uvicorn": the one line names the
    command that was run, and the extra that brings what it needs."""
    code = f"from mcpkit.cli import main; main([{command!r}, {SERVER!r}, '--no-browser'])"
    line = one_line_error(run_without(["uvicorn"], code, tmp_path))
    assert f"mcpkit {command} needs" in line and "'uvicorn'" in line and "pip install 'mcpkit[http]'" in line, line
