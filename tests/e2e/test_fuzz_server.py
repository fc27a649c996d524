"""Property-based fuzzing of the server (issue 12, "Also build"): whatever a client sends, the server never crashes
or hangs, answers every request that carries a valid id exactly once with a message valid for the negotiated
revision (checked against the official schemas by tests/support/oracle.py), and its memory stays bounded.

* over the memory transport, one session per revision, hypothesis draws frames of every kind (see
  tests/support/fuzz.py); ``MCPKIT_FUZZ_EXAMPLES`` sets the number of examples per revision (default 150);
* over stdio and Streamable HTTP, a real ``mcpkit run examples/everything.py`` process takes a seeded stream of
  hostile frames for ``MCPKIT_FUZZ_PROCESS_SECONDS`` (default 4) and must then still serve a fresh client, with its
  resident memory under 150 MB. ``MCPKIT_FUZZ_SEED`` fixes the seed (printed on failure).

``scripts/fuzz.py --minutes N`` runs this file with long budgets.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpkit.protocol.errors import ParseError
from mcpkit.protocol.jsonrpc import Batch, Invalid, Request, classify, parse
from mcpkit.transports.memory import create_memory_pair
from mcpkit.transports.stdio import StdioClientTransport, StdioServer
from support.everything import new_app
from support.fuzz import MODERN, MODERN_META, REVISIONS, Probe, _Ids, dumps, frames, json_values, random_frames
from support.paths import REPO

EXAMPLES = int(os.environ.get("MCPKIT_FUZZ_EXAMPLES", "150"))
PROCESS_SECONDS = float(os.environ.get("MCPKIT_FUZZ_PROCESS_SECONDS", "4"))
SEED = int(os.environ.get("MCPKIT_FUZZ_SEED", str(int(time.time()) % 100_000)))
RSS_BOUND_MB = 150


# ---------------------------------------------------------------- the envelope parser


@settings(max_examples=max(EXAMPLES, 200), deadline=None, database=None)
@given(st.one_of(st.binary(max_size=300), json_values().map(dumps)))
def test_fuzz_envelope_parser_raises_only_parse_error(data: bytes) -> None:
    """Issue 12: the envelope parser returns a classified message (or batch) or raises ParseError, nothing else;
    a batch has one classified item per element."""
    try:
        parsed = parse(data)
    except ParseError:
        return
    if isinstance(parsed, Batch):
        assert len(parsed) == len(orjson.loads(data))


@settings(max_examples=max(EXAMPLES, 200), deadline=None, database=None)
@given(
    rid=st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.text(max_size=20)),
    method=st.text(max_size=30),
    params=st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values(6, int_bits=63), max_size=4)),
)
def test_fuzz_classify_keeps_a_valid_request_intact(rid: int | str, method: str, params: dict[str, Any] | None) -> None:
    """Issue 12: any well-formed request survives encode/parse with its id, method and params unchanged."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        msg["params"] = params
    parsed = parse(dumps(msg))
    assert isinstance(parsed, Request), parsed
    assert (parsed.id, parsed.method, parsed.params) == (
        rid,
        method,
        json.loads(dumps(params)) if params is not None else None,
    )


@settings(max_examples=max(EXAMPLES, 200), deadline=None, database=None)
@given(json_values())
def test_fuzz_classify_never_raises(value: Any) -> None:
    """Issue 12: any JSON value is classified (an Invalid names its reason), never an exception."""
    out = classify(value)
    if isinstance(out, Invalid):
        assert out.reason and out.error()["code"] == -32600


# ---------------------------------------------------------------- every method over the memory transport


async def _handshake(probe_send: Any, probe_recv: Any, revision: str) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": "init",
        "method": "initialize",
        "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}},
    }
    await probe_send(orjson.dumps(init))
    reply = orjson.loads(await asyncio.wait_for(probe_recv(), 5))
    assert reply["result"]["protocolVersion"] == revision, reply
    await probe_send(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))


@pytest.mark.parametrize("revision", REVISIONS)
def test_fuzz_every_method_over_memory(revision: str) -> None:
    """Issue 12: hypothesis-drawn frames (garbage, random JSON, every method with random or nearly-valid params,
    notifications, stray responses, batches) on one live session of ``revision``: every request with a valid id
    is answered once, validly; the server stays up and answers a ping after each frame."""
    loop = asyncio.new_event_loop()
    client, server_end = create_memory_pair()
    app = new_app()
    server_task = loop.create_task(app.serve(server_end))
    probe = Probe(client.send, client.receive, revision, grace=0.5, timeout=10)
    ids = _Ids()
    try:
        if revision != MODERN:
            loop.run_until_complete(_handshake(client.send, client.receive, revision))

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(frame=frames(ids, revision == MODERN))
        def one(frame: bytes) -> None:
            loop.run_until_complete(probe.check(frame))

        one()
        loop.run_until_complete(probe.drain())
        assert not server_task.done(), "the server's serve() returned while the client was still connected"
        assert probe.frames >= min(EXAMPLES, 20)
    finally:
        loop.run_until_complete(client.close())
        with contextlib.suppress(BaseException):
            loop.run_until_complete(asyncio.wait_for(server_task, 5))
        loop.close()


# ---------------------------------------------------------------- short runs against real processes


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _run_argv(*extra: str) -> list[str]:
    return [sys.executable, "-m", "mcpkit.cli.main", "run", str(REPO / "examples" / "everything.py"), *extra]


