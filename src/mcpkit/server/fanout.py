"""The fan-out a server is given so its change notifications reach the clients of other workers.

The server owns one (``Server.fanout``, :class:`LocalFanout` by default) and calls it explicitly; backends live in
:mod:`mcpkit.stores` (:class:`~mcpkit.stores.bus.BusFanout`, :class:`~mcpkit.stores.redis.RedisFanout`). The
:class:`Fanout` interface, :class:`LocalFanout` and :func:`deliver` are defined in :mod:`mcpkit.hosting` (below
``server/``, so ``stores/`` and the transports use them without importing the server) and re-exported here.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..hosting import Fanout, LocalFanout, deliver


async def deliver_missed(server: Any) -> None:
    """``Server.deliver_missed``: events of other workers may have been lost (a fan-out found a gap), so this
    worker's clients look again at every list and every resource they watch (a notice too many, never one too
    few). ``server`` is a ``Server`` (its sessions and ``subscriptions/listen`` streams)."""
    sessions, listeners = list(server._sessions), list(server._listeners)
    uris = {u for s in sessions if not s.closed for u in s.subscriptions} | {u for x in listeners for u in x.uris}
    changes = [server.deliver_list_changed(kind) for kind in ("tools", "resources", "prompts")]
    await asyncio.gather(*changes, *(server.deliver_resource_updated(uri) for uri in sorted(uris)))


__all__ = ["Fanout", "LocalFanout", "deliver", "deliver_missed"]
