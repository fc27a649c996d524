"""Connecting where nothing listens gives one short line, ``ServerStartError``, with the socket's own error kept as
its cause (not four chained restatements of it); the error is exported and documented, as is debugging a server."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import mcpkit
from mcpkit import Client, ServerStartError
from support.paths import REPO

ROOT = REPO


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


@pytest.mark.parametrize("scheme", ["http", "ws"])
async def test_a_refused_connection_is_one_short_line_caused_by_the_socket_error(scheme: str) -> None:
    pytest.importorskip("httpx")
    port = _closed_port()
    url = f"{scheme}://127.0.0.1:{port}/{'ws' if scheme == 'ws' else 'mcp'}"
    with pytest.raises(ServerStartError) as caught:
        async with Client(url):
            pass
    error = caught.value
    assert str(error) == f"cannot connect to {url}: connection refused (is the server running, and on that port?)"
    assert isinstance(error.__cause__, ConnectionRefusedError)
    assert error.__cause__.__cause__ is None


def test_a_program_that_cannot_connect_prints_a_short_traceback_ending_in_one_line() -> None:
    pytest.importorskip("httpx")
    port = _closed_port()
    code = textwrap.dedent(
        f"""
        import asyncio
        from mcpkit import Client

        async def main():
            async with Client("http://127.0.0.1:{port}/mcp"):
                pass

        asyncio.run(main())
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1
    assert lines[-1] == (
        f"mcpkit.client.targets.ServerStartError: cannot connect to http://127.0.0.1:{port}/mcp: connection refused "
        "(is the server running, and on that port?)"
    )
    # the socket's error in one line, then ours with its traceback: no restatement by each layer in between
    assert lines[0].startswith("ConnectionRefusedError: [Errno 111]")
    assert proc.stderr.count("Traceback") == 1 and proc.stderr.count("The above exception") == 1 and len(lines) < 30


def test_server_start_error_is_exported_and_documented() -> None:
    assert mcpkit.ServerStartError is ServerStartError and "ServerStartError" in mcpkit.__all__
    page = (ROOT / "docs" / "guides" / "errors.md").read_text(encoding="utf-8")
    names = "ServerStartError ToolCallError ToolOutputError SessionExpired RequestTimeout CapabilityNotSupported"
    more = ("ElicitationContentError", "PaginationLimitExceeded", "MissingExtra", "InvalidServerResult")
    for name in (*names.split(), *more, "InputHandlerError"):
        assert f"`{name}`" in page, name
    for needle in ("MCPKit(debug=True)", "MCPKIT_DEBUG=1", "mcpkit run --dev", "error id"):
        assert needle in page, needle
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert re.search(r"Errors and debugging: guides/errors\.md", nav)


def test_the_docs_say_what_the_2026_deprecations_of_sampling_and_logging_mean() -> None:
    page = (ROOT / "docs" / "guides" / "eras.md").read_text(encoding="utf-8")
    start = page.index("## Deprecated in 2026-07-28")
    section = page[start : page.index("\n## ", start + 1)]
    assert "SEP-2577" in section
    for needle in ("Sampling", "Logging", "Roots", "deprecated", "stderr", "logLevel"):
        assert needle in section, needle


LEGACY_SERVER = textwrap.dedent(
    """
    from mcpkit import MCPKit
    from mcpkit.protocol.versions import HANDSHAKE_VERSIONS

    app = MCPKit("legacy", versions=HANDSHAKE_VERSIONS)

    @app.tool()
    def add(a: int, b: int) -> int:
        \"\"\"Add two integers.\"\"\"
        return a + b

    if __name__ == "__main__":
        app.run()
    """
)


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("forced", [{"mode": "modern"}, {"protocol_version": "2026-07-28"}])
async def test_forcing_2026_07_28_on_a_handshake_only_server_says_it_does_not_speak_that_revision(
    tmp_path: Path, transport: str, forced: dict[str, str]
) -> None:
    """A handshake-era server refuses server/discover in its own words (over HTTP 'Mcp-Session-Id header is
    required', over stdio 'Method not found'), which say nothing about eras: the client says the server does not
    seem to speak 2026-07-28 and how to connect anyway, keeping the server's words. Auto mode still falls back."""
    from mcpkit import ModernEraRefused
    from mcpkit.testing import serve

    path = tmp_path / "legacy.py"
    path.write_text(LEGACY_SERVER)
    async with contextlib.AsyncExitStack() as stack:
        if transport == "http":
            target: Any = (await stack.enter_async_context(serve(str(path)))).url
            said = "Mcp-Session-Id header is required"
        else:
            target = [sys.executable, str(path)]
            said = "Method not found"
        with pytest.raises(ModernEraRefused) as caught:
            async with Client(target, **forced):  # type: ignore[arg-type]
                pass
        error = caught.value
        assert str(error).startswith("the server does not seem to speak protocol 2026-07-28: "), str(error)
        assert said in str(error) and "server/discover" in str(error)
        if "mode" in forced:
            assert "mode='auto'" in str(error) and "mode='handshake'" in str(error)
        else:  # mode='handshake' would contradict the pin
            assert "protocol_version='2025-11-25'" in str(error) and "mode='handshake'" not in str(error)
        assert error.server_message and said in error.server_message
        assert isinstance(error.__cause__, mcpkit.MCPError)
        async with Client(target) as client:  # auto: probes, falls back to initialize
            assert client.protocol_version == "2025-11-25"
            assert (await client.call_tool("add", {"a": 2, "b": 3})).data == 5


