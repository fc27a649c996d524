"""The Streamable HTTP server's per-request shortcuts keep the rules: header names read in any case, large answers
classified without scanning them, and the one shared timer that gives slow 2026-07-28 requests their disconnect
watchers (the client leaving still cancels each of them)."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import httpx
import orjson
import pytest
from pydantic import Field

import mcpkit
from mcpkit import MCPKit
from mcpkit.server.lowlevel import ServerRequestContext
from mcpkit.transports.http import create_app
from support.mcp_http import (
    ACCEPT_BOTH,
    MODERN,
    Probe,
    handshake_headers,
    initialize_body,
    make_server,
    modern_body,
    modern_headers,
    open_session,
    running,
    silent_prompt,
)

V = "2025-11-25"


class Exchange:
    """One request to the ASGI app in process: a synthetic scope, the body at once, the answer collected."""

    def __init__(
        self, app: Any, headers: list[tuple[bytes, bytes]], body: dict[str, Any], method: str = "POST"
    ) -> None:
        self.app = app
        self.method = method
        self.headers = headers
        self.body = orjson.dumps(body)
        self.sent: list[dict[str, Any]] = []

    async def run(self) -> tuple[int, dict[bytes, bytes], bytes]:
        delivered = False

        async def receive() -> dict[str, Any]:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": self.body, "more_body": False}
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            self.sent.append(message)

        scope = {"type": "http", "method": self.method, "path": "/mcp", "headers": self.headers}
        await self.app(scope, receive, send)
        start = self.sent[0]
        body = b"".join(m.get("body", b"") for m in self.sent[1:])
        return start["status"], dict(start["headers"]), body


def _raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in headers.items()]


async def test_header_names_are_read_in_any_case() -> None:
    """ASGI servers send lower-case names, but a scope with mixed-case ones reads the same (both eras)."""
    app = create_app(make_server(), sse=False, ws=False)
    common = {"Host": "localhost:1", "Accept": ACCEPT_BOTH, "Content-Type": "application/json", "User-Agent": "t"}
    status, headers, _ = await Exchange(app, _raw(common), initialize_body(V)).run()
    assert status == 200
    sid = headers[b"mcp-session-id"].decode()
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    session = {**common, "Mcp-Session-Id": sid, "MCP-Protocol-Version": V}
    assert (await Exchange(app, _raw(session), note).run())[0] == 202
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "a"}}}
    status, _, body = await Exchange(app, _raw(session), call).run()
    assert status == 200 and orjson.loads(body)["result"]["content"][0]["text"] == "a"
    # a wrong session id in a mixed-case header is still seen (404), not mistaken for a missing one (400)
    wrong = {**session, "Mcp-Session-Id": "nope"}
    assert (await Exchange(app, _raw(wrong), call).run())[0] == 404

    region = modern_body("tools/call", {"name": "region", "arguments": {"region": "eu", "count": 3}}, rid=3)
    modern = {
        **common,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "region",
        "Mcp-Param-Count": "3",
    }
    status, _, body = await Exchange(app, _raw({**modern, "Mcp-Param-Region": "eu"}), region).run()
    assert status == 200 and orjson.loads(body)["result"]["content"][0]["text"] == "eu/3"
    status, _, body = await Exchange(app, _raw({**modern, "Mcp-Param-Region": "us"}), region).run()
    assert status == 400 and orjson.loads(body)["error"]["code"] == -32020
    await app.aclose()


async def test_lower_case_headers_duplicates_and_param_headers() -> None:
    """The usual scope (lower-case names, as ASGI requires): Mcp-Param-* headers are still found and checked, and of
    a header sent twice the first counts, whatever else the scope holds."""
    app = create_app(make_server(), sse=False, ws=False)
    base = [
        (b"host", b"localhost:1"),
        (b"accept", ACCEPT_BOTH.encode()),
        (b"content-type", b"application/json"),
        (b"mcp-protocol-version", MODERN.encode()),
        (b"mcp-method", b"tools/call"),
        (b"mcp-name", b"region"),
        (b"mcp-param-count", b"3"),
    ]
    region = modern_body("tools/call", {"name": "region", "arguments": {"region": "eu", "count": 3}}, rid=3)
    status, _, body = await Exchange(app, [*base, (b"mcp-param-region", b"eu")], region).run()
    assert status == 200 and orjson.loads(body)["result"]["content"][0]["text"] == "eu/3"
    status, _, body = await Exchange(app, [*base, (b"mcp-param-region", b"us")], region).run()
    assert status == 400 and orjson.loads(body)["error"]["code"] == -32020
    # a param header sent twice: the first counts
    twice = [*base, (b"mcp-param-region", b"eu"), (b"mcp-param-region", b"us")]
    assert (await Exchange(app, twice, region).run())[0] == 200
    twice = [*base, (b"mcp-param-region", b"us"), (b"mcp-param-region", b"eu")]
    assert (await Exchange(app, twice, region).run())[0] == 400
    # MCP-Protocol-Version sent twice: the first is the one compared with the body
    second_wrong = [*base, (b"mcp-param-region", b"eu"), (b"mcp-protocol-version", b"x")]
    assert (await Exchange(app, second_wrong, region).run())[0] == 200
    first_wrong = [(b"mcp-protocol-version", b"2025-11-25"), *base, (b"mcp-param-region", b"eu")]
    status, _, body = await Exchange(app, first_wrong, region).run()
    assert status == 400 and orjson.loads(body)["error"]["code"] == -32020
    await app.aclose()


@pytest.mark.parametrize("json_response", [False, True])
async def test_large_answers_that_mention_error_are_plain_results(json_response: bool) -> None:
    """The status of a JSON answer comes from how it starts: a large result whose text contains ``"error"`` is a
    200 result, and an error answer is still classified as one."""
    app = create_app(make_server(), sse=False, ws=False, json_response=json_response)
    common = {"host": "localhost:1", "accept": ACCEPT_BOTH, "content-type": "application/json"}
    status, headers, _ = await Exchange(app, _raw(common), initialize_body(V)).run()
    session = {**common, "mcp-session-id": headers[b"mcp-session-id"].decode(), "mcp-protocol-version": V}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await Exchange(app, _raw(session), note).run())[0] == 202
    text = '{"error": {"code": -1}} ' * 5000
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": text}}}
    status, _, body = await Exchange(app, _raw(session), call).run()
    assert status == 200
    assert orjson.loads(body) == {
        "jsonrpc": "2.0",
        "id": 5,
        "result": {"content": [{"type": "text", "text": text}], "isError": False},
    }
    unknown = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}
    status, _, body = await Exchange(app, _raw(session), unknown).run()
    assert status == 200 and orjson.loads(body)["error"]["code"] == -32602  # handshake era: errors travel as 200
    # a failed initialize is a 400 and creates no session
    bad = initialize_body(V)
    bad["params"] = {"capabilities": {}}
    status, headers, body = await Exchange(app, _raw(common), bad).run()
    assert status == 400 and b"mcp-session-id" not in headers and "error" in orjson.loads(body)
    await app.aclose()


@pytest.mark.parametrize("json_response", [False, True])
async def test_every_slow_modern_request_is_cancelled_when_its_client_leaves(json_response: bool) -> None:
    """Silent modern requests started at different moments (so over several ticks of the shared watch timer)
    each get a disconnect watcher: closing each response cancels each handler."""
    probe = Probe()
    server = make_server(probe)
    started: list[asyncio.Event] = [asyncio.Event() for _ in range(3)]

    server.set_handler("prompts/get", silent_prompt(probe, started))

    async with running(server, json_response=json_response) as (base, app), httpx.AsyncClient(timeout=10) as http:
        tasks = []
        for i in range(3):
            body = modern_body("prompts/get", {"name": str(i)}, 20 + i)
            tasks.append(
                asyncio.ensure_future(
                    http.post(base + "/mcp", json=body, headers=modern_headers("prompts/get", str(i)))
                )
            )
            await asyncio.wait_for(started[i].wait(), 5)
            await asyncio.sleep(0.03)  # the next one starts in another tick
        # they are all still running; a fast request meanwhile is answered at once (no watcher needed)
        r = await http.post(base + "/mcp", json=modern_body("tools/list", {}, 30), headers=modern_headers("tools/list"))
        assert r.status_code == 200
        for t in tasks:
            t.cancel()
        for _ in range(100):
            if len(probe.cancelled) == 3:
                break
            await asyncio.sleep(0.05)
        assert sorted(probe.cancelled) == [20, 21, 22]
        ep = app.streamable
        for _ in range(100):
            if not ep.answers.slow and not ep.answers.watchers:
                break
            await asyncio.sleep(0.05)
        assert not ep.answers.slow  # nothing left behind for the timer
        assert not ep.answers.watchers  # nor a watcher


@pytest.mark.parametrize("json_response", [False, True])
async def test_a_slow_modern_request_that_finishes_is_answered_and_its_watcher_released(json_response: bool) -> None:
    """A 2026-07-28 request that outlives two ticks of the watch timer gets a disconnect watcher; when it then
    answers, the answer is sent as usual and the watcher is stopped and forgotten."""
    server = make_server()

    @server.handler("prompts/get")
    async def slow(ctx: ServerRequestContext, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0.25)  # five ticks
        return {"messages": [{"role": "user", "content": {"type": "text", "text": "late"}}]}

    async with running(server, json_response=json_response) as (base, app), httpx.AsyncClient(timeout=10) as http:
        ep = app.streamable
        r = await http.post(
            base + "/mcp", json=modern_body("prompts/get", {"name": "x"}, 5), headers=modern_headers("prompts/get", "x")
        )
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/json")
        assert orjson.loads(r.content)["result"]["messages"][0]["content"]["text"] == "late"
        assert not ep.answers.slow and not ep.answers.watchers


async def test_handshake_requests_release_their_session_slot() -> None:
    """A session's in-flight count goes back to zero after answers, errors and cancelled requests alike."""
    async with running(make_server(), json_response=True) as (base, app), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        hs = app.streamable._sessions[sid]
        for rid, name in ((2, "echo"), (3, "nope")):
            body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": {}}}
            r = await http.post(url, json=body, headers=handshake_headers(sid, V))
            assert r.status_code == 200
        assert hs.busy == 0


