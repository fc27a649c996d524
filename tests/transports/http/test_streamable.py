"""Streamable HTTP server rules over a real uvicorn on 127.0.0.1, checked with raw httpx requests (both eras)."""

from __future__ import annotations

import asyncio
import gc
import re
import tracemalloc
from typing import Annotated, Any

import httpx
import orjson
import pytest
from pydantic import Field

from mcpkit import Client, Context, MCPKit
from mcpkit.stores import InMemoryEventStore
from mcpkit.transports.http import create_app
from mcpkit.transports.http.headers import decode_header_value, encode_header_value
from support.mcp_http import (
    ACCEPT_BOTH,
    MODERN,
    Probe,
    burst_server,
    check_get_takeover,
    handshake_headers,
    initialize_body,
    make_server,
    messages,
    modern_body,
    modern_headers,
    open_session,
    running,
    silent_prompt,
    sse_events,
)

V = "2025-11-25"


def call(rid: int, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments or {}}}


# ------------------------------------------------------------------------------------------ handshake era


@pytest.mark.req("M018", "M019", "M023", "A013")
async def test_single_endpoint_post_and_get() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("application/json")
        assert orjson.loads(r.content)["result"]["protocolVersion"] == V
        sid = r.headers["mcp-session-id"]
        async with http.stream(
            "GET", url, headers={"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
        ) as g:
            assert g.status_code == 200
            assert g.headers["content-type"].startswith("text/event-stream")
        r = await http.post(url, json=call(2, "echo", {"text": "hi"}), headers=handshake_headers(sid, V))
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert orjson.loads(r.content)["result"]["content"][0]["text"] == "hi"


@pytest.mark.req("M020")
async def test_accept_header_rules() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        for accept in ("application/json", "text/event-stream", "text/html", ""):
            h = {"content-type": "application/json", "accept": accept}
            r = await http.post(url, json=initialize_body(V), headers=h)
            assert r.status_code == 406, accept
            assert "mcp-session-id" not in r.headers
        r = await http.post(url, content=b"{}", headers={"accept": ACCEPT_BOTH, "content-type": "text/plain"})
        assert r.status_code == 415
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
        assert r.status_code == 200


async def test_accept_sent_as_two_header_lines_is_one_list() -> None:
    # RFC 9110 5.3: field lines of one list-based field combine with commas; some HTTP clients (Go's Header.Add,
    # Java's HttpRequest.Builder.header) send each media type on its own Accept line
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        split = [("content-type", "application/json"), ("accept", "application/json"), ("accept", "text/event-stream")]
        r = await http.post(url, json=initialize_body(V), headers=split)
        assert r.status_code == 200, r.text
        sid = r.headers["mcp-session-id"]
        session = [("mcp-session-id", sid), ("mcp-protocol-version", V)]
        r = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=split + session)
        assert r.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}
        modern = [(k, v) for k, v in modern_headers("tools/list").items() if k != "accept"] + split[1:]
        r = await http.post(url, json=modern_body("tools/list"), headers=modern)
        assert r.status_code == 200 and "tools" in r.json()["result"], r.text
        get = [("accept", "application/json"), ("accept", "text/event-stream"), *session]
        async with http.stream("GET", url, headers=get) as g:
            assert g.status_code == 200 and g.headers["content-type"].startswith("text/event-stream")
        # two lines that still lack a type are refused as before
        lacking = [("content-type", "application/json"), ("accept", "application/json"), ("accept", "text/html")]
        r = await http.post(url, json=initialize_body(V), headers=lacking)
        assert r.status_code == 406


async def test_a_media_type_with_q_0_is_not_acceptable() -> None:
    # RFC 9110 12.4.2: "a weight of 0 means not acceptable"; 12.5.1: the most specific range that matches decides
    refused = [
        "application/json;q=0, text/event-stream",
        "application/json, text/event-stream;q=0",
        "application/json; Q=0.000, text/event-stream",
        "*/*;q=0",
        "application/json;q=0, */*",
        "application/*;q=0, application/json;q=0, text/event-stream",
        "text/*;q=0, application/json",
    ]
    allowed = [
        "application/json;q=0.5, text/event-stream;q=0.001",
        "application/*;q=0, application/json, text/event-stream",  # (the exact type wins over application/*)
        "*/*;q=0, application/json, text/event-stream",
        "text/html;q=0, */*",
    ]
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        for accept in refused:
            h = {"content-type": "application/json", "accept": accept}
            r = await http.post(url, json=initialize_body(V), headers=h)
            assert r.status_code == 406, accept
            modern = {**modern_headers("tools/list"), "accept": accept}
            r = await http.post(url, json=modern_body("tools/list"), headers=modern)
            assert r.status_code == 406, accept
        for accept in allowed:
            h = {"content-type": "application/json", "accept": accept}
            r = await http.post(url, json=initialize_body(V), headers=h)
            assert r.status_code == 200, (accept, r.text)
        sid = await open_session(http, url, V)
        for accept, status in (("text/event-stream;q=0", 406), ("*/*;q=0, text/event-stream;q=0.1", 200)):
            get = {"accept": accept, "mcp-session-id": sid, "mcp-protocol-version": V}
            async with http.stream("GET", url, headers=get) as g:
                assert g.status_code == status, accept


@pytest.mark.req("M021")
async def test_body_is_one_message_or_a_batch() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, "2025-03-26")
        batch = [
            call(10, "echo", {"text": "a"}),
            {"jsonrpc": "2.0", "method": "notifications/x"},
            call(11, "echo", {"text": "b"}),
        ]
        r = await http.post(url, json=batch, headers=handshake_headers(sid))
        assert r.status_code == 200
        answers = orjson.loads(r.content)
        assert isinstance(answers, list)
        assert sorted(a["id"] for a in answers) == [10, 11]
        r = await http.post(url, content=b"{not json", headers=handshake_headers(sid))
        assert r.status_code == 400 and orjson.loads(r.content)["error"]["code"] == -32700
        r = await http.post(url, json={"jsonrpc": "1.0", "id": 5, "method": "x"}, headers=handshake_headers(sid))
        assert r.status_code == 400 and orjson.loads(r.content)["error"]["code"] == -32600


@pytest.mark.req("M022")
async def test_notifications_and_responses_get_202_without_body() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
        sid = r.headers["mcp-session-id"]
        r = await http.post(
            url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=handshake_headers(sid, V)
        )
        assert r.status_code == 202 and r.content == b""
        r = await http.post(url, json={"jsonrpc": "2.0", "id": 99, "result": {}}, headers=handshake_headers(sid, V))
        assert r.status_code == 202 and r.content == b""


