"""Interop over the WebSocket transport: the official TypeScript SDK 1.32 ``WebSocketClientTransport`` (Node's
built-in WebSocket, subprotocol ``mcp``) against mcpkit's WebSocketEndpoint on a real uvicorn server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from mcpkit.transports.http.ws import WebSocketEndpoint
from support.paths import TESTS
from support.sse import eventually, make_server, serve

CLIENT = r"""
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js';
import {
  ListRootsRequestSchema, CreateMessageRequestSchema, ElicitRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';
const client = new Client(
  { name: 'ts-ws', version: '1.0.0' }, { capabilities: { roots: {}, sampling: {}, elicitation: {} } },
);
client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///ts' }] }));
client.setRequestHandler(CreateMessageRequestSchema, async () => (
  { role: 'assistant', model: 'm', content: { type: 'text', text: '4' } }
));
client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada' } }));
await client.connect(new WebSocketClientTransport(new URL(process.argv[1])));
const progress = [];
const out = {
  version: client.getServerVersion(),
  tools: (await client.listTools()).tools.map(t => t.name),
  echo: await client.callTool({ name: 'echo', arguments: { text: 'from ts' } }),
  slow: await client.callTool(
    { name: 'slow', arguments: { steps: 3 } }, undefined, { onprogress: p => progress.push(p.progress) },
  ),
  ask: await client.callTool({ name: 'ask', arguments: {} }),
};
out.progress = progress;
console.log(JSON.stringify(out));
await client.close();
"""


@pytest.mark.npm
async def test_typescript_sdk_websocket_client(node_bin: Path) -> None:
    endpoint = WebSocketEndpoint(make_server())
    async with serve(endpoint, **endpoint.uvicorn_options()) as port:
        proc = await asyncio.create_subprocess_exec(
            str(node_bin),
            "--input-type=module",
            "-e",
            CLIENT,
            f"ws://127.0.0.1:{port}/ws",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=str(TESTS),  # resolves @modelcontextprotocol/sdk from tests/node_modules
        )
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode == 0, stderr.decode()[-2000:]
        out = json.loads(stdout)
        assert out["version"]["name"] == "transport-test"
        assert out["tools"] == ["echo", "slow", "ask", "big", "notify"]
        assert out["echo"]["content"][0]["text"] == "from ts"
        assert out["slow"]["content"][0]["text"] == "done 3" and out["progress"] == [1, 2, 3]
        assert out["ask"]["content"][0]["text"] == "accept:Ada|4|file:///ts"
        await eventually(lambda: endpoint.connection_count == 0)
