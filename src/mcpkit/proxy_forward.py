"""One request of a proxy's client forwarded upstream (:mod:`mcpkit.proxies`): on the client session's own upstream
session (handshake era), or on a connection leased from the pool for the request (2026-07-28); what the upstream asks
meanwhile goes to the client as server->client requests (handshake era) or as ``InputRequiredResult`` rounds, the
upstream request suspended until the client's next round (at most ``max_suspended`` at once, each for at most
``suspended_timeout`` seconds); its progress relayed in order. In :class:`Forwarding`, a base class of
:class:`~mcpkit.proxies.ProxyServer`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

from .engine import ORIGIN
from .protocol.errors import InvalidParams, MCPError
from .protocol.jsonrpc import JSONDict
from .protocol.versions import META_LOG_LEVEL
from .proxy_conn import ASKING
from .proxy_rounds import Exchange, ProgressRelay
from .proxy_upstream import Upstream
from .server.app import MCPKit
from .server.lowlevel import InputRequired, ServerRequestContext

__all__ = ["Forwarding"]


class Forwarding(MCPKit):
    """How a :class:`~mcpkit.proxies.ProxyServer` forwards one request upstream (its base class; the attributes
    below are the proxy's, set by its constructor)."""

    max_suspended: int
    suspended_timeout: float
    _exchanges: dict[str, Exchange]  # upstream requests suspended while their 2026-07-28 client answers input
    _ids: Iterator[int]

    async def _forward(self, sctx: ServerRequestContext, upstream: Upstream, method: str, params: JSONDict) -> JSONDict:
        """One request upstream for ``sctx``: on the client session's own upstream session (handshake era), or on a
        leased pool connection (2026-07-28), suspended while the client answers what the upstream asks. The
        upstream's connection ending meanwhile (its server died), or a new one failing, is an error saying so."""
        try:
            return await self._forward_one(sctx, upstream, method, params)
        except ConnectionError as exc:  # (ConnectionClosed, ServerStartError, a refused connection)
            raise MCPError(f"the upstream server {upstream.target.description} is unavailable: {exc}") from None

    async def _forward_one(
        self, sctx: ServerRequestContext, upstream: Upstream, method: str, params: JSONDict
    ) -> JSONDict:
        progress = ProgressRelay(lambda: sctx) if sctx.meta.get("progressToken") is not None else None
        if not sctx.features.modern and sctx.session is not None:
            try:
                return await self._forward_session(sctx, upstream, method, params, progress)
            finally:
                if progress is not None:
                    progress.close()
        state = sctx.input_state
        if isinstance(state, dict) and isinstance(state.get("x"), str):
            exchange = self._exchanges.pop(state["x"], None)
            if exchange is None:
                raise InvalidParams("the upstream request this answers has ended (expired): send the request again")
            answers = sctx.params.get("inputResponses")
            answers = answers if isinstance(answers, dict) else {}
            for key, future in exchange.pending.items():
                if not future.done():
                    answer = answers.get(key)
                    if isinstance(answer, dict):
                        future.set_result(answer)
                    else:
                        future.set_exception(MCPError(f"the client sent no answer to {key!r}"))
            exchange.pending = {}
            exchange.lease.sctx = sctx
            if exchange.relay is None and progress is not None:
                exchange.relay = progress
            elif exchange.relay is not None:
                exchange.relay.resume()  # the progress held since the last round goes to this one
            return await self._await_exchange(exchange, method, upstream)
        if isinstance(state, dict) and "u" in state:  # the upstream's own round (it speaks 2026-07-28)
            if state["u"] is not None:
                params = {**params, "requestState": state["u"]}
            answers = sctx.params.get("inputResponses")
            if isinstance(answers, dict):
                params["inputResponses"] = answers
        lease = await upstream.lease(sctx)
        assert lease.conn.client is not None
        if upstream.modern and sctx.log_level is not None:
            params.setdefault("_meta", {})[META_LOG_LEVEL] = sctx.log_level
        exchange = Exchange(lease, None, progress)  # type: ignore[arg-type]
        if progress is not None:
            progress.target = lambda: exchange.lease.sctx
        token = ORIGIN.set(lease)  # (the upstream's requests on its stream are this lease's: Upstream._shares)
        try:
            exchange.task = asyncio.get_running_loop().create_task(
                lease.conn.client.session.request(method, params, on_progress=progress, answer_input=False)
            )
        finally:
            ORIGIN.reset(token)
        return await self._await_exchange(exchange, method, upstream)

    async def _forward_session(
        self,
        sctx: ServerRequestContext,
        upstream: Upstream,
        method: str,
        params: JSONDict,
        progress: ProgressRelay | None,
    ) -> JSONDict:
        """A handshake-era client's request: on its own upstream session (or a 2026-07-28 upstream's connection,
        whose input rounds are asked of this client as server->client requests)."""
        assert sctx.session is not None
        if upstream.modern:
            level = sctx.session.log_level
            if level is not None:  # the session's level rides on each 2026-07-28 request
                params.setdefault("_meta", {})[META_LOG_LEVEL] = level
            lease = await upstream.lease(sctx)
            token = ASKING.set(sctx)
            try:
                assert lease.conn.client is not None
                result: JSONDict = await lease.conn.client.session.request(method, params, on_progress=progress)
            finally:
                ASKING.reset(token)
                await upstream.release(lease)
        else:
            conn = await upstream.session_conn(sctx.session)  # type: ignore[arg-type]
            assert conn.client is not None
            conn.inflight.append(sctx)
            origin = ORIGIN.set(sctx)  # (what the upstream sends on the request's stream is about it: its logs)
            try:
                result = await conn.client.session.request(method, params, on_progress=progress)
            finally:
                ORIGIN.reset(origin)
                conn.inflight.remove(sctx)
        if progress is not None:
            await progress.flush()
        return result

    async def _await_exchange(self, exchange: Exchange, method: str, upstream: Upstream) -> JSONDict:
        lease = exchange.lease
        if exchange.expiry is not None:
            exchange.expiry.cancel()
            exchange.expiry = None
        task = exchange.task
        if not lease.asks and not task.done():  # wait for whichever comes first: the answer or a question
            lease.waker = asyncio.get_running_loop().create_future()
            task.add_done_callback(lease.wake)
            try:
                await lease.waker
            except BaseException:
                task.cancel()
                if exchange.relay is not None:
                    exchange.relay.close()
                await upstream.release(lease)
                raise
            finally:
                task.remove_done_callback(lease.wake)
                lease.waker = None
        if not lease.asks:
            await upstream.release(lease)
            if exchange.relay is not None:
                await exchange.relay.flush()
                exchange.relay.close()
            result: JSONDict = exchange.task.result()
            if result.get("resultType") == "input_required":  # the upstream's own round (2026-07-28)
                upstream_asks = result.get("inputRequests")
                raise InputRequired(
                    upstream_asks if isinstance(upstream_asks, dict) else {}, {"u": result.get("requestState")}
                )
            return result
        # the upstream asks something of the client: suspend until the client answers in its next round
        if len(self._exchanges) >= self.max_suspended:
            exchange.task.cancel()
            if exchange.relay is not None:
                exchange.relay.close()
            await upstream.release(lease)
            raise MCPError(f"too many requests waiting on client input (max_suspended={self.max_suspended})")
        requests: dict[str, JSONDict] = {}
        while lease.asks:
            m, p, future = lease.asks.popleft()
            key = f"{m.split('/')[0]}-{next(self._ids)}"
            exchange.pending[key] = future
            requests[key] = {"method": m, "params": p}
        if exchange.relay is not None:
            await exchange.relay.flush()
            exchange.relay.hold()  # until the retry: the client has no request open meanwhile
        ident = f"{next(self._ids)}-{id(exchange):x}"
        self._exchanges[ident] = exchange
        exchange.expiry = asyncio.get_running_loop().call_later(self.suspended_timeout, self._expire, ident, upstream)
        raise InputRequired(requests, {"x": ident})

    def _expire(self, ident: str, upstream: Upstream) -> None:
        exchange = self._exchanges.pop(ident, None)
        if exchange is not None:
            exchange.task.cancel()
            if exchange.relay is not None:
                exchange.relay.close()
            task = asyncio.get_running_loop().create_task(upstream.release(exchange.lease))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
