"""The handshake era's stateless endpoint (no sessions): a client's ``notifications/cancelled`` for one of its calls
still running, sent as a POST of its own. Real uvicorn on 127.0.0.1, bearer tokens checked by ``protect``, raw
httpx clients."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from mcpkit.auth import protect
from mcpkit.auth.verifiers import AccessToken, StaticTokenVerifier
from mcpkit.stores.redis import RedisFanout
from mcpkit.transports.http import handshake
from support.mcp_http import Probe, handshake_headers, initialize_body, make_server, messages, running, sse_events
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.sse import eventually

V = "2025-11-25"
RESOURCE = "http://127.0.0.1/mcp"


def call(rid: int, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


def cancelled(rid: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "test"}}


def protected(app: Any) -> Any:
    """``app`` behind bearer tokens: alice and bob (two principals of one client), eve (alice's subject, another
    issuer)."""
    verifier = StaticTokenVerifier(
        {
            "tok-alice": AccessToken("tok-alice", client_id="c", subject="alice", audience=(RESOURCE,)),
            "tok-alice-2": AccessToken("tok-alice-2", client_id="c", subject="alice", audience=(RESOURCE,)),
            "tok-bob": AccessToken("tok-bob", client_id="c", subject="bob", audience=(RESOURCE,)),
        }
    )
    return protect(app, resource=RESOURCE, verifier=verifier, check_audience=False)


@contextlib.asynccontextmanager
async def client(token: str | None) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=10, headers=headers) as http:
        yield http


async def test_a_stateless_call_is_cancelled_by_its_principal_and_by_no_one_else() -> None:
    """Bob's cancellation of id 7 leaves alice's call 7 running; alice's own (another token, the same principal)
    stops it: the handler sees the cancellation, the POST's stream ends without an answer, and the table of running
    calls is empty again."""
    probe = Probe()
    async with (
        running(make_server(probe), stateless=True, wrap=protected) as (base, app),
        client("tok-alice") as alice,
        client("tok-alice-2") as alice_again,
        client("tok-bob") as bob,
    ):
        url = base + "/mcp"
        h = handshake_headers(None, V)
        post = asyncio.create_task(alice.post(url, json=call(7, "hang"), headers=h))
        await asyncio.wait_for(probe.started.wait(), 5)
        assert (await bob.post(url, json=cancelled(7), headers=h)).status_code == 202
        await asyncio.sleep(0.2)
        assert probe.cancelled == [] and not post.done()
        assert (await alice_again.post(url, json=cancelled(7), headers=h)).status_code == 202
        r = await asyncio.wait_for(post, 5)
        assert probe.cancelled == [7]
        assert [m for m in messages(sse_events(r.text)) if "id" in m] == []  # no answer for a cancelled request
        assert app.streamable.handshake.stateless_calls.count == 0
        r = await alice.post(url, json=call(8, "echo", {"text": "still here"}), headers=h)
        assert orjson.loads(r.content)["result"]["content"][0]["text"] == "still here"


async def test_an_anonymous_stateless_call_is_not_cancelled_by_request_id() -> None:
    """Without authentication nothing tells the client that sent a call from any other one: a cancellation naming
    its id (which any client may send) leaves it running to its answer."""
    probe = Probe()
    async with running(make_server(probe), stateless=True) as (base, app), client(None) as http:
        url = base + "/mcp"
        h = handshake_headers(None, V)
        post = asyncio.create_task(http.post(url, json=call(9, "progress", {"steps": 4, "delay": 0.1}), headers=h))
        await asyncio.sleep(0.15)
        assert (await http.post(url, json=cancelled(9), headers=h)).status_code == 202
        r = await asyncio.wait_for(post, 5)
        answer = messages(sse_events(r.text))[-1]
        assert answer["id"] == 9 and answer["result"]["content"][0]["text"] == "done 4"
        assert app.streamable.handshake.stateless_calls.count == 0


async def test_a_cancellation_naming_an_id_two_calls_of_the_principal_share_cancels_neither() -> None:
    """Two calls of one principal under one id (two processes of one service account numbering from 1): which one
    the cancellation meant is unknown, so both run to their answers; the table is empty afterwards."""
    probe = Probe()
    async with (
        running(make_server(probe), stateless=True, wrap=protected) as (base, app),
        client("tok-alice") as alice,
    ):
        calls = app.streamable.handshake.stateless_calls
        url = base + "/mcp"
        h = handshake_headers(None, V)
        posts = [asyncio.create_task(alice.post(url, json=call(3, "hang"), headers=h)) for _ in range(2)]
        await eventually(lambda: calls.count == 2)  # both running (they hang until released)
        assert (await alice.post(url, json=cancelled(3), headers=h)).status_code == 202  # (answered once it is applied)
        probe.release.set()
        for r in await asyncio.wait_for(asyncio.gather(*posts), 5):
            assert messages(sse_events(r.text))[-1]["result"]["content"][0]["text"] == "woke"
        assert probe.cancelled == [] and calls.count == 0


async def test_the_table_of_cancellable_stateless_calls_is_bounded() -> None:
    """Past the table's bound a call still runs and answers, it only cannot be cancelled; one registered
    before the table filled still can."""
    probe = Probe()
    async with (
        running(make_server(probe), stateless=True, wrap=protected) as (base, app),
        client("tok-alice") as alice,
    ):
        calls = app.streamable.handshake.stateless_calls
        calls.limit = 1
        url = base + "/mcp"
        h = handshake_headers(None, V)
        first = asyncio.create_task(alice.post(url, json=call(1, "hang"), headers=h))
        await asyncio.wait_for(probe.started.wait(), 5)
        assert calls.count == 1
        second = asyncio.create_task(alice.post(url, json=call(2, "progress", {"steps": 3, "delay": 0.1}), headers=h))
        await asyncio.sleep(0.1)
        assert calls.count == 1  # the second is not in the table
        assert (await alice.post(url, json=cancelled(2), headers=h)).status_code == 202
        r = await asyncio.wait_for(second, 5)
        assert messages(sse_events(r.text))[-1]["result"]["content"][0]["text"] == "done 3"
        assert (await alice.post(url, json=cancelled(1), headers=h)).status_code == 202
        await asyncio.wait_for(first, 5)
        assert probe.cancelled == [1] and calls.count == 0
    assert handshake.MAX_STATELESS_CALLS == 10_000


@pytest.mark.redis
async def test_a_stateless_cancellation_reaching_another_worker_cancels_the_call(redis_url: str) -> None:  # noqa: F811
    """Two workers sharing a Redis fan-out: alice's call runs on worker A, her cancellation reaches worker B (a
    balancer sends each POST anywhere), which logs it; A cancels the call. Bob's, logged the same way, does not."""
    prefix = f"stateless-{secrets.token_hex(4)}:"
    probe = Probe()
    async with (
        running(make_server(probe), stateless=True, wrap=protected, fanout=RedisFanout(redis_url, prefix=prefix)) as (
            a,
            app_a,
        ),
        running(make_server(), stateless=True, wrap=protected, fanout=RedisFanout(redis_url, prefix=prefix)) as (
            b,
            _,
        ),
        client("tok-alice") as alice,
        client("tok-bob") as bob,
    ):
        h = handshake_headers(None, V)
        post = asyncio.create_task(alice.post(a + "/mcp", json=call(7, "hang"), headers=h))
        await asyncio.wait_for(probe.started.wait(), 5)
        assert (await bob.post(b + "/mcp", json=cancelled(7), headers=h)).status_code == 202
        await asyncio.sleep(0.5)
        assert probe.cancelled == [] and not post.done()
        assert (await alice.post(b + "/mcp", json=cancelled(7), headers=h)).status_code == 202
        r = await asyncio.wait_for(post, 5)
        assert probe.cancelled == [7]
        assert [m for m in messages(sse_events(r.text)) if "id" in m] == []
        assert app_a.streamable.handshake.stateless_calls.count == 0


