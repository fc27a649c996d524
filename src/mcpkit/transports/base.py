"""The interface between transports and the engine."""

from __future__ import annotations

from typing import Protocol

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024


class Connection(Protocol):
    """A bidirectional message channel: ``receive()`` returns one framed payload or None at end of input."""

    async def receive(self) -> bytes | None: ...

    async def send(self, data: bytes) -> None: ...

    async def close(self) -> None: ...


class NullOutbox:
    """An outbox that drops what it is given: for messages that have nowhere to go (a stateless peer's own
    notifications, the answer to a request whose real answer travels another way)."""

    async def send(self, data: bytes) -> None:
        return None


NULL_OUTBOX = NullOutbox()
