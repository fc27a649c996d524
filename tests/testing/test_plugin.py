"""The testing kit's pytest plugin from the outside: a user's project (written by pytester into a temporary
directory) run by pytest, with the plugin loaded the way a user's pytest loads it. What a run selects (options, ini,
markers), what it prints, how it fails (no server, a changed surface, a leak), what it records."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from support.user_pytest import run_pytest

SERVER = '''
from mcpkit import Context, MCPKit

app = MCPKit("demo")


@app.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool
async def capital(country: str, ctx: Context) -> str:
    """Ask the model."""
    return (await ctx.sample(f"Capital of {country}?")).text
'''


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project: server.py, the ini naming it, no asyncio_mode (pytest-asyncio's strict default)."""
    monkeypatch.delenv("MCPKIT_COMPLIANCE_RESULTS", raising=False)  # (the outer run's report is not theirs)
    pytester.makepyfile(server=SERVER)
    pytester.makeini(
        """
        [pytest]
        mcp_server = server.py:app
        asyncio_default_fixture_loop_scope = function
        """
    )
    return pytester


def run(pytester: pytest.Pytester, *args: str, timeout: float = 300) -> pytest.RunResult:
    return run_pytest(pytester, *args, timeout=timeout)


def snapshots_recorded(
    project: pytest.Pytester, module: str, transports: str, passed: int, written: int, *listed: str
) -> tuple[Path, list[str]]:
    """Run ``project``'s tests over ``transports`` with ``--mcp-update-snapshots`` (``passed`` pass, ``written``
    snapshots written, the output naming ``listed`` too), then without (all pass against them): the folder of
    ``module``'s snapshots and their names, sorted."""
    args = (f"--mcp-transports={transports}",)
    recorded = run(project, *args, "--mcp-update-snapshots")
    recorded.assert_outcomes(passed=passed)
    recorded.stdout.fnmatch_lines([f"mcpkit: {written} surface snapshot(s) written:", *listed])
    folder = project.path / "__snapshots__" / module
    names = sorted(p.name for p in folder.iterdir())
    run(project, *args).assert_outcomes(passed=passed)
    return folder, names


TESTS = """
import pytest

async def test_add(mcp_client, mcp_transport, mcp_era):
    assert (await mcp_client.call_tool("add", {"a": 1, "b": 2})).data == 3
    assert mcp_client.protocol_version == mcp_era

@pytest.mark.mcp(transports=["memory"], sampling=["Lima"])
async def test_capital(mcp_client):
    assert (await mcp_client.call_tool("capital", {"country": "Peru"})).data == "Lima"

@pytest.mark.mcp(transports=["stdio"], eras=["modern"])
async def test_stdio_modern_only(mcp_client):
    assert mcp_client.protocol_version == "2026-07-28"
"""


def test_options_narrow_the_transports_and_eras_and_the_summary_counts_the_runs(project: pytest.Pytester) -> None:
    project.makepyfile(test_user_demo=TESTS)
    result = run(project, "-v", "--mcp-transports=memory,stdio", "--mcp-eras=handshake,2026-07-28")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(
        [
            "mcpkit: transports memory, stdio; eras 2025-11-25, 2026-07-28",
            "*test_add?memory-2025-11-25? PASSED*",
            "*test_add?stdio-2026-07-28? PASSED*",
            "*test_capital?memory-2026-07-28? PASSED*",
            "*test_stdio_modern_only?stdio-2026-07-28? PASSED*",
            "mcpkit: 7 test runs over 2 transport(s) x 2 era(s) (7 passed)",
            "  memory  2025-11-25 2/2  2026-07-28 2/2",
            "  stdio   2025-11-25 1/1  2026-07-28 2/2",
        ]
    )


def test_a_test_no_selected_transport_applies_to_is_skipped_with_the_reason(project: pytest.Pytester) -> None:
    project.makepyfile(test_user_demo=TESTS)
    result = run(project, "-rs", "--mcp-transports=http", "--mcp-eras=2025-11-25")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*none of this run's transports and eras applies to this test*"])


