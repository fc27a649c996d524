"""Streamable HTTP, client side (httpx): a :class:`~mcpkit.transports.base.Connection` for ClientSession.

Every outgoing message is one POST. ``send`` returns once the server has answered with its status line: 202
(nothing to read), ``application/json`` (the body goes to ``receive``), or ``text/event-stream`` (a background
reader feeds ``receive`` and, when the connection drops before the response, resumes with ``Last-Event-ID`` after
the server's ``retry:`` delay). Errors surface at once: a JSON-RPC error body becomes that error (so era detection
sees modern error codes), a 404 for our session raises :class:`SessionExpired`, any other failure raises
:class:`HTTPTransportError`.

Headers: ``Mcp-Session-Id`` echoed after ``initialize``; ``MCP-Protocol-Version`` once negotiated (2025-06-18+),
and on every modern request from its ``_meta``; ``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` for modern
requests, the last mirrored from ``x-mcp-header`` annotations learnt from ``tools/list`` results (tools with
invalid annotations are dropped from those results, as the spec requires). Handshake sessions open the standalone
GET stream once ``initialize`` is answered, and ``ClientSession`` waits (``wait_ready``) until the server answered
that GET before it posts ``notifications/initialized`` (at most ``client_support.GET_OPEN_WAIT``; 405 is fine; a
server that refuses a GET before the session is initialized gets it again after, waited for within the same
bound): a server may send its requests there only, dropping them while it is not open, and may send one as soon as
the session is initialized. They send DELETE on close.

Two HTTP engines, one response handling: httpx for everything in general (TLS, auth flows, proxies, a caller's
own client), and :mod:`.lite`, a lean keep-alive pool whose HTTP/1.1 framing httptools (llhttp) parses, for the
common case (``fast_path=None`` picks it when the URL is plain ``http://``, no ``auth=`` and no ``client=`` were
given, and no proxy from the environment applies to the host: ``HTTP_PROXY``/``ALL_PROXY`` unless ``NO_PROXY``
exempts it).
``fast_path=True``/``False`` forces one (True with https, auth or a client is a ValueError). Both hand
:meth:`.client_support.HTTPEngine.open` a response with the same small interface (``status_code``,
``headers.get``, ``aiter_bytes``, ``aclose``); status → behaviour lives once, in ``_post``,
``_read_post_stream``, ``_standalone`` and ``terminate``.

What a server can send is bounded the same way on both engines: a JSON body by ``max_message_size`` (a larger
declared Content-Length is refused before reading), SSE through the shared WHATWG decoder of :mod:`.sse_decoder`
(an event or line past ``max_message_size`` fails the request it answers, naming the option). Reconnections back
off exponentially and stop after ``max_reconnects``; an event does not reset the count (only a stream that stayed
open ``stable_stream`` seconds does). A request the caller gave up on (timeout, cancellation) has its stream closed
in either era.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import orjson

from ...engine import BaseConnection, Outgoing, describe
from ...protocol import versions
from ...protocol.errors import (
    INTERNAL_ERROR,
    ConnectionClosed,
    MCPError,
    SessionExpired,
    error_from_response,
)
from ..base import DEFAULT_MAX_MESSAGE_SIZE
from .client_support import (
    IO_ERRORS,
    Backoff,
    Exchange,
    HTTPEngine,
    HTTPTransportError,
    ModernHeaders,
    PostStreams,
    Relations,
    ResponseTooLarge,
    StandaloneStream,
    fast_path_applies,
    holds_answer,
    initialize_answer,
    json_rpc_error,
    wake,
)

logger: logging.Logger = logging.getLogger("mcpkit.http.client")

ACCEPT = "application/json, text/event-stream"
TERMINATE_TIMEOUT = 2.0  # seconds the DELETE that ends a session may take before close() goes on without it


class StreamableHTTPClientTransport(BaseConnection):
    """The client end of Streamable HTTP (a handshake-era server's requests related to the request whose stream
    they arrived on: :class:`~.client_support.Relations`).

    Args:
        url: the MCP endpoint (``http://127.0.0.1:8000/mcp``).
        headers: extra headers on every request (e.g. ``Authorization``).
        timeout: connect/write timeout in seconds (reads are unbounded: SSE streams may idle).
        client: an httpx.AsyncClient to use (not closed by us); default: our own.
        auth: an httpx auth flow.
        get_stream: open the standalone GET stream in handshake sessions.
        max_reconnects: resumption attempts per stream before giving up.
        reconnect_delay: seconds to wait before reconnecting when the server sent no ``retry:``.
        answer_window: how long ``send`` waits for a request's HTTP answer before leaving it to the background
            (HTTP failures within it raise from ``send``; later ones fail the request with a JSON-RPC error).
        fast_path: use the lean HTTP/1.1 engine (:mod:`.lite`) instead of httpx; None: when it applies
            (plain ``http://``, no ``auth``, no ``client``, no environment proxy for the host).
        max_connections: keep-alive connections at most (either engine); waiting for a free one is bounded by
            ``timeout``.
        max_message_size: largest JSON answer or SSE event accepted from the server, in bytes (the same default
            as stdio and WebSocket). Checked before buffering: a larger declared Content-Length, body, SSE line or
            event fails the affected request with :class:`ResponseTooLarge`.
        max_reconnect_delay: the reconnection delay doubles with each attempt (from the server's ``retry:``, at
            least ``min_reconnect_delay``) up to this many seconds; a stream that stayed open ``stable_stream``
            seconds resets the attempt count.
    """

    relates_requests = True

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
        auth: httpx.Auth | None = None,
        get_stream: bool = True,
        max_reconnects: int = 5,
        reconnect_delay: float = 1.0,
        inbox_size: int = 1024,
        answer_window: float = 0.25,
        fast_path: bool | None = None,
        max_connections: int = 100,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        min_reconnect_delay: float = 0.1,
        max_reconnect_delay: float = 30.0,
        stable_stream: float = 30.0,
    ) -> None:
        self.url = url
        self.extra_headers: dict[str, str] = dict(headers or {})
        self.engine: HTTPEngine = HTTPEngine(
            url,
            timeout=timeout,
            client=client,
            auth=auth,
            fast_path=fast_path,
            max_connections=max_connections,
            max_message_size=max_message_size,
        )
        self.client: Any | None = self.engine.client
        self._pool = self.engine.pool
        self.backoff: Backoff = Backoff(reconnect_delay, min_reconnect_delay, max_reconnect_delay, stable_stream)
        self.get_stream = get_stream
        self.max_message_size = max_message_size
        self.max_reconnects = max_reconnects
        self.answer_window = answer_window
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._version_header = False
        self._inbox: asyncio.Queue[bytes | tuple[bytes, object] | None] = asyncio.Queue(inbox_size)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._get = StandaloneStream(self.engine, self.backoff, max_reconnects, self._live_headers, self._deliver)
        self.modern_headers: ModernHeaders = ModernHeaders()
        self._init_id: Any = None
        self._exchanges: dict[Any, Exchange] = {}
        self.relations: Relations = Relations()  # the server's requests, by the request they arrived on
        self._streams = PostStreams(
            self.engine,
            self.backoff,
            max_reconnects,
            self.relations,
            self._live_headers,
            self._deliver,
            self._fail,
            lambda: self._closed,
        )
        self._expired: str | None = None  # a session found gone by a background exchange: raise on next send
        self._closed = False
        self._fail_request: Callable[[Any, BaseException], None] | None = None

    async def __aenter__(self) -> StreamableHTTPClientTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ Connection

    async def receive(self) -> bytes | None:
        item = await self._inbox.get()
        if item is None:
            self._inbox.put_nowait(None)  # stay at end of input for any later caller
            return None
        return self.relations.unpack(item)

    def set_request_failure(self, fail: Callable[[Any, BaseException], None] | None) -> None:
        self._fail_request = fail

    def set_protocol_version(self, version: str) -> None:
        """Called by ClientSession once the version is known (a handshake session: before it posts
        ``notifications/initialized``): from now on send ``MCP-Protocol-Version`` (2025-06-18+); a handshake
        session opens its standalone GET stream."""
        self.protocol_version = version
        feats = versions.features(version)
        self._version_header = feats.protocol_version_header
        if not feats.modern and self.session_id is not None and self.get_stream:
            self._get.start()

    async def wait_ready(self) -> None:
        """Until the server answered the standalone GET of a handshake session (at most ``GET_OPEN_WAIT``)."""
        await self._get.wait_open()

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        if self._closed:
            raise ConnectionClosed("the HTTP transport is closed")
        if self._expired is not None:
            sid, self._expired = self._expired, None
            raise SessionExpired(f"session {sid[:8]}… is gone (HTTP 404)")
        if msg is None:
            msg = describe(data)  # bytes from outside the engine; the engine says what its messages are
        headers = self._headers(ACCEPT)
        headers["content-type"] = "application/json"
        method = msg.method
        rid: Any = msg.id if method is not None else None
        modern = False
        if method is not None:
            modern = self.modern_headers.mirror(headers, method, msg.params)
            if method == "tools/list" and rid is not None:
                self.modern_headers.tools_list_ids.add(rid)
            elif method == "initialize":
                self._init_id = rid
            elif method == "notifications/cancelled" and self._cancel_exchange(msg.params):
                return  # 2026-07-28: closing the request's stream is the cancellation; nothing to POST
        if rid is None:
            await self._post(data, headers, None, method, self.session_id)
            if method == "notifications/initialized":
                self._get.session_initialized()
            return
        # A request: its answer may take long (a silent handler, an SSE stream). Wait for it only briefly, so
        # transport failures (404 for our session, modern errors for era detection) still raise here, and let
        # it finish in the background otherwise: the engine's timeout and cancellation keep working.
        loop = asyncio.get_running_loop()
        exchange = Exchange(modern)
        exchange.streaming = ready = loop.create_future()
        task = loop.create_task(self._run_exchange(exchange, data, headers, rid, method, self.session_id))
        exchange.task = task
        self._exchanges[rid] = exchange

        def done(_: object) -> None:
            if self._exchanges.get(rid) is exchange:
                del self._exchanges[rid]
            if method == "tools/list":  # (its answer, if any, has been read: an error or a timeout leaves it here)
                self.modern_headers.tools_list_ids.discard(rid)
            if not ready.done():
                ready.set_result(None)

        task.add_done_callback(done)
        # `ready` completes first of: the exchange ended, its answer started streaming, or the window passed
        # (hot path: docs/architecture.md)
        timer = loop.call_later(self.answer_window, wake, ready)
        try:
            await ready
        except asyncio.CancelledError:
            exchange.cancelled = True
            task.cancel()  # the caller gave up: close the connection (the modern era's cancellation)
            raise
        finally:
            timer.cancel()
        if task.done():
            task.result()  # raises what the exchange raised
        else:
            exchange.detached = True

    async def _run_exchange(
        self,
        exchange: Exchange,
        data: bytes,
        headers: dict[str, str],
        rid: Any,
        method: str | None,
        session: str | None,
    ) -> None:
        try:
            await self._post(data, headers, rid, method, session, exchange)
        except Exception as exc:
            # Once detached, nobody awaits this task: every failure (an httpx.Auth flow, a bug) must become the
            # request's error, or the caller waits forever.
            if not exchange.detached:
                raise
            if isinstance(exc, SessionExpired):
                self._expired = session
            if self._fail_request is not None and isinstance(exc, (MCPError, ConnectionClosed)):
                self._fail_request(rid, exc)  # the exception itself, as within the answer window
                return
            code = exc.code if isinstance(exc, MCPError) else INTERNAL_ERROR
            message = str(exc) if isinstance(exc, (MCPError, ConnectionClosed)) else f"{type(exc).__name__}: {exc}"
            await self._fail(rid, message, code)

    def _cancel_exchange(self, params: Any) -> bool:
        rid = params.get("requestId") if isinstance(params, dict) else None
        exchange = self._exchanges.get(rid) if isinstance(rid, (str, int)) else None
        if exchange is None:
            return False
        if not exchange.cancelled:
            exchange.cancelled = True
            # Close the request's stream in either era (once only: a second cancel would interrupt httpcore's
            # cleanup and leave the connection open). In 2026-07-28 that IS the cancellation; in the handshake
            # era the notification is POSTed too, and the abandoned stream must not hold a connection.
            exchange.task.cancel()
        return exchange.modern

    async def _post(
        self,
        data: bytes,
        headers: dict[str, str],
        rid: Any,
        method: str | None,
        sent_session: str | None,
        exchange: Exchange | None = None,
    ) -> None:
        try:
            resp = await self.engine.open("POST", headers, data)
        except IO_ERRORS as exc:
            raise ConnectionClosed(f"POST {self.url} failed: {exc}") from exc
        status = resp.status_code
        if status == 202:
            await resp.aclose()
            if rid is not None:
                raise _no_response(rid, status, None, b"")
            return
        if 200 <= status < 300:
            if method == "initialize":
                sid = resp.headers.get("mcp-session-id")
                if sid is not None:
                    self.session_id = sid
            ctype = resp.headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype == "text/event-stream":
                if exchange is None:
                    self._spawn(self._streams.read(resp, rid, None))
                else:
                    if not exchange.streaming.done():
                        exchange.streaming.set_result(None)  # the answer is on its way: send() may return
                    await self._streams.read(resp, rid, exchange)
                return
            body = await self.engine.read_body(resp)
            if rid is not None and not holds_answer(body, rid):
                raise _no_response(rid, status, resp.headers.get("content-type"), body)
            if body:
                await self._deliver(body)
            return
        body = await self.engine.read_body(resp)
        answer = json_rpc_error(body)
        answers_us = answer is not None and rid is not None and answer[0] == rid
        if status == 404 and sent_session is not None and not answers_us:
            if self.session_id == sent_session:
                self.session_id = None
            raise SessionExpired(f"session {sent_session[:8]}… is gone (HTTP 404)")
        if answer is not None:
            aid, error = answer
            if rid is not None and aid == rid:
                await self._deliver(body)  # the peer raises the typed error for the waiting request
                return
            raise error_from_response(error)
        raise HTTPTransportError(status, body.decode("utf-8", "replace"))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        tasks = [t for t in self._tasks if not t.done()]
        tasks += [e.task for e in self._exchanges.values() if not e.task.done()]
        if self._get.task is not None:
            tasks.append(self._get.task)
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
        if self.session_id is not None:
            await self.terminate()
        await self.engine.aclose()
        with contextlib.suppress(asyncio.QueueFull):
            self._inbox.put_nowait(None)

    async def terminate(self) -> None:
        """DELETE the session (a 405 means the server does not let clients end sessions; that is fine). A courtesy:
        a server that does not answer within ``TERMINATE_TIMEOUT`` seconds is not waited for."""
        sid = self.session_id
        if sid is None:
            return
        self.session_id = None
        headers = self._headers(None)
        headers["mcp-session-id"] = sid

        async def delete() -> None:
            resp = await self.engine.open("DELETE", headers)
            await resp.aclose()

        with contextlib.suppress(TimeoutError, *IO_ERRORS):
            await asyncio.wait_for(delete(), TERMINATE_TIMEOUT)

    @property
    def fast_path(self) -> bool:
        """True when this transport talks through the lean HTTP/1.1 engine rather than httpx."""
        return self.engine.pool is not None

    # ------------------------------------------------------------------ headers

    def _headers(self, accept: str | None) -> dict[str, str]:
        headers = dict(self.extra_headers)
        if accept is not None:
            headers["accept"] = accept
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self._version_header and self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    # ------------------------------------------------------------------ incoming

    async def _deliver(self, data: bytes, origin: object = None) -> None:
        if self._init_id is not None and (version := initialize_answer(data, self._init_id)) is not None:
            # the InitializeResult fixes the version: even ``notifications/initialized`` carries the header
            self._init_id = None
            if versions.is_supported(version):
                self.protocol_version = version
                self._version_header = versions.features(version).protocol_version_header
        if self.modern_headers.tools_list_ids and b'"tools"' in data:
            data = self.modern_headers.learn_tools(data)
        await self._inbox.put(data if origin is None else (data, origin))  # (on the stream of a request for origin)

    def related(self, request_id: Any) -> object | None:
        return self.relations.pop(request_id)

    def related_message(self) -> object | None:
        return self.relations.last

    async def _fail(self, rid: Any, message: str, code: int = INTERNAL_ERROR) -> None:
        err = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
        await self._inbox.put(orjson.dumps(err))

    def _live_headers(self, accept: str) -> dict[str, str] | None:
        """The headers of a GET while the session lives (None once it ended or the transport closed)."""
        return None if self._closed or self.session_id is None else self._headers(accept)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _no_response(rid: Any, status: int, ctype: str | None, body: bytes) -> MCPError:
    """A request's POST was answered with a 2xx that does not hold its response (the spec: the response comes as
    the JSON body or on the POST's SSE stream, never elsewhere): the request fails now rather than at its timeout."""
    what = f"HTTP {status}" + (f" ({ctype}, {len(body)} bytes)" if ctype or body else " and no body")
    shown = body[:200].decode("utf-8", "replace")
    return MCPError(
        f"the server answered the POST of request {rid!r} with {what} and no response to the request"
        + (f": {shown!r}" if shown else ""),
        {"status": status},
    )


__all__ = [
    "HTTPTransportError",
    "ResponseTooLarge",
    "SessionExpired",
    "StreamableHTTPClientTransport",
    "fast_path_applies",
]
