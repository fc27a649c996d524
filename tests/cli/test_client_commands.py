"""The client commands of the ``mcpkit`` CLI, run as real subprocesses (``python -m mcpkit.cli.main``) against
real servers over stdio."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.paths import SERVERS, TESTS

SERVER = str(SERVERS / "client_server.py")
EVERYTHING = TESTS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def mcpkit(*args: str, timeout: float = 60, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**_env(), "COLUMNS": "200"},
        input=stdin,
    )


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env.pop("FORCE_COLOR", None)
    env["NO_COLOR"] = "1"
    return env


def as_json(proc: subprocess.CompletedProcess[str]) -> Any:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_tools_table_and_json() -> None:
    human = mcpkit("tools", SERVER)
    assert human.returncode == 0, human.stderr
    assert "27 tools" in human.stdout and "echo" in human.stdout and "a*: number" not in human.stdout
    assert "text: string" in human.stdout
    tools = as_json(mcpkit("tools", SERVER, "--json"))
    assert len(tools) == 27 and tools[0]["name"] == "echo" and "inputSchema" in tools[0]


def test_call_with_key_values_parsed_as_json() -> None:
    out = as_json(mcpkit("call", SERVER, "add", "a=2", "b=3.5", "-o", "json"))
    assert out["structuredContent"] == {"sum": 5.5} and out["isError"] is False
    # values that are not JSON stay strings; JSON-looking ones become numbers
    echo = as_json(mcpkit("call", SERVER, "echo", "text=hello world", "--json"))
    assert echo["content"][0]["text"] == "hello world"
    num = as_json(mcpkit("call", SERVER, "echo", "text=42", "-o", "json"))
    assert num["content"][0]["text"] == "42"  # the server str()s it: it arrived as a number or a string


def test_call_with_json_arguments_and_human_output() -> None:
    proc = mcpkit("call", SERVER, "add", "--args", '{"a": 1, "b": 2}')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "3"
    assert '"sum": 3' in proc.stdout  # the structured content, pretty JSON
    assert "validated" in proc.stderr
    both = as_json(mcpkit("call", SERVER, "add", "--args", '{"a": 1}', "b=10", "-o", "json"))
    assert both["structuredContent"] == {"sum": 11}
    bad = mcpkit("call", SERVER, "add", "--args", "[1, 2]")
    assert bad.returncode == 2 and "JSON object" in bad.stderr


def test_call_tool_error_and_invalid_output() -> None:
    failed = mcpkit("call", SERVER, "fail", "why=because")
    assert failed.returncode == 1 and "failed: because" in failed.stdout and "reported an error" in failed.stderr
    invalid = mcpkit("call", SERVER, "bad_output")
    assert invalid.returncode == 1 and "outputSchema" in invalid.stderr
    unchecked = mcpkit("call", SERVER, "bad_output", "--no-validate")
    assert unchecked.returncode == 0


def test_call_reports_progress() -> None:
    proc = mcpkit("call", SERVER, "slow", "steps=3", "delay=0.05")
    assert proc.returncode == 0, proc.stderr
    assert "done after 3 steps" in proc.stdout
    assert [line for line in proc.stderr.splitlines() if line.startswith("progress:")] == [
        "progress: 1/3 (33%) step 1",
        "progress: 2/3 (67%) step 2",
        "progress: 3/3 (100%) step 3",
    ]


def test_call_timeout() -> None:
    # (progress notifications extend a request's timeout, so the first step is made slower than the timeout; the
    # timeout leaves the server time to start on a loaded machine, since the deadline covers the connection too)
    proc = mcpkit("call", SERVER, "slow", "steps=3", "delay=6", "--timeout", "2.5")
    assert proc.returncode == 1 and "timed out after 2.5s waiting for tools/call" in proc.stderr


def test_resources_and_read() -> None:
    human = mcpkit("resources", SERVER)
    assert human.returncode == 0 and "mcpkit://text/5" in human.stdout and "mcpkit://item/{id}" in human.stdout
    listing = as_json(mcpkit("resources", SERVER, "--json"))
    assert len(listing["resources"]) == 7 and listing["resourceTemplates"][0]["name"] == "item"
    read = mcpkit("read", SERVER, "mcpkit://text/4")
    assert read.returncode == 0 and read.stdout.strip() == "text number 4"
    assert as_json(mcpkit("read", SERVER, "mcpkit://item/9", "--json"))["contents"][0]["text"] == "item 9"
    blob = mcpkit("read", SERVER, "mcpkit://blob")
    assert "binary application/octet-stream, 16 bytes" in blob.stdout


def test_read_binary_to_file(tmp_path: Path) -> None:
    out = tmp_path / "blob.bin"
    proc = mcpkit("read", SERVER, "mcpkit://blob", "--out", str(out))
    assert proc.returncode == 0 and out.read_bytes() == bytes(range(16))
    missing = mcpkit("read", SERVER, "mcpkit://missing")
    assert missing.returncode == 1 and "error" in missing.stderr


def test_prompts_and_prompt() -> None:
    human = mcpkit("prompts", SERVER)
    assert "greet" in human.stdout and "name*, style" in human.stdout
    assert [p["name"] for p in as_json(mcpkit("prompts", SERVER, "--json"))] == ["greet", "plain"]
    got = mcpkit("prompt", SERVER, "greet", "name=Ada", "style=123")
    assert got.returncode == 0 and "Say hello to Ada in a 123 way." in got.stdout and "user:" in got.stdout
    data = as_json(mcpkit("prompt", SERVER, "greet", "name=Ada", "--json"))
    assert data["messages"][0]["content"]["text"] == "Say hello to Ada in a friendly way."
    bad = mcpkit("prompt", SERVER, "greet")
    assert bad.returncode == 1 and "missing argument" in bad.stderr


@pytest.mark.parametrize("mode,version", [("handshake", "2025-11-25"), ("modern", "2026-07-28")])
def test_ping_both_eras(mode: str, version: str) -> None:
    human = mcpkit("ping", SERVER, "--mode", mode)
    assert human.returncode == 0 and human.stdout.startswith("pong from client-test 2.0.0") and version in human.stdout
    info = as_json(mcpkit("ping", SERVER, "--mode", mode, "--json"))
    assert info["ok"] and info["protocolVersion"] == version and info["roundTripMs"] >= 0
    pinned = as_json(mcpkit("ping", SERVER, "--protocol-version", "2025-03-26", "--json"))
    assert pinned["protocolVersion"] == "2025-03-26"


def test_interactive_elicitation_and_roots() -> None:
    # name typed, then Enter keeps each default (color, size, count); answers go through the schema checks
    out = as_json(mcpkit("call", SERVER, "ask", "--interactive", "-o", "json", stdin="Ada\n\n\n\n"))
    assert json.loads(out["content"][0]["text"]) == {
        "action": "accept",
        "content": {"name": "Ada", "color": "green", "size": "s", "count": 3},
    }
    # an answer outside the enum is asked again
    proc = mcpkit("call", SERVER, "ask", "--interactive", "-o", "json", stdin="Ada\npurple\nred\nl\n2\n")
    answer = json.loads(as_json(proc)["content"][0]["text"])
    assert answer["content"] == {"name": "Ada", "color": "red", "size": "l", "count": 2}
    assert "What is your name?" in proc.stderr and "Please select one of the available options" in proc.stderr
    url = as_json(mcpkit("call", SERVER, "ask_url", "--interactive", "-o", "json", stdin="y\n"))
    assert json.loads(url["content"][0]["text"]) == {"action": "accept"}
    # not interactive (stdin is not a TTY): declined, and the CLI says how to answer (issue 13)
    plain = mcpkit("call", SERVER, "ask", "-o", "json")
    assert json.loads(as_json(plain)["content"][0]["text"]) == {"action": "decline"}
    assert "--interactive" in plain.stderr and "--answer name=..." in plain.stderr
    roots = as_json(mcpkit("call", SERVER, "roots", "--root", "file:///a", "--root", "file:///b", "-o", "json"))
    assert json.loads(roots["content"][0]["text"]) == {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]}


def test_clear_errors() -> None:
    missing = mcpkit("tools", "no-such-mcp-binary --stdio")
    assert missing.returncode == 2 and "server command not found on PATH: no-such-mcp-binary" in missing.stderr
    no_file = mcpkit("tools", "/nonexistent/server.py")
    assert no_file.returncode == 2 and "not found" in no_file.stderr
    crashed = mcpkit("tools", f"{SERVER} --crash")
    assert crashed.returncode == 1
    assert "exited before the connection was established" in crashed.stderr
    assert "exit code 3" in crashed.stderr and "told to crash" in crashed.stderr  # the server's own stderr
    hung = mcpkit("ping", f"{SERVER} --hang", "--timeout", "1")
    assert hung.returncode == 1 and "did not complete initialization" in hung.stderr
    assert "hanging on purpose" in hung.stderr
    bad_pair = mcpkit("call", SERVER, "echo", "novalue")
    assert bad_pair.returncode == 2 and "expected key=value" in bad_pair.stderr


@pytest.mark.npm
def test_env_option_reaches_the_server(tmp_path: Path, node_bin: Path) -> None:
    if not EVERYTHING.is_file():
        pytest.skip("server-everything missing")
    target = f"{node_bin} {EVERYTHING} stdio"
    out = as_json(mcpkit("call", target, "get-env", "-e", "TEST_VAR_EVERYTHING=from-cli", "-o", "json"))
    assert "from-cli" in out["content"][0]["text"]


@pytest.mark.npm
def test_against_server_everything(node_bin: Path) -> None:
    if not EVERYTHING.is_file():
        pytest.skip("server-everything missing")
    target = f"{node_bin} {EVERYTHING} stdio"
    tools = as_json(mcpkit("tools", target, "--json"))
    assert "get-sum" in {t["name"] for t in tools}
    total = as_json(mcpkit("call", target, "get-sum", "a=4", "b=5", "--json"))
    assert "is 9" in total["content"][0]["text"]
    weather = as_json(mcpkit("call", target, "get-structured-content", "location=Chicago", "-o", "json"))
    assert set(weather["structuredContent"]) == {"temperature", "conditions", "humidity"}
    progress = mcpkit("call", target, "trigger-long-running-operation", "duration=1", "steps=2")
    assert progress.returncode == 0 and "progress: 1/2" in progress.stderr
    assert "demo://resource/static/document/features.md" in mcpkit("resources", target).stdout
    assert mcpkit("read", target, "demo://resource/dynamic/text/1").returncode == 0
    prompt = as_json(mcpkit("prompt", target, "args-prompt", "city=Lyon", "--json"))
    assert "Lyon" in json.dumps(prompt)
    assert as_json(mcpkit("ping", target, "--json"))["protocolVersion"] == "2025-11-25"


@pytest.mark.npm
@pytest.mark.parametrize("forced", [["--mode", "modern"], ["--protocol-version", "2026-07-28"]])
def test_forcing_2026_07_28_on_a_handshake_only_server_says_to_use_another_mode(
    node_bin: Path, forced: list[str]
) -> None:
    """server-everything (the TS SDK) speaks only the handshake era and answers server/discover "Method not
    found": the command says the server does not seem to speak 2026-07-28 and which options connect."""
    if not EVERYTHING.is_file():
        pytest.skip("server-everything missing")
    target = f"{node_bin} {EVERYTHING} stdio"
    refused = mcpkit("tools", target, *forced)
    assert refused.returncode == 1
    assert "the server does not seem to speak protocol 2026-07-28" in refused.stderr, refused.stderr
    assert "Method not found" in refused.stderr
    if forced[0] == "--mode":
        assert "use --mode auto" in refused.stderr and "--mode handshake" in refused.stderr
    else:  # --mode handshake would contradict the pin
        assert "drop --protocol-version 2026-07-28" in refused.stderr and "--mode" not in refused.stderr
        assert "--protocol-version 2025-11-25" in refused.stderr
    assert "get-sum" in mcpkit("tools", target).stdout  # auto mode falls back


