"""``@modelcontextprotocol/server-everything`` (stdio, handshake era only) driven through ``mcpkit proxy`` over
Streamable HTTP by the official clients: the TypeScript SDK 1.32 and v2 (which negotiates 2026-07-28 with the
proxy) and the official Python SDK in both eras. Every check gives what it gives against the server directly."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.paths import INTEROP, TESTS
from support.procs import stop

pytestmark = [pytest.mark.npm, pytest.mark.timeout(240)]
EVERYTHING = TESTS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
OPTIONS = {
    "elicitation": {"action": "accept", "content": {"name": "Ada"}},
    "sampling": {"text": "forty-two"},
    "roots": [{"uri": "file:///interop", "name": "interop"}],
}
STEPS: list[dict[str, Any]] = [
    {"op": "listTools"},
    {"op": "callTool", "name": "echo", "arguments": {"message": "hi"}},
    {"op": "callTool", "name": "get-sum", "arguments": {"a": 2, "b": 3}},
    {"op": "callTool", "name": "get-structured-content", "arguments": {"location": "New York"}},
    {"op": "callTool", "name": "get-tiny-image", "arguments": {}},
    {"op": "callTool", "name": "get-annotated-message", "arguments": {"messageType": "success"}},
    {"op": "callTool", "name": "get-resource-links", "arguments": {"count": 2}},
    {
        "op": "callTool",
        "name": "trigger-long-running-operation",
        "arguments": {"duration": 0.3, "steps": 3},
        "progress": True,
    },
    {"op": "callTool", "name": "trigger-sampling-request", "arguments": {"prompt": "6 x 7?"}},
    {"op": "callTool", "name": "trigger-elicitation-request", "arguments": {}},
    {"op": "callTool", "name": "get-roots-list", "arguments": {}},
    {"op": "callTool", "name": "no-such-tool", "arguments": {}},
    {"op": "listResources"},
    {"op": "listResourceTemplates"},
    {"op": "readResource", "uri": "demo://resource/static/document/features.md"},
    {"op": "readResource", "uri": "demo://resource/dynamic/text/3"},
    {"op": "readResource", "uri": "demo://resource/dynamic/blob/4"},
    {"op": "listPrompts"},
    {"op": "getPrompt", "name": "simple-prompt", "arguments": {}},
    {"op": "getPrompt", "name": "args-prompt", "arguments": {"city": "Paris", "state": "IDF"}},
    {"op": "complete", "prompt": "completable-prompt", "argument": {"name": "department", "value": "E"}},
    {"op": "listResources", "cursor": "forged"},
]
_VOLATILE = ("resultType", "ttlMs", "cacheScope", "_meta", "execution")


def _normal(value: Any) -> Any:
    """A result as the client compares it: era envelope fields dropped, an absent isError the same as false."""
    if isinstance(value, dict):
        out = {k: ("<blob>" if k == "blob" else _normal(v)) for k, v in value.items() if k not in _VOLATILE}
        if out.get("isError") is False:
            del out["isError"]
        if "error" in out and isinstance(out["error"], dict):  # the error's code is the check; texts vary by SDK
            out["error"] = {"code": out["error"].get("code")}
        return out
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        value = re.sub(r"\d{1,2}:\d{2}:\d{2}\s?[AP]M", "TIME", value)  # (dynamic resources say when they were made)
        return re.sub(r"Duration: [0-9.]+ seconds", "Duration: N seconds", value)
    return value


@contextlib.contextmanager
def proxy_of_everything(node: Path) -> Iterator[str]:
    """``mcpkit proxy "<node> server-everything stdio" -t http --port 0``; yields its URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "proxy", f"{node} {EVERYTHING} stdio", "-t", "http", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        url = None
        for _ in range(200):
            line = proc.stderr.readline()
            match = re.search(r"proxying on (http://\S+)", line)
            if match:
                url = match.group(1)
                break
            if not line and proc.poll() is not None:
                break
        assert url, "mcpkit proxy did not announce its URL"
        yield url
    finally:
        stop(proc)


