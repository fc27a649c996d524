"""Streamable HTTP server, the outboxes and the SSE pump.

A :class:`Stream` is the outbox of one POST (or of a session's standalone GET stream): the engine returns the POST's
answer (see :class:`.answer.Answerer`), so whatever the handler sends through the stream before it (a notification
or a request) turns the answer into ``text/event-stream``. What a message is comes with it (the engine's
:class:`~mcpkit.engine.Outgoing`): the bytes are never read here. A :class:`HTTPSession` is a handshake-era
session's own outbox (the standalone stream). :class:`SSEPump`, one object of the endpoint handed to each stream,
turns an answer into a stream and writes the queued events to the client (keepalive comments, disconnect
detection), and replays them from the event store on ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from ..._aio import SizedQueue
from ..._aio import running_loop as _running_loop
from ..._asgi import Receive, Send
from ...engine import REQUEST, Outgoing
from ...protocol.errors import INVALID_REQUEST, ConnectionClosed
from ...server.request_context import at_token_expiry
from ...stores import FollowableEventStore, RequestEventStore
from ...stores.log import is_number
from ..base import DEFAULT_QUEUE_BYTES
from .wire import bad, respond, wait_disconnect

if TYPE_CHECKING:
    from ...engine import RequestContext
    from ...hosting import HostedSession as ServerSession
    from ...stores import EventStore, SessionStore

logger: logging.Logger = logging.getLogger("mcpkit.http")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


_KEEPALIVE = b":\n\n"


# Stream.mode, how the answer to one POST goes out: UNDECIDED (the answer alone -> one application/json body,
# anything the handler sends before it -> text/event-stream), JSON_MODE (one JSON body: json_response=True) or
# SSE_MODE (an SSE stream). Plain ints, not an IntEnum (hot path: docs/architecture.md).
UNDECIDED: Final = 0
JSON_MODE: Final = 1
SSE_MODE: Final = 2
#: Seconds between two log lines about events the event store failed to keep.
STORE_WARN_INTERVAL: Final = 10.0
WORKER_SHIFT = 20  # restored sessions number their streams from a random multiple of 2**20 (see _restore)


def sse_frame(data: bytes, event_id: bytes | None) -> bytes:
    if event_id is None:
        return b"event: message\ndata: " + data + b"\n\n"
    return b"id: " + event_id + b"\nevent: message\ndata: " + data + b"\n\n"


class HasRequestContext(Protocol):
    """What :func:`close_sse_stream` takes: a request context of the server (``ServerRequestContext``, whose
    ``rc`` is the engine's) or of the engine (``RequestContext``, whose ``rc`` is itself)."""

    @property
    def rc(self) -> RequestContext: ...


def _frame_size(item: tuple[int, bytes] | None) -> int:
    return 0 if item is None else len(item[1])


class Conn:
    """One open SSE response: a queue, bounded in events and in bytes, that the request's coroutine drains into
    ASGI ``send``."""

    __slots__ = ("aborted", "ended", "last_seq", "queue")

    def __init__(self, maxsize: int, max_bytes: int = DEFAULT_QUEUE_BYTES) -> None:
        self.queue: SizedQueue[tuple[int, bytes] | None] = SizedQueue(maxsize, max_bytes, _frame_size)
        self.ended: bool = False
        self.aborted: bool = False
        self.last_seq: int = 0

    def end(self) -> None:
        """Finish the response after what is queued (callable from sync code)."""
        self.ended = True
        if self.queue.empty():
            self.queue.put_nowait(None)

    def hand_over(self) -> list[tuple[int, bytes]]:
        """A newer connection takes this stream over: what is queued here and not yet written, in order (for the new
        connection to write instead), and this response ends cleanly after the event being written, if any."""
        queue = self.queue
        taken: list[tuple[int, bytes]] = []
        while not queue.empty():
            item = queue.get_nowait()
            if item is not None and item[1] is not _KEEPALIVE:
                taken.append(item)
        self.ended = True
        queue.put_nowait(None)
        return taken

    def abort(self) -> None:
        """Finish the response now, dropping what is queued (those events stay in the event store, if any)."""
        self.ended = self.aborted = True
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)


