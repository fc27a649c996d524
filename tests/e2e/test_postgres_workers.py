"""Two worker PROCESSES, one PostgreSQL, one MCP endpoint: a handshake session created on worker A is used on
worker B, a change made through one reaches the clients held by the other (both eras), and a standalone SSE stream
resumes with ``Last-Event-ID`` on the other worker.

Workers are launched two ways: ``python tests/support/store_server.py worker postgres <url> <port> <name>`` (uvicorn +
``create_app`` given a PostgresFanout, a PostgresEventStore and a PostgresSessionStore) and ``mcpkit run <file>
--transport http --postgres <url>`` (the stores built by ``create_app`` from the configuration).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import httpx
import orjson
import pytest

from mcpkit.stores.log import position_order
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.scale import Workers

from . import test_scale_workers as scale
from .test_stores_workers import (
    _events,
    _initialize,
    _rpc,
    _tool_text,
    a_change_reaches_a_listen_stream_on_the_other_worker,
    a_subscription_made_on_a_reaches_the_get_stream_on_b,
    workers_on,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module", params=["uvicorn", "mcpkit-run"])
def workers(
    request: pytest.FixtureRequest,
    postgres_url: str,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    with workers_on("postgres", request.param, postgres_url, tmp_path_factory.mktemp("pg-workers")) as urls:
        yield urls


@pytest.mark.req("S025")
async def test_a_handshake_session_created_on_a_is_used_on_b_and_deleted_everywhere(workers: dict[str, str]) -> None:
    a, b = workers["A"], workers["B"]
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await _initialize(http, a)
        assert _tool_text(await _rpc(http, b, headers, "tools/call", {"name": "whoami"})) == "B"
        assert (await _rpc(http, b, headers, "logging/setLevel", {"level": "debug"})).status_code == 200
        assert _tool_text(await _rpc(http, a, headers, "tools/call", {"name": "whoami"})) == "A"
        assert (await http.delete(a, headers=headers)).status_code == 200
        assert (await _rpc(http, b, headers, "tools/call", {"name": "whoami"})).status_code == 404


@pytest.mark.req("S025")
async def test_a_notification_from_one_worker_reaches_the_get_stream_on_the_other(workers: dict[str, str]) -> None:
    await a_subscription_made_on_a_reaches_the_get_stream_on_b(workers)


@pytest.mark.req("S025", "M055")
async def test_a_change_on_one_worker_reaches_a_listen_stream_on_the_other(workers: dict[str, str]) -> None:
    await a_change_reaches_a_listen_stream_on_the_other_worker(workers)


@pytest.mark.req("A011", "A012")
async def test_a_standalone_stream_resumes_on_the_other_worker_with_what_it_missed(workers: dict[str, str]) -> None:
    a, b = workers["A"], workers["B"]
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await _initialize(http, a)
        async with http.stream("GET", b, headers={**headers, "accept": "text/event-stream"}) as stream:
            lines = stream.aiter_lines()
            await asyncio.wait_for(_events(lines, 1), 20)  # priming
            _tool_text(
                await _rpc(http, a, headers, "tools/call", {"name": "add_tool", "arguments": {"tool_name": "pr1"}})
            )
            ((first_id, _),) = await asyncio.wait_for(_events(lines, 1), 20)
        # the connection is gone; changes happen meanwhile, on both workers
        _tool_text(await _rpc(http, b, headers, "tools/call", {"name": "add_tool", "arguments": {"tool_name": "pr2"}}))
        _tool_text(await _rpc(http, a, headers, "tools/call", {"name": "add_tool", "arguments": {"tool_name": "pr3"}}))
        resume = {**headers, "accept": "text/event-stream", "last-event-id": str(first_id)}
        async with http.stream("GET", a, headers=resume) as stream:  # reconnecting to the OTHER worker
            assert stream.status_code == 200
            missed = await asyncio.wait_for(_events(stream.aiter_lines(), 2), 20)
        assert [orjson.loads(d)["method"] for _, d in missed] == ["notifications/tools/list_changed"] * 2
        ids = [str(first_id)] + [str(i) for i, _ in missed]
        assert len(set(ids)) == 3 and all(i.startswith("g") for i in ids)  # log positions, in order
        assert [position_order(i[1:]) for i in ids] == sorted(position_order(i[1:]) for i in ids)
        await http.delete(a, headers=headers)


# ---------------------------------------------------------------------------------------------- examples/everything.py
# The scale-out tests of tests/e2e/test_scale_workers.py, run unchanged on `mcpkit run examples/everything.py`
# workers configured by the environment with MCPKIT_POSTGRES_URL instead of MCPKIT_REDIS_URL: a server->client
# request answered through the other worker (the answer goes through the waiting worker's inbox rows), a
# cancellation sent to the other worker (logged), the GET stream served by either and resumed on the other.


@pytest.fixture(scope="module")
def everything_workers(postgres_url: str) -> Iterator[Workers]:  # noqa: F811
    env = {
        "MCPKIT_REDIS_URL": "",
        "MCPKIT_POSTGRES_URL": postgres_url,
        "MCPKIT_POSTGRES_PREFIX": f"ev{secrets.token_hex(3)}_",
    }
    with Workers("", 2, env=env) as started:
        yield started


@pytest.mark.req("S025")
async def test_a_server_request_sent_by_one_worker_is_answered_through_the_other(
    everything_workers: Workers,
) -> None:
    await scale.test_a_sampling_request_sent_by_worker_a_is_answered_through_worker_b(everything_workers)


async def test_an_answer_posted_for_another_session_resolves_nothing_of_this_one(everything_workers: Workers) -> None:
    await scale.test_an_answer_for_another_session_does_not_resolve_this_sessions_request(everything_workers)


@pytest.mark.req("A011", "A012", "S025")
async def test_the_get_stream_of_everything_is_served_by_either_worker_and_resumed_on_the_other(
    everything_workers: Workers,
) -> None:
    await scale.test_the_get_stream_is_served_by_any_worker_and_resumed_on_another(everything_workers)


async def test_a_cancellation_sent_to_the_other_worker_stops_the_request(everything_workers: Workers) -> None:
    await scale.test_a_cancellation_sent_to_another_worker_stops_the_request(everything_workers)
