"""Shared pytest setup for mcpkit.

* mcpkit's own testing kit (:mod:`mcpkit.testing.plugin`) provides the ``req`` marker and its recorder: each test's
  requirement IDs and outcome go to ``.compliance/results.json`` (the ``mcp_requirements_report`` ini option in
  pyproject.toml; ``MCPKIT_COMPLIANCE_RESULTS`` overrides it), read by ``scripts/compliance.py``; and the ``mcp_*``
  fixtures the kit's own tests use. It is named here as well as registered by the package's ``pytest11`` entry
  point, so a development install made before the entry point existed still loads it (pytest loads it once).
  ``pytester`` runs the plugin's own tests.
* Fixtures: ``free_port`` (call it: ``port = free_port()``), ``node_bin`` (Node >= 22 from
  ``tests/node_modules``), ``npm_bin_dir`` (``tests/node_modules/.bin``).
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support import typecheck

pytest_plugins = ["mcpkit.testing.plugin", "pytester"]

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
NODE_MODULES = TESTS_DIR / "node_modules"

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


@pytest.fixture(scope="session")
def pyright_js(node_bin: Path) -> Path:
    """The pinned ``pyright`` type checker's entry script (run it with ``node_bin``)."""
    path = NODE_MODULES / "pyright" / "index.js"
    if not path.is_file():
        _missing_npm_peers(str(path))
    return path


@pytest.fixture(scope="session", autouse=True)
def _mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One mypy cache for this worker's ``mypy --strict`` runs (support.typecheck.MYPY_CACHE): a dozen tests
    type-check a small program against mcpkit, and each analysed all of mcpkit again with a fresh cache."""
    typecheck.MYPY_CACHE = tmp_path_factory.mktemp("mypy-cache")
    yield
    typecheck.MYPY_CACHE = None


@pytest.fixture(autouse=True)
def _process_signal_handlers() -> Iterator[None]:
    """Each test leaves SIGTERM/SIGINT as it found them. uvicorn's ``serve()`` points them at the server while it
    runs and restores them when it returns; two servers whose lives overlap restore out of order and leave them on
    a stopped server. Third-party code reads that handler: sse-starlette (the official SDK's SSE) ends every SSE
    stream of the process when the server it finds there says ``should_exit``, so one test's leftover broke every
    later test of the official server's SSE. A handler left on a stopped server by a fixture of a wider scope is
    put back to the default before the test."""
    for sig, default in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGINT, signal.default_int_handler)):
        owner = getattr(signal.getsignal(sig), "__self__", None)
        if getattr(owner, "should_exit", False) is True:
            signal.signal(sig, default)
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in before.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)