@pytest.mark.parametrize("revision", ["2025-03-26", MODERN])
async def test_fuzz_short_run_over_stdio(revision: str) -> None:
    """Issue 12: a seeded stream of hostile frames for a few seconds over stdio to a real server process; every
    valid-id request answered once, validly; afterwards the server still answers, RSS under the bound."""
    transport = StdioClientTransport(StdioServer(_run_argv()))
    await transport.start()
    probe = Probe(transport.send, transport.receive, revision, grace=0.5, timeout=10)
    gen = random_frames(SEED, modern=revision == MODERN)
    try:
        if revision != MODERN:
            await _handshake(transport.send, transport.receive, revision)
        end = time.monotonic() + PROCESS_SECONDS
        while time.monotonic() < end:
            frame = next(gen)
            try:
                await probe.check(frame)
            except AssertionError as exc:
                raise AssertionError(f"seed {SEED} (MCPKIT_FUZZ_SEED), frame {probe.frames}: {exc}") from None
        await probe.drain()
        assert transport.process is not None
        pid = transport.process.pid
        rss = _rss_mb(pid)
        assert rss < RSS_BOUND_MB, f"server RSS {rss:.0f} MB after {probe.frames} frames"
        assert probe.frames > 20
    finally:
        await transport.close()


async def _start_http(port: int) -> asyncio.subprocess.Process:
    proc = await asyncio.create_subprocess_exec(
        *_run_argv("-t", "http", "--port", str(port)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    async with httpx.AsyncClient() as http:
        for _ in range(200):
            with contextlib.suppress(httpx.TransportError):
                await http.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                return proc
            await asyncio.sleep(0.05)
    proc.kill()
    raise AssertionError("the HTTP server did not start")


def _header_safe(value: str) -> bool:
    return value.isascii() and value.isprintable()


def _headers(frame: bytes, revision: str, session: str | None) -> dict[str, str]:
    h = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    if revision == MODERN:
        h["mcp-protocol-version"] = MODERN
        with contextlib.suppress(Exception):
            obj = orjson.loads(frame)
            if isinstance(obj, dict) and isinstance(obj.get("method"), str) and _header_safe(obj["method"]):
                h["mcp-method"] = obj["method"]
                params = obj.get("params")
                name = params.get("name") if isinstance(params, dict) else None
                name = name if isinstance(name, str) else params.get("uri") if isinstance(params, dict) else None
                if isinstance(name, str) and _header_safe(name):
                    h["mcp-name"] = name
    else:
        h["mcp-protocol-version"] = revision
        if session:
            h["mcp-session-id"] = session
    return h


def _bodies(resp: httpx.Response) -> list[Any]:
    ctype = resp.headers.get("content-type", "")
    if not resp.content:
        return []
    if ctype.startswith("application/json"):
        return [orjson.loads(resp.content)]
    if ctype.startswith("text/event-stream"):
        out = []
        for block in resp.text.replace("\r\n", "\n").split("\n\n"):
            data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
            if data:
                out.append(orjson.loads("\n".join(data)))
        return out
    return []


@pytest.mark.parametrize("revision", ["2025-11-25", MODERN])
async def test_fuzz_short_run_over_http(revision: str, free_port: Any) -> None:
    """Issue 12: the same over Streamable HTTP: no 5xx, every JSON-RPC body the server returns is valid for the
    revision (or a JSON-RPC 2.0 error envelope), and afterwards a fresh client initializes and calls a tool;
    RSS under the bound."""
    from support.fuzz import check_envelope_error
    from support.oracle import validate_message

    port = free_port()
    proc = await _start_http(port)
    url = f"http://127.0.0.1:{port}/mcp"
    gen = random_frames(SEED, modern=revision == MODERN)
    sent = 0
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            session = None
            if revision != MODERN:
                init = {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": revision,
                        "capabilities": {},
                        "clientInfo": {"name": "f", "version": "0"},
                    },
                }
                r = await http.post(url, content=orjson.dumps(init), headers=_headers(b"", revision, None))
                session = r.headers["mcp-session-id"]
                await http.post(
                    url,
                    content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                    headers=_headers(b"", revision, session),
                )
            end = time.monotonic() + PROCESS_SECONDS
            while time.monotonic() < end:
                frame = next(gen)
                if b"subscriptions/listen" in frame:
                    continue
                sent += 1
                r = await http.post(url, content=frame, headers=_headers(frame, revision, session))
                where = f"seed {SEED} (MCPKIT_FUZZ_SEED), frame {sent} {frame[:200]!r}"
                assert r.status_code < 500, f"{where}: HTTP {r.status_code} {r.text[:300]}"
                for body in _bodies(r):
                    for msg in body if isinstance(body, list) else [body]:
                        assert not (isinstance(body, list) and revision == MODERN), f"{where}: a batch answer"
                        if isinstance(msg, dict) and msg.get("id") is None and "error" in msg:
                            check_envelope_error(msg)
                        elif isinstance(msg, dict) and "method" not in msg:
                            try:
                                validate_message(msg, revision, sender="server")
                            except AssertionError:
                                # Requests without the modern _meta are served as the newest handshake revision.
                                validate_message(msg, "2025-11-25", sender="server")
            # A fresh client still gets in and gets its work done.
            from mcpkit import Client

            async with Client(url) as client:
                result = await asyncio.wait_for(client.call_tool("add", {"a": 2, "b": 3}), 5)
                assert result.data == 5
        rss = _rss_mb(proc.pid)
        assert rss < RSS_BOUND_MB, f"server RSS {rss:.0f} MB after {sent} frames"
        assert sent > 20
        assert proc.returncode is None, "the server process died"
    finally:
        proc.kill()
        await proc.wait()


def test_modern_meta_constant_matches_the_everything_support() -> None:
    """The fuzz frames use the real modern _meta keys (a typo would make every modern frame a legacy one)."""
    from mcpkit.protocol import versions

    assert MODERN_META["io.modelcontextprotocol/protocolVersion"] == versions.V2026_07_28
