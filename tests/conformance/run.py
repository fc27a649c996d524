#!/usr/bin/env python3
"""Run the official MCP conformance suites against mcpkit's conformance server and client.

    python tests/conformance/run.py [--only server|client|authorization] [-k PATTERN] [-j N] [--keep DIR] [-v]

Server side: starts ``mcpkit run examples/conformance_server.py --transport http --port <free>`` and runs every
server scenario of both pinned harnesses (tests/package.json: 0.1.16 and 0.2.0-alpha.12), ``--suite all`` (pending
scenarios included) at 2025-06-18, 2025-11-25 and (0.2) 2026-07-28, plus the bare 0.2 ``--suite all`` leg, the only
one that reaches the extension scenarios (tasks-*, sep-2640-*).
Client side: runs ``examples/conformance_client.py`` in every client scenario each harness lists (``auth/*`` and
extensions included, the skills-extension scenarios too), at each revision the
scenario applies to.
Authorization-server side: every authorization-server scenario (0.2) at each revision, against
``examples/oauth_server.py`` (the runner registers a client per leg and plays the browser).

Every ``checks.json`` the harnesses write is read back. A check counts as failed when its status is FAILURE or
WARNING (the harness's own rule for baselines), and a client scenario fails when the program exits non-zero or
times out. Failures listed in ``tests/conformance/expected-failures.yml`` (each with its reason in
tests/conformance/README.md) are reported but tolerated; anything else fails the run (exit 1). Entries that no
longer fail are reported as stale.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import fnmatch
import json
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE.parent))  # tests/: the shared helpers of tests/support
from support.procs import ServerDidNotStart, stop, wait_listening  # noqa: E402

NODE_MODULES = ROOT / "tests" / "node_modules"
NODE = NODE_MODULES / ".bin" / "node"
HARNESSES = {
    "0.1.16": NODE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    "0.2.0-alpha.12": NODE_MODULES / "conformance-0.2" / "dist" / "index.js",
}
BASELINE = HERE / "expected-failures.yml"
PY = sys.executable
SERVER_FILE = ROOT / "examples" / "conformance_server.py"
CLIENT_FILE = ROOT / "examples" / "conformance_client.py"
AS_FILE = ROOT / "examples" / "oauth_server.py"  # the authorization-server scenarios run against it

# (harness, --spec-version or None for the bare leg)
SERVER_LEGS: list[tuple[str, str | None]] = [
    ("0.1.16", "2025-06-18"),
    ("0.1.16", "2025-11-25"),
    ("0.2.0-alpha.12", "2025-06-18"),
    ("0.2.0-alpha.12", "2025-11-25"),
    ("0.2.0-alpha.12", "2026-07-28"),
    ("0.2.0-alpha.12", None),
]
# Client scenarios are read from each harness's own ``list`` (every one it offers), except these, with the reason
# the summary prints. 0.1.16 runs a client scenario one way whatever the revision (its scenarios take no spec
# version): one leg each. 0.2 runs each at every revision it lists; an ``extension`` scenario runs bare (the
# harness skips an extension scenario given --spec-version).
CLIENT_SKIPPED: dict[str, str] = {}
_TS_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d-]+Z$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Failure:
    side: str  # server | client
    leg: str
    scenario: str
    check: str  # check id, or "" for the scenario as a whole (client exit code, timeout, harness error)
    message: str


@dataclass
class LegResult:
    name: str
    passed: int = 0
    failed: int = 0
    scenarios: int = 0
    summary: list[str] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)


def load_baseline(path: Path) -> dict[str, set[str]]:
    """The expected-failures file: ``server:``/``client:`` lists of ``scenario`` or ``scenario:check-id``."""
    out: dict[str, set[str]] = {"server": set(), "client": set(), "authorization": set()}
    if not path.exists():
        return out
    section: str | None = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not line.startswith((" ", "-")) and line.endswith(":"):
            section = line[:-1].strip()
            if section not in out:
                raise SystemExit(f"{path}: unknown section {section!r} (use server: / client: / authorization:)")
            continue
        item = line.strip()
        if not item.startswith("- ") or section is None:
            raise SystemExit(f"{path}: cannot read line {raw!r}")
        entry = item[2:].strip().strip("'\"")
        if ": " in entry:
            raise SystemExit(f"{path}: {entry!r}: write scenario:check-id without a space")
        out[section].add(entry)
    return out


def is_expected(f: Failure, baseline: dict[str, set[str]]) -> str | None:
    entries = baseline.get(f.side, set())
    for key in (f.scenario, f"{f.scenario}:{f.check}"):
        if key in entries:
            return key
    return None


def scenario_name(dirname: str, side: str) -> str:
    name = _TS_SUFFIX.sub("", dirname)
    if side == "server" and name.startswith("server-"):
        name = name[len("server-") :]
    return name


def read_checks(out_dir: Path, side: str, leg: str, result: LegResult) -> dict[str, list[dict[str, object]]]:
    by_scenario: dict[str, list[dict[str, object]]] = {}
    for checks_file in sorted(out_dir.rglob("checks.json")):
        # a scenario named with a slash (auth/metadata-default) is written one directory deeper
        scenario = scenario_name(checks_file.parent.relative_to(out_dir).as_posix(), side)
        checks = json.loads(checks_file.read_text(encoding="utf-8"))
        by_scenario[scenario] = checks
        result.scenarios += 1
        for check in checks:
            status = check.get("status")
            if status == "SUCCESS":
                result.passed += 1
            elif status in ("FAILURE", "WARNING"):  # the harness's baseline rule: a WARNING is a failure too
                result.failed += 1
                msg = str(check.get("errorMessage") or check.get("description") or "")
                result.failures.append(Failure(side, leg, scenario, str(check.get("id")), f"{status}: {msg[:300]}"))
    return by_scenario


def summary_lines(output: str) -> list[str]:
    text = _ANSI.sub("", output)
    lines = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(("Total:", "✗", "Passed:", "✅ OVERALL", "❌ OVERALL", "SKIPPED")):
            lines.append(s)
    return lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.contextmanager
def conformance_server() -> Iterator[str]:
    port = free_port()
    cmd = [PY, "-m", "mcpkit.cli.main", "run", str(SERVER_FILE), "--transport", "http", "--port", str(port)]
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in the finally below, after the server stops
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        try:
            wait_listening(port, proc, timeout=30)
        except ServerDidNotStart as exc:
            log.seek(0)
            raise SystemExit(f"the conformance server: {exc}\n{log.read().decode(errors='replace')}") from None
        yield f"http://localhost:{port}/mcp"
    finally:
        stop(proc)
        if proc.returncode not in (0, -15, 143):
            log.seek(0)
            print(f"conformance server exit code {proc.returncode}:\n{log.read().decode(errors='replace')[-3000:]}")
        log.close()


def run_harness(version: str, args: list[str], timeout: float) -> tuple[int, str]:
    cmd = [str(NODE), str(HARNESSES[version]), *args]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out + f"\n[runner] harness timed out after {timeout:.0f}s"
    return proc.returncode, proc.stdout + proc.stderr


def run_server_legs(url: str, work: Path, verbose: bool) -> list[LegResult]:
    results = []
    for version, spec in SERVER_LEGS:
        leg = f"{version} server --suite all" + (f" --spec-version {spec}" if spec else " (bare)")
        out_dir = work / f"server-{version}-{spec or 'bare'}"
        args = ["server", "--url", url, "--suite", "all", "-o", str(out_dir)]
        if spec:
            args += ["--spec-version", spec]
        rc, output = run_harness(version, args, timeout=300)
        result = LegResult(leg)
        read_checks(out_dir, "server", leg, result)
        result.summary = [s for s in summary_lines(output) if s.startswith(("Total:", "✗"))]
        if rc != 0 and not result.failures:
            result.failures.append(Failure("server", leg, "*", "", f"harness exit {rc} without failing checks"))
        if result.scenarios == 0:
            result.failures.append(Failure("server", leg, "*", "", "the harness ran no scenario"))
        if verbose or rc not in (0, 1):
            print(_ANSI.sub("", output)[-4000:])
        results.append(result)
    return results


def parse_listing(output: str, section: str = "Client scenarios") -> list[tuple[str, list[str]]]:
    """The scenarios of one section of a harness's ``list`` output: ``[(name, [spec versions])]``."""
    found: list[tuple[str, list[str]]] = []
    current = ""
    for line in _ANSI.sub("", output).splitlines():
        if line and not line.startswith(" "):
            current = line
            continue
        m = re.match(r"\s+- (\S+) \[([^\]]*)\]", line)
        if m and current.startswith(section):
            found.append((m.group(1), [v.strip() for v in m.group(2).split(",") if v.strip()]))
    return found


