"""Interop over the legacy HTTP+SSE transport: the official TypeScript SDK clients (1.32 and v2 2.4, via
tests/support/interop/ts_client*.mjs) against mcpkit's LegacySSEEndpoint on a real uvicorn server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from mcpkit.transports.http.sse import LegacySSEEndpoint
from support.paths import INTEROP, TESTS
from support.sse import eventually, make_server, serve
from support.ts_peers import run_ts_client

OPTIONS = {"elicitation": {"action": "accept", "content": {"name": "Ada"}}, "sampling": {"text": "4"}}
STEPS = [
    {"op": "listTools"},
    {"op": "callTool", "name": "echo", "arguments": {"text": "hi"}},
    {"op": "callTool", "name": "slow", "arguments": {"steps": 3}, "progress": True},
    {"op": "callTool", "name": "ask"},
]


async def run_sse_client(node: Path, client: str, url: str, *extra: str) -> dict[str, Any]:
    return await run_ts_client(node, client, ["--sse", url], {"options": OPTIONS, "steps": STEPS}, *extra)


def texts(result: dict[str, Any]) -> list[str]:
    return [r["content"][0]["text"] for r in result["results"][1:]]


@pytest.mark.npm
@pytest.mark.req("A005", "A007")
async def test_typescript_sdk_v1_sse_client(node_bin: Path) -> None:
    endpoint = LegacySSEEndpoint(make_server())
    async with serve(endpoint) as port:
        out = await run_sse_client(node_bin, "ts_client.mjs", f"http://127.0.0.1:{port}/sse")
        assert out["era"] == "legacy" and out["protocolVersion"] == "2025-11-25"
        assert out["serverInfo"]["name"] == "transport-test"
        assert [t["name"] for t in out["results"][0]["tools"]] == ["echo", "slow", "ask", "big", "notify"]
        assert texts(out) == ["hi", "done 3", "accept:Ada|4|file:///tmp/interop-root"]
        progress = [n["params"]["progress"] for n in out["notifications"] if n["method"] == "notifications/progress"]
        assert progress == [1, 2, 3]
        assert [r["method"] for r in out["requests"]] == ["elicitation/create", "sampling/createMessage", "roots/list"]
        await eventually(lambda: endpoint.session_count == 0)


@pytest.mark.npm
@pytest.mark.parametrize("negotiation", ["legacy", "auto"])
async def test_typescript_sdk_v2_sse_client(node_bin: Path, negotiation: str) -> None:
    """SDK v2 with ``legacy`` negotiation speaks the handshake era; with ``auto`` its server/discover probe is
    answered (the session's peer serves both eras), so it runs 2026-07-28 over the SSE stream."""
    endpoint = LegacySSEEndpoint(make_server())
    async with serve(endpoint) as port:
        out = await run_sse_client(
            node_bin, "ts_client_v2.mjs", f"http://127.0.0.1:{port}/sse", "--negotiation", negotiation
        )
        assert out["era"] == ("legacy" if negotiation == "legacy" else "modern")
        assert texts(out) == ["hi", "done 3", "accept:Ada|4|file:///tmp/interop-root"]
        await eventually(lambda: endpoint.session_count == 0)


async def test_our_sse_client_against_the_official_python_sdk_server() -> None:
    """mcpkit's SSEClientTransport + ClientSession against ``mcp`` 2.3.0's MCPServer.sse_app() (Starlette,
    endpoint ``/messages/?session_id=<uuid hex>``) on a real uvicorn server."""
    from mcp.server.mcpserver import MCPServer

    from mcpkit.client.lowlevel import ClientSession
    from mcpkit.transports.http.sse_client import SSEClientTransport

    official = MCPServer("official-sse")

    @official.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    async with (
        serve(official.sse_app()) as port,
        SSEClientTransport(f"http://127.0.0.1:{port}/sse") as conn,
        ClientSession(conn, mode="handshake") as session,
    ):
        assert conn.endpoint is not None and conn.endpoint.path == "/messages/"
        assert session.server_info is not None and session.server_info["name"] == "official-sse"
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ["add"]
        r = await session.call_tool("add", {"a": 2, "b": 3})
        assert r.content[0].text == "5"  # type: ignore[union-attr]
        await session.ping()


@pytest.mark.npm
async def test_our_sse_client_against_the_typescript_sdk_sse_server(node_bin: Path) -> None:
    """mcpkit's SSEClientTransport + ClientSession against SDK 1.32's SSEServerTransport (ts_server.mjs --sse:
    endpoint ``/messages?sessionId=<uuid>``), in both negotiation modes, with the server's questions (sampling,
    elicitation, roots) answered over the POST side."""
    from mcpkit.client.lowlevel import ClientSession
    from mcpkit.transports.http.sse_client import SSEClientTransport
    from support.sse import client_handlers

    proc = await asyncio.create_subprocess_exec(
        str(node_bin),
        str(INTEROP / "ts_server.mjs"),
        "--sse",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=str(TESTS),
    )
    try:
        assert proc.stdout is not None
        port = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))["port"]
        for mode in ("handshake", "auto"):
            async with (
                SSEClientTransport(f"http://127.0.0.1:{port}/sse") as conn,
                ClientSession(conn, mode=mode, **client_handlers()) as session,
            ):
                assert conn.endpoint is not None and conn.endpoint.path == "/messages"
                assert session.server_info is not None and session.server_info["name"] == "ts-interop-server"
                assert "echo" in [t.name for t in (await session.list_tools()).tools]
                calls = [("echo", {"text": "hi"}), ("sample", {"prompt": "2+2?"}), ("ask_name", {}), ("roots", {})]
                answers = [(await session.call_tool(name, args)).content[0].text for name, args in calls]  # type: ignore[union-attr]
                assert answers[:3] == ["hi", "4", "Hello, Ada!"]
                assert json.loads(answers[3]) == [{"uri": "file:///work"}]
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)
