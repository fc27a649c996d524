"""The testing kit's fixtures have public types a user annotates a test's parameters with (``McpSnapshot``,
``McpConformance``, from ``mcpkit.testing``): the same annotated test file runs under pytest and passes
``mypy --strict`` and pyright's strict mode, which see the fixtures' methods."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.typecheck import mypy_strict, pyright_problems, pyright_revealed, pyright_strict, revealed_types
from support.user_pytest import run_pytest

SERVER = '''
from mcpkit import MCPKit

app = MCPKit("demo")


@app.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
'''

USER_TESTS = """
from typing import TYPE_CHECKING

import pytest

from mcpkit import Client
from mcpkit.check import Report
from mcpkit.testing import McpConformance, McpSnapshot


@pytest.mark.asyncio
async def test_surface(mcp_client: Client, mcp_snapshot: McpSnapshot) -> None:
    assert isinstance(mcp_snapshot, McpSnapshot)
    surface = await mcp_snapshot.check(mcp_client)
    assert [tool["name"] for tool in surface["tools"]] == ["add"]
    if TYPE_CHECKING:
        reveal_type(surface)
        reveal_type(mcp_snapshot.path)
        reveal_type(mcp_snapshot.assert_matches)


@pytest.mark.asyncio
async def test_conformant(mcp_conformance: McpConformance) -> None:
    assert isinstance(mcp_conformance, McpConformance)
    report: Report = await mcp_conformance(fail_on="must", modern=False)
    assert report.target
    if TYPE_CHECKING:
        reveal_type(await mcp_conformance())
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("MCPKIT_COMPLIANCE_RESULTS", raising=False)  # (the outer run's report is not theirs)
    pytester.makepyfile(server=SERVER, test_typed=USER_TESTS)
    pytester.makeini("[pytest]\nmcp_server = server.py:app\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def test_fixtures_annotated_with_their_public_types_run(project: pytest.Pytester) -> None:
    """The annotated tests pass: each fixture is an instance of the type it is annotated with."""
    result = run_pytest(project, "--mcp-transports=memory", "--mcp-eras=handshake", "--mcp-update-snapshots")
    result.assert_outcomes(passed=2)


def test_fixtures_annotated_with_their_public_types_pass_mypy_and_pyright_strict(
    project: pytest.Pytester, tmp_path: Path, node_bin: Path, pyright_js: Path
) -> None:
    """No error in either checker, and reveal_type shows the snapshot's and the check's real types (no Any)."""
    program = Path(project.path) / "test_typed.py"
    proc = mypy_strict(program, tmp_path)
    assert "error:" not in proc.stdout, proc.stdout
    assert revealed_types(proc.stdout) == [
        "dict[str, list[Any]]",
        "pathlib.Path",
        "def (current: dict[str, list[Any]])",
        "mcpkit.check.report.Report",
    ], proc.stdout
    report = pyright_strict(program, tmp_path, node_bin, pyright_js)
    assert pyright_problems(report) == []
    assert pyright_revealed(report) == [
        "dict[str, list[Any]]",
        "Path",
        "(current: dict[str, list[Any]]) -> None",
        "Report",
    ]


def test_the_fixture_types_are_documented_in_the_testing_guide() -> None:
    guide = (Path(__file__).parents[2] / "docs" / "guides" / "testing.md").read_text(encoding="utf-8")
    assert "mcp_snapshot: McpSnapshot" in guide and "mcp_conformance: McpConformance" in guide
