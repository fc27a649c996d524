"""The shared configuration of several workers (ScaleConfig: MCPKIT_* variables, flags, code), the key ring that
seals requestState and list cursors (rotation, its bound), and two workers in one process on a real redis-server:
a request's stream resumed on the other worker is followed up to its answer (bounded per worker), readiness and
draining."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit import Context, MCPKit
from mcpkit.protocol.errors import InvalidParams
from mcpkit.server.pagination import Paginator
from mcpkit.server.request_state import MAX_KEYS, RequestStateSealer
from mcpkit.stores.config import ScaleConfig, parse_keys, read_keys_file
from mcpkit.transports.http import create_app
from support.asgi import serve_asgi
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.scale import ACCEPT_BOTH, next_message, open_session, rpc, sse_events

KEY_A = b"a" * 32
KEY_B = b"b" * 40


# ---------------------------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    "url", ["redis://h:6379/0", "redis://:pw@h/3", "rediss://user:pw@h:6380", "redis://h", "unix:///run/redis.sock"]
)
def test_every_redis_url_form_is_accepted(url: str) -> None:
    assert ScaleConfig(redis_url=url, state_keys=(KEY_A,)).redis_url == url


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1:6379/0", "redis://, rediss:// or unix://"),  # each worker died on it, restarted 10 times
        ("reddis://127.0.0.1:6379/0", "redis://, rediss:// or unix://"),
        ("redis://127.0.0.1:63a9/0", "port"),
        ("redis://127.0.0.1:6379/prod", "database number"),  # redis-py took it for database 0 without a word
    ],
)
def test_a_redis_url_redis_cannot_use_is_refused_where_it_is_given(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ScaleConfig(redis_url=url)
    with pytest.raises(ValueError, match=message):
        ScaleConfig.from_env({"MCPKIT_REDIS_URL": url})
    with pytest.raises(ValueError, match=message) as refused:
        ScaleConfig(redis_url=url.replace("://", "://app:s3cret@"))
    assert "s3cret" not in str(refused.value) and "app:***@" in str(refused.value)  # (messages end up in logs)


def test_the_environment_configures_every_setting_and_flags_its_mistakes(tmp_path: Path) -> None:
    assert ScaleConfig.from_env({}) == ScaleConfig()  # nothing set: in-memory, one worker
    assert not ScaleConfig.from_env({}).shared
    keys = tmp_path / "keys"
    keys.write_text(f"# rotated monthly\n{KEY_B.decode()}\n", encoding="utf-8")
    env = {
        "MCPKIT_REDIS_URL": "redis://r:6379/2",
        "MCPKIT_REDIS_CLUSTER": "yes",
        "MCPKIT_REDIS_PREFIX": "app1:",
        "MCPKIT_REDIS_TIMEOUT": "0.25",
        "MCPKIT_STATE_KEYS": f"{KEY_A.decode()}, {KEY_B.decode()}",
        "MCPKIT_STATE_KEYS_FILE": str(keys),
    }
    config = ScaleConfig.from_env(env)
    assert config == ScaleConfig("redis://r:6379/2", True, "app1:", 0.25, (KEY_A, KEY_B))  # (each key once)
    assert ScaleConfig.from_env(config.to_env()) == config  # what --workers hands its workers
    assert KEY_A.decode() not in repr(config) and KEY_B.decode() not in repr(config)  # the keys are not in the repr
    for bad, message in (
        ({"MCPKIT_REDIS_CLUSTER": "maybe"}, "MCPKIT_REDIS_CLUSTER"),
        ({"MCPKIT_REDIS_TIMEOUT": "soon"}, "MCPKIT_REDIS_TIMEOUT"),
        ({"MCPKIT_STATE_KEYS": "short"}, "at least 32"),
        ({"MCPKIT_STATE_KEYS": ",".join(["k" * 32 + str(i) for i in range(MAX_KEYS + 1)])}, "at most 8"),
        ({"MCPKIT_STATE_KEYS_FILE": str(tmp_path / "missing")}, "cannot read"),
        ({"MCPKIT_REDIS_URL": "localhost:6379"}, "not a Redis URL"),
    ):
        with pytest.raises(ValueError, match=message):
            ScaleConfig.from_env(bad)
    (tmp_path / "empty").write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no key"):
        read_keys_file(tmp_path / "empty")
    assert parse_keys("") == ()


def test_a_key_ring_given_in_code_refuses_a_key_shorter_than_32_bytes() -> None:
    short = b"k" * 20
    for build in (
        lambda: ScaleConfig(redis_url="redis://127.0.0.1:1/0", state_keys=(KEY_A, short)),
        lambda: ScaleConfig().with_keys([short]),
        lambda: MCPKit("x", request_state_keys=[short]),
        lambda: RequestStateSealer().adopt([b"k" * 31]),
    ):
        with pytest.raises(ValueError, match="at least 32 bytes") as exc:
            build()
        assert "secrets.token_urlsafe(32)" in str(exc.value)  # how to make one
    with pytest.raises(ValueError, match="at most 8"):
        ScaleConfig(state_keys=(KEY_A,) * (MAX_KEYS + 1))
    with pytest.raises(TypeError, match="bytes"):
        ScaleConfig(state_keys=("a" * 32,))  # type: ignore[arg-type]
    assert ScaleConfig(state_keys=[KEY_A, KEY_B]).state_keys == (KEY_A, KEY_B)  # type: ignore[arg-type]  # (a list: kept as a tuple)
    assert MCPKit("y", request_state_keys=[KEY_A]).request_state.keys == [KEY_A]


def test_a_redis_url_without_shared_keys_is_refused_at_startup() -> None:
    with pytest.raises(ValueError, match="MCPKIT_STATE_KEYS"):
        create_app(MCPKit("x"), config=ScaleConfig(redis_url="redis://127.0.0.1:1/0"))
    app = MCPKit("x", request_state_keys=[KEY_A])  # keys of its own: fine, and kept
    built = create_app(app, config=ScaleConfig(redis_url="redis://127.0.0.1:1/0", state_keys=(KEY_B,)))
    assert app.request_state.keys == [KEY_A] and built.shared is not None


def test_the_default_stays_in_memory() -> None:
    from mcpkit.stores import InMemorySessionStore

    app = MCPKit("x")
    built = create_app(app, config=ScaleConfig())
    assert built.shared is None and built.streamable is not None and built.streamable.shared is None
    assert app.request_state.generated  # a random key of this process
    assert create_app(MCPKit("y"), session_store=InMemorySessionStore()).streamable.shared is None  # type: ignore[union-attr]


def test_a_redis_configuration_keeps_tasks_in_redis_unless_the_server_chose_a_store() -> None:
    from mcpkit.stores.redis import RedisTaskStore
    from mcpkit.tasks import InMemoryTaskStore

    config = ScaleConfig(redis_url="redis://127.0.0.1:1/0", state_keys=(KEY_A,))
    enabled_before = MCPKit("before")
    enabled_before.enable_tasks(max_tasks=7)  # no store named: the deployment's
    built = create_app(enabled_before, config=config)
    assert built.shared is not None and enabled_before.tasks is not None
    assert enabled_before.tasks.engine.store is built.shared.task_store
    assert isinstance(built.shared.task_store, RedisTaskStore) and enabled_before.tasks.engine.max_tasks == 7
    enabled_after = MCPKit("after")
    built = create_app(enabled_after, config=config)
    assert built.shared is not None and enabled_after.enable_tasks().engine.store is built.shared.task_store
    chosen = InMemoryTaskStore(max_records=5)
    own = MCPKit("own")
    own.enable_tasks(chosen)
    create_app(own, config=config)
    assert own.tasks is not None and own.tasks.engine.store is chosen  # a store given explicitly stays
    plain = MCPKit("plain")
    plain.enable_tasks()
    create_app(plain, config=ScaleConfig())  # no Redis: in memory, as before
    assert plain.tasks is not None and isinstance(plain.tasks.engine.store, InMemoryTaskStore)


# ---------------------------------------------------------------------------------------------- the key ring


def test_the_key_ring_rotates_request_state_without_refusing_what_is_in_flight() -> None:
    old = RequestStateSealer([KEY_A])
    token = old.seal({"k": 1})
    step1 = RequestStateSealer([KEY_A, KEY_B])  # the new key added last: it verifies, the old one still signs
    assert step1.open(token)["k"] == 1 and step1.open(step1.seal({"k": 2}))["k"] == 2
    step2 = RequestStateSealer([KEY_B, KEY_A])  # moved first: it signs
    new_token = step2.seal({"k": 3})
    assert step1.open(new_token)["k"] == 3  # a worker still at step 1 opens it
    assert step2.open(token)["k"] == 1
    step3 = RequestStateSealer([KEY_B])  # the old key dropped
    assert step3.open(new_token)["k"] == 3
    with pytest.raises(InvalidParams):
        step3.open(token)
    with pytest.raises(ValueError, match="at most"):
        RequestStateSealer([KEY_A] * (MAX_KEYS + 1))


def test_list_cursors_rotate_with_the_ring_and_an_explicit_key_is_kept() -> None:
    ring = RequestStateSealer()
    assert ring.generated
    pages = Paginator(ring=ring)
    random_cursor = pages.encode("tools", 1, "a")
    assert ring.adopt([KEY_A]) and not ring.generated
    with pytest.raises(InvalidParams):
        pages.decode("tools", random_cursor)  # the process's random key is gone
    cursor_a = pages.encode("tools", 1, "a")
    assert ring.adopt([KEY_B, KEY_A]) is False  # keys given: adopt() does not replace them
    ring.keys = [KEY_B, KEY_A]  # (what a rotation does: a new ring list)
    assert pages.decode("tools", cursor_a) == (1, "a")
    ring.keys = [KEY_B]
    with pytest.raises(InvalidParams):
        pages.decode("tools", cursor_a)
    fixed = Paginator(b"c" * 32, ring=ring)  # an explicit cursor key does not follow the ring
    assert fixed.decode("tools", fixed.encode("tools", 2, "b")) == (2, "b")
    other = MCPKit("w", request_state_keys=[KEY_A])
    assert other.request_state.adopt([KEY_B]) is False and other.request_state.keys == [KEY_A]


# ---------------------------------------------------------------------------------------------- two workers


def _worker_app() -> MCPKit:
    app = MCPKit("scale-inprocess")

    @app.tool
    async def slow(ctx: Context, steps: int = 5, delay_ms: int = 100) -> str:
        for i in range(steps):
            await asyncio.sleep(delay_ms / 1000)
            await ctx.report_progress(i + 1, steps)
        return f"done after {steps} steps"

    return app


@contextlib.asynccontextmanager
async def two_workers(url: str, **options: Any) -> AsyncIterator[tuple[list[str], list[Any]]]:
    config = ScaleConfig(redis_url=url, redis_prefix=f"t{secrets.token_hex(4)}:", state_keys=(KEY_A,))
    apps = [create_app(_worker_app(), config=config, sse=False, ws=False, **options) for _ in range(2)]
    async with contextlib.AsyncExitStack() as stack:
        ports = [await stack.enter_async_context(serve_asgi(app)) for app in apps]
        yield [f"http://127.0.0.1:{port}/mcp" for port in ports], apps


async def _stream_then_resume(http: httpx.AsyncClient, a: str, b: str) -> tuple[list[Any], list[Any]]:
    """A progress-reporting call on A, dropped after two events; the same events resumed on B."""
    headers = await open_session(http, a)
    call = rpc("tools/call", {"name": "slow", "arguments": {"steps": 8}, "_meta": {"progressToken": "p"}}, rid=4)
    first: list[Any] = []
    async with http.stream("POST", a, json=call, headers={**headers, "accept": ACCEPT_BOTH}) as resp:
        events = sse_events(resp.aiter_lines())
        for _ in range(2):
            first.append(await next_message(events))
    resumed: list[Any] = []
    resume = {**headers, "accept": "text/event-stream", "last-event-id": str(first[-1][0])}
    async with http.stream("GET", b, headers=resume) as resp:
        assert resp.status_code == 200
        async for item in sse_events(resp.aiter_lines()):
            if item[1] is not None:
                resumed.append(item)
    return first, resumed


@pytest.mark.redis
@pytest.mark.req("A012")
async def test_a_requests_stream_resumed_on_another_worker_is_followed_to_its_answer(redis_url: str) -> None:  # noqa: F811
    async with two_workers(redis_url) as ((a, b), _), httpx.AsyncClient(timeout=20) as http:
        first, resumed = await _stream_then_resume(http, a, b)
    progress = [m["params"]["progress"] for _, m in first + resumed if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3, 4, 5, 6, 7, 8]  # nothing lost, nothing twice, though A wrote and B sent
    assert resumed[-1][1]["id"] == 4 and resumed[-1][1]["result"]["content"][0]["text"] == "done after 8 steps"


@pytest.mark.redis
async def test_the_streams_a_worker_follows_are_bounded(redis_url: str) -> None:  # noqa: F811
    async with two_workers(redis_url, max_followers=0) as ((a, b), _), httpx.AsyncClient(timeout=20) as http:
        _, resumed = await _stream_then_resume(http, a, b)
    # beyond the bound: what was stored when the client came back, then the end (the client resumes again later)
    assert all(m.get("method") == "notifications/progress" for _, m in resumed) and len(resumed) < 6
    assert not any("result" in m for _, m in resumed)


@pytest.mark.redis
async def test_readiness_and_draining(redis_url: str) -> None:  # noqa: F811
    async with two_workers(redis_url) as ((a, b), apps), httpx.AsyncClient(timeout=20) as http:
        base = a.rsplit("/", 1)[0]
        assert (await http.get(base + "/healthz")).json() == {"status": "ok"}
        ready = await http.get(base + "/readyz", headers={"host": "elsewhere.example"})  # (no Host check there)
        assert ready.status_code == 200 and ready.json()["status"] == "ready" and ready.json()["worker"] > 0
        assert (await http.post(base + "/readyz")).status_code == 405
        headers = await open_session(http, a)
        async with http.stream("GET", a, headers={**headers, "accept": "text/event-stream"}) as stream:
            lines = stream.aiter_lines()
            await apps[0].drain(retry_ms=250)  # what SIGTERM does first
            rest = [line async for line in lines]
        assert "retry: 250" in rest  # the client is told when to come back (to another worker)
        drained = await http.get(base + "/readyz")
        assert drained.status_code == 503 and drained.json()["reason"] == "draining"
        refused = await http.get(a, headers={**headers, "accept": "text/event-stream"})
        assert refused.status_code == 503 and refused.headers["retry-after"] == "1"
        resume = {**headers, "accept": "text/event-stream", "last-event-id": "g1-0"}
        async with http.stream("GET", b, headers=resume) as other:
            assert other.status_code == 200  # the other worker serves the session's stream
            events = sse_events(other.aiter_lines())
            _, notice = await next_message(events)  # (an id older than the log: "look again" first)
            assert notice["method"] == "notifications/tools/list_changed"


class SlowSaves:
    """A session store whose saves take 0.3 s (a slow Redis): what a record written after the answer would race."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def save(self, session_id: str, state: dict[str, Any], ttl: float | None) -> None:
        await asyncio.sleep(0.3)
        await self.store.save(session_id, state, ttl)

    async def load(self, session_id: str) -> dict[str, Any] | None:
        result: dict[str, Any] | None = await self.store.load(session_id)
        return result

    async def delete(self, session_id: str) -> None:
        await self.store.delete(session_id)


