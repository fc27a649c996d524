"""A stdio MCP server whose resource updates are large, for the tests of a client's watch that reads them slower
than they come (raw newline-delimited JSON-RPC, no mcpkit: an mcpkit server sends ``resources/updated`` with the
URI only). Both eras: ``initialize`` (handshake era: ``resources/subscribe``, then updates on the session) and
``server/discover`` (2026-07-28: updates on the ``subscriptions/listen`` stream, which it acknowledges).

    python big_changes_server.py

The tool ``burst`` (arguments ``uris``, ``size``) sends, one after the other, a ``notifications/resources/updated``
of each URI it is given (repeats included, in that order), each carrying ``size`` bytes of padding in its
``_meta`` (``example.com/pad``), then answers ``sent N``. Every other request is answered as an empty success.
"""

from __future__ import annotations

import json
import sys
from typing import Any

INFO = {"name": "big-changes", "version": "1"}
MODERN = "2026-07-28"
CAPS = {"tools": {}, "resources": {"subscribe": True}}
PAD = "example.com/pad"
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
TOOL = {
    "name": "burst",
    "inputSchema": {
        "type": "object",
        "properties": {"uris": {"type": "array", "items": {"type": "string"}}, "size": {"type": "integer"}},
        "required": ["uris", "size"],
    },
}

modern = False
listens: list[Any] = []  # the ids of the open subscriptions/listen requests (2026-07-28)


def send(msg: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(msg).encode() + b"\n")
    sys.stdout.buffer.flush()


def answer(rid: Any, result: dict[str, Any]) -> None:
    if modern:
        result = {"resultType": "complete", **result, "_meta": {"io.modelcontextprotocol/serverInfo": INFO}}
    send({"jsonrpc": "2.0", "id": rid, "result": result})


def burst(uris: list[str], size: int) -> None:
    for uri in uris:
        metas = [{PAD: " " * size, SUBSCRIPTION_ID: rid} for rid in listens] if modern else [{PAD: " " * size}]
        for meta in metas:
            send({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": uri, "_meta": meta}})


def serve(msg: dict[str, Any]) -> None:
    global modern
    rid, method, params = msg.get("id"), msg.get("method"), msg.get("params") or {}
    if rid is None or not isinstance(method, str):
        return  # (notifications, answers)
    if method == "initialize":
        answer(rid, {"protocolVersion": params.get("protocolVersion"), "capabilities": CAPS, "serverInfo": INFO})
    elif method == "server/discover":
        modern = True
        answer(rid, {"supportedVersions": [MODERN], "capabilities": CAPS, "ttlMs": 0, "cacheScope": "private"})
    elif method == "subscriptions/listen":
        listens.append(rid)
        ack = {"notifications": params.get("notifications") or {}, "_meta": {SUBSCRIPTION_ID: rid}}
        send({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged", "params": ack})
    elif method == "tools/list":
        answer(rid, {"tools": [TOOL]} | ({"ttlMs": 0} if modern else {}))
    elif method == "tools/call":
        args = params.get("arguments") or {}
        burst(args["uris"], args["size"])
        answer(rid, {"content": [{"type": "text", "text": f"sent {len(args['uris'])}"}]})
    else:
        answer(rid, {})


def main() -> None:
    for line in sys.stdin.buffer:
        if line.strip():
            serve(json.loads(line))


if __name__ == "__main__":
    main()