def test_ini_options_choose_the_transports_and_eras(project: pytest.Pytester) -> None:
    project.makeini(
        """
        [pytest]
        mcp_server = server.py:app
        mcp_transports = ws
        mcp_eras = modern
        asyncio_default_fixture_loop_scope = function
        """
    )
    project.makepyfile(test_user_demo=TESTS)
    result = run(project, "-v")
    result.assert_outcomes(passed=1, skipped=2)
    result.stdout.fnmatch_lines(["*test_add?ws-2026-07-28? PASSED*"])


def test_an_unknown_transport_or_era_is_a_usage_error_naming_the_choices(project: pytest.Pytester) -> None:
    project.makepyfile(test_user_demo=TESTS)
    result = run(project, "--mcp-transports=carrier-pigeon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown transport 'carrier-pigeon': one of memory, stdio, http, sse, ws*"])
    result = run(project, "--mcp-eras=2099-01-01")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown era '2099-01-01'*handshake, modern*"])


def test_without_a_server_the_failure_says_how_to_name_one(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_user_noserver="async def test_x(mcp_client):\n    pass\n",
    )
    result = run(pytester, "--mcp-transports=memory", "--mcp-eras=modern")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*which server? Set mcp_server in the pytest configuration*"])


def test_the_ini_server_path_is_relative_to_the_ini_file(project: pytest.Pytester) -> None:
    sub = project.mkdir("tests")
    (sub / "test_user_elsewhere.py").write_text(TESTS)
    result = run(project, "--rootdir", str(project.path), "--mcp-transports=memory", str(sub))
    result.assert_outcomes(passed=4, skipped=1)


def test_a_server_fixture_and_the_marker_override_the_ini(project: pytest.Pytester) -> None:
    project.makepyfile(
        other="from mcpkit import MCPKit\n\nmcp = MCPKit('other')\n",
        test_user_override=textwrap.dedent(
            """
            import pytest
            from mcpkit import MCPKit

            @pytest.fixture
            def mcp_server():
                return MCPKit("from-fixture")

            @pytest.mark.mcp(transports="memory", eras="modern")
            async def test_fixture(mcp_client):
                assert mcp_client.server_info.name == "from-fixture"
            """
        ),
        test_user_marker=textwrap.dedent(
            """
            import pytest

            @pytest.mark.mcp(server="other.py", transports=["memory", "stdio"], eras="handshake")
            async def test_marker(mcp_client):
                assert mcp_client.server_info.name == "other"
            """
        ),
    )
    run(project).assert_outcomes(passed=3)


SNAPSHOT_TESTS = """
async def test_surface(mcp_client, mcp_snapshot):
    await mcp_snapshot.check(mcp_client)
"""


def test_the_surface_snapshot_is_recorded_with_the_flag_and_fails_when_the_server_changes(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_user_surface=SNAPSHOT_TESTS)
    args = ("--mcp-transports=memory,http",)
    missing = run(project, *args)
    missing.assert_outcomes(failed=4)
    missing.stdout.fnmatch_lines(["*no surface snapshot at *run pytest with --mcp-update-snapshots*"])
    _, names = snapshots_recorded(project, "test_user_surface", "memory,http", 4, 2, "*test_surface?2025-11-25?.json")
    assert names == ["test_surface[2025-11-25].json", "test_surface[2026-07-28].json"]
    (project.path / "server.py").write_text(SERVER.replace("b: int", "b: float"))
    changed = run(project, *args)
    changed.assert_outcomes(failed=4)
    changed.stdout.fnmatch_lines(["*tool 'add' changed: inputSchema*"])


