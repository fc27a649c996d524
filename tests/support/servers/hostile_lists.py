"""A stdio MCP server (handshake era, standard library only) whose ``tools/list`` misbehaves, for a proxy's tool
search: ``python hostile_lists.py MODE [PAGES] [DELAY]``.

  repeat  every page is the same two tools (``alpha``, ``beta``) and names the same ``nextCursor`` again: the
          listing never ends.
  slow    ``PAGES`` pages of one tool each (``t0``, ``t1``, ...), each answered after ``DELAY`` seconds.

Every ``tools/call`` answers ``called <name>``; other requests but ``ping`` are -32601.
"""

from __future__ import annotations

import json
import sys
import time

MODE = sys.argv[1]
PAGES = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
DELAY = float(sys.argv[3]) if len(sys.argv) > 3 else 0.5
out = sys.stdout.buffer


def send(msg: object) -> None:
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()


def tool(name: str) -> dict[str, object]:
    return {"name": name, "description": f"the tool {name}", "inputSchema": {"type": "object"}}


def page(params: dict[str, object]) -> dict[str, object]:
    if MODE == "repeat":
        return {"tools": [tool("alpha"), tool("beta")], "nextCursor": "again"}
    n = int(str(params.get("cursor") or 0))
    time.sleep(DELAY)
    result: dict[str, object] = {"tools": [tool(f"t{n}")]}
    if n + 1 < PAGES:
        result["nextCursor"] = str(n + 1)
    return result


for line in sys.stdin.buffer:
    msg = json.loads(line)
    if "id" not in msg or "method" not in msg:
        continue
    rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
    if method == "initialize":
        info = {"name": "hostile-lists", "version": "1"}
        version = params.get("protocolVersion", "2025-06-18")
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info},
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": page(params)})
    elif method == "tools/call":
        send(
            {"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "called " + params["name"]}]}}
        )
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no " + method}})
