"""The interface between transports and the engine."""

from __future__ import annotations

from typing import Protocol

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024


class Connection(Protocol):
    """A bidirectional message channel: ``receive()`` returns one framed payload or None at end of input."""

    async def receive(self) -> bytes | None: ...

    async def send(self, data: bytes) -> None: ...

    async def close(self) -> None: ...
