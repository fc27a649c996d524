"""A hand-written MCP client with switchable, deliberate faults (a fixture for ``mcpkit check-client`` tests).

It does NOT use mcpkit's client (which would get things right): it speaks raw JSON-RPC over stdio (it launches the
server command it is given) or Streamable HTTP (httpx). Without ``--fault`` it does everything right: it probes
``server/discover`` and speaks 2026-07-28 when offered (else ``initialize``), follows the tool pages, calls every
tool (with progress), answers ping, roots, sampling, elicitation and batches, retries ``input_required`` results,
re-initializes after a 404, resumes a cut SSE stream after its ``retry``, and closes cleanly. Each fault breaks one
rule (the table ``FAULTS`` says which requirement IDs its check must fail, and in which scenarios):

    python tests/support/clients/broken_client.py "<server command line>" [--fault NAME ...]
    python tests/support/clients/broken_client.py http://127.0.0.1:PORT/mcp [--fault NAME ...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import sys
from typing import Any

# fault -> (the IDs it must fail, the transport, the scenarios that show it)
FAULTS: dict[str, tuple[set[str], str, tuple[str, ...]]] = {
    "no-initialized": ({"M043"}, "stdio", ("handshake",)),
    "early-request": ({"S013"}, "stdio", ("handshake",)),
    "no-client-info": ({"M040"}, "stdio", ("handshake",)),
    "old-version": ({"S015"}, "stdio", ("handshake",)),
    "reused-id": ({"M004"}, "stdio", ("handshake",)),
    "null-id": ({"M002", "M003"}, "stdio", ("handshake",)),
    "ping-nonempty": ({"M079"}, "stdio", ("handshake",)),
    "refuse-roots": ({"M071"}, "stdio", ("handshake",)),
    "root-without-uri": ({"M073"}, "stdio", ("handshake",)),
    "sampling-without-model": ({"M077"}, "stdio", ("handshake",)),
    "wrong-answer-id": ({"M006"}, "stdio", ("handshake",)),
    "stdin-junk": ({"M014", "M017"}, "stdio", ("handshake",)),
    "kill-server": ({"S001"}, "stdio", ("handshake",)),
    "change-cursor": ({"MX19"}, "stdio", ("handshake",)),
    "ignore-batch": ({"M011"}, "stdio", ("batch",)),
    "call-undeclared": ({"S018"}, "stdio", ("handshake",)),
    "shared-progress-token": ({"M083"}, "stdio", ("handshake",)),
    "ignore-version": ({"S017"}, "stdio", ("version",)),
    "cancel-initialize": ({"M082"}, "stdio", ("handshake",)),
    "crash-on-unknown": ({"S021"}, "stdio", ("handshake",)),
    "modern-no-meta": ({"MX13"}, "stdio", ("modern",)),
    "modern-changed-state": ({"MX15"}, "stdio", ("modern",)),
    "modern-same-id": ({"MX16"}, "stdio", ("modern",)),  # (M004 in 2026-07-28: only unanswered ids count)
    "modern-no-inputs": ({"MX17"}, "stdio", ("modern",)),
    "modern-answers": ({"MX18", "M006"}, "stdio", ("modern",)),
    "accept-json-only": ({"M020"}, "http", ("handshake",)),
    "accept-sse-q0": ({"M020"}, "http", ("handshake",)),  # lists both, but text/event-stream with q=0
    "no-session-id": ({"M029"}, "http", ("handshake",)),
    "no-version-header": ({"MX12"}, "http", ("handshake",)),
    "no-delete": ({"S007"}, "http", ("handshake",)),
    "get-accept-json": ({"M024"}, "http", ("handshake",)),
    "bad-body": ({"M021"}, "http", ("handshake",)),
    "no-reinitialize": ({"MX10"}, "http", ("expiry",)),
    "no-resume": ({"SX11"}, "http", ("resume",)),
    "resume-at-once": ({"MX11"}, "http", ("resume",)),
    "modern-wrong-headers": ({"MX14"}, "http", ("modern",)),
    "bad-jsonrpc": ({"M001"}, "stdio", ("handshake",)),  # a request with "jsonrpc": "1.0"
    "request-bad-method": ({"M005"}, "stdio", ("handshake",)),  # a request whose method is a number
    "result-and-error": ({"M007"}, "stdio", ("handshake",)),  # an answer with both
    "error-without-message": ({"M008", "S018"}, "stdio", ("handshake",)),  # elicitation refused so: a declared one
    "initialized-with-id": ({"M009", "M043"}, "stdio", ("handshake",)),  # so it is no notification at all
    "notification-bad-method": ({"M010"}, "stdio", ("handshake",)),
    "no-launch": ({"M012"}, "stdio", ("handshake",)),  # never starts the server
    "pretty-printed": ({"M014", "M015", "M017"}, "stdio", ("handshake",)),  # a message across lines
    "put-message": ({"M019"}, "http", ("handshake",)),  # a notification sent with PUT
    "tools-before-initialize": ({"M039"}, "stdio", ("handshake",)),
    "initialize-in-batch": ({"M041"}, "stdio", ("handshake",)),
    "unknown-version": ({"M044", "S015"}, "stdio", ("handshake",)),  # asks for 1999-01-01
    "no-capabilities": ({"M040", "M047"}, "stdio", ("handshake",)),
    "roots-without-array": ({"M072"}, "stdio", ("handshake",)),
    "refuse-sampling": ({"M076"}, "stdio", ("handshake",)),
    "sampling-html": ({"M078"}, "stdio", ("handshake",)),
    "string-params": ({"A001"}, "stdio", ("handshake",)),  # a request whose params is a string
    "string-notification-params": ({"A002"}, "stdio", ("handshake",)),
    # a notification nested 100,000 levels deep (valid JSON no parser of the checker reads): a warning that says
    # so, and the scripted server goes on serving the client (it used to drop the connection, or answer 500)
    "deeply-nested": ({"M017"}, "stdio", ("handshake",)),
    "deeply-nested-http": ({"M021"}, "http", ("handshake",)),
    "ignore-sampling": ({"M076"}, "stdio", ("handshake",)),  # declares sampling, never answers createMessage
    "truncated-line": ({"M014", "M017"}, "stdio", ("handshake",)),  # half a message, then a newline: no M015
    "never-initialize": ({"M039"}, "stdio", ("handshake",)),  # asks tools/list and never initializes
    # in the cancel scenario its sampling is slow; this one answers it anyway, 1.5 s after the server cancelled it
    "answer-cancelled": ({"S027", "SX12"}, "stdio", ("cancel",)),
    "answer-cancelled-http": ({"S027", "SX12"}, "http", ("cancel",)),
    "error-cancelled": ({"SX12"}, "stdio", ("cancel",)),  # answers the cancellation with an error at once
    # not a fault of any rule: a second initialize once initialized is answered and judged by the first (it used to
    # fail M043 and S013, the second answer's time taken for the first's)
    "initialize-twice": (set(), "stdio", ("handshake",)),
    "auth-token-in-query": ({"M037"}, "http", ("auth",)),
    "auth-forgets-header": ({"M036"}, "http", ("auth",)),
    "auth-no-version-header": ({"S012"}, "http", ("auth",)),
    "auth-plain-pkce": ({"M031"}, "http", ("auth",)),
    "auth-no-metadata": ({"M032"}, "http", ("auth",)),
}
LATEST = "2025-11-25"
KNOWN = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
CAPS = {"roots": {"listChanged": True}, "sampling": {}, "elicitation": {}}
INFO = {"name": "broken-client", "version": "0.1"}


class Client:
    """The protocol logic; ``send`` and the reading of answers are the transport's."""

    def __init__(self, faults: set[str]) -> None:
        self.faults = faults
        self.next_id = 0
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.modern = False
        self.version = LATEST
        self.stopped = False
        self.tasks: set[asyncio.Future[Any]] = set()
        self.cancelled: dict[str, asyncio.Event] = {}  # a slow request of the server -> set when it is cancelled
        # the cancel scenario: sampling is slow (a model thinking), so the server cancels it
        self.slow_sampling = os.environ.get("MCPKIT_CHECK_SCENARIO") == "cancel"

    def spawn(self, coro: Any) -> None:
        """Run ``coro`` on its own, keeping a reference until it ends."""
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    def has(self, fault: str) -> bool:
        return fault in self.faults

    def new_id(self) -> Any:
        if self.has("null-id") and self.next_id >= 2:
            return None
        if not (self.has("reused-id") and self.next_id == 3):
            self.next_id += 1
        return self.next_id

    def meta(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.modern:
            return params
        meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientInfo": INFO}
        if not (self.has("modern-no-meta") and self.next_id == 3):
            meta["io.modelcontextprotocol/clientCapabilities"] = CAPS
        return {**params, "_meta": meta}

    async def send(self, msg: Any) -> None:
        raise NotImplementedError

    async def request(self, method: str, params: dict[str, Any] | None = None, *, rid: Any = "new") -> Any:
        rid = self.new_id() if rid == "new" else rid
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method, "params": self.meta(params or {})}
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[json.dumps(rid)] = fut
        await self.send(msg)
        try:
            return await asyncio.wait_for(fut, 15)
        except TimeoutError:
            return None

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg)

    async def receive(self, msg: Any) -> None:
        """One message from the server (or a batch)."""
        if isinstance(msg, list):
            for item in msg:  # answers to our batch
                if isinstance(item, dict) and "method" not in item:
                    await self.receive(item)
            requests = [m for m in msg if isinstance(m, dict) and "method" in m]
            if not requests or self.has("ignore-batch"):
                return
            answers = [a for a in [self.answer(m) for m in requests] if a is not None]
            if answers:
                await self.send(answers)
            return
        if not isinstance(msg, dict):
            return
        if "method" in msg and "id" in msg:
            if msg["method"] == "sampling/createMessage" and self.slow_sampling and not await self.think(msg):
                return  # cancelled: no answer
            answer = self.answer(msg)
            if answer is not None:
                await self.send(answer)
        elif "method" in msg:
            if msg["method"] == "notifications/cancelled":
                rid = json.dumps((msg.get("params") or {}).get("requestId"))
                self.cancelled.setdefault(rid, asyncio.Event()).set()
            if msg["method"].startswith("notifications/mcpkit-check") and self.has("crash-on-unknown"):
                self.stopped = True
        else:
            fut = self.pending.pop(json.dumps(msg.get("id")), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)

    async def think(self, msg: dict[str, Any]) -> bool:
        """A slow sampling request: True when it is to be answered (it was not cancelled within 30 s, or the fault
        answers a cancelled one 1.5 s after the cancellation)."""
        event = self.cancelled.setdefault(json.dumps(msg.get("id")), asyncio.Event())
        try:
            await asyncio.wait_for(event.wait(), 30)
        except TimeoutError:
            return True
        if self.has("answer-cancelled") or self.has("answer-cancelled-http"):
            await asyncio.sleep(1.5)
            return True
        if self.has("error-cancelled"):
            await self.send({"jsonrpc": "2.0", "id": msg.get("id"), "error": {"code": -32800, "message": "cancelled"}})
        return False

    def answer(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        if self.stopped:
            return None
        method, rid = msg.get("method"), msg.get("id")
        if self.has("wrong-answer-id") and method == "roots/list":
            rid = f"{rid}-x"
        if method == "ping" and self.has("result-and-error"):
            return {"jsonrpc": "2.0", "id": rid, "result": {}, "error": {"code": -32603, "message": "both"}}
        if method == "ping":
            result: dict[str, Any] = {"ok": True} if self.has("ping-nonempty") else {}
        elif method == "roots/list":
            if self.has("refuse-roots"):
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no roots"}}
            root = {"name": "project"} if self.has("root-without-uri") else {"uri": "file:///tmp/p", "name": "p"}
            result = {"items": [root]} if self.has("roots-without-array") else {"roots": [root]}
        elif method == "sampling/createMessage":
            if self.has("ignore-sampling"):
                return None
            if self.has("refuse-sampling"):
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no sampling"}}
            content = (
                {"type": "html", "html": "<b>hi</b>"} if self.has("sampling-html") else {"type": "text", "text": "hi"}
            )
            result = {"role": "assistant", "content": content, "stopReason": "endTurn"}
            if not self.has("sampling-without-model"):
                result["model"] = "test"
        elif method == "elicitation/create":
            if self.has("error-without-message"):
                return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603}}
            result = {"action": "accept", "content": {"name": "Ada"}}
        else:
            return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "Method not found"}}
        return {"jsonrpc": "2.0", "id": rid, "result": result}

    async def session(self) -> None:
        """The whole conversation: discover or initialize, list, call, done."""
        found = await self.request("server/discover", {"_meta": self.discover_meta()})
        if isinstance(found, dict) and MODERN in ((found.get("result") or {}).get("supportedVersions") or []):
            self.modern = True
        elif self.has("never-initialize"):
            await self.request("tools/list")
            return
        elif not await self.initialize():
            return
        if self.has("call-undeclared"):
            await self.request("prompts/list")
        cursor = None
        tools: list[dict[str, Any]] = []
        while True:
            page = await self.request("tools/list", {"cursor": cursor} if cursor else {})
            result = (page or {}).get("result") or {}
            tools += result.get("tools") or []
            cursor = result.get("nextCursor")
            if not cursor:
                break
            if self.has("change-cursor"):
                cursor += "x"
        for tool in tools:
            await self.call(tool["name"])

    def discover_meta(self) -> dict[str, Any]:
        return {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": CAPS,
            "io.modelcontextprotocol/clientInfo": INFO,
        }

    async def initialize(self) -> bool:
        version = "2024-11-05" if self.has("old-version") else "1999-01-01" if self.has("unknown-version") else LATEST
        params: dict[str, Any] = {"protocolVersion": version}
        if not self.has("no-capabilities"):
            params["capabilities"] = CAPS
        if not self.has("no-client-info"):
            params["clientInfo"] = INFO
        if self.has("tools-before-initialize"):
            await self.request("tools/list")
        rid = self.new_id()
        if self.has("initialize-in-batch"):
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self.pending[json.dumps(rid)] = fut
            await self.send([{"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": params}])
            waiting: asyncio.Future[Any] = fut
        else:
            waiting = asyncio.ensure_future(self.request("initialize", params, rid=rid))
        if self.has("early-request"):
            await asyncio.sleep(0.05)
            await self.request("ping")
            await self.request("tools/list")
        if self.has("cancel-initialize"):
            await asyncio.sleep(0.05)
            await self.notify("notifications/cancelled", {"requestId": rid, "reason": "test"})
        answer = await waiting
        result = (answer or {}).get("result") or {}
        version = result.get("protocolVersion")
        if version not in KNOWN and not self.has("ignore-version"):
            return False  # a version this client does not support: disconnect
        self.version = version if version in KNOWN else LATEST
        if self.has("initialized-with-id"):
            await self.send({"jsonrpc": "2.0", "id": 999, "method": "notifications/initialized"})
        elif not self.has("no-initialized"):
            await self.notify("notifications/initialized")
        extra = {
            "bad-jsonrpc": {"jsonrpc": "1.0", "id": 998, "method": "ping"},
            "request-bad-method": {"jsonrpc": "2.0", "id": 997, "method": 5},
            "notification-bad-method": {"jsonrpc": "2.0", "method": 5},
            "string-params": {"jsonrpc": "2.0", "id": 996, "method": "ping", "params": "x"},
            "string-notification-params": {"jsonrpc": "2.0", "method": "notifications/mcpkit/x", "params": "x"},
        }
        for fault, msg in extra.items():
            if self.has(fault):
                await self.send(msg)
        if self.has("pretty-printed"):
            await self.send_raw(json.dumps({"jsonrpc": "2.0", "id": 995, "method": "ping"}, indent=1).encode() + b"\n")
        if self.has("stdin-junk"):
            await self.send_raw(b"this is not JSON\n")
        if self.has("truncated-line"):
            await self.send_raw(b'{"jsonrpc": "2.0", "id": 994,\n')
        if self.has("initialize-twice"):
            await self.request("initialize", params)
        if self.has("deeply-nested") or self.has("deeply-nested-http"):
            deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
            await self.send_raw(b'{"jsonrpc":"2.0","method":"notifications/mcpkit/deep","params":' + deep + b"}\n")
        return True

    async def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    async def call(self, name: str) -> None:
        params: dict[str, Any] = {"name": name, "arguments": {}}
        if name == "check_echo":
            params["_meta"] = {"progressToken": "tok-1" if self.has("shared-progress-token") else f"tok-{name}"}
            if self.has("shared-progress-token"):
                twin = dict(params, _meta={"progressToken": "tok-1"})
                await asyncio.gather(self.request("tools/call", params), self.request("tools/call", twin))
                return
        answer = await self.request("tools/call", params)
        result = (answer or {}).get("result") or {}
        if result.get("resultType") == "input_required":
            await self.retry(answer, params)

    async def retry(self, answer: dict[str, Any], params: dict[str, Any]) -> None:
        result = answer["result"]
        asks = result.get("inputRequests") or {}
        responses = (
            {} if self.has("modern-no-inputs") else {k: self.answer(dict(v, id=0))["result"] for k, v in asks.items()}
        )  # type: ignore[index]
        again = dict(params, inputResponses=responses)
        state = result.get("requestState")
        if state is not None:
            again["requestState"] = state + "x" if self.has("modern-changed-state") else state
        if self.has("modern-answers"):
            await self.send({"jsonrpc": "2.0", "id": 99, "result": {}})
        rid = answer.get("id") if self.has("modern-same-id") else "new"
        await self.request("tools/call", again, rid=rid)