def skip_reason(scenario: str) -> str | None:
    return next((why for pattern, why in CLIENT_SKIPPED.items() if fnmatch.fnmatchcase(scenario, pattern)), None)


Leg = tuple[str, str, str | None]  # (harness version, scenario, --spec-version or None)


def client_legs(listings: dict[str, list[tuple[str, list[str]]]]) -> tuple[list[Leg], list[str]]:
    """Every client scenario of each harness at each revision it applies to, and the skipped ones (with why)."""
    legs: list[Leg] = []
    skipped: list[str] = []
    for version, scenarios in listings.items():
        for name, specs in scenarios:
            why = skip_reason(name)
            if why is not None:
                skipped.append(f"{version} client {name}: {why}")
                continue
            if version == "0.1.16":
                legs.append((version, name, None))  # its scenarios take no spec version: one run each
                continue
            for spec in specs:
                legs.append((version, name, None if spec == "extension" else spec))
    return legs, skipped


def list_client_scenarios() -> dict[str, list[tuple[str, list[str]]]]:
    listings = {}
    for version in HARNESSES:
        rc, output = run_harness(version, ["list"], timeout=60)
        scenarios = parse_listing(output)
        if rc != 0 or not scenarios:
            raise SystemExit(f"{version}: cannot list the client scenarios (exit {rc}):\n{output[-2000:]}")
        listings[version] = scenarios
    return listings


