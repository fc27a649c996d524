"""WebSocket transport (a custom transport: one JSON-RPC message per text frame, subprotocol ``mcp``), client
side, over the ``websockets`` library.

``WebSocketClientTransport(url, *, headers=None, auth=None, ping_interval=20.0, ping_timeout=20.0,
open_timeout=10.0, max_message_size=4 MiB)`` is a :class:`~mcpkit.transports.base.Connection`::

    async with WebSocketClientTransport("ws://127.0.0.1:8000/ws") as conn:
        async with ClientSession(conn) as session:   # either era
            ...

It offers subprotocol ``mcp`` and refuses a server that does not select it. Each message is one text frame.
``receive`` returns None once the connection has closed normally (the close code is kept in ``close_code``), and
raises :class:`~mcpkit.protocol.errors.ConnectionClosed` saying why when it did not (the server's close code and
reason; our 1009 for a message over ``max_message_size``), so pending requests fail with that reason; a binary
frame from the server is a protocol violation: the connection is closed with 1003. The ``websockets`` library sends
pings every ``ping_interval`` s and closes the connection when a pong is ``ping_timeout`` s late; it closes with
1009 when a message exceeds ``max_message_size``. A server that does not read what we send while it sends pings
is cut off once a MiB of pongs waits for it (``websockets`` answers every ping at once: they piled up in memory).

``auth``: an ``httpx.Auth`` flow such as :class:`~mcpkit.auth.OAuthClient` (its token goes in the upgrade
request's headers, as for an HTTP request to ``http(s)://`` the same host and path). An upgrade refused with 401 or
403 goes back to the flow, as an HTTP answer would: an OAuth flow gets a token (or a wider one) and the upgrade is
tried again with it. A request the flow makes elsewhere is sent with a plain HTTP client.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed as WSConnectionClosed
from websockets.exceptions import InvalidHandshake, InvalidStatus

from ...engine import BaseConnection, Outgoing

if TYPE_CHECKING:
    import httpx
from ...protocol.errors import ConnectionClosed
from ..base import DEFAULT_MAX_MESSAGE_SIZE

logger: logging.Logger = logging.getLogger("mcpkit.ws.client")

SUBPROTOCOL = "mcp"
MAX_UNREAD_REPLIES = 1024 * 1024  # bytes of pongs queued for a server that is not reading, then it is cut off
_CUT_OFF = (
    "the server was not reading while it sent pings (over 1 MiB of pongs waited for it), so the WebSocket "
    "connection was dropped"
)
# headers of the flow's HTTP request that the WebSocket upgrade sets itself
_NOT_FORWARDED = frozenset(("host", "connection", "upgrade", "content-length", "transfer-encoding"))


class _BoundedClientConnection(ClientConnection):
    """websockets' client connection that drops a server for which pongs pile up unread (see the module)."""

    unread_replies = 0  # bytes websockets wrote by itself (pongs) while the write buffer was full
    cut_off = False

    def data_received(self, data: bytes) -> None:
        if not self.paused:
            super().data_received(data)
            return
        before = self.transport.get_write_buffer_size()
        super().data_received(data)
        self.unread_replies += self.transport.get_write_buffer_size() - before
        if self.unread_replies > MAX_UNREAD_REPLIES and not self.cut_off:
            self.cut_off = True
            logger.warning("dropping a WebSocket connection: %s", _CUT_OFF)
            self.transport.abort()

    def resume_writing(self) -> None:
        super().resume_writing()
        self.unread_replies = 0


