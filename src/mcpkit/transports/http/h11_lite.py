"""A lean keep-alive HTTP/1.1 client for plain ``http://``: asyncio streams, framing parsed by ``h11``.

The Streamable HTTP client's fast path. The wire format (status line, headers, Content-Length, chunked and
close-delimited bodies, interim 1xx responses, keep-alive) is read and written by h11, the well-kept sans-I/O
parser httpx itself is built on; this module only adds the pool, the timeouts and the retry policy. What h11
refuses (``content-length: +5`` or ``1_0``, a chunk size ``0x5``/``+5``/``-1``, ``Transfer-Encoding: notchunked``,
``HTTP/1.1 +20``, headers with control characters...) fails the request with :class:`LiteHTTPError`.

The response object mimics the part of ``httpx.Response`` the transport uses (``status_code``, ``headers.get``,
``aread``, ``aiter_bytes``, ``aclose``), so the transport handles both engines with the same code.

Limits: the head is bounded (``max_header_bytes``, ``MAX_HEADER_FIELDS`` fields, ``MAX_INTERIM`` interim 1xx
responses); :meth:`LiteResponse.aread` takes a size bound checked against the declared Content-Length first and
then against what arrives (a chunk size is never trusted). Connect and write are bounded by ``timeout``, so is
the wait for a free connection when all ``max_connections`` are busy, and so is the rest of a head once its first
byte arrived; waiting for the first byte and for body bytes is unbounded (a tool may run long, an SSE stream may
idle): the caller's request timeout bounds those.

Reuse and retry: a connection goes back to the pool only when h11 says both sides finished the exchange cleanly
(response read to its end, no ``Connection: close``, no stray bytes after it). A pooled connection the server has
closed meanwhile is noticed before use (EOF seen by the event loop) and replaced. A request is retried on a fresh
connection ONLY when it was sent on a reused idle connection and the write itself failed (the server never had the
full request); a connection that takes the request and then closes without answering is an error, never a silent
re-send of a possibly executed call. Closing a response before its end closes the connection (the modern era's way
to cancel a request).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from urllib.parse import urlsplit

import h11

MAX_HEADER_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
MAX_INTERIM = 16  # interim (1xx) responses before the final one; real servers send one or two
READ_SIZE = 64 * 1024


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


_REQUESTS: dict[str, h11.Request] = {}


def _request_event(method: str) -> h11.Request:
    """What h11 needs to know of a request to frame its response: the method (HEAD has no body)."""
    event = _REQUESTS.get(method)
    if event is None:
        event = _REQUESTS[method] = h11.Request(method=method, target="/", headers=[("host", "-")])
    return event


class _Conn:
    __slots__ = ("h11", "reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False
        self.h11: h11.Connection = None  # type: ignore[assignment]  # one per exchange, see LitePool.request

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
        self.host_header = (f"[{host}]" if ":" in host else host) + f":{port}"
        self.timeout = timeout
        self.max_connections = max_connections
        self.max_header_bytes = max_header_bytes
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(max_connections)
        self._closed = False
        self.connects = 0  # connections opened (tests and diagnostics)

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
        expect = _request_event(method)
        if self._slots.locked():
            try:
                await asyncio.wait_for(self._slots.acquire(), self.timeout)
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
                    # A fresh h11 state per exchange, told which request it answers; our side of it is written
                    # above (a request has nothing to parse), h11 reads and frames the whole response.
                    conn.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=self.max_header_bytes)
                    conn.h11.send(expect)
                    conn.writer.write(data)  # one write: head + body
                    if conn.writer.transport.get_write_buffer_size():
                        await asyncio.wait_for(conn.writer.drain(), self.timeout)
                except (TimeoutError, OSError) as exc:
                    conn.close()
                    if conn.reused and not isinstance(exc, asyncio.TimeoutError):
                        continue  # a dead idle connection: the server never had the request; try a fresh one
                    raise LiteHTTPError(f"{method} failed while sending: {exc!r}") from exc
                except BaseException:
                    conn.close()
                    raise
                return await self._read_head(conn)
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
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.timeout)
        except (TimeoutError, OSError) as exc:
            raise LiteHTTPError(f"cannot connect to {self.host_header}: {exc!r}") from exc
        self.connects += 1
        return _Conn(reader, writer)

    async def _read_head(self, conn: _Conn) -> LiteResponse:
        state = conn.h11
        reader = conn.reader
        deadline: float | None = None  # none while waiting for a head's first byte (a tool may take its time)
        interim = 0
        received = 0
        event: object = None
        try:
            while True:
                event = state.next_event()
                if event is h11.NEED_DATA:
                    if deadline is None:
                        data = await reader.read(READ_SIZE)
                        deadline = asyncio.get_running_loop().time() + self.timeout
                    else:
                        async with asyncio.timeout_at(deadline):  # the rest of the head, once it started
                            data = await reader.read(READ_SIZE)
                    received += len(data)
                    state.receive_data(data)  # b"": the server closed the connection
                    continue
                kind = type(event)
                if kind is h11.Response:
                    break
                if kind is h11.InformationalResponse:
                    interim += 1
                    if interim > MAX_INTERIM:
                        raise LiteHTTPError(f"more than {MAX_INTERIM} interim (1xx) responses before the answer")
                    deadline = None  # the final answer may still take its time
                    continue
                if kind is h11.ConnectionClosed:
                    raise LiteHTTPError("the server closed the connection without a response")
                raise LiteHTTPError(f"unexpected {event!r} instead of a response")
        except h11.RemoteProtocolError as exc:
            conn.close()
            if not received:
                raise LiteHTTPError("the server closed the connection without a response") from exc
            if "too long" in str(exc):
                raise LiteHTTPError(f"response head larger than max_header_bytes={self.max_header_bytes}") from exc
            raise LiteHTTPError(f"the server broke HTTP/1.1: {exc}") from exc
        except (TimeoutError, OSError) as exc:
            conn.close()
            raise LiteHTTPError(f"reading the response failed: {exc!r}") from exc
        except BaseException:
            conn.close()
            raise
        assert isinstance(event, h11.Response)
        raw = event.headers
        if len(raw) > MAX_HEADER_FIELDS:
            conn.close()
            raise LiteHTTPError(f"more than {MAX_HEADER_FIELDS} response header fields")
        headers = LiteHeaders()
        size = 0
        for name_b, value_b in raw:
            size += len(name_b) + len(value_b) + 4
            if size > self.max_header_bytes:  # (h11 bounds only a head still incomplete after a read)
                conn.close()
                raise LiteHTTPError(f"response head larger than max_header_bytes={self.max_header_bytes}")
            name = name_b.decode("latin-1")  # h11 gives lower-case names
            value = value_b.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        return LiteResponse(self, conn, event.status_code, headers)

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

    def __init__(self, pool: LitePool, conn: _Conn, status: int, headers: LiteHeaders) -> None:
        self._pool = pool
        self._conn: _Conn | None = conn
        self.status_code = status
        self.headers = headers
        self._released = False
        self._done = False  # the body was read to its end

    def _finish(self) -> None:
        self._done = True
        if not self._released:
            self._released = True
            conn, self._conn = self._conn, None
            assert conn is not None
            state = conn.h11
            # the server finished cleanly, kept the connection open, and sent nothing after its response
            reusable = state.their_state is h11.DONE and not state.trailing_data[0]
            self._pool._release(conn, reusable)

    async def aclose(self) -> None:
        """Release the connection: back to the pool when the body was read to its end, closed otherwise."""
        if not self._released:
            self._released = True
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            self._pool._release(None, False)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The body as it arrives (chunked framing removed)."""
        try:
            while (data := await self._next()) is not None:
                if data:
                    yield data
        except BaseException:
            await self.aclose()
            raise

    async def aread(self, limit: int | None = None) -> bytes:
        """The whole body; with ``limit``, :class:`BodyTooLarge` as soon as it declares or reaches more."""
        if limit is not None:
            declared = self.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > limit:
                await self.aclose()
                raise BodyTooLarge(limit)
        chunks: list[bytes] = []
        size = 0
        conn = self._conn
        if conn is None:
            return await self._closed_body()
        state = conn.h11
        try:
            while True:  # (the loop of _next, inlined: this is every JSON answer's path)
                event = state.next_event()
                if event is h11.NEED_DATA:
                    state.receive_data(await conn.reader.read(READ_SIZE))
                    continue
                kind = type(event)
                if kind is h11.Data:
                    data = bytes(event.data)  # type: ignore[union-attr]
                    size += len(data)
                    if limit is not None and size > limit:
                        raise BodyTooLarge(limit)
                    chunks.append(data)
                elif kind is h11.EndOfMessage or kind is h11.ConnectionClosed:
                    self._finish()
                    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
                else:
                    raise LiteHTTPError(f"unexpected {kind.__name__} in a response body")
        except h11.RemoteProtocolError as exc:
            await self.aclose()
            raise LiteHTTPError(f"the response body broke HTTP/1.1: {exc}") from exc
        except OSError as exc:
            await self.aclose()
            raise LiteHTTPError(f"reading the response body failed: {exc!r}") from exc
        except BaseException:
            await self.aclose()
            raise

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
        state = conn.h11
        try:
            while True:
                event = state.next_event()
                if event is h11.NEED_DATA:
                    state.receive_data(await conn.reader.read(READ_SIZE))
                    continue
                kind = type(event)
                if kind is h11.Data:
                    return bytes(event.data)  # type: ignore[union-attr]
                if kind is h11.EndOfMessage or kind is h11.ConnectionClosed:
                    self._finish()
                    return None
                raise LiteHTTPError(f"unexpected {kind.__name__} in a response body")
        except h11.RemoteProtocolError as exc:
            raise LiteHTTPError(f"the response body broke HTTP/1.1: {exc}") from exc
        except OSError as exc:
            raise LiteHTTPError(f"reading the response body failed: {exc!r}") from exc


__all__ = ["MAX_INTERIM", "BodyTooLarge", "LiteHTTPError", "LitePool", "LiteResponse"]
