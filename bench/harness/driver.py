"""The load driver: raw JSON-RPC over stdio pipes and over a lean HTTP/1.1 keep-alive client on asyncio
streams. Every server under test is driven by exactly this code, so the client's cost is the same for all
of them; it is kept small because it shares the machine's two cores with the server."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
CLIENT_INFO = {"name": "mcpkit-bench", "version": "1"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
}


class BenchError(Exception):
    """A server answered wrongly (JSON-RPC error, bad status, closed pipe): the trial is n/a."""


def initialize_params(version: str = LEGACY_VERSION) -> dict[str, Any]:
    return {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO}


def modern_params(params: dict[str, Any]) -> dict[str, Any]:
    out = dict(params)
    meta = dict(out.get("_meta") or {})
    meta.update(MODERN_META)
    out["_meta"] = meta
    return out


def check_tool_result(result: dict[str, Any], expect_text: str | None = None) -> None:
    if result.get("isError"):
        raise BenchError(f"tool returned isError: {str(result)[:200]}")
    content = result.get("content")
    if not isinstance(content, list) or not content:
        raise BenchError(f"tool result without content: {str(result)[:200]}")
    if expect_text is not None:
        got = content[0].get("text")
        if got != expect_text:
            raise BenchError(f"echo mismatch: got {str(got)[:60]!r}")


# ----------------------------------------------------------------------------------------------- stdio


class StdioConn:
    """JSON-RPC over a child's stdin/stdout, newline-delimited; responses matched to requests by id."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._closed: BaseException | None = None
        self.noise_lines = 0
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    async def _read_loop(self) -> None:
        reader = self._reader
        try:
            while True:
                line = await reader.readline()
                if not line:
                    raise BenchError("server closed stdout")
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.noise_lines += 1
                    continue
                if not isinstance(msg, dict):
                    self.noise_lines += 1
                    continue
                mid = msg.get("id")
                if "method" in msg:
                    if mid is not None:  # a server->client request (ping...): answer so it never blocks
                        self._writer.write(orjson.dumps({"jsonrpc": "2.0", "id": mid, "result": {}}) + b"\n")
                    continue
                fut = self._pending.pop(mid, None) if isinstance(mid, int) else None
                if fut is not None and not fut.done():
                    fut.set_result(msg)
        except BaseException as exc:
            self._closed = exc if isinstance(exc, Exception) else BenchError("reader stopped")
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(BenchError(f"connection lost: {self._closed}"))
            self._pending.clear()

    async def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if self._closed is not None:
            raise BenchError(f"connection lost: {self._closed}")
        rid = self._next_id
        self._next_id += 1
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self._writer.write(orjson.dumps(msg) + b"\n")
        await self._writer.drain()
        resp = await fut
        if "error" in resp:
            raise BenchError(f"{method}: JSON-RPC error {str(resp['error'])[:200]}")
        result = resp.get("result")
        if not isinstance(result, dict):
            raise BenchError(f"{method}: response without result object")
        return result

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._writer.write(orjson.dumps(msg) + b"\n")
        await self._writer.drain()

    async def handshake(self) -> dict[str, Any]:
        result = await self.request("initialize", initialize_params())
        await self.notify("notifications/initialized")
        return result

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task
        with contextlib.suppress(Exception):
            self._writer.close()


# ------------------------------------------------------------------------------------------------ HTTP


@dataclass
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes


