"""The server's side of a fan-out: what this worker's clients are told when events of other workers may be lost."""

from __future__ import annotations

import asyncio
import contextlib

from mcpkit import MCPKit
from mcpkit.transports.memory import create_memory_pair
from support.core import RawPeer


async def test_a_look_again_notice_names_only_the_lists_the_server_declares() -> None:
    """After a fan-out gap, every client is told to look again at every list, but only at lists the server
    declared (with listChanged): a client MUST only be sent what was negotiated, and this server has tools and no
    prompts or resources, so a prompts or resources list_changed is one a client never agreed to."""
    app = MCPKit("tools-only")

    @app.tool
    def echo(text: str) -> str:
        return text

    c, s = create_memory_pair()
    serving = asyncio.get_running_loop().create_task(app.serve(s))
    peer = RawPeer(c)
    try:
        init = await peer.initialize()
        assert set(init["result"]["capabilities"]) == {"tools", "logging"}
        await peer.request(1, "ping")  # (initialized has been handled)
        await app.deliver_missed()
        await peer.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        _, notes = await peer.recv_until(lambda m: m.get("id") == 2)
        assert [n["method"] for n in notes] == ["notifications/tools/list_changed"]
    finally:
        await c.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(serving, 5)
