"""uvicorn's WebSocket protocol (``websockets-sansio``) with a bound on what a peer that does not read can cost.

uvicorn answers a peer's ping at once, whatever its write buffer holds: a peer that sent pings and never read
the pongs grew the server's memory without bound (260 MB of pings: 245 MB of pongs buffered). And a connection
whose peer stopped reading could not be closed: the close frame waits behind the full buffer and asyncio closes a
transport only once its buffer is flushed, so after :class:`~mcpkit.transports.http.ws.WebSocketEndpoint`
dropped the session (1008) the socket, its buffers and the handler stayed until the peer went away, outside
every connection count.

:class:`FlowControlledWebSocketProtocol` aborts the connection when, while its write buffer is over the
high-water mark, the answers uvicorn writes by itself (pongs) pile up past ``MAX_UNREAD_REPLIES`` bytes, or when
that buffer has not gone below the low-water mark for ``stall_timeout`` seconds. It keeps reading meanwhile (a
peer that sends a large message before it reads is not deadlocked). :meth:`WebSocketEndpoint.uvicorn_options
<mcpkit.transports.http.ws.WebSocketEndpoint.uvicorn_options>` selects it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

logger: logging.Logger = logging.getLogger("mcpkit.ws")

MAX_UNREAD_REPLIES = 1024 * 1024  # bytes of pongs queued for a peer that is not reading, then it is cut off


class FlowControlledWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol that cuts off a peer that does not read (see the module)."""

    stall_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._write_paused = False
        self._unread_replies = 0  # bytes uvicorn wrote by itself while the write buffer was full
        self._stall: asyncio.TimerHandle | None = None

    @classmethod
    def with_stall_timeout(cls, seconds: float) -> type[FlowControlledWebSocketProtocol]:
        """This protocol with another ``stall_timeout`` (a class: uvicorn's ``ws`` option takes one)."""
        return type(cls.__name__, (cls,), {"stall_timeout": seconds})

    def data_received(self, data: bytes) -> None:
        if not self._write_paused:
            super().data_received(data)
            return
        before = self.transport.get_write_buffer_size()
        super().data_received(data)
        self._unread_replies += self.transport.get_write_buffer_size() - before
        if self._unread_replies > MAX_UNREAD_REPLIES:
            self._drop(f"its pongs pile up unread ({self._unread_replies} bytes)")

    def pause_writing(self) -> None:
        super().pause_writing()
        self._write_paused = True
        if self._stall is None:
            self._stall = self.loop.call_later(self.stall_timeout, self._drop, "it has read nothing for a while")

    def resume_writing(self) -> None:
        super().resume_writing()
        self._write_paused = False
        self._unread_replies = 0
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        super().connection_lost(exc)

    def _drop(self, why: str) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        logger.warning("aborting a WebSocket connection whose peer does not read: %s", why)
        self.transport.abort()
