"""A stdio MCP server that floods the inspector's page: raw newline-delimited JSON-RPC (handshake era), no mcpkit.

Tools: ``logs`` sends ``n`` ``notifications/message`` before it answers; ``list_changed`` sends ``n``
``notifications/tools/list_changed`` (and as many ``resources/list_changed``); ``counts`` answers how many
``tools/list`` and ``resources/list`` requests the server has been sent so far (as JSON text); ``big_logs`` sends
``n`` ``notifications/message`` whose ``data`` is ``size`` characters (``"<i>:xxx…"``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

SEEN = {"tools/list": 0, "resources/list": 0}
N = {"type": "object", "properties": {"n": {"type": "integer", "default": 1000}}}
TOOLS = [
    {"name": "logs", "description": "sends n log messages", "inputSchema": N},
    {"name": "list_changed", "description": "sends n list_changed notifications", "inputSchema": N},
    {
        "name": "big_logs",
        "description": "sends n log messages of size characters",
        "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}, "size": {"type": "integer"}}},
    },
    {"name": "counts", "description": "how many lists were asked for", "inputSchema": {"type": "object"}},
]


def send(msg: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")


def notify(method: str, params: dict[str, Any] | None = None) -> None:
    send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})


def text(rid: Any, value: str) -> None:
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": value}]}})


def handle(msg: dict[str, Any]) -> None:
    method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
    if rid is None or method is None:
        return
    if method in SEEN:
        SEEN[method] += 1
    if method == "initialize":
        capabilities = {"tools": {"listChanged": True}, "resources": {"listChanged": True}, "logging": {}}
        send(
            {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": capabilities,
                    "serverInfo": {"name": "flood", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method in ("resources/list", "resources/templates/list", "prompts/list"):
        key = {"resources/list": "resources", "resources/templates/list": "resourceTemplates"}.get(method, "prompts")
        send({"jsonrpc": "2.0", "id": rid, "result": {key: []}})
    elif method == "tools/call":
        name, n = params.get("name"), int((params.get("arguments") or {}).get("n", 1000))
        if name == "logs":
            for i in range(n):
                notify("notifications/message", {"level": "info", "logger": "flood", "data": f"line {i}"})
        elif name == "big_logs":
            size = int((params.get("arguments") or {}).get("size", 1024))
            for i in range(n):
                data = f"{i}:".ljust(size, "x")
                notify("notifications/message", {"level": "info", "logger": "flood", "data": data})
        elif name == "list_changed":
            for _ in range(n):
                notify("notifications/tools/list_changed")
                notify("notifications/resources/list_changed")
        text(rid, json.dumps(SEEN) if name == "counts" else "done")
    elif method in ("logging/setLevel", "ping"):
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        if line.strip():
            handle(json.loads(line))


if __name__ == "__main__":
    main()
