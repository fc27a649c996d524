"""Shared parts of the fuzz tests (tests/e2e/test_fuzz_server.py, scripts/fuzz.py).

* hypothesis strategies for what a hostile or broken client can put on the wire: garbage bytes, random JSON,
  requests of every method of every revision with random or nearly-valid params, notifications, stray responses
  and batches;
* :class:`Probe`, which sends one frame to a live server connection followed by a ``ping``, reads until every
  request of the frame that carries a valid id has its answer, answers the server's own requests (with an error,
  the probe has no sampling/elicitation/roots handlers), and checks every message the server emitted against the
  official schema of the negotiated revision (``tests/support/oracle.py``);
* :func:`random_frames`, a fast seeded generator of the same kinds of frames for the timed process runs.

The invariants a probe asserts: the server never crashes or hangs (the ping is answered), every request with a
valid id is answered exactly once (at most once when the probe had to cancel it), every answer and every message
the server sends is valid for the revision, and batch answers never appear in 2026-07-28.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Callable
from typing import Any

import orjson
from hypothesis import strategies as st

from support.oracle import methods, validate_message

REVISIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")
MODERN = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
}
# Requests that stay open by design (or may run long with random arguments): cancelled as soon as they are sent.
LONG_LIVED = {"subscriptions/listen"}
LONG_TOOLS = {"slow"}

TOOL_NAMES = ["echo", "add", "slow", "sample", "ask_name", "roots", "touch", "add_tool", "log", "fail", "image"]
ARG_NAMES = ["text", "a", "b", "steps", "delay_ms", "prompt", "uri", "name", "level", "message"]
URIS = ["mcpkit://static/1", "mcpkit://static/2", "mcpkit://counter", "mcpkit://nope", "file:///etc/passwd", ""]
PROMPT_NAMES = ["greet", "style", "nope"]
ALL_METHODS = sorted(
    {m for rev in REVISIONS for (union, m) in methods(rev) if union in ("ClientRequest", "ClientNotification")}
)


def dumps(value: Any) -> bytes:
    """JSON text of any value the strategies draw (integers beyond 64 bits included, which orjson refuses)."""
    return json.dumps(value).encode()


def json_values(max_leaves: int = 12, *, int_bits: int = 70) -> st.SearchStrategy[Any]:
    """Any JSON value (nested, with awkward numbers and strings). Integers reach ``int_bits`` bits: beyond 64 bits
    the parser (orjson) reads them as floats, so properties about exact round trips draw at most 63."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**int_bits), max_value=2**int_bits),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=30),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
        max_leaves=max_leaves,
    )


def _nearly_valid_params(method: str) -> st.SearchStrategy[dict[str, Any]]:
    """Params with the right keys for the method's common fields and random values."""
    anything = json_values(6)
    if method == "tools/call":
        args = st.dictionaries(st.sampled_from(ARG_NAMES), st.one_of(anything, st.integers(0, 3)), max_size=3)
        return st.fixed_dictionaries({"name": st.one_of(st.sampled_from(TOOL_NAMES), st.text(max_size=8))}).flatmap(
            lambda base: st.one_of(args, anything).map(lambda a: {**base, "arguments": a})
        )
    if method in ("resources/read", "resources/subscribe", "resources/unsubscribe"):
        return st.fixed_dictionaries({"uri": st.one_of(st.sampled_from(URIS), anything)})
    if method == "prompts/get":
        return st.fixed_dictionaries(
            {"name": st.one_of(st.sampled_from(PROMPT_NAMES), anything)},
            optional={"arguments": st.dictionaries(st.text(max_size=6), st.one_of(st.text(max_size=6), anything))},
        )
    if method.endswith("/list"):
        return st.fixed_dictionaries({}, optional={"cursor": st.one_of(st.text(max_size=20), anything)})
    if method == "completion/complete":
        return st.fixed_dictionaries(
            {
                "ref": st.one_of(
                    st.fixed_dictionaries({"type": st.just("ref/prompt"), "name": st.sampled_from(PROMPT_NAMES)}),
                    anything,
                ),
                "argument": st.one_of(
                    st.fixed_dictionaries({"name": st.text(max_size=6), "value": st.text(max_size=6)}), anything
                ),
            }
        )
    if method == "logging/setLevel":
        return st.fixed_dictionaries({"level": st.one_of(st.sampled_from(["debug", "error", "emergency"]), anything)})
    return st.dictionaries(st.text(max_size=10), anything, max_size=3)


