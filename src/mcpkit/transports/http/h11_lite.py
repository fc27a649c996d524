"""A lean HTTP/1.1 client for plain ``http://`` on asyncio streams: the Streamable HTTP client's fast path.

Only what an MCP client needs: keep-alive connections in a bounded pool, requests with a Content-Length body
written with ONE socket write (head + body), responses with a Content-Length, chunked or close-delimited body,
read whole (:meth:`LiteResponse.aread`) or incrementally (:meth:`LiteResponse.aiter_lines`, for SSE).
The response object mimics the part of ``httpx.Response`` the transport uses (``status_code``, ``headers.get``,
``aread``, ``aiter_lines``, ``aclose``), so the transport handles both kinds with the same code.

Limits: the status line plus headers are bounded (``max_header_bytes``, 100 fields), chunk-size lines by the same
bound, lines of a streamed body by ``max_line``. Connect and write are bounded by ``timeout``, and so is the rest
of the head once its first byte arrived; waiting for the first byte and for body bytes is unbounded (a tool may
run long, an SSE stream may idle), exactly like the httpx configuration it replaces.

Reuse and retry: a connection goes back to the pool only when its response was read to the end and neither side
said ``Connection: close``. A pooled connection the server has closed meanwhile is noticed before use (EOF seen
by the event loop) and replaced. A request is retried on a fresh connection ONLY when it was sent on a reused idle
connection and the write itself failed (the server never had the full request); a connection that takes the
request and then closes without answering is an error, never a silent re-send of a possibly executed call.
Closing a response before its end closes the connection (the modern era's way to cancel a request).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Mapping
from urllib.parse import urlsplit

MAX_HEADER_BYTES = 64 * 1024
MAX_HEADER_FIELDS = 100
MAX_LINE = 16 * 1024 * 1024
READ_SIZE = 64 * 1024

_LINE_BREAK = re.compile(rb"\r\n|\r|\n")


class LiteHTTPError(Exception):
    """A connection failed or the server broke HTTP/1.1 (the fast path's ``httpx.HTTPError``)."""


class LiteHeaders(dict[str, str]):
    """Response headers, lower-case names; repeated fields joined with ``", "``."""


class _Conn:
    __slots__ = ("reader", "reused", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.reused = False

    def usable(self) -> bool:
        return not self.reader.at_eof() and not self.writer.transport.is_closing() and not self.reader._buffer  # type: ignore[attr-defined]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.transport.abort()


class LitePool:
    """Keep-alive connections to one ``host:port``; at most ``max_connections`` in use at once."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        timeout: float = 30.0,
        max_connections: int = 100,
        max_header_bytes: int = MAX_HEADER_BYTES,
        max_line: int = MAX_LINE,
    ) -> None:
        self.host = host
        self.port = port
        self.host_header = (f"[{host}]" if ":" in host else host) + f":{port}"
        self.timeout = timeout
        self.max_header_bytes = max_header_bytes
        self.max_line = max_line
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
        if self._closed:
            raise LiteHTTPError("the connection pool is closed")
        lines = [f"{method} {target} HTTP/1.1\r\nhost: {self.host_header}\r\n"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
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
        await self._slots.acquire()
        try:
            while True:
                conn = await self._checkout()
                try:
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
                return await self._read_head(conn, method)
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
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, limit=self.max_header_bytes), self.timeout
            )
        except (TimeoutError, OSError) as exc:
            raise LiteHTTPError(f"cannot connect to {self.host_header}: {exc!r}") from exc
        self.connects += 1
        return _Conn(reader, writer)

    async def _read_head(self, conn: _Conn, method: str) -> LiteResponse:
        reader = conn.reader
        raw_fields: list[bytes] = []
        try:
            first = await reader.readuntil(b"\r\n")  # unbounded wait: the server may take its time to answer
            while first == b"\r\n":  # tolerate stray empty lines before the status line
                first = await reader.readuntil(b"\r\n")
            size = len(first)
            async with asyncio.timeout(self.timeout):  # the rest of the head, once it started (no extra task)
                while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                    size += len(line)
                    raw_fields.append(line)
                    if size > self.max_header_bytes:
                        raise LiteHTTPError(f"response head larger than {self.max_header_bytes} bytes")
                    if len(raw_fields) > MAX_HEADER_FIELDS:
                        raise LiteHTTPError(f"more than {MAX_HEADER_FIELDS} response header fields")
        except asyncio.LimitOverrunError as exc:
            conn.close()
            raise LiteHTTPError(f"response head larger than {self.max_header_bytes} bytes") from exc
        except asyncio.IncompleteReadError as exc:
            conn.close()
            raise LiteHTTPError("the server closed the connection without a response") from exc
        except (TimeoutError, OSError) as exc:
            conn.close()
            raise LiteHTTPError(f"reading the response failed: {exc!r}") from exc
        except BaseException:
            conn.close()
            raise
        try:
            status_line = first[:-2].decode("latin-1")
            version, status_text, *_ = status_line.split(" ", 2)
            if not version.startswith("HTTP/1.") or len(status_text) != 3:
                raise ValueError(status_line)
            status = int(status_text)
        except ValueError as exc:
            conn.close()
            raise LiteHTTPError(f"not an HTTP/1.x response: {first[:80]!r}") from exc
        fields = [raw[:-2].decode("latin-1") for raw in raw_fields]
        headers = LiteHeaders()
        for field in fields:
            name, sep, value = field.partition(":")
            if not sep or not name or name != name.strip():
                conn.close()
                raise LiteHTTPError(f"malformed response header {field[:80]!r}")
            name = name.lower()
            value = value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        if 100 <= status < 200 and status != 101:
            return await self._read_head(conn, method)  # an interim response (103 Early Hints...): the real one follows
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if method == "HEAD" or status in (204, 304) or status == 101:
            mode, length = "length", 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            mode, length = "chunked", 0
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
                if length < 0:
                    raise ValueError
            except ValueError as exc:
                conn.close()
                raise LiteHTTPError(f"bad content-length {headers['content-length']!r}") from exc
            mode = "length"
        else:
            mode, length, keep = "close", 0, False
        return LiteResponse(self, conn, status, headers, mode, length, keep)

    def _release(self, conn: _Conn | None, reusable: bool) -> None:
        if conn is not None:
            if reusable and not self._closed and conn.usable():
                self._idle.append(conn)
            else:
                conn.close()
        self._slots.release()

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


class LiteResponse:
    """A response whose body has not been read yet (``httpx.Response`` streaming look-alike)."""

    def __init__(
        self, pool: LitePool, conn: _Conn, status: int, headers: LiteHeaders, mode: str, length: int, keep: bool
    ) -> None:
        self._pool = pool
        self._conn: _Conn | None = conn
        self.status_code = status
        self.headers = headers
        self._mode = mode
        self._remaining = length  # body bytes (length mode) or bytes left in the current chunk (chunked mode)
        self._keep = keep
        self._done = False
        self._released = False
        if mode == "length" and length == 0:
            self._finish()

    def _finish(self) -> None:
        self._done = True
        if not self._released:
            self._released = True
            self._pool._release(self._conn, self._keep)
            self._conn = None

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
            while not self._done:
                data = await self._read_some()
                if data:
                    yield data
        except BaseException:
            await self.aclose()
            raise

    async def aread(self) -> bytes:
        if self._mode == "length" and not self._done and self._conn is not None:
            try:
                body = await self._conn.reader.readexactly(self._remaining)
            except BaseException as exc:
                await self.aclose()
                if isinstance(exc, (asyncio.IncompleteReadError, OSError)):
                    raise LiteHTTPError(f"the response body was cut short: {exc!r}") from exc
                raise
            self._finish()
            return body
        return b"".join([chunk async for chunk in self.aiter_bytes()])

    async def aiter_lines(self) -> AsyncIterator[str]:
        """Lines of the body (``\\r\\n``, ``\\n`` or ``\\r`` ends one), decoded as UTF-8, without line ends."""
        buf = b""
        max_line = self._pool.max_line
        async for chunk in self.aiter_bytes():
            scan = max(len(buf) - 1, 0)  # only the new bytes (and a held-back \r) can hold a line end
            buf = buf + chunk if buf else chunk
            start = 0
            for m in _LINE_BREAK.finditer(buf, scan):
                if m.group() == b"\r" and m.end() == len(buf):
                    break  # maybe the first half of \r\n: wait for more
                yield buf[start : m.start()].decode("utf-8", "replace")
                start = m.end()
            buf = buf[start:]
            if len(buf) > max_line:
                await self.aclose()
                raise LiteHTTPError(f"a line longer than {max_line} bytes in the response body")
        if buf:  # the last line had no line end (or only a held-back \r)
            yield (buf[:-1] if buf.endswith(b"\r") else buf).decode("utf-8", "replace")

    async def _read_some(self) -> bytes:
        conn = self._conn
        if conn is None:
            raise LiteHTTPError("the response was closed")
        reader = conn.reader
        try:
            if self._mode == "length":
                data = await reader.read(min(self._remaining, READ_SIZE))
                if not data:
                    raise LiteHTTPError("the response body was cut short")
                self._remaining -= len(data)
                if self._remaining == 0:
                    self._finish()
                return data
            if self._mode == "close":
                data = await reader.read(READ_SIZE)
                if not data:
                    self._finish()
                return data
            # chunked
            if self._remaining == 0:
                size_line = await reader.readuntil(b"\r\n")
                size_text = size_line.split(b";", 1)[0].strip()
                try:
                    size = int(size_text, 16)
                except ValueError as exc:
                    raise LiteHTTPError(f"bad chunk size {size_text[:40]!r}") from exc
                if size == 0:
                    trailer_bytes = 0
                    while (line := await reader.readuntil(b"\r\n")) != b"\r\n":
                        trailer_bytes += len(line)
                        if trailer_bytes > self._pool.max_header_bytes:
                            raise LiteHTTPError("response trailers too large")
                    self._finish()
                    return b""
                self._remaining = size
            data = await reader.read(min(self._remaining, READ_SIZE))
            if not data:
                raise LiteHTTPError("the chunked body was cut short")
            self._remaining -= len(data)
            if self._remaining == 0 and await reader.readexactly(2) != b"\r\n":
                raise LiteHTTPError("a chunk does not end with CRLF")
            return data
        except asyncio.LimitOverrunError as exc:
            raise LiteHTTPError("a chunk-size line is too long") from exc
        except asyncio.IncompleteReadError as exc:
            raise LiteHTTPError("the chunked body was cut short") from exc
        except OSError as exc:
            raise LiteHTTPError(f"reading the response body failed: {exc!r}") from exc


__all__ = ["LiteHTTPError", "LitePool", "LiteResponse"]
