"""Server middleware on the interceptor chain: typed hooks, request logging, timing, error handling, rate limiting,
the response cache and the size/time guard, over stdio and Streamable HTTP in both eras."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import InvalidParams, MCPError
from mcpkit.server.interceptors import Call, CallNext, ToolCall
from mcpkit.server.middleware import Middleware, RateLimit, RateLimited, RequestLogging, ResponseCache, Timing
from mcpkit.server.middleware.ratelimit import MemoryBuckets
from support.asgi import serve_asgi
from support.paths import SERVERS
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.toolkit import ERAS, TRANSPORTS, serve_http

sys.path.insert(0, str(SERVERS))

import middleware_apps

BOTH = pytest.mark.parametrize("transport", TRANSPORTS)
ERA = pytest.mark.parametrize("mode", ERAS)


@contextlib.asynccontextmanager
async def connect(
    name: str, transport: str, mode: str, *, app: MCPKit | None = None, user: str | None = None, **options: Any
) -> AsyncIterator[Client]:
    """A client of middleware app ``name`` over ``transport`` in ``mode`` (HTTP: ``X-User`` names the principal)."""
    if transport == "stdio":
        async with Client([sys.executable, str(SERVERS / "middleware_apps.py"), name], mode=mode, **options) as c:
            yield c
        return
    served = app if app is not None else middleware_apps.build(name)
    async with serve_http(served) as url:
        headers = {"X-User": user} if user is not None else None
        async with Client(url, mode=mode, headers=headers, **options) as client:
            yield client


async def _data(client: Client, tool: str) -> Any:
    result = await client.call_tool(tool, {})
    assert not result.is_error, result.text
    return (
        result.structured["result"]
        if isinstance(result.structured, dict) and "result" in result.structured
        else result.data
    )


# ---------------------------------------------------------------------------------------------- hooks


def test_a_middleware_is_installed_for_the_methods_it_hooks_only() -> None:
    class ToolsOnly(Middleware):
        async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
            return await call_next(call)

    class Everything(Middleware):
        async def on_request(self, call: Call, call_next: CallNext) -> Any:
            return await call_next(call)

    assert ToolsOnly().methods == frozenset({"tools/call"})
    assert Everything().methods is None
    assert ResponseCache().methods == frozenset(
        {"tools/list", "resources/list", "resources/templates/list", "prompts/list", "resources/read"}
    )
    app = MCPKit("m")
    remove = app.add_middleware(ToolsOnly())
    assert app._intercepting is not None and app._intercepting.chain("tools/list") == ()
    assert len(app._intercepting.chain("tools/call")) == 1
    remove()
    assert app._intercepting is None  # nothing left: dispatch pays nothing again


@pytest.mark.parametrize("with_tool_hook", [False, True], ids=["notifications-only", "with-a-typed-hook"])
async def test_on_notification_sees_every_notification_the_client_sends(with_tool_hook: bool) -> None:
    """A middleware overriding ``on_notification`` (alone, or beside a typed request hook) sees the client's
    notifications, known ones and one of the server's own alike; its typed hook still sees only its requests."""
    seen: list[str] = []

    class Notes(Middleware):
        async def on_notification(self, call: Call, call_next: CallNext) -> Any:
            seen.append(call.method)
            return await call_next(call)

    class NotesAndTools(Notes):
        async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
            seen.append(f"request {call.method}")
            return await call_next(call)

    app = MCPKit("m")

    @app.tool
    def echo(text: str) -> str:
        return text

    app.add_middleware(NotesAndTools() if with_tool_hook else Notes())
    async with serve_http(app) as url, Client(url, mode="handshake") as client:
        await client.list_tools()
        await client.call_tool("echo", {"text": "x"})
        await client.session.peer.notify("notifications/roots/list_changed")
        await client.session.peer.notify("notifications/com.example/custom", {})
        await client.ping()  # (notifications have no answer: a request after them orders them)
    assert "notifications/initialized" in seen
    assert "notifications/roots/list_changed" in seen and "notifications/com.example/custom" in seen
    assert [m for m in seen if m.startswith("request")] == (["request tools/call"] if with_tool_hook else [])
    assert "request tools/list" not in seen


