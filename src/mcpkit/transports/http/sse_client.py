"""Legacy HTTP+SSE transport (protocol 2024-11-05), client side, over httpx.

``SSEClientTransport(url, *, headers=None, timeout=30.0, sse_read_timeout=None, max_message_size=4 MiB,
queue_size=256, client=None, answer_window=0.25, auth=None, max_connections=100)`` is a
:class:`~mcpkit.transports.base.Connection` (``auth``: an ``httpx.Auth`` such as :class:`~mcpkit.auth.OAuthClient`,
applied to the GET and to every POST; ``max_connections``: connections at most, the stream's included, every one
kept alive for the next POST, so a burst of concurrent requests does not open and close a connection for each)::

    async with SSEClientTransport("http://127.0.0.1:8000/sse") as conn:
        async with ClientSession(conn, mode="handshake") as session:
            ...

``start()`` (or entering the context) GETs the SSE URL and waits up to ``timeout`` seconds for the ``endpoint``
event. The endpoint is resolved against the SSE URL; one on a different origin (scheme, host, port) is refused,
so a hostile server cannot make us POST elsewhere. ``send`` POSTs one message there (a non-2xx answer raises
:class:`~mcpkit.protocol.errors.ConnectionClosed`); a request's POST that takes longer than ``answer_window``
seconds goes on in the background (its failure then fails the request), so the request's own timeout holds
however slowly the server takes the POST; ``receive`` returns the data of each ``message`` event and
None once the stream has ended (or raises ConnectionClosed naming the limit, once, when it ended on a too large
event). The stream is read by the shared bounded decoder (:mod:`.sse_decoder`): an event or
line larger than ``max_message_size`` ends the connection (logged, naming the limit; every pending request fails
at once, as nobody can tell which one it answered). A bounded queue sits between the stream and ``receive``: when
it is full we stop reading the socket (TCP backpressure).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

import httpx

from ...engine import BaseConnection, Outgoing
from ...protocol.errors import ConnectionClosed
from ..base import DEFAULT_MAX_MESSAGE_SIZE
from .sse_decoder import SSEDecoder, SSEEventTooLarge

logger: logging.Logger = logging.getLogger("mcpkit.sse.client")

_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme)


_ACK_BODY_LIMIT = 64 * 1024  # bytes of a POST's 2xx body read (and dropped) to keep its connection alive


class SSEClientTransport(BaseConnection):
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
        answer_window: float = 0.25,
        auth: httpx.Auth | None = None,
        max_connections: int = 100,
    ) -> None:
        self.url: Any = httpx.URL(url)
        self.max_connections: int = max(2, max_connections)  # (the stream holds one)
        self.headers: dict[str, str] = dict(headers or {})
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
        self._end_reason: str | None = None
        self.answer_window = answer_window
        self.auth = auth  # (an OAuth flow: every request, the GET and each POST, goes through it)
        self._posts: set[asyncio.Task[None]] = set()  # requests' POSTs gone on in the background
        self._fail_request: Callable[[Any, BaseException], None] | None = None

    def set_request_failure(self, fail: Callable[[Any, BaseException], None] | None) -> None:
        self._fail_request = fail

    async def __aenter__(self) -> SSEClientTransport:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Open the stream and wait for the ``endpoint`` event."""
        if self._client is None:
            n = self.max_connections  # (httpx keeps 20 alive by default: a burst churned through TIME_WAIT sockets)
            limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
            self._client = httpx.AsyncClient(timeout=self.timeout, limits=limits)
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
            response = await client.send(request, stream=True, auth=self.auth)
        except BaseException as exc:
            await self.close()
            if isinstance(exc, httpx.TransportError):  # (an OSError, as the other transports raise: httpx's own
                raise ConnectionError(f"cannot open the SSE stream at {self.url}: {exc}") from exc  # is not one)
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
        decoder = SSEDecoder(self.max_message_size)  # "id" and "retry" have no use here (no resumption)
        try:
            async for chunk in response.aiter_bytes():
                for event in decoder.feed(chunk):
                    await self._dispatch(event.event, event.data.decode("utf-8", "replace"))
        except SSEEventTooLarge as exc:
            # we cannot tell which request it answers: end the connection so every pending request fails now
            logger.error("closing the SSE connection to %s: %s (raise max_message_size)", self.url, exc)
            self._end_reason = (
                f"the SSE connection was closed: {exc}; raise the transport's max_message_size option to accept it"
            )
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
            self._raise_end_reason()  # the end marker may not have fitted in a full queue
            return None
        data = await self._queue.get()
        if data is None:
            self._queue.put_nowait(None)  # stay at end of input
            self._raise_end_reason()
        return data

    def _raise_end_reason(self) -> None:
        """At the end of input: ConnectionClosed saying why (once) when the stream was cut for a too large event."""
        reason, self._end_reason = self._end_reason, None
        if reason is not None:
            raise ConnectionClosed(reason)

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        if self._closed or self._ended or self.endpoint is None or self._client is None:
            raise ConnectionClosed("the SSE connection is closed")
        if msg is None or msg.method is None or msg.id is None:
            await self._post(data)  # a notification or a response: nobody waits on a deadline for it
            return
        # A request: its answer comes on the stream, and its timeout runs while we POST. Wait for the POST only
        # briefly, so a quick failure still raises here, and let a slow one go on without holding the caller.
        post = asyncio.get_running_loop().create_task(self._post(data))
        try:
            await asyncio.wait({post}, timeout=self.answer_window)
        except asyncio.CancelledError:
            post.cancel()
            raise
        if post.done():
            post.result()
            return
        self._posts.add(post)
        post.add_done_callback(functools.partial(self._post_done, msg.id))

    def _post_done(self, rid: Any, post: asyncio.Task[None]) -> None:
        self._posts.discard(post)
        if post.cancelled():
            return
        exc = post.exception()
        if exc is not None and self._fail_request is not None:
            self._fail_request(rid, exc)

    async def _post(self, data: bytes) -> None:
        assert self.endpoint is not None and self._client is not None
        request = self._client.build_request(
            "POST", self.endpoint, content=data, headers={**self.headers, "Content-Type": "application/json"}
        )
        try:
            response = await self._client.send(request, stream=True, auth=self.auth)
            try:
                if 200 <= response.status_code < 300:
                    # The answer travels on the stream. The POST's own body ("Accepted") is read to its end, not
                    # kept, so the connection goes back to the pool: closing it unread closed the connection, and a
                    # burst opened one per request. A body past _ACK_BODY_LIMIT is not read on (the connection goes).
                    seen = 0
                    async for chunk in response.aiter_raw():
                        seen += len(chunk)
                        if seen > _ACK_BODY_LIMIT:
                            break
                    return
                head = b""
                async for chunk in response.aiter_bytes():
                    head += chunk
                    if len(head) >= 200:
                        break  # only the start of an error body is shown
            finally:
                await response.aclose()
        except httpx.HTTPError as exc:
            raise ConnectionClosed(f"POST to {self.endpoint} failed: {str(exc) or type(exc).__name__}") from exc
        text = head[:200].decode("utf-8", "replace")
        raise ConnectionClosed(f"POST to {self.endpoint} answered HTTP {response.status_code}: {text}")

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for post in list(self._posts):
            post.cancel()
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
