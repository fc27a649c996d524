"""The benchmark's floors (``bench/servers/floor_*.py``): the least that still answers MCP correctly, the line every
contender's figure is read against. Each is run as the bench runs it, a real process on 127.0.0.1, with mcpkit
made unimportable: the three answer the same requests with the same bytes (they share ``_floor_core.handle``;
the two HTTP ones also the status, the headers and their order), and none of them needs mcpkit."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from support.paths import REPO
from support.store_server import free_port, wait_ready

FLOORS = REPO / "bench" / "servers"
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
#: (what it is, the body sent: JSON-RPC, or bytes as they are)
REQUESTS: list[tuple[str, Any]] = [
    (
        "initialize",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
    ),
    ("initialized", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
    (
        "echo",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}},
    ),
    (
        "modern echo",
        {
            "jsonrpc": "2.0",
            "id": "m",
            "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": "now"}, "_meta": MODERN},
        },
    ),
    ("ping", {"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    ("unknown method", {"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}),
    ("not JSON", b"{not json"),
]
#: what a floor may answer differently: the time, and the session id it makes up
VARYING = {b"date", b"mcp-session-id"}
WAIT = 20.0  # seconds: a floor's start, one answer, a stdio run (each takes well under one on an idle machine)


def _body(sent: Any) -> bytes:
    return sent if isinstance(sent, bytes) else orjson.dumps(sent)


@pytest.fixture(scope="module")
def unimportable(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], Path]:
    """The environment a floor runs in, in which ``import mcpkit`` finds a package of that name first that notes
    it was imported (in the file returned) and raises ImportError."""
    shadow = tmp_path_factory.mktemp("shadow")
    marker = shadow / "imported"
    (shadow / "mcpkit").mkdir()
    (shadow / "mcpkit" / "__init__.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('imported')\n"
        "raise ImportError('a floor imported mcpkit')\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(shadow), env.get("PYTHONPATH", "")) if p)
    return env, marker


def _stdio_answers(env: dict[str, str]) -> list[bytes | None]:
    """floor_stdio.py's answer line to each request (None: it answered none)."""
    given = b"".join(_body(sent) + b"\n" for _, sent in REQUESTS)
    done = subprocess.run(
        [sys.executable, str(FLOORS / "floor_stdio.py")], input=given, capture_output=True, env=env, timeout=WAIT
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    lines = iter(done.stdout.splitlines())
    # a notification has no answer; every other request one, in order
    return [None if name == "initialized" else next(lines) for name, _ in REQUESTS]


def _http_answers(script: str, env: dict[str, str]) -> list[tuple[int, list[tuple[bytes, bytes]], bytes]]:
    """The status, headers (in order, those that may vary masked) and body of each request to ``script`` served
    over HTTP (stateful: the session it made at initialize named on the requests of that era)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FLOORS / script), "http", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        with httpx.Client(timeout=WAIT) as http:

            def up() -> bool:
                try:
                    return http.get(url).status_code == 405
                except httpx.TransportError:
                    return False

            wait_ready(proc, up, script, WAIT, proc.kill, every=0.05)
            answers = []
            sid = ""
            for name, sent in REQUESTS:
                headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
                if sid and name != "modern echo":
                    headers["mcp-session-id"] = sid
                answer = http.post(url, content=_body(sent), headers=headers)
                sid = sid or answer.headers.get("mcp-session-id", "")
                raw = [(k.lower(), b"(varies)" if k.lower() in VARYING else v) for k, v in answer.headers.raw]
                answers.append((answer.status_code, raw, answer.content))
            return answers
    finally:
        proc.kill()
        proc.wait(timeout=WAIT)
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def answers(unimportable: tuple[dict[str, str], Path]) -> Iterator[dict[str, Any]]:
    env, _ = unimportable
    yield {
        "floor_stdio.py": _stdio_answers(env),
        "floor_asgi.py": _http_answers("floor_asgi.py", env),
        "floor_lane.py": _http_answers("floor_lane.py", env),
    }


def test_the_three_floors_answer_alike(answers: dict[str, Any]) -> None:
    """floor_asgi.py (stock uvicorn) and floor_lane.py (answering in uvicorn's protocol) send the same status, the
    same headers in the same order and the same body for each request; floor_stdio.py the same body as its line."""
    stdio, asgi, lane = answers["floor_stdio.py"], answers["floor_asgi.py"], answers["floor_lane.py"]
    for (name, _), by_stdio, by_asgi, by_lane in zip(REQUESTS, stdio, asgi, lane, strict=True):
        assert by_lane == by_asgi, name
        status, headers, body = by_asgi
        names = [k for k, _ in headers]
        if by_stdio is None:  # a notification: accepted, nothing said
            assert (status, body) == (202, b""), name
            assert b"content-type" not in names, name
            continue
        assert body == by_stdio, name
        assert (b"content-type", b"application/json") in headers, name
        assert names.count(b"content-type") == 1 and names.count(b"content-length") == 1, name
    # and what they say is right (alike and all wrong would pass the above)
    said = {name: orjson.loads(line) for (name, _), line in zip(REQUESTS, stdio, strict=True) if line is not None}
    assert said["initialize"]["result"]["protocolVersion"] == "2025-06-18"
    assert said["echo"]["result"]["content"] == [{"type": "text", "text": "hi"}]
    assert said["modern echo"]["result"]["resultType"] == "complete"
    assert said["modern echo"]["result"]["content"] == [{"type": "text", "text": "now"}]
    assert said["ping"] == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert said["unknown method"]["error"]["code"] == -32601
    assert said["not JSON"]["error"]["code"] == -32700
    statuses = [status for status, _, _ in asgi]
    assert statuses == [200, 202, 200, 200, 200, 200, 400]
    assert (b"mcp-session-id", b"(varies)") in asgi[0][1]  # stateful: initialize made a session


def test_no_floor_imports_mcpkit(unimportable: tuple[dict[str, str], Path], answers: dict[str, Any]) -> None:
    """Every floor answered every request above in an environment where ``import mcpkit`` fails (and notes it
    was tried); that environment does stop an import of mcpkit, the editable install's included."""
    env, marker = unimportable
    assert len(answers) == 3 and not marker.exists()
    tried = subprocess.run([sys.executable, "-c", "import mcpkit"], env=env, capture_output=True, timeout=WAIT)
    assert tried.returncode != 0 and b"a floor imported mcpkit" in tried.stderr
    assert marker.exists()
