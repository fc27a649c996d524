"""``network.transport`` on the server's spans: the transport each request came over (``pipe``: stdio; ``tcp``:
Streamable HTTP in both eras, legacy SSE, WebSocket; ``unix``: HTTP on a Unix domain socket; none in memory)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from mcpkit import Client
from mcpkit.transports.http import build_asgi_server, create_app
from support.asgi import serve_asgi
from support.mcp_http import modern_body, modern_headers
from support.paths import SERVERS
from support.toolkit import ERAS

sys.path.insert(0, str(SERVERS))

import telemetry_app


@contextlib.asynccontextmanager
async def connect(kind: str, mode: str) -> AsyncIterator[Client]:
    if kind == "stdio":
        async with Client([sys.executable, str(SERVERS / "telemetry_app.py")], mode=mode) as client:
            yield client
        return
    if kind == "memory":
        async with Client(telemetry_app.build(), mode=mode) as client:
            yield client
        return
    app = create_app(telemetry_app.build(), sse=True, ws=True)
    async with serve_asgi(app) as port:
        url = {
            "http": f"http://127.0.0.1:{port}/mcp",
            "sse": f"http://127.0.0.1:{port}/sse",
            "ws": f"ws://127.0.0.1:{port}/ws",
        }[kind]
        async with Client(url, mode=mode, transport="sse" if kind == "sse" else None) as client:  # type: ignore[arg-type]
            yield client


@pytest.mark.parametrize(
    ("kind", "mode", "network"),
    [
        *[("stdio", mode, "pipe") for mode in ERAS],
        *[("http", mode, "tcp") for mode in ERAS],  # (modern: the stateless peer; handshake: a session)
        ("sse", "handshake", "tcp"),
        ("ws", "handshake", "tcp"),
        *[("memory", mode, None) for mode in ERAS],
    ],
)
async def test_the_servers_spans_name_the_transport_the_request_came_over(
    kind: str, mode: str, network: str | None
) -> None:
    async with connect(kind, mode) as client:
        await client.call_tool("forget", {})
        await client.call_tool("add", {"a": 1, "b": 2})
        spans = (await client.call_tool("spans", {})).structured["result"]
    served = next(s for s in spans if s["name"] == "tools/call add")
    assert served["kind"] == "SERVER"
    assert served["attributes"].get("network.transport") == network


async def test_the_servers_spans_over_a_unix_socket_name_unix() -> None:
    app = create_app(telemetry_app.build())
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "mcp.sock")
        uv = build_asgi_server(app, uds=path)
        task = asyncio.get_running_loop().create_task(uv.serve())
        try:
            for _ in range(200):
                if uv.started:
                    break
                await asyncio.sleep(0.02)
            assert uv.started
            transport = httpx.AsyncHTTPTransport(uds=path)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=10) as http:

                async def call(name: str, arguments: dict[str, Any]) -> Any:
                    body = modern_body("tools/call", {"name": name, "arguments": arguments})
                    reply = await http.post("/mcp", json=body, headers=modern_headers("tools/call", name))
                    assert reply.status_code == 200, reply.text
                    text = reply.text
                    if text.startswith("{"):
                        return orjson.loads(text)
                    data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
                    return orjson.loads(data[-1])

                await call("add", {"a": 1, "b": 2})
                spans = (await call("spans", {}))["result"]["structuredContent"]["result"]
        finally:
            uv.should_exit = True
            await asyncio.wait_for(task, 10)
    served = next(s for s in spans if s["name"] == "tools/call add")
    assert served["attributes"].get("network.transport") == "unix"
