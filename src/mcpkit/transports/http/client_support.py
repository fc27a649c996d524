"""The Streamable HTTP client transport's parts that are not its state machine
(:mod:`.streamable_client`): the response interface both HTTP engines give (httpx and :mod:`.lite`), which engine a
URL gets (:func:`fast_path_applies`) and the two engines behind one object (:class:`HTTPEngine`), the errors the
transport raises, one request's POST exchange, the reconnection policy (:class:`Backoff`), the 2026-07-28 headers
that mirror a request's body (:class:`ModernHeaders`), the readers of an answer's bytes, and the two kinds of SSE
stream: the standalone GET (:class:`StandaloneStream`) and the POSTs' answers (:class:`PostStreams`). Public names are
re-exported by :mod:`.streamable_client`, their import path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
import orjson

from ..._aio import read_capped as _read_capped
from ...engine import ORIGIN
from ...protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, ConnectionClosed, InvalidParams, MCPError
from ...protocol.versions import META_PROTOCOL_VERSION
from .headers import NAME_FIELD, encode_header_value, header_text, param_headers_from_schema
from .lite import BodyTooLarge, LiteHTTPError, LitePool, LiteResponse
from .sse_decoder import SSEDecoder, SSEEvent, SSEEventTooLarge

logger: logging.Logger = logging.getLogger("mcpkit.http.client")

#: tools whose ``x-mcp-header`` annotations a client keeps (learnt from ``tools/list``); beyond, the one learnt
#: longest ago is forgotten (its calls then go without their ``Mcp-Param-*`` headers until it is listed again)
MAX_TOOL_HEADERS = 10_000

#: seconds a handshake session waits after negotiation for the server to answer the standalone GET, before it sends
#: anything else (a server may send its requests there only, and drop them while no such stream is open); then it
#: goes on without
GET_OPEN_WAIT = 5.0

#: the server's requests kept related to the request whose stream they arrived on (:class:`Relations`) until the
#: client session's handler asks (at once, unless it is busy); beyond, the oldest is forgotten (it is then answered
#: as a request that came apart from any)
MAX_RELATED = 256
#: the longest string id of a server's request :class:`Relations` keeps (a longer one relates to nobody): the ids
#: are the server's to choose, as long as a message may be
MAX_RELATED_ID = 256

# what either HTTP engine raises when a connection fails or the server breaks HTTP
IO_ERRORS: tuple[type[Exception], ...] = (httpx.HTTPError, LiteHTTPError)


class HTTPResponse(Protocol):
    """The part of a streaming ``httpx.Response`` the transport uses (a ``LiteResponse`` has the same)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    async def aclose(self) -> None: ...


def fast_path_applies(url: str) -> bool:
    """Whether ``fast_path=None`` picks the lean HTTP/1.1 engine for ``url`` (given no auth and no client):
    a plain ``http://`` URL that no proxy from the environment applies to."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    bypass: Any = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # (not in typeshed)
    return bool(bypass(parts.hostname, proxies))


class ResponseTooLarge(MCPError):
    """A server's answer (JSON body or SSE event) is larger than the transport's ``max_message_size``."""

    code = INTERNAL_ERROR

    def __init__(self, limit: int, what: str = "answer") -> None:
        super().__init__(
            f"the server's {what} is larger than max_message_size={limit} bytes; to accept it, raise "
            "max_message_size (Client(..., transport_options={'max_message_size': N}))",
            {"limit": limit},
        )
        self.limit = limit


class HTTPTransportError(MCPError):
    """The server answered an HTTP error without a JSON-RPC answer to our message."""

    code = INVALID_REQUEST

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"HTTP {status}: {body[:300]}", {"status": status})
        self.status = status


class Exchange:
    """One request's POST, running in its own task."""

    __slots__ = ("cancelled", "detached", "modern", "origin", "streaming", "task")

    def __init__(self, modern: bool) -> None:
        self.modern: bool = modern
        self.origin: object | None = ORIGIN.get()  # (on whose behalf the caller sends it: see Relations)
        self.detached: bool = False
        self.cancelled: bool = False
        self.task: asyncio.Task[None] = None  # type: ignore[assignment]
        self.streaming: asyncio.Future[None] = None  # type: ignore[assignment]


