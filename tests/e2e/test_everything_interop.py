"""examples/everything.py over stdio answers the official clients: the TypeScript SDK 1.32 (handshake era),
the TypeScript SDK v2 (2026-07-28) via tests/support/interop/ts_client*.mjs, and the official Python SDK (mcp 2.3.0)."""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from support.everything import EVERYTHING, REPO
from support.paths import INTEROP

TESTS = REPO / "tests"
SERVER_CMD = shlex.join([sys.executable, str(EVERYTHING)])
OPTIONS = {
    "elicitation": {"action": "accept", "content": {"name": "Ada"}},
    "sampling": {"text": "forty-two"},
    "roots": [{"uri": "file:///interop", "name": "interop"}],
}
COMMON_STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "listResources", "all": True},
    {"op": "callTool", "name": "echo", "arguments": {"text": "hi"}},
    {"op": "callTool", "name": "add", "arguments": {"a": 2, "b": 3}},
    {"op": "callTool", "name": "slow", "arguments": {"steps": 3, "delay_ms": 1}, "progress": True},
    {"op": "callTool", "name": "sample", "arguments": {"prompt": "6 x 7?"}},
    {"op": "callTool", "name": "ask_name", "arguments": {}},
    {"op": "callTool", "name": "roots", "arguments": {}},
    {"op": "callTool", "name": "fail", "arguments": {}},
    {"op": "callTool", "name": "image", "arguments": {}},
    {"op": "readResource", "uri": "mcpkit://static/2"},
    {"op": "readResource", "uri": "mcpkit://items/5"},
    {"op": "getPrompt", "name": "greet", "arguments": {"name": "Ada"}},
    {"op": "getPrompt", "name": "with_image", "arguments": {}},
    {"op": "complete", "prompt": "greet", "argument": {"name": "style", "value": "f"}},
    {"op": "complete", "resourceTemplate": "mcpkit://items/{id}", "argument": {"name": "id", "value": "10"}},
    {"op": "listResources", "cursor": "forged"},
]


