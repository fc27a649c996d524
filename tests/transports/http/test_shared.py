"""The cross-worker side of the Streamable HTTP endpoint (a fan-out shared through a real redis-server): what a
handshake session's GET stream replays from the shared log."""

from __future__ import annotations

import asyncio
import secrets

import httpx
import orjson
import pytest

from mcpkit import MCPKit
from mcpkit.stores.config import ScaleConfig
from support.mcp_http import handshake_headers, initialize_body, open_session, running
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture, by name)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.redis


async def _events(response: httpx.Response, until: str) -> list[tuple[str | None, str | None]]:
    """(id, method) of each event of a GET stream, up to the first whose method is ``until``."""
    out: list[tuple[str | None, str | None]] = []
    event_id: str | None = None
    async for line in response.aiter_lines():
        if line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data = line[5:].strip()
            method = orjson.loads(data).get("method") if data else None
            out.append((event_id, method))
            event_id = None
            if method == until:
                return out
    return out


async def test_a_resumed_get_stream_replays_only_the_list_changes_the_session_was_declared(
    redis_url: str,  # noqa: F811
) -> None:
    """A GET stream resumed from the shared log (Last-Event-ID) gets what a live one would: the list_changed of a
    list the session's initialize answer declared (tools here), never one of a list this server does not have
    (prompts): a client is only sent what was negotiated."""
    app = MCPKit("tools-only")

    @app.tool
    def echo(text: str) -> str:
        return text

    config = ScaleConfig(redis_url=redis_url, redis_prefix=f"sh{secrets.token_hex(4)}:", state_keys=(b"k" * 32,))
    async with running(app, config=config) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url)
        headers = handshake_headers(sid, "2025-11-25", accept="text/event-stream")
        async with http.stream("GET", url, headers=headers) as r:
            assert r.status_code == 200
            lines = r.aiter_lines()
            first = await anext(lines)
            assert first.startswith("id:")
            start = first[3:].strip()
        await app.notify_list_changed("prompts")
        await app.notify_list_changed("tools")
        await asyncio.sleep(0.2)
        async with http.stream("GET", url, headers={**headers, "last-event-id": start}) as r:
            assert r.status_code == 200
            events = await asyncio.wait_for(_events(r, "notifications/tools/list_changed"), 5)
        assert [m for _, m in events if m] == ["notifications/tools/list_changed"]


async def test_a_session_opened_while_redis_is_unreachable_is_refused_not_left_on_one_worker(
    redis_url: str,  # noqa: F811
) -> None:
    """An initialize answered while the session store cannot record the session used to be 200 with a session id
    that no other worker would ever know (nothing saved it when Redis came back): every request the balancer sent
    elsewhere was a 404 for good. It is a 503 with Retry-After, as any request that needs Redis meanwhile; once
    Redis is back, a session opened on one worker is served by the other."""
    from support.mcp_http import initialize_body
    from support.tcp_proxy import TcpProxy

    def worker() -> MCPKit:
        app = MCPKit("scaled")

        @app.tool
        def echo(text: str) -> str:
            return text

        return app

    port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    prefix = f"sh{secrets.token_hex(4)}:"
    keys = (b"k" * 32,)
    with TcpProxy(port) as proxy:
        through_proxy = ScaleConfig(
            redis_url=f"redis://127.0.0.1:{proxy.port}/0", redis_prefix=prefix, state_keys=keys, redis_timeout=0.5
        )
        direct = ScaleConfig(redis_url=redis_url, redis_prefix=prefix, state_keys=keys)
        async with (
            running(worker(), config=through_proxy) as (base_a, _),
            running(worker(), config=direct) as (base_b, _),
            httpx.AsyncClient(timeout=10) as http,
        ):
            proxy.cut()
            r = await http.post(base_a + "/mcp", json=initialize_body(), headers=handshake_headers())
            assert r.status_code == 503, (r.status_code, r.headers.get("mcp-session-id"))
            assert r.headers["retry-after"] == "1" and "mcp-session-id" not in r.headers
            proxy.restore()
            for _ in range(50):  # (the connection's breaker lets requests through again within its timeout)
                r = await http.post(base_a + "/mcp", json=initialize_body(), headers=handshake_headers())
                if r.status_code == 200:
                    break
                await asyncio.sleep(0.1)
            sid = r.headers["mcp-session-id"]
            call = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "b"}},
            }
            r = await http.post(base_b + "/mcp", json=call, headers=handshake_headers(sid, "2025-11-25"))
            assert r.status_code == 200, r.text


