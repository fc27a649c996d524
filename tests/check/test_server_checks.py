"""``mcpkit check`` against real servers: mcpkit's everything server over every transport, a deliberately broken
server (each fault, over stdio, Streamable HTTP or behind OAuth, must fail exactly the IDs the fault table names:
a check that cannot fail is caught here), ``@modelcontextprotocol/server-everything``, and the report's forms.
Every server is a real subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mcpkit.check import FAIL, PASS, SKIP, Report, run_checks
from mcpkit.check.catalog import requirements
from mcpkit.check.report import render
from support.gather import gather_limited
from support.paths import REPO
from support.procs import stop, wait_listening
from support.servers.broken_server import AUTH_FAULTS, HTTP_FAULTS, STDIO_FAULTS
from support.zygote import Zygote

ROOT = REPO
PY = sys.executable
EVERYTHING = [PY, "-m", "mcpkit.cli.main", "run", str(ROOT / "examples" / "everything.py")]
BROKEN = [PY, str(ROOT / "tests" / "support" / "servers" / "broken_server.py")]
RESUMABLE = [PY, str(ROOT / "tests" / "support" / "servers" / "everything_resumable.py")]
# what a server on uvicorn imports only once it serves: a server forked from a zygote (support.zygote) finds it loaded
UVICORN_RUNTIME = [
    "uvicorn.lifespan.on",
    "uvicorn.loops.auto",
    "uvicorn.protocols.http.auto",
    "uvicorn.protocols.websockets.auto",
]
SCHEMA = json.loads((ROOT / "src" / "mcpkit" / "check" / "report-schema.json").read_text())

pytestmark = pytest.mark.timeout(600)
# the module fixtures' gathers end within this (shorter than the timeout above, so they end inside the event loop:
# see support.gather); the broken server's took 393 s at a load of 24
FIXTURE_WITHIN = 540.0

# the MAYs a correct server may leave unused (their skip says so); anything else must pass
UNUSED_MAYS = {"A004", "A007"}


def bad_ids(report: Report) -> set[str]:
    return {r.req for r in report.sorted() if r.status in (FAIL, "warn")}


def assert_pass(report: Report, ids: list[str] | set[str]) -> None:
    not_passing = {
        i: (report.status(i), report.requirements[i].evidence if i in report.requirements else "")
        for i in sorted(ids)
        if report.status(i) != PASS
    }
    assert not not_passing, f"{not_passing}\n{report.render_text()}"


def assert_everything_judged(report: Report) -> None:
    """Every server obligation that applies to the transport is judged and passes (a MAY the server does not use
    is a skip that says so); what no black box can see is listed, fewer than 20, each with its own reason."""
    assert not bad_ids(report), report.render_text()
    unjudged = [n.req.id for n in report.not_judged() if n.category == "not-exercised"]
    assert unjudged == [], report.render_text()
    judged = [r for r in report.sorted() if requirements()[r.req].binds("server")]
    skipped = {r.req: r.evidence for r in judged if r.status == SKIP}
    assert set(skipped) <= UNUSED_MAYS, skipped
    unobservable = report.not_checkable()
    assert 0 < len(unobservable) < 20
    assert len({n.reason for n in unobservable}) >= len(unobservable) - 4  # reasons of their own, not one blanket
    assert all(n.reason and n.req.binds("server") for n in unobservable)


def assert_modern_pass(report: Report) -> None:
    """The stateless (2026-07-28) session ran, and proved the core IDs there too."""
    assert str(report.info.get("2026-07-28", "")).startswith("offered"), report.info
    for rid in ("M042", "M046", "M066", "M067", "M068", "M049", "M051", "M059", "M061", "M089", "S030"):
        modern = [f for f in report.requirements[rid].findings if f.evidence.startswith("[2026-07-28]")]
        statuses = {f.status for f in modern}
        assert PASS in statuses and FAIL not in statuses and "warn" not in statuses, (rid, modern)


# What mcpkit's CLI imports to serve a file (not mcpkit.cli.main itself: ``-m`` runs it afresh), everything.py's
# imports, and the official SDK's server modules: a stdio run starts its server once per session, ~0.7 s (mcpkit run)
# to 1.3 s (the SDK) of CPU as a new interpreter, a fork of the zygote instead (support.zygote).
SERVER_PRELOAD = [
    *(f"mcpkit.cli.{m}" for m in ("check_command", "client_commands", "codegen_command", "inspector_command")),
    *(f"mcpkit.cli.{m}" for m in ("install", "proxy_command", "skills_command")),
    "mcpkit.run",
    "mcpkit.transports.stdio",
    str(ROOT / "examples" / "everything.py"),
]
SDK_PRELOAD = [
    "mcp.server.mcpserver",
    "mcp.server.lowlevel",
    "mcp.server.stdio",
    "anyio._backends._asyncio",
    "anyio.streams.stapled",
]


@pytest.fixture(scope="module")
def zygote() -> Iterator[Zygote]:
    """This module's Python servers over stdio, each forked from one process that imported them once."""
    import importlib.util

    sdk = SDK_PRELOAD if importlib.util.find_spec("mcp.server.mcpserver") else []
    with Zygote([*SERVER_PRELOAD, *sdk]) as started:
        yield started


# ------------------------------------------------------------------------------------------ mcpkit's own server


@pytest.mark.req("M013", "M014", "M015", "M016", "S009", "S014", "S016", "S018", "A001", "A002", "A003", "A024")
async def test_everything_over_stdio_passes_every_checkable_requirement(zygote: Zygote) -> None:
    report = await run_checks(zygote.python(EVERYTHING), cwd=str(ROOT))
    assert_everything_judged(report)
    assert_modern_pass(report)
    assert str(report.info.get("mcpkit client")).startswith("connected at 2026-07-28; "), report.info
    assert report.exit_code("should") == 0


