"""A handshake-era session as a client drives it over a real pipe: the order its messages arrive in, and the
notifications it is sent."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap
from collections.abc import AsyncIterator
from typing import Any

import orjson

_SERVER = textwrap.dedent(
    """
    from mcpkit import MCPKit

    app = MCPKit("pipelined")

    @app.tool
    async def change() -> str:
        await app.notify_list_changed("tools")
        return "changed"

    @app.tool
    async def change_everything() -> str:
        app.add_prompt(lambda: "hello", name="greet")  # a first prompt: the server now has prompts
        await app.notify_list_changed("resources")  # (it has no resources)
        await app.notify_list_changed("tools")
        return "changed"

    app.run()
    """
)
_INIT = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}


class _Pipe:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.stdin, self.stdout = proc.stdin, proc.stdout

    async def write(self, *messages: dict[str, Any]) -> None:
        self.stdin.write(b"".join(orjson.dumps(m) + b"\n" for m in messages))
        await self.stdin.drain()

    async def read(self) -> dict[str, Any]:
        message: dict[str, Any] = orjson.loads(await asyncio.wait_for(self.stdout.readline(), 20))
        return message

    async def call(self, rid: int, tool: str) -> list[dict[str, Any]]:
        """What the server writes from a tools/call of ``tool`` up to its answer (included)."""
        await self.write({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool}})
        seen = [await self.read()]
        while seen[-1].get("id") != rid:
            seen.append(await self.read())
        return seen


@contextlib.asynccontextmanager
async def _server() -> AsyncIterator[_Pipe]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _SERVER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    try:
        yield _Pipe(proc)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 10)


async def test_initialized_sent_right_behind_initialize_initializes_the_session() -> None:
    """A client that writes initialize and notifications/initialized together (one write, before the answer) gets
    an initialized session: notifications/initialized is not lost because initialize had not run yet, so the
    session's list_changed notifications reach it."""
    async with _server() as pipe:
        await pipe.write(
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _INIT},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        )
        assert "result" in await pipe.read()
        seen = await pipe.call(1, "change")
        assert [m.get("method") for m in seen] == ["notifications/tools/list_changed", None]


async def test_list_changed_goes_only_to_sessions_that_were_declared_that_list() -> None:
    """A session is sent notifications/<kind>/list_changed only for a list its initialize answer declared with
    listChanged (capability negotiation): not for a server without resources, nor for prompts that appeared
    after it initialized."""
    async with _server() as pipe:
        await pipe.write({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _INIT})
        answer = await pipe.read()
        assert set(answer["result"]["capabilities"]) == {"tools", "logging"}
        await pipe.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        seen = await pipe.call(1, "change_everything")
        assert [m.get("method") for m in seen] == ["notifications/tools/list_changed", None]


_DESCRIBED_SERVER = textwrap.dedent(
    """
    from mcpkit import MCPKit

    icon = {"src": "https://example.com/icon.png", "mimeType": "image/png"}
    app = MCPKit(
        "described", version="1.2.3", title="Described", description="A server that says what it is",
        website_url="https://example.com", icons=[icon],
    )

    @app.tool
    def hello() -> str:
        return "hi"

    app.run()
    """
)


async def test_server_info_carries_only_the_fields_of_the_negotiated_revision() -> None:
    """``serverInfo`` is the revision's ``Implementation`` (schema.ts): name and version at 2024-11-05 and
    2025-03-26, a title from 2025-06-18, description, websiteUrl and icons from 2025-11-25, as tools, resources
    and prompts are shaped; 2026-07-28 requests carry all of it in ``_meta``."""
    from support.mcp_http import modern_body

    expected = {
        "2024-11-05": {"name", "version"},
        "2025-03-26": {"name", "version"},
        "2025-06-18": {"name", "version", "title"},
        "2025-11-25": {"name", "version", "title", "description", "websiteUrl", "icons"},
    }
    for version, keys in expected.items():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _DESCRIBED_SERVER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        pipe = _Pipe(proc)
        try:
            await pipe.write(
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {**_INIT, "protocolVersion": version}}
            )
            answer = (await pipe.read())["result"]
            assert answer["protocolVersion"] == version
            assert set(answer["serverInfo"]) == keys, (version, answer["serverInfo"])
            assert answer["serverInfo"]["name"] == "described" and answer["serverInfo"]["version"] == "1.2.3"
            if version == "2025-11-25":
                await pipe.write(modern_body("tools/list", rid=1))  # (a 2026-07-28 request on its own)
                modern = (await pipe.read())["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]
                assert modern == answer["serverInfo"]
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            await asyncio.wait_for(proc.wait(), 10)