class HttpConn:
    """One keep-alive HTTP/1.1 connection. Handles Content-Length and chunked bodies (SSE replies)."""

    def __init__(self, host: str, port: int, local_host: str | None = None) -> None:
        self.host = host
        self.port = port
        self.local_host = local_host  # the client's own address (e.g. 127.0.0.2: another client to the server)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        local = (self.local_host, 0) if self.local_host else None
        self._reader, self._writer = await asyncio.open_connection(
            self.host, self.port, limit=64 * 1024 * 1024, local_addr=local
        )

    async def post(self, path: str, body: bytes, headers: list[tuple[str, str]]) -> HttpResponse:
        if self._writer is None:
            await self.open()
        assert self._reader is not None and self._writer is not None
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}"]
        head.extend(f"{k}: {v}" for k, v in headers)
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        return await self._read_response()

    async def _read_response(self) -> HttpResponse:
        reader = self._reader
        assert reader is not None
        try:
            raw = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            await self.close()
            raise BenchError("HTTP connection closed by server") from exc
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        status = int(parts[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            body = await reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size_line = await reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    # trailers (none expected) end with an empty line
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    break
                chunks.append(await reader.readexactly(size))
                await reader.readexactly(2)
            body = b"".join(chunks)
        else:
            body = await reader.read()
            await self.close()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return HttpResponse(status, headers, body)

    async def close(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self._reader = self._writer = None


def _decode_jsonrpc(resp: HttpResponse, rid: int | None) -> dict[str, Any] | None:
    ctype = resp.headers.get("content-type", "")
    if ctype.startswith("text/event-stream"):
        found: dict[str, Any] | None = None
        for line in resp.body.split(b"\n"):
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if not payload:
                    continue
                msg = orjson.loads(payload)
                if isinstance(msg, dict) and msg.get("id") == rid and ("result" in msg or "error" in msg):
                    found = msg
        return found
    if not resp.body:
        return None
    msg = orjson.loads(resp.body)
    return msg if isinstance(msg, dict) else None


@dataclass
class HttpMcp:
    """A logical MCP client over Streamable HTTP; calls go out on whichever HttpConn the caller passes,
    so 32 workers can share one session over 32 connections.

    era: "legacy" (initialize, Mcp-Session-Id when the server issues one) or "modern" (2026-07-28:
    no handshake, `_meta` on every request, MCP-Protocol-Version / Mcp-Method / Mcp-Name headers)."""

    host: str
    port: int
    era: str = "legacy"
    path: str = "/mcp"
    session_id: str | None = None
    version: str = LEGACY_VERSION
    _next_id: int = 1
    _base_headers: list[tuple[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rebuild_headers()

    def _rebuild_headers(self) -> None:
        h = [("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")]
        if self.era == "modern":
            h.append(("MCP-Protocol-Version", MODERN_VERSION))
        elif self.session_id is not None or self._next_id > 1:
            h.append(("MCP-Protocol-Version", self.version))
        if self.session_id is not None:
            h.append(("Mcp-Session-Id", self.session_id))
        self._base_headers = h

    def conn(self) -> HttpConn:
        return HttpConn(self.host, self.port)

    async def initialize(self, conn: HttpConn) -> dict[str, Any]:
        """Legacy handshake: initialize + notifications/initialized. Returns the initialize result."""
        self.session_id = None
        self._next_id = 1
        self._rebuild_headers()
        rid = self._take_id()
        body = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": "initialize", "params": initialize_params()})
        resp = await conn.post(self.path, body, self._base_headers)
        msg = self._check(resp, rid, "initialize")
        result = msg["result"]
        self.session_id = resp.headers.get("mcp-session-id")
        self.version = str(result.get("protocolVersion", LEGACY_VERSION))
        self._rebuild_headers()
        note = orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
        resp = await conn.post(self.path, note, self._base_headers)
        if resp.status not in (200, 202, 204):
            raise BenchError(f"notifications/initialized: HTTP {resp.status} {resp.body[:200]!r}")
        return dict(result)

    def _take_id(self) -> int:
        rid = self._next_id
        self._next_id += 1
        return rid

    def _check(self, resp: HttpResponse, rid: int, method: str) -> dict[str, Any]:
        if resp.status != 200:
            raise BenchError(f"{method}: HTTP {resp.status} {resp.body[:200]!r}")
        msg = _decode_jsonrpc(resp, rid)
        if msg is None:
            raise BenchError(f"{method}: no JSON-RPC response in body {resp.body[:200]!r}")
        if "error" in msg:
            raise BenchError(f"{method}: JSON-RPC error {str(msg['error'])[:200]}")
        if not isinstance(msg.get("result"), dict):
            raise BenchError(f"{method}: response without result object")
        return msg

    async def request(
        self, conn: HttpConn, method: str, params: dict[str, Any], name: str | None = None
    ) -> dict[str, Any]:
        rid = self._take_id()
        headers = self._base_headers
        if self.era == "modern":
            params = modern_params(params)
            headers = [*headers, ("Mcp-Method", method)]
            if name is not None:
                headers.append(("Mcp-Name", name))
        body = orjson.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        resp = await conn.post(self.path, body, headers)
        return dict(self._check(resp, rid, method)["result"])

    async def call_tool(self, conn: HttpConn, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.request(conn, "tools/call", {"name": name, "arguments": arguments}, name=name)


# ----------------------------------------------------------------------------------------- measurement


@dataclass
class LoadResult:
    calls: int
    seconds: float
    latencies_ns: list[int]

    @property
    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    def pct_ms(self, p: float) -> float:
        if not self.latencies_ns:
            return float("nan")
        xs = sorted(self.latencies_ns)
        k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
        return xs[k] / 1e6


async def run_load(
    call: Callable[[int], Awaitable[None]], *, concurrency: int, max_calls: int, max_seconds: float
) -> LoadResult:
    """Run `call(worker_index)` from `concurrency` workers until max_calls calls are done or max_seconds
    have passed, whichever comes first. Latency is measured per call."""
    lat: list[int] = []
    issued = 0
    t0 = time.perf_counter()
    deadline = t0 + max_seconds
    perf_ns = time.perf_counter_ns

    async def worker(w: int) -> None:
        nonlocal issued
        while issued < max_calls and time.perf_counter() < deadline:
            issued += 1
            s = perf_ns()
            await call(w)
            lat.append(perf_ns() - s)

    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return LoadResult(len(lat), time.perf_counter() - t0, lat)