async def run_ts_client(node: Path, script: str, steps: list[dict[str, Any]], *extra: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        str(node),
        str(INTEROP / script),
        *extra,
        "--stdio",
        SERVER_CMD,
        "--cwd",
        str(REPO),
        "--script",
        json.dumps({"options": OPTIONS, "steps": steps}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(TESTS),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, (out.decode()[-3000:], err.decode()[-2000:])
    result: dict[str, Any] = json.loads(out)
    return result


def check_common(out: dict[str, Any]) -> list[Any]:
    r = out["results"]
    assert out["serverInfo"]["name"] == "mcpkit-everything"
    assert len(r[0]["tools"]) == 11
    assert len(r[1]["resources"]) == 101 and r[1].get("pages", 11) == 11  # v2 walks the pages itself
    assert r[2]["content"] == [{"type": "text", "text": "hi"}]
    assert r[3]["structuredContent"] == {"result": 5}
    assert r[4]["content"][0]["text"] == "done after 3 steps"
    assert r[5]["content"][0]["text"] == "forty-two"
    assert r[6]["content"][0]["text"] == "Hello, Ada!"
    assert json.loads(r[7]["content"][0]["text"]) == [{"uri": "file:///interop", "name": "interop"}]
    assert r[8]["isError"] is True
    assert r[9]["content"][0]["type"] == "image"
    assert r[10]["contents"][0]["mimeType"] == "application/octet-stream"
    assert json.loads(r[11]["contents"][0]["text"]) == {"id": 5, "name": "Item 5"}
    assert len(r[12]["messages"]) == 2
    assert r[13]["messages"][0]["content"]["type"] == "image"
    assert r[14]["completion"]["values"] == ["formal", "friendly", "funny"]
    assert r[15]["completion"]["values"] == ["10", "100"]
    assert r[16]["error"]["code"] == -32602
    progress = [n["params"]["progress"] for n in out["notifications"] if n["method"] == "notifications/progress"]
    assert progress == [1, 2, 3]
    return list(r[len(COMMON_STEPS) :])


@pytest.mark.npm
@pytest.mark.req("M055", "M065", "M068", "M089", "S025")
async def test_typescript_sdk_v1_client(node_bin: Path) -> None:
    steps = [
        *COMMON_STEPS,
        {"op": "subscribe", "uri": "mcpkit://counter"},
        {"op": "callTool", "name": "touch", "arguments": {}},
        {"op": "waitNotification", "method": "notifications/resources/updated"},
        {"op": "callTool", "name": "add_tool", "arguments": {"name": "extra"}},
        {"op": "waitNotification", "method": "notifications/tools/list_changed"},
        {"op": "setLevel", "level": "error"},
        {"op": "callTool", "name": "log", "arguments": {"level": "info", "message": "quiet"}},
        {"op": "callTool", "name": "log", "arguments": {"level": "error", "message": "loud"}},
    ]
    out = await run_ts_client(node_bin, "ts_client.mjs", steps)
    assert out["era"] == "legacy" and out["protocolVersion"] == "2025-11-25"
    rest = check_common(out)
    assert rest[2] == {"method": "notifications/resources/updated", "params": {"uri": "mcpkit://counter"}}
    assert rest[4]["method"] == "notifications/tools/list_changed"
    assert [x["content"][0]["text"] for x in rest[6:8]] == ["filtered", "sent"]
    logs = [n["params"] for n in out["notifications"] if n["method"] == "notifications/message"]
    assert logs == [{"level": "error", "logger": "everything", "data": "loud"}]
    assert [q["method"] for q in out["requests"]] == ["sampling/createMessage", "elicitation/create", "roots/list"]


@pytest.mark.npm
async def test_typescript_sdk_v2_client_modern(node_bin: Path) -> None:
    steps = [
        *COMMON_STEPS,
        {"op": "listen", "filter": {"resourceSubscriptions": ["mcpkit://counter"], "toolsListChanged": True}},
        {"op": "callTool", "name": "touch", "arguments": {}},
        {"op": "waitNotification", "method": "notifications/resources/updated"},
        {"op": "callTool", "name": "add_tool", "arguments": {"name": "extra"}},
        {"op": "waitNotification", "method": "notifications/tools/list_changed"},
        {"op": "closeListen"},
    ]
    out = await run_ts_client(node_bin, "ts_client_v2.mjs", steps, "--negotiation", "2026-07-28")
    assert out["era"] == "modern" and out["protocolVersion"] == "2026-07-28"
    rest = check_common(out)
    assert rest[0]["honoredFilter"] == {"resourceSubscriptions": ["mcpkit://counter"], "toolsListChanged": True}
    assert rest[2]["method"] == "notifications/resources/updated"
    assert rest[4]["method"] == "notifications/tools/list_changed"
    modern_rounds = [q for q in out["requests"] if q.get("era") == "modern"]
    assert {q["method"] for q in modern_rounds} == {"sampling/createMessage", "elicitation/create", "roots/list"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_official_python_sdk_client(mode: str) -> None:
    from mcp import Client, StdioServerParameters, types

    async def sampling(ctx: Any, params: Any) -> Any:
        return types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="42"))

    async def elicit(ctx: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(ctx: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    server = StdioServerParameters(command=sys.executable, args=[str(EVERYTHING)], cwd=str(REPO))
    async with Client(
        server, mode=mode, sampling_callback=sampling, elicitation_callback=elicit, list_roots_callback=roots
    ) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert len((await c.list_tools()).tools) == 11
        add = await c.call_tool("add", {"a": 1, "b": 2})
        assert add.structured_content == {"result": 3}
        assert (await c.call_tool("ask_name", {})).content[0].text == "Hello, Ada!"  # type: ignore[union-attr]
        assert (await c.call_tool("sample", {"prompt": "q"})).content[0].text == "42"  # type: ignore[union-attr]
        roots_text = (await c.call_tool("roots", {})).content[0].text  # type: ignore[union-attr]
        assert json.loads(roots_text) == [{"uri": "file:///work", "name": "work"}]
        uris: list[str] = []
        cursor = None
        while True:
            page = await c.list_resources(cursor=cursor) if cursor else await c.list_resources()
            uris += [str(r.uri) for r in page.resources]
            cursor = page.next_cursor
            if not cursor:
                break
        assert len(uris) == 101
        blob = await c.read_resource("mcpkit://static/4")
        assert blob.contents[0].mime_type == "application/octet-stream"
        prompt = await c.get_prompt("greet", {"name": "Ada", "style": "funny"})
        assert len(prompt.messages) == 2
