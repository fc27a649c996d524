"""A PostgreSQL configuration (ScaleConfig: MCPKIT_POSTGRES_* variables, ``mcpkit run --postgres``, code): URLs
checked where they are given and shown without their password, Redis and PostgreSQL never both, and what
``create_app`` builds from it on a real PostgreSQL (every store, the task store too, on one pool)."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys

import httpx
import pytest

from mcpkit import MCPKit
from mcpkit.stores.config import ScaleConfig
from mcpkit.transports.http import create_app
from support.asgi import serve_asgi
from support.paths import REPO
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)

from .test_config import _stream_then_resume, _worker_app

KEY = b"p" * 32


def test_the_environment_configures_postgres_and_hands_it_to_workers() -> None:
    env = {
        "MCPKIT_POSTGRES_URL": "postgresql://app:pw@db:5432/mcp",
        "MCPKIT_POSTGRES_PREFIX": "app1_",
        "MCPKIT_POSTGRES_TIMEOUT": "2.5",
        "MCPKIT_POSTGRES_POOL_SIZE": "4",
        "MCPKIT_STATE_KEYS": KEY.decode(),
    }
    config = ScaleConfig.from_env(env)
    assert (config.postgres_url, config.postgres_prefix, config.postgres_timeout, config.postgres_pool_size) == (
        "postgresql://app:pw@db:5432/mcp",
        "app1_",
        2.5,
        4,
    )
    assert config.shared and config.redis_url is None
    assert ScaleConfig.from_env(config.to_env()) == config  # what --workers hands its workers
    assert config.with_keys([b"q" * 32]).postgres_url == config.postgres_url
    for bad, message in (
        ({"MCPKIT_POSTGRES_TIMEOUT": "soon"}, "MCPKIT_POSTGRES_TIMEOUT"),
        ({"MCPKIT_POSTGRES_POOL_SIZE": "many"}, "MCPKIT_POSTGRES_POOL_SIZE"),
        ({"MCPKIT_POSTGRES_URL": "postgresql://h/db", "MCPKIT_POSTGRES_POOL_SIZE": "1000"}, "between 1 and 100"),
        ({"MCPKIT_POSTGRES_URL": "mysql://u:pw@h/db"}, "not a PostgreSQL URL"),
    ):
        with pytest.raises(ValueError, match=message):
            ScaleConfig.from_env(bad)


def test_a_url_that_is_not_postgres_is_refused_without_showing_its_password() -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL URL") as refused:
        ScaleConfig(postgres_url="http://app:s3cret@db:5432/mcp")
    assert "s3cret" not in str(refused.value) and "app:***@" in str(refused.value)


def test_redis_and_postgres_together_are_refused_with_both_passwords_hidden() -> None:
    with pytest.raises(ValueError, match="one of them") as refused:
        ScaleConfig(redis_url="redis://:r3dis@r:6379/0", postgres_url="postgresql://app:s3cret@db/mcp")
    assert "s3cret" not in str(refused.value) and "r3dis" not in str(refused.value)
    with pytest.raises(ValueError, match="one of them"):
        ScaleConfig.from_env({"MCPKIT_REDIS_URL": "redis://r/0", "MCPKIT_POSTGRES_URL": "postgresql://db/mcp"})


def test_mcpkit_run_takes_postgres_for_http_only_and_refuses_it_with_redis() -> None:
    server = REPO / "tests" / "support" / "servers" / "core_server.py"
    base = [sys.executable, "-m", "mcpkit.cli.main", "run", str(server)]
    stdio = subprocess.run([*base, "--postgres", "postgresql://db/mcp"], capture_output=True, timeout=60, text=True)
    assert stdio.returncode == 2 and "--postgres are for the HTTP transports" in stdio.stderr, stdio.stderr
    both = subprocess.run(
        [*base, "-t", "http", "--port", "0", "--redis", "redis://r/0", "--postgres", "postgresql://u:s3cret@db/m"],
        capture_output=True,
        timeout=60,
        text=True,
    )
    assert both.returncode == 2 and "one of them" in both.stderr and "s3cret" not in both.stderr, both.stderr
    alone = subprocess.run([*base, "-t", "http", "--workers", "2"], capture_output=True, timeout=60, text=True)
    assert alone.returncode == 2 and "--postgres URL" in alone.stderr, alone.stderr


async def test_create_app_builds_every_postgres_store_on_one_pool(postgres_url: str) -> None:  # noqa: F811
    from mcpkit.stores.postgres import (
        PostgresConnection,
        PostgresEventStore,
        PostgresFanout,
        PostgresSessionStore,
        PostgresTaskStore,
    )

    with pytest.raises(ValueError, match="MCPKIT_STATE_KEYS"):
        create_app(MCPKit("x"), config=ScaleConfig(postgres_url=postgres_url))
    app = MCPKit("x")
    built = create_app(app, config=ScaleConfig(postgres_url=postgres_url, state_keys=(KEY,)))
    shared = built.shared
    assert shared is not None and isinstance(shared.connection, PostgresConnection)
    assert isinstance(shared.session_store, PostgresSessionStore) and shared.session_store.conn is shared.connection
    assert isinstance(shared.event_store, PostgresEventStore) and shared.event_store.conn is shared.connection
    assert isinstance(shared.fanout, PostgresFanout) and app.fanout is shared.fanout
    assert isinstance(shared.task_store, PostgresTaskStore) and shared.task_store.conn is shared.connection
    assert app.task_store is shared.task_store  # tasks every worker serves
    assert built.streamable is not None and built.streamable.shared is not None  # any worker serves any request
    await shared.fanout.start()
    assert await built.not_ready() is None
    await shared.fanout.aclose()
    await shared.aclose()


@pytest.mark.req("A012")
async def test_a_requests_stream_resumed_on_another_worker_is_followed_to_its_answer(postgres_url: str) -> None:  # noqa: F811
    # two workers in one process on one PostgreSQL: A runs the call and writes its stream, the client drops it and
    # resumes on B, which follows A's stream in the event store up to the answer
    config = ScaleConfig(postgres_url=postgres_url, postgres_prefix=f"t{secrets.token_hex(4)}_", state_keys=(KEY,))
    apps = [create_app(_worker_app(), config=config, sse=False, ws=False) for _ in range(2)]
    async with contextlib.AsyncExitStack() as stack:
        ports = [await stack.enter_async_context(serve_asgi(app)) for app in apps]
        a, b = (f"http://127.0.0.1:{port}/mcp" for port in ports)
        async with httpx.AsyncClient(timeout=20) as http:
            first, resumed = await _stream_then_resume(http, a, b)
    progress = [m["params"]["progress"] for _, m in first + resumed if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3, 4, 5, 6, 7, 8]  # nothing lost, nothing twice, though A wrote and B sent
    assert resumed[-1][1]["id"] == 4 and resumed[-1][1]["result"]["content"][0]["text"] == "done after 8 steps"
