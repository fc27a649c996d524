"""Where the inspector's client hands every JSON-RPC message to the message log: :func:`tapped_client`.

The engine's message tap (``Client(..., tap=fn)``, :mod:`mcpkit.engine.tap`) shows every message the client's peer
receives or sends, on every transport, as it passes; this module turns each event into the log's
``tap(direction, data)``: ``direction`` is ``"out"`` (to the server) or ``"in"`` (from it), ``data`` the message's
bytes. This is the one place of the inspector that knows how the messages are seen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..client.client import Client
from ..engine import TapEvent

Tap = Callable[[str, bytes], None]

__all__ = ["Tap", "tapped_client"]


def tapped_client(target: Any, tap: Tap, **options: Any) -> Client:
    """A :class:`~mcpkit.client.client.Client` for ``target`` (``options`` as ``Client`` takes them) whose every
    JSON-RPC message, in and out, is shown to ``tap(direction, data)`` as it passes."""

    def on_event(event: TapEvent) -> None:
        tap(event.direction, event.data)

    return Client(target, tap=on_event, **options)
