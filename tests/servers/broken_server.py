"""A hand-written stdio MCP server with switchable, deliberate faults (a fixture for ``mcpkit check`` tests).

It does NOT use mcpkit (which would get things right); it speaks raw newline-delimited JSON-RPC. Without
``--fault`` it is correct, so every check fault-free passes; each fault breaks exactly one rule:

    python tests/servers/broken_server.py [--fault NAME ...]

Faults: wrong-id, stdout-junk, missing-fields, result-and-error, bad-error, notification-id, ping-nonempty,
undeclared-prompts, no-fallback, progress-decreasing, ignore-cancel, accept-any-cursor, no-batch, no-content,
bad-content, multiline, request-null-id, request-reused-id, modern-any-version.

It also answers ``server/discover`` (2026-07-28, stateless): requests carrying ``_meta`` are served the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

FAULTS = {
    "wrong-id",
    "stdout-junk",
    "missing-fields",
    "result-and-error",
    "bad-error",
    "notification-id",
    "ping-nonempty",
    "undeclared-prompts",
    "no-fallback",
    "progress-decreasing",
    "ignore-cancel",
    "accept-any-cursor",
    "no-batch",
    "no-content",
    "bad-content",
    "multiline",
    "request-null-id",
    "request-reused-id",
    "modern-any-version",
}
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
PAGE_CURSOR = "page-2"

TOOLS = [
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    },
    {
        "name": "slow",
        "description": "Report progress for `steps` x 100 ms; stops when cancelled.",
        "inputSchema": {"type": "object", "properties": {"steps": {"type": "integer", "maximum": 100}}},
    },
]
RESOURCES = [
    {"uri": "test://one", "name": "one", "mimeType": "text/plain"},
    {"uri": "test://two", "name": "two", "mimeType": "application/octet-stream"},
]
PROMPTS = [{"name": "hello", "description": "Say hello.", "arguments": [{"name": "who", "required": True}]}]


class Server:
    def __init__(self, faults: set[str]) -> None:
        self.faults = faults
        self.version = "2025-11-25"
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.roots_capable = False

    def has(self, fault: str) -> bool:
        return fault in self.faults

    def write(self, msg: Any) -> None:
        text = json.dumps(msg, indent=1) if self.has("multiline") else json.dumps(msg, separators=(",", ":"))
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    def result(self, rid: Any, result: Any) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    def error(self, rid: Any, code: int, message: str) -> dict[str, Any]:
        err: dict[str, Any] = {"code": code, "message": message}
        if self.has("bad-error"):
            del err["message"]
        return {"jsonrpc": "2.0", "id": rid, "error": err}

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {
            "tools": {"listChanged": False},
            "resources": {"subscribe": True},
            "prompts": {},
            "logging": {},
            "completions": {},
        }
        if self.has("undeclared-prompts"):
            del caps["prompts"]
        return caps

    async def handle_message(self, msg: Any) -> dict[str, Any] | None:
        if not isinstance(msg, dict):
            return self.error(None, -32600, "Invalid Request")
        if "method" not in msg:
            if "id" in msg and "result" not in msg and "error" not in msg:
                return self.error(msg["id"], -32600, "Invalid Request")
            return None  # a response to us: ignore
        method, rid, params = msg["method"], msg.get("id"), msg.get("params") or {}
        if "id" not in msg:
            if method == "notifications/roots/list_changed" and self.roots_capable:
                # ask for the roots (twice, so a reused id would show)
                for n in (1, 2):
                    rid_out: Any = (
                        None if self.has("request-null-id") else f"srv-{1 if self.has('request-reused-id') else n}"
                    )
                    self.write({"jsonrpc": "2.0", "id": rid_out, "method": "roots/list"})
            if method == "notifications/cancelled" and not self.has("ignore-cancel"):
                task = self.tasks.pop(json.dumps(params.get("requestId")), None)
                if task is not None:
                    task.cancel()
            return None
        if method == "tools/call" and params.get("name") == "slow":
            task = asyncio.create_task(self.slow(rid, params))
            self.tasks[json.dumps(rid)] = task
            return None
        try:
            result = self.dispatch(method, params, rid)
        except LookupError as exc:
            reply = self.error(rid, exc.args[0], exc.args[1])
            if len(exc.args) > 2:
                reply["error"]["data"] = exc.args[2]
            return reply
        if method == "ping" and self.has("result-and-error"):
            return {"jsonrpc": "2.0", "id": rid, "result": {}, "error": {"code": -32603, "message": "both"}}
        if method == "tools/list" and self.has("wrong-id"):
            rid = rid + 1000 if isinstance(rid, int) else f"{rid}-wrong"
        return self.result(rid, result)

    def dispatch(self, method: str, params: dict[str, Any], rid: Any) -> Any:
        if method == "initialize":
            requested = params.get("protocolVersion")
            if requested not in VERSIONS:
                if self.has("no-fallback"):
                    raise LookupError(-32602, f"Unsupported protocol version {requested}")
                requested = "2025-11-25"
            self.version = requested
            self.roots_capable = "roots" in (params.get("capabilities") or {})
            info: dict[str, Any] = {"name": "broken-server", "version": "0.1"}
            if self.has("missing-fields"):
                del info["version"]
            return {"protocolVersion": requested, "capabilities": self.capabilities(), "serverInfo": info}
        if method == "server/discover":
            meta = params.get("_meta") or {}
            version = meta.get("io.modelcontextprotocol/protocolVersion")
            if version != "2026-07-28" and not self.has("modern-any-version"):
                raise LookupError(
                    -32022, "Unsupported protocol version", {"supported": ["2026-07-28"], "requested": version}
                )
            info = {"name": "broken-server", "version": "0.1"}
            if self.has("missing-fields"):
                del info["version"]
            return {
                "supportedVersions": ["2026-07-28", *VERSIONS],
                "capabilities": self.capabilities(),
                "serverInfo": info,
            }
        if method == "ping":
            return {"status": "ok"} if self.has("ping-nonempty") else {}
        if method in ("tools/list", "resources/list", "prompts/list", "resources/templates/list"):
            return self.list(method, params)
        if method == "tools/call":
            if params.get("name") != "echo":
                raise LookupError(-32602, f"Unknown tool: {params.get('name')}")
            if self.has("notification-id"):
                self.write(
                    {
                        "jsonrpc": "2.0",
                        "id": 77,
                        "method": "notifications/message",
                        "params": {"level": "info", "data": "calling echo"},
                    }
                )
            text = str((params.get("arguments") or {}).get("text", ""))
            if self.has("no-content"):
                return {"isError": False}
            if self.has("bad-content"):
                return {"content": [{"type": "html", "html": f"<p>{text}</p>"}], "isError": False}
            return {"content": [{"type": "text", "text": text}], "isError": False}
        if method == "resources/read":
            uri = params.get("uri")
            if uri == "test://one":
                return {"contents": [{"uri": uri, "mimeType": "text/plain", "text": "one"}]}
            if uri == "test://two":
                return {"contents": [{"uri": uri, "mimeType": "application/octet-stream", "blob": "AAEC"}]}
            raise LookupError(-32002, f"Resource not found: {uri}")
        if method in ("resources/subscribe", "resources/unsubscribe", "logging/setLevel"):
            return {}
        if method == "prompts/get":
            if params.get("name") != "hello":
                raise LookupError(-32602, "Unknown prompt")
            who = (params.get("arguments") or {}).get("who", "world")
            message: dict[str, Any] = {"role": "user", "content": {"type": "text", "text": f"Hello {who}"}}
            if self.has("missing-fields"):
                del message["role"]
            return {"messages": [message]}
        if method == "completion/complete":
            return {"completion": {"values": ["alice", "bob"], "total": 2, "hasMore": False}}
        raise LookupError(-32601, f"Method not found: {method}")

    def list(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        key = {
            "tools/list": "tools",
            "resources/list": "resources",
            "prompts/list": "prompts",
            "resources/templates/list": "resourceTemplates",
        }[method]
        items: list[Any] = {
            "tools": TOOLS,
            "resources": RESOURCES,
            "prompts": PROMPTS,
            "resourceTemplates": [{"uriTemplate": "test://items/{id}", "name": "item"}],
        }[key]
        if self.has("missing-fields"):
            if key == "tools":
                items = [{k: v for k, v in t.items() if k != "description"} for t in items]
            if key == "resources":
                items = [{k: v for k, v in r.items() if k != "name"} for r in items]
        cursor = params.get("cursor")
        if key == "resources":  # two pages
            if cursor is None:
                return {key: items[:1], "nextCursor": PAGE_CURSOR}
            if cursor == PAGE_CURSOR or self.has("accept-any-cursor"):
                return {key: items[1:]}
            raise LookupError(-32602, "Invalid cursor")
        if cursor is not None and not self.has("accept-any-cursor"):
            raise LookupError(-32602, "Invalid cursor")
        return {key: items}

    async def slow(self, rid: Any, params: dict[str, Any]) -> None:
        meta = params.get("_meta") or {}
        token = meta.get("progressToken")
        steps = int((params.get("arguments") or {}).get("steps", 5))
        try:
            for i in range(steps):
                await asyncio.sleep(0.1)
                if token is not None:
                    value = steps - i if self.has("progress-decreasing") else i + 1
                    self.write(
                        {
                            "jsonrpc": "2.0",
                            "method": "notifications/progress",
                            "params": {"progressToken": token, "progress": value, "total": steps},
                        }
                    )
            self.write(self.result(rid, {"content": [{"type": "text", "text": f"{steps} steps"}], "isError": False}))
        except asyncio.CancelledError:
            pass
        finally:
            self.tasks.pop(json.dumps(rid), None)

    async def handle_line(self, line: str) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            self.write(self.error(None, -32700, "Parse error"))
            return
        if isinstance(msg, list):
            if self.version != "2025-03-26" or self.has("no-batch") or not msg:
                if not self.has("no-batch"):
                    self.write(self.error(None, -32600, "Batches are not supported at this revision"))
                return
            replies = [r for r in [await self.handle_message(m) for m in msg] if r is not None]
            if replies:
                self.write(replies)
            return
        reply = await self.handle_message(msg)
        if reply is not None:
            self.write(reply)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS))
    server = Server(set(parser.parse_args().fault))
    if server.has("stdout-junk"):
        print("broken-server starting up...", flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            break
        if line.strip():
            await server.handle_line(line.decode())


if __name__ == "__main__":
    asyncio.run(main())
