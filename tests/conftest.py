"""Shared pytest setup for mcpkit.

* A small plugin records, for every test, the requirement IDs of its ``@pytest.mark.req(...)`` markers and
  its outcome into ``.compliance/results.json`` (read by ``scripts/compliance.py``). It works with and
  without pytest-xdist: workers attach the IDs to each report as ``user_properties``; only the controlling
  process (or the single process without xdist) writes the file.
* Fixtures: ``free_port`` (call it: ``port = free_port()``), ``node_bin`` (Node >= 22 from
  ``tests/node_modules``), ``npm_bin_dir`` (``tests/node_modules/.bin``).
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
NODE_MODULES = TESTS_DIR / "node_modules"
RESULTS_PATH = Path(os.environ.get("MCPKIT_COMPLIANCE_RESULTS", REPO_ROOT / ".compliance" / "results.json"))
_REQ_KEY = "mcpkit_req"

# ---------------------------------------------------------------- requirement/outcome recorder


def _req_ids(item: pytest.Item) -> list[str]:
    ids: list[str] = []
    for mark in item.iter_markers(name="req"):
        for arg in mark.args:
            for part in str(arg).replace(",", " ").split():
                if part not in ids:
                    ids.append(part)
    return sorted(ids)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        item.user_properties.append((_REQ_KEY, _req_ids(item)))


class _Recorder:
    def __init__(self) -> None:
        self.tests: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = self.tests.setdefault(report.nodeid, {"reqs": [], "outcome": "unknown"})
        for key, value in report.user_properties:
            if key == _REQ_KEY and isinstance(value, (list, tuple)):
                entry["reqs"] = [str(v) for v in value]
        if report.when == "setup":
            if report.failed:
                entry["outcome"] = "error"
            elif report.skipped:
                entry["outcome"] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        elif report.when == "call":
            if hasattr(report, "wasxfail"):
                entry["outcome"] = "xfailed" if report.skipped else "xpassed"
            else:
                entry["outcome"] = report.outcome  # passed / failed / skipped
        elif report.when == "teardown" and report.failed and entry["outcome"] != "failed":
            entry["outcome"] = "error"

    def write(self, exitstatus: int) -> None:
        RESULTS_PATH.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pytest_exitstatus": int(exitstatus),
            "tests": dict(sorted(self.tests.items())),
        }
        tmp = RESULTS_PATH.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        tmp.replace(RESULTS_PATH)


def pytest_configure(config: pytest.Config) -> None:
    is_xdist_worker = hasattr(config, "workerinput")
    if not is_xdist_worker and not config.option.collectonly:
        config.pluginmanager.register(_Recorder(), "mcpkit-compliance-recorder")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    recorder = session.config.pluginmanager.get_plugin("mcpkit-compliance-recorder")
    if isinstance(recorder, _Recorder) and recorder.tests:
        recorder.write(exitstatus)


# ---------------------------------------------------------------- fixtures


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def free_port() -> Callable[[], int]:
    """A callable returning a currently free TCP port on 127.0.0.1: ``port = free_port()``.

    Prefer binding to port 0 where the code under test allows it; this is for peers that need a number.
    """
    return _free_port


def _missing_npm_peers(what: str) -> None:
    reason = (
        f"!!! NPM TEST PEERS MISSING: {what} not found. Interop tests cannot run. "
        "Run `bash scripts/test.sh` (or `cd tests && npm ci`) to install them. !!!"
    )
    if os.environ.get("CI"):
        pytest.fail(reason)  # in CI scripts/test.sh installed them; a missing peer is a broken build
    pytest.skip(reason)


@pytest.fixture(scope="session")
def npm_bin_dir() -> Iterator[Path]:
    """``tests/node_modules/.bin`` (conformance, mcp-server-everything, node, ...)."""
    path = NODE_MODULES / ".bin"
    if not path.is_dir():
        _missing_npm_peers(str(path))
    yield path


@pytest.fixture(scope="session")
def node_bin(npm_bin_dir: Path) -> Path:
    """Path of the Node >= 22 binary from the pinned ``node`` npm package (the system Node is older)."""
    path = npm_bin_dir / "node"
    if not path.exists():
        _missing_npm_peers(str(path))
    return path