# ---------------------------------------------------------------------------------------------- network targets


@pytest.fixture
def http_base() -> Any:
    """mcpkit's test server on real uvicorn (127.0.0.1, port 0) in a background thread."""
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi_in_thread
    from support.servers.client_server import build_server

    with serve_asgi_in_thread(create_app(build_server())) as port:
        yield f"http://127.0.0.1:{port}"


def test_http_sse_and_ws_targets(http_base: str) -> None:
    assert len(as_json(mcpkit("tools", f"{http_base}/mcp", "--json"))) == 27
    out = as_json(mcpkit("call", f"{http_base}/mcp", "add", "a=1", "b=2", "--mode", "handshake", "-o", "json"))
    assert out["structuredContent"] == {"sum": 3}
    # /sse refuses the POST: the CLI falls back to the legacy HTTP+SSE transport by itself
    assert as_json(mcpkit("ping", f"{http_base}/sse", "--json"))["ok"]
    assert as_json(mcpkit("ping", f"{http_base}/sse", "--transport", "sse", "--json"))["ok"]
    ws = http_base.replace("http://", "ws://") + "/ws"
    assert as_json(mcpkit("read", ws, "mcpkit://text/0", "--json"))["contents"][0]["text"] == "text number 0"
    progress = mcpkit("call", f"{http_base}/mcp", "slow", "steps=2", "delay=0.01")
    assert progress.returncode == 0 and "progress: 2/2" in progress.stderr


