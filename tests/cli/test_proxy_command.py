"""``mcpkit proxy``'s reconnect flags: validated before anything starts, shown in ``--help``, and what the real
proxy does when its upstream dies, cannot start for a while, and comes back."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mcpkit import Client
from mcpkit.protocol.errors import MCPError
from support.procs import stderr_until, stop
from support.toolkit import APPS_FILE

pytestmark = pytest.mark.timeout(90)
MCPKIT = [sys.executable, "-m", "mcpkit"]


def _proxy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MCPKIT, "proxy", *args], capture_output=True, text=True, timeout=30, check=False)


def test_the_reconnect_flags_are_in_the_help_with_the_proxy_servers_defaults() -> None:
    shown = " ".join(_proxy("--help").stdout.split())
    assert "--reconnect-attempts INTEGER RANGE" in shown and "[default: 10; x>=1]" in shown
    assert "--reconnect-delay SECONDS" in shown and "[default: 0.5]" in shown
    assert "--reconnect-max-delay SECONDS" in shown and "[default: 30.0]" in shown


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--reconnect-attempts", "0"], "--reconnect-attempts"),
        (["--reconnect-attempts", "-3"], "--reconnect-attempts"),
        (["--reconnect-delay", "-0.5"], "--reconnect-delay"),
        (["--reconnect-delay", "nan"], "--reconnect-delay"),
        (["--reconnect-max-delay", "0"], "--reconnect-max-delay"),
        (["--reconnect-delay", "2", "--reconnect-max-delay", "1"], "--reconnect-max-delay"),
    ],
)
def test_a_reconnect_flag_no_proxy_can_use_is_a_usage_error_before_anything_starts(
    flags: list[str], named: str
) -> None:
    done = _proxy(" ".join([sys.executable, str(APPS_FILE), "ticking"]), *flags)
    assert done.returncode == 2, done.stderr
    assert f"Invalid value for '{named}'" in done.stderr


def _kill_all(pids: Path) -> set[int]:
    killed = set()
    for entry in pids.iterdir():
        try:
            os.kill(int(entry.name), signal.SIGKILL)
        except ProcessLookupError:
            pass
        killed.add(int(entry.name))
        entry.unlink()
    return killed


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_the_proxy_reconnects_as_its_flags_say_when_its_upstream_dies_and_comes_back(
    mode: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upstream (a stdio server) is killed and cannot start for a while: the proxy makes exactly
    ``--reconnect-attempts`` attempts, waiting ``--reconnect-delay`` then at most ``--reconnect-max-delay``
    between them (what its refusals say to retry after), then goes on more slowly in the background, and once
    the upstream can start again the next request connects it and is served. With the defaults (10 attempts,
    0.5 s doubling to 30 s) its round would last minutes, and the first refusal would say to wait up to 500 ms."""
    down, pids = tmp_path / "down", tmp_path / "pids"
    pids.mkdir()
    monkeypatch.setenv("TOOLKIT_PID_DIR", str(pids))
    monkeypatch.setenv("TOOLKIT_REFUSE_IF", str(down))
    upstream = " ".join([sys.executable, str(APPS_FILE), "ticking"])
    flags = ["--reconnect-attempts", "3", "--reconnect-delay", "0.25", "--reconnect-max-delay", "0.3"]
    async with Client([*MCPKIT, "proxy", upstream, "--mode", mode, *flags], mode="modern") as client:
        first = (await client.call_tool("process", {}, timeout=20)).data
        down.touch()
        killed = _kill_all(pids)
        assert first in killed
        loop = asyncio.get_running_loop()
        started = loop.time()
        retry_after: list[int] = []
        for _ in range(200):  # (every refusal comes at once; bounded: 200 polls of 50 ms)
            asked = loop.time()
            with pytest.raises(MCPError) as error:
                await client.call_tool("process", {}, timeout=10)
            assert loop.time() - asked < 5
            assert "is unavailable" in error.value.message
            if isinstance(error.value.data, dict) and "retryAfterMs" in error.value.data:
                retry_after.append(error.value.data["retryAfterMs"])
            if "attempts in a row failed" in error.value.message:
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail("the round of attempts never ended")
        gave_up_after = loop.time() - started
        assert "3 attempts in a row failed" in error.value.message
        # the two waits between the three attempts: 0.2-0.25 s, then 0.24-0.3 s (capped by --reconnect-max-delay)
        assert 0.4 <= gave_up_after < 15
        assert retry_after and max(retry_after) <= 300
        down.unlink()
        second = (await client.call_tool("process", {}, timeout=20)).data  # a new round: the upstream is back
        assert isinstance(second, int) and second not in killed


@pytest.mark.parametrize(
    ("targets", "said"),
    [
        (["http://10.1.2.3/mcp"], "refusing to proxy http://10.1.2.3/mcp: it is on a private address"),
        (["-t", "http", "--port", "0", "http://169.254.169.254/mcp"], "on a link-local address"),
        (["a=python one.py", "a_b=python two.py"], "gateway prefixes 'a' and 'a_b'"),
    ],
)
def test_a_target_or_a_prefix_the_proxy_refuses_is_one_error_line_not_a_traceback(
    targets: list[str], said: str
) -> None:
    """A URL target on a private address printed a Python traceback (the SSRF rule's ValueError) and a gateway
    whose prefixes overlap would have too; both are one line and exit code 2, the first naming the flag."""
    done = _proxy(*targets)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and said in done.stderr
    if targets[0].startswith(("http", "-t")):
        assert "--allow-private-network" in done.stderr


def _closed_port_url() -> str:
    with socket.socket() as closed:  # (a port nothing listens on)
        closed.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"


def test_a_gateway_with_a_member_down_serves_the_others_and_says_so_in_one_line() -> None:
    """``mcpkit proxy a=... b=...`` with b down: the gateway starts (it did not: one member down took it all
    down), its log names b once, and a's tools are served; ``--require-all`` keeps the old refusal."""
    member = f"a={sys.executable} {APPS_FILE} ticking"
    missing = f"b={_closed_port_url()}"
    proc = subprocess.Popen(
        [*MCPKIT, "proxy", member, missing, "-t", "http", "--port", "0"], stderr=subprocess.PIPE, text=True
    )
    try:
        lines = stderr_until(proc, "proxying on")
        said = [line for line in lines if "gateway member 'b'" in line]
        assert len(said) == 1 and "cannot be reached" in said[0] and "in the background" in said[0], lines
        url = lines[-1].split("proxying on ")[1].strip()

        async def tools() -> set[str]:
            async with Client(url) as client:
                return {tool.name for tool in await client.list_tools()}

        assert asyncio.run(tools()) == {"a_process", "a_crash"}
    finally:
        stop(proc)
    done = _proxy(member, missing, "--require-all", "-t", "http", "--port", "0")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "error:" in done.stderr
