"""Raw JSON-RPC wires for the checker: every byte the server sends is recorded, nothing is corrected.

:class:`Wire` is the bookkeeping every transport shares: it routes responses by id *without trusting it* (a response
whose id matches no pending request is kept as a stray, the evidence for M006), answers the requests the server sends
(ping, roots/list, ...) so that a session can go on, and :meth:`Wire.request` returns ``None`` when no response with
the request's id comes: on a timeout, or at once when the server answered it with an error that carries no id (see
:meth:`Wire.request`).
:class:`StdioWire` runs the server command as a child process and records every stdout line (valid or not). The
network wires are in :mod:`.wire_http` (Streamable HTTP, legacy HTTP+SSE) and :mod:`.wire_ws` (WebSocket);
:func:`open_wire` picks one for a target.

The checker is a client like any other: what a server sends is bounded by :data:`MAX_MESSAGE` (the 4 MiB of
mcpkit's own client) on every wire, and a line, body or event past it is recorded as a fault, never buffered whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..transports.base import DEFAULT_MAX_MESSAGE_SIZE

JSON = dict[str, Any]

MAX_MESSAGE = DEFAULT_MAX_MESSAGE_SIZE
"""The largest message (stdio line, HTTP body, SSE event, WebSocket message) the checker accepts from a server."""
MAX_RECORDED = 50_000  # payloads (and notifications, server requests) a wire keeps; beyond, counted only
STDERR_LINES = 50  # the last lines of a stdio server's stderr kept for evidence
STDERR_LINE_BYTES = 8 * 1024


@dataclass
class Incoming:
    """One message (or undecodable line, body or event) received from the server."""

    raw: str
    data: Any = None  # parsed JSON, or None when ``error`` is set
    error: str | None = None  # why it is not a JSON-RPC message
    at: float = field(default_factory=time.monotonic)
    channel: str = "stdout"  # stdout | http-json | http-sse | http-get | sse | ws | http

    def short(self, limit: int = 300) -> str:
        """The raw text, cut at ``limit`` characters."""
        return self.raw if len(self.raw) <= limit else self.raw[:limit] + "..."


class WireClosed(Exception):
    """The server is gone (its process exited, or its connection closed)."""


def is_request(msg: Any) -> bool:
    """A JSON-RPC request: an object with a method and an id."""
    return isinstance(msg, dict) and "method" in msg and "id" in msg


def is_notification(msg: Any) -> bool:
    """A JSON-RPC notification: an object with a method and no id."""
    return isinstance(msg, dict) and "method" in msg and "id" not in msg


def decode(text: str, channel: str) -> Incoming:
    """One received payload as an :class:`Incoming`, parsed when it is JSON. JSON nested deeper than Python's
    parser goes is valid JSON the checker cannot read: recorded as :data:`TOO_DEEP` (it used to end the reader)."""
    try:
        return Incoming(text, json.loads(text), None, channel=channel)
    except ValueError as exc:
        return Incoming(text, None, f"not JSON: {exc}", channel=channel)
    except RecursionError:
        return Incoming(text, None, TOO_DEEP, channel=channel)


ClientHandler = Callable[[JSON], Any]


class Wire:
    """Common bookkeeping: pending requests, strays, notifications, server requests."""

    transport = "stdio"

    def __init__(self) -> None:
        self.incoming: list[Incoming] = []
        self.sent: list[Any] = []
        self.strays: list[Incoming] = []  # responses matching no pending request
        self.notifications: list[Incoming] = []
        self.server_requests: list[Incoming] = []
        self.responses: dict[str, Incoming] = {}
        self._pending: dict[str, asyncio.Future[Incoming]] = {}
        self._next_id = 0
        self.protocol_version: str | None = None
        self.client_handlers: dict[str, ClientHandler] = {}
        self.closed: asyncio.Event = asyncio.Event()  # set when the peer is gone (stdio EOF)
        self.modern_meta: JSON | None = None  # set for a stateless (2026-07-28) session
        self.initialized_at: float | None = None  # when notifications/initialized was sent
        self.cancelled: set[str] = set()  # keys of the requests we cancelled
        self.dropped: int = 0  # payloads past MAX_RECORDED, not kept
        # What an error without an id may still be the answer to, besides the one request waited for: requests
        # whose wait ended with no response (a late answer may come), and malformed frames sent raw (their error
        # carries no id). While any is open, such an error ends no wait (see request()).
        self.overdue: set[str] = set()
        self.raw_unanswered: int = 0
        self._waiting: set[str] = set()  # keys request() waits on
        self._arrived = asyncio.Event()  # set as each payload is recorded (see until())

    def with_meta(self, params: JSON | None) -> JSON | None:
        """Stateless era (2026-07-28): every request carries the per-request ``_meta`` (explicit keys win)."""
        if self.modern_meta is None:
            return params
        out = dict(params or {})
        meta = dict(self.modern_meta)
        given = out.get("_meta")
        if isinstance(given, dict):
            meta.update(given)
        out["_meta"] = meta
        return out

    def new_id(self, kind: str = "int") -> int | str:
        """A request id never used on this wire (an integer, or a string with ``kind="str"``)."""
        self._next_id += 1
        return self._next_id if kind == "int" else f"chk-{self._next_id}"

    @staticmethod
    def key(msg_id: Any) -> str:
        """The routing key of an id (1 and "1" differ, as JSON-RPC says)."""
        return json.dumps(msg_id, sort_keys=True)

    def record(self, inc: Incoming) -> None:
        """Take one received payload: route responses, keep notifications, answer the server's requests. Past
        :data:`MAX_RECORDED` payloads a flooding server's messages are counted, not kept (responses still route)."""
        if len(self.incoming) < MAX_RECORDED:
            self.incoming.append(inc)
        else:
            self.dropped += 1
        self._arrived.set()
        if inc.error is not None:
            return
        items = inc.data if isinstance(inc.data, list) else [inc.data]
        for msg in items:
            sub = Incoming(json.dumps(msg), msg, None, inc.at, inc.channel) if isinstance(inc.data, list) else inc
            if is_request(msg):
                if len(self.server_requests) < MAX_RECORDED:
                    self.server_requests.append(sub)
                self._answer_server_request(msg)
            elif is_notification(msg):
                if len(self.notifications) < MAX_RECORDED:
                    self.notifications.append(sub)
            elif isinstance(msg, dict):
                key = self.key(msg.get("id"))
                fut = self._pending.pop(key, None)
                if fut is not None and not fut.done():
                    self.responses[key] = sub
                    fut.set_result(sub)
                else:
                    self.strays.append(sub)
                    self.overdue.discard(key)
                    if msg.get("id") is None and "error" in msg:
                        self._idless_error("id" not in msg)

    def _idless_error(self, absent: bool) -> None:
        """An error response with no id (or a null one) that no request was waiting for. The answer to a malformed
        frame sent raw, when one is open; otherwise, when its id is absent (the 2025-11-25 schema makes it optional
        on an error) and the server has nothing else of ours to answer, the answer to the one request open: that
        request's wait ends, with no response, at once instead of at its timeout. The error stays a stray, judged
        as before (M001); only the wait is shorter."""
        if self.raw_unanswered:
            self.raw_unanswered -= 1
            return
        if not absent or self.overdue or len(self._pending) != 1:
            return
        ((key, fut),) = self._pending.items()
        if key in self._waiting and not fut.done():
            del self._pending[key]
            fut.cancel()  # (request() reads a cancelled wait as answered without an id)

    def _answer_server_request(self, msg: JSON) -> None:
        method = msg.get("method")
        handler = self.client_handlers.get(str(method))
        if method == "ping":
            reply: JSON = {"jsonrpc": "2.0", "id": msg["id"], "result": {}}
        elif handler is not None:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "result": handler(msg.get("params") or {})}
        else:
            reply = {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "Method not found"}}
        asyncio.get_running_loop().create_task(self._send_quiet(reply))

    async def _send_quiet(self, obj: Any) -> None:
        with contextlib.suppress(Exception):
            await self.send(obj, expect_response=False)

    async def start(self) -> None:
        """Connect (or launch the server); raises OSError/ValueError when it cannot."""

    async def send(self, obj: Any, *, expect_response: bool = True) -> None:
        """Send one message (or batch) as the transport frames it."""
        raise NotImplementedError

    async def send_raw(self, data: bytes) -> None:
        """Send bytes as one frame, whatever they are (malformed-input checks)."""
        raise NotImplementedError

    async def request(
        self,
        method: str,
        params: JSON | None = None,
        *,
        timeout: float = 10.0,
        id_kind: str = "int",
        msg_id: Any = None,
    ) -> Incoming | None:
        """Send a request and wait for the response with the same id. ``None`` when none comes: on a timeout, or
        as soon as the server answers it with an error that has no id while nothing else of ours is open on the
        wire (it cannot be the answer to anything else, and the server has answered; a later response with the
        id would be a second answer)."""
        rid = msg_id if msg_id is not None else self.new_id(id_kind)
        msg: JSON = {"jsonrpc": "2.0", "id": rid, "method": method}
        params = self.with_meta(params)
        if params is not None:
            msg["params"] = params
        fut = self.expect(rid)
        key = self.key(rid)
        self._waiting.add(key)
        closed: asyncio.Future[Any] = asyncio.ensure_future(self.closed.wait())
        try:
            await self.send(msg)
            waiting: set[asyncio.Future[Any]] = {fut, closed}
            await asyncio.wait(waiting, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closed.cancel()
            self._waiting.discard(key)
        if fut.cancelled():  # answered by an error without an id
            return None
        if fut.done():
            return fut.result()
        self._pending.pop(key, None)
        fut.cancel()
        self.overdue.add(key)
        return None

    async def until(self, ready: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``ready()`` holds, asked again as each payload arrives, for at most ``timeout`` seconds (a
        check that looks for something the server may send ends when it comes, not after a fixed time). Whether
        it held."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not ready():
            if (left := deadline - loop.time()) <= 0:
                return False
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)
        return True

    async def notify(self, method: str, params: JSON | None = None) -> None:
        """Send a notification."""
        msg: JSON = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if method == "notifications/initialized":
            self.initialized_at = time.monotonic()
        if method == "notifications/cancelled" and isinstance(params, dict):
            self.cancelled.add(self.key(params.get("requestId")))
        await self.send(msg, expect_response=False)

    def expect(self, msg_id: Any) -> asyncio.Future[Incoming]:
        """A future resolved by the response with ``msg_id`` (for requests sent by hand)."""
        fut: asyncio.Future[Incoming] = asyncio.get_running_loop().create_future()
        self._pending[self.key(msg_id)] = fut
        return fut

    def forget(self, msg_id: Any) -> None:
        """Stop waiting for the response to ``msg_id`` (a late one becomes a stray)."""
        fut = self._pending.pop(self.key(msg_id), None)
        if fut is not None:
            if not fut.done() and msg_id is not None:
                self.overdue.add(self.key(msg_id))
            fut.cancel()

    async def close(self) -> None:
        """Hang up (and reap a launched server)."""
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        """Whether the server can still be talked to."""
        return True


TOO_DEEP = "JSON nested deeper than the checker parses"  # valid JSON, not judged (nor routed to its request)
OVERSIZED = "over the size bound"  # the error of a message the checker did not read (larger than MAX_MESSAGE)


class ConnectionWire(Wire):
    """A wire over one of mcpkit's client connections: a stdio child process (``StdioClientTransport``: its own
    process group, bounded lines, reaped on close), legacy HTTP+SSE (``SSEClientTransport``: endpoint event,
    same-origin check, bounded events) or WebSocket (``WebSocketClientTransport``: subprotocol ``mcp``, bounded
    frames). One JSON-RPC message per line, event or frame, each recorded raw; what the connection refuses as too
    large is recorded as :data:`OVERSIZED`."""

    raw_unanswered: int

    def __init__(self, transport: str, conn: Any) -> None:
        super().__init__()
        self.transport = transport
        self.channel: str = "stdout" if transport == "stdio" else transport
        self.conn = conn
        self.ended: str | None = None  # why the connection ended, when it did
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        try:
            await self.conn.start()
        except OSError:
            raise
        except Exception as exc:  # httpx / websockets handshake errors, a refused endpoint, a bad command line
            raise OSError(f"{type(exc).__name__}: {exc}") from exc
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        from ..protocol.errors import FrameTooLarge

        while True:
            try:
                data = await self.conn.receive()
            except FrameTooLarge:
                self.record(Incoming(f"<a message over {MAX_MESSAGE} bytes>", None, OVERSIZED, channel=self.channel))
                continue
            except Exception as exc:  # a broken connection ends the wire like an end of input
                self.ended = f"{type(exc).__name__}: {exc}"
                break
            if data is None:
                break
            text = data.decode("utf-8", errors="replace")
            self.record(
                decode(text, self.channel) if text.strip() else Incoming(text, None, "empty line", channel=self.channel)
            )
        code = getattr(self.conn, "close_code", None)
        if code == 1009:
            self.record(Incoming(f"<a WebSocket message over {MAX_MESSAGE} bytes>", None, OVERSIZED, channel="ws"))
        self.ended = self.ended or (f"closed (code {code})" if code is not None else "end of input")
        await asyncio.sleep(0.05)  # let the reader of the last response run first
        self.closed.set()

    @property
    def alive(self) -> bool:
        return self._reader is not None and not self.closed.is_set()

    async def send(self, obj: Any, *, expect_response: bool = True) -> None:
        self.sent.append(obj)
        await self._frame(json.dumps(obj, separators=(",", ":")).encode())

    async def send_raw(self, data: bytes) -> None:
        self.raw_unanswered += 1  # (its error, if any, has no id)
        await self._frame(data)

    async def _frame(self, data: bytes) -> None:
        if not self.alive:
            raise WireClosed(f"the {self.transport} connection is closed")
        if self.transport == "stdio" and data.endswith(b"\n"):
            data = data[:-1]  # the stdio connection adds the newline itself
        try:
            await self.conn.send(data)
        except Exception as exc:  # ConnectionClosed: a closed pipe or socket, a refused POST
            raise WireClosed(str(exc)) from None

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.conn.close()
        if self._reader is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._reader), 1.0)
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader


class StdioWire(ConnectionWire):
    """A server started as a child process by mcpkit's stdio client connection; every stdout line is recorded."""

    def __init__(self, command: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None):
        from ..transports.stdio import StdioClientTransport, StdioServer

        self.stderr_not_utf8: int = 0  # stderr lines that were not UTF-8 (A004 says UTF-8)
        self.stderr_bytes: int = 0
        server = StdioServer(
            list(command),
            env=dict(env or {}),
            cwd=cwd,
            on_stderr=self._stderr,
            shutdown_timeout=1.0,
            max_message_size=MAX_MESSAGE,
            stderr_lines=STDERR_LINES,
            stderr_line_bytes=STDERR_LINE_BYTES,
        )
        super().__init__("stdio", StdioClientTransport(server))

    def _stderr(self, line: str) -> None:
        self.stderr_bytes += len(line) + 1
        if "\ufffd" in line:  # what invalid UTF-8 decodes to
            self.stderr_not_utf8 += 1

    @property
    def stderr_tail(self) -> list[str]:
        """The last lines the server wrote to stderr."""
        return list(self.conn.stderr_lines)

    @property
    def alive(self) -> bool:
        return super().alive and self.conn.returncode is None


def network_wire(transport: str, url: str, headers: dict[str, str], timeout: float) -> ConnectionWire:
    """A wire for a legacy HTTP+SSE (``sse``) or WebSocket (``ws``) URL (headers to the target only)."""
    from .._extras import require

    require("websockets" if transport == "ws" else "httpx", "mcpkit check")  # (one line naming the http extra)
    if transport == "ws":
        from ..transports.http.ws_client import WebSocketClientTransport

        ws = WebSocketClientTransport(url, headers=headers, max_message_size=MAX_MESSAGE, open_timeout=timeout)
        return ConnectionWire("ws", ws)
    from ..transports.http.sse_client import SSEClientTransport

    sse = SSEClientTransport(url, headers=headers, timeout=timeout, max_message_size=MAX_MESSAGE)
    return ConnectionWire("sse", sse)


