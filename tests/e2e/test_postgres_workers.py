"""``mcpkit run examples/everything.py`` workers on one PostgreSQL, configured by the environment: the scale-out tests
of tests/e2e/test_scale_workers.py run unchanged on them. (What a PostgreSQL store does for two workers of the test
server, it does as Redis does: tests/e2e/test_stores_workers.py runs those tests over both.)
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.scale import Workers

from . import test_scale_workers as scale

pytestmark = pytest.mark.postgres


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