@pytest.mark.req("M067")
async def test_a_tool_without_a_description_is_a_warning_not_a_failure_as_the_schema_makes_it_optional(
    tmp_path: Path, zygote: Zygote
) -> None:
    """Every revision's schema has ``description?`` on Tool: a server whose tool carries none is judged on what is
    required (a name and an object inputSchema), in both eras; M067's words ask for a description, so a warning
    (which fails no ``--fail-on`` level) says which tool lacks one."""
    server = tmp_path / "undescribed.py"
    server.write_text(
        "from mcpkit import MCPKit\n"
        "app = MCPKit('undescribed')\n"
        "@app.tool()\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
    )
    report = await run_checks(
        zygote.command("-m", "mcpkit.cli.main", "run", str(server)), cwd=str(tmp_path), timeout=10.0
    )
    findings = report.requirements["M067"].findings
    assert {f.status for f in findings} == {"warn"}, findings
    assert {f.evidence.startswith("[2026-07-28]") for f in findings} == {True, False}, findings
    assert all("(add)" in f.evidence and "optional" in f.evidence for f in findings), findings
    assert "M067" not in report.failed_musts()
    assert report.exit_code("may") == 0, report.render_text()


ANNOTATED_SERVER = '''
from pathlib import Path

from mcpkit import MCPKit

app = MCPKit("annotated")
MARKS = Path(__file__).with_name("called")


def mark(name: str) -> str:
    with MARKS.open("a") as f:
        f.write(name + "\\n")
    return name


@app.tool(annotations={"destructiveHint": True})
def archive(key: str) -> str:
    """Archive a record."""
    return mark("archive")


@app.tool(annotations={"readOnlyHint": False})
def publish(key: str) -> str:
    """Publish a record."""
    return mark("publish")


@app.tool(annotations={"readOnlyHint": True})
def lookup(key: str) -> str:
    """Look a record up."""
    return mark("lookup")
'''


async def test_the_check_never_calls_a_tool_whose_annotations_say_it_changes_things(
    tmp_path: Path, zygote: Zygote
) -> None:
    """mcpkit check calls the tools that look free of side effects, black-box; a tool declared destructive
    (``destructiveHint: true``) or not read-only (``readOnlyHint: false``) is never called, whatever its name, while
    one declared read-only is."""
    server = tmp_path / "annotated.py"
    server.write_text(ANNOTATED_SERVER)
    report = await run_checks(
        zygote.command("-m", "mcpkit.cli.main", "run", str(server)), cwd=str(tmp_path), timeout=10.0
    )
    assert "M068" not in report.failed_musts(), report.render_text()
    assert set((tmp_path / "called").read_text().split()) == {"lookup"}


@pytest.mark.req("S022")
async def test_resource_contents_without_a_mime_type_are_a_warning_as_the_schema_makes_it_optional(
    tmp_path: Path, zygote: Zygote
) -> None:
    """``mimeType`` of ``TextResourceContents``/``BlobResourceContents`` is optional in every revision's schema
    ("if known") and no spec page asks for it: a server (here on the official SDK's low-level API) that reads a
    resource of unknown type without one is warned (S022's words ask for it), not failed, so ``--fail-on should``
    does not reject a server the specification accepts. It used to be a SHOULD failure."""
    pytest.importorskip("mcp.server.lowlevel")
    server = tmp_path / "unknown_type.py"
    server.write_text(
        "import anyio\n"
        "from mcp import types\n"
        "from mcp.server.lowlevel import Server\n"
        "from mcp.server.stdio import stdio_server\n"
        "async def list_resources(ctx, params):\n"
        "    return types.ListResourcesResult(resources=[types.Resource(uri='test://blob', name='blob')])\n"
        "async def read_resource(ctx, params):\n"
        "    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=str(params.uri), text='?')])\n"
        "server = Server('unknown-type', on_list_resources=list_resources, on_read_resource=read_resource)\n"
        "async def main():\n"
        "    async with stdio_server() as (read, write):\n"
        "        await server.run(read, write, server.create_initialization_options())\n"
        "anyio.run(main)\n"
    )
    report = await run_checks(zygote.command(server), timeout=10.0, modern=False)
    findings = report.requirements["S022"].findings
    assert findings and {f.status for f in findings} == {"warn"}, report.render_text(verbose=True)
    assert all("test://blob" in f.evidence and "optional" in f.evidence for f in findings), findings
    assert "S022" not in report.failed("SHOULD"), report.render_text()
    assert report.status("M052") == PASS, report.render_text()


