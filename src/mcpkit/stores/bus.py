"""A notification bus between workers, and :func:`attach_bus`, which makes a server's change notifications reach
the clients connected to every worker.

A :class:`Bus` publishes bytes on a named channel to every subscriber of that channel, in every process attached
to the same backend: :class:`InMemoryBus` (one process: tests, or several servers in one loop) and
:class:`~mcpkit.stores.redis.RedisBus` (Redis pub/sub). Delivery is at most once and per-subscriber queues are
bounded (a subscriber that falls behind loses its oldest messages, counted in ``dropped``): the bus is for
notifications that say "something changed, look again", not for data that must not be lost.

Scaling an MCP endpoint over several workers takes four shared pieces::

    from mcpkit.stores.redis import RedisBus, RedisEventStore, RedisSessionStore
    from mcpkit.stores.bus import attach_bus

    server = MCPKit("app", request_state_keys=[KEY])   # 1. same HMAC keys everywhere: requestState + cursors
    bridge = attach_bus(server, RedisBus(URL))          # 2. list_changed / resources/updated reach every worker
    app = bridge.asgi(create_app(server, event_store=RedisEventStore(URL)))   # 3. SSE replay on any worker
    # 4. create_app(..., session_store=RedisSessionStore(URL)): handshake sessions served by any worker

    # serve `app` with uvicorn --workers N, gunicorn -k uvicorn.workers.UvicornWorker, or one process per host

Modern-era (2026-07-28) requests are stateless, so with 1, 2 and 3 any worker answers any request and a
``subscriptions/listen`` stream held by one worker receives the changes made on another. With 4, handshake-era
sessions need no sticky routing either: any worker restores a session from the store, and the bridge also carries
"session changed" events (``resources/subscribe``, ``logging/setLevel``, DELETE made through one worker) so the
worker holding the session's GET stream reloads (or ends) its copy before it delivers the next notification.

With ``mcpkit run server.py --transport http``, call ``attach_bus(app, RedisBus(url))`` in ``server.py``: the
subscriber then starts with the first request the worker serves (or its first handshake session).

Registrations stay per worker: ``app.add_tool(...)`` on one worker tells every client that the list changed, but
only that worker's registry has the new tool. Apply dynamic registrations on every worker (derive them from shared
state) if clients may be routed to any worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

from .._asgi import ASGIApp, Receive, Scope, Send

if TYPE_CHECKING:
    from ..server.lowlevel import Server

logger = logging.getLogger("mcpkit.stores.bus")


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
        self.dropped = 0

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
        for subs in list(self._subs.values()):
            for sub in list(subs):
                sub.end()
        self._subs.clear()


# ---------------------------------------------------------------------------------------------- attach_bus


class BusBridge:
    """What :func:`attach_bus` returns: the link between one server (one worker) and the bus.

    ``server.notify_list_changed(kind)`` and ``server.notify_resource_updated(uri)`` are replaced (on the
    instance) by versions that deliver locally first and then publish ``{origin, event}``; a background
    subscriber replays the events of OTHER workers through the original local fan-out (a worker skips its own
    events by origin id, so nobody gets a notification twice).

    The subscriber starts with :meth:`start` (``await bridge.start()`` in your startup code, or serve
    ``bridge.asgi(app)`` so the ASGI lifespan starts and stops it); failing that, lazily before the first request
    the server dispatches (or soon after the first handshake session is registered).
    """

    def __init__(self, server: Server, bus: Bus, *, channel: str = "notify") -> None:
        self.server = server
        self.bus = bus
        self.channel = channel
        self.origin = secrets.token_hex(8)
        self.published = 0
        self.received = 0  # events from other workers delivered here
        self._local_list_changed = server.notify_list_changed
        self._local_resource_updated = server.notify_resource_updated
        self._orig_dispatch = server.dispatch
        self._orig_register = server.register_session
        self._sub: Subscription | None = None
        self._reader: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self._session_listeners: list[Callable[[str], Awaitable[None]]] = []
        self._closed = False
        setattr(server, "bus_bridge", self)  # noqa: B010  (found by the HTTP transport: session events)
        setattr(server, "notify_list_changed", self.notify_list_changed)  # noqa: B010
        setattr(server, "notify_resource_updated", self.notify_resource_updated)  # noqa: B010
        setattr(server, "dispatch", self._dispatch_hook)  # noqa: B010
        setattr(server, "register_session", self._register_hook)  # noqa: B010

    @property
    def running(self) -> bool:
        return self._sub is not None

    # ------------------------------------------------------------------ the replaced server methods

    async def notify_list_changed(self, kind: str) -> None:
        await self._local_list_changed(kind)
        await self._publish({"o": self.origin, "e": "list_changed", "v": kind})

    async def notify_resource_updated(self, uri: str) -> None:
        await self._local_resource_updated(uri)
        await self._publish({"o": self.origin, "e": "resource_updated", "v": uri})

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Call ``await listener(session_id)`` when another worker announces that it changed (or ended) a
        session (the Streamable HTTP endpoint registers itself when it holds sessions restored from a store)."""
        if listener not in self._session_listeners:
            self._session_listeners.append(listener)

    async def session_changed(self, session_id: str) -> None:
        """Tell the other workers that session ``session_id``'s stored state changed (or that it ended). Events of
        one worker are delivered in order, so a notification published after this one finds the copy reloaded."""
        await self._publish({"o": self.origin, "e": "session", "v": session_id})

    async def _publish(self, event: dict[str, str]) -> None:
        if self._closed:
            return
        try:
            await self.bus.publish(self.channel, orjson.dumps(event))
            self.published += 1
        except Exception as exc:  # local clients were told; the other workers' will miss this one
            logger.warning("could not publish %s to the bus: %s", event["e"], exc)

    async def _dispatch_hook(self, *args: Any, **kwargs: Any) -> Any:
        if self._sub is None and not self._closed:
            try:
                await self.start()
            except Exception as exc:
                logger.warning("bus subscriber did not start: %s", exc)
        return await self._orig_dispatch(*args, **kwargs)

    def _register_hook(self, session: Any) -> None:
        self._orig_register(session)
        if self._sub is None and not self._closed and self._starting is None:
            with contextlib.suppress(RuntimeError):  # no running loop: a later request starts it
                task = asyncio.get_running_loop().create_task(self.start())
                self._background.add(task)
                task.add_done_callback(self._background.discard)
                task.add_done_callback(lambda t: t.cancelled() or t.exception())

    # ------------------------------------------------------------------ the subscriber

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
        self._unhook(("dispatch", "register_session"))

    async def _read(self, sub: Subscription) -> None:
        async for data in sub:
            try:
                event = orjson.loads(data)
                if not isinstance(event, dict) or event.get("o") == self.origin:
                    continue
                kind, value = event.get("e"), event.get("v")
                if not isinstance(value, str):
                    continue
                if kind == "list_changed":
                    await self._local_list_changed(value)
                elif kind == "resource_updated":
                    await self._local_resource_updated(value)
                elif kind == "session":
                    for listener in list(self._session_listeners):
                        await listener(value)
                else:
                    continue
                self.received += 1
            except Exception:
                logger.exception("could not deliver a bus event")

    def _unhook(self, names: tuple[str, ...]) -> None:
        hooks = {
            "notify_list_changed": self.notify_list_changed,
            "notify_resource_updated": self.notify_resource_updated,
            "dispatch": self._dispatch_hook,
            "register_session": self._register_hook,
        }
        own = vars(self.server)
        for name in names:
            if own.get(name) == hooks[name]:
                del own[name]  # the class's method shows through again

    async def aclose(self) -> None:
        """Stop the subscriber and give the server its own methods back (the bus itself stays open)."""
        if self._closed:
            return
        self._closed = True
        self._unhook(("notify_list_changed", "notify_resource_updated", "dispatch", "register_session"))
        if vars(self.server).get("bus_bridge") is self:
            del vars(self.server)["bus_bridge"]
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

    def asgi(self, app: ASGIApp) -> ASGIApp:
        """``app`` with this bridge started at ASGI lifespan startup and stopped at shutdown."""

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

        for attr in ("streamable", "sse", "ws", "routes"):
            if hasattr(app, attr):
                setattr(wrapped, attr, getattr(app, attr))
        return wrapped


def attach_bus(server: Server, bus: Bus, *, channel: str = "notify") -> BusBridge:
    """Make ``server.notify_list_changed`` / ``notify_resource_updated`` reach the sessions and
    ``subscriptions/listen`` streams of every worker attached to the same bus (see :class:`BusBridge`)."""
    return BusBridge(server, bus, channel=channel)


__all__ = ["Bus", "BusBridge", "InMemoryBus", "QueueSubscription", "Subscription", "attach_bus"]
