"""The upstream side of :mod:`mcpkit.proxies`: one target and the connections a proxy holds to it (the primary,
the pool that 2026-07-28 requests lease, one per handshake-era client session; each a
:class:`~mcpkit.proxy_conn.UpstreamConn`), its end noticed and connected again; what is watched on it (list changes,
resources, sessions' subscriptions) is its base class :class:`~mcpkit.proxy_watch.UpstreamWatch`."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import random
import weakref
from typing import Any
from urllib.parse import urlsplit

from .client.client import Client
from .client.targets import Target, TargetError, parse_target
from .engine import BaseConnection
from .protocol.errors import MCPError
from .protocol.jsonrpc import JSONDict
from .proxy_conn import ProxyHost, UpstreamConn
from .proxy_pool import UpstreamPool
from .proxy_rounds import ProgressRelay
from .server.lowlevel import ServerSession
from .server.prefixes import prefixed_uri

logger: logging.Logger = logging.getLogger("mcpkit.proxy")

MAX_WATCHED = 256
"""Resource URIs one 2026-07-28 upstream is watched for at once: what the proxy's clients subscribed to or listen
for there, together (the default ``max_subscriptions`` of one listen stream of an mcpkit server)."""

# ---------------------------------------------------------------------------------------------- one target


class Upstream(UpstreamPool):
    """One forwarded-to server: its target, its primary connection, its pool and its per-session connections."""

    def __init__(self, proxy: ProxyHost, prefix: str | None, target: Any, client_options: dict[str, Any]) -> None:
        self.proxy = proxy
        self.prefix = prefix
        self.target: Target = parse_target(target)
        self.client_options = client_options
        self.primary: UpstreamConn | None = None
        self.capabilities: JSONDict = {}
        self.info: JSONDict | None = None
        self.instructions: str | None = None
        self.modern: bool = False
        self._init_pool()
        self._seq = itertools.count()
        self._sessions: weakref.WeakKeyDictionary[ServerSession, UpstreamConn] = weakref.WeakKeyDictionary()
        self._opening: dict[int, asyncio.Task[UpstreamConn]] = {}
        self._all: set[UpstreamConn] = set()
        self._watcher: asyncio.Task[None] | None = None
        self.watched: frozenset[str] = frozenset()  # (2026-07-28 upstream) the URIs its resource watch names
        self._resource_watch: asyncio.Task[None] | None = None
        self._rewatching = asyncio.Lock()
        self._relayed_kinds: dict[str, bool] = {}  # (2026-07-28 upstream) the list changes its primary relays
        # the upstream's end, noticed at once (see _lost): why it is down (None: up), the reconnection running in
        # the background, the attempt in progress (requests wait for it) and when the next one starts
        self.down: str | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._attempt: asyncio.Future[None] | None = None
        self._retry_at = 0.0
        self._wake: asyncio.Future[None] | None = None  # (past a round of attempts) a request starts a new one
        self._closing = False
        self._gone_told = False  # (a gateway member) its clients were told its items left the lists
        self._told_back = 0  # (a gateway member) how many times they were told its items are back
        # (handshake-era upstream) what each client session subscribed to on its upstream session, re-made on the
        # new one when that ended (at most the proxy's max_subscriptions each), and the sessions being revived
        self._session_subs: weakref.WeakKeyDictionary[ServerSession, set[str]] = weakref.WeakKeyDictionary()
        self._revivals: dict[int, asyncio.Task[None]] = {}
        self._stranded: weakref.WeakSet[ServerSession] = weakref.WeakSet()  # (their revival gave up)

    async def start(self) -> None:
        """Connect: the target's SSRF check, then the primary connection (the upstream's info and capabilities,
        and the relay of its list changes). Raises what either raised."""
        await self.check_target()
        await self.connect()

    async def connect(self) -> None:
        """Open the primary connection and learn the upstream's info and capabilities from it (the proxy's
        start, or a gateway member joining later: in both, the upstream is up from then on)."""
        self._closing = False  # (a proxy started again after it stopped)
        self.primary = await self._open(None, primary=True)
        self.down = None
        assert self.primary.client is not None
        client = self.primary.client
        self.capabilities = dict(client.server_capabilities)
        self.info = client.server_info
        self.instructions = client.instructions
        self.modern = client.modern
        transport = client.session.conn
        self.relates: bool = isinstance(transport, BaseConnection) and transport.relates_requests
        if self.modern:  # list changes reach a 2026-07-28 client only on a listen stream: hold one, relay them
            kinds = {
                k: isinstance(self.capabilities.get(k), dict) and bool(self.capabilities[k].get("listChanged"))
                for k in ("tools", "prompts", "resources")
            }
            if any(kinds.values()):
                self._relayed_kinds = kinds
                self._watcher = asyncio.get_running_loop().create_task(self._relay_changes(client, kinds))

    # ------------------------------------------------------------------ a gateway member not reached at startup

    def join_later(self, reason: str) -> None:
        """(a gateway member that could not be reached when the gateway started) Connect in the background,
        trying until it succeeds: ``reconnect_delay`` seconds after the failed attempt, doubling up to
        ``reconnect_max_delay`` (with jitter), then once every ``reconnect_max_delay`` seconds at most. Meanwhile
        its requests are refused at once, saying so (:meth:`_usable`); once connected, the proxy's clients are
        told that the lists it has changed."""
        self.down = f"not reached yet: {reason}"
        self._reconnecting = asyncio.get_running_loop().create_task(self._join())

    async def _join(self) -> None:
        proxy = self.proxy
        loop = asyncio.get_running_loop()
        delay = proxy.reconnect_delay
        try:
            for attempt in itertools.count(2):  # (the first was the gateway's start)
                wait = delay * random.uniform(0.8, 1.0)
                self._retry_at = loop.time() + wait
                await asyncio.sleep(wait)
                delay = min(delay * 2, proxy.reconnect_max_delay)
                future = self._attempt = loop.create_future()
                try:
                    await self.connect()
                except Exception as exc:
                    self.down = f"not reached yet: {one_line(exc)}"
                    logger.debug("gateway member %r: attempt %d: %s", self.prefix, attempt, self.down)
                else:
                    self.down = None
                    break
                finally:
                    if not future.done():
                        future.set_result(None)
        finally:
            self._reconnecting = None
        logger.warning(
            "gateway member %r (%s) is connected: its tools, resources and prompts are served from now on",
            self.prefix,
            self.target.description,
        )
        try:
            async with self._rewatching:  # what listen streams asked of it meanwhile (not watched: no connection)
                watched, self.watched = self.watched, frozenset()
            await self.watch_resources(set(watched))
            for kind in ("tools", "prompts", "resources"):  # (in both eras, whatever the member itself declares)
                if isinstance(self.capabilities.get(kind), dict):
                    await proxy.notify_list_changed(kind)
        except Exception as exc:
            logger.warning("gateway member %r: its clients could not all be told it joined: %s", self.prefix, exc)

    # ------------------------------------------------------------------ the upstream's end, and reconnecting

    def _watch_end(self, conn: UpstreamConn) -> None:
        """Hear at once when ``conn``'s upstream connection ends (a stdio server exited, the connection broke)."""
        assert conn.client is not None
        session = conn.client.session
        previous = session.on_end

        def ended(reason: str) -> None:
            if previous is not None:
                previous(reason)
            self._ended(conn, reason)

        session.on_end = ended

    def _ended(self, conn: UpstreamConn, reason: str) -> None:
        # (the primary is closed here only while it is being replaced, and a session's once it left _sessions: the
        # end of either otherwise is news, even when a request that failed on it closed it first)
        if self._closing:
            return
        if conn is self.primary:
            self._lost(reason)
        elif conn.session is not None and self._sessions.get(conn.session) is conn and not conn.session.closed:
            self._revive(conn.session, reason)
        # (a pool connection has no listeners: it is dropped at its next lease)

    def _lost(self, reason: str) -> None:
        """The primary connection ended (or a relay on it broke): connect again in the background, unless that is
        under way already. Requests wait for the first attempt; after a failed one they are refused at once until
        an attempt succeeds (:meth:`_usable`)."""
        if self._closing or self._reconnecting is not None:
            return
        logger.warning("the upstream %s ended (%s): connecting again", self.target.description, reason)
        self.down = reason
        self._attempt = asyncio.get_running_loop().create_future()
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        """Replace the primary connection: a round of ``reconnect_attempts`` attempts, the first at once, then
        after ``reconnect_delay`` seconds doubling up to ``reconnect_max_delay`` (with jitter), each failure logged
        as a warning. After the round it goes on in the background, quietly, once every ``reconnect_max_delay``
        seconds at most, until the upstream is back or the proxy stops: a client that only listens (list changes,
        resource updates) sends no request that would try again. A request arriving then starts a new round at
        once (it waits for its first attempt): :meth:`_usable`."""
        proxy = self.proxy
        loop = asyncio.get_running_loop()
        delay = proxy.reconnect_delay
        attempts = max(1, proxy.reconnect_attempts)
        attempt = 0
        try:
            while True:
                attempt += 1
                if self._attempt is None or self._attempt.done():
                    self._attempt = loop.create_future()
                future = self._attempt
                try:
                    await self._replace_primary()
                except Exception as exc:
                    self.down = f"could not connect again: {one_line(exc)}"
                    if attempt >= attempts:
                        self.down += f" ({attempts} attempts in a row failed)"
                    if attempt < attempts:
                        where = self.target.description
                        logger.warning("%s: attempt %d of %d: %s", where, attempt, attempts, self.down)
                    elif attempt == attempts:
                        logger.error(
                            "the upstream %s: %s: trying again in the background, once every %g s at most "
                            "(reconnect_max_delay), and at the next request",
                            self.target.description,
                            self.down,
                            proxy.reconnect_max_delay,
                        )
                    else:
                        logger.debug("%s: attempt %d: %s", self.target.description, attempt, self.down)
                    await self._announce_gone()
                else:
                    self.down = None
                    logger.warning("the upstream %s is connected again", self.target.description)
                    return
                finally:
                    if not future.done():
                        future.set_result(None)
                wait = delay * random.uniform(0.8, 1.0)
                self._retry_at = loop.time() + wait
                delay = min(delay * 2, proxy.reconnect_max_delay)
                if attempt < attempts:
                    await asyncio.sleep(wait)
                    continue
                wake = self._wake = loop.create_future()  # (past the round: a request may start a new one)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(wake), wait)
                self._wake = None
                if wake.done():
                    attempt, delay = 0, proxy.reconnect_delay
        finally:
            self._reconnecting = self._wake = None

    async def _replace_primary(self) -> None:
        """A new primary connection for the one that ended, with what it held for the proxy's listeners: the
        list-change relay and the resource watch (subscriptions) on it; then the listeners are told that the lists
        and those resources may have changed meanwhile (what the upstream said while it was down is lost)."""
        old = self.primary
        if old is not None:
            await self._close(old)  # (its process reaped)
        new = await self._open(None, primary=True)
        assert new.client is not None
        self.primary = new
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = asyncio.get_running_loop().create_task(self._relay_changes(new.client, self._relayed_kinds))
        async with self._rewatching:
            watched, self.watched = self.watched, frozenset()  # (the watch named them on the old one)
            if not self.modern:
                self._resource_watch = None
        await self.watch_resources(set(watched), strict=True)
        proxy = self.proxy
        back, self._gone_told = self._gone_told, False
        if back:  # (a gateway told its clients this member's items were gone: they are back, in every list)
            self._told_back += 1
            await self._announce_lists()
        for kind in ("tools", "prompts", "resources"):
            declared = self.capabilities.get(kind)
            if not back and isinstance(declared, dict) and declared.get("listChanged"):
                if self.modern:
                    await proxy.notify_list_changed(kind)
                else:  # (the handshake-era sessions hear it from their own upstream sessions)
                    proxy.offer_listeners(f"notifications/{kind}/list_changed", {}, kind=kind)
        for uri in sorted(watched):
            outer = prefixed_uri(self.prefix, uri)
            if self.modern:
                await proxy.notify_resource_updated(outer)
            else:
                proxy.offer_listeners("notifications/resources/updated", {"uri": outer}, uri=outer)
        stranded, self._stranded = list(self._stranded), weakref.WeakSet()
        for session in stranded:  # (client sessions whose upstream session could not be opened again meanwhile)
            if not session.closed and session not in self._sessions:
                self._revive(session, "the upstream is back", told=back)

    async def _announce_gone(self) -> None:
        """(a gateway member that was up) Its connection ended and could not be made again at once: from now on
        the gateway's lists leave its items out, so its clients are told those lists changed (once, until it is
        back: :meth:`_replace_primary` tells them again then)."""
        if len(self.proxy.upstreams) > 1 and not self._gone_told:
            self._gone_told = True
            await self._announce_lists()

    async def _announce_lists(self) -> None:
        """list_changed for each list this member has items in (whatever it declares itself), to handshake-era
        sessions and 2026-07-28 listen streams alike; a failure to tell is logged, never raised."""
        for kind in ("tools", "prompts", "resources"):
            if isinstance(self.capabilities.get(kind), dict):
                try:
                    await self.proxy.notify_list_changed(kind)
                except Exception as exc:
                    logger.warning("gateway member %r: could not send %s list_changed: %s", self.prefix, kind, exc)

    async def _usable(self) -> None:
        """Before a request: the upstream is up, or it is being connected again and this request waits for the
        attempt in progress; while it is down (an attempt failed, the next is not due yet) the request is refused at
        once with the reason. An end not noticed yet starts a round of attempts, and so does a request past a round
        (it wakes the background attempts: :meth:`_reconnect`)."""
        primary = self.primary
        if self._reconnecting is None and (self.down is not None or (primary is not None and not primary.alive)):
            self._lost(self.down or "its connection ended")
        elif (wake := self._wake) is not None and not wake.done():  # (the round is over: a new one starts now)
            self._attempt = asyncio.get_running_loop().create_future()
            wake.set_result(None)
        attempt = self._attempt
        if self._reconnecting is not None and attempt is not None and not attempt.done():
            await asyncio.shield(attempt)
        if self.down is not None:
            raise self._unavailable()

    def _unavailable(self) -> MCPError:
        if self._reconnecting is None:
            return MCPError(f"the upstream server {self.target.description} is unavailable: {self.down}")
        wait = max(0.0, self._retry_at - asyncio.get_running_loop().time())
        return MCPError(
            f"the upstream server {self.target.description} is unavailable ({self.down}): "
            f"connecting again in {wait:.1f} s",
            {"retryAfterMs": math.ceil(wait * 1000)},
        )

    def _revive(self, session: ServerSession, reason: str, *, told: bool = False) -> None:
        """(handshake-era upstream) The upstream session of a client session that is still open ended: open a new
        one in the background, with the subscriptions the old one had (bounded attempts, backing off)."""
        key = id(session)
        if key in self._revivals:
            return
        logger.warning("the upstream session of a client session ended (%s): opening a new one", reason)
        task = asyncio.get_running_loop().create_task(self._revive_session(session, told))
        self._revivals[key] = task
        task.add_done_callback(lambda _: self._revivals.pop(key, None))

    async def _revive_session(self, session: ServerSession, told: bool) -> None:
        """(see :meth:`_revive`) Once open, the session is told its lists may have changed, unless it was told
        already (``told``, or the gateway told every client this member is back meanwhile): one event, one
        ``list_changed`` per list."""
        proxy = self.proxy
        epoch = self._told_back
        delay = proxy.reconnect_delay
        attempts = max(1, proxy.reconnect_attempts)
        for attempt in range(1, attempts + 1):
            if session.closed or self._closing:
                return
            try:
                conn = await self.session_conn(session)
            except Exception as exc:
                logger.warning("attempt %d of %d to open an upstream session again failed: %s", attempt, attempts, exc)
            else:
                told = told or self._told_back != epoch
                for kind in ("tools", "prompts", "resources"):  # (what the new session lists may differ)
                    declared = self.capabilities.get(kind)
                    if not told and isinstance(declared, dict) and declared.get("listChanged") and not session.closed:
                        with contextlib.suppress(Exception):
                            await session.notify(f"notifications/{kind}/list_changed", None)
                for uri in sorted(self._session_subs.get(session, ())):
                    if not session.closed and conn.client is not None:
                        with contextlib.suppress(Exception):
                            await session.notify(
                                "notifications/resources/updated", {"uri": prefixed_uri(self.prefix, uri)}
                            )
                return
            if attempt < attempts:
                await asyncio.sleep(delay * random.uniform(0.8, 1.0))
                delay = min(delay * 2, proxy.reconnect_max_delay)
        if not session.closed and not self._closing:
            self._stranded.add(session)  # (opened again when the primary connection is back: _replace_primary)
            logger.error(
                "gave up opening an upstream session again after %d attempts (again when the upstream is back, or "
                "at the session's next request)",
                attempts,
            )

    async def check_target(self) -> None:
        """The SSRF rule for URL targets: no private, link-local or reserved address unless allowed."""
        if self.target.url is None or self.proxy.allow_private_network:
            return
        from .auth.client_discovery import address_class

        kind = await address_class(urlsplit(self.target.url).hostname)
        if kind not in ("public", "loopback"):
            raise TargetError(
                f"refusing to proxy {self.target.url}: it is on a {kind} address "
                "(mcpkit.proxy(..., allow_private_network=True), mcpkit proxy --allow-private-network, allows it)"
            )

    async def _open(
        self, session: ServerSession | None, *, primary: bool = False, caps: JSONDict | None = None
    ) -> UpstreamConn:
        conn = UpstreamConn(self.proxy, self.prefix, next(self._seq), session, primary)
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
        self._watch_end(conn)
        conn.on_unrelated = self._unrelated
        return conn

    def _unrelated(self) -> None:
        """The upstream asked something apart from any request: it does not relate what it asks (the spec lets
        it), so from now on a request whose client it could ask is served alone (:meth:`_shares`)."""
        if self.relates:
            self.relates = False
            logger.warning(
                "the upstream %s asks its client things apart from the request they are about: requests whose "
                "clients it could ask are served one at a time on each connection from now on",
                self.target.description,
            )

    async def session_conn(self, session: ServerSession) -> UpstreamConn:
        """The upstream session of a handshake-era client session (opened at its first request; when it ended, a
        new one, with the subscriptions the old one had)."""
        conn = self._sessions.get(session)
        if conn is not None:
            if conn.alive:
                return conn
            # its upstream ended (a stdio server that crashed): the session goes on with a new upstream session
            del self._sessions[session]
            await self._close(conn)
        await self._usable()
        key = id(session)
        opening = self._opening.get(key)
        if opening is None:
            if len(self._sessions) >= self.proxy.max_upstream_sessions:
                raise MCPError(
                    f"the proxy holds {self.proxy.max_upstream_sessions} upstream sessions already "
                    "(ProxyServer(max_upstream_sessions=...)): try again later"
                )
            opening = asyncio.get_running_loop().create_task(self._open_session(session))
            self._opening[key] = opening
        try:
            conn = await asyncio.shield(opening)
        finally:
            self._opening.pop(key, None)
        if session not in self._sessions:
            self._sessions[session] = conn
            weakref.finalize(session, self._release_session_conn, conn)
        return conn

    def own_conn(self, session: ServerSession) -> UpstreamConn | None:
        """The upstream session of a handshake-era client session, when it has one that stands (where its
        requests go), else None (its first request opens one)."""
        conn = self._sessions.get(session)
        return conn if conn is not None and conn.alive else None

    async def _open_session(self, session: ServerSession) -> UpstreamConn:
        conn = await self._open(session)
        assert conn.client is not None
        try:
            for uri in sorted(self._session_subs.get(session, ())):  # (what the session's last one subscribed to)
                await conn.client.subscribe_resource(uri)
        except BaseException:
            await self._close(conn)
            raise
        return conn

    def _release_session_conn(self, conn: UpstreamConn) -> None:
        with contextlib.suppress(RuntimeError):
            task = asyncio.get_running_loop().create_task(self._close(conn))
            self.proxy._background.add(task)
            task.add_done_callback(self.proxy._background.discard)

    async def end_session(self, session: ServerSession) -> None:
        """Close the upstream session of a client session that ended."""
        conn = self._sessions.pop(session, None)
        if conn is not None:
            await self._close(conn)

    async def _close(self, conn: UpstreamConn) -> None:
        self._all.discard(conn)
        client, conn.client = conn.client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def aclose(self) -> None:
        self._closing = True
        for watcher in (self._watcher, self._resource_watch, self._reconnecting, *self._revivals.values()):
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(BaseException):
                    await watcher
        for conn in list(self._all):
            await self._close(conn)
        self._idle.clear()
        self._shared.clear()
        self._pool_count = 0
        self._per_key.clear()


def one_line(exc: BaseException) -> str:
    """An error's text on one log line (a stdio server's start error carries the lines of its stderr)."""
    return " / ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


__all__ = ["ProgressRelay", "ProxyHost", "Upstream"]
