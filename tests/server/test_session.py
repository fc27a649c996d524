"""A handshake-era session as a client drives it over a real pipe: the order its messages arrive in."""

from __future__ import annotations

import asyncio
import sys
import textwrap

import orjson

_SERVER = textwrap.dedent(
    """
    from mcpkit import MCPKit

    app = MCPKit("pipelined")

    @app.tool
    async def change() -> str:
        await app.notify_list_changed("tools")
        return "changed"

    app.run()
    """
)


async def test_initialized_sent_right_behind_initialize_initializes_the_session() -> None:
    """A client that writes initialize and notifications/initialized together (one write, before the answer) gets
    an initialized session: notifications/initialized is not lost because initialize had not run yet, so the
    session's list_changed notifications reach it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SERVER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    proc.stdin.write(b"".join(orjson.dumps(m) + b"\n" for m in lines))
    await proc.stdin.drain()
    try:
        assert "result" in orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 20))
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "change", "arguments": {}}}
        proc.stdin.write(orjson.dumps(call) + b"\n")
        await proc.stdin.drain()
        seen: list[dict[str, object]] = []
        while not seen or seen[-1].get("id") != 1:
            seen.append(orjson.loads(await asyncio.wait_for(proc.stdout.readline(), 10)))
        assert [m.get("method") for m in seen] == ["notifications/tools/list_changed", None]
    finally:
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 10)