def _request_answered_by(stream: Stream) -> str | int | None:
    """The id of the one request whose answer ``stream`` is, when the event store keeps it (a shared store: a
    worker following the stream answers that request if the worker running it dies); None otherwise (or for a
    batch's stream)."""
    hs = stream.hs
    if hs is None or not isinstance(stream.sse.event_store, RequestEventStore):
        return None
    ids = [ctx.id for ctx in hs.session.peer.requests_in_progress() if ctx.out is stream]
    return ids[0] if len(ids) == 1 else None


class Stream:
    """The outbox of one POST (or the session's standalone GET stream): turns the POST's answer into an SSE stream
    when the handler sends something first, then records events (ids + event store) and feeds the open connection,
    if any."""

    __slots__ = (
        "asgi",
        "conn",
        "finished",
        "hs",
        "mode",
        "no",
        "order",
        "pump_task",
        "resumable",
        "seq",
        "sse",
        "watcher",
    )

    def __init__(
        self,
        sse: SSEPump,
        hs: HTTPSession | None,
        no: int,
        mode: int = UNDECIDED,
    ) -> None:
        self.sse: SSEPump = sse  # the endpoint's SSE side: it turns this stream's answer into SSE and writes it out
        self.hs: HTTPSession | None = hs
        self.no: int = no
        self.mode: int = mode
        self.conn: Conn | None = None
        self.asgi: tuple[Receive, Send, Sequence[tuple[bytes, bytes]], RequestContext | None] | None = None
        self.pump_task: asyncio.Task[None] | None = None  # the pump writing this stream out, once it is SSE
        # Held while an event is numbered, stored and queued, once the answer turned SSE (SSEPump.start): a message
        # sent from another task than the handler's cannot overtake the one before it while the store is written.
        self.order: asyncio.Lock | None = None
        self.watcher: asyncio.Task[None] | None = None
        self.seq: int = 0
        self.resumable: bool = hs is not None and sse.event_store is not None
        self.finished: bool = False

    def finish(self) -> None:
        """The request is answered: end the open connection after what is queued."""
        self.finished = True
        if self.conn is not None:
            self.conn.end()

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        """A message the handler sends before its answer (a notification or a request; the answer itself is
        returned by the engine): it makes the answer an SSE stream, or in JSON mode goes to the standalone
        stream."""
        hs = self.hs
        if hs is not None and self.sse.session_store is not None and hs.dirty():
            await self.sse.sync(hs)  # before the message leaves: the client may go to another worker next
        mode = self.mode
        if mode == UNDECIDED:
            await self.sse.start(self, data)
            return
        if mode == JSON_MODE:
            # A JSON answer carries one message: the response. Anything else goes to the standalone stream.
            if hs is not None:
                await hs.send(data, msg)
            return
        if self.finished and hs is not None:
            # The request was answered or cancelled and its stream ended: what is sent for it later (above all the
            # notifications/cancelled of a request its handler had made of the client) goes to the GET stream,
            # where the client still reads, instead of being lost on the ended one.
            await hs.send(data, msg)
            return
        await self.emit(data, msg)

    async def record(self, data: bytes, last: bool = False, request_id: str | int | None = None) -> tuple[int, bytes]:
        """Number the event, keep it in the event store (resumable streams) and frame it. ``last``: the answer that
        ends the stream (a shared store marks it, for another worker following the stream); ``request_id``: the
        first event's, the id of the request the stream answers (kept by a :class:`RequestEventStore`)."""
        if self.resumable:
            self.seq = seq = self.seq + 1
            key = f"{self.hs.id}/{self.no}"  # type: ignore[union-attr]
            store: Any = self.sse.event_store
            try:
                if last and isinstance(store, FollowableEventStore):
                    await store.append_last(key, seq, data)
                elif request_id is not None:
                    await store.append_first(key, seq, data, request_id)
                else:
                    await store.append(key, seq, data)
            except Exception as exc:  # a failing store costs resumability, not the live stream
                self.sse.store_failed(seq, key, exc)
            return seq, sse_frame(data, f"{self.no}_{seq}".encode())
        return 0, sse_frame(data, None)

    async def emit(self, data: bytes, msg: Outgoing | None = None) -> None:
        order = self.order
        if order is None:
            await self._emit(data, msg)
        else:
            async with order:
                await self._emit(data, msg)

    async def _emit(self, data: bytes, msg: Outgoing | None) -> None:
        seq, frame = await self.record(data, msg is not None and msg.is_answer)
        conn = self.conn
        if conn is None or conn.ended:
            if not self.resumable and msg is not None and msg.kind == REQUEST:
                raise ConnectionClosed("the client's stream is gone; the request cannot be delivered")
            return
        if self.hs is not None and self is self.hs.standalone:
            try:
                conn.queue.put_nowait((seq, frame))
            except asyncio.QueueFull:
                logger.warning("session %s: standalone SSE reader too slow; closing its stream", self.hs.id[:8])
                conn.abort()
                if self.conn is conn:
                    self.conn = None  # the client may reconnect (and resume from the event store, if any)
            return
        await conn.queue.put((seq, frame))

    def priming(self) -> bytes | None:
        return self.priming_for(self.seq + 1)

    def priming_for(self, first: int) -> bytes | None:
        """The priming event of SEP-1699 (2025-11-25+ sessions with resumability): an id and empty data; its id
        precedes event ``first``, so resuming from it replays everything."""
        hs = self.hs
        if not self.resumable or hs is None:
            return None
        feats = hs.session.features
        if feats is None or not feats.sse_polling:
            return None
        frame = b"id: " + f"{self.no}_{max(first - 1, 0)}".encode() + b"\n"
        retry = self.sse.retry_interval
        if retry is not None:
            frame += b"retry: " + str(int(retry)).encode() + b"\n"
        return frame + b"data: \n\n"

    def close_connection(self, retry_ms: int | None = None) -> bool:
        """Close the HTTP connection without ending the stream (SEP-1699 polling): the client reconnects with
        ``Last-Event-ID`` after ``retry_ms``. Only for resumable streams; returns False otherwise."""
        conn = self.conn
        if conn is None or not self.resumable:
            return False
        ms = retry_ms if retry_ms is not None else self.sse.retry_interval
        if ms is not None:
            try:
                conn.queue.put_nowait((0, b"retry: " + str(int(ms)).encode() + b"\n\n"))
            except asyncio.QueueFull:
                pass
        conn.end()
        self.conn = None
        return True


