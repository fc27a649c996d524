"""Several `mcpkit run examples/everything.py -t http` processes configured by the environment (MCPKIT_REDIS_URL,
MCPKIT_STATE_KEYS: the way an ASGI deployment is configured) share one Redis, and a client that sends each request
to another worker sees one server: a server->client request sent by worker A is answered through worker B and
reaches the handler waiting on A; request ids name their worker; the standalone GET stream is served by any worker
and resumed on any other from its Last-Event-ID; a cancellation sent to the wrong worker reaches the right one.
Against a single redis-server and against a three-primary Redis Cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mcpkit.stores.log import ID_SHIFT, position_order, worker_of
from support.redis_server import redis_cluster_url, redis_url  # noqa: F401  (the session fixtures)
from support.scale import ACCEPT_BOTH, Workers, next_message, open_session, rpc, sse_events

pytestmark = pytest.mark.redis

SAMPLING_ANSWER = {"role": "assistant", "content": {"type": "text", "text": "forty-two"}, "model": "m"}


@pytest.fixture(scope="module", params=["redis", "cluster"])
def workers(request: pytest.FixtureRequest) -> Iterator[Workers]:
    cluster = request.param == "cluster"
    url = request.getfixturevalue("redis_cluster_url" if cluster else "redis_url")
    with Workers(url, 2, cluster=cluster) as started:
        yield started


async def _call_answered_elsewhere(
    http: httpx.AsyncClient, runs_on: str, answers_on: str, headers: dict[str, str], tool: str, answer: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Call ``tool`` on one worker, answer its server->client request through the other; (request, result)."""
    call = rpc("tools/call", {"name": tool, "arguments": {"prompt": "6 x 7?"} if tool == "sample" else {}}, rid=5)
    async with http.stream("POST", runs_on, json=call, headers={**headers, "accept": ACCEPT_BOTH}) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp.aiter_lines())
        _, request = await next_message(events)
        posted = await http.post(
            answers_on,
            json={"jsonrpc": "2.0", "id": request["id"], "result": answer},
            headers={**headers, "accept": ACCEPT_BOTH},
        )
        assert posted.status_code == 202, posted.text
        _, result = await next_message(events)
    return request, result


