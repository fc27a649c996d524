"""The connections a proxy's 2026-07-28 requests lease from one upstream (:mod:`mcpkit.proxy_upstream`): by default one
kept per set of client capabilities (``pool_size=1``), or a pool of interchangeable ones; each serving its requests
side by side where what the upstream sends for each can be told apart (:meth:`UpstreamPool._shares`), one at a time
elsewhere. The base class of :class:`~mcpkit.proxy_upstream.Upstream`, which opens and closes the connections."""

from __future__ import annotations

import asyncio
import bisect

from .protocol.errors import MCPError
from .protocol.jsonrpc import JSONDict
from .proxy_conn import UpstreamConn, caps_key, opening_order
from .proxy_rounds import Lease
from .proxy_watch import UpstreamWatch
from .server.lowlevel import ServerRequestContext, ServerSession


class UpstreamPool(UpstreamWatch):
    """The leases of one upstream's connections (:class:`~mcpkit.proxy_upstream.Upstream` opens them)."""

    def _init_pool(self) -> None:
        self._idle: dict[str, list[UpstreamConn]] = {}  # by the client capabilities a connection declares (caps_key)
        self._pool_count = 0
        self._per_key: dict[str, int] = {}  # (the pool's connections, idle or not, by caps_key)
        self._shared: dict[str, list[UpstreamConn]] = {}  # (by caps_key: those serving side by side, see _shares)
        self._alone: dict[str, int] = {}  # (by caps_key: the requests waiting to be served alone)
        self.relates = False  # whether its transport relates what it asks to the request it is about (_shares)
        self._pool_free = asyncio.Condition()

    async def _usable(self) -> None:
        raise NotImplementedError

    async def _open(
        self, session: ServerSession | None, *, primary: bool = False, caps: JSONDict | None = None
    ) -> UpstreamConn:
        raise NotImplementedError

    async def _close(self, conn: UpstreamConn) -> None:
        raise NotImplementedError

    async def lease(self, sctx: ServerRequestContext) -> Lease:
        """A connection for one 2026-07-28 request. A handshake-era upstream may ask its client things in the
        middle of a request, so its connections serve one request at a time, unless what it asks can be told to be
        about one of them (:meth:`_shares`: then up to the proxy's ``max_shared`` side by side); a
        request waits while all are busy. It keeps state per connection (a tool a call added, a setting) that a
        2026-07-28 client, who sees one server, must find whichever request comes next: by default
        (``pool_size=1``) the requests whose clients declare the same capabilities (what the upstream sees, and
        may offer tools by) are all served by one connection, opened for them and kept; a larger ``pool_size`` is
        the operator saying its connections are interchangeable (up to ``pool_size`` in all, an idle one closed to
        make room for other capabilities). A 2026-07-28 upstream asks nothing that way, so every request shares the
        primary (a new one when the upstream ended).

        In a pool, among the idle connections that fit, the one opened first is taken: a stdio target is one
        process per connection, and a 2026-07-28 client's requests one after the other go back to the same process
        as soon as it is free, even after a burst (or a request arriving while a cancelled one still held it)
        opened another."""
        await self._usable()
        if self.modern:
            shared = self.primary
            assert shared is not None
            lease = Lease(shared, sctx)
            shared.leases.append(lease)
            return lease
        # the upstream sees the capabilities of the request's client (a server may offer tools by them): a
        # connection serves the requests whose clients declared what it declared. By default (pool_size 1) there is
        # one such connection per set of capabilities, never closed to make room: the state a call changed there
        # (a tool it added) is what every request of those clients sees next. A pool: up to pool_size in all
        primary = self.primary
        assert primary is not None
        single = self.proxy.pool_size == 1
        key = caps_key(sctx.client_capabilities)
        share = self._shares(key)
        evicted: list[UpstreamConn] = []
        deadline = asyncio.get_running_loop().time() + self.proxy.lease_timeout  # (one bound, however often woken)
        async with self._pool_free:
            for waiting in self._idle.values():  # a connection whose upstream ended (a crashed stdio server) leaves
                for dead in [c for c in waiting if not c.alive]:
                    waiting.remove(dead)
                    self._counted(dead, -1)
                    evicted.append(dead)
            if (
                key == caps_key(None)
                and not primary.pooled
                and primary.alive
                and not (single and self._per_key.get(key))
            ):
                # (it serves what it declares; not beside another kept for those clients: their state is one)
                self._idle.setdefault(key, []).append(primary)
                self._counted(primary, 1)
            if not share:  # (requests that would share wait behind it: it is not starved by them)
                self._alone[key] = self._alone.get(key, 0) + 1
            try:
                conn = await self._take(key, share, single, deadline, evicted)
            finally:
                if not share:
                    self._alone[key] -= 1
        for gone in evicted:
            await self._close(gone)
        if conn is None:
            try:
                conn = await self._open(None, caps=sctx.client_capabilities)
            except BaseException:
                async with self._pool_free:
                    self._pool_count -= 1
                    self._per_key[key] -= 1
                    self._pool_free.notify_all()
                raise
            await self.watch_pooled(conn)  # (a stdio process of its own: the updates of what it changes relayed)
        lease = Lease(conn, sctx, share)
        conn.leases.append(lease)
        if share and conn not in self._shared.setdefault(key, []):
            async with self._pool_free:
                self._shared[key].append(conn)
                self._pool_free.notify_all()  # (the requests waiting to share it)
        return lease

    def _shares(self, key: str) -> bool:
        """Whether a 2026-07-28 request may be served beside others on one connection: what the upstream sends for
        it must be told apart from what it sends for them. Progress (its own token) and cancellation (its own
        request id) always are; what the upstream asks (elicitation, sampling, roots) is when the transport relates
        it to the request (Streamable HTTP: on that request's own stream), or when the client declared nothing it
        could be asked. Log messages are related the same way, and are best effort: an unrelated one reaches a request
        only while it holds the connection alone."""
        return self.relates or key == caps_key({})

    async def _take(
        self, key: str, share: bool, single: bool, deadline: float, evicted: list[UpstreamConn]
    ) -> UpstreamConn | None:
        """(the pool's lock held) A connection for a request of capabilities ``key``: one already shared (when the
        request shares and no request waits to be served alone), an idle one (the oldest), or None: room was made
        for a new one (counted). Waits until ``deadline``, else refuses."""
        loop = asyncio.get_running_loop()
        while True:
            if share and not self._alone.get(key):
                for conn in self._shared.get(key, ()):
                    if len(conn.leases) < self.proxy.max_shared and conn.alive:
                        return conn
            idle = self._idle.get(key)
            if idle:
                return idle.pop(0)  # the oldest (kept in the order they were opened)
            if self._per_key.get(key, 0) < 1 if single else self._pool_count < self.proxy.pool_size:
                self._pool_count += 1
                self._per_key[key] = self._per_key.get(key, 0) + 1
                return None
            spares = [c for idle in self._idle.values() for c in idle if not c.primary]
            if spares and not single:  # an idle connection declaring other capabilities makes room (the newest)
                spare = max(spares, key=opening_order)
                self._idle[caps_key(spare.caps)].remove(spare)
                self._counted(spare, -1)
                evicted.append(spare)
                continue
            try:
                left = deadline - loop.time()
                if left <= 0:
                    raise TimeoutError
                await asyncio.wait_for(self._pool_free.wait(), left)
            except TimeoutError:
                raise MCPError(
                    f"every connection to the upstream server {self.target.description} is busy "
                    f"(pool_size={self.proxy.pool_size}): none was free within {self.proxy.lease_timeout:g} s "
                    "(lease_timeout); try again later"
                ) from None

    async def release(self, lease: Lease) -> None:
        conn = lease.conn
        if lease in conn.leases:
            conn.leases.remove(lease)
        if self.modern:
            return
        alive = conn.alive
        async with self._pool_free:
            key = caps_key(conn.caps)
            if lease.shared and conn in self._shared.get(key, ()):
                if conn.leases:  # (others still share it: one more may join)
                    self._pool_free.notify_all()
                    return
                self._shared[key].remove(conn)
            if alive:
                bisect.insort(self._idle.setdefault(key, []), conn, key=opening_order)
            else:
                self._counted(conn, -1)
            self._pool_free.notify_all()  # (waiters of one set of capabilities or another)
        if not alive:
            await self._close(conn)  # (its process reaped)

    def _counted(self, conn: UpstreamConn, change: int) -> None:
        """(the pool's lock held) ``conn`` joins (1) or leaves (-1) the pool's counts (the primary, which is there
        anyway, takes none of ``pool_size``)."""
        key = caps_key(conn.caps)
        if conn.primary:
            conn.pooled = change > 0
        else:
            self._pool_count += change
        self._per_key[key] = self._per_key.get(key, 0) + change
