"""The low-level server's results on the wire: the ``_meta`` server info of 2026-07-28 results, byte for byte, over a
real memory connection (raw JSON-RPC, no client library between)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson

from mcpkit.protocol.versions import META_SERVER_INFO
from mcpkit.server.lowlevel import Server
from mcpkit.transports.memory import MemoryConnection, create_memory_pair
from support.mcp_http import modern_body

_INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


@asynccontextmanager
async def _serving(server: Server) -> AsyncIterator[MemoryConnection]:
    client, end = create_memory_pair()
    task = asyncio.create_task(server.serve(end))
    try:
        yield client
    finally:
        await client.close()
        await asyncio.wait_for(task, 5)


async def _ask(client: MemoryConnection, message: dict[str, Any]) -> bytes:
    await client.send(orjson.dumps(message))
    data = await asyncio.wait_for(client.receive(), 5)
    assert data is not None
    return data


def _call(rid: int) -> dict[str, Any]:
    return modern_body("tools/call", {"name": "x", "arguments": {}}, rid=rid)


async def test_a_modern_result_carries_the_server_info_encoded_once_and_replaced_with_the_info() -> None:
    """Every 2026-07-28 result without a ``_meta`` of its own carries the server's info in the one ``_meta`` object
    the server encoded for it (the same object in every result: it is not made and encoded again per result), with
    the bytes of the info itself; a server whose ``info`` is replaced carries the new info from then on."""
    server = Server("once", "1.0", title="Once")
    results: list[dict[str, Any]] = []

    def call(ctx: Any, params: Any) -> dict[str, Any]:
        results.append({"content": []})
        return results[-1]

    server.set_handler("tools/call", call)
    async with _serving(server) as client:
        first = await _ask(client, _call(1))
        second = await _ask(client, _call(2))
        assert first == (
            b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete","_meta":'
            b'{"io.modelcontextprotocol/serverInfo":{"name":"once","version":"1.0","title":"Once"}},"isError":false}}'
        )
        assert second == first.replace(b'"id":1', b'"id":2')
        assert results[0]["_meta"] is results[1]["_meta"]  # (encoded once, for both)
        server.info = {"name": "once", "version": "2.0"}
        third = orjson.loads(await _ask(client, _call(3)))
        assert third["result"]["_meta"] == {META_SERVER_INFO: {"name": "once", "version": "2.0"}}


async def test_a_result_with_its_own_meta_or_returned_again_in_either_era_is_shaped_as_a_new_one() -> None:
    """A result with its own ``_meta`` gets the server info added after its keys (in a new dict: the handler's is
    not changed); the same result dict returned again by a handler (a kept one) is answered the same in the
    2026-07-28 era and without server info in the handshake era; a result beyond orjson's integers (written by the
    standard library) keeps its server info."""
    server = Server("again", "1.0")
    own_meta = {"k": 1}
    own = {"content": [], "_meta": own_meta}
    kept: dict[str, Any] = {"content": []}
    wide = {"content": [], "structuredContent": {"n": 2**70}}
    handed = {"own": own, "kept": kept, "wide": wide}
    server.set_handler("tools/call", lambda ctx, params: handed[params["name"]])
    async with _serving(server) as client:
        answer = await _ask(client, modern_body("tools/call", {"name": "own"}, rid=1))
        meta = orjson.loads(answer)["result"]["_meta"]
        assert meta == {"k": 1, META_SERVER_INFO: {"name": "again", "version": "1.0"}} and own_meta == {"k": 1}
        assert list(meta) == ["k", META_SERVER_INFO]
        modern = [await _ask(client, modern_body("tools/call", {"name": "kept"}, rid=2)) for _ in range(2)]
        assert modern[0] == modern[1] and b'"_meta":{"io.modelcontextprotocol/serverInfo":' in modern[0]
        answer = json.loads(await _ask(client, modern_body("tools/call", {"name": "wide"}, rid=3)))
        assert answer["result"]["structuredContent"] == {"n": 2**70}
        assert answer["result"]["_meta"] == {META_SERVER_INFO: {"name": "again", "version": "1.0"}}
        await _ask(client, {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": _INIT})
        await client.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        params = {"name": "kept", "arguments": {}}
        answer = await _ask(client, {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": params})
        assert orjson.loads(answer) == {"jsonrpc": "2.0", "id": 5, "result": {"content": [], "isError": False}}


async def test_a_server_info_beyond_orjsons_integers_is_still_answered_in_modern_results() -> None:
    """A server's info is anyone's JSON (a proxy takes its upstream's): one beyond orjson's integers is written
    exactly, and the server answers as usual."""
    server = Server("wide")
    server.info = {"name": "wide", "version": "1", "build": 2**70}
    server.set_handler("tools/call", lambda ctx, params: {"content": []})
    async with _serving(server) as client:
        answer = json.loads(await _ask(client, _call(1)))
        assert answer["result"]["_meta"] == {META_SERVER_INFO: {"name": "wide", "version": "1", "build": 2**70}}
