"""`mcpkit run`: loads a user's server file and serves it; clear errors for the usual mistakes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from core_helpers import CORE_SERVER

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


def test_run_http_goes_through_a_run_override(tmp_path: Path) -> None:
    """A server class that customizes ``run()`` (as examples/conformance_server.py does to add an event store) is
    served through it by ``mcpkit run -t http``; the options of the command line reach it."""
    server = tmp_path / "custom.py"
    server.write_text(
        "import sys\n"
        "from mcpkit import MCPKit\n\n"
        "class Custom(MCPKit):\n"
        "    def run(self, transport='stdio', **options):\n"
        "        print('custom run', transport, sorted(options), file=sys.stderr, flush=True)\n"
        "        raise SystemExit(0)\n\n"
        "app = Custom('custom')\n"
    )
    out = run(["run", str(server), "-t", "http", "--port", "0", "--max-sessions", "5"])
    assert out.returncode == 0, out.stderr
    assert b"custom run http ['host', 'max_sessions', 'port']" in out.stderr, out.stderr
