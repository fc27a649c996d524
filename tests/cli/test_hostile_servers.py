"""The ``mcpkit`` CLI against hostile and awkward servers (issues 15.3/15.4/15.6 and issue 13's CLI friction), each
run as a real subprocess (``python -m mcpkit.cli.main``) talking to a real server process."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.paths import SERVERS
from support.procs import stderr_until, stop

HOSTILE = SERVERS / "hostile_cli_server.py"
SERVER = str(SERVERS / "client_server.py")
CLI = [sys.executable, "-m", "mcpkit.cli.main"]
DANGEROUS = ("\x1b", "\x9b", "\x07", "\u202e")


def hostile(behaviour: str, arg: str = "") -> str:
    return f"{sys.executable} {HOSTILE} {behaviour} {arg}".strip()


def mcpkit(*args: str, timeout: float = 60, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env.update({"NO_COLOR": "1", "COLUMNS": "250"})
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        input=stdin,
    )


def assert_clean(proc: subprocess.CompletedProcess[str]) -> None:
    for stream in (proc.stdout, proc.stderr):
        for ch in DANGEROUS:
            assert ch not in stream, f"{ch!r} reached the terminal: {stream[:2000]!r}"
    assert "Traceback" not in proc.stderr, proc.stderr


# ---------------------------------------------------------------------------------------------- issue 15


def test_server_strings_are_made_visible_and_never_markup() -> None:
    """Issue 15.4: tool names, descriptions, results, progress messages, resource and prompt text and the server's
    stderr reach the terminal with escape sequences made visible, and rich markup shown as written (a tool named
    ``[/x]`` does not crash ``mcpkit tools``; ``[link=...]`` makes no link)."""
    target = hostile("paint")
    tools = mcpkit("tools", target, "--mode", "handshake")
    assert tools.returncode == 0, tools.stderr
    assert_clean(tools)
    assert "[/x]" in tools.stdout and "[link=https://evil.example/]docs[/link]" in tools.stdout
    assert "\\x1b[2J" in tools.stdout and "\\u202e" in tools.stdout
    called = mcpkit("call", target, "[/x]", "--mode", "handshake", "--stderr")
    assert called.returncode == 0, called.stderr
    assert_clean(called)
    assert "result \\x1b[2J\\x1b]0;pwned\\x07" in called.stdout and "[bold red]" in called.stdout
    assert "progress: 1/2 (50%) p\\x1b[2J" in called.stderr  # the progress message
    assert "stderr \\x1b[2J" in called.stderr and "[/x]" in called.stderr  # the server's stderr (--stderr)
    for args in (("resources",), ("prompts",), ("read", "test://r"), ("prompt", "p"), ("ping",)):
        proc = mcpkit(*args[:1], target, *args[1:], "--mode", "handshake")
        assert proc.returncode == 0, (args, proc.stderr)
        assert_clean(proc)
        assert "\\x1b" in proc.stdout, args
    machine = mcpkit("call", target, "[/x]", "--mode", "handshake", "--json")
    assert_clean(machine)
    assert json.loads(machine.stdout)["content"][0]["text"].startswith("result \x1b[2J")  # same value, escaped JSON


def test_check_report_quotes_server_strings_visibly() -> None:
    """Issue 15.4: ``mcpkit check`` quotes what the server sent (prompt names...) through the same sanitizer."""
    report = mcpkit("check", hostile("paint"), "--timeout", "2", timeout=180)
    assert_clean(report)
    assert "prompts/get p\\x1b[2J" in report.stdout
    machine = mcpkit("check", hostile("paint"), "--timeout", "2", "--json", timeout=180)
    assert_clean(machine)
    assert "prompts/get p\\u001b[2J" in machine.stdout and "\\u202e" in machine.stdout  # valid JSON escapes
    json.loads(machine.stdout)


def test_stderr_passthrough_is_bounded_in_bytes() -> None:
    """Issue 15.4: ``--stderr`` shows the server's stderr bounded in bytes (120 MiB written, at most
    ``--stderr-limit`` shown), and what the client keeps of it for error reports is bounded too."""
    proc = mcpkit("call", hostile("stderr-flood", "40"), "add", "--mode", "handshake", "--stderr", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stderr) < 1024 * 1024 + 4096  # 120 MiB written
    assert "more bytes of this line dropped" in proc.stderr and "flood done" in proc.stderr
    small = mcpkit(
        "call", hostile("stderr-flood", "2"), "add", "--mode", "handshake", "--stderr", "--stderr-limit", "5000"
    )
    assert small.returncode == 0 and len(small.stderr) < 5200 and "over --stderr-limit=5000 bytes" in small.stderr


def test_invalid_tool_list_is_a_one_line_error() -> None:
    """Issue 15.6: ``mcpkit tools`` on an invalid tool list prints one line naming the problem, no traceback."""
    proc = mcpkit("tools", hostile("invalid-tools"), "--mode", "handshake")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "pydantic" not in proc.stderr.lower()
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: the server's tools/list result is invalid at 'tools.0."), proc.stderr


def test_deep_structured_content_does_not_kill_the_cli() -> None:
    """Issue 15.6: 1,000-deep structuredContent is printed (clipped for people, whole with --json), without a
    RecursionError."""
    human = mcpkit("call", hostile("deep", "1000"), "add", "--mode", "handshake", "--no-validate")
    assert human.returncode == 0, human.stderr[-3000:]
    assert "RecursionError" not in human.stderr and "nested deeper than 64 levels" in human.stdout
    machine = mcpkit("call", hostile("deep", "1000"), "add", "--mode", "handshake", "--no-validate", "--json")
    assert machine.returncode == 0, machine.stderr[-3000:]
    assert machine.stdout.count("[") >= 1000


def test_call_timeout_is_a_hard_bound_despite_progress() -> None:
    """Issue 15.3 (CLI): ``mcpkit call --timeout 2`` ends after ~2 s although the server reports progress every
    0.3 s (progress does not extend the CLI's deadline)."""
    started = time.monotonic()
    try:
        proc = mcpkit("call", hostile("progress-forever"), "add", "--mode", "handshake", "--timeout", "2", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail("mcpkit call --timeout 2 was still running after 30 s")
    elapsed = time.monotonic() - started
    assert proc.returncode == 1 and "timed out after 2.0s" in proc.stderr and "hard bound" in proc.stderr
    assert elapsed < 12, elapsed


# ---------------------------------------------------------------------------------------------- issue 13


APP = """
import os
from mcpkit import MCPKit

app = MCPKit("no-run")


@app.tool()
def add(a: int, b: int) -> int:
    return a + b


@app.tool()
def debug_flag() -> str:
    return os.environ.get("MCPKIT_DEBUG", "unset")
"""


@pytest.fixture
def app_file(tmp_path: Path) -> Path:
    path = tmp_path / "server_no_run.py"
    path.write_text(APP)
    return path


def test_call_works_on_a_file_without_app_run(app_file: Path) -> None:
    """Issue 13: ``mcpkit call file.py ...`` serves a file that defines an app but never calls ``app.run()``,
    as ``mcpkit run file.py`` does (and a script that runs its own server still works:
    tests/cli/test_client_commands.py)."""
    proc = mcpkit("call", str(app_file), "add", "a=2", "b=3")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "5"
    named = mcpkit("call", f"{app_file}:app", "add", "a=1", "b=1", "--json")
    assert named.returncode == 0, named.stderr
    assert json.loads(named.stdout)["structuredContent"] == {"result": 2}


def test_call_prints_its_result_once() -> None:
    """Issue 13: a result whose text block only repeats the structured content is printed once."""
    proc = mcpkit("call", hostile("structured"), "add", "--mode", "handshake", "--no-validate")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('"sum"') == 1 and "5" in proc.stdout, proc.stdout


def test_json_flag_has_one_meaning_on_every_command() -> None:
    """Issue 13: ``--json`` is the same flag everywhere (print JSON); ``mcpkit call --json TARGET TOOL`` no longer
    swallows TARGET; arguments go in ``--args``, and ``--json '{...}'`` says so."""
    out = mcpkit("call", "--json", SERVER, "add", "a=2", "b=3")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["structuredContent"] == {"sum": 5}
    for command in (("tools",), ("resources",), ("prompts",), ("ping",), ("read", "mcpkit://text/1")):
        proc = mcpkit(command[0], "--json", SERVER, *command[1:])
        assert proc.returncode == 0, (command, proc.stderr)
        json.loads(proc.stdout)
    misuse = mcpkit("call", "--json", '{"a": 1}', SERVER, "add")
    assert misuse.returncode == 2 and "--args" in misuse.stderr
    args = mcpkit("call", SERVER, "add", "--args", '{"a": 1, "b": 2}', "--json")
    assert json.loads(args.stdout)["structuredContent"] == {"sum": 3}


def test_elicitation_without_a_tty_says_how_to_answer() -> None:
    """Issue 13: without a TTY, an elicitation is declined with a message naming ``--interactive`` and
    ``--answer``; ``--answer KEY=VALUE`` answers it."""
    declined = mcpkit("call", hostile("elicit"), "add", "--mode", "handshake")
    assert declined.returncode == 0, declined.stderr
    assert "What is your name?" in declined.stderr
    assert "--interactive" in declined.stderr and "--answer name=..." in declined.stderr
    assert json.loads(declined.stdout.strip()) == {"action": "decline"}
    answered = mcpkit("call", hostile("elicit"), "add", "--mode", "handshake", "--answer", "name=Ada")
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout.strip()) == {"action": "accept", "content": {"name": "Ada"}}
    digits = mcpkit("call", hostile("elicit"), "add", "--mode", "handshake", "--answer", "name=007")
    assert json.loads(digits.stdout.strip())["content"] == {"name": "007"}  # a string field keeps the text


def test_tools_shows_object_parameters_by_their_schema() -> None:
    """Issue 13: ``mcpkit tools`` shows object, array and $ref parameters by their schema, not ``any``/``object``."""
    proc = mcpkit("tools", hostile("plain"), "--mode", "handshake")
    assert proc.returncode == 0, proc.stderr
    assert "a*: number" in proc.stdout
    assert "point: {x*: integer, y: integer}" in proc.stdout
    assert "tags: list[string]" in proc.stdout and "where: {city: string}" in proc.stdout


def test_check_speaks_of_mcp_requirements_not_seeds() -> None:
    """Issue 13: ``mcpkit check`` describes what it checks as MCP requirements, never as "seeds"."""
    helptext = mcpkit("check", "--help")
    assert helptext.returncode == 0
    assert "seed" not in helptext.stdout.lower() and "MCP specification's requirements" in helptext.stdout
    report = mcpkit("check", SERVER, "--timeout", "5", timeout=180)
    assert "seed" not in (report.stdout + report.stderr).lower()
    assert "MUST (M...), SHOULD (S...) and MAY (A...) requirements of the MCP specification" in report.stdout
    assert "RESULT: FAIL" not in report.stdout  # (a .py file runs with this Python, as Client runs it)


def test_call_stderr_shows_the_servers_stderr() -> None:
    """Issue 13: ``mcpkit call --stderr`` shows what the server writes to its stderr."""
    proc = mcpkit("call", hostile("url-flood", "3"), "add", "--mode", "handshake", "--stderr")
    assert "sent 3 url elicitations" in proc.stderr
    quiet = mcpkit("call", hostile("url-flood", "3"), "add", "--mode", "handshake")
    assert "sent 3 url elicitations" not in quiet.stderr


def test_run_dev_turns_on_debug(app_file: Path) -> None:
    """Issue 13: ``mcpkit run --dev`` sets MCPKIT_DEBUG=1 in the served process (MCPKit reads it to show tool
    errors unmasked); without --dev it is not set."""
    dev = mcpkit("call", f"{sys.executable} -m mcpkit.cli.main run --dev {app_file}", "debug_flag")
    assert dev.returncode == 0, dev.stderr
    assert dev.stdout.strip() == "1"
    env = {k: v for k, v in os.environ.items() if k != "MCPKIT_DEBUG"}
    plain = subprocess.run(
        [*CLI, "call", f"{sys.executable} -m mcpkit.cli.main run {app_file}", "debug_flag"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert plain.stdout.strip() == "unset", plain.stderr


@pytest.mark.parametrize(
    "transport,scheme,path", [("http", "http", "/mcp"), ("sse", "http", "/sse"), ("ws", "ws", "/ws")]
)
def test_run_prints_the_url_it_serves(app_file: Path, transport: str, scheme: str, path: str) -> None:
    """Issue 13: ``mcpkit run -t http|sse|ws`` prints the URL it serves on (the real port with ``--port 0``)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit.cli.main", "run", "-t", transport, "--port", "0", str(app_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = stderr_until(proc, "serving")
        line = lines[-1] if lines else ""
        match = re.search(rf"serving {transport} on ({scheme}://127\.0\.0\.1:(\d+){path})\s*$", line)
        assert match, line
        with socket.create_connection(("127.0.0.1", int(match.group(2))), timeout=5):
            pass  # it listens where it says
        if transport != "sse":
            ping = mcpkit("ping", match.group(1), "--json")
            assert ping.returncode == 0 and json.loads(ping.stdout)["ok"], ping.stderr
    finally:
        stop(proc)
