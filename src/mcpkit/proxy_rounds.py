"""The per-request side of :mod:`mcpkit.proxies`: a 2026-07-28 request's hold on an upstream connection (what the
upstream asks meanwhile), the upstream's progress relayed to the client in order, and an upstream request
suspended while its 2026-07-28 client answers input requests."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

from .protocol.errors import MCPError
from .protocol.jsonrpc import JSONDict
from .server.lowlevel import ServerRequestContext

logger: logging.Logger = logging.getLogger("mcpkit.proxy")

MAX_ASKS = 64
"""What the upstream may ask at once in one 2026-07-28 request before the proxy answers for its client."""


MAX_SHARED = 32
"""2026-07-28 requests one handshake-era upstream connection serves at once when it shares (:class:`Lease`), unless
the proxy's ``max_shared`` says otherwise: a request beyond waits for one of them to end, or (``pool_size`` > 1)
gets another connection."""


class Lease:
    """A 2026-07-28 request's hold on a pool connection: what the upstream asks meanwhile waits in ``asks`` (at
    most :data:`MAX_ASKS`), and wakes ``waker``, the future the request's exchange waits on. A ``shared`` one is
    held beside others (at most the proxy's ``max_shared``): what the upstream asks is this request's only when the
    upstream says so (:data:`~mcpkit.engine.ORIGIN`), and so are its log messages (else only while it is alone)."""

    def __init__(self, conn: Any, sctx: ServerRequestContext, shared: bool = False) -> None:
        self.conn = conn
        self.sctx = sctx
        self.shared = shared
        self.asks: deque[tuple[str, JSONDict, asyncio.Future[JSONDict]]] = deque()
        self.waker: asyncio.Future[None] | None = None

    def ask(self, method: str, params: JSONDict, future: asyncio.Future[JSONDict]) -> None:
        """Queue what the upstream asks (a request beyond the bound is refused) and wake the exchange."""
        if len(self.asks) >= MAX_ASKS:
            raise MCPError(f"the upstream asked more than {MAX_ASKS} things at once in one request")
        self.asks.append((method, params, future))
        self.wake()

    def wake(self, _: object = None) -> None:
        """Wake the exchange waiting on this lease (the upstream asked, or its request ended)."""
        waker = self.waker
        if waker is not None and not waker.done():
            waker.set_result(None)


class ProgressRelay:
    """Upstream progress relayed to the client in order: the engine calls it synchronously (so no update is
    coalesced away), a task sends them one after the other to the request ``target()`` names (for a 2026-07-28
    call, the round in progress); :meth:`flush` waits until all are sent (before an answer goes out).

    Between two rounds of a 2026-07-28 call (answered with ``input_required``, its retry not here yet) no request
    of the client is open, and progress has nowhere to go: :meth:`hold` keeps what the upstream sends meanwhile
    and :meth:`resume` sends it on the retry, before the rest. At most :attr:`MAX_QUEUED` updates wait: beyond
    that the oldest waiting one is dropped (the latest progress is kept) and a warning is logged."""

    MAX_QUEUED = 256
    """Updates waiting to be sent (while the client reads slowly, or between two rounds)."""

    def __init__(self, target: Callable[[], ServerRequestContext]) -> None:
        self.target = target
        self.queue: asyncio.Queue[tuple[float, float | None, str | None]] = asyncio.Queue(self.MAX_QUEUED)
        self.task: asyncio.Task[None] | None = None
        self.dropped: int = 0
        self.closed: bool = False
        self._open = asyncio.Event()
        self._open.set()

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self.closed:
            return  # (the request is over: nobody takes its progress any more)
        queue = self.queue
        if queue.full():  # the oldest waiting update goes; progress only increases, so order is kept
            queue.get_nowait()
            queue.task_done()
            self.dropped += 1
            if self.dropped == 1:
                logger.warning(
                    "%d progress updates of one request wait to be relayed: dropping the oldest ones", self.MAX_QUEUED
                )
        queue.put_nowait((progress, total, message))
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    def hold(self) -> None:
        """No request of the client is open (between two rounds): keep the updates until :meth:`resume`."""
        self._open.clear()

    def resume(self) -> None:
        """The client's next round is here (``target()`` names it): send what was kept, then the rest."""
        self._open.set()

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            try:
                await self._open.wait()
                sctx = self.target()
                if not await sctx.report_progress(*item):
                    # (the client asked for no progress in this round, or its request has ended: nothing to send)
                    logger.debug("progress %s not relayed: request %r takes none", item[0], sctx.request_id)
            except Exception:
                logger.warning("could not relay a progress update", exc_info=True)
            finally:
                self.queue.task_done()

    async def flush(self) -> None:
        """Wait until every update received so far is sent (at most 5 s: a client reading too slowly)."""
        if self.task is not None:
            try:
                await asyncio.wait_for(self.queue.join(), 5.0)
            except TimeoutError:
                logger.warning("progress updates still unsent after 5 s: the answer goes out before them")

    def close(self) -> None:
        """The request is over: stop relaying."""
        self.closed = True
        if self.task is not None:
            self.task.cancel()


class Exchange:
    """An upstream request of a 2026-07-28 client, suspended while its client answers input requests."""

    def __init__(self, lease: Lease, task: asyncio.Task[JSONDict], relay: ProgressRelay | None) -> None:
        self.lease: Lease = lease
        self.relay: ProgressRelay | None = relay
        self.task: asyncio.Task[JSONDict] = task
        self.pending: dict[str, asyncio.Future[JSONDict]] = {}
        self.expiry: asyncio.TimerHandle | None = None


__all__ = ["MAX_ASKS", "MAX_SHARED", "Exchange", "Lease", "ProgressRelay"]
