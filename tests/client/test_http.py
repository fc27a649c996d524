"""mcpkit's clients over the network, against real servers.

The high-level Client: Streamable HTTP (both eras), the legacy HTTP+SSE fallback, WebSocket, stale-session
self-healing, SSE resumption through the client, and npm server-everything over Streamable HTTP. Below it (second
half of the file): the Streamable HTTP client transport under ClientSession: headers per era, session expiry,
resumption of POST and GET streams, era fallback, wire traffic against the official schemas, timeouts.

Servers are real: mcpkit's ASGI app on uvicorn bound to 127.0.0.1 (port 0), and the Node reference server."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mcpkit import MCPKit
from mcpkit.client.client import Client, SessionExpired
from mcpkit.client.lowlevel import ClientSession
from mcpkit.protocol.errors import MCPError, RequestTimeout
from mcpkit.server.interceptors import Call, CallNext
from mcpkit.server.lowlevel import Server
from mcpkit.server.session import ServerSession
from mcpkit.stores import InMemoryEventStore
from mcpkit.transports.http import SessionExpired as TransportSessionExpired
from mcpkit.transports.http import StreamableHTTPClientTransport, client_support
from support.asgi import serve_asgi
from support.mcp_http import MODERN, make_server, running, silent_prompt
from support.paths import INTEROP, TESTS
from support.servers.client_server import build_server, state

EVERYTHING = TESTS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
PRELOAD = INTEROP / "localhost_preload.mjs"
ERAS = ["handshake", "modern"]


class Recorder:
    """ASGI middleware that records every HTTP request: (method, path, headers, body)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.times: list[float] = []  # loop time at which each request arrived

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        entry: list[Any] = [scope["method"], scope["path"], headers, b""]
        self.requests.append(entry)  # type: ignore[arg-type]
        self.times.append(asyncio.get_running_loop().time())

        async def recv() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                entry[3] += message.get("body", b"")
            return message

        await self.app(scope, recv, send)


@contextlib.asynccontextmanager
async def serving(server: Any, **options: Any) -> AsyncIterator[tuple[str, Any, Recorder]]:
    """``running`` (real uvicorn on 127.0.0.1) with every transport of ``create_app`` on and a :class:`Recorder`
    in front of the app."""
    recorders: list[Recorder] = []

    def record(app: Any) -> Recorder:
        recorders.append(Recorder(app))
        return recorders[0]

    options.setdefault("sse", True)
    options.setdefault("ws", True)
    async with running(server, wrap=record, **options) as (base, app):
        yield base, app, recorders[0]


@pytest.fixture(autouse=True)
def _reset_state() -> None:
    state.update(cancelled=[], finished=[], counter=0, roots_changed=0)


@pytest.mark.parametrize("mode", ERAS)
async def test_streamable_http_both_eras(mode: str) -> None:
    async with (
        serving(build_server()) as (base, _, _rec),
        Client(
            f"{base}/mcp",
            mode=mode,
            roots=["file:///h"],
            sampling_handler=lambda p: "http-llm",
            elicitation_handler=lambda p: {"name": "Ada"},
        ) as c,
    ):
        assert c.target.kind == "http"
        assert c.protocol_version == ("2026-07-28" if mode == "modern" else "2025-11-25")
        assert len(await c.list_tools()) == 27
        assert (await c.call_tool("add", {"a": 1, "b": 2})).data == {"sum": 3}
        assert json.loads((await c.call_tool("ask")).text)["content"]["name"] == "Ada"
        assert "http-llm" in (await c.call_tool("sample")).text
        assert "file:///h" in (await c.call_tool("roots")).text
        seen: list[float] = []
        await c.call_tool("slow", {"steps": 3, "delay": 0.01}, on_progress=lambda p, t, m: seen.append(p))
        assert seen == [1.0, 2.0, 3.0]
        assert await c.read_text("mcpkit://text/2") == "text number 2"
        assert (await c.get_prompt("greet", {"name": "H"})).messages
        # cancelling the awaiting task sends notifications/cancelled over HTTP and stops the handler
        task = asyncio.create_task(c.call_tool("slow", {"steps": 50, "delay": 0.05}))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(100):
            if state["cancelled"]:
                break
            await asyncio.sleep(0.02)
        assert len(state["cancelled"]) == 1 and state["cancelled"][0] not in state["finished"]


@pytest.mark.req("S019", "S020")
@pytest.mark.parametrize("mode", ERAS)
async def test_timeout_over_streamable_http_cancels_in_time(mode: str) -> None:
    async with serving(build_server()) as (base, _, _rec), Client(f"{base}/mcp", mode=mode) as c:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(RequestTimeout):
            await c.call_tool("slow", {"steps": 20, "delay": 0.1}, timeout=0.3)
        assert loop.time() - start < 1.0
        for _ in range(50):
            if state["cancelled"]:
                break
            await asyncio.sleep(0.02)
        assert state["cancelled"] and not state["finished"]


