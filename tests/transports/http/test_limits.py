"""The HTTP server's limits: connections, headers and bodies at the edges, sessions per client and per principal,
sizes of what a session keeps, and batches and requests in flight per session (the session's cap, its turn queue,
429).

Every test serves a real mcpkit server on 127.0.0.1 (uvicorn through ``build_server`` in this loop, a ``mcpkit run``
subprocess, or the limits server of tests/support/limits.py) and attacks it over real sockets.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from mcpkit.transports.http import build_server
from support.core import CORE_SERVER
from support.edges import closed_by_peer, half_open, served, tool_call
from support.limits import MODERN, PeakRSS, batches, http_session, server_process, slow, stats, stats_of
from support.mcp_http import handshake_headers, initialize_body, make_server, open_session, running
from support.procs import stop

V = "2025-11-25"


# ------------------------------------------------------------------------------------------- item 5


async def test_header_timeout_closes_half_open_connections() -> None:
    """A connection that sends part of a request head and stalls is closed after ``header_timeout``; an idle
    connection that sends nothing at all too; a client that completes its request in time is served."""
    async with served(header_timeout=0.5) as (base, userver):
        port = int(base.rsplit(":", 1)[1])
        partial = await half_open(port)
        silent = await half_open(port, b"")
        try:
            assert await closed_by_peer(partial, 3.0), "a stalled request head was never closed"
            assert await closed_by_peer(silent, 1.0), "a silent connection was never closed"
            assert userver.mcpkit_guard.closed_slow >= 2
            async with httpx.AsyncClient() as http:
                await tool_call(http, base + "/mcp")
        finally:
            partial.close()
            silent.close()


async def test_header_timeout_also_after_keep_alive() -> None:
    """After a response, a kept-alive connection that starts the next head and stalls is closed too (uvicorn's
    keep-alive timer stops at the first byte of the next request)."""
    async with served(header_timeout=0.5, timeout_keep_alive=60) as (base, _):
        port = int(base.rsplit(":", 1)[1])
        s = await half_open(port, b"")
        loop = asyncio.get_running_loop()
        try:
            await loop.sock_sendall(s, b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
            first = await asyncio.wait_for(loop.sock_recv(s, 65536), 5)
            assert first.startswith(b"HTTP/1.1 400")  # (no session id) but kept alive
            await loop.sock_sendall(s, b"GET /mcp HTTP/1.1\r\nHost: 127")
            assert await closed_by_peer(s, 3.0)
        finally:
            s.close()


async def test_idle_keep_alive_is_not_a_slow_head() -> None:
    """Between requests a kept-alive connection idles under uvicorn's ``timeout_keep_alive``, not
    ``header_timeout``: a pause longer than the header timeout does not cost the client its connection."""
    async with served(header_timeout=0.3, timeout_keep_alive=60) as (base, userver):
        port = int(base.rsplit(":", 1)[1])
        s = await half_open(port, b"")
        loop = asyncio.get_running_loop()
        request = b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
        try:
            await loop.sock_sendall(s, request)
            assert (await asyncio.wait_for(loop.sock_recv(s, 65536), 5)).startswith(b"HTTP/1.1 400")
            assert not await closed_by_peer(s, 1.0)
            await loop.sock_sendall(s, request)
            assert (await asyncio.wait_for(loop.sock_recv(s, 65536), 5)).startswith(b"HTTP/1.1 400")
            assert userver.mcpkit_guard.closed_slow == 0
        finally:
            s.close()


async def test_max_header_bytes_closes_the_connection() -> None:
    """A request head that keeps growing past ``max_header_bytes`` (no final CRLF) closes the connection."""
    async with served(max_header_bytes=8192, header_timeout=30) as (base, _):
        port = int(base.rsplit(":", 1)[1])
        s = await half_open(port)
        loop = asyncio.get_running_loop()
        try:
            with contextlib.suppress(OSError):
                for _ in range(3):  # 12 KB: under h11's own 16 KiB default, over the 8 KiB asked for
                    await loop.sock_sendall(s, b"X-Pad: " + b"a" * 4000 + b"\r\n")
            assert await closed_by_peer(s, 3.0), "an endless request head was accepted"
        finally:
            s.close()


async def test_max_connections_evicts_the_oldest_waiting_connection() -> None:
    """Past ``max_connections`` the connection waiting longest for a request head is closed, so the number of
    open connections stays bounded and a fresh client still gets in."""
    async with served(max_connections=20, header_timeout=60) as (base, userver):
        port = int(base.rsplit(":", 1)[1])
        socks = [await half_open(port) for _ in range(60)]
        try:
            await asyncio.sleep(0.2)
            guard = userver.mcpkit_guard
            assert guard.connections <= 20
            assert guard.evicted >= 40
            closed = [await closed_by_peer(s, 0.05) for s in socks[:40]]
            assert all(closed), "the oldest half-open connections should have been closed"
            async with httpx.AsyncClient() as http:
                await tool_call(http, base + "/mcp")
        finally:
            for s in socks:
                s.close()


async def test_max_connections_refuses_when_every_connection_is_busy() -> None:
    """When every connection is serving a request (here: open GET streams), a new connection is closed at once
    (``refused``) rather than queued without bound; once a stream ends, new clients get in again."""
    async with served(max_connections=3, header_timeout=60) as (base, userver):
        url = base + "/mcp"
        guard = userver.mcpkit_guard
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=10)) as http:
            sid = await open_session(http, url, V)
        streams = []
        clients = [httpx.AsyncClient() for _ in range(3)]
        try:
            for client in clients:
                # three sessions, each with its standalone GET stream: three busy connections
                own = await open_session(client, url, V) if streams else sid
                cm = client.stream("GET", url, headers={**handshake_headers(own, V), "accept": "text/event-stream"})
                assert (await cm.__aenter__()).status_code == 200
                streams.append(cm)
            port = int(base.rsplit(":", 1)[1])
            s = await half_open(port)
            try:
                assert await closed_by_peer(s, 2.0)
            finally:
                s.close()
            assert guard.refused >= 1
        finally:
            for cm in streams:
                await cm.__aexit__(None, None, None)
            for client in clients:
                await client.aclose()
        async with httpx.AsyncClient() as http:
            await tool_call(http, url)


_SLOW_BODY = (
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b'Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{"jsonrpc"'
)


async def test_body_timeout_closes_a_trickled_body() -> None:
    """A request whose head arrived but whose body stalls is closed after ``body_timeout`` (slowloris on the
    body); a request whose body comes in time is served."""
    async with served(body_timeout=0.5, header_timeout=30) as (base, userver):
        port = int(base.rsplit(":", 1)[1])
        s = await half_open(port, _SLOW_BODY)
        try:
            assert await closed_by_peer(s, 3.0), "a stalled request body was never closed"
            assert userver.mcpkit_guard.closed_slow == 1
            async with httpx.AsyncClient() as http:
                await tool_call(http, base + "/mcp")
        finally:
            s.close()


async def test_slow_bodies_cannot_fill_max_connections() -> None:
    """Connections that all sent a head and trickle a body are evicted (oldest first) when a fresh client needs
    room: a server full of slow uploads still lets it in."""
    async with served(max_connections=20, header_timeout=60, body_timeout=60) as (base, userver):
        port = int(base.rsplit(":", 1)[1])
        socks = [await half_open(port, _SLOW_BODY) for _ in range(20)]
        try:
            await asyncio.sleep(0.2)
            assert len(userver.mcpkit_guard.receiving) == 20
            async with httpx.AsyncClient() as http:
                await tool_call(http, base + "/mcp")
            assert userver.mcpkit_guard.refused == 0
        finally:
            for s in socks:
                s.close()


async def test_uvicorn_limits_have_defaults() -> None:
    """``build_server`` sets uvicorn's limit_concurrency, timeout_keep_alive and h11 head size (all overridable)."""
    userver = build_server(make_server(), "http", "127.0.0.1", 0)
    assert userver.config.limit_concurrency == 1100
    assert userver.config.timeout_keep_alive == 5
    assert userver.config.h11_max_incomplete_event_size == 64 * 1024
    custom = build_server(make_server(), "http", "127.0.0.1", 0, limit_concurrency=50, timeout_keep_alive=2)
    assert custom.config.limit_concurrency == 50
    assert custom.config.timeout_keep_alive == 2


