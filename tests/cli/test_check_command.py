"""``mcpkit check`` as a user with only the ``cli`` extra runs it (real subprocesses in which the ``http`` extra's
packages cannot be imported): a stdio server is judged, an HTTP target is refused in one line naming the extra.
A report that cannot be written once the run is done is said in mcpkit's own one-line format."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.extras import one_line_error, run_without

pytest.importorskip("click")

HTTP_EXTRA = ["httpx", "uvicorn", "websockets", "sniffio", "httptools", "h11"]
SERVER = """from mcpkit import MCPKit

app = MCPKit("cli-only")


@app.tool()
def add(a: int, b: int) -> int:
    "Add."
    return a + b
"""


def test_a_stdio_server_is_checked_with_the_cli_extra_alone(tmp_path: Path) -> None:
    """``pip install 'mcpkit[cli]'`` then ``mcpkit check server.py`` stopped with "the mcpkit command needs ...
    httpx": the checker imported its HTTP wire for every target. A stdio target needs nothing of the http extra."""
    server = tmp_path / "server.py"
    server.write_text(SERVER)
    code = f"""
    import sys
    from mcpkit.cli import main
    try:
        main(["check", "--no-stateless", {str(server)!r}])
    finally:
        print("http extra imported:", sorted(m for m in sys.modules if m.partition(".")[0] in {HTTP_EXTRA!r}))
    """
    proc = run_without(HTTP_EXTRA, code, tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RESULT: PASS" in proc.stdout and "http extra imported: []" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/mcp", "http://127.0.0.1:9/sse", "ws://127.0.0.1:9/ws"])
def test_a_network_target_without_the_http_extra_names_mcpkit_check_and_the_extra(url: str, tmp_path: Path) -> None:
    """Without the http extra a URL target ends in one line naming ``mcpkit check`` (not "the mcpkit command")
    and ``pip install 'mcpkit[http]'``, exit 1, before anything is sent."""
    line = one_line_error(run_without(HTTP_EXTRA, f"from mcpkit.cli import main; main(['check', {url!r}])", tmp_path))
    assert line.startswith("error: mcpkit check needs") and "pip install 'mcpkit[http]'" in line, line


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full, where every write fails (ENOSPC)")
def test_a_report_that_cannot_be_written_after_the_run_is_said_in_one_error_line() -> None:
    """``--output /dev/full`` passes the check made before the run (its directory exists, it is not a directory);
    writing the report there fails once the run is done. That line was click's ``Error: Could not open file ...``,
    the one error of mcpkit's own not starting with ``error: ``. The report still reaches stdout; exit code 1."""
    proc = subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "check-client", "--output", "/dev/full", "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "RESULT: " in proc.stdout, proc.stdout
    assert proc.stderr.splitlines() == ["error: could not write the report to /dev/full: No space left on device"], (
        proc.stderr
    )
