"""The scripted server ``mcpkit check-client`` plays: one scenario, every message recorded, nothing corrected.

A scenario (:data:`SCENARIOS`) sets how the server behaves; the behaviour is the same over stdio and Streamable HTTP
(the hosts in :mod:`.hosts` frame it). Every scenario offers the same two tools, listed on two pages (the cursor is
opaque and random, so a client that follows the pages shows it):

* ``check_echo`` answers at once (with two progress notifications first when the call asks for progress);
* ``check_ask`` asks the client for what it declared: a ``ping``, then ``roots/list``, ``sampling/createMessage``
  and ``elicitation/create`` for each capability the client declared (in the handshake era, as requests; in
  2026-07-28, as the ``inputRequests`` of an ``input_required`` result with a random ``requestState``); in the
  ``cancel`` scenario it asks for one of them only and cancels it (``notifications/cancelled``) when no answer came
  within :data:`CANCEL_AFTER`, then pings and watches for an answer to the cancelled request.

The expected client: connect, list the tools (following the pages), call each tool, close.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ...protocol.versions import (
    ALL_VERSIONS,
    HANDSHAKE_VERSIONS,
    LATEST_HANDSHAKE,
    META_CLIENT_CAPABILITIES,
    META_PROTOCOL_VERSION,
    V2025_03_26,
    V2026_07_28,
    features,
)

JSON = dict[str, Any]
Emit = Callable[[Any], Awaitable[None]]
SERVER_INFO = {"name": "mcpkit-check-client", "version": "1"}
CAPABILITIES: JSON = {"tools": {"listChanged": False}}
ASK_TIMEOUT = 10.0  # how long the server waits for the client's answer to one of its requests
BATCH_WAIT = 3.0  # seconds a batch of two pings gets, stretched to BATCH_PACE times a ping sent just after it took
BATCH_PACE = 2.0
INIT_DELAY = 0.3  # the initialize response waits this long: requests sent meanwhile are judged (S013)
UNKNOWN_VERSION = "1999-01-01"
PROGRESS_STEP = 0.1  # seconds between the progress notifications of check_echo
MAX_CONNECTIONS = 64  # connections (relay processes, HTTP sessions) one run of a client may open
MAX_ENTRIES = 20_000  # messages a connection's log keeps (a flooding client's rest is counted, not kept)
MAX_LOG_BYTES = 64 * 1024 * 1024  # and their size (characters of each raw message); past it too: counted, not kept
MAX_LATE_EVENTS = 64  # relay events (stdin closed, a signal, the end) a full log still keeps: S001 is judged by them
TOO_DEEP = "JSON nested deeper than the checker parses"  # the error of such a message: not judged, said
MAX_IN_FLIGHT = 1_000  # a stdio connection's messages being answered at once (past it: recorded, not answered)
MAX_IN_FLIGHT_BYTES = 16 * 1024 * 1024  # and the sum of their sizes (one message alone is always answered)
CANCEL_AFTER = 0.5  # the cancel scenario: a request to the client unanswered this long is cancelled
ECHO: dict[str, Any] = {
    "name": "check_echo",
    "description": "Answers at once (with progress notifications first when asked for progress).",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
}
ASK: dict[str, Any] = {
    "name": "check_ask",
    "description": "Asks the client for roots, a sampling reply and an elicitation answer, as it declared.",
    "inputSchema": {"type": "object", "properties": {}},
}
ASKS = {"roots": "roots/list", "sampling": "sampling/createMessage", "elicitation": "elicitation/create"}
SAMPLING_PARAMS: JSON = {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Say hello (mcpkit check-client)."}}],
    "maxTokens": 20,
}
ELICIT_PARAMS: JSON = {
    "message": "Your name? (mcpkit check-client)",
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}


class TooMany(Exception):
    """The client opened more connections in one run than the scripted server takes."""


@dataclass(frozen=True)
class Scenario:
    """How the scripted server behaves in one run of the client."""

    name: str
    about: str
    transports: frozenset[str] = frozenset({"stdio", "http"})
    modern: bool = False  # offer 2026-07-28 (server/discover, stateless requests) besides initialize
    answer_version: str | None = None  # the version initialize answers, whatever was asked
    batch: bool = False  # check_ask also sends a JSON-RPC batch of two pings (2025-03-26)
    expire: bool = False  # HTTP: the session ends after initialization (404 for its id)
    resume: bool = False  # HTTP: check_echo's stream is cut after a priming event with ``retry``
    retry_ms: int = 300
    auth: bool = False  # HTTP: the endpoint needs an OAuth token (mcpkit's development authorization server)
    cancel: bool = False  # check_ask cancels its request to the client when no answer came within CANCEL_AFTER
    optional: bool = False  # run only when asked for by name (the client needs something set up for it)


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("handshake", "a handshake-era server (2025-11-25): paginated tools, requests to the client"),
        Scenario("modern", "a dual-era server that offers 2026-07-28: input_required results", modern=True),
        Scenario("version", f"initialize answered with an unknown version ({UNKNOWN_VERSION})", answer_version="x"),
        Scenario("batch", "2025-03-26 negotiated; a JSON-RPC batch of requests to the client", batch=True),
        Scenario(
            "cancel",
            f"a request to the client (sampling, elicitation or roots) cancelled when unanswered after {CANCEL_AFTER}s",
            cancel=True,
        ),
        Scenario("expiry", "the session ends after initialization (404 for its id)", frozenset({"http"}), expire=True),
        Scenario(
            "resume", "check_echo's SSE stream is cut after an event id and retry", frozenset({"http"}), resume=True
        ),
        Scenario(
            "auth",
            "the endpoint needs an OAuth token: metadata, registration, authorization with PKCE (the client must "
            "be set up to authorize: run it by name)",
            frozenset({"http"}),
            auth=True,
            optional=True,
        ),
    )
}


@dataclass
class Entry:
    """One message in either direction (``in``: from the client), or a relay event (``event``)."""

    dir: str
    raw: str
    data: Any = None
    error: str | None = None
    at: float = field(default_factory=time.monotonic)
    http: JSON | None = None  # for an HTTP request: method, headers (lower-case names), status answered


class Conn:
    """One connection of the client to the scripted server: a relay process (stdio) or an HTTP session (a session
    id, or one stateless request stream)."""

    def __init__(self, no: int, transport: str) -> None:
        self.no = no
        self.transport = transport
        self.log: list[Entry] = []
        self.version: str | None = None  # negotiated (handshake) or per-request (modern)
        self.era: str | None = None
        self.client_caps: JSON = {}
        self.init_request: Any = None
        self.init_answered: float | None = None
        self.pending: dict[str, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.closed_at: float | None = None
        self.dropped: int = 0  # entries past MAX_ENTRIES or MAX_LOG_BYTES, not kept
        self.kept_bytes: int = 0  # the size of the log's entries (characters of each raw message)
        self.probe: Any = "not sent"  # the answer to the ping after the protocol errors of check_ask (None: none)
        self.in_flight: int = 0  # messages being answered now (stdio: the client may not read its answers)
        self.in_flight_bytes: int = 0  # the sum of their sizes (characters of each raw message)
        self.unanswered: int = 0  # messages past MAX_IN_FLIGHT or MAX_IN_FLIGHT_BYTES: recorded, not answered

    @property
    def full(self) -> bool:
        """The log holds :data:`MAX_ENTRIES` messages or :data:`MAX_LOG_BYTES`: what the client sends now is
        counted, not read."""
        return len(self.log) >= MAX_ENTRIES or self.kept_bytes >= MAX_LOG_BYTES

    def keep(self, entry: Entry) -> None:
        """Log ``entry`` unless the connection's log is full (then it is counted in ``dropped``); a relay event
        is still kept, up to :data:`MAX_LATE_EVENTS` past the count (how the client ended its server). The last
        message kept may take the log past :data:`MAX_LOG_BYTES` by its own size (at most a message's bound)."""
        if not self.full or (entry.dir == "event" and len(self.log) < MAX_ENTRIES + MAX_LATE_EVENTS):
            self.log.append(entry)
            self.kept_bytes += len(entry.raw)
        else:
            self.dropped += 1

    def admit(self, size: int) -> bool:
        """Whether a message of ``size`` characters is answered now (then :meth:`answered` is owed when it is): not
        past :data:`MAX_IN_FLIGHT` messages or :data:`MAX_IN_FLIGHT_BYTES` in flight, else it is counted in
        ``unanswered``."""
        if self.in_flight >= MAX_IN_FLIGHT or (self.in_flight and self.in_flight_bytes + size > MAX_IN_FLIGHT_BYTES):
            self.unanswered += 1
            return False
        self.in_flight += 1
        self.in_flight_bytes += size
        return True

    def answered(self, size: int) -> None:
        """A message :meth:`admit` let in is answered (or given up)."""
        self.in_flight -= 1
        self.in_flight_bytes -= size

    def incoming(self) -> list[Entry]:
        return [e for e in self.log if e.dir == "in"]

    def events(self) -> list[Entry]:
        return [e for e in self.log if e.dir == "event"]


def _key(rid: Any) -> str:
    return json.dumps(rid, sort_keys=True)


class ScriptedServer:
    """The protocol behaviour of one scenario, shared by the stdio and HTTP hosts."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.conns: list[Conn] = []
        self.cursor: str = "opaque-" + secrets.token_urlsafe(12)
        self.states: dict[str, JSON] = {}  # requestState issued -> what it asked
        self.started: float = time.monotonic()
        self.activity: asyncio.Event = asyncio.Event()  # set on every message (the --url mode waits on it)
        self.started_client = False  # the runner started the client command (M012 needs to know it ran)
        self.http_log: list[JSON] = []  # auth scenario: every HTTP request (method, path, query, headers, status)

    def connect(self, transport: str) -> Conn:
        """A new connection of the client; :class:`TooMany` past :data:`MAX_CONNECTIONS` in one run."""
        if len(self.conns) >= MAX_CONNECTIONS:
            raise TooMany(f"more than {MAX_CONNECTIONS} connections in one run")
        conn = Conn(len(self.conns) + 1, transport)
        self.conns.append(conn)
        return conn

    def record_in(self, conn: Conn, raw: str, http: JSON | None = None) -> Entry:
        """Record what the client sent (kept up to :data:`MAX_ENTRIES` or :data:`MAX_LOG_BYTES` a connection; the
        rest is counted)."""
        data, error = parse(raw)
        entry = Entry("in", raw, data, error, http=http)
        conn.keep(entry)
        self.activity.set()
        return entry

    def record_out(self, conn: Conn, msg: Any) -> str:
        """Record what the server sends; returns it as compact JSON."""
        raw = json.dumps(msg, separators=(",", ":"))
        conn.keep(Entry("out", raw, msg))
        return raw

    async def handle(self, conn: Conn, msg: Any, emit: Emit) -> JSON | list[Any] | None:
        """One parsed message from the client; returns the answer (None for none). ``emit`` sends what the server
        says first (progress, its own requests); it is recorded by the host."""
        if isinstance(msg, list):
            answers = [a for a in [await self.handle(conn, m, emit) for m in msg] if a is not None]
            return answers or None
        if not isinstance(msg, dict):
            return _error(None, -32600, "Invalid Request")
        if "method" not in msg:
            fut = conn.pending.get(_key(msg.get("id")))
            if fut is not None and not fut.done():
                fut.set_result(msg)
            return None
        method, rid, params = msg.get("method"), msg.get("id"), _obj(msg.get("params"))
        meta = _obj(params.get("_meta"))
        modern = META_PROTOCOL_VERSION in meta
        if "id" not in msg:
            return None  # notifications: recorded, judged later
        if modern:
            if not self.scenario.modern:
                return _error(rid, -32601, f"Method not found: {method} (this server speaks the handshake era)")
            conn.era = "modern"
            conn.version = meta.get(META_PROTOCOL_VERSION)
            caps = meta.get(META_CLIENT_CAPABILITIES)
            conn.client_caps = caps if isinstance(caps, dict) else {}
        return await self.request(conn, str(method), rid, params, modern, emit)

    async def request(self, conn: Conn, method: str, rid: Any, params: JSON, modern: bool, emit: Emit) -> JSON:
        if method == "initialize":
            return await self.initialize(conn, rid, params)
        if method == "server/discover":
            if not (self.scenario.modern and modern):
                return _error(rid, -32601, "Method not found: server/discover")
            versions = [V2026_07_28, *reversed(HANDSHAKE_VERSIONS)]
            return _result(rid, {"supportedVersions": versions, "capabilities": CAPABILITIES, **_info(modern)})
        if method == "ping":
            return _result(rid, {})
        if method == "tools/list":
            cursor = params.get("cursor")
            if cursor is None:
                return _result(rid, {"tools": [ECHO], "nextCursor": self.cursor, **_info(modern, cache=True)})
            if cursor == self.cursor:
                return _result(rid, {"tools": [ASK], **_info(modern, cache=True)})
            return _error(rid, -32602, "Invalid cursor")
        if method == "tools/call":
            name = params.get("name")
            if name == "check_echo":
                return await self.echo(conn, rid, params, emit, modern)
            if name == "check_ask":
                if modern:
                    return self.ask_modern(conn, rid, params)
                return await self.ask(conn, rid, emit)
            return _error(rid, -32602, f"Unknown tool: {name}")
        return _error(rid, -32601, f"Method not found: {method}")

    async def initialize(self, conn: Conn, rid: Any, params: JSON) -> JSON:
        asked = params.get("protocolVersion")
        if self.scenario.answer_version == "x":
            version = UNKNOWN_VERSION
        elif self.scenario.batch:
            version = V2025_03_26
        else:
            version = asked if asked in HANDSHAKE_VERSIONS else LATEST_HANDSHAKE
        again = conn.init_request is not None  # (a second initialize on the connection: answered, the first kept)
        if not again:
            conn.era = "handshake"
            conn.init_request = rid
            caps = params.get("capabilities")
            conn.client_caps = caps if isinstance(caps, dict) else {}
            conn.version = version
        await asyncio.sleep(INIT_DELAY)
        if not again:
            conn.init_answered = time.monotonic()
        return _result(rid, {"protocolVersion": version, "capabilities": CAPABILITIES, "serverInfo": SERVER_INFO})

    async def echo(self, conn: Conn, rid: Any, params: JSON, emit: Emit, modern: bool) -> JSON:
        token = (params.get("_meta") or {}).get("progressToken")
        if token is not None:  # two steps a little apart: a request with progress stays active a moment (M083)
            for n in (1, 2):
                await asyncio.sleep(PROGRESS_STEP)
                note = {"progressToken": token, "progress": n, "total": 2, "message": f"step {n} of 2"}
                await emit({"jsonrpc": "2.0", "method": "notifications/progress", "params": note})
        text = str((params.get("arguments") or {}).get("text", "echo"))
        return _result(rid, {"content": [{"type": "text", "text": text}], "isError": False, **_info(modern)})

    async def send_request(
        self, conn: Conn, method: str, params: JSON | None, emit: Emit, suffix: str = ""
    ) -> tuple[str, asyncio.Future[Any]]:
        """Send one request to the client; (its id, the future of its answer). The caller pops ``conn.pending``."""
        conn.next_id += 1
        rid = f"srv-{conn.no}-{conn.next_id}{suffix}"
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        conn.pending[_key(rid)] = fut
        msg: JSON = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        await emit(msg)
        return rid, fut

    async def ask_client(self, conn: Conn, method: str, params: JSON | None, emit: Emit, probe: bool = False) -> Any:
        """Send one request to the client and wait for its answer (None when none comes). ``probe``: the ping
        after the protocol errors (judged by S021, not M079)."""
        rid, fut = await self.send_request(conn, method, params, emit, "-probe" if probe else "")
        try:
            return await asyncio.wait_for(fut, ASK_TIMEOUT)
        except TimeoutError:
            return None
        finally:
            conn.pending.pop(_key(rid), None)

    async def ask_and_cancel(self, conn: Conn, emit: Emit) -> list[Any]:
        """The cancel scenario: one request the client declared it serves (sampling first: the slowest to answer),
        cancelled when unanswered after :data:`CANCEL_AFTER`; then a ping (answered after the client read the
        cancellation: an answer to the cancelled request that comes after it was made after that too), and a watch
        for that answer until :data:`ASK_TIMEOUT` from the request."""
        feats = features(conn.version) if conn.version in ALL_VERSIONS else None
        order = ("sampling", "elicitation", "roots")
        cap = next(
            (c for c in order if c in conn.client_caps and (c != "elicitation" or (feats and feats.elicitation))), None
        )
        if cap is None:
            return []
        method = ASKS[cap]
        rid, fut = await self.send_request(conn, method, _ask_params(method), emit)
        start = time.monotonic()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(fut), CANCEL_AFTER)
            if fut.done():
                return [fut.result()]
            note = {"requestId": rid, "reason": "mcpkit check-client: cancellation test"}
            await emit({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": note})
            probe = await self.ask_client(conn, "ping", None, emit)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fut, max(0.0, ASK_TIMEOUT - (time.monotonic() - start)))
            return [probe]
        finally:
            conn.pending.pop(_key(rid), None)

    async def ask(self, conn: Conn, rid: Any, emit: Emit) -> JSON:
        feats = features(conn.version) if conn.version in ALL_VERSIONS else None
        answers = [await self.ask_client(conn, "ping", None, emit)]
        if self.scenario.cancel:
            answers += await self.ask_and_cancel(conn, emit)
            got = sum(1 for a in answers if isinstance(a, dict) and "result" in a)
            return _result(rid, {"content": [{"type": "text", "text": f"{got} answered"}], "isError": False})
        for cap, method in ASKS.items():
            if cap == "elicitation" and (feats is None or not feats.elicitation):
                continue  # no elicitation before 2025-06-18
            if cap in conn.client_caps:
                answers.append(await self.ask_client(conn, method, _ask_params(method), emit))
        if self.scenario.batch and conn.version == V2025_03_26:
            answers += await self.ask_batch(conn, emit)
        # last, protocol errors (S021): a notification of an unknown method and an answer to no request; a client
        # prepared for them answers the ping that follows
        await emit({"jsonrpc": "2.0", "method": "notifications/mcpkit-check/unknown", "params": {}})
        await emit({"jsonrpc": "2.0", "id": "mcpkit-check-never-asked", "result": {}})
        conn.probe = None  # sent: no answer yet
        conn.probe = await self.ask_client(conn, "ping", None, emit, probe=True)
        got = sum(1 for a in answers if isinstance(a, dict) and "result" in a)
        text = f"{got} of {len(answers)} requests answered"
        return _result(rid, {"content": [{"type": "text", "text": text}], "isError": False})

    async def ask_batch(self, conn: Conn, emit: Emit) -> list[Any]:
        """A batch of two pings (M011), answered quick or never, "quick" at the client's own pace: a ping sent just
        after the batch (its id ends ``-pace``: not judged by M079) stretches the first :data:`BATCH_WAIT` to
        :data:`BATCH_PACE` times its answer's time, never past :data:`ASK_TIMEOUT`. A client that never answers
        batches no longer holds the run ASK_TIMEOUT; an answer that comes later still counts (M011 reads the log)."""
        futs, batch = [], []
        for _ in range(2):
            conn.next_id += 1
            rid = f"srv-{conn.no}-{conn.next_id}"
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            conn.pending[_key(rid)] = fut
            futs.append(fut)
            batch.append({"jsonrpc": "2.0", "id": rid, "method": "ping"})
        await emit(batch)
        t0 = time.monotonic()
        pace: list[float] = []
        pid, answer = await self.send_request(conn, "ping", None, emit, "-pace")
        answer.add_done_callback(lambda _: pace.append(time.monotonic() - t0))
        try:
            window = BATCH_WAIT
            done, _ = await asyncio.wait(futs, timeout=window)
            if len(done) < 2:
                await asyncio.wait({answer}, timeout=max(0.0, ASK_TIMEOUT - (time.monotonic() - t0)))
                window = min(ASK_TIMEOUT, max(window, BATCH_PACE * pace[0] if pace else 0.0))
                if (rest := window - (time.monotonic() - t0)) > 0:
                    done, _ = await asyncio.wait(futs, timeout=rest)
        finally:
            conn.pending.pop(_key(pid), None)
        return [f.result() for f in futs if f in done]

    def ask_modern(self, conn: Conn, rid: Any, params: JSON) -> JSON:
        """2026-07-28: the first call gets an input_required result; the retry (with the requestState) the answer."""
        state = params.get("requestState")
        if isinstance(state, str) and state in self.states:
            text = f"input received: {sorted(params.get('inputResponses') or {})}"
            return _result(rid, {"content": [{"type": "text", "text": text}], "isError": False, **_info(True)})
        asks = {
            cap: {"method": method, "params": _ask_params(method)}
            for cap, method in ASKS.items()
            if cap in conn.client_caps
        }
        state = "state-" + secrets.token_urlsafe(16)
        self.states[state] = {"id": rid, "keys": sorted(asks)}
        result: JSON = {"resultType": "input_required", "requestState": state}
        if asks:
            result["inputRequests"] = asks
        return _result(rid, {**_info(True), **result})


def parse(raw: str) -> tuple[Any, str | None]:
    """A message the client sent, parsed: (data, None), or (None, why it is no JSON). JSON nested deeper than
    Python's parser goes is said so (it raised RecursionError, which ended the host's connection)."""
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    except RecursionError:
        return None, TOO_DEEP


def _obj(value: Any) -> JSON:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _ask_params(method: str) -> JSON:
    if method == "sampling/createMessage":
        return dict(SAMPLING_PARAMS)
    if method == "elicitation/create":
        return dict(ELICIT_PARAMS)
    return {}


def _info(modern: bool, cache: bool = False) -> JSON:
    if not modern:
        return {}
    out: JSON = {"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": SERVER_INFO}}
    if cache:
        out.update(ttlMs=0, cacheScope="private")
    return out


def _result(rid: Any, result: JSON) -> JSON:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def _error(rid: Any, code: int, message: str) -> JSON:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
