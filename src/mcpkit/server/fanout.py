"""The fan-out interface a server is given so its change notifications reach the clients of other workers.

The server owns one (``Server.fanout``, :class:`LocalFanout` by default) and calls it explicitly; backends live in
:mod:`mcpkit.stores` (:class:`~mcpkit.stores.bus.BusFanout`, :class:`~mcpkit.stores.redis.RedisFanout`). Defined
here, not in ``stores/``, because ``server/`` imports nothing of ``stores/``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .lowlevel import Server


@runtime_checkable
class Fanout(Protocol):
    """How a server's change notifications reach the clients of OTHER workers: the server is given one
    (``create_app(server, fanout=...)`` or ``server.set_fanout(...)``) and owns it.

    ``server.notify_list_changed`` / ``notify_resource_updated`` deliver to this worker's sessions and listen
    streams, then call :meth:`publish`; a fan-out that receives another worker's event hands it to the bound
    server's ``deliver_list_changed`` / ``deliver_resource_updated`` (local delivery only, never re-published).
    Session-record announcements (``session_changed`` / ``on_session_changed``) keep the copies of a handshake
    session held by several workers in step (the Streamable HTTP endpoint uses them with a session store).
    """

    @property
    def running(self) -> bool:
        """True once events from other workers are being received (always True for :class:`LocalFanout`)."""
        ...

    def bind(self, server: Server) -> None:
        """Called by ``server.set_fanout``: where events from other workers are delivered."""
        ...

    async def start(self) -> None:
        """Begin receiving other workers' events (idempotent)."""
        ...

    async def publish(self, event: str, value: str) -> None:
        """Tell the other workers about ``event`` ("list_changed" with a kind, "resource_updated" with a URI)."""
        ...

    async def session_changed(self, session_id: str) -> None:
        """Tell the other workers that session ``session_id``'s stored record changed (or that it ended)."""
        ...

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        """Call ``await listener(session_id)`` when another worker announces a session change."""
        ...

    async def aclose(self) -> None:
        """Stop receiving; later publications are dropped."""
        ...


class LocalFanout:
    """The default :class:`Fanout`: one worker, nothing to tell anyone (local delivery is the server's own)."""

    running = True

    def bind(self, server: Server) -> None:
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