def test_unreachable_url() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once the socket is closed
    proc = mcpkit("ping", f"http://127.0.0.1:{port}/mcp")
    assert proc.returncode == 1 and f"cannot connect to http://127.0.0.1:{port}/mcp" in proc.stderr


@pytest.mark.parametrize(("scheme", "path", "transport"), [("http", "sse", "sse"), ("ws", "ws", None)])
def test_a_url_that_accepts_but_never_answers_ends_at_the_timeout_in_one_line(
    scheme: str, path: str, transport: str | None
) -> None:
    import socket
    import time

    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepts (the backlog), never answers
        url = f"{scheme}://127.0.0.1:{listener.getsockname()[1]}/{path}"
        started = time.monotonic()
        proc = mcpkit("ping", url, "--timeout", "2", *(["--transport", transport] if transport else []), timeout=30)
        elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    said = proc.stderr.strip()
    assert said == f"error: timed out after 2.0s: {url} did not answer (a larger --timeout gives it longer)"
    assert elapsed < 15  # (the legacy SSE stream waited for ever; a WebSocket handshake 10 s whatever --timeout)


def test_a_file_that_defines_no_server_is_named_as_the_cause(tmp_path: Path) -> None:
    """A .py target with no server object runs as a script (it may start its own server); one that serves nothing
    ends at once, and the error says the file defines no mcpkit server, not only that the server exited."""
    script = tmp_path / "tool_helpers.py"
    script.write_text("VALUE = 1\n")
    proc = mcpkit("tools", str(script))
    assert proc.returncode == 1
    assert "exited before the connection was established" in proc.stderr
    assert "tool_helpers.py defines no mcpkit server" in proc.stderr, proc.stderr


