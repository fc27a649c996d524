"""Streamable HTTP server, the cross-worker side: what lets a client reach a different worker with every request
when the server's fan-out is shared (:class:`~mcpkit.stores.log.SharedFanout`, e.g.
:class:`~mcpkit.stores.redis.RedisFanout` with the Redis session and event stores).

* **The GET stream is the log.** A handshake session's standalone stream is the fan-out's log filtered for that
  session: each event's SSE id is its log position (``g<position>``). Whichever worker a GET reaches serves it,
  and a ``Last-Event-ID`` is replayed from the log by any worker: a client whose worker was killed or drained
  resumes on another, with nothing lost and nothing twice. What the server sends a session outside any request
  (a request of a background task, a message of a JSON-mode answer) is logged for the session and sent by the
  worker that holds its GET stream (:class:`SharedHTTPSession`).
* **Answers find their worker.** Request ids are numbered per worker (``peer.id_base``); a client's answer, or a
  progress notification, that reaches another worker is forwarded to the worker that sent the request, into that
  session's peer (so it can only resolve that session's requests: the session's owner was checked by the worker
  that took the POST). A cancellation of a request running elsewhere is logged for every worker.
* **POST streams are followed.** A client that resumes a request's stream on another worker than the one running
  the request gets its events from the shared event store as they are written, up to the answer (bounded by
  ``max_followers`` per worker).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, cast

from ..._asgi import Receive, Send
from ...engine import NULL_OUTBOX, Outgoing
from ...engine import messages as engine_messages
from ...protocol import jsonrpc
from ...protocol.errors import INTERNAL_ERROR, INVALID_REQUEST, ConnectionClosed
from ...protocol.jsonrpc import Batch, ErrorResponse, Message, Notification, Parsed, Response
from ...server.request_context import at_token_expiry
from ...stores import FollowableEventStore, RequestEventStore
from ...stores.log import ID_SHIFT, LOG_POSITION, LogEntry, SharedFanout, is_number, position_order, worker_of
from .stream import SSE_HEADERS, SSE_MODE, Conn, HTTPSession, Stream, sse_frame
from .wire import bad, error_body, respond, wait_disconnect

if TYPE_CHECKING:
    from .stream import SSEPump

logger: logging.Logger = logging.getLogger("mcpkit.http")

#: POST streams of other workers one worker follows at once (a resumption beyond it gets what is stored, then ends).
DEFAULT_MAX_FOLLOWERS = 256
#: Cancellations of one session this worker logs for the others per second (every worker reads each one: a
#: client flooding them would cost every worker and push real events out of the log); beyond, they are dropped.
MAX_LOGGED_CANCELS = 20
_READ = 500  # log entries read per round trip
_LIST_KINDS = ("tools", "resources", "prompts")


#: The error answering a request whose worker died while a client followed its stream on another worker.
ORPHANED = "the worker serving this request is gone; retry"


def unavailable(exc: BaseException) -> bytes:
    """The body of a 503: the store a request needs cannot be reached."""
    return error_body(None, INTERNAL_ERROR, f"Service Unavailable: {exc}; retry shortly")


def _offer(stream: Stream, position: str, data: bytes) -> None:
    """Queue one event for the stream's open connection (id ``g<position>``; none for a "look again" notice)."""
    conn = stream.conn
    if conn is None or conn.ended:
        return
    if position:
        item = (position_order(position), sse_frame(data, b"g" + position.encode()))
    else:
        item = (0, sse_frame(data, None))
    try:
        conn.queue.put_nowait(item)
    except asyncio.QueueFull:
        logger.warning("session %s: GET stream reader too slow; closing it (it resumes from the log)", stream.no)
        conn.abort()
        if stream.conn is conn:
            stream.conn = None


class SharedHTTPSession(HTTPSession):
    """A handshake session of an endpoint whose fan-out is shared: its standalone stream is fed from the log."""

    __slots__ = ("shared",)

    shared: SharedSessions

    async def send(self, data: bytes, msg: Outgoing | None = None) -> None:
        position = LOG_POSITION.get()
        if position is not None:  # an event this worker delivers from the log: for the GET stream, if it is here
            stream = self.standalone
            if stream is not None and stream.conn is not None:
                _offer(stream, position, data)
            return
        await self.shared.post(self, data, msg)  # the worker that holds (or opens) the GET stream sends it


