"""A notification bus between workers, and the fan-out a server is given so its change notifications reach the
clients connected to every worker.

A :class:`Bus` publishes bytes on a named channel to every subscriber of that channel, in every process attached
to the same backend: :class:`InMemoryBus` (one process: tests, or several servers in one loop) and
:class:`~mcpkit.stores.redis.RedisBus` (Redis pub/sub). Delivery is at most once and per-subscriber queues are
bounded (a subscriber that falls behind loses its oldest messages, counted in ``dropped``): the bus is for
notifications that say "something changed, look again", not for data that must not be lost.

A :class:`Fanout` is what the server owns (``server.fanout``; :class:`LocalFanout`, in process, by default):
``notify_list_changed`` / ``notify_resource_updated`` deliver locally, then ``fanout.publish``; :class:`BusFanout`
(and :class:`~mcpkit.stores.redis.RedisFanout`) deliver other workers' events through the server's
``deliver_*`` methods. Nothing of the server is replaced at run time.

Scaling an MCP endpoint over several workers takes four shared pieces::

    from mcpkit.stores.redis import RedisEventStore, RedisFanout, RedisSessionStore

    server = MCPKit("app", request_state_keys=[KEY])   # 1. same HMAC keys everywhere: requestState + cursors
    app = create_app(
        server,
        fanout=RedisFanout(URL),                  # 2. list_changed / resources/updated reach every worker
        event_store=RedisEventStore(URL),         # 3. SSE replay on any worker
        session_store=RedisSessionStore(URL),     # 4. handshake sessions served by any worker
    )
    # serve `app` with uvicorn --workers N, gunicorn -k uvicorn.workers.UvicornWorker, or one process per host

Modern-era (2026-07-28) requests are stateless, so with 1, 2 and 3 any worker answers any request and a
``subscriptions/listen`` stream held by one worker receives the changes made on another. With 4, handshake-era
sessions need no sticky routing either: any worker restores a session from the store, and the fan-out also carries
"session changed" events (``resources/subscribe``, ``logging/setLevel``, DELETE made through one worker) so the
worker holding the session's GET stream reloads (or ends) its copy before it delivers the next notification.

With ``mcpkit run server.py --transport http``, call ``app.set_fanout(RedisFanout(url))`` in ``server.py``: the
subscriber starts with the app's lifespan (or else with the first session or ``subscriptions/listen`` stream).
:func:`attach_bus` (deprecated) does ``server.set_fanout(BusFanout(bus))``.

Registrations stay per worker: ``app.add_tool(...)`` on one worker tells every client that the list changed, but
only that worker's registry has the new tool. Apply dynamic registrations on every worker (derive them from shared
state) if clients may be routed to any worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

from .._asgi import ASGIApp, Receive, Scope, Send
from ..hosting import Fanout, LocalFanout, deliver

if TYPE_CHECKING:
    from ..hosting import FanoutTarget, HostedServer

logger: logging.Logger = logging.getLogger("mcpkit.stores.bus")


@runtime_checkable
class Subscription(Protocol):
    """The messages of one channel, in publication order, from the moment ``subscribe`` returned."""

    def __aiter__(self) -> AsyncIterator[bytes]: ...

    async def __anext__(self) -> bytes: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Bus(Protocol):
    async def publish(self, channel: str, data: bytes) -> None:
        """Deliver ``data`` to every current subscriber of ``channel`` (in any process on the same backend)."""
        ...

    async def subscribe(self, channel: str) -> Subscription:
        """Subscribe to ``channel``; messages published after this returns are delivered."""
        ...

    async def aclose(self) -> None: ...


class QueueSubscription:
    """A :class:`Subscription` fed by its bus through a bounded queue (the oldest message goes when full).
    Usable as ``async with await bus.subscribe(ch) as sub: async for data in sub: ...``."""

    def __init__(self, maxsize: int, on_close: Callable[[QueueSubscription], None]) -> None:
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(max(1, maxsize))
        self._on_close: Callable[[QueueSubscription], None] | None = on_close
        self._ended = False
        self.dropped: int = 0

    def put(self, data: bytes | None) -> None:
        """Called by the bus (``None`` ends the subscription)."""
        q = self._queue
        if q.full():
            with contextlib.suppress(asyncio.QueueEmpty):
                q.get_nowait()
                self.dropped += 1
        q.put_nowait(data)

    def end(self) -> None:
        """The bus is gone: the iteration stops after what is queued."""
        self._on_close = None
        self.put(None)

    def __aiter__(self) -> QueueSubscription:
        return self

    async def __anext__(self) -> bytes:
        if self._ended:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            self._ended = True
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close(self)
            self.put(None)

    async def __aenter__(self) -> QueueSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def end_all(subscriptions: MutableMapping[Any, set[QueueSubscription]]) -> None:
    """End every subscription of a bus's table (channel -> subscriptions) and empty it: a closing bus does this."""
    for subs in list(subscriptions.values()):
        for sub in list(subs):
            sub.end()
    subscriptions.clear()


