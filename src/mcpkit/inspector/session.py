"""The inspector's side of the connection: :class:`Inspector` holds one mcpkit :class:`~mcpkit.client.client.Client`
to the target and does, on the page's behalf, everything the page offers.

It connects (either era, every transport the client speaks) and reconnects; lists, calls, reads and gets; keeps
the calls that run (their progress, a cancel) and the requests the server makes of the person at the page
(sampling, elicitation) until the page answers them; keeps the roots the person edits, the resource
subscriptions and their live updates (``resources/subscribe`` in the handshake era, one ``subscriptions/listen``
stream in 2026-07-28); and tells every open page what happens through its :class:`~.events.EventHub`. Every
JSON-RPC message goes to its :class:`~.log.MessageLog` (see :mod:`.tap`).

Every table here is bounded: calls running at once (``max_running_calls``), finished results kept for a page
that reconnects (``max_kept_results`` and ``max_kept_result_bytes``), requests waiting for the person
(``max_pending_requests``: one more is declined at once), resource subscriptions (``MAX_SUBSCRIPTIONS``), roots
(``asks.MAX_ROOTS``), server stderr lines (``MAX_STDERR_LINES``), the server's log messages (``MAX_SERVER_LOG`` of
them and ``MAX_SERVER_LOG_BYTES`` in all; one longer than ``MAX_SERVER_LOG_ENTRY_BYTES`` is kept cut, saying so).
The client's own limits (message sizes, list walks, concurrency) apply to everything the server sends.

Extension points (for what later issues add on this page): :meth:`Inspector.request` sends any request through
the client (a caller that forwards requests on behalf of something else, an interactive view for example, checks
the method against its own allow-list first); a finished call's event carries the tool's definition so a
renderer of the page can find what the tool links to (its ``_meta``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import orjson

from ..client.apps import UI_HOST_SETTINGS
from ..client.display import display_name, segments, shown_description
from ..client.targets import connect_reason, parse_target, root_os_error
from ..protocol import versions
from ..protocol.errors import CapabilityNotSupported, ConnectionClosed, MCPError, MethodNotFound, RequestTimeout
from ..protocol.extensions import UI_EXTENSION
from .asks import (
    Call,
    HumanRequest,
    InspectorError,
    checked_roots,
)
from .calls import CallsAndAsks
from .events import EventHub
from .failures import ABANDONED, connect_failure
from .log import MessageLog
from .tap import tapped_client
from .views import ViewTable

if TYPE_CHECKING:
    from ..protocol.versions import LogLevel

logger: logging.Logger = logging.getLogger("mcpkit.inspector")

__all__ = ["Inspector", "InspectorError"]

MAX_SUBSCRIPTIONS = 256
MAX_STDERR_LINES = 500
MAX_SERVER_LOG = 500
MAX_SERVER_LOG_BYTES = 4 * 1024 * 1024
MAX_SERVER_LOG_ENTRY_BYTES = 64 * 1024
PROBE_MIN_INTERVAL = 2.0  # one ping per this many seconds, however many pages ask (see Inspector.probe)
PROBE_TIMEOUT = 5.0
PROBE_TIMEOUTS_UNREACHABLE = 2  # pings in a row given up on that show the server as not answering (see probe)


def _kept_log_message(params: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """A ``notifications/message``'s params as the inspector keeps and shows them, and their encoded size: one over
    ``MAX_SERVER_LOG_ENTRY_BYTES`` keeps its level, its logger and the start of its data (as text), with ``cut``
    holding its whole size (a message may be as long as the client's message bound)."""
    size = len(orjson.dumps(params))
    if size <= MAX_SERVER_LOG_ENTRY_BYTES:
        return params, size
    data = params.get("data")
    text = data if isinstance(data, str) else orjson.dumps(data).decode()
    level, name = params.get("level"), params.get("logger")
    kept = {
        "level": str(level)[:32] if level is not None else "",
        "logger": name[:256] if isinstance(name, str) else None,
        "data": text[: MAX_SERVER_LOG_ENTRY_BYTES // 4],  # (a character is at most 4 bytes of UTF-8)
        "cut": size,
    }
    return kept, len(orjson.dumps(kept))


def _displayed(item: dict[str, Any]) -> dict[str, Any]:
    """An item of a list with how to show it: its display name and its description's pieces."""
    name = display_name(item)
    desc = shown_description(item.get("description"), name if name != item.get("name") else None)
    item["_display"] = {"name": name, "description": segments(desc)}
    return item


class Inspector(CallsAndAsks):
    """One connection to the target and everything the page does with it (see the module docstring).

    Args:
        target: anything :class:`~mcpkit.client.client.Client` accepts (a command line, a ``.py`` file, a URL, an
            ``mcp.json`` entry, a server object, a ``Target``).
        mode, protocol_version: the era to negotiate (``auto``, ``handshake``, ``modern``) or a pinned revision.
        roots: the roots offered at first (URIs or ``{"uri", "name"}``); the page edits them.
        timeout: per-request timeout of everything but tool calls (which run until they end or are cancelled).
        client_options: more ``Client`` options (``env``, ``headers``, ``transport``, ``transport_options``, ...).
        log, hub: the message log and the event fan-out (new ones by default).
    """

    def __init__(
        self,
        target: Any,
        *,
        mode: str = "auto",
        protocol_version: str | None = None,
        roots: Sequence[str | dict[str, Any]] = (),
        timeout: float | None = 60.0,
        connect_timeout: float | None = 30.0,
        client_options: dict[str, Any] | None = None,
        log: MessageLog | None = None,
        hub: EventHub | None = None,
        max_running_calls: int = 32,
        max_pending_requests: int = 32,
        max_kept_results: int = 32,
        max_kept_result_bytes: int = 32 * 1024 * 1024,
    ) -> None:
        options = dict(client_options or {})
        self._target = parse_target(
            target,
            env=options.pop("env", None),
            cwd=options.pop("cwd", None),
            headers=options.pop("headers", None),
            transport=options.pop("transport", None),
        )
        if self._target.stdio is not None:
            self._target.stdio.on_stderr = self._on_stderr
        self._extra_extensions = options.pop("extensions", None) or {}
        self.client_options = options
        self.mode: str = mode
        self.protocol_version = protocol_version
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.hub: EventHub = hub or EventHub()
        self.log: MessageLog = log if log is not None else MessageLog()  # (an empty log is falsy: it has a len)
        self.log.on_entry = lambda entry: self.hub.publish("log", entry=entry.summary())
        self.roots: list[dict[str, Any]] = checked_roots(list(roots))
        self.max_running_calls = max_running_calls
        self.max_pending_requests = max_pending_requests
        self.max_kept_results = max_kept_results
        self.max_kept_result_bytes = max_kept_result_bytes
        self.status: str = "disconnected"
        self.error: dict[str, Any] | None = None
        self.log_level: str | None = None
        self.extra: dict[str, Any] = {}  # what a host of the inspector adds to its state (``mcpkit dev``)
        self._client: Any = None
        self._lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._calls: dict[str, Call] = {}
        self._finished: deque[Call] = deque()
        self._finished_bytes = 0
        self._pending: dict[str, HumanRequest] = {}
        self._subscriptions: set[str] = set()
        self._no_completions = False  # a server of a revision without the capability flag said -32601
        self._stderr: deque[str] = deque(maxlen=MAX_STDERR_LINES)
        self._server_log: deque[tuple[dict[str, Any], int]] = deque()  # (params as kept, their encoded size)
        self._server_log_bytes = 0
        # the number of the last stderr line and of the last log message (their events carry theirs; the state the
        # last kept: a page drops an event it read the line of in the state already, see _on_stderr)
        self._stderr_seq = 0
        self._server_log_seq = 0
        self._watch_task: asyncio.Task[None] | None = None
        self._attempt: asyncio.Future[None] | None = None  # the connection being opened (see abandon_connect)
        self._alive_task: asyncio.Task[None] | None = None
        self._probed_at = -PROBE_MIN_INTERVAL
        self._probe_timeouts = 0  # the last pings given up on after PROBE_TIMEOUT, in a row
        self._server_view: dict[str, Any] = {}  # the connected server as the state shows it (see snapshot)
        self._generation = 0
        self._connections = 0
        self.views: ViewTable = ViewTable(self)  # MCP Apps views shown by the page (views.py)

    # ------------------------------------------------------------------ state

    @property
    def client(self) -> Any:
        """The connected client (None while disconnected)."""
        return self._client

    @property
    def target_description(self) -> str:
        """The target as the person named it (a command line, a URL)."""
        return str(self._target.description)

    def server_name(self) -> str:
        client = self._client
        if client is None:
            info = None
        elif client.connected:
            info = client.server_info
        else:  # (it could not open a new session yet: the server as it last was)
            info = self._server_view.get("serverInfo")
        name = info.get("name") if isinstance(info, dict) else None
        return name if isinstance(name, str) and name else self.target_description

    def snapshot(self, *, whole: bool = True) -> dict[str, Any]:
        """Everything a page needs to draw itself: the connection, the server, what runs and what waits
        (``whole=False`` leaves out the calls and the waiting requests, which have events of their own)."""
        client = self._client
        out: dict[str, Any] = {
            "status": self.status,
            "error": self.error,
            "probe": self._target.kind in ("http", "sse"),  # (see probe: nothing else says an HTTP server died)
            "generation": self._generation,
            "target": self.target_description,
            "mode": self.mode,
            "pinnedVersion": self.protocol_version,
            "roots": self.roots,
            "subscriptions": sorted(self._subscriptions),
            "calls": [c.public() for c in [*self._finished, *self._calls.values()]] if whole else [],
            "pending": [r.public(self.server_name()) for r in self._pending.values()] if whole else [],
            "stderr": list(self._stderr),
            "stderrSeq": self._stderr_seq,
            "log": self.log.stats(),
            "logLevel": self.log_level,
            "extra": self.extra,
            "apps": {"sandbox": self.views.sandbox_origin, "views": self.views.views()},
        }
        if whole:
            out["serverLog"] = [params for params, _ in self._server_log]
            out["serverLogSeq"] = self._server_log_seq
        if client is not None and client.connected:
            self._server_view = {
                "protocolVersion": client.protocol_version,
                "era": "modern" if client.modern else "handshake",
                "serverInfo": client.server_info,
                "capabilities": client.server_capabilities,
                "completions": self._completes(client),
                "instructions": client.instructions,
            }
        if client is not None:  # (one that could not open a new session yet shows the server as it last was)
            out.update(self._server_view)
        return out

    def _set_status(self, status: str, error: dict[str, Any] | None = None) -> None:
        self.status = status
        self.error = error
        self.hub.publish("state", state=self.snapshot(whole=False))

    def set_extra(self, **values: Any) -> None:
        """Add to (or, with None, remove from) what the page shows of its host (see ``extra`` in the state)."""
        for key, value in values.items():
            if value is None:
                self.extra.pop(key, None)
            else:
                self.extra[key] = value
        self.hub.publish("extra", extra=self.extra)

    # ------------------------------------------------------------------ connection

    async def connect(
        self, *, mode: str | None = None, protocol_version: str | None = None, keep_on_failure: bool = False
    ) -> dict[str, Any] | None:
        """(Re)connect; returns None, or what went wrong. By default the current connection, its calls and its
        waiting requests end first, and a failure is kept in :attr:`error` (status ``failed``). With
        ``keep_on_failure`` the new connection is opened first and replaces the current one only once it works:
        a failure leaves the current connection as it was (``mcpkit dev`` reloads this way)."""
        async with self._lock:
            if mode is not None:
                if mode not in ("auto", "handshake", "modern"):
                    raise InspectorError(f"unknown mode {mode!r} (auto, handshake or modern)")
                self.mode = mode
                self.protocol_version = protocol_version or None
            keep = keep_on_failure and self._client is not None
            if not keep:
                await self._close_client("reconnecting")
                self._set_status("connecting")
            self._connections += 1
            connection = self._connections

            def tap(direction: str, data: bytes) -> None:
                self.log.record(direction, data, connection=connection)

            client = tapped_client(
                self._target,
                tap,
                mode=self.mode,
                protocol_version=self.protocol_version,
                roots=self._roots_now,
                sampling_handler=self._on_sampling,
                elicitation_handler=self._on_elicitation,
                logging_handler=self._on_log_message,
                on_notification=self._on_notification,
                timeout=self.timeout,
                connect_timeout=self.connect_timeout,
                cache=False,  # an inspector shows what the server answers now, and every message it takes
                extensions=self._extensions(),
                **self.client_options,
            )
            attempt = self._attempt = asyncio.ensure_future(client.connect())
            try:
                await asyncio.wait({attempt})  # (not cancelled with it: abandon_connect() cancels the attempt only)
            except asyncio.CancelledError:
                attempt.cancel()
                with contextlib.suppress(BaseException):
                    await attempt
                raise
            finally:
                self._attempt = None
            exc = ABANDONED if attempt.cancelled() else attempt.exception()
            if exc is not None:
                if not isinstance(exc, Exception):
                    raise exc
                with contextlib.suppress(Exception):
                    await client.aclose()
                failure = connect_failure(exc)
                if not keep:
                    self._set_status("failed", failure)
                return failure
            if keep:
                await self._close_client("replaced")
            self._client = client
            self._probe_timeouts = 0
            self._no_completions = False
            self._generation += 1
            self.views.close_all()  # (a view speaks to the server it was opened on only)
            if self.log_level is not None:
                with contextlib.suppress(MCPError, CapabilityNotSupported):
                    await client.set_logging_level(cast("LogLevel", self.log_level))  # (checked when set)
            if client.modern:
                self._restart_watch()
            else:
                for uri in sorted(self._subscriptions):
                    try:
                        await client.subscribe_resource(uri)
                    except (MCPError, CapabilityNotSupported):
                        self._subscriptions.discard(uri)
            self._alive_task = asyncio.get_running_loop().create_task(self._watch_alive(client))
            self._set_status("connected")
            return None

    def abandon_connect(self) -> bool:
        """Stop waiting for the connection being opened (a server that hangs as it starts): its :meth:`connect`
        returns the failure ``{"message", "abandoned": True}`` at once, and the new server is stopped. False when
        no connection is being opened."""
        attempt = self._attempt
        if attempt is None or attempt.done():
            return False
        attempt.cancel()
        return True

    async def disconnect(self) -> None:
        """Close the connection (a stdio server is stopped)."""
        async with self._lock:
            await self._close_client("disconnected")
            self._set_status("disconnected")

    async def aclose(self) -> None:
        """Close everything (the inspector is going away)."""
        await self.disconnect()

    async def _close_client(self, reason: str) -> None:
        client, self._client = self._client, None
        for task in (self._watch_task, self._alive_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        self._watch_task = self._alive_task = None
        for call in list(self._calls.values()):
            if call.task is not None:
                call.task.cancel()
        for call in list(self._calls.values()):
            if call.task is not None:
                with contextlib.suppress(BaseException):
                    await call.task
        for req in list(self._pending.values()):
            if not req.future.done():
                req.future.cancel()
        if client is not None:
            with contextlib.suppress(Exception):
                await client.aclose()

    async def _watch_alive(self, client: Any) -> None:
        """Notice a connection that ended on its own (a stdio server that exited, a lost HTTP session)."""
        while self._client is client:
            await asyncio.sleep(0.5)
            try:
                reason = client.session.ended
            except Exception:  # (the client closed its session)
                if self._target.kind == "http":
                    continue  # it could not open a new one (the server is down): the probe's next ping tries again
                reason = "the connection was closed"
            if reason is not None and self._client is client:
                async with self._lock:
                    if self._client is client:
                        await self._close_client("lost")
                        self._set_status("disconnected", {"message": reason})
                return

    async def probe(self) -> str:
        """Whether the server still answers; the status after asking. Over HTTP nothing tells the inspector that
        the server went away (stdio sees the process exit, a WebSocket its close) until a request fails, so a page
        that is shown and idle asks for this every few seconds: a ``ping`` bounded by ``PROBE_TIMEOUT``. One that
        cannot reach the server (refused, reset, no session opened) sets the status ``unreachable`` at once (the
        connection is kept: the client tries again with its next request); one given up on is only a slow answer
        (a loaded machine) until ``PROBE_TIMEOUTS_UNREACHABLE`` in a row were, which set it ``unreachable`` too;
        one answered sets it back to ``connected``. At most one ping is sent per ``PROBE_MIN_INTERVAL`` seconds,
        however many pages ask."""
        client = self._client
        now = time.monotonic()
        if client is None or now - self._probed_at < PROBE_MIN_INTERVAL:
            return self.status
        self._probed_at = now
        failure: str | None = None
        timeouts = 0
        try:
            await asyncio.wait_for(client.ping(), PROBE_TIMEOUT)
        except MCPError:
            pass  # it answered, with an error: it is there
        except (TimeoutError, RequestTimeout):
            timeouts = self._probe_timeouts + 1
            if timeouts >= PROBE_TIMEOUTS_UNREACHABLE:
                failure = f"{timeouts} pings in a row got no answer within {PROBE_TIMEOUT:g} s"
        except (ConnectionClosed, OSError) as exc:
            failure = connect_reason(exc) if root_os_error(exc) is not None else str(exc) or type(exc).__name__
        if self._client is client:
            self._probe_timeouts = timeouts
            if failure is not None and self.status in ("connected", "unreachable"):
                again = "Asked again every few seconds while the page is shown."
                self._set_status("unreachable", {"message": f"{failure}. {again}"})
            elif failure is None and timeouts == 0 and self.status == "unreachable":
                self._set_status("connected")
        return self.status

    def _extensions(self) -> dict[str, Any]:
        """The extensions the inspector's client declares: it hosts MCP Apps views (and what the caller adds)."""
        return {UI_EXTENSION: UI_HOST_SETTINGS, **dict(self._extra_extensions)}

    def _require(self) -> Any:
        if self._client is None:
            raise InspectorError("not connected to the server (reconnect first)", 409)
        return self._client

    # ------------------------------------------------------------------ lists and reads

    async def list_page(self, kind: str, cursor: str | None = None) -> dict[str, Any]:
        """One page of ``tools``, ``resources``, ``templates`` or ``prompts``: ``{"items", "nextCursor"}``."""
        client = self._require()
        calls = {
            "tools": client.list_tools_page,
            "resources": client.list_resources_page,
            "templates": client.list_resource_templates_page,
            "prompts": client.list_prompts_page,
        }
        fetch = calls.get(kind)
        if fetch is None:
            raise InspectorError(f"unknown list {kind!r}")
        if cursor is not None and not isinstance(cursor, str):
            raise InspectorError("cursor must be a string")
        try:
            items, next_cursor = await fetch(cursor)
        except CapabilityNotSupported as exc:
            return {"items": [], "nextCursor": None, "unsupported": str(exc)}
        return {"items": [_displayed(item.dump()) for item in items], "nextCursor": next_cursor}

    async def read(self, uri: str) -> dict[str, Any]:
        """``resources/read``."""
        client = self._require()
        if not isinstance(uri, str) or not uri:
            raise InspectorError("uri must be a non-empty string")
        result = await client.read_resource(uri)
        dumped: dict[str, Any] = result.dump()
        return dumped

    async def get_prompt(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``prompts/get`` (argument values are strings)."""
        client = self._require()
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise InspectorError("name must be a string and arguments an object")
        result = await client.get_prompt(name, arguments)
        dumped: dict[str, Any] = result.dump()
        if dumped.get("description"):
            dumped["_display"] = {"description": segments(dumped["description"])}
        return dumped

    async def complete(
        self, ref: dict[str, Any], argument: str, value: str, context: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """``completion/complete``: ``{"values", "total", "hasMore"}`` (empty when the server has no completions)."""
        client = self._require()
        if not isinstance(ref, dict) or not isinstance(argument, str) or not isinstance(value, str):
            raise InspectorError("ref must be an object, argument and value strings")
        try:
            if not self._completes(client):
                raise MethodNotFound("completion/complete")
            completion = (await client.complete(ref, argument, value, context or None)).completion
        except MethodNotFound:
            if not self._no_completions and "completions" not in (client.server_capabilities or {}):
                self._no_completions = True  # (2024-11-05: the answer is the only way to know)
                self.hub.publish("state", state=self.snapshot(whole=False))
            return {"values": [], "total": None, "hasMore": False}
        return {"values": list(completion.values), "total": completion.total, "hasMore": completion.has_more}

    def _completes(self, client: Any) -> bool:
        """Whether to ask ``client``'s server for completions: it declared them, or its revision has no flag for
        them (2024-11-05) and it has not answered -32601."""
        v = client.protocol_version
        unflagged = v is not None and not versions.features(v).completions_capability and not self._no_completions
        return unflagged or "completions" in (client.server_capabilities or {})

    async def request(
        self, method: str, params: dict[str, Any] | None = None, *, on_progress: Any = None
    ) -> dict[str, Any]:
        """Any request through the client, its raw result (the client's limits and era handling apply; the client's
        own progress token with ``on_progress``). A caller acting for something other than the person at the page
        checks ``method`` against its allow-list first."""
        client = self._require()
        result: dict[str, Any] = await client.request(method, params, on_progress=on_progress)
        return result

    async def tasks(self, op: str, task_id: str | None = None) -> dict[str, Any]:
        """The server's tasks (``tasks/list``, ``tasks/get``, ``tasks/cancel``) while it declares the ``tasks``
        capability (the client has no list of tasks: 2026-07-28 dropped it)."""
        client = self._require()
        if "tasks" not in (client.server_capabilities or {}):
            raise InspectorError("the server declares no tasks capability (2025-11-25)")
        if op == "list":
            return await self.request("tasks/list", {})
        if op in ("get", "cancel") and isinstance(task_id, str) and task_id:
            return await self.request(f"tasks/{op}", {"taskId": task_id})
        raise InspectorError("op must be list, or get or cancel with a taskId")

    async def ping(self) -> float:
        """Round-trip time in seconds (``ping``, or ``server/discover`` in 2026-07-28)."""
        rtt: float = await self._require().ping()
        return rtt

    async def set_log_level(self, level: str) -> None:
        """Ask for the server's log messages at ``level`` and above (kept across reconnects)."""
        client = self._require()
        await client.set_logging_level(level)
        self.log_level = level

    # ------------------------------------------------------------------ subscriptions

    async def subscribe(self, uri: str) -> None:
        """Live updates of ``uri`` (``notifications/resources/updated`` events)."""
        client = self._require()
        if not isinstance(uri, str) or not uri:
            raise InspectorError("uri must be a non-empty string")
        if uri in self._subscriptions:
            return
        if len(self._subscriptions) >= MAX_SUBSCRIPTIONS:
            raise InspectorError(f"at most {MAX_SUBSCRIPTIONS} subscriptions", 429)
        if not (client.server_capabilities.get("resources") or {}).get("subscribe"):
            raise InspectorError("the server does not offer resource subscriptions")
        if not client.modern:
            await client.subscribe_resource(uri)
        self._subscriptions.add(uri)
        if client.modern:
            self._restart_watch()
        self.hub.publish("subscriptions", subscriptions=sorted(self._subscriptions))

    async def unsubscribe(self, uri: str) -> None:
        """Stop the live updates of ``uri``."""
        client = self._require()
        if uri not in self._subscriptions:
            return
        self._subscriptions.discard(uri)
        if client.modern:
            self._restart_watch()
        else:
            with contextlib.suppress(MCPError, CapabilityNotSupported):
                await client.unsubscribe_resource(uri)
        self.hub.publish("subscriptions", subscriptions=sorted(self._subscriptions))

    def _restart_watch(self) -> None:
        """2026-07-28: one ``subscriptions/listen`` stream for the list changes the server offers and the URIs
        subscribed, started again whenever that filter changes."""
        if self._watch_task is not None:
            self._watch_task.cancel()
            self._watch_task = None
        client = self._client
        if client is None or not client.modern:
            return
        caps = client.server_capabilities or {}
        filters = {kind: bool((caps.get(kind) or {}).get("listChanged")) for kind in ("tools", "prompts", "resources")}
        uris = sorted(self._subscriptions)
        if not any(filters.values()) and not uris:
            return
        self._watch_task = asyncio.get_running_loop().create_task(self._listen(client, filters, uris))

    async def _listen(self, client: Any, filters: dict[str, bool], uris: list[str]) -> None:
        delay = 0.5
        while self._client is client:
            try:
                async with client.listen(resource_uris=uris, **filters) as sub:
                    delay = 0.5
                    async for method, params in sub:
                        self._publish_notification(method, params)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.debug("subscriptions/listen ended: %s", exc)
            await asyncio.sleep(delay)  # the stream ended: open it again, backing off
            delay = min(delay * 2, 30.0)

    # ------------------------------------------------------------------ notifications, logs, stderr

    async def _on_notification(self, method: str, params: dict[str, Any] | None) -> None:
        self._publish_notification(method, params)

    def _publish_notification(self, method: str, params: dict[str, Any] | None) -> None:
        self.hub.publish("notification", method=method, params=params or {})

    async def _on_log_message(self, params: dict[str, Any]) -> None:
        kept, size = _kept_log_message(params)
        self._server_log.append((kept, size))
        self._server_log_bytes += size
        while len(self._server_log) > MAX_SERVER_LOG or self._server_log_bytes > MAX_SERVER_LOG_BYTES:
            self._server_log_bytes -= self._server_log.popleft()[1]
        self._server_log_seq += 1
        self.hub.publish("serverlog", seq=self._server_log_seq, params=kept)

    def _on_stderr(self, line: str) -> None:
        # Numbered, as the log messages are: a page that reads the state again (it fell behind) holds the events that
        # come meanwhile and applies them after it, and a line that came between its queue's drop and the state's
        # reading is in both (it showed twice); the page skips an event numbered at most the state's stderrSeq.
        self._stderr.append(line)
        self._stderr_seq += 1
        self.hub.publish("stderr", seq=self._stderr_seq, line=line)

    # ------------------------------------------------------------------ roots

    def _roots_now(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.roots]

    async def set_roots(self, roots: list[Any]) -> None:
        """Replace the roots; a connected server is told (``notifications/roots/list_changed``, handshake era)."""
        if not isinstance(roots, list):
            raise InspectorError("roots must be a list")
        self.roots = checked_roots(roots)
        client = self._client
        if client is not None:
            with contextlib.suppress(CapabilityNotSupported):
                await client.set_roots(self._roots_now)
        self.hub.publish("roots", roots=self.roots)