@BOTH
@ERA
async def test_typed_hooks_see_the_call_and_can_refuse_or_change_the_result(transport: str, mode: str) -> None:
    async with connect("observed", transport, mode) as client:
        assert (await client.call_tool("add", {"a": 2, "b": 3})).data == 5
        with pytest.raises(InvalidParams, match="negative numbers"):
            await client.call_tool("add", {"a": -1, "b": 3})
        page = await client.session.list_tools()
        assert page.meta is not None and page.meta.get("com.example/checked") is True
        seen = await _data(client, "hook_seen")
        assert seen.count("call add as None") == 2 and "list tools" in seen


# ---------------------------------------------------------------------------------------------- logging, timing, errors


@BOTH
@ERA
async def test_each_request_is_logged_once_with_its_outcome(transport: str, mode: str) -> None:
    async with connect("observed", transport, mode) as client:
        await client.call_tool("add", {"a": 1, "b": 1})
        await client.call_tool("refuse", {})
        with pytest.raises(MCPError):
            await client.call_tool("add", {"a": -5, "b": 1})
        lines = [line for line in await _data(client, "log_lines") if line.startswith("mcpkit.requests")]
    records = [line for line in lines if "tools/call" in line]
    assert any("tools/call add ok" in line for line in records)
    assert any("tools/call refuse tool_error" in line for line in records)
    assert any("tools/call add error -32602" in line and "WARNING" in line for line in records)
    structured = next(line for line in records if "tools/call add ok" in line)
    era = "modern" if mode == "modern" else "handshake"
    assert f"'era': '{era}'" in structured and "'arguments': ['a', 'b']" in structured
    assert "'session':" in structured


@ERA
async def test_logs_never_hold_a_token_or_request_state(mode: str) -> None:
    """Every log line of the server process (every logger, DEBUG) through an authorized session, an input round
    with requestState, a masked crash: the bearer token and the requestState never appear."""
    from mcpkit.auth import StaticTokenVerifier, protect
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    token = "tok-SECRET-0123456789"
    app = middleware_apps.build("observed")
    verifier = StaticTokenVerifier.simple({token: []}, audience="http://mcp.test/mcp")
    asgi = protect(create_app(app), resource="http://mcp.test/mcp", verifier=verifier)
    seen: list[bytes] = []

    def elicit(params: Any) -> dict[str, Any]:
        return {"name": "ada"}

    async with serve_asgi(asgi) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(
            url,
            mode=mode,
            headers={"Authorization": f"Bearer {token}"},
            elicitation_handler=elicit,
            tap=lambda event: seen.append(event.data),
        ) as client:
            assert (await client.call_tool("ask", {})).text == "hello ada"
            crashed = await client.call_tool("crash", {})  # (a tool's exception: an isError result, masked)
            assert crashed.is_error and "error id" in crashed.text and "secret internals" not in crashed.text
            with pytest.raises(MCPError) as exploded:
                await client.call_tool("explode", {})  # (an inner middleware's: masked by ErrorHandling)
            assert "error id" in exploded.value.message and "secret internals" not in exploded.value.message
            lines = await _data(client, "log_lines")
    text = "\n".join(lines)
    assert "tools/call ask ok" in text and "tools/call explode error RuntimeError" in text
    assert "the secret internals of explode" in text  # the masked error's details are in the log, with its id
    assert token not in text and "Bearer" not in text
    if mode == "modern":
        answers = [json.loads(data) for data in seen if b'"requestState"' in data]
        sealed = [a["result"]["requestState"] for a in answers if "result" in a and "requestState" in a["result"]]
        assert sealed, "the modern round trip carried a requestState"
        assert all(state not in text and state[:24] not in text for state in sealed)


@BOTH
@ERA
async def test_timing_per_method_and_per_tool(transport: str, mode: str) -> None:
    async with connect("observed", transport, mode) as client:
        for i in range(5):
            await client.call_tool("add", {"a": i, "b": 1})
        await client.call_tool("refuse", {})
        await client.list_tools()
        stats = await _data(client, "timing_stats")
    add = stats["tools/call add"]
    assert (
        add["count"] == 5 and add["errors"] == 0 and 0 < add["p50_ms"] <= add["p99_ms"] <= add["max_ms"] * 1.25 + 0.01
    )
    assert stats["tools/call refuse"]["errors"] == 1 and stats["tools/list"]["count"] >= 1