async def test_a_stateless_endpoint_declares_no_notification_it_cannot_deliver() -> None:
    """Stateless HTTP has no session and no GET stream (405): no ``notifications/resources/updated`` or
    ``list_changed`` can reach a client, so ``initialize`` declares neither ``resources.subscribe`` nor any
    ``listChanged`` (it declared both, and a client trusting them waited for updates forever), and
    ``resources/subscribe`` is refused with the reason instead of an empty success."""
    from mcpkit import MCPKit

    app = MCPKit("stateless-caps")

    @app.tool
    def echo(text: str) -> str:
        return text

    @app.resource("data://one")
    def one() -> str:
        return "1"

    @app.prompt
    def greet() -> str:
        return "hi"

    def answer(r: httpx.Response) -> dict[str, Any]:
        return messages(sse_events(r.text))[-1] if r.text.startswith(("event", "id", "data")) else r.json()

    for stateless in (False, True):
        async with running(app, stateless=stateless) as (base, _), client(None) as http:
            url = base + "/mcp"
            r = await http.post(url, json=initialize_body(V), headers=handshake_headers(None, V))
            caps = answer(r)["result"]["capabilities"]
            if not stateless:  # (the same app with sessions declares them: the difference is the transport's)
                assert caps["resources"].get("subscribe") and caps["tools"].get("listChanged"), caps
                continue
            assert r.headers.get("mcp-session-id") is None
            assert "subscribe" not in caps["resources"] and "listChanged" not in caps["resources"], caps
            assert "listChanged" not in caps["tools"] and "listChanged" not in caps["prompts"], caps
            sub = {"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "data://one"}}
            err = answer(await http.post(url, json=sub, headers=handshake_headers(None, V)))["error"]
            assert err["code"] == -32601 and "stateless" in err["message"], err


async def test_one_request_of_a_stateless_batch_is_cancelled_by_its_principal() -> None:
    """2025-03-26 batches: each request of an authenticated caller's batch is kept like a single call, so that
    caller's ``notifications/cancelled`` naming one stops that one (no entry for it in the batch's answer) while
    the others answer; bob's naming the same id stops nothing. A batch's calls ran to their answers."""
    probe = Probe()
    async with (
        running(make_server(probe), stateless=True, wrap=protected) as (base, app),
        client("tok-alice") as alice,
        client("tok-bob") as bob,
    ):
        url = base + "/mcp"
        h = handshake_headers(None, "2025-03-26")
        batch = [call(5, "hang"), call(6, "progress", {"steps": 3, "delay": 0.2})]
        post = asyncio.create_task(alice.post(url, json=batch, headers=h))
        await asyncio.wait_for(probe.started.wait(), 5)
        assert app.streamable.handshake.stateless_calls.count == 2
        assert (await bob.post(url, json=cancelled(5), headers=h)).status_code == 202
        await asyncio.sleep(0.2)
        assert probe.cancelled == [] and not post.done()
        assert (await alice.post(url, json=cancelled(5), headers=h)).status_code == 202
        r = await asyncio.wait_for(post, 5)
        assert probe.cancelled == [5]
        answers = [m for m in messages(sse_events(r.text)) if type(m) is list]  # (the log lines came first: SSE)
        assert len(answers) == 1, r.text
        answers = answers[0]
        assert [a["id"] for a in answers] == [6] and answers[0]["result"]["content"][0]["text"] == "done 3", r.text
        assert app.streamable.handshake.stateless_calls.count == 0
