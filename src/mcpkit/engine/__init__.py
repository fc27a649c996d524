"""The engine: one JSON-RPC peer shared by client and server, and what it hands a transport.

A :class:`Peer` knows JSON-RPC messages, not bytes on a socket: a transport hands it framed payloads and gives it
an :class:`Outbox` to write to. Each message the engine writes comes with its :class:`Outgoing` (what it is: a
request, a notification, a result, an error and its code, a batch's answer), so a transport routes messages
without reading the engine's bytes. Modules, one idea each:

- :mod:`.messages`: :class:`Outgoing` and its kinds; the interfaces a transport implements (:class:`Outbox`,
  :class:`Connection`) and :data:`NULL_OUTBOX`; the batch limits' texts.
- :mod:`.context`: :class:`RequestContext`, one incoming request being handled.
- :mod:`.outgoing`: the requests a peer sends; :func:`watch_sent` shows their ids as they go out.
- :mod:`.peer`: :class:`Peer`: ids, concurrency slots, timeouts, cancellation, progress, batches, draining.
- :mod:`.tap`: the message tap (:class:`TapEvent`, :class:`TapRecorder`): every message a peer receives or sends,
  shown to an observer.
"""

from __future__ import annotations

from .context import RequestContext
from .messages import (
    BATCH,
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_MESSAGE_SIZE,
    ERROR,
    MODERN_BATCH_REFUSAL,
    NOTIFICATION,
    NULL_OUTBOX,
    ORIGIN,
    REQUEST,
    RESULT,
    UNKNOWN,
    BaseConnection,
    Connection,
    NullOutbox,
    Outbox,
    Outgoing,
    batch_too_long,
    describe,
)
from .outgoing import ProgressCallback, RequestDone, RequestTracer, SentWatcher, watch_sent
from .peer import BatchPolicy, NotificationHandler, Peer, RequestHandler
from .tap import IN, OUT, Tap, TapEvent, TapHub, TapRecorder, hub_of

__all__ = [
    "BATCH",
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_MESSAGE_SIZE",
    "ERROR",
    "IN",
    "MODERN_BATCH_REFUSAL",
    "NOTIFICATION",
    "NULL_OUTBOX",
    "ORIGIN",
    "OUT",
    "REQUEST",
    "RESULT",
    "UNKNOWN",
    "BatchPolicy",
    "BaseConnection",
    "Connection",
    "NotificationHandler",
    "NullOutbox",
    "Outbox",
    "Outgoing",
    "Peer",
    "ProgressCallback",
    "RequestContext",
    "RequestDone",
    "RequestHandler",
    "RequestTracer",
    "SentWatcher",
    "Tap",
    "TapEvent",
    "TapHub",
    "TapRecorder",
    "batch_too_long",
    "describe",
    "hub_of",
    "watch_sent",
]
