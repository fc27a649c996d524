"""Connection limits for the uvicorn server that :func:`mcpkit.transports.http.serve` runs.

uvicorn bounds request concurrency (``limit_concurrency``: 503 beyond) and idle keep-alive connections
(``timeout_keep_alive``), but not how long a client may take to send a request head, nor how many connections may
sit open doing nothing. A peer that opens thousands of connections and sends half a request line on each holds a
file descriptor and a protocol object per connection forever, until the process runs out of descriptors and new
clients time out. :func:`guarded_protocol` wraps uvicorn's HTTP/1.1 protocol class (h11, httptools or zttp) with a
:class:`ConnectionGuard` shared by every connection of one server:

* ``header_timeout``: a connection that has not sent a complete request head within this many seconds of
  connecting, or of the first byte of its next request (keep-alive; the pause between requests is uvicorn's
  ``timeout_keep_alive``, timed by uvicorn or, under the lane's protocol, by the guard: ``keep_alive``), is closed;
* ``body_timeout``: a request whose body has not arrived whole within this many seconds of its head is closed
  (a request body is at most ``max_body``, 4 MiB by default: 30 s allows ~140 KB/s);
* ``max_header_bytes``: a connection whose pending request head grows past this many bytes is closed (h11 also
  gets it as ``h11_max_incomplete_event_size`` and answers 400);
* ``send_timeout``: a connection whose peer has taken nothing of what it is sent for this many seconds (the
  socket's write buffer stays over its high-water mark) is aborted. Closing it would wait for that buffer to be
  sent, so a peer that stopped reading kept its socket, its buffers and its handler (e.g. of a legacy SSE stream
  whose session was dropped for not reading) for as long as it liked;
* ``max_connections`` (1024, or the open-file limit minus 200 when lower; see :func:`default_max_connections`):
  when a new connection would exceed this many, the connection that has been waiting longest for a request head
  (half-open or idle keep-alive), else the one that has been sending its request body longest, is closed to make
  room, so a fresh client always gets in; when every connection is busy serving a request, the new connection is
  closed instead. A connection upgraded to WebSocket counts until it ends (never evicted).

The guard adds no work per message: an integer test per received chunk while the connection is being served, and
two dict operations per request (the connection leaves the waiting set when its head is complete and rejoins it
when the response ends; a body that did not come with its head adds two more). Expiry runs on one timer per
server, not one per connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from typing import Any

logger: logging.Logger = logging.getLogger("mcpkit.http")

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_SEND_TIMEOUT = 30.0
DEFAULT_MAX_HEADER_BYTES = 64 * 1024
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_LIMIT_CONCURRENCY = 1100  # above max_connections: a connection being replaced still counts for a moment
DEFAULT_TIMEOUT_KEEP_ALIVE = 5.0
DEFAULT_BACKLOG = 2048  # the kernel's queue of connections not yet accepted (uvicorn's default)
ACCEPT_BURST = 32  # connections asyncio accepts per event-loop turn (see relisten)
FD_RESERVE = 200  # descriptors kept free beyond max_connections (accept bursts in flight, stores, logs)


def default_max_connections() -> int:
    """``DEFAULT_MAX_CONNECTIONS``, or fewer when the process may not open that many files: its soft
    ``RLIMIT_NOFILE`` minus ``FD_RESERVE`` descriptors kept for connections accepted but not yet counted and for
    everything else (listening sockets, stores, logs). An ``accept()`` that fails with EMFILE makes asyncio stop
    accepting for a whole second, which is what a flood must never achieve."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return DEFAULT_MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return DEFAULT_MAX_CONNECTIONS
    return max(16, min(DEFAULT_MAX_CONNECTIONS, soft - FD_RESERVE))


