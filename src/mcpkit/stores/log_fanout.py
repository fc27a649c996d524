"""What every fan-out over a shared notification log does, whatever holds the log: :class:`LogFanout`.

:class:`~mcpkit.stores.redis.RedisFanout` (a Redis stream) and :class:`~mcpkit.stores.postgres.PostgresFanout` (a
table) derive from it; each keeps only its storage: append an event to the log, read the events after a position,
find the oldest one kept, take a worker number, wait for news, take from this worker's inbox, beat, let go.

This base holds the rest, the same for both: the publish path and its outbox (an event the log cannot take waits
here, at most ``max_unsent``, and is logged in order when the log is back; beyond, the oldest are dropped and the
other workers are told to look again), starting in the background until the store answers, the log's reader (in
order, its own events included, each delivered at its position; back after losing the store, it catches up, and if
the log was trimmed past its position meanwhile it tells its clients to look again: ``deliver_missed``), the inbox's
reader, the heartbeat loop, the listeners, readiness and shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from ..hosting import deliver
from .base import StoreUnavailable
from .log import ID_SHIFT, LOG_POSITION, LogEntry, position_order

if TYPE_CHECKING:
    from ..hosting import FanoutTarget

__all__ = ["LogFanout", "Logged"]

#: Events (or inbox messages) one read takes at most.
BATCH: int = 256
#: Worker numbers cycle through 1 .. 2**20 - 1.
WORKERS: int = (1 << 20) - 1
#: Numbers a starting worker tries past the live ones.
TAKE_TRIES: int = 1024
_KINDS = frozenset(("list_changed", "resource_updated", "session", "direct", "cancel"))


class _Store(Protocol):
    """What the shared logic needs of a backend's connection (its breaker and its ping)."""

    failed_at: float
    last_error: str
    timeout: float

    @property
    def available(self) -> bool: ...

    async def ping(self) -> None: ...

    async def aclose(self) -> None: ...


C = TypeVar("C", bound=_Store)


class Logged(NamedTuple):
    """One event as the log holds it."""

    position: str
    origin: str  # the worker that logged it (its ``origin``)
    kind: str
    value: str
    data: bytes | None = None  # a message kept inline (a cancellation)
    ref: str | None = None  # where a ``"direct"`` message's bytes are
    late: bool = False  # logged late: the worker that logged it told its clients when it happened