def split_command(target: str | Sequence[str]) -> list[str]:
    """A command line (split like a shell, without expansion) or an argv list, as an argv list."""
    if isinstance(target, str):
        return shlex.split(target)
    return list(target)


def server_argv(target: str | Sequence[str]) -> list[str]:
    """The command line of a stdio server target, read as mcpkit's ``Client`` reads it: a ``*.py`` file or
    ``python server.py`` runs with this Python interpreter, any other command line as given."""
    from ..client.targets import parse_target

    stdio = parse_target(target if isinstance(target, str) else list(target)).stdio
    if stdio is None:
        raise ValueError(f"{target!r} is not a command line")
    return stdio.argv


def target_transport(target: str | Sequence[str], transport: str | None = None) -> str:
    """The transport a target is checked over: ``stdio`` for a command line, ``ws`` for a ``ws(s)://`` URL, ``sse``
    for an http(s) URL whose path ends in ``/sse`` (the legacy HTTP+SSE endpoint), ``http`` (Streamable HTTP) for
    any other http(s) URL. ``transport`` overrides the guess for a URL."""
    if not isinstance(target, str) or not target.startswith(("http://", "https://", "ws://", "wss://")):
        if transport not in (None, "stdio"):
            raise ValueError(f"a command line is checked over stdio, not {transport!r}")
        return "stdio"
    if transport is not None:
        if transport not in ("http", "sse", "ws"):
            raise ValueError(f"unknown transport {transport!r} (expected http, sse or ws)")
        return transport
    if target.startswith(("ws://", "wss://")):
        return "ws"
    path = target.split("?", 1)[0].rstrip("/")
    return "sse" if path.endswith("/sse") else "http"


def is_url(target: str | Sequence[str]) -> bool:
    """Whether a target is a URL (any network transport) rather than a command line."""
    return isinstance(target, str) and target.startswith(("http://", "https://", "ws://", "wss://"))