def test_same_named_tests_of_two_classes_with_two_servers_keep_their_own_snapshots(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_two_servers=textwrap.dedent(
            """
            import pytest
            from mcpkit import MCPKit

            def make(name):
                app = MCPKit(name)

                @app.tool(name=name)
                def only() -> str:
                    \"\"\"The one tool.\"\"\"
                    return name

                return app

            class TestAlpha:
                @pytest.fixture
                def mcp_server(self):
                    return make("alpha")

                async def test_surface(self, mcp_client, mcp_snapshot):
                    await mcp_snapshot.check(mcp_client)

            class TestBeta:
                @pytest.fixture
                def mcp_server(self):
                    return make("beta")

                async def test_surface(self, mcp_client, mcp_snapshot):
                    await mcp_snapshot.check(mcp_client)
            """
        )
    )
    _, names = snapshots_recorded(project, "test_two_servers", "memory", 4, 4)
    assert names == [
        "TestAlpha.test_surface[2025-11-25].json",
        "TestAlpha.test_surface[2026-07-28].json",
        "TestBeta.test_surface[2025-11-25].json",
        "TestBeta.test_surface[2026-07-28].json",
    ]


TWO_SERVERS = """
import pytest
from mcpkit import MCPKit

def make(name):
    app = MCPKit(name)

    @app.tool(name=name)
    def only() -> str:
        \"\"\"The one tool.\"\"\"
        return name

    return app
"""


def test_a_test_parametrized_over_servers_keeps_a_snapshot_per_parameter(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_params=TWO_SERVERS
        + textwrap.dedent(
            """
            @pytest.fixture(params=["alpha", "beta"])
            def mcp_server(request):
                return make(request.param)

            async def test_surface(mcp_client, mcp_snapshot):
                await mcp_snapshot.check(mcp_client)

            @pytest.mark.parametrize("name", ["gamma", "delta/../x"])
            async def test_each(name, mcp_era, mcp_snapshot):
                from mcpkit import Client
                async with Client(make(name), protocol_version=mcp_era) as client:
                    await mcp_snapshot.check(client)
            """
        )
    )
    folder, names = snapshots_recorded(project, "test_params", "memory,http", 12, 8)
    assert names == [
        "test_each[2025-11-25-delta_.._x].json",  # (the node's ids in pytest's order, without the transport)
        "test_each[2025-11-25-gamma].json",
        "test_each[2026-07-28-delta_.._x].json",
        "test_each[2026-07-28-gamma].json",
        "test_surface[alpha-2025-11-25].json",
        "test_surface[alpha-2026-07-28].json",
        "test_surface[beta-2025-11-25].json",
        "test_surface[beta-2026-07-28].json",
    ]
    assert '"beta"' in (folder / "test_surface[beta-2026-07-28].json").read_text()


def test_a_snapshot_recorded_under_the_earlier_name_is_still_read(project: pytest.Pytester) -> None:
    """A test of a class was ``<test>[<era>].json`` before it was ``<Class>.<test>[<era>].json``: that file is
    compared until the new one is recorded; a parametrized test never falls back (its old file was shared)."""
    project.makepyfile(
        test_kept=TWO_SERVERS
        + textwrap.dedent(
            """
            class TestOne:
                @pytest.fixture
                def mcp_server(self):
                    return make("one")

                async def test_surface(self, mcp_client, mcp_snapshot):
                    await mcp_snapshot.check(mcp_client)

            @pytest.fixture(params=["two"])
            def mcp_server(request):
                return make(request.param)

            async def test_params(mcp_client, mcp_snapshot):
                await mcp_snapshot.check(mcp_client)
            """
        )
    )
    folder = project.path / "__snapshots__" / "test_kept"
    folder.mkdir(parents=True)
    one = '{\n  "prompts": [],\n  "resourceTemplates": [],\n  "resources": [],\n  "tools": [{"name": "one"}]\n}\n'
    args = ("--mcp-transports=memory", "--mcp-eras=2025-11-25")
    run(project, *args, "--mcp-update-snapshots", "-k", "TestOne").assert_outcomes(passed=1)
    recorded = folder / "TestOne.test_surface[2025-11-25].json"
    (folder / "test_surface[2025-11-25].json").write_text(recorded.read_text())
    (folder / "test_params[2025-11-25].json").write_text(one)
    recorded.unlink()
    result = run(project, *args)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*no surface snapshot at *test_params?two-2025-11-25?.json yet*"])
    assert not recorded.exists()
    run(project, *args, "--mcp-update-snapshots").assert_outcomes(passed=2)
    assert recorded.exists() and (folder / "test_params[two-2025-11-25].json").exists()


