"""A hand-written MCP server with switchable, deliberate faults (a fixture for ``mcpkit check`` tests).

It does NOT use mcpkit (which would get things right); it speaks raw JSON-RPC, over stdio (newline-delimited) or
over Streamable HTTP (a bare ASGI app on uvicorn, sessions, SSE with event ids and replay, the 2026-07-28
headers, and with ``--auth`` an OAuth-protected endpoint with its metadata). Without ``--fault`` it is correct, so
every check passes against it; each fault breaks one rule (the table ``FAULTS`` says which requirement IDs its
check must fail):

    python tests/support/servers/broken_server.py [--fault NAME ...]                  # stdio
    python tests/support/servers/broken_server.py --http [--auth] [--fault NAME ...]  # prints {"port": N} once
    listening

Requests carrying 2026-07-28 ``_meta`` are served statelessly (``server/discover``; ``roots`` asks with an
``input_required`` result).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
from collections.abc import Awaitable, Callable
from typing import Any

# fault -> what it breaks (the test's expectation: exactly these IDs fail or warn)
STDIO_FAULTS: dict[str, set[str]] = {
    "wrong-id": {"M006", "M065"},  # tools/list answered with another id: never matched, so tools/list "unanswered"
    "stdout-junk": {"M014", "M016"},
    "missing-fields": {"M042", "M050", "M062", "M067"},
    "result-and-error": {"M007"},
    "bad-error": {"M008"},
    "notification-id": {"M009"},
    "ping-nonempty": {"M079"},
    "undeclared-prompts": {"M058"},
    "no-fallback": {"M046"},
    "progress-decreasing": {"M085"},
    "ignore-cancel": {"S027"},
    "answer-cancelled": {"SX12"},  # answers a cancelled request with an error at once
    "accept-any-cursor": {"S030"},
    "no-batch": {"M011"},
    "no-content": {"M068"},
    "bad-content": {"M069"},
    "multiline": {"M001", "M013", "M014", "M015", "M016", "M042"},  # some split lines are bare JSON values
    "request-null-id": {"M002", "M003"},
    "request-reused-id": {"M004"},
    "modern-any-version": {"M046"},  # 2026-07-28: an unsupported version must be refused with -32022
    "early-request": {"S014"},  # roots/list before notifications/initialized
    "ignore-capabilities": {"S018"},  # roots/list (or an input request for it) to a client that declared no roots
    "stale-fallback": {"S016"},  # offers 2024-11-05 for an unknown version while it serves 2025-11-25
    "hang-before-initialize": {"S021"},  # never answers a request that comes before initialize
    "notification-params": {"A002"},  # stops answering after a notification that carries params
    "answer-cancel": {"A024"},  # answers a cancellation of an unknown request with an error
    "stderr-not-utf8": {"A004"},
    "oversized": {"M065"},  # tools/list answered with a 5 MiB line: over the checker's 4 MiB bound (not read)
    "request-bad-method": {"M005"},  # its roots/list request has a number for a method
    "notification-bad-method": {"M010"},  # a notification with a number for a method (while echo runs)
    "wrong-echo": {"M045"},  # asked for 2025-06-18 (which server/discover lists), answers 2025-11-25
    # and so every feature looks undeclared:
    "no-capabilities": {"M042", "M047", "M048", "M056", "M058", "M065", "M087", "M088"},
    "undeclared-resources": {"M048"},
    "undeclared-subscribe": {"M056"},  # resources/subscribe served without resources.subscribe
    "undeclared-list-changed": {"M070"},  # notifications/tools/list_changed without tools.listChanged
    "no-resources-array": {"M049"},
    "no-templates-array": {"M053"},
    "no-prompts-array": {"M059"},
    "no-tools-array": {"M066"},
    "no-contents": {"M051"},
    "content-without-uri": {"M052"},
    "template-without-uri": {"M054"},
    "prompt-without-name": {"M060"},
    "prompt-without-messages": {"M061"},
    "prompt-bad-content": {"M063"},
    "progress-without-token": {"M084"},
    "undeclared-logging": {"M087"},  # notifications/message (and logging/setLevel) without the logging capability
    "undeclared-completions": {"M088"},
    "completion-without-values": {"M089"},
    "content-without-mime-type": {"S022"},
    "stdio-wants-token": {"M042", "S009"},  # initialize refused for want of a bearer token, over stdio
}
HTTP_FAULTS: dict[str, set[str]] = {
    "text-content-type": {"M023"},  # a request POST answered 200 text/plain
    "notification-200": {"M022"},  # a notification POST answered 200 with a body
    "get-json": {"M025"},  # GET answered 200 application/json
    "response-on-get": {"M026", "M027"},  # the GET stream carries the initialize response again
    "broadcast": {"M027"},  # every progress notification also goes on the GET stream
    "session-id-space": {"M028"},  # the session id has a space in it
    "weak-session-id": {"S005"},  # short, sequential session ids
    "no-session-required": {"S006"},  # a POST without a session id is served
    "any-origin": {"MX01"},  # a foreign Origin is served
    "session-survives-delete": {"MX02"},  # DELETE says 200 but the session still answers
    "delete-error": {"A015"},  # DELETE answered 500
    "any-version-header": {"MX03"},  # an unsupported MCP-Protocol-Version header is served
    "sse-cut": {"S002", "S003"},  # slow's stream ends at once, before its response (no event id, no retry)
    "foreign-progress": {"S004", "M086"},  # slow's stream carries progress for a token of another request
    "repeated-event-ids": {"A011"},  # every stream numbers its events from 1
    "replay-other-stream": {"A012", "MX06"},  # Last-Event-ID replays another stream's events (a MUST NOT)
    "modern-unknown-200": {"MX04"},  # 2026-07-28: an unknown method answered 200
    "modern-no-header-check": {"MX05"},  # 2026-07-28: Mcp-Method is not compared with the body
    "accept-crash": {"S021"},  # a POST whose Accept lacks application/json gets 500
    "oversized-body": {"M065"},  # tools/list answered with a 5 MiB body: over the checker's 4 MiB bound
    "get-404": {"M018", "M025"},  # GET on the endpoint: 404
}
AUTH_FAULTS: dict[str, set[str]] = {
    "auth-403": {"M030"},  # no token -> 403 instead of 401
    "auth-no-prm": {"S008"},  # no Protected Resource Metadata anywhere
    "auth-no-as-metadata": {"S011"},  # no authorization server metadata
    "auth-no-pkce": {"M031"},  # the metadata does not advertise S256
    "auth-no-registration": {"S010"},  # neither DCR nor client ID metadata documents
    "auth-any-token": {"M038"},  # any bearer token is accepted
    "auth-query-token": {"M037"},  # a token in the query string is accepted
}
# faults whose rule can only warn (the checker cannot judge what they send): tested on their own
WARN_FAULTS: dict[str, set[str]] = {
    "deeply-nested": {"M016"},  # a notification nested 100,000 deep: valid JSON past Python's parser, said not judged
}
FAULTS = {**STDIO_FAULTS, **HTTP_FAULTS, **AUTH_FAULTS, **WARN_FAULTS}
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPS = "io.modelcontextprotocol/clientCapabilities"
PAGE_CURSOR = "page-2"
GOOD_TOKEN = "good-token"

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
    {
        "name": "roots",
        "description": "List the client's roots (asks the client with roots/list).",
        "inputSchema": {"type": "object", "properties": {}},
    },
]
RESOURCES = [
    {"uri": "test://one", "name": "one", "mimeType": "text/plain"},
    {"uri": "test://two", "name": "two", "mimeType": "application/octet-stream"},
]
PROMPTS = [{"name": "hello", "description": "Say hello.", "arguments": [{"name": "who", "required": True}]}]

Emit = Callable[[Any], Awaitable[None]]


class Session:
    """What one client connection (stdio) or one Mcp-Session-Id (HTTP) holds."""

    def __init__(self) -> None:
        self.version = "2025-11-25"
        self.client_caps: dict[str, Any] = {}
        self.initialized = False
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.waiting: dict[str, asyncio.Future[Any]] = {}
        self.next_request = 0
        self.stalled = False  # "notification-params": stopped answering


class Server:
    def __init__(self, faults: set[str]) -> None:
        self.faults = faults

    def has(self, fault: str) -> bool:
        return fault in self.faults

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
        for fault, cap in (
            ("undeclared-prompts", "prompts"),
            ("undeclared-resources", "resources"),
            ("undeclared-logging", "logging"),
            ("undeclared-completions", "completions"),
        ):
            if self.has(fault):
                del caps[cap]
        if self.has("undeclared-subscribe"):
            caps["resources"] = {}
        return caps

    def request_id(self, s: Session) -> Any:
        if self.has("request-null-id"):
            return None
        if not self.has("request-reused-id"):
            s.next_request += 1
        return f"srv-{s.next_request or 1}"

    async def ask(self, s: Session, method: str, emit: Emit, timeout: float = 5.0) -> Any:
        """Send a request to the client and wait for its answer (None when none comes)."""
        rid = self.request_id(s)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        s.waiting[json.dumps(rid)] = fut
        await emit({"jsonrpc": "2.0", "id": rid, "method": 7 if self.has("request-bad-method") else method})
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            return None
        finally:
            s.waiting.pop(json.dumps(rid), None)

    async def handle(self, s: Session, msg: Any, emit: Emit) -> dict[str, Any] | None:
        """One message in; the answer to send (None for none). ``emit`` sends what comes before it."""
        if not isinstance(msg, dict):
            return self.error(None, -32600, "Invalid Request")
        if s.stalled:
            return None
        if "method" not in msg:
            if "id" in msg and "result" not in msg and "error" not in msg:
                return self.error(msg["id"], -32600, "Invalid Request")
            fut = s.waiting.get(json.dumps(msg.get("id")))
            if fut is not None and not fut.done():
                fut.set_result(msg.get("result"))
            return None
        method, rid, params = msg["method"], msg.get("id"), msg.get("params") or {}
        meta = params.get("_meta") if isinstance(params, dict) else None
        modern = isinstance(meta, dict) and META_VERSION in meta
        if "id" not in msg:
            return await self.notification(s, method, params, emit)
        if method != "initialize" and not s.initialized and not modern and method != "ping":
            if self.has("hang-before-initialize"):
                return None
            return self.error(rid, -32600, "Invalid Request: initialize first")
        if method == "tools/call" and params.get("name") == "slow":
            s.tasks[json.dumps(rid)] = asyncio.create_task(self.slow(s, rid, params, emit))
            return None
        if method == "tools/call" and params.get("name") == "roots":
            return await self.roots(s, rid, params, emit, modern)
        if method == "tools/call" and self.has("notification-id"):
            log = {"level": "info", "data": "calling a tool"}
            await emit({"jsonrpc": "2.0", "id": 77, "method": "notifications/message", "params": log})
        if method == "tools/call":
            for fault, note in (
                ("notification-bad-method", {"jsonrpc": "2.0", "method": 5, "params": {}}),
                ("undeclared-list-changed", {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
                (
                    "undeclared-logging",
                    {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hi"}},
                ),
            ):
                if self.has(fault):
                    await emit(note)
        try:
            result = self.dispatch(s, method, params, rid, modern)
        except LookupError as exc:
            reply = self.error(rid, exc.args[0], exc.args[1])
            if len(exc.args) > 2:
                reply["error"]["data"] = exc.args[2]
            return reply
        if method == "initialize" and self.has("early-request") and "roots" in s.client_caps:
            await emit({"jsonrpc": "2.0", "id": self.request_id(s), "method": "roots/list"})
        if method == "ping" and self.has("result-and-error"):
            return {"jsonrpc": "2.0", "id": rid, "result": {}, "error": {"code": -32603, "message": "both"}}
        if method == "tools/list" and self.has("wrong-id"):
            rid = rid + 1000 if isinstance(rid, int) else f"{rid}-wrong"
        if method == "tools/list" and (self.has("oversized") or self.has("oversized-body")) and not modern:
            result = dict(result, padding="x" * (5 * 1024 * 1024))
        return self.result(rid, result)

    async def notification(self, s: Session, method: str, params: Any, emit: Emit) -> dict[str, Any] | None:
        if method == "notifications/initialized":
            s.initialized = True
        if method == "notifications/roots/list_changed" and "roots" in s.client_caps:
            if params and self.has("notification-params"):
                s.stalled = True
                return None
            asyncio.get_running_loop().create_task(self.ask(s, "roots/list", emit))
        if method == "notifications/cancelled":
            task = s.tasks.pop(json.dumps(params.get("requestId")), None)
            if task is not None and not self.has("ignore-cancel"):
                task.cancel()
                if self.has("answer-cancelled"):
                    await emit(self.error(params.get("requestId"), -32800, "Request cancelled"))
            elif task is None and self.has("answer-cancel"):
                return self.error(None, -32602, "Unknown request to cancel")
        return None

    def dispatch(self, s: Session, method: str, params: dict[str, Any], rid: Any, modern: bool) -> Any:
        if method == "initialize":
            requested = params.get("protocolVersion")
            if requested not in VERSIONS:
                if self.has("no-fallback"):
                    raise LookupError(-32602, f"Unsupported protocol version {requested}")
                requested = "2024-11-05" if self.has("stale-fallback") else "2025-11-25"
            if self.has("stdio-wants-token"):
                raise LookupError(-32001, "Unauthorized: a bearer token is required")
            if requested == "2025-06-18" and self.has("wrong-echo"):
                requested = "2025-11-25"
            s.version = requested
            s.client_caps = params.get("capabilities") or {}
            info: dict[str, Any] = {"name": "broken-server", "version": "0.1"}
            if self.has("missing-fields"):
                del info["version"]
            result = {"protocolVersion": requested, "capabilities": self.capabilities(), "serverInfo": info}
            if self.has("no-capabilities"):
                del result["capabilities"]
            return result
        if method == "server/discover":
            version = (params.get("_meta") or {}).get(META_VERSION)
            if version != MODERN and not self.has("modern-any-version"):
                raise LookupError(-32022, "Unsupported protocol version", {"supported": [MODERN], "requested": version})
            info = {"name": "broken-server", "version": "0.1"}
            if self.has("missing-fields"):
                del info["version"]
            return {"supportedVersions": [MODERN, *VERSIONS], "capabilities": self.capabilities(), "serverInfo": info}
        if method == "ping":
            return {"status": "ok"} if self.has("ping-nonempty") else {}
        if method in ("tools/list", "resources/list", "prompts/list", "resources/templates/list"):
            return self.list(method, params)
        if method == "tools/call":
            if params.get("name") != "echo":
                raise LookupError(-32602, f"Unknown tool: {params.get('name')}")
            text = str((params.get("arguments") or {}).get("text", ""))
            if self.has("no-content"):
                return {"isError": False}
            if self.has("bad-content"):
                return {"content": [{"type": "html", "html": f"<p>{text}</p>"}], "isError": False}
            return {"content": [{"type": "text", "text": text}], "isError": False}
        if method == "resources/read":
            uri = params.get("uri")
            if uri == "test://one":
                item: dict[str, Any] = {"uri": uri, "mimeType": "text/plain", "text": "one"}
                if self.has("content-without-uri"):
                    del item["uri"]
                if self.has("content-without-mime-type"):
                    del item["mimeType"]
                return {"items": [item]} if self.has("no-contents") else {"contents": [item]}
            if uri == "test://two":
                return {"contents": [{"uri": uri, "mimeType": "application/octet-stream", "blob": "AAEC"}]}
            raise LookupError(-32002, f"Resource not found: {uri}")
        if method in ("resources/subscribe", "resources/unsubscribe") and self.has("undeclared-resources"):
            raise LookupError(-32601, "Method not found")
        if method in ("resources/subscribe", "resources/unsubscribe", "logging/setLevel"):
            return {}
        if method == "prompts/get":
            if params.get("name") != "hello":
                raise LookupError(-32602, "Unknown prompt")
            who = (params.get("arguments") or {}).get("who", "world")
            message: dict[str, Any] = {"role": "user", "content": {"type": "text", "text": f"Hello {who}"}}
            if self.has("missing-fields"):
                del message["role"]
            if self.has("prompt-bad-content"):
                message["content"] = {"type": "video", "url": "https://example.com/v.mp4"}
            return {"lines": [message]} if self.has("prompt-without-messages") else {"messages": [message]}
        if method == "completion/complete":
            if self.has("completion-without-values"):
                return {"completion": {"suggestions": ["alice", "bob"]}}
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
        if self.has("prompt-without-name") and key == "prompts":
            items = [{k: v for k, v in p.items() if k != "name"} for p in items]
        if self.has("template-without-uri") and key == "resourceTemplates":
            items = [{"name": "item"}]
        if self.has("missing-fields"):
            if key == "tools":
                # inputSchema is required in every revision (a description is optional: leaving it out is no fault)
                items = [{k: v for k, v in t.items() if k != "inputSchema"} for t in items]
            if key == "resources":
                items = [{k: v for k, v in r.items() if k != "name"} for r in items]
        if self.has({"resourceTemplates": "no-templates-array"}.get(key, f"no-{key}-array")):
            key = "entries"  # the list under another name
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

    async def roots(self, s: Session, rid: Any, params: dict[str, Any], emit: Emit, modern: bool) -> dict[str, Any]:
        if modern:
            caps = (params.get("_meta") or {}).get(META_CAPS) or {}
            if "roots" not in caps and not self.has("ignore-capabilities"):
                return self.result(rid, {"content": [{"type": "text", "text": "no roots"}], "isError": True})
            answers = params.get("inputResponses") or {}
            if "roots" in answers:
                return self.result(rid, {"content": [{"type": "text", "text": json.dumps(answers["roots"])}]})
            asking = {"roots": {"method": "roots/list", "params": {}}}
            return self.result(rid, {"resultType": "input_required", "inputRequests": asking, "requestState": "r1"})
        if "roots" not in s.client_caps and not self.has("ignore-capabilities"):
            return self.result(rid, {"content": [{"type": "text", "text": "no roots capability"}], "isError": True})
        got = await self.ask(s, "roots/list", emit)
        return self.result(rid, {"content": [{"type": "text", "text": json.dumps(got)}], "isError": got is None})

    async def slow(self, s: Session, rid: Any, params: dict[str, Any], emit: Emit) -> None:
        token = (params.get("_meta") or {}).get("progressToken")
        steps = int((params.get("arguments") or {}).get("steps", 5))
        try:
            for i in range(steps):
                await asyncio.sleep(0.1)
                if token is not None:
                    value = steps - i if self.has("progress-decreasing") else i + 1
                    shown = "an-earlier-request" if self.has("foreign-progress") and i == 0 else token
                    note: dict[str, Any] = {"progressToken": shown, "progress": value, "total": steps}
                    if self.has("progress-without-token"):
                        del note["progressToken"]
                    await emit({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
            result = {"content": [{"type": "text", "text": f"{steps} steps"}], "isError": False}
            await emit(self.result(rid, result))
        except asyncio.CancelledError:
            pass
        finally:
            s.tasks.pop(json.dumps(rid), None)


# ----------------------------------------------------------------------------------------------------------- stdio


async def serve_stdio(server: Server) -> None:
    session = Session()

    async def write(msg: Any) -> None:
        multiline = server.has("multiline")
        text = json.dumps(msg, indent=1) if multiline else json.dumps(msg, separators=(",", ":"))
        sys.stdout.write(text + "\n")
        sys.stdout.flush()

    async def line(text: str) -> None:
        try:
            msg = json.loads(text)
        except ValueError:
            await write(server.error(None, -32700, "Parse error"))
            return
        if isinstance(msg, list):
            if session.version != "2025-03-26" or server.has("no-batch") or not msg:
                if not server.has("no-batch"):
                    await write(server.error(None, -32600, "Batches are not supported at this revision"))
                return
            if any(isinstance(m, dict) and m.get("method") == "initialize" for m in msg):
                await write([server.error(m.get("id"), -32600, "initialize in a batch") for m in msg])
                return
            replies = [r for r in [await server.handle(session, m, write) for m in msg] if r is not None]
            if replies:
                await write(replies)
            return
        if server.has("deeply-nested") and isinstance(msg, dict) and msg.get("method") == "notifications/initialized":
            deep = '{"a":' * 100_000 + "1" + "}" * 100_000  # valid JSON, deeper than Python's parser goes
            sys.stdout.write('{"jsonrpc":"2.0","method":"notifications/mcpkit/deep","params":' + deep + "}\n")
            sys.stdout.flush()
        if isinstance(msg, dict) and msg.get("method") == "tools/call":  # may wait for the client: run aside
            asyncio.get_running_loop().create_task(answer(msg))
            return
        reply = await server.handle(session, msg, write)
        if reply is not None:
            await write(reply)

    async def answer(msg: dict[str, Any]) -> None:
        reply = await server.handle(session, msg, write)
        if reply is not None:
            await write(reply)

    if server.has("stdout-junk"):
        print("broken-server starting up...", flush=True)
    sys.stderr.buffer.write(b"broken-server: starting \xff\xfe up\n" if server.has("stderr-not-utf8") else b"ready\n")
    sys.stderr.flush()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        raw = await reader.readline()
        if not raw:
            break
        if raw.strip():
            await line(raw.decode())


# ------------------------------------------------------------------------------------------------------------ HTTP


class Stream:
    """One SSE response (a POST's or a GET's) of an HTTP session, kept for Last-Event-ID replay."""

    def __init__(self, no: int) -> None:
        self.no = no
        self.events: list[tuple[str, bytes]] = []  # (id, data)
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()


class HttpSession(Session):
    def __init__(self, sid: str) -> None:
        super().__init__()
        self.sid = sid
        self.streams: list[Stream] = []
        self.get_queue: list[Any] = []  # messages waiting for a GET stream
        self.event_seq = 0
        self.ended = False
        self.last_progress: Any = None
        self.init_reply: Any = None


class HttpApp:
    def __init__(self, server: Server, auth: bool, issuer: str | None = None) -> None:
        self.server = server
        self.auth = auth
        self.issuer = issuer  # the authorization server named in the metadata (default: this server)
        self.sessions: dict[str, HttpSession] = {}
        self.counter = 0
        self.port = 0

    def has(self, fault: str) -> bool:
        return self.server.has(fault)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        path = scope["path"]
        if path.startswith("/.well-known/"):
            await self.metadata(path, headers, send)
            return
        if path != "/mcp":
            await respond(send, 404, b"not found", "text/plain")
            return
        origin = headers.get("origin")
        if origin and "127.0.0.1" not in origin and "localhost" not in origin and not self.has("any-origin"):
            await respond(send, 403, b'{"error": "origin"}', "application/json")
            return
        if self.auth and not await self.authorized(scope, headers, send):
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        method = scope["method"]
        if method == "POST":
            await self.post(headers, body, send)
        elif method == "GET":
            await self.get(headers, send)
        elif method == "DELETE":
            await self.delete(headers, send)
        else:
            await respond(send, 405, b"", "text/plain")

    # ----------------------------------------------------------------------------------------- authorization

    async def authorized(self, scope: dict[str, Any], headers: dict[str, str], send: Any) -> bool:
        query = scope.get("query_string", b"").decode()
        if "access_token=" in query:
            if self.has("auth-query-token"):
                return True
            await respond(send, 400, b'{"error": "invalid_request"}', "application/json")
            return False
        token = headers.get("authorization", "")
        if token == f"Bearer {GOOD_TOKEN}" or (token.startswith("Bearer ") and self.has("auth-any-token")):
            return True
        prm = f"http://127.0.0.1:{self.port}/.well-known/oauth-protected-resource/mcp"
        challenge = f'Bearer resource_metadata="{prm}"'
        status = 403 if self.has("auth-403") and not token else 401
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"www-authenticate", challenge.encode()), (b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"error": "invalid_token"}'})
        return False

    async def metadata(self, path: str, headers: dict[str, str], send: Any) -> None:
        base = f"http://127.0.0.1:{self.port}"
        issuer = f"http://localhost:{self.port}" if self.issuer == "localhost" else (self.issuer or base)
        if path.startswith("/.well-known/oauth-protected-resource") and self.auth and not self.has("auth-no-prm"):
            doc: dict[str, Any] = {"resource": base + "/mcp", "authorization_servers": [issuer]}
        elif path == "/.well-known/oauth-authorization-server" and self.auth and not self.has("auth-no-as-metadata"):
            if headers.get("authorization"):  # a token for the MCP server must never come here
                await respond(send, 400, b'{"error": "a token was sent to the authorization server"}')
                return
            doc = {
                "issuer": issuer,
                "authorization_endpoint": base + "/authorize",
                "token_endpoint": base + "/token",
                "registration_endpoint": base + "/register",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["plain"] if self.has("auth-no-pkce") else ["S256"],
            }
            if self.has("auth-no-registration"):
                del doc["registration_endpoint"]
        else:
            await respond(send, 404, b"not found", "text/plain")
            return
        await respond(send, 200, json.dumps(doc).encode(), "application/json")

    # ------------------------------------------------------------------------------------------------- POST

    def new_sid(self) -> str:
        self.counter += 1
        if self.has("weak-session-id"):
            return str(self.counter)
        sid = secrets.token_hex(16)
        return sid[:8] + " " + sid[8:] if self.has("session-id-space") else sid

    async def post(self, headers: dict[str, str], body: bytes, send: Any) -> None:
        accept = headers.get("accept", "")
        if "application/json" not in accept or "text/event-stream" not in accept:
            if self.has("accept-crash"):
                await respond(send, 500, b"Internal Server Error", "text/plain")
            else:
                await respond(send, 406, b'{"error": "Not Acceptable"}', "application/json")
            return
        if not headers.get("content-type", "").startswith("application/json"):
            await respond(send, 415, b'{"error": "Unsupported Media Type"}', "application/json")
            return
        try:
            msg = json.loads(body)
        except ValueError:
            await respond(send, 400, json.dumps(self.server.error(None, -32700, "Parse error")).encode())
            return
        meta = ((msg.get("params") or {}).get("_meta") or {}) if isinstance(msg, dict) else {}
        if isinstance(meta, dict) and META_VERSION in meta:
            await self.post_modern(headers, msg, meta, send)
            return
        if isinstance(msg, list):
            await self.post_batch(headers, msg, send)
            return
        if isinstance(msg, dict) and msg.get("method") == "initialize":
            session = HttpSession(self.new_sid())
            self.sessions[session.sid] = session
            reply = await self.server.handle(session, msg, self.to_get(session))
            session.init_reply = reply
            extra = [(b"mcp-session-id", session.sid.encode())] if reply and "result" in reply else []
            await respond(send, 200, json.dumps(reply).encode(), "application/json", extra)
            return
        sid = headers.get("mcp-session-id")
        session = self.sessions.get(sid) if sid else None
        if sid is None:
            if not self.has("no-session-required"):
                await respond(
                    send, 400, json.dumps(self.server.error(None, -32600, "Mcp-Session-Id required")).encode()
                )
                return
            session = next(iter(self.sessions.values()), None) or HttpSession("anonymous")
        if session is None or (session.ended and not self.has("session-survives-delete")):
            await respond(send, 404, json.dumps(self.server.error(None, -32001, "Session not found")).encode())
            return
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in VERSIONS and not self.has("any-version-header"):
            await respond(send, 400, json.dumps(self.server.error(None, -32600, "Unsupported version")).encode())
            return
        if not isinstance(msg, dict) or "id" not in msg or "method" not in msg:
            reply = await self.server.handle(session, msg, self.to_get(session))
            if self.has("notification-200") and isinstance(msg, dict) and "method" in msg:
                await respond(send, 200, b'{"ok": true}', "application/json")
            elif reply is not None:
                await respond(send, 400, json.dumps(reply).encode())
            else:
                await respond(send, 202, b"", "application/json")
            return
        if msg["method"] == "tools/call" and (msg.get("params") or {}).get("name") in ("slow", "roots"):
            await self.stream_answer(session, msg, send)
            return
        reply = await self.server.handle(session, msg, self.to_get(session))
        ctype = "text/plain" if self.has("text-content-type") else "application/json"
        await respond(send, 200, json.dumps(reply).encode(), ctype)

    async def post_batch(self, headers: dict[str, str], batch: list[Any], send: Any) -> None:
        session = self.sessions.get(headers.get("mcp-session-id", ""))
        if session is None or session.version != "2025-03-26" or not batch:
            await respond(send, 400, json.dumps(self.server.error(None, -32600, "Batches are not supported")).encode())
            return
        if any(isinstance(m, dict) and m.get("method") == "initialize" for m in batch):
            errors = [self.server.error(m.get("id"), -32600, "initialize in a batch") for m in batch]
            await respond(send, 200, json.dumps(errors).encode())
            return
        replies = [r for r in [await self.server.handle(session, m, self.to_get(session)) for m in batch] if r]
        if replies:
            await respond(send, 200, json.dumps(replies).encode())
        else:
            await respond(send, 202, b"", "application/json")

    def to_get(self, session: HttpSession) -> Emit:
        async def emit(msg: Any) -> None:
            session.get_queue.append(msg)

        return emit

    async def stream_answer(self, session: HttpSession, msg: dict[str, Any], send: Any) -> None:
        """Answer a request on its own SSE stream: what the handler emits, then the response."""
        stream = Stream(len(session.streams) + 1)
        session.streams.append(stream)
        rid = msg["id"]
        done = asyncio.get_running_loop().create_future()

        async def emit(out: Any) -> None:
            if isinstance(out, dict) and out.get("method") == "notifications/progress":
                session.last_progress = out
            self.event(session, stream, out)
            if isinstance(out, dict) and "method" not in out and out.get("id") == rid and not done.done():
                done.set_result(None)

        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        task = asyncio.get_running_loop().create_task(self.run_request(session, msg, emit, done))
        # sse-cut: slow's stream ends at once, before anything is sent on it. (Cut after its first frame, the cut
        # came after the checker's cancellation on a busy machine, and a cancelled request's stream may end so.)
        cut = self.has("sse-cut") and (msg.get("params") or {}).get("name") == "slow"
        while not cut:
            get = asyncio.ensure_future(stream.queue.get())
            await asyncio.wait({get, done}, return_when=asyncio.FIRST_COMPLETED)
            if not get.done():
                get.cancel()
                while not stream.queue.empty():
                    frame = stream.queue.get_nowait()
                    if frame is not None:
                        await send({"type": "http.response.body", "body": frame, "more_body": True})
                break
            frame = get.result()
            if frame is None:
                break
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        if not cut:
            with contextlib.suppress(BaseException):
                await task

    async def run_request(self, session: HttpSession, msg: dict[str, Any], emit: Emit, done: Any) -> None:
        reply = await self.server.handle(session, msg, emit)
        if reply is not None:
            await emit(reply)
        elif (msg.get("params") or {}).get("name") == "slow":
            task = session.tasks.get(json.dumps(msg["id"]))
            if task is not None:
                with contextlib.suppress(BaseException):
                    await task
            if not done.done():
                done.set_result(None)  # cancelled: the stream ends without a response

    def event(self, session: HttpSession, stream: Stream, msg: Any) -> None:
        session.event_seq += 1
        eid = str(len(stream.events) + 1) if self.has("repeated-event-ids") else f"{stream.no}-{session.event_seq}"
        data = json.dumps(msg).encode()
        stream.events.append((eid, data))
        stream.queue.put_nowait(b"id: " + eid.encode() + b"\nevent: message\ndata: " + data + b"\n\n")

    async def post_modern(self, headers: dict[str, str], msg: Any, meta: dict[str, Any], send: Any) -> None:
        method = msg.get("method") if isinstance(msg, dict) else None
        if not self.has("modern-no-header-check") and (
            headers.get("mcp-method") != method or headers.get("mcp-protocol-version") != meta.get(META_VERSION)
        ):
            error = self.server.error(msg.get("id"), -32020, "Header mismatch")
            await respond(send, 400, json.dumps(error).encode())
            return
        emitted: list[Any] = []

        async def collect(out: Any) -> None:
            emitted.append(out)

        session = Session()
        reply = await self.server.handle(session, msg, collect)
        for task in list(session.tasks.values()):  # slow: its answer comes from its task
            with contextlib.suppress(BaseException):
                await task
        if reply is None:
            reply = next((m for m in emitted if isinstance(m, dict) and "method" not in m), None)
        status = 200
        code = ((reply or {}).get("error") or {}).get("code")
        if code == -32601 and not self.has("modern-unknown-200"):
            status = 404
        elif code in (-32020, -32021, -32022):
            status = 400
        await respond(send, status, json.dumps(reply).encode())

    # ------------------------------------------------------------------------------------------ GET, DELETE

    async def get(self, headers: dict[str, str], send: Any) -> None:
        session = self.sessions.get(headers.get("mcp-session-id", ""))
        if session is None or session.ended:
            await respond(send, 404 if session is not None else 400, b"", "text/plain")
            return
        if "text/event-stream" not in headers.get("accept", ""):
            await respond(send, 406, b"", "text/plain")
            return
        if self.has("get-json"):
            await respond(send, 200, b"{}", "application/json")
            return
        if self.has("get-404"):
            await respond(send, 404, b"Not Found", "text/plain")
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream")]})
        last = headers.get("last-event-id")
        if last is not None:
            await self.replay(session, last, send)
            return
        pending, session.get_queue = session.get_queue, []
        if self.has("response-on-get") and session.init_reply is not None:
            pending.append(session.init_reply)  # the initialize response again
        if self.has("broadcast") and session.last_progress is not None:
            pending.append(session.last_progress)
        for msg in pending:
            frame = b"event: message\ndata: " + json.dumps(msg).encode() + b"\n\n"
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await asyncio.sleep(0.2)
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def replay(self, session: HttpSession, last: str, send: Any) -> None:
        for n, stream in reversed(list(enumerate(session.streams))):  # the newest stream with that id
            ids = [eid for eid, _ in stream.events]
            if last in ids:
                source = session.streams[n - 1] if self.has("replay-other-stream") and n > 0 else stream
                after = source.events[ids.index(last) + 1 :] if source is stream else source.events
                for eid, data in after:
                    frame = b"id: " + eid.encode() + b"\nevent: message\ndata: " + data + b"\n\n"
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                break
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def delete(self, headers: dict[str, str], send: Any) -> None:
        session = self.sessions.get(headers.get("mcp-session-id", ""))
        if session is None:
            await respond(send, 404, b"", "text/plain")
            return
        if self.has("delete-error"):
            await respond(send, 500, b"Internal Server Error", "text/plain")
            return
        session.ended = True
        await respond(send, 200, b"", "text/plain")


async def respond(
    send: Any, status: int, body: bytes, ctype: str = "application/json", extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    headers = [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve_http(server: Server, auth: bool, issuer: str | None) -> None:
    import socket

    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = HttpApp(server, auth, issuer)
    app.port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)
    task = asyncio.ensure_future(userver.serve(sockets=[sock]))
    while not userver.started and not task.done():
        await asyncio.sleep(0.02)
    print(json.dumps({"port": app.port}), flush=True)
    await task


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS))
    parser.add_argument("--http", action="store_true", help="serve Streamable HTTP on 127.0.0.1 (port printed)")
    parser.add_argument("--auth", action="store_true", help="with --http: require a bearer token")
    parser.add_argument(
        "--as-url",
        default=None,
        help="with --auth: the authorization server the metadata names ('localhost': this server under another origin)",
    )
    args = parser.parse_args()
    server = Server(set(args.fault))
    asyncio.run(serve_http(server, args.auth, args.as_url) if args.http else serve_stdio(server))


if __name__ == "__main__":
    main()
