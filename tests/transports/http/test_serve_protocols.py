"""``build_server`` on both of uvicorn's HTTP/1.1 protocols: httptools (what ``http="auto"`` picks now that the
``http`` extra installs it) and h11 (``http="h11"``).

The connection guard (``transports/http/limits.py``) wraps whichever protocol class uvicorn uses; the issue 12
limit tests in ``test_edges_limits.py`` run on the default one. This test holds the guard's three head-side bounds
(header timeout, head size, connection count) and a normal tool call, through both the httpx client and the
client's own fast path, on each protocol, so pinning h11 stays a supported choice.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import StreamableHTTPClientTransport
from support.edges import closed_by_peer, half_open, served, tool_call


@pytest.mark.parametrize("http", ["httptools", "h11", "auto"])
async def test_guard_bounds_heads_and_connections_on_every_protocol(http: str) -> None:
    """Each protocol: a stalled head is closed after ``header_timeout``, a head growing past ``max_header_bytes``
    is closed, 60 half-open connections leave at most ``max_connections`` open, and calls still succeed."""
    async with served(http=http, header_timeout=0.5, max_header_bytes=8192, max_connections=20) as (base, userver):
        # auto: httptools is installed; the httptools protocol also takes the lane (transports/http/lane.py)
        expected = "LaneGuardedHttpTools" if http in ("httptools", "auto") else "GuardedH11"
        assert userver.config.http.__name__ == f"{expected}Protocol"
        port = int(base.rsplit(":", 1)[1])
        loop = asyncio.get_running_loop()

        stalled = await half_open(port)
        growing = await half_open(port)
        try:
            for _ in range(3):  # 12 KB without the blank line that ends a head
                await loop.sock_sendall(growing, b"X-Pad: " + b"a" * 4000 + b"\r\n")
        except OSError:
            pass
        try:
            assert await closed_by_peer(growing, 3.0), "a head past max_header_bytes was accepted"
            assert await closed_by_peer(stalled, 3.0), "a stalled head was never closed"
        finally:
            stalled.close()
            growing.close()

        socks = [await half_open(port) for _ in range(60)]
        try:
            await asyncio.sleep(0.2)
            assert userver.mcpkit_guard.connections <= 20
            async with httpx.AsyncClient() as client:
                await tool_call(client, base + "/mcp")
        finally:
            for s in socks:
                s.close()

        # the client's fast path (httptools parsing the responses) against this protocol
        transport = StreamableHTTPClientTransport(base + "/mcp", get_stream=False)
        assert transport.fast_path
        async with transport, ClientSession(transport, mode="handshake", timeout=10) as session:
            assert "hi" in str(await session.call_tool("echo", {"text": "hi"}))
            assert transport._pool is not None
            opened = transport._pool.connects  # (the initialized notification may overlap the first call)
            for _ in range(3):  # sequential calls reuse the kept-alive connections
                assert "hi" in str(await session.call_tool("echo", {"text": "hi"}))
            assert transport._pool.connects == opened


async def _raw_post(port: int, body: bytes, headers: list[tuple[str, str]]) -> tuple[int, dict[str, str], bytes]:
    """One POST /mcp written byte for byte (httpx refuses to send padded header values), Connection: close."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
    head += "Accept: application/json, text/event-stream\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers) + f"Content-Length: {len(body)}\r\n\r\n"
    writer.write(head.encode("latin-1") + body)
    await writer.drain()
    data = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    top, _, rest = data.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    found = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), found, rest


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_mcp_header_values_are_compared_without_surrounding_whitespace(http: str) -> None:
    """A field value excludes the whitespace around it (RFC 9110 §5.5; conformance SEP-2243 "server accepts
    whitespace header value"): h11 strips it, httptools keeps what trails, so mcpkit trims the MCP headers it
    compares. Modern Mcp-Method / Mcp-Name / MCP-Protocol-Version and a handshake Mcp-Session-Id, padded."""
    import orjson

    from support.mcp_http import initialize_body, modern_body

    async with served(http=http) as (base, _):
        port = int(base.rsplit(":", 1)[1])
        body = orjson.dumps(modern_body("tools/call", {"name": "echo", "arguments": {"text": "hi"}}))
        pad = [("MCP-Protocol-Version", "2026-07-28\t"), ("Mcp-Method", "tools/call "), ("Mcp-Name", "echo  ")]
        status, _, rest = await _raw_post(port, body, pad)
        assert status == 200 and b"hi" in rest, rest
        status, headers, rest = await _raw_post(port, orjson.dumps(initialize_body()), [])
        assert status == 200, rest
        sid = headers["mcp-session-id"]
        ping = b'{"jsonrpc":"2.0","id":2,"method":"ping"}'
        pad = [("Mcp-Session-Id", sid + "  "), ("MCP-Protocol-Version", "2025-11-25 ")]
        status, _, rest = await _raw_post(port, ping, pad)
        assert status == 200, rest
