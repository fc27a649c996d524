"""The fan-out a server is given so its change notifications reach the clients of other workers.

The server owns one (``Server.fanout``, :class:`LocalFanout` by default) and calls it explicitly; backends live in
:mod:`mcpkit.stores` (:class:`~mcpkit.stores.bus.BusFanout`, :class:`~mcpkit.stores.redis.RedisFanout`). The
:class:`Fanout` interface itself is defined in :mod:`mcpkit.hosting` (below ``server/``, so ``stores/`` and the
transports use it without importing the server) and re-exported here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..hosting import Fanout

if TYPE_CHECKING:
    from ..hosting import FanoutTarget


class LocalFanout:
    """The default :class:`Fanout`: one worker, nothing to tell anyone (local delivery is the server's own)."""

    running = True
    delivers_locally = False

    def bind(self, server: FanoutTarget) -> None:
        pass

    async def start(self) -> None:
        pass

    async def publish(self, event: str, value: str) -> None:
        pass

    async def session_changed(self, session_id: str) -> None:
        pass

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        pass

    async def aclose(self) -> None:
        pass


__all__ = ["Fanout", "LocalFanout"]
