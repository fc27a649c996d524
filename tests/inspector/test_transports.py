"""``mcpkit inspect`` over every transport: the real command against ``examples/everything.py`` served over
Streamable HTTP, legacy HTTP+SSE and WebSocket (and stdio in the browser tests), driven through the page's own
API: connected in the expected era, tools listed, a call made and its outcome reported."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.browser import InspectorProcess
from support.paths import REPO
from support.procs import stop, wait_listening

EVERYTHING = str(REPO / "examples" / "everything.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_server() -> Iterator[int]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit.cli.main", "run", EVERYTHING, "-t", "http", "--port", str(port)],
        stderr=subprocess.PIPE,
    )
    try:
        wait_listening(port, proc)
        yield port
    finally:
        stop(proc)


def api(inspector: InspectorProcess, action: str, body: dict[str, Any] | None = None) -> Any:
    r = httpx.post(
        f"{inspector.base}/api/{action}",
        json=body or {},
        headers={"Authorization": f"Bearer {inspector.token}"},
        timeout=30,
    )
    assert r.status_code == 200, r.text
    data = r.json()
    assert "error" not in data, data
    return data["result"]


def until(inspector: InspectorProcess, test: Any, timeout: float = 20.0) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while True:
        state = api(inspector, "state")
        if test(state):
            return state  # type: ignore[no-any-return]
        assert time.monotonic() < end, state
        time.sleep(0.1)


CASES = [
    ("http", "/mcp", [], "handshake", "2025-11-25"),
    ("http", "/mcp", [], "modern", "2026-07-28"),
    ("http", "/sse", ["--transport", "sse"], "handshake", "2024-11-05"),
    ("ws", "/ws", [], "handshake", "2025-11-25"),
    ("ws", "/ws", [], "modern", "2026-07-28"),
]


@pytest.mark.parametrize(("scheme", "path", "extra", "mode", "version"), CASES)
def test_inspect_over_every_transport(
    http_server: int, scheme: str, path: str, extra: list[str], mode: str, version: str
) -> None:
    url = f"{scheme}://127.0.0.1:{http_server}{path}"
    pin = ["--protocol-version", version] if version == "2024-11-05" else ["--mode", mode]
    inspector = InspectorProcess("inspect", url, *extra, *pin)
    try:
        state = until(inspector, lambda s: s["status"] in ("connected", "failed"))
        assert state["status"] == "connected", state["error"]
        assert state["protocolVersion"] == version and state["era"] == mode
        tools = api(inspector, "list", {"kind": "tools"})["items"]
        assert "add" in [t["name"] for t in tools]
        call_id = api(inspector, "call", {"name": "add", "arguments": {"a": 2, "b": 40}})["id"]
        done = until(inspector, lambda s: any(c["id"] == call_id and c["status"] != "running" for c in s["calls"]))
        (call,) = [c for c in done["calls"] if c["id"] == call_id]
        assert call["status"] == "done" and call["result"]["structuredContent"] == {"result": 42}
        log = api(inspector, "log")["entries"]
        assert any(e["method"] == "tools/call" and e["dir"] == "in" and e["kind"] == "result" for e in log)
    finally:
        inspector.stop()
