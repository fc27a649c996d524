"""The upstream side of :mod:`mcpkit.proxies`: the connections a proxy holds to one target and whom each speaks
for (a handshake-era client session, a 2026-07-28 request's lease, or nobody: the primary), and the suspended
upstream requests of 2026-07-28 clients answering input rounds."""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import contextvars
import itertools
import logging
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit

from .client.client import Client
from .client.targets import Target, parse_target
from .protocol.errors import MCPError, MethodNotFound
from .protocol.jsonrpc import JSONDict
from .server.compose import prefixed_uri
from .server.lowlevel import ServerRequestContext, ServerSession


class ProxyHost(Protocol):
    """What the connections need of their proxy (a :class:`~mcpkit.proxies.ProxyServer`)."""

    allow_private_network: bool
    max_upstream_sessions: int
    pool_size: int
    lease_timeout: float
    _background: set[asyncio.Task[None]]

    def offer_listeners(
        self, method: str, params: JSONDict, *, kind: str | None = None, uri: str | None = None
    ) -> None: ...

    async def notify_list_changed(self, kind: str) -> None: ...

    async def notify_resource_updated(self, uri: str) -> None: ...


logger = logging.getLogger("mcpkit.proxy")

#: the handshake-era request whose upstream request is answering an input round (2026-07-28 upstream: the round is
#: answered inside the request's own task, so the request is known without guessing)
_ASKING: contextvars.ContextVar[ServerRequestContext | None] = contextvars.ContextVar(
    "mcpkit_proxy_asking", default=None
)

# ---------------------------------------------------------------------------------------------- one connection


class _Conn:
    """One upstream connection and who it speaks for: a handshake-era client session (``session``, with the
    requests of it in flight), a 2026-07-28 request that leased it (``lease``), or nobody (the primary)."""

    def __init__(self, upstream: Upstream, session: ServerSession | None, primary: bool = False) -> None:
        self.upstream = upstream
        self.seq = next(upstream._seq)  # the order connections were opened in: a pool prefers its oldest
        self.session = session
        self.primary = primary
        self.client: Client | None = None
        self.inflight: list[ServerRequestContext] = []
        self.leases: list[_Lease] = []  # one at a time, unless the upstream speaks 2026-07-28 (it never asks)
        self.caps: JSONDict | None = None  # the client capabilities it declares upstream (None: all it can)

    @property
    def lease(self) -> _Lease | None:
        """The 2026-07-28 request this connection speaks for, when there is exactly one."""
        return self.leases[0] if len(self.leases) == 1 else None

    def _speaker(self) -> ServerRequestContext | None:
        if self.leases:
            return self.leases[0].sctx if len(self.leases) == 1 else None
        return self.inflight[0] if len(self.inflight) == 1 else None

    async def ask(self, method: str, params: JSONDict) -> JSONDict:
        """The upstream asks its client (sampling, elicitation, roots): ask ours."""
        asking = _ASKING.get()
        if asking is not None:  # an input round of a 2026-07-28 upstream, for a handshake-era client's request
            return await asking.ask(method, params)
        lease = self.lease
        if lease is not None:
            if method not in ("roots/list",) and not lease.sctx.has_client_capability(_ask_capability(method)):
                raise MethodNotFound(f"Method not found: {method} (the client did not declare it)")
            future: asyncio.Future[JSONDict] = asyncio.get_running_loop().create_future()
            lease.ask(method, params, future)
            return await future
        sctx = self._speaker()
        if sctx is not None:
            return await sctx.ask(method, params)
        if self.session is not None:
            return await self.session.request(method, params)
        raise MethodNotFound(f"Method not found: {method} (no client to ask)")

    async def sample(self, params: JSONDict) -> JSONDict:
        return await self.ask("sampling/createMessage", params)

    async def elicit(self, params: JSONDict) -> JSONDict:
        return await self.ask("elicitation/create", params)

    async def roots(self) -> list[Any]:
        result = await self.ask("roots/list", {})
        roots = result.get("roots")
        return roots if isinstance(roots, list) else []

    async def log(self, params: JSONDict) -> None:
        level, data, name = params.get("level"), params.get("data"), params.get("logger")
        if not isinstance(level, str):
            return
        sctx = self._speaker()
        with contextlib.suppress(Exception):
            if sctx is not None:
                await sctx.log(level, data, name if isinstance(name, str) else None)
            elif self.session is not None and not self.session.closed:
                await self.session.log(level, data, name if isinstance(name, str) else None)

    async def notified(self, method: str, params: JSONDict | None) -> None:
        proxy = self.upstream.proxy
        prefix = self.upstream.prefix
        if method.endswith("/list_changed"):
            if self.session is not None and not self.session.closed:
                await self.session.notify(method, None)
            elif self.session is None:  # the primary or a pool connection: the listen streams hear of it
                proxy.offer_listeners(method, {}, kind=method.split("/")[1])
        elif method == "notifications/resources/updated" and params is not None:
            uri = params.get("uri")
            if not isinstance(uri, str):
                return
            outer = prefixed_uri(prefix, uri)
            if self.session is not None and not self.session.closed:
                await self.session.notify(method, {"uri": outer})
            elif self.primary:
                proxy.offer_listeners(method, {"uri": outer}, uri=outer)
        elif method == "notifications/elicitation/complete" and self.session is not None and params is not None:
            await self.session.notify(method, params)


