"""mcpkit's own client doing what ``mcpkit check-client`` expects of a client: connect, list the tools (every
page), call each one (asking for progress), close. It declares roots, sampling and elicitation and answers them.

    python tests/clients/mcpkit_client.py "<server command line>" | http://127.0.0.1:PORT/mcp
"""

from __future__ import annotations

import asyncio
import sys

from mcpkit import Client


async def sample(params: dict) -> dict:
    return {"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "test", "stopReason": "endTurn"}


async def elicit(params: dict) -> dict:
    return {"action": "accept", "content": {"name": "Ada"}}


async def main(target: str) -> None:
    client = Client(
        target,
        roots=[{"uri": "file:///tmp/project", "name": "project"}],
        sampling_handler=sample,
        elicitation_handler=elicit,
        timeout=20,
    )
    async with client:
        tools = await client.list_tools()
        for tool in tools:
            await client.call_tool(tool.name, {}, on_progress=lambda *a: None)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
