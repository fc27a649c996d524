"""The conformance runner's verdicts (tests/conformance/run.py) and a real harness run against the conformance
server: a gate that cannot fail would be worthless, so these prove it fails on what it should."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support.paths import REPO

ROOT = REPO
RUNNER = ROOT / "tests" / "conformance" / "run.py"


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_run", RUNNER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["conformance_run"] = module
    spec.loader.exec_module(module)
    return module


run = _runner()


def _write_checks(root: Path, dirname: str, checks: list[dict[str, str]]) -> None:
    d = root / dirname
    d.mkdir(parents=True)
    (d / "checks.json").write_text(json.dumps(checks))


def test_baseline_file_parses_and_every_entry_has_a_reason() -> None:
    baseline = run.load_baseline(run.BASELINE)
    readme = (RUNNER.parent / "README.md").read_text()
    for side, entries in baseline.items():
        for entry in entries:
            scenario, _, check = entry.partition(":")
            assert f"`{entry}`" in readme or (check and f"`{scenario}:{check}`" in readme), (
                f"{side}: {entry} has no reason in tests/conformance/README.md"
            )


def test_baseline_rejects_a_mapping_entry(tmp_path: Path) -> None:
    bad = tmp_path / "b.yml"
    bad.write_text("server:\n  - tools-list: tools-name-format\n")
    with pytest.raises(SystemExit):
        run.load_baseline(bad)


def test_failures_and_warnings_both_count(tmp_path: Path) -> None:
    _write_checks(
        tmp_path,
        "server-tools-list-2026-01-01T00-00-00-000Z",
        [
            {"id": "tools-list", "status": "SUCCESS"},
            {"id": "tools-name-format", "status": "WARNING"},
            {"id": "wire-schema-valid", "status": "FAILURE", "errorMessage": "bad message"},
        ],
    )
    result = run.LegResult("leg")
    run.read_checks(tmp_path, "server", "leg", result)
    assert (result.passed, result.failed, result.scenarios) == (1, 2, 1)
    assert [f.check for f in result.failures] == ["tools-name-format", "wire-schema-valid"]
    failure = result.failures[1]
    assert (failure.scenario, failure.message) == ("tools-list", "FAILURE: bad message")
    baseline = {"server": {"tools-list:wire-schema-valid"}, "client": set()}
    assert run.is_expected(failure, baseline) == "tools-list:wire-schema-valid"
    assert run.is_expected(failure, {"server": {"tools-list:other"}, "client": set()}) is None


def test_client_warnings_are_failures(tmp_path: Path) -> None:
    _write_checks(
        tmp_path,
        "sse-retry-2026-01-01T00-00-00-000Z",
        [{"id": "client-sse-retry-timing", "status": "WARNING", "errorMessage": "slightly late"}],
    )
    result = run.LegResult("leg")
    run.read_checks(tmp_path, "client", "leg", result)
    assert [(f.scenario, f.check) for f in result.failures] == [("sse-retry", "client-sse-retry-timing")]


def test_scenario_names_from_harness_directories() -> None:
    assert run.scenario_name("server-server-initialize-2026-11-22T00-12-23-547Z", "server") == "server-initialize"
    assert run.scenario_name("server-ping-2026-11-22T00-12-24-931Z", "server") == "ping"
    assert run.scenario_name("tools_call-2026-11-22T00-11-35-043Z", "client") == "tools_call"


def test_scenario_names_keep_their_auth_prefix(tmp_path: Path) -> None:
    """A scenario named with a slash is written one directory deeper; the runner names it in full."""
    _write_checks(tmp_path / "auth", "metadata-default-2026-01-01T00-00-00-000Z", [{"id": "x", "status": "FAILURE"}])
    result = run.LegResult("leg")
    run.read_checks(tmp_path, "client", "leg", result)
    assert [f.scenario for f in result.failures] == ["auth/metadata-default"]
    assert run.is_expected(result.failures[0], {"server": set(), "client": {"auth/metadata-default"}})


LISTING = """Server scenarios (test against a server):
  - server-initialize [2025-06-18,2025-11-25]

Client scenarios (test against a client):
  - initialize [2025-06-18,2025-11-25]
  - auth/2025-03-26-oauth-endpoint-fallback [2025-03-26]
  - auth/dpop [extension]
  - sep-2640-client-no-prefetch [extension]

Authorization server scenarios (test against an authorization server):
  - authorization-code-grant [2025-03-26,2025-06-18]
"""


def test_client_legs_cover_every_listed_scenario_at_each_revision() -> None:
    scenarios = run.parse_listing(LISTING)
    assert [name for name, _ in scenarios] == [
        "initialize",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/dpop",
        "sep-2640-client-no-prefetch",
    ]
    legs, skipped = run.client_legs({"0.1.16": scenarios, "0.2.0-alpha.12": scenarios})
    assert legs == [
        ("0.1.16", "initialize", None),  # 0.1.16: once, its scenarios take no spec version
        ("0.1.16", "auth/2025-03-26-oauth-endpoint-fallback", None),
        ("0.1.16", "auth/dpop", None),
        ("0.1.16", "sep-2640-client-no-prefetch", None),
        ("0.2.0-alpha.12", "initialize", "2025-06-18"),
        ("0.2.0-alpha.12", "initialize", "2025-11-25"),
        ("0.2.0-alpha.12", "auth/2025-03-26-oauth-endpoint-fallback", "2025-03-26"),
        ("0.2.0-alpha.12", "auth/dpop", None),  # an extension runs bare: the harness skips it given a version
        ("0.2.0-alpha.12", "sep-2640-client-no-prefetch", None),  # (the skills scenarios run too)
    ]
    assert skipped == []


@pytest.mark.timeout(180)
@pytest.mark.req("M042", "M045", "M067", "M068", "M069", "M079", "M085", "M087", "M089")
def test_official_harness_against_the_conformance_server(node_bin: Path, tmp_path: Path) -> None:
    """One real leg (0.2, stateful 2025-11-25 active scenarios) through the runner's own server start-up."""
    import subprocess

    with run.conformance_server() as url:
        harness = [str(node_bin), str(run.HARNESSES["0.2.0-alpha.12"])]
        proc = subprocess.run(
            [*harness, "server", "--url", url, "-o", str(tmp_path), "--spec-version", "2025-11-25"],
            capture_output=True,
            text=True,
            timeout=150,
        )
    result = run.LegResult("active 2025-11-25")
    checks = run.read_checks(tmp_path, "server", result.name, result)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert result.failures == []
    for scenario in (
        "server-initialize",
        "ping",
        "logging-set-level",
        "tools-list",
        "tools-call-with-progress",
        "tools-call-error",
        "completion-complete",
        "tools-call-audio",
        "prompts-get-with-image",
    ):
        statuses = {c["id"]: c["status"] for c in checks[scenario]}
        assert "SUCCESS" in statuses.values() and "FAILURE" not in statuses.values(), (scenario, statuses)
