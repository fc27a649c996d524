"""The ASGI type aliases, defined once for every module of mcpkit that speaks ASGI (transports, auth, stores).

They follow the ASGI specification: a ``scope`` and each ``message`` are mutable string-keyed mappings,
``receive`` and ``send`` are the coroutines the server hands the application. This module imports nothing of
mcpkit, so any layer may use it; so may :func:`lifespan`, the one answerer of the ASGI lifespan protocol.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]


async def lifespan(
    receive: Receive,
    send: Send,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    on_startup: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Answer the ASGI lifespan protocol (for an app served alone): ``on_startup`` before startup is complete,
    ``on_shutdown`` (its errors suppressed: shutdown always completes) before shutdown is complete."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            if on_startup is not None:
                await on_startup()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            if on_shutdown is not None:
                with contextlib.suppress(Exception):
                    await on_shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return


__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send", "lifespan"]
