"""A minimal stdio MCP server written on raw JSON-RPC lines (no SDK), with the frailties of peers seen in the wild,
each turned on by a flag, for ``mcpkit check``'s tests:

* ``--exit-on-bad-json``: a line that is not JSON ends the process (a server that dies on malformed input);
* ``--slow-first-request SECONDS``: a request before ``initialize`` is answered only after SECONDS (a server slow
  to start, as a large Python server is on a busy machine);
* ``--error-without-id``: error responses carry no ``id`` (the 2025-11-25 schema makes it optional on errors);
* ``--exit-on-unknown-method``: a request for a method it does not know ends the process;
* ``--stall-on-batch SECONDS``: a batch of two requests or more stalls the server SECONDS before it answers it, and
  what follows waits too (a server descheduled on a busy machine);
* ``--ignore-batches``: a batch is read and never answered (as the official Python SDK's server does);
* ``--answer-batch-after SECONDS``: a batch is answered SECONDS after it was read, while the lines after it are
  answered at once (a server working on a batch beside later messages: JSON-RPC allows any order);
* ``--ignore-no-method``: a request without a method is never answered (read as a response to nothing);
* ``--slow-parse-error SECONDS``: the -32700 for a line that is not JSON is written SECONDS after it was read.

Otherwise it is correct: one tool, ping, batches at 2025-03-26, -32601 for an unknown method, -32700 for bad JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
TOOL = {
    "name": "echo",
    "description": "Echo the text back.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--exit-on-bad-json", action="store_true")
    ap.add_argument("--slow-first-request", type=float, default=0.0)
    ap.add_argument("--error-without-id", action="store_true")
    ap.add_argument("--exit-on-unknown-method", action="store_true")
    ap.add_argument("--stall-on-batch", type=float, default=0.0)
    ap.add_argument("--ignore-batches", action="store_true")
    ap.add_argument("--answer-batch-after", type=float, default=0.0)
    ap.add_argument("--ignore-no-method", action="store_true")
    ap.add_argument("--slow-parse-error", type=float, default=0.0)
    opts = ap.parse_args()
    initialized = False
    writing = threading.Lock()

    def write(out: Any) -> None:
        with writing:
            sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
            sys.stdout.flush()

    def error(rid: Any, code: int, message: str) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "error": {"code": code, "message": message}}
        if not opts.error_without_id:
            msg["id"] = rid
        return msg

    def answer(msg: Any) -> dict[str, Any] | None:
        nonlocal initialized
        if opts.ignore_no_method and isinstance(msg, dict) and "method" not in msg:
            return None
        if not isinstance(msg, dict) or not isinstance(msg.get("method"), str):
            return error(msg.get("id") if isinstance(msg, dict) else None, -32600, "Invalid Request")
        method, rid = msg["method"], msg.get("id")
        if "id" not in msg:
            return None
        if method == "initialize":
            initialized = True
            asked = (msg.get("params") or {}).get("protocolVersion")
            result: dict[str, Any] = {
                "protocolVersion": asked if asked in VERSIONS else VERSIONS[-1],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fragile", "version": "1.0"},
            }
        elif not initialized:
            time.sleep(opts.slow_first_request)
            return error(rid, -32600, "the session is not initialized")
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            if (msg.get("params") or {}).get("cursor") is not None:
                return error(rid, -32602, "invalid cursor")
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            params = msg.get("params") or {}
            if params.get("name") != "echo":
                result = {"content": [{"type": "text", "text": "no such tool"}], "isError": True}
            else:
                text = str((params.get("arguments") or {}).get("text", ""))
                result = {"content": [{"type": "text", "text": text}], "isError": False}
        elif opts.exit_on_unknown_method:
            raise SystemExit(0)
        else:
            return error(rid, -32601, "Method not found")
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError:
            if opts.exit_on_bad_json:
                return
            out: Any = error(None, -32700, "Parse error")
            if opts.slow_parse_error:
                threading.Timer(opts.slow_parse_error, write, (out,)).start()
                out = None
        else:
            if isinstance(msg, list) and opts.ignore_batches:
                out = None
            elif isinstance(msg, list):
                if sum(isinstance(m, dict) and "id" in m for m in msg) >= 2:
                    time.sleep(opts.stall_on_batch)
                out = [a for a in (answer(m) for m in msg) if a is not None] or None
                if out is not None and opts.answer_batch_after:
                    threading.Timer(opts.answer_batch_after, write, (out,)).start()
                    out = None
            else:
                out = answer(msg)
        if out is not None:
            write(out)


if __name__ == "__main__":
    main()