async def test_a_new_get_stream_takes_over_from_a_half_open_one_with_a_shared_fanout(
    redis_url: str,  # noqa: F811
) -> None:
    """With the GET stream fed from the shared log, a new GET while the old one is half-open takes over as on a
    single worker: the old response ends cleanly, what it had queued and not written goes out on the new one
    first (with its log ids), and every message arrives once, in order."""
    from support.mcp_http import burst_server, check_get_takeover

    count = 120
    config = ScaleConfig(redis_url=redis_url, redis_prefix=f"sh{secrets.token_hex(4)}:", state_keys=(b"k" * 32,))
    async with running(burst_server(count), config=config) as (base, app):
        await check_get_takeover(base, app, count)


@pytest.mark.parametrize(
    "last_event_id", ["9" * 5000 + "_1", "1_" + "9" * 5000, "g" + "9" * 5000 + "-1", "g1-" + "9" * 5000]
)
async def test_a_last_event_id_of_thousands_of_digits_is_a_400_not_a_crash(
    redis_url: str,  # noqa: F811
    last_event_id: str,
) -> None:
    # more than 4300 digits is past Python's limit on int() of a string: a header any client can send
    config = ScaleConfig(redis_url=redis_url, redis_prefix=f"sh{secrets.token_hex(4)}:", state_keys=(b"k" * 32,))
    async with running(MCPKit("ids"), config=config) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url)
        headers = handshake_headers(sid, "2025-11-25", accept="text/event-stream")
        r = await http.get(url, headers={**headers, "last-event-id": last_event_id})
        assert r.status_code == 400
        assert "Last-Event-ID" in r.json()["error"]["message"]
        r = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=handshake_headers(sid))
        assert r.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}  # the session goes on


async def test_an_unreachable_session_store_logs_a_line_now_and_then_not_a_traceback_per_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Redis down (or refusing writes: maxmemory) under a burst of new clients: each initialize is a 503, and the
    # log must not get one traceback per request (the re-read of a session already logs one line per 10 s)
    import logging

    from support.redis_server import _free_port

    config = ScaleConfig(redis_url=f"redis://127.0.0.1:{_free_port()}/0", redis_timeout=0.2, state_keys=(b"k" * 32,))
    with caplog.at_level(logging.WARNING, logger="mcpkit"):
        async with running(MCPKit("down"), config=config) as (base, _), httpx.AsyncClient(timeout=10) as http:
            url = base + "/mcp"
            for _ in range(20):
                r = await http.post(url, json=initialize_body(), headers=handshake_headers())
                assert r.status_code == 503
    saves = [r for r in caplog.records if r.name == "mcpkit.http" and "session" in r.getMessage()]
    assert 1 <= len(saves) <= 2, [r.getMessage() for r in saves]
    assert all(r.exc_info is None for r in saves)  # the reason is in the line: Redis is unavailable (...)
    lines = [r for r in caplog.records if r.name.startswith("mcpkit")]
    assert len(lines) <= 6, [(r.name, r.getMessage()[:80]) for r in lines]  # not one (or two) per request


