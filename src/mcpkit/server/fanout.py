"""The fan-out a server is given so its change notifications reach the clients of other workers.

The server owns one (``Server.fanout``, :class:`LocalFanout` by default) and calls it explicitly; backends live in
:mod:`mcpkit.stores` (:class:`~mcpkit.stores.bus.BusFanout`, :class:`~mcpkit.stores.redis.RedisFanout`). The
:class:`Fanout` interface itself is defined in :mod:`mcpkit.hosting` (below ``server/``, so ``stores/`` and the
transports use it without importing the server) and re-exported here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..hosting import Fanout

if TYPE_CHECKING:
    from ..hosting import FanoutTarget


class LocalFanout:
    """The default :class:`Fanout`: one worker; a change is delivered to this worker's clients and told to nobody
    else."""

    running = True

    def __init__(self, server: FanoutTarget | None = None) -> None:
        self.server = server

    def bind(self, server: FanoutTarget) -> None:
        self.server = server

    async def start(self) -> None:
        pass

    async def publish(self, event: str, value: str) -> None:
        await deliver(self.server, event, value)

    async def session_changed(self, session_id: str) -> None:
        pass

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def deliver(server: FanoutTarget | None, event: str, value: str) -> None:
    """Deliver a published event to this worker's clients (``server.deliver_*``; nothing for an unknown event)."""
    if server is None:
        return
    if event == "list_changed":
        await server.deliver_list_changed(value)
    elif event == "resource_updated":
        await server.deliver_resource_updated(value)


async def deliver_missed(server: Any) -> None:
    """``Server.deliver_missed``: events of other workers may have been lost (a fan-out found a gap), so this
    worker's clients look again at every list and every resource they watch (a notice too many, never one too
    few). ``server`` is a ``Server`` (its sessions and ``subscriptions/listen`` streams)."""
    sessions, listeners = list(server._sessions), list(server._listeners)
    uris = {u for s in sessions if not s.closed for u in s.subscriptions} | {u for x in listeners for u in x.uris}
    changes = [server.deliver_list_changed(kind) for kind in ("tools", "resources", "prompts")]
    await asyncio.gather(*changes, *(server.deliver_resource_updated(uri) for uri in sorted(uris)))


__all__ = ["Fanout", "LocalFanout", "deliver", "deliver_missed"]