async def test_legacy_sse_has_a_session_cap() -> None:
    """``create_app(max_sessions=N)`` caps legacy /sse streams too (503 beyond), like /mcp."""
    async with served(max_sessions=3, max_sessions_per_client=100) as (base, _), httpx.AsyncClient() as http:
        streams = []
        try:
            for _ in range(3):
                cm = http.stream("GET", base + "/sse", headers={"accept": "text/event-stream"})
                r = await cm.__aenter__()
                streams.append(cm)
                assert r.status_code == 200
            r = await http.get(base + "/sse", headers={"accept": "text/event-stream"})
            assert r.status_code == 503
            assert "max_sessions" in r.text
        finally:
            for cm in streams:
                await cm.__aexit__(None, None, None)


async def test_websockets_count_against_max_connections() -> None:
    """An upgraded WebSocket connection is counted (not evictable: it is not waiting for a head) until it ends."""
    from websockets.asyncio.client import connect

    async with served(max_connections=50) as (base, userver):
        guard = userver.mcpkit_guard
        url = base.replace("http://", "ws://") + "/ws"
        async with connect(url, subprotocols=["mcp"]) as ws:  # type: ignore[list-item]
            await ws.send(orjson.dumps(initialize_body(V)).decode())
            assert "protocolVersion" in str(await asyncio.wait_for(ws.recv(), 5))
            assert guard.connections == 1 and not guard.waiting
        for _ in range(100):
            if guard.connections == 0:
                break
            await asyncio.sleep(0.02)
        assert guard.connections == 0


