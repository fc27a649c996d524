"""The inspector's parts in process: the bounded message log, the event fan-out, the page's files (no HTML parsing
of data anywhere in them), and the Inspector against a real in-process server (answers checked against the
requested schema, bounded tables)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from mcpkit.inspector import EventHub, Inspector, InspectorError, MessageLog
from mcpkit.inspector.web import InspectorApp, load_static
from support.paths import REPO

STATIC = REPO / "src" / "mcpkit" / "inspector" / "static"


def test_the_message_log_is_a_ring_bounded_in_entries_and_bytes() -> None:
    log = MessageLog(max_entries=5, max_bytes=1000, max_entry_bytes=100)
    for i in range(8):
        log.record("out", b'{"jsonrpc":"2.0","method":"notifications/x","params":{"i":%d}}' % i)
    assert len(log) == 5 and log.dropped == 3
    assert [e.seq for e in log.entries()] == [4, 5, 6, 7, 8]
    big = log.record("in", b'{"jsonrpc":"2.0","id":1,"result":{"x":"' + b"a" * 5000 + b'"}}')
    assert big.size > 5000 and big.cut and len(big.text) == 100
    assert log.held_bytes <= 1000
    for _ in range(30):
        log.record("in", b"x" * 100)
    assert log.held_bytes <= 1000 and len(log) <= 5
    assert log.get(1) is None and log.get(log.entries()[-1].seq) is log.entries()[-1]
    log.clear()
    assert len(log) == 0 and log.held_bytes == 0


def test_the_message_log_times_each_answer_against_its_request() -> None:
    log = MessageLog()
    log.record("out", b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}', when=10.0)
    log.record("in", b'{"jsonrpc":"2.0","id":9,"method":"roots/list"}', when=10.1)
    log.record("out", b'{"jsonrpc":"2.0","id":9,"result":{"roots":[]}}', when=10.2)
    answer = log.record("in", b'{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}', when=10.5)
    assert answer.kind == "error" and answer.method == "tools/call" and answer.elapsed == pytest.approx(0.5)
    roots = log.entries()[2]
    assert roots.direction == "out" and roots.method == "roots/list" and roots.elapsed == pytest.approx(0.1)
    assert log.record("in", b"not json").kind == "invalid"
    assert log.record("in", b"[1,2]").kind == "batch"


async def test_a_page_that_falls_behind_gets_resync_and_the_pages_are_bounded() -> None:
    hub = EventHub(max_subscribers=2, queue_size=3)
    a, b = hub.subscribe(), hub.subscribe()
    with pytest.raises(RuntimeError):
        hub.subscribe()
    for i in range(5):
        hub.publish("log", n=i)
    assert a.overflowed == 1 and b"resync" in await a.next()
    a.close()
    hub.subscribe()  # a place was freed
    assert hub.subscribers == 2 and b.overflowed == 1
    # in bytes too: large events overflow a page long before its count does
    hub = EventHub(queue_size=2_000, queue_bytes=100_000)
    c = hub.subscribe()
    for _ in range(5):
        hub.publish("result", text="x" * 40_000)
    assert c.overflowed == 1 and b"resync" in await c.next()


async def test_server_lines_are_numbered_in_their_events_and_the_state_says_the_last_one_kept() -> None:
    """Stderr lines and log messages have no number of their own: the inspector numbers them, in their events and
    (the last one) in the state, so a page that reads the state again can drop the events of lines it has; and a
    message log given to the inspector is the one it uses even while empty (an empty one, falsy, was replaced)."""
    given = MessageLog(max_entries=7)
    inspector = Inspector(_everything(), hub=EventHub(), log=given)
    assert inspector.log is given
    page = inspector.hub.subscribe()
    inspector._on_stderr("first")
    await inspector._on_log_message({"level": "info", "data": "one"})
    inspector._on_stderr("second")
    state = inspector.snapshot()
    assert (state["stderr"], state["stderrSeq"]) == (["first", "second"], 2)
    assert (state["serverLog"], state["serverLogSeq"]) == ([{"level": "info", "data": "one"}], 1)
    events = [orjson.loads((await page.next())[len(b"data: ") :]) for _ in range(3)]
    assert [(e["type"], e["seq"]) for e in events] == [("stderr", 1), ("serverlog", 1), ("stderr", 2)]
    assert "serverLogSeq" not in inspector.snapshot(whole=False)  # (with the log messages only, as they are)


async def test_an_event_published_while_the_stream_starts_is_sent_once_after_the_hello_that_does_not_hold_it() -> None:
    """The hello (the state and the log) is what the page starts from and the events are what came after it: a line
    published while the response's start is being sent (the send yields) was in the queue and, the hello being read
    after that send, in the hello too (the page showed it twice; a call's event could be applied over a newer
    state). The hello is read when the page subscribes, before anything yields."""
    inspector = Inspector(_everything(), hub=EventHub())
    app = InspectorApp(inspector, token="t" * 32, connect_on_startup=False)
    frames: list[dict[str, Any]] = []
    two = asyncio.Event()
    gone = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            inspector._on_stderr("while the stream starts")  # (the server's stderr reader runs while send yields)
            await asyncio.sleep(0)
        elif message.get("body", b"").startswith(b"data: "):
            frames.append(orjson.loads(message["body"][len(b"data: ") :]))
            if len(frames) == 2:
                two.set()

    async def receive() -> dict[str, Any]:
        await gone.wait()
        return {"type": "http.disconnect"}

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/api/events",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer " + b"t" * 32)],
    }
    stream = asyncio.ensure_future(app(scope, receive, send))
    try:
        await asyncio.wait_for(two.wait(), 10)
    finally:
        gone.set()
        await asyncio.wait_for(stream, 10)
    hello, event = frames
    assert hello["type"] == "hello" and event["type"] == "stderr"
    assert (hello["state"]["stderr"], hello["state"]["stderrSeq"]) == ([], 0)
    assert (event["line"], event["seq"]) == ("while the stream starts", 1)


def test_the_page_never_parses_data_as_html() -> None:
    files = load_static()
    assert {
        "index.html",
        "app.js",
        "api.js",
        "state.js",
        "draw.js",
        "log.js",
        "dom.js",
        "forms.js",
        "render.js",
        "inspector.css",
    } <= set(files)
    for path in STATIC.glob("*.js"):
        source = path.read_text()
        for banned in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            'setAttribute("on',
            "srcdoc",
            "createContextualFragment",
            "DOMParser",
        ):
            assert banned not in source, (path.name, banned)
    html = (STATIC / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html)  # no inline script: the CSP allows 'self' only
    assert " on" not in re.sub(r"<[^>]*>", lambda m: re.sub(r"\son\w+=", " ON", m.group(0)), html).replace(" ON", "")


def _everything():  # type: ignore[no-untyped-def]
    import importlib.util

    spec = importlib.util.spec_from_file_location("everything_for_inspector", REPO / "examples" / "everything.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.create_app()


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_an_elicitation_answer_is_checked_against_the_requested_schema(mode: str) -> None:
    inspector = Inspector(_everything(), mode=mode)
    await inspector.connect()
    try:
        assert inspector.status == "connected", inspector.error
        call_id = await inspector.start_call("ask_name", {})
        for _ in range(200):
            if inspector.snapshot()["pending"]:
                break
            await asyncio.sleep(0.01)
        (ask,) = inspector.snapshot()["pending"]
        assert ask["kind"] == "elicitation" and ask["server"] == "mcpkit-everything"
        with pytest.raises(InspectorError) as wrong:
            inspector.answer(ask["id"], {"action": "accept", "content": {"name": 5}})
        assert wrong.value.status == 422
        with pytest.raises(InspectorError):
            inspector.answer(ask["id"], {"action": "maybe"})
        inspector.answer(ask["id"], {"action": "accept", "content": {"name": "Ada"}})
        for _ in range(200):
            calls = {c["id"]: c for c in inspector.snapshot()["calls"]}
            if calls[call_id]["status"] != "running":
                break
            await asyncio.sleep(0.01)
        assert calls[call_id]["result"]["content"][0]["text"] == "Hello, Ada!"
        with pytest.raises(InspectorError) as gone:
            inspector.answer(ask["id"], {"action": "decline"})
        assert gone.value.status == 404
    finally:
        await inspector.aclose()


async def test_running_calls_and_roots_are_bounded() -> None:
    inspector = Inspector(_everything(), mode="handshake", max_running_calls=2)
    await inspector.connect()
    try:
        for _ in range(2):
            await inspector.start_call("slow", {"steps": 100, "delay_ms": 50})
        with pytest.raises(InspectorError) as full:
            await inspector.start_call("slow", {"steps": 1})
        assert full.value.status == 429
        with pytest.raises(InspectorError):
            await inspector.set_roots([{"uri": f"file:///r{i}"} for i in range(300)])
        await inspector.set_roots(["file:///tmp", {"uri": "file:///srv", "name": "srv"}])
        result = await inspector.request("tools/call", {"name": "roots", "arguments": {}})
        assert "file:///srv" in result["content"][0]["text"]
    finally:
        await inspector.aclose()
    assert inspector.status == "disconnected" and not inspector.snapshot()["pending"]


async def test_the_inspector_listens_on_loopback_only() -> None:
    from mcpkit.inspector import start_inspector

    for host in ("0.0.0.0", "192.168.1.5", "::"):
        with pytest.raises(ValueError, match="loopback"):
            await start_inspector(Inspector(_everything()), host=host)


async def test_a_stopped_inspector_leaves_the_process_signal_handlers_as_it_found_them() -> None:
    """Only the page's server takes SIGTERM/SIGINT while it runs: the sandbox's server, stopped first, does not
    leave them on a stopped server (code that reads the handler, like sse-starlette, would take it for a shutdown)."""
    import signal

    from mcpkit.inspector import start_inspector

    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    running = await start_inspector(Inspector(_everything()))
    try:
        assert running.sandbox is not None
        running.sandbox[0].should_exit = True
        await asyncio.wait_for(running.sandbox[1], 10)
    finally:
        await running.stop()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before


async def test_the_inspector_asks_the_server_every_time_even_when_it_says_cache() -> None:
    from mcpkit import MCPKit

    app = MCPKit("cached", list_ttl_ms=60_000, list_cache_scope="public")

    @app.tool
    def ping_tool() -> str:
        """A tool."""
        return "pong"

    inspector = Inspector(app, mode="modern")
    await inspector.connect()
    try:
        for _ in range(2):
            assert [t["name"] for t in (await inspector.list_page("tools"))["items"]] == ["ping_tool"]
        asked = [e for e in inspector.log.entries() if e.method == "tools/list" and e.direction == "out"]
        assert len(asked) == 2  # a Refresh shows what the server answers now, and its messages
    finally:
        await inspector.aclose()


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_stdio_server_that_exits_is_shown_disconnected_with_why(mode: str) -> None:
    """The page must not go on saying "connected" to a server process that is gone: every action would then fail
    with ConnectionClosed while the header still invites the person to use it."""
    import sys

    server = REPO / "tests" / "support" / "servers" / "client_server.py"
    inspector = Inspector(f"{sys.executable} {server}", mode=mode)
    await inspector.connect()
    try:
        assert inspector.status == "connected", inspector.error
        states: list[dict[str, object]] = []
        inspector.hub.publish = lambda kind, **data: states.append(data["state"]) if kind == "state" else None  # type: ignore[method-assign]
        await inspector.start_call("exit", {})
        for _ in range(100):
            if inspector.status != "connected":
                break
            await asyncio.sleep(0.05)
        assert inspector.status == "disconnected"
        assert inspector.error is not None and "closed" in inspector.error["message"]
        assert states and states[-1]["status"] == "disconnected"  # the open pages are told
        (call,) = inspector.snapshot()["calls"]
        assert call["status"] == "failed"
    finally:
        await inspector.aclose()


@pytest.mark.parametrize("command", ["inspect", "dev"])
def test_a_taken_port_is_one_clear_line_not_a_traceback(command: str) -> None:
    """``--port N`` with N in use: uvicorn exits (SystemExit 3) from inside the serving task, which ``mcpkit
    inspect`` ended with exit code 3 and no word, and ``mcpkit dev`` with pages of tracebacks."""
    import socket
    import subprocess
    import sys

    server = REPO / "tests" / "support" / "servers" / "client_server.py"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "mcpkit.cli.main", command, str(server), "--port", str(port), "--no-browser"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 1, out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "in use" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and "never retrieved" not in out.stderr, out.stderr


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_server_that_needs_authorization_says_how_to_give_a_token(mode: str) -> None:
    """Pointed at an OAuth-protected server, the page said only 'HTTP 401: {"error":"unauthorized"}'; it now says
    the server needs authorization and how to pass a token (a header), which then connects."""
    from support.oauth import _forge, stack

    async with stack() as s:
        inspector = Inspector(s["mcp_url"], mode=mode)
        assert await inspector.connect() is not None
        assert inspector.status == "failed" and inspector.error is not None
        message = inspector.error["message"]
        assert "401" in message and "authorization" in message and "Authorization: Bearer" in message, message
        token = _forge(s["as"], aud=s["mcp_url"])
        authorized = Inspector(
            s["mcp_url"], mode=mode, client_options={"headers": {"Authorization": f"Bearer {token}"}}
        )
        try:
            assert await authorized.connect() is None, authorized.error
        finally:
            await authorized.aclose()
            await inspector.aclose()


async def test_forcing_2026_07_28_on_a_handshake_only_server_says_to_inspect_it_in_another_mode(
    tmp_path: Path,
) -> None:
    """``mcpkit inspect --mode modern`` against a server that speaks only the handshake era showed the server's
    'Bad Request: Mcp-Session-Id header is required'; the page now says the server does not seem to speak
    2026-07-28 and which options connect (keeping the server's words). Auto mode connects."""
    from mcpkit.testing import serve

    path = tmp_path / "legacy.py"
    path.write_text(
        "from mcpkit import MCPKit\n"
        "from mcpkit.protocol.versions import HANDSHAKE_VERSIONS\n"
        "app = MCPKit('legacy', versions=HANDSHAKE_VERSIONS)\n"
        "@app.tool()\n"
        "def hi() -> str:\n"
        "    return 'hi'\n"
    )
    async with serve(str(path)) as served:
        inspector = Inspector(served.url, mode="modern")
        auto = Inspector(served.url)
        try:
            assert await inspector.connect() is not None
            assert inspector.status == "failed" and inspector.error is not None
            message = inspector.error["message"]
            assert "does not seem to speak protocol 2026-07-28" in message, message
            assert "Mcp-Session-Id header is required" in message and "--mode auto" in message, message
            assert "--mode handshake" in message and "mode='auto'" in message, message
            assert await auto.connect() is None, auto.error
        finally:
            await auto.aclose()
            await inspector.aclose()


def test_inspect_with_auth_signs_in_through_the_authorization_server_and_connects(tmp_path: Path) -> None:
    """``mcpkit inspect URL --auth``, as ``mcpkit check --auth``: against mcpkit's everything server behind its
    development authorization server, the inspector runs the OAuth browser flow (the "browser" is $BROWSER, here
    a script that follows the redirects as a person approving would), gets a token and connects; a reconnect
    reuses the token (the browser opens once). Without --auth the page says how to sign in."""
    import json
    import os
    import subprocess
    import sys

    import httpx

    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.py"
    browser.write_text(
        "import sys, httpx\n"
        f"open({str(opened)!r}, 'a').write(sys.argv[1] + '\\n')\n"
        "httpx.get(sys.argv[1], follow_redirects=True, timeout=30)\n"
    )
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s"}
    server = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "support" / "servers" / "everything_protected.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    inspect: list[subprocess.Popen[str]] = []
    try:
        assert server.stdout is not None
        url = f"http://127.0.0.1:{json.loads(server.stdout.readline())['port']}/mcp"
        for flags in (["--auth"], []):
            proc = subprocess.Popen(
                [sys.executable, "-m", "mcpkit.cli.main", "inspect", url, *flags, "--no-browser"],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            inspect.append(proc)
            assert proc.stdout is not None
            page = proc.stdout.readline().split(": ", 1)[1].strip()
            base, token = page.split("/#token=")
            api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60)
            state = api.post("/api/connect", json={}).json()["result"]
            if flags:
                assert state.get("status") == "connected", state
                tools = api.post("/api/list", json={"kind": "tools"}).json()["result"]
                assert "echo" in json.dumps(tools), tools
                again = api.post("/api/connect", json={"mode": "handshake"}).json()["result"]
                assert again["status"] == "connected", again
                assert len(opened.read_text().splitlines()) == 1  # one sign-in, reused by the reconnect
                assert "/authorize?" in opened.read_text()
            else:
                assert state.get("status") == "failed", state
                assert "--auth" in state["error"]["message"], state
    finally:
        for proc in [*inspect, server]:
            proc.terminate()
            proc.wait(30)


def test_inspect_auth_needs_a_url() -> None:
    import subprocess
    import sys

    server = REPO / "tests" / "support" / "servers" / "client_server.py"
    out = subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "inspect", str(server), "--auth", "--no-browser"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "--auth needs an http(s) URL" in out.stderr, out.stderr


def test_an_unknown_protocol_version_is_a_usage_error() -> None:
    """``mcpkit inspect --protocol-version 2025-6-18`` (a typo) served a page that then failed to connect with
    "ValueError: unsupported protocol version"; the other client commands refuse it as a usage error, before anything
    starts, naming the revisions."""
    import subprocess
    import sys

    server = REPO / "tests" / "support" / "servers" / "client_server.py"
    out = subprocess.run(
        [sys.executable, "-m", "mcpkit.cli.main", "inspect", str(server), "--protocol-version", "2025-6-18"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--protocol-version" in out.stderr and "2025-06-18" in out.stderr, out.stderr
    assert "http://" not in out.stdout


@pytest.mark.parametrize(("version", "offered"), [("2024-11-05", True), ("2025-11-25", True)])
async def test_completions_are_offered_where_the_revision_has_no_capability_flag_for_them(
    version: str, offered: bool
) -> None:
    """2024-11-05 has ``completion/complete`` but no ``completions`` server capability (the flag came with
    2025-03-26): the page must ask such a server, and learn from a -32601 that it completes nothing, instead of
    never asking because the flag is absent."""
    import sys

    server = REPO / "tests" / "support" / "servers" / "client_server.py"
    inspector = Inspector(f"{sys.executable} {server}", protocol_version=version)
    await inspector.connect()
    try:
        assert inspector.status == "connected", inspector.error
        assert inspector.snapshot()["completions"] is offered
        ref = {"type": "ref/prompt", "name": "greet"}
        assert (await inspector.complete(ref, "name", "al"))["values"] == ["alice", "albert"]
    finally:
        await inspector.aclose()


async def test_a_2024_11_05_server_without_completions_is_not_offered_them_once_it_said_so() -> None:
    """The -32601 of a 2024-11-05 server that does not complete is an empty answer, and the page stops asking."""
    import sys

    server = REPO / "tests" / "support" / "servers" / "forms_server.py"
    inspector = Inspector(f"{sys.executable} {server}", protocol_version="2024-11-05")
    await inspector.connect()
    try:
        assert inspector.status == "connected", inspector.error
        assert inspector.snapshot()["completions"] is True  # (nothing says otherwise yet)
        ref = {"type": "ref/prompt", "name": "any"}
        assert await inspector.complete(ref, "x", "") == {"values": [], "total": None, "hasMore": False}
        assert inspector.snapshot()["completions"] is False
    finally:
        await inspector.aclose()