def _ask_capability(method: str) -> str:
    return {"sampling/createMessage": "sampling", "elicitation/create": "elicitation"}.get(method, "roots")


def caps_key(caps: JSONDict | None) -> str:
    """What of a client's capabilities an upstream connection declares, as a key (None: everything)."""
    if caps is None:
        return "*"
    sampling, elicitation = caps.get("sampling"), caps.get("elicitation")
    parts = [
        "roots" if "roots" in caps else "",
        "sampling" if sampling is not None else "",
        "tools" if isinstance(sampling, dict) and "tools" in sampling else "",
        "elicitation" if elicitation is not None else "",
        "url" if isinstance(elicitation, dict) and "url" in elicitation else "",
    ]
    return ",".join(parts)


def _alive(conn: _Conn) -> bool:
    """Whether ``conn``'s upstream connection still stands (a stdio server that exited ends it)."""
    client = conn.client
    return client is not None and client.connected and client.session.ended is None


def _opened(conn: _Conn) -> int:
    return conn.seq


MAX_WATCHED = 256
"""Resource URIs one 2026-07-28 upstream is watched for at once: what the proxy's clients subscribed to or listen
for there, together (the default ``max_subscriptions`` of one listen stream of an mcpkit server)."""

MAX_ASKS = 64
"""What the upstream may ask at once in one 2026-07-28 request before the proxy answers for its client."""


class _Lease:
    """A 2026-07-28 request's hold on a pool connection: what the upstream asks meanwhile waits in ``asks`` (at
    most :data:`MAX_ASKS`), and wakes ``waker``, the future the request's exchange waits on."""

    def __init__(self, conn: _Conn, sctx: ServerRequestContext) -> None:
        self.conn = conn
        self.sctx = sctx
        self.asks: deque[tuple[str, JSONDict, asyncio.Future[JSONDict]]] = deque()
        self.waker: asyncio.Future[None] | None = None

    def ask(self, method: str, params: JSONDict, future: asyncio.Future[JSONDict]) -> None:
        """Queue what the upstream asks (a request beyond the bound is refused) and wake the exchange."""
        if len(self.asks) >= MAX_ASKS:
            raise MCPError(f"the upstream asked more than {MAX_ASKS} things at once in one request")
        self.asks.append((method, params, future))
        self.wake()

    def wake(self, _: object = None) -> None:
        """Wake the exchange waiting on this lease (the upstream asked, or its request ended)."""
        waker = self.waker
        if waker is not None and not waker.done():
            waker.set_result(None)