class LogFanout(Generic[C]):
    """The part of a :class:`~mcpkit.stores.log.SharedFanout` that does not depend on the store (see the module
    docstring); a backend derives from it and gives its storage."""

    conn: C
    channel: str
    _owns: bool
    _store: str = ""  # the store's name in readiness reasons ("Redis")
    _logger: logging.Logger = logging.getLogger("mcpkit.stores")
    _name: str = ""  # the prefix of its log lines ("redis")

    def __init__(self, *, max_log: int, max_inbox: int, message_ttl: float, heartbeat: float, max_unsent: int) -> None:
        if heartbeat <= 0 or message_ttl <= 0:
            raise ValueError("heartbeat and message_ttl must be positive")
        self.max_log: int = max_log
        self.max_inbox: int = max_inbox
        self.message_ttl: float = message_ttl
        self.heartbeat: float = heartbeat
        self.max_unsent: int = max_unsent
        self.origin: str = secrets.token_hex(8)
        self.published: int = 0
        self.received: int = 0  # events from other workers delivered here
        self.missed: int = 0  # gaps found (the log was trimmed past this worker's position while it was cut off)
        self.forwarded: int = 0  # messages put into other workers' inboxes
        self.server: FanoutTarget | None = None
        self._worker = 0
        self._position: str | None = None
        self._session_listeners: list[Callable[[str], Awaitable[None]]] = []
        self._event_listeners: list[Callable[[LogEntry], Awaitable[None]]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._first: asyncio.Future[None] | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._reading = False  # the log reader's last read succeeded
        self._checked: tuple[float, str | None] = (-1.0, None)  # the last readiness ping: (when, why not ready)
        self._unsent: deque[tuple[str, str]] = deque()  # events the log could not take yet (this worker's)
        self._overflowed = False
        self._warned = 0.0
        self._closed = False

    # ------------------------------------------------------------------ the storage (each backend's)

    async def _append(self, kind: str, value: str, data: bytes | None = None, *, late: bool = False) -> str:
        """Add an event to the log; its position."""
        raise NotImplementedError

    async def _claim(self) -> tuple[int, str]:
        """Take a free worker number (its inbox emptied) and log ``"start"``: the number and that position."""
        raise NotImplementedError

    async def _wait_log(self, full: bool) -> bool:
        """Wait for news of the log before the next read (``full``: the last read took a whole batch, read on at
        once); True when events may have been missed meanwhile. Default: no wait (the read itself blocks)."""
        return False

    async def _read_after(self, position: str) -> list[Logged]:
        """Up to :data:`BATCH` events after ``position``, in order."""
        raise NotImplementedError

    async def _oldest(self) -> Logged | None:
        """The oldest event the log keeps (None: the log is empty)."""
        raise NotImplementedError

    async def _take_inbox(self, full: bool) -> list[LogEntry]:
        """Up to :data:`BATCH` messages of this worker's inbox, in order, taken out of it (waiting for one unless
        ``full``)."""
        raise NotImplementedError

    async def _refresh(self) -> None:
        """One heartbeat: this worker's number stays taken for three more."""
        raise NotImplementedError

    async def _release(self) -> None:
        """At shutdown: let this worker's number and inbox go, close what the backend holds of its own."""
        raise NotImplementedError

    def _read_failed(self, exc: Exception) -> None:
        """The log's reader failed (the backend may open its breaker)."""

    def _read_ok(self) -> None:
        """The log's reader read (the backend may close its breaker)."""

    # ------------------------------------------------------------------ the Fanout interface

    @property
    def running(self) -> bool:
        """True once this worker reads the log."""
        return self._position is not None and not self._closed

    def bind(self, server: FanoutTarget) -> None:
        if self.server is not None and self.server is not server:
            raise ValueError("this fan-out already serves another server: give each server its own")
        self.server = server

    async def publish(self, event: str, value: str) -> None:
        """Log ``event``; every worker, this one too, delivers it from the log in one order (before this worker
        reads the log, it delivers its own at once). When the log cannot be reached, this worker's clients are told
        at once and the event waits in this worker's outbox (at most ``max_unsent``) until the log can be reached
        again: the other workers get it late, not never."""
        if self._closed:
            return
        here = not self.running  # (before this worker reads the log, it delivers its own events at once)
        if not self._unsent:  # (while some wait, later ones wait behind them: one order)
            try:
                await self._append(event, value, late=here)
            except Exception as exc:
                self._warn("could not log %s (told this worker's clients; the others later): %s", event, exc)
            else:
                self.published += 1
                if here:
                    await self._deliver_here(event, value)
                return
        self._hold(event, value)
        await self._deliver_here(event, value)

    async def _deliver_here(self, event: str, value: str) -> None:
        """This worker's clients get an event the log does not deliver here (no position: GET streams send it
        without an id)."""
        token = LOG_POSITION.set("")
        try:
            await deliver(self.server, event, value)
        finally:
            LOG_POSITION.reset(token)

    def _hold(self, event: str, value: str) -> None:
        """Keep an event the log could not take (logged late: this worker delivered it already)."""
        if len(self._unsent) >= self.max_unsent:
            self._unsent.popleft()
            self._overflowed = True  # the others will be told to look again
        self._unsent.append((event, value))

    async def _flush(self) -> None:
        """Log what waits in the outbox, in order (the log is reachable again)."""
        if self._overflowed:
            await self._append("missed", "", late=True)
            self._overflowed = False
        while self._unsent:
            event, value = self._unsent[0]
            await self._append(event, value, late=True)
            self._unsent.popleft()
            self.published += 1

    def on_session_changed(self, listener: Callable[[str], Awaitable[None]]) -> None:
        if listener not in self._session_listeners:
            self._session_listeners.append(listener)

    async def session_changed(self, session_id: str) -> None:
        """Tell the other workers that a session's record changed (they reload it before their next delivery)."""
        if self._closed:
            return
        if not self._unsent:
            try:
                await self._append("session", session_id)
                return
            except Exception as exc:  # (the others re-read the record on the session's next request anyway)
                self._warn("could not announce a change of session %s (later): %s", session_id[:8], exc)
        self._hold("session", session_id)

    async def start(self) -> None:
        """Take a worker number and start reading the log and the inbox (idempotent). When the store cannot be
        reached this raises, and keeps trying in the background until it can."""
        if self.running or self._closed:
            return
        if self._first is None:
            loop = asyncio.get_running_loop()
            self._first = loop.create_future()
            self._supervisor = loop.create_task(self._start_until_started(self._first))
        await asyncio.shield(self._first)

    async def _start_until_started(self, first: asyncio.Future[None]) -> None:
        delay = 0.1
        while not self._closed:
            try:
                await self._start()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if not first.done():
                    first.set_exception(exc)
                    first.exception()  # (retrieved: the caller may not be waiting any more)
                self._warn("the notification log is unreachable (retrying): %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            if not first.done():
                first.set_result(None)
            else:
                self._first = asyncio.get_running_loop().create_future()
                self._first.set_result(None)
            return

    async def _start(self) -> None:
        self._worker, self._position = await self._claim()
        self._reading = True
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._read_log()),
            loop.create_task(self._read_inbox()),
            loop.create_task(self._beat()),
        ]

    async def aclose(self) -> None:
        """Stop reading, let the worker number go, close the connection if this fan-out made it."""
        if self._closed:
            return
        self._closed = True
        self._session_listeners.clear()
        self._event_listeners.clear()
        tasks = [t for t in (self._supervisor, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        if self._unsent and self._position is not None:  # one last try for what waits (bounded by the timeout)
            self.conn.failed_at = 0.0  # (a real try, whatever the breaker says: nothing comes after this one)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._flush(), 5 * self.conn.timeout)
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        await self._release()
        if self._owns:
            await self.conn.aclose()

    # ------------------------------------------------------------------ the SharedFanout interface

    @property
    def worker(self) -> int:
        """This worker's number (0 until started)."""
        return self._worker

    @property
    def id_base(self) -> int:
        """What the engine adds to its request counter: ``worker << ID_SHIFT``."""
        return self._worker << ID_SHIFT

    @property
    def position(self) -> str | None:
        """The position of the last event this worker delivered."""
        return self._position

    def on_session_event(self, listener: Callable[[LogEntry], Awaitable[None]]) -> None:
        if listener not in self._event_listeners:
            self._event_listeners.append(listener)

    async def check(self) -> str | None:
        """Why this worker is not ready, or None."""
        if self._closed:
            return "shutting down"
        if not self.running:
            return f"the notification log is unreachable ({self.conn.last_error or 'not started'})"
        if not self._reading:
            return f"the notification log reader lost {self._store} ({self.conn.last_error})"
        if not self.conn.available:
            return f"{self._store} is unavailable ({self.conn.last_error})"
        now = time.monotonic()
        if now - self._checked[0] >= 0.5:  # (one ping per half second, however often a probe asks)
            try:
                await self.conn.ping()
                reason = None
            except StoreUnavailable as exc:
                reason = str(exc)
            self._checked = (time.monotonic(), reason)
        return self._checked[1]

    # ------------------------------------------------------------------ internals

    def _warn(self, message: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._warned >= 5.0:  # one line per 5 s while the store is away, not one per event
            self._warned = now
            self._logger.warning("%s fan-out: " + message, self._name, *args)

    @staticmethod
    def _entry(event: Logged) -> LogEntry | None:
        if event.kind not in _KINDS:
            return None
        return LogEntry(event.position, event.kind, event.value, event.data, event.ref)

    async def _read_log(self) -> None:
        delay = 0.05
        lost = False
        full = False
        while not self._closed:
            try:
                if await self._wait_log(full):
                    lost = True
                if lost:
                    await self._catch_up()
                    lost = False
                assert self._position is not None
                events = await self._read_after(self._position)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._read_failed(exc)
                self._reading = False
                lost = True
                full = False
                self._warn("the notification log is unreachable (this worker catches up when it is back): %s", exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            self._reading = True
            self._read_ok()
            if self._unsent or self._overflowed:
                try:
                    await self._flush()
                except Exception as exc:
                    self._warn("could not log the events that waited: %s", exc)
            delay = 0.05
            full = len(events) >= BATCH
            for event in events:
                await self._deliver_at(event)

    async def _deliver_at(self, event: Logged) -> None:
        """Deliver one event of the log, then move this worker's position to it."""
        try:
            await self._deliver(event)
        except Exception:
            self._logger.exception("%s fan-out: could not deliver event %s", self._name, event.position)
        self._position = event.position  # (after the delivery: see SharedFanout.position)

    async def _catch_up(self) -> None:
        """Back after losing the store: if the log was trimmed past this worker's position (or lost: a store
        restarted without persistence), events may be missing: tell the clients to look again."""
        first = await self._oldest()
        assert self._position is not None
        if first is not None and position_order(first.position) <= position_order(self._position):
            return
        self.missed += 1
        self._logger.warning(
            "%s fan-out: events may have been lost while this worker was cut off; clients look again", self._name
        )
        await self._missed()
        if first is not None:  # everything before the oldest event is gone anyway
            await self._deliver_at(first)

    async def _missed(self) -> None:
        """Tell this worker's clients to look again (events may be lost): no log position to resume from."""
        server = self.server
        if server is None:
            return
        token = LOG_POSITION.set("")
        try:
            await server.deliver_missed()
        finally:
            LOG_POSITION.reset(token)

    async def _deliver(self, event: Logged) -> None:
        kind = event.kind
        own = event.origin == self.origin
        server = self.server
        if own and event.late:
            return  # logged late: this worker told its clients when it happened
        if kind == "list_changed" or kind == "resource_updated":
            if server is None:
                return
            token = LOG_POSITION.set(event.position)
            try:
                if kind == "list_changed":
                    await server.deliver_list_changed(event.value)
                else:
                    await server.deliver_resource_updated(event.value)
            finally:
                LOG_POSITION.reset(token)
        elif kind == "session":
            if own:
                return  # the worker that changed the record has it
            for listener in list(self._session_listeners):
                await listener(event.value)
        elif kind == "missed":  # another worker dropped events it could not log: look again
            await self._missed()
        elif kind == "direct" or kind == "cancel":
            entry = self._entry(event)
            if entry is not None:
                for event_listener in list(self._event_listeners):
                    await event_listener(entry)
        else:
            return
        if not own:
            self.received += 1

    async def _read_inbox(self) -> None:
        delay = 0.05
        full = False
        while not self._closed:
            try:
                entries = await self._take_inbox(full)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._warn("this worker's inbox is unreachable: %s", exc)
                full = False
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            full = len(entries) >= BATCH
            for entry in entries:
                for listener in list(self._event_listeners):
                    try:
                        await listener(entry)
                    except Exception:
                        self._logger.exception("%s fan-out: could not deliver a forwarded message", self._name)

    async def _beat(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.heartbeat)
            with contextlib.suppress(Exception):
                await self._refresh()
