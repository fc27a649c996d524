"""The ASGI type aliases, defined once for every module of mcpkit that speaks ASGI (transports, auth, stores).

They follow the ASGI specification: a ``scope`` and each ``message`` are mutable string-keyed mappings,
``receive`` and ``send`` are the coroutines the server hands the application. This module imports nothing of
mcpkit, so any layer may use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeAlias

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = ["ASGIApp", "Message", "Receive", "Scope", "Send"]
