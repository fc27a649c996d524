"""``mcpkit check`` against real servers: mcpkit's everything server (stdio and Streamable HTTP), a deliberately
broken server (each fault must fail exactly the right requirement IDs), ``@modelcontextprotocol/server-everything``
and a server built on the official ``mcp`` SDK. Every server is a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcpkit.check import FAIL, PASS, Report, run_checks
from support.procs import stop, wait_listening

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
EVERYTHING = [PY, "-m", "mcpkit.cli.main", "run", str(ROOT / "examples" / "everything.py")]
BROKEN = [PY, str(ROOT / "tests" / "servers" / "broken_server.py")]

pytestmark = pytest.mark.timeout(240)

# What the checker proves about mcpkit's own server over stdio (each must be "pass", not merely "not failed").
STDIO_PROVEN = [
    "M001",
    "M006",
    "M007",
    "M008",
    "M009",
    "M010",
    "M011",
    "M013",
    "M014",
    "M015",
    "M016",
    "M042",
    "M045",
    "M046",
    "M047",
    "M048",
    "M049",
    "M050",
    "M051",
    "M052",
    "M053",
    "M054",
    "M056",
    "M057",
    "M058",
    "M059",
    "M060",
    "M061",
    "M062",
    "M063",
    "M064",
    "M065",
    "M066",
    "M067",
    "M068",
    "M069",
    "M070",
    "M079",
    "M084",
    "M085",
    "M086",
    "M087",
    "M088",
    "M089",
    "S021",
    "S022",
    "S027",
    "S030",
    "A017",
    "A018",
    "A019",
    "A020",
    "A025",
    "A026",
]
HTTP_PROVEN = ["M018", "M022", "M023", "M025", "M026", "M028", "S005", "S006"]

# fault -> the requirement IDs it must fail (and nothing else may fail or warn)
FAULTS: dict[str, set[str]] = {
    "wrong-id": {"M006", "M065"},  # tools/list answered with another id: never matched, so tools/list "unanswered"
    "stdout-junk": {"M014", "M016"},
    "missing-fields": {"M042", "M050", "M062", "M067"},
    "result-and-error": {"M007"},
    "bad-error": {"M008"},
    "notification-id": {"M009"},
    "ping-nonempty": {"M079"},
    "undeclared-prompts": {"M058"},
    "no-fallback": {"M046"},
    "progress-decreasing": {"M085"},
    "ignore-cancel": {"S027"},
    "accept-any-cursor": {"S030"},
    "no-batch": {"M011"},
    "no-content": {"M068"},
    "bad-content": {"M069"},
    "multiline": {"M001", "M013", "M014", "M015", "M016", "M042"},  # some split lines are bare JSON values
    "request-null-id": {"M002", "M003"},
    "request-reused-id": {"M004"},
    "modern-any-version": {"M046"},  # 2026-07-28: an unsupported version must be refused with -32022
}


def bad_ids(report: Report) -> set[str]:
    return {r.req for r in report.sorted() if r.status in (FAIL, "warn")}


def assert_pass(report: Report, ids: list[str]) -> None:
    not_passing = {
        i: (report.status(i), report.requirements[i].evidence if i in report.requirements else "")
        for i in ids
        if report.status(i) != PASS
    }
    assert not not_passing, f"{not_passing}\n{report.render_text()}"


async def _run_many(targets: dict[str, list[str]], limit: int = 8) -> dict[str, Report]:
    sem = asyncio.Semaphore(limit)

    async def one(name: str, cmd: list[str]) -> tuple[str, Report]:
        async with sem:
            return name, await run_checks(cmd, timeout=10.0)

    return dict(await asyncio.gather(*(one(n, c) for n, c in targets.items())))


@pytest.fixture(scope="module")
def broken_reports() -> dict[str, Report]:
    targets = {"none": BROKEN} | {fault: [*BROKEN, "--fault", fault] for fault in FAULTS}
    return asyncio.run(_run_many(targets))


@pytest.mark.req(*STDIO_PROVEN)
async def test_everything_stdio_passes_every_applicable_must() -> None:
    report = await run_checks(EVERYTHING, cwd=str(ROOT))
    assert report.failed_musts() == [], report.render_text()
    assert not bad_ids(report), report.render_text()
    assert_pass(report, STDIO_PROVEN)
    assert_modern_pass(report)
    assert str(report.info.get("mcpkit client")).startswith("connected at 2026-07-28; "), report.info


def assert_modern_pass(report: Report) -> None:
    """The stateless (2026-07-28) session ran, and proved the core IDs there too."""
    assert str(report.info.get("2026-07-28", "")).startswith("offered"), report.info
    for rid in ("M042", "M046", "M066", "M067", "M068", "M049", "M051", "M059", "M061", "M089", "S030"):
        modern = [f for f in report.requirements[rid].findings if f.evidence.startswith("[2026-07-28]")]
        statuses = {f.status for f in modern}
        assert PASS in statuses and FAIL not in statuses and "warn" not in statuses, (rid, modern)


@pytest.fixture
def http_everything(free_port: Callable[[], int]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [*EVERYTHING, "--transport", "http", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop(proc)


@pytest.mark.req(*HTTP_PROVEN)
async def test_everything_http_passes_every_applicable_must(http_everything: str) -> None:
    report = await run_checks(http_everything)
    assert report.failed_musts() == [], report.render_text()
    assert not bad_ids(report), report.render_text()
    assert_pass(report, HTTP_PROVEN + [i for i in STDIO_PROVEN if i not in ("M013", "M014", "M015", "M016")])
    assert_modern_pass(report)


def test_broken_server_without_faults_passes(broken_reports: dict[str, Report]) -> None:
    """The fixture itself is correct, so each fault below is the only thing that differs."""
    report = broken_reports["none"]
    assert not bad_ids(report), report.render_text()
    assert_pass(
        report,
        [
            "M006",
            "M007",
            "M008",
            "M009",
            "M011",
            "M016",
            "M042",
            "M046",
            "M058",
            "M067",
            "M068",
            "M069",
            "M079",
            "M085",
            "S027",
            "S030",
        ],
    )


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_broken_server_fails_the_right_ids(fault: str, broken_reports: dict[str, Report]) -> None:
    report = broken_reports[fault]
    assert bad_ids(report) == FAULTS[fault], report.render_text(verbose=True)
    for rid in FAULTS[fault]:
        assert report.requirements[rid].evidence  # the message that broke it is quoted
    assert report.failed_musts() == sorted(i for i in FAULTS[fault] if i.startswith("M"))


def test_wrong_id_evidence_quotes_the_offending_response(broken_reports: dict[str, Report]) -> None:
    evidence = broken_reports["wrong-id"].requirements["M006"].evidence
    assert "matches no request" in evidence and '"id":' in evidence, evidence


def test_cli_exit_codes_and_json() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    bad = subprocess.run(
        [PY, "-m", "mcpkit.cli.main", "check", "--json", "--", *BROKEN, "--fault", "ping-nonempty"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert bad.returncode == 1, bad.stderr
    data = json.loads(bad.stdout)
    assert data["failedMust"] == ["M079"]
    m079 = next(r for r in data["requirements"] if r["id"] == "M079")
    assert m079["status"] == "fail" and '"status":"ok"' in m079["evidence"]
    good = subprocess.run(
        [PY, "-m", "mcpkit.cli.main", "check", " ".join(BROKEN)], capture_output=True, text=True, env=env, timeout=120
    )
    assert good.returncode == 0, good.stdout + good.stderr
    assert "RESULT: PASS" in good.stdout and "PASS M006" in good.stdout


async def test_server_everything_from_npm(npm_bin_dir: Path, node_bin: Path) -> None:
    """The TypeScript reference server: its real deviations are found (and listed in the issue report)."""
    entry = npm_bin_dir.parent / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    report = await run_checks([str(node_bin), str(entry), "stdio"], timeout=10.0)
    # TS SDK stdio drops JSON-RPC batches even at 2025-03-26; long-running operations ignore cancellation;
    # any cursor is accepted; tools/call results omit isError.
    assert report.status("M011") == FAIL, report.render_text()
    assert report.status("S027") == FAIL, report.render_text()
    assert report.status("S030") == FAIL, report.render_text()
    assert report.status("M068") == "warn", report.render_text()
    assert report.failed_musts() == ["M011"], report.render_text()
    assert_pass(report, ["M006", "M016", "M042", "M045", "M046", "M067", "M069", "M079", "M085", "M089"])


SDK_SERVER = '''
import asyncio
from mcp.server.mcpserver import Context, MCPServer

mcp = MCPServer("official-sdk-example")

@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text

@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Report progress for steps x 100 ms."""
    for i in range(steps):
        await asyncio.sleep(0.1)
        await ctx.report_progress(i + 1, steps)
    return "done"