def test_the_timing_table_is_bounded() -> None:
    timing = Timing(max_entries=3)

    class Fake:
        def __init__(self, name: str) -> None:
            self.method = "tools/call"
            self.params = {"name": name}

    for i in range(10):
        timing._record(Fake(f"t{i}"), 1.0, False)  # type: ignore[arg-type]
    assert list(timing.stats()) == ["tools/call t7", "tools/call t8", "tools/call t9"]


@BOTH
@ERA
async def test_unexpected_exceptions_are_masked_behind_an_error_id(transport: str, mode: str) -> None:
    async with connect("observed", transport, mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("explode", {})
        assert caught.value.code == -32603 and "error id" in caught.value.message
        assert "secret" not in caught.value.message
        assert (await client.call_tool("crash", {})).is_error
        counts = await _data(client, "error_counts")
        assert (await client.call_tool("add", {"a": 1, "b": 2})).data == 3  # the session goes on
    assert counts["tools/call RuntimeError"] == 1 and counts["tools/call isError"] == 1


@BOTH
@ERA
async def test_a_request_ended_by_a_cancelled_error_of_its_own_is_answered_not_left_hanging(
    transport: str, mode: str
) -> None:
    """A handler or middleware that ends in a ``CancelledError`` nobody asked for (it awaited a future other code
    cancelled) gets an error answer, -32603: the client did not cancel, so leaving the request unanswered (as a
    cancelled one is) left the caller waiting until its own timeout, and the session goes on."""
    async with connect("stray", transport, mode) as client:
        for tool in ("orphan", "dropped"):
            with pytest.raises(MCPError) as refused:
                await asyncio.wait_for(client.call_tool(tool, {}), 20)
            assert refused.value.code == -32603, refused.value
        assert (await client.call_tool("ok", {})).text == "ok"


# ---------------------------------------------------------------------------------------------- rate limiting


@BOTH
@ERA
async def test_a_token_bucket_per_caller(transport: str, mode: str) -> None:
    async with connect("limited", transport, mode) as client:
        for _ in range(3):
            assert (await client.call_tool("hit", {})).text == "hit"
        with pytest.raises(MCPError) as refused:
            await client.call_tool("hit", {})
        assert refused.value.code == RateLimited.code == -32010 and 0 < refused.value.data["retryAfterMs"] <= 1000
        await client.list_tools()  # (cost 0: never limited)
        await asyncio.sleep(1.1)
        assert (await client.call_tool("hit", {})).text == "hit"  # refilled


@ERA
async def test_principals_have_buckets_of_their_own(mode: str) -> None:
    app = middleware_apps.build("limited")
    async with serve_http(app) as url, Client(url, mode=mode, headers={"X-User": "alice"}) as alice:
        for _ in range(3):
            await alice.call_tool("hit", {})
        with pytest.raises(MCPError, match="Rate limit"):
            await alice.call_tool("hit", {})
        async with Client(url, mode=mode, headers={"X-User": "bob"}) as bob:
            assert (await bob.call_tool("hit", {})).text == "hit"


def _limited(rate: float, burst: float) -> MCPKit:
    app = MCPKit("limited")
    app.add_middleware(RateLimit(rate, burst=burst, costs={"tools/list": 0}))  # (the client lists before it calls)
    app.tool(lambda: "hit", name="hit")
    return app


async def _hits(client: Client, tries: int) -> int:
    """How many of ``tries`` calls the rate limit let through (the others refused with -32010)."""
    ok = 0
    for _ in range(tries):
        try:
            await client.call_tool("hit", {})
            ok += 1
        except MCPError as exc:
            assert exc.code == RateLimited.code, exc
    return ok


@ERA
async def test_anonymous_http_callers_share_one_bucket_per_address_however_many_sessions_they_open(mode: str) -> None:
    """Without a principal, each new handshake-era session had a fresh bucket: five sessions got five times the
    burst. Anonymous HTTP callers are now keyed by their address (the ASGI client address), in every era; another
    address (127.0.0.2, loopback too) has its own bucket."""
    async with serve_http(_limited(0.1, 2)) as url, contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(Client(url, mode=mode)) for _ in range(5)]
        assert sum([await _hits(client, 2) for client in clients]) == 2
        other = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(local_address="127.0.0.2"), timeout=httpx.Timeout(30.0, read=None)
        )
        stack.push_async_callback(other.aclose)
        elsewhere = await stack.enter_async_context(Client(url, mode=mode, transport_options={"client": other}))
        assert await _hits(elsewhere, 3) == 2


