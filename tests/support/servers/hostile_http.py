"""A hostile MCP server over raw HTTP/1.1 (issue 15): a real process for the client hardening tests.

    python hostile_http.py          prints "PORT <n>" on stdout, then serves http://127.0.0.1:<n>/mcp

It answers ``initialize`` (2025-06-18, handshake era, with a session id), ``notifications/*`` with 202, the
standalone GET with 405, ``ping`` with a JSON result, and each ``tools/call`` by the tool's name with one attack
(see ``ATTACKS``). ``GET /stats`` answers the counters as JSON; ``GET /sse-flood`` is a legacy HTTP+SSE endpoint
that sends its ``endpoint`` event and then one endless line; ``GET /sse-stall`` is a legacy HTTP+SSE server whose
answers travel on that stream, except that the POST of a ``tools/call`` named ``stall`` is never answered (nor the
call). A standalone GET to ``/mcp?standalone=conflict`` is answered 409 (as servers that allow one GET stream per
session answer a second); with ``&once=<token>`` only the first GET carrying that token is, and the next ones get a
stream with one ``notifications/message`` (data: the token) that stays open. Every flood is bounded (``FLOOD``
bytes) so even an unfixed client cannot take the machine down, and is written with backpressure (drain).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import orjson

FLOOD = 64 * 1024 * 1024  # bytes a flood sends at most: 16x the client's 4 MiB default limit
PIECE = 256 * 1024
SID = "hostile-session-0001"

stats: dict[str, Any] = {
    "gets": 0,
    "standalone_gets": 0,
    "last_event_ids": [],
    "posts": 0,
    "cancels": 0,
    "conflict_gets": 0,
}
conflicted: set[str] = set()  # the once=<token> values already answered 409
calls: dict[Any, str] = {}  # request id -> tool name
hold: list[asyncio.StreamWriter] = []  # connections kept open forever (never-ending streams)


def rpc(rid: Any, result: Any) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": result})


def head(status: str, ctype: str | None, extra: str = "") -> bytes:
    lines = [f"HTTP/1.1 {status}\r\n", f"mcp-session-id: {SID}\r\n"]
    if ctype:
        lines.append(f"content-type: {ctype}\r\n")
    return ("".join(lines) + extra + "\r\n").encode()


def json_response(body: bytes) -> bytes:
    return head("200 OK", "application/json", f"content-length: {len(body)}\r\n") + body


def text_result(rid: Any, text: str) -> bytes:
    return rpc(rid, {"content": [{"type": "text", "text": text}], "isError": False})


async def flood(writer: asyncio.StreamWriter, prefix: bytes, piece: bytes, chunked: bool = False) -> None:
    """``prefix`` then ``piece`` repeated up to FLOOD bytes (as chunks of a chunked body when ``chunked``)."""
    writer.write(prefix)
    sent = 0
    while sent < FLOOD:
        writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
        sent += len(piece)
        await writer.drain()


def deep_tools_list(rid: Any, depth: int = 1012) -> bytes:
    """A tools/list result whose one inputSchema nests ``items`` ``depth`` deep (built as text: orjson refuses to
    write JSON that deep, though it reads up to 1,024 levels)."""
    schema = '{"type":"string"}'
    for _ in range(depth):
        schema = '{"type":"array","items":' + schema + "}"
    tools = '[{"name":"deep","inputSchema":' + schema + "}]"
    return b'{"jsonrpc":"2.0","id":%s,"result":{"tools":%s}}' % (orjson.dumps(rid), tools.encode())


async def tool_call(name: str, rid: Any, writer: asyncio.StreamWriter) -> bool:
    """Answer one tools/call; False when the connection must be closed afterwards."""
    note = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}})
    sse = head("200 OK", "text/event-stream", "transfer-encoding: chunked\r\n")
    if name == "huge_declared":  # a JSON answer declaring 10 GB, then a bounded flood of it
        await flood(writer, head("200 OK", "application/json", "content-length: 10000000000\r\n"), b"x" * PIECE)
        return False
    if name == "huge_chunk":  # one chunk of size FFFFFFFFFF
        await flood(
            writer,
            head("200 OK", "application/json", "transfer-encoding: chunked\r\n") + b"FFFFFFFFFF\r\n",
            b"x" * PIECE,
        )
        return False
    if name == "endless_data":  # one SSE event with endless data: lines
        await flood(writer, sse, b"data: " + b"x" * (PIECE - 7) + b"\n", chunked=True)
        return False
    if name == "endless_line":  # one SSE line that never ends
        await flood(writer, sse, b"x" * PIECE, chunked=True)
        return False
    if name in ("silent_stream", "silent_cancel_hang"):  # an SSE answer that never comes; the connection is held
        writer.write(sse)
        await writer.drain()
        hold.append(writer)
        return True
    if name == "storm":  # one event per stream with retry: 0, then the stream ends (the resume storm)
        ev = b"retry: 0\nid: s1\ndata: " + note + b"\n\n"
        writer.write(sse + b"%x\r\n%s\r\n0\r\n\r\n" % (len(ev), ev))
        return True
    if name == "interim":  # 2,000 interim responses before the real one
        body = text_result(rid, "after interims")
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n" * 2000 + json_response(body))
        return True
    if name == "trailing":  # the answer is an SSE event cut off by the end of the stream (no blank line)
        ev = b"data: " + text_result(rid, "unterminated")
        writer.write(sse + b"%x\r\n%s\r\n0\r\n\r\n" % (len(ev), ev))
        return True
    if name == "nul_id":  # a good id, then an id with NUL (to be ignored), then the stream ends unanswered
        ev = b"id: good\ndata: " + note + b"\n\nid: bad\0id\ndata: " + note + b"\n\n"
        writer.write(sse + b"%x\r\n%s\r\n0\r\n\r\n" % (len(ev), ev))
        return True
    if name in ("hangup", "hangup_late"):  # the connection closed without an answer (at once, or after 0.6 s)
        await asyncio.sleep(0.6 if name == "hangup_late" else 0)
        return False
    if name == "hold_delete":  # the next DELETE is held forever
        stats["hold_delete"] = True
        writer.write(json_response(text_result(rid, "the next DELETE will hang")))
        return True
    if name in NO_ANSWER:  # a 2xx answer to the request's POST that cannot hold its response
        writer.write(NO_ANSWER[name](rid))
        return True
    if name in FRAMING:
        writer.write(FRAMING[name](text_result(rid, "lenient framing accepted")))
        return False
    writer.write(json_response(text_result(rid, f"ok {name}")))
    return True


def _json_head(length: str, extra: str = "") -> bytes:
    return head("200 OK", "application/json", f"content-length: {length}\r\n{extra}")


def _chunked(size: str, body: bytes, te: str = "chunked") -> bytes:
    return head("200 OK", "application/json", f"transfer-encoding: {te}\r\n") + b"%s\r\n%s\r\n0\r\n\r\n" % (
        size.encode(),
        body,
    )


# issue 15.7: framing a lenient parser reads and the client refuses (each would deliver a valid answer if accepted)
FRAMING = {
    "cl_plus": lambda b: _json_head(f"+{len(b)}") + b,
    "cl_underscore": lambda b: _json_head("_".join(str(len(b)))) + b,
    "chunk_0x": lambda b: _chunked(f"0x{len(b):x}", b),
    "chunk_plus": lambda b: _chunked(f"+{len(b):x}", b),
    "chunk_minus": lambda b: _chunked("-1", b),
    "te_notchunked": lambda b: _chunked(f"{len(b):x}", b, te="notchunked"),
    "status_plus": lambda b: (
        b"HTTP/1.1 +20 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(b), b)
    ),
}


def _plain(status: str, ctype: str | None, body: bytes) -> bytes:
    return head(status, ctype, f"content-length: {len(body)}\r\n") + body


# a request's POST answered with a 2xx that cannot carry its response (the spec: a request's POST is answered with
# its response, as JSON or on an SSE stream; the standalone stream never carries it)
NO_ANSWER = {
    "accepted": lambda rid: _plain("202 Accepted", None, b""),
    "empty_json": lambda rid: _plain("200 OK", "application/json", b""),
    "bad_json": lambda rid: _plain("200 OK", "application/json", b'{"jsonrpc":"2.0","id":'),
    "text_plain": lambda rid: _plain("200 OK", "text/plain", b"all good"),
    "other_id": lambda rid: json_response(text_result("no-such-request", "for another request")),
    "note_only": lambda rid: json_response(
        orjson.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}})
    ),
}


legacy_streams: list[asyncio.StreamWriter] = []


def legacy_answer(msg: dict[str, Any]) -> bytes | None:
    """The answer a legacy HTTP+SSE server sends on its stream for ``msg`` (None for a notification)."""
    rid, what = msg.get("id"), msg.get("method")
    if rid is None or what is None:
        return None
    if what == "initialize":
        info = {"name": "hostile-legacy", "version": "1"}
        return rpc(rid, {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}}, "serverInfo": info})
    if what == "tools/call":
        return text_result(rid, f"ok {msg['params']['name']}")
    if what == "ping":
        return rpc(rid, {})
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no {what}"}})


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                raw = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = raw.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path == "/stats":
                writer.write(json_response(orjson.dumps(stats)))
            elif method == "GET" and path == "/sse-stall":
                writer.write(head("200 OK", "text/event-stream") + b"event: endpoint\ndata: /stall-messages\n\n")
                await writer.drain()
                legacy_streams.append(writer)
                hold.append(writer)
                return
            elif method == "POST" and path == "/stall-messages":
                msg = orjson.loads(body)
                if msg.get("method") == "tools/call" and msg["params"]["name"] == "stall":
                    hold.append(writer)  # the POST is never answered
                    return
                writer.write(head("202 Accepted", None, "content-length: 0\r\n"))
                answer = legacy_answer(msg)
                if answer is not None:
                    for stream in legacy_streams:
                        stream.write(b"event: message\ndata: " + answer + b"\n\n")
            elif method == "GET" and path == "/sse-flood":
                start = head("200 OK", "text/event-stream") + b"event: endpoint\ndata: /messages\n\n"
                await flood(writer, start + b"data: ", b"x" * PIECE)
                return
            elif method == "GET" and "standalone=conflict" in path:
                stats["conflict_gets"] += 1
                token = path.partition("once=")[2]
                if not token or token not in conflicted:
                    conflicted.add(token)
                    writer.write(head("409 Conflict", None, "content-length: 0\r\n"))
                else:
                    note = {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "data": token},
                    }
                    writer.write(head("200 OK", "text/event-stream") + b"data: " + orjson.dumps(note) + b"\n\n")
                    await writer.drain()
                    hold.append(writer)
                    return
            elif method == "GET" and "standalone=storm" in path and "last-event-id" not in headers:
                stats["standalone_gets"] += 1  # the standalone stream, also one event per stream with retry: 0
                if not await tool_call("storm", None, writer):
                    return
            elif method == "GET":
                if "last-event-id" in headers:
                    stats["gets"] += 1
                    stats["last_event_ids"].append(headers["last-event-id"])
                    if not await tool_call("storm", None, writer):
                        return
                else:
                    writer.write(head("405 Method Not Allowed", None, "content-length: 0\r\n"))
            elif method == "DELETE":
                if stats.get("hold_delete"):  # (set by the tool hold_delete) the DELETE is never answered
                    stats["hold_delete"] = False
                    hold.append(writer)
                    return
                writer.write(head("200 OK", None, "content-length: 0\r\n"))
            else:
                stats["posts"] += 1
                msg = orjson.loads(body)
                rid = msg.get("id")
                what = msg.get("method")
                if what == "initialize":
                    result = {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "hostile", "version": "1"},
                    }
                    writer.write(json_response(rpc(rid, result)))
                elif what == "notifications/cancelled":
                    stats["cancels"] += 1
                    if calls.get(msg["params"]["requestId"]) == "silent_cancel_hang":
                        hold.append(writer)  # take this cancellation and never answer it
                        return
                    writer.write(head("202 Accepted", None, "content-length: 0\r\n"))
                elif rid is None:
                    writer.write(head("202 Accepted", None, "content-length: 0\r\n"))
                elif what == "tools/list":
                    writer.write(json_response(deep_tools_list(rid)))
                elif what == "tools/call":
                    calls[rid] = msg["params"]["name"]
                    if not await tool_call(msg["params"]["name"], rid, writer):
                        return
                else:
                    writer.write(json_response(rpc(rid, {})))
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        if writer not in hold:
            writer.close()


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", 0, limit=1024 * 1024)
    port = server.sockets[0].getsockname()[1]
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
