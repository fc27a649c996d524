"""`mcpkit run`: loads a user's server file and serves it; clear errors for the usual mistakes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from support.core import CORE_SERVER
from support.procs import stderr_until, stop, wait_listening

MCPKIT = [sys.executable, "-m", "mcpkit.cli.main"]
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}\n'


def run(args: list[str], stdin: bytes = b"", timeout: float = 20) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(MCPKIT + args, input=stdin, capture_output=True, timeout=timeout)


@pytest.mark.req("M013")
def test_run_serves_stdio() -> None:
    p = run(["run", str(CORE_SERVER)], INIT)
    assert p.returncode == 0, p.stderr
    (line,) = p.stdout.splitlines()
    assert orjson.loads(line)["result"]["serverInfo"]["name"] == "core-test"


def test_run_with_explicit_object(tmp_path: Path) -> None:
    f = tmp_path / "two.py"
    f.write_text(
        "from mcpkit.server.lowlevel import Server\n"
        "a = Server('first')\nb = Server('second')\n"
        "def make():\n    return Server('made')\n"
    )
    p = run(["run", f"{f}:b"], INIT)
    assert orjson.loads(p.stdout)["result"]["serverInfo"]["name"] == "second"
    p = run(["run", f"{f}:make"], INIT)
    assert orjson.loads(p.stdout)["result"]["serverInfo"]["name"] == "made"
    p = run(["run", str(f)], INIT)
    assert p.returncode == 2 and b"several servers" in p.stderr


@pytest.mark.parametrize(
    ("content", "target_suffix", "message"),
    [
        (None, "", b"no such file"),
        ("x = (\n", "", b"syntax error"),
        ("y = 1\n", ":app", b"no object named 'app'"),
        ("y = 1\n", "", b"defines no mcpkit server"),
        ("raise RuntimeError('db down')\n", "", b"RuntimeError: db down"),
        ("y = 1\n", ":y", b"not an mcpkit server"),
        ("def forecast(city):\n    return city\n", ":forecast", b"srv.py:forecast takes arguments (city)"),
    ],
)
def test_run_errors_are_clear(tmp_path: Path, content: str | None, target_suffix: str, message: bytes) -> None:
    f = tmp_path / "srv.py"
    if content is not None:
        f.write_text(content)
    p = run(["run", f"{f}{target_suffix}"])
    assert p.returncode == 2
    assert message in p.stderr, p.stderr
    assert p.stdout == b""


def test_a_file_that_fails_while_imported_shows_its_own_lines_not_the_import_machinery(tmp_path: Path) -> None:
    """The traceback starts at the user's file and keeps its frames even when the error comes from deep inside a
    library it called (the last lines alone would show only the library's)."""
    f = tmp_path / "srv.py"
    f.write_text('import json\n\ndef load_settings():\n    return json.loads("{")\n\nSETTINGS = load_settings()\n')
    p = run(["run", str(f)])
    assert p.returncode == 2
    err = p.stderr.decode()
    assert "SETTINGS = load_settings()" in err and 'return json.loads("{")' in err, err
    assert "importlib" not in err and "mcpkit/cli" not in err, err


#: A server file whose MCPKit subclass overrides run(); each test appends the body of its run() and the app.
CUSTOM_RUN = (
    "import sys\nfrom mcpkit import MCPKit\n\nclass Custom(MCPKit):\n    def run(self, transport='stdio', **options):\n"
)


def test_run_http_goes_through_a_run_override(tmp_path: Path) -> None:
    """A server class that customizes ``run()`` (as examples/conformance_server.py does to add an event store) is
    served through it by ``mcpkit run -t http``; the options of the command line reach it."""
    server = tmp_path / "custom.py"
    server.write_text(
        CUSTOM_RUN + "        print('custom run', transport, sorted(options), file=sys.stderr, flush=True)\n"
        "        raise SystemExit(0)\n\n"
        "app = Custom('custom')\n"
    )
    out = run(["run", str(server), "-t", "http", "--port", "0", "--max-sessions", "5"])
    assert out.returncode == 0, out.stderr
    assert b"custom run http ['host', 'max_sessions', 'port']" in out.stderr, out.stderr


def test_run_override_that_serves_still_prints_its_url(tmp_path: Path) -> None:
    """Issue 14 item 5 (the URL announcement lives in the HTTP serve, not in the CLI): a server class whose run()
    override adds something and then serves (as examples/conformance_server.py does) is served through it by
    ``mcpkit run -t http --port 0`` AND the URL it listens on is printed, with the real port. Before, the CLI
    printed the URL only on its own serving path, which it skipped for an override: no URL was printed."""
    import re
    import socket

    server = tmp_path / "custom.py"
    server.write_text(
        CUSTOM_RUN + "        print('custom run', transport, flush=True, file=sys.stderr)\n"
        "        super().run(transport, **options)\n\n"
        "app = Custom('custom')\n"
    )
    proc = subprocess.Popen(
        [*MCPKIT, "run", str(server), "-t", "http", "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    try:
        lines = stderr_until(proc, "serving")
        assert "custom run http\n" in lines, lines
        match = re.search(r"mcpkit: serving http on http://127\.0\.0\.1:(\d+)/mcp\s*$", lines[-1])
        assert match, lines
        with socket.create_connection(("127.0.0.1", int(match.group(1))), timeout=5):
            pass  # it listens where it says
    finally:
        stop(proc)


@pytest.mark.parametrize("announce", [True, False])
def test_server_run_announces_its_url_unless_told_not_to(announce: bool) -> None:
    """``Server.run("http", ...)`` (the library, not only ``mcpkit run``) prints ``mcpkit: serving http on <url>``
    once it listens; ``announce=False`` leaves the line out."""
    import socket
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = f"from mcpkit import MCPKit\nMCPKit('a').run('http', port={port}, announce={announce})"
    proc = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    line = f"mcpkit: serving http on http://127.0.0.1:{port}/mcp"
    try:
        if announce:
            assert line in "".join(stderr_until(proc, "serving"))
        else:
            wait_listening(port, proc)
            time.sleep(0.5)  # (the line, when printed, follows the listen within one 20 ms poll)
    finally:
        stop(proc)
    assert proc.stderr is not None
    if not announce:
        assert line not in proc.stderr.read()


def test_run_http_on_a_port_in_use_says_so_in_one_line() -> None:
    """The most common start-up failure of an HTTP server (the port is taken) ends with uvicorn's one-line reason
    and its exit code 3, not a traceback of the task that failed to bind."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = run(["run", str(CORE_SERVER), "-t", "http", "--port", str(port)])
    assert out.returncode == 3, out.stderr
    assert b"address already in use" in out.stderr, out.stderr
    assert b"Traceback" not in out.stderr and b"never retrieved" not in out.stderr, out.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["run", str(CORE_SERVER), "-t", "http", "--port", "99999"],
        ["run", str(CORE_SERVER), "-t", "http", "--port", "-3"],
        ["proxy", str(CORE_SERVER), "-t", "http", "--port", "70000"],
        ["inspect", str(CORE_SERVER), "--port", "65536", "--no-browser"],
        ["dev", str(CORE_SERVER), "--port", "-1", "--no-browser"],
        ["check-client", "--url", "--port", "99999"],
    ],
)
def test_a_port_out_of_range_is_a_usage_error(args: list[str]) -> None:
    """A port no socket can bind is refused by the option itself (exit 2, its name in the message), before
    anything starts, not by an OverflowError out of bind()."""
    out = run(args)
    assert out.returncode == 2, out.stderr
    assert b"--port" in out.stderr and b"0<=x<=65535" in out.stderr, out.stderr
    assert b"Traceback" not in out.stderr, out.stderr


@pytest.mark.parametrize(("transport", "scheme"), [("ws", "ws"), ("sse", "http"), ("http", "http")])
def test_run_announces_the_path_it_serves_the_transport_on(transport: str, scheme: str) -> None:
    """``--path`` names the chosen transport's route (cli guide), and the URL printed is that route: with
    ``-t ws --path /sock`` it printed ``ws://.../ws`` while the WebSocket was served at /sock."""
    import re

    proc = subprocess.Popen(
        [*MCPKIT, "run", str(CORE_SERVER), "-t", transport, "--port", "0", "--path", "/custom"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = stderr_until(proc, "serving")
        assert re.search(rf"serving {transport} on {scheme}://127\.0\.0\.1:\d+/custom\s*$", lines[-1]), lines
    finally:
        stop(proc)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--log-level", "loud"),
        ("--max-sessions", "-1"),
        ("--max-sessions-per-client", "0"),
        ("--max-connections", "0"),
        ("--header-timeout", "-1"),
        ("--body-timeout", "0"),
        ("--max-header-bytes", "10"),
        ("--limit-concurrency", "0"),
        ("--timeout-keep-alive", "-5"),
        ("--drain-timeout", "-1"),
        ("--redis-timeout", "0"),
    ],
)
def test_a_value_no_server_can_run_with_is_a_usage_error(option: str, value: str) -> None:
    """Each option of ``mcpkit run`` refuses, by its own name and before anything starts, a value no server
    can run with: they used to end in a ValueError traceback (an unknown log level, a zero connection bound),
    or be taken (``--max-sessions -1``, ``--drain-timeout -1``)."""
    out = run(["run", str(CORE_SERVER), "-t", "http", "--port", "0", option, value], timeout=30)
    assert out.returncode == 2, out.stderr
    assert option.encode() in out.stderr and b"Traceback" not in out.stderr, out.stderr
