"""The user-agent side of the authorization code grant: :class:`LoopbackCallback` (a one-shot listener on
127.0.0.1 for native apps, RFC 8252) and :class:`HeadlessBrowser` (tests and unattended use)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx

from .client_errors import OAuthFlowError, shown_safely


class HeadlessBrowser:
    """A user-agent for tests and unattended use: GETs the authorization URL without following the final redirect
    to the client's ``redirect_uri`` and hands its query parameters to the OAuth client. Use the same object for
    both handlers: ``OAuthClient(..., redirect_handler=b.redirect_handler, callback_handler=b.callback_handler)``."""

    def __init__(self, *, max_hops: int = 5, timeout: float = 10.0) -> None:
        self.max_hops = max_hops
        self.timeout = timeout
        self.visited: list[str] = []
        self._result: dict[str, str] | None = None

    async def redirect_handler(self, url: str) -> None:
        self.visited.append(url)
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            for _ in range(self.max_hops):
                resp = await client.get(url)
                location = resp.headers.get("location")
                if resp.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise OAuthFlowError(
                        f"the authorization endpoint answered HTTP {resp.status_code} "
                        f"without a redirect: {shown_safely(resp.text)}"
                    )
                target = str(httpx.URL(url).join(location))
                parts = urlsplit(target)
                query = dict(parse_qsl(parts.query))
                if "code" in query or "error" in query:
                    self._result = query
                    return
                url = target
        raise OAuthFlowError("too many redirects during authorization")

    async def callback_handler(self) -> dict[str, str]:
        if self._result is None:
            raise OAuthFlowError("no authorization response was received")
        result, self._result = self._result, None
        return result


class LoopbackCallback:
    """The interactive flow for native apps (RFC 8252): a one-shot HTTP listener on 127.0.0.1 receives the
    redirect, and ``open_url`` (default: :func:`webbrowser.open`) shows the user the authorization page.

        cb = LoopbackCallback()                       # picks a free port
        auth = OAuthClient(url, client_metadata={"client_name": "my-app", "redirect_uris": [cb.redirect_uri]},
                           redirect_handler=cb.redirect_handler, callback_handler=cb.callback_handler)

    The listener starts in :meth:`redirect_handler` and stops after one callback, ``timeout`` seconds after it started
    (whether or not :meth:`callback_handler` waits for it), or at once when opening the browser fails; a request to
    it whose ``state`` is not the authorization request's is discarded (400) and the listener waits on. The
    port is reserved at construction, so the redirect URI is known before registration (an AS following RFC 8252
    §7.3 accepts any loopback port anyway).

    Anything on the machine can connect to the port, so the listener is bounded: it serves ``max_connections``
    connections at once (a new one past it closes the oldest, so idle or slow connections cannot keep the browser's
    redirect out), each must send its request within ``request_timeout`` seconds and its request head may be
    ``max_request_size`` bytes (431 beyond); past ``max_requests`` requests that were not the answer (stray, forged,
    a browser's favicon) it stops, and the sign-in fails saying so. Set them on the instance before
    :meth:`redirect_handler` runs."""

    #: connections served at once; past it, the oldest open one is closed for the new one
    max_connections: int = 16
    #: seconds a connection has to send its request and take the answer
    request_timeout: float = 10.0
    #: the largest request head read (request line and headers: a browser's cookies for 127.0.0.1 included)
    max_request_size: int = 32 * 1024
    #: requests answered without completing the sign-in (a wrong state, another path) before the listener gives up
    max_requests: int = 1000

    def __init__(
        self,
        *,
        port: int = 0,
        path: str = "/callback",
        timeout: float = 300.0,
        open_url: Callable[[str], Any] | None = None,
        success_page: str = "Authorization complete. You can close this window.",
    ) -> None:
        self._sock: socket.socket | None = self._bind(port)
        self.port: int = self._sock.getsockname()[1]
        self.path = path
        self.redirect_uri: str = f"http://127.0.0.1:{self.port}{path}"
        self.timeout = timeout
        self.open_url = open_url
        self.success_page = success_page
        self._result: asyncio.Future[dict[str, str]] | None = None
        self._state: str | None = None  # the state of the pending authorization request
        self._server: asyncio.base_events.Server | None = None
        self._stopped: asyncio.base_events.Server | None = None  # closed by a bound, not yet waited for
        self._open: dict[asyncio.StreamWriter, None] = {}  # the connections being served, oldest first
        self._requests = 0  # requests answered that were not the answer, since the listener started
        self._expiry: asyncio.TimerHandle | None = None  # stops the listener ``timeout`` seconds after it started

    @staticmethod
    def _bind(port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        return sock

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= self.max_connections:
            oldest = next(iter(self._open))
            del self._open[oldest]
            oldest.transport.abort()  # its handler's read ends at once
        self._open[writer] = None
        try:
            async with asyncio.timeout(self.request_timeout):
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.LimitOverrunError:
                    body, status = b"Request too large.", b"431 Request Header Fields Too Large"
                else:
                    body, status = self._answer(head)
                if self._result is None or not self._result.done():
                    self._requests += 1
                    if self._requests >= self.max_requests:
                        self._stop(
                            f"the loopback listener received {self._requests} requests that were not the "
                            f"authorization response (LoopbackCallback.max_requests): another process on this "
                            "machine may be flooding it"
                        )
                writer.write(
                    b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
                    b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
                )
                await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, IndexError, ConnectionError):
            pass
        finally:
            self._open.pop(writer, None)
            writer.close()

    def _answer(self, head: bytes) -> tuple[bytes, bytes]:
        """The body and status of the answer to a request whose head is ``head``; completes the callback when it is
        the pending authorization request's redirect."""
        target = head.split(b"\r\n", 1)[0].split(b" ")[1].decode("latin-1")
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query))
        if parts.path != self.path:
            return b"Not Found", b"404 Not Found"
        if self._state is not None and query.get("state") != self._state:
            # not the answer to the pending request (a stray or forged request to the port): discarded, the
            # listener waits on for the real one
            return b"This is not the answer to the pending authorization request.", b"400 Bad Request"
        if self._result is not None and not self._result.done():
            self._result.set_result(query)
        return self.success_page.encode(), b"200 OK"

    def _stop(self, reason: str) -> None:
        """Stop listening at once (a bound was reached) and fail the pending callback with ``reason``."""
        if self._result is not None and not self._result.done():
            self._result.set_exception(OAuthFlowError(reason))
            self._result.exception()  # (retrieved: no warning when no callback_handler waits for it)
        if self._server is not None:
            self._server.close()  # (not listening from here on; a later redirect_handler listens again)
            self._stopped, self._server = self._server, None
        for writer in list(self._open):
            writer.transport.abort()

    async def redirect_handler(self, url: str) -> None:
        loop = asyncio.get_running_loop()
        self._result = loop.create_future()
        self._state = dict(parse_qsl(urlsplit(url).query)).get("state")
        self._requests = 0
        if self._server is None:
            sock = self._sock or self._bind(self.port)  # again after an earlier callback: the same redirect URI
            self._sock = None
            sock.listen(8)
            self._server = await asyncio.start_server(self._handle, sock=sock, limit=self.max_request_size)
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry = loop.call_later(self.timeout, self._stop, "no authorization response within the time limit")
        try:
            if self.open_url is not None:
                opened = self.open_url(url)
                if asyncio.iscoroutine(opened):
                    await opened
            else:
                import webbrowser

                if not await asyncio.to_thread(webbrowser.open, url):
                    print(f"Open this URL to authorize: {url}")
        except BaseException:
            await self.aclose()  # (no callback will be awaited)
            raise

    async def callback_handler(self) -> dict[str, str]:
        if self._result is None:
            raise OAuthFlowError("no authorization request is pending")
        try:
            return await asyncio.wait_for(self._result, self.timeout)
        except TimeoutError:
            raise OAuthFlowError("no authorization response within the time limit") from None
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Stop listening, and close the connections still open (their handlers end by themselves)."""
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        for writer in list(self._open):
            writer.transport.abort()
        for server in (self._server, self._stopped):
            if server is not None:
                server.close()
                await server.wait_closed()
        self._server = self._stopped = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