async def test_a_modern_answer_leaves_no_reference_cycle_behind() -> None:
    """The request's stream and context are freed by reference counting when the answer is sent (a cycle through
    ``ctx.out`` would keep them, and the server's request objects behind receive/send, alive until a collection)."""
    import gc

    from mcpkit.engine import RequestContext
    from mcpkit.transports.http.stream import Stream

    app = create_app(make_server(), sse=False, ws=False, json_response=True)
    headers = _raw({"host": "localhost:1", "accept": ACCEPT_BOTH, "content-type": "application/json"})
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "x"}}, 4)
    modern = headers + _raw({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "echo"})
    assert (await Exchange(app, modern, body).run())[0] == 200  # warm up
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(5):
            assert (await Exchange(app, modern, body).run())[0] == 200
        gc.collect()
        leaked = [o for o in gc.garbage if isinstance(o, (Stream, RequestContext))]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert leaked == []
    await app.aclose()


async def test_mcp_name_shortcut_keeps_the_sentinel_rules() -> None:
    """A header equal to the body's value is taken as is only when it is plain: a base64 sentinel is decoded
    (and then must match), whatever the body says."""
    app = create_app(make_server(), sse=False, ws=False, json_response=True)
    headers = _raw({"host": "localhost:1", "accept": ACCEPT_BOTH, "content-type": "application/json"})

    async def post(name_in_body: str, header: str) -> tuple[int, dict[str, Any]]:
        body = modern_body("tools/call", {"name": name_in_body, "arguments": {"text": "t"}}, 7)
        h = headers + _raw({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": header})
        status, _, raw = await Exchange(app, h, body).run()
        return status, orjson.loads(raw)

    sentinel = "=?base64?ZWNobw==?="  # "echo"
    status, msg = await post("echo", "echo")
    assert status == 200 and msg["result"]["content"][0]["text"] == "t"
    status, msg = await post("echo", sentinel)
    assert status == 200 and msg["result"]["content"][0]["text"] == "t"
    status, msg = await post(sentinel, sentinel)  # the header decodes to "echo", the body names the sentinel
    assert status == 400 and msg["error"]["code"] == -32020
    status, msg = await post("ech\u00f6", "ech\u00f6")  # not visible ASCII: must travel as a sentinel
    assert status == 400 and msg["error"]["code"] == -32020
    await app.aclose()


async def test_declared_body_size_is_checked_against_the_current_limit() -> None:
    """A Content-Length above max_body is refused before the body is read (413), including after max_body changes;
    one that is shorter than the limit's digits never is."""
    app = create_app(make_server(), sse=False, ws=False, json_response=True, max_body=1000)
    ep = app.streamable
    assert ep is not None
    body = initialize_body(V)
    raw = orjson.dumps(body)
    common = {"host": "localhost:1", "accept": ACCEPT_BOTH, "content-type": "application/json"}

    async def post(declared: str) -> int:
        return (await Exchange(app, _raw({**common, "content-length": declared}), body).run())[0]

    assert await post("1001") == 413
    assert await post("99999999999999999999") == 413
    assert await post(str(len(raw))) == 200
    assert await post("not-a-number") == 200  # the body itself is within the limit
    ep.max_body = len(raw) - 1
    assert await post(str(len(raw))) == 413
    assert await post("9") == 413  # the body that arrives is still measured
    await app.aclose()


@pytest.mark.parametrize("json_response", [True, False])
async def test_the_quick_post_header_test_refuses_what_the_full_one_refuses(json_response: bool) -> None:
    """A POST's Accept, Content-Type and Content-Length pass one quick test once an Accept has passed the full one;
    after a good request, the same Accept with another Content-Type is still 415, an Accept without
    text/event-stream still 406 without json_response (it never enters the quick test's table), a large
    Content-Length still 413, and Content-Type parameters still pass."""
    app = create_app(make_server(), sse=False, ws=False, json_response=json_response, max_body=1000)
    body = initialize_body(V)
    common = {"host": "localhost:1", "accept": ACCEPT_BOTH, "content-type": "application/json"}

    async def post(**headers: str) -> int:
        return (await Exchange(app, _raw({**common, **headers}), body).run())[0]

    assert await post() == 200
    assert await post() == 200  # (the quick test this time)
    assert await post(**{"content-type": "text/plain"}) == 415
    assert await post(**{"content-type": "application/json; charset=utf-8"}) == 200
    assert await post(**{"content-length": "1001"}) == 413
    json_only = await post(accept="application/json")
    assert json_only == (200 if json_response else 406)
    assert await post(accept="application/json") == json_only  # the same verdict the second time
    assert await post(accept="text/event-stream") == 406
    await app.aclose()


def test_outgoing_says_what_parsing_says() -> None:
    """Each message the engine sends comes with its kind, id and method (no transport reads the bytes back), and
    they are what parsing the bytes says; bytes from elsewhere are read once by ``describe``, whatever the
    encoder."""
    from mcpkit.engine import BATCH, ERROR, NOTIFICATION, REQUEST, RESULT, UNKNOWN, Outgoing, describe, messages

    big = "x" * 200_000
    made = [
        messages.notification("notifications/message", {"level": "info", "data": big}),
        messages.request(3, "elicitation/create", {"message": big}),
        messages.error(3, {"code": -32602, "message": "no"}),
        messages.error(None, {"code": -32600, "message": "no"}),
    ]
    assert [m.kind for m in made] == [NOTIFICATION, REQUEST, ERROR, ERROR]
    for m in made:
        d = describe(m.data)
        assert (d.kind, d.id, d.method, d.code) == (m.kind, m.id, m.method, m.code), m
    cases = {
        b'{"jsonrpc":"2.0","method":"x","id":1}': (REQUEST, 1),  # another encoder's key order
        b'{"jsonrpc":"2.0","method":"x","\\u0069d":1}': (REQUEST, 1),  # an escaped "id" key
        b'{"jsonrpc":"2.0","id":"a","result":{}}': (RESULT, "a"),
        b'[{"jsonrpc":"2.0","id":1,"result":{}}]': (BATCH, None),
        b'{"jsonrpc":"2.0","method":': (UNKNOWN, None),  # malformed
    }
    for data, (kind, rid) in cases.items():
        d = describe(data)
        assert (d.kind, d.id) == (kind, rid), data[:60]
    assert Outgoing(b"[]", BATCH).is_answer and not Outgoing(b"[]", BATCH).is_error


async def test_a_tool_registered_anew_gets_its_own_header_rules() -> None:
    """The x-mcp-header rules are cached per tool object: replacing a tool under the same name applies the new
    tool's annotations at once."""
    app = MCPKit("hl")

    def where(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        return region

    def plain(region: str) -> str:
        return "plain " + region

    app.add_tool(where, name="where")
    asgi = create_app(app, sse=False, ws=False, json_response=True)
    headers = _raw({"host": "localhost:1", "accept": ACCEPT_BOTH, "content-type": "application/json"})
    modern = headers + _raw({"mcp-protocol-version": MODERN, "mcp-method": "tools/call", "mcp-name": "where"})
    body = modern_body("tools/call", {"name": "where", "arguments": {"region": "eu"}}, 2)
    status, _, raw = await Exchange(asgi, modern, body).run()
    assert status == 400 and orjson.loads(raw)["error"]["code"] == -32020  # Mcp-Param-Region missing
    app.remove_tool("where")
    app.add_tool(plain, name="where")
    status, _, raw = await Exchange(asgi, modern, body).run()
    assert status == 200 and orjson.loads(raw)["result"]["content"][0]["text"] == "plain eu"
    await asgi.aclose()


async def test_host_verdicts_are_cached_without_changing_them() -> None:
    """Requests without Origin are judged by their Host through the policy's per-Host cache: the same verdicts
    the first time and every time after, and an Origin still gets its own check."""
    app = create_app(make_server(), sse=False, ws=False, json_response=True)
    base = {"accept": ACCEPT_BOTH, "content-type": "application/json"}
    for _ in range(3):
        assert (await Exchange(app, _raw({**base, "host": "localhost:1"}), initialize_body(V)).run())[0] == 200
        assert (await Exchange(app, _raw({**base, "host": "evil.example"}), initialize_body(V)).run())[0] == 403
        assert (await Exchange(app, _raw(base), initialize_body(V)).run())[0] == 403  # no Host at all
        evil = {**base, "host": "localhost:1", "origin": "http://evil.example"}
        assert (await Exchange(app, _raw(evil), initialize_body(V)).run())[0] == 403
        local = {**base, "host": "localhost:1", "origin": "http://localhost:3000"}
        assert (await Exchange(app, _raw(local), initialize_body(V)).run())[0] == 200
    await app.aclose()


async def test_the_usual_post_test_lets_through_only_posts_without_origin() -> None:
    """Once a POST's Host, Accept and Content-Type passed together, the same headers pass one test, for a POST
    without Origin only: another method with them gets its own answer, and a browser page's POST is still judged
    by its Origin (refused, or answered with the CORS headers of an origin the policy trusts)."""
    app = create_app(make_server(), sse=False, ws=False, json_response=True)
    usual = {"host": "localhost:1", "accept": ACCEPT_BOTH, "content-type": "application/json"}
    for _ in range(2):
        assert (await Exchange(app, _raw(usual), initialize_body(V)).run())[0] == 200
    status, headers, _ = await Exchange(app, _raw(usual), initialize_body(V), method="PUT").run()
    assert (status, headers[b"allow"]) == (405, b"GET, POST, DELETE, OPTIONS")
    status, headers, _ = await Exchange(app, _raw(usual), initialize_body(V), method="OPTIONS").run()
    assert status == 204
    assert b"access-control-allow-origin" not in headers
    page = {**usual, "origin": "http://localhost:3000"}
    status, headers, _ = await Exchange(app, _raw(page), initialize_body(V)).run()
    assert (status, headers[b"access-control-allow-origin"]) == (200, b"http://localhost:3000")
    evil = {**usual, "origin": "http://evil.example"}
    assert (await Exchange(app, _raw(evil), initialize_body(V)).run())[0] == 403
    await app.aclose()


async def test_remembered_modern_headers_stand_for_the_body_they_came_with() -> None:
    """The 2026-07-28 header values the step-by-step check found good pass one test afterwards, only for a body
    that says the same: another method, tool or version under them is still a mismatch, also after a request the
    server refused for its ``_meta`` and one that took the long way for its log level."""
    app = create_app(make_server(), sse=False, ws=False, json_response=True)

    async def call(name: str, header: str, method: str = "tools/call", **meta: Any) -> tuple[int, dict[str, Any]]:
        body = modern_body(method, {"name": name, "arguments": {"text": "t", "a": 1, "b": 2}}, 7, **meta)
        h = _raw({"host": "localhost:1", **modern_headers("tools/call", header)})
        status, _, raw = await Exchange(app, h, body).run()
        return status, orjson.loads(raw)

    assert (await call("echo", "echo"))[0] == 200
    status, msg = await call("add", "add", log_level="loud")  # good headers, a _meta the server refuses
    assert status == 400 and msg["error"]["code"] == -32602
    status, msg = await call("echo", "echo", log_level="info")  # the long way for its log level
    assert status == 200 and msg["result"]["content"][0]["text"] == "t"
    for name, method, version in (("add", "tools/call", MODERN), ("echo", "prompts/get", MODERN)):
        status, msg = await call(name, "echo", method, version=version)
        assert status == 400 and msg["error"]["code"] == -32020, (name, method, msg)
    status, msg = await call("echo", "echo", version="2099-01-01")
    assert status == 400, msg
    assert (await call("echo", "echo"))[0] == 200
    await app.aclose()


async def test_an_answer_made_at_once_is_sent_by_the_endpoints_own_frame() -> None:
    """The mounted path's usual POST answered at once (a 2026-07-28 call of an inline tool, after the first one,
    whose headers were screened): the endpoint's own frame sends it, the same two messages as ``send_answer`` (the
    lane's way to send an answer on an ASGI cycle) sends; no coroutine of mcpkit's runs but the app's and the
    endpoint's (hot path: docs/architecture.md)."""
    server = MCPKit("at-once")

    @server.tool(thread=False)
    def echo(text: str) -> str:
        """Echo."""
        return text

    app = create_app(server, sse=False, ws=False, json_response=True)
    body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "t"}}, 7)
    headers = _raw({"host": "localhost:1", **modern_headers("tools/call", "echo")})
    assert (await Exchange(app, headers, body).run())[0] == 200  # (screened, and its headers remembered)
    src = str(Path(mcpkit.__file__).parent)
    coroutines: set[str] = set()

    def tracer(frame: Any, event: str, arg: Any) -> None:
        code = frame.f_code
        if event == "call" and code.co_flags & inspect.CO_COROUTINE and code.co_filename.startswith(src):
            coroutines.add(code.co_qualname)

    exchange = Exchange(app, headers, body)
    previous = sys.gettrace()  # (a coverage or debugger tracer is put back afterwards)
    sys.settrace(tracer)
    try:
        status, _, raw = await exchange.run()
    finally:
        sys.settrace(previous)
    assert status == 200 and orjson.loads(raw)["result"]["content"][0]["text"] == "t"
    assert coroutines == {"MCPApp.__call__", "StreamableHTTPEndpoint.__call__"}
    ep = app.streamable
    assert ep is not None
    h = dict(headers)
    answer = ep.route(
        {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}, h, exchange.body, _never, _never
    )
    sent: list[dict[str, Any]] = []

    async def keep(message: dict[str, Any]) -> None:
        sent.append(message)

    await ep.send_answer(answer, keep)
    assert sent == exchange.sent
    await app.aclose()


async def _never(*args: Any) -> Any:
    raise AssertionError("an answer made at once neither receives nor sends")
