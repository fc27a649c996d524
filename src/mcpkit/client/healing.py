"""Self-healing, the base of :class:`~mcpkit.client.connection.ClientConnection`: every call goes through
``SelfHealing._call`` (the client's middleware, then the request), which re-initializes a stale session once (a
Streamable HTTP 404 for the session id; a WebSocket or legacy SSE connection that ended), with bounded backoff,
makes the session's resource subscriptions again, and retries the request when it is safe to repeat
(:data:`SAFE_METHODS`, or a tool the caller marked safe); a -32042 (URL elicitation required) has its elicitations
handed to the elicitation handler and the request retried once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..protocol.errors import (
    URL_ELICITATION_REQUIRED,
    ConnectionClosed,
    MCPError,
    MessageTooLarge,
    RequestTimeout,
    SessionExpired,
)
from ..protocol.jsonrpc import JSONDict
from .handlers import ElicitationParams
from .lowlevel import ClientSession
from .middleware import ClientCall, run_chain
from .targets import HTTP, SSE, WS

if TYPE_CHECKING:
    from .handlers import ElicitationHandler, Watch
    from .middleware import ClientMiddleware
    from .targets import OpenedTarget, Target

logger: logging.Logger = logging.getLogger("mcpkit.client")

T = TypeVar("T")

# Requests that may be repeated after a re-initialization without changing anything on the server.
SAFE_METHODS = frozenset(
    (
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "resources/subscribe",
        "resources/unsubscribe",
    )
)


class SelfHealing:
    """The self-healing of :class:`~mcpkit.client.connection.ClientConnection` (its base class; see the module
    docstring). The state it works on is made by ``ClientConnection.__init__``."""

    if TYPE_CHECKING:
        target: Target
        reconnect_enabled: bool
        max_reconnect_attempts: int
        backoff_initial: float
        backoff_max: float
        reconnects: int
        url_elicitation_wait: float
        max_url_elicitations: int
        _session: ClientSession | None
        _lost: str | None
        _stale: ClientSession | None
        _opened: OpenedTarget | None
        _lock: asyncio.Lock
        _tools_complete: bool
        _middleware: tuple[ClientMiddleware, ...]
        _subscriptions: set[str]
        _held_subscriptions: set[str]
        _watches: set[Watch]
        _elicitation_handler: ElicitationHandler | None
        _session_options: dict[str, Any]
        _completed_elicitations: set[str]
        _elicitation_event: asyncio.Event

        @property
        def session(self) -> ClientSession: ...

        async def _open(self) -> tuple[ClientSession, OpenedTarget]: ...

        async def _elicit(self, params: ElicitationParams) -> JSONDict: ...

    def _is_stale_session(self, exc: BaseException, session: ClientSession) -> bool:
        """Streamable HTTP: a 404 for our session id; WebSocket, legacy SSE: the connection (the session) ended."""
        if self.target.kind == HTTP or isinstance(exc, SessionExpired):  # (not one raised here once re-initialized)
            return isinstance(exc, SessionExpired) and not exc.reinitialized and self.target.kind == HTTP
        ended = isinstance(exc, ConnectionClosed) and not isinstance(exc, MessageTooLarge) and bool(session.ended)
        return ended and self.target.kind in (WS, SSE)

    async def _call(self, method: str, op: Callable[[ClientSession], Awaitable[T]], *, safe: bool | None = None) -> T:
        if not self._middleware:
            return await self._call_once(method, op, safe)
        call = ClientCall(method, safe if safe is not None else method in SAFE_METHODS)
        result: T = await run_chain(self._middleware, call, lambda: self._call_once(method, op, safe))
        return result

    async def _call_once(self, method: str, op: Callable[[ClientSession], Awaitable[T]], safe: bool | None) -> T:
        if self._session is None and self._lost is not None:  # (a re-initialization failed: try again)
            await self._reinitialize(None)
        session = self.session
        if session is self._stale:  # (its re-initialization was interrupted: a caller gave up on it)
            await self._reinitialize(session)
            session = self.session
        if session.ended and self.reconnect_enabled and self.target.kind in (WS, SSE):  # (this call is not sent yet)
            await self._reinitialize(session)
            session = self.session
        try:
            return await op(session)
        except Exception as exc:
            if isinstance(exc, MCPError) and exc.code == URL_ELICITATION_REQUIRED and self._handles_url_elicitation:
                if await self._complete_url_elicitations(exc):
                    return await op(self.session)  # one retry: a second -32042 goes to the caller
                raise
            if not (self.reconnect_enabled and self._is_stale_session(exc, session)):
                raise
            failed = exc
        await self._reinitialize(session)
        if safe is None:
            safe = method in SAFE_METHODS
        if not safe:
            what = "the server dropped the session" if self.target.kind == HTTP else "the connection ended"
            expired = SessionExpired(
                f"{what}; {method!r} was not retried because it is not safe to repeat "
                "(the client has re-initialized: call again to retry)"
            )
            expired.reinitialized = True
            raise expired from failed
        return await op(self.session)

    async def _reinitialize(self, stale: ClientSession | None) -> None:
        """Open a new session in place of ``stale`` (None: the one a failed re-initialization left; none then),
        with bounded backoff; raises ConnectionClosed when every attempt failed: the next call tries again.

        The stale session stays the client's until the new one is open: whoever reads :attr:`session` meanwhile
        (the inspector's watch of its connection) sees it, not a client that seems closed; a call cancelled
        while this runs (its caller's timeout) leaves it marked stale, and the next call re-initializes first."""
        async with self._lock:
            if self._session is not stale or (stale is None and self._lost is None):
                return  # another task already replaced the session (or the client was closed)
            self._stale = stale
            delay = self.backoff_initial
            last: BaseException | None = None
            for attempt in range(self.max_reconnect_attempts):
                if attempt:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, self.backoff_max)
                try:
                    session, opened = await self._open()
                except (OSError, MCPError, TimeoutError, RequestTimeout) as exc:
                    last = exc
                    continue
                old_opened, self._session, self._opened = self._opened, session, opened
                self._lost = self._stale = None
                self.reconnects += 1
                self._tools_complete = False
                await self._close_stale(stale, old_opened)
                logger.info("re-initialized the session with %s", self.target.description)
                await self._restore_subscriptions()
                return
            old_opened, self._session, self._opened, self._stale = self._opened, None, None, None
            await self._close_stale(stale, old_opened)
            self._lost = (
                f"could not re-initialize the session with {self.target.description} after "
                f"{self.max_reconnect_attempts} attempts: {last}"
            )
            raise ConnectionClosed(self._lost + " (the next call tries again)")

    @staticmethod
    async def _close_stale(stale: ClientSession | None, opened: OpenedTarget | None) -> None:
        if stale is not None:
            with contextlib.suppress(Exception):
                await stale.aclose()
        if opened is not None:
            with contextlib.suppress(Exception):
                await opened.aclose()

    async def _subscribe(self, uri: str) -> None:
        """``resources/subscribe``, remembered to be made again on a new session."""
        await self._call("resources/subscribe", lambda s: s.subscribe_resource(uri))
        self._subscriptions.add(uri)

    def _still_wanted(self, uri: str) -> bool:
        """Whether a resource subscription a watch made is wanted after it ends: made by hand too (with
        ``subscribe_resource``), or listed by another watch (one ending must not stop another's updates)."""
        return uri in self._held_subscriptions or any(uri in watch.uris for watch in self._watches)

    async def _restore_subscriptions(self) -> None:
        """A new session knows nothing of the old one's ``resources/subscribe``: subscribe again."""
        session = self._session
        if session is None or session.modern:
            return
        for uri in sorted(self._subscriptions):
            try:
                await session.subscribe_resource(uri)
            except Exception as exc:  # the resource may be gone: keep the rest
                logger.warning("could not re-subscribe to %s after re-initializing: %s", uri, exc)

    # ------------------------------------------------------------------ URL elicitation required (-32042)

    @property
    def _handles_url_elicitation(self) -> bool:
        return self._elicitation_handler is not None and bool(self._session_options["elicitation_url"])

    async def _complete_url_elicitations(self, exc: MCPError) -> bool:
        """Spec 2025-11-25: a -32042 error lists URL elicitations to finish before the request can be retried.

        Each goes to the elicitation handler (``mode: "url"``; return accept once the user is done in the
        browser). When all are accepted, wait (at most ``url_elicitation_wait`` seconds) for the server's
        ``notifications/elicitation/complete`` of each id, then retry the request once. Returns False (the error
        goes to the caller) when one is declined, cancelled or malformed."""
        data = exc.data if isinstance(exc.data, dict) else {}
        items = data.get("elicitations")
        if not isinstance(items, list) or not items:
            return False
        if len(items) > self.max_url_elicitations:
            raise MCPError(
                f"the server asks for {len(items)} URL elicitations in one -32042 error, more than "
                f"max_url_elicitations={self.max_url_elicitations}: none was shown "
                "(raise Client(max_url_elicitations=...) to allow more)",
                code=exc.code,
            ) from exc
        ids: list[str] = []
        for item in items:
            if not isinstance(item, dict) or item.get("mode") != "url" or not isinstance(item.get("url"), str):
                return False
            answer = await self._elicit(ElicitationParams.from_wire(item))
            if answer.get("action") != "accept":
                return False
            if isinstance(item.get("elicitationId"), str):
                ids.append(item["elicitationId"])
        if ids and self.url_elicitation_wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._elicitations_completed(ids), self.url_elicitation_wait)
        return True

    async def _elicitations_completed(self, ids: list[str]) -> None:
        while not all(i in self._completed_elicitations for i in ids):
            self._elicitation_event.clear()
            await self._elicitation_event.wait()


__all__ = ["SAFE_METHODS", "SelfHealing"]