@pytest.mark.req("M023", "A005", "S002", "S003")
async def test_sse_when_the_handler_notifies_before_responding() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        r = await http.post(url, json=call(3, "progress", {"steps": 3}), headers=handshake_headers(sid, V))
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["x-accel-buffering"] == "no"
        msgs = messages(sse_events(r.text))
        assert [m.get("method") for m in msgs] == ["notifications/message"] * 3 + [None]
        assert msgs[-1]["id"] == 3 and msgs[-1]["result"]["content"][0]["text"] == "done 3"  # the stream ended after it


@pytest.mark.req("M023", "A005", "A007")
async def test_server_to_client_request_on_the_post_stream() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V, caps={"elicitation": {}})
        async with http.stream("POST", url, json=call(4, "ask"), headers=handshake_headers(sid, V)) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = r.aiter_lines()
            req = None
            async for line in lines:
                if line.startswith("data: "):
                    req = orjson.loads(line[6:])
                    break
            assert req is not None and req["method"] == "elicitation/create"
            answer = {"jsonrpc": "2.0", "id": req["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}
            a = await http.post(url, json=answer, headers=handshake_headers(sid, V))
            assert a.status_code == 202
            rest = [orjson.loads(line[6:]) async for line in lines if line.startswith("data: ")]
        assert rest[-1]["id"] == 4 and rest[-1]["result"]["content"][0]["text"] == "accept:Ada"


@pytest.mark.req("M024", "M025", "A006")
async def test_get_rules() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        r = await http.get(url, headers={"accept": "application/json", "mcp-session-id": sid})
        assert r.status_code == 406
        r = await http.get(url, headers={"accept": "text/event-stream"})
        assert r.status_code == 400
        r = await http.get(url, headers={"accept": "text/event-stream", "mcp-session-id": "nope"})
        assert r.status_code == 404
        r = await http.get(url, headers={"accept": "text/event-stream", "mcp-protocol-version": MODERN})
        assert r.status_code == 405
    async with running(make_server(), get_stream=False) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        r = await http.get(url, headers={"accept": "text/event-stream", "mcp-session-id": sid})
        assert r.status_code == 405


async def _read_messages(resp: httpx.Response, n: int, into: list[dict[str, Any]]) -> None:
    async for line in resp.aiter_lines():
        if line.startswith("data: ") and len(line) > 6:
            into.append(orjson.loads(line[6:]))
            if len(into) >= n:
                return


@pytest.mark.req("M026", "M027", "S004", "A010")
async def test_each_message_on_exactly_one_stream() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        got: list[dict[str, Any]] = []
        async with http.stream(
            "GET", url, headers={"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
        ) as g:
            reader = asyncio.ensure_future(_read_messages(g, 1, got))
            await asyncio.sleep(0.1)
            # two streams at once: this POST's stream carries its own log notifications and response,
            # the GET stream carries the list_changed notification raised while handling it.
            r = await http.post(url, json=call(5, "touch"), headers=handshake_headers(sid, V))
            post_msgs = (
                [orjson.loads(r.content)]
                if r.headers["content-type"].startswith("application/json")
                else messages(sse_events(r.text))
            )
            await asyncio.wait_for(reader, 5)
        assert [m.get("method") for m in got] == ["notifications/tools/list_changed"]
        assert all("id" not in m for m in got)  # no response on the GET stream
        assert [m.get("id") for m in post_msgs] == [5]
        assert all(m.get("method") != "notifications/tools/list_changed" for m in post_msgs)


@pytest.mark.req("M028", "S005", "A013")
async def test_session_ids_are_visible_ascii_and_unpredictable() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        ids = set()
        for _ in range(100):
            r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
            sid = r.headers["mcp-session-id"]
            assert re.fullmatch(r"[\x21-\x7e]+", sid)
            assert len(sid) >= 32  # 192 random bits from secrets
            ids.add(sid)
        assert len(ids) == 100


@pytest.mark.req("S006", "M029")
async def test_session_id_required_after_initialize() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        await open_session(http, url, V)
        r = await http.post(url, json=call(2, "echo"), headers=handshake_headers(None, V))
        assert r.status_code == 400
        r = await http.post(url, json=call(2, "echo"), headers=handshake_headers("unknown-session", V))
        assert r.status_code == 404


@pytest.mark.req("A014", "A015", "S007")
async def test_delete_ends_the_session() -> None:
    async with running(make_server()) as (base, app), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        assert app.streamable.session_count == 1
        r = await http.delete(url, headers={"mcp-session-id": sid})
        assert r.status_code == 200
        assert app.streamable.session_count == 0
        r = await http.post(url, json=call(2, "echo"), headers=handshake_headers(sid, V))
        assert r.status_code == 404
        r = await http.delete(url, headers={"mcp-session-id": sid})
        assert r.status_code == 404
    async with running(make_server(), stateless=True) as (base, _), httpx.AsyncClient() as http:
        r = await http.delete(base + "/mcp", headers={"mcp-session-id": "x"})
        assert r.status_code == 405  # sessions cannot be ended by clients when there are none


@pytest.mark.parametrize(("json_response", "resumable"), [(False, False), (True, False), (False, True)])
async def test_a_request_running_when_its_session_is_deleted_is_answered_with_its_id(
    json_response: bool, resumable: bool
) -> None:
    """The session ends under the request (spec: a terminated session is answered 404): the JSON-RPC error carries
    the request's id, so the client's request fails at once; one whose answer already turned into an SSE stream
    gets that error as the stream's last event."""
    probe = Probe()
    server = make_server(probe)
    server.handler("prompts/get")(silent_prompt(probe))
    store = InMemoryEventStore() if resumable else None
    async with (
        running(server, json_response=json_response, event_store=store) as (base, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = base + "/mcp"
        for rid, body in (
            ("p-7", {"jsonrpc": "2.0", "id": "p-7", "method": "prompts/get", "params": {"name": "0"}}),
            (8, call(8, "hang")),  # (it logs first: an SSE answer unless json_response)
        ):
            probe.started.clear()
            sid = await open_session(http, url, V)
            post = asyncio.create_task(http.post(url, json=body, headers=handshake_headers(sid, V)))
            await probe.started.wait()
            await asyncio.sleep(0.05)
            assert (await http.delete(url, headers={"mcp-session-id": sid})).status_code == 200
            r = await post
            if r.headers["content-type"].startswith("text/event-stream"):
                assert r.status_code == 200 and not json_response and rid == 8
                answer = messages(sse_events(r.text))[-1]
            else:
                assert r.status_code == 404
                answer = r.json()
            assert answer["id"] == rid, answer
            assert answer["error"]["code"] == -32600 and "ended" in answer["error"]["message"]


async def test_protocol_version_header_rules() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, "2025-06-18")
        r = await http.post(url, json=call(2, "echo"), headers=handshake_headers(sid, "1999-01-01"))
        assert r.status_code == 400
        r = await http.post(url, json=call(3, "echo"), headers=handshake_headers(sid))  # missing: assume 2025-03-26
        assert r.status_code == 200
        r = await http.post(url, json=call(4, "echo"), headers=handshake_headers(sid, "2025-06-18"))
        assert r.status_code == 200


@pytest.mark.req("A011", "A012", "M026")
async def test_resume_a_post_stream_with_last_event_id_loses_nothing() -> None:
    store = InMemoryEventStore()
    async with (
        running(make_server(), event_store=store, retry_interval=250) as (base, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        seen: list[dict[str, Any]] = []
        last_id = None
        priming = None
        async with http.stream(
            "POST", url, json=call(7, "progress", {"steps": 8, "delay": 0.05}), headers=handshake_headers(sid, V)
        ) as r:
            ev: dict[str, str] = {}
            async for line in r.aiter_lines():
                if line.startswith("id: "):
                    ev["id"] = line[4:]
                elif line.startswith("retry: "):
                    ev["retry"] = line[7:]
                elif line.startswith("data: "):
                    ev["data"] = line[6:]
                elif line == "" and ev:
                    if priming is None:
                        priming = ev
                    else:
                        seen.append(orjson.loads(ev["data"]))
                    last_id = ev.get("id")
                    ev = {}
                    if len(seen) == 2:
                        break  # drop the connection mid-stream
        assert priming is not None and priming.get("data", "") == "" and priming["retry"] == "250"
        assert last_id is not None and last_id.endswith("_2")
        r = await http.get(
            url,
            headers={
                "accept": "text/event-stream",
                "mcp-session-id": sid,
                "mcp-protocol-version": V,
                "last-event-id": last_id,
            },
        )
        assert r.status_code == 200
        rest = sse_events(r.text)
        seen += messages(rest)
        ids = [e["id"] for e in rest]
        assert len(ids) == len(set(ids))
        texts = [m["params"]["data"] for m in seen if m.get("method")]
        assert texts == [f"step {i}" for i in range(1, 9)]  # every event exactly once, in order
        assert seen[-1]["id"] == 7 and seen[-1]["result"]["content"][0]["text"] == "done 8"
        # the response travelled on the resumed GET stream: the one exception to "no responses on GET"
        r = await http.get(
            url, headers={"accept": "text/event-stream", "mcp-session-id": sid, "last-event-id": "999_1"}
        )
        assert r.status_code == 400


@pytest.mark.parametrize("last_event_id", [b"\xb2_1", b"1_\xb9", b"\xb3", b"9" * 5000 + b"_1", b"1_" + b"9" * 5000])
async def test_a_last_event_id_with_non_ascii_digits_is_a_400_not_a_crash(last_event_id: bytes) -> None:
    # Latin-1 superscript digits pass str.isdigit() but not int(), nor do more than 4300 digits (Python's limit on
    # int() of a string): headers any client can send
    async with (
        running(make_server(), event_store=InMemoryEventStore()) as (base, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        get = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
        r = await http.get(url, headers={**get, "last-event-id": last_event_id})  # type: ignore[dict-item]
        assert r.status_code == 400
        assert "Last-Event-ID" in r.json()["error"]["message"]
        r = await http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=handshake_headers(sid, V))
        assert r.json() == {"jsonrpc": "2.0", "id": 2, "result": {}}  # the session goes on


async def test_no_priming_event_before_2025_11_25() -> None:
    async with running(make_server(), event_store=InMemoryEventStore()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, "2025-06-18")
        r = await http.post(url, json=call(2, "progress"), headers=handshake_headers(sid, "2025-06-18"))
        events = sse_events(r.text)
        assert all(e.get("data") for e in events)  # no empty-data priming event for older clients
        assert all("id" in e for e in events)


@pytest.mark.req("A009")
async def test_client_closing_a_handshake_stream_does_not_cancel_the_request() -> None:
    probe = Probe()
    async with running(make_server(probe)) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        async with http.stream(
            "POST", url, json=call(8, "progress", {"steps": 4, "delay": 0.05}), headers=handshake_headers(sid, V)
        ) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    break
        await asyncio.sleep(0.4)
        assert probe.cancelled == []


# ------------------------------------------------------------------------------------------ idle expiry & limits


@pytest.mark.req("A014")
async def test_a_thousand_abandoned_sessions_are_reclaimed() -> None:
    server = make_server()
    async with (
        running(server, session_idle_timeout=0.5, max_sessions=5000) as (base, app),
        httpx.AsyncClient(limits=httpx.Limits(max_connections=16)) as http,
    ):
        url = base + "/mcp"

        async def one(_: int) -> None:
            r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
            assert r.status_code == 200

        for start in range(0, 1000, 50):
            await asyncio.gather(*(one(i) for i in range(start, start + 50)))
        assert app.streamable.session_count > 0
        for _ in range(100):
            if app.streamable.session_count == 0:
                break
            await asyncio.sleep(0.1)
        assert app.streamable.session_count == 0
        gc.collect()
        assert len(server.sessions) == 0  # the ServerSession objects themselves are gone


async def test_memory_per_idle_session_is_small() -> None:
    """In-process (no sockets): the ASGI app alone, so the figure is what a session costs the server."""
    app = create_app(make_server(), sse=False, ws=False)
    body = orjson.dumps(initialize_body(V))
    headers = [(b"host", b"127.0.0.1"), (b"accept", ACCEPT_BOTH.encode()), (b"content-type", b"application/json")]

    async def init() -> None:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(m: dict[str, Any]) -> None:
            sent.append(m)

        scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
        await app(scope, receive, send)
        assert sent[0]["status"] == 200

    await init()  # warm caches
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    n = 500
    for _ in range(n):
        await init()
    gc.collect()
    per = (tracemalloc.get_traced_memory()[0] - before) / n
    tracemalloc.stop()
    assert app.streamable.session_count == n + 1
    print(f"memory per idle session: {per:.0f} bytes")
    assert per <= 10 * 1024
    await app.aclose()


async def test_body_limit_and_session_cap() -> None:
    async with running(make_server(), max_body=1000, max_sessions=2) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        big = call(1, "echo", {"text": "x" * 5000})
        r = await http.post(url, json=big, headers=handshake_headers())
        assert r.status_code == 413

        async def chunks() -> Any:
            for _ in range(10):
                yield b" " * 200

        r = await http.post(url, content=chunks(), headers=handshake_headers())  # chunked, no Content-Length
        assert r.status_code == 413
        sids = [await open_session(http, url, V) for _ in range(2)]
        # the table is full: the least recently used idle session makes room (issue 12 item 6), no 503
        assert (await http.post(url, json=initialize_body(V), headers=handshake_headers())).status_code == 200
        r = await http.post(
            url, json={"jsonrpc": "2.0", "id": 5, "method": "ping"}, headers=handshake_headers(sids[0], V)
        )
        assert r.status_code == 404


@pytest.mark.parametrize(
    ("bounds", "most"),
    [({"queue_size": 16}, 16), ({"queue_bytes": 2_000}, 40)],  # (bytes: ~70 per event, far fewer than 256 events)
    ids=["messages", "bytes"],
)
async def test_slow_standalone_reader_cannot_grow_memory(bounds: dict[str, int], most: int) -> None:
    """A GET stream whose client never reads: the per-stream queue stays bounded, in messages and in bytes, and the
    stream is dropped."""
    server = make_server()
    app = create_app(server, sse=False, ws=False, keepalive=0, **bounds)  # type: ignore[arg-type]
    ep = app.streamable
    assert ep is not None
    body = orjson.dumps(initialize_body(V))
    base_headers = [
        (b"host", b"localhost:1"),
        (b"accept", ACCEPT_BOTH.encode()),
        (b"content-type", b"application/json"),
    ]
    sent: list[dict[str, Any]] = []

    async def receive_body() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def collect(m: dict[str, Any]) -> None:
        sent.append(m)

    await app({"type": "http", "method": "POST", "path": "/mcp", "headers": base_headers}, receive_body, collect)
    sid = dict(sent[0]["headers"])[b"mcp-session-id"]
    hs = ep._sessions[sid.decode()]
    hs.session.initialized = True
    stuck = asyncio.Event()
    disconnect = asyncio.Event()

    async def stuck_send(m: dict[str, Any]) -> None:
        if m["type"] == "http.response.body" and m.get("body"):
            stuck.set()
            await asyncio.Event().wait()  # the client stopped reading: the socket never drains

    async def receive_get() -> dict[str, Any]:
        await disconnect.wait()
        return {"type": "http.disconnect"}

    get_headers = [(b"host", b"localhost:1"), (b"accept", b"text/event-stream"), (b"mcp-session-id", sid)]
    getter = asyncio.ensure_future(
        app({"type": "http", "method": "GET", "path": "/mcp", "headers": get_headers}, receive_get, stuck_send)
    )
    await asyncio.sleep(0.05)
    stream = hs.standalone
    assert stream is not None and stream.conn is not None
    conn = stream.conn
    for _i in range(5000):
        await server.notify_list_changed("tools")
        assert conn.queue.qsize() <= most
        assert conn.queue.queued_bytes <= bounds.get("queue_bytes", 1 << 30) + 200
    assert conn.aborted  # the laggard was cut off instead of buffering 5000 messages
    assert stream.conn is None  # and the session accepts a new GET (resumable from the event store, if any)
    disconnect.set()
    getter.cancel()
    await app.aclose()


async def test_a_new_get_stream_takes_over_from_a_half_open_one() -> None:
    """A client whose GET stream went half-open (the network died, no FIN: the server still sees it open) opens a
    new one: it takes over. The old stream is ended cleanly, and what was queued for it but not yet written moves to
    the new one in order: every message arrives once, on one stream (2025-03-26 .. 2025-11-25, "Multiple
    Connections"). Still one live GET stream per session."""
    count = 120
    async with running(burst_server(count)) as (base, app):
        await check_get_takeover(base, app, count)


# ------------------------------------------------------------------------------------------ security


async def test_origin_and_host_validation() -> None:
    async with (
        running(make_server(), allowed_origins=["https://app.example"]) as (base, _),
        httpx.AsyncClient() as http,
    ):
        url = base + "/mcp"
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers(origin="http://evil.example"))
        assert r.status_code == 403
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers(host="evil.example"))
        assert r.status_code == 403
        r = await http.get(url, headers={"accept": "text/event-stream", "origin": "http://attacker.test"})
        assert r.status_code == 403
        for origin in ("http://localhost:3000", "http://127.0.0.1:8000", "https://app.example"):
            r = await http.post(url, json=initialize_body(V), headers=handshake_headers(origin=origin))
            assert r.status_code == 200, origin


# ------------------------------------------------------------------------------------------ modes


async def test_stateless_mode() -> None:
    async with running(make_server(), stateless=True) as (base, app), httpx.AsyncClient() as http:
        url = base + "/mcp"
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
        assert r.status_code == 200 and "mcp-session-id" not in r.headers
        r = await http.post(url, json=call(2, "echo", {"text": "s"}), headers=handshake_headers(None, V))
        assert r.status_code == 200 and orjson.loads(r.content)["result"]["content"][0]["text"] == "s"
        results = await asyncio.gather(
            *(
                http.post(url, json=call(1, "echo", {"text": str(i)}), headers=handshake_headers(None, V))
                for i in range(20)
            )
        )
        assert sorted(orjson.loads(r.content)["result"]["content"][0]["text"] for r in results) == sorted(
            str(i) for i in range(20)
        )  # the same id from concurrent clients never crosses wires
        r = await http.get(url, headers={"accept": "text/event-stream"})
        assert r.status_code == 405
        assert app.streamable.session_count == 0


async def test_stateless_clients_share_no_session_state() -> None:
    # Stateless: every POST stands alone, so nothing one client sets may reach another: not ctx.session_state (a
    # fresh dict per request, as in 2026-07-28), not the log level, not resource subscriptions (whose cap would
    # then lock every client out)
    app = MCPKit("stateless-state")
    max_subscriptions = 3

    @app.tool
    def remember(secret: str, ctx: Context) -> str:
        ctx.session_state["secret"] = secret
        return str(ctx.session_state.get("secret"))  # the same dict for the whole request

    @app.tool
    def recall(ctx: Context) -> str:
        return str(ctx.session_state.get("secret"))

    @app.tool
    async def chatty(ctx: Context) -> str:
        await ctx.info("said")
        return "done"

    @app.resource("note://{n}")
    def note(n: int) -> str:
        return str(n)

    app.max_subscriptions = max_subscriptions
    async with running(app, stateless=True) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        async with Client(url, mode="handshake") as alice:
            assert (await alice.call_tool("remember", {"secret": "alice's"})).data == "alice's"
        async with Client(url, mode="handshake") as bob:
            assert (await bob.call_tool("recall")).data == "None"
        h = handshake_headers(None, V)
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
        assert "subscribe" not in r.json()["result"]["capabilities"]["resources"]  # (nothing could deliver updates)
        r = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "emergency"}},
            headers=h,
        )
        assert r.json()["result"] == {}
        r = await http.post(url, json=call(2, "chatty"), headers=h)
        assert [m["params"]["data"] for m in messages(sse_events(r.text)) if m.get("method")] == ["said"]
        for i in range(max_subscriptions + 2):  # one client each: refused, never kept (no cap to lock them out)
            sub = {"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe", "params": {"uri": f"note://{i}"}}
            r = await http.post(url, json=sub, headers=h)
            assert r.json()["error"]["code"] == -32601 and "stateless" in r.json()["error"]["message"], r.text


async def test_a_stateless_endpoint_says_why_it_cannot_ask_the_client() -> None:
    # no session, so no channel for the client's answer: the error names that, not a capability the client declared
    app = MCPKit("stateless-ask")

    @app.tool
    async def ask(ctx: Context) -> str:
        return str(await ctx.list_roots())

    async with (
        running(app, stateless=True) as (base, _),
        Client(base + "/mcp", mode="handshake", roots=["file:///tmp"]) as client,
    ):
        result = await client.call_tool("ask", raise_on_error=False)
    assert result.is_error
    assert "stateless" in result.text and "did not declare" not in result.text, result.text


async def test_json_response_mode() -> None:
    async with running(make_server(), json_response=True) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        r = await http.post(url, json=call(3, "progress"), headers=handshake_headers(sid, V))
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert orjson.loads(r.content)["result"]["content"][0]["text"] == "done 3"


# ------------------------------------------------------------------------------------------ modern era


async def test_modern_post_only() -> None:
    async with running(make_server()) as (base, app), httpx.AsyncClient() as http:
        url = base + "/mcp"
        r = await http.post(
            url,
            json=modern_body("tools/call", {"name": "echo", "arguments": {"text": "m"}}),
            headers=modern_headers("tools/call", "echo", **{"mcp-session-id": "ignored"}),
        )
        assert r.status_code == 200
        assert "mcp-session-id" not in r.headers
        assert orjson.loads(r.content)["result"]["resultType"] == "complete"
        for verb in ("GET", "DELETE"):
            r = await http.request(verb, url, headers={"accept": "text/event-stream", "mcp-protocol-version": MODERN})
            assert r.status_code == 405
        assert app.streamable.session_count == 0


async def test_modern_header_validation() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"

        async def post(body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
            r = await http.post(url, json=body, headers=headers)
            return r.status_code, orjson.loads(r.content) if r.content else {}

        echo = modern_body("tools/call", {"name": "echo", "arguments": {}})
        h = modern_headers("tools/call", "echo")
        del h["mcp-protocol-version"]
        assert (await post(echo, h))[1]["error"]["code"] == -32020
        cases = [
            modern_headers("tools/call", "echo", version="2025-11-25"),  # header differs from _meta
            modern_headers("tools/list", "echo"),  # method mismatch
            {k: v for k, v in modern_headers("tools/call", "echo").items() if k != "mcp-method"},
            modern_headers("tools/call"),  # Mcp-Name missing
            modern_headers("tools/call", "other"),  # name mismatch
            modern_headers("tools/call", "=?base64?!!!?="),  # broken sentinel
        ]
        for headers in cases:
            status, body = await post(echo, headers)
            assert status == 400 and body["error"]["code"] == -32020 and body["id"] == 1, headers
        # the base64 sentinel is decoded before comparing
        status, body = await post(echo, modern_headers("tools/call", "=?base64?ZWNobw==?="))
        assert status == 200, body
        region = modern_body("tools/call", {"name": "region", "arguments": {"region": "日本", "count": 3}})
        ok = modern_headers(
            "tools/call", "region", **{"mcp-param-region": encode_header_value("日本"), "mcp-param-count": "3.0"}
        )
        assert (await post(region, ok))[0] == 200
        bad = [
            modern_headers("tools/call", "region", **{"mcp-param-count": "3"}),  # region header missing
            modern_headers(
                "tools/call", "region", **{"mcp-param-region": "=?base64?5pel5pys?=", "mcp-param-count": "4"}
            ),  # value mismatch
        ]
        for headers in bad:
            status, body = await post(region, headers)
            assert status == 400 and body["error"]["code"] == -32020, headers
        # resources/read carries its uri in Mcp-Name
        read = modern_body("resources/list")
        assert (await post(read, modern_headers("resources/list")))[0] == 200


async def test_an_integer_param_header_is_the_bodys_integer_exactly() -> None:
    """An ``Mcp-Param-*`` header of an integer argument is compared with the body as a number written in plain
    decimal ("3" and "3.0" are 3, as the spec says), exactly: a header an intermediary reads as another number
    ("9007199254740993" beside 9007199254740992, "3.0000000000000001"), or that only Python's float() reads as
    the number ("3_0" for 30, "3e1", "+3", Arabic-Indic digits in the base64 sentinel), is refused with -32020."""

    def region(count: int) -> dict[str, Any]:
        return modern_body("tools/call", {"name": "region", "arguments": {"region": "eu", "count": count}})

    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"

        async def status(count: int, header: str) -> int:
            headers = modern_headers("tools/call", "region", **{"mcp-param-region": "eu", "mcp-param-count": header})
            r = await http.post(url, json=region(count), headers=headers)
            if r.status_code != 200:
                assert r.json()["error"]["code"] == -32020, r.text
            return r.status_code

        for count, header in ((3, "3"), (3, "3.0"), (-7, "-7"), (0, "0"), (2**53 - 1, str(2**53 - 1))):
            assert await status(count, header) == 200, header
        refused = [
            (2**53, str(2**53 + 1)),
            (2**63, str(2**63 + 1)),
            (3, "3.0000000000000001"),
            (30, "3_0"),
            (30, "3e1"),
            (3, "+3"),
            (3, encode_header_value("\u0663")),  # ARABIC-INDIC DIGIT THREE
            (3, encode_header_value(" 3 ")),
        ]
        for count, header in refused:
            assert await status(count, header) == 400, header


async def test_an_integer_argument_outside_the_header_range_is_refused_even_with_its_header() -> None:
    """2026-07-28: an integer mirrored into an ``Mcp-Param-*`` header MUST lie within ±(2^53-1). A body value
    beyond it, with a header matching it digit for digit, was accepted; a JavaScript intermediary routing on
    the header reads another number. It is refused with 400 and -32020 now; the bounds themselves pass."""
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:

        async def answer(count: int) -> httpx.Response:
            body = modern_body("tools/call", {"name": "region", "arguments": {"region": "eu", "count": count}})
            headers = modern_headers(
                "tools/call", "region", **{"mcp-param-region": "eu", "mcp-param-count": str(count)}
            )
            return await http.post(base + "/mcp", json=body, headers=headers)

        for count in (2**53, -(2**53), 2**63 + 5):
            r = await answer(count)
            assert r.status_code == 400 and r.json()["error"]["code"] == -32020, r.text
            assert "Mcp-Param-Count" in r.json()["error"]["message"] or "count" in r.json()["error"]["message"]
        for count in (2**53 - 1, -(2**53 - 1)):
            assert (await answer(count)).status_code == 200


def test_header_value_encoding_round_trip() -> None:
    for value in ("us-west1", "Hello, 世界", " padded ", "line1\nline2", "=?base64?literal?="):
        enc = encode_header_value(value)
        assert all(0x20 <= ord(c) <= 0x7E for c in enc)
        assert decode_header_value(enc) == value
    assert encode_header_value("Hello, 世界") == "=?base64?SGVsbG8sIOS4lueVjA==?="
    assert encode_header_value("=?base64?literal?=") == "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
    with pytest.raises(ValueError):
        decode_header_value("caf\u00e9")


async def test_modern_errors_and_status_codes() -> None:
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        url = base + "/mcp"
        r = await http.post(url, json=modern_body("no/such", version=MODERN), headers=modern_headers("no/such"))
        assert r.status_code == 404 and orjson.loads(r.content)["error"]["code"] == -32601
        r = await http.post(url, json=modern_body("ping"), headers=modern_headers("ping"))
        assert r.status_code == 404  # handshake-only methods do not exist in 2026-07-28
        r = await http.post(
            url,
            json=modern_body("server/discover", version="2099-01-01"),
            headers=modern_headers("server/discover", version="2099-01-01"),
        )
        err = orjson.loads(r.content)["error"]
        assert r.status_code == 400 and err["code"] == -32022 and MODERN in err["data"]["supported"]
        body = modern_body("server/discover")
        del body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        r = await http.post(url, json=body, headers=modern_headers("server/discover"))
        assert r.status_code == 400 and orjson.loads(r.content)["error"]["code"] == -32602
        r = await http.post(url, json=modern_body("server/discover"), headers=modern_headers("server/discover"))
        assert r.status_code == 200 and MODERN in orjson.loads(r.content)["result"]["supportedVersions"]
        # a legacy initialize on a modern-only server names the supported versions
    from mcpkit.server.lowlevel import Server

    modern_only = Server("m", "1", versions=[MODERN])
    async with running(modern_only) as (base, _), httpx.AsyncClient() as http:
        r = await http.post(base + "/mcp", json=initialize_body(V), headers=handshake_headers())
        assert r.status_code == 400 and MODERN in orjson.loads(r.content)["error"]["data"]["supported"]


async def test_a_handshake_revision_sent_per_request_is_refused_saying_how_to_speak_it() -> None:
    """A handshake-era revision named in a 2026-07-28-style request is -32022, and ``supported`` lists it (the
    server speaks it, by ``initialize``): the message says so, so a client retrying with a listed version is not
    refused again without knowing why."""
    async with running(make_server()) as (base, _), httpx.AsyncClient() as http:
        r = await http.post(
            base + "/mcp",
            json=modern_body("tools/list", version=V),
            headers=modern_headers("tools/list", version=V),
        )
        err = orjson.loads(r.content)["error"]
        assert r.status_code == 400 and err["code"] == -32022 and V in err["data"]["supported"]
        assert err["data"]["requested"] == V and "send initialize" in err["message"], err


async def test_a_response_posted_in_2026_07_28_is_refused_as_not_a_request() -> None:
    # 2026-07-28 (Streamable HTTP, "Sending Messages"): the body is a request or a notification; the client MUST
    # NOT send responses. There are no sessions in that era, so the refusal says so, not "Mcp-Session-Id required"
    from mcpkit.server.lowlevel import Server

    for server in (make_server(), Server("m", "1", versions=[MODERN])):
        async with running(server) as (base, app), httpx.AsyncClient() as http:
            url = base + "/mcp"
            h = {"accept": ACCEPT_BOTH, "content-type": "application/json", "mcp-protocol-version": MODERN}
            for answer in (
                {"jsonrpc": "2.0", "id": 5, "result": {}},
                {"jsonrpc": "2.0", "id": 5, "error": {"code": -32603, "message": "x"}},
            ):
                r = await http.post(url, json=answer, headers=h)
                assert r.status_code == 400, r.text
                err = r.json()["error"]
                assert err["code"] == -32600, err
                assert "2026-07-28" in err["message"] and "response" in err["message"], err
                assert "Mcp-Session-Id" not in err["message"], err
                assert "mcp-session-id" not in r.headers
            assert app.streamable.session_count == 0


async def test_initialize_with_a_2026_07_28_header_says_what_to_do() -> None:
    # 2026-07-28 has no initialize; the header names that revision while the body (no _meta version) is a
    # handshake: a header/body mismatch (400, -32020) whose message says how to proceed
    from mcpkit.server.lowlevel import Server

    h = {"accept": ACCEPT_BOTH, "content-type": "application/json", "mcp-protocol-version": MODERN}
    async with running(make_server()) as (base, app), httpx.AsyncClient() as http:
        r = await http.post(base + "/mcp", json=initialize_body(V), headers=h)
        assert r.status_code == 400, r.text
        body = r.json()
        assert body["id"] == 1 and body["error"]["code"] == -32020, body
        message = body["error"]["message"]
        assert "MCP-Protocol-Version" in message and "server/discover" in message, message
        assert "without" in message and V in message, message  # drop the header for a handshake (a version it speaks)
        assert app.streamable.session_count == 0
        # initialize with a 2026-07-28 _meta as well: an unknown method there (404, -32601), with the same advice
        body = initialize_body(V)
        body["params"]["_meta"] = modern_body("initialize")["params"]["_meta"]
        r = await http.post(base + "/mcp", json=body, headers=modern_headers("initialize"))
        err = r.json()["error"]
        assert r.status_code == 404 and err["code"] == -32601 and "server/discover" in err["message"], err
        # the same request without the header opens a session as usual
        r = await http.post(base + "/mcp", json=initialize_body(V), headers=handshake_headers())
        assert r.status_code == 200 and "mcp-session-id" in r.headers
    async with running(Server("m", "1", versions=[MODERN])) as (base, _), httpx.AsyncClient() as http:
        r = await http.post(base + "/mcp", json=initialize_body(V), headers=h)
        err = r.json()["error"]
        assert r.status_code == 400 and err["code"] == -32020, err
        assert "server/discover" in err["message"] and MODERN in err["message"], err


async def test_modern_listen_stream_keepalives_and_cancellation() -> None:
    probe = Probe()
    server = make_server(probe)
    async with running(server, keepalive=0.1) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        listen = modern_body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, rid=41)
        async with http.stream("POST", url, json=listen, headers=modern_headers("subscriptions/listen")) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            assert r.headers["x-accel-buffering"] == "no"
            lines = r.aiter_lines()
            seen: list[str] = []
            touched = False
            async for line in lines:
                seen.append(line)
                if line.startswith("data: ") and "acknowledged" in line and not touched:
                    touched = True
                    await asyncio.sleep(0.25)  # quiet period: keep-alive comments flow
                    t = await http.post(
                        url,
                        json=modern_body("tools/call", {"name": "touch", "arguments": {}}),
                        headers=modern_headers("tools/call", "touch"),
                    )
                    assert t.status_code == 200
                if "list_changed" in line:
                    break
        assert any(line.startswith(":") for line in seen)
        # closing a request's response stream cancels it
        hang = modern_body("tools/call", {"name": "hang", "arguments": {}}, rid=77, log_level="info")
        async with http.stream("POST", url, json=hang, headers=modern_headers("tools/call", "hang")) as r:
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    break
        for _ in range(50):
            if probe.cancelled:
                break
            await asyncio.sleep(0.05)
        assert probe.cancelled == [77]


async def test_silent_modern_request_is_cancelled_when_the_client_leaves() -> None:
    probe = Probe()
    server = make_server(probe)

    server.set_handler("prompts/get", silent_prompt(probe))

    async with running(server) as (base, _):
        async with httpx.AsyncClient(timeout=10) as http:
            task = asyncio.ensure_future(
                http.post(
                    base + "/mcp",
                    json=modern_body("prompts/get", {"name": "p"}, 9),
                    headers=modern_headers("prompts/get", "p"),
                )
            )
            await asyncio.wait_for(probe.started.wait(), 5)
            task.cancel()
        for _ in range(50):
            if probe.cancelled:
                break
            await asyncio.sleep(0.05)
        assert probe.cancelled == [9]


# ------------------------------------------------------------------------------------------ serve()


def test_import_mcpkit_does_not_import_http_dependencies() -> None:
    import subprocess
    import sys

    code = "import sys, mcpkit, mcpkit.transports.http; print('uvicorn' in sys.modules, 'httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["False", "False"], out.stderr


@pytest.mark.req("M018")
async def test_server_run_http_serves_on_loopback(free_port: Any) -> None:
    """``Server.run("http", port=N)`` in a real subprocess: uvicorn on 127.0.0.1, Streamable HTTP at /mcp."""
    import sys

    port = free_port()
    code = f"from mcpkit.server.lowlevel import Server\ns = Server('run-test', '1.0.0')\ns.run('http', port={port})\n"
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", code, stderr=asyncio.subprocess.PIPE)
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(200):
                try:
                    r = await http.post(
                        f"http://127.0.0.1:{port}/mcp", json=initialize_body(V), headers=handshake_headers()
                    )
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            assert r.status_code == 200
            assert orjson.loads(r.content)["result"]["serverInfo"]["name"] == "run-test"
            r = await http.post(
                f"http://127.0.0.1:{port}/mcp",
                json=initialize_body(V),
                headers=handshake_headers(host="rebind.example"),
            )
            assert r.status_code == 403  # loopback bind: DNS-rebinding protection on by default
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


async def test_session_store_lets_another_worker_serve_the_session() -> None:
    """Two workers (two apps on two uvicorn servers) share a SessionStore: a session initialized on one is
    served by the other with its negotiated version and client capabilities, without sticky routing."""
    from mcpkit.stores import InMemorySessionStore

    store = InMemorySessionStore()
    async with (
        running(make_server(), session_store=store) as (base_a, _),
        running(make_server(), session_store=store) as (base_b, app_b),
        httpx.AsyncClient(timeout=10) as http,
    ):
        sid = await open_session(http, base_a + "/mcp", "2025-06-18", caps={"elicitation": {}})
        assert app_b.streamable.session_count == 0
        r = await http.post(
            base_b + "/mcp", json=call(2, "echo", {"text": "b"}), headers=handshake_headers(sid, "2025-06-18")
        )
        assert r.status_code == 200 and orjson.loads(r.content)["result"]["content"][0]["text"] == "b"
        hs = app_b.streamable._sessions[sid]
        assert hs.session.version == "2025-06-18" and hs.session.initialized
        assert hs.session.client_capabilities == {"elicitation": {}}
        r = await http.delete(base_b + "/mcp", headers={"mcp-session-id": sid})
        assert r.status_code == 200
        assert await store.load(sid) is None
        r = await http.post(base_b + "/mcp", json=call(3, "echo"), headers=handshake_headers(sid, "2025-06-18"))
        assert r.status_code == 404


async def test_notifications_cancelled_stops_a_handshake_request() -> None:
    """The request runs inline in its POST's task; notifications/cancelled (another POST) stops it, its SSE
    stream ends without a response, and the session keeps working."""
    probe = Probe()
    async with running(make_server(probe)) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        async with http.stream("POST", url, json=call(31, "hang"), headers=handshake_headers(sid, V)) as r:
            lines = r.aiter_lines()
            async for line in lines:
                if line.startswith("data: "):
                    break  # the "hanging" log notification: the handler is running
            c = await http.post(
                url,
                json={
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": 31, "reason": "test"},
                },
                headers=handshake_headers(sid, V),
            )
            assert c.status_code == 202
            rest = [line async for line in lines if line.startswith("data: ")]
        assert rest == []  # no response for a cancelled request
        assert probe.cancelled == [31]
        r = await http.post(url, json=call(32, "echo", {"text": "still here"}), headers=handshake_headers(sid, V))
        assert orjson.loads(r.content)["result"]["content"][0]["text"] == "still here"


async def test_requests_in_flight_per_session_are_bounded() -> None:
    probe = Probe()
    async with (
        running(make_server(probe), max_requests_per_session=2, max_queued_per_session=0) as (base, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        async with (
            http.stream("POST", url, json=call(1, "hang"), headers=handshake_headers(sid, V)),
            http.stream("POST", url, json=call(2, "hang"), headers=handshake_headers(sid, V)),
        ):
            r = await http.post(url, json=call(3, "echo"), headers=handshake_headers(sid, V))
            assert r.status_code == 429
            r = await http.post(
                url,
                json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
                headers=handshake_headers(sid, V),
            )
            assert r.status_code == 202  # notifications and responses are never refused


async def test_x_mcp_header_validation_for_mcpkit_tools() -> None:
    """A high-level MCPKit tool whose parameter carries ``x-mcp-header``: the endpoint reads the annotation from
    the tool's input schema (``get_tool``) and enforces the Mcp-Param-* header."""
    from mcpkit import MCPKit

    app = MCPKit("hl")

    @app.tool
    def where(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], q: str = "") -> str:
        return region

    body = modern_body("tools/call", {"name": "where", "arguments": {"region": "eu"}})
    async with running(app) as (base, _), httpx.AsyncClient() as http:
        r = await http.post(base + "/mcp", json=body, headers=modern_headers("tools/call", "where"))
        assert r.status_code == 400 and orjson.loads(r.content)["error"]["code"] == -32020
        r = await http.post(
            base + "/mcp", json=body, headers=modern_headers("tools/call", "where", **{"Mcp-Param-Region": "eu"})
        )
        assert r.status_code == 200 and orjson.loads(r.content)["result"]["content"][0]["text"] == "eu"


@pytest.mark.req("A014")
async def test_ending_a_session_closes_its_open_answers_cleanly() -> None:
    probe = Probe()
    server = make_server(probe)

    @server.handler("prompts/get")
    async def silent(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(30)
        return {"messages": []}

    async with running(server) as (base, _), httpx.AsyncClient(timeout=10) as http:
        url = base + "/mcp"
        sid = await open_session(http, url, V)
        pending = asyncio.ensure_future(
            http.post(
                url,
                json={"jsonrpc": "2.0", "id": 9, "method": "prompts/get", "params": {"name": "p"}},
                headers=handshake_headers(sid, V),
            )
        )
        async with http.stream("POST", url, json=call(8, "hang"), headers=handshake_headers(sid, V)) as r:
            lines = r.aiter_lines()
            async for line in lines:
                if line.startswith("data: "):
                    break
            assert (await http.delete(url, headers={"mcp-session-id": sid})).status_code == 200
            rest = [line async for line in lines]  # the SSE body ends properly (no truncated chunked read)
        # its last event says the session ended, with the request's id
        assert [orjson.loads(line[6:])["id"] for line in rest if line.startswith("data: ")] == [8]
        silent_answer = await asyncio.wait_for(pending, 5)
        assert silent_answer.status_code == 404


async def test_standalone_stream_resumes_on_another_worker() -> None:
    """Workers sharing an event store and a session store: a client whose GET stream was on worker A resumes it
    on worker B with Last-Event-ID, gets what A kept, then B's live stream, with ids B can resume later."""
    from mcpkit.stores import InMemorySessionStore

    events, sessions = InMemoryEventStore(), InMemorySessionStore()
    server_a, server_b = make_server(), make_server()
    opts = {"event_store": events, "session_store": sessions}
    async with (
        running(server_a, **opts) as (base_a, _),
        running(server_b, **opts) as (base_b, _),
        httpx.AsyncClient(timeout=10) as http,
    ):
        sid = await open_session(http, base_a + "/mcp", V)
        get = {"accept": "text/event-stream", "mcp-session-id": sid, "mcp-protocol-version": V}
        async with http.stream("GET", base_a + "/mcp", headers=get) as g:
            lines = g.aiter_lines()
            first_id = None
            async for line in lines:
                if line.startswith("id: "):
                    first_id = line[4:]
                if line == "" and first_id is not None:
                    break  # the priming event
        assert first_id == "0_0"
        await asyncio.sleep(0.1)  # A notices the disconnect
        await server_a.notify_list_changed("tools")  # kept by the store under A's stream
        got: list[dict[str, Any]] = []
        ids: list[str] = []
        async with http.stream("GET", base_b + "/mcp", headers={**get, "last-event-id": first_id}) as g:
            ev: dict[str, str] = {}
            async for line in g.aiter_lines():
                if line.startswith("id: "):
                    ev["id"] = line[4:]
                elif line.startswith("data: ") and len(line) > 6:
                    ev["data"] = line[6:]
                elif line == "" and ev:
                    ids.append(ev.get("id", ""))
                    if "data" in ev:
                        got.append(orjson.loads(ev["data"]))
                        if len(got) == 1:
                            await server_b.notify_list_changed("tools")  # live on B now (a list it declared)
                        else:
                            break
                    ev = {}
        assert [m["method"] for m in got] == ["notifications/tools/list_changed"] * 2
        assert ids[0] == "0_1"  # A's event under A's id
        b_stream = ids[-1].split("_")[0]
        assert b_stream != "0" and int(b_stream) % (1 << 20) == 0  # B's own standalone stream from then on


async def test_in_memory_event_store_is_bounded() -> None:
    store = InMemoryEventStore(max_events_per_stream=3, max_bytes=1000, max_streams=5)
    for i in range(1, 6):
        await store.append("s/1", i, b"x" * 10)
    assert await store.replay("s/1", 2) == [(3, b"x" * 10), (4, b"x" * 10), (5, b"x" * 10)]
    assert await store.replay("s/1", 1) is None  # event 2 was evicted: no replay with a hole
    for n in range(2, 20):
        await store.append(f"s/{n}", 1, b"y" * 100)
    assert store.stream_count <= 5 and store.size_bytes <= 1000
    await store.forget("s/")
    assert store.stream_count == 0 and store.size_bytes == 0


async def test_cors_for_trusted_browser_origins() -> None:
    async with (
        running(make_server(), allowed_origins=["https://app.example"]) as (base, _),
        httpx.AsyncClient() as http,
    ):
        url = base + "/mcp"
        pre = {
            "origin": "https://app.example",
            "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, mcp-session-id, mcp-param-region",
        }
        r = await http.options(url, headers=pre)
        assert r.status_code == 204
        assert r.headers["access-control-allow-origin"] == "https://app.example"
        assert "mcp-param-region" in r.headers["access-control-allow-headers"]
        assert "POST" in r.headers["access-control-allow-methods"]
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers(origin="https://app.example"))
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "https://app.example"
        assert "mcp-session-id" in r.headers["access-control-expose-headers"]  # the page can read its session id
        r = await http.options(url, headers={**pre, "origin": "https://evil.example"})
        assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        r = await http.post(url, json=initialize_body(V), headers=handshake_headers())
        assert "access-control-allow-origin" not in r.headers  # not a browser request: no CORS headers
        # an OPTIONS that is no preflight (no Origin) is told what the endpoint allows; a method it does not serve
        # is a 405 naming them
        r = await http.options(url)
        assert r.status_code == 204 and r.headers["allow"] == "GET, POST, DELETE, OPTIONS"
        assert "access-control-allow-origin" not in r.headers
        r = await http.put(url, content=b"{}")
        assert r.status_code == 405 and r.headers["allow"] == "GET, POST, DELETE, OPTIONS"
    async with running(make_server(), cors=False) as (base, _), httpx.AsyncClient() as http:
        # without CORS a browser's preflight gets no CORS headers: the page may not call the endpoint
        r = await http.options(base + "/mcp", headers={**pre, "origin": "http://localhost:3000"})
        assert r.status_code == 204 and "access-control-allow-origin" not in r.headers