async def _hits_claiming(url: str, mode: str, claims: list[str], tries: int) -> list[int]:
    """Calls let through, per session, to anonymous sessions that each claim another ``X-Forwarded-For``."""
    got = []
    for claim in claims:
        async with Client(url, mode=mode, headers={"X-Forwarded-For": claim}) as client:
            got.append(await _hits(client, tries))
    return got


@ERA
async def test_an_anonymous_callers_forwarded_for_claim_counts_only_from_addresses_trusted_to_forward(
    mode: str,
) -> None:
    """uvicorn trusts X-Forwarded-For from 127.0.0.1 unless told otherwise, so any client reaching the server
    from loopback (a tunnel, a port-forward, a local proxy that passes the header through) chose its own rate
    limit bucket: five sessions claiming five addresses made ten calls. A claim now counts only when the
    addresses trusted to forward it are named (``forwarded_allow_ips``, ``--forwarded-allow-ips``)."""
    claims = [f"10.0.0.{i}" for i in range(5)]
    async with serve_http(_limited(0.1, 2)) as url:
        assert sum(await _hits_claiming(url, mode, claims, 2)) == 2  # one caller, whatever it claims
    from mcpkit.transports.http import create_app

    async with serve_asgi(create_app(_limited(0.1, 2)), forwarded_allow_ips="127.0.0.1") as port:
        url = f"http://127.0.0.1:{port}/mcp"
        assert await _hits_claiming(url, mode, claims[:2], 3) == [2, 2]  # a trusted balancer's word counts


@ERA
async def test_anonymous_in_process_connections_keep_a_bucket_each(mode: str) -> None:
    """No address over stdio or in process: each connection (its handshake-era session) has its own bucket."""
    app = _limited(0.1, 2)
    async with Client(app, mode=mode) as one, Client(app, mode=mode) as two:
        assert await _hits(one, 3) == 2
        assert await _hits(two, 3) == 2


async def test_the_in_memory_buckets_are_bounded() -> None:
    buckets = MemoryBuckets(max_keys=100)
    for i in range(1_000):
        await buckets.take(f"caller-{i}", 1, 1, 1)
    assert len(buckets) == 100
    assert await buckets.take("caller-999", 1, 1, 1) > 0  # the recent ones are still there
    assert await buckets.take("caller-0", 1, 1, 1) == 0  # a dropped one starts full


@pytest.mark.redis
async def test_redis_buckets_are_shared_by_every_worker(redis_url: str) -> None:  # noqa: F811
    from mcpkit.stores.redis.ratelimit import RedisBuckets, buckets_from_env

    one, two = RedisBuckets(redis_url, prefix="rl-test:"), RedisBuckets(redis_url, prefix="rl-test:")
    try:
        limit_one = RateLimit(1, burst=2, store=one, costs={"tools/list": 0})
        limit_two = RateLimit(1, burst=2, store=two, costs={"tools/list": 0})
        apps = []
        for limit in (limit_one, limit_two):
            app = MCPKit("w")
            app.add_middleware(limit)
            app.tool(lambda: "hit", name="hit")
            apps.append(app)
        async with Client(apps[0]) as first, Client(apps[1]) as second:
            key = "shared"
            limit_one.key = limit_two.key = lambda call: key
            await first.call_tool("hit", {})
            await second.call_tool("hit", {})
            with pytest.raises(MCPError, match="Rate limit"):
                await first.call_tool("hit", {})  # the two workers took from one bucket
        assert await one.conn.client.pttl(one.key("shared")) > 0  # it expires by itself
        assert buckets_from_env({}) is None
        from_env = buckets_from_env({"MCPKIT_REDIS_URL": redis_url})
        assert isinstance(from_env, RedisBuckets)
        await from_env.aclose()
    finally:
        await one.aclose()
        await two.aclose()


