"""Raw JSON-RPC wires for the checker: every byte the server sends is recorded, nothing is corrected.

:class:`StdioWire` runs the server command as a child process and records every stdout line (valid or not);
:class:`HttpWire` POSTs to a Streamable HTTP endpoint and records every message of every JSON or SSE response,
with the HTTP status and headers. Both route responses by id *without trusting it*: a response whose id matches no
pending request is kept as a stray (the evidence for M006), and :meth:`Wire.request` returns ``None`` on a timeout.
Requests the server sends (ping, roots/list, ...) are answered so that a session can go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]


@dataclass
class Incoming:
    """One message (or undecodable line) received from the server."""

    raw: str
    data: Any = None  # parsed JSON, or None when ``error`` is set
    error: str | None = None  # why the line is not JSON
    at: float = field(default_factory=time.monotonic)
    channel: str = "stdout"  # stdout | http-json | http-sse | http-get

    def short(self, limit: int = 300) -> str:
        text = self.raw if len(self.raw) <= limit else self.raw[:limit] + "..."
        return text


@dataclass
class HttpExchange:
    """One HTTP request/response pair (HTTP wire only)."""

    method: str
    sent: Any
    status: int
    headers: dict[str, str]
    body: str
    messages: list[Incoming] = field(default_factory=list)


class WireClosed(Exception):
    pass


def is_request(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" in msg and "id" in msg


def is_notification(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" in msg and "id" not in msg


def is_response(msg: Any) -> bool:
    return isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg or "id" in msg)


class Wire:
    """Common bookkeeping: pending requests, strays, notifications, server requests."""

    def __init__(self) -> None:
        self.incoming: list[Incoming] = []
        self.sent: list[Any] = []
        self.strays: list[Incoming] = []  # responses matching no pending request
        self.notifications: list[Incoming] = []
        self.server_requests: list[Incoming] = []
        self.responses: dict[str, Incoming] = {}
        self._pending: dict[str, asyncio.Future[Incoming]] = {}
        self._next_id = 0
        self.protocol_version: str | None = None
        self.client_handlers: dict[str, Any] = {}
        self.closed = asyncio.Event()  # set when the peer is gone (stdio EOF)
        self.modern_meta: JSON | None = None  # set for a stateless (2026-07-28) session

    def with_meta(self, params: JSON | None) -> JSON | None:
        """Stateless era (2026-07-28): every request carries the per-request ``_meta`` (explicit keys win)."""
        if self.modern_meta is None:
            return params
        out = dict(params or {})
        meta = dict(self.modern_meta)
        given = out.get("_meta")
        if isinstance(given, dict):
            meta.update(given)
        out["_meta"] = meta
        return out

    def new_id(self, kind: str = "int") -> int | str:
        self._next_id += 1
        return self._next_id if kind == "int" else f"chk-{self._next_id}"

    @staticmethod
    def key(msg_id: Any) -> str:
        return json.dumps(msg_id, sort_keys=True)

    def _record(self, inc: Incoming) -> None:
        self.incoming.append(inc)
        items = inc.data if isinstance(inc.data, list) else [inc.data]
        if inc.error is not None:
            return
        for msg in items:
            sub = Incoming(json.dumps(msg), msg, None, inc.at, inc.channel) if isinstance(inc.data, list) else inc
            if is_request(msg):
                self.server_requests.append(sub)
                self._answer_server_request(msg)
            elif is_notification(msg):
                self.notifications.append(sub)
            elif isinstance(msg, dict):
                key = self.key(msg.get("id"))
                fut = self._pending.pop(key, None)
                if fut is not None and not fut.done():
                    self.responses[key] = sub
                    fut.set_result(sub)
                else:
                    self.strays.append(sub)

    def _answer_server_request(self, msg: JSON) -> None:
        method = msg.get("method")
        handler = self.client_handlers.get(str(method))
        if method == "ping":
            reply: JSON = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
        elif handler is not None:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": handler(msg.get("params") or {})}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
        asyncio.get_running_loop().create_task(self._send_quiet(reply))

    async def _send_quiet(self, obj: Any) -> None:
        with contextlib.suppress(Exception):
            await self.send(obj, expect_response=False)

    async def send(self, obj: Any, *, expect_response: bool = True) -> None:
        raise NotImplementedError

    async def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    async def request(
        self,
        method: str,
        params: JSON | None = None,
        *,
        timeout: float = 10.0,
        id_kind: str = "int",
        msg_id: Any = None,
    ) -> Incoming | None:
        """Send a request and wait for the response with the same id (None on timeout)."""
        rid = msg_id if msg_id is not None else self.new_id(id_kind)
        msg: JSON = {"jsonrpc": "2.0", "id": rid, "method": method}
        params = self.with_meta(params)
        if params is not None:
            msg["params"] = params
        fut: asyncio.Future[Incoming] = asyncio.get_running_loop().create_future()
        self._pending[self.key(rid)] = fut
        await self.send(msg)
        closed: asyncio.Future[Any] = asyncio.ensure_future(self.closed.wait())
        try:
            waiting: set[asyncio.Future[Any]] = {fut, closed}
            await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
        if fut.done():
            return fut.result()
        self._pending.pop(self.key(rid), None)
        fut.cancel()
        return None

    async def notify(self, method: str, params: JSON | None = None) -> None:
        msg: JSON = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        await self.send(msg, expect_response=False)

    def expect(self, msg_id: Any) -> asyncio.Future[Incoming]:
        fut: asyncio.Future[Incoming] = asyncio.get_running_loop().create_future()
        self._pending[self.key(msg_id)] = fut
        return fut

    async def close(self) -> None:
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        return True


class StdioWire(Wire):
    """A server started as a child process; every stdout line is recorded."""

    def __init__(self, command: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None):
        super().__init__()
        self.command = list(command)
        self.env = env
        self.cwd = cwd
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._stderr_task: asyncio.Task[None] | None = None
        self.stderr_tail: list[str] = []
        self.eof = asyncio.Event()

    async def start(self) -> None:
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self.proc = await asyncio.create_subprocess_exec(
            *self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=self.cwd,
            start_new_session=True,
            limit=16 * 1024 * 1024,
        )
        self._reader = asyncio.create_task(self._read())
        self._stderr_task = asyncio.create_task(self._drain_stderr())

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            try:
                line = await self.proc.stdout.readline()
            except (ValueError, asyncio.LimitOverrunError):
                self._record(Incoming("<line over 16 MiB>", None, "line too long"))
                continue
            if not line:
                break
            text = line.decode("utf-8", errors="replace").rstrip("\r\n")
            if not text.strip():
                self._record(Incoming(text, None, "empty line"))
                continue
            try:
                data = json.loads(text)
            except ValueError as exc:
                self._record(Incoming(text, None, f"not JSON: {exc}"))
                continue
            self._record(Incoming(text, data))
        self.eof.set()
        await asyncio.sleep(0.05)  # let the reader of the last response run first
        self.closed.set()

    async def _drain_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        while True:
            line = await self.proc.stderr.readline()
            if not line:
                return
            self.stderr_tail.append(line.decode("utf-8", errors="replace").rstrip())
            del self.stderr_tail[:-50]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None and not self.eof.is_set()

    async def send(self, obj: Any, *, expect_response: bool = True) -> None:
        self.sent.append(obj)
        await self.send_raw(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        if self.proc is None or self.proc.stdin is None or not self.alive:
            raise WireClosed("the server process is not running")
        try:
            self.proc.stdin.write(data)
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise WireClosed(str(exc)) from None

    async def close(self) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(Exception):
                proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 1.0)
        except TimeoutError:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
                try:
                    await asyncio.wait_for(proc.wait(), 2.0)
                    break
                except TimeoutError:
                    continue
        for task in (self._reader, self._stderr_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


def parse_sse(text: str) -> list[dict[str, str]]:
    """Split an SSE body into events ({'event','data','id','retry'}); data lines are joined with newlines."""
    events: list[dict[str, str]] = []
    cur: dict[str, list[str]] = {}
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if cur:
                events.append({k: "\n".join(v) for k, v in cur.items()})
                cur = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        cur.setdefault(name, []).append(value)
    if cur:
        events.append({k: "\n".join(v) for k, v in cur.items()})
    return events


class HttpWire(Wire):
    """A Streamable HTTP endpoint: one POST per message, JSON or SSE responses, session id and version headers."""

    def __init__(self, url: str, headers: dict[str, str] | None = None):
        super().__init__()
        import httpx

        self.url = url
        self.extra_headers = dict(headers or {})
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(30.0, connect=10.0))
        self.session_id: str | None = None
        self.exchanges: list[HttpExchange] = []
        self._tasks: set[asyncio.Task[HttpExchange]] = set()
        self.track_session = True

    async def start(self) -> None:
        return None

    def headers(self) -> dict[str, str]:
        h = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        if self.protocol_version:
            h["MCP-Protocol-Version"] = self.protocol_version
        h.update(self.extra_headers)
        return h

    def message_headers(self, obj: Any) -> dict[str, str]:
        """The headers of one POST; stateless sessions add MCP-Protocol-Version (the body's), Mcp-Method, Mcp-Name."""
        h = self.headers()
        if self.modern_meta is not None and isinstance(obj, dict) and isinstance(obj.get("method"), str):
            raw_params = obj.get("params")
            params: JSON = raw_params if isinstance(raw_params, dict) else {}
            raw_meta = params.get("_meta")
            meta: JSON = raw_meta if isinstance(raw_meta, dict) else {}
            version = meta.get("io.modelcontextprotocol/protocolVersion")
            if isinstance(version, str):
                h["MCP-Protocol-Version"] = version
            h["Mcp-Method"] = obj["method"]
            name = params.get("uri") if obj["method"] == "resources/read" else params.get("name")
            if obj["method"] in ("tools/call", "prompts/get", "resources/read") and isinstance(name, str):
                h["Mcp-Name"] = name
        return h

    async def send(self, obj: Any, *, expect_response: bool = True) -> None:
        self.sent.append(obj)
        data = json.dumps(obj, separators=(",", ":")).encode()
        if not expect_response:  # notifications and our answers: keep their order with later requests
            await self._post(obj, data, self.message_headers(obj))
            return
        task = asyncio.get_running_loop().create_task(self._post(obj, data, self.message_headers(obj)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send_raw(self, data: bytes) -> None:
        await self._post(None, data, self.headers())

    async def post(self, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None) -> HttpExchange:
        """POST and wait for the whole response (used by the HTTP-level checks)."""
        h = self.message_headers(body)
        if headers is not None:
            h.update(headers)
            h = {k: v for k, v in h.items() if v != ""}
        data = raw if raw is not None else json.dumps(body).encode()
        if isinstance(body, dict) and "id" in body:
            self.expect(body["id"])  # its response is ours, not a stray
        return await self._post(body, data, h)

    async def _post(self, obj: Any, data: bytes, headers: dict[str, str]) -> HttpExchange:
        import httpx

        try:
            async with self.client.stream("POST", self.url, content=data, headers=headers) as resp:
                ctype = resp.headers.get("content-type", "")
                ex = HttpExchange("POST", obj, resp.status_code, dict(resp.headers), "")
                self.exchanges.append(ex)
                sid = resp.headers.get("mcp-session-id")
                if sid and isinstance(obj, dict) and obj.get("method") == "initialize" and self.track_session:
                    self.session_id = sid
                if "text/event-stream" in ctype:
                    await self._read_sse(resp, ex, "http-sse")
                else:
                    body = (await resp.aread()).decode("utf-8", errors="replace")
                    ex.body = body
                    if body.strip() and "json" in ctype:
                        self._feed(body, ex, "http-json")
                    elif body.strip() and resp.status_code >= 400:
                        # an error body may still be JSON-RPC without the right content type
                        with contextlib.suppress(ValueError):
                            json.loads(body)
                            self._feed(body, ex, "http-json")
        except httpx.HTTPError as exc:
            ex = HttpExchange("POST", obj, 0, {}, f"{type(exc).__name__}: {exc}")
            self.exchanges.append(ex)
        self._unanswered(obj, ex)
        return ex

    def _unanswered(self, obj: Any, ex: HttpExchange) -> None:
        """A request whose POST ended without its response: resolve the wait with what HTTP said instead."""
        if not (isinstance(obj, dict) and "method" in obj and "id" in obj):
            return
        fut = self._pending.pop(self.key(obj["id"]), None)
        if fut is not None and not fut.done():
            what = f"HTTP {ex.status}" if ex.status else "no HTTP response"
            flat = " ".join(ex.body.split())
            body = flat if len(flat) <= 200 else flat[:200] + "..."
            fut.set_result(Incoming(f"{what}: {body}".strip(), None, "no JSON-RPC response", channel="http"))

    async def _read_sse(self, resp: Any, ex: HttpExchange, channel: str) -> None:
        buf = ""
        async for chunk in resp.aiter_text():
            buf += chunk
            ex.body += chunk
            while "\n\n" in buf.replace("\r\n", "\n"):
                norm = buf.replace("\r\n", "\n")
                block, _, rest = norm.partition("\n\n")
                buf = rest
                for event in parse_sse(block + "\n\n"):
                    payload = event.get("data", "")
                    if payload.strip():
                        self._feed(payload, ex, channel)
        if buf.strip():
            for event in parse_sse(buf):
                if event.get("data", "").strip():
                    self._feed(event["data"], ex, channel)

    def _feed(self, text: str, ex: HttpExchange, channel: str) -> None:
        try:
            inc = Incoming(text, json.loads(text), None, channel=channel)
        except ValueError as exc:
            inc = Incoming(text, None, f"not JSON: {exc}", channel=channel)
        ex.messages.append(inc)
        self._record(inc)

    async def get(self, headers: dict[str, str] | None = None, read_for: float = 0.3) -> HttpExchange:
        """GET the endpoint (standalone SSE stream); read for ``read_for`` seconds, then hang up."""
        import httpx

        h = self.headers()
        h.pop("Content-Type", None)
        h["Accept"] = "text/event-stream"
        if headers:
            h.update(headers)
        try:
            async with self.client.stream("GET", self.url, headers=h) as resp:
                ex = HttpExchange("GET", None, resp.status_code, dict(resp.headers), "")
                self.exchanges.append(ex)
                if "text/event-stream" in resp.headers.get("content-type", ""):
                    with contextlib.suppress(asyncio.TimeoutError, httpx.HTTPError):
                        await asyncio.wait_for(self._read_sse(resp, ex, "http-get"), read_for)
                else:
                    ex.body = (await resp.aread()).decode("utf-8", errors="replace")
                return ex
        except httpx.HTTPError as exc:
            return HttpExchange("GET", None, 0, {}, f"{type(exc).__name__}: {exc}")

    async def delete(self) -> HttpExchange:
        import httpx

        h = self.headers()
        h.pop("Content-Type", None)
        try:
            resp = await self.client.delete(self.url, headers=h)
            return HttpExchange("DELETE", None, resp.status_code, dict(resp.headers), resp.text)
        except httpx.HTTPError as exc:
            return HttpExchange("DELETE", None, 0, {}, f"{type(exc).__name__}: {exc}")

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self.session_id:
            with contextlib.suppress(Exception):
                await self.delete()
        await self.client.aclose()


def split_command(target: str | Sequence[str]) -> list[str]:
    if isinstance(target, str):
        return shlex.split(target)
    return list(target)


def is_url(target: str | Sequence[str]) -> bool:
    return isinstance(target, str) and target.startswith(("http://", "https://"))
