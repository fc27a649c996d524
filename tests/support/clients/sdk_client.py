"""The official Python SDK's client (``mcp`` 2.3.0) doing what ``mcpkit check-client`` expects of a client:
connect (``mode="auto"``: it probes ``server/discover`` first), list the tools page by page, call each one (asking
for progress), close. It declares roots, sampling and elicitation and answers them.

    python tests/support/clients/sdk_client.py "<server command line>" | http://127.0.0.1:PORT/mcp [--slow-sampling]

With ``--slow-sampling`` its sampling callback takes 60 s (what a cancellation from the server does is the SDK's).
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

import anyio
from mcp import Client, StdioServerParameters, types

SLOW = "--slow-sampling" in sys.argv


async def sampling(ctx: Any, params: Any) -> types.CreateMessageResult:
    if SLOW:
        await anyio.sleep(60)
    text = types.TextContent(type="text", text="hello")
    return types.CreateMessageResult(role="assistant", model="test", content=text, stop_reason="endTurn")


async def elicit(ctx: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def roots(ctx: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///tmp/project", name="project")])


async def progress(*_args: Any) -> None:
    return None


async def main(target: str) -> None:
    server: Any = target
    if not target.startswith(("http://", "https://")):
        argv = shlex.split(target)
        server = StdioServerParameters(command=argv[0], args=argv[1:])
    async with Client(
        server, sampling_callback=sampling, elicitation_callback=elicit, list_roots_callback=roots, cache=None
    ) as client:
        cursor: str | None = None
        names: list[str] = []
        while True:
            page = await client.list_tools(cursor=cursor)
            names += [tool.name for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        for name in names:
            await client.call_tool(name, {}, progress_callback=progress)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
