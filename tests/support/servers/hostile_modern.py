"""A hostile 2026-07-28 server as an ASGI app (serve it with ``support.asgi.serve_asgi``): it answers
``server/discover`` and ``tools/list`` as a modern server does, and each ``tools/call`` by the tool's name with one
breach of the spec (see :func:`create`). What it received is kept in ``app.received`` (the JSON bodies), for the
tests to look at what the client sent."""

from __future__ import annotations

from typing import Any

import orjson

from support.asgi import read_body

INFO = {"io.modelcontextprotocol/serverInfo": {"name": "hostile-modern", "version": "1"}}
ASK = {
    "ask": {
        "method": "elicitation/create",
        "params": {"message": "Your password?", "requestedSchema": {"type": "object", "properties": {}}},
    }
}


def _result(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": {"resultType": "complete", "_meta": INFO, **result}}


def _sub(subscription_id: Any) -> dict[str, Any]:
    return {"_meta": {"io.modelcontextprotocol/subscriptionId": subscription_id}}


def _answer(body: dict[str, Any], list_asks: bool) -> dict[str, Any] | list[dict[str, Any]]:
    """The answer to ``body``: one message (a JSON response), or a list (an SSE stream of those messages)."""
    rid, method, params = body.get("id"), body.get("method"), body.get("params") or {}
    if method == "server/discover":
        caps = {"tools": {"listChanged": True}}
        return _result(
            rid, {"supportedVersions": ["2026-07-28"], "capabilities": caps, "ttlMs": 0, "cacheScope": "private"}
        )
    if method == "tools/list":
        if list_asks:  # input_required on a method that may not ask (spec: MUST NOT)
            return _result(rid, {"resultType": "input_required", "inputRequests": ASK})
        return _result(rid, {"tools": [{"name": "t", "inputSchema": {"type": "object"}}], "ttlMs": 0})
    if method == "tools/call":
        name = params.get("name")
        if name == "neither":  # input_required with neither inputRequests nor requestState (spec: MUST have one)
            return _result(rid, {"resultType": "input_required"})
        if name == "request_on_stream":  # a server->client request on the POST's stream (spec: MUST NOT)
            ask = {"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list", "params": {}}
            return [ask, _result(rid, {"content": [{"type": "text", "text": "done"}]})]
        if name == "odd_subscription_ids":  # notifications whose subscriptionId is no request id (a list, ...)
            odd: list[Any] = [[1], {"a": 1}, None, 1.5, True]
            notes = [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": _sub(v)} for v in odd]
            return [*notes, _result(rid, {"content": [{"type": "text", "text": "done"}]})]
        return _result(rid, {"content": [{"type": "text", "text": "ok"}]})
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"Method not found: {method}"}}


def create(*, list_asks: bool = False) -> Any:
    """The app. ``list_asks``: ``tools/list`` answers ``input_required`` (asking for an elicitation)."""
    received: list[Any] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = await read_body(receive)
        body = orjson.loads(raw) if raw else None
        received.append(body)
        if not isinstance(body, dict) or "method" not in body:  # a response POSTed (spec: the client MUST NOT)
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no responses here"}}
            await send(
                {"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": orjson.dumps(error)})
            return
        answer = _answer(body, list_asks)
        if isinstance(answer, list):
            events = b"".join(b"event: message\ndata: " + orjson.dumps(m) + b"\n\n" for m in answer)
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]}
            )
            await send({"type": "http.response.body", "body": events})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": orjson.dumps(answer)})

    app.received = received  # type: ignore[attr-defined]
    return app
