"""Smoke check of the interop drivers against each other and server-everything (not a pytest module).

Run from the repo root once tests/node_modules is installed:

    python tests/support/interop/smoke.py            # all cases
    python tests/support/interop/smoke.py v2-http    # cases whose name contains "v2-http"

Each case runs a ts_client*.mjs script against a server (stdio, or Streamable HTTP / SSE on a
127.0.0.1 port) and checks a few facts of the JSON it prints. Exit status 0 when every case passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NODE_MODULES = Path(os.environ.get("INTEROP_NODE_MODULES", HERE.parents[1] / "node_modules"))
NODE = str(NODE_MODULES / ".bin" / "node")
EVERYTHING = str(NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js")

CANNED = {
    "roots": [{"uri": "file:///work", "name": "work"}],
    "sampling": {"text": "forty-two"},
    "elicitation": {"action": "accept", "content": {"name": "Ada"}},
}

# Steps valid in both eras against ts_server*.mjs.
COMMON_STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "echo", "arguments": {"text": "hi"}},
    {"op": "callTool", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"op": "listResources", "all": True},
    {"op": "readResource", "uri": "mcpkit://items/7"},
    {"op": "getPrompt", "name": "greet", "arguments": {"name": "Bob", "style": "formal"}},
    {"op": "complete", "prompt": "greet", "argument": {"name": "style", "value": "f"}},
    {"op": "callTool", "name": "slow", "arguments": {"steps": 3, "delay_ms": 20}, "progress": True},
    {"op": "callTool", "name": "fail"},
    {"op": "callTool", "name": "sample", "arguments": {"prompt": "6x7?"}},
    {"op": "callTool", "name": "ask_name"},
    {"op": "callTool", "name": "roots"},
]


def text_of(result: dict[str, Any]) -> str:
    return str(result["content"][0]["text"])


def check_common(doc: dict[str, Any]) -> None:
    r = doc["results"]
    assert text_of(r[1]) == "hi", r[1]
    assert r[2]["structuredContent"] == {"result": 5}, r[2]
    assert len(r[3]["resources"]) == 101, len(r[3]["resources"])  # counter + 100 static
    assert json.loads(r[4]["contents"][0]["text"])["id"] == "7", r[4]
    assert r[5]["messages"][0]["content"]["text"] == "Good day, Bob.", r[5]
    assert r[6]["completion"]["values"] == ["formal", "friendly", "funny"], r[6]
    assert text_of(r[7]) == "done after 3 steps", r[7]
    progress = [n for n in doc["notifications"] if n["method"] == "notifications/progress"]
    assert len(progress) == 3, progress
    assert r[8]["isError"] is True, r[8]
    assert text_of(r[9]) == "forty-two", r[9]
    assert text_of(r[10]) == "Hello, Ada!", r[10]
    assert json.loads(text_of(r[11])) == CANNED["roots"], r[11]
    methods = sorted(q["method"] for q in doc["requests"])
    assert methods == ["elicitation/create", "roots/list", "sampling/createMessage"], methods


LEGACY_STEPS = [
    *COMMON_STEPS,
    {"op": "subscribe", "uri": "mcpkit://counter"},
    {"op": "callTool", "name": "touch"},
    {"op": "waitNotification", "method": "notifications/resources/updated"},
    {"op": "setLevel", "level": "warning"},
    {"op": "callTool", "name": "log", "arguments": {"level": "info", "message": "dropped"}},
    {"op": "callTool", "name": "log", "arguments": {"level": "error", "message": "kept"}},
    {"op": "ping"},
    {"op": "callTool", "name": "slow", "arguments": {"steps": 50, "delay_ms": 50}, "cancelAfterMs": 150},
]


def check_legacy(doc: dict[str, Any]) -> None:
    assert doc["era"] == "legacy", doc["era"]
    assert doc["protocolVersion"] == "2025-11-25", doc["protocolVersion"]
    check_common(doc)
    r = doc["results"][len(COMMON_STEPS) :]
    assert r[2]["params"]["uri"] == "mcpkit://counter", r[2]
    logs = [n["params"]["data"] for n in doc["notifications"] if n["method"] == "notifications/message"]
    assert logs == ["kept"], logs
    assert r[6] == {}, r[6]
    assert "error" in r[7], r[7]


MODERN_STEPS = [
    *COMMON_STEPS,
    {"op": "listen", "filter": {"resourceSubscriptions": ["mcpkit://counter"], "toolsListChanged": True}},
    {"op": "callTool", "name": "touch"},
    {"op": "waitNotification", "method": "notifications/resources/updated"},
    {"op": "ping"},
    {
        "op": "callTool",
        "name": "log",
        "arguments": {"level": "info", "message": "opted-in"},
        "_meta": {"io.modelcontextprotocol/logLevel": "debug"},
    },
]


def check_modern(doc: dict[str, Any]) -> None:
    assert doc["era"] == "modern", doc["era"]
    assert doc["protocolVersion"] == "2026-07-28", doc["protocolVersion"]
    check_common(doc)
    assert all(q["era"] == "modern" for q in doc["requests"]), doc["requests"]
    r = doc["results"][len(COMMON_STEPS) :]
    assert r[0]["honoredFilter"]["resourceSubscriptions"] == ["mcpkit://counter"], r[0]
    assert r[2]["params"]["uri"] == "mcpkit://counter", r[2]
    assert r[3]["error"]["code"] == "METHOD_NOT_SUPPORTED_BY_PROTOCOL_VERSION", r[3]  # ping is gone in 2026-07-28
    logs = [n["params"]["data"] for n in doc["notifications"] if n["method"] == "notifications/message"]
    assert logs == ["opted-in"], logs


EVERYTHING_STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "echo", "arguments": {"message": "hi"}},
    {"op": "callTool", "name": "trigger-sampling-request", "arguments": {"prompt": "hi"}},
    {"op": "callTool", "name": "trigger-elicitation-request"},
    {"op": "callTool", "name": "get-roots-list"},
    {
        "op": "callTool",
        "name": "trigger-long-running-operation",
        "arguments": {"duration": 1, "steps": 2},
        "progress": True,
    },
]


def check_everything(doc: dict[str, Any]) -> None:
    assert doc["serverInfo"]["name"] == "mcp-servers/everything", doc["serverInfo"]
    r = doc["results"]
    names = {t["name"] for t in r[0]["tools"]}
    assert {"echo", "get-sum", "trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= names, (
        names
    )
    assert text_of(r[1]) == "Echo: hi", r[1]
    assert "forty-two" in json.dumps(r[2]), r[2]
    assert "Ada" in json.dumps(r[3]), r[3]
    assert "file:///work" in json.dumps(r[4]), r[4]
    assert len([n for n in doc["notifications"] if n["method"] == "notifications/progress"]) == 2, doc["notifications"]


def run_client(
    client: str, target: list[str], steps: list[dict[str, Any]], extra: list[str] | None = None
) -> dict[str, Any]:
    script = json.dumps({"options": CANNED, "steps": steps})
    cmd = [NODE, str(HERE / client), *target, "--script", script, *(extra or [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if not proc.stdout.strip():
        raise AssertionError(f"no output (rc={proc.returncode}): {proc.stderr[-2000:]}")
    doc: dict[str, Any] = json.loads(proc.stdout)
    if doc.get("fatal"):
        raise AssertionError(f"fatal: {doc['fatal']}")
    return doc


def start_http(argv: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env={**os.environ, **(env or {})}
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("{") and '"port"' in line:
            return proc, int(json.loads(line)["port"])
    proc.kill()
    raise AssertionError(f"{argv} did not announce a port")


def stdio_cmd(*parts: str) -> list[str]:
    return ["--stdio", " ".join([NODE, *parts])]


Case = tuple[str, Callable[[], None]]


def case_stdio(
    client: str,
    server: str,
    steps: list[dict[str, Any]],
    check: Callable[[dict[str, Any]], None],
    extra: list[str] | None = None,
) -> Callable[[], None]:
    return lambda: check(run_client(client, stdio_cmd(str(HERE / server)), steps, extra))


def case_http(
    client: str,
    server_argv: list[str],
    steps: list[dict[str, Any]],
    check: Callable[[dict[str, Any]], None],
    extra: list[str] | None = None,
) -> Callable[[], None]:
    def run() -> None:
        proc, port = start_http([NODE, *server_argv, "--http", "--port", "0"])
        try:
            check(run_client(client, ["--http", f"http://127.0.0.1:{port}/mcp"], steps, extra))
        finally:
            proc.terminate()
            proc.wait(10)

    return run


def case_everything(client: str, transport: str) -> Callable[[], None]:
    def run() -> None:
        if transport == "stdio":
            check_everything(run_client(client, stdio_cmd(EVERYTHING, "stdio"), EVERYTHING_STEPS))
            return
        mode = "streamableHttp" if transport == "http" else "sse"
        proc, port = start_http(
            [NODE, "--import", str(HERE / "localhost_preload.mjs"), EVERYTHING, mode], {"PORT": "0"}
        )
        try:
            target = (
                ["--http", f"http://127.0.0.1:{port}/mcp"]
                if transport == "http"
                else ["--sse", f"http://127.0.0.1:{port}/sse"]
            )
            check_everything(run_client(client, target, EVERYTHING_STEPS))
        finally:
            proc.terminate()
            proc.wait(10)

    return run


V1S, V2S = str(HERE / "ts_server.mjs"), str(HERE / "ts_server_v2.mjs")
CASES: list[Case] = [
    ("v1client-v1server-stdio", case_stdio("ts_client.mjs", "ts_server.mjs", LEGACY_STEPS, check_legacy)),
    ("v1client-v1server-http", case_http("ts_client.mjs", [V1S], LEGACY_STEPS, check_legacy)),
    ("v1client-v2server-stdio", case_stdio("ts_client.mjs", "ts_server_v2.mjs", LEGACY_STEPS, check_legacy)),
    (
        "v1client-v2server-http-sessionful",
        case_http("ts_client.mjs", [V2S, "--legacy", "sessionful"], LEGACY_STEPS, check_legacy),
    ),
    ("v2client-v2server-stdio", case_stdio("ts_client_v2.mjs", "ts_server_v2.mjs", MODERN_STEPS, check_modern)),
    ("v2client-v2server-http", case_http("ts_client_v2.mjs", [V2S], MODERN_STEPS, check_modern)),
    (
        "v2client-legacy-v2server-stdio",
        case_stdio("ts_client_v2.mjs", "ts_server_v2.mjs", LEGACY_STEPS, check_legacy, ["--negotiation", "legacy"]),
    ),
    ("v2client-v1server-stdio(fallback)", case_stdio("ts_client_v2.mjs", "ts_server.mjs", LEGACY_STEPS, check_legacy)),
    ("v2client-v1server-http(fallback)", case_http("ts_client_v2.mjs", [V1S], LEGACY_STEPS, check_legacy)),
    ("v1client-everything-stdio", case_everything("ts_client.mjs", "stdio")),
    ("v1client-everything-http", case_everything("ts_client.mjs", "http")),
    ("v1client-everything-sse", case_everything("ts_client.mjs", "sse")),
    ("v2client-everything-stdio", case_everything("ts_client_v2.mjs", "stdio")),
    ("v2client-everything-http", case_everything("ts_client_v2.mjs", "http")),
]


def main(argv: list[str]) -> int:
    selected = [c for c in CASES if not argv or any(a in c[0] for a in argv)]
    failed = 0
    for name, fn in selected:
        t0 = time.monotonic()
        try:
            fn()
            print(f"PASS {name} ({time.monotonic() - t0:.1f}s)")
        except Exception as e:
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - t0:.1f}s): {type(e).__name__}: {e}")
    print(f"{len(selected) - failed}/{len(selected)} passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