async def test_an_unreachable_store_lets_requests_through_or_refuses_them() -> None:
    class Down:
        async def take(self, key: str, cost: float, rate: float, burst: float) -> float:
            raise ConnectionError("down")

    for fail_open in (True, False):
        app = MCPKit("down")
        app.add_middleware(RateLimit(1, store=Down(), fail_open=fail_open))
        app.tool(lambda: "hit", name="hit")
        async with Client(app) as client:
            if fail_open:
                assert (await client.call_tool("hit", {})).text == "hit"
            else:
                with pytest.raises(MCPError, match="unavailable"):
                    await client.call_tool("hit", {})


# ---------------------------------------------------------------------------------------------- response cache


@BOTH
@ERA
async def test_lists_and_reads_are_cached_by_their_own_hints(transport: str, mode: str) -> None:
    async with connect("cached", transport, mode, cache=False) as client:
        for _ in range(3):
            await client.list_tools()
            await client.read_resource("data://news")
        asked = await _data(client, "asked")
        assert asked["tools/list"] == 1 and asked["reads"] == 1  # one trip to the handler each
        await client.call_tool("grow", {"name": "fresh"})  # a change (told to clients or not) drops the page
        await asyncio.sleep(0.2)
        assert "fresh" in {t.name for t in await client.list_tools()}
        await client.call_tool("touch", {})  # an update drops the read
        await client.read_resource("data://news")
        asked = await _data(client, "asked")
        assert asked["tools/list"] == 2 and asked["reads"] == 2


@ERA
async def test_a_private_cache_entry_is_never_served_to_another_principal(mode: str) -> None:
    app = middleware_apps.build("cached")
    async with serve_http(app) as url:
        async with Client(url, mode=mode, headers={"X-User": "alice"}, cache=False) as alice:
            first = await alice.read_text("data://me")
            again = await alice.read_text("data://me")
            assert first == again and first.startswith("you are alice")  # alice's entry, kept for her
            async with Client(url, mode=mode, headers={"X-User": "mallory"}, cache=False) as mallory:
                theirs = await mallory.read_text("data://me")
                assert theirs.startswith("you are mallory") and "alice" not in theirs
                news = await mallory.read_text("data://news")
            assert news == await alice.read_text("data://news")  # a public entry serves everyone
        if mode == "handshake":
            async with Client(url, mode=mode, cache=False) as anon_one, Client(url, mode=mode, cache=False) as anon_two:
                one, two = await anon_one.read_text("data://me"), await anon_two.read_text("data://me")
                assert one != two  # no principal: private entries are kept per session
                assert one == await anon_one.read_text("data://me")
        else:
            async with Client(url, mode=mode, cache=False) as anon:
                one = await anon.read_text("data://me")
                assert one != await anon.read_text("data://me")  # stateless and anonymous: never kept


