"""A lean keep-alive HTTP/1.1 client for plain ``http://``: asyncio streams, framing parsed by ``httptools``.

The Streamable HTTP client's fast path. Responses (status line, headers, Content-Length, chunked and
close-delimited bodies, interim 1xx responses, keep-alive) are parsed by httptools, MagicStack's binding of
llhttp, the strict C parser of Node.js that uvicorn's own httptools protocol uses; this module adds the pool,
the timeouts, the retry policy, and the checks llhttp leaves to its caller. What llhttp refuses
(``content-length: +5`` or ``1_0``, a chunk size ``0x5``/``+5``/``-1``, ``HTTP/1.1 +20``, headers with control
characters or obs-fold, Content-Length with Transfer-Encoding...) and what we refuse on top
(``Transfer-Encoding`` other than ``chunked``, which llhttp would read to the end of the connection; an unasked
``101``) fails the request with :class:`LiteHTTPError` ("the server broke HTTP/1.1: ...").

The response object mimics the part of ``httpx.Response`` the transport uses (``status_code``, ``headers.get``,
``aread``, ``aiter_bytes``, ``aclose``), so the transport handles both engines with the same code.

Limits (llhttp has none of its own): the head is bounded (``max_header_bytes`` bytes, counted as they arrive;
``MAX_HEADER_FIELDS`` fields; ``MAX_INTERIM`` interim 1xx responses), and so are chunk-size lines, chunk
extensions and trailers (``max_header_bytes`` between two pieces of body); :meth:`LiteResponse.aread` takes a size
bound checked against the declared Content-Length first and then against what arrives (a chunk size is never
trusted; at most one read of ``READ_SIZE`` bytes past the bound is held). Connect and write are bounded by
``timeout``, so is the wait for a free connection when all ``max_connections`` are busy, and so is the rest of a
head once its first byte arrived; waiting for the first byte and for body bytes is unbounded (a tool may run
long, an SSE stream may idle): the caller's request timeout bounds those.

Reuse and retry: a connection goes back to the pool only when the response was read to its end, the parser says
the connection stays open (no ``Connection: close``, HTTP/1.1 or an explicit keep-alive) and nothing was sent
after the response. Each exchange gets a fresh parser. A pooled connection the server has closed meanwhile is
noticed before use (EOF seen by the event loop) and replaced. A request is retried on a fresh connection ONLY when
it was sent on a reused idle connection and the write itself failed (the server never had the full request); a
connection that takes the request and then closes without answering is an error, never a silent re-send of a
possibly executed call. Closing a response before its end closes the connection (the modern era's way to cancel a
request).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from urllib.parse import urlsplit

import httptools

MAX_HEADER_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
MAX_INTERIM = 16  # interim (1xx) responses before the final one; real servers send one or two
READ_SIZE = 64 * 1024


_VERSIONS = frozenset(("1.1", "1.0"))
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_is_token = _TOKEN.fullmatch


class LiteHTTPError(Exception):
    """A connection failed or the server broke HTTP/1.1 (the fast path's ``httpx.HTTPError``)."""


class BodyTooLarge(LiteHTTPError):
    """A response body is (or declares to be) larger than the bound given to :meth:`LiteResponse.aread`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the response body is larger than the {limit}-byte limit")
        self.limit = limit


class LiteHeaders(dict[str, str]):
    """Response headers, lower-case names; repeated fields joined with ``", "``."""


class _Stop(Exception):
    """Raised from a parser callback to stop llhttp (the reason is in ``_Exchange.error``, or it is trailing data)."""


class _Exchange:
    """One response being parsed: the httptools protocol (its callbacks) plus what they collected."""

    __slots__ = (
        "body",
        "body_size",
        "chunked",
        "close_delimited",
        "done",
        "error",
        "fields",
        "head_bytes",
        "head_done",
        "head_size",
        "headers",
        "interim",
        "keep_alive",
        "max_header_bytes",
        "parser",
        "skip_body",
        "stall",
        "status",
        "trailing",
    )

    def __init__(self, max_header_bytes: int, skip_body: bool) -> None:
        self.max_header_bytes: int = max_header_bytes
        self.skip_body: bool = skip_body  # a HEAD request: the response has no body whatever it declares
        self.headers: LiteHeaders = LiteHeaders()
        self.fields: int = 0
        self.head_size: int = 0  # bytes of the current head's fields (checked as each field completes)
        self.head_bytes: int = 0  # bytes fed while the final head was incomplete (bounds a field still growing)
        self.head_done: bool = False
        self.interim: int = 0
        self.status: int = 0
        self.chunked: bool = False
        self.close_delimited: bool = False
        self.body: list[bytes] = []
        self.body_size: int = 0
        self.stall: int = 0  # bytes fed since the last piece of body (chunk-size lines, extensions, trailers)
        self.done: bool = False
        self.keep_alive: bool = False
        self.trailing: bool = False
        self.error: LiteHTTPError | None = None
        self.parser = httptools.HttpResponseParser(self)

    # ---------------------------------------------------------------- httptools callbacks

    def _fail(self, message: str) -> None:
        self.error = LiteHTTPError(message)
        raise _Stop

    def on_message_begin(self) -> None:
        if self.done:  # bytes after the final response: never reuse this connection
            self.trailing = True
            raise _Stop

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.head_done:
            return  # a trailer field (bounded by ``stall``); the transport has no use for trailers
        self.fields += 1
        self.head_size += len(name) + len(value) + 4
        if self.fields > MAX_HEADER_FIELDS:
            self._fail(f"more than {MAX_HEADER_FIELDS} response header fields")
        if self.head_size > self.max_header_bytes:
            self._fail(f"response head larger than max_header_bytes={self.max_header_bytes}")
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200:
            if status == 101:
                self._fail("the server broke HTTP/1.1: it switched protocols (101) though nobody asked it to")
            if status < 100:  # llhttp takes any three digits
                self._fail(f"the server broke HTTP/1.1: status code {status:03d}")
            self.interim += 1
            if self.interim > MAX_INTERIM:
                self._fail(f"more than {MAX_INTERIM} interim (1xx) responses before the answer")
            self.headers = LiteHeaders()  # an interim response's fields are not the answer's
            self.fields = self.head_size = 0
            return
        if self.parser.get_http_version() not in _VERSIONS:
            self._fail(f"the server broke HTTP/1.1: it answered in HTTP/{self.parser.get_http_version()}")
        self.status = status
        self.head_done = True
        headers = self.headers
        te = headers.get("transfer-encoding")
        if te is not None:
            if te.strip().lower() != "chunked":  # llhttp would read a response body to EOF; refuse, as h11 does
                self._fail(f"the server broke HTTP/1.1: unsupported Transfer-Encoding {te!r}")
            self.chunked = True
        elif "content-length" not in headers and status != 204 and status != 304:
            self.close_delimited = True  # no length, no chunking: the body runs to the end of the connection

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.body_size += len(body)

    def on_message_complete(self) -> None:
        if self.head_done:
            self.done = True
            self.keep_alive = self.parser.should_keep_alive()

    # ---------------------------------------------------------------- feeding

    def feed(self, data: bytes) -> None:
        """Parse ``data`` (not empty); a broken response raises :class:`LiteHTTPError`."""
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self.error is not None:
                raise self.error from None
            if self.done:  # garbage after a complete response: the response stands, the connection goes
                self.trailing = True
                return
            raise LiteHTTPError(f"the server broke HTTP/1.1: {exc}") from None
        except httptools.HttpParserUpgrade:
            if self.done:
                self.trailing = True
                return
            raise LiteHTTPError(
                "the server broke HTTP/1.1: it switched protocols (101) though nobody asked it to"
            ) from None

    def feed_eof(self) -> None:
        """The server closed the connection: the end of a close-delimited body, else a truncated response."""
        if self.done:
            return
        if self.head_done and self.close_delimited:
            self.done = True
            self.keep_alive = False
            return
        if self.head_done:
            raise LiteHTTPError("the server broke HTTP/1.1: the connection closed before the end of the body")
        raise LiteHTTPError("the server broke HTTP/1.1: the connection closed in the middle of a response head")


class _Conn:
    __slots__ = ("reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader: asyncio.StreamReader = reader
        self.writer: asyncio.StreamWriter = writer
        self.reused: bool = False

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.transport.is_closing() and not self.reader._buffer  # type: ignore[attr-defined]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.transport.abort()


class LitePool:
    """Keep-alive connections to one ``host:port``; at most ``max_connections`` in use at once (waiting for one
    is bounded by ``timeout``)."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 30.0,
        max_connections: int = 100,
        max_header_bytes: int = MAX_HEADER_BYTES,
    ) -> None:
        self.host = host
        self.port = port
        self.host_header: str = (f"[{host}]" if ":" in host else host) + f":{port}"
        self.timeout = timeout
        self.max_connections = max_connections
        self.max_header_bytes = max_header_bytes
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False
        self.connects: int = 0  # connections opened (tests and diagnostics)

    @classmethod
    def for_url(cls, url: str, **options: object) -> tuple[LitePool, str]:
        """A pool for a plain ``http://`` URL and the request target (path + query) to use on it."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the HTTP fast path needs a plain http:// URL, not {url!r}")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(parts.hostname, parts.port or 80, **options), target  # type: ignore[arg-type]

    async def request(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None = None
    ) -> LiteResponse:
        """Send one request; the response's head has been read, its body is left to read."""
        if self._closed:
            raise LiteHTTPError("the connection pool is closed")
        lines = [f"{method} {target} HTTP/1.1\r\nhost: {self.host_header}\r\n"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\0" in value or not _is_token(name):
                raise LiteHTTPError(f"invalid header {name!r}")
            lines.append(f"{name}: {value}\r\n")
        if body is not None:
            lines.append(f"content-length: {len(body)}\r\n")
        lines.append("\r\n")
        try:
            data = "".join(lines).encode("latin-1")
        except UnicodeEncodeError as exc:
            raise LiteHTTPError(f"a header is not latin-1: {exc}") from exc
        if body:
            data += body
        # (asyncio.timeout, not wait_for: on Python 3.11 wait_for loses a cancellation that arrives as the awaited
        # step completes, and the request then goes on; a client closed right then waited on its GET stream forever)
        if self._slots.locked():
            try:
                async with asyncio.timeout(self.timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise LiteHTTPError(
                    f"no connection to {self.host_header} came free within {self.timeout}s "
                    f"(all max_connections={self.max_connections} are busy)"
                ) from None
        else:
            await self._slots.acquire()
        try:
            while True:
                conn = await self._checkout()
                try:
                    conn.writer.write(data)  # one write: head + body
                    if conn.writer.transport.get_write_buffer_size():
                        async with asyncio.timeout(self.timeout):
                            await conn.writer.drain()
                except (TimeoutError, OSError) as exc:
                    conn.close()
                    if conn.reused and not isinstance(exc, asyncio.TimeoutError):
                        continue  # a dead idle connection: the server never had the request; try a fresh one
                    raise LiteHTTPError(f"{method} failed while sending: {exc!r}") from exc
                except BaseException:
                    conn.close()
                    raise
                # a fresh parser per exchange; told only whether the response can have a body (HEAD)
                return await self._read_head(conn, _Exchange(self.max_header_bytes, method == "HEAD"))
        except BaseException:
            self._slots.release()
            raise

    async def _checkout(self) -> _Conn:
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            conn.close()
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(self.host, self.port)
        except (TimeoutError, OSError) as exc:
            raise LiteHTTPError(f"cannot connect to {self.host_header}: {exc!r}") from exc
        self.connects += 1
        return _Conn(reader, writer)

    async def _read_head(self, conn: _Conn, ex: _Exchange) -> LiteResponse:
        reader = conn.reader
        limit = self.max_header_bytes
        deadline: float | None = None  # none while waiting for a head's first byte (a tool may take its time)
        received = 0
        try:
            while not ex.head_done:
                if deadline is None:
                    data = await reader.read(READ_SIZE)
                    deadline = asyncio.get_running_loop().time() + self.timeout
                else:
                    async with asyncio.timeout_at(deadline):  # the rest of the head, once it started
                        data = await reader.read(READ_SIZE)
                if not data:
                    if not received:
                        raise LiteHTTPError("the server closed the connection without a response")
                    ex.feed_eof()
                if not received and data[:5] != b"HTTP/"[: len(data)]:  # llhttp also takes RTSP/ and ICE/ answers
                    raise LiteHTTPError(f"the server broke HTTP/1.1: the answer starts with {data[:16]!r}")
                received += len(data)
                ex.head_bytes += len(data)
                interim = ex.interim
                ex.feed(data)
                if ex.interim != interim and not ex.head_done:
                    deadline = None  # the final answer may still take its time
                    ex.head_bytes = 0
                elif not ex.head_done and ex.head_bytes > limit:  # a field still growing (llhttp has no bound)
                    raise LiteHTTPError(f"response head larger than max_header_bytes={limit}")
        except LiteHTTPError:
            ex.parser = None  # type: ignore[assignment]
            conn.close()
            raise
        except (TimeoutError, OSError) as exc:
            ex.parser = None  # type: ignore[assignment]
            conn.close()
            raise LiteHTTPError(f"reading the response failed: {exc!r}") from exc
        except BaseException:
            ex.parser = None  # type: ignore[assignment]
            conn.close()
            raise
        return LiteResponse(self, conn, ex)

    def _release(self, conn: _Conn | None, reusable: bool) -> None:
        if conn is not None:
            if reusable and not self._closed and conn.usable():
                self._idle.append(conn)
            else:
                conn.close()
        self._slots.release()

    async def aclose(self) -> None:
        """Close the idle connections; responses still being read close theirs when they end."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class LiteResponse:
    """A response whose body has not been read yet (``httpx.Response`` streaming look-alike)."""

    def __init__(self, pool: LitePool, conn: _Conn, exchange: _Exchange) -> None:
        self._pool = pool
        self._conn: _Conn | None = conn
        self._ex = exchange
        self.status_code = exchange.status
        self.headers: LiteHeaders = exchange.headers
        self._released = False
        self._done = False  # the body was read to its end
        if exchange.skip_body:  # HEAD: no body whatever the head declares; the connection is not reused
            exchange.done = True
            exchange.keep_alive = False
            exchange.body.clear()

    def _finish(self) -> None:
        self._done = True
        if not self._released:
            self._released = True
            conn, self._conn = self._conn, None
            assert conn is not None
            ex = self._ex
            ex.parser = None  # type: ignore[assignment]  # (breaks the parser <-> callbacks cycle)
            # the server finished cleanly, keeps the connection open, and sent nothing after its response
            self._pool._release(conn, ex.keep_alive and not ex.trailing)

    async def aclose(self) -> None:
        """Release the connection: back to the pool when the body was read to its end, closed otherwise."""
        if not self._released:
            self._released = True
            self._ex.parser = None  # type: ignore[assignment]
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            self._pool._release(None, False)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives (chunked framing removed)."""
        try:
            while (data := await self._next()) is not None:
                yield data
        except BaseException:
            await self.aclose()
            raise

    async def aread(self, limit: int | None = None) -> bytes:
        """The whole body; with ``limit``, :class:`BodyTooLarge` as soon as it declares or reaches more."""
        ex = self._ex
        if limit is not None:
            declared = self.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                await self.aclose()
                raise BodyTooLarge(limit)
        conn = self._conn
        if conn is None:
            return await self._closed_body()
        try:
            while not ex.done:  # (a JSON answer usually came whole with its head: no loop at all)
                if limit is not None and ex.body_size > limit:
                    raise BodyTooLarge(limit)
                await _more(conn, ex)
            if limit is not None and ex.body_size > limit:
                raise BodyTooLarge(limit)
        except LiteHTTPError:
            await self.aclose()
            raise
        except OSError as exc:
            await self.aclose()
            raise LiteHTTPError(f"reading the response body failed: {exc!r}") from exc
        except BaseException:
            await self.aclose()
            raise
        body = ex.body
        ex.body = []
        self._finish()
        return body[0] if len(body) == 1 else b"".join(body)

    async def _closed_body(self) -> bytes:
        if self._done:
            return b""
        raise LiteHTTPError("the response was closed")

    async def _next(self) -> bytes | None:
        """The next piece of the body, or None at its end."""
        conn = self._conn
        if conn is None:
            if self._done:
                return None
            raise LiteHTTPError("the response was closed")
        ex = self._ex
        try:
            while not ex.body:
                if ex.done:
                    self._finish()
                    return None
                await _more(conn, ex)
        except OSError as exc:
            raise LiteHTTPError(f"reading the response body failed: {exc!r}") from exc
        body = ex.body
        ex.body = []
        return body[0] if len(body) == 1 else b"".join(body)


async def _more(conn: _Conn, ex: _Exchange) -> None:
    """Read and parse the next bytes of a body."""
    data = await conn.reader.read(READ_SIZE)
    if not data:
        ex.feed_eof()
        return
    size = ex.body_size
    ex.feed(data)
    if ex.body_size != size or ex.done:
        ex.stall = 0
        return
    ex.stall += len(data)  # chunk-size lines, chunk extensions, trailers: no body came of them
    if ex.stall > ex.max_header_bytes:
        raise LiteHTTPError(
            f"the server broke HTTP/1.1: chunk framing or trailers longer than max_header_bytes={ex.max_header_bytes}"
        )


__all__ = ["MAX_INTERIM", "BodyTooLarge", "LiteHTTPError", "LitePool", "LiteResponse"]
