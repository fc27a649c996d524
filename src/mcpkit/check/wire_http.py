"""The checker's raw Streamable HTTP wire (:class:`HttpWire`); legacy HTTP+SSE and WebSocket go through mcpkit's own
client connections (:func:`~.wire.network_wire`).

:class:`HttpWire` POSTs each message to a Streamable HTTP endpoint and records every HTTP exchange (status, headers,
every SSE event with its id, every message) without correcting anything, so the HTTP-level checks can judge the
server's statuses and headers. It reads like mcpkit's client: a JSON body is read up to :data:`~.wire.MAX_MESSAGE`
bytes (:func:`~mcpkit.transports.http.client_support.read_capped`) and SSE streams go through the shared WHATWG
decoder (:class:`~mcpkit.transports.http.sse_decoder.SSEDecoder`) with the same bound; what goes past it is recorded as
a fault. Headers given by the user (``Authorization`` from ``--token``...) are sent only to the target's own origin.

Legacy HTTP+SSE and WebSocket carry one JSON-RPC message per event or frame and have no HTTP-level rules the
requirement list names, so their wire is mcpkit's client connection for that transport, recorded raw.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .._extras import require
from ..protocol.errors import MCPError
from ..protocol.versions import META_PROTOCOL_VERSION, features, is_supported
from ..transports.http.headers import NAME_FIELD, encode_header_value
from ..transports.http.sse_decoder import SSEDecoder, SSEEventTooLarge
from .wire import JSON, MAX_MESSAGE, OVERSIZED, Incoming, Wire, decode, is_request

if TYPE_CHECKING:
    import httpx  # (imported when an HttpWire is made: checking a stdio server needs only the cli extra)

STREAM_GRACE = 1.0  # seconds an SSE answer is read on once it carried every response it owes (servers close it)
EVIDENCE_BODY = 64 * 1024  # the part of a body kept as evidence (the whole body is read, bounded, for its messages)
NOT_AUTHORIZED = "no authorization"  # how the error of an exchange the wire's own OAuth client stopped begins


@dataclass
class SSEEventSeen:
    """One SSE event of a response: its id ("" for none), type and data, and when it arrived."""

    id: str
    event: str
    data: str
    at: float = field(default_factory=time.monotonic)


@dataclass
class HttpExchange:
    """One HTTP request and what came back."""

    method: str
    sent: Any
    status: int
    headers: dict[str, str]
    body: str = ""
    messages: list[Incoming] = field(default_factory=list)
    events: list[SSEEventSeen] = field(default_factory=list)
    retry: int | None = None  # the last ``retry:`` of the stream, in ms
    error: str | None = None  # a transport failure, or a body/event over the bound
    ended: bool = False  # the body or stream was read to its end (not cut by us)
    held_open: float | None = None  # an SSE answer still open this many seconds after its last owed response: cut
    request_headers: dict[str, str] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def content_type(self) -> str:
        """The media type of the answer, lower case, without parameters."""
        return self.headers.get("content-type", "").split(";")[0].strip().lower()

    @property
    def is_sse(self) -> bool:
        return self.content_type == "text/event-stream"

    def brief(self, limit: int = 160) -> str:
        """``HTTP 400 application/json {...}`` for evidence."""
        flat = " ".join(self.body.split())
        if len(flat) > limit:
            flat = flat[:limit] + "..."
        what = f"HTTP {self.status}" if self.status else (self.error or "no HTTP response")
        return f"{what} {self.content_type} {flat}".strip()


def _carries_requests(obj: Any) -> bool:
    """A POST body that asks for answers (a request, or a batch with one): its answer body is JSON-RPC."""
    items = obj if isinstance(obj, list) else [obj]
    return any(isinstance(m, dict) and "id" in m and "result" not in m and "error" not in m for m in items)


def origin_of(url: str) -> tuple[str, str]:
    """(scheme, host:port) of a URL, lower case, the default port made explicit."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(scheme)
    return scheme, f"{(parts.hostname or '').lower()}:{port}"