async def test_a_request_refused_while_redis_is_unavailable_says_so_once() -> None:
    # The first request that needs Redis waits for it (then the breaker opens), the next ones are refused at once:
    # both are the same 503 for the client, one sentence saying to retry (the breaker's own message said
    # "retrying shortly" and the 503 added "; retry shortly" after it)
    from support.redis_server import _free_port

    config = ScaleConfig(redis_url=f"redis://127.0.0.1:{_free_port()}/0", redis_timeout=0.2, state_keys=(b"k" * 32,))
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {}}}
    async with running(MCPKit("down"), config=config) as (base, _), httpx.AsyncClient(timeout=10) as http:
        messages = []
        for _ in range(3):  # (a session this worker does not hold: it must be read from the store)
            r = await http.post(base + "/mcp", json=call, headers=handshake_headers("elsewhere", "2025-11-25"))
            assert r.status_code == 503 and r.headers["retry-after"] == "1", r.text
            messages.append(r.json()["error"]["message"])
    for message in messages:
        assert message.startswith("Service Unavailable: session store: Redis is unavailable (ConnectionError: ")
        assert message.endswith("; retry shortly") and message.count("retr") == 1, message


@pytest.mark.parametrize("backend", ["redis", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_a_different_app_starting_on_a_prefix_in_use_is_warned_about_and_still_starts(
    backend: str, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    """Two apps sharing one Redis key prefix or PostgreSQL table prefix act as one (sessions, notifications, task
    caps). Each app leaves its fingerprint under the prefix when it starts (its name and a digest of its tool,
    resource and prompt names: one Redis key with a TTL, one row of ``<prefix>meta`` saying when it ends), and
    keeps it written while it runs; a worker of another app starting there logs one WARNING naming both and the
    option that gives each its own prefix, and starts all the same (a rolling deploy that changed the tools is one
    app). Another worker of the same app says nothing."""
    import logging

    def app(name: str, tool: str) -> MCPKit:
        server = MCPKit(name)
        server.tool(name=tool)(lambda: tool)
        return server

    url = request.getfixturevalue(f"{backend}_url")
    if backend == "redis":
        prefix = f"sh{secrets.token_hex(4)}:"
        config = ScaleConfig(redis_url=url, redis_prefix=prefix, state_keys=(b"k" * 32,))
    else:
        prefix = f"sh{secrets.token_hex(4)}_"
        config = ScaleConfig(postgres_url=url, postgres_prefix=prefix, state_keys=(b"k" * 32,))
    caplog.set_level(logging.WARNING, "mcpkit")

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and prefix in r.getMessage()]

    def claims() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_name() == "mcpkit-prefix-claim"]

    async with running(app("alpha", "a"), config=config):
        async with running(app("alpha", "a"), config=config):  # (the same app's second worker)
            pass
        assert warnings() == []
        async with running(app("beta", "b"), config=config) as (base, _), httpx.AsyncClient(timeout=10) as http:
            r = await http.post(base + "/mcp", json=initialize_body(), headers=handshake_headers())
            assert r.status_code == 200  # (it started and serves)
            assert len(claims()) == 2  # (each running worker keeps its fingerprint written: alpha's and beta's)
    assert claims() == []  # (stopped with the worker)
    [said] = warnings()
    setting = "MCPKIT_REDIS_PREFIX" if backend == "redis" else "MCPKIT_POSTGRES_PREFIX"
    assert "'alpha'" in said and "'beta'" in said and setting in said and "rolling" in said, said
    if backend == "redis":
        import redis.asyncio as aioredis

        from mcpkit.stores.redis.fingerprint import FINGERPRINT_TTL

        client = aioredis.from_url(url)
        try:
            keys = [k async for k in client.scan_iter(match=f"{prefix}*")]
            fingerprints = [k for k in keys if k.endswith(b":fingerprint")]
            assert len(fingerprints) == 1, keys
            assert 0 < await client.ttl(fingerprints[0]) <= FINGERPRINT_TTL  # (the bound)
            assert b"beta" in await client.get(fingerprints[0])  # (the last app to start holds it)
        finally:
            await client.aclose()
        return
    import asyncpg

    db = await asyncpg.connect(url)
    try:
        value = await db.fetchval(f"SELECT value FROM {prefix}meta WHERE key = 'fingerprint'")
    finally:
        await db.close()
    assert value is not None and value.split(" ", 1)[1].startswith("beta "), value  # (the last app to start)