def test_a_leaked_task_fails_the_test_in_teardown_unless_the_check_is_off(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_user_leak=textwrap.dedent(
            """
            import asyncio

            async def test_leaky(mcp_client):
                asyncio.get_running_loop().create_task(asyncio.sleep(30), name="left-running")
            """
        )
    )
    leaky = run(project, "--mcp-transports=memory", "--mcp-eras=modern")
    leaky.assert_outcomes(passed=1, errors=1)
    leaky.stdout.fnmatch_lines(["*left behind:*", "*task left-running running sleep*"])
    off = run(project, "--mcp-transports=memory", "--mcp-eras=modern", "-o", "mcp_leak_check=false")
    off.assert_outcomes(passed=1)


def test_a_child_process_a_tool_leaves_behind_is_named_then_ended(project: pytest.Pytester) -> None:
    """The leak check named a process a tool started and left running, but left it running: it outlived the test
    run. It is now ended after the report (SIGTERM, then SIGKILL), on memory and over HTTP, and still named."""
    project.makepyfile(
        spawner=textwrap.dedent(
            """
            import subprocess

            from mcpkit import MCPKit

            app = MCPKit("spawner")


            @app.tool
            def spawn() -> int:
                \"\"\"Start a helper and forget it.\"\"\"
                return subprocess.Popen(["sleep", "60"]).pid
            """
        ),
        test_user_spawn=textwrap.dedent(
            """
            import pytest

            @pytest.mark.mcp(server="spawner.py:app")
            async def test_spawn(mcp_client, mcp_transport):
                pid = (await mcp_client.call_tool("spawn")).data
                with open(f"pid-{mcp_transport}", "w") as fh:
                    fh.write(str(pid))
            """
        ),
    )
    result = run(project, "--mcp-transports=memory,http", "--mcp-eras=modern")
    result.assert_outcomes(passed=2, errors=2)
    for transport in ("memory", "http"):
        pid = int((project.path / f"pid-{transport}").read_text())
        result.stdout.fnmatch_lines(
            [
                "*left behind:*",
                f"*child process {pid} running: sleep 60*",
                "*the child processes were ended after this check: SIGTERM, then SIGKILL after 1 s*",
            ]
        )
        assert not _alive(pid), f"the leaked process {pid} outlived the run"


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not count: it has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_the_requirement_report_records_each_test_with_its_ids(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_user_reqs=textwrap.dedent(
            """
            import pytest

            @pytest.mark.req("M079", "S001")
            def test_proves():
                pass

            @pytest.mark.req("M001")
            def test_fails():
                assert False
            """
        )
    )
    report = project.path / "out" / "reqs.json"
    run(project, f"--mcp-requirements-report={report}").assert_outcomes(passed=1, failed=1)
    tests: dict[str, Any] = json.loads(report.read_text())["tests"]
    assert tests == {
        "test_user_reqs.py::test_fails": {"reqs": ["M001"], "outcome": "failed"},
        "test_user_reqs.py::test_proves": {"reqs": ["M079", "S001"], "outcome": "passed"},
    }


def test_a_bad_marker_argument_fails_the_collection_naming_the_keywords(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_user_badmark=textwrap.dedent(
            """
            import pytest

            @pytest.mark.mcp(transport="memory")
            async def test_x(mcp_client):
                pass
            """
        )
    )
    result = run(project)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["@pytest.mark.mcp takes * as keywords, not ?'transport'?"])