async def close_sse_stream(ctx: HasRequestContext, retry_ms: int | None = None) -> bool:
    """From inside a handler: close the client's connection to this request's SSE stream without ending the
    stream (SEP-1699). The client resumes with ``Last-Event-ID``. ``ctx`` is a ServerRequestContext or engine
    RequestContext. Returns False when the request is not on a resumable SSE stream."""
    out = ctx.rc.out
    if isinstance(out, Stream):
        return out.close_connection(retry_ms)
    return False


class HTTPSession:
    """A handshake-era session over HTTP. It is also its ServerSession's outbox: messages not related to a client
    request go to the standalone GET stream (or the event store, or nowhere when no stream was ever opened)."""

    __slots__ = (
        "base",
        "busy",
        "client",
        "id",
        "last_seen",
        "live",
        "next_no",
        "orphans",
        "queue",
        "queued_bytes",
        "renewed",
        "saving",
        "session",
        "standalone",
        "stored",
        "synced_level",
        "synced_subs",
    )

    def __init__(self, sid: str, client: Any = None) -> None:
        self.id: str = sid
        self.client: Any = client  # who opened it (see _client_key), for max_sessions_per_client
        self.session: ServerSession = None  # type: ignore[assignment]
        self.last_seen: float = time.monotonic()
        self.standalone: Stream | None = None
        self.live: dict[int, Stream] | None = None  # POST streams still running, by number (for resumption)
        self.next_no: int = 0
        self.base: int = 0  # this worker's standalone stream number; POST streams count up from it
        self.busy: int = 0
        # POSTs waiting for the session to drop below max_requests_per_session: (turn, weight, body size)
        self.queue: deque[tuple[asyncio.Future[None], int, int]] | None = None
        self.queued_bytes: int = 0
        self.stored: int = 0  # what the session store holds: 0 nothing, 1 negotiated, 2 initialized
        self.renewed: float = 0.0  # when the stored record's TTL was last renewed (monotonic)
        self.saving: asyncio.Lock | None = None  # one save at a time, each writing the state as it is then
        # the log level and subscriptions the store last agreed with (a difference is a change not yet saved)
        self.synced_level: str | None = None
        self.synced_subs: frozenset[str] = frozenset()
        # once the session ended: the ids of the requests it left running, by their POST's stream (or the task
        # answering the POST, for a JSON answer whose handler wrote to the session); each POST's answer then
        # carries them. Taken from the peer's in-flight table, so bounded like it.
        self.orphans: dict[object, list[str | int]] | None = None

    async def wait_turn(self, weight: int, size: int, cap: int, max_queued: int, max_bytes: int) -> bool:
        """Queue a POST of this session while it has ``cap`` (``max_requests_per_session``) running; True once it
        may run (its ``weight`` is then counted in ``busy``), False at once when the queue is full (``max_queued``
        POSTs or ``max_bytes`` of their bodies)."""
        queue = self.queue
        if queue is None:
            queue = self.queue = deque()
        if len(queue) >= max_queued or self.queued_bytes + size > max_bytes:
            return False
        turn: asyncio.Future[None] = _running_loop().create_future()
        entry = (turn, weight, size)
        queue.append(entry)
        self.queued_bytes += size
        try:
            await turn
        except BaseException:
            if turn.done() and not turn.cancelled():
                self.busy -= weight  # it had its turn: give it to the next
                self.next_turn(cap)
            else:
                with contextlib.suppress(ValueError):
                    queue.remove(entry)
                    self.queued_bytes -= size
            raise
        return True

    def next_turn(self, cap: int) -> None:
        """Let the waiting POSTs run, in order, while fewer than ``cap`` (their weights) are running."""
        queue = self.queue
        while queue:
            turn, weight, size = queue[0]
            if self.busy and self.busy + weight > cap:
                break
            queue.popleft()
            self.queued_bytes -= size
            if not turn.done():
                self.busy += weight
                turn.set_result(None)

    def finish_post(self, no: int, cap: int) -> None:
        """A POST of this session (its stream number ``no``) is answered: its slot goes to the next waiting POST
        (``cap``: ``max_requests_per_session``), and its stream is no longer resumable."""
        self.busy -= 1
        self.last_seen = time.monotonic()
        if self.live is not None:
            self.live.pop(no, None)
        if self.queue:
            self.next_turn(cap)

    def dirty(self) -> bool:
        s = self.session
        return s.log_level != self.synced_level or s.subscriptions != self.synced_subs

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        stream = self.standalone
        if stream is None:
            if msg is not None and msg.kind == REQUEST:
                raise ConnectionClosed("no standalone GET stream is open for server-initiated requests")
            return
        await stream.emit(data, msg)