class Relations:
    """The server's requests that arrived on the stream of a request sent on someone's behalf (an
    :data:`~mcpkit.engine.ORIGIN` was set around its send): which origin each is about, by its id, until the client
    session asks (:meth:`pop`). A handshake-era server sends there what a request of the client causes (the spec:
    they SHOULD relate to it); only the stream says so, the message does not. At most :data:`MAX_RELATED`, of string
    ids at most :data:`MAX_RELATED_ID` long.

    What else arrives there (the notifications the request causes: its log messages) carries its origin with it
    through the transport's inbox, as ``(bytes, origin)``: :attr:`last` is the origin of the message last handed
    to the session (:meth:`unpack`), which the session asks right away (nothing kept beyond the inbox's bound)."""

    __slots__ = ("_by_id", "last")

    def __init__(self) -> None:
        self._by_id: dict[Any, object] = {}
        self.last: object | None = None

    def note(self, data: bytes, origin: object) -> None:
        """``data`` arrived on the stream of a request sent for ``origin``: if it is a request, remember so."""
        if b'"method"' not in data:  # (answers, and most of what else comes, cheaply passed by)
            return
        try:
            msg = orjson.loads(data)
        except orjson.JSONDecodeError:
            return
        if not isinstance(msg, dict) or "method" not in msg or not isinstance(msg.get("id"), (str, int)):
            return
        rid = msg["id"]
        if type(rid) is str and len(rid) > MAX_RELATED_ID:
            return
        if rid in self._by_id:  # (one id twice in flight: which is which cannot be told)
            self._by_id[rid] = None
            return
        if len(self._by_id) >= MAX_RELATED:
            del self._by_id[next(iter(self._by_id))]
        self._by_id[rid] = origin

    def pop(self, request_id: Any) -> object | None:
        return self._by_id.pop(request_id, None) if self._by_id else None

    def unpack(self, item: bytes | tuple[bytes, object]) -> bytes:
        """An item of the inbox, handed to the session: its bytes, the origin it came with (if any) kept as
        :attr:`last`."""
        if type(item) is tuple:
            self.last = item[1]
            return item[0]
        self.last = None
        return item  # type: ignore[return-value]


def initialize_answer(data: bytes, init_id: Any) -> str | None:
    """When ``data`` answers the ``initialize`` request ``init_id``: the version it names ("" for none)."""
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or obj.get("id") != init_id:
        return None
    result = obj.get("result")
    version = result.get("protocolVersion") if isinstance(result, dict) else None
    return version if isinstance(version, str) else ""


def wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


