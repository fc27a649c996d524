"""Tasks against foreign peers. The TypeScript SDK 1.32 speaks the 2025-11-25 tasks (experimental): its client
(``client.experimental.tasks.callToolStream``) against mcpkit's server over stdio and Streamable HTTP, and
mcpkit's client against its server (``@modelcontextprotocol/server-everything``: a task tool, and a tool that
asks the client to run a sampling request as a task). The TypeScript v2 packages (2.4) and the official Python
SDK (``mcp`` 2.3.0) have no tasks at run time: they interoperate with a task server by the rules for peers that
did not negotiate them (a plain result, or the error the spec names)."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client
from support.paths import INTEROP, SERVERS, TESTS
from support.procs import stop, wait_listening

pytestmark = pytest.mark.npm

SERVER = SERVERS / "tasks_server.py"
EVERYTHING = TESTS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
ACCEPT = {"elicitation": {"action": "accept", "content": {"ok": True}}}


def ts_client(node: Path, where: list[str], steps: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    script = json.dumps({"options": options, "steps": steps})
    proc = subprocess.run(
        [str(node), str(INTEROP / "ts_client.mjs"), *where, "--script", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(TESTS),
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-2000:])
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


STEPS = [
    {"op": "listTools"},
    {"op": "callToolStream", "name": "slow", "arguments": {"seconds": 0.3, "steps": 2}, "task": {"ttl": 60000}},
    {"op": "callToolStream", "name": "confirm", "arguments": {"what": "ts.txt"}},
    {"op": "callToolStream", "name": "toolfail"},
    {"op": "request", "method": "tasks/list", "params": {}},
]


def check_ts_run(out: dict[str, Any]) -> None:
    assert out["protocolVersion"] == "2025-11-25"
    assert out["capabilities"]["tasks"]["requests"] == {"tools": {"call": {}}}
    tools = {t["name"]: t for t in out["results"][0]["tools"]}
    assert tools["slow"]["execution"] == {"taskSupport": "optional"}
    slow = out["results"][1]["messages"]
    assert slow[0]["type"] == "taskCreated" and slow[0]["task"]["ttl"] == 60000
    assert {m["type"] for m in slow[1:-1]} <= {"taskStatus"} and slow[-1]["type"] == "result"
    assert slow[-1]["result"]["content"][0]["text"] == "slept 0.3"
    confirm = out["results"][2]["messages"]
    assert confirm[-1]["type"] == "result", confirm
    assert confirm[-1]["result"]["content"][0]["text"] == "deleted ts.txt"
    [asked] = [r for r in out["requests"] if r["method"] == "elicitation/create"]
    assert asked["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] == confirm[0]["task"]["taskId"]
    failed = out["results"][3]["messages"]
    assert failed[-1]["type"] == "error"  # an isError result is a failed task in 2025-11-25
    listed = {t["taskId"] for t in out["results"][4]["tasks"]}
    assert slow[0]["task"]["taskId"] in listed and confirm[0]["task"]["taskId"] in listed


def test_the_typescript_sdk_client_runs_mcpkit_tools_as_tasks_over_stdio(node_bin: Path) -> None:
    out = ts_client(node_bin, ["--stdio", f"{sys.executable} {SERVER}"], STEPS, ACCEPT)
    check_ts_run(out)


def test_the_typescript_sdk_client_runs_mcpkit_tools_as_tasks_over_http(node_bin: Path, free_port: Any) -> None:
    port = free_port()
    cmd = [sys.executable, "-m", "mcpkit.cli.main", "run", str(SERVER), "--transport", "http", "--port", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, server, timeout=30)
        out = ts_client(node_bin, ["--http", f"http://127.0.0.1:{port}/mcp"], STEPS, ACCEPT)
        check_ts_run(out)
    finally:
        stop(server)


def everything_stdio(node: Path) -> list[str]:
    return [str(node), str(EVERYTHING), "stdio"]


def clarify(params: dict[str, Any]) -> dict[str, Any]:
    options = params["requestedSchema"]["properties"]["interpretation"]["oneOf"]
    return {"action": "accept", "content": {"interpretation": options[0]["const"]}}


async def test_mcpkit_runs_a_typescript_servers_task_tool_and_answers_its_input_request(node_bin: Path) -> None:
    """server-everything's simulate-research-query (a 2025-11-25 task; ambiguous: it asks for a clarification
    through tasks/result); its status messages reach the handle."""
    seen: list[str] = []
    async with Client(everything_stdio(node_bin), elicitation_handler=clarify, timeout=30) as client:
        assert client.server_capabilities["tasks"]["requests"]["tools"] == {"call": {}}
        handle = await client.call_tool_as_task(
            "simulate-research-query",
            {"topic": "python", "ambiguous": True},
            on_status=lambda task: seen.append(task.status_message or ""),
        )
        result = await asyncio.wait_for(handle.result(), 30)
        assert "Research Report" in result.text and "Clarification" in result.text
        assert handle.task.status == "completed"
    assert any(s.endswith("...") for s in seen), seen  # (which stages a poll sees depends on timing)


async def test_mcpkit_runs_a_typescript_servers_sampling_request_as_a_client_task(node_bin: Path) -> None:
    """server-everything's trigger-sampling-request-async sends sampling/createMessage with params.task to the
    client, then polls the client's tasks/get and reads its tasks/result: mcpkit's client is the receiver."""
    sampled: list[dict[str, Any]] = []

    async def sampler(params: dict[str, Any]) -> dict[str, Any]:
        sampled.append(params)
        await asyncio.sleep(0.2)
        return {"role": "assistant", "content": {"type": "text", "text": "a sampled answer"}, "model": "test-model"}

    async with Client(everything_stdio(node_bin), sampling_handler=sampler, timeout=60) as client:
        for _ in range(50):  # (server-everything registers its capability-dependent tools after initialized)
            if await client.get_tool("trigger-sampling-request-async") is not None:
                break
            client._tools_complete = False
            await asyncio.sleep(0.1)
        result = await client.call_tool("trigger-sampling-request-async", {"prompt": "hello", "maxTokens": 20})
        assert "a sampled answer" in result.text and "[SYNC]" not in result.text
    assert len(sampled) == 1 and "task" not in sampled[0]


async def test_mcpkit_over_http_against_the_typescript_servers_task_tool(node_bin: Path, free_port: Any) -> None:
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    preload = INTEROP / "localhost_preload.mjs"
    server = subprocess.Popen(
        [str(node_bin), "--import", str(preload), str(EVERYTHING), "streamableHttp"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        wait_listening(port, server, timeout=30)
        async with Client(f"http://127.0.0.1:{port}/mcp", timeout=30) as client:
            handle = await client.call_tool_as_task("simulate-research-query", {"topic": "http"})
            result = await asyncio.wait_for(handle.result(), 30)
            assert "Research Report: http" in result.text
    finally:
        stop(server)


def test_the_official_python_sdk_has_no_tasks_and_a_task_server_still_serves_it() -> None:
    """mcp 2.3.0 ships the 2025-11-25 task types (mcp_types) but no tasks at run time: its Client cannot send
    params.task, does not declare the extension; mcpkit answers it as the spec says for such a client."""
    import mcp

    assert "task" not in inspect.signature(mcp.Client.call_tool).parameters
    script = f"""