def cancel_request(ctx: RequestContext | None) -> None:
    """Modern era: the client closed the response stream, which cancels the request (no further messages)."""
    if ctx is not None and not ctx.done and ctx.task is not None:
        ctx.cancelled = True
        ctx.task.cancel()


class SSEPump:
    """The endpoint's SSE side, one object handed to each of its streams: turning a POST's answer into an SSE
    stream (:meth:`start`) and writing a stream out (:meth:`pump`: keepalive comments, disconnects), attaching a
    GET to a stream (:meth:`attach`, with replay) and resuming one from ``Last-Event-ID`` (:meth:`resume`).

    Args:
        event_store, session_store, retry_interval, keepalive, queue_size, queue_bytes: the endpoint's (see
            :class:`~.streamable.StreamableHTTPEndpoint`).
        sync: saves and announces a session's changed state (``SessionManager.sync``), called before a message
            leaves when the session's log level or subscriptions changed.
    """

    __slots__ = (
        "_store_warned",
        "event_store",
        "keepalive",
        "queue_bytes",
        "queue_size",
        "retry_interval",
        "session_store",
        "sync",
    )

    def __init__(
        self,
        *,
        event_store: EventStore | None,
        session_store: SessionStore | None,
        retry_interval: int | None,
        keepalive: float,
        queue_size: int,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        sync: Callable[[HTTPSession], Awaitable[None]],
    ) -> None:
        self.event_store: EventStore | None = event_store
        self.session_store: SessionStore | None = session_store
        self.retry_interval: int | None = retry_interval
        self.keepalive: float = keepalive
        self.queue_size: int = queue_size
        self.queue_bytes: int = queue_bytes
        self.sync: Callable[[HTTPSession], Awaitable[None]] = sync
        self._store_warned = float("-inf")

    def store_failed(self, seq: int, key: str, exc: Exception) -> None:
        """Log an event the event store did not keep: one line per :data:`STORE_WARN_INTERVAL` seconds while it
        fails (Redis down or at its ``maxmemory`` fails every event of every stream: one line, and a traceback,
        per event flooded the log), the traceback only for what is not the store being unavailable."""
        now = time.monotonic()
        if now - self._store_warned < STORE_WARN_INTERVAL:
            return
        self._store_warned = now
        if isinstance(exc, ConnectionError):
            logger.warning("event store: could not keep event %s of %s (and others for 10 s): %s", seq, key, exc)
        else:
            logger.warning("event store: could not keep event %s of %s (and others for 10 s)", seq, key, exc_info=exc)

    async def start(self, stream: Stream, first: bytes) -> None:
        """Turn a POST's answer into an SSE stream (called from the stream's first non-final message).

        The stream is SSE and its pump exists before anything is awaited: the first message may come from another
        task than the handler's, and the handler may return (and its answer be emitted) while this one is stored;
        the pump, not this call, starts the HTTP response, so the request never ends with no response started."""
        if stream.asgi is None:
            raise ConnectionClosed("the answer to this request is complete; nothing more can be sent on it")
        receive, send, extra, ctx = stream.asgi
        conn = Conn(self.queue_size, self.queue_bytes)
        stream.conn = conn
        stream.mode = SSE_MODE
        order = stream.order = asyncio.Lock()
        head: list[bytes] = []
        priming = stream.priming_for(first=stream.seq + 1)
        if priming is not None:
            head.append(priming)
        watcher = stream.watcher
        stream.watcher = None

        async def pump() -> None:
            try:
                await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, *extra]})
                for frame in head:
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
            except OSError:
                gone = True
                conn.abort()
                if watcher is not None:
                    watcher.cancel()
            else:
                gone = await self.pump(conn, receive, send, watcher)
            if stream.conn is conn:
                stream.conn = None
            if gone:
                cancel_request(ctx)

        stream.pump_task = asyncio.get_running_loop().create_task(pump())
        request_id = _request_answered_by(stream) if stream.resumable else None
        async with order:
            seq, frame = await stream.record(first, request_id=request_id)
            conn.queue.put_nowait((seq, frame))

    async def pump(self, conn: Conn, receive: Receive, send: Send, watcher: asyncio.Task[None] | None = None) -> bool:
        """Write queued events to the client until the stream ends (False) or the client disconnects (True)."""
        loop = asyncio.get_running_loop()
        queue = conn.queue
        if watcher is None or watcher.done():
            watcher = loop.create_task(wait_disconnect(receive))

        def on_disconnect(_: Any) -> None:
            conn.abort()

        watcher.add_done_callback(on_disconnect)
        timer: asyncio.TimerHandle | None = None
        keepalive = self.keepalive

        def tick() -> None:
            nonlocal timer
            if queue.empty() and not conn.ended:
                with contextlib.suppress(asyncio.QueueFull):
                    queue.put_nowait((0, _KEEPALIVE))
            timer = loop.call_later(keepalive, tick)

        if keepalive and keepalive > 0:
            timer = loop.call_later(keepalive, tick)
        try:
            while True:
                if conn.ended and queue.empty():
                    break
                item = await queue.get()
                if conn.aborted:
                    break
                if item is None:
                    if conn.ended and queue.empty():
                        break
                    continue
                seq, frame = item
                if seq:
                    if seq <= conn.last_seq:
                        continue  # already sent during a replay
                    conn.last_seq = seq
                await send({"type": "http.response.body", "body": frame, "more_body": True})
        except OSError:
            return True
        finally:
            if timer is not None:
                timer.cancel()
        if watcher.done():
            return True
        watcher.remove_done_callback(on_disconnect)
        watcher.cancel()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return False

    async def attach(
        self,
        hs: HTTPSession,
        stream: Stream,
        replay: list[tuple[int, bytes]] | None,
        receive: Receive,
        send: Send,
        replay_no: int | None = None,
    ) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        conn = Conn(self.queue_size, self.queue_bytes)
        live = not stream.finished and (
            stream is hs.standalone or (hs.live is not None and hs.live.get(stream.no) is stream)
        )
        taken: list[tuple[int, bytes]] = []
        if live:
            old = stream.conn
            if old is not None:
                if replay is None:
                    # a new GET of the standalone stream while one is open (that one went half-open, or the client
                    # lost track of it): the newer one takes over what the older one has not written yet
                    taken = old.hand_over()
                    conn.last_seq = old.last_seq
                    for item in taken:
                        conn.queue.put_nowait(item)  # (fits: the same bounds held it)
                else:
                    old.abort()  # the client resumes, so it considers that connection dead
            stream.conn = conn  # new events queue up while the replay is written; duplicates are skipped by seq
        hs.busy += 1
        try:
            if replay is None:
                first = next((seq for seq, _ in taken if seq), 0)  # (the priming id precedes what was taken over)
                priming = stream.priming_for(first) if first else stream.priming()
                if priming is not None:
                    await send({"type": "http.response.body", "body": priming, "more_body": True})
            else:
                no = stream.no if replay_no is None else replay_no
                for seq, data in replay:
                    frame = sse_frame(data, f"{no}_{seq}".encode())
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                    if replay_no is None:
                        conn.last_seq = seq
                if replay_no is not None:
                    # move the client's cursor onto this worker's stream, which continues from here
                    priming = stream.priming()
                    if priming is not None:
                        await send({"type": "http.response.body", "body": priming, "more_body": True})
            if not live:
                conn.end()
            expiry = at_token_expiry(conn.abort)  # (behind protect(): the GET ends with the token it was opened with)
            try:
                await self.pump(conn, receive, send)
            finally:
                if expiry is not None:
                    expiry.cancel()
        finally:
            hs.busy -= 1
            hs.last_seen = time.monotonic()
            if stream.conn is conn:
                stream.conn = None

    async def resume(self, hs: HTTPSession, last: str, receive: Receive, send: Send) -> None:
        store = self.event_store
        no_s, _, seq_s = last.partition("_")
        if store is None or not (is_number(no_s) and is_number(seq_s)):
            await respond(send, 400, bad(INVALID_REQUEST, "Bad Request: cannot resume from that Last-Event-ID"))
            return
        no, after = int(no_s), int(seq_s)
        live = hs.live or {}
        stream = hs.standalone if no == hs.base else live.get(no)
        if stream is not None and stream.seq == after:
            replay: list[tuple[int, bytes]] | None = []
        else:
            replay = await store.replay(f"{hs.id}/{no}", after)
        if replay is None:
            await respond(send, 400, bad(INVALID_REQUEST, "Bad Request: the events after that id are gone"))
            return
        if stream is None:
            if no & ((1 << WORKER_SHIFT) - 1) == 0:
                # A standalone stream this worker does not hold (another worker's, or from before a restart): replay
                # what the store kept under its ids, then continue on this worker's standalone stream.
                if hs.standalone is None:
                    hs.standalone = Stream(self, hs, hs.base, SSE_MODE)
                await self.attach(hs, hs.standalone, replay, receive, send, replay_no=no)
                return
            stream = Stream(self, hs, no, SSE_MODE)  # a finished stream (maybe another worker's): replay only
        await self.attach(hs, stream, replay, receive, send)
