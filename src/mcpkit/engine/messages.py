"""What the engine hands a transport: each outgoing message encoded, together with what it is.

An :class:`Outgoing` carries the bytes to write and the facts a transport may need to route them (a request, a
notification, a result, an error with its code, a batch's answer; the id, method and params), so no transport
ever parses or sniffs the engine's bytes. The engine delivers every message the same way: to an :class:`Outbox`,
except the answer of a request run on behalf of a request-scoped transport (an HTTP POST, both protocol eras),
which :meth:`~mcpkit.engine.Peer.handle` and :meth:`~mcpkit.engine.Peer.run_detached` return, since it is that
POST's response and not a message of the stream.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any, Final, NamedTuple, Protocol

from ..protocol import jsonrpc
from ..protocol.errors import ParseError
from ..protocol.jsonrpc import JSONDict, RequestId

# Outgoing.kind. Plain ints (see Outgoing): the transports compare them per message.
REQUEST: Final = 1
NOTIFICATION: Final = 2
RESULT: Final = 3
ERROR: Final = 4
BATCH: Final = 5  # the answer to a batch: an array of results and errors
UNKNOWN: Final = 0  # bytes that were not valid JSON-RPC (see describe)

#: The largest message every transport reads by default (a stdio line, an HTTP body or SSE event, a WebSocket
#: message), on both sides: ``max_message_size`` (``create_app(max_body=)``) changes it.
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
DEFAULT_MAX_BATCH_SIZE = 100  # messages in one incoming JSON-RPC batch (Peer(max_batch_size=...))
MODERN_BATCH_REFUSAL = "batches do not exist in 2026-07-28: send each request on its own"


def batch_too_long(length: int, limit: int) -> str:
    """The refusal of a batch longer than ``max_batch_size`` (one text for the engine and the HTTP transport)."""
    return (
        f"batch of {length} messages is longer than the limit of {limit}: send fewer messages per batch "
        "(the limit is the max_batch_size option)"
    )


def batch_refusal(batch: jsonrpc.Batch, accepted: bool, refusal: str, limit: int) -> str | None:
    """Why an incoming ``batch`` is refused whole, or None. ``accepted``: whether batches are accepted now (the
    peer's batch policy); ``refusal``: what a batch is told when they are not; ``limit``: ``max_batch_size``."""
    if not accepted:
        if any(type(item) is jsonrpc.Request and item.method == "initialize" for item in batch):  # type: ignore[union-attr]
            return "initialize MUST NOT be part of a batch: send it on its own"
        return refusal
    if len(batch) > limit:
        return batch_too_long(len(batch), limit)
    return None


class Outgoing(NamedTuple):
    """One encoded message the engine sends, and what it is.

    Attributes:
        data: the encoded message (compact JSON, no newline).
        kind: :data:`REQUEST`, :data:`NOTIFICATION`, :data:`RESULT`, :data:`ERROR` or :data:`BATCH`.
        id: the request id of a request, a result or an error (None for an error about an unreadable request,
            a notification and a batch's answer).
        method, params: a request's or a notification's.
        code: an error's JSON-RPC code (None otherwise).

    A named tuple: the one small object per message that the typing costs on the hot path (the engine makes a
    request's answer with ``tuple.__new__``, skipping the generated ``__new__``: see ``Peer._run_request``).
    """

    data: bytes
    kind: int
    id: RequestId | None = None
    method: str | None = None
    params: JSONDict | None = None
    code: int | None = None

    @property
    def is_error(self) -> bool:
        """An error response (a batch's answer is not one, whatever its members say)."""
        return self.kind == ERROR

    @property
    def is_answer(self) -> bool:
        """A result, an error or a batch's answer: what ends a request (not a request or a notification)."""
        return self.kind >= RESULT


#: an Outgoing made without the named tuple's own __new__, fields in order (hot path: docs/architecture.md)
new = tuple.__new__


def request(rid: RequestId, method: str, params: JSONDict | None) -> Outgoing:
    """An encoded request."""
    return new(Outgoing, (jsonrpc.encode_request(rid, method, params), REQUEST, rid, method, params, None))  # type: ignore[no-any-return]


def notification(method: str, params: JSONDict | None) -> Outgoing:
    """An encoded notification."""
    return new(Outgoing, (jsonrpc.encode_notification(method, params), NOTIFICATION, None, method, params, None))  # type: ignore[no-any-return]


def result(rid: RequestId, res: JSONDict) -> Outgoing:
    """An encoded result response (``res``: the result object)."""
    return new(Outgoing, (jsonrpc.encode_result(rid, res), RESULT, rid, None, None, None))  # type: ignore[no-any-return]


def error(rid: RequestId | None, err: JSONDict) -> Outgoing:
    """An encoded error response (``err``: the JSON-RPC error object)."""
    return Outgoing(jsonrpc.encode_error(rid, err), ERROR, rid, code=err.get("code"))


def batch(responses: bytearray) -> Outgoing | None:
    """A batch's answer from its members' comma-terminated answers (notifications from batched handlers leave as
    they come; the responses leave as one array), made in place. None when there is none."""
    if not responses:
        return None
    responses[-1:] = b"]"  # (the last member's comma)
    responses[0:0] = b"["
    return Outgoing(bytes(responses), BATCH)


def describe(data: bytes) -> Outgoing:
    """What bytes that did not come from the engine say (a message a test or a tool writes to a transport as is):
    parsed once. The engine's own messages always come with their :class:`Outgoing`."""
    try:
        msg: Any = jsonrpc.parse(data)
    except ParseError:
        return Outgoing(data, UNKNOWN)
    t = type(msg)
    if t is jsonrpc.Request:
        return Outgoing(data, REQUEST, msg.id, msg.method, msg.params)
    if t is jsonrpc.Notification:
        return Outgoing(data, NOTIFICATION, None, msg.method, msg.params)
    if t is jsonrpc.Response:
        return Outgoing(data, RESULT, msg.id)
    if t is jsonrpc.ErrorResponse:
        code = msg.error.get("code") if type(msg.error) is dict else None
        return Outgoing(data, ERROR, msg.id, code=code)
    if t is jsonrpc.Batch:
        return Outgoing(data, BATCH)
    return Outgoing(data, UNKNOWN)


class Outbox(Protocol):
    """Where a peer writes messages. Transports implement it (stdio pipe, SSE stream, ...).

    ``send`` gets the encoded bytes and, from the engine, their :class:`Outgoing` (None when the bytes come from
    elsewhere: a transport's own error, a test): a transport that only writes bytes ignores it."""

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None: ...


class Connection(Protocol):
    """A bidirectional message channel: ``receive()`` returns one framed payload or None at end of input (or raises
    :class:`~mcpkit.protocol.errors.ConnectionClosed` to end the input saying why); ``send`` is an :class:`Outbox`'s."""

    def receive(self) -> Coroutine[Any, Any, bytes | None]: ...  # (an ``async def receive`` is one)

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None: ...

    async def close(self) -> None: ...


#: On whose behalf a request goes out, and which request a server's request is about. A caller that sends for
#: someone sets it around the send (the task that sends sees it); a transport that relates the peer's requests to
#: the request they arrived on (Streamable HTTP: the POST's own stream) keeps it with them, and the client session
#: sets it again while its handlers answer one (:meth:`BaseConnection.related`) or handle a notification sent on it
#: (:meth:`BaseConnection.related_message`). None: nobody, or not known.
ORIGIN: ContextVar[object | None] = ContextVar("mcpkit_origin", default=None)


class BaseConnection:
    """A :class:`Connection` with its optional capabilities declared, each with a default that does nothing.

    A transport derives from it and overrides what it can do better. ``Server.serve`` and ``ClientSession`` call
    these methods on a connection of this class; any other object with ``receive``, ``send`` and ``close`` (the
    :class:`Connection` protocol: a transport written before these existed) is served the same way, with the
    defaults."""

    #: the transport it is, as OpenTelemetry's ``network.transport`` names it ("pipe", "tcp", "unix"; None: not
    #: known, in memory): ``Server.serve`` gives it to the session's peer (``Peer.network``)
    network: str | None = None

    #: whether :meth:`related` can tell which of this side's requests the peer's requests arrived on
    relates_requests: bool = False

    #: whether the ``feed`` of :meth:`set_fast_path` is called from a read callback that a hand-over of the event loop
    #: takes over (reading goes on on the stand-in: the stdio server's): a request it feeds may then run right there,
    #: without a task (``Server.serve`` gives it to the session's peer: ``Peer.feeds_in_reader``)
    feeds_in_reader: bool = False

    def receive(self) -> Coroutine[Any, Any, bytes | None]:
        """One framed payload, or None at the end of input (an ``async def receive`` overrides it; a transport
        may also hand out another coroutine, as stdio does, to save a frame per message)."""
        raise NotImplementedError

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        """Write one message (see :class:`Outbox`)."""
        raise NotImplementedError

    def send_now(self, data: bytes, msg: Outgoing | None = None) -> Awaitable[None] | None:
        """:meth:`send` without a coroutine when it has nothing to wait for: None when the message is written (or
        handed on) with no waiting, else what the caller awaits to finish it. The peer answers its requests
        through it. Default: :meth:`send`'s coroutine."""
        return self.send(data, msg)

    async def close(self) -> None:
        """Release the connection."""

    def set_fast_path(self, feed: Callable[[bytes], bool] | None, load: Callable[[], int] | None = None) -> None:
        """Shortcuts from the peer: ``feed`` (``Peer.feed``) takes a framed message as it arrives and returns True
        when it handled it (else the message goes through :meth:`receive`, in order); ``load``
        (``Peer.inflight_count``) counts the requests being worked on. Default: no fast path."""

    def set_request_failure(self, fail: Callable[[Any, BaseException], None] | None) -> None:
        """``fail(request_id, exc)`` (``Peer.fail_request``) fails a request this side sent with ``exc``: for a
        transport that learns in the background that a request's answer will not come (its HTTP exchange broke),
        so the caller gets the transport's own exception. Default: not used."""

    def set_protocol_version(self, version: str) -> None:
        """The protocol version the client negotiated (for a transport that sends it in headers). Default: nothing."""

    def related(self, request_id: Any) -> object | None:
        """The :data:`ORIGIN` of the request of this side that the peer's request ``request_id`` arrived in
        relation to (asked once: it is forgotten then); None when it came apart from any (or the transport cannot
        tell: :attr:`relates_requests`)."""
        return None

    def related_message(self) -> object | None:
        """The :data:`ORIGIN` of the request of this side on whose behalf the peer sent the message :meth:`receive`
        returned last (a notification about it: its log messages), as :meth:`related` tells of a request; None
        when it came apart from any (or the transport cannot tell: :attr:`relates_requests`)."""
        return None

    async def wait_ready(self) -> None:
        """After :meth:`set_protocol_version`: until the connection can take the session's messages (a transport
        that opens a stream for the server's own messages waits until it is open). Default: at once."""


class NullOutbox:
    """An outbox that drops what it is given: for messages that have nowhere to go (a stateless peer's own
    notifications, the answer to a request whose real answer travels another way)."""

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        return None


NULL_OUTBOX = NullOutbox()
