"""What a proxy's upstream watches for its clients (:mod:`mcpkit.proxy_upstream`): the list changes relayed from its
primary connection, the resources it watches there (and, on a handshake-era stdio upstream, on each pooled
process too: a 2026-07-28 client's call runs in one, and so does the change it makes) and their updates relayed, and
the subscriptions each handshake-era client session made on its own upstream session (re-made when that one ends).
The base class of :class:`~mcpkit.proxy_upstream.Upstream`, which holds the connections these use."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable

from .client.client import Client
from .client.targets import STDIO, Target
from .protocol.errors import InvalidRequest, MCPError
from .proxy_conn import ProxyHost, UpstreamConn
from .server.lowlevel import ServerSession
from .server.prefixes import prefixed_uri

logger: logging.Logger = logging.getLogger("mcpkit.proxy")


class UpstreamWatch:
    """The watches of one upstream (:class:`~mcpkit.proxy_upstream.Upstream` sets the state and defines ``_lost``,
    what a broken relay stream reports: the upstream's end)."""

    proxy: ProxyHost
    prefix: str | None
    target: Target
    primary: UpstreamConn | None
    modern: bool
    watched: frozenset[str]  #: (2026-07-28 upstream) the URIs its resource watch names
    _resource_watch: asyncio.Task[None] | None
    _rewatching: asyncio.Lock
    _session_subs: weakref.WeakKeyDictionary[ServerSession, set[str]]
    _all: set[UpstreamConn]
    _lost: Callable[[str], None]

    def subscribed(self, session: ServerSession, uri: str, subscribing: bool) -> None:
        """(handshake-era upstream) ``session`` subscribed to (or unsubscribed from) ``uri`` on its upstream
        session: re-made on the next one if that one ends."""
        subs = self._session_subs.setdefault(session, set())
        (subs.add if subscribing else subs.discard)(uri)

    def check_subscription(self, session: ServerSession, uri: str) -> None:
        """Refuse a subscription beyond the proxy's ``max_subscriptions`` per client session (-32600)."""
        subs = self._session_subs.get(session, set())
        bound = self.proxy.max_subscriptions
        if len(subs) >= bound and uri not in subs:
            raise InvalidRequest(
                f"too many subscriptions on this session (max_subscriptions={bound}): unsubscribe from some first"
            )

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
            if self.primary is not None and self.primary.client is client:
                self._lost(f"its list-change stream broke: {exc}")

    async def watch_resources(self, uris: set[str], *, strict: bool = False) -> None:
        """Have the primary connection watch ``uris`` (the upstream's own URIs: what the proxy's clients listen
        for there) and relay their updates to the proxy's subscribers. A 2026-07-28 upstream: one listen stream
        naming them; a new set replaces the stream (the new one is open before the old one closes), an empty one
        closes it, and this returns once the stream is open. A handshake-era one: ``resources/subscribe`` (and
        ``unsubscribe``) on the primary session for what changed. A refusal is logged; ``strict``: a failure to
        reach the upstream raises (else it is logged too)."""
        async with self._rewatching:
            wanted = frozenset(uris)
            if wanted == self.watched:
                return
            primary = self.primary
            client = primary.client if primary is not None else None
            if not self.modern:
                added, removed = wanted - self.watched, self.watched - wanted
                self.watched = wanted
                if client is None:
                    return
                for uri in sorted(added):
                    try:
                        await client.subscribe_resource(uri)
                    except Exception as exc:
                        if strict and not isinstance(exc, MCPError):
                            raise
                        logger.warning("could not subscribe to %s of %s: %s", uri, self.target.description, exc)
                for uri in sorted(removed):
                    with contextlib.suppress(Exception):
                        await client.unsubscribe_resource(uri)
                for conn in list(self._all):
                    if self.watches_pool(conn):
                        await self._watch_on(conn)
                return
            old, self._resource_watch = self._resource_watch, None
            self.watched = wanted
            if wanted and client is not None:
                opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                self._resource_watch = asyncio.get_running_loop().create_task(
                    self._relay_updates(client, sorted(wanted), opened)
                )
                try:
                    await asyncio.wait_for(asyncio.shield(opened), self.proxy.lease_timeout)
                except Exception as exc:
                    if strict and not isinstance(exc, MCPError):
                        raise
                    logger.warning("could not watch resources of %s: %s", self.target.description, exc)
            if old is not None:
                old.cancel()

    def watches_pool(self, conn: UpstreamConn) -> bool:
        """Whether ``conn`` is a pooled connection to a handshake-era stdio upstream, subscribed to what the primary
        watches: a stdio target is one process per connection, and a 2026-07-28 client's call runs in a pooled one,
        so the change it makes (and the update it sends) happens there, not in the primary's process."""
        return not (self.modern or conn.primary or conn.session is not None) and self.target.kind == STDIO

    async def _watch_on(self, conn: UpstreamConn) -> None:
        """Subscribe a pooled connection (:meth:`watches_pool`) to the URIs the primary watches, and no others (at
        most :data:`~mcpkit.proxy_upstream.MAX_WATCHED`); its updates are relayed as the primary's. A failure is
        logged: that process's updates are then not relayed."""
        client = conn.client
        if client is None or not conn.alive:
            return
        wanted = self.watched
        added, removed = wanted - conn.watched, conn.watched - wanted
        conn.watched = wanted
        try:
            for uri in sorted(added):
                await client.subscribe_resource(uri)
            for uri in sorted(removed):
                await client.unsubscribe_resource(uri)
        except Exception as exc:
            logger.warning("could not watch resources on a pooled connection to %s: %s", self.target.description, exc)

    async def watch_pooled(self, conn: UpstreamConn) -> None:
        """A new pooled connection (:meth:`watches_pool`): subscribed to what the primary watches before it serves."""
        if self.watched and self.watches_pool(conn):
            async with self._rewatching:
                await self._watch_on(conn)

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
                if self.primary is not None and self.primary.client is client:
                    self._lost(f"its resource-update stream broke: {exc}")


__all__ = ["UpstreamWatch"]
