"""Streamable HTTP server, the handshake-era session table: :class:`SessionManager`.

It creates sessions (``initialize``), restores them from the session store (a request for a session another
worker opened), refreshes them against the store (which renews the record's TTL), sweeps idle ones, makes room
under ``max_sessions`` / ``max_sessions_per_client`` (least recently used idle sessions are evicted), ends them,
and keeps the store and the bus in step (a change of log level or subscriptions is saved and announced; a
change announced by another worker is reloaded). The endpoint looks sessions up in :attr:`SessionManager.table`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import heapq
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

from ..._asgi import Scope
from ...engine import NULL_OUTBOX
from ...hosting import SESSION_BINDING
from ...protocol import versions
from ...protocol.errors import INVALID_REQUEST
from ...stores.base import BaseSessionStore
from .stream import WORKER_SHIFT, HTTPSession, Stream
from .wire import error_body

if TYPE_CHECKING:
    from ...hosting import Fanout, HostedServer
    from ...protocol.jsonrpc import RequestId
    from ...stores import EventStore, SessionStore
    from .shared import SharedSessions
    from .stream import SSEPump

logger: logging.Logger = logging.getLogger("mcpkit.http")


class SessionManager:
    """The handshake-era sessions of one endpoint: the table, the session store and the bus.

    Args:
        server: the server that creates each session's :class:`~mcpkit.server.lowlevel.ServerSession`.
        session_store, event_store, session_idle_timeout, max_sessions, max_sessions_per_client: as for
            :class:`~mcpkit.transports.http.streamable.StreamableHTTPEndpoint`.
        peer_options: options for each session's peer.
    """

    def __init__(
        self,
        server: HostedServer,
        *,
        session_store: SessionStore | None,
        event_store: EventStore | None,
        session_idle_timeout: float,
        max_sessions: int,
        max_sessions_per_client: int,
        peer_options: dict[str, Any],
    ) -> None:
        self.server = server
        self.session_store = session_store
        self.event_store = event_store
        self.session_idle_timeout = session_idle_timeout
        self.max_sessions = max_sessions
        self.max_sessions_per_client = max_sessions_per_client
        self.peer_options = peer_options
        self.table: dict[str, HTTPSession] = {}  # session id -> session
        self._clients: dict[Any, dict[str, HTTPSession]] = {}  # client key -> its sessions (max_sessions_per_client)
        self._evicted = 0  # idle sessions evicted because the table was full
        self._evicted_logged = -10.0
        self._fanout: Fanout | None = None  # the server's fan-out this manager listens to (session changes, DELETEs)
        # with a shared fan-out (clients move between workers): its sessions and their cross-worker side
        self._store_warned = -10.0
        self._save_warned = float("-inf")
        self.session_class: type[HTTPSession] = HTTPSession
        self.shared: SharedSessions | None = None

    def create(self, client: Any = None) -> HTTPSession:
        """A new session (``initialize``) of ``client`` (see :func:`client_key`), in the table."""
        sid = secrets.token_urlsafe(24)  # 192 bits from the OS CSPRNG; [A-Za-z0-9_-] only (visible ASCII)
        hs = self.session_class(sid, client)
        hs.session = self.server.create_session(hs, **self.peer_options)
        hs.session.state[SESSION_BINDING] = _binding(sid)
        if self.shared is not None:
            self.shared.adopt(hs)
        self.table[sid] = hs
        if client is not None:
            self._clients.setdefault(client, {})[sid] = hs
        return hs

    def share(self, sse: SSEPump) -> SharedSessions | None:
        """With a session store and a shared fan-out (clients may reach any worker with any request): sessions of
        :class:`~.shared.SharedHTTPSession` and their cross-worker side, returned; else None."""
        from ...stores.log import SharedFanout
        from .shared import SharedHTTPSession, SharedSessions

        fanout = self.server.fanout
        if self.session_store is None or not isinstance(fanout, SharedFanout):
            return None
        self.session_class = SharedHTTPSession
        self.shared = SharedSessions(sse, self.table, fanout)
        return self.shared

    async def receive(self, hs: HTTPSession, msg: Any, body: bytes) -> None:
        """A POST of notifications and answers only, for session ``hs``; with a shared fan-out an answer to another
        worker's request goes to that worker (raises ``ConnectionError`` when it cannot)."""
        if self.shared is None:
            await hs.session.peer.receive_parsed(msg, NULL_OUTBOX, body)
        else:
            await self.shared.receive(hs, msg, body)

    async def find(self, sid: str | None, network: str | None = None) -> HTTPSession | None:
        """The session ``sid`` as this worker serves it: its copy (refreshed against the store), or restored from
        the store (``network``: the transport it is restored for, see :func:`network_of`); None when unknown or
        ended. Raises ``ConnectionError`` when the store cannot be reached."""
        hs = self.table.get(sid)  # type: ignore[arg-type]
        if self.session_store is not None:
            if hs is None:
                return await self.restore(sid, network) if sid is not None else None
            if not await self.refresh(hs):
                return None  # ended on another worker (or expired in the store)
        return hs

    def close_streams(self, retry_ms: int) -> None:
        """Draining: end every GET stream this worker holds, after a ``retry:`` hint where it can be resumed."""
        if self.shared is not None:
            self.shared.close_streams(retry_ms)
            return
        for hs in list(self.table.values()):
            stream = hs.standalone
            if stream is not None and stream.conn is not None and not stream.close_connection(retry_ms):
                stream.conn.end()

    async def restore(self, sid: str, network: str | None = None) -> HTTPSession | None:
        """The session ``sid`` as the session store records it, now held by this worker too; None when the store
        does not know it (or serves another era), or every session here is busy and the table is full. Raises
        ``ConnectionError`` when the store cannot be reached (the request gets 503, not 404)."""
        assert self.session_store is not None
        try:
            state = await self.session_store.load(sid)
        except ConnectionError:
            raise
        except Exception:
            logger.exception("session store: could not load session %s", sid[:8])
            return None
        if not state or state.get("version") not in self.server.handshake_versions:
            return None
        if sid in self.table:
            return self.table[sid]
        if len(self.table) >= self.max_sessions and await self.make_room(None) is not None:
            return None  # every session here is busy
        if sid in self.table:  # (restored meanwhile by a concurrent request)
            return self.table[sid]
        owner = state.get("owner")
        client = tuple(owner) if isinstance(owner, list) and len(owner) == 3 and owner[0] == "principal" else None
        hs = self.session_class(sid, client)
        session = hs.session = self.server.create_session(hs, **self.peer_options)
        session.peer.network = network
        session.state[SESSION_BINDING] = _binding(sid)  # (the name every worker gives it: its tasks are found)
        session.version = state["version"]
        session.features = versions.features(state["version"])
        caps = state.get("capabilities")
        session.client_capabilities = caps if isinstance(caps, dict) else {}
        info = state.get("client_info")
        session.client_info = info if isinstance(info, dict) else None
        hs.stored = 1
        self.apply(hs, state)
        # Not renewed here: the record was just saved or renewed by the worker that last served it; the next
        # request (or the sweeper, while a stream stays open) renews it.
        hs.renewed = time.monotonic()
        # Stream numbers key the shared event store: start where the originating worker's numbers will not reach.
        hs.base = hs.next_no = (secrets.randbits(31) + 1) << WORKER_SHIFT
        if self.shared is not None:
            self.shared.adopt(hs)  # (numbered by worker: unique among workers)
        self.table[sid] = hs
        if client is not None:
            self._clients.setdefault(client, {})[sid] = hs
        self.bus()  # listen for changes to the sessions this worker now holds
        return hs

    async def refresh(self, hs: HTTPSession) -> bool:
        """Re-read a session this worker holds from the store and renew its TTL: False when the store no longer
        has it (deleted on another worker, or expired), in which case this worker's copy is ended too."""
        store = self.session_store
        if store is None or not hs.stored:
            return True  # not recorded yet (its initialize is still being answered)
        ttl = self.session_idle_timeout
        now = time.monotonic()
        try:
            state: dict[str, Any] | None
            if isinstance(store, BaseSessionStore):
                state = await store.touch(hs.id, ttl)  # one step: read + renew
            else:  # (a store of the protocol alone)
                state = await store.load(hs.id)
                if state is not None and now - hs.renewed >= ttl / 3:
                    await store.save(hs.id, state, ttl)
        except ConnectionError as exc:  # the store is unreachable: keep serving this worker's copy
            if now - self._store_warned >= 10.0:  # one line per 10 s while it is away, not one per request
                self._store_warned = now
                logger.warning("session store unreachable; serving this worker's copies of sessions: %s", exc)
            return True
        except Exception:
            logger.exception("session store: could not reload session %s", hs.id[:8])
            return True
        hs.renewed = now
        if state is None:
            await self.end(hs, forget=False)
            return False
        self.apply(hs, state)
        return True

    def apply(self, hs: HTTPSession, state: dict[str, Any]) -> None:
        """Adopt the stored log level and subscriptions (unless this worker has a change of its own not saved
        yet: it is being saved, and wins) and the initialized flag."""
        session = hs.session
        if not hs.dirty():
            level = state.get("log_level")
            subs = state.get("subscriptions")
            session.log_level = level if isinstance(level, str) else None
            wanted = {u for u in subs if isinstance(u, str)} if isinstance(subs, list) else set()
            if wanted != session.subscriptions:
                session.subscriptions = wanted
            hs.synced_level, hs.synced_subs = session.log_level, frozenset(session.subscriptions)
        if state.get("initialized") and not session.initialized:
            session.mark_initialized()
            hs.stored = 2

    def state(self, hs: HTTPSession) -> dict[str, Any]:
        """The record the session store keeps for ``hs``."""
        session = hs.session
        return {
            "version": session.version,
            "capabilities": session.client_capabilities,
            "client_info": session.client_info,
            "initialized": session.initialized,
            "log_level": session.log_level,
            "subscriptions": sorted(session.subscriptions),
            # the principal that opened it: every worker sharing the store refuses the session to anyone else
            "owner": list(hs.client) if hs.client is not None and hs.client[0] == "principal" else None,
        }

    async def save(self, hs: HTTPSession, *, announce: bool = False) -> None:
        """Record the session's state so another worker sharing the store can serve this session; ``announce``
        tells the other workers holding a copy (over the bus, if the server has one) to reload it."""
        session = hs.session
        if session.version is None or self.session_store is None:
            return
        if hs.saving is None:
            hs.saving = asyncio.Lock()
        # Saves of one session are serialized and each takes the state when its turn comes: two racing saves (the
        # initialize answer's and notifications/initialized's) cannot land in the wrong order and leave the
        # older state in the store.
        async with hs.saving:
            if session.closed:
                return  # a session ended meanwhile (e.g. by a DELETE) must not come back
            state = self.state(hs)
            hs.synced_level, hs.synced_subs = session.log_level, frozenset(session.subscriptions)
            renewed = time.monotonic()
            try:
                await self.session_store.save(hs.id, state, self.session_idle_timeout)
            except Exception as exc:
                self._save_failed(hs, exc)
                return
            # only now: a request racing this save re-reads the record once `stored` says there is one
            hs.stored = 2 if state["initialized"] else 1
            hs.renewed = renewed
        if announce:
            await self.announce(hs.id)

    def _save_failed(self, hs: HTTPSession, exc: Exception) -> None:
        """Log a failed save: one line per 10 s while the store fails (a burst of new clients while Redis is down,
        or refuses writes at its ``maxmemory``, would log one traceback per request); the traceback only for what
        is not the store being unavailable."""
        now = time.monotonic()
        if now - self._save_warned < 10.0:
            return
        self._save_warned = now
        if isinstance(exc, ConnectionError):
            logger.warning("session store: could not save session %s (and others for 10 s): %s", hs.id[:8], exc)
        else:
            logger.exception("session store: could not save session %s (and others for 10 s)", hs.id[:8])

    async def sync(self, hs: HTTPSession) -> None:
        """The log level or the subscriptions changed (a request of this session): save and announce. A session
        not recorded yet (its ``initialize`` answered) is recorded, before the answer leaves."""
        session = hs.session
        hs.synced_level, hs.synced_subs = session.log_level, frozenset(session.subscriptions)
        await self.save(hs, announce=bool(hs.stored))

    def bus(self) -> Fanout:
        """The server's fan-out (``server.fanout``), listened to for session changes once this manager holds
        sessions restored from a store."""
        fanout = self.server.fanout
        if fanout is not self._fanout and self.session_store is not None:
            self._fanout = fanout
            fanout.on_session_changed(self.on_session_changed)
        return fanout

    async def announce(self, sid: str) -> None:
        """Tell the other workers (through the server's fan-out) that session ``sid`` changed."""
        await self.bus().session_changed(sid)

    async def on_session_changed(self, sid: str) -> None:
        """Another worker changed (or deleted) session ``sid``: reload this worker's copy, if it holds one."""
        hs = self.table.get(sid)
        if hs is None or self.session_store is None:
            return
        try:
            state = await self.session_store.load(sid)
        except Exception:
            logger.exception("session store: could not load session %s", sid[:8])
            return
        if state is None:
            await self.end(hs, forget=False)  # the worker that deleted it forgot the events
        else:
            self.apply(hs, state)

    async def make_room(self, client: Any) -> tuple[int, bytes] | None:
        """Room for one more session of ``client``: evict least recently used idle sessions (the client's own at
        its quota, anyone's when the table is full); the refusal (status, body) when only busy sessions remain."""
        forget = self.session_store is None
        mine = self._clients.get(client)
        if mine is not None and len(mine) >= self.max_sessions_per_client:
            idle = [hs for hs in mine.values() if hs.busy == 0]
            if not idle:
                return 429, error_body(
                    None,
                    INVALID_REQUEST,
                    f"too many sessions for this client (max_sessions_per_client={self.max_sessions_per_client}, "
                    "all busy): end sessions you no longer use with DELETE",
                )
            await self.end(min(idle, key=_last_seen), forget=forget)
        if len(self.table) >= self.max_sessions:
            idle = [hs for hs in self.table.values() if hs.busy == 0]
            if not idle:
                return 503, error_body(
                    None,
                    INVALID_REQUEST,
                    f"too many sessions (max_sessions={self.max_sessions}, all busy): retry later",
                )
            count = len(self.table) - self.max_sessions + max(1, self.max_sessions // 100)
            for hs in heapq.nsmallest(count, idle, key=_last_seen):
                await self.end(hs, forget=forget)
            self._evicted += count
            now = time.monotonic()
            if now - self._evicted_logged >= 10.0:  # one line per 10 s under a flood, not one per session
                self._evicted_logged = now
                logger.warning(
                    "session table full (max_sessions=%d): %d idle sessions evicted so far",
                    self.max_sessions,
                    self._evicted,
                )
        return None

    async def expire_idle(self) -> int:
        """Reclaim sessions idle longer than ``session_idle_timeout``; returns how many.

        With a session store only this worker's copy goes: the session may be alive on another worker, so its
        stored record and its events stay (they end with a DELETE or with the store's own TTL)."""
        deadline = time.monotonic() - self.session_idle_timeout
        victims = [hs for hs in self.table.values() if hs.busy == 0 and hs.last_seen < deadline]
        for hs in victims:
            await self.end(hs, forget=self.session_store is None)
        return len(victims)

    async def renew_busy(self) -> int:
        """Renew the stored TTL of the sessions that have a request or a GET stream open for a third of
        ``session_idle_timeout`` without a new request (the sweeper calls this); returns how many were renewed."""
        if self.session_store is None:
            return 0
        due = time.monotonic() - self.session_idle_timeout / 3
        renewed = 0
        for hs in [hs for hs in self.table.values() if hs.busy and hs.stored and hs.renewed <= due]:
            if await self.refresh(hs):
                renewed += 1
        return renewed

    async def sweep(self) -> None:
        """The sweeper task: expire idle sessions and renew the stored TTL of busy ones, forever."""
        interval = max(0.02, min(self.session_idle_timeout / 4, 30.0))
        while True:
            await asyncio.sleep(interval)
            try:
                await self.expire_idle()
                await self.renew_busy()
            except Exception:  # pragma: no cover - defensive: the sweeper must not die
                logger.exception("session sweeper failed")

    async def end(self, hs: HTTPSession, *, forget: bool = True) -> None:
        """End this worker's copy of the session; ``forget``: also drop its events from the event store."""
        if self.table.pop(hs.id, None) is None:
            return
        mine = self._clients.get(hs.client)
        if mine is not None:
            mine.pop(hs.id, None)
            if not mine:
                del self._clients[hs.client]
        session = hs.session
        session.closed = True
        orphans = record_orphans(hs)  # (each POST's answer says the session ended, with the request's id)
        if hs.standalone is not None and hs.standalone.conn is not None:
            hs.standalone.conn.end()
            hs.standalone.conn = None
        if hs.live:
            for stream in hs.live.values():
                if stream.conn is not None and stream not in orphans:  # (those end with their answer)
                    stream.conn.end()
        with contextlib.suppress(Exception):
            await session.peer.close("session ended")
        if forget and self.event_store is not None:
            with contextlib.suppress(Exception):
                await self.event_store.forget(hs.id + "/")
        hs.standalone = None
        hs.live = None

    async def delete(self, hs: HTTPSession) -> None:
        """A DELETE: end the session, drop its stored record and tell the other workers (they end their copies)."""
        await self.end(hs)
        if self.session_store is not None:
            with contextlib.suppress(Exception):
                await self.session_store.delete(hs.id)
            await self.announce(hs.id)  # the other workers end their copies (and GET streams) now

    async def close(self) -> None:
        """End every session this worker holds (shutdown); with a session store they live on in the store."""
        shared = self.session_store is not None
        for hs in list(self.table.values()):
            await self.end(hs, forget=not shared)


def record_orphans(hs: HTTPSession) -> dict[object, list[RequestId]]:
    """Record the requests of ``hs`` still running (``hs.orphans``: each POST's stream, or task, to the ids it
    carries), so that the answer of a POST cut off under them (the session ends, the server stops) names each."""
    orphans: dict[object, list[RequestId]] = {}
    for ctx in hs.session.peer.requests_in_progress():
        out = ctx.out
        key = out if isinstance(out, Stream) and out.hs is hs else ctx.task if out is hs else None
        if key is not None:
            orphans.setdefault(key, []).append(ctx.id)
    hs.orphans = orphans
    return orphans


def _last_seen(hs: HTTPSession) -> float:
    return hs.last_seen


def client_key(scope: Scope) -> tuple[Any, ...] | None:
    """Whose session this is, for ``max_sessions_per_client``: the authenticated principal, else the remote address."""
    auth = scope.get("auth")
    if auth is not None:
        return (
            "principal",
            getattr(auth, "issuer", None),
            getattr(auth, "subject", None) or getattr(auth, "client_id", None),
        )
    client = scope.get("client")
    return ("address", client[0]) if client else None  # (no address known: only max_sessions applies)


def network_of(scope: Scope) -> str:
    """The transport an ASGI connection came over, as OpenTelemetry's ``network.transport`` names it (what the
    sessions made for it say, ``Peer.network``): "unix" when the server's address has no port (a Unix domain
    socket: uvicorn's ``--uds`` gives ``(path, None)``), else "tcp"."""
    server = scope.get("server")
    return "unix" if server is not None and server[1] is None else "tcp"


def owned_by(hs: HTTPSession, scope: Scope) -> bool:
    """A session opened by an authenticated principal serves that principal only, on every worker sharing the
    session store (the owner travels in the stored record); another token gets 404, as for an unknown session,
    and learns nothing. Sessions opened without authentication are keyed by address, which is no binding."""
    return owner_matches(hs.client, scope)


def owner_matches(owner: tuple[Any, ...] | None, scope: Scope) -> bool:
    """Whether the request of ``scope`` may use a session (or legacy SSE stream) opened by ``owner`` (a
    :func:`client_key`): always unless a principal opened it, then only that principal."""
    return owner is None or owner[0] != "principal" or client_key(scope) == owner


def _binding(session_id: str) -> str:
    """A session's binding (``hosting.SESSION_BINDING``), the same on every worker: a hash of its id (the id itself,
    a credential, is not copied into what the session owns)."""
    return hashlib.sha256(b"mcpkit session binding:" + session_id.encode()).hexdigest()[:32]
