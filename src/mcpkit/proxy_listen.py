"""What a proxy's clients name and watch: the routing of a tool, prompt or resource name to the upstream that
serves it (a gateway's prefixes), and the resources its clients watch (``resources/subscribe``, the URIs of
``subscriptions/listen`` streams, at most :data:`~mcpkit.proxy_upstream.MAX_WATCHED` per upstream) with the roots
changes relayed (a resource the proxy serves itself is watched as any server's: its own subscriptions and
updates); in :class:`ClientWatches`, the base class of :class:`~mcpkit.proxies.ProxyServer` (on its own,
:class:`~mcpkit.proxy_forward.Forwarding`: one request forwarded upstream)."""

from __future__ import annotations

import contextlib
from typing import Any

from .protocol.errors import InvalidParams, InvalidRequest, MCPError, UnknownName
from .protocol.jsonrpc import JSONDict
from .proxy_forward import Forwarding
from .proxy_local import owns_uri
from .proxy_shaping import shape_result, upstream_params
from .proxy_upstream import MAX_WATCHED, Upstream
from .server.builtins import BUILTINS
from .server.lowlevel import ServerRequestContext, ServerSession
from .server.prefixes import unprefixed_uri


class ClientWatches(Forwarding):
    """Routing and the clients' watches of a :class:`~mcpkit.proxies.ProxyServer` (its base class; the attributes
    below are the proxy's, set by its constructor)."""

    upstreams: list[Upstream]
    _listening: dict[object, dict[Upstream, set[str]]]  # listen streams' URIs on 2026-07-28 upstreams

    # ------------------------------------------------------------------ routing

    def _route_name(self, name: str) -> tuple[Upstream, str]:
        for u in self.upstreams:
            if u.prefix is None:
                return u, name
            head = f"{u.prefix}_"
            if name.startswith(head):
                return u, name[len(head) :]
        raise UnknownName(name)

    def _route_uri(self, uri: str) -> tuple[Upstream, str]:
        for u in self.upstreams:
            inner = unprefixed_uri(u.prefix, uri)
            if inner is not None:
                return u, inner
        raise InvalidParams(f"Unknown resource: {uri!r}", {"uri": uri})

    # ------------------------------------------------------------------ subscriptions, listen, roots

    async def _subscribe(self, sctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        uri = params.get("uri")
        if not isinstance(uri, str) or sctx.session is None:
            raise InvalidParams("uri must be a string")
        if len(uri) > self.max_subscription_uri:
            raise InvalidParams(f"subscription URI longer than {self.max_subscription_uri} characters")
        builtin: Any = BUILTINS[sctx.method]
        if owns_uri(self, uri):  # one of the proxy's own resources: its own subscription, as any server's
            own: JSONDict = await builtin(self, sctx, params)
            return own
        upstream, inner = self._route_uri(uri)
        if upstream.modern:  # no resources/subscribe in 2026-07-28: the session's subscription, one upstream watch
            subscribing = sctx.method == "resources/subscribe"
            if subscribing:
                self._check_watch(upstream, {inner})
            result: JSONDict = await builtin(self, sctx, params)
            await upstream.watch_resources(self._watched_by_clients(upstream))
            return result
        subscribing = sctx.method == "resources/subscribe"
        if subscribing:
            upstream.check_subscription(sctx.session, inner)  # type: ignore[arg-type]
        out = {**upstream_params(params, sctx), "uri": inner}
        result = await self._forward(sctx, upstream, sctx.method, out)
        upstream.subscribed(sctx.session, inner, subscribing)  # type: ignore[arg-type]
        return shape_result(sctx.method, result, sctx.features, upstream.prefix)

    async def _listen(self, sctx: ServerRequestContext, params: JSONDict) -> JSONDict:
        """``subscriptions/listen``: list changes and resource updates relayed by each target's primary connection
        (subscribed upstream to the URIs listened to, for as long as a stream wants them)."""
        requested = params.get("notifications")
        uris = requested.get("resourceSubscriptions") if isinstance(requested, dict) else None
        watching: dict[Upstream, set[str]] = {}  # the URIs this stream adds to each upstream's watch
        if isinstance(uris, list):
            for uri in uris[: self.max_subscriptions]:
                if not isinstance(uri, str) or owns_uri(self, uri):  # (the proxy's own: its updates, not watched)
                    continue
                with contextlib.suppress(MCPError):
                    upstream, inner = self._route_uri(uri)
                    watching.setdefault(upstream, set()).add(inner)
        key = object()
        try:
            for upstream, inner_uris in watching.items():
                self._check_watch(upstream, inner_uris)
            if watching:
                self._listening[key] = watching
            for upstream in watching:
                await upstream.watch_resources(self._watched_by_clients(upstream))
            builtin: Any = BUILTINS["subscriptions/listen"]
            result: JSONDict = await builtin(self, sctx, params)
            return result
        finally:
            if self._listening.pop(key, None) is not None:
                for upstream in watching:
                    with contextlib.suppress(Exception):
                        await upstream.watch_resources(self._watched_by_clients(upstream))

    def _watched_by_clients(self, upstream: Upstream) -> set[str]:
        """The URIs of ``upstream`` its primary connection watches for this proxy's clients: the listen streams'
        resource subscriptions routed to it and (a 2026-07-28 upstream, which has no ``resources/subscribe``) the
        handshake-era sessions' subscriptions (a handshake-era upstream has them on the sessions' own)."""
        wanted: set[str] = set()
        for session in list(self._sessions):
            if session.closed:
                continue
            for uri in session.subscriptions:
                if owns_uri(self, uri):  # (the proxy's own resource: not the upstream's to watch)
                    continue
                with contextlib.suppress(MCPError):
                    routed, inner = self._route_uri(uri)
                    if routed is upstream:
                        wanted.add(inner)
        for watching in self._listening.values():
            wanted |= watching.get(upstream, set())
        return wanted

    def _check_watch(self, upstream: Upstream, more: set[str]) -> None:
        if len(self._watched_by_clients(upstream) | more) > MAX_WATCHED:
            raise InvalidRequest(
                f"the proxy watches {MAX_WATCHED} resources of this server for its clients already: "
                "unsubscribe from some first"
            )

    async def _roots_changed(self, session: ServerSession, params: JSONDict | None) -> None:
        for upstream in self.upstreams:
            conn = upstream._sessions.get(session)
            if conn is not None and conn.client is not None:
                with contextlib.suppress(Exception):
                    await conn.client.session.send_roots_list_changed()