@ERA
async def test_a_result_computed_before_a_change_is_not_kept_after_it(mode: str) -> None:
    """A read (or a list page) still running when its resource is updated (or its list changes) answers with what
    it saw, but is not kept: the client told of the change and reading again gets the new value, not the old one
    for the entry's whole ttlMs."""
    app = MCPKit("racy", list_ttl_ms=60_000, list_cache_scope="public")
    app.add_middleware(ResponseCache())
    value = {"now": "old"}
    reading, release = asyncio.Event(), asyncio.Event()

    @app.resource("data://value", ttl_ms=60_000, cache_scope="public")
    async def current() -> str:
        seen = value["now"]
        reading.set()
        await release.wait()
        return seen

    async with Client(app, mode=mode, cache=False) as client:
        in_flight = asyncio.create_task(client.read_text("data://value"))
        await asyncio.wait_for(reading.wait(), 10)
        value["now"] = "new"
        await app.notify_resource_updated("data://value")
        release.set()
        assert await asyncio.wait_for(in_flight, 10) == "old"  # (it read before the change)
        assert await client.read_text("data://value") == "new"

    lists = MCPKit("racy lists", list_ttl_ms=60_000, list_cache_scope="public")
    listing, go_on = asyncio.Event(), asyncio.Event()

    class SlowLists(Middleware):  # an inner middleware that awaits (a lookup) while the page is being made
        async def on_list_tools(self, call: Any, call_next: CallNext) -> Any:
            result = await call_next(call)
            listing.set()
            await go_on.wait()
            return result

    lists.add_middleware(ResponseCache(), SlowLists())
    lists.tool(lambda: 1, name="first")
    async with Client(lists, mode=mode, cache=False) as client:
        in_flight = asyncio.create_task(client.list_tools())
        await asyncio.wait_for(listing.wait(), 10)
        lists.tool(lambda: 2, name="second")
        await lists.notify_list_changed("tools")
        go_on.set()
        assert [t.name for t in await asyncio.wait_for(in_flight, 10)] == ["first"]
        assert {t.name for t in await client.list_tools()} == {"first", "second"}


@ERA
async def test_a_cached_read_is_never_served_to_a_caller_who_may_not_read_it(mode: str) -> None:
    """A resource marked ``public`` for caching, hidden from some principals by a view filter: the cache does
    not hand what alice read to mallory, who may not see it (the read is private while lists and reads differ
    per principal, as the lists are). A resource disabled (or removed) after it was read is not read from the
    cache either."""
    app = MCPKit("payroll")
    app.add_middleware(ResponseCache())

    @app.resource("data://payroll", ttl_ms=60_000, cache_scope="public", tags=["hr"])
    def payroll() -> str:
        return "salaries"

    @app.resource("data://menu", ttl_ms=60_000, cache_scope="public")
    def menu() -> str:
        return "soup"

    app.set_view_filter(lambda item, principal: principal == "alice" or "hr" not in item.tags)
    async with serve_http(app) as url, Client(url, mode=mode, headers={"X-User": "alice"}, cache=False) as alice:
        assert await alice.read_text("data://payroll") == "salaries"
        assert await alice.read_text("data://menu") == "soup"
        async with Client(url, mode=mode, headers={"X-User": "mallory"}, cache=False) as mallory:
            with pytest.raises(MCPError, match="not found"):
                await mallory.read_text("data://payroll")
        app.disable("data://menu")
        await asyncio.sleep(0.2)  # (the change is announced on the next turn of the loop)
        with pytest.raises(MCPError, match="not found"):
            await alice.read_text("data://menu")


def test_the_cache_is_bounded_in_entries_and_bytes() -> None:
    cache = ResponseCache(max_entries=10, max_bytes=2_000, max_entry_bytes=500)
    now = 0.0
    for i in range(50):
        cache._keep(
            {"contents": [{"text": "z" * 100}], "ttlMs": 1000, "cacheScope": "public"},
            ("r", str(i), "v", None),
            None,
            now,
        )
    assert len(cache) == 10 and cache.size_bytes <= 2_000
    cache._keep(
        {"contents": [{"text": "z" * 1000}], "ttlMs": 1000, "cacheScope": "public"}, ("big", None, "v", None), None, now
    )
    assert ("big", None, "v", None) not in cache._entries  # over max_entry_bytes: not kept
    for i in range(50):
        cache._keep({"x": "y" * 300, "ttlMs": 1000, "cacheScope": "public"}, ("s", str(i), "v", None), None, now)
    assert cache.size_bytes <= 2_000 and len(cache) <= 10


# ---------------------------------------------------------------------------------------------- guard


@BOTH
@ERA
async def test_the_guard_bounds_time_and_sizes(transport: str, mode: str) -> None:
    async with connect("guarded", transport, mode) as client:
        late = await client.call_tool("nap", {"seconds": 60})
        assert late.is_error and "no answer within 3 s" in late.text
        assert (await client.call_tool("nap", {"seconds": 0.01})).text == "rested"
        big = await client.call_tool("blob", {"n": 10_000})
        assert big.is_error and "larger than 2000 bytes" in big.text
        long = await client.call_tool("echo", {"text": "w" * 2_000})
        assert long.is_error and "params larger than 1000 bytes" in long.text
        with pytest.raises(MCPError, match="larger than 2000 bytes"):
            await client.read_resource("data://big")
        assert (await client.call_tool("echo", {"text": "ok"})).text == "ok"  # the session goes on