def test_a_marker_may_name_a_revision_the_default_run_leaves_out(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_user_old=textwrap.dedent(
            """
            import pytest

            @pytest.mark.mcp(transports="memory", eras=["2024-11-05", "modern"])
            async def test_old(mcp_client, mcp_era):
                assert mcp_client.protocol_version == mcp_era
            """
        )
    )
    result = run(project, "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_old?memory-2024-11-05? PASSED*", "*test_old?memory-2026-07-28? PASSED*"])
    run(project, "--mcp-eras=2025-11-25").assert_outcomes(skipped=1)  # the run's choice narrows the marker's


def test_the_summary_counts_a_run_that_failed_its_setup_or_teardown_as_an_error_not_a_pass(
    project: pytest.Pytester,
) -> None:
    # pytest itself reports a test whose teardown failed as "1 passed, 1 error"; the table of runs must not show
    # that run as green, nor leave out a run whose setup failed (here: a server file that does not exist)
    project.makepyfile(
        test_user_errors=textwrap.dedent(
            """
            import asyncio
            import pytest

            async def test_leaky(mcp_client):
                asyncio.get_running_loop().create_task(asyncio.sleep(30), name="left-running")

            @pytest.mark.mcp(server="nope.py:app")
            async def test_no_server(mcp_client):
                pass

            async def test_add(mcp_client):
                assert (await mcp_client.call_tool("add", {"a": 1, "b": 2})).data == 3

            async def test_wrong(mcp_client):
                assert (await mcp_client.call_tool("add", {"a": 1, "b": 2})).data == 4
            """
        )
    )
    result = run(project, "--mcp-transports=memory", "--mcp-eras=modern,handshake")
    result.assert_outcomes(passed=4, failed=2, errors=4)
    result.stdout.fnmatch_lines(
        [
            "mcpkit: 8 test runs over 1 transport(s) x 2 era(s) (2 passed, 2 failed, 4 errors)",
            "  memory  2025-11-25 1/4  2026-07-28 1/4",
        ]
    )


def test_a_plain_def_tool_that_never_returns_fails_its_test_and_does_not_hang_the_run(project: pytest.Pytester) -> None:
    # the server runs in the test's event loop (memory, http): the loop's close used to wait for the tool's
    # worker thread for ever; now the run goes on, and the leak check names the tool still running
    project.makepyfile(
        stuck_server=textwrap.dedent(
            '''
            import time

            from mcpkit import MCPKit

            app = MCPKit("stuck")


            @app.tool
            def stuck() -> str:
                """Never returns."""
                time.sleep(3600)
                return "never"
            '''
        ),
        test_user_stuck=textwrap.dedent(
            """
            import pytest

            @pytest.mark.mcp(server="stuck_server.py:app", client={"timeout": 1})
            async def test_stuck(mcp_client):
                await mcp_client.call_tool("stuck")
            """
        ),
    )
    result = run(project, "--mcp-transports=memory,http", "--mcp-eras=handshake", timeout=120)
    result.assert_outcomes(failed=2, errors=2)
    result.stdout.fnmatch_lines(["*left behind:*", "*a worker thread still running tool 'stuck'*"])


def test_a_conformance_check_that_meets_a_tool_that_never_returns_ends_and_names_it(project: pytest.Pytester) -> None:
    # mcpkit check calls the tools that look safe; one that never returns (a plain def, on a worker thread) used to
    # hold the test's event loop at its close for ever, as with the client fixtures
    project.makepyfile(
        stuck_server=textwrap.dedent(
            '''
            import time

            from mcpkit import MCPKit

            app = MCPKit("stuck")


            @app.tool
            def lookup(key: str) -> str:
                """Never returns."""
                time.sleep(3600)
                return key
            '''
        ),
        test_user_stuck=textwrap.dedent(
            """
            import pytest

            @pytest.mark.mcp(server="stuck_server.py:app")
            async def test_conformant(mcp_conformance):
                await mcp_conformance(timeout=1)
            """
        ),
    )
    result = run(project, timeout=150)
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(["*a worker thread still running tool 'lookup'*"])
    result.stdout.fnmatch_lines(["*M068 (MUST)*", "*tools/call lookup*no response within*"])