async def test_mcpkit_run_exposes_the_connection_limits(free_port: Callable[[], int]) -> None:
    """``mcpkit run -t http --header-timeout S --max-connections N ...`` reaches the server: a stalled request
    head is closed after S seconds, and a fresh client still initializes and calls a tool."""
    port = free_port()
    cmd = [sys.executable, "-m", "mcpkit.cli.main", "run", str(CORE_SERVER), "-t", "http", "--port", str(port)]
    cmd += ["--header-timeout", "0.5", "--max-connections", "40", "--limit-concurrency", "60"]
    cmd += ["--timeout-keep-alive", "2", "--max-header-bytes", "8192", "--max-sessions", "5"]
    cmd += ["--max-sessions-per-client", "5", "--body-timeout", "20"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient() as http:
            for _ in range(200):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else b""
                with contextlib.suppress(httpx.HTTPError):
                    await http.get(base + "/mcp")
                    break
                await asyncio.sleep(0.05)
            s = await half_open(port)
            try:
                started = time.monotonic()
                assert await closed_by_peer(s, 5.0)
                assert time.monotonic() - started < 3.0
            finally:
                s.close()
            await tool_call(http, base + "/mcp")
    finally:
        stop(proc)


# ------------------------------------------------------------------------------------------- item 6


async def _initialize(http: httpx.AsyncClient, url: str) -> httpx.Response:
    return await http.post(url, json=initialize_body(V), headers=handshake_headers())


@pytest.mark.req("A014")
async def test_session_flood_does_not_lock_out_a_fresh_client() -> None:
    """Filling the session table with abandoned ``initialize`` sessions evicts the least recently used idle ones:
    the table stays at ``max_sessions`` and a fresh client initializes and calls a tool (no 503). An evicted
    session was terminated by the server: it answers 404, so its client knows to initialize again."""
    async with served(max_sessions=50) as (base, userver), httpx.AsyncClient() as http:
        url = base + "/mcp"
        first = await open_session(http, url, V)
        for _ in range(12):
            statuses = await asyncio.gather(*(_initialize(http, url) for _i in range(25)))
            assert {r.status_code for r in statuses} == {200}
        endpoint = userver.config.app.streamable
        assert endpoint.session_count <= 50
        await tool_call(http, url)
        r = await http.post(
            url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=handshake_headers(first, V)
        )
        assert r.status_code == 404


async def test_per_client_quota_protects_other_clients() -> None:
    """One remote address holding many sessions only ever replaces its own: another client's idle session
    survives the flood, and a client whose sessions are all busy gets 429 naming the option."""
    async with served(max_sessions=10, max_sessions_per_client=3) as (base, userver):
        url = base + "/mcp"
        attacker_transport = httpx.AsyncHTTPTransport(local_address="127.0.0.3")
        async with httpx.AsyncClient() as victim, httpx.AsyncClient(transport=attacker_transport) as attacker:
            victim_sid = await open_session(victim, url, V)
            for _ in range(40):
                assert (await _initialize(attacker, url)).status_code == 200
            endpoint = userver.config.app.streamable
            assert endpoint.session_count <= 4  # the victim's one plus the attacker's quota
            body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
            r = await victim.post(url, json=body, headers=handshake_headers(victim_sid, V))
            assert r.status_code == 200, "the victim's session was evicted by another client's flood"
            # every one of the attacker's sessions busy (a GET stream open on each): the quota refuses
            busy = [await open_session(attacker, url, V) for _ in range(3)]
            streams = []
            try:
                for sid in busy:
                    cm = attacker.stream(
                        "GET", url, headers={**handshake_headers(sid, V), "accept": "text/event-stream"}
                    )
                    resp = await cm.__aenter__()
                    assert resp.status_code == 200
                    streams.append(cm)
                r = await _initialize(attacker, url)
                assert r.status_code == 429
                assert "max_sessions_per_client=3" in r.text
            finally:
                for cm in streams:
                    await cm.__aexit__(None, None, None)


async def test_quota_is_per_principal_when_authenticated() -> None:
    """Behind bearer auth the quota counts sessions per principal, not per address: alice (same address as bob)
    flooding ``initialize`` only ever replaces her own sessions; bob's stays."""
    from mcpkit.auth import protect
    from mcpkit.auth.verifiers import AccessToken, StaticTokenVerifier

    resource = "http://127.0.0.1/mcp"
    verifier = StaticTokenVerifier(
        {
            tok: AccessToken(tok, client_id="c", subject=who, audience=(resource,))
            for tok, who in (("tok-alice", "alice"), ("tok-bob", "bob"))
        }
    )

    def wrap(app: Any) -> Any:
        return protect(app, resource=resource, verifier=verifier, check_audience=False)

    async with running(make_server(), wrap=wrap, max_sessions_per_client=2) as (base, app):
        url = base + "/mcp"
        async with httpx.AsyncClient(headers={"authorization": "Bearer tok-bob"}) as bob:
            bob_sid = await open_session(bob, url, V)
            async with httpx.AsyncClient(headers={"authorization": "Bearer tok-alice"}) as alice:
                for _ in range(10):
                    assert (await _initialize(alice, url)).status_code == 200
            assert app.streamable.session_count == 3  # alice's quota of 2, plus bob's
            r = await bob.post(url, json=_rpc(4, "ping", {}), headers=handshake_headers(bob_sid, V))
            assert r.status_code == 200


async def test_legacy_sse_per_client_quota() -> None:
    """Legacy /sse: one address holds at most ``max_sessions_per_client`` streams (429 naming the option); another
    address still gets in."""
    async with served(max_sessions_per_client=2) as (base, _):
        other = httpx.AsyncHTTPTransport(local_address="127.0.0.3")
        async with httpx.AsyncClient() as http, httpx.AsyncClient(transport=other) as http2:
            streams = []
            try:
                for _ in range(2):
                    cm = http.stream("GET", base + "/sse", headers={"accept": "text/event-stream"})
                    assert (await cm.__aenter__()).status_code == 200
                    streams.append(cm)
                r = await http.get(base + "/sse", headers={"accept": "text/event-stream"})
                assert r.status_code == 429 and "max_sessions_per_client=2" in r.text
                cm = http2.stream("GET", base + "/sse", headers={"accept": "text/event-stream"})
                assert (await cm.__aenter__()).status_code == 200
                streams.append(cm)
            finally:
                for cm in streams:
                    await cm.__aexit__(None, None, None)


# ------------------------------------------------------------------------------------------- item 7


def _rpc(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


async def test_subscription_uri_size_is_capped() -> None:
    """60 subscriptions with 1 MB URIs are refused (-32602 naming max_subscription_uri) and nothing is kept; the
    session goes on (a normal subscription still works, the count cap names max_subscriptions)."""
    async with served() as (base, userver), httpx.AsyncClient(timeout=30) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        headers = handshake_headers(sid, V)
        huge = "file:///" + "a" * (1024 * 1024)
        for i in range(60):
            r = await http.post(url, json=_rpc(10 + i, "resources/subscribe", {"uri": huge + str(i)}), headers=headers)
            error = r.json()["error"]
            assert error["code"] == -32602 and "max_subscription_uri" in error["message"]
        endpoint = userver.config.app.streamable
        (session,) = [hs.session for hs in endpoint._sessions.values()]
        assert session.subscriptions == set()
        r = await http.post(url, json=_rpc(99, "resources/subscribe", {"uri": "file:///ok"}), headers=headers)
        assert r.json()["result"] == {}
        session.server.max_subscriptions = 1
        r = await http.post(url, json=_rpc(100, "resources/subscribe", {"uri": "file:///two"}), headers=headers)
        assert "max_subscriptions=1" in r.json()["error"]["message"]
        assert session.subscriptions == {"file:///ok"}


async def test_initialize_client_metadata_is_capped() -> None:
    """A session keeps its client's capabilities and clientInfo for life: 3 MB of them are refused (-32602 naming
    max_client_metadata, no session created) and a normal initialize still works."""
    async with served() as (base, userver), httpx.AsyncClient(timeout=30) as http:
        url = base + "/mcp"
        fat = initialize_body(V, caps={"experimental": {f"k{i}": {"v": "x" * 30} for i in range(80_000)}})
        r = await http.post(url, json=fat, headers=handshake_headers())
        assert r.json()["error"]["code"] == -32602
        assert "max_client_metadata" in r.json()["error"]["message"]
        assert userver.config.app.streamable.session_count == 0
        await tool_call(http, url)


@pytest.mark.req("M011")
async def test_http_batch_items_count_against_the_session_cap() -> None:
    """Issue 12.3 over HTTP: each request of a POSTed batch counts against the session's cap
    (max_requests_per_session, set to 256 here) like a single request: 6 concurrent batches of 100 calls of a 300 ms
    tool never run more than 256 at once (on 91956f7 a batch counted as one, and all 600 ran at once)."""
    async with http_session("max_requests_per_session=256") as (http, url, headers, _):
        rs = await asyncio.gather(*(http.post(url, json=b, headers=headers) for b in batches(6, 100, 300)))
        assert [r.status_code for r in rs] == [200] * 6
        assert all(len(r.json()) == 100 for r in rs)
        r = await http.post(url, json=stats(1), headers=headers)
        seen = stats_of(r.json())
        assert seen["calls"] == 600 and seen["peak"] <= 256, seen


async def test_http_batch_flood_memory_is_bounded() -> None:
    """Issue 12.3 over HTTP: 300 concurrent POSTs of 100 batched calls (30,000 calls) of a tool that holds each call
    for up to 3 s: ten batches run (1,024 places by default), the other POSTs wait in the session's bounded queue,
    and the server's memory stays flat (on 91956f7 all 30,000 calls were in flight at once)."""
    async with http_session() as (http, url, headers, pid):
        until = time.time() + 3.0
        work = [
            [{**c, "params": {"name": "slow", "arguments": {"until": until}}} for c in b] for b in batches(300, 100, 0)
        ]
        async with PeakRSS(pid) as rss:
            rs = await asyncio.gather(*(http.post(url, json=b, headers=headers) for b in work))
        assert [r.status_code for r in rs] == [200] * 300
        assert sum(len(r.json()) for r in rs) == 30_000
        print(f"http: 30,000 batched calls in 300 POSTs, server RSS +{rss.growth_mb:.1f} MB")
        assert rss.growth_mb < 20, rss.growth_mb


async def test_http_long_batch_is_refused() -> None:
    """Issue 12.3 over HTTP: a POSTed batch longer than max_batch_size is refused whole (400, -32600)."""
    async with http_session() as (http, url, headers, _):
        r = await http.post(url, json=batches(1, 101, 1)[0], headers=headers)
        assert r.status_code == 400 and r.json()["error"]["code"] == -32600
        assert "max_batch_size" in r.json()["error"]["message"]


async def test_http_requests_beyond_the_session_cap_queue_before_429() -> None:
    """Issue 16 (HTTP part): 600 calls in flight on one session with a cap of 256 are queued and all answered 200
    (on 91956f7 344 of them got 429); beyond the queue (max_queued_per_session) the answer is a cheap 429 with
    Retry-After that names the options, and the session goes on."""
    async with http_session("max_requests_per_session=256") as (http, url, headers, _):
        rs = await asyncio.gather(*(http.post(url, json=slow(i, 200), headers=headers) for i in range(600)))
        assert [r.status_code for r in rs] == [200] * 600
        seen = stats_of((await http.post(url, json=stats(1), headers=headers)).json())
        assert seen["calls"] == 600 and 200 <= seen["peak"] <= 256, seen
    async with http_session("max_requests_per_session=4", "max_queued_per_session=4") as (http, url, headers, _):
        rs = await asyncio.gather(*(http.post(url, json=slow(i, 1500), headers=headers) for i in range(12)))
        codes = sorted(r.status_code for r in rs)
        assert codes == [200] * 8 + [429] * 4, codes
        refused = next(r for r in rs if r.status_code == 429)
        assert refused.headers["retry-after"] == "1"
        assert "max_queued_per_session" in refused.json()["error"]["message"]
        r = await http.post(url, json=slow(99, 1), headers=headers)
        assert r.status_code == 200


async def test_http_default_session_cap_runs_what_the_connections_carry() -> None:
    """Issue 16: by default a session runs as many single requests at once as the server's default connection bound
    (1,024) lets arrive: 600 concurrent POSTs of a 1 s tool all run together (the earlier default of 256 queued
    the rest, and 1,024 in flight ran slower than 256); a batch still counts one place per item."""
    async with http_session() as (http, url, headers, _):
        rs = await asyncio.gather(*(http.post(url, json=slow(i, 1000), headers=headers) for i in range(600)))
        assert [r.status_code for r in rs] == [200] * 600
        seen = stats_of((await http.post(url, json=stats(1), headers=headers)).json())
        assert seen["calls"] == 600 and seen["peak"] > 256, seen


async def test_modern_batch_over_http_says_batches_do_not_exist() -> None:
    """Issue 12.12: a 2026-07-28 batch over HTTP gets -32600 "batches do not exist in 2026-07-28" (on 91956f7:
    "Mcp-Session-Id header is required"), on a server of both eras and on a modern-only one."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    }
    item = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    for opts in ((), ("modern_only=1",)):
        async with server_process("http", *opts) as (_, port), httpx.AsyncClient(timeout=30) as http:
            url = f"http://127.0.0.1:{port}/mcp"
            for h in (headers, {**headers, "mcp-protocol-version": MODERN}):
                r = await http.post(url, json=[item, {**item, "id": 2}], headers=h)
                assert r.status_code == 400, r.text
                err = r.json()["error"]
                assert err["code"] == -32600 and "batches do not exist in 2026-07-28" in err["message"], err