def json_rpc_error(body: bytes) -> tuple[Any, Any] | None:
    """(id, error) when ``body`` is a JSON-RPC error response."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(obj, dict) and obj.get("jsonrpc") == "2.0" and isinstance(obj.get("error"), dict):
        return obj.get("id"), obj["error"]
    return None


def answers_request(raw: bytes, rid: Any) -> bool:
    if b'"method"' in raw and b'"result"' not in raw and b'"error"' not in raw:
        return False
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    if isinstance(obj, list):
        return any(isinstance(o, dict) and o.get("id") == rid and "method" not in o for o in obj)
    return isinstance(obj, dict) and obj.get("id") == rid and "method" not in obj


def holds_answer(body: bytes, rid: Any) -> bool:
    """Whether a POST's JSON body holds the response to request ``rid``: a byte search for the usual compact
    ``"id":N`` first (no second parse of the body), then :func:`answers_request`."""
    if type(rid) is int and b'"id":%d' % rid in body:
        return True
    return answers_request(body, rid)


async def read_capped(resp: HTTPResponse, limit: int) -> bytes:
    """The whole body of a streamed ``httpx`` response, at most ``limit`` bytes (:func:`mcpkit._aio.read_capped`);
    past it, :class:`ResponseTooLarge`. The caller closes the response."""
    body = await _read_capped(resp, limit)
    if body is None:
        raise ResponseTooLarge(limit)
    return body


async def sse_events(resp: HTTPResponse, decoder: SSEDecoder) -> AsyncIterator[SSEEvent]:
    """The SSE events of a response, through the shared bounded decoder."""
    async for chunk in resp.aiter_bytes():
        for event in decoder.feed(chunk):
            yield event


__all__ = ["HTTPTransportError", "ResponseTooLarge", "fast_path_applies", "read_capped"]


class HTTPEngine:
    """The client transport's two HTTP engines behind one interface: :mod:`.lite`'s pool (``fast_path``: plain
    ``http://``, no auth flow, no caller's client) or httpx. Both give a response of :class:`HTTPResponse`.

    Args:
        url: the MCP endpoint.
        timeout: connect/write timeout in seconds (reads are unbounded: SSE streams may idle).
        client, auth: an httpx client (not closed here) and auth flow; either rules the lean engine out.
        fast_path: use the lean engine; None: when :func:`fast_path_applies` and neither ``client`` nor ``auth``.
        max_connections: keep-alive connections at most.
        max_message_size: the bound of :meth:`read_body`.
    """

    __slots__ = ("client", "max_message_size", "own_client", "pool", "target", "url")

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        client: httpx.AsyncClient | None,
        auth: httpx.Auth | None,
        fast_path: bool | None,
        max_connections: int,
        max_message_size: int,
    ) -> None:
        if fast_path is None:
            fast_path = client is None and auth is None and fast_path_applies(url)
        elif fast_path and (client is not None or auth is not None):
            raise ValueError("fast_path=True cannot use an httpx client or auth flow; leave fast_path unset")
        self.url: str = url
        self.max_message_size: int = max_message_size
        self.pool: LitePool | None = None
        self.target: str = ""
        self.client: httpx.AsyncClient | None = None
        self.own_client: bool = client is None
        if fast_path:
            self.pool, self.target = LitePool.for_url(url, timeout=timeout, max_connections=max_connections)
        else:
            self.client = client or httpx.AsyncClient(
                timeout=httpx.Timeout(timeout, read=None),
                auth=auth,
                follow_redirects=False,
                # keep every connection of a burst of concurrent requests alive (httpx keeps only 20 by default)
                limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            )

    async def open(self, method: str, headers: dict[str, str], body: bytes | None = None) -> HTTPResponse:
        """Send one request; the response's body is left to read (raises one of ``IO_ERRORS``)."""
        if self.pool is not None:
            return await self.pool.request(method, self.target, headers, body)
        assert self.client is not None
        request = self.client.build_request(method, self.url, content=body, headers=headers)
        return await self.client.send(request, stream=True)

    async def read_body(self, resp: HTTPResponse) -> bytes:
        """The whole body, bounded by ``max_message_size`` (the declared length is checked before reading)."""
        limit = self.max_message_size
        try:
            if isinstance(resp, LiteResponse):
                return await resp.aread(limit)
            return await read_capped(resp, limit)
        except BodyTooLarge:
            raise ResponseTooLarge(limit) from None
        except IO_ERRORS as exc:
            raise ConnectionClosed(f"reading the answer from {self.url} failed: {exc}") from exc
        finally:
            await resp.aclose()

    async def aclose(self) -> None:
        """Close the pool, and the httpx client when it is ours."""
        if self.pool is not None:
            await self.pool.aclose()
        if self.own_client and self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.aclose()


class Backoff:
    """When a broken SSE stream is opened again: after the server's ``retry:`` (at least ``min_delay``) or
    ``delay``, doubled per attempt, at most ``max_delay``; a stream that stayed open ``stable`` seconds resets the
    attempt count (an event does not)."""

    __slots__ = ("delay", "max_delay", "min_delay", "stable")

    def __init__(self, delay: float, min_delay: float, max_delay: float, stable: float) -> None:
        self.delay: float = delay
        self.min_delay: float = min_delay
        self.max_delay: float = max_delay
        self.stable: float = stable

    def attempts_after(self, attempts: int, opened: float) -> int:
        """The attempt count for the next reconnection: reset only after a stream that stayed open a while."""
        return 1 if time.monotonic() - opened >= self.stable else attempts + 1

    def wait(self, retry_ms: int | None, attempt: int) -> float:
        """Delay before reconnection ``attempt`` (1, 2...)."""
        base = self.delay if retry_ms is None else max(retry_ms / 1000, self.min_delay)
        return float(min(base * 2 ** min(attempt - 1, 30), self.max_delay))


class ModernHeaders:
    """The 2026-07-28 headers that mirror a request's body (``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name``,
    a tool's ``Mcp-Param-*``), with the tools' ``x-mcp-header`` annotations learnt from ``tools/list`` results
    (tools with invalid annotations are dropped from those results, as the spec requires)."""

    __slots__ = ("tool_headers", "tools_list_ids")

    def __init__(self) -> None:
        self.tool_headers: dict[str, dict[str, tuple[str, ...]]] = {}
        self.tools_list_ids: set[Any] = set()  # tools/list requests whose answers are still to be read

    def mirror(self, headers: dict[str, str], method: str, params: Any) -> bool:
        """Add the modern-era headers mirroring a request's body; True when it is a modern request."""
        if not isinstance(params, dict):
            return False
        meta = params.get("_meta")
        version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if not isinstance(version, str):
            return False
        # a modern request: the headers mirror its body
        headers["mcp-protocol-version"] = version
        headers.pop("mcp-session-id", None)
        headers["mcp-method"] = method
        field = NAME_FIELD.get(method)
        if field is not None and isinstance(params.get(field), str):
            headers["mcp-name"] = encode_header_value(params[field])
        if method == "tools/call":
            spec = self.tool_headers.get(params.get("name"))  # type: ignore[arg-type]
            if spec:
                args = params.get("arguments")
                for name, path in spec.items():
                    value: Any = args
                    for key in path:
                        value = value.get(key) if isinstance(value, dict) else None
                    try:
                        text = header_text(value)
                    except ValueError as exc:  # refused here, before anything is sent (the spec forbids it)
                        raise InvalidParams(f"tools/call argument {'.'.join(path)!r}: {exc}") from None
                    if text is not None:
                        headers["mcp-param-" + name] = encode_header_value(text)
        return True

    def learn_tools(self, data: bytes) -> bytes:
        """Read the tools' header annotations from a ``tools/list`` answer; the answer, without the tools whose
        annotations are invalid."""
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return data
        if not isinstance(obj, dict) or obj.get("id") not in self.tools_list_ids:
            return data
        self.tools_list_ids.discard(obj.get("id"))
        result = obj.get("result")
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            return data
        tools: list[Any] = result["tools"]
        kept = []
        for tool in tools:
            name = tool.get("name") if isinstance(tool, dict) else None
            if not isinstance(name, str):
                kept.append(tool)
                continue
            try:
                spec = param_headers_from_schema(tool.get("inputSchema"))
            except ValueError as exc:
                logger.warning("ignoring tool %r: invalid x-mcp-header annotation: %s", name, exc)
                self.tool_headers.pop(name, None)
                continue
            if spec:
                headers = self.tool_headers
                headers.pop(name, None)  # (learnt again: the most recent)
                headers[name] = spec
                if len(headers) > MAX_TOOL_HEADERS:
                    del headers[next(iter(headers))]
            else:
                self.tool_headers.pop(name, None)
            kept.append(tool)
        if len(kept) == len(tools):
            return data
        result["tools"] = kept
        return orjson.dumps(obj)


class StandaloneStream:
    """The standalone GET stream of a handshake session (server-initiated messages, given to ``deliver``): opened
    by :meth:`start` once the session's version is known, before ``notifications/initialized`` (a server may send a
    request the moment that notification arrives, on this stream only); opened again with ``Last-Event-ID`` when it
    breaks (backing off: ``backoff``, at most ``max_reconnects`` times in a row) while ``headers(accept)`` gives the
    headers of a GET (None once the session ended). A server that refuses the GET sent before the session is
    initialized (a status other than 405, "no stream here") gets it once more after (:meth:`session_initialized`).
    ``wait_open`` waits until the server answered the GET the session relies on."""

    __slots__ = (
        "answered",
        "backoff",
        "deadline",
        "deliver",
        "engine",
        "headers",
        "initialized",
        "max_reconnects",
        "refused",
        "task",
    )

    def __init__(
        self,
        engine: HTTPEngine,
        backoff: Backoff,
        max_reconnects: int,
        headers: Callable[[str], dict[str, str] | None],
        deliver: Callable[[bytes], Awaitable[None]],
    ) -> None:
        self.engine: HTTPEngine = engine
        self.backoff: Backoff = backoff
        self.max_reconnects: int = max_reconnects
        self.headers: Callable[[str], dict[str, str] | None] = headers
        self.deliver: Callable[[bytes], Awaitable[None]] = deliver
        self.answered: asyncio.Event = asyncio.Event()  # the GET was answered (any status) or failed, or ended
        self.initialized: asyncio.Event = asyncio.Event()  # notifications/initialized was posted
        self.refused: bool = False  # the server refused the GET sent before notifications/initialized; sent again after
        self.deadline: float | None = None  # (loop time) the end of the session's wait for the GET's answer
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Open the stream in the background (once)."""
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self.run())

    def session_initialized(self) -> None:
        """``notifications/initialized`` was posted: a GET the server refused before is sent again, and
        :meth:`wait_open` waits for that one's answer."""
        self.initialized.set()
        if self.refused:
            self.refused = False
            self.answered.clear()

    async def wait_open(self) -> None:
        """Until the server answered the GET (with any status: a 405 too), that GET failed, or the stream ended; at
        most ``GET_OPEN_WAIT`` seconds from the first wait (the waits before and after ``notifications/initialized``
        share them). A server may send its own requests on this stream only and drop them while it is not open (the
        official TypeScript SDK does, for a request not tied to the client's, and may send one when the session is
        initialized): so the session waits for it before a message that may lead the server to one."""
        if self.task is None or self.answered.is_set():
            return
        loop = asyncio.get_running_loop()
        if self.deadline is None:
            self.deadline = loop.time() + GET_OPEN_WAIT
        try:
            await asyncio.wait_for(self.answered.wait(), max(0.0, self.deadline - loop.time()))
        except TimeoutError:
            if not self.answered.is_set():
                self.answered.set()  # (warned once: the other waiters wake now)
                logger.warning(
                    "%s: the server has not answered the standalone GET within %g s; going on without it (what the"
                    " server sends there before it does may be lost)",
                    self.engine.url,
                    GET_OPEN_WAIT,
                )

    async def run(self) -> None:
        """Read the stream until the session ends, the server offers none, or the reconnections run out."""
        try:
            await self._run()
        finally:
            self.answered.set()

    async def _run(self) -> None:
        decoder = SSEDecoder(self.engine.max_message_size)
        failures = 0
        while (headers := self.headers("text/event-stream")) is not None:
            if decoder.last_event_id:
                headers["last-event-id"] = decoder.last_event_id
            opened = time.monotonic()
            early = not self.initialized.is_set()
            try:
                resp = await self.engine.open("GET", headers)
            except IO_ERRORS:
                self.answered.set()
                failures += 1
                if failures > self.max_reconnects:
                    return
                await asyncio.sleep(self.backoff.wait(decoder.retry, failures))
                continue
            self.answered.set()
            if resp.status_code != 200:
                # sent before notifications/initialized and refused (405 is "no stream", the statuses below are
                # retried anyway): a server that wants the session initialized first gets the GET again after (set
                # before the next await, during which session_initialized may run)
                again = early and resp.status_code not in (405, 409, 502, 503, 504)
                self.refused = again and not self.initialized.is_set()
                await resp.aclose()
                if again:
                    await self.initialized.wait()
                    continue
                if resp.status_code == 400 and decoder.last_event_id:
                    decoder.last_event_id = ""  # the server cannot replay: start over without resumption
                    continue
                # 502/503/504: a draining worker, a balancer between two; 409: a server that allows one GET stream per
                # session still holds an earlier one (a half-open connection it has not noticed yet): again, later
                if resp.status_code in (409, 502, 503, 504):
                    failures += 1
                    if failures > self.max_reconnects:
                        if resp.status_code == 409:
                            logger.warning(
                                "%s: the server refused the standalone GET stream %d times (409: it holds another one "
                                "for this session); server-initiated messages outside requests will not be received",
                                self.engine.url,
                                failures,
                            )
                        return
                    await asyncio.sleep(self.backoff.wait(decoder.retry, failures))
                    continue
                return  # 405: no stream offered; 404: session gone (the next POST says so)
            decoder.new_stream()
            try:
                async for ev in sse_events(resp, decoder):
                    if ev.data:
                        await self.deliver(ev.data)
            except SSEEventTooLarge as exc:
                logger.warning("closed the standalone SSE stream: %s (max_message_size)", exc)
                return
            except IO_ERRORS:
                pass
            finally:
                await resp.aclose()
            failures = self.backoff.attempts_after(failures, opened)
            if failures > self.max_reconnects:
                return
            await asyncio.sleep(self.backoff.wait(decoder.retry, failures))


class PostStreams:
    """The SSE streams that answer the transport's POSTs (:meth:`read`, one each). Every event goes to ``deliver``;
    a server's message with the origin of the request whose stream it came on (see :class:`Relations`). A stream that
    ends before its request's answer is resumed with a GET and ``Last-Event-ID`` while ``headers(accept)`` gives the
    headers of a GET (None once the session ended or the transport closed), backing off (``backoff``; an event does
    not reset the attempt count, so a server that ends every stream after one event, ``retry: 0``, gets at most
    ``max_reconnects`` GETs). A request whose answer can no longer come gets ``fail(rid, message)``; once
    ``closed()`` nothing is resumed or failed."""

    __slots__ = ("backoff", "closed", "deliver", "engine", "fail", "headers", "max_reconnects", "relations")

    def __init__(
        self,
        engine: HTTPEngine,
        backoff: Backoff,
        max_reconnects: int,
        relations: Relations,
        headers: Callable[[str], dict[str, str] | None],
        deliver: Callable[[bytes, object], Awaitable[None]],
        fail: Callable[[Any, str], Awaitable[None]],
        closed: Callable[[], bool],
    ) -> None:
        self.engine: HTTPEngine = engine
        self.backoff: Backoff = backoff
        self.max_reconnects: int = max_reconnects
        self.relations: Relations = relations
        self.headers: Callable[[str], dict[str, str] | None] = headers
        self.deliver: Callable[[bytes, object], Awaitable[None]] = deliver
        self.fail: Callable[[Any, str], Awaitable[None]] = fail
        self.closed: Callable[[], bool] = closed

    async def read(self, resp: HTTPResponse, rid: Any, exchange: Exchange | None) -> None:
        """Read one POST's stream (``rid``: the request it answers, None for a notification's), resuming it until
        the answer to ``rid`` arrived."""
        decoder = SSEDecoder(self.engine.max_message_size)
        origin = exchange.origin if exchange is not None else None
        attempts = 0
        opened = time.monotonic()
        ended = "the SSE stream ended before the response arrived"
        while True:
            got = False
            try:
                async for ev in sse_events(resp, decoder):
                    if ev.data:
                        if rid is not None and answers_request(ev.data, rid):
                            got = True
                        elif origin is not None:  # (see Relations)
                            self.relations.note(ev.data, origin)
                        await self.deliver(ev.data, None if got else origin)
            except SSEEventTooLarge:
                await resp.aclose()
                if rid is not None:
                    await self.fail(rid, ResponseTooLarge(self.engine.max_message_size, "SSE event").message)
                return
            except IO_ERRORS as exc:
                logger.debug("SSE stream for %r broke: %s", rid, exc)
            finally:
                await resp.aclose()
            if got or rid is None or self.closed() or (exchange is not None and exchange.cancelled):
                return
            last_id = decoder.last_event_id
            if not last_id or attempts >= self.max_reconnects or self.headers("text/event-stream") is None:
                await self.fail(rid, ended)
                return
            attempts = self.backoff.attempts_after(attempts, opened)
            await asyncio.sleep(self.backoff.wait(decoder.retry, attempts))
            headers = self.headers("text/event-stream")
            if headers is None:  # the session ended, or the transport closed, while it waited
                if not self.closed():
                    await self.fail(rid, ended)
                return
            headers["last-event-id"] = last_id
            opened = time.monotonic()
            try:
                resp = await self.engine.open("GET", headers)
            except IO_ERRORS:
                continue
            if resp.status_code != 200:
                await resp.aclose()
                await self.fail(rid, f"could not resume the SSE stream (HTTP {resp.status_code})")
                return
            decoder.new_stream()
