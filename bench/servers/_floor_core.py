"""The floor's whole MCP: a dict-in, dict-out handler shared by floor_stdio.py and floor_asgi.py.
It is the least that still answers correctly, so every contender's figure can be read as a multiple of it."""

from __future__ import annotations

from typing import Any

from _growth import extra_resources, extra_tools, resource_uri

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSION = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SERVER_INFO = {"name": "floor", "version": "1"}
CAPABILITIES: dict[str, Any] = {"tools": {}}
TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
        "outputSchema": {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]},
    },
]


# growth cases only: the extra registry, answered in one page (the least work a list can be)
TOOLS += [
    {
        "name": f"t{i}",
        "description": "A registry-size tool.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    }
    for i in range(extra_tools())
]
RESOURCES = [{"uri": resource_uri(i), "name": f"r{i}", "mimeType": "text/plain"} for i in range(extra_resources())]
if RESOURCES:
    CAPABILITIES["resources"] = {}


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def _call_tool(params: dict[str, Any]) -> dict[str, Any] | None:
    name = params.get("name")
    args = params.get("arguments") or {}
    if name == "echo":
        text = args.get("text")
        if not isinstance(text, str):
            return {"content": [{"type": "text", "text": "text must be a string"}], "isError": True}
        return {"content": [{"type": "text", "text": text}], "isError": False}
    if name == "add":
        a, b = args.get("a"), args.get("b")
        if type(a) is not int or type(b) is not int:
            return {"content": [{"type": "text", "text": "a and b must be integers"}], "isError": True}
        s = a + b
        return {"content": [{"type": "text", "text": str(s)}], "structuredContent": {"result": s}, "isError": False}
    return None


def handle(msg: Any) -> dict[str, Any] | None:
    """One JSON-RPC message in, the response out (None for notifications and responses)."""
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
        return _error(None, -32600, "Invalid Request")
    method = msg.get("method")
    rid = msg.get("id")
    if method is None or rid is None:
        return None  # a notification (notifications/initialized, cancelled...) or a stray response
    params = msg.get("params") or {}
    meta = params.get("_meta") if isinstance(params, dict) else None
    modern = isinstance(meta, dict) and meta.get(VERSION_KEY) == MODERN_VERSION
    result: dict[str, Any] | None
    if method == "tools/call":
        result = _call_tool(params)
        if result is None:
            return _error(rid, -32602, f"Unknown tool: {params.get('name')}")
    elif method == "tools/list":
        result = {"tools": TOOLS}
        if modern:
            result.update(ttlMs=0, cacheScope="public")
    elif method == "resources/list" and RESOURCES:
        result = {"resources": RESOURCES}
    elif method == "ping" and not modern:
        result = {}
    elif method == "initialize":
        asked = params.get("protocolVersion")
        if not isinstance(asked, str):
            return _error(rid, -32602, "protocolVersion required")
        version = asked if asked in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
        result = {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO}
    elif method == "server/discover":
        result = {
            "supportedVersions": [MODERN_VERSION],
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "ttlMs": 0,
            "cacheScope": "public",
        }
        modern = True
    else:
        return _error(rid, -32601, f"Method not found: {method}")
    if modern:
        result["resultType"] = "complete"
    return {"jsonrpc": "2.0", "id": rid, "result": result}
