"""uvicorn's WebSocket protocol (``websockets-sansio``) with a bound on what a peer that does not read can cost.

uvicorn answers a peer's ping at once, whatever its write buffer holds, and keeps reading while that buffer is
over its high-water mark. A peer that sent pings and never read the pongs grew the server's memory without
bound (260 MB of pings: 245 MB of pongs buffered). And a connection whose peer stopped reading could not be
closed: the close frame waits behind the full buffer and asyncio closes a transport only once its buffer is
flushed, so after :class:`~mcpkit.transports.http.ws.WebSocketEndpoint` dropped the session (1008) the socket,
its buffers and the handler stayed until the peer went away, outside every connection count.

:class:`FlowControlledWebSocketProtocol` stops reading while its write buffer is over the high-water mark (what
the peer sends waits in its own socket), and aborts the connection when that buffer has not gone below the
low-water mark for ``stall_timeout`` seconds. :meth:`WebSocketEndpoint.uvicorn_options
<mcpkit.transports.http.ws.WebSocketEndpoint.uvicorn_options>` selects it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

logger: logging.Logger = logging.getLogger("mcpkit.ws")


class FlowControlledWebSocketProtocol(WebSocketsSansIOProtocol):
    """uvicorn's sans-I/O WebSocket protocol that reads nothing while the peer does not read (see the module)."""

    stall_timeout: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._write_paused = False
        self._stall: asyncio.TimerHandle | None = None

    @classmethod
    def with_stall_timeout(cls, seconds: float) -> type[FlowControlledWebSocketProtocol]:
        """This protocol with another ``stall_timeout`` (a class: uvicorn's ``ws`` option takes one)."""
        return type(cls.__name__, (cls,), {"stall_timeout": seconds})

    def pause_writing(self) -> None:
        super().pause_writing()
        self._write_paused = True
        self.transport.pause_reading()
        if self._stall is None:
            self._stall = self.loop.call_later(self.stall_timeout, self._drop)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._write_paused = False
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        if not self.read_paused:  # (paused by uvicorn too: the application has not taken the last message yet)
            self.transport.resume_reading()

    async def receive(self) -> Any:
        message = await super().receive()  # (resumes reading once the application caught up)
        if self._write_paused:
            self.transport.pause_reading()
        return message

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stall is not None:
            self._stall.cancel()
            self._stall = None
        super().connection_lost(exc)

    def _drop(self) -> None:
        self._stall = None
        logger.warning(
            "aborting a WebSocket connection whose peer has not read for %ss (its write buffer stays full)",
            self.stall_timeout,
        )
        self.transport.abort()