class HttpWire(Wire):
    """A Streamable HTTP endpoint: one POST per message, JSON or SSE answers, session id and version headers."""

    transport = "http"

    def __init__(
        self, url: str, headers: dict[str, str] | None = None, *, timeout: float = 30.0, auth: httpx.Auth | None = None
    ):
        require("httpx", "mcpkit check")  # (one line naming the http extra when it is missing)
        import httpx

        super().__init__()
        self.url = url
        self.extra_headers: dict[str, str] = dict(
            headers or {}
        )  # sent to ``url`` only: the wire never talks to another origin
        self.client: Any = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=10.0), follow_redirects=False, auth=auth
        )
        self.stream_timeout = timeout  # no SSE answer is read longer than this (a stream never ended holds nothing)
        self.session_id: str | None = None
        self.exchanges: list[HttpExchange] = []
        self._tasks: set[asyncio.Task[HttpExchange]] = set()
        self.track_session = True
        self.protocol_header = True  # send MCP-Protocol-Version once negotiated (2025-06-18 and later)

    def headers(self, *, accept: str = "application/json, text/event-stream") -> dict[str, str]:
        """The headers of a message POST on this session."""
        h = {"Accept": accept, "Content-Type": "application/json"}
        if self.session_id:
            h["Mcp-Session-Id"] = self.session_id
        version = self.protocol_version
        if self.protocol_header and is_supported(version) and features(version).protocol_version_header:
            h["MCP-Protocol-Version"] = version
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
            version = meta.get(META_PROTOCOL_VERSION)
            if isinstance(version, str):
                h["MCP-Protocol-Version"] = version
            h["Mcp-Method"] = obj["method"]
            name = params.get(NAME_FIELD.get(obj["method"], ""))
            if isinstance(name, str):
                h["Mcp-Name"] = encode_header_value(name)
        return h

    async def send(self, obj: Any, *, expect_response: bool = True) -> None:
        self.sent.append(obj)
        data = json.dumps(obj, separators=(",", ":")).encode()
        if not expect_response:  # notifications and our answers: keep their order with later requests
            await self.exchange("POST", self.message_headers(obj), data, obj)
            return
        task = asyncio.get_running_loop().create_task(self.exchange("POST", self.message_headers(obj), data, obj))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def send_raw(self, data: bytes) -> None:
        await self.exchange("POST", self.headers(), data, None)

    async def post(
        self, body: Any, headers: dict[str, str] | None = None, raw: bytes | None = None, read_for: float | None = None
    ) -> HttpExchange:
        """POST and wait for the whole answer (the HTTP-level checks). ``headers`` are merged over the session's;
        a header given as "" is left out. The response to a request in ``body`` is routed like any other."""
        h = self.message_headers(body)
        if headers is not None:
            lower = {k.lower() for k in headers}
            h = {k: v for k, v in h.items() if k.lower() not in lower}
            h.update({k: v for k, v in headers.items() if v != ""})
        data = raw if raw is not None else json.dumps(body).encode()
        if isinstance(body, dict) and "id" in body and "result" not in body and "error" not in body:
            self.expect(body["id"])  # its answer is ours, not a stray (a malformed request's error too)
        return await self.exchange("POST", h, data, body, read_for=read_for)

    async def exchange(
        self,
        method: str,
        headers: dict[str, str],
        content: bytes | None = None,
        obj: Any = None,
        *,
        read_for: float | None = None,
        channel: str | None = None,
    ) -> HttpExchange:
        """One HTTP request to the endpoint, its answer read whole (bounded) or, for an SSE stream, until it ends
        or ``read_for`` seconds have passed. Every message in the answer is recorded on this wire."""
        import httpx

        ex = HttpExchange(method, obj, 0, {}, request_headers=dict(headers))
        self.exchanges.append(ex)
        chan = channel or ("http-get" if method == "GET" else "http-sse")
        for attempt in (1, 2):
            try:
                await self._exchange(ex, method, headers, content, obj, read_for, chan)
                break
            except (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError) as exc:
                # a kept-alive connection the server closed as we reused it: the request never reached it, so
                # it is sent once more on a fresh connection (any other failure is the server's answer)
                if attempt == 2 or ex.status:
                    ex.error = f"{type(exc).__name__}: {exc}"
                    ex.body = ex.body or ex.error
            except httpx.HTTPError as exc:
                ex.error = f"{type(exc).__name__}: {exc}"
                ex.body = ex.body or ex.error
                break
            except MCPError as exc:
                # the wire's OAuth client could not get a token (OAuthFlowError): the request was never sent, and
                # its wait ends now with why, not at its timeout (nothing will answer it)
                ex.error = f"{NOT_AUTHORIZED} ({type(exc).__name__}: {exc})"
                ex.body = ex.body or ex.error
                break
        ex.finished = time.monotonic()
        self._unanswered(obj, ex)
        return ex

    async def _exchange(
        self,
        ex: HttpExchange,
        method: str,
        headers: dict[str, str],
        content: bytes | None,
        obj: Any,
        read_for: float | None,
        chan: str,
    ) -> None:
        async with self.client.stream(method, self.url, content=content, headers=headers) as resp:
            ex.status = resp.status_code
            ex.headers = {k.lower(): v for k, v in resp.headers.items()}
            sid = resp.headers.get("mcp-session-id")
            if sid and isinstance(obj, dict) and obj.get("method") == "initialize" and self.track_session:
                self.session_id = sid
            if ex.is_sse:
                reading = asyncio.ensure_future(self._read_sse(resp, ex, chan))
                try:
                    if read_for is None:
                        await self._read_until_answered(reading, ex, obj)
                    else:
                        await asyncio.wait({reading}, timeout=read_for)
                finally:
                    if not reading.done():
                        reading.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await reading
                if not reading.cancelled():
                    reading.result()
            else:
                await self._read_body(resp, ex)

    async def _read_until_answered(self, reading: asyncio.Future[None], ex: HttpExchange, obj: Any) -> None:
        """Read an SSE answer until it ends. Once it carried every response it owes it is read for STREAM_GRACE
        more seconds (a server closes it then), and none is read past the wire's timeout: a server that keeps the
        stream open forever (comments, pings) must not hold the checker. A stream so cut is not ``ended``; one cut
        after its responses records how long it was held open past them (``held_open``)."""
        owed = {self.key(m["id"]) for m in (obj if isinstance(obj, list) else [obj]) if is_request(m)}
        deadline = time.monotonic() + self.stream_timeout
        answered_at: float | None = None
        while not reading.done():
            now = time.monotonic()
            if answered_at is None and owed <= self._answered(ex):
                answered_at = now
            limit = deadline if answered_at is None else min(deadline, answered_at + STREAM_GRACE)
            if now >= limit:
                if answered_at is not None:
                    ex.held_open = now - answered_at
                return
            await asyncio.wait({reading}, timeout=min(0.1, limit - now))

    def _answered(self, ex: HttpExchange) -> set[str]:
        """The keys of the ids the responses on ``ex`` so far answer."""
        keys = set()
        for inc in ex.messages:
            for m in inc.data if isinstance(inc.data, list) else [inc.data]:
                if isinstance(m, dict) and "id" in m and ("result" in m or "error" in m):
                    keys.add(self.key(m["id"]))
        return keys

    async def _read_body(self, resp: httpx.Response, ex: HttpExchange) -> None:
        from ..transports.http.client_support import ResponseTooLarge, read_capped

        try:
            raw = await read_capped(resp, MAX_MESSAGE)
        except ResponseTooLarge:
            ex.error = f"a body over {MAX_MESSAGE} bytes (not read)"
            ex.body = ex.error
            self.record(Incoming(f"<an HTTP body over {MAX_MESSAGE} bytes>", None, OVERSIZED, channel="http"))
            return
        ex.ended = True
        text = raw.decode("utf-8", errors="replace")
        ex.body = text[:EVIDENCE_BODY]
        if not text.strip():
            return
        if ex.status < 400:
            if ex.method == "POST" and _carries_requests(ex.sent):
                self._feed(text, ex, "http-json")  # judged as JSON whatever its Content-Type (M023 judges that)
            return
        # an error status: its body MAY be a JSON-RPC error (even without the right content type), or anything else
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return
        if isinstance(data, dict) and "jsonrpc" in data:
            self._feed(text, ex, "http-json")

    async def _read_sse(self, resp: httpx.Response, ex: HttpExchange, channel: str) -> None:
        import httpx

        decoder = SSEDecoder(MAX_MESSAGE)
        kept = 0
        try:
            async for chunk in resp.aiter_bytes():
                if kept < EVIDENCE_BODY:
                    ex.body += chunk[: EVIDENCE_BODY - kept].decode("utf-8", errors="replace")
                    kept += len(chunk)
                for event in decoder.feed(chunk):
                    data = event.data.decode("utf-8", errors="replace")
                    ex.events.append(SSEEventSeen(event.id, event.event, data))
                    if data.strip() and event.event in ("message", ""):
                        self._feed(data, ex, channel)
                ex.retry = decoder.retry
            ex.ended = True
        except SSEEventTooLarge as exc:
            ex.error = str(exc)
            self.record(Incoming(f"<{exc}>", None, OVERSIZED, channel=channel))
        except httpx.HTTPError as exc:
            ex.error = f"{type(exc).__name__}: {exc}"
        ex.retry = decoder.retry

    def _feed(self, text: str, ex: HttpExchange, channel: str) -> None:
        inc = decode(text, channel)
        ex.messages.append(inc)
        self.record(inc)

    def _unanswered(self, obj: Any, ex: HttpExchange) -> None:
        """The requests whose exchange ended without their responses: resolve each wait with what HTTP said."""
        for msg in obj if isinstance(obj, list) else [obj]:
            if not (isinstance(msg, dict) and "method" in msg and "id" in msg):
                continue
            fut = self._pending.pop(self.key(msg["id"]), None)
            if fut is not None and not fut.done():
                fut.set_result(Incoming(ex.brief(200), None, "no JSON-RPC response", channel="http"))

    async def get(self, headers: dict[str, str] | None = None, read_for: float = 0.3) -> HttpExchange:
        """GET the endpoint (standalone SSE stream); read for ``read_for`` seconds, then hang up."""
        h = self.headers(accept="text/event-stream")
        h.pop("Content-Type", None)
        if headers:
            h.update(headers)
            h = {k: v for k, v in h.items() if v != ""}
        replay = any(k.lower() == "last-event-id" for k in h)
        return await self.exchange("GET", h, read_for=read_for, channel="http-replay" if replay else "http-get")

    async def delete(self, headers: dict[str, str] | None = None) -> HttpExchange:
        """DELETE the session."""
        h = self.headers()
        h.pop("Content-Type", None)
        if headers:
            h.update(headers)
        return await self.exchange("DELETE", h)

    async def settle(self) -> None:
        """Wait (at most :data:`STREAM_GRACE` and a little) for the streams still being read to end or be cut, so
        what the SSE checks judge is each stream's end, not how far it was read when they looked."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=STREAM_GRACE + 0.5)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        if self.session_id:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.delete(), 5.0)
        await self.client.aclose()
