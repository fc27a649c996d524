"""Floor for Streamable HTTP: a raw ASGI app (no framework) answering POST /mcp with JSON responses,
issuing Mcp-Session-Id at initialize (stateful mode), accepting 2026-07-28 requests without a session.
Served by the same uvicorn configuration as every contender (_serve.UVICORN_CONFIG).
Usage: python floor_asgi.py http PORT [stateless]   (plain `python floor_asgi.py` runs the stdio floor)"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import orjson
from _floor_core import HANDSHAKE_VERSIONS, handle
from _growth import SLOW_TOOL, SLOW_TOOL_SECONDS, slow_tool
from _serve import main

JSON_HEADERS = [(b"content-type", b"application/json")]


def make_app(stateless: bool) -> Any:
    sessions: dict[str, dict[str, Any]] = {}
    slow = slow_tool()  # the in-flight cases' 50 ms tool (BENCH_SLOW_TOOL=1)

    async def respond(send: Any, status: int, body: bytes = b"", headers: list[Any] | None = None) -> None:
        hdrs = list(headers or [])
        if body:
            hdrs.extend(JSON_HEADERS)
        hdrs.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": hdrs})
        await send({"type": "http.response.body", "body": body})

    def post(body: bytes, sid: str | None, slept: bool = False) -> tuple[int, bytes, list[Any]] | None:
        """A POST's answer (status, body, extra headers), made at once; None for the slow tool before its sleep."""
        try:
            msg = orjson.loads(body)
        except orjson.JSONDecodeError:
            return 400, b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}', []
        extra: list[Any] = []
        is_init = isinstance(msg, dict) and msg.get("method") == "initialize"
        params = msg.get("params") if isinstance(msg, dict) else None
        meta = params.get("_meta") if isinstance(params, dict) else None
        modern = isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
        if not stateless and not is_init and not modern and sid not in sessions:
            unknown = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"missing or unknown session"}}'
            return 404 if sid else 400, unknown, []
        called = params.get("name") if isinstance(params, dict) and msg.get("method") == "tools/call" else None
        if slow and called == SLOW_TOOL:
            if not slept:
                return None
            ok = {"content": [{"type": "text", "text": "ok"}], "isError": False}
            return 200, orjson.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": ok}), []
        resp = handle(msg)
        if resp is None:
            return 202, b"", []
        if is_init and not stateless and "result" in resp:
            new_sid = uuid.uuid4().hex
            version = resp["result"]["protocolVersion"]
            sessions[new_sid] = {"protocolVersion": version if version in HANDSHAKE_VERSIONS else None}
            extra.append((b"mcp-session-id", new_sid.encode()))
        return 200, orjson.dumps(resp), extra

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                event = await receive()
                if event["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif event["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        if scope["path"] != "/mcp":
            await respond(send, 404)
            return
        method = scope["method"]
        sid: str | None = None
        for k, v in scope["headers"]:
            if k == b"mcp-session-id":
                sid = v.decode("latin-1")
        if method == "DELETE" and not stateless:
            await respond(send, 200 if sessions.pop(sid or "", None) is not None else 404)
            return
        if method != "POST":
            await respond(send, 405, headers=[(b"allow", b"POST")])
            return
        chunks = []
        while True:
            event = await receive()
            chunks.append(event.get("body", b""))
            if not event.get("more_body"):
                break
        answered = post(b"".join(chunks), sid)
        if answered is None:  # the in-flight cases' slow tool
            await asyncio.sleep(SLOW_TOOL_SECONDS)
            answered = post(b"".join(chunks), sid, slept=True)
            assert answered is not None
        await respond(send, *answered)

    app.post = post  # type: ignore[attr-defined]  # (floor_lane.py answers with it in the protocol)
    return app


def _run_stdio() -> None:
    import asyncio

    from floor_stdio import main as stdio_main

    asyncio.run(stdio_main())


if __name__ == "__main__":
    main(_run_stdio, make_app)
