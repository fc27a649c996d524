"""``mcpkit check-client`` against real clients: mcpkit's own, the official Python SDK's, the TypeScript SDK's (v1 and
v2), each over stdio and Streamable HTTP, and a deliberately broken client whose every fault must fail exactly the
IDs its table names (a check that cannot fail is caught here). Every client is a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit.check import FAIL, PASS, Report, render, run_client_checks
from mcpkit.check.clients.hosts import HttpHost, StdioHost
from mcpkit.check.clients.scripted import SCENARIOS, ScriptedServer
from support.clients.broken_client import FAULTS
from support.gather import gather_limited
from support.paths import REPO
from support.zygote import Zygote

#: the scenarios a run over HTTP makes by default (``auth`` has a run of its own)
HTTP_SCENARIOS = [name for name, s in SCENARIOS.items() if "http" in s.transports and not s.optional]

ROOT = REPO
PY = sys.executable
NODE = ROOT / "tests" / "node_modules" / ".bin" / "node"
BROKEN = [PY, str(ROOT / "tests" / "support" / "clients" / "broken_client.py")]
CLI = [PY, "-m", "mcpkit.cli.main", "check-client"]
SCRIPT = json.dumps(
    {
        "options": {"terminateSession": True},
        "steps": [
            {"op": "listTools", "all": True},
            {"op": "callTool", "name": "check_echo", "arguments": {}, "progress": True},
            {"op": "callTool", "name": "check_ask", "arguments": {}},
        ],
    }
)

pytestmark = pytest.mark.timeout(600)
FIXTURE_WITHIN = 540.0  # the module fixtures' gathers end within this, inside the event loop (see support.gather)
JSON_TYPE = {"Content-Type": "application/json"}


def command(client: str, transport: str) -> list[str]:
    where = "{url}" if transport == "http" else "{server}"
    if client == "mcpkit":
        return [PY, str(ROOT / "tests" / "support" / "clients" / "mcpkit_client.py"), where]
    if client == "sdk":
        return [PY, str(ROOT / "tests" / "support" / "clients" / "sdk_client.py"), where]
    script = {"ts1": "ts_client.mjs", "ts2": "ts_client_v2.mjs"}[client]
    flag = "--http" if transport == "http" else "--stdio"
    return [str(NODE), str(ROOT / "tests" / "support" / "interop" / script), flag, where, "--script", SCRIPT]


CLIENTS = ROOT / "tests" / "support" / "clients"
# the Python clients' scripts and what they import once they connect: each scenario starts the client afresh (0.15 s
# of CPU for the broken client, 0.6 s for mcpkit's, 1.3 s for the official SDK's as a new interpreter); the module's
# fixtures fork them from one process that imported them once (support.zygote)
CLIENT_PRELOAD = [
    *(str(CLIENTS / f"{name}_client.py") for name in ("broken", "mcpkit", "sdk")),
    *("mcp.client.stdio", "mcp.client.streamable_http", "anyio._backends._asyncio", "anyio.streams.stapled"),
]


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    with Zygote(CLIENT_PRELOAD) as started:
        yield started


def forked(argv: list[str], zygote: Zygote | None) -> list[str]:
    """``argv`` forked from ``zygote`` when it is a Python command and a zygote is given."""
    return zygote.python(argv) if zygote is not None and argv[0] == PY else argv


def bad_ids(report: Report) -> set[str]:
    return {r.req for r in report.sorted() if r.status in (FAIL, "warn")}


# ------------------------------------------------------------------------------------------ real clients

# What each peer fails, each a true fault (see the note): none of the official SDKs answers a JSON-RPC batch
# from the server at 2025-03-26, where receiving batches is a MUST (M011); the official Python client and both
# TypeScript clients do not start a new session after a 404 for theirs (MX10; TS PR #2150, python-sdk #3556 open);
# the official Python client takes any answer on a POST's SSE stream for the answer of that POST (it rewrites the
# id), so a stray answer breaks the call (S021).
KNOWN_FAULTS: dict[tuple[str, str], set[str]] = {
    ("mcpkit", "stdio"): set(),
    ("mcpkit", "http"): set(),
    ("sdk", "stdio"): {"M011"},
    ("sdk", "http"): {"M011", "MX10", "S021"},
    ("ts1", "stdio"): {"M011"},
    ("ts1", "http"): {"M011", "MX10"},
    ("ts2", "stdio"): {"M011"},
    ("ts2", "http"): {"M011", "MX10"},
}
# judged and passing for every client (the TypeScript v1 client speaks no 2026-07-28, so not the MX13+ ones)
ALWAYS = {"M001", "M004", "M006", "M039", "M040", "M043", "M044", "M047", "M071", "M072", "M073", "M076", "M079"}
ALWAYS |= {"M082", "S013", "S017", "S018", "MX19"}
STDIO_RULES = {"M012", "M014", "M015", "M017", "S001"}
HTTP_RULES = {"M019", "M020", "M021", "M029", "MX12", "MX11", "SX11"}
MODERN_RULES = {"MX13", "MX15", "MX16", "MX17", "MX18"}


@pytest.fixture(scope="module")
def client_reports(zygote: Zygote) -> dict[tuple[str, str], Report]:
    if not NODE.exists():
        pytest.skip("npm peers not installed (tests/node_modules)")
    jobs = {
        f"{c}:{t}": (lambda c=c, t=t: run_client_checks(forked(command(c, t), zygote), transport=t, timeout=60))
        for c, t in KNOWN_FAULTS
    }
    got = asyncio.run(gather_limited(jobs, limit=4, within=FIXTURE_WITHIN))
    return {tuple(k.split(":")): v for k, v in got.items()}  # type: ignore[misc]


@pytest.mark.req("M012", "M017", "M019", "M020", "M021", "M024", "M029", "M039", "M040", "M041", "M043", "M044")
@pytest.mark.req("M071", "M072", "M073", "M076", "M077", "M078", "M082", "M083", "S001", "S007", "S013", "S015", "S017")
@pytest.mark.parametrize("client,transport", sorted(KNOWN_FAULTS))
def test_real_clients_pass_but_for_their_known_faults(
    client: str, transport: str, client_reports: dict[tuple[str, str], Report]
) -> None:
    report = client_reports[(client, transport)]
    assert bad_ids(report) == KNOWN_FAULTS[(client, transport)], render(report, "text", verbose=True)
    expected = ALWAYS | (STDIO_RULES if transport == "stdio" else HTTP_RULES)
    if client != "ts1":
        expected |= MODERN_RULES | ({"MX14"} if transport == "http" else set())
    if transport == "http" and client == "sdk":
        expected -= {"MX11", "SX11"}  # its resume run breaks on the stray answer first (S021)
    passing = {r.req for r in report.sorted() if r.status == PASS}
    assert expected - KNOWN_FAULTS[(client, transport)] <= passing, (expected - passing, render(report, "text"))
    not_exercised = [n.req.id for n in report.not_judged() if n.category == "not-exercised"]
    if client != "ts1":
        assert not_exercised == [], not_exercised
    assert len(report.not_checkable()) < 20


# ------------------------------------------------------------------------------ a cancellation from the server

SLOW_SCRIPT = json.dumps(
    {
        "options": {"terminateSession": True, "samplingDelayMs": 3000},
        "steps": [{"op": "listTools", "all": True}, {"op": "callTool", "name": "check_ask", "arguments": {}}],
    }
)


def slow_command(client: str, transport: str) -> list[str]:
    """A client whose sampling takes longer than the cancel scenario waits (its SDK decides what is sent after)."""
    where = "{url}" if transport == "http" else "{server}"
    if client in ("mcpkit", "sdk"):
        return [PY, str(ROOT / "tests" / "support" / "clients" / f"{client}_client.py"), where, "--slow-sampling"]
    script = {"ts1": "ts_client.mjs", "ts2": "ts_client_v2.mjs"}[client]
    flag = "--http" if transport == "http" else "--stdio"
    return [str(NODE), str(ROOT / "tests" / "support" / "interop" / script), flag, where, "--script", SLOW_SCRIPT]


CANCELLING = [("mcpkit", "stdio"), ("mcpkit", "http"), ("sdk", "stdio"), ("ts1", "stdio"), ("ts2", "http")]


@pytest.fixture(scope="module")
def cancel_reports(zygote: Zygote) -> dict[tuple[str, str], Report]:
    if not NODE.exists():
        pytest.skip("npm peers not installed (tests/node_modules)")
    jobs = {
        f"{c}:{t}": (
            lambda c=c, t=t: run_client_checks(
                forked(slow_command(c, t), zygote), transport=t, scenarios=["cancel"], timeout=60
            )
        )
        for c, t in CANCELLING
    }
    got = asyncio.run(gather_limited(jobs, limit=4, within=FIXTURE_WITHIN))
    return {tuple(k.split(":")): v for k, v in got.items()}  # type: ignore[misc]


@pytest.mark.req("S027")
@pytest.mark.parametrize("client,transport", CANCELLING)
def test_a_client_that_drops_a_request_the_server_cancelled_passes(
    client: str, transport: str, cancel_reports: dict[tuple[str, str], Report]
) -> None:
    """mcpkit's client, the official Python SDK's and both TypeScript SDK clients, each with a sampling handler
    slower than the scripted server waits: the server cancels the request, no answer to it comes, and the client goes
    on answering pings (S027, SX12). Before the cancel scenario nothing exercised the client's side of a cancellation
    at all."""
    report = cancel_reports[(client, transport)]
    assert not bad_ids(report), render(report, "text", verbose=True)
    for rid in ("S027", "SX12"):
        assert report.status(rid) == PASS, render(report, "text", verbose=True)
    assert "cancelled: no answer in the" in report.requirements["S027"].evidence
    assert "M076" not in report.requirements  # (the cancelled request is not "declared but unanswered")


def test_a_client_that_answers_at_once_leaves_the_cancellation_not_observable() -> None:
    """A client that answers the server's request within the wait gets no cancellation: S027 and SX12 are listed
    as not checkable from outside, with why (not failed, and not "not exercised")."""
    report = asyncio.run(run_client_checks(command("mcpkit", "stdio"), scenarios=["cancel"], timeout=60))
    assert not bad_ids(report), render(report, "text", verbose=True)
    unjudged = {n.req.id: n for n in report.not_judged()}
    for rid in ("S027", "SX12"):
        assert unjudged[rid].category == "not-observable", unjudged[rid]
        assert "longer than 0.5s" in unjudged[rid].reason


# ------------------------------------------------------------------------------------------ the broken client


@pytest.fixture(scope="module")
def broken_client_reports(zygote: Zygote) -> dict[str, Report]:
    def job(fault: str | None, transport: str, scenarios: tuple[str, ...] | None) -> Callable[[], Any]:
        where = "{url}" if transport == "http" else "{server}"
        argv = forked([*BROKEN, where, *(["--fault", fault] if fault else [])], zygote)
        return lambda: run_client_checks(argv, transport=transport, scenarios=scenarios, timeout=60)

    jobs = {"none:stdio": job(None, "stdio", None), "none:auth": job(None, "http", ("auth",))}
    # the fault-free HTTP run a scenario a job: all of them in one run, one after another, was the fixture's longest
    jobs.update({f"none:http:{name}": job(None, "http", (name,)) for name in HTTP_SCENARIOS})
    jobs.update({f: job(f, t, s) for f, (_, t, s) in FAULTS.items()})
    # 24 at a time: the runs mostly wait (~10 s of CPU in all). At a load of 8-10 the set-up took 29.8 s with one
    # fault-free HTTP run of every scenario (28.7 s, the longest) and 12 at a time, 26.9 s with a run a scenario,
    # 23.0 s with 24 at a time (then no-resume, ~18 s, and the fault-free stdio run, ~17 s, are the longest)
    return asyncio.run(gather_limited(jobs, limit=24, within=FIXTURE_WITHIN))


def test_broken_client_without_faults_passes(broken_client_reports: dict[str, Report]) -> None:
    """The fixture is correct over both transports in every scenario, so each fault is the only thing differing;
    and every rule a fault breaks passes when it is not broken."""
    nones = [name for name in broken_client_reports if name.startswith("none:")]
    assert len(nones) == 2 + len(HTTP_SCENARIOS)
    for name in nones:
        report = broken_client_reports[name]
        assert not bad_ids(report), render(report, "text", verbose=True)
    passing = {r.req for name in nones for r in broken_client_reports[name].sorted() if r.status == PASS}
    broken = {rid for ids, _, _ in FAULTS.values() for rid in ids}
    assert broken <= passing, broken - passing


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_broken_client_fails_the_rule_it_breaks(fault: str, broken_client_reports: dict[str, Report]) -> None:
    report = broken_client_reports[fault]
    expected = FAULTS[fault][0]
    assert bad_ids(report) == expected, render(report, "text", verbose=True)
    for rid in expected:  # the scenario that showed it is named
        assert all(f.evidence.startswith("[") for f in report.requirements[rid].findings), rid


@pytest.mark.req("M011")
def test_a_client_ignoring_the_batch_is_judged_at_its_pace_not_held_the_whole_ask_timeout(
    broken_client_reports: dict[str, Report],
) -> None:
    """The scripted server sends a ping just after its batch; a client that answers that ping and not the batch is
    given up on after a few seconds (it held the run ASK_TIMEOUT, 10 s, before), and the evidence says the client
    was answering."""
    evidence = broken_client_reports["ignore-batch"].requirements["M011"].evidence
    assert "0 of 2 answered; the ping sent just after it was answered" in evidence, evidence
    assert broken_client_reports["none:stdio"].status("M011") == PASS


# ------------------------------------------------------------------------------------------ the command and hosts


def test_cli_names_the_broken_rule_with_exit_codes_and_json(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out = subprocess.run(
        [*CLI, "--format", "json", "--scenario", "handshake", "--", *BROKEN, "{server}", "--fault", "no-initialized"],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["kind"] == "client" and data["failed"]["MUST"] == ["M043"]
    m043 = next(r for r in data["requirements"] if r["id"] == "M043")
    assert m043["party"] == "client" and "[handshake]" in m043["evidence"]
    assert {n["category"] for n in data["notChecked"]} >= {"other-party", "other-transport"}
    should = subprocess.run(
        [
            *CLI,
            "--url",
            "--scenario",
            "handshake",
            "--fail-on",
            "should",
            "--",
            *BROKEN,
            "{url}",
            "--fault",
            "no-delete",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert should.returncode == 1 and "FAIL S007" in should.stdout, should.stdout + should.stderr


def test_a_client_that_stops_answering_mid_call_ends_the_run_without_a_traceback() -> None:
    """The official Python client over HTTP stops answering the scripted server's requests after a stray answer
    (its S021 fault), so ``check_ask`` is still waiting on it when the run ends. The host ends that request
    quietly: the report is the only output, stderr says where it served and nothing else. It used to print
    uvicorn's "Exception in ASGI application" with a CancelledError traceback for every such request."""
    pytest.importorskip("mcp.client.streamable_http")
    run = subprocess.run(
        [*CLI, "--url", "--scenario", "handshake", "--", *command("sdk", "http")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "FAIL S021" in run.stdout, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and "Exception in ASGI application" not in run.stderr, run.stderr
    assert [line for line in run.stderr.splitlines() if "serving http://127.0.0.1:" not in line] == [], run.stderr


def test_url_mode_serves_and_waits_for_any_client(free_port: Callable[[], int]) -> None:
    """``--url`` without a command: the scripted server is served on the given port and the run ends once the
    client that came has gone quiet."""
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    checker = subprocess.Popen(
        [PY, "-m", "mcpkit.cli.main", "check-client", "--url", "--port", str(port), "--timeout", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        from support.procs import stderr_until, wait_listening

        wait_listening(port, checker)
        assert any("serving http://127.0.0.1:" in line for line in stderr_until(checker, "serving", 30))
        client = subprocess.run(
            [PY, str(ROOT / "tests" / "support" / "clients" / "mcpkit_client.py"), f"http://127.0.0.1:{port}/mcp"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert client.returncode == 0, client.stderr
        out, _ = checker.communicate(timeout=60)
    finally:
        if checker.poll() is None:
            checker.kill()
            checker.wait()
    assert checker.returncode == 0, out
    assert "PASS MX13" in out and "RESULT: PASS" in out


@pytest.mark.parametrize("command", [["check-client", "--", "true"], ["check", "--no-stateless", "true"]])
def test_an_output_file_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path, command: list[str]) -> None:
    """``--output`` into a directory that does not exist: a usage error (exit 2) before anything runs, not a
    FileNotFoundError traceback once the whole run is done (and its report lost)."""
    target = tmp_path / "no-such-dir" / "report.json"
    proc = subprocess.run(
        [PY, "-m", "mcpkit.cli.main", command[0], "--output", str(target), *command[1:]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--output" in proc.stderr and "no-such-dir" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == "", proc.stdout + proc.stderr


def test_a_client_command_that_cannot_start_is_a_usage_error() -> None:
    """A client command that does not exist is said in one line (exit 2): it used to be judged, each scenario
    failing M012 with "the client ran but never launched the server command it was given"."""
    proc = subprocess.run(
        [*CLI, "--", "/nonexistent/mcp-client", "{server}"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "cannot start the client command" in proc.stderr and "/nonexistent/mcp-client" in proc.stderr
    assert "M012" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", [[], ["--", PY, "-c", "pass"]])
def test_url_mode_without_any_client_judged_is_incomplete_not_a_pass(command: list[str]) -> None:
    """``check-client --url`` where no client ever connects (none came, or the command exited without
    connecting) judged nothing: the run is INCOMPLETE with exit 2. It said 'RESULT: PASS' and exited 0, so a CI
    job whose client never reached the checker passed."""
    proc = subprocess.run([*CLI, "--url", "--timeout", "2", *command], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "RESULT: INCOMPLETE" in proc.stdout and "no client" in proc.stdout, proc.stdout


def test_url_mode_on_a_port_in_use_says_so_in_one_line() -> None:
    """``--url --port N`` with N taken: one line naming the port and the reason (exit 2), no traceback."""
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [*CLI, "--url", "--port", str(port), "--", "true"], capture_output=True, text=True, timeout=60
        )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"127.0.0.1:{port}" in proc.stderr and "in use" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr


async def test_the_scripted_servers_are_guarded() -> None:
    """A relay that does not present the run's token gets no session; the HTTP host refuses a browser page's
    Origin and a rebound Host name (403), as any local mcpkit server does, and bounds the body (413)."""
    server = ScriptedServer(SCENARIOS["handshake"])
    stdio = StdioHost(server)
    await stdio.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", stdio.port)
        writer.write(json.dumps({"t": "hello", "token": "guessed"}).encode() + b"\n")
        writer.write(json.dumps({"t": "in", "d": '{"jsonrpc":"2.0","id":1,"method":"ping"}'}).encode() + b"\n")
        await writer.drain()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # hung up on, nothing answered
        writer.close()
    finally:
        await stdio.stop()
    assert server.conns == []
    import httpx

    http = HttpHost(server)
    await http.start()
    try:
        async with httpx.AsyncClient() as c:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            page = await c.post(http.url, json=body, headers={"Origin": "http://evil.example"})
            rebound = await c.post(http.url, json=body, headers={"Host": "evil.example"})
            try:
                big = b"x" * (4 * 1024 * 1024 + 1)
                huge = (await c.post(http.url, content=big, headers={"Content-Type": "application/json"})).status_code
            except httpx.TransportError:
                huge = 413  # answered (413) and hung up on before the body was all sent
        assert (page.status_code, rebound.status_code, huge) == (403, 403, 413)
        assert [e.error for conn in server.conns for e in conn.incoming()] == ["too large"]
    finally:
        await http.stop()


async def test_a_client_that_never_exits_is_stopped_and_reaped(tmp_path: Path) -> None:
    """The client command gets its time, then is stopped (stdin closed, SIGTERM, SIGKILL: it ignores SIGTERM) and
    reaped, with the child it started."""
    pids = tmp_path / "pids"
    code = (
        "import os, signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}'); time.sleep(60)"
    )
    report = await run_client_checks([PY, "-c", code], scenarios=["handshake"], timeout=2)
    assert "still running after 2s: stopped" in str(report.info["handshake: client"])
    assert report.info["handshake: note"] == "the client never spoke to the scripted server"
    await asyncio.sleep(0.2)
    assert [pid for pid in map(int, pids.read_text().split()) if _running(pid)] == []


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting for a parent that will never reap it is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.req("M031", "M032", "M033", "M036", "M037", "S012")
def test_mcpkits_client_authorizes_as_the_oauth_rules_say() -> None:
    """The auth scenario (mcpkit's development authorization server in front of the scripted endpoint): mcpkit's
    client with its OAuth client follows the metadata, uses PKCE S256, state and resource, and sends its token in
    the Authorization header only."""
    argv = [*command("mcpkit", "http"), "--oauth"]
    report = asyncio.run(run_client_checks(argv, transport="http", scenarios=["auth"], timeout=60))
    assert not bad_ids(report), render(report, "text", verbose=True)
    assert {r.req for r in report.sorted() if r.status == PASS} >= {"M031", "M032", "M033", "M036", "M037", "S012"}
    assert "SX11" not in report.requirements  # (the other scenarios did not run: auth runs only by name)


def test_what_a_flooding_client_sends_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run keeps at most MAX_ENTRIES messages a connection (the rest counted) and MAX_CONNECTIONS connections."""
    from mcpkit.check.clients import scripted

    monkeypatch.setattr(scripted, "MAX_ENTRIES", 10)
    monkeypatch.setattr(scripted, "MAX_CONNECTIONS", 3)
    server = ScriptedServer(SCENARIOS["handshake"])
    conn = server.connect("stdio")
    for n in range(25):
        server.record_in(conn, json.dumps({"jsonrpc": "2.0", "method": "notifications/x", "params": {"n": n}}))
    assert len(conn.log) == 10 and conn.dropped == 15
    server.connect("stdio")
    server.connect("http")
    with pytest.raises(scripted.TooMany):
        server.connect("stdio")


def flooding_client(tmp_path: Path, calls: int, pad: int = 0) -> Path:
    """A client script (its argument: the server's command line) that initializes, then writes ``calls`` calls of
    ``check_ask`` at once and reads nothing for a minute; with ``pad``, each call carries that many bytes of
    padding and the server's stdout is a pipe nobody reads (else it goes to /dev/null)."""
    arguments = ", 'arguments': {'pad': pad}" if pad else ""
    flood = tmp_path / "flood.py"
    flood.write_text(
        "import json, shlex, subprocess, sys, time\n"
        f"out = subprocess.{'PIPE' if pad else 'DEVNULL'}\n"
        "p = subprocess.Popen(shlex.split(sys.argv[1]), stdin=subprocess.PIPE, stdout=out)\n"
        "def send(m): p.stdin.write(json.dumps(m).encode() + b'\\n')\n"
        "send({'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {'protocolVersion': '2025-11-25',\n"
        "      'capabilities': {}, 'clientInfo': {'name': 'flood', 'version': '1'}}})\n"
        f"pad = 'x' * {pad}\n"
        f"for n in range(1, {calls + 1}):\n"
        f"    send({{'jsonrpc': '2.0', 'id': n, 'method': 'tools/call',\n"
        f"          'params': {{'name': 'check_ask'{arguments}}}}})\n"
        "p.stdin.flush()\n"
        "time.sleep(60)\n"
    )
    return flood


async def test_a_client_flooding_requests_it_never_reads_holds_a_bounded_number_of_answers(tmp_path: Path) -> None:
    """A stdio client that sends 1,500 ``check_ask`` calls (each one keeps the scripted server waiting on the
    client's answer) and reads nothing: the scripted server answers at most MAX_IN_FLIGHT of a connection's
    messages at once and records the rest, and the report says how many went unanswered. It used to start a task
    per message, without a bound, for as long as the client kept writing."""
    from mcpkit.check.clients.scripted import MAX_IN_FLIGHT

    flood = flooding_client(tmp_path, 1500)
    report = await run_client_checks([PY, str(flood), "{server}"], scenarios=["handshake"], timeout=8)
    note = str(report.info.get("handshake: not answered"))
    assert f"past the {MAX_IN_FLIGHT} a connection answers at once" in note, report.info
    assert 400 <= int(note.split()[0]) <= 501, note
    assert "still running after 8s: stopped" in str(report.info["handshake: client"])


async def test_past_a_full_log_a_client_is_counted_unread_and_its_shutdown_still_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once a connection's log holds MAX_ENTRIES, what the client writes is counted without being parsed (nor
    answered): a flood left in the relay's socket after the client was stopped used to be parsed in full. The relay's
    events still land, so S001 is judged from how the client ended the server (it used to be "not exercised")."""
    from mcpkit.check.clients import scripted

    monkeypatch.setattr(scripted, "MAX_ENTRIES", 100)
    flood = tmp_path / "flood.py"
    flood.write_text(
        "import json, shlex, subprocess, sys, threading, time\n"
        "p = subprocess.Popen(shlex.split(sys.argv[1]), stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "got = []\n"
        "threading.Thread(target=lambda: [got.append(line) for line in p.stdout], daemon=True).start()\n"
        "def send(m): p.stdin.write(json.dumps(m).encode() + b'\\n')\n"
        "send({'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {'protocolVersion': '2025-11-25',\n"
        "      'capabilities': {}, 'clientInfo': {'name': 'flood', 'version': '1'}}})\n"
        "p.stdin.flush(); time.sleep(1)\n"
        "send({'jsonrpc': '2.0', 'method': 'notifications/initialized'})\n"
        "for n in range(1, 301):\n"
        "    send({'jsonrpc': '2.0', 'id': n, 'method': 'ping'})\n"
        "p.stdin.flush(); time.sleep(2)\n"
        "p.stdin.close(); p.wait(10)\n"
        f"open({str(tmp_path / 'answers')!r}, 'w').write(str(len(got)))\n"
    )
    report = await run_client_checks([PY, str(flood), "{server}"], scenarios=["handshake"], timeout=30)
    answers = int((tmp_path / "answers").read_text())
    assert answers <= 100, answers  # (all 301 were answered when every line was parsed)
    assert "counted, not read nor answered" in str(report.info.get("handshake: not kept")), report.info
    assert report.status("S001") == PASS, render(report, "text", verbose=True)


async def test_past_a_log_of_max_log_bytes_large_messages_are_counted_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection's log is bounded in size too, not only in count: a stdio client sending 1 MiB messages has the
    ones past MAX_LOG_BYTES (4 MiB here) counted without being kept, parsed or answered, and the report says so.
    The log used to keep up to MAX_ENTRIES (20,000) messages of up to 4 MiB each, whatever their size."""
    from mcpkit.check.clients import scripted

    monkeypatch.setattr(scripted, "MAX_LOG_BYTES", 4 * 1024 * 1024)
    flood = tmp_path / "flood.py"
    flood.write_text(
        "import json, shlex, subprocess, sys, threading, time\n"
        "p = subprocess.Popen(shlex.split(sys.argv[1]), stdin=subprocess.PIPE, stdout=subprocess.PIPE)\n"
        "got = []\n"
        "threading.Thread(target=lambda: [got.append(line) for line in p.stdout], daemon=True).start()\n"
        "def send(m): p.stdin.write(json.dumps(m).encode() + b'\\n'); p.stdin.flush()\n"
        "send({'jsonrpc': '2.0', 'id': 0, 'method': 'initialize', 'params': {'protocolVersion': '2025-11-25',\n"
        "      'capabilities': {}, 'clientInfo': {'name': 'flood', 'version': '1'}}})\n"
        "time.sleep(1)\n"
        "send({'jsonrpc': '2.0', 'method': 'notifications/initialized'})\n"
        "pad = 'x' * (1024 * 1024)\n"
        "for n in range(1, 13):\n"
        "    send({'jsonrpc': '2.0', 'id': n, 'method': 'ping', 'params': {'_meta': {'pad': pad}}})\n"
        "time.sleep(2)\n"
        "p.stdin.close(); p.wait(10)\n"
        f"open({str(tmp_path / 'answers')!r}, 'w').write(str(len(got)))\n"
    )
    report = await run_client_checks([PY, str(flood), "{server}"], scenarios=["handshake"], timeout=30)
    answers = int((tmp_path / "answers").read_text())
    # the initialize answer and the pings that fit in 4 MiB (4: the last one kept may go past it by its own size)
    assert 2 <= answers <= 5, answers  # (all 13 were answered when the log was bounded by count only)
    note = str(report.info.get("handshake: not kept"))
    assert "counted, not read nor answered" in note, report.info
    assert int(note.split()[0]) >= 12 - 4, note
    assert report.status("S001") == PASS, render(report, "text", verbose=True)


async def test_a_client_flooding_large_requests_it_never_reads_holds_a_bounded_number_of_bytes(tmp_path: Path) -> None:
    """A stdio client that sends 16 ``check_ask`` calls of 2 MiB each (each keeps the scripted server waiting on the
    client's answer for longer than the run) and reads nothing: the scripted server answers at most
    MAX_IN_FLIGHT_BYTES of a connection's messages at once (7 of these), records the rest and the report says how
    many went unanswered. It used to answer all of them: the count bound (1,000) let 4 GiB of 4 MiB messages in."""
    from mcpkit.check.clients.scripted import MAX_IN_FLIGHT, MAX_IN_FLIGHT_BYTES

    size = 2 * 1024 * 1024
    admitted = MAX_IN_FLIGHT_BYTES // (size + 100)  # (each message: the padding and its JSON-RPC envelope)
    flood = flooding_client(tmp_path, 16, pad=size)  # (its stdout is never read)
    report = await run_client_checks([PY, str(flood), "{server}"], scenarios=["handshake"], timeout=8)
    note = str(report.info.get("handshake: not answered"))
    assert f"past the {MAX_IN_FLIGHT} a connection answers at once, or past 16 MiB of them" in note, report.info
    # (16 - 7 when every message came within the run; fewer only when a loaded machine was slower than that)
    assert 1 <= int(note.split()[0]) <= 16 - admitted, note


def test_the_search_for_a_message_split_across_lines_is_bounded() -> None:
    """M015 fails only when lines that are no JSON join into one message again; the search is bounded (10 starting
    lines of a run, 200 lines and MAX_MESSAGE characters a stretch), so 20,000 junk lines judge in moments."""
    import time

    from mcpkit.check.clients.judge import ClientJudge

    server = ScriptedServer(SCENARIOS["handshake"])
    conn = server.connect("stdio")
    for _ in range(20_000):
        server.record_in(conn, '{"jsonrpc": "2.0", "x": "' + "a" * 100)
    report = Report("junk", "stdio", "client")
    t0 = time.monotonic()
    ClientJudge(report, server, "stdio").judge()
    assert time.monotonic() - t0 < 10
    assert report.status("M017") == FAIL and report.status("M015") != FAIL, render(report, "text", verbose=True)
