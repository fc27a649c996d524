"""The fan-out a server is given so its change notifications reach the clients of other workers, and the server's
side of it: :class:`ChangeFanout`, the base class of :class:`~mcpkit.server.lowlevel.Server` that announces changes
and delivers them to this worker's sessions and ``subscriptions/listen`` streams.

The server owns one (``Server.fanout``, :class:`LocalFanout` by default) and calls it explicitly; backends live in
:mod:`mcpkit.stores` (:class:`~mcpkit.stores.bus.BusFanout`, :class:`~mcpkit.stores.redis.RedisFanout`). The
:class:`Fanout` interface, :class:`LocalFanout` and :func:`deliver` are defined in :mod:`mcpkit.hosting` (below
``server/``, so ``stores/`` and the transports use them without importing the server) and re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..hosting import Fanout, LocalFanout, deliver
from ..protocol.jsonrpc import JSONDict
from .builtins import LIST_CHANGED_FILTER, Listener

if TYPE_CHECKING:
    from .session import ServerSession
    from .tasks import ServerTasks

logger: logging.Logger = logging.getLogger("mcpkit.server")


async def deliver_missed(server: Any) -> None:
    """``Server.deliver_missed``: events of other workers may have been lost (a fan-out found a gap), so this
    worker's clients look again at every list and every resource they watch (a notice too many, never one too
    few). ``server`` is a ``Server`` (its sessions and ``subscriptions/listen`` streams)."""
    sessions, listeners = list(server._sessions), list(server._listeners)
    uris = {u for s in sessions if not s.closed for u in s.subscriptions} | {u for x in listeners for u in x.uris}
    changes = [server.deliver_list_changed(kind) for kind in ("tools", "resources", "prompts")]
    await asyncio.gather(*changes, *(server.deliver_resource_updated(uri) for uri in sorted(uris)))


class ChangeFanout:
    """The notification fan-out of a :class:`~mcpkit.server.lowlevel.Server` (its base class): the sessions it
    serves, announcing a change (``notify_*``: through :attr:`fanout`, to every worker) and delivering one to this
    worker's sessions and ``subscriptions/listen`` streams (``deliver_*``). ``Server.__init__`` sets the state."""

    fanout: Fanout  #: how changes reach this worker's and other workers' clients (:meth:`set_fanout`)
    fanout_timeout: float  #: seconds one session may take to take a notification before it is given up on
    #: ``observer(event, value)`` for every change delivered here ("list_changed", kind; "resource_updated", uri)
    change_observers: list[Callable[[str, str], None]]
    tasks: ServerTasks | None
    _sessions: weakref.WeakSet[ServerSession]
    _listeners: set[Listener]
    _fanout_start: asyncio.Task[None] | None
    _fanout_warned: float

    def register_session(self, session: ServerSession) -> None:
        self._sessions.add(session)
        if not self.fanout.running and self._fanout_start is None:
            with contextlib.suppress(RuntimeError):  # no running loop: a later session or listen starts it
                task = asyncio.get_running_loop().create_task(self.start_fanout())
                self._fanout_start = task
                task.add_done_callback(self._fanout_started)

    def _fanout_started(self, task: asyncio.Task[None]) -> None:
        if self._fanout_start is task:
            self._fanout_start = None

    def set_fanout(self, fanout: Fanout) -> None:
        """Make this server's change notifications reach the clients of every worker sharing ``fanout`` (e.g.
        :class:`~mcpkit.stores.redis.RedisFanout`); the server owns it from now on. ``create_app(server,
        fanout=...)`` calls this and starts/stops it with the app's lifespan."""
        fanout.bind(self)
        self.fanout = fanout

    async def start_fanout(self) -> None:
        """Start receiving other workers' events (idempotent; a failure is logged and retried later)."""
        try:
            await self.fanout.start()
        except Exception as exc:  # (one line per 10 s: every new session tries again while Redis is away)
            now = asyncio.get_running_loop().time()
            if now - self._fanout_warned >= 10.0:
                self._fanout_warned = now
                logger.warning("fan-out did not start (it is retried with the next session or listen): %s", exc)

    @property
    def sessions(self) -> list[ServerSession]:
        return list(self._sessions)

    async def notify_list_changed(self, kind: str) -> None:
        """Tell every client that the ``kind`` list ("tools", "resources", "prompts") changed, in both eras, on
        this worker and (through :attr:`fanout`) on every other."""
        await self.fanout.publish("list_changed", kind)  # (here too: the fan-out delivers in its own order)

    async def notify_resource_updated(self, uri: str) -> None:
        """Tell the subscribers of ``uri`` that it changed, in both eras, on this worker and every other."""
        await self.fanout.publish("resource_updated", uri)

    async def deliver_list_changed(self, kind: str) -> None:
        """``notify_list_changed`` for this worker's clients only (what a fan-out calls for a change elsewhere)."""
        for observe in self.change_observers:
            observe("list_changed", kind)
        method = f"notifications/{kind}/list_changed"
        told = [s for s in list(self._sessions) if s.initialized and not s.closed and s.declared_list_changed(kind)]
        await self._fan_out(told, method, None)
        key = LIST_CHANGED_FILTER[kind]
        for listener in list(self._listeners):
            if listener.filter.get(key):
                listener.offer(method, {})

    async def deliver_resource_updated(self, uri: str) -> None:
        """``notify_resource_updated`` for this worker's clients only."""
        for observe in self.change_observers:
            observe("resource_updated", uri)
        subscribers = [s for s in list(self._sessions) if uri in s.subscriptions and not s.closed]
        await self._fan_out(subscribers, "notifications/resources/updated", {"uri": uri})
        for listener in list(self._listeners):
            if uri in listener.uris:
                listener.offer("notifications/resources/updated", {"uri": uri})

    async def _fan_out(self, sessions: list[ServerSession], method: str, params: JSONDict | None) -> None:
        """Send to every session concurrently; a slow or dead one is given up on after ``fanout_timeout``
        seconds and never holds up the others."""
        if not sessions:
            return

        async def one(session: ServerSession) -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.notify(method, params), self.fanout_timeout)

        if len(sessions) == 1:
            await one(sessions[0])
        else:
            await asyncio.gather(*(one(s) for s in sessions))

    def _end_listeners(self, session: ServerSession) -> None:
        """End the ``subscriptions/listen`` streams of ``session``'s connection gracefully: its input ended, and a
        listen stream never ends by itself (the connection's drain would wait its whole timeout for it)."""
        for listener in list(self._listeners):
            if listener.session is session:
                listener.end()

    async def close_listeners(self) -> None:
        """End every ``subscriptions/listen`` stream gracefully, drain the tasks running here (server shutdown)."""
        for listener in list(self._listeners):
            listener.end()
        if self.tasks is not None:
            await self.tasks.engine.drain()

    deliver_missed = deliver_missed  # a fan-out gap: every list changed, every watched resource updated


__all__ = ["ChangeFanout", "Fanout", "LocalFanout", "deliver", "deliver_missed"]
