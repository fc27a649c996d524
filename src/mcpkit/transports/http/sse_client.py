"""Legacy HTTP+SSE transport (protocol 2024-11-05), client side, over httpx.

``SSEClientTransport(url, *, headers=None, timeout=30.0, sse_read_timeout=None, max_message_size=4 MiB,
queue_size=256, client=None)`` is a :class:`~mcpkit.transports.base.Connection`::

    async with SSEClientTransport("http://127.0.0.1:8000/sse") as conn:
        async with ClientSession(conn, mode="handshake") as session:
            ...

``start()`` (or entering the context) GETs the SSE URL and waits up to ``timeout`` seconds for the ``endpoint``
event. The endpoint is resolved against the SSE URL; one on a different origin (scheme, host, port) is refused,
so a hostile server cannot make us POST elsewhere. ``send`` POSTs one message there (a non-2xx answer raises
:class:`~mcpkit.protocol.errors.ConnectionClosed`); ``receive`` returns the data of each ``message`` event and
None once the stream has ended. Events larger than ``max_message_size`` are dropped (logged). A bounded queue sits
between the stream and ``receive``: when it is full we stop reading the socket (TCP backpressure).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping

import httpx

from ...protocol.errors import ConnectionClosed
from ..base import DEFAULT_MAX_MESSAGE_SIZE

logger = logging.getLogger("mcpkit.sse.client")

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)


class SSEClientTransport:
    """The client end of the legacy HTTP+SSE transport (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        sse_read_timeout: float | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        queue_size: int = 256,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = httpx.URL(url)
        self.headers = dict(headers or {})
        self.timeout = timeout
        self.sse_read_timeout = sse_read_timeout
        self.max_message_size = max_message_size
        self.endpoint: httpx.URL | None = None
        self._client = client
        self._owns_client = client is None
        self._response: httpx.Response | None = None
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(queue_size)
        self._reader: asyncio.Task[None] | None = None
        self._endpoint_ready: asyncio.Future[httpx.URL] | None = None
        self._closed = False
        self._ended = False

    async def __aenter__(self) -> SSEClientTransport:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the stream and wait for the ``endpoint`` event."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout)
        client = self._client
        loop = asyncio.get_running_loop()
        self._endpoint_ready = loop.create_future()
        request = client.build_request(
            "GET",
            self.url,
            headers={**self.headers, "Accept": "text/event-stream", "Cache-Control": "no-cache"},
            timeout=httpx.Timeout(self.timeout, read=self.sse_read_timeout),
        )
        try:
            response = await client.send(request, stream=True)
        except BaseException:
            await self.close()
            raise
        self._response = response
        try:
            if response.status_code != 200:
                raise ConnectionError(f"SSE connection refused: HTTP {response.status_code} from {self.url}")
            ctype = response.headers.get("content-type", "")
            if not ctype.startswith("text/event-stream"):
                raise ConnectionError(f"SSE connection refused: content-type {ctype!r} from {self.url}")
            self._reader = loop.create_task(self._read(response))
            self.endpoint = await asyncio.wait_for(asyncio.shield(self._endpoint_ready), self.timeout)
        except BaseException:
            await self.close()
            raise

    async def _read(self, response: httpx.Response) -> None:
        assert self._endpoint_ready is not None
        event = "message"
        data: list[str] = []
        size = 0
        try:
            async for line in response.aiter_lines():
                if line == "":
                    if data:
                        payload = "\n".join(data)
                        if size > self.max_message_size:
                            logger.warning("dropped an SSE event larger than %d bytes", self.max_message_size)
                        else:
                            await self._dispatch(event, payload)
                    event, data, size = "message", [], 0
                    continue
                if line.startswith(":"):
                    continue  # comment (keep-alive)
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "data":
                    size += len(value) + 1
                    if size <= self.max_message_size:
                        data.append(value)
                elif name == "event":
                    event = value or "message"
                # "id" and "retry" have no use on this transport (it has no resumption)
        except (httpx.HTTPError, OSError) as exc:
            logger.debug("SSE stream ended: %s", exc)
        except ValueError as exc:  # refused endpoint
            if not self._endpoint_ready.done():
                self._endpoint_ready.set_exception(exc)
        finally:
            self._ended = True
            if not self._endpoint_ready.done():
                self._endpoint_ready.set_exception(ConnectionError("the SSE stream ended before the endpoint event"))
            with contextlib.suppress(asyncio.QueueFull):
                self._queue.put_nowait(None)

    async def _dispatch(self, event: str, payload: str) -> None:
        assert self._endpoint_ready is not None
        if event == "endpoint":
            if self._endpoint_ready.done():
                logger.warning("ignored a second endpoint event")
                return
            endpoint = self.url.join(payload.strip())
            if _origin(endpoint) != _origin(self.url):
                raise ValueError(f"refused an endpoint on another origin: {endpoint}")
            self._endpoint_ready.set_result(endpoint)
        elif event == "message":
            await self._queue.put(payload.encode())
        else:
            logger.debug("ignored SSE event %r", event)

    async def receive(self) -> bytes | None:
        if self._ended and self._queue.empty():
            return None  # the end marker may not have fitted in a full queue
        data = await self._queue.get()
        if data is None:
            self._queue.put_nowait(None)  # stay at end of input
        return data

    async def send(self, data: bytes) -> None:
        if self._closed or self._ended or self.endpoint is None or self._client is None:
            raise ConnectionClosed("the SSE connection is closed")
        try:
            response = await self._client.post(
                self.endpoint, content=data, headers={**self.headers, "Content-Type": "application/json"}
            )
        except httpx.HTTPError as exc:
            raise ConnectionClosed(f"POST to {self.endpoint} failed: {exc}") from exc
        if not 200 <= response.status_code < 300:
            raise ConnectionClosed(
                f"POST to {self.endpoint} answered HTTP {response.status_code}: {response.text[:200]}"
            )

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
        if self._response is not None:
            with contextlib.suppress(Exception):
                await self._response.aclose()
        if self._owns_client and self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
        with contextlib.suppress(asyncio.QueueFull):
            self._queue.put_nowait(None)