def test_an_argument_given_twice_is_a_usage_error() -> None:
    proc = mcpkit("call", SERVER, "echo", "text=a", "text=b")
    assert proc.returncode == 2 and "'text' is given twice" in proc.stderr, proc.stderr


def test_cli_timeout_is_a_hard_bound_despite_progress() -> None:
    """A tool reporting progress every 0.2 s for 60 s does not keep ``mcpkit call --timeout 8`` running: the
    timeout is a deadline on the call (it used to be reset by each progress notification, which would have run
    the whole 60 s). 8 s leaves a loaded machine room to start the server within the same ``--timeout`` (1 s did
    not at load 12); the message says the call, not the start, is what timed out, and the bound on the elapsed
    time leaves room for two interpreters starting and the server being stopped, far below the 60 s."""
    import time

    t0 = time.monotonic()
    proc = mcpkit("call", SERVER, "slow", "steps=300", "delay=0.2", "--timeout", "8", timeout=120)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 1, proc.stderr
    assert "timed out after 8.0s waiting for tools/call" in proc.stderr, proc.stderr
    assert elapsed < 30, f"took {elapsed:.1f}s"


def test_a_server_that_does_not_start_within_the_timeout_is_told_as_a_timeout_naming_the_option() -> None:
    """When ``--timeout`` ends while the server is still starting, the one-line error says it timed out, what
    was being waited for, and which option gives it longer (it used to say only that the server 'did not complete
    initialization within 1.0s')."""
    hung = mcpkit("ping", f"{SERVER} --hang", "--timeout", "1")
    assert hung.returncode == 1, hung.stderr
    first = hung.stderr.splitlines()[0]
    assert first.startswith("error: timed out after 1.0s: the server "), first
    assert "did not complete initialization" in first and "--timeout" in first, first
    assert "hanging on purpose" in hung.stderr  # (its own stderr still follows)


@pytest.mark.parametrize("command", [["tools", SERVER], ["check", SERVER], ["check-client", "--", "true"]])
@pytest.mark.parametrize("timeout", ["0", "-1", "nan"])
def test_a_timeout_that_is_not_a_duration_is_a_usage_error(command: list[str], timeout: str) -> None:
    """``--timeout 0`` (or negative, or NaN) is refused by the option (exit 2, naming it): it used to be taken,
    so a working server 'did not complete initialization within -1.0s', and ``mcpkit check`` reported it
    failing M013 and M042."""
    proc = mcpkit(command[0], "--timeout", timeout, *command[1:])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--timeout" in proc.stderr and "greater than 0" in proc.stderr, proc.stderr
    assert "FAIL" not in proc.stdout