class InMemoryBus:
    """A :class:`Bus` within one process (every subscriber of a channel gets every message)."""

    def __init__(self, *, queue_size: int = 1024) -> None:
        self.queue_size = queue_size
        self._subs: dict[str, set[QueueSubscription]] = {}
        self._closed = False

    async def publish(self, channel: str, data: bytes) -> None:
        if self._closed:
            raise RuntimeError("the bus is closed")
        for sub in list(self._subs.get(channel, ())):
            sub.put(data)

    async def subscribe(self, channel: str) -> QueueSubscription:
        if self._closed:
            raise RuntimeError("the bus is closed")
        sub = QueueSubscription(self.queue_size, lambda s: self._drop(channel, s))
        self._subs.setdefault(channel, set()).add(sub)
        return sub

    def _drop(self, channel: str, sub: QueueSubscription) -> None:
        subs = self._subs.get(channel)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[channel]

    async def aclose(self) -> None:
        self._closed = True
        end_all(self._subs)


# ---------------------------------------------------------------------------------------------- fan-out


class BusFanout:
    """A :class:`Fanout` over a :class:`Bus`: events are published as ``{origin, event, value}`` on ``channel``; a
    background subscriber delivers the events of OTHER workers to the bound server (a worker skips its own
    events by origin id, so nobody gets a notification twice).

    The subscriber starts with :meth:`start` (the ASGI lifespan of :func:`~mcpkit.transports.http.create_app`
    calls it, and stops it at shutdown); failing that, soon after the server registers its first session, or
    before the first ``subscriptions/listen`` stream is acknowledged.
    """

    def __init__(self, bus: Bus, *, channel: str = "notify") -> None:
        self.bus = bus
        self.channel = channel
        self.origin: str = secrets.token_hex(8)
        self.published: int = 0
        self.received: int = 0  # events from other workers delivered here
        self.server: FanoutTarget | None = None
        self._sub: Subscription | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._session_listeners: list[Callable[[str], Awaitable[None]]] = []
        self._closed = False

    @property
    def running(self) -> bool:
        return self._sub is not None

    def bind(self, server: FanoutTarget) -> None:
        if self.server is not None and self.server is not server:
            raise ValueError("this fan-out already serves another server: give each server its own")
        self.server = server

    async def publish(self, event: str, value: str) -> None:
        """Deliver to this worker's clients at once, then publish (the other workers' subscribers deliver it; this
        worker's skips its own events by origin)."""
        await deliver(self.server, event, value)
        await self._publish({"o": self.origin, "e": event, "v": value})

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        if listener not in self._session_listeners:
            self._session_listeners.append(listener)

    async def session_changed(self, session_id: str) -> None:
        """Events of one worker are delivered in order, so a notification published after this one finds the
        other workers' copies of the session reloaded."""
        await self._publish({"o": self.origin, "e": "session", "v": session_id})

    async def _publish(self, event: dict[str, str]) -> None:
        if self._closed:
            return
        try:
            await self.bus.publish(self.channel, orjson.dumps(event))
            self.published += 1
        except Exception as exc:  # local clients were told; the other workers' will miss this one
            logger.warning("could not publish %s to the bus: %s", event["e"], exc)

    async def start(self) -> None:
        """Subscribe (idempotent); returns once events from other workers are being received."""
        if self._sub is not None or self._closed:
            return
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        starting = self._starting
        try:
            await asyncio.shield(starting)
        except Exception:
            if self._starting is starting:
                self._starting = None  # let a later call retry
            raise

    async def _start(self) -> None:
        sub = await self.bus.subscribe(self.channel)
        if self._closed:
            await sub.aclose()
            return
        self._sub = sub
        self._reader = asyncio.get_running_loop().create_task(self._read(sub))

    async def _read(self, sub: Subscription) -> None:
        async for data in sub:
            try:
                event = orjson.loads(data)
                if not isinstance(event, dict) or event.get("o") == self.origin:
                    continue
                kind, value = event.get("e"), event.get("v")
                server = self.server
                if not isinstance(value, str) or server is None:
                    continue
                if kind == "list_changed":
                    await server.deliver_list_changed(value)
                elif kind == "resource_updated":
                    await server.deliver_resource_updated(value)
                elif kind == "session":
                    for listener in list(self._session_listeners):
                        await listener(value)
                else:
                    continue
                self.received += 1
            except Exception:
                logger.exception("could not deliver a bus event")

    async def aclose(self) -> None:
        """Stop the subscriber (the bus itself stays open)."""
        if self._closed:
            return
        self._closed = True
        self._session_listeners.clear()
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):
                await sub.aclose()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader
            self._reader = None