class ConnectionGuard:
    """The connections of one server that wait for a request head or a request body, oldest first (see the module
    docstring)."""

    def __init__(
        self,
        *,
        header_timeout: float = DEFAULT_HEADER_TIMEOUT,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        max_connections: int | None = None,
        max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES,
    ) -> None:
        if header_timeout <= 0 or body_timeout <= 0 or send_timeout <= 0 or max_header_bytes < 1024:
            raise ValueError(
                "header_timeout > 0, body_timeout > 0, send_timeout > 0 and max_header_bytes >= 1024 are required"
            )
        if max_connections is not None and max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.send_timeout = send_timeout
        self.max_connections: int = max_connections or default_max_connections()
        self.max_header_bytes = max_header_bytes
        self.connections: int = 0
        # protocol -> monotonic time since which it waits for the rest of a request head (a new connection, or a
        # kept-alive one that started its next request); insertion order = oldest first, as in the next two
        self.waiting: dict[Any, float] = {}
        # protocol -> monotonic time its response ended (idle keep-alive: uvicorn's timeout_keep_alive closes it)
        self.idle: dict[Any, float] = {}
        # protocol -> monotonic time its request head arrived, while the rest of its body has not
        self.receiving: dict[Any, float] = {}
        # protocol -> monotonic time since which its write buffer is full (the peer takes nothing); apart from the
        # state tables: a connection in any state may stop reading
        self.stalled: dict[Any, float] = {}
        self._tables: tuple[dict[Any, float], ...] = ({}, self.waiting, self.receiving, self.idle)  # by state
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self.closed_slow: int = 0  # connections closed by header_timeout or body_timeout (diagnostics and tests)
        #: how long a kept-alive connection may idle between requests when the guard closes it itself (uvicorn's
        #: ``timeout_keep_alive``, set by the lane's protocol, which arms no timer per response: see ``.lane``);
        #: None: uvicorn's own timer closes it
        self.keep_alive: float | None = None
        self.closed_idle = 0  # connections closed by ``keep_alive``
        self.closed_large = 0  # connections closed by max_header_bytes
        self.aborted_stalled: int = 0  # connections aborted by send_timeout
        self.evicted: int = 0  # connections closed to make room (max_connections)
        self.refused: int = 0  # new connections closed because every connection was busy
        self._refused_logged = -10.0

    # A connection's state (``proto._mcpkit_state``) says which table holds it: 0 none (serving a request, or no
    # longer watched), 1 waiting, 2 receiving, 3 idle.

    def opened(self, proto: Any) -> bool:
        """Count a new connection; False when it must be closed (the server is full of busy connections)."""
        self.connections += 1
        if self.connections > self.max_connections:
            # half-sent heads first, then idle keep-alive connections, then half-sent bodies; oldest first
            table = self.waiting or self.idle or self.receiving
            victim = next(iter(table), None)
            if victim is None:
                self.refused += 1
                now = time.monotonic()
                if now - self._refused_logged >= 10.0:  # one line per 10 s under a flood
                    self._refused_logged = now
                    logger.warning(
                        "refusing connections: max_connections=%d connections are all serving requests "
                        "(%d refused so far; raise max_connections if the server can take more)",
                        self.max_connections,
                        self.refused,
                    )
                return False
            self.evicted += 1
            del table[victim]
            victim._mcpkit_state = 0
            _close(victim)
        self._watch_head(proto)
        return True

    def lost(self, proto: Any) -> None:
        """A connection ended."""
        self.connections -= 1
        self.stalled.pop(proto, None)
        state = proto._mcpkit_state
        if state:
            proto._mcpkit_state = 0
            self._tables[state].pop(proto, None)

    def _watch_head(self, proto: Any) -> None:
        proto._mcpkit_state = 1
        proto._mcpkit_head = 0
        at = time.monotonic()
        self.waiting[proto] = at
        at += self.header_timeout
        if self._timer is None or at < self._timer_at - 0.5:
            self._ensure_timer(at)

    def started(self, proto: Any) -> None:
        """An idle keep-alive connection sent the first bytes of its next request: the head's clock starts."""
        del self.idle[proto]
        self._watch_head(proto)

    def responded(self, proto: Any) -> None:
        """``proto``'s response ended: it idles until its next request (or uvicorn's keep-alive timeout)."""
        state = proto._mcpkit_state
        if state:
            del self._tables[state][proto]
        proto._mcpkit_state = 3
        at = self.idle[proto] = time.monotonic()
        if self.keep_alive is not None:
            at += self.keep_alive
            if self._timer is None or at < self._timer_at - 0.5:
                self._ensure_timer(at)

    def head_done(self, proto: Any, body_pending: bool) -> None:
        """``proto``'s request head arrived; ``body_pending``: the rest of its body has not."""
        del self._tables[proto._mcpkit_state][proto]
        if body_pending:
            proto._mcpkit_state = 2
            at = time.monotonic()
            self.receiving[proto] = at
            at += self.body_timeout
            if self._timer is None or at < self._timer_at - 0.5:
                self._ensure_timer(at)
        else:
            proto._mcpkit_state = 0

    def body_done(self, proto: Any) -> None:
        """``proto``'s request body arrived whole."""
        proto._mcpkit_state = 0
        del self.receiving[proto]

    def write_paused(self, proto: Any) -> None:
        """``proto``'s write buffer went over its high-water mark: the peer has ``send_timeout`` s to take some."""
        at = time.monotonic()
        self.stalled[proto] = at
        self._ensure_timer(at + self.send_timeout)

    def write_resumed(self, proto: Any) -> None:
        """``proto``'s write buffer went below its low-water mark."""
        self.stalled.pop(proto, None)

    def _ensure_timer(self, at: float) -> None:
        """Expiry runs at ``at`` at the latest (one timer; half a second early or late does not matter)."""
        if self._timer is None or at < self._timer_at - 0.5:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = at
            self._timer = asyncio.get_running_loop().call_at(at + 0.01, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = time.monotonic()
        next_at = None
        sweeps = [(self.waiting, self.header_timeout), (self.receiving, self.body_timeout)]
        if self.keep_alive is not None:
            sweeps.append((self.idle, self.keep_alive))
        for table, timeout in sweeps:
            deadline = now - timeout
            while table:
                proto, since = next(iter(table.items()))
                if since > deadline:
                    next_at = min(next_at or since + timeout, since + timeout)
                    break
                del table[proto]
                proto._mcpkit_state = 0
                if table is self.idle:
                    self.closed_idle += 1
                else:
                    self.closed_slow += 1
                _close(proto)
        deadline = now - self.send_timeout
        while self.stalled:
            proto, since = next(iter(self.stalled.items()))
            if since > deadline:
                next_at = min(next_at or since + self.send_timeout, since + self.send_timeout)
                break
            del self.stalled[proto]
            self.aborted_stalled += 1
            logger.warning("aborting a connection whose peer has read nothing for %ss", self.send_timeout)
            proto.transport.abort()
        if next_at is not None:
            self._ensure_timer(next_at)


def _close(proto: Any) -> None:
    transport = proto.transport  # (set by connection_made: the guard counts connections from there)
    if transport is not None and not transport.is_closing():
        transport.close()


def _count_until_lost(successor: Any, proto: Any, guard: ConnectionGuard) -> None:
    """Keep counting a connection another protocol took over (WebSocket upgrade) until that protocol loses it."""
    lost = successor.connection_lost

    def connection_lost(exc: Exception | None) -> None:
        guard.lost(proto)
        successor.connection_lost = lost
        lost(exc)

    successor.connection_lost = connection_lost


def guarded_protocol(base: type[asyncio.Protocol], guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's HTTP/1.1 protocol class ``base`` whose connections ``guard`` watches."""
    limit = guard.max_header_bytes

    class Guarded(base):  # type: ignore[valid-type,misc]
        # what uvicorn's HTTP/1.1 protocols (h11, httptools, zttp) set, beyond the asyncio.Protocol they share
        transport: asyncio.Transport
        cycle: Any  # the request's cycle: None before the first request head
        _mcpkit_state = 0  # which of the guard's tables holds it (see ConnectionGuard)
        _mcpkit_head = 0  # bytes received while waiting for the head

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            if not guard.opened(self):
                transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            guard.lost(self)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self._mcpkit_state
            if not state:
                return
            cycle = self.cycle
            if state == 2:
                if cycle is None or not cycle.more_body or cycle.response_complete:
                    guard.body_done(self)
            elif cycle is not None and not cycle.response_complete:
                guard.head_done(self, cycle.more_body)  # a request head arrived
            elif (successor := self.transport.get_protocol()) is not self:
                guard.head_done(self, False)  # the connection became a WebSocket: count it until it ends
                _count_until_lost(successor, self, guard)
            else:
                if state == 3:
                    guard.started(self)  # the first bytes of the next request after a keep-alive pause
                self._mcpkit_head += len(data)
                if self._mcpkit_head > limit and not self.transport.is_closing():
                    guard.closed_large += 1
                    self.transport.close()

        def pause_writing(self) -> None:
            super().pause_writing()
            guard.write_paused(self)

        def resume_writing(self) -> None:
            super().resume_writing()
            guard.write_resumed(self)

        def on_response_complete(self) -> None:
            super().on_response_complete()  # pyright: ignore[reportAttributeAccessIssue]  # (each of uvicorn's has it)
            if not self.transport.is_closing():
                cycle = self.cycle
                if cycle is None or cycle.response_complete:  # (not a pipelined request already running)
                    guard.responded(self)

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


def relisten(servers: Any, backlog: int) -> None:
    """Give the listening sockets of started asyncio ``servers`` a kernel queue of ``backlog`` connections.

    asyncio accepts as many connections per event-loop turn as the ``backlog`` it was given, before any of them
    reaches the guard. The server is therefore created with a small ``ACCEPT_BURST`` (so the guard sees and evicts
    between bursts and descriptors never run out) and the kernel queue is then set to ``backlog`` here with a
    second ``listen()`` on a duplicate of each socket (Linux and the BSDs allow changing it on a listening socket)."""
    import socket

    for server in servers:
        for sock in server.sockets:
            with contextlib.suppress(OSError):
                dup = socket.socket(sock.family, sock.type, sock.proto, fileno=os.dup(sock.fileno()))
                try:
                    dup.listen(backlog)
                finally:
                    dup.close()


def resolve_protocol(http: Any) -> type[asyncio.Protocol] | None:
    """The HTTP/1.1 protocol class uvicorn would use for its ``http`` setting, if the guard can wrap it."""
    if isinstance(http, str):
        from uvicorn.config import HTTP_PROTOCOLS
        from uvicorn.importer import import_from_string

        cls = import_from_string(HTTP_PROTOCOLS.get(http, http))
    else:
        cls = http
    if isinstance(cls, type) and issubclass(cls, _uvicorn_http11()):
        return cls
    return None


def _uvicorn_http11() -> tuple[type[asyncio.Protocol], ...]:
    """uvicorn's HTTP/1.1 protocol classes (httptools' only when it is installed): the ones the guard wraps."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return (H11Protocol,)
    return (H11Protocol, HttpToolsProtocol)