import asyncio, sys
from mcp import Client, StdioServerParameters

async def main():
    server = StdioServerParameters(command=sys.executable, args=[{str(SERVER)!r}])
    async with Client(server, mode="2026-07-28") as c:
        plain = await c.call_tool("slow", {{"seconds": 0.05}})
        print("optional:", plain.content[0].text)
        try:
            await c.call_tool("must", {{}})
        except Exception as exc:
            print("required:", getattr(getattr(exc, "error", None), "code", None) or exc)
    async with Client(server, mode="legacy") as c:
        plain = await c.call_tool("slow", {{"seconds": 0.05}})
        print("legacy optional:", plain.content[0].text)

asyncio.run(main())
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert "optional: slept 0.05" in lines and "legacy optional: slept 0.05" in lines
    assert any(line.startswith("required:") and "32021" in line for line in lines), proc.stdout


def test_the_typescript_v2_client_has_no_tasks_and_a_task_server_still_serves_it(node_bin: Path) -> None:
    """@modelcontextprotocol/client 2.4 keeps the task types for interoperability only (no tasks at run time):
    in 2026-07-28 it does not declare the extension, so an optional task tool answers plainly and a required one
    -32021."""
    steps = [
        {"op": "callTool", "name": "slow", "arguments": {"seconds": 0.05}},
        {"op": "callTool", "name": "must"},
    ]
    where = ["--negotiation", "2026-07-28", "--stdio", f"{sys.executable} {SERVER}"]
    script = json.dumps({"options": {}, "steps": steps})
    proc = subprocess.run(
        [str(node_bin), str(INTEROP / "ts_client_v2.mjs"), *where, "--script", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(TESTS),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out["protocolVersion"] == "2026-07-28"
    assert out["results"][0]["content"][0]["text"] == "slept 0.05"
    assert out["results"][1]["error"]["code"] == -32021
