"""The testing kit (mcpkit.testing and its pytest plugin), used the way a user uses it: the plugin's fixtures
against tests/support/servers/kit_server.py on every transport and in both eras, and the helpers on their own.

What each test shows is what the kit promises: a connected client per transport and era, scripted answers to the
server's sampling, elicitation and roots requests, a traffic recorder on the message tap, a surface snapshot that
catches a changed tool, ``mcpkit check`` failing a test on a broken requirement (a server object too), the guarded
HTTP server with its Host/Origin policy, and nothing left behind (tasks, processes, ports).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from mcpkit import Context, MCPError, MCPKit
from mcpkit.testing import (
    ERAS,
    TRANSPORTS,
    LeakProbe,
    NonConformant,
    Scripted,
    ServerLoadError,
    SurfaceChanged,
    SurfaceSnapshot,
    Traffic,
    assert_conformant,
    connect,
    load_server,
    serve,
    stop_process,
    surface,
)
from support.paths import SERVERS

KIT_SERVER = f"{SERVERS / 'kit_server.py'}:app"
BROKEN_SERVER = SERVERS / "broken_server.py"


@pytest.fixture
def mcp_server() -> str:
    return KIT_SERVER


# ---------------------------------------------------------------------------------------------- the client fixture


async def test_every_test_runs_on_each_transport_and_era(mcp_client: Any, mcp_transport: str, mcp_era: str) -> None:
    """The fixture's client speaks the era's revision over the transport it was parametrized with."""
    assert mcp_client.protocol_version == mcp_era
    assert mcp_client.target.kind == mcp_transport
    assert (await mcp_client.call_tool("add", {"a": 2, "b": 3})).data == 5


def test_the_parametrization_covers_five_transports_and_two_eras() -> None:
    assert TRANSPORTS == ("memory", "stdio", "http", "sse", "ws")
    assert ERAS == ("2025-11-25", "2026-07-28")


@pytest.mark.mcp(sampling=["Paris"])
async def test_a_sampling_tool_gets_the_scripted_answer(mcp_client: Any, mcp_script: Scripted) -> None:
    result = await mcp_client.call_tool("capital", {"country": "France"})
    assert result.data == "Paris"
    (asked,) = mcp_script.sampling_requests
    assert "capital of France" in asked.text and asked.max_tokens == 10


@pytest.mark.mcp(elicitation=[{"name": "Ada", "newsletter": True}, "decline"])
async def test_an_elicitation_tool_gets_the_scripted_answers_in_order(mcp_client: Any, mcp_script: Scripted) -> None:
    assert (await mcp_client.call_tool("signup")).data == "welcome Ada (newsletter)"
    assert (await mcp_client.call_tool("signup")).data == "decline"
    assert [r.message for r in mcp_script.elicitation_requests] == ["Who are you?"] * 2
    mcp_script.assert_all_used()


@pytest.mark.mcp(roots=["file:///work/project"], transports=["memory", "stdio"])
async def test_the_scripted_roots_are_what_the_server_lists(mcp_client: Any) -> None:
    assert (await mcp_client.call_tool("workspace")).data == ["file:///work/project"]


async def failed_call(client: Any, name: str, arguments: dict[str, Any]) -> str:
    """The error of a call that must fail: the tool's error result (handshake era: the server got the client's
    refusal), or the error the client raised (2026-07-28: the client answers the server's input requests itself)."""
    try:
        result = await client.call_tool(name, arguments)
    except MCPError as exc:
        return str(exc)
    assert result.is_error, result
    return str(result.text)


@pytest.mark.mcp(sampling=["Paris"], transports=["memory", "http"])
async def test_a_request_beyond_the_script_fails_the_tool_and_says_why(mcp_client: Any, mcp_script: Scripted) -> None:
    assert (await mcp_client.call_tool("capital", {"country": "France"})).data == "Paris"
    await failed_call(mcp_client, "capital", {"country": "Peru"})
    assert mcp_script.problems == [
        "the test's script has no sampling answer left for request #2 (give more answers, e.g. "
        "Scripted(sampling=[...]) or script.answer_sampling(...))"
    ]
    with pytest.raises(AssertionError, match="no sampling answer left"):
        mcp_script.assert_all_used()


async def test_without_a_script_the_client_declares_no_sampling(mcp_client: Any) -> None:
    assert "sampling" in await failed_call(mcp_client, "capital", {"country": "France"})


async def test_the_traffic_recorder_sees_the_calls_of_the_test(
    mcp_client: Any, mcp_traffic: Traffic, mcp_era: str
) -> None:
    await mcp_client.call_tool("add", {"a": 2, "b": 40})
    call = mcp_traffic.assert_sent("tools/call", {"name": "add", "arguments": {"a": 2}})
    answer = mcp_traffic.answer_to(call)
    assert answer is not None and answer["result"]["structuredContent"] == {"result": 42}
    sent = mcp_traffic.methods("out")
    assert ("initialize" in sent) is (mcp_era != "2026-07-28")
    mcp_traffic.assert_not_sent("resources/read")
    with pytest.raises(AssertionError, match=r"no tools/call was sent with params containing .*'b': 3") as failure:
        mcp_traffic.assert_sent("tools/call", {"arguments": {"b": 3}})
    assert "client >> " in str(failure.value)  # the transcript is in the message


async def test_a_server_tap_records_what_every_client_sent() -> None:
    app = MCPKit("tapped")

    @app.tool
    def hello() -> str:
        return "hi"

    traffic = Traffic()
    remove = app.add_tap(traffic)
    try:
        for era in ERAS:
            async with connect(app, "http", era) as client:
                await client.call_tool("hello")
    finally:
        remove()
    assert len(traffic.requests("tools/call", "in")) == 2
    assert all(event.peer.startswith("server") for event in traffic)
    traffic.assert_no_errors()


async def test_the_answer_to_a_request_is_found_in_the_other_direction_only() -> None:
    """Each side numbers its own requests: the client's answer to the server's sampling request #3 carries the id
    of the client's tools/call #3 too. ``answer_to`` is the answer from the other side, on a client's tap and on a
    server's."""
    app = MCPKit("asks often")

    @app.tool
    async def ask(times: int, ctx: Context) -> int:
        for _ in range(times):
            await ctx.sample("again?")
        return times

    server_side = Traffic()
    remove = app.add_tap(server_side)
    try:
        client_side = Traffic()
        script = Scripted(sampling="yes")
        async with connect(app, "memory", "2025-11-25", tap=client_side, **script.client_options()) as client:
            assert (await client.call_tool("ask", {"times": 12})).data == 12
    finally:
        remove()
    for traffic in (client_side, server_side):
        (call,) = traffic.requests("tools/call")
        assert call["id"] in {r["id"] for r in traffic.requests("sampling/createMessage")}  # (the ids do meet)
        answer = traffic.answer_to(call)
        assert answer is not None and answer["result"]["structuredContent"] == {"result": 12}, answer


# ---------------------------------------------------------------------------------------------- the surface snapshot


async def test_the_surface_snapshot_fails_on_a_changed_tool_until_it_is_recorded_again(tmp_path: Path) -> None:
    def build(changed: bool) -> MCPKit:
        app = MCPKit("surface")
        if changed:

            @app.tool
            def add(a: float, b: float) -> float:
                """Add."""
                return a + b

            @app.prompt
            def hello() -> str:
                return "hello"

        else:

            @app.tool
            def add(a: int, b: int) -> int:
                """Add."""
                return a + b

        return app

    path = tmp_path / "snap" / "surface.json"
    with pytest.raises(SurfaceChanged, match="no surface snapshot"):
        async with connect(build(False)) as client:
            await SurfaceSnapshot(path).check(client)
    async with connect(build(False)) as client:
        await SurfaceSnapshot(path, update=True).check(client)
        await SurfaceSnapshot(path).check(client)
    with pytest.raises(SurfaceChanged) as changed:
        async with connect(build(True)) as client:
            await SurfaceSnapshot(path).check(client)
    message = str(changed.value)
    assert "tool 'add' changed: inputSchema" in message and "prompt 'hello' added" in message
    assert re.search(r'\n-\s+"type": "integer"\n\+\s+"type": "number"\n', message)  # and the diff
    async with connect(build(True)) as client:
        assert [p["name"] for p in (await surface(client))["prompts"]] == ["hello"]


async def test_the_fixture_snapshot_is_one_file_per_era_shared_by_the_transports(
    mcp_client: Any, mcp_snapshot: Any, mcp_era: str
) -> None:
    name = "test_the_fixture_snapshot_is_one_file_per_era_shared_by_the_transports"
    assert mcp_snapshot.path.name == f"{name}[{mcp_era}].json"
    assert mcp_snapshot.path.parent == Path(__file__).parent / "__snapshots__" / "test_kit"
    recorded = await mcp_snapshot.check(mcp_client)
    assert [t["name"] for t in recorded["tools"]] == ["add", "capital", "signup", "workspace"]
    assert [t["uriTemplate"] for t in recorded["resourceTemplates"]] == ["kit://items/{item_id}"]


# ---------------------------------------------------------------------------------------------- conformance


async def test_conformance_passes_for_a_correct_server_object(mcp_conformance: Any) -> None:
    report = await mcp_conformance()  # the mcp_server: served over Streamable HTTP for the run
    assert report.failed_musts() == [] and report.transport == "http"


@pytest.mark.req("M079")
async def test_conformance_fails_on_a_broken_server_naming_the_requirement() -> None:
    """broken_server.py breaks one rule (a ping answered with a non-empty result): the helper fails the test with
    M079, its words and the evidence."""
    with pytest.raises(NonConformant) as failed:
        await assert_conformant([sys.executable, str(BROKEN_SERVER), "--fault", "ping-nonempty"])
    assert failed.value.failed == ["M079"]
    message = str(failed.value)
    assert "M079 (MUST) Receiver MUST respond promptly with empty response" in message
    assert "ping result is not empty" in message


async def test_conformance_fails_on_a_broken_server_object() -> None:
    app = MCPKit("pong")

    async def non_empty_ping(call: Any, call_next: Any) -> Any:
        await call_next(call)
        return {"pong": True}  # the one rule broken: a ping's result must be empty

    app.add_interceptor(non_empty_ping, methods=["ping"])
    with pytest.raises(NonConformant, match=r"broke 1 requirement\(s\):\nM079 \(MUST\)"):
        await assert_conformant(app)


# ---------------------------------------------------------------------------------------------- servers and leaks


async def test_the_http_server_has_the_default_host_and_origin_policy() -> None:
    async with serve(KIT_SERVER) as served, httpx.AsyncClient() as http:
        assert served.url == f"http://127.0.0.1:{served.port}/mcp"
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        foreign = await http.post(served.url, json=body, headers={**headers, "origin": "http://evil.example"})
        rebound = await http.post(served.url, json=body, headers={**headers, "host": "evil.example"})
        assert foreign.status_code == 403 and rebound.status_code in (403, 421)
        guard = getattr(served.app, "streamable", None)
        assert guard is not None  # the app build_server made (create_app's, every endpoint mounted)
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as http:
            await http.get(served.url)  # stopped: its port closed


@contextlib.asynccontextmanager
async def _database_down(app: MCPKit) -> Any:
    raise RuntimeError("the database is down")
    yield  # (never reached: the startup fails)


@pytest.mark.parametrize("transport", ["memory", "http", "sse", "ws"])
async def test_a_server_whose_startup_fails_fails_connect_at_once_with_its_error(transport: str) -> None:
    """A server whose lifespan raises: ``connect`` fails at once with an error that names the startup's, kept
    as its cause (in memory it waited out the connect timeout for a bare TimeoutError; over HTTP uvicorn's
    ``sys.exit(3)`` escaped from its task and broke the test's event loop), and nothing is left behind."""
    import time

    probe = LeakProbe.take()
    started = time.monotonic()
    with pytest.raises(Exception, match="failed to start: RuntimeError: the database is down") as caught:
        async with connect(MCPKit("unstartable", lifespan=_database_down), transport, connect_timeout=20):
            pass
    assert time.monotonic() - started < 10
    cause = caught.value.__cause__
    assert isinstance(cause, RuntimeError) and str(cause) == "the database is down"
    await asyncio.sleep(0.05)  # the loop goes on: a working server still serves in it
    async with connect(KIT_SERVER, transport) as client:
        assert (await client.call_tool("add", {"a": 1, "b": 1})).data == 2
    await probe.assert_clean()


@contextlib.asynccontextmanager
async def _waits_for_ever(app: MCPKit) -> Any:
    ended.append("entered")
    try:
        await asyncio.Event().wait()  # (a database that never answers)
        yield
    finally:
        ended.append("cleaned up")


ended: list[str] = []


async def test_a_server_whose_startup_never_ends_fails_serve_at_its_bound_leaving_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server whose lifespan never finishes starting: ``serve`` fails once the start bound is up, saying it is
    the startup that did not finish, and stops it (its lifespan cancelled, its cleanup run): the test is not
    failed again for uvicorn's lifespan task left waiting, and the stop does not wait out the graceful bound
    for a server that never listened."""
    import time

    from mcpkit.testing import serving

    monkeypatch.setattr(serving, "START_TIMEOUT", 1.0)
    ended.clear()
    probe = LeakProbe.take()
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"the http server did not start within 1 s: its startup .*lifespan"):
        async with serve(MCPKit("stuck", lifespan=_waits_for_ever)):
            pass
    assert time.monotonic() - started < serving.STOP_TIMEOUT  # (the graceful bound is not waited out)
    await probe.assert_clean()
    assert ended == ["entered", "cleaned up"]


async def test_stdio_runs_a_module_level_server_object_and_reaps_its_process() -> None:
    app = load_server(KIT_SERVER)  # (an object: the kit finds the file that defines it)
    probe = LeakProbe.take()
    async with connect(app, "stdio") as client:
        assert probe.leaks().processes  # the server runs in a child process...
        assert (await client.call_tool("add", {"a": 1, "b": 1})).data == 2
    await probe.assert_clean()  # ...reaped when the block ends


async def test_stdio_needs_a_server_a_subprocess_can_import() -> None:
    app = MCPKit("local")  # made here: no module defines it
    with pytest.raises(ServerLoadError, match="define the server at module level"):
        async with connect(app, "stdio"):
            pass


async def test_the_leak_probe_names_a_task_a_process_and_a_port_left_behind() -> None:
    probe = LeakProbe.take()
    task = asyncio.get_running_loop().create_task(asyncio.sleep(60), name="forgotten")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(AssertionError) as left:
            await probe.assert_clean(timeout=0.2)
        message = str(left.value)
        assert "task forgotten running sleep" in message
        assert f"child process {proc.pid} running: {sys.executable} -c" in message
        assert f"a socket still listening on port {port}" in message
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        stop_process(proc)
        server.close()
        await server.wait_closed()
    await probe.assert_clean()


@pytest.mark.mcp(transports=["http"])
async def test_a_leaked_task_fails_the_test_in_teardown(mcp_client: Any, mcp_leaks: LeakProbe) -> None:
    task = asyncio.get_running_loop().create_task(asyncio.sleep(60))
    assert mcp_leaks.leaks().tasks  # what the fixture's teardown would fail on...
    task.cancel()  # ...were it not cancelled here
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_a_client_that_does_not_close_fails_with_where_each_task_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """A close that hangs fails within the kit's bound, showing every task of the loop and where it waits, instead
    of hanging the test run."""
    from mcpkit import Client
    from mcpkit.testing import serving

    real_close = Client.aclose
    opened: list[Client] = []

    async def stuck_close(self: Client) -> None:
        opened.append(self)
        await asyncio.Event().wait()

    monkeypatch.setattr(serving, "STOP_TIMEOUT", 0.3)
    monkeypatch.setattr(Client, "aclose", stuck_close)
    with pytest.raises(RuntimeError, match=r"did not close within 0.3 s") as failed:
        async with connect(KIT_SERVER):
            pass
    message = str(failed.value)
    assert "stuck_close (test_kit.py:" in message  # where the close waits...
    assert "run (peer.py:" in message  # ...and the session it did not end
    monkeypatch.undo()
    await real_close(opened[0])


def test_a_factory_gives_each_connection_a_fresh_server(tmp_path: Path) -> None:
    server_file = tmp_path / "fresh_server.py"
    server_file.write_text("from mcpkit import MCPKit\n\n\ndef create():\n    return MCPKit('fresh')\n")
    first, second = load_server(f"{server_file}:create"), load_server(f"{server_file}:create")
    assert first is not second and first.name == second.name == "fresh"
    with pytest.raises(ServerLoadError, match=r"fresh_server\.py defines no mcpkit server"):
        load_server(str(server_file))


@pytest.fixture
def mcp_asgi_app() -> Any:
    """A FastAPI app with the kit server's endpoint mounted under /agents (and a route of its own)."""
    from fastapi import FastAPI

    from mcpkit.transports.http import create_app

    mcp_app = create_app(load_server(KIT_SERVER))

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        yield
        await mcp_app.aclose()

    api = FastAPI(lifespan=lifespan)

    @api.get("/status")
    def status() -> dict[str, str]:
        return {"status": "up"}

    api.mount("/agents", mcp_app)
    return api


@pytest.mark.mcp(path="/agents/mcp", sampling=["Quito"])
async def test_an_endpoint_mounted_in_fastapi_is_served_in_each_era(
    mcp_asgi_client: Any, mcp_asgi: Any, mcp_era: str
) -> None:
    assert mcp_asgi_client.protocol_version == mcp_era
    assert (await mcp_asgi_client.call_tool("capital", {"country": "Ecuador"})).data == "Quito"
    async with httpx.AsyncClient() as http:
        assert (await http.get(f"{mcp_asgi.url}/status")).json() == {"status": "up"}