def authorization_specs() -> dict[str, list[str]]:
    """Per harness, the revisions its authorization-server scenarios apply to (the union over its scenarios)."""
    found: dict[str, list[str]] = {}
    for version in HARNESSES:
        _, output = run_harness(version, ["list"], timeout=60)
        specs = sorted({v for _, vs in parse_listing(output, "Authorization server scenarios") for v in vs})
        if specs:
            found[version] = specs
    return found


def _visit_authorization_urls(proc: subprocess.Popen[str], prefix: str, deadline: float) -> str:
    """Read the harness's output; when it prints the authorization URL and its callback server is up, open the
    URL as a browser would (the example's authorization server auto-approves and redirects to the callback)."""
    import queue
    import threading

    import httpx

    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    url: str | None = None
    listening = False
    with httpx.Client(follow_redirects=True, timeout=10) as browser:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            seen.append(line)
            text = _ANSI.sub("", line).strip()
            if text.startswith(prefix):
                url = text
            elif text.startswith("Callback server started"):
                listening = True
            if url and listening:
                with contextlib.suppress(httpx.HTTPError):
                    browser.get(url)
                url, listening = None, False
    return "".join(seen)


def run_authorization_legs(work: Path, verbose: bool) -> list[LegResult]:
    """Every authorization-server scenario at each revision it applies to, against mcpkit's development
    authorization server (``examples/oauth_server.py``: auto-approving, so this runner plays the browser)."""
    results = []
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed below, after the server stops
    server = subprocess.Popen([PY, str(AS_FILE), "--port", str(port)], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        try:
            wait_listening(port, server, timeout=30)
        except ServerDidNotStart as exc:
            raise SystemExit(f"the authorization server: {exc}") from None
        import httpx

        for version, specs in authorization_specs().items():
            for spec in specs:
                leg = f"{version} authorization --spec-version {spec}"
                callback = free_port()
                reg = httpx.post(
                    base + "/register",
                    json={
                        "client_name": "conformance",
                        "redirect_uris": [f"http://127.0.0.1:{callback}/callback"],
                        "token_endpoint_auth_method": "none",
                    },
                    timeout=10,
                ).json()
                out_dir = work / f"authorization-{version}-{spec}"
                args = ["authorization", "--url", base, "--client-id", reg["client_id"], "--resource", base + "/mcp"]
                args += ["--port", str(callback), "-o", str(out_dir), "--spec-version", spec]
                proc = subprocess.Popen(
                    [str(NODE), str(HARNESSES[version]), *args],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                output = _visit_authorization_urls(proc, base + "/authorize?", time.monotonic() + 120)
                try:
                    rc = proc.wait(10)
                except subprocess.TimeoutExpired:
                    stop(proc)
                    rc = 124
                result = LegResult(leg)
                read_checks(out_dir, "authorization", leg, result)
                result.summary = [s for s in summary_lines(output) if s.startswith(("Total:", "Passed:", "✗"))]
                if result.scenarios == 0:
                    result.failures.append(Failure("authorization", leg, "*", "", f"no checks written (exit {rc})"))
                if verbose or rc != 0:
                    print(_ANSI.sub("", output)[-4000:])
                results.append(result)
    finally:
        stop(server)
        log.close()
    return results


def run_client_leg(version: str, scenario: str, spec: str | None, out_dir: Path, verbose: bool) -> LegResult:
    command = f"{PY} {CLIENT_FILE}"
    if " " in PY or " " in str(CLIENT_FILE):
        raise SystemExit("the harness splits --command on spaces: run from a path without spaces")
    leg = f"{version} client {scenario}" + (f" --spec-version {spec}" if spec else "")
    args = ["client", "--command", command, "--scenario", scenario, "-o", str(out_dir), "--timeout", "60000"]
    if spec:
        args += ["--spec-version", spec]
    rc, output = run_harness(version, args, timeout=120)
    result = LegResult(leg)
    read_checks(out_dir, "client", leg, result)
    result.summary = [s for s in summary_lines(output) if "OVERALL" in s]
    if rc != 0:
        reason = "client exited non-zero" if "CLIENT EXITED WITH ERROR" in output else f"harness exit {rc}"
        if not result.failures or "CLIENT EXITED WITH ERROR" in output:
            result.failures.append(Failure("client", leg, scenario, "", reason))
    if result.scenarios == 0:
        result.failures.append(Failure("client", leg, scenario, "", "no checks were written"))
    if verbose or rc != 0:
        print(_ANSI.sub("", output)[-4000:])
    return result


def run_client_legs(
    legs: list[Leg], work: Path, verbose: bool, baseline: dict[str, set[str]], jobs: int
) -> list[LegResult]:
    """Each scenario once; an unexpected failure is re-run once on its own (timing checks such as sse-retry's
    450-700 ms window can trip on a loaded machine), and both outcomes are printed. ``jobs`` legs at a time (each
    harness run serves its mocks on ports of its own)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda leg: _client_leg_with_retry(leg[0], leg[1], leg[2], work, verbose, baseline), legs))


def _client_leg_with_retry(
    version: str, scenario: str, spec: str | None, work: Path, verbose: bool, baseline: dict[str, set[str]]
) -> LegResult:
    out_dir = work / f"client-{version}-{scenario.replace('/', '-')}-{spec or 'default'}"
    result = run_client_leg(version, scenario, spec, out_dir, verbose)
    first = [f for f in result.failures if not is_expected(f, baseline)]
    if first:
        retry = run_client_leg(version, scenario, spec, out_dir.with_name(out_dir.name + "-retry"), verbose)
        what = "; ".join(f"{f.check or f.scenario}: {f.message}" for f in first)[:300]
        if not [f for f in retry.failures if not is_expected(f, baseline)]:
            print(f"[flaky] {result.name} failed once ({what}) and passed when re-run")
        else:
            print(f"[retry] {result.name} failed twice")
        retry.summary.insert(0, f"first run failed: {what}")
        result = retry
    return result


def totals(results: list[LegResult], baseline: dict[str, set[str]]) -> list[str]:
    """One line per side and harness (client auth scenarios also on their own): legs that passed, checks."""
    groups: dict[str, list[LegResult]] = {}
    for r in results:
        version, side = r.name.split(" ", 2)[:2]
        groups.setdefault(f"{side} {version}", []).append(r)
        if side == "client" and " auth/" in r.name:
            groups.setdefault(f"client {version} auth/*", []).append(r)
    lines = []
    for name, legs in groups.items():
        clean = sum(1 for r in legs if not r.failures)
        tolerated = sum(1 for r in legs if r.failures and all(is_expected(f, baseline) for f in r.failures))
        passed, failed = sum(r.passed for r in legs), sum(r.failed for r in legs)
        extra = f" ({tolerated} with expected failures only)" if tolerated else ""
        lines.append(f"{name}: {clean}/{len(legs)} legs clean{extra}; checks {passed} passed, {failed} failed")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--only", choices=["server", "client", "authorization"], help="run one side only")
    parser.add_argument("--keep", type=Path, help="keep the harnesses' checks.json trees in this directory")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    parser.add_argument("-v", "--verbose", action="store_true", help="print the harness output of every leg")
    parser.add_argument(
        "-k", "--scenario", action="append", metavar="PATTERN", help="client scenarios matching this glob only"
    )
    parser.add_argument("-j", "--jobs", type=int, default=1, help="client legs run at once (default 1)")
    args = parser.parse_args(argv)
    missing = [str(p) for p in (NODE, *HARNESSES.values()) if not p.exists()]
    if missing:
        print(f"missing npm peers (run scripts/test.sh or `cd tests && npm ci`): {', '.join(missing)}")
        return 1
    baseline = load_baseline(args.baseline)
    work = args.keep or Path(tempfile.mkdtemp(prefix="mcpkit-conformance-"))
    if args.keep and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    results: list[LegResult] = []
    skipped: list[str] = []
    try:
        if args.only in (None, "server"):
            with conformance_server() as url:
                print(f"conformance server: {url}")
                results += run_server_legs(url, work, args.verbose)
        if args.only in (None, "client"):
            legs, skipped = client_legs(list_client_scenarios())
            if args.scenario:
                legs = [leg for leg in legs if any(fnmatch.fnmatchcase(leg[1], p) for p in args.scenario)]
            results += run_client_legs(legs, work, args.verbose, baseline, args.jobs)
        if args.only in (None, "authorization") and not args.scenario:
            results += run_authorization_legs(work, args.verbose)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    unexpected: list[Failure] = []
    used: set[tuple[str, str]] = set()
    print("\n==================== conformance summary ====================")
    for r in results:
        expected = [f for f in r.failures if is_expected(f, baseline)]
        bad = [f for f in r.failures if not is_expected(f, baseline)]
        for f in expected:
            used.add((f.side, str(is_expected(f, baseline))))
        unexpected += bad
        verdict = "ok" if not bad else "FAIL"
        extra = f", {len(expected)} expected" if expected else ""
        print(f"[{verdict:4}] {r.name}: {r.scenarios} scenario(s), {r.passed} passed, {r.failed} failed{extra}")
        for line in r.summary:
            print(f"         {line}")
    for line in skipped:
        print(f"[skip] {line}")
    sides_run = {"server", "client", "authorization"} if args.only is None else {args.only}
    for side, entries in baseline.items():
        if side not in sides_run or args.scenario:
            continue
        for entry in sorted(entries):
            if (side, entry) not in used:
                print(f"stale expected-failure entry (it passes now; remove it): {side}: {entry}")
    if unexpected:
        print(f"\n{len(unexpected)} unexpected failure(s):")
        for f in unexpected:
            where = f"{f.scenario}:{f.check}" if f.check else f.scenario
            print(f"  ✗ [{f.leg}] {where}: {f.message}")
    print("\ntotals:")
    for line in totals(results, baseline):
        print(f"  {line}")
    total_p = sum(r.passed for r in results)
    total_f = sum(r.failed for r in results)
    print(
        f"\nconformance: {len(results)} legs, {total_p} checks passed, {total_f} failed "
        f"({total_f - sum(1 for f in unexpected if f.check)} expected), {len(unexpected)} unexpected, "
        f"{time.monotonic() - start:.0f}s"
    )
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