class WebSocketClientTransport(BaseConnection):
    """The client end of the MCP WebSocket transport (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | None = None,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        open_timeout: float | None = 10.0,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        **connect_options: Any,
    ) -> None:
        self.url = url
        self.headers: dict[str, str] = dict(headers or {})
        self.auth = auth
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        self.open_timeout = open_timeout
        self.max_message_size = max_message_size
        self.connect_options = connect_options
        self.ws: ClientConnection | None = None
        self._closed = False

    async def __aenter__(self) -> WebSocketClientTransport:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        try:
            ws = await (self._connect(self.headers) if self.auth is None else self._connect_with_auth(self.auth))
        except InvalidStatus as exc:  # the upgrade answered with an HTTP status: a connection error, said in a line
            status = exc.response.status_code
            why = bytes(exc.response.body or b"")[:200].decode("utf-8", "replace").strip()
            raise ConnectionError(
                f"the server refused the WebSocket connection: HTTP {status}" + (f": {why}" if why else "")
            ) from None
        except InvalidHandshake as exc:  # (not a WebSocket server there)
            raise ConnectionError(f"no WebSocket handshake: {exc}") from None
        if ws.subprotocol != SUBPROTOCOL:
            await ws.close(1002, "subprotocol mcp was not selected")
            raise ConnectionError(f"{self.url}: the server did not select the {SUBPROTOCOL!r} subprotocol")
        self.ws = ws

    async def _connect(self, headers: Mapping[str, str]) -> ClientConnection:
        return await connect(
            self.url,
            subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
            additional_headers=dict(headers) or None,
            ping_interval=self.ping_interval,
            ping_timeout=self.ping_timeout,
            open_timeout=self.open_timeout,
            max_size=self.max_message_size,
            create_connection=_BoundedClientConnection,
            **self.connect_options,
        )

    async def _connect_with_auth(self, auth: httpx.Auth) -> ClientConnection:
        """Drive ``auth`` as httpx would for a GET of the same URL over HTTP: the upgrade carries the headers the
        flow adds; a refused upgrade (401, 403) is the response the flow gets back, and it may ask again."""
        import httpx

        http_url = httpx.URL("http" + self.url[2:] if self.url[:2].lower() == "ws" else self.url)
        request = httpx.Request("GET", http_url, headers=self.headers)
        flow = auth.async_auth_flow(request)
        refused: InvalidStatus | None = None
        other: httpx.AsyncClient | None = None
        try:
            sent = await flow.__anext__()
            while True:
                if sent.url == http_url:
                    headers = {k: v for k, v in sent.headers.items() if k.lower() not in _NOT_FORWARDED}
                    try:
                        return await self._connect(headers)
                    except InvalidStatus as exc:
                        refused = exc
                        answer = exc.response
                        response = httpx.Response(
                            answer.status_code,
                            headers=list(answer.headers.raw_items()),
                            content=bytes(answer.body or b""),
                            request=sent,
                        )
                else:  # (a flow that asks something of another URL on the way)
                    other = other or httpx.AsyncClient(timeout=self.open_timeout)
                    response = await other.send(sent)
                    await response.aread()
                try:
                    sent = await flow.asend(response)
                except StopAsyncIteration:
                    if refused is not None:
                        raise refused from None
                    raise ConnectionError(f"{self.url}: the auth flow ended without a WebSocket upgrade") from None
        finally:
            await flow.aclose()
            if other is not None:
                await other.aclose()

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code if self.ws is not None else None

    @property
    def close_reason(self) -> str | None:
        return self.ws.close_reason if self.ws is not None else None

    async def receive(self) -> bytes | None:
        ws = self.ws
        if ws is None:
            return None
        try:
            message = await ws.recv()
        except WSConnectionClosed as exc:
            why = self._why_closed(exc)
            if why is None:
                return None
            raise ConnectionClosed(why) from None
        if isinstance(message, str):
            return message.encode()
        with contextlib.suppress(Exception):
            await ws.close(1003, "binary frames are not supported")
        logger.warning("%s sent a binary frame; connection closed", self.url)
        return None

    def _why_closed(self, exc: WSConnectionClosed) -> str | None:
        """Why the connection ended, when that was not a normal closure (None: it was)."""
        if self._closed:
            return None  # (we closed it)
        if isinstance(self.ws, _BoundedClientConnection) and self.ws.cut_off:
            return _CUT_OFF
        sent, rcvd = exc.sent, exc.rcvd
        if sent is not None and sent.code == 1009 and not exc.rcvd_then_sent:
            return (
                f"a message from the server was larger than the {self.max_message_size}-byte limit, so the WebSocket "
                "connection was closed (1009); raise the transport's max_message_size option to accept it"
            )
        if rcvd is not None and rcvd.code not in (1000, 1001):
            reason = f" ({rcvd.reason})" if rcvd.reason else ""
            return f"the server closed the WebSocket connection: {rcvd.code}{reason}"
        return None

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        ws = self.ws
        if ws is None or self._closed:
            raise ConnectionClosed("the WebSocket connection is closed")
        try:
            await ws.send(data, text=True)
        except WSConnectionClosed as exc:
            raise ConnectionClosed(f"the WebSocket connection is closed: {exc}") from None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await self.ws.close(1000)