@pytest.fixture
def resumable_everything() -> Iterator[str]:
    proc = subprocess.Popen(RESUMABLE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        yield _announced_url(proc)
    finally:
        stop(proc)


def _announced_url(proc: subprocess.Popen[str]) -> str:
    from support.procs import stderr_until

    lines = stderr_until(proc, "mcpkit: serving", timeout=30)
    line = next((x for x in lines if "mcpkit: serving" in x), None)
    assert line is not None, lines
    return line.rsplit(" ", 1)[1].strip()


@pytest.mark.req("M018", "M022", "M023", "M025", "M026", "M027", "M028", "S002", "S003", "S004", "S005", "S006")
@pytest.mark.req("A005", "A008", "A011", "A012", "A013", "A014", "A015")
async def test_everything_over_streamable_http_passes_every_checkable_requirement(resumable_everything: str) -> None:
    report = await run_checks(resumable_everything)
    assert_everything_judged(report)
    assert_modern_pass(report)
    assert_pass(report, {"A011", "A012", "MX01", "MX02", "MX03", "MX04", "MX05"})


@pytest.fixture
def everything_url(free_port: Callable[[], int]) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [*EVERYTHING, "--transport", "http", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        wait_listening(port, proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


async def test_everything_over_legacy_sse_and_websocket_passes(everything_url: str) -> None:
    """The wires of the two other transports (mcpkit's own client connections, recorded raw): every protocol
    rule is judged there too; the Streamable HTTP rules are listed as another transport's."""
    sse, ws = await asyncio.gather(
        run_checks(everything_url + "/sse"), run_checks(everything_url.replace("http", "ws") + "/ws")
    )
    for report, transport in ((sse, "sse"), (ws, "ws")):
        assert report.transport == transport
        assert not bad_ids(report), report.render_text()
        assert_pass(report, ["M001", "M006", "M042", "M046", "M066", "M068", "M079", "M085", "S021", "S027", "A024"])
        other = {n.req.id for n in report.not_judged() if n.category == "other-transport"}
        assert {"M018", "M025", "MX01", "M013"} <= other


# ------------------------------------------------------------------------------------------ the broken server


@asynccontextmanager
async def broken_http(*args: str, server: list[str] = BROKEN) -> AsyncIterator[str]:
    """A broken server over Streamable HTTP (``server``: the command that starts it); yields its URL."""
    proc = await asyncio.create_subprocess_exec(
        *server, "--http", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        yield f"http://127.0.0.1:{json.loads(line)['port']}/mcp"
    finally:
        proc.terminate()
        await proc.wait()


async def _check_http(*args: str, token: str | None = None, server: list[str] = BROKEN) -> Report:
    async with broken_http(*args, server=server) as url:
        return await run_checks(url, timeout=10.0, token=token)


@pytest.fixture(scope="module")
def broken_reports() -> dict[str, Report]:
    # ~600 starts of the broken server (a stdio run starts it once per session): each is forked from one process
    # that imported its modules once (support.zygote), not a new interpreter importing asyncio and uvicorn again.
    # 16 runs at a time: each mostly waits (the checker's windows, its servers), ~42 s of CPU in all; 10 at a time
    # took 156 s at a load average of 32, 16 took 97 s at 44 (24: 101 s at 39, the CPU was the bound by then)
    with Zygote([BROKEN[1], *UVICORN_RUNTIME]) as zygote:
        server = zygote.command(BROKEN[1])

        def stdio(*faults: str) -> Callable[[], Any]:
            return lambda: run_checks([*server, *(x for f in faults for x in ("--fault", f))], timeout=10.0)

        def http(*faults: str, auth: bool = False, token: str | None = None) -> Callable[[], Any]:
            args = [*(x for f in faults for x in ("--fault", f)), *(["--auth"] if auth else [])]
            return lambda: _check_http(*args, token=token, server=server)

        jobs: dict[str, Any] = {"stdio:none": stdio(), "http:none": http(), "auth:none": http(auth=True)}
        jobs["auth:token"] = http(auth=True, token="good-token")
        jobs.update({f"stdio:{f}": stdio(f) for f in STDIO_FAULTS})
        jobs.update({f"http:{f}": http(f) for f in HTTP_FAULTS})
        jobs.update({f"auth:{f}": http(f, auth=True) for f in AUTH_FAULTS})
        return asyncio.run(gather_limited(jobs, limit=16, within=FIXTURE_WITHIN))


def test_broken_server_without_faults_passes(broken_reports: dict[str, Report]) -> None:
    """The fixture itself is correct over each transport, so each fault below is the only thing that differs."""
    for name in ("stdio:none", "http:none", "auth:token"):
        report = broken_reports[name]
        assert not bad_ids(report), (name, report.render_text())
        assert report.exit_code("should") == 0
    every_fault = {rid for table in (STDIO_FAULTS, HTTP_FAULTS, AUTH_FAULTS) for ids in table.values() for rid in ids}
    judged = {
        rid
        for name in ("stdio:none", "http:none", "auth:token")
        for rid, v in broken_reports[name].requirements.items()
        if v.status == PASS
    }
    assert every_fault <= judged, every_fault - judged  # each rule a fault breaks passes when it is not broken


@pytest.mark.req("S027")
def test_a_cancelled_request_whose_stream_closes_ends_the_watch_early(broken_reports: dict[str, Report]) -> None:
    """Over HTTP the server closes a cancelled request's stream: nothing more of that request can come (its progress
    goes on that stream only), so the checker stops watching then, not after the whole CANCEL_WATCH (2.5 s); over
    stdio the whole watch runs."""
    http = broken_reports["http:none"].requirements["S027"].evidence
    assert broken_reports["http:none"].status("S027") == PASS and "until its response stream was closed" in http
    stdio = broken_reports["stdio:none"].requirements["S027"].evidence
    assert broken_reports["stdio:none"].status("S027") == PASS and "in the next 2.5s" in stdio, stdio


@pytest.mark.parametrize("fault", sorted(f"stdio:{f}" for f in STDIO_FAULTS))
def test_broken_stdio_server_fails_the_right_ids(fault: str, broken_reports: dict[str, Report]) -> None:
    _assert_fault(broken_reports[fault], STDIO_FAULTS[fault.split(":", 1)[1]])


@pytest.mark.parametrize("fault", sorted(f"http:{f}" for f in HTTP_FAULTS))
def test_broken_http_server_fails_the_right_ids(fault: str, broken_reports: dict[str, Report]) -> None:
    _assert_fault(broken_reports[fault], HTTP_FAULTS[fault.split(":", 1)[1]])


@pytest.mark.parametrize("fault", sorted(f"auth:{f}" for f in AUTH_FAULTS))
def test_broken_protected_server_fails_the_right_ids(fault: str, broken_reports: dict[str, Report]) -> None:
    report = broken_reports[fault]
    _assert_fault(report, AUTH_FAULTS[fault.split(":", 1)[1]])
    assert report.protected and "aborted" in report.info


def _assert_fault(report: Report, expected: set[str]) -> None:
    assert bad_ids(report) == expected, report.render_text(verbose=True)
    for rid in expected:
        assert report.requirements[rid].evidence  # the message that broke it is quoted
    assert report.failed_musts() == sorted((i for i in expected if i.startswith("M")), key=report_order)


def report_order(rid: str) -> tuple[int, int, int, str]:
    from mcpkit.check.catalog import order

    return order(rid)


@pytest.mark.req("M030", "M031", "M037", "M038", "S008", "S010", "S011", "A016")
async def test_a_delete_answered_with_an_error_says_why_the_ended_session_rules_were_not_judged() -> None:
    """A DELETE answered neither 2xx (ended) nor 405 (refused) leaves nothing to judge the session 404 rules by:
    MX02 and A014 are skipped with that reason, as a 405 skips them, and not listed as "nothing in this run
    exercised it" (which tells the user the checker forgot them)."""
    report = await _check_http("--fault", "delete-error")
    assert report.status("A015") == FAIL, report.render_text()
    for rid in ("MX02", "A014"):
        assert report.status(rid) == SKIP and "DELETE -> HTTP 500" in report.requirements[rid].evidence, rid
    assert [n.req.id for n in report.not_judged() if n.category == "not-exercised"] == [], report.render_text()


def test_protected_server_without_a_token_is_judged_on_its_authorization(broken_reports: dict[str, Report]) -> None:
    report = broken_reports["auth:none"]
    assert_pass(report, ["M030", "M031", "M037", "M038", "S008", "S010", "S011", "A016"])
    assert report.exit_code() == 2 and "INCOMPLETE" in report.render_text()  # the rest needs --token
    with_token = broken_reports["auth:token"]
    assert "aborted" not in with_token.info and with_token.status("M042") == PASS


def test_what_a_flooding_server_sends_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wire keeps at most MAX_RECORDED payloads (the rest counted); responses still reach their requests."""
    from mcpkit.check import wire as wires

    monkeypatch.setattr(wires, "MAX_RECORDED", 10)
    wire = wires.Wire()
    for n in range(30):
        wire.record(wires.decode(json.dumps({"jsonrpc": "2.0", "method": "notifications/x", "params": {"n": n}}), "t"))
    assert (len(wire.incoming), len(wire.notifications), wire.dropped) == (10, 10, 20)

    async def answered() -> Any:
        fut = wire.expect(7)
        wire.record(wires.decode('{"jsonrpc": "2.0", "id": 7, "result": {}}', "t"))
        return await fut

    assert asyncio.run(answered()).data == {"jsonrpc": "2.0", "id": 7, "result": {}}


def test_wrong_id_evidence_quotes_the_offending_response(broken_reports: dict[str, Report]) -> None:
    evidence = broken_reports["stdio:wrong-id"].requirements["M006"].evidence
    assert "matches no request" in evidence and '"id":' in evidence, evidence


@pytest.mark.req("S021")
def test_a_batch_refused_whole_is_the_answer_to_an_initialize_inside_it(broken_reports: dict[str, Report]) -> None:
    """The broken server, like any JSON-RPC 2.0 peer, answers a batch it refuses whole (it is not initialized yet)
    with one error whose id is null. The checker waited 5 s for an answer carrying the member's id, in every run
    against such a server, and then wrote "no answer"; the refusal is the answer: quoted, and the run goes on."""
    findings = [f for f in broken_reports["stdio:none"].requirements["S021"].findings if "inside a batch" in f.evidence]
    assert findings and all(f.status == PASS for f in findings), findings
    assert all("-32600" in f.evidence and "no answer" not in f.evidence for f in findings), findings


async def test_a_message_nested_deeper_than_the_checker_parses_is_said_and_the_session_goes_on() -> None:
    """A server that writes a notification nested 100,000 deep (valid JSON, past Python's parser) gets a warning on
    M016 saying it was not judged, and nothing else: the RecursionError used to end the checker's reader, so every
    later request "got no response" (M048, M058, M065, M087 failed) and S021 said the server stopped answering."""
    report = await run_checks([*BROKEN, "--fault", "deeply-nested"], timeout=10.0)
    assert bad_ids(report) == {"M016"}, report.render_text(verbose=True)
    assert report.status("M016") == "warn"
    assert "JSON nested deeper than the checker parses, not judged" in report.requirements["M016"].evidence
    assert report.status("M065") == PASS


def test_oversized_messages_are_refused_at_the_clients_bound(broken_reports: dict[str, Report]) -> None:
    """The checker reads like mcpkit's client: a 5 MiB line or body is not buffered, it is a recorded fault."""
    assert "over 4194304 bytes" in broken_reports["stdio:oversized"].info["messages not read"]
    assert "over 4194304 bytes" in broken_reports["http:oversized-body"].requirements["M065"].evidence


async def test_metadata_fetches_follow_the_oauth_clients_ssrf_rule_and_the_token_stays_home() -> None:
    """The authorization server a hostile server names is never fetched when the OAuth client would refuse it
    (link-local here); a legitimate one on another origin is fetched without the token given to the checker."""
    async with broken_http("--auth", "--as-url", "https://169.254.169.254") as url:
        report = await run_checks(url, timeout=5.0)
    evidence = report.requirements["S011"].evidence
    assert report.status("S011") == FAIL and "not fetched" in evidence and "link-local" in evidence, evidence
    async with broken_http("--auth", "--as-url", "localhost") as url:  # the same server under another origin
        report = await run_checks(url, timeout=5.0, token="good-token")
    # it answers 400 to a metadata request that carries a token, which would fail S011
    assert_pass(report, ["S011", "M031", "M042"])


@pytest.mark.req("M030", "M031", "M037", "M038", "S008", "S010", "S011", "A016")
async def test_a_protected_server_is_judged_whole_with_the_oauth_client() -> None:
    """mcpkit's everything server behind OAuth (its development authorization server): the authorization rules
    pass, and with mcpkit's OAuth client given as ``auth`` the checker gets a token and judges everything else."""
    from mcpkit.auth import HeadlessBrowser, OAuthClient

    proc = await asyncio.create_subprocess_exec(
        PY, str(ROOT / "tests" / "support" / "servers" / "everything_protected.py"), stdout=asyncio.subprocess.PIPE
    )
    browser = HeadlessBrowser()
    try:
        assert proc.stdout is not None
        url = f"http://127.0.0.1:{json.loads(await asyncio.wait_for(proc.stdout.readline(), 60))['port']}/mcp"
        oauth = OAuthClient(
            url,
            client_metadata={"client_name": "mcpkit check", "redirect_uris": ["http://127.0.0.1:1/callback"]},
            redirect_handler=browser.redirect_handler,
            callback_handler=browser.callback_handler,
        )
        try:
            report = await run_checks(url, auth=oauth, timeout=10.0)
        finally:
            await oauth.aclose()
    finally:
        proc.terminate()
        await proc.wait()
    assert "aborted" not in report.info and report.protected, report.info
    assert not bad_ids(report), report.render_text()
    assert_pass(report, ["M030", "M031", "M037", "M038", "S008", "S010", "S011", "A016", "M042", "M068", "MX01"])


# ------------------------------------------------------------------------------------------ the report's forms


def test_cli_exit_codes_formats_and_schema(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    should = [*BROKEN, "--fault", "accept-any-cursor"]
    runs = {  # (the five commands at once: each mostly waits on its own servers, ~12 s apiece on a busy machine)
        "bad": ["--format", "json", "--output", str(tmp_path / "r.json"), "--", *BROKEN, "--fault", "ping-nonempty"],
        "should": ["--format", "junit", "--", *should],
        "junit": ["--format", "junit", "--fail-on", "should", "--", *should],
        "good": ["--format", "markdown", " ".join(BROKEN)],
        "text": [" ".join(BROKEN)],
    }
    with ThreadPoolExecutor(len(runs)) as pool:
        started = {
            name: pool.submit(
                subprocess.run,
                [PY, "-m", "mcpkit.cli.main", "check", *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=180,
            )
            for name, args in runs.items()
        }
        done = {name: future.result() for name, future in started.items()}
    bad = done["bad"]
    assert bad.returncode == 1, bad.stderr
    data = json.loads(bad.stdout)
    assert json.loads((tmp_path / "r.json").read_text()) == data
    _validate(data)
    assert data["failedMust"] == ["M079"] and data["failed"]["MUST"] == ["M079"]
    m079 = next(r for r in data["requirements"] if r["id"] == "M079")
    assert m079["status"] == "fail" and '"status":"ok"' in m079["evidence"]
    categories = {n["category"] for n in data["notChecked"]}
    assert {"other-party", "other-transport", "not-observable"} <= categories
    # a SHOULD failure: exit 0 by default, 1 with --fail-on should
    assert done["should"].returncode == 0, done["should"].stderr
    junit = done["junit"]
    assert junit.returncode == 1
    suite = ET.fromstring(junit.stdout).find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failure = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name", "").split()[0] for c in failure] == ["S030"]
    good = done["good"]
    assert good.returncode == 0, good.stdout + good.stderr
    assert good.stdout.startswith("## mcpkit check") and "**Result: PASS**" in good.stdout
    text = done["text"]
    assert "RESULT: PASS" in text.stdout and "PASS M006" in text.stdout


def test_cli_checks_a_server_file_as_mcpkit_run_serves_it(tmp_path: Path) -> None:
    """``mcpkit check server.py`` takes the file as every other ``mcpkit`` command does (``mcpkit run`` semantics):
    a server file without an ``app.run()`` block is served and judged. It used to be run as a plain script,
    which defined the server and exited, and the server was reported failing M013 and M042."""
    server = tmp_path / "server.py"
    server.write_text(
        "from mcpkit import MCPKit\n\napp = MCPKit('no-run-block')\n\n\n"
        "@app.tool()\ndef add(a: int, b: int) -> int:\n    'Add two numbers.'\n    return a + b\n"
    )
    proc = subprocess.run(
        [PY, "-m", "mcpkit.cli.main", "check", "--no-stateless", str(server)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "RESULT: PASS" in proc.stdout and '"name":"no-run-block"' in proc.stdout, proc.stdout


def test_cli_target_that_names_no_server_is_a_usage_error(tmp_path: Path) -> None:
    """``mcpkit check`` with a TARGET that names no server (no such file or command, an mcp.json that does not
    parse or has no such entry) says so in one line and exits 2; it reported the server failing M013 ("Server
    MUST read from stdin and write to stdout") and exited 1, as for a server that broke the rule."""
    bad = tmp_path / "mcp.json"
    bad.write_text("{not json")
    for target, message in [
        (str(tmp_path / "missing.py"), "server file not found"),
        ("no-such-mcp-binary --stdio", "server command not found on PATH"),
        (f"{bad}#server", "not valid JSON"),
    ]:
        proc = subprocess.run(
            [PY, "-m", "mcpkit.cli.main", "check", target], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert message in proc.stderr and "M013" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _validate(data: Any) -> None:
    import jsonschema

    jsonschema.Draft202012Validator(SCHEMA).validate(data)


HOSTILE = "bad\x1b]0;owned\x07\x1b[2J\u202e<b>&</b>]]>|`*_\x00\ud800\ufffe"


def test_every_form_escapes_what_the_server_sent() -> None:
    """Evidence quotes the server: terminal escapes, bidi overrides, markup and XML-breaking characters are made
    inert for each reader (the CLI's sanitizer for text, XML escaping for JUnit, Markdown/HTML escaping)."""
    report = Report("python s.py", "stdio")
    report.fail("M042", f"initialize answered {HOSTILE}", "initialize")
    report.info["server"] = HOSTILE
    report.finish()
    for fmt in ("text", "json", "junit", "markdown"):
        out = render(report, fmt)
        out.encode("utf-8")  # no lone surrogate survives
        assert "\x1b" not in out and "\u202e" not in out and "\x07" not in out and "\x00" not in out, fmt
    ET.fromstring(render(report, "junit"))  # well-formed XML despite <, &, ]]>, U+FFFE
    assert "<b>" not in render(report, "markdown") and "\\|" in render(report, "markdown")
    data = json.loads(render(report, "json"))
    _validate(data)
    assert "owned" in data["requirements"][0]["evidence"]  # the same value, only escaped


# ------------------------------------------------------------------------------------------ other servers


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
    # each failure says what was sent, so that it can be reproduced by hand: the cursor, the call cancelled
    assert "cursor 'mcpkit-check-not-a-cursor!'" in report.requirements["S030"].evidence, report.render_text()
    s027 = report.requirements["S027"].evidence
    assert "tools/call " in s027 and "progressToken 'chk-progress-cancel'" in s027, s027


async def test_server_everything_over_streamable_http_a_replayed_request_is_not_an_id_reused(
    npm_bin_dir: Path, node_bin: Path, free_port: Callable[[], int]
) -> None:
    """server-everything over Streamable HTTP answers a ``Last-Event-ID`` GET with the events of other streams
    (A012 and MX06 fail) and with ``{}`` for its priming events (M001). The requests it so delivers again are the
    same messages, not new requests reusing an id: M004 holds (it used to fail with "request id 2 used twice")."""
    entry = npm_bin_dir.parent / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    port = free_port()
    proc = subprocess.Popen(
        [str(node_bin), str(entry), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await asyncio.to_thread(wait_listening, port, proc, 60)
        report = await run_checks(f"http://127.0.0.1:{port}/mcp", timeout=10.0, modern=False)
    finally:
        stop(proc)
    assert report.status("A012") == FAIL and "another stream" in report.requirements["A012"].evidence
    assert report.status("MX06") == FAIL and "MX06" in report.failed_musts()  # (a MUST NOT of resumption)
    assert report.status("M001") == FAIL and "{}" in report.requirements["M001"].evidence
    # a {} is no answer: M001 says so once, it is not also "an answer with neither result and error" (M007) nor
    # "a response id None matches no request" (M006)
    assert "not a JSON-RPC message" in report.requirements["M001"].evidence
    assert "a GET with Last-Event-ID replayed" in report.requirements["M001"].evidence  # where to find it again
    assert report.status("M007") == PASS and report.status("M006") == PASS, report.render_text(verbose=True)
    assert report.status("M004") == PASS, report.render_text(verbose=True)


async def test_a_2026_07_28_only_server_is_judged_statelessly_not_failed_for_refusing_initialize(
    node_bin: Path, free_port: Callable[[], int]
) -> None:
    """The official TypeScript SDK v2 server serving only 2026-07-28 (``--legacy reject``) answers ``initialize``
    with -32022 naming the versions it supports, as the 2026-07-28 versioning page asks of a modern-only server.
    The checker judges it in the stateless era and does not fail M042 (or abort) over the handshake it refuses.
    The one MUST it fails is a true fault: it serves a request with a foreign Origin (MX01: 403 is a MUST in
    2026-07-28 too; its handshake-era endpoint does the same)."""
    script = ROOT / "tests" / "support" / "interop" / "ts_server_v2.mjs"
    port = free_port()
    proc = subprocess.Popen(
        [str(node_bin), str(script), "--http", "--port", str(port), "--legacy", "reject"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await asyncio.to_thread(wait_listening, port, proc, 60)
        report = await run_checks(f"http://127.0.0.1:{port}/mcp", timeout=10.0)
    finally:
        stop(proc)
    assert report.failed_musts() == ["MX01"], report.render_text(verbose=True)
    assert "aborted" not in report.info and "2026-07-28 only" in str(report.info), report.info
    assert report.status("M042") == PASS and "server/discover" in report.requirements["M042"].evidence
    assert_pass(report, ["M023", "MX03", "MX04", "MX05"])


@pytest.mark.req("M004", "M027")
async def test_a_stateless_server_reusing_request_ids_across_posts_fails_m004_and_only_m004(
    node_bin: Path, free_port: Callable[[], int]
) -> None:
    """The official TypeScript SDK 1.32 server without sessions (``--stateless``) numbers its own requests from 0
    again on each POST, so two tool calls each send an elicitation with id 0. The MCP session is the client's from
    its initialize on, with or without an Mcp-Session-Id (2025-11-25 transports, Session Management; its event ids
    are likewise unique "across all streams with that specific client, if session management is not in use"), so
    the reused id fails M004, saying the server assigned no session id. It is not also a message broadcast on two
    streams (M027): the two streams were never open at the same time, so those are two messages. Its tool calls
    that ask the client never complete (the answer goes in another POST, which it cannot tie to the call): each is
    given up after the run's timeout, the S018 probe's after half of it, and the report says so."""
    script = ROOT / "tests" / "support" / "interop" / "ts_server.mjs"
    port = free_port()
    proc = subprocess.Popen(
        [str(node_bin), str(script), "--http", "--port", str(port), "--stateless"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        await asyncio.to_thread(wait_listening, port, proc, 60)
        report = await run_checks(f"http://127.0.0.1:{port}/mcp", timeout=5.0)
    finally:
        stop(proc)
    evidence = report.requirements["M004"].evidence
    assert report.status("M004") == FAIL and "request id 0 used twice" in evidence, evidence
    assert "no Mcp-Session-Id" in evidence, evidence
    assert report.status("M027") == PASS, report.requirements["M027"].evidence
    assert "no answer within 5s (the run's timeout)" in report.info["asking tools unanswered (handshake)"], report.info
    assert "each call waited at most 2.5s" in report.info["S018 probe"], report.info


def modern_only_server() -> Any:
    from mcpkit import MCPKit

    app = MCPKit("modern-only", versions=["2026-07-28"])

    @app.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return app


@pytest.mark.req("MX01", "MX03", "M023")
async def test_a_2026_07_28_only_server_is_judged_on_the_http_rules_of_that_revision() -> None:
    """A server that speaks only 2026-07-28 has no handshake session to run the HTTP-level checks in; the rules
    its revision keeps are judged on stateless requests instead: a foreign Origin gets 403 (MX01), an unsupported
    MCP-Protocol-Version 400 (MX03), a request POST JSON or SSE (M023), its SSE stream carries its response and
    nothing unrelated (S002, S003, S004), each message on one stream (M027), a wrong Accept or Content-Type a 4xx
    (S021). What that revision dropped (sessions, the GET stream, resumption) is not asked of it."""
    from support.mcp_http import running

    async with running(modern_only_server()) as (base, _):
        report = await run_checks(base + "/mcp", timeout=10.0)
    assert report.failed_musts() == [], report.render_text(verbose=True)
    assert_pass(report, ["MX01", "MX03", "M023", "M027", "S021"])
    for rid in ("MX01", "MX03", "M023"):
        assert "[2026-07-28]" in report.requirements[rid].evidence, (rid, report.requirements[rid].evidence)
    for rid in ("MX02", "M025", "A012", "A013"):  # (sessions, GET stream, resumption: not in 2026-07-28)
        assert report.status(rid) == SKIP, (rid, report.requirements[rid].evidence)
    async with running(modern_only_server(), allowed_origins="*") as (base, _):  # it serves any Origin
        report = await run_checks(base + "/mcp", timeout=10.0)
    assert report.status("MX01") == FAIL and "403" in report.requirements["MX01"].evidence


PEERS = ROOT / "tests" / "support" / "servers" / "peers"
# what the peers import only once they serve (anyio's stdio streams, uvicorn; FastMCP's log table)
PEER_RUNTIME = [
    "anyio._backends._asyncio",
    "anyio.streams.stapled",
    "anyio.streams.tls",
    "rich.table",
    *UVICORN_RUNTIME,
]
# What the other Python SDKs' servers fail, each a true fault (see the issue's note):
# M011: over stdio they negotiate 2025-03-26 but answer no JSON-RPC batch (receiving batches is a MUST there);
# S021 (warn): over stdio a request without a method is dropped, not answered -32600 as JSON-RPC 2.0 asks;
# S030: any cursor is accepted (an unknown one should be -32602);
# SX12: over HTTP a cancelled request is answered (-32800 "Request cancelled"), where the receiver SHOULD NOT answer;
# MX01: FastMCP on 127.0.0.1 (host_origin_protection "auto") checks Host but serves a foreign Origin (403 is a MUST).
PEER_FAULTS: dict[tuple[str, str], set[str]] = {
    ("sdk_highlevel", "stdio"): {"M011", "S021", "S030"},
    ("sdk_highlevel", "http"): {"S030", "SX12"},
    ("sdk_lowlevel", "stdio"): {"M011", "S021", "S030"},
    ("sdk_lowlevel", "http"): {"S030", "SX12"},
    ("fastmcp_server", "stdio"): {"M011", "S021", "S030"},
    ("fastmcp_server", "http"): {"MX01", "S030", "SX12"},
}


async def test_the_official_sdks_legacy_sse_server_refusing_a_batch_fails_m011_not_the_checker(
    free_port: Callable[[], int],
) -> None:
    """The official Python SDK's server on the legacy HTTP+SSE transport answers the POST of a JSON-RPC batch
    with 400 "Could not parse message". At 2025-03-26 receiving batches is a MUST: M011 fails with that answer,
    and the other checks go on; the refused POST escaped the checker, which ended in a WireClosed traceback (and
    the same 400 to an initialize inside a batch was judged a hang-up, failing S021)."""
    pytest.importorskip("mcp.server.mcpserver")
    port = free_port()
    proc = subprocess.Popen(
        [PY, str(PEERS / "sdk_highlevel.py"), "--sse", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        await asyncio.to_thread(wait_listening, port, proc, 60)
        report = await run_checks(f"http://127.0.0.1:{port}/sse", timeout=10.0)
    finally:
        stop(proc)
    assert report.status("M011") == FAIL and "400" in report.requirements["M011"].evidence, report.render_text()
    assert report.status("M042") == PASS and report.status("M079") == PASS, report.render_text()
    # initialize inside a batch refused with 400 is the protocol error handled, not a hang-up (S021)
    assert report.status("S021") == PASS, report.render_text(verbose=True)


@pytest.mark.req("M011")
async def test_a_run_pinned_to_2025_03_26_still_sends_its_batch(zygote: Zygote) -> None:
    """2025-03-26 is the one revision where receiving JSON-RPC batches is a MUST: a run that asks for it
    (``--protocol-version 2025-03-26``) judges M011 as the default run does. It used to leave M011 and A003 "not
    exercised": the batch went only in the extra 2025-03-26 session, which the run skipped as already covered by its
    own. The official SDK's server answers no batch (a true fault, as in the default run); mcpkit's answers it."""
    pytest.importorskip("mcp.server.mcpserver")
    official, ours = await asyncio.gather(
        run_checks(zygote.command(PEERS / "sdk_highlevel.py"), protocol_version="2025-03-26", modern=False),
        run_checks(zygote.python(EVERYTHING), protocol_version="2025-03-26", modern=False, cwd=str(ROOT)),
    )
    assert official.status("M011") == FAIL, official.render_text()
    assert "batch of 2 pings at 2025-03-26" in official.requirements["M011"].evidence
    assert_pass(ours, ["M011", "M045"])
    assert ours.status("A003") in (PASS, SKIP) and "A003" in ours.requirements, ours.render_text()
    assert not [n.req.id for n in ours.not_judged() if n.category == "not-exercised"], ours.render_text()


async def _check_peer(name: str, transport: str, port: int, zygote: Zygote) -> Report:
    server = zygote.command(PEERS / f"{name}.py")
    if transport == "stdio":
        return await run_checks(server, timeout=10.0)
    proc = subprocess.Popen([*server, "--http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        await asyncio.to_thread(wait_listening, port, proc, 60)
        return await run_checks(f"http://127.0.0.1:{port}/mcp", timeout=10.0)
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def peer_reports() -> dict[tuple[str, str], Report]:
    pytest.importorskip("mcp.server.mcpserver")
    pytest.importorskip("fastmcp")
    from conftest import _free_port

    # a stdio run starts its server once per session: each start of these (mcp, pydantic, FastMCP: 1.2 to 1.8 s of
    # CPU as a new interpreter) is forked from one process that imported them once (support.zygote)
    with Zygote([*(str(PEERS / f"{n}.py") for n in sorted({n for n, _ in PEER_FAULTS})), *PEER_RUNTIME]) as zygote:
        jobs = {f"{n}:{t}": (lambda n=n, t=t: _check_peer(n, t, _free_port(), zygote)) for n, t in PEER_FAULTS}
        got = asyncio.run(gather_limited(jobs, limit=3, within=FIXTURE_WITHIN))
    return {tuple(k.split(":")): v for k, v in got.items()}  # type: ignore[misc]


@pytest.mark.parametrize("peer,transport", sorted(PEER_FAULTS))
def test_other_python_sdks_servers_show_their_true_faults_only(
    peer: str, transport: str, peer_reports: dict[tuple[str, str], Report]
) -> None:
    """The official SDK's low-level and high-level servers and FastMCP, written as their docs show: the checker
    names their real deviations, and nothing it cannot back (each judged rule, none left unexercised)."""
    report = peer_reports[(peer, transport)]
    assert bad_ids(report) == PEER_FAULTS[(peer, transport)], report.render_text(verbose=True)
    assert [n.req.id for n in report.not_judged() if n.category == "not-exercised"] == []
    assert len(report.not_checkable()) < 20
    assert_pass(report, ["M006", "M042", "M045", "M046", "M066", "M067", "M068", "M079", "M084", "M085", "S027"])


async def test_nothing_passes_for_a_server_that_never_completed_initialize(free_port: Callable[[], int]) -> None:
    """A server that never answered ``initialize`` (nothing listens, it never answers, it exits at once) proved
    nothing: no requirement about its session (S018: its requests respect the client's capabilities) is reported
    held; it used to pass S018 with "0 server request(s) over 1 session(s)"."""
    targets: list[str | list[str]] = [
        f"http://127.0.0.1:{free_port()}/mcp",
        [PY, "-c", "import sys; sys.stdin.read()"],
        [PY, "-c", "raise SystemExit(3)"],
    ]
    for target in targets:
        report = await run_checks(target, timeout=1.0, modern=False)
        held = [r.req for r in report.sorted() if r.status == PASS and r.req != "A004"]  # (A004: its stderr)
        assert held == [], report.render_text()


async def test_unreachable_and_non_mcp_targets_fail_fast(free_port: Callable[[], int]) -> None:
    t0 = time.monotonic()
    report = await run_checks(f"http://127.0.0.1:{free_port()}/mcp")  # nothing listens there
    # nothing answered, so nothing is said of a server: the run is incomplete (exit 2), not a failed MUST (exit 1)
    assert report.failed_musts() == [], report.render_text()
    assert "ConnectError" in report.info["aborted"] and report.exit_code() == 2
    report = await run_checks([PY, "-c", "import sys; sys.stdin.read()"], timeout=2.0)  # it never answers
    assert "M042" in report.failed_musts() and "M013" in report.failed_musts()
    assert "nothing else was checked" in report.render_text()
    report = await run_checks([PY, "-c", "raise SystemExit(3)"], timeout=2.0)  # it exits at once
    assert "exited (code 3) without answering initialize" in report.requirements["M042"].evidence
    report = await run_checks(["/nonexistent/mcp-server"])
    assert report.failed_musts() == ["M013"] and "No such file" in report.requirements["M013"].evidence
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("command", [["true"], ["sh", "-c", "exec 0<&-; sleep 1; exit 4"]])
async def test_a_server_gone_before_initialize_is_sent_fails_m042_not_the_checker(command: list[str]) -> None:
    """A stdio server that exits (or closes its stdin) before the checker writes ``initialize`` ended
    ``mcpkit check`` in a traceback of the checker's WireClosed: it is a server that never answered."""
    report = await run_checks(command, timeout=2.0, modern=False)
    assert "M042" in report.failed_musts(), report.render_text()
    assert "nothing else was checked" in report.info["aborted"]
