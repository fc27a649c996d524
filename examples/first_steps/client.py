"""A first MCP client: start ``server.py`` (next to this file) over stdio, list what it offers, call its tools with
typed results and progress, read a resource, get a prompt.

    python examples/first_steps/client.py
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pydantic import BaseModel

from mcpkit import Client, LogMessage, ToolCallError

SERVER = Path(__file__).with_name("server.py")
HOBBIT = "9780261102217"


class Book(BaseModel):
    """What this client expects ``find_book`` to return."""

    isbn: str
    title: str
    author: str
    year: int


def show_progress(done: float, total: float | None, message: str | None) -> None:
    print(f"  progress {done:g}/{total:g}: {message}" if total else f"  progress {done:g}")


async def main() -> None:
    logs: list[LogMessage] = []
    async with Client([sys.executable, str(SERVER)], logging_handler=logs.append) as client:
        assert client.server_info is not None
        print(f"connected to {client.server_info.name} {client.server_info.version} ({client.protocol_version})")
        print("tools:", [tool.name for tool in await client.list_tools()])

        found = await client.call_tool("find_book", {"isbn": HOBBIT}, result_type=Book)
        book = found.data  # a Book: a type checker knows it
        print(f"found: {book.title} by {book.author}, {book.year}")

        missing = await client.call_tool("find_book", {"isbn": "0"})
        try:
            print(missing.data)
        except ToolCallError as exc:
            print("as expected, no such book:", exc.result.text)

        done = await client.call_tool("read_book", {"isbn": HOBBIT}, on_progress=show_progress)
        print(done.text)

        print("summary:", (await client.read_resource(f"books://{HOBBIT}/summary")).text)
        prompt = await client.get_prompt("review", {"isbn": HOBBIT, "tone": "critical"})
        print("prompt:", prompt.text)
    print("server logs:", [f"{m.level}: {m.data}" for m in logs])
    assert [m.data for m in logs] == ["finished The Hobbit"]


if __name__ == "__main__":
    asyncio.run(main())
