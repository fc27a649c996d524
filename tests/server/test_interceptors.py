"""Interceptors (``Server.add_interceptor``): one chain around every request the server runs, whatever carried it.

The app of tests/support/intercepted.py adds a mark to every ``tools/call`` result its interceptor wraps, so a
call that some path runs without the chain comes back unmarked: every transport (memory, stdio, Streamable HTTP
with JSON and with SSE answers, legacy HTTP+SSE, WebSocket), both eras, the inline plain ``def`` path, a worker
thread, an ``async def``, and the items of a batch.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import httpx
import orjson
import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import InvalidParams, MCPError
from mcpkit.server.interceptors import Call, CallNext, ListCall, NotificationCall, ResourceRead, ToolCall
from mcpkit.server.lowlevel import InputRequired
from mcpkit.server.request_context import ScopeAuthorization, authorize_as
from support.intercepted import MARK, make_app
from support.mcp_http import handshake_headers, initialize_body, modern_body, modern_headers, running
from support.paths import SERVERS

SERVER = SERVERS / "intercepted_server.py"
ERAS = ["2026-07-28", "2025-11-25", "2025-03-26"]
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"text": "inline"}),
    ("learned", {"text": "first"}),  # on a worker thread while it is learned
    ("learned", {"text": "then"}),  # inline from the second call on (sync_learn_calls=1)
    ("learned", {"text": "again"}),
    ("threaded", {"text": "thread"}),
]


async def _every_call(client: Client, progress_arrives: bool = True) -> list[list[str]]:
    """Each call's text blocks: the plain def ones, then the async one that reports progress first (which a
    Streamable HTTP endpoint with ``json_response`` has nowhere to send)."""
    texts = []
    for name, arguments in CALLS:
        result = await client.call_tool(name, arguments)
        texts.append([block.text for block in result.content])  # type: ignore[union-attr]
    progress: list[float] = []
    result = await client.call_tool("slow", {}, on_progress=lambda p, total, message: progress.append(p))
    texts.append([block.text for block in result.content])  # type: ignore[union-attr]
    assert progress == ([1] if progress_arrives else [])
    return texts


def _all_marked(texts: list[list[str]]) -> None:
    expected = [[arguments["text"], MARK] for _, arguments in CALLS] + [["slow", MARK]]
    assert texts == expected


@pytest.mark.parametrize("era", ERAS)
async def test_the_chain_wraps_every_tools_call_in_memory(era: str) -> None:
    app, seen, _ = make_app()
    async with Client(app, protocol_version=era) as client:
        _all_marked(await _every_call(client))
    assert ("tools/call", "ToolCall") in seen
    assert ("inline", "echo") in seen and ("worker", "echo") not in seen  # inside the chain, still inline


@pytest.mark.parametrize("era", ERAS)
async def test_the_chain_wraps_every_tools_call_over_stdio(era: str) -> None:
    async with Client([sys.executable, str(SERVER)], protocol_version=era) as client:
        _all_marked(await _every_call(client))


@pytest.mark.parametrize("json_response", [True, False], ids=["json", "sse"])
@pytest.mark.parametrize("era", ERAS)
async def test_the_chain_wraps_every_tools_call_over_streamable_http(era: str, json_response: bool) -> None:
    app, _, _ = make_app()
    async with running(app, json_response=json_response) as (base, _), Client(base + "/mcp", protocol_version=era) as c:
        _all_marked(await _every_call(c, progress_arrives=not json_response))


@pytest.mark.parametrize("era", ["2026-07-28", "2025-06-18"])
async def test_the_chain_wraps_every_tools_call_over_stateless_streamable_http(era: str) -> None:
    app, _, _ = make_app()
    async with running(app, stateless=True) as (base, _), Client(base + "/mcp", protocol_version=era) as c:
        _all_marked(await _every_call(c))


@pytest.mark.parametrize("era", ["2024-11-05", "2025-11-25"])
async def test_the_chain_wraps_every_tools_call_over_legacy_sse(era: str) -> None:
    app, _, _ = make_app()
    async with (
        running(app, sse=True) as (base, _),
        Client(base + "/sse", transport="sse", protocol_version=era) as client,
    ):
        _all_marked(await _every_call(client))


@pytest.mark.parametrize("era", ERAS)
async def test_the_chain_wraps_every_tools_call_over_websocket(era: str) -> None:
    app, _, _ = make_app()
    async with (
        running(app, ws=True) as (base, _),
        Client(base.replace("http://", "ws://") + "/ws", protocol_version=era) as client,
    ):
        _all_marked(await _every_call(client))


def _call(rid: int, name: str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {"text": text}}}


async def test_the_chain_wraps_each_item_of_a_batch_over_http() -> None:
    app, seen, _ = make_app()
    async with running(app, json_response=True) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        r = await http.post(url, json=initialize_body("2025-03-26"), headers=handshake_headers())
        sid = r.headers["mcp-session-id"]
        headers = handshake_headers(sid)
        await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        batch = [_call(1, "echo", "a"), _call(2, "threaded", "b"), _call(3, "echo", "c")]
        r = await http.post(url, json=batch, headers=headers)
    answers = sorted(r.json(), key=lambda a: a["id"])
    assert [[b["text"] for b in a["result"]["content"]] for a in answers] == [["a", MARK], ["b", MARK], ["c", MARK]]
    assert seen.count(("tools/call", "ToolCall")) == 3


async def test_the_chain_wraps_each_item_of_a_batch_in_memory() -> None:
    from mcpkit.transports.memory import create_memory_pair
    from support.core import RawPeer

    app, _, _ = make_app()
    c, s = create_memory_pair()
    task = asyncio.create_task(app.serve(s))
    try:
        peer = RawPeer(c)
        await peer.initialize("2025-03-26")
        await peer.send([_call(1, "echo", "a"), _call(2, "echo", "b")])
        answer, _ = await peer.recv_until(lambda m: isinstance(m, list))
    finally:
        await c.close()
        await asyncio.wait_for(task, 5)
    assert sorted([b["text"] for b in a["result"]["content"]] for a in answer) == [["a", MARK], ["b", MARK]]


async def test_the_chain_wraps_a_modern_request_answered_at_once_over_http() -> None:
    """A 2026-07-28 tools/call of an inline plain def with json_response: answered without a coroutine before,
    now through the one seam, inside the chain."""
    app, seen, _ = make_app()
    async with running(app, json_response=True) as (base, _), httpx.AsyncClient(timeout=10) as http:
        body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}})
        r = await http.post(base + "/mcp", content=orjson.dumps(body), headers=modern_headers("tools/call", "echo"))
    assert r.status_code == 200
    assert [b["text"] for b in r.json()["result"]["content"]] == ["x", MARK]
    assert seen == [("tools/call", "ToolCall"), ("inline", "echo")]


# ---------------------------------------------------------------------- what the chain is and does


def _plain_app() -> MCPKit:
    app = MCPKit("plain")

    @app.tool(thread=False)
    def echo(text: str) -> str:
        return text

    @app.tool(thread=False)
    def ask() -> str:
        raise InputRequired({"q": {"method": "elicitation/create", "params": {"message": "name?"}}})

    @app.resource("note://one")
    def one() -> str:
        return "one"

    return app


async def test_the_first_interceptor_added_is_the_outermost_and_a_remover_takes_one_out() -> None:
    app = _plain_app()
    order: list[str] = []

    def named(name: str) -> Any:
        async def fn(call: Call, call_next: CallNext) -> Any:
            order.append(f"{name}>")
            result = await call_next(call)
            order.append(f"<{name}")
            return result

        return fn

    app.add_interceptor(named("a"), methods="tools/call")
    remove_b = app.add_interceptor(named("b"), methods="tools/call")
    async with Client(app) as client:
        await client.call_tool("echo", {"text": "x"})
        assert order == ["a>", "b>", "<b", "<a"]
        order.clear()
        remove_b()
        await client.call_tool("echo", {"text": "x"})
        assert order == ["a>", "<a"]


async def test_methods_limits_an_interceptor_to_those_methods_and_calls_are_typed_per_family() -> None:
    app = _plain_app()
    seen: list[tuple[str, str, Any]] = []

    async def typed(call: Call, call_next: CallNext) -> Any:
        detail = (
            call.name
            if isinstance(call, ToolCall)
            else call.uri
            if isinstance(call, ResourceRead)
            else call.cursor
            if isinstance(call, ListCall)
            else None
        )
        seen.append((call.method, type(call).__name__, detail))
        return await call_next(call)

    app.add_interceptor(typed, methods=["tools/call", "resources/read", "tools/list"])
    async with Client(app) as client:
        await client.list_tools()
        await client.call_tool("echo", {"text": "x"})
        await client.read_resource("note://one")
        await client.list_resources()  # not in methods
    assert seen == [
        ("tools/list", "ListCall", None),
        ("tools/call", "ToolCall", "echo"),
        ("resources/read", "ResourceRead", "note://one"),
    ]


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_the_call_carries_the_request_context(era: str) -> None:
    app = _plain_app()
    facts: list[Any] = []

    async def look(call: Call, call_next: CallNext) -> Any:
        facts.append(
            (call.request_id is not None, call.protocol_version, call.features.modern, call.principal,
             (call.client_info or {}).get("name"), call.session is not None, call.context.method)
        )  # fmt: skip
        return await call_next(call)

    app.add_interceptor(look, methods="tools/call")
    async with Client(app, protocol_version=era, client_info={"name": "probe", "version": "1"}) as client:
        await client.call_tool("echo", {"text": "x"})
    assert facts == [(True, era, era == "2026-07-28", None, "probe", True, "tools/call")]


async def test_an_mcp_error_raised_by_an_interceptor_is_the_answer() -> None:
    app = _plain_app()

    async def refuse(call: Call, call_next: CallNext) -> Any:
        raise InvalidParams("refused by policy", {"why": "test"})

    app.add_interceptor(refuse, methods="tools/call")
    async with Client(app) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("echo", {"text": "x"})
        assert info.value.code == -32602 and "refused by policy" in info.value.message
        assert await client.list_tools()  # the session goes on


async def test_an_interceptor_may_change_the_params_and_answer_by_itself() -> None:
    app = _plain_app()

    async def rewrite(call: Call, call_next: CallNext) -> Any:
        assert isinstance(call, ToolCall)
        if call.arguments.get("text") == "cached":
            return {"content": [{"type": "text", "text": "from cache"}], "isError": False}
        return await call_next(call.replace(params={**call.params, "arguments": {"text": "changed"}}))

    app.add_interceptor(rewrite, methods="tools/call")
    async with Client(app, protocol_version="2026-07-28") as client:
        assert (await client.call_tool("echo", {"text": "x"})).content[0].text == "changed"  # type: ignore[union-attr]
        cached = await client.call_tool("echo", {"text": "cached"})
        assert cached.content[0].text == "from cache"  # type: ignore[union-attr]
        assert cached.meta is not None and "io.modelcontextprotocol/serverInfo" in str(cached.meta)  # shaped after


async def test_interceptors_see_results_before_they_are_shaped_for_the_revision() -> None:
    """One unshaped result for every revision: a 2026-07-28 request's resultType and server _meta are added after
    the chain, and an InputRequired is the input_required result inside it."""
    app = _plain_app()
    results: list[Any] = []

    async def keep(call: Call, call_next: CallNext) -> Any:
        result = await call_next(call)
        results.append(result)
        return result

    app.add_interceptor(keep, methods="tools/call")
    async with Client(app, protocol_version="2026-07-28") as client:
        await client.call_tool("echo", {"text": "x"})
    assert results == [{"content": [{"type": "text", "text": "x"}], "isError": False}]
    async with running(app, json_response=True) as (base, _), httpx.AsyncClient(timeout=10) as http:
        body = modern_body("tools/call", {"name": "ask", "arguments": {}})
        r = await http.post(base + "/mcp", content=orjson.dumps(body), headers=modern_headers("tools/call", "ask"))
    assert r.json()["result"]["resultType"] == "input_required"
    assert results[-1]["resultType"] == "input_required" and "requestState" in results[-1]


async def test_interceptors_run_after_the_authorization_decision() -> None:
    app = _plain_app()
    seen: list[str] = []

    async def record(call: Call, call_next: CallNext) -> Any:
        seen.append(call.principal or "?")
        return await call_next(call)

    app.add_interceptor(record, methods="tools/call")
    refused = ScopeAuthorization("mallory", [], rule=lambda method, params: ["tools"])
    allowed = ScopeAuthorization("alice", ["tools"], rule=lambda method, params: ["tools"])
    for authz in (refused, allowed):
        token = authorize_as(authz)
        try:
            async with Client(app) as client:
                try:
                    await client.call_tool("echo", {"text": "x"})
                except MCPError as exc:
                    assert exc.code == -32003
        finally:
            from mcpkit.server.request_context import CURRENT_AUTHORIZATION

            CURRENT_AUTHORIZATION.reset(token)
    assert seen == ["alice"]


async def test_initialize_and_notifications_go_through_the_chain_when_asked() -> None:
    app = _plain_app()
    requests: list[tuple[str, str]] = []
    notes: list[tuple[str, str, str]] = []

    async def every(call: Call, call_next: CallNext) -> Any:
        if isinstance(call, NotificationCall):
            notes.append((call.kind, call.method, call.protocol_version))
        else:
            requests.append((call.method, call.protocol_version))
        return await call_next(call)

    async def requests_only(call: Call, call_next: CallNext) -> Any:
        assert call.kind == "request"
        return await call_next(call)

    app.add_interceptor(every, notifications=True)
    app.add_interceptor(requests_only)
    async with Client(app, protocol_version="2025-06-18") as client:
        await client.call_tool("echo", {"text": "x"})
    assert requests[0] == ("initialize", "2025-06-18")
    assert ("tools/call", "2025-06-18") in requests
    assert ("notification", "notifications/initialized", "2025-06-18") in notes


async def test_an_empty_chain_after_removal_is_the_plain_path() -> None:
    app = _plain_app()
    remove = app.add_interceptor(lambda call, call_next: call_next(call))
    remove()
    assert app._intercepting is None
    async with Client(app) as client:
        assert (await client.call_tool("echo", {"text": "x"})).content[0].text == "x"  # type: ignore[union-attr]


def test_a_misspelled_method_name_is_refused_instead_of_never_running() -> None:
    """``methods="tool/call"`` matched no request, so the interceptor silently never ran: a name close to one of
    MCP's methods that is not one is refused, naming the method meant; a method of the server's own, and any
    other name (a method it may serve later), are taken as they are."""
    app = MCPKit("typos")
    app.tool(lambda: "x", name="x")

    async def passing(call: Call, call_next: CallNext) -> Any:
        return await call_next(call)

    for wrong, meant in (
        ("tool/call", "tools/call"),
        ("resource/read", "resources/read"),
        ("prompt/list", "prompts/list"),
    ):
        with pytest.raises(ValueError, match=f"did you mean '{meant}'"):
            app.add_interceptor(passing, methods=wrong)
        with pytest.raises(ValueError, match=f"did you mean '{meant}'"):
            app.add_interceptor(passing, methods=["ping", wrong])
    with pytest.raises(ValueError, match="did you mean 'notifications/initialized'"):
        app.add_interceptor(passing, methods="notification/initialized", notifications=True)
    assert app._intercepting is None  # (nothing was added)
    app.add_interceptor(passing, methods=["tools/call", "skills/list", "tasks/get", "acme/reindex"])
