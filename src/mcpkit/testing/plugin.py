"""mcpkit's pytest plugin (registered through the ``pytest11`` entry point; ``pip install 'mcpkit[testing]'``).

Name the server once, then ask for a client::

    # pyproject.toml
    [tool.pytest.ini_options]
    mcp_server = "weather/server.py:app"          # or "weather.server:app"; or a fixture named mcp_server

    # tests/test_weather.py
    async def test_forecast(mcp_client):
        result = await mcp_client.call_tool("forecast", {"city": "Oslo"})
        assert not result.is_error

Every test that uses ``mcp_client`` runs once per transport (``memory``, ``stdio``, ``http``, ``sse``, ``ws``) and
era (``2025-11-25``, ``2026-07-28``): ``test_forecast[http-2026-07-28]``. A test says what it applies to with
``@pytest.mark.mcp(transports=[...], eras=[...])`` (any revision, ``2024-11-05`` included); a run narrows what it
covers with ``--mcp-transports`` / ``--mcp-eras`` (or the ``mcp_transports`` / ``mcp_eras`` ini options); a test
runs on what both allow.

Fixtures: ``mcp_client`` (connected, parametrized), ``mcp_server`` (the server: the ini option, ``--mcp-server``,
the marker's ``server=``, or your own fixture), ``mcp_transport`` and ``mcp_era`` (this run's), ``mcp_script``
(:class:`~mcpkit.testing.Scripted`: the marker's ``sampling=``, ``elicitation=``, ``roots=``), ``mcp_traffic``
(:class:`~mcpkit.testing.Traffic` on the client's tap), ``mcp_client_options`` (override it to pass more
``Client`` options), ``mcp_snapshot`` (the surface snapshot of this test, per era; ``--mcp-update-snapshots``
records it), ``mcp_conformance`` (``await mcp_conformance()``: ``mcpkit check`` against the server, failing on
MUST violations), ``mcp_asgi`` / ``mcp_asgi_client`` (your ASGI app, from a fixture named ``mcp_asgi_app``,
served on 127.0.0.1; the client on the marker's ``path=`` or the ``mcp_asgi_path`` ini option, default ``/mcp``),
``mcp_leaks`` (a :class:`~mcpkit.testing.LeakProbe`; every client fixture checks, after it stopped, that no task,
child process or listening socket was left behind: ``mcp_leak_check = false`` turns that off).

Requirement tracing: ``@pytest.mark.req("M023", ...)`` names the requirement IDs a test proves;
``--mcp-requirements-report PATH`` (or the ``mcp_requirements_report`` ini option, or the
``MCPKIT_COMPLIANCE_RESULTS`` environment variable) writes each test's IDs and outcome there as JSON.

The plugin loads with pytest wherever mcpkit is installed and costs nothing until a test uses its fixtures; they
need pytest-asyncio (in the ``testing`` extra).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._eras import ERAS, TRANSPORTS, check_transport, era_revision

if TYPE_CHECKING:
    from .conformance import McpConformance
    from .snapshot import McpSnapshot

pytest_asyncio: Any
try:
    import pytest_asyncio
except ImportError:  # (mcpkit without its testing extra: the plugin is loaded all the same)
    pytest_asyncio = None


_MISSING_ASYNCIO = "mcpkit's pytest fixtures need pytest-asyncio: pip install 'mcpkit[testing]'"
_REQ_KEY = "mcpkit_req"
_RUNS = pytest.StashKey["_Runs"]()
_RUN_KEY = "mcpkit_run"
_MARKER_KEYS = {"transports", "eras", "server", "sampling", "elicitation", "roots", "path", "client"}


# ---------------------------------------------------------------------------------------------- options


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mcpkit", "mcpkit testing kit")
    group.addoption(
        "--mcp-transports",
        default=None,
        help=f"comma-separated transports the mcp_client tests run on (default: all: {','.join(TRANSPORTS)})",
    )
    group.addoption(
        "--mcp-eras",
        default=None,
        help=f"comma-separated eras: revisions, 'handshake' or 'modern' (default: {','.join(ERAS)})",
    )
    group.addoption("--mcp-server", default=None, help="the server: file.py[:name] or package.module[:name]")
    group.addoption(
        "--mcp-update-snapshots", action="store_true", help="record the surface snapshots instead of comparing"
    )
    group.addoption(
        "--mcp-requirements-report", default=None, metavar="PATH", help="write each test's req IDs and outcome"
    )
    parser.addini("mcp_server", "the server the mcp fixtures test (file.py[:name] or package.module[:name])")
    parser.addini("mcp_transports", "transports the mcp_client tests run on", type="args", default=[])
    parser.addini("mcp_eras", "eras the mcp_client tests run in", type="args", default=[])
    parser.addini("mcp_asgi_path", "the MCP endpoint's path in the app of mcp_asgi_app", default="/mcp")
    parser.addini("mcp_leak_check", "check for leaked tasks, processes and ports", type="bool", default=True)
    parser.addini("mcp_requirements_report", "where to write the req IDs and outcome of each test", default="")


def _listed(value: str | None, ini: list[str]) -> list[str] | None:
    if value:
        return [part.strip() for part in value.split(",") if part.strip()]
    parts = [part for item in ini for part in item.split(",") if part]
    return parts or None


def _chosen(config: pytest.Config) -> tuple[list[str] | None, list[str] | None]:
    """The transports and eras this run was told to cover (options, else ini), checked; None where it was not."""
    transports = _listed(config.getoption("--mcp-transports"), config.getini("mcp_transports"))
    eras = _listed(config.getoption("--mcp-eras"), config.getini("mcp_eras"))
    try:
        return (
            [check_transport(t) for t in transports] if transports else None,
            list(dict.fromkeys(era_revision(e) for e in eras)) if eras else None,
        )
    except ValueError as exc:
        raise pytest.UsageError(f"mcpkit: {exc}") from None


def _selected(config: pytest.Config) -> tuple[list[str], list[str]]:
    """The transports and eras this run covers: as told, else all transports and both eras."""
    transports, eras = _chosen(config)
    return transports or list(TRANSPORTS), eras or list(ERAS)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mcp(transports=None, eras=None, server=None, sampling=None, elicitation=None, roots=None, path=None, "
        "client=None): how mcpkit's fixtures run this test (the transports and eras it applies to, its server, "
        "scripted client answers, the ASGI endpoint's path, more Client options)",
    )
    config.addinivalue_line("markers", "req(*ids): the requirement IDs this test proves (requirement tracing)")
    _selected(config)  # (a wrong transport or era in the options is a usage error before anything runs)
    runs = config.stash[_RUNS] = _Runs()
    config.pluginmanager.register(runs, f"mcpkit-runs-{id(config)}")
    path = _report_path(config)
    if path is not None and not hasattr(config, "workerinput") and not config.option.collectonly:
        config.pluginmanager.register(_RequirementRecorder(path), "mcpkit-requirement-recorder")


def pytest_report_header(config: pytest.Config) -> str | None:
    given = [config.getoption("--mcp-transports"), config.getini("mcp_transports")]
    if not any([*given, config.getoption("--mcp-eras"), config.getini("mcp_eras")]):
        return None
    transports, eras = _selected(config)
    return f"mcpkit: transports {', '.join(transports)}; eras {', '.join(eras)}"


# ---------------------------------------------------------------------------------------------- parametrization


def _marker(node: Any) -> dict[str, Any]:
    """The ``mcp`` markers' arguments, the closest first (a test's over its class's and module's)."""
    merged: dict[str, Any] = {}
    for mark in reversed(list(node.iter_markers("mcp"))):
        unknown = set(mark.kwargs) - _MARKER_KEYS
        if unknown or mark.args:
            pytest.fail(
                f"@pytest.mark.mcp takes {', '.join(sorted(_MARKER_KEYS))} as keywords, not {sorted(unknown)}"
                + (f" or positional arguments {mark.args!r}" if mark.args else ""),
                pytrace=False,
            )
        merged.update(mark.kwargs)
    return merged


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    names = metafunc.fixturenames
    if "mcp_transport" not in names and "mcp_era" not in names:
        return
    run_transports, run_eras = _chosen(metafunc.config)
    transports, eras = run_transports or list(TRANSPORTS), run_eras or list(ERAS)
    marker = _marker(metafunc.definition)
    try:  # the marker's lists, narrowed by what the run was told to cover (if it was)
        if marker.get("transports") is not None:
            wanted = [check_transport(t) for t in _as_list(marker["transports"])]
            transports = [t for t in dict.fromkeys(wanted) if run_transports is None or t in run_transports]
        if marker.get("eras") is not None:
            wanted = [era_revision(e) for e in _as_list(marker["eras"])]
            eras = [e for e in dict.fromkeys(wanted) if run_eras is None or e in run_eras]
    except ValueError as exc:
        pytest.fail(f"{metafunc.definition.nodeid}: @pytest.mark.mcp: {exc}", pytrace=False)
    combos: list[tuple[str | None, str | None]] = []
    with_transport = "mcp_transport" in names
    for transport in transports if with_transport else [None]:
        for era in eras if "mcp_era" in names else [None]:
            combos.append((transport, era))
    argnames = [n for n, used in (("mcp_transport", with_transport), ("mcp_era", "mcp_era" in names)) if used]
    params = []
    for transport, era in combos:
        values = [v for v in (transport, era) if v is not None]
        params.append(pytest.param(*values, id="-".join(values)))
    if not params:
        skip = pytest.mark.skip(reason="mcpkit: none of this run's transports and eras applies to this test")
        params = [pytest.param(*([None] * len(argnames)), id="none", marks=[skip])]
    metafunc.parametrize(argnames, params)


_FIXTURES = frozenset(
    (
        "mcp_client",
        "mcp_asgi",
        "mcp_asgi_client",
        "mcp_conformance",
        "mcp_leaks",
        "mcp_snapshot",
        "mcp_transport",
        "mcp_era",
    )
)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> Any:
    """An ``async def`` test that uses the kit's fixtures is an asyncio test in pytest-asyncio's strict mode too
    (marked before pytest-asyncio's own wrapper, outside this one, looks at the items)."""
    result = yield
    if pytest_asyncio is None or not inspect.iscoroutinefunction(obj):
        return result
    for item in result if isinstance(result, list) else [result]:
        is_ours = isinstance(item, pytest.Function) and _FIXTURES.intersection(item.fixturenames)
        if is_ours and item.get_closest_marker("asyncio") is None:
            item.add_marker(pytest.mark.asyncio)
    return result


class _Runs:
    """The runs of the parametrized tests per transport and era, and the snapshots written: what the terminal
    summary shows (one per session; the controlling process's, with pytest-xdist). A run is counted by its worst
    phase: a setup or teardown that failed makes it an error, as pytest counts it, even when its body passed."""

    def __init__(self) -> None:
        self.outcomes: dict[str, tuple[tuple[str, str | None], str]] = {}  # node id -> (transport, era), outcome
        self.snapshots: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        run = next(
            (
                (str(value[0]), None if value[1] is None else str(value[1]))
                for key, value in report.user_properties
                if key == _RUN_KEY and isinstance(value, (list, tuple)) and len(value) == 2
            ),
            None,
        )
        if run is None:
            return
        known = self.outcomes.get(report.nodeid)
        if report.when == "call" or known is None:
            outcome = "error" if report.failed and report.when != "call" else report.outcome
        elif report.failed and known[1] != "failed":
            outcome = "error"  # a teardown that failed after a body that passed (or was skipped)
        else:
            return
        self.outcomes[report.nodeid] = (run, outcome)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        runs: dict[tuple[str, str | None], Counter[str]] = {}
        for run, outcome in self.outcomes.values():
            runs.setdefault(run, Counter())[outcome] += 1
        if runs:
            total = sum(sum(counts.values()) for counts in runs.values())
            every = sum(runs.values(), Counter())
            tally = ", ".join(
                f"{every[outcome]} {outcome if outcome != 'error' or every[outcome] == 1 else 'errors'}"
                for outcome in ("passed", "failed", "error")
                if every[outcome] or outcome == "passed"
            )
            transports = sorted({t for t, _ in runs}, key=lambda t: TRANSPORTS.index(t) if t in TRANSPORTS else 99)
            eras = sorted({e for _, e in runs if e is not None})
            terminalreporter.write_sep("-", "mcpkit transports and eras")
            terminalreporter.write_line(
                f"mcpkit: {total} test runs over {len(transports)} transport(s) x {len(eras)} era(s) ({tally})"
            )
            for transport in transports:
                cells = [
                    f"{era} {runs[(transport, era)]['passed']}/{sum(runs[(transport, era)].values())}"
                    for era in eras
                    if (transport, era) in runs
                ]
                terminalreporter.write_line(f"  {transport:<7} " + "  ".join(cells))
        if self.snapshots:
            terminalreporter.write_line(f"mcpkit: {len(self.snapshots)} surface snapshot(s) written:")
            for path in self.snapshots:
                terminalreporter.write_line(f"  {path}")


# ---------------------------------------------------------------------------------------------- fixtures


def _async_fixture(fn: Callable[..., Any]) -> Any:
    """An asyncio fixture with pytest-asyncio; without it, a fixture that fails naming the extra."""
    if pytest_asyncio is not None:
        return pytest_asyncio.fixture(fn)

    def missing(request: pytest.FixtureRequest) -> None:
        pytest.fail(_MISSING_ASYNCIO, pytrace=False)

    missing.__name__ = fn.__name__
    missing.__doc__ = fn.__doc__
    return pytest.fixture(name=fn.__name__)(missing)


@pytest.fixture
def mcp_server(request: pytest.FixtureRequest) -> Any:
    """The server under test: the ``mcp`` marker's ``server=``, else ``--mcp-server``, else the ``mcp_server`` ini
    option (a file ``server.py[:name]`` or an import path ``package.module[:name]``). Define a fixture of this
    name to give a server object instead."""
    server = _marker(request.node).get("server") or request.config.getoption("--mcp-server")
    server = server or request.config.getini("mcp_server")
    if not server:
        pytest.fail(
            'mcpkit: which server? Set mcp_server in the pytest configuration (mcp_server = "server.py:app"), '
            "pass --mcp-server, mark the test @pytest.mark.mcp(server=...), or define a fixture named mcp_server",
            pytrace=False,
        )
    if server == request.config.getini("mcp_server"):
        server = _relative_to_ini(request.config, server)  # (a file in the ini is relative to the ini file)
    return server


def _relative_to_ini(config: pytest.Config, server: str) -> str:
    from ._load import is_file_spec, split_spec

    where, name = split_spec(server)
    base = Path(str(config.inipath)).parent if config.inipath is not None else Path(str(config.rootpath))
    if not is_file_spec(where) or Path(where).is_absolute() or not (base / where).exists():
        return server
    return str(base / where) + (f":{name}" if name else "")


@pytest.fixture
def mcp_script(request: pytest.FixtureRequest) -> Any:
    """The :class:`~mcpkit.testing.Scripted` answers the client gives the server: from the ``mcp`` marker's
    ``sampling=``, ``elicitation=`` and ``roots=`` (nothing scripted by default: no sampling, elicitation or roots
    capability). Override it to script in Python."""
    from .scripted import Scripted

    marker = _marker(request.node)
    return Scripted(sampling=marker.get("sampling"), elicitation=marker.get("elicitation"), roots=marker.get("roots"))


@pytest.fixture
def mcp_traffic() -> Any:
    """A :class:`~mcpkit.testing.Traffic` recorder, installed as the tap of the client fixtures: every message the
    client sent and received."""
    from .traffic import Traffic

    return Traffic()


@pytest.fixture
def mcp_client_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """More ``Client`` options for the client fixtures (the ``mcp`` marker's ``client={...}``); override it to
    give handlers, timeouts and the like."""
    return dict(_marker(request.node).get("client") or {})


@_async_fixture
async def mcp_leaks(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """A :class:`~mcpkit.testing.LeakProbe` taken before the test's servers and clients start; after they
    stopped, fails the test if a task, a child process or a listening socket is left (the ``mcp_leak_check`` ini
    option turns the check off)."""
    from .leaks import LeakProbe

    probe = LeakProbe.take()
    yield probe
    if request.config.getini("mcp_leak_check"):
        await probe.assert_clean()


def _client_options(script: Any, traffic: Any, options: dict[str, Any]) -> dict[str, Any]:
    return {**script.client_options(), "tap": traffic, **options}


@_async_fixture
async def mcp_client(
    mcp_leaks: Any,
    mcp_server: Any,
    mcp_transport: str,
    mcp_era: str,
    mcp_script: Any,
    mcp_traffic: Any,
    mcp_client_options: dict[str, Any],
) -> AsyncIterator[Any]:
    """A :class:`~mcpkit.Client` connected to ``mcp_server`` over ``mcp_transport`` in ``mcp_era``, with the
    scripted answers of ``mcp_script`` and ``mcp_traffic`` as its tap; everything it started is stopped after the
    test (and checked by ``mcp_leaks``)."""
    from .serving import connect

    options = _client_options(mcp_script, mcp_traffic, mcp_client_options)
    async with connect(mcp_server, mcp_transport, mcp_era, **options) as client:
        yield client


@pytest.fixture
def mcp_asgi_app() -> Any:
    """Your ASGI app (a Starlette or FastAPI app with the MCP endpoint mounted): define a fixture of this name."""
    pytest.fail("mcpkit: define a fixture named mcp_asgi_app that returns the ASGI app to serve", pytrace=False)


@_async_fixture
async def mcp_asgi(mcp_leaks: Any, mcp_asgi_app: Any) -> AsyncIterator[Any]:
    """``mcp_asgi_app`` served on 127.0.0.1 (a free port) behind mcpkit's connection guard and limits, its
    lifespan run: a :class:`~mcpkit.testing.Served` (``.url`` is the app's root)."""
    from .serving import serve_asgi

    async with serve_asgi(mcp_asgi_app) as served:
        yield served


@_async_fixture
async def mcp_asgi_client(
    request: pytest.FixtureRequest,
    mcp_asgi: Any,
    mcp_era: str,
    mcp_script: Any,
    mcp_traffic: Any,
    mcp_client_options: dict[str, Any],
) -> AsyncIterator[Any]:
    """A :class:`~mcpkit.Client` connected to the MCP endpoint of ``mcp_asgi`` (the ``mcp`` marker's ``path=``,
    else the ``mcp_asgi_path`` ini option, default ``/mcp``), in ``mcp_era``."""
    path = _marker(request.node).get("path") or request.config.getini("mcp_asgi_path")
    options = _client_options(mcp_script, mcp_traffic, mcp_client_options)
    async with mcp_asgi.client(path, era=mcp_era, **options) as client:
        yield client


def _snapshot_names(request: pytest.FixtureRequest) -> tuple[str, str | None]:
    """The file name (without ``.json``) of this test's snapshot, and the name it had before snapshots were named
    per parameter and per class (``<test>[<era>]``), for a test that no parameter of its own tells apart (else
    None). The name is the test's node name (its parameter ids included) without the transport, which every
    transport shares: ``test[alpha-2025-11-25]`` for ``test[alpha-memory-2025-11-25]``."""
    node = request.node
    original = getattr(node, "originalname", node.name)
    ids = node.name[len(original) + 1 : -1] if node.name.startswith(original + "[") else ""
    chosen = {n: request.getfixturevalue(n) for n in ("mcp_transport", "mcp_era") if n in request.fixturenames}
    era = chosen.get("mcp_era")
    ours = "-".join(str(v) for v in chosen.values() if v is not None)  # (the id pytest_generate_tests gave)
    tokens, mine = ids.split("-") if ids else [], ours.split("-") if ours else []
    for at in range(len(tokens) - len(mine), -1, -1):
        if mine and tokens[at : at + len(mine)] == mine:
            tokens[at : at + len(mine)] = [era] if era else []
            break
    own_ids = "-".join(tokens) != (era or "")
    name = original + (f"[{'-'.join(tokens)}]" if tokens else "")
    if request.cls is not None:
        name = f"{request.cls.__qualname__}.{name}"
    name = name.replace("/", "_").replace("\\", "_")  # (an id is never a path: 'a/../b' stays in the folder)
    if len(name.encode()) > 200:  # (most file systems take 255 bytes a name)
        name = f"{name[:120]}~{hashlib.sha256(name.encode()).hexdigest()[:16]}"
    earlier = original + (f"[{era}]" if era else "")
    return name, (earlier if not own_ids and earlier != name else None)


@pytest.fixture
def mcp_snapshot(request: pytest.FixtureRequest) -> McpSnapshot:
    """This test's surface snapshot: ``__snapshots__/<module>/<test>[<params>-<era>].json`` next to the test file,
    named after the test's node name without the transport (every transport compares with the same file; a test
    parametrized over servers, or over anything, keeps one file per parameter; a test of a class is
    ``<Class>.<test>[...]``, so two classes, each with its server, keep their own). A test with no parameter of
    its own still reads a file recorded under its earlier name, ``<test>[<era>].json``, until the new one is
    recorded. ``await mcp_snapshot.check(mcp_client)`` fails when the server's tools, resources or prompts
    changed; ``--mcp-update-snapshots`` records them."""
    node = request.node
    name, earlier = _snapshot_names(request)
    folder = Path(str(node.path)).parent / "__snapshots__" / Path(str(node.path)).stem
    path = folder / f"{name}.json"
    update = bool(request.config.getoption("--mcp-update-snapshots"))
    read_from = None
    if not update and earlier is not None and not path.is_file() and (folder / f"{earlier}.json").is_file():
        read_from = folder / f"{earlier}.json"
    from .snapshot import McpSnapshot

    return McpSnapshot(path, update, request.config.stash[_RUNS].snapshots, read_from=read_from)


@pytest.fixture
def mcp_conformance(request: pytest.FixtureRequest, mcp_leaks: Any) -> McpConformance:
    """``await mcp_conformance(server=None, *, fail_on="must", transport="http", ...)``: run ``mcpkit check``
    against the server (default: ``mcp_server``) and fail the test on the requirements it breaks, naming them
    with their evidence (:func:`~mcpkit.testing.assert_conformant`); returns the report. What the served server
    leaves behind is checked by ``mcp_leaks``, as for the client fixtures."""
    from .conformance import McpConformance

    return McpConformance(lambda: request.getfixturevalue("mcp_server"))


# ---------------------------------------------------------------------------------------------- requirements


def _report_path(config: pytest.Config) -> Path | None:
    given = (
        config.getoption("--mcp-requirements-report")
        or os.environ.get("MCPKIT_COMPLIANCE_RESULTS")
        or config.getini("mcp_requirements_report")
    )
    if not given:
        return None
    path = Path(given)
    return path if path.is_absolute() else Path(str(config.rootpath)) / path


def _req_ids(item: pytest.Item) -> list[str]:
    ids: list[str] = []
    for mark in item.iter_markers(name="req"):
        for arg in mark.args:
            for part in str(arg).replace(",", " ").split():
                if part not in ids:
                    ids.append(part)
    return sorted(ids)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    recording = _report_path(config) is not None
    for item in items:
        # (user properties travel with the reports to the controlling process of pytest-xdist)
        callspec = getattr(item, "callspec", None)
        if callspec is not None and callspec.params.get("mcp_transport") is not None:
            item.user_properties.append((_RUN_KEY, (callspec.params["mcp_transport"], callspec.params.get("mcp_era"))))
        if recording:
            item.user_properties.append((_REQ_KEY, _req_ids(item)))


class _RequirementRecorder:
    """Each test's requirement IDs and outcome, written as JSON when the session ends (by the controlling process
    only, with or without pytest-xdist)."""

    def __init__(self, path: Path) -> None:
        self.path = path
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
                entry["outcome"] = report.outcome
        elif report.when == "teardown" and report.failed and entry["outcome"] != "failed":
            entry["outcome"] = "error"

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.tests:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "pytest_exitstatus": int(exitstatus),
            "tests": dict(sorted(self.tests.items())),
        }
        # A name of this process's own: two sessions writing the same results (two pytest runs in one tree, or
        # xdist's controller and a plain run) never rename each other's file away.
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
        tmp.replace(self.path)