def test_an_unknown_protocol_version_is_a_usage_error() -> None:
    proc = mcpkit("tools", SERVER, "--protocol-version", "1999-01-01")
    assert proc.returncode == 2, proc.stderr
    assert "1999-01-01" in proc.stderr and "2025-11-25" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_read_out_into_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    out = tmp_path / "no-such-dir" / "blob.bin"
    proc = mcpkit("read", SERVER, "mcpkit://blob", "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("error: ") and str(out) in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_websocket_url_the_server_refuses_is_a_clear_error(http_base: str) -> None:
    """``ws://`` at a path that serves no WebSocket (the server answers the upgrade with 403): one line naming
    the URL and the status, not a traceback of the websockets library's InvalidStatus."""
    url = http_base.replace("http://", "ws://") + "/nowhere"
    proc = mcpkit("ping", url)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith(f"error: cannot connect to {url}") and "403" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [["call", SERVER, "slow", "steps=100", "delay=0.1"], ["check", SERVER]])
def test_ctrl_c_exits_130(command: list[str]) -> None:
    """Ctrl-C ends a command with 130, as a shell reports an interrupted program (and as ``call --task`` does):
    it ended with click's exit code 1, which ``mcpkit check`` uses for "a MUST failed"."""
    import signal
    import time

    terminal = (  # started as from a terminal: SIGINT at its default, whatever this test run inherited
        "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('mcpkit.cli.main', run_name='__main__', alter_sys=True)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", terminal, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err, err


@pytest.mark.parametrize(
    ("command", "mode", "version"),
    [("tools", "handshake", "2026-07-28"), ("tools", "modern", "2025-06-18"), ("inspect", "handshake", "2026-07-28")],
)
def test_a_mode_that_contradicts_the_pinned_revision_is_a_usage_error(command: str, mode: str, version: str) -> None:
    """``--mode handshake --protocol-version 2026-07-28`` connected in 2026-07-28 without a word: the person asked
    for two things that cannot both hold, and got one of them silently."""
    proc = mcpkit(command, SERVER, "--mode", mode, "--protocol-version", version, timeout=30)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--mode" in proc.stderr and version in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_client_commands_take_a_max_message_size() -> None:
    """The error for an answer over the limit says to raise max_message_size: the CLI must have a way to."""
    core = str(SERVERS / "core_server.py")
    small = mcpkit("call", core, "big", "n=5000000", "--json")
    assert small.returncode == 1 and "--max-message-size" in small.stderr, small.stderr
    proc = mcpkit("call", core, "big", "n=5000000", "--json", "--max-message-size", str(8 << 20))
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["content"][0]["text"]) == 5_000_000
    bad = mcpkit("tools", core, "--max-message-size", "0")
    assert bad.returncode == 2 and "--max-message-size" in bad.stderr, bad.stderr


@pytest.mark.parametrize("suffix", ["", ":app"])
def test_a_server_file_whose_path_has_spaces_is_run_as_that_file(tmp_path: Path, suffix: str) -> None:
    """``mcpkit tools "my servers/sérvér.py"`` split the path at its spaces and ran the program ``my`` (with
    ``dir with space/x.py`` it ran ``dir``): a path that names an existing file is that file, spaces or not."""
    folder = tmp_path / "my servers"
    folder.mkdir()
    server = folder / "sérvér.py"
    server.write_text(
        'from mcpkit import MCPKit\napp = MCPKit("spaced")\n\n\n@app.tool()\ndef greet(name: str) -> str:\n'
        '    """Say hello."""\n    return f"héllo {name}"\n',
        encoding="utf-8",
    )
    proc = mcpkit("call", f"{server}{suffix}", "greet", "name=Zoë", "--json")
    assert as_json(proc)["content"][0]["text"] == "héllo Zoë"


def test_an_mcp_json_whose_path_has_spaces_is_read_as_that_file(tmp_path: Path) -> None:
    """``mcpkit ping "my configs/mcp.json#name"`` ran the program ``my``: an existing config file is read."""
    folder = tmp_path / "my configs"
    folder.mkdir()
    config = folder / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"s": {"command": sys.executable, "args": [SERVER]}}}))
    assert as_json(mcpkit("ping", f"{config}#s", "--json"))["ok"] is True


def test_a_negative_stderr_limit_is_a_usage_error_naming_the_option() -> None:
    """``--stderr-limit -5`` was taken (a negative bound on what is shown): refused before anything starts, exit 2,
    as every numeric option of the CLI; 0 (show nothing, only the note) is a bound."""
    bad = mcpkit("tools", SERVER, "--stderr", "--stderr-limit", "-5", timeout=30)
    assert bad.returncode == 2 and "--stderr-limit" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert "Error: Invalid value for '--stderr-limit'" in bad.stderr  # (a usage error: click's own format)
    zero = mcpkit("tools", SERVER, "--stderr", "--stderr-limit", "0", "--json", timeout=30)
    assert zero.returncode == 0, zero.stderr