# ---------------------------------------------------------------------------------------------- attach_bus (deprecated)


class BusBridge(BusFanout):
    """Deprecated (use ``create_app(server, fanout=BusFanout(bus))``): what :func:`attach_bus` returns, a
    :class:`BusFanout` already given to the server."""

    def __init__(self, server: HostedServer, bus: Bus, *, channel: str = "notify") -> None:
        super().__init__(bus, channel=channel)
        server.set_fanout(self)

    def asgi(self, app: ASGIApp) -> ASGIApp:
        """``app`` with this fan-out started at ASGI lifespan startup and stopped at shutdown (an app built by
        ``create_app`` already does both for its server's fan-out: when that is this one, it is returned as is)."""
        if getattr(getattr(app, "server", None), "fanout", None) is self:
            return app  # (read by what the app holds, not its class: the stores need nothing of the transports)

        async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "lifespan":
                await app(scope, receive, send)
                return

            async def lifespan_receive() -> MutableMapping[str, Any]:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await self.start()
                elif message["type"] == "lifespan.shutdown":
                    await self.aclose()
                return message

            await app(scope, lifespan_receive, send)

        return wrapped


def attach_bus(server: HostedServer, bus: Bus, *, channel: str = "notify") -> BusBridge:
    """Deprecated: ``server.set_fanout(BusFanout(bus, channel=channel))`` (or ``create_app(server,
    fanout=...)``) does the same without a bridge object. Kept for one release; warns ``DeprecationWarning``."""
    warnings.warn(
        "attach_bus is deprecated: pass create_app(server, fanout=BusFanout(bus)) or RedisFanout(url) instead",
        DeprecationWarning,
        stacklevel=2,
    )
    return BusBridge(server, bus, channel=channel)


__all__ = [
    "Bus",
    "BusBridge",
    "BusFanout",
    "Fanout",
    "InMemoryBus",
    "LocalFanout",
    "QueueSubscription",
    "Subscription",
    "attach_bus",
]
