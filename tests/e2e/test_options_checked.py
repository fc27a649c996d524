"""Every option of ``MCPKit``, ``app.run``, ``create_app``, ``build_server`` and ``Client`` is a named, typed
parameter checked when it is given: a misspelling is a ``TypeError`` naming the closest valid option, raised at
startup, never a server that serves and fails later (an HTTP 500 at every handshake-era ``initialize``)."""

from __future__ import annotations

import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mcpkit import Client, MCPKit
from mcpkit.server.lowlevel import Server
from support.paths import REPO
from support.typecheck import mypy_strict

ROOT = REPO


def _run_python(code: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter; a program that serves instead of failing is killed at ``timeout`` and
    reported with return code 124."""
    try:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return subprocess.CompletedProcess(exc.cmd, 124, "", out + "\n(still serving: killed)")


def test_a_misspelled_http_run_option_stops_the_program_before_it_serves() -> None:
    """``app.run("http", port=0, prot=8000)``: a TypeError naming ``port``, at once; nothing listens."""
    proc = _run_python(
        """
        from mcpkit import MCPKit
        app = MCPKit("typo")
        app.run("http", port=0, prot=8000)
        """,
        timeout=20,
    )
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("TypeError") and "'prot'" in last and "did you mean 'port'?" in last
    assert "serving" not in proc.stderr


def test_an_http_option_given_to_stdio_says_which_transport_takes_it() -> None:
    app = MCPKit("typo")
    with pytest.raises(TypeError, match=r"'port'.*HTTP transports.*app\.run\('http', port=\.\.\.\)"):
        app.run(port=8000)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="did you mean 'max_message_size'"):
        app.run(max_mesage_size=10)  # type: ignore[call-overload]


def test_a_misspelled_transport_mode_or_level_names_the_closest_value() -> None:
    app = MCPKit("typo")
    with pytest.raises(ValueError, match="did you mean 'http'"):
        app.run("htp")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="did you mean 'handshake'"):
        Client(app, mode="hanshake")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="did you mean 'warning'"):
        Client(app, log_level="warn")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="did you mean 'public'"):
        MCPKit("x", list_cache_scope="publc")  # type: ignore[arg-type]


def test_misspelled_constructor_options_name_the_closest_option() -> None:
    with pytest.raises(TypeError, match=r"MCPKit\(\) got an unknown option 'tittle'; did you mean 'title'\?"):
        MCPKit("x", tittle="X")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"Client\(\) got an unknown option 'timout'; did you mean 'timeout'\?"):
        Client(MCPKit("x"), timout=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"Server\(\) got an unknown option 'instruction'; did you mean"):
        Server("x", instruction="hi")  # type: ignore[call-arg]


def test_create_app_and_build_server_check_their_options_when_called() -> None:
    pytest.importorskip("uvicorn")
    from mcpkit.transports.http import build_server, create_app

    app = MCPKit("x")
    with pytest.raises(TypeError, match=r"create_app\(\) got an unknown option 'keepalvie'; did you mean 'keepalive'"):
        create_app(app, keepalvie=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="did you mean 'max_concurrency'"):
        create_app(app, max_concurency=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="did you mean 'header_timeout'"):
        build_server(app, "http", port=0, header_timout=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="did you mean 'port'"):
        build_server(app, "http", prot=0)  # type: ignore[call-arg]


def test_mcpkit_names_every_option_of_the_server_it_extends() -> None:
    """MCPKit's signature lists each option of Server (title, icons, versions, ...): an IDE shows them all."""
    server = set(inspect.signature(Server.__init__).parameters) - {"self"}
    mine = inspect.signature(MCPKit.__init__).parameters
    assert server <= set(mine)
    assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in mine.values())


def test_every_endpoint_option_is_declared_for_create_app() -> None:
    """The typed options create_app passes on are exactly the endpoint's (a new endpoint option must be declared,
    or a misspelling check would refuse it)."""
    pytest.importorskip("uvicorn")
    from mcpkit.transports.http.app import create_app
    from mcpkit.transports.http.options import AppOptions, EndpointOptions, keys
    from mcpkit.transports.http.streamable import StreamableHTTPEndpoint

    endpoint = set(inspect.signature(StreamableHTTPEndpoint.__init__).parameters) - {"self", "server", "peer_options"}
    named = set(inspect.signature(create_app).parameters) - {"server", "options"}
    engine = {
        "max_concurrency",
        "max_waiting",
        "max_waiting_bytes",
        "max_batch_size",
        "default_timeout",
        "max_timeout",
        "cancel_timeout",
    }
    assert keys(EndpointOptions) == (endpoint - named - {"check_request"}) | engine
    assert keys(AppOptions) == keys(EndpointOptions) | named


def test_type_checkers_reject_misspelled_options_and_unknown_names(tmp_path: Path) -> None:
    """``mypy --strict`` refuses a misspelled ``run`` option, an HTTP option given to stdio, an unknown mode, log
    level or transport (Literal types, per-transport overloads)."""
    pytest.importorskip("mypy")
    program = tmp_path / "wrong.py"
    program.write_text(
        textwrap.dedent(
            """
            from mcpkit import Client, MCPKit

            app = MCPKit("x")
            app.run("http", port=8766, prot=8000)
            app.run(port=8000)
            app.run("htp")
            Client(app, mode="legacy")
            Client(app, log_level="warn")
            """
        )
    )
    proc = mypy_strict(program, tmp_path)
    errors = {line.split(":")[1] for line in proc.stdout.splitlines() if ": error:" in line}
    assert errors == {"5", "6", "7", "8", "9"}, proc.stdout