@pytest.mark.req("M019", "M020", "M021", "M024", "M029", "S007")
async def test_http_wire_rules_handshake() -> None:
    async with serving(build_server()) as (base, app, rec):
        async with Client(f"{base}/mcp", mode="handshake") as c:
            await c.list_tools()
            await c.call_tool("echo", {"text": "x"})
            await asyncio.sleep(0.1)  # let the standalone GET stream open
            assert app.streamable.session_count == 1
            open_sid = [r for r in rec.requests if r[0] == "POST"][-1][2].get("mcp-session-id")
            assert open_sid and app.streamable.session_ids() == [open_sid]
        for _ in range(100):
            if app.streamable.session_count == 0:
                break
            await asyncio.sleep(0.02)
        assert app.streamable.session_count == 0, " ".join(r[0] for r in rec.requests)  # DELETE sent
    posts = [r for r in rec.requests if r[0] == "POST"]
    assert posts and all(r[1] == "/mcp" for r in posts)
    for _, _, headers, body in posts:
        accept = {a.strip() for a in headers["accept"].split(",")}
        assert {"application/json", "text/event-stream"} <= accept
        msg = json.loads(body)
        assert isinstance(msg, dict) and msg["jsonrpc"] == "2.0"  # one message per POST, never a batch
    session_id = None
    for method, _, headers, body in rec.requests:
        if method == "POST" and json.loads(body).get("method") == "initialize":
            assert "mcp-session-id" not in headers
            continue
        sid = headers.get("mcp-session-id")
        assert sid, f"{method} without Mcp-Session-Id"
        session_id = session_id or sid
        assert sid == session_id
        if method != "DELETE" and json.loads(body or b"{}").get("method") != "notifications/initialized":
            assert headers.get("mcp-protocol-version") == "2025-11-25"
    gets = [r for r in rec.requests if r[0] == "GET"]
    assert gets and all("text/event-stream" in r[2]["accept"] for r in gets)
    assert [r[0] for r in rec.requests][-1] == "DELETE"
    deletes = [r for r in rec.requests if r[0] == "DELETE"]
    assert len(deletes) == 1 and deletes[0][2]["mcp-session-id"] == session_id == open_sid


async def test_self_healing_after_the_server_forgets_the_session() -> None:
    async with serving(build_server()) as (base, app, _rec), Client(f"{base}/mcp", mode="handshake") as c:
        await c.list_tools()
        first = app.streamable.session_ids()

        async def forget() -> None:
            for sid in app.streamable.session_ids():
                await app.streamable.sessions.end(app.streamable._sessions[sid])

        await forget()
        # a safe request is retried once on a fresh session, transparently
        assert len(await c.list_tools()) == 27
        assert c.reconnects == 1 and app.streamable.session_ids() != first
        # an idempotent tool (idempotentHint) is retried too
        await forget()
        assert (await c.call_tool("add", {"a": 2, "b": 2})).data == {"sum": 4}
        assert c.reconnects == 2
        # a tool that is neither read-only nor idempotent is NOT repeated: the caller is told, the session is
        # already fresh for the next call
        await forget()
        with pytest.raises(SessionExpired, match="not safe to repeat"):
            await c.call_tool("counter")
        assert c.reconnects == 3
        assert (await c.call_tool("counter")).text == "1"  # ran exactly once
        assert state["counter"] == 1


async def test_self_healing_renews_subscriptions() -> None:
    server = build_server()
    notes: list[tuple[str, Any]] = []
    async with (
        serving(server) as (base, app, _rec),
        Client(f"{base}/mcp", mode="handshake", on_notification=lambda m, p: notes.append((m, p))) as c,
    ):
        await c.subscribe_resource("mcpkit://text/1")
        for sid in app.streamable.session_ids():
            await app.streamable.sessions.end(app.streamable._sessions[sid])
        await c.ping()  # 404 -> re-initialize -> subscriptions renewed -> retry
        assert c.reconnects == 1
        await server.notify_resource_updated("mcpkit://text/1")
        for _ in range(100):
            if notes:
                break
            await asyncio.sleep(0.02)
        assert ("notifications/resources/updated", {"uri": "mcpkit://text/1"}) in notes


async def test_self_healing_can_be_disabled() -> None:
    async with (
        serving(build_server()) as (base, app, _rec),
        Client(f"{base}/mcp", mode="handshake", reconnect=False) as c,
        Client(base.replace("http://", "ws://") + "/ws", reconnect=False) as over_ws,
    ):
        await c.list_tools()
        await over_ws.list_tools()
        for sid in app.streamable.session_ids():
            await app.streamable.sessions.end(app.streamable._sessions[sid])
        with pytest.raises(ConnectionError):
            await c.list_tools()
        assert c.reconnects == 0
        await app.ws.aclose()
        await _ended(over_ws)
        with pytest.raises(ConnectionError):
            await over_ws.list_tools()
        assert over_ws.reconnects == 0


async def _ended(client: Client) -> None:
    for _ in range(200):
        if client.session.ended is not None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the connection did not end")


