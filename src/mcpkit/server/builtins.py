"""Methods every server answers itself: ping, logging/setLevel, resources/(un)subscribe (handshake era) and
server/discover, subscriptions/listen (2026-07-28)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ..hosting import HostedServer
from ..protocol.changes import PendingChanges
from ..protocol.errors import InternalError, InvalidParams, InvalidRequest, MethodNotFound
from ..protocol.jsonrpc import JSONDict
from ..protocol.versions import LOG_LEVELS, META_SUBSCRIPTION_ID
from .request_context import ServerRequestContext, at_token_expiry

logger: logging.Logger = logging.getLogger("mcpkit.server")

#: ``subscriptions/listen`` streams one connection (stdio, WebSocket) may hold open at once. Each holds one of the
#: connection's request slots (``Peer(max_concurrency=)``, 256) for as long as it is open; with every slot taken
#: by a stream that never ends by itself, no other request of the connection would run: they would wait in its
#: waiting line, and once that is full the reader would wait too (no cancellation read, the end of stdin never
#: seen). Well below the slots, so requests still flow.
MAX_LISTENS_PER_CONNECTION = 64


def checked_queue_size(listen_queue_size: int) -> int:
    """``listen_queue_size`` once checked (a ``Server``'s): at least 1, else ValueError."""
    if listen_queue_size < 1:
        raise ValueError(f"listen_queue_size must be at least 1, not {listen_queue_size}")
    return listen_queue_size


class Listener:
    """One ``subscriptions/listen`` stream (modern era): the notifications waiting to be written to it.

    A stream that falls behind (a client reading slowly, a burst of changes) follows the rule a client's watch
    follows (:class:`~mcpkit.protocol.changes.PendingChanges`): every notification is kept while the queue
    (``listen_queue_size``) has room; once it is full, one equal to a notification still waiting (a list's
    ``list_changed``, ``resources/updated`` of the same URI) is merged into it, since the client re-reads the list
    or the resource once for both. When distinct notifications overflow the queue, some would be lost: the stream
    ends at once with an error instead, so the client knows to listen again and re-read what it watches."""

    __slots__ = (
        "_waiter",
        "ended",
        "filter",
        "items",
        "maxsize",
        "overflowed",
        "removers",
        "session",
        "sub_id",
        "uris",
    )

    def __init__(self, agreed: JSONDict, sub_id: str | int, maxsize: int) -> None:
        self.filter: JSONDict = agreed
        self.uris: frozenset[str] = frozenset(agreed.get("resourceSubscriptions") or ())
        self.items: PendingChanges = PendingChanges(maxsize)
        self.maxsize: int = maxsize
        self.ended: bool = False  # end once what waits is written
        self.overflowed: bool = False  # end now, with an error
        self._waiter: asyncio.Future[None] | None = None
        self.sub_id: str | int = sub_id
        self.removers: list[Callable[[], None]] = []  # what to undo when the stream ends (task watchers)
        self.session: object = None  # the connection's session it runs on (stdio, WebSocket), None over HTTP

    def end(self) -> None:
        """End the stream after what is queued (its result goes out): the token it was opened with expired, or
        the connection's input ended. Nothing is queued after it."""
        self.ended = True
        self._wake()

    def offer(self, method: str, params: JSONDict) -> None:
        if self.ended or self.overflowed:
            return
        if not self.items.add(method, params):
            logger.warning(
                "subscription %r: slow listener, %d notifications waiting; ending it", self.sub_id, len(self.items)
            )
            self.overflowed = True
            self.items.clear()
        self._wake()

    async def next(self) -> tuple[str, JSONDict] | None:
        """The next notification to write; None once the stream ends; raises when it fell behind (overflow)."""
        while True:
            if self.overflowed:
                raise InternalError(
                    f"subscription {self.sub_id!r} fell behind: more than {self.maxsize} distinct notifications "
                    "waited to be written (the server's listen_queue_size), so some were lost; listen again, then "
                    "list again and read again what it watches"
                )
            change = self.items.pop()
            if change is not None:
                return change
            if self.ended:
                return None
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class _Host(HostedServer, Protocol):
    """What the built-in methods need of their server (a ``Server``): typed here, so this module, which the server
    imports, imports nothing of ``server.lowlevel`` back."""

    instructions: str | None
    listen_queue_size: int
    max_subscriptions: int
    max_subscription_uri: int
    _listeners: set[Listener]
    tasks: Any  # the server's ServerTasks, or None


#: the member of a ``subscriptions/listen`` filter that asks for each list's list_changed
LIST_CHANGED_FILTER = {
    "tools": "toolsListChanged",
    "prompts": "promptsListChanged",
    "resources": "resourcesListChanged",
}


def _ping(server: _Host, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
    return {}  # (answered at once: a handler that returns a dict is not awaited)


async def _set_level(server: _Host, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
    if "logging" not in server.capabilities(ctx.features):
        raise MethodNotFound("Method not found: logging/setLevel (logging is not enabled)")
    level = params.get("level")
    if level not in LOG_LEVELS:
        raise InvalidParams(f"invalid log level {level!r}; expected one of {', '.join(LOG_LEVELS)}")
    assert ctx.session is not None
    if not ctx.session.stateless:  # (a stateless endpoint's session is every client's: nothing to keep)
        ctx.session.log_level = level
    return {}


def _subscription_uri(server: _Host, ctx: ServerRequestContext, params: JSONDict) -> str:
    res = server.capabilities(ctx.features).get("resources")
    if not isinstance(res, dict) or not res.get("subscribe"):
        raise MethodNotFound("Method not found: resources do not support subscriptions")
    uri = params.get("uri")
    if not isinstance(uri, str) or not uri:
        raise InvalidParams("uri must be a non-empty string")
    if len(uri) > server.max_subscription_uri:
        raise InvalidParams(_uri_too_long(server))
    return uri


def _uri_too_long(server: _Host) -> str:
    return (
        f"subscription URI longer than {server.max_subscription_uri} characters "
        "(the server's max_subscription_uri option)"
    )


async def _subscribe(server: _Host, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
    uri = _subscription_uri(server, ctx, params)
    assert ctx.session is not None
    if ctx.session.stateless:  # every client's session (stateless HTTP): no stream would carry the updates
        raise MethodNotFound(
            "Method not found: resources/subscribe: this endpoint is stateless (no session, no stream to carry "
            "notifications/resources/updated); it does not declare resources.subscribe"
        )
    subscriptions = ctx.session.subscriptions
    if len(subscriptions) >= server.max_subscriptions and uri not in subscriptions:
        raise InvalidRequest(
            f"too many subscriptions on this session (max_subscriptions={server.max_subscriptions}): "
            "unsubscribe from some first"
        )
    subscriptions.add(uri)
    return {}


async def _unsubscribe(server: _Host, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
    uri = _subscription_uri(server, ctx, params)
    assert ctx.session is not None
    ctx.session.subscriptions.discard(uri)
    return {}


async def _discover(server: _Host, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
    result: JSONDict = {
        "supportedVersions": server.supported_versions,
        "capabilities": server.capabilities(ctx.features),
    }
    if server.instructions:
        result["instructions"] = server.instructions
    return result


def _held(server: _Host, connection: object) -> int:
    """How many ``subscriptions/listen`` streams ``connection`` holds open."""
    return sum(1 for listener in server._listeners if listener.session is connection)


async def _listen(server: _Host, ctx: ServerRequestContext, params: JSONDict) -> JSONDict:
    requested = params.get("notifications", {})
    if not isinstance(requested, dict):
        raise InvalidParams("notifications must be an object")
    caps = server.capabilities(ctx.features)
    agreed: JSONDict = {}
    for kind, key in LIST_CHANGED_FILTER.items():
        if requested.get(key) is True and isinstance(caps.get(kind), dict) and caps[kind].get("listChanged"):
            agreed[key] = True
    uris = requested.get("resourceSubscriptions")
    if uris is not None:
        if not isinstance(uris, list) or not all(isinstance(u, str) for u in uris):
            raise InvalidParams("resourceSubscriptions must be an array of strings")
        if len(uris) > server.max_subscriptions:
            raise InvalidParams(
                f"too many resourceSubscriptions (max_subscriptions={server.max_subscriptions}): ask for fewer"
            )
        if any(len(u) > server.max_subscription_uri for u in uris):
            raise InvalidParams(_uri_too_long(server))
        res = caps.get("resources")
        if isinstance(res, dict) and res.get("subscribe"):
            agreed["resourceSubscriptions"] = list(dict.fromkeys(uris))
    task_ids = requested.get("taskIds")  # (the tasks extension's; a server without tasks agrees to none)
    tasks = server.tasks
    if isinstance(task_ids, list) and len(task_ids) > server.max_subscriptions:
        raise InvalidParams(f"too many taskIds (max_subscriptions={server.max_subscriptions}): ask for fewer")
    sub_id = ctx.request_id
    if not server.fanout.running:
        await server.start_fanout()  # changes made on other workers reach this stream from its acknowledgement on
    listener = Listener(agreed, sub_id, server.listen_queue_size)
    listener.session = connection = ctx.session  # (None over HTTP: there a stream is an HTTP request of its own)
    if task_ids is not None and tasks is not None:
        agreed["taskIds"] = await tasks.listen_for(ctx, task_ids, listener)
    if connection is not None and _held(server, connection) >= MAX_LISTENS_PER_CONNECTION:
        for remove in listener.removers:
            remove()
        raise InvalidRequest(
            f"too many subscriptions/listen streams open on this connection (max {MAX_LISTENS_PER_CONNECTION}): "
            "cancel one first, or ask for several notification types on one stream"
        )
    server._listeners.add(listener)  # (no await since the count: concurrent listens cannot all pass it)
    expiry = at_token_expiry(listener.end)  # (it ends with the token it was opened with)
    try:
        await ctx.rc.notify(
            "notifications/subscriptions/acknowledged",
            {"_meta": {META_SUBSCRIPTION_ID: sub_id}, "notifications": agreed},
        )
        while (item := await listener.next()) is not None:
            method, nparams = item
            await ctx.rc.notify(method, {**nparams, "_meta": {META_SUBSCRIPTION_ID: sub_id}})
    finally:
        if expiry is not None:
            expiry.cancel()
        server._listeners.discard(listener)
        for remove in listener.removers:
            remove()
    return {"_meta": {META_SUBSCRIPTION_ID: sub_id}}


#: the methods every server answers itself, each with its handler (the dispatcher's fallback)
BUILTINS: dict[str, Callable[[_Host, ServerRequestContext, JSONDict], Awaitable[JSONDict] | JSONDict]] = {
    "ping": _ping,
    "logging/setLevel": _set_level,
    "resources/subscribe": _subscribe,
    "resources/unsubscribe": _unsubscribe,
    "server/discover": _discover,
    "subscriptions/listen": _listen,
}
