"""A hostile stdio MCP server for the client limits tests (issues 15.2, 15.6). Standard library only.

    python hostile_server.py MODE

Modes (what the server does when the client calls any tool):
  batch-no-read   handshake era: once initialized, sends 500 batches of 100 ``sampling/createMessage`` requests
                  and never reads again (the client's answers fill the pipe).
  batch-flood     handshake era: sends 20 batches of 100 ``sampling/createMessage`` requests and one batch of 101,
                  reads every answer, then answers the call with {"answered", "long_batch_error"} as text.
  batch-traced    handshake era: sends one batch of ``sampling/createMessage`` (the first with a ``traceparent`` in
                  its ``_meta``), ``roots/list`` and ``sampling/createMessage`` requests, reads its answer, then
                  answers the call with that answer array as text.
  progress-flood  handshake era: sends 20,000 ``notifications/progress`` for the call, then answers it.
  oversize        handshake era: answers the call with one 5 MiB line (over the client's 4 MiB limit).
  many-inputs     2026-07-28: answers the call with an InputRequiredResult listing 5,000 sampling requests.
  big-reply       2026-07-28: answers the call with an InputRequiredResult listing 30 ``roots/list`` requests.
"""

from __future__ import annotations

import json
import sys
import time

MODE = sys.argv[1]
MODERN = "2026-07-28"
out = sys.stdout.buffer
inp = sys.stdin.buffer


def send(msg: object) -> None:
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()


def text(t: str) -> dict[str, object]:
    return {"content": [{"type": "text", "text": t}], "isError": False}


def sampling(rid: str) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 5},
    }


def batch_flood(call_id: object) -> None:
    expected = 0
    for b in range(20):
        send([sampling(f"s{b}_{i}") for i in range(100)])
        expected += 100
    send([sampling(f"long_{i}") for i in range(101)])
    answered = 0
    long_error = None
    while answered < expected or long_error is None:
        line = inp.readline()
        if not line:
            return
        msg = json.loads(line)
        if isinstance(msg, list):
            answered += sum(1 for m in msg if "result" in m)
        elif isinstance(msg, dict) and msg.get("id") is None and "error" in msg:
            long_error = msg["error"]
    send({"jsonrpc": "2.0", "id": call_id, "result": text(json.dumps({"answered": answered, "long": long_error}))})


TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def batch_traced(call_id: object) -> None:
    first = sampling("b0")
    first["params"]["_meta"] = {"traceparent": TRACEPARENT}  # type: ignore[index]
    send([first, {"jsonrpc": "2.0", "id": "b1", "method": "roots/list"}, sampling("b2")])
    for line in inp:
        msg = json.loads(line)
        if isinstance(msg, list):
            send({"jsonrpc": "2.0", "id": call_id, "result": text(json.dumps(msg))})
            return


def main() -> None:
    for line in inp:
        msg = json.loads(line)
        if MODE == "batch-no-read" and isinstance(msg, dict) and msg.get("method") == "notifications/initialized":
            for b in range(500):
                send([sampling(f"s{b}_{i}") for i in range(100)])
            time.sleep(60)
            return
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            continue
        rid, method, params = msg["id"], msg["method"], msg.get("params") or {}
        if method == "server/discover":
            if MODE in ("many-inputs", "big-reply"):
                result = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
                send({"jsonrpc": "2.0", "id": rid, "result": result})
            else:
                send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})
        elif method == "initialize":
            result = {
                "protocolVersion": "2025-03-26",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "0"},
            }
            send({"jsonrpc": "2.0", "id": rid, "result": result})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/call":
            if MODE == "batch-flood":
                batch_flood(rid)
            elif MODE == "batch-traced":
                batch_traced(rid)
            elif MODE == "progress-flood":
                token = (params.get("_meta") or {}).get("progressToken")
                for i in range(20_000):
                    note = {"progressToken": token, "progress": i + 1, "total": 20_000}
                    send({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
                send({"jsonrpc": "2.0", "id": rid, "result": text("done")})
            elif MODE == "oversize":
                send({"jsonrpc": "2.0", "id": rid, "result": text("x" * (5 * 1024 * 1024))})
            elif MODE == "many-inputs":
                if "inputResponses" in params:
                    send({"jsonrpc": "2.0", "id": rid, "result": text("answered")})
                else:
                    reqs = {
                        f"k{i}": {"method": "sampling/createMessage", "params": sampling("x")["params"]}
                        for i in range(5000)
                    }
                    send(
                        {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "input_required", "inputRequests": reqs}}
                    )
            elif MODE == "big-reply":
                if "inputResponses" in params:
                    send({"jsonrpc": "2.0", "id": rid, "result": text("answered")})
                else:
                    reqs = {f"r{i}": {"method": "roots/list", "params": {}} for i in range(30)}
                    send(
                        {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "input_required", "inputRequests": reqs}}
                    )
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}})


if __name__ == "__main__":
    main()
