"""A stdio server whose tool takes dependencies: a generator-managed store and the caller's name from the Context
(tests/server/test_dependencies.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from mcpkit import Context, MCPKit
from mcpkit.server.dependencies import Depends

app = MCPKit("dependencies")
opened: list[int] = []


def store() -> Iterator[str]:
    opened.append(1)
    yield f"pid-scoped store {len(opened)}"
    opened.pop()


def caller(ctx: Context) -> str:
    return str((ctx.client_info or {}).get("name"))


@app.tool
def whoami(greeting: str, who: Annotated[str, Depends(caller)], db: str = Depends(store)) -> str:
    return f"{greeting}, {who} (request handled by {db})"


if __name__ == "__main__":
    app.run()
