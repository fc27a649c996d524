"""One upstream connection of :mod:`mcpkit.proxies` and whom it speaks for (a handshake-era client session, a
2026-07-28 request's lease, or nobody: the primary): what the upstream asks of its client (sampling, elicitation,
roots) goes to that client, and its log messages and notifications to the right listeners."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .client.client import Client
from .engine import ORIGIN
from .protocol.errors import MCPError, MethodNotFound
from .protocol.jsonrpc import JSONDict
from .proxy_rounds import Lease
from .server.lowlevel import ServerRequestContext, ServerSession
from .server.prefixes import prefixed_uri


class ProxyHost(Protocol):
    """What the connections need of their proxy (a :class:`~mcpkit.proxies.ProxyServer`)."""

    allow_private_network: bool
    max_upstream_sessions: int
    max_subscriptions: int
    pool_size: int
    lease_timeout: float
    max_shared: int
    reconnect_attempts: int
    reconnect_delay: float
    reconnect_max_delay: float
    _background: set[asyncio.Task[None]]

    @property
    def upstreams(self) -> Sequence[object]: ...  # (more than one: a gateway)

    def offer_listeners(
        self, method: str, params: JSONDict, *, kind: str | None = None, uri: str | None = None
    ) -> None: ...

    async def notify_list_changed(self, kind: str) -> None: ...

    async def notify_resource_updated(self, uri: str) -> None: ...


#: the handshake-era request whose upstream request is answering an input round (2026-07-28 upstream: the round is
#: answered inside the request's own task, so the request is known without guessing)
ASKING: contextvars.ContextVar[ServerRequestContext | None] = contextvars.ContextVar(
    "mcpkit_proxy_asking", default=None
)

# ---------------------------------------------------------------------------------------------- one connection


class UpstreamConn:
    """One upstream connection and who it speaks for: a handshake-era client session (``session``, with the
    requests of it in flight), a 2026-07-28 request that leased it (``lease``), or nobody (the primary)."""

    def __init__(
        self, proxy: ProxyHost, prefix: str | None, seq: int, session: ServerSession | None, primary: bool = False
    ) -> None:
        self.proxy = proxy
        self.prefix = prefix  # (the target's, in a gateway)
        self.seq = seq  # the order connections were opened in: a pool prefers its oldest
        self.session = session
        self.primary = primary
        self.client: Client | None = None
        self.inflight: list[ServerRequestContext] = []
        self.leases: list[Lease] = []  # one at a time, unless shared (see Upstream.lease)
        #: told when the upstream asks something apart from any request while a request holds the connection
        self.on_unrelated: Callable[[], None] | None = None
        self.caps: JSONDict | None = None  # the client capabilities it declares upstream (None: all it can)
        self.pooled = False  # (the primary) among the pool's connections: it serves what its clients declare too
        self.watched: frozenset[str] = frozenset()  # (a pooled stdio process) the URIs it is subscribed to
        self.tools_changes: int = 0  # the times the upstream said its tools changed here (searched again)

    @property
    def alive(self) -> bool:
        """Whether its upstream connection still stands (a stdio server that exited ends it)."""
        client = self.client
        return client is not None and client.connected and client.session.ended is None

    def asked_for(self) -> Lease | None:
        """The 2026-07-28 request what the upstream asks now is about: the one it arrived in relation to (the
        upstream said so: :data:`~mcpkit.engine.ORIGIN`; refused when that one has ended), else the request that
        holds the connection, when exactly one does (an ask apart from any request tells the upstream does not
        relate them: :attr:`on_unrelated`)."""
        origin = ORIGIN.get()
        if isinstance(origin, Lease):
            if origin not in self.leases:
                raise MCPError("the request of the proxy's client this is about has ended")
            return origin
        if self.leases and self.on_unrelated is not None:
            self.on_unrelated()
        return self.leases[0] if len(self.leases) == 1 else None

    def _speaker(self) -> ServerRequestContext | None:
        if self.leases:  # (log messages the upstream did not relate: only a request holding it alone hears them)
            return self.leases[0].sctx if len(self.leases) == 1 else None
        return self.inflight[0] if len(self.inflight) == 1 else None

    async def ask(self, method: str, params: JSONDict) -> JSONDict:
        """The upstream asks its client (sampling, elicitation, roots): ask ours. Ours gone (its connection closed
        before or while it was asked) is an error saying so, not an internal error."""
        try:
            return await self._ask(method, params)
        except ConnectionError:
            raise MCPError(f"{method}: the client of the proxy has disconnected") from None

    async def _ask(self, method: str, params: JSONDict) -> JSONDict:
        asking = ASKING.get()
        if asking is not None:  # an input round of a 2026-07-28 upstream, for a handshake-era client's request
            return await asking.ask(method, params)
        lease = self.asked_for()
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
        if self.leases:
            raise MethodNotFound(
                f"Method not found: {method} (requests of several clients share the upstream connection, and the "
                "upstream did not say which one this is about)"
            )
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
        """A log message of the upstream: to the request it was sent about (the upstream said so, on that request's
        own stream: :data:`~mcpkit.engine.ORIGIN`; a 2026-07-28 request's dropped when it has ended, never another
        client's; a client session's request's on its session then), else to the request that holds the connection
        when exactly one does, else to the client session."""
        level, data, name = params.get("level"), params.get("data"), params.get("logger")
        if not isinstance(level, str):
            return
        origin = ORIGIN.get()
        if isinstance(origin, Lease):
            if origin not in self.leases:
                return
            sctx: ServerRequestContext | None = origin.sctx
        elif isinstance(origin, ServerRequestContext):  # (a request of the client session it speaks for)
            sctx = origin if origin in self.inflight else None  # (ended: to the session, below)
        else:
            sctx = self._speaker()
        with contextlib.suppress(Exception):
            if sctx is not None:
                await sctx.log(level, data, name if isinstance(name, str) else None)
            elif self.session is not None and not self.session.closed:
                await self.session.log(level, data, name if isinstance(name, str) else None)

    async def notified(self, method: str, params: JSONDict | None) -> None:
        proxy = self.proxy
        prefix = self.prefix
        if method.endswith("/list_changed"):
            if method == "notifications/tools/list_changed":
                self.tools_changes += 1
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
            elif self.session is None:  # the primary, or a pooled stdio process (subscribed as the primary is)
                proxy.offer_listeners(method, {"uri": outer}, uri=outer)
        elif method == "notifications/elicitation/complete" and self.session is not None and params is not None:
            await self.session.notify(method, params)


def _ask_capability(method: str) -> str:
    return {"sampling/createMessage": "sampling", "elicitation/create": "elicitation"}.get(method, "roots")


def caps_key(caps: JSONDict | None) -> str:
    """What of a client's capabilities an upstream connection declares, as a key (None: everything)."""
    if caps is None:  # (what the primary declares: what a client declaring every capability it relays declares)
        return "roots,sampling,tools,elicitation,url"
    sampling, elicitation = caps.get("sampling"), caps.get("elicitation")
    parts = [
        "roots" if "roots" in caps else "",
        "sampling" if sampling is not None else "",
        "tools" if isinstance(sampling, dict) and "tools" in sampling else "",
        "elicitation" if elicitation is not None else "",
        "url" if isinstance(elicitation, dict) and "url" in elicitation else "",
    ]
    return ",".join(parts)


def opening_order(conn: UpstreamConn) -> int:
    """The order ``conn`` was opened in (a pool keeps its idle connections sorted by it, and prefers the oldest)."""
    return conn.seq


__all__ = ["ASKING", "ProxyHost", "UpstreamConn", "caps_key", "opening_order"]