class StdioClient(Client):
    def __init__(self, command: str, faults: set[str]) -> None:
        super().__init__(faults)
        self.command = shlex.split(command)
        self.proc: asyncio.subprocess.Process | None = None

    async def send(self, msg: Any) -> None:
        await self.send_raw(json.dumps(msg).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def run(self) -> None:
        if self.has("no-launch"):
            return
        self.proc = await asyncio.create_subprocess_exec(
            *self.command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        reader = asyncio.ensure_future(self.read())
        try:
            await self.session()
        finally:
            if self.has("kill-server"):
                self.proc.terminate()
            else:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 3)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
            reader.cancel()

    async def read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            self.spawn(self.receive(msg))


class HttpClient(Client):
    def __init__(self, url: str, faults: set[str]) -> None:
        super().__init__(faults)
        import httpx

        self.url = url
        self.http = httpx.AsyncClient(timeout=15)
        self.sid: str | None = None
        self.initialized = False
        self.token: str | None = None
        self.authorizing = False
        self.forget_once = False

    def headers(self, msg: Any = None) -> dict[str, str]:
        accept = "application/json" if self.has("accept-json-only") else "application/json, text/event-stream"
        if self.has("accept-sse-q0"):
            accept = "application/json, text/event-stream;q=0"
        h = {"Accept": accept, "Content-Type": "application/json"}
        if self.token:
            h["Authorization"] = f"Bearer {self.token}"
        if self.sid and not (self.has("no-session-id") and self.initialized):
            h["Mcp-Session-Id"] = self.sid
        if self.initialized and self.version >= "2025-06-18" and not self.has("no-version-header"):
            h["MCP-Protocol-Version"] = self.version
        meta = ((msg.get("params") or {}).get("_meta") or {}) if isinstance(msg, dict) else {}
        if isinstance(msg, dict) and "method" in msg and "io.modelcontextprotocol/protocolVersion" in meta:
            h["MCP-Protocol-Version"] = MODERN
            h["Mcp-Method"] = "wrong" if self.has("modern-wrong-headers") else msg["method"]
            name = (msg.get("params") or {}).get("name")
            if msg["method"] == "tools/call" and name:
                h["Mcp-Name"] = name
        return h

    async def send(self, msg: Any) -> None:
        if isinstance(msg, dict) and "method" in msg and "id" in msg:
            self.spawn(self.post(msg))  # a request: its answer is awaited by request()
        else:
            await self.post(msg)  # notifications and answers in order with what follows

    async def send_raw(self, data: bytes) -> None:
        await self.http.post(self.url, content=data, headers=self.headers())

    async def authorize(self, challenge: str) -> None:
        """The OAuth authorization code flow with PKCE against the server's authorization server (no browser: the
        development server approves at once and its redirect is read, not followed)."""
        import base64
        import hashlib
        import re
        import secrets
        from urllib.parse import parse_qs, urlencode, urlsplit

        found = re.search(r'resource_metadata="([^"]+)"', challenge)
        version = {} if self.has("auth-no-version-header") else {"MCP-Protocol-Version": LATEST}
        prm = (await self.http.get(found.group(1), headers=version)).json() if found else {}
        issuer = (prm.get("authorization_servers") or [self.url.rsplit("/", 1)[0]])[0]
        endpoints = {"authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token"}
        endpoints["registration_endpoint"] = issuer + "/register"
        if not self.has("auth-no-metadata"):
            meta = await self.http.get(issuer + "/.well-known/oauth-authorization-server", headers=version)
            endpoints.update(meta.json())
        redirect = "http://127.0.0.1:1/callback"
        registration = {
            "client_name": "broken-client",
            "redirect_uris": [redirect],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "application_type": "native",
        }
        client_id = (await self.http.post(endpoints["registration_endpoint"], json=registration)).json()["client_id"]
        verifier = secrets.token_urlsafe(48)
        challenge_value = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect,
            "code_challenge": verifier if self.has("auth-plain-pkce") else challenge_value,
            "code_challenge_method": "plain" if self.has("auth-plain-pkce") else "S256",
            "state": secrets.token_urlsafe(8),
            "resource": self.url,
            "scope": "mcp",
        }
        answer = await self.http.get(endpoints["authorization_endpoint"] + "?" + urlencode(query))
        code = parse_qs(urlsplit(answer.headers.get("location", "")).query).get("code", [""])[0]
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect,
            "client_id": client_id,
            "code_verifier": verifier,
            "resource": self.url,
        }
        token = await self.http.post(endpoints["token_endpoint"], data=form)
        self.token = token.json().get("access_token") if token.status_code == 200 else None
        if self.token and self.has("auth-token-in-query"):
            await self.http.post(f"{self.url}?access_token={self.token}", content=b"{}", headers=self.headers())
        if self.token and self.has("auth-forgets-header"):
            self.forget_once = True

    async def post(self, msg: Any) -> None:
        if isinstance(msg, dict) and msg.get("method") == "notifications/initialized":
            self.initialized = True
        body = json.dumps(msg).encode()
        headers = self.headers(msg)
        if self.forget_once:
            headers.pop("Authorization", None)
        self.forget_once = False
        async with self.http.stream("POST", self.url, content=body, headers=headers) as resp:
            if resp.status_code == 401 and self.token is None and not self.authorizing:
                self.authorizing = True
                await self.authorize(resp.headers.get("www-authenticate", ""))
                self.authorizing = False
                if self.token:
                    await self.post(msg)
                    return
            if resp.status_code == 401 and self.token:  # (a request sent without the token: once more, with it)
                await self.post(msg)
                return
            if resp.status_code == 404 and self.sid and not self.has("no-reinitialize"):
                self.sid, self.initialized = None, False
                self.spawn(self.reinitialize(msg))
                return
            if isinstance(msg, dict) and msg.get("method") == "initialize":
                self.sid = resp.headers.get("mcp-session-id")
            ctype = resp.headers.get("content-type", "")
            if "text/event-stream" in ctype:
                await self.events(resp, msg)
            elif "json" in ctype:
                data = await resp.aread()
                if not data.strip():
                    return
                answer = json.loads(data)
                if isinstance(answer, dict) and answer.get("id") is None and isinstance(msg, dict) and "id" in msg:
                    answer = dict(answer, id=msg["id"])  # an HTTP error's id-less answer: the request's answer
                await self.receive(answer)

    async def reinitialize(self, failed: Any) -> None:
        if await self.initialize() and isinstance(failed, dict) and "id" in failed:
            await self.post(failed)

    async def events(self, resp: Any, msg: Any) -> None:
        last, retry, answered = None, 1000, False
        event: dict[str, str] = {}
        async for line in resp.aiter_lines():
            if line == "":
                if event.get("data"):
                    data = json.loads(event["data"])
                    answered = answered or (
                        isinstance(data, dict) and data.get("id") == msg.get("id") and "method" not in data
                    )
                    if isinstance(data, dict) and "method" in data and "id" in data:
                        self.spawn(self.receive(data))  # a request of the server: the stream reads on meanwhile
                    else:
                        await self.receive(data)
                event = {}
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "id":
                last = value
            elif field == "retry" and value.isdigit():
                retry = int(value)
            elif field == "data":
                event["data"] = event.get("data", "") + value
        if answered or last is None or self.has("no-resume"):
            return
        if not self.has("resume-at-once"):
            await asyncio.sleep(retry / 1000)
        headers = self.headers()
        headers.pop("Content-Type")
        headers["Accept"] = "text/event-stream"
        headers["Last-Event-ID"] = last
        async with self.http.stream("GET", self.url, headers=headers) as again:
            await self.events(again, msg)

    async def run(self) -> None:
        try:
            await self.session()
            if self.has("put-message"):
                body = json.dumps({"jsonrpc": "2.0", "method": "notifications/mcpkit/put"}).encode()
                await self.http.put(self.url, content=body, headers=self.headers())
            if self.sid:
                headers = self.headers()
                headers.pop("Content-Type")
                headers["Accept"] = "application/json" if self.has("get-accept-json") else "text/event-stream"
                try:
                    async with self.http.stream("GET", self.url, headers=headers, timeout=1) as resp:
                        await resp.aread()
                except Exception:
                    pass
            if self.has("bad-body"):
                await self.send_raw(b"{not json")
            if self.sid and not self.has("no-delete"):
                headers = self.headers()
                headers.pop("Content-Type")
                await self.http.delete(self.url, headers=headers)
        finally:
            await self.http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("target")
    parser.add_argument("--fault", action="append", default=[], choices=sorted(FAULTS))
    args = parser.parse_args()
    faults = set(args.fault)
    if args.target.startswith("http"):
        client: StdioClient | HttpClient = HttpClient(args.target, faults)
    else:
        client = StdioClient(args.target, faults)
    asyncio.run(client.run())


if __name__ == "__main__":
    sys.exit(main())