class _Ids:
    """Unique request ids across a whole session (ints and strings, as JSON-RPC allows)."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def next(self, as_string: bool) -> int | str:
        n = next(self._n)
        return f"fz-{n}" if as_string else n


@st.composite
def _message(draw: st.DrawFn, ids: _Ids, modern: bool) -> dict[str, Any] | Any:
    kind = draw(st.sampled_from(["request", "request", "request", "notification", "response", "json"]))
    if kind == "json":
        return draw(json_values())
    if kind == "response":
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(st.one_of(st.integers(0, 10**6), st.text(max_size=5)))}
        body["result" if draw(st.booleans()) else "error"] = draw(json_values(4))
        return body
    method = draw(st.one_of(st.sampled_from(ALL_METHODS), st.text(max_size=20)))
    params: Any = draw(st.one_of(_nearly_valid_params(method), json_values(6), st.none()))
    msg: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "2.0", "2.0", "1.0", 2]))}
    msg["method"] = method
    if kind == "request":
        weird = draw(st.integers(0, 9)) == 0
        msg["id"] = draw(st.sampled_from([None, True, 1.5, [1], {"a": 1}])) if weird else ids.next(draw(st.booleans()))
    if modern and isinstance(params, dict) and draw(st.integers(0, 4)) > 0:
        params = {**params, "_meta": MODERN_META}
    if params is not None:
        msg["params"] = params
    return msg


@st.composite
def frames(draw: st.DrawFn, ids: _Ids, modern: bool) -> bytes:
    """One frame as a client would send it: garbage, one message, or a batch."""
    kind = draw(st.sampled_from(["garbage", "message", "message", "message", "message", "batch"]))
    if kind == "garbage":
        # No raw newline: every transport frames by newline or by its own framing, and one frame is one message.
        garbage = draw(st.binary(min_size=1, max_size=100)).replace(b"\n", b" ").replace(b"\r", b" ")
        return garbage if garbage.strip() else b"x"
    if kind == "batch":
        return dumps(draw(st.lists(_message(ids, modern), max_size=4)))
    return dumps(draw(_message(ids, modern)))


def requests_in(frame: bytes) -> dict[int | str, tuple[str, bool]]:
    """The requests of a frame with a valid id, ``{id: (method, carries the modern _meta)}``: what the server
    must answer."""
    try:
        obj = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return {}
    items = obj if isinstance(obj, list) else [obj]
    out: dict[int | str, tuple[str, bool]] = {}
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("method"), str) or "id" not in item:
            continue
        rid = item["id"]
        if isinstance(rid, bool) or not isinstance(rid, (int, str)):
            continue
        params = item.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        modern = isinstance(meta, dict) and "io.modelcontextprotocol/protocolVersion" in meta
        out[rid] = (item["method"], modern)
    return out


def long_lived(frame: bytes) -> list[int | str]:
    """Ids of requests in a frame that may legitimately stay open (cancelled at once by the probe)."""
    try:
        obj = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return []
    out: list[int | str] = []
    for item in obj if isinstance(obj, list) else [obj]:
        if not isinstance(item, dict):
            continue
        params = item.get("params")
        tool = params.get("name") if isinstance(params, dict) else None
        if item.get("method") in LONG_LIVED or (item.get("method") == "tools/call" and tool in LONG_TOOLS):
            rid = item.get("id")
            if isinstance(rid, (int, str)) and not isinstance(rid, bool):
                out.append(rid)
    return out


def check_envelope_error(msg: Any) -> None:
    """An error answer the server could not tie to a request (id null): the JSON-RPC 2.0 §5 envelope only."""
    assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", msg
    assert msg.get("id") is None and "result" not in msg, msg
    err = msg.get("error")
    assert isinstance(err, dict) and type(err.get("code")) is int and isinstance(err.get("message"), str), msg


class Probe:
    """Drives one server connection (``send(bytes)`` / ``recv() -> bytes | None``) with fuzzed frames."""

    def __init__(
        self,
        send: Callable[[bytes], Any],
        recv: Callable[[], Any],
        revision: str,
        *,
        grace: float = 2.0,
        timeout: float = 10.0,
    ) -> None:
        self._send = send
        self._recv = recv
        self.revision = revision
        self.modern = revision == MODERN
        self.grace = grace
        self.timeout = timeout
        self.pending: dict[int | str, str] = {}  # id -> method, sent and not yet answered
        self.cancelled: set[int | str] = set()
        self.answered: set[int | str] = set()
        self.methods: dict[int | str, str] = {}
        self.legacy: set[int | str] = set()  # modern connection, request sent without the modern _meta
        self._pings = itertools.count(1)
        self.frames = 0

    async def _cancel(self, rid: int | str) -> None:
        params: dict[str, Any] = {"requestId": rid, "reason": "fuzz probe"}
        if self.modern:
            params["_meta"] = MODERN_META
        await self._send(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}))
        self.cancelled.add(rid)

    def _check(self, msg: Any, *, in_batch: bool = False) -> list[tuple[dict[str, Any], str | None]]:
        """Validate one decoded message; returns server requests to answer as (msg, None)."""
        todo: list[tuple[dict[str, Any], str | None]] = []
        if isinstance(msg, list):
            assert not self.modern, f"a batch answer in {MODERN}, where batches do not exist: {msg!r:.300}"
            assert msg, "an empty batch answer"
            for item in msg:
                todo += self._check(item, in_batch=True)
            return todo
        assert isinstance(msg, dict), f"not a JSON object: {msg!r:.200}"
        if "method" in msg:
            validate_message(msg, self.revision, sender="server")
            if "id" in msg:
                todo.append((msg, None))
            return todo
        rid = msg.get("id")
        if rid is None:
            check_envelope_error(msg)
            return todo
        assert rid in self.methods, f"an answer to an id never sent: {msg!r:.300}"
        assert rid not in self.answered, f"a second answer to {rid!r}: {msg!r:.300}"
        self.answered.add(rid)
        self.pending.pop(rid, None)
        method = self.methods[rid]
        # On a connection that never did a handshake, a request without the modern _meta is served as the newest
        # handshake-era revision.
        revision = "2025-11-25" if rid in self.legacy else self.revision
        known = ("ClientRequest", method) in methods(revision)
        validate_message(msg, revision, sender="server", request_method=method if known else None)
        return todo

    async def _answer_server_request(self, msg: dict[str, Any]) -> None:
        reply = {
            "jsonrpc": "2.0",
            "id": msg["id"],
            "error": {"code": -32601, "message": "the fuzz probe has no handler for this"},
        }
        await self._send(orjson.dumps(reply))

    async def _read_one(self, timeout: float) -> bool:
        data = await asyncio.wait_for(self._recv(), timeout)
        assert data is not None, "the server closed the connection"
        msg = orjson.loads(data)
        for req, _ in self._check(msg):
            await self._answer_server_request(req)
        return True

    async def check(self, frame: bytes) -> None:
        """Send ``frame`` then a ping; read until both are settled; assert the invariants."""
        self.frames += 1
        wanted = requests_in(frame)
        fresh = {rid: m for rid, (m, _) in wanted.items() if rid not in self.methods}
        if self.modern:
            self.legacy.update(rid for rid, (_, has_meta) in wanted.items() if rid in fresh and not has_meta)
        self.methods.update(fresh)
        self.pending.update(fresh)
        await self._send(frame)
        for rid in long_lived(frame):
            if rid in fresh:
                await self._cancel(rid)
        ping_id = f"ping-{next(self._pings)}"
        ping: dict[str, Any] = {"jsonrpc": "2.0", "id": ping_id, "method": "ping"}
        if self.modern:
            ping["params"] = {"_meta": MODERN_META}
        self.methods[ping_id] = "ping"
        self.pending[ping_id] = "ping"
        await self._send(orjson.dumps(ping))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while ping_id in self.pending:
            left = deadline - loop.time()
            assert left > 0, f"no answer to ping within {self.timeout}s after frame {frame[:300]!r}"
            await self._read_one(left)
        # The ping is answered: anything of the frame still open gets a grace period, then is cancelled.
        grace_end = loop.time() + self.grace
        while any(r not in self.cancelled for r in self.pending):
            left = grace_end - loop.time()
            if left <= 0:
                for rid in [r for r in self.pending if r not in self.cancelled]:
                    await self._cancel(rid)
                break
            try:
                await self._read_one(left)
            except TimeoutError:
                continue

    async def drain(self, seconds: float = 0.2) -> None:
        """Read whatever is still in flight (late answers to cancelled requests, notifications)."""
        try:
            while True:
                await self._read_one(seconds)
        except TimeoutError:
            return


def random_frames(seed: int, *, modern: bool, batches: bool = True) -> Any:
    """An endless, fast, seeded generator of hostile frames (no hypothesis: for the timed process runs)."""
    rnd = random.Random(seed)
    n = itertools.count(1)

    def value(depth: int = 0) -> Any:
        k = rnd.randrange(8 if depth < 3 else 5)
        if k == 0:
            return None
        if k == 1:
            return rnd.choice([True, False])
        if k == 2:
            return rnd.choice([0, -1, 2**63, 2**70, 3.5, -1e308])
        if k in (3, 4):
            return "".join(rnd.choice("ab/\\%\x00é{}\"'") for _ in range(rnd.randrange(12)))
        if k == 5:
            return [value(depth + 1) for _ in range(rnd.randrange(4))]
        return {rnd.choice([*ARG_NAMES, "cursor", "uri", "_meta"]): value(depth + 1) for _ in range(rnd.randrange(4))}

    def message() -> Any:
        method = rnd.choice(ALL_METHODS) if rnd.random() < 0.9 else str(value())
        params: Any
        if method == "tools/call":
            params = {"name": rnd.choice([*TOOL_NAMES, "nope"]), "arguments": value()}
            if params["name"] == "slow":
                params["arguments"] = {"steps": 1, "delay_ms": 1}
        elif method in ("resources/read", "resources/subscribe"):
            params = {"uri": rnd.choice(URIS)}
        elif method == "subscriptions/listen":
            method = "ping"
            params = {}
        else:
            params = value()
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if rnd.random() < 0.8:
            msg["id"] = next(n) if rnd.random() < 0.5 else f"r-{next(n)}"
        if modern and isinstance(params, dict) and rnd.random() < 0.8:
            params["_meta"] = MODERN_META
        if params is not None:
            msg["params"] = params
        return msg

    while True:
        k = rnd.random()
        if k < 0.05:
            yield bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 60))).replace(b"\n", b" ") or b"x"
        elif k < 0.12 and batches:
            yield dumps([message() for _ in range(rnd.randrange(6))])
        elif k < 0.2:
            yield dumps(value())
        else:
            yield dumps(message())
