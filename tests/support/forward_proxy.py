"""A forward HTTP proxy on 127.0.0.1, what ``HTTP_PROXY`` / ``HTTPS_PROXY`` point a client at in the tests:

    async with ForwardProxy() as proxy:           # proxy.url: http://127.0.0.1:PORT
        ...                                       # proxy.requests: "GET http://host:port/path", "CONNECT host:443"

A plain ``http://`` request (absolute form) is forwarded to its target, one connection per request; ``CONNECT`` is a
tunnel to the target. A target that cannot be reached gets ``502``, and so does any target off this machine (the
proxy never leaves 127.0.0.1, whatever a test hands it). Every request line is recorded, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import urlsplit


class ForwardProxy:
    def __init__(self) -> None:
        self.requests: list[str] = []
        self.url = ""
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def __aenter__(self) -> ForwardProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                line, _, rest = head.decode("latin-1").partition("\r\n")
                method, target, version = line.split(" ", 2)
                self.requests.append(f"{method} {target}")
                if method == "CONNECT":
                    host, _, port = target.rpartition(":")
                    upstream = await self._open(host.strip("[]"), int(port), writer)
                    if upstream is None:
                        return
                    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    await writer.drain()
                    await self._pipe(reader, writer, *upstream)
                    return
                parts = urlsplit(target)
                upstream = await self._open(parts.hostname or "", parts.port or 80, writer)
                if upstream is None:
                    continue
                up_reader, up_writer = upstream
                headers = [h for h in rest.split("\r\n") if h and not h.lower().startswith(("connection:", "proxy-"))]
                length = next((int(h.split(":", 1)[1]) for h in headers if h.lower().startswith("content-length:")), 0)
                body = await reader.readexactly(length) if length else b""
                path = parts.path or "/"
                if parts.query:
                    path += "?" + parts.query
                request = f"{method} {path} {version}\r\n" + "".join(h + "\r\n" for h in headers)
                up_writer.write(request.encode("latin-1") + b"connection: close\r\n\r\n" + body)
                await up_writer.drain()
                writer.write(await up_reader.read())  # the whole answer: the target closes after it
                await writer.drain()
                up_writer.close()
                writer.close()  # the answer carries "connection: close": the client opens a new connection
                return
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()
            self._tasks.discard(task)

    async def _open(
        self, host: str, port: int, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise OSError("not on this machine")
            return await asyncio.wait_for(asyncio.open_connection(host, port), 5)
        except (TimeoutError, OSError):
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
            return None

    @staticmethod
    async def _pipe(
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        async def copy(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.close()

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))