class ProgressRelay:
    """Upstream progress relayed to the client in order: the engine calls it synchronously (so no update is
    coalesced away), a task sends them one after the other to the request ``target()`` names (for a 2026-07-28
    call, the round in progress); :meth:`flush` waits until all are sent (before an answer goes out).

    Between two rounds of a 2026-07-28 call (answered with ``input_required``, its retry not here yet) no request
    of the client is open, and progress has nowhere to go: :meth:`hold` keeps what the upstream sends meanwhile
    and :meth:`resume` sends it on the retry, before the rest. At most :attr:`MAX_QUEUED` updates wait: beyond
    that the oldest waiting one is dropped (the latest progress is kept) and a warning is logged."""

    MAX_QUEUED = 256
    """Updates waiting to be sent (while the client reads slowly, or between two rounds)."""

    def __init__(self, target: Callable[[], ServerRequestContext]) -> None:
        self.target = target
        self.queue: asyncio.Queue[tuple[float, float | None, str | None]] = asyncio.Queue(self.MAX_QUEUED)
        self.task: asyncio.Task[None] | None = None
        self.dropped = 0
        self.closed = False
        self._open = asyncio.Event()
        self._open.set()

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self.closed:
            return  # (the request is over: nobody takes its progress any more)
        queue = self.queue
        if queue.full():  # the oldest waiting update goes; progress only increases, so order is kept
            queue.get_nowait()
            queue.task_done()
            self.dropped += 1
            if self.dropped == 1:
                logger.warning(
                    "%d progress updates of one request wait to be relayed: dropping the oldest ones", self.MAX_QUEUED
                )
        queue.put_nowait((progress, total, message))
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(self._run())

    def hold(self) -> None:
        """No request of the client is open (between two rounds): keep the updates until :meth:`resume`."""
        self._open.clear()

    def resume(self) -> None:
        """The client's next round is here (``target()`` names it): send what was kept, then the rest."""
        self._open.set()

    async def _run(self) -> None:
        while True:
            item = await self.queue.get()
            try:
                await self._open.wait()
                sctx = self.target()
                if not await sctx.report_progress(*item):
                    # (the client asked for no progress in this round, or its request has ended: nothing to send)
                    logger.debug("progress %s not relayed: request %r takes none", item[0], sctx.request_id)
            except Exception:
                logger.warning("could not relay a progress update", exc_info=True)
            finally:
                self.queue.task_done()

    async def flush(self) -> None:
        """Wait until every update received so far is sent (at most 5 s: a client reading too slowly)."""
        if self.task is not None:
            try:
                await asyncio.wait_for(self.queue.join(), 5.0)
            except TimeoutError:
                logger.warning("progress updates still unsent after 5 s: the answer goes out before them")

    def close(self) -> None:
        """The request is over: stop relaying."""
        self.closed = True
        if self.task is not None:
            self.task.cancel()


class _Exchange:
    """An upstream request of a 2026-07-28 client, suspended while its client answers input requests."""

    def __init__(self, lease: _Lease, task: asyncio.Task[JSONDict], relay: ProgressRelay | None) -> None:
        self.lease = lease
        self.relay = relay
        self.task = task
        self.pending: dict[str, asyncio.Future[JSONDict]] = {}
        self.expiry: asyncio.TimerHandle | None = None


# ---------------------------------------------------------------------------------------------- one target


