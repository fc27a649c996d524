"""One incoming request being handled: :class:`RequestContext`."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from ..protocol.jsonrpc import JSONDict, RequestId
from . import messages
from .messages import Outbox
from .tap import OUT

if TYPE_CHECKING:
    from .outgoing import ProgressCallback, Requests


class RequestContext:
    """One incoming request being handled: its id, method, params, and the channel to answer on.

    Handlers use it to send notifications related to the request (they leave before the response), report
    progress (only while the request is active, strictly increasing, only if the requester asked for it) and
    send requests back to the requester on the same channel.
    """

    __slots__ = (
        "_last_progress",
        "_slot",
        "cancelled",
        "done",
        "id",
        "method",
        "out",
        "params",
        "peer",
        "sink",
        "task",
        "validated_meta",
    )

    def __init__(self, peer: Requests, id: RequestId, method: str, params: JSONDict | None, out: Outbox) -> None:
        self.peer: Requests = peer
        self.id: RequestId = id
        self.method: str = method
        self.params: JSONDict | None = params
        self.out: Outbox = out
        self.cancelled: bool = False
        self.done: bool = False
        self._last_progress: float | None = None
        self.task: asyncio.Task[Any] | None = None
        # the request's ``_meta`` as the transport already read and validated it, for the layer above (the server's
        # ModernContext of a 2026-07-28 request over HTTP); None when it was not read (the server reads it then)
        self.validated_meta: Any = None
        # batch members add their response here (followed by a comma) instead of sending it: one buffer per batch,
        # not one small bytes object per member (orjson gives each a 4 KiB allocation while it is held)
        self.sink: bytearray | None = None
        self._slot = False  # holds one of the peer's max_concurrency slots

    @property
    def rc(self) -> RequestContext:
        """This context (what a server's request context calls its engine context: code that takes either reads
        ``ctx.rc``)."""
        return self

    @property
    def meta(self) -> JSONDict | None:
        p = self.params
        if p is None:
            return None
        m = p.get("_meta")
        return m if type(m) is dict else None

    @property
    def progress_token(self) -> str | int | None:
        m = self.meta
        if m is None:
            return None
        tok = m.get("progressToken")
        return tok if type(tok) in (str, int) else None

    async def notify(self, method: str, params: JSONDict | None = None) -> None:
        """Send a notification related to this request (on the request's own channel)."""
        msg = messages.notification(method, params)
        if self.peer.tap is not None:
            self.peer._tapped(OUT, msg)
        await self.out.send(msg.data, msg)

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> bool:
        """Send ``notifications/progress`` if the requester asked for progress and the request is still active.

        Returns False (and sends nothing) when there is no token, the request is finished, or ``progress`` does
        not increase: the spec requires strictly increasing values for active requests only.
        """
        token = self.progress_token
        if token is None or self.done or self.cancelled:
            return False
        if self._last_progress is not None and progress <= self._last_progress:
            return False
        self._last_progress = progress
        params: JSONDict = {"progressToken": token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        msg = messages.notification("notifications/progress", params)
        if self.peer.tap is not None:
            self.peer._tapped(OUT, msg)
        await self.out.send(msg.data, msg)
        return True

    async def request(
        self,
        method: str,
        params: JSONDict | None = None,
        *,
        timeout: float | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> JSONDict:
        """Send a request back to the requester, on the channel of this request."""
        return await self.peer.request(method, params, timeout=timeout, on_progress=on_progress, out=self.out)