@pytest.mark.req("S025")
async def test_a_sampling_request_sent_by_worker_a_is_answered_through_worker_b(workers: Workers) -> None:
    a, b = workers.urls
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await open_session(http, a, caps={"sampling": {}, "elicitation": {}})
        request, result = await _call_answered_elsewhere(http, a, b, headers, "sample", SAMPLING_ANSWER)
        assert request["method"] == "sampling/createMessage"
        assert result["id"] == 5 and result["result"]["content"] == [{"type": "text", "text": "forty-two"}]
        # and the other way round, with elicitation: B asks, A takes the answer
        request, result = await _call_answered_elsewhere(
            http, b, a, headers, "ask_name", {"action": "accept", "content": {"name": "Ada"}}
        )
        assert request["method"] == "elicitation/create"
        assert result["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]


async def test_request_ids_are_unique_across_workers_and_name_their_worker(workers: Workers) -> None:
    a, b = workers.urls
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await open_session(http, a, caps={"sampling": {}})
        ids = []
        for runs_on, answers_on in ((a, b), (b, a), (a, a), (b, b)):
            request, _ = await _call_answered_elsewhere(http, runs_on, answers_on, headers, "sample", SAMPLING_ANSWER)
            ids.append(request["id"])
        assert len(set(ids)) == 4  # one session, two workers: no id twice
        assert {worker_of(i) for i in ids[0::2]} != {worker_of(i) for i in ids[1::2]}  # A's and B's
        assert all(isinstance(i, int) and i >> ID_SHIFT and i < 2**53 for i in ids)


async def test_an_answer_for_another_session_does_not_resolve_this_sessions_request(workers: Workers) -> None:
    """A forwarded answer goes into the session it was posted for: another session (another client) cannot answer
    a request it was not sent, even knowing its id."""
    a, b = workers.urls
    async with httpx.AsyncClient(timeout=20) as http:
        alice = await open_session(http, a, caps={"sampling": {}})
        mallory = await open_session(http, b, caps={"sampling": {}})
        call = rpc("tools/call", {"name": "sample", "arguments": {"prompt": "secret?"}}, rid=9)
        async with http.stream("POST", a, json=call, headers={**alice, "accept": ACCEPT_BOTH}) as resp:
            events = sse_events(resp.aiter_lines())
            _, request = await next_message(events)
            forged = {
                "jsonrpc": "2.0",
                "id": request["id"],
                "result": {**SAMPLING_ANSWER, "content": {"type": "text", "text": "forged"}},
            }
            assert (await http.post(b, json=forged, headers={**mallory, "accept": ACCEPT_BOTH})).status_code == 202
            await asyncio.sleep(0.5)
            real = {"jsonrpc": "2.0", "id": request["id"], "result": SAMPLING_ANSWER}
            assert (await http.post(b, json=real, headers={**alice, "accept": ACCEPT_BOTH})).status_code == 202
            _, result = await next_message(events)
        assert result["result"]["content"] == [{"type": "text", "text": "forty-two"}]


@pytest.mark.req("A011", "A012", "S025")
async def test_the_get_stream_is_served_by_any_worker_and_resumed_on_another(workers: Workers) -> None:
    a, b = workers.urls
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await open_session(http, a)
        subscribe = rpc("resources/subscribe", {"uri": "mcpkit://counter"}, rid=2)
        assert (await http.post(b, json=subscribe, headers={**headers, "accept": ACCEPT_BOTH})).status_code == 200
        touch = rpc("tools/call", {"name": "touch", "arguments": {}}, rid=3)
        got: list[tuple[str | None, dict[str, Any]]] = []
        async with http.stream("GET", b, headers={**headers, "accept": "text/event-stream"}) as stream:
            assert stream.status_code == 200
            events = sse_events(stream.aiter_lines())
            for _ in range(3):  # changes made through A reach the stream held by B
                assert (await http.post(a, json=touch, headers={**headers, "accept": ACCEPT_BOTH})).status_code == 200
                got.append(await next_message(events))
        for _ in range(4):  # while no stream is open anywhere
            assert (await http.post(b, json=touch, headers={**headers, "accept": ACCEPT_BOTH})).status_code == 200
        resume = {**headers, "accept": "text/event-stream", "last-event-id": str(got[-1][0])}
        async with http.stream("GET", a, headers=resume) as stream:
            assert stream.status_code == 200
            events = sse_events(stream.aiter_lines())
            for _ in range(4):
                got.append(await next_message(events))
            assert (await http.post(b, json=touch, headers={**headers, "accept": ACCEPT_BOTH})).status_code == 200
            got.append(await next_message(events))
        assert [m["method"] for _, m in got] == ["notifications/resources/updated"] * 8
        ids = [i or "" for i, _ in got]
        assert all(i.startswith("g") for i in ids) and len(set(ids)) == 8  # log positions: none lost, none twice
        assert [position_order(i[1:]) for i in ids] == sorted(position_order(i[1:]) for i in ids)
        await http.delete(a, headers=headers)


async def test_a_cancellation_sent_to_another_worker_stops_the_request(workers: Workers) -> None:
    a, b = workers.urls
    async with httpx.AsyncClient(timeout=20) as http:
        headers = await open_session(http, a)
        slow = rpc("tools/call", {"name": "slow", "arguments": {"steps": 100, "delay_ms": 50}}, rid="slow-1")

        async def call() -> httpx.Response:
            return await http.post(a, json=slow, headers={**headers, "accept": ACCEPT_BOTH})

        task = asyncio.create_task(call())
        await asyncio.sleep(0.5)
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1"}}
        assert (await http.post(b, json=cancel, headers={**headers, "accept": ACCEPT_BOTH})).status_code == 202
        started = asyncio.get_running_loop().time()
        response = await asyncio.wait_for(task, 4)  # far less than the 5 s the call would take
        assert asyncio.get_running_loop().time() - started < 3
        assert response.status_code in (200, 202) and "done after" not in response.text