@pytest.mark.redis
async def test_a_session_is_recorded_before_its_initialize_is_answered(redis_url: str) -> None:  # noqa: F811
    """The next request of a new session may reach another worker at once (a balancer): the record is written
    before the initialize answer leaves, so that worker finds it."""
    from mcpkit.stores.redis import RedisSessionStore

    store = RedisSessionStore(redis_url, prefix=f"t{secrets.token_hex(4)}:")
    try:
        async with (
            two_workers(redis_url, session_store=SlowSaves(store)) as ((a, b), _),
            httpx.AsyncClient(timeout=20) as http,
        ):
            init = rpc(
                "initialize",
                {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "r", "version": "0"}},
            )
            answer = await http.post(a, json=init, headers={"accept": ACCEPT_BOTH})
            assert answer.status_code == 200
            headers = {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-11-25"}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            done = await http.post(b, json=note, headers={**headers, "accept": ACCEPT_BOTH})
            assert done.status_code == 202, done.text
    finally:
        await store.aclose()


@pytest.mark.redis
async def test_cancellations_logged_for_the_other_workers_are_bounded(redis_url: str) -> None:  # noqa: F811
    """A client's cancellation of a request that does not run on the worker it reached is logged for every
    worker; a flood of them is cut at 20 a second per session (each costs every worker a read)."""
    from mcpkit.transports.http.shared import MAX_LOGGED_CANCELS

    async with two_workers(redis_url) as ((a, b), apps), httpx.AsyncClient(timeout=20) as http:
        init = rpc(
            "initialize",
            {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "c", "version": "0"}},
        )
        answer = await http.post(a, json=init, headers={"accept": ACCEPT_BOTH})
        headers = {"mcp-session-id": answer.headers["mcp-session-id"], "mcp-protocol-version": "2025-03-26"}
        cancels = [
            {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": f"r{i}"}}
            for i in range(100)
        ]
        started = time.monotonic()
        flood = await http.post(b, json=cancels, headers={**headers, "accept": ACCEPT_BOTH})  # a batch (2025-03-26)
        assert flood.status_code == 202
        windows = int(time.monotonic()) - int(started) + 1  # the whole seconds the flood touched (the limit's windows)
        fanout = apps[1].server.fanout
        entries = await fanout.conn.client.xrange(fanout.log_key, "-", "+")
        logged = [f for _, f in entries if f.get(b"e") == b"cancel"]
        assert windows < len(cancels) // MAX_LOGGED_CANCELS, f"the flood took {windows} s: too slow to test the limit"
        assert 0 < len(logged) <= MAX_LOGGED_CANCELS * windows, (len(logged), windows)
