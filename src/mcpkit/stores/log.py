"""The interface of a fan-out shared by the workers of one deployment (:class:`SharedFanout`), for a Streamable HTTP
endpoint whose clients may reach any worker with any request (a load balancer without stickiness).

Such a fan-out (:class:`~mcpkit.stores.redis.RedisFanout`) keeps every event in ONE ordered log that every worker
reads, and gives each worker a number and an inbox:

* **Positions.** Each event has a position in the log (an opaque string, ordered). A worker's reader delivers the
  events in log order, with :data:`LOG_POSITION` set to the event's position while the server delivers it; the
  endpoint uses it as the SSE event id of a handshake session's standalone (GET) stream. That stream is therefore
  the log filtered for one session: any worker can replay it from a ``Last-Event-ID`` (:meth:`SharedFanout.read`),
  so a client that loses its worker (killed, drained) resumes on another without losing or repeating an event.
* **Session messages.** What the server sends a session outside any request (a request of a background task, a
  message of a JSON-mode answer) is logged for that session (:meth:`SharedFanout.post`) and sent by the worker that
  holds (or next opens) the session's GET stream; a client's cancellation of a request running elsewhere is logged
  the same way (kind ``"cancel"``).
* **Worker numbers.** Each worker has a number (:attr:`SharedFanout.worker`, unique among live workers); the engine
  numbers the requests it sends from :attr:`SharedFanout.id_base` (``worker << ID_SHIFT``), so ids are unique across
  workers and :func:`worker_of` finds the worker that waits for an answer: a client's answer that reaches another
  worker is forwarded there (:meth:`SharedFanout.forward`).

Nothing here imports Redis.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any, NamedTuple, Protocol, runtime_checkable

from ..hosting import Fanout

#: Request ids a worker sends are ``worker << ID_SHIFT`` plus a count (JSON numbers below 2**53 for 2**20 workers).
ID_SHIFT = 32

#: The log position of the event being delivered (set by a shared fan-out's reader around the server's delivery;
#: ``""`` for a "look again" notice after a gap, None outside a delivery).
LOG_POSITION: ContextVar[str | None] = ContextVar("mcpkit_log_position", default=None)

__all__ = ["ID_SHIFT", "LOG_POSITION", "LogEntry", "SharedFanout", "is_number", "position_order", "worker_of"]


class LogEntry(NamedTuple):
    """One event of the log as a reader sees it."""

    position: str
    kind: str  # "list_changed", "resource_updated", "session", "direct", "cancel"; inbox: "forward", "legacy"
    value: str  # a list kind, a URI or a session id
    data: bytes | None = None  # inline bytes ("cancel", "forward", "legacy")
    ref: str | None = None  # where a "direct" message's bytes are kept (see SharedFanout.payload)
    owner: str | None = None  # an inbox message: the principal the forwarding worker authenticated (JSON), if any


def worker_of(request_id: Any) -> int | None:
    """The worker that sent the request with this id (None: not a worker-numbered id)."""
    if type(request_id) is int and request_id >> ID_SHIFT:
        return int(request_id >> ID_SHIFT)
    return None


def is_number(text: str) -> bool:
    """Whether ``text`` is a number of an event id or a log position a client sent back: ASCII digits (Latin-1
    superscripts pass ``str.isdigit()``, not ``int()``), at most 20 (an unsigned 64-bit number: ``int()`` refuses
    more than 4300, and nothing this side numbers past 64 bits)."""
    return 0 < len(text) <= 20 and text.isascii() and text.isdigit()


def position_order(position: str) -> int:
    """An integer that orders log positions (``<ms>-<n>``) as the log does; 0 for anything else."""
    ms, _, n = position.partition("-")
    if not (is_number(ms) and is_number(n)):
        return 0
    return (int(ms) << 32) + int(n)


@runtime_checkable
class SharedFanout(Fanout, Protocol):
    """A :class:`~mcpkit.hosting.Fanout` whose events are an ordered, replayable log shared by every worker, with
    worker numbers and inboxes (see the module docstring)."""

    @property
    def worker(self) -> int:
        """This worker's number (0 until the fan-out started)."""
        ...

    @property
    def id_base(self) -> int:
        """What the engine adds to its request counter (``worker << ID_SHIFT``)."""
        ...

    @property
    def position(self) -> str | None:
        """The position of the last event this worker delivered (None until started)."""
        ...

    async def read(self, after: str, limit: int = 500) -> list[LogEntry] | None:
        """Up to ``limit`` entries after ``after`` (``""``: from the oldest kept), in order; None when some after
        ``after`` were already trimmed (a gap)."""
        ...

    async def post(self, session_id: str, kind: str, data: bytes) -> str:
        """Log a message for one session (``"direct"``: for its standalone stream; ``"cancel"``: a client's
        cancellation); returns its position. Raises ``ConnectionError`` when the log cannot be reached."""
        ...

    async def payload(self, entry: LogEntry) -> bytes | None:
        """The bytes of a ``"direct"`` entry (None once expired)."""
        ...

    async def forward(
        self, worker: int, session_id: str, data: bytes, *, kind: str = "forward", owner: str | None = None
    ) -> bool:
        """Put a client's message in another worker's inbox (``"forward"``: an answer or a progress notification
        for a handshake session; ``"legacy"``: a POST of a legacy HTTP+SSE session, with the principal the sender
        authenticated as ``owner``); False when that worker is gone."""
        ...

    async def alive(self, worker: int) -> bool:
        """Whether a worker is running (its heartbeat is fresh)."""
        ...

    def on_session_event(self, listener: Callable[[LogEntry], Awaitable[None]]) -> None:
        """Call ``await listener(entry)`` for ``"direct"`` and ``"cancel"`` entries and for this worker's inbox
        messages (kinds ``"forward"`` and ``"legacy"``)."""
        ...

    async def check(self) -> str | None:
        """Why this worker is not ready (None: it is): Redis unreachable, the reader not running."""
        ...