def _bound(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    return sock


@pytest.mark.parametrize(("kind", "mode"), [("ws", "handshake"), ("ws", "modern"), ("sse", "handshake")])
async def test_self_healing_over_websocket_and_legacy_sse_after_a_server_restart(kind: str, mode: str) -> None:
    """After a server restart, every later call of a WebSocket or legacy SSE client failed ("connection closed by
    the peer") until the user built a new Client; only Streamable HTTP re-initialized. Now the client connects
    again (the same bounded backoff, a new handshake in the handshake era): a call made once the connection has
    ended is sent on the new one whatever it is (it was never sent); a safe call cut by the end is repeated, an
    unsafe one is not."""
    from mcpkit.transports.http import create_app

    sock = _bound()
    counted = {"n": 0}

    def restartable() -> Any:
        app = MCPKit("restartable", "1.0.0")

        @app.tool
        def counter() -> str:
            """Counts (not safe to repeat)."""
            counted["n"] += 1
            return str(counted["n"])

        @app.tool(annotations={"readOnlyHint": True})
        async def wait() -> str:
            """Waits a little (read-only: safe to repeat)."""
            await asyncio.sleep(0.6)
            return "waited"

        @app.tool
        async def slow_counter() -> str:
            """Waits, then counts (not safe to repeat)."""
            await asyncio.sleep(0.6)
            counted["n"] += 1
            return str(counted["n"])

        return app

    port = sock.getsockname()[1]
    url = f"ws://127.0.0.1:{port}/ws" if kind == "ws" else f"http://127.0.0.1:{port}/sse"
    client = Client(url, mode=mode, transport="sse" if kind == "sse" else None)  # type: ignore[arg-type]
    async with serve_asgi(create_app(restartable(), sse=True, ws=True), sock=sock):
        await client.connect()
        assert (await client.call_tool("counter")).text == "1"
    try:
        await _ended(client)  # (the server stopped: its connection ended)
        app = create_app(restartable(), sse=True, ws=True)
        async with serve_asgi(app, sock=_bound(port)):
            assert (await client.call_tool("counter")).text == "2"  # not safe to repeat, but it was never sent
            assert client.reconnects == 1
            if kind == "sse" or mode == "handshake":
                assert client.protocol_version is not None
            # the connection ends under a safe call: it is repeated on a new one
            ended = asyncio.get_running_loop().call_later(0.3, lambda: asyncio.ensure_future(_end_all(app)))
            assert (await client.call_tool("wait")).text == "waited"  # (readOnlyHint: safe)
            ended.cancel()
            assert client.reconnects == 2
            # ... and under an unsafe call: not repeated, the caller is told; the next call goes through
            asyncio.get_running_loop().call_later(0.3, lambda: asyncio.ensure_future(_end_all(app)))
            with pytest.raises(SessionExpired, match="not safe to repeat"):
                await client.call_tool("slow_counter")
            assert client.reconnects == 3
            assert (await client.call_tool("counter")).text in ("3", "4")  # (the cut call may have run, once)
    finally:
        await client.aclose()


@pytest.mark.parametrize("kind", ["ws", "sse"])
async def test_a_client_whose_server_is_down_while_it_reconnects_connects_again_once_it_is_back(kind: str) -> None:
    """A WebSocket or legacy SSE client whose server is restarting: the call made while it is down fails with
    ConnectionClosed saying the re-initialization failed and why (legacy SSE raised httpx.ConnectError, an
    exception of a library the user never called), and once the server is back the next call connects again.
    Before, the client stayed dead for good: every later call said "the client is not connected (use `async with
    Client(...)`)", inside that very ``async with``."""
    from mcpkit.protocol.errors import ConnectionClosed
    from mcpkit.transports.http import create_app

    sock = _bound()
    port = sock.getsockname()[1]

    def counting() -> Any:
        app = MCPKit("counting", "1.0.0")
        counted = {"n": 0}

        @app.tool
        def counter() -> str:
            """Counts."""
            counted["n"] += 1
            return str(counted["n"])

        return app

    url = f"ws://127.0.0.1:{port}/ws" if kind == "ws" else f"http://127.0.0.1:{port}/sse"
    client = Client(url, mode="handshake", transport=kind, backoff_initial=0.01)  # type: ignore[arg-type]
    try:
        async with serve_asgi(create_app(counting(), sse=True, ws=True), sock=sock):
            await client.connect()
            assert (await client.call_tool("counter")).text == "1"
        await _ended(client)
        for _ in range(2):  # (the server is down: each call tries again, and says why it failed)
            with pytest.raises(ConnectionClosed) as info:
                await client.call_tool("counter")
            message = str(info.value)
            assert "could not re-initialize" in message and "connection refused" in message, message
        async with serve_asgi(create_app(counting(), sse=True, ws=True), sock=_bound(port)):
            assert (await client.call_tool("counter")).text == "1"  # (a new server: its own count)
            assert client.connected
    finally:
        await client.aclose()


async def _end_all(app: Any) -> None:
    await app.ws.aclose()
    await app.sse.aclose()


@pytest.mark.parametrize("mode", ERAS)
async def test_legacy_sse_fallback(mode: str) -> None:
    async with (
        serving(build_server()) as (base, _, rec),
        Client(f"{base}/sse", mode=mode, elicitation_handler=lambda p: {"name": "Old"}) as c,
    ):
        assert c.target.kind == "sse"  # the POST failed with 4xx, the client switched to HTTP+SSE
        assert (await c.call_tool("echo", {"text": "legacy"})).text == "legacy"
        assert "Old" in (await c.call_tool("ask")).text
    first_post = next(r for r in rec.requests if r[0] == "POST")
    assert first_post[1] == "/sse"
    assert any(r[0] == "GET" and r[1] == "/sse" for r in rec.requests)


async def test_forced_transports_and_websocket() -> None:
    async with serving(build_server()) as (base, _, _rec):
        async with Client(f"{base}/sse", transport="sse") as c:
            assert (await c.call_tool("echo", {"text": "sse"})).text == "sse"
        ws = base.replace("http://", "ws://") + "/ws"
        for mode in ERAS:
            async with Client(ws, mode=mode, sampling_handler=lambda p: "ws-llm") as c:
                assert c.target.kind == "ws"
                assert (await c.call_tool("echo", {"text": "ws"})).text == "ws"
                assert "ws-llm" in (await c.call_tool("sample")).text


async def test_sse_stream_resumption_through_the_client() -> None:
    from mcpkit.stores import InMemoryEventStore
    from support.mcp_http import make_server

    logs: list[Any] = []
    async with (
        serving(make_server(), event_store=InMemoryEventStore(), retry_interval=100) as (base, _, rec),
        Client(f"{base}/mcp", mode="handshake", logging_handler=logs.append) as c,
    ):
        r = await c.call_tool("polled", {"n": 6})
        assert r.text == "polled 6"
    assert [m["data"] for m in logs] == [f"event {i}" for i in range(6)]  # nothing lost across the drop
    resumed = [i for i, r in enumerate(rec.requests) if r[0] == "GET" and "last-event-id" in r[2]]
    assert resumed  # the dropped stream was resumed with Last-Event-ID
    call = next(i for i, r in enumerate(rec.requests) if r[0] == "POST" and b'"polled"' in r[3])
    # the handler closes the stream after >= 80 ms of work, announcing `retry: 50` (close_sse_stream(ctx, 50)):
    # the client waited that long before resuming
    assert rec.times[resumed[0]] - rec.times[call] >= 0.125


# ---------------------------------------------------------------------------------------------- server-everything


@contextlib.contextmanager
def everything_http(node_bin: Path, mode: str) -> Any:
    if not EVERYTHING.is_file():
        pytest.skip("server-everything missing: run scripts/test.sh")
    env = {**os.environ, "PORT": "0"}
    proc = subprocess.Popen(
        [str(node_bin), "--import", str(PRELOAD), str(EVERYTHING), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        port = None
        assert proc.stdout is not None
        for _ in range(50):
            line = proc.stdout.readline()
            if not line:
                break
            if line.startswith("{") and '"port"' in line:
                port = json.loads(line)["port"]
                break
        assert port, "server-everything did not announce its port"
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.npm
async def test_everything_over_streamable_http(node_bin: Path) -> None:
    with everything_http(node_bin, "streamableHttp") as base:
        async with Client(
            f"{base}/mcp",
            roots=["file:///e"],
            sampling_handler=lambda p: "via http",
            elicitation_handler=lambda p: {"action": "decline"},
        ) as c:
            assert c.protocol_version == "2025-11-25"
            names = {t.name for t in await c.list_tools()}
            assert {"echo", "get-sum", "trigger-sampling-request", "get-roots-list"} <= names
            assert (await c.call_tool("echo", {"message": "h"})).text == "Echo: h"
            assert (await c.call_tool("get-structured-content", {"location": "New York"})).validated
            assert "via http" in (await c.call_tool("trigger-sampling-request", {"prompt": "x"})).text
            assert "file:///e" in (await c.call_tool("get-roots-list")).text
            assert "declined" in (await c.call_tool("trigger-elicitation-request")).text
            seen: list[float] = []
            await c.call_tool(
                "trigger-long-running-operation",
                {"duration": 0.5, "steps": 2},
                on_progress=lambda p, t, m: seen.append(p),
            )
            assert seen == [1.0, 2.0]
            assert len(await c.list_resources()) == 7
            assert (await c.get_prompt("args-prompt", {"city": "Oslo"})).messages
            await c.ping()


@pytest.mark.npm
async def test_everything_over_legacy_sse(node_bin: Path) -> None:
    with everything_http(node_bin, "sse") as base:
        async with Client(f"{base}/sse") as c:
            assert c.target.kind == "sse"
            assert (await c.call_tool("get-sum", {"a": 1, "b": 2})).text.endswith("is 3.")
            assert len(await c.list_prompts()) == 4


async def test_reinitialization_backs_off_and_gives_up() -> None:
    from mcpkit.protocol.errors import ConnectionClosed

    async with serving(build_server()) as (base, app, _rec):
        c = Client(f"{base}/mcp", mode="handshake", max_reconnect_attempts=3, backoff_initial=0.1, backoff_max=0.15)
        await c.connect()
        try:
            await c.list_tools()
            for sid in app.streamable.session_ids():
                await app.streamable.sessions.end(app.streamable._sessions[sid])
            real = app.routes["/mcp"]

            async def refuse_new_sessions(scope: Any, receive: Any, send: Any) -> None:
                # the stale session still gets its 404; a new initialize gets 503 (the server is "restarting")
                if any(k == b"mcp-session-id" for k, _ in scope["headers"]):
                    await real(scope, receive, send)
                    return
                await send({"type": "http.response.start", "status": 503, "headers": []})
                await send({"type": "http.response.body", "body": b"down"})

            app.routes["/mcp"] = refuse_new_sessions
            loop = asyncio.get_running_loop()
            start = loop.time()
            with pytest.raises(ConnectionClosed, match="could not re-initialize"):
                await c.list_tools()
            elapsed = loop.time() - start
            assert 0.25 <= elapsed < 3  # two waits between three attempts: 0.1 then 0.15 (capped)
            assert c.reconnects == 0 and not c.connected
        finally:
            await c.aclose()


# ---------------------------------------------------------------------------------------------- TS SDK v2 over HTTP

TS_V2 = INTEROP / "ts_server_v2.mjs"


@pytest.mark.npm
@pytest.mark.parametrize("mode", ERAS)
async def test_typescript_v2_server_over_http(node_bin: Path, mode: str, caplog: pytest.LogCaptureFixture) -> None:
    if not TS_V2.is_file():
        pytest.skip("tests/support/interop/ts_server_v2.mjs missing")
    proc = subprocess.Popen(
        [str(node_bin), str(TS_V2), "--http", "--port", "0", "--legacy", "sessionful"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = json.loads(proc.stdout.readline())["listening"]
        caplog.set_level("WARNING", logger="mcpkit")
        async with Client(
            url,
            mode=mode,
            roots=["file:///ts"],
            sampling_handler=lambda p: "from mcpkit",
            elicitation_handler=lambda p: {"name": "Grace"},
        ) as c:
            assert c.protocol_version == ("2026-07-28" if mode == "modern" else "2025-11-25")
            added = await c.call_tool("add", {"a": 1, "b": 2})
            assert added.validated and added.data == 3
            assert "from mcpkit" in (await c.call_tool("sample", {"prompt": "x"})).text
            assert (await c.call_tool("ask_name")).text == "Hello, Grace!"
            assert "file:///ts" in (await c.call_tool("roots")).text
            assert len(await c.list_resources()) == 101
            seen: list[float] = []
            await c.call_tool("slow", {"steps": 2, "delay_ms": 5}, on_progress=lambda p, t, m: seen.append(p))
            assert seen == [1.0, 2.0]
            async with c.watch(resource_uris=["mcpkit://counter"]) as w:
                await c.call_tool("touch", {})
                method, params = await w.next(timeout=5)
                assert method == "notifications/resources/updated" and params["uri"] == "mcpkit://counter"
        # the server answered the standalone GET at once (its status line), so the connect did not wait
        # GET_OPEN_WAIT for it
        assert not [r.getMessage() for r in caplog.records if "standalone GET" in r.getMessage()]
    finally:
        proc.terminate()
        proc.wait(10)


# ---------------------------------------------------------------------------------------------- the standalone GET
# stream open before the next message (a server may send its requests there only)

TS_STANDALONE = INTEROP / "ts_standalone_server.mjs"
GET_DELAY_MS = 1000  # how long that server holds every GET before its SDK sees it


@contextlib.contextmanager
def standalone_server(node_bin: Path, get_delay_ms: int, *args: str) -> Any:
    """The TypeScript SDK server of ``ts_standalone_server.mjs`` (its ``ask`` elicits on the standalone GET stream,
    dropped while none is open), holding every GET ``get_delay_ms``, with its further ``args``; yields its URL."""
    proc = subprocess.Popen(
        [str(node_bin), str(TS_STANDALONE), "--port", "0", "--get-delay-ms", str(get_delay_ms), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        yield json.loads(proc.stdout.readline())["listening"]
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.npm
@pytest.mark.parametrize("fast", [True, False], ids=["lite-engine", "httpx-engine"])
async def test_a_call_right_after_connecting_gets_the_request_the_server_sends_on_the_standalone_stream(
    node_bin: Path, fast: bool
) -> None:
    """The official TypeScript SDK sends a server request that is not tied to the client's (the conformance
    suite's elicitations) on the standalone GET stream only, and drops it while no such stream is open. The client
    opened that stream in the background after negotiating and sent its next request at once: on a loaded machine
    the ``tools/call`` reached the server before the GET, its elicitation was dropped and the call waited for its
    timeout (the conformance leg elicitation-sep1034-client-defaults failed so, "Connection closed"). Made certain
    here: the server holds every GET a second. The session's connect now waits until the server answered the GET,
    so the call gets its elicitation."""
    asked: list[Any] = []

    def on_elicit(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params["message"])
        return {"action": "accept", "content": {"name": "Ada"}}

    with standalone_server(node_bin, GET_DELAY_MS) as url:
        transport = StreamableHTTPClientTransport(url, fast_path=fast)
        async with transport, ClientSession(transport, mode="handshake", elicitation_handler=on_elicit) as cs:
            result = await cs.call_tool("ask", {}, timeout=10)
    assert asked == ["Your name?"]
    assert result.content[0].text == 'accepted: {"name":"Ada"}'  # type: ignore[union-attr]


@pytest.mark.npm
@pytest.mark.parametrize(
    ("fast", "get_delay_ms"),
    [(True, GET_DELAY_MS), (False, GET_DELAY_MS), (True, 0)],
    ids=["lite-engine-held-get", "httpx-engine-held-get", "lite-engine-prompt-get"],
)
async def test_the_request_a_server_sends_when_the_session_is_initialized_reaches_the_client(
    node_bin: Path, fast: bool, get_delay_ms: int
) -> None:
    """The official TypeScript SDK server of ``ts_standalone_server.mjs`` asks for the client's roots the moment
    ``notifications/initialized`` arrives (``oninitialized``): that ``roots/list`` is tied to no client request, so
    the SDK writes it on the standalone GET stream, and drops it when none is open. The client opened that stream
    only after posting ``notifications/initialized``: the request was lost (every run, the GET held or not: 8 of 8
    without holding it, on a loaded machine). Now the client opens the stream, and waits for its status line,
    before it posts ``notifications/initialized``."""
    with standalone_server(node_bin, get_delay_ms) as url:
        transport = StreamableHTTPClientTransport(url, fast_path=fast)
        async with transport, ClientSession(transport, mode="handshake", roots=["file:///work"]) as cs:
            result = await cs.call_tool("initial_roots", {}, timeout=10)
    assert result.content[0].text == 'answered: ["file:///work"]'  # type: ignore[union-attr]


@pytest.mark.npm
async def test_a_server_refusing_the_get_before_initialized_gets_it_again_after(node_bin: Path) -> None:
    """The client opens the standalone GET before it posts ``notifications/initialized``; a server stricter than
    the spec that refuses such a GET (``--strict-get``: 400) gets it once more after, and its requests on that
    stream reach the client (the elicitation of ``ask``)."""

    def on_elicit(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Ada"}}

    with standalone_server(node_bin, 0, "--strict-get") as url:
        transport = StreamableHTTPClientTransport(url)
        async with transport, ClientSession(transport, mode="handshake", elicitation_handler=on_elicit) as cs:
            result = await cs.call_tool("ask", {}, timeout=10)
    assert result.content[0].text == 'accepted: {"name":"Ada"}'  # type: ignore[union-attr]


@pytest.mark.parametrize("fast", [True, False], ids=["lite-engine", "httpx-engine"])
async def test_the_request_an_mcpkit_server_sends_when_the_session_is_initialized_reaches_the_client(
    fast: bool,
) -> None:
    """mcpkit's own server sends a request tied to no client request on the session's GET stream, and fails it
    when no such stream was opened: an interceptor that asks for the roots as ``notifications/initialized`` arrives
    got "no standalone GET stream is open" while the client opened that stream after the notification. It is
    open before now."""
    asked: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    tasks: list[asyncio.Task[Any]] = []

    async def roots_on_initialized(call: Call, call_next: CallNext) -> Any:
        result = await call_next(call)
        session = call.session
        if isinstance(session, ServerSession):
            task = asyncio.ensure_future(session.request("roots/list", timeout=5))
            task.add_done_callback(lambda t: asked.set_result(t.exception() or t.result()))
            tasks.append(task)
        return result

    server = make_server()
    server.add_interceptor(roots_on_initialized, methods="notifications/initialized", notifications=True)
    async with running(server) as (base, _):
        transport = StreamableHTTPClientTransport(base + "/mcp", fast_path=fast)
        async with transport, ClientSession(transport, mode="handshake", roots=["file:///work"]) as cs:
            got = await asyncio.wait_for(asked, 10)
            assert (await cs.list_tools()).tools
    assert isinstance(got, dict) and [r["uri"] for r in got["roots"]] == ["file:///work"], got


async def test_the_waits_for_a_get_refused_before_initialized_and_for_the_next_share_get_open_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The waits for the standalone GET before and after ``notifications/initialized`` share one bound: a server
    that refuses the first GET late (0.8 s, 400) and holds the next one costs the connect ``GET_OPEN_WAIT`` (1 s)
    in all, not 0.8 s plus a whole second wait."""
    monkeypatch.setattr(client_support, "GET_OPEN_WAIT", 1.0)
    gets: list[float] = []

    def refuse_then_hold(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["method"] == "GET":
                gets.append(time.monotonic())
                await asyncio.sleep(0.8 if len(gets) == 1 else 2.0)
                await send({"type": "http.response.start", "status": 400 if len(gets) == 1 else 405, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            await app(scope, receive, send)

        return wrapped

    async with running(make_server(), wrap=refuse_then_hold) as (base, _):
        transport = StreamableHTTPClientTransport(base + "/mcp")
        t0 = time.monotonic()
        async with transport, ClientSession(transport, mode="handshake") as cs:
            connected = time.monotonic() - t0
            assert (await cs.list_tools()).tools
    assert len(gets) == 2  # the refused GET was sent again after notifications/initialized
    assert 1.0 <= connected < 1.6, connected


@pytest.mark.npm
async def test_a_standalone_get_never_answered_holds_the_connect_get_open_wait_seconds_once(
    node_bin: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The wait for the standalone GET is bounded (``GET_OPEN_WAIT``): against a server that does not answer it,
    the connect goes on after that long, with one warning, and the requests after it do not wait."""
    monkeypatch.setattr(client_support, "GET_OPEN_WAIT", 0.5)
    with standalone_server(node_bin, 60_000) as url, caplog.at_level("WARNING", logger="mcpkit"):
        transport = StreamableHTTPClientTransport(url)
        t0 = time.monotonic()
        async with transport, ClientSession(transport, mode="handshake") as cs:
            connected = time.monotonic() - t0
            t0 = time.monotonic()
            await asyncio.gather(*(cs.list_tools() for _ in range(3)))
            after = time.monotonic() - t0
    assert 0.5 <= connected < 5, connected
    assert after < 0.5, after
    warnings = [r.getMessage() for r in caplog.records if "standalone GET" in r.getMessage()]
    assert len(warnings) == 1 and "0.5 s" in warnings[0], warnings


# ---------------------------------------------------------------------------------------------- ClientSession + the
# Streamable HTTP client transport (the layer under Client)


def answers() -> dict[str, Any]:
    return {"elicitation_handler": lambda p: {"action": "accept", "content": {"name": "Ada"}}}


class HeaderLog:
    """ASGI middleware recording (method, headers) of every HTTP request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []

    def __call__(self, app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                hdrs = {k.decode().lower(): v.decode("latin-1") for k, v in scope["headers"]}
                self.requests.append((scope["method"], hdrs))
            await app(scope, receive, send)

        return wrapped


@pytest.mark.parametrize("mode", ["handshake", "modern", "auto"])
async def test_client_session_over_streamable_http(mode: str) -> None:
    async with running(make_server()) as (base, app):
        transport = StreamableHTTPClientTransport(base + "/mcp")
        logs: list[Any] = []
        async with ClientSession(transport, mode=mode, logging_handler=logs.append, **answers()) as cs:
            assert cs.modern == (mode != "handshake")
            tools = await cs.list_tools()
            assert "echo" in [t.name for t in tools.tools]
            assert (await cs.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
            r = await cs.call_tool("progress", {"steps": 3})
            assert r.content[0].text == "done 3"  # type: ignore[union-attr]
            if mode == "handshake":
                assert [entry["data"] for entry in logs] == ["step 1", "step 2", "step 3"]  # via the POST's SSE
            assert (await cs.call_tool("ask")).content[0].text == "accept:Ada"  # type: ignore[union-attr]
            results = await asyncio.gather(*(cs.call_tool("echo", {"text": str(i)}) for i in range(32)))
            assert [x.content[0].text for x in results] == [str(i) for i in range(32)]  # type: ignore[union-attr]
        assert app.streamable.session_count == 0  # handshake sessions were DELETEd on close


@pytest.mark.parametrize(
    ("version", "expected"), [("2025-03-26", None), ("2025-06-18", "2025-06-18"), ("2025-11-25", "2025-11-25")]
)
async def test_protocol_version_header_only_from_2025_06_18(version: str, expected: str | None) -> None:
    log = HeaderLog()
    async with running(make_server(), wrap=log) as (base, _):
        async with ClientSession(StreamableHTTPClientTransport(base + "/mcp"), protocol_version=version) as cs:
            await cs.list_tools()
        after_init = [h for m, h in log.requests if m == "POST"][1:]
        assert after_init
        assert all(h.get("mcp-protocol-version") == expected for h in after_init)


async def test_modern_headers_and_x_mcp_header_mirroring() -> None:
    log = HeaderLog()
    async with running(make_server(), wrap=log) as (base, _):
        async with ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="modern") as cs:
            names = [t.name for t in (await cs.list_tools()).tools]
            assert "region" in names and "bad-header" not in names  # invalid x-mcp-header → tool excluded
            r = await cs.call_tool("region", {"region": "Zürich", "count": 7, "query": "q"})
            assert r.content[0].text == "Zürich/7"  # type: ignore[union-attr]
        h = next(h for m, h in log.requests if h.get("mcp-name") == "region")
        assert h["mcp-method"] == "tools/call" and h["mcp-protocol-version"] == MODERN
        assert h["mcp-param-region"] == "=?base64?WsO8cmljaA==?=" and h["mcp-param-count"] == "7"
        assert "mcp-param-query" not in h
        assert all("mcp-session-id" not in h for _, h in log.requests)


async def test_an_integer_too_large_for_its_mcp_param_header_is_refused_before_sending() -> None:
    """2026-07-28: an integer mirrored into an ``Mcp-Param-*`` header MUST lie within ±(2^53-1) (beyond it a
    JavaScript intermediary reads another number). The client sent such a value; it now refuses the call locally
    (-32602, naming the argument) and POSTs nothing; a value at the bound goes out."""
    log = HeaderLog()
    async with (
        running(make_server(), wrap=log) as (base, _),
        ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="modern") as cs,
    ):
        await cs.list_tools()
        for count in (2**53, -(2**53), 2**64, float(2**60)):
            before = len(log.requests)
            with pytest.raises(MCPError) as exc:
                await cs.call_tool("region", {"region": "eu", "count": count})
            assert exc.value.code == -32602 and "'count'" in exc.value.message, exc.value.message
            assert len(log.requests) == before  # nothing was sent
        r = await cs.call_tool("region", {"region": "eu", "count": -(2**53 - 1)})
        assert r.content[0].text == f"eu/{-(2**53 - 1)}"  # type: ignore[union-attr]


async def test_session_expired_is_signalled() -> None:
    async with running(make_server()) as (base, app):
        transport = StreamableHTTPClientTransport(base + "/mcp", get_stream=False)
        async with ClientSession(transport, mode="handshake") as cs:
            await cs.call_tool("echo", {"text": "x"})
            await app.streamable.aclose()  # the server forgets every session
            with pytest.raises(TransportSessionExpired):
                await cs.call_tool("echo", {"text": "y"})
            assert transport.session_id is None  # ready for a fresh initialize


@pytest.mark.req("A008", "A011", "A012")
async def test_client_resumes_after_the_server_closes_the_connection() -> None:
    async with running(make_server(), event_store=InMemoryEventStore()) as (base, _):
        logs: list[Any] = []
        transport = StreamableHTTPClientTransport(base + "/mcp", reconnect_delay=5.0)
        async with ClientSession(transport, mode="handshake", logging_handler=logs.append) as cs:
            t0 = time.monotonic()
            r = await cs.call_tool("polled", {"n": 6})
            elapsed = time.monotonic() - t0
        assert r.content[0].text == "polled 6"  # type: ignore[union-attr]
        assert [entry["data"] for entry in logs] == [f"event {i}" for i in range(6)]  # nothing lost, nothing doubled
        assert 0.05 <= elapsed < 3  # waited the server's retry: 50 ms, not the 5 s default


async def test_standalone_get_stream_delivers_server_notifications() -> None:
    async with running(make_server()) as (base, _):
        seen: list[str] = []
        got = asyncio.Event()

        def on_note(method: str, params: Any) -> None:
            seen.append(method)
            got.set()

        transport = StreamableHTTPClientTransport(base + "/mcp")
        async with ClientSession(transport, mode="handshake", notification_handler=on_note) as cs:
            await asyncio.sleep(0.2)  # the GET stream is open
            await cs.call_tool("touch")
            await asyncio.wait_for(got.wait(), 5)
        assert seen == ["notifications/tools/list_changed"]


async def test_era_fallback_against_single_era_servers() -> None:
    legacy = make_server()
    legacy_only = Server("legacy", "1", versions=["2025-03-26", "2025-06-18", "2025-11-25"])
    for method in ("tools/list",):
        legacy_only.set_handler(method, legacy._handlers[method])
    async with (
        running(legacy_only) as (base, _),
        ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="auto") as cs,
    ):
        assert not cs.modern and cs.protocol_version == "2025-11-25"
        await cs.list_tools()
    modern_only = Server("modern", "1", versions=[MODERN])
    modern_only.set_handler("tools/list", legacy._handlers["tools/list"])
    async with (
        running(modern_only) as (base, _),
        ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="auto") as cs,
    ):
        assert cs.modern
        await cs.list_tools()


async def test_one_app_serves_every_transport() -> None:
    """create_app mounts the legacy SSE endpoint (/sse, /messages, /message) and WebSocket (/ws) next to /mcp."""
    import httpx

    from mcpkit.transports.http.sse_client import SSEClientTransport
    from mcpkit.transports.http.ws_client import WebSocketClientTransport

    async with running(make_server(), sse=True, ws=True) as (base, _):
        async with ClientSession(StreamableHTTPClientTransport(base + "/mcp"), mode="handshake") as cs:
            assert (await cs.call_tool("echo", {"text": "mcp"})).content[0].text == "mcp"  # type: ignore[union-attr]
        async with SSEClientTransport(base + "/sse") as conn, ClientSession(conn, mode="handshake") as cs:
            assert (await cs.call_tool("echo", {"text": "sse"})).content[0].text == "sse"  # type: ignore[union-attr]
        ws_url = base.replace("http://", "ws://") + "/ws"
        async with WebSocketClientTransport(ws_url) as conn, ClientSession(conn, mode="auto") as cs:
            assert (await cs.call_tool("echo", {"text": "ws"})).content[0].text == "ws"  # type: ignore[union-attr]
        async with httpx.AsyncClient() as http:
            assert (await http.get(base + "/nowhere")).status_code == 404
            assert (await http.post(base + "/message", json={})).status_code == 400  # legacy POST needs session_id
            r = await http.get(base + "/sse", headers={"origin": "http://evil.example"})
            assert r.status_code == 403  # one DNS-rebinding policy for every route


@pytest.mark.req("A008", "A012")
async def test_standalone_stream_resumes_after_the_server_drops_it() -> None:
    """The server drops the GET stream's connection; a notification sent meanwhile is kept in the event store;
    the client reconnects after ``retry:`` with Last-Event-ID and gets it exactly once."""
    server = make_server()
    async with running(server, event_store=InMemoryEventStore(), retry_interval=100) as (base, app):
        seen: list[str] = []
        transport = StreamableHTTPClientTransport(base + "/mcp", reconnect_delay=5.0)
        async with ClientSession(transport, mode="handshake", notification_handler=lambda m, p: seen.append(m)) as cs:
            ep = app.streamable
            hs = ep._sessions[transport.session_id]
            for _ in range(100):
                if hs.standalone is not None and hs.standalone.conn is not None:
                    break
                await asyncio.sleep(0.02)
            stream = hs.standalone
            assert stream is not None and stream.close_connection()
            await server.notify_list_changed("tools")  # nobody is connected: it waits in the event store
            t0 = time.monotonic()
            for _ in range(100):
                if seen:
                    break
                await asyncio.sleep(0.02)
            assert seen == ["notifications/tools/list_changed"]
            assert time.monotonic() - t0 < 2  # the server's retry (100 ms), not the client's 5 s default
            await server.notify_list_changed("tools")  # and the resumed stream is live
            for _ in range(100):
                if len(seen) == 2:
                    break
                await asyncio.sleep(0.02)
            assert seen == ["notifications/tools/list_changed"] * 2
            await cs.call_tool("echo", {"text": "x"})


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25", MODERN])
async def test_http_wire_traffic_matches_the_official_schemas(version: str) -> None:
    from support.wire_recorder import WireRecorder

    recorder = WireRecorder()
    async with running(make_server()) as (base, _):
        kwargs = answers() if version != "2025-03-26" else {}
        async with ClientSession(
            StreamableHTTPClientTransport(base + "/mcp"),
            protocol_version=version,
            log_level="info",
            tap=recorder,
            **kwargs,
        ) as cs:
            await cs.list_tools()
            await cs.call_tool("echo", {"text": "x"})
            await cs.call_tool("progress", {"steps": 2})
            if version != "2025-03-26":
                await cs.call_tool("ask")
    assert recorder.validate(version) >= 8


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_timeouts_and_cancellation_reach_the_server(mode: str) -> None:
    """A silent slow handler: the client's timeout fires on time (the POST is not awaited to the end) and the
    server stops the work: via notifications/cancelled (handshake) or by the closed response stream (modern)."""
    from mcpkit.protocol.errors import RequestTimeout
    from support.mcp_http import Probe

    probe = Probe()
    server = make_server(probe)

    server.set_handler("prompts/get", silent_prompt(probe))

    async with running(server) as (base, _):
        transport = StreamableHTTPClientTransport(base + "/mcp", answer_window=0.1)
        async with ClientSession(transport, mode=mode) as cs:
            t0 = time.monotonic()
            with pytest.raises(RequestTimeout):
                await cs.request("prompts/get", {"name": "p"}, timeout=0.3)
            assert time.monotonic() - t0 < 2
            for _ in range(100):
                if probe.cancelled:
                    break
                await asyncio.sleep(0.02)
            assert len(probe.cancelled) == 1
            # cancelling the caller's task cancels the request on the server too
            task = asyncio.ensure_future(cs.request("prompts/get", {"name": "q"}, timeout=None))
            await asyncio.sleep(0.3)
            task.cancel()
            for _ in range(100):
                if len(probe.cancelled) == 2:
                    break
                await asyncio.sleep(0.02)
            assert len(probe.cancelled) == 2
            assert (await cs.call_tool("echo", {"text": "ok"})).content[0].text == "ok"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", ERAS)
async def test_tools_list_requests_that_fail_leave_nothing_behind(mode: str) -> None:
    """The transport notes each tools/list request to read the x-mcp-header annotations of its answer; a request
    answered with an error (an invalid cursor here), one that times out, is forgotten all the same: a client that
    keeps asking does not grow."""
    async with serving(build_server()) as (base, _, _rec):
        transport = StreamableHTTPClientTransport(f"{base}/mcp")
        async with transport, ClientSession(transport, mode=mode, timeout=10) as cs:
            for _ in range(20):
                with pytest.raises(MCPError):
                    await cs.request("tools/list", {"cursor": "not-a-cursor"})
            assert len((await cs.list_tools()).tools) == 4  # (a page)
            assert transport.modern_headers.tools_list_ids == set()


def test_the_tool_header_annotations_a_client_keeps_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that keeps listing new tools with x-mcp-header annotations does not grow the client without bound:
    beyond MAX_TOOL_HEADERS the annotations learnt longest ago are forgotten; one listed again is kept afresh."""
    import orjson

    from mcpkit.transports.http import client_support
    from mcpkit.transports.http.client_support import ModernHeaders

    monkeypatch.setattr(client_support, "MAX_TOOL_HEADERS", 3)
    learnt = ModernHeaders()
    schema = {"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}
    for rid, names in enumerate((["a", "b"], ["c", "d"], ["b", "e"])):
        learnt.tools_list_ids.add(rid)
        tools = [{"name": n, "inputSchema": schema} for n in names]
        learnt.learn_tools(orjson.dumps({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}}))
        assert len(learnt.tool_headers) <= 3
    assert list(learnt.tool_headers) == ["d", "b", "e"]  # a and c forgotten; b listed again, kept as recent
