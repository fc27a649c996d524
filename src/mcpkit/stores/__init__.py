"""Where state outlives one HTTP request: SSE events kept for replay, and handshake-session records.

Both are protocols so a shared backend (Redis, ...) can replace the bounded in-memory defaults of
:mod:`mcpkit.stores.memory` without touching the transports.

* :class:`EventStore`: the Streamable HTTP server appends every SSE event it sends on a resumable stream
  (``stream`` is an opaque key unique per stream, ``seq`` increases by one from 1) and replays the events after a
  client's ``Last-Event-ID``. ``replay`` returns None when it cannot replay without a gap (unknown stream, or
  events already evicted): the server then refuses the resumption rather than silently losing messages.
* :class:`FollowableEventStore`: an event store shared by workers whose streams another worker can follow.
* :class:`RequestEventStore`: a followable store that also keeps the id of the request a stream answers, so a
  worker following a stream whose writer is gone answers that request with an error instead of ending silently.
* :class:`SessionStore`: the state of a handshake-era session (version, client capabilities and info, log level,
  subscriptions) as a JSON-able dict, so another worker can restore a session it did not create. The store is the
  truth for every worker: the HTTP endpoint re-reads the record on each request (DELETE anywhere means 404
  everywhere). A store derived from :class:`BaseSessionStore` declares ``async touch(session_id, ttl) -> state |
  None`` too (read and renew the TTL in one step; both built-in stores do it in one round trip); any other store
  is read with ``load`` and renewed with ``save``.
* :class:`TaskStore`: where a server's tasks are kept (:mod:`mcpkit.tasks`; the in-memory default is
  :class:`InMemoryTaskStore`, ``mcpkit.stores.redis.RedisTaskStore`` shares them between workers).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from ..tasks.store import InMemoryTaskStore, TaskStore
from .base import BaseSessionStore
from .memory import InMemoryEventStore, InMemorySessionStore


@runtime_checkable
class EventStore(Protocol):
    async def append(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event ``seq`` (1, 2, ...) of ``stream``."""
        ...

    async def replay(self, stream: str, after: int) -> list[tuple[int, bytes]] | None:
        """The events of ``stream`` with ``seq > after``, in order; None if that cannot be done without a gap."""
        ...

    async def forget(self, prefix: str) -> None:
        """Drop every stream whose key starts with ``prefix`` (a session ended)."""
        ...


@runtime_checkable
class FollowableEventStore(EventStore, Protocol):
    """An :class:`EventStore` shared by several workers, whose streams a worker that does not write them can follow
    (:class:`~mcpkit.stores.redis.RedisEventStore`): a client that resumes a request's stream on another worker
    than the one running the request gets its events as they are written, up to the answer."""

    async def append_last(self, stream: str, seq: int, data: bytes) -> None:
        """Keep event ``seq`` as the last of ``stream`` (the answer that ends it)."""
        ...

    async def follow(self, stream: str, after: int, timeout: float) -> tuple[list[tuple[int, bytes]], bool] | None:
        """The events after ``after`` as they come (waiting up to ``timeout`` seconds for the first) and whether the
        last one is among them; None when the stream is gone."""
        ...


@runtime_checkable
class RequestEventStore(FollowableEventStore, Protocol):
    """A :class:`FollowableEventStore` that keeps, with a request's stream, the id of the request whose answer
    ends it (:class:`~mcpkit.stores.redis.RedisEventStore`): a client that resumes the stream on another worker
    after the worker running the request died gets a JSON-RPC error for that request (-32603, "retry") instead of
    a stream that ends without an answer."""

    async def append_first(self, stream: str, seq: int, data: bytes, request_id: str | int) -> None:
        """Keep event ``seq`` (the first of ``stream``) and, with the stream, the id of the request it answers."""
        ...

    async def request_of(self, stream: str) -> str | int | None:
        """The id kept by :meth:`append_first` for ``stream``; None when there is none (or it expired)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None: ...

    async def load(self, session_id: str) -> dict[str, Any] | None: ...

    async def delete(self, session_id: str) -> None: ...


__all__ = [
    "BaseSessionStore",
    "EventStore",
    "FollowableEventStore",
    "InMemoryEventStore",
    "InMemorySessionStore",
    "InMemoryTaskStore",
    "RequestEventStore",
    "SessionStore",
    "TaskStore",
]
