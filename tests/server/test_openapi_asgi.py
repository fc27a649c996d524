"""An API in the same process: ``MCPKit.from_fastapi`` / ``from_asgi`` with a real FastAPI app (no socket to the
API), served over stdio and Streamable HTTP from a subprocess in both protocol eras; ``forward_headers`` for it and
for ``from_openapi`` over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit import Client, MCPKit
from mcpkit.client.targets import ServerStartError
from mcpkit.server.openapi import InProcessTransport, asgi
from mcpkit.server.openapi.asgi import SHUTDOWN_GRACE, STREAM_CHUNKS
from mcpkit.server.openapi.http import NEVER_FORWARDED
from support.asgi import serve_asgi
from support.paths import SERVERS
from support.toolkit import ERAS, TRANSPORTS, serve_http

sys.path.insert(0, str(SERVERS))

import asgi_api

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
SERVER = SERVERS / "fastapi_server.py"
ERA = pytest.mark.parametrize("mode", ERAS)


@contextlib.asynccontextmanager
async def subprocess_client(transport: str, mode: str, events: Path, **options: Any) -> AsyncIterator[Client]:
    """A client of ``fastapi_server.py`` over ``transport``; the server has stopped (gracefully) when this ends."""
    if transport == "stdio":
        async with Client([sys.executable, str(SERVER), "stdio", str(events)], mode=mode, **options) as client:
            yield client
        return
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SERVER), "http", str(events), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.startswith(b"PORT "), line
        url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"
        async with Client(url, mode=mode, **options) as client:
            yield client
        proc.send_signal(signal.SIGTERM)
        # (uvicorn stops gracefully, then raises the signal again: the exit says SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 60) in (0, -signal.SIGTERM)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@pytest.mark.parametrize("transport", TRANSPORTS)
@ERA
async def test_a_fastapi_app_is_served_in_one_line_its_lifespan_around_serving(
    transport: str, mode: str, tmp_path: Path
) -> None:
    events = tmp_path / "events"
    async with subprocess_client(transport, mode, events) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert {"getItem", "addItem", "greeting", "me", "stream"} <= set(tools)
        assert set(tools["getItem"].input_schema["properties"]) == {"item_id", "currency"}
        got = await client.call_tool("getItem", {"item_id": 2, "currency": "USD"})  # a path and a query parameter
        assert not got.is_error and got.structured == {"id": 2, "name": "pot", "price": 9.0, "currency": "USD"}
        made = await client.call_tool("addItem", {"name": "pan", "price": 4.0})  # a JSON body
        assert not made.is_error and made.structured == {"id": 3, "name": "pan", "price": 4.0}
        missing = await client.call_tool("getItem", {"item_id": 99})  # an HTTPException: the API's detail
        assert missing.is_error and "HTTP 404" in missing.text and "no item 99" in missing.text
        state = await client.call_tool("greeting", {})  # the lifespan's state reached the request
        assert not state.is_error and state.structured == {"greeting": "hello"}
        endless = await client.call_tool("stream", {})  # capped at the server's max_response_bytes (64 KiB)
        assert endless.is_error and "larger than 65536 bytes" in endless.text
        assert events.read_text().split() == ["startup"]  # (once, however many calls)
    assert events.read_text().split() == ["startup", "shutdown"]  # the server stopped: the API shut down, once


@ERA
async def test_forwarded_headers_reach_an_api_that_checks_them_and_nothing_is_forwarded_unasked(
    mode: str, tmp_path: Path
) -> None:
    token = {"Authorization": asgi_api.SHARED_TOKEN}
    async with subprocess_client("http", mode, tmp_path / "events", headers=token) as client:  # forwards it
        me = await client.call_tool("me", {})
        assert not me.is_error and me.structured == {"user": "alice"}
        assert "authorization" not in (await client.list_tools())[0].input_schema["properties"]
    unforwarded = MCPKit.from_fastapi(asgi_api.build_api())  # forwards nothing (the default)
    async with serve_http(unforwarded) as url, Client(url, mode=mode, headers=token) as client:
        refused = await client.call_tool("me", {})
        assert refused.is_error and "HTTP 401" in refused.text and "a valid bearer token" in refused.text


@ERA
async def test_from_openapi_forwards_the_named_headers_over_real_http(mode: str) -> None:
    api = asgi_api.build_api()
    async with serve_asgi(api) as port, httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
        spec = (await http.get("/openapi.json")).json()
        app = MCPKit.from_openapi(spec, client=http, forward_headers=("Authorization",))
        async with serve_http(app) as url:
            async with Client(url, mode=mode, headers={"Authorization": asgi_api.SHARED_TOKEN}) as client:
                assert not (await client.call_tool("me", {})).is_error
            async with Client(url, mode=mode) as client:  # no header on the MCP request: none on the API's
                assert (await client.call_tool("me", {})).is_error
    async with Client(app) as client:  # in-process: no HTTP request to take it from
        assert (await client.call_tool("me", {})).is_error


def test_hop_by_hop_host_and_malformed_headers_are_never_forwarded() -> None:
    spec = asgi_api.build_api().openapi()
    for name in [*sorted(NEVER_FORWARDED), "Host", "Transfer-Encoding"]:
        with pytest.raises(ValueError, match="never forwarded"):
            MCPKit.from_fastapi(asgi_api.build_api(), forward_headers=("authorization", name))
    for bad in ("", "x y", "a:b", "x\r\nInjected"):
        with pytest.raises(ValueError, match="not a header name"):
            MCPKit.from_openapi(spec, client=httpx.AsyncClient(base_url="http://api"), forward_headers=[bad])


async def test_the_api_lifespan_runs_once_per_serving_and_its_startup_failure_stops_the_start() -> None:
    events: list[str] = []
    app = MCPKit.from_fastapi(asgi_api.build_api(events))
    assert events == []  # (building does not start the API)
    async with Client(app) as one, Client(app) as two:
        assert events == ["startup"]
        assert not (await one.call_tool("getItem", {"item_id": 1})).is_error
        assert not (await two.call_tool("greeting", {})).is_error
    assert events == ["startup", "shutdown"]
    async with Client(app) as again:  # served again: started again
        assert not (await again.call_tool("greeting", {})).is_error
    assert events == ["startup", "shutdown", "startup", "shutdown"]

    failing = MCPKit.from_fastapi(asgi_api.build_api(fail_startup=True))
    with pytest.raises(ServerStartError, match="the item database is down"):
        async with asyncio.timeout(30), Client(failing):
            pass


async def test_a_server_whose_api_fails_to_start_exits_with_that_error(tmp_path: Path) -> None:
    for transport in TRANSPORTS:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SERVER),
            transport,
            str(tmp_path / "events"),
            "--fail",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:  # (stdio: the lifespan starts with the connection, at once; HTTP: at uvicorn's lifespan startup)
            _, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode != 0, transport
        assert b"the item database is down" in err, (transport, err[-2000:])


async def test_an_endless_answer_stops_at_the_bound_and_the_api_is_stopped() -> None:
    api = asgi_api.build_api()
    async with Client(MCPKit.from_fastapi(api, max_response_bytes=100_000, timeout=10)) as client:
        result = await client.call_tool("stream", {})
        assert result.is_error and "larger than 100000 bytes" in result.text
        for _ in range(200):  # (the app is cancelled when the reader stops: its generator closes)
            if api.state.stream["stopped"]:
                break
            await asyncio.sleep(0.05)
        assert api.state.stream["stopped"]
        made = api.state.stream["chunks"]
        assert made <= 100_000 // 1024 + STREAM_CHUNKS + 2  # (never more than the bound and the queue ahead)
        await asyncio.sleep(0.2)
        assert api.state.stream["chunks"] == made
        assert not (await client.call_tool("getItem", {"item_id": 1})).is_error  # the session goes on


async def _welcomed(api: Any, count: int) -> list[str]:
    """``api.state.welcomed`` once it holds ``count`` entries (or after 10 s)."""
    for _ in range(200):
        if len(api.state.welcomed) >= count:
            break
        await asyncio.sleep(0.05)
    return list(api.state.welcomed)


async def test_the_work_an_api_does_after_its_answer_runs_to_its_end_and_shutdown_waits_for_it() -> None:
    """FastAPI's background tasks run after the answer is sent, in the same ASGI call. The in-process transport
    cancelled that call as soon as the answer was read, so the work silently never happened."""
    api = asgi_api.build_api()
    async with Client(MCPKit.from_fastapi(api)) as client:
        result = await client.call_tool("signup", {"user": "bob"})
        assert not result.is_error and result.structured == {"user": "bob"}
        assert await _welcomed(api, 1) == ["bob"]
        slow = await client.call_tool("signup", {"user": "eve", "delay": 1.0})  # answered before the work ends
        assert not slow.is_error and api.state.welcomed == ["bob"]
    assert api.state.welcomed == ["bob", "eve"]  # the server's stop waited for it (within the grace)
    assert api.state.events == ["startup", "shutdown"]


async def test_work_after_the_answer_is_bounded_in_count_and_cancelled_at_shutdown_after_the_grace(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(asgi, "BACKGROUND_LIMIT", 2)
    monkeypatch.setattr(asgi, "SHUTDOWN_GRACE", 0.5)
    api = asgi_api.build_api()
    async with Client(MCPKit.from_fastapi(api)) as client:
        for user in ("ann", "ben", "cat"):
            result = await client.call_tool("signup", {"user": user, "delay": 3600})
            assert not result.is_error  # the answers all arrive
        assert await _welcomed(api, 1) == ["cancelled cat"]  # past the bound, the newest work is cancelled
        assert "already running after their answers" in caplog.text
        started = asyncio.get_running_loop().time()
    took = asyncio.get_running_loop().time() - started
    assert sorted(api.state.welcomed) == ["cancelled ann", "cancelled ben", "cancelled cat"]
    assert took < 0.5 * 2 + 10  # (the grace for the work, then the lifespan's own)
    assert api.state.events == ["startup", "shutdown"]


async def test_an_exception_in_the_api_is_a_500_result_and_the_session_goes_on() -> None:
    async with Client(MCPKit.from_fastapi(asgi_api.build_api())) as client:
        boom = await client.call_tool("boom", {})
        assert boom.is_error and "HTTP 500" in boom.text
        assert not (await client.call_tool("getItem", {"item_id": 1})).is_error


async def test_a_client_of_its_own_must_use_the_apps_transport() -> None:
    """Checked when the server starts, with one request through the client that only the app's in-process
    transport answers (it was asked of httpx's private API): a client sending anywhere else, through another app's
    transport, or through a transport that answers every request, is refused; the check carries none of the
    client's credentials."""
    api = asgi_api.build_api()
    with pytest.raises(TypeError, match=r"openapi\(\) method"):
        MCPKit.from_fastapi(object())
    seen: list[httpx.Request] = []

    def answer_all(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    answers_all = httpx.MockTransport(answer_all)
    for wrong in (
        httpx.AsyncClient(base_url="http://127.0.0.1:9"),
        httpx.AsyncClient(transport=InProcessTransport(asgi_api.build_api())),  # another app's transport
        httpx.AsyncClient(transport=answers_all, headers={"Authorization": "Bearer s3cret"}, cookies={"sid": "s"}),
        httpx.AsyncClient(mounts={"http://asgi.internal": answers_all}, auth=("alice", "s3cret")),
    ):
        app = MCPKit.from_fastapi(api, client=wrong)
        with pytest.raises(ValueError, match="InProcessTransport"):
            await app.startup()
        await wrong.aclose()
    assert len(seen) == 2 and not any({"authorization", "cookie"} & set(r.headers) for r in seen), seen
    with pytest.raises(TypeError, match="base_url"):
        MCPKit.from_fastapi(api, base_url="http://elsewhere")
    own = httpx.AsyncClient(transport=InProcessTransport(api), headers={"Authorization": asgi_api.SHARED_TOKEN})
    async with own, Client(MCPKit.from_fastapi(api, client=own)) as client:
        me = await client.call_tool("me", {})  # the client's own headers go with every request
        assert not me.is_error and me.structured == {"user": "alice"}
        assert not (await client.call_tool("greeting", {})).is_error  # and its lifespan ran


async def test_any_asgi_app_with_a_document_of_its_own_and_no_lifespan() -> None:
    seen: list[str] = []

    async def raw(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http"  # (no lifespan support: served without one)
        seen.append(scope["path"] + "?" + scope["query_string"].decode())
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": json.dumps({"ok": True}).encode()})

    spec = {
        "openapi": "3.1.0",
        "info": {"title": "Raw", "version": "1"},
        "servers": [{"url": "/v2"}],
        "paths": {
            "/ping": {
                "get": {
                    "operationId": "ping",
                    "parameters": [{"name": "n", "in": "query", "schema": {"type": "integer"}}],
                    "responses": {"200": {"description": "pong"}},
                }
            }
        },
    }
    async with Client(MCPKit.from_asgi(raw, spec)) as client:
        assert not (await client.call_tool("ping", {"n": 3})).is_error
    assert seen == ["/v2/ping?n=3"]  # (the document's relative server URL is kept)


@pytest.mark.parametrize(
    ("options", "servers", "reached"),
    [
        # FastAPI(root_path=): api.openapi() names no server (FastAPI adds one only to the /openapi.json it serves),
        # so the route is called at its own path; FastAPI sets its root_path in the scope itself
        ({"root_path": "/api"}, None, {"url": "/where", "path": "/where", "root_path": "/api"}),
        # a document whose server is a path (the app served under /api behind a proxy): the request carries the
        # whole path and that prefix as its root_path, as uvicorn --root-path gives (it was a 404)
        (
            {"servers": [{"url": "/api"}]},
            [{"url": "/api"}],
            {"url": "/api/where", "path": "/api/where", "root_path": "/api"},
        ),
        (
            {"root_path": "/api", "servers": [{"url": "/api"}]},
            [{"url": "/api"}],
            {"url": "/api/where", "path": "/api/where", "root_path": "/api"},
        ),
    ],
    ids=["root_path", "servers", "both"],
)
async def test_an_api_under_a_path_prefix_is_reached_at_its_routes_with_that_prefix_as_root_path(
    options: dict[str, Any], servers: Any, reached: dict[str, str]
) -> None:
    api = asgi_api.build_prefixed_api(**options)
    assert api.openapi().get("servers") == servers
    own = httpx.AsyncClient(transport=InProcessTransport(api))  # (the transport found at startup gets the prefix)
    for app in (MCPKit.from_fastapi(api), MCPKit.from_fastapi(api, client=own)):
        async with Client(app) as client:
            answer = await client.call_tool("where", {})
            assert not answer.is_error, answer.text
            assert answer.structured == reached
    await own.aclose()


async def test_an_api_whose_startup_hangs_fails_the_start_after_startup_timeout_naming_it() -> None:
    """It used to be waited for without end: the MCP server never started, and said nothing."""
    stopped: list[str] = []

    async def hangs(scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "lifespan"
        await receive()
        try:
            await asyncio.sleep(3600)  # (never says its startup is complete)
        finally:
            stopped.append("cancelled")

    spec = {"openapi": "3.1.0", "info": {"title": "Slow Starter", "version": "1"}, "paths": {}}
    with pytest.raises(ValueError, match="startup_timeout"):
        MCPKit.from_asgi(hangs, spec, startup_timeout=0)
    assert asgi.STARTUP_TIMEOUT == 60.0
    app = MCPKit.from_asgi(hangs, spec, startup_timeout=0.5)
    started = asyncio.get_running_loop().time()
    with pytest.raises(TimeoutError, match=r"function 'Slow Starter'.* 0\.5 s .*startup_timeout="):
        await app.startup()
    assert 0.5 <= asyncio.get_running_loop().time() - started < 5
    assert stopped == ["cancelled"]  # (its lifespan does not outlive the failed start)
    with pytest.raises(ServerStartError, match="Slow Starter"):  # (a client of it: the server does not start)
        async with Client(MCPKit.from_asgi(hangs, spec, startup_timeout=0.2)):
            pass


async def test_an_api_whose_shutdown_hangs_is_cancelled_after_the_grace(caplog: pytest.LogCaptureFixture) -> None:
    stopped: list[str] = []

    async def stuck(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            try:
                await asyncio.sleep(3600)  # (never says its shutdown is complete)
            finally:
                stopped.append("cancelled")
            return
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    spec = {"openapi": "3.1.0", "info": {"title": "Stuck", "version": "1"}, "paths": {}}
    app = MCPKit.from_asgi(stuck, spec)
    await app.startup()
    started = asyncio.get_running_loop().time()
    await app.shutdown()
    took = asyncio.get_running_loop().time() - started
    assert stopped == ["cancelled"]
    assert SHUTDOWN_GRACE <= took < SHUTDOWN_GRACE + 20  # (the server stops: bounded, however the API behaves)
    assert "did not end within" in caplog.text