async def test_structured_logging_as_json_and_to_a_sink(caplog: pytest.LogCaptureFixture) -> None:
    records: list[dict[str, Any]] = []
    app = MCPKit("j")
    app.add_middleware(RequestLogging(as_json=True, sink=records.append))
    app.tool(lambda: "x", name="x")
    with caplog.at_level(logging.INFO, logger="mcpkit.requests"):
        async with Client(app) as client:
            await client.call_tool("x", {})
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "mcpkit.requests"]
    calls = [r for r in logged if r["method"] == "tools/call"]
    assert calls and calls[0]["target"] == "x" and calls[0]["outcome"] == "ok"
    assert any(r["method"] == "tools/call" for r in records)


async def test_a_client_chosen_target_cannot_forge_log_lines_or_flood_the_log(caplog: pytest.LogCaptureFixture) -> None:
    """A tool name or URI is the client's: one holding a line break wrote a second, forged line into the text
    log, and one of megabytes went into every record. The line shows it escaped and cut; the record keeps it cut
    too (a sink or JSON handler gets no more than the bound)."""
    records: list[dict[str, Any]] = []
    app = MCPKit("logged")
    app.add_middleware(RequestLogging(sink=records.append))
    app.tool(lambda: "x", name="x")
    forged = "x ok 0.1 ms\nmcpkit.requests INFO tools/call delete_everything ok 0.1 ms"
    with caplog.at_level(logging.INFO, logger="mcpkit.requests"):
        async with Client(app, mode="handshake") as client:
            for name in (forged, "y" * 100_000):
                with pytest.raises(MCPError):
                    await client.session.request("tools/call", {"name": name, "arguments": {}})
    lines = [r.getMessage() for r in caplog.records if r.name == "mcpkit.requests" and "tools/call" in r.getMessage()]
    assert len(lines) == 2 and not any("\n" in line or "\r" in line for line in lines), lines
    assert "\\n" in lines[0]  # (escaped, still readable)
    assert all(len(line) < 600 for line in lines)
    targets = [r["target"] for r in records if r["method"] == "tools/call"]
    assert all(len(t) <= 300 and "\n" not in t for t in targets), [len(t) for t in targets]


def test_a_middleware_hook_of_a_name_that_is_no_hook_is_refused_instead_of_never_running() -> None:
    """``on_tool_call`` (for ``on_call_tool``), or ``on_message`` of another library, was never installed for any
    method, so the middleware silently did nothing: a method that takes a call and ``call_next`` under an ``on_``
    name that is no hook is a ``TypeError`` when the middleware is made, naming the hook meant. Helpers of other
    shapes are left alone, and a subclass that did not call ``Middleware.__init__`` is told so when installed."""

    class Misspelled(Middleware):
        async def on_tool_call(self, call: Any, call_next: CallNext) -> Any:
            return await call_next(call)

    class Ported(Middleware):
        async def on_message(self, call: Any, call_next: CallNext) -> Any:
            return await call_next(call)

    class WithHelper(Middleware):
        def on_refusal(self, reason: str) -> None:  # (one argument: a helper, not a hook)
            self.reason = reason

        async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
            return await call_next(call)

    class NoInit(Middleware):
        def __init__(self) -> None:  # (forgets super().__init__())
            self.count = 0

        async def on_call_tool(self, call: ToolCall, call_next: CallNext) -> Any:
            return await call_next(call)

    with pytest.raises(TypeError, match=r"on_tool_call is no middleware hook.*did you mean on_call_tool"):
        Misspelled()
    with pytest.raises(TypeError, match=r"on_message is no middleware hook.*on_request"):
        Ported()
    app = MCPKit("hooks")
    assert WithHelper().methods == frozenset({"tools/call"})
    with pytest.raises(TypeError, match=r"NoInit\.__init__ must call super\(\).__init__\(\)"):
        app.add_middleware(NoInit())
