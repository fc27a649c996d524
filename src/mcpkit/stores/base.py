"""The optional capabilities of a session store, declared with their defaults (:class:`BaseSessionStore`), the
error every shared store raises when its backend cannot be reached (:class:`StoreUnavailable`), the breaker that
raises it (:class:`Breaker`, the base of the Redis and PostgreSQL connections), the URL of a backend as
messages show it (:func:`without_password`), and what the shared event stores check and keep alike (their bounds,
the id of the request a stream answers)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

if TYPE_CHECKING:
    from types import TracebackType


class StoreUnavailable(ConnectionError):
    """A shared store's backend (Redis, PostgreSQL) could not be reached in time, or failed less than its breaker's
    window ago. The HTTP endpoint answers a request that needs the store with 503 and this message. Importable as
    ``mcpkit.stores.redis.StoreUnavailable`` and ``mcpkit.stores.postgres.StoreUnavailable`` too (one class)."""


class _Guard:
    __slots__ = ("conn", "what")

    def __init__(self, conn: Breaker, what: str) -> None:
        self.conn: Breaker = conn
        self.what: str = what

    async def __aenter__(self) -> None:
        self.conn.check(self.what)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        conn = self.conn
        if exc is None:
            conn.failed_at = 0.0
        elif isinstance(exc, conn.errors) and not isinstance(exc, StoreUnavailable):
            conn.failed(exc)
            raise StoreUnavailable(f"{self.what}: {conn.backend} is unavailable ({conn.last_error})") from exc


class Breaker:
    """The breaker of a shared store's connection (:class:`~mcpkit.stores.redis.RedisConnection`,
    :class:`~mcpkit.stores.postgres.PostgresConnection`): a statement that fails for want of the backend (one of
    :attr:`errors`) raises :class:`StoreUnavailable`, and for :attr:`breaker` seconds afterwards every guarded
    statement raises it at once, with the same message, without waiting again; the first one after that window
    tries the backend again.

    Args:
        breaker: seconds the breaker stays open after a failure.
        errors: the exceptions that mean the backend is unreachable or stalled (not a refused statement).
    """

    #: The backend's name in messages ("Redis", "PostgreSQL").
    backend: ClassVar[str] = "the store"

    def __init__(self, breaker: float, errors: tuple[type[BaseException], ...]) -> None:
        self.breaker: float = breaker
        self.errors: tuple[type[BaseException], ...] = errors
        self.failed_at: float = 0.0  # monotonic time of the last failure (0: none since the last success)
        #: Monotonic time of the last failure ever (successes do not reset it).
        self.last_failed_at: float = float("-inf")
        self.last_error: str = ""

    def check(self, what: str) -> None:
        """Raise :class:`StoreUnavailable` at once while the breaker is open (the backend failed under
        :attr:`breaker` seconds ago), with the same message as the failure that opened it (the HTTP endpoint's
        503 adds "retry shortly")."""
        failed = self.failed_at
        if failed and time.monotonic() - failed < self.breaker:
            raise StoreUnavailable(f"{what}: {self.backend} is unavailable ({self.last_error})")

    def failed(self, exc: BaseException) -> None:
        """Record a failure (opens the breaker)."""
        self.failed_at = self.last_failed_at = time.monotonic()
        self.last_error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__

    def guard(self, what: str) -> _Guard:
        """``async with conn.guard("session store"):`` around a backend's statements: fails at once while the
        breaker is open, and turns a failure for want of the backend into :class:`StoreUnavailable` (opening the
        breaker)."""
        return _Guard(self, what)

    @property
    def available(self) -> bool:
        """False while the breaker is open."""
        return not (self.failed_at and time.monotonic() - self.failed_at < self.breaker)


def without_password(url: str) -> str:
    """``url`` with the password of its user info masked (error messages end up in logs)."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    user, colon, _ = userinfo.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{tail}"


#: Longest request id an event store keeps with a stream (JSON bytes); a longer one is not kept (its stream is
#: followed as before, but a follower whose writer died cannot answer that request).
MAX_REQUEST_ID_BYTES = 256


def check_event_bounds(
    max_events_per_stream: int, max_streams_per_session: int, max_bytes_per_session: int, ttl: float | None
) -> None:
    """Refuse (``ValueError``) the bounds of a shared event store that would keep nothing or never expire."""
    if max_events_per_stream < 1:
        raise ValueError("max_events_per_stream must be at least 1")
    if min(max_streams_per_session, max_bytes_per_session) < 1:
        raise ValueError("max_streams_per_session and max_bytes_per_session must be at least 1")
    if ttl is not None and ttl <= 0:
        raise ValueError("ttl must be positive (or None)")


def request_id_json(request_id: str | int) -> bytes | None:
    """The id of the request a stream answers as an event store keeps it (JSON; an integer of any size as its
    digits), or None when it is longer than :data:`MAX_REQUEST_ID_BYTES`."""
    rid = b"%d" % request_id if type(request_id) is int else orjson.dumps(request_id)
    return rid if len(rid) <= MAX_REQUEST_ID_BYTES else None


def request_id_from_json(raw: bytes | str | None) -> str | int | None:
    """The request id :func:`request_id_json` kept (string or integer as it was); None for none or a damaged one."""
    if not raw:
        return None
    text = raw.decode() if isinstance(raw, bytes) else raw
    if text.lstrip("-").isdigit():  # (an integer, beyond 64 bits too)
        return int(text)
    try:
        rid = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return rid if isinstance(rid, str) else None


class BaseSessionStore:
    """A :class:`~mcpkit.stores.SessionStore` with its optional capability declared: :meth:`touch`, with a default.

    The built-in stores derive from it and override :meth:`touch` (one step, one round trip). The Streamable HTTP
    endpoint calls :meth:`touch` on a store of this class; any other object with ``save``, ``load`` and
    ``delete`` (the :class:`~mcpkit.stores.SessionStore` protocol: a store written before this class existed) is
    read with ``load`` and renewed with ``save`` every third of its TTL, as before."""

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        """Record the session's state, its TTL renewed to ``ttl`` seconds (None: no expiry)."""
        raise NotImplementedError

    async def load(self, session_id: str) -> dict[str, Any] | None:
        """The session's state, or None when the store does not have it (or it expired)."""
        raise NotImplementedError

    async def delete(self, session_id: str) -> None:
        """Forget the session."""
        raise NotImplementedError

    async def touch(self, session_id: str, ttl: float | None) -> dict[str, Any] | None:
        """The session's state (None if gone or expired), its TTL renewed to ``ttl``. Default: :meth:`load`, then
        :meth:`save` of what it read; a store that reads and renews in one step overrides it."""
        state = await self.load(session_id)
        if state is not None:
            await self.save(session_id, state, ttl)
        return state
