"""Where the inspector's client hands every JSON-RPC message to the message log: :func:`tapped_client`.

This is the one place that knows how the messages are seen. Today it wraps the connection the client opens
(:class:`_TapConnection`: each message sent, each message received, and each line the stdio transport hands the
engine directly); once the engine's message tap is available as ``Client(..., tap=fn)``, :func:`tapped_client`
passes ``tap=`` instead and the wrapper goes away. Nothing else of the inspector changes: the log only ever sees
``tap(direction, data)`` with ``direction`` ``"out"`` (to the server) or ``"in"`` (from it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..client.client import Client
from ..client.lowlevel import ClientSession
from ..engine import Outgoing

Tap = Callable[[str, bytes], None]

__all__ = ["Tap", "tapped_client"]


class _TapConnection:
    """A client connection that shows the tap every message, then does what the wrapped connection does."""

    def __init__(self, inner: Any, tap: Tap) -> None:
        self._inner = inner
        self._tap = tap

    async def receive(self) -> bytes | None:
        data: bytes | None = await self._inner.receive()
        if data is not None:
            self._safe_tap("in", data)
        return data

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        self._safe_tap("out", data)
        await self._inner.send(data, msg)

    async def close(self) -> None:
        await self._inner.close()

    def set_fast_path(self, feed: Callable[[bytes], bool] | None, load: Callable[[], int] | None = None) -> None:
        hook = getattr(self._inner, "set_fast_path", None)
        if hook is None:
            return
        if feed is None:
            hook(None, load)
            return
        fed = feed

        def tapped_feed(data: bytes) -> bool:
            handled = fed(data)
            if handled:  # (a line it did not take goes through receive(), which shows it)
                self._safe_tap("in", data)
            return handled

        hook(tapped_feed, load)

    def set_protocol_version(self, version: str) -> None:
        hook = getattr(self._inner, "set_protocol_version", None)
        if hook is not None:
            hook(version)

    def _safe_tap(self, direction: str, data: bytes) -> None:
        try:
            self._tap(direction, data)
        except Exception:  # the log must never break the connection
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TappedClient(Client):
    _inspector_tap: Tap

    def _new_session(self, conn: Any) -> ClientSession:
        return super()._new_session(_TapConnection(conn, self._inspector_tap))


def tapped_client(target: Any, tap: Tap, **options: Any) -> Client:
    """A :class:`~mcpkit.client.client.Client` for ``target`` (``options`` as ``Client`` takes them) whose every
    JSON-RPC message, in and out, is shown to ``tap(direction, data)`` first."""
    client = _TappedClient(target, **options)
    client._inspector_tap = tap
    return client
