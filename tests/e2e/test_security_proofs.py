"""Proofs for docs/security.md: defences that already held but had no test of their own.

Real uvicorn servers on 127.0.0.1, raw httpx requests (see test_http_support).
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from mcpkit.stores import InMemoryEventStore
from support.mcp_http import handshake_headers, make_server, messages, open_session, running, sse_events

V = "2025-11-25"


async def _read_until(r: httpx.Response, count: int) -> tuple[list[dict[str, Any]], str | None]:
    """The first ``count`` messages of an SSE response (the priming event skipped) and the id of the last one."""
    seen: list[dict[str, Any]] = []
    last_id: str | None = None
    event: dict[str, str] = {}
    async for line in r.aiter_lines():
        if line.startswith("id: "):
            event["id"] = line[4:]
        elif line.startswith("data: "):
            event["data"] = line[6:]
        elif line == "" and event:
            if event.get("data"):
                seen.append(orjson.loads(event["data"]))
                last_id = event.get("id")
            event = {}
            if len(seen) == count:
                break
    return seen, last_id


async def test_last_event_id_of_another_session_replays_nothing() -> None:
    """docs/security.md, "cross-session Last-Event-ID": a session cannot resume (read) another session's stream.

    Session A drops its tool-call stream after two events; the id it received replays the rest for A, and
    afterwards session B presenting the same Last-Event-ID is refused (400) and receives none of A's messages."""
    store = InMemoryEventStore()
    async with running(make_server(), event_store=store) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid_a = await open_session(http, url, V)
        sid_b = await open_session(http, url, V)
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "progress"}}
        body["params"]["arguments"] = {"steps": 6, "delay": 0.02}
        async with http.stream("POST", url, json=body, headers=handshake_headers(sid_a, V)) as r:
            first, last_id = await _read_until(r, 2)  # then drop the connection mid-stream
        assert [m["params"]["data"] for m in first] == ["step 1", "step 2"] and last_id is not None

        resume = {"accept": "text/event-stream", "mcp-protocol-version": V, "last-event-id": last_id}
        own = await http.get(url, headers={**resume, "mcp-session-id": sid_a})  # ends with the result
        assert own.status_code == 200
        rest = messages(sse_events(own.text))
        assert [m["params"]["data"] for m in rest if m.get("method")] == ["step 3", "step 4", "step 5", "step 6"]
        assert rest[-1]["id"] == 7 and rest[-1]["result"]["content"][0]["text"] == "done 6"

        # every event of A's stream is in the store now; B presents the same id
        stolen = await http.get(url, headers={**resume, "mcp-session-id": sid_b})
        assert stolen.status_code == 400
        assert b"step " not in stolen.content and b"done 6" not in stolen.content
