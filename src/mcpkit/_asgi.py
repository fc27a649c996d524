"""The ASGI type aliases, defined once for every module of mcpkit that speaks ASGI (transports, auth, stores).

They follow the ASGI specification: a ``scope`` and each ``message`` are mutable string-keyed mappings,
``receive`` and ``send`` are the coroutines the server hands the application. This module imports nothing of
mcpkit, so any layer may use it; so may :func:`lifespan`, the one answerer of the ASGI lifespan protocol, and
:func:`read_rest` / :func:`read_body`, the one reader of request bodies (every endpoint and the dev
authorization server).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, Protocol, TypeAlias, runtime_checkable

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
ASGIApp: TypeAlias = Callable[[Scope, Receive, Send], Awaitable[None]]


@runtime_checkable
class HasProbes(Protocol):
    """An app with probe paths (liveness, readiness) that orchestrators and balancers GET without credentials: a
    wrapper that guards the app (``protect``) lets a GET of them through."""

    probe_paths: frozenset[str]


@runtime_checkable
class MakesInnerRequests(Protocol):
    """An app (or its server) whose requests make requests of other methods of it for the same caller (resources
    as tools: a ``tools/call`` of ``read_resource`` is a ``resources/read``): a wrapper that authorizes a request
    early (``protect``'s look at a POST body, for its HTTP 403 step-up challenge) asks about those as well."""

    def inner_requests(self, method: str, params: Mapping[str, Any]) -> tuple[tuple[str, dict[str, Any]], ...]:
        """The ``(method, params)`` of the requests a request of ``method`` with ``params`` makes."""
        ...


@runtime_checkable
class AsksAuthorization(Protocol):
    """An app (or its server) that asks the authorization about other requests too for some requests (tool
    search's ``call_tool``: the call of the tool it names): a wrapper that authorizes a request early
    (``protect``'s look at a POST body, for its HTTP 403 step-up challenge) asks about those as well."""

    def asked_too(self, method: str, params: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
        """The params of ``method`` the authorization is asked about too for a request of ``params``."""
        ...

    @property
    def asks_too(self) -> bool:
        """Whether :meth:`asked_too` may name any request now (False: it answers ``()`` to every one, so a caller
        on a hot path need not ask it). A server whose answer changes counts that in its ``handlers_version``."""
        ...


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


async def not_http(
    kind: str,
    receive: Receive,
    send: Send,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    on_startup: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """What an HTTP-only app does with a connection of scope type ``kind`` that is not ``"http"``: the lifespan
    protocol is answered (see :func:`lifespan`), a WebSocket is refused before the upgrade (HTTP 403 where the
    server has the denial extension, else close 1008), and any other type raises, as ASGI asks."""
    if kind == "lifespan":
        await lifespan(receive, send, on_shutdown, on_startup)
    elif kind == "websocket":
        await send({"type": "websocket.close", "code": 1008})
    else:
        raise RuntimeError(f"an HTTP app cannot serve {kind!r} connections")


class BodyTooLarge(ValueError):
    """A request body larger than the reader's limit."""


class Disconnected(ConnectionError):
    """The client left before its request body was read."""


async def read_rest(receive: Receive, first: Message, limit: int) -> bytes:
    """The request body after a first ``receive()`` (``first``) that may not have carried all of it: at most
    ``limit`` bytes (:class:`BodyTooLarge` past it; :class:`Disconnected` when the client leaves)."""
    message = first
    if message["type"] == "http.disconnect":
        raise Disconnected("the client disconnected")
    body = message.get("body", b"")
    chunks = [body]
    size = len(body)
    if size > limit:
        raise BodyTooLarge(f"request body larger than {limit} bytes")
    while message.get("more_body", False):
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected("the client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(f"request body larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of request header ``name`` (lower-case), decoded as latin-1 (ASGI servers give names in
    lower case; a name in another case matches too)."""
    for key, value in scope.get("headers", ()):
        if key == name or bytes(key).lower() == name:
            return bytes(value).decode("latin-1")
    return None


async def read_body(receive: Receive, limit: int) -> bytes:
    """The whole request body, at most ``limit`` bytes (see :func:`read_rest`)."""
    return await read_rest(receive, await receive(), limit)


__all__ = [
    "ASGIApp",
    "BodyTooLarge",
    "Disconnected",
    "Message",
    "Receive",
    "Scope",
    "Send",
    "header",
    "lifespan",
    "read_body",
    "read_rest",
]