@mcp.resource("test://hello", mime_type="text/plain")
def hello() -> str:
    """A static text resource."""
    return "hello"

@mcp.prompt()
def greet(name: str) -> str:
    """Greet someone."""
    return f"Please greet {name}."

if __name__ == "__main__":
    mcp.run()
'''


async def test_official_python_sdk_server(tmp_path: Path) -> None:
    pytest.importorskip("mcp.server.mcpserver")
    script = tmp_path / "sdk_server.py"
    script.write_text(SDK_SERVER)
    report = await run_checks([PY, str(script)], timeout=10.0)
    # mcp 2.3.0 rejects JSON-RPC batches at 2025-03-26 and accepts any cursor.
    assert report.status("M011") == FAIL, report.render_text()
    assert report.status("S030") == FAIL, report.render_text()
    assert report.failed_musts() == ["M011"], report.render_text()
    assert_pass(report, ["M006", "M016", "M042", "M045", "M046", "M067", "M068", "M079", "M085", "S027"])


async def test_unreachable_and_non_mcp_targets_fail_fast(free_port: Callable[[], int]) -> None:
    t0 = time.monotonic()
    report = await run_checks(f"http://127.0.0.1:{free_port()}/mcp")  # nothing listens there
    assert report.failed_musts() == ["M018", "M042"], report.render_text()
    assert "ConnectError" in report.requirements["M042"].evidence
    report = await run_checks([PY, "-c", "import sys; sys.stdin.read()"], timeout=2.0)  # it never answers
    assert "M042" in report.failed_musts() and "M013" in report.failed_musts()
    assert "nothing else was checked" in report.render_text()
    report = await run_checks(["/nonexistent/mcp-server"])
    assert report.failed_musts() == ["M013"] and "No such file" in report.requirements["M013"].evidence
    assert time.monotonic() - t0 < 60