class Upstream:
    """One forwarded-to server: its target, its primary connection, its pool and its per-session connections."""

    def __init__(self, proxy: ProxyHost, prefix: str | None, target: Any, client_options: dict[str, Any]) -> None:
        self.proxy = proxy
        self.prefix = prefix
        self.target: Target = parse_target(target)
        self.client_options = client_options
        self.primary: _Conn | None = None
        self.capabilities: JSONDict = {}
        self.info: JSONDict | None = None
        self.instructions: str | None = None
        self.modern = False
        self._idle: dict[str, list[_Conn]] = {}  # by the client capabilities a connection declares (caps_key)
        self._pool_count = 0
        self._pool_free = asyncio.Condition()
        self._seq = itertools.count()
        self._sessions: weakref.WeakKeyDictionary[ServerSession, _Conn] = weakref.WeakKeyDictionary()
        self._opening: dict[int, asyncio.Task[_Conn]] = {}
        self._all: set[_Conn] = set()
        self._watcher: asyncio.Task[None] | None = None
        self.watched: frozenset[str] = frozenset()  # (2026-07-28 upstream) the URIs its resource watch names
        self._resource_watch: asyncio.Task[None] | None = None
        self._rewatching = asyncio.Lock()
        self._relayed_kinds: dict[str, bool] = {}  # (2026-07-28 upstream) the list changes its primary relays
        self._replacing = asyncio.Lock()

    async def start(self) -> None:
        await self.check_target()
        self.primary = await self._open(None, primary=True)
        assert self.primary.client is not None
        client = self.primary.client
        self.capabilities = dict(client.server_capabilities)
        self.info = client.server_info
        self.instructions = client.instructions
        self.modern = client.modern
        if self.modern:  # list changes reach a 2026-07-28 client only on a listen stream: hold one, relay them
            kinds = {
                k: isinstance(self.capabilities.get(k), dict) and bool(self.capabilities[k].get("listChanged"))
                for k in ("tools", "prompts", "resources")
            }
            if any(kinds.values()):
                self._relayed_kinds = kinds
                self._watcher = asyncio.get_running_loop().create_task(self._relay_changes(client, kinds))

    async def _live_primary(self) -> _Conn:
        """(2026-07-28 upstream) The primary connection, which every request shares; one whose upstream ended (a
        stdio server that crashed) is replaced first by a new one (a new process), with the list-change relay and
        the resource watch it held: the requests after a crash reach a new server, as the pool's do."""
        primary = self.primary
        assert primary is not None
        if _alive(primary):
            return primary
        async with self._replacing:
            if self.primary is primary:  # (not replaced meanwhile by another request)
                logger.warning("the upstream %s ended: connecting again", self.target.description)
                await self._close(primary)
                new = await self._open(None, primary=True)
                assert new.client is not None
                self.primary = new
                if self._watcher is not None:
                    self._watcher.cancel()
                    self._watcher = asyncio.get_running_loop().create_task(
                        self._relay_changes(new.client, self._relayed_kinds)
                    )
                async with self._rewatching:
                    watched, self.watched = self.watched, frozenset()  # (the watch named them on the old one)
                await self.watch_resources(set(watched))
        assert self.primary is not None
        return self.primary

    async def _relay_changes(self, client: Client, kinds: dict[str, bool]) -> None:
        try:
            async with client.watch(
                tools=kinds["tools"], prompts=kinds["prompts"], resources=kinds["resources"]
            ) as watch:
                async for method, _ in watch:
                    if method.endswith("/list_changed"):
                        await self.proxy.notify_list_changed(method.split("/")[1])
        except Exception as exc:
            logger.warning("no longer relaying list changes of %s: %s", self.target.description, exc)

    async def watch_resources(self, uris: set[str]) -> None:
        """(2026-07-28 upstream) Hold one listen stream on the primary connection naming ``uris`` (the upstream's
        own URIs) and relay the updates it brings to the proxy's subscribers; a new set replaces the stream (the
        new one is open before the old one closes), an empty one closes it. Returns once the stream is open."""
        async with self._rewatching:
            wanted = frozenset(uris)
            if wanted == self.watched:
                return
            old, self._resource_watch = self._resource_watch, None
            self.watched = wanted
            if wanted and self.primary is not None and self.primary.client is not None:
                opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._resource_watch = asyncio.get_running_loop().create_task(
                    self._relay_updates(self.primary.client, sorted(wanted), opened)
                )
                try:
                    await asyncio.wait_for(asyncio.shield(opened), self.proxy.lease_timeout)
                except Exception as exc:
                    logger.warning("could not watch resources of %s: %s", self.target.description, exc)
            if old is not None:
                old.cancel()

    async def _relay_updates(self, client: Client, uris: list[str], opened: asyncio.Future[None]) -> None:
        try:
            async with client.watch(resource_uris=uris) as watch:
                opened.set_result(None)
                async for method, params in watch:
                    uri = params.get("uri") if isinstance(params, dict) else None
                    if method == "notifications/resources/updated" and isinstance(uri, str):
                        await self.proxy.notify_resource_updated(prefixed_uri(self.prefix, uri))
        except Exception as exc:
            if not opened.done():
                opened.set_exception(exc)
            else:
                logger.warning("no longer relaying resource updates of %s: %s", self.target.description, exc)

    async def check_target(self) -> None:
        """The SSRF rule for URL targets: no private, link-local or reserved address unless allowed."""
        if self.target.url is None or self.proxy.allow_private_network:
            return
        from .auth.client_discovery import _address_class

        kind = await _address_class(urlsplit(self.target.url).hostname)
        if kind not in ("public", "loopback"):
            raise ValueError(
                f"refusing to proxy {self.target.url}: it is on a {kind} address "
                "(mcpkit.proxy(..., allow_private_network=True) allows it)"
            )

    async def _open(
        self, session: ServerSession | None, *, primary: bool = False, caps: JSONDict | None = None
    ) -> _Conn:
        conn = _Conn(self, session, primary)
        if session is not None:
            caps = session.client_capabilities
        conn.caps = caps
        handlers: dict[str, Any] = {}
        if caps is None or "sampling" in caps:
            handlers["sampling_handler"] = conn.sample
            sampling = caps.get("sampling") if caps is not None else {"tools": {}}
            handlers["sampling_tools"] = isinstance(sampling, dict) and "tools" in sampling
        if caps is None or "elicitation" in caps:
            handlers["elicitation_handler"] = conn.elicit
            elicitation = caps.get("elicitation") if caps is not None else {"url": {}}
            handlers["elicitation_url"] = caps is None or (isinstance(elicitation, dict) and "url" in elicitation)
        if caps is None or "roots" in caps:
            handlers["roots"] = conn.roots
        # the server's requests run as tasks only when the proxy can relay them so: never (a client's own tasks
        # capability is not ours to declare upstream, and a server may offer other tools for it)
        handlers["tasks"] = False
        options = {**self.client_options, **handlers}
        client = Client(
            self.target,
            logging_handler=conn.log,
            on_notification=conn.notified,
            reconnect=False,
            relay_answers=True,
            **options,
        )
        await client.connect()
        conn.client = client
        if not client.modern and "logging" in client.server_capabilities:
            # the upstream session sends every log message; each client gets what its own level lets through
            with contextlib.suppress(Exception):
                await client.set_logging_level("debug")
        self._all.add(conn)
        return conn

    async def session_conn(self, session: ServerSession) -> _Conn:
        """The upstream session of a handshake-era client session (opened at its first request)."""
        conn = self._sessions.get(session)
        if conn is not None:
            if _alive(conn):
                return conn
            # its upstream ended (a stdio server that crashed): the session goes on with a new upstream session
            del self._sessions[session]
            await self._close(conn)
        key = id(session)
        opening = self._opening.get(key)
        if opening is None:
            if len(self._sessions) >= self.proxy.max_upstream_sessions:
                raise MCPError(
                    f"the proxy holds {self.proxy.max_upstream_sessions} upstream sessions already "
                    "(ProxyServer(max_upstream_sessions=...)): try again later"
                )
            opening = asyncio.get_running_loop().create_task(self._open(session))
            self._opening[key] = opening
        try:
            conn = await asyncio.shield(opening)
        finally:
            self._opening.pop(key, None)
        if session not in self._sessions:
            self._sessions[session] = conn
            weakref.finalize(session, self._release_session_conn, conn)
        return conn

    def _release_session_conn(self, conn: _Conn) -> None:
        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(self._close(conn))
            self.proxy._background.add(task)
            task.add_done_callback(self.proxy._background.discard)

    async def end_session(self, session: ServerSession) -> None:
        """Close the upstream session of a client session that ended."""
        conn = self._sessions.pop(session, None)
        if conn is not None:
            await self._close(conn)

    async def lease(self, sctx: ServerRequestContext) -> _Lease:
        """A connection for one 2026-07-28 request. A handshake-era upstream may ask its client things in the
        middle of a request, so its connections serve one request at a time (the primary first, then up to
        ``pool_size`` in all; a request waits while all are busy); a 2026-07-28 upstream asks nothing that way,
        so every request shares the primary (a new one when the upstream ended).

        Among the idle connections that fit, the one opened first is taken: a stdio target is one process per
        connection, and a 2026-07-28 client's requests one after the other go back to the same process as soon as
        it is free, even after a burst (or a request arriving while a cancelled one still held it) opened another.
        What a request changed in the server's state (a cancelled call, a setting) is then seen by the next ones."""
        if self.modern:
            shared = await self._live_primary()
            lease = _Lease(shared, sctx)
            shared.leases.append(lease)
            return lease
        # the upstream sees the capabilities of the request's client (a server may offer tools by them): a
        # connection serves the requests whose clients declared what it declared
        primary = self.primary
        assert primary is not None
        key = caps_key(sctx.client_capabilities)
        evicted: list[_Conn] = []
        async with self._pool_free:
            for waiting in self._idle.values():  # a connection whose upstream ended (a crashed stdio server) leaves
                for dead in [c for c in waiting if not _alive(c)]:
                    waiting.remove(dead)
                    self._pool_count -= 1
                    evicted.append(dead)
            if not self._pool_count and _alive(primary):
                self._idle.setdefault(caps_key(None), []).append(primary)
                self._pool_count = 1
            while not self._idle.get(key) and self._pool_count >= self.proxy.pool_size:
                spares = [c for idle in self._idle.values() for c in idle if not c.primary]
                if spares:  # an idle connection declaring other capabilities makes room (the newest goes)
                    spare = max(spares, key=_opened)
                    self._idle[caps_key(spare.caps)].remove(spare)
                    self._pool_count -= 1
                    evicted.append(spare)
                    break
                await asyncio.wait_for(self._pool_free.wait(), self.proxy.lease_timeout)
            idle = self._idle.get(key)
            conn = idle.pop(0) if idle else None  # the oldest (kept in the order they were opened)
            if conn is None:
                self._pool_count += 1
        for gone in evicted:
            await self._close(gone)
        if conn is None:
            try:
                conn = await self._open(None, caps=sctx.client_capabilities)
            except BaseException:
                async with self._pool_free:
                    self._pool_count -= 1
                    self._pool_free.notify()
                raise
        lease = _Lease(conn, sctx)
        conn.leases.append(lease)
        return lease

    async def release(self, lease: _Lease) -> None:
        conn = lease.conn
        if lease in conn.leases:
            conn.leases.remove(lease)
        if self.modern:
            return
        alive = _alive(conn)
        async with self._pool_free:
            if alive:
                bisect.insort(self._idle.setdefault(caps_key(conn.caps), []), conn, key=_opened)
            else:
                self._pool_count -= 1
            self._pool_free.notify()
        if not alive:
            await self._close(conn)  # (its process reaped)

    async def _close(self, conn: _Conn) -> None:
        self._all.discard(conn)
        client, conn.client = conn.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def aclose(self) -> None:
        for watcher in (self._watcher, self._resource_watch):
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    await watcher
        for conn in list(self._all):
            await self._close(conn)
        self._idle.clear()
        self._pool_count = 0


__all__ = ["ProgressRelay", "ProxyHost", "Upstream"]
