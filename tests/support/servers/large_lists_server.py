"""An MCPKit server with large lists, everything at its defaults, over stdio:

    python large_lists_server.py RESOURCES [TOOLS]

RESOURCES static text resources ``mem://r/0`` .. (named ``r0`` ..) and TOOLS tools ``t0`` .. (default 0)."""

from __future__ import annotations

import sys

from mcpkit import MCPKit


def echo(text: str) -> str:
    return text


app = MCPKit("large-lists")
for i in range(int(sys.argv[1])):
    app.add_resource(f"mem://r/{i}", "x", name=f"r{i}")
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 0):
    app.add_tool(echo, name=f"t{i}")

if __name__ == "__main__":
    app.run()