class SharedSessions:
    """The cross-worker side of one endpoint (see the module docstring)."""

    def __init__(
        self,
        sse: SSEPump,
        table: dict[str, HTTPSession],
        fanout: SharedFanout,
        *,
        max_followers: int = DEFAULT_MAX_FOLLOWERS,
    ) -> None:
        self.sse = sse  # the endpoint's SSE side
        self.table = table  # the endpoint's sessions (SessionManager.table)
        self.fanout = fanout
        self.max_followers = max_followers
        self.followers: int = 0
        self._cancels: dict[str, tuple[float, int]] = {}  # session -> (second, cancellations logged in it)
        fanout.on_session_event(self._on_event)

    # ------------------------------------------------------------------ sessions

    def adopt(self, hs: HTTPSession) -> None:
        """A session this worker now holds (created or restored): its requests and stream numbers are this
        worker's."""
        if isinstance(hs, SharedHTTPSession):
            hs.shared = self
        worker = self.fanout.worker
        if worker:
            hs.session.peer.id_base = self.fanout.id_base
            hs.base = hs.next_no = worker << ID_SHIFT

    async def post(self, hs: HTTPSession, data: bytes, msg: Outgoing | None) -> None:
        """A message for the session's GET stream, sent outside any request: logged for the session (a request
        that cannot be logged fails at once; a notification is dropped, with a warning)."""
        try:
            await self.fanout.post(hs.id, "direct", data)
        except Exception as exc:
            if msg is not None and msg.kind == engine_messages.REQUEST:
                raise ConnectionClosed(f"the session's stream cannot be reached: {exc}") from exc
            logger.warning("session %s: a message for its GET stream was lost: %s", hs.id[:8], exc)

    async def receive(self, hs: HTTPSession, msg: Parsed | Batch, body: bytes) -> None:
        """A POST's notifications and answers: each goes to the worker that waits for it (see the module
        docstring). Raises ``ConnectionError`` when one cannot be passed on (the client may post it again)."""
        peer = hs.session.peer
        me = self.fanout.worker
        whole = not isinstance(msg, Batch)
        for item in (msg,) if not isinstance(msg, Batch) else msg:
            target: int | None = None
            if isinstance(item, (Response, ErrorResponse)):
                target = worker_of(item.id)
            elif isinstance(item, Notification) and item.params:
                if item.method == "notifications/progress":
                    target = worker_of(item.params.get("progressToken"))
                elif item.method == "notifications/cancelled" and not peer.is_running(item.params.get("requestId")):
                    if self._may_log_cancel(hs.id):
                        with contextlib.suppress(ValueError):  # (an oversized one is only delivered here)
                            await self.fanout.post(hs.id, "cancel", body if whole else jsonrpc.encode(item))
                    continue
            if target is not None and target != me:  # (an answer or a progress notification: a Message)
                data = body if whole else jsonrpc.encode(cast("Message", item))
                if not await self.fanout.forward(target, hs.id, data):
                    logger.info("session %s: an answer for worker %d, which is gone", hs.id[:8], target)
                continue
            await peer.receive_parsed(item, NULL_OUTBOX)

    def _may_log_cancel(self, sid: str) -> bool:
        """At most :data:`MAX_LOGGED_CANCELS` a second for one session (the table of counts is bounded too)."""
        now = int(time.monotonic())
        second, count = self._cancels.get(sid, (now, 0))
        if second != now:
            count = 0
        if count >= MAX_LOGGED_CANCELS:
            return False
        if len(self._cancels) >= 10_000:
            self._cancels.clear()
        self._cancels[sid] = (now, count + 1)
        return True

    async def _on_event(self, entry: LogEntry) -> None:
        hs = self.table.get(entry.value)
        if hs is None or hs.session.closed:
            return
        if entry.kind == "direct":
            stream = hs.standalone
            if stream is not None and stream.conn is not None:  # else whoever holds (or opens) the stream sends it
                data = await self.fanout.payload(entry)
                if data is not None:
                    _offer(stream, entry.position, data)
            return
        if entry.data is None:
            return
        try:
            msg = jsonrpc.parse(entry.data)
        except Exception:
            return
        peer = hs.session.peer
        t = type(msg)
        if entry.kind == "forward" and t in (Response, ErrorResponse, Notification):
            await peer.receive_parsed(msg, NULL_OUTBOX)  # (answers resolve this session's requests only)
        elif (
            entry.kind == "cancel"
            and isinstance(msg, Notification)
            and msg.params
            and peer.is_running(msg.params.get("requestId"))  # (the worker running it cancels it)
        ):
            await peer.receive_parsed(msg, NULL_OUTBOX)

    # ------------------------------------------------------------------ the GET stream

    async def get(self, hs: HTTPSession, last: str | None, receive: Receive, send: Send) -> None:
        """A GET of the session's standalone stream, fresh or resumed (``Last-Event-ID``), on any worker."""
        if last is not None and not last.startswith("g"):
            await self.resume_post(hs, last, receive, send)
            return
        start = last[1:] if last is not None else self.fanout.position
        if start is None:
            await respond(send, 503, unavailable(ConnectionError("the notification log is unreachable")))
            return
        if last is not None and position_order(start) == 0:
            await respond(send, 400, bad(INVALID_REQUEST, "Bad Request: cannot resume from that Last-Event-ID"))
            return
        stream = hs.standalone
        if stream is None:
            stream = hs.standalone = Stream(self.sse, hs, hs.base, SSE_MODE)
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        conn = Conn(self.sse.queue_size, self.sse.queue_bytes)
        taken: list[tuple[int, bytes]] = []
        old = stream.conn
        if old is not None:
            if last is None:
                # a new GET while one is open here (that one went half-open, or the client lost track of it): the
                # newer one takes over what the older one has not written yet, each event with its id
                taken = old.hand_over()
                conn.last_seq = old.last_seq
            else:
                old.abort()  # the client resumes, so it considers that connection dead
        stream.conn = conn  # events delivered from now on queue up; the replay below covers what came before
        hs.busy += 1
        try:
            for order, frame in taken:  # (before the replay: they came first; the replay skips them by position)
                await send({"type": "http.response.body", "body": frame, "more_body": True})
                conn.last_seq = max(conn.last_seq, order)
            feats = hs.session.features
            if last is None and feats is not None and feats.sse_polling and position_order(start) >= conn.last_seq:
                await send({"type": "http.response.body", "body": self._priming(start), "more_body": True})
            try:
                await self._replay(hs, start, conn, send)
            except ConnectionError as exc:  # the log cannot be read now: the client comes back (here or elsewhere)
                logger.warning("session %s: its GET stream could not be replayed: %s", hs.id[:8], exc)
                conn.queue.put_nowait((0, b"retry: 1000\n\n"))
                conn.end()
            expiry = at_token_expiry(conn.abort)  # (behind protect(): the GET ends with the token it was opened with)
            try:
                await self.sse.pump(conn, receive, send)
            finally:
                if expiry is not None:
                    expiry.cancel()
        finally:
            hs.busy -= 1
            hs.last_seen = time.monotonic()
            if stream.conn is conn:
                stream.conn = None

    def _priming(self, position: str) -> bytes:
        frame = b"id: g" + position.encode() + b"\n"
        retry = self.sse.retry_interval
        if retry is not None:
            frame += b"retry: " + str(int(retry)).encode() + b"\n"
        return frame + b"data: \n\n"

    async def _replay(self, hs: HTTPSession, after: str, conn: Conn, send: Send) -> None:
        """Send what the log holds for this session after ``after`` (a gap: "look again" notices first)."""
        while True:
            entries = await self.fanout.read(after, _READ)
            if entries is None:  # the log no longer holds `after`: the client looks again, then the log from its start
                for notice in self._look_again(hs):
                    await send({"type": "http.response.body", "body": sse_frame(notice, None), "more_body": True})
                entries = await self.fanout.read("", _READ) or []
            for entry in entries:
                data = await self._wanted(hs, entry)
                order = position_order(entry.position)
                if data is not None and order > conn.last_seq:
                    frame = sse_frame(data, b"g" + entry.position.encode())
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                conn.last_seq = max(conn.last_seq, order)
                after = entry.position
            if len(entries) < _READ:
                return

    async def _wanted(self, hs: HTTPSession, entry: LogEntry) -> bytes | None:
        """The message a log entry is for this session (what the server's delivery would send it), or None. (The
        rule of ``Server.deliver_*``: list changes to every initialized session, a resource's update to its
        subscribers, and a list change only to a session declared that list.)"""
        session = hs.session
        if entry.kind == "list_changed":
            if not session.initialized or not session.declared_list_changed(str(entry.value)):
                return None
            return engine_messages.notification(f"notifications/{entry.value}/list_changed", None).data
        if entry.kind == "resource_updated":
            if entry.value not in session.subscriptions:
                return None
            return engine_messages.notification("notifications/resources/updated", {"uri": entry.value}).data
        if entry.kind == "direct" and entry.value == hs.id:
            return await self.fanout.payload(entry)
        return None

    @staticmethod
    def _look_again(hs: HTTPSession) -> list[bytes]:
        session = hs.session
        out = [
            engine_messages.notification(f"notifications/{k}/list_changed", None).data
            for k in _LIST_KINDS
            if session.declared_list_changed(k)
        ]
        out += [
            engine_messages.notification("notifications/resources/updated", {"uri": uri}).data
            for uri in sorted(session.subscriptions)
        ]
        return out

    # ------------------------------------------------------------------ POST streams of other workers

    async def resume_post(self, hs: HTTPSession, last: str, receive: Receive, send: Send) -> None:
        """Resume a request's stream (``<stream>_<seq>``): this worker's own through the endpoint; another
        worker's from the shared event store, followed up to the answer while that worker runs."""
        no_s, _, seq_s = last.partition("_")
        store = self.sse.event_store
        if not (is_number(no_s) and is_number(seq_s)) or store is None:
            await respond(send, 400, bad(INVALID_REQUEST, "Bad Request: cannot resume from that Last-Event-ID"))
            return
        no, after = int(no_s), int(seq_s)
        writer = no >> ID_SHIFT
        if (hs.live and no in hs.live) or writer == self.fanout.worker or not isinstance(store, FollowableEventStore):
            await self.sse.resume(hs, last, receive, send)
            return
        key = f"{hs.id}/{no}"
        try:
            first = await store.follow(key, after, 0)
        except ConnectionError as exc:
            await respond(send, 503, unavailable(exc), extra=((b"retry-after", b"1"),))
            return
        if first is None:
            await respond(send, 400, bad(INVALID_REQUEST, "Bad Request: the events after that id are gone"))
            return
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        events, ended = first
        following = not ended and self.followers < self.max_followers
        if following:
            self.followers += 1
        gone = asyncio.get_running_loop().create_task(wait_disconnect(receive))
        writer_gone = False
        hs.busy += 1
        try:
            while True:
                for seq, data in events:
                    frame = sse_frame(data, f"{no}_{seq}".encode())
                    await send({"type": "http.response.body", "body": frame, "more_body": True})
                    after = seq
                if ended or not following or gone.done():
                    break
                try:
                    followed = await store.follow(key, after, self.sse.keepalive or 15.0)
                    if followed is None:
                        break  # expired or forgotten
                    events, ended = followed
                    if not events and (gone.done() or not await self.fanout.alive(writer)):
                        writer_gone = not gone.done()
                        break  # the client left, or the worker running the request is gone
                except ConnectionError:
                    await send({"type": "http.response.body", "body": b"retry: 1000\n\n", "more_body": True})
                    break  # the client resumes again from what it has
                if not events:
                    await send({"type": "http.response.body", "body": b":\n\n", "more_body": True})
            if writer_gone:
                await self._answer_orphan(store, key, send)
        finally:
            hs.busy -= 1
            hs.last_seen = time.monotonic()
            if following:
                self.followers -= 1
            gone.cancel()
        with contextlib.suppress(Exception):
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    @staticmethod
    async def _answer_orphan(store: FollowableEventStore, key: str, send: Send) -> None:
        """The worker running the request whose stream is followed is gone and will never answer it: answer it
        here with an error (its id is kept with the stream by a :class:`RequestEventStore`), so the client fails
        the request at once (and may retry it) instead of waiting out its timeout."""
        if not isinstance(store, RequestEventStore):
            return
        try:
            rid = await store.request_of(key)
        except ConnectionError:
            return
        if rid is not None:
            error = error_body(rid, INTERNAL_ERROR, ORPHANED)
            await send({"type": "http.response.body", "body": sse_frame(error, None), "more_body": True})

    # ------------------------------------------------------------------ shutdown

    def close_streams(self, retry_ms: int) -> int:
        """Draining: end every GET stream this worker holds after a ``retry:`` hint (the client resumes on another
        worker from the log); returns how many."""
        closed = 0
        for hs in list(self.table.values()):
            stream = hs.standalone
            conn = stream.conn if stream is not None else None
            if conn is None or conn.ended:
                continue
            with contextlib.suppress(asyncio.QueueFull):
                conn.queue.put_nowait((0, b"retry: " + str(int(retry_ms)).encode() + b"\n\n"))
            conn.end()
            closed += 1
        return closed