@contextlib.asynccontextmanager
async def _database_down(app: mcpkit.MCPKit) -> Any:
    raise RuntimeError("the database is down")
    yield  # (never reached: the startup fails)


def _unstartable(kind: str) -> Any:
    """An in-process server whose startup fails: an app whose lifespan raises, or a proxy whose one upstream is
    a real process that exits at once."""
    if kind == "app":
        return mcpkit.MCPKit("unstartable", lifespan=_database_down)
    return mcpkit.proxy([sys.executable, "-c", "import sys; sys.exit('down')"])


@pytest.mark.parametrize("mode", ["auto", "handshake", "modern"])
@pytest.mark.parametrize("kind", ["app", "proxy"])
async def test_an_in_process_server_whose_startup_fails_fails_the_connect_at_once_with_its_error(
    kind: str, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``Client(server)`` serves the server in this loop: when its startup (lifespan) raises, the connect fails
    at once with ServerStartError naming that error, kept as its cause, instead of waiting out the connect
    timeout for an answer that cannot come (a bare TimeoutError, the cause only in the log)."""
    import time

    server = _unstartable(kind)
    started = time.monotonic()
    with pytest.raises(ServerStartError) as caught:
        async with Client(server, mode=mode, connect_timeout=20):  # type: ignore[arg-type]
            pass
    assert time.monotonic() - started < 10
    error = caught.value
    if kind == "app":
        assert str(error) == (
            "the in-process server 'unstartable' failed to start: RuntimeError: the database is down"
        ), str(error)
        assert isinstance(error.__cause__, RuntimeError) and str(error.__cause__) == "the database is down"
    else:
        assert str(error).startswith("the in-process server "), str(error)
        assert "failed to start: ServerStartError: " in str(error) and "exit code 1" in str(error), str(error)
        assert isinstance(error.__cause__, ServerStartError)
    assert "never retrieved" not in caplog.text


@contextlib.asynccontextmanager
async def _never_starts(app: Any) -> Any:
    await asyncio.Event().wait()  # (a database that never answers)
    yield


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_an_in_process_server_whose_startup_never_ends_fails_the_connect_saying_so(mode: str) -> None:
    """``Client(server)`` whose lifespan never finishes starting: the connect fails at its bound with a
    ServerStartError naming the server and the bound, as for a stdio or network server, not a bare TimeoutError
    with no message."""
    with pytest.raises(ServerStartError) as caught:
        async with Client(mcpkit.MCPKit("stuck", lifespan=_never_starts), mode=mode, connect_timeout=1):
            pass
    assert str(caught.value) == "the in-process server 'stuck' did not complete initialization within 1s"
    assert caught.value.timeout == 1


@contextlib.contextmanager
def _listener_that_never_answers() -> Any:
    """A TCP port that accepts connections and then says nothing (a hung server, a firewall that swallows)."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        sock.listen(16)
        yield sock.getsockname()[1]


@pytest.mark.parametrize(("scheme", "transport", "path"), [("http", "sse", "sse"), ("ws", None, "ws")])
async def test_a_server_that_accepts_but_never_answers_is_given_up_on_after_the_connect_timeout(
    scheme: str, transport: str | None, path: str
) -> None:
    pytest.importorskip("httpx")
    with _listener_that_never_answers() as port:
        url = f"{scheme}://127.0.0.1:{port}/{path}"
        options: dict[str, Any] = {"transport": transport} if transport else {}
        started = asyncio.get_running_loop().time()
        with pytest.raises(ServerStartError) as caught:
            async with Client(url, connect_timeout=1.0, **options):
                pass
        elapsed = asyncio.get_running_loop().time() - started
    assert str(caught.value) == f"{url} did not answer within 1.0s"
    assert elapsed < 4.0  # (the legacy SSE stream waited for ever; the WebSocket handshake 10 s)
