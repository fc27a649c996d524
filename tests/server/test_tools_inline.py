"""A plain ``def`` tool that runs inline answers exactly as the same tool on a worker thread, in every era, over real
uvicorn: the same HTTP status and the same bytes for every outcome (a text, a number, structured content, a
ToolError, an unexpected exception, InputRequired, a missing client capability, an awaitable returned by a plain
``def``, invalid arguments, an unknown tool). Where a tool runs is the sync policy's decision inside the server's
one dispatcher; the transport cannot tell. Inline calls keep every decision of that dispatcher (a handler set with
``set_handler``, the authorization, the 2026-07-28 header checks, ``requestState``) and the engine's guarantees
while the loop is handed over (cancellation, duplicate ids)."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from mcpkit import Context, MCPKit
from mcpkit.protocol.errors import MissingRequiredClientCapability
from mcpkit.server.lowlevel import InputRequired
from mcpkit.server.request_context import ScopeAuthorization, authorize_as
from mcpkit.server.tools import ToolError
from support.mcp_http import MODERN, handshake_headers, modern_body, modern_headers, open_session, running

HANDSHAKE = "2025-11-25"


def build(inline: bool, learn_calls: int = 20) -> tuple[MCPKit, list[Any]]:
    """A server with one tool per outcome, run inline (``inline``) or on a worker thread. Returns it and the list
    of the threads the outcome tools ran on ("loop" or "worker")."""
    app = MCPKit("q", sync_learn_calls=learn_calls)
    ran: list[str] = []
    where = not inline  # the tools' thread= option

    def note() -> None:
        ran.append("loop" if threading.current_thread() is threading.main_thread() else "worker")

    @app.tool(thread=where)
    def echo(text: str) -> str:
        note()
        return text

    @app.tool(thread=where)
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool(thread=where)
    def point(x: float) -> dict[str, float]:
        return {"x": x, "y": x * 2}

    @app.tool(thread=where)
    def refuse() -> str:
        raise ToolError("no, thanks")

    @app.tool(thread=where)
    def crash() -> str:
        raise ValueError("boom")

    @app.tool(thread=where)
    def ask() -> str:
        raise InputRequired({"q": {"method": "elicitation/create", "params": {"message": "name?"}}})

    @app.tool(thread=where)
    def needs_sampling() -> str:
        raise MissingRequiredClientCapability({"sampling": {}})

    async def later(value: str) -> str:
        await asyncio.sleep(0)
        return value.upper()

    @app.tool(thread=False)
    def deferred(text: str) -> Any:
        return later(text)  # a plain def run inline that returns an awaitable: awaited on the loop

    @app.tool
    def learned(text: str) -> str:  # the default policy: inline once learned
        return text[::-1]

    @app.tool(thread=True)
    def on_thread(text: str) -> str:
        return text

    @app.tool(thread=where)
    def with_context(text: str, ctx: Context) -> str:
        return text

    return app, ran


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"text": "hello"}),
    ("add", {"a": 2, "b": 3}),
    ("point", {"x": 1.5}),
    ("point", {"x": 2}),  # an int where a float is declared
    ("refuse", {}),
    ("crash", {}),
    ("ask", {}),
    ("needs_sampling", {}),
    ("deferred", {"text": "later"}),
    ("learned", {"text": "abc"}),
    ("on_thread", {"text": "t"}),
    ("with_context", {"text": "c"}),
    ("echo", {"text": 5}),  # invalid arguments
    ("echo", {"text": "x", "extra": 1}),  # an unknown argument
    ("missing", {}),  # an unknown tool
]

_ERROR_ID = re.compile(rb"error id [0-9a-f]+")


def _normal(body: bytes) -> Any:
    """The answer with what differs between two runs by design taken out: an internal error's random id, and a
    sealed requestState (checked separately)."""
    answer = orjson.loads(_ERROR_ID.sub(b"error id X", body))
    result = answer.get("result")
    if isinstance(result, dict) and "requestState" in result:
        assert isinstance(result["requestState"], str) and result["requestState"]
        result["requestState"] = "sealed"
    return answer


async def _modern(url: str, name: str, arguments: dict[str, Any], rid: int) -> tuple[int, bytes]:
    async with httpx.AsyncClient(timeout=10) as http:
        r = await http.post(
            url,
            content=orjson.dumps(modern_body("tools/call", {"name": name, "arguments": arguments}, rid=rid)),
            headers=modern_headers("tools/call", name),
        )
    return r.status_code, r.content


async def _answers(inline: bool, era: str, learn_calls: int = 20) -> tuple[list[tuple[int, Any]], list[str]]:
    app, ran = build(inline, learn_calls)
    out: list[tuple[int, Any]] = []
    async with running(app, json_response=True) as (base, _):
        url = base + "/mcp"
        async with httpx.AsyncClient(timeout=10) as http:
            version = era if era != "modern" else MODERN
            sid = await open_session(http, url, version) if era != "modern" else None
            for _ in range(3):  # the learned tool runs inline from the third call on (learn_calls=2)
                for rid, (name, arguments) in enumerate(CALLS, 1):
                    if era == "modern":
                        status, body = await _modern(url, name, arguments, rid)
                    else:
                        r = await http.post(
                            url,
                            json={
                                "jsonrpc": "2.0",
                                "id": rid,
                                "method": "tools/call",
                                "params": {"name": name, "arguments": arguments},
                            },
                            headers=handshake_headers(sid, version if version >= "2025-06-18" else None),
                        )
                        status, body = r.status_code, r.content
                    out.append((status, _normal(body)))
    return out, ran


@pytest.mark.parametrize("era", ["modern", "2025-11-25", "2025-06-18", "2025-03-26"])
async def test_an_inline_call_answers_as_a_worker_thread_call(era: str) -> None:
    on_thread, ran_on_thread = await _answers(False, era, learn_calls=2)
    inline, ran_inline = await _answers(True, era, learn_calls=2)
    assert inline == on_thread
    assert ran_inline == ["loop"] * 3 and ran_on_thread == ["worker"] * 3  # (echo, on each round)
    last_round = inline[-len(CALLS) :]
    by_name = {name: answer for (name, _), (_, answer) in reversed(list(zip(CALLS, last_round, strict=True)))}
    assert by_name["echo"]["result"]["content"] == [{"type": "text", "text": "hello"}]
    assert by_name["deferred"]["result"]["content"] == [{"type": "text", "text": "LATER"}]
    assert by_name["learned"]["result"]["content"] == [{"type": "text", "text": "cba"}]
    refused = by_name["refuse"]["result"]
    assert refused["content"] == [{"type": "text", "text": "no, thanks"}] and refused["isError"] is True
    if era == "modern":
        assert by_name["ask"]["result"]["resultType"] == "input_required"
        assert by_name["needs_sampling"]["error"]["code"] == -32021


async def test_an_inline_tools_input_required_round_trip() -> None:
    """The requestState an inline tool's InputRequired is sealed into is one the server accepts back (and binds to
    the request)."""
    app, _ = build(True)
    answered: list[str] = []
    asked: list[Any] = []

    @app.tool(thread=False, replace=True)
    def ask() -> str:
        asked.append(threading.current_thread() is threading.main_thread())
        raise InputRequired({"q": {"method": "elicitation/create", "params": {"message": "name?"}}})

    async with running(app, json_response=True) as (base, _):
        status, body = await _modern(base + "/mcp", "ask", {}, 1)
        assert status == 200
        state = orjson.loads(body)["result"]["requestState"]
        params = {"name": "ask", "arguments": {}, "requestState": state, "inputResponses": {"q": {"action": "decline"}}}
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.post(
                base + "/mcp",
                content=orjson.dumps(modern_body("tools/call", params, rid=2)),
                headers=modern_headers("tools/call", "ask"),
            )
        answered.append(r.text)
    assert asked == [True, True]  # inline both times
    assert '"input_required"' in answered[0]  # the tool asks again: its answers reached it through the state


async def test_a_tools_call_handler_set_by_hand_answers() -> None:
    app, ran = build(True)

    def custom(ctx: Any, params: Any) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "custom"}]}

    app.set_handler("tools/call", custom)
    async with running(app, json_response=True) as (base, _):
        status, body = await _modern(base + "/mcp", "echo", {"text": "hello"}, 1)
    assert status == 200 and b'"custom"' in body
    assert ran == []


def _authorizing(authz: Any) -> Callable[[Any], Any]:
    def wrap(asgi: Any) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            token = authorize_as(authz)
            try:
                await asgi(scope, receive, send)
            finally:
                from mcpkit.server.request_context import CURRENT_AUTHORIZATION

                CURRENT_AUTHORIZATION.reset(token)

        return app

    return wrap


@pytest.mark.parametrize("granted", [["tools"], []])
async def test_an_inline_call_keeps_the_authorization_decision(granted: list[str]) -> None:
    answers = []
    for inline in (True, False):
        app, ran = build(inline)
        authz = ScopeAuthorization("alice", granted, rule=lambda method, params: ["tools"])
        async with running(app, json_response=True, wrap=_authorizing(authz)) as (base, _):
            answers.append(await _modern(base + "/mcp", "echo", {"text": "hello"}, 1))
        assert len(ran) == (1 if granted else 0)
    assert answers[0] == answers[1]
    assert (b'"hello"' in answers[0][1]) == bool(granted)
    if not granted:
        assert b"-32003" in answers[0][1]


async def test_an_inline_call_runs_after_the_header_checks() -> None:
    """A 2026-07-28 request is checked against its headers before anything runs: a wrong Mcp-Name is refused."""
    app, ran = build(True)
    async with running(app, json_response=True) as (base, _), httpx.AsyncClient(timeout=10) as http:
        r = await http.post(
            base + "/mcp",
            content=orjson.dumps(modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})),
            headers=modern_headers("tools/call", "add", version=MODERN),
        )
    assert ran == []
    assert r.status_code == 400 and b"-32020" in r.content


async def _during_hand_over(second: dict[str, Any]) -> tuple[tuple[int, bytes], tuple[int, bytes]]:
    """A session's ``tools/call`` (id 77) whose inline tool blocks long enough for the loop to be handed over to
    its stand-in thread, and ``second``, posted on the same session meanwhile: both answers (status, body)."""
    app, _ = build(True)
    ran: list[bool] = []

    @app.tool(thread=False)
    def slow() -> str:
        ran.append(threading.current_thread() is threading.main_thread())
        time.sleep(0.4)  # the watch hands the loop over after 10-15 ms
        return "done"

    async with running(app, json_response=True) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, HANDSHAKE)
        headers = handshake_headers(sid, HANDSHAKE)
        call = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "slow", "arguments": {}}}
        first = asyncio.ensure_future(http.post(url, json=call, headers=headers))
        await asyncio.sleep(0.15)
        r2 = await http.post(url, json=second, headers=headers)
        r1 = await first
    assert ran == [True]  # it ran inline, on the loop's thread
    return (r1.status_code, r1.content), (r2.status_code, r2.content)


async def test_a_cancellation_during_a_hand_over_still_means_no_answer() -> None:
    """While an inline call runs (the loop handed over), the request is in the session's in-flight table: a
    ``notifications/cancelled`` for it means no answer (202, empty)."""
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}}
    assert await _during_hand_over(cancel) == ((202, b""), (202, b""))


async def test_a_duplicate_id_during_a_hand_over_is_refused() -> None:
    """A second request with the id of the one running inline is refused as a duplicate; the first is answered."""
    again = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x"}}}
    (s1, b1), (s2, b2) = await _during_hand_over(again)
    assert s1 == 200 and b'"done"' in b1
    assert s2 == 200 and b"already in use" in b2