async def _ts(node: Path, script: str, target: list[str], *extra: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        str(node),
        str(INTEROP / script),
        *target,
        *extra,
        "--script",
        json.dumps({"options": OPTIONS, "steps": STEPS}),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(TESTS),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, (out.decode()[-3000:], err.decode()[-2000:])
    result: dict[str, Any] = json.loads(out)
    return result


def _compare(direct: dict[str, Any], proxied: dict[str, Any]) -> None:
    assert proxied["serverInfo"] == direct["serverInfo"]
    for step, a, b in zip(STEPS, direct["results"], proxied["results"], strict=True):
        if step.get("cursor") == "forged":  # (the proxy's cursors are its own, sealed: it refuses one it did not make)
            assert _normal(b) == {"error": {"code": -32602}}, (step, b)
            continue
        assert _normal(b) == _normal(a), step
    progress = [n["params"]["progress"] for n in direct["notifications"] if n["method"] == "notifications/progress"]
    assert (
        progress
        and [n["params"]["progress"] for n in proxied["notifications"] if n["method"] == "notifications/progress"]
        == progress
    )
    # the kinds of request the server asked reach the client through the proxy; how many times server-everything
    # asks for the roots depends on timing (it syncs them 350 ms after initialized, and again on list_changed)
    asked = sorted({q["method"] for q in direct["requests"]})
    assert sorted({q["method"] for q in proxied["requests"]}) == asked


@pytest.fixture
def everything(node_bin: Path) -> Path:
    if not EVERYTHING.exists():
        pytest.skip("server-everything missing: run scripts/test.sh")
    return node_bin


async def test_typescript_sdk_v1_gets_through_the_proxy_what_it_gets_directly(everything: Path) -> None:
    direct = await _ts(everything, "ts_client.mjs", ["--stdio", f"{everything} {EVERYTHING} stdio"])
    with proxy_of_everything(everything) as url:
        proxied = await _ts(everything, "ts_client.mjs", ["--http", url])
    assert direct["era"] == proxied["era"] == "legacy"
    _compare(direct, proxied)


async def test_typescript_sdk_v2_speaks_2026_07_28_to_the_proxy_of_a_handshake_era_server(everything: Path) -> None:
    direct = await _ts(everything, "ts_client_v2.mjs", ["--stdio", f"{everything} {EVERYTHING} stdio"])
    with proxy_of_everything(everything) as url:
        proxied = await _ts(everything, "ts_client_v2.mjs", ["--http", url], "--negotiation", "2026-07-28")
    assert direct["era"] == "legacy" and proxied["era"] == "modern"
    assert proxied["protocolVersion"] == "2026-07-28"
    _compare(direct, proxied)
    assert {q.get("era") for q in proxied["requests"]} == {"modern"}  # sampling, elicitation, roots as input rounds


async def _python_checks(server: Any, mode: str) -> list[Any]:
    from mcp import Client, types

    async def sampling(ctx: Any, params: Any) -> Any:
        return types.CreateMessageResult(role="assistant", model="m", content=types.TextContent(type="text", text="42"))

    async def elicit(ctx: Any, params: Any) -> Any:
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def roots(ctx: Any) -> Any:
        return types.ListRootsResult(roots=[types.Root(uri="file:///work", name="work")])

    out: list[Any] = []
    async with Client(
        server, mode=mode, sampling_callback=sampling, elicitation_callback=elicit, list_roots_callback=roots
    ) as c:
        out.append(c.server_info.name if c.server_info is not None else "mcp-servers/everything")  # (2026: none)
        out.append(sorted(t.name for t in (await c.list_tools()).tools))
        out.append((await c.call_tool("get-sum", {"a": 1, "b": 2})).content[0].text)  # type: ignore[union-attr]
        out.append((await c.call_tool("get-structured-content", {"location": "Chicago"})).structured_content)
        out.append([b.text for b in (await c.call_tool("trigger-sampling-request", {"prompt": "q"})).content][:1])  # type: ignore[union-attr]
        out.append((await c.call_tool("trigger-elicitation-request", {})).content[0].text)  # type: ignore[union-attr]
        out.append((await c.call_tool("get-roots-list", {})).content[0].text)  # type: ignore[union-attr]
        out.append([str(r.uri) for r in (await c.list_resources()).resources])
        read = await c.read_resource("demo://resource/dynamic/text/7")
        out.append(_normal(read.contents[0].text))  # type: ignore[union-attr]
        out.append([m.role for m in (await c.get_prompt("args-prompt", {"city": "Oslo"})).messages])
    return out


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_official_python_sdk_gets_through_the_proxy_what_it_gets_directly(everything: Path, mode: str) -> None:
    from mcp import StdioServerParameters

    direct = await _python_checks(
        StdioServerParameters(command=str(everything), args=[str(EVERYTHING), "stdio"]), "legacy"
    )
    with proxy_of_everything(everything) as url:
        proxied = await _python_checks(url, mode)
    assert proxied == direct
