"""The high-level Client over stdio against real servers: mcpkit's own (both eras), the npm
``@modelcontextprotocol/server-everything`` (handshake era only: it answers the discover probe as an unknown
method) and the official TypeScript SDK v2 server (``tests/support/interop/ts_server_v2.mjs``, both eras)."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit.client.client import Client, ToolResult
from mcpkit.client.targets import ServerNotFound, ServerStartError
from mcpkit.protocol.errors import ConnectionClosed, MCPError, RequestTimeout
from mcpkit.protocol.types import EmbeddedResource, ImageContent, ResourceLink, TextContent
from mcpkit.transports.stdio import StdioServer
from support.oracle import validate_message
from support.paths import INTEROP, SERVERS, TESTS

SERVER = str(SERVERS / "client_server.py")
EVERYTHING = TESTS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
TS_V2 = INTEROP / "ts_server_v2.mjs"
ERAS = ["handshake", "modern"]


async def _until(pred: Any, timeout: float = 10.0) -> bool:
    for _ in range(int(timeout / 0.05)):
        if pred():
            return True
        await asyncio.sleep(0.05)
    return bool(pred())


# ---------------------------------------------------------------------------------------------- mcpkit server


@pytest.mark.req("M012", "S001")
@pytest.mark.parametrize("mode", ERAS)
async def test_launches_subprocess_and_shuts_down_by_closing_stdin(mode: str) -> None:
    c = Client(SERVER, mode=mode)  # a *.py path runs with this interpreter over stdio
    async with c:
        proc = c._opened.stdio.process  # type: ignore[union-attr]
        assert proc is not None and proc.returncode is None  # a live child process
        assert (await c.call_tool("echo", {"text": "over stdio"})).text == "over stdio"
    # the client closed stdin and the server exited on its own (0): no SIGTERM (-15) or SIGKILL (-9) was needed
    assert proc.returncode == 0


@pytest.mark.parametrize("how", ["async for", "next"])
@pytest.mark.parametrize("mode", ERAS)
async def test_a_watch_ends_with_connection_closed_when_the_server_dies(mode: str, how: str) -> None:
    """A loop over ``client.watch()`` (``async for`` or ``next()``) ends with ConnectionClosed when the server
    dies, in both eras: it neither waits forever for changes that cannot come nor ends as if the server had closed
    the subscription on purpose."""
    async with Client(SERVER, mode=mode, timeout=10) as client, client.watch(tools=True) as watch:

        async def consume() -> None:
            if how == "next":
                await watch.next()
            else:
                async for _ in watch:
                    pass

        consumer = asyncio.ensure_future(consume())
        await asyncio.sleep(0.2)
        with pytest.raises(ConnectionClosed):
            await client.call_tool("exit")
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(consumer, 5)
        with pytest.raises(ConnectionClosed):  # and again, at once
            await asyncio.wait_for(watch.next(), 1)


@pytest.mark.req("M017")
@pytest.mark.parametrize("mode", ERAS)
async def test_only_valid_mcp_messages_reach_stdin(mode: str, tmp_path: Path) -> None:
    log = tmp_path / "stdin.log"
    cmd = f"tee {log} | {sys.executable} {SERVER}"
    roots = ["file:///x"]
    async with Client(
        ["sh", "-c", cmd],
        mode=mode,
        roots=roots,
        sampling_handler=lambda p: "s",
        elicitation_handler=lambda p: {"name": "n"},
    ) as c:
        version = c.protocol_version
        await c.list_tools()
        await c.call_tool("ask")
        await c.call_tool("sample")
        await c.call_tool("roots")
        with pytest.raises(RequestTimeout):
            await c.call_tool("slow", {"steps": 20, "delay": 0.05}, timeout=0.1)
        await c.read_resource("mcpkit://text/1")
        await c.get_prompt("greet", {"name": "x"})
    assert version is not None
    lines = log.read_bytes().split(b"\n")
    assert lines[-1] == b""  # every message is newline-terminated
    pending: dict[Any, str] = {}
    for line in lines[:-1]:
        msg = json.loads(line)
        assert isinstance(msg, dict) and b"\n" not in line
        if "method" in msg and "id" in msg:
            pending[msg["id"]] = msg["method"]
        validate_message(msg, version if msg.get("method") != "server/discover" else "2026-07-28", sender="client")
    methods = [json.loads(x).get("method") for x in lines[:-1]]
    assert "notifications/cancelled" in methods and "tools/call" in methods


@pytest.mark.parametrize("mode", ERAS)
async def test_cancellation_reaches_a_stdio_server(mode: str) -> None:
    async with Client(SERVER, mode=mode) as c:
        task = asyncio.create_task(c.call_tool("slow", {"steps": 100, "delay": 0.02}))
        status: dict[str, Any] = {}

        async def poll(key: str = "cancelled") -> bool:
            status.update(json.loads((await c.call_tool("status")).text))
            return bool(status[key])

        for _ in range(200):  # cancelled once it runs (cancelled before it ran, it would never run: no record)
            if await poll("started"):
                break
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        for _ in range(40):
            if await poll():
                break
            await asyncio.sleep(0.05)
        assert len(status["cancelled"]) == 1 and status["finished"] == []


async def test_start_failures_are_explained(tmp_path: Path) -> None:
    with pytest.raises(ServerNotFound, match="no-such-binary"):
        async with Client("no-such-binary --flag"):
            pass
    with pytest.raises(ServerNotFound):
        async with Client(str(tmp_path / "missing.py")):
            pass
    with pytest.raises(ServerStartError) as info:
        async with Client([sys.executable, SERVER, "--crash"]):
            pass
    assert info.value.returncode == 3 and "told to crash" in info.value.stderr
    with pytest.raises(ServerStartError, match="did not complete initialization") as info:
        async with Client([sys.executable, SERVER, "--hang"], connect_timeout=1.0):
            pass
    assert "hanging on purpose" in info.value.stderr


async def test_config_entry_and_env(tmp_path: Path) -> None:
    entry = {"command": sys.executable, "args": [SERVER], "env": {"MCPKIT_X": "1"}}
    async with Client(entry) as c:
        assert (await c.call_tool("echo", {"text": "cfg"})).text == "cfg"
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"mine": entry, "other": {"url": "http://127.0.0.1:1/mcp"}}}))
    async with Client(f"{path}#mine", mode="handshake") as c:
        assert c.protocol_version == "2025-11-25"
    async with Client(StdioServer([sys.executable, SERVER], stderr="devnull")) as c:
        assert (await c.list_prompts())[0].name == "greet"


# ---------------------------------------------------------------------------------------------- server-everything


def _fill(schema: dict[str, Any]) -> dict[str, Any]:
    """Answer every required field of an elicitation form with a valid value (defaults fill the rest)."""
    out: dict[str, Any] = {}
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        p = props[name]
        if "enum" in p:
            out[name] = p["enum"][0]
        elif "oneOf" in p:
            out[name] = p["oneOf"][0]["const"]
        elif p.get("type") == "array":
            items = p.get("items") or {}
            out[name] = [items["enum"][0]] if "enum" in items else [items["anyOf"][0]["const"]]
        elif p.get("type") == "boolean":
            out[name] = True
        elif p.get("type") in ("number", "integer"):
            out[name] = p.get("minimum", 1)
        elif p.get("format") == "email":
            out[name] = "ada@example.com"
        elif p.get("format") == "date":
            out[name] = "2024-01-31"
        elif p.get("format") == "uri":
            out[name] = "https://example.com"
        else:
            out[name] = "Ada"
    return out


@pytest.fixture
def everything(node_bin: Path) -> list[str]:
    if not EVERYTHING.is_file():
        pytest.skip(f"{EVERYTHING} missing: run scripts/test.sh")
    return [str(node_bin), str(EVERYTHING), "stdio"]


@pytest.mark.npm
@pytest.mark.req("M039", "M040", "M043", "M044", "S015")
async def test_everything_tools(everything: list[str]) -> None:
    forms: list[dict[str, Any]] = []

    def elicit(params: dict[str, Any]) -> Any:
        forms.append(params)
        if params.get("mode") == "url":
            return {"action": "accept"}
        return _fill(params["requestedSchema"])

    sampled: list[dict[str, Any]] = []

    def sample(params: dict[str, Any]) -> dict[str, Any]:
        sampled.append(params)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "42"},
            "model": "pytest-llm",
            "stopReason": "endTurn",
        }

    async with Client(
        everything,
        roots=[{"uri": "file:///tmp/proj", "name": "proj"}],
        sampling_handler=sample,
        elicitation_handler=elicit,
        env={"TEST_VAR_EVERYTHING": "mcpkit-test"},
    ) as c:
        assert c.protocol_version == "2025-11-25"  # auto mode fell back from the discover probe
        assert c.server_info and c.server_info.name == "mcp-servers/everything"
        tools = {t.name: t for t in await c.list_tools()}
        expected = {
            "echo",
            "get-annotated-message",
            "get-env",
            "get-resource-links",
            "get-resource-reference",
            "get-structured-content",
            "get-sum",
            "get-tiny-image",
            "gzip-file-as-resource",
            "toggle-simulated-logging",
            "toggle-subscriber-updates",
            "trigger-long-running-operation",
            "get-roots-list",
            "trigger-elicitation-request",
            "trigger-url-elicitation",
            "trigger-sampling-request",
            "simulate-research-query",
        }
        assert expected <= set(tools)

        assert (await c.call_tool("echo", {"message": "hi"})).text == "Echo: hi"
        assert "The sum of 2 and 3 is 5" in (await c.call_tool("get-sum", {"a": 2, "b": 3})).text
        for kind in ("error", "success", "debug"):
            r = await c.call_tool("get-annotated-message", {"messageType": kind, "includeImage": True})
            assert not r.is_error and any(isinstance(b, ImageContent) for b in r.content)
            assert r.content[0].annotations is not None  # type: ignore[union-attr]
        env = await c.call_tool("get-env")
        assert "mcpkit-test" in env.text
        links = await c.call_tool("get-resource-links", {"count": 3})
        assert sum(isinstance(b, ResourceLink) for b in links.content) == 3
        for rtype in ("Text", "Blob"):
            ref = await c.call_tool("get-resource-reference", {"resourceType": rtype, "resourceId": 2})
            assert any(isinstance(b, EmbeddedResource) for b in ref.content)
        weather = await c.call_tool("get-structured-content", {"location": "Chicago"})
        assert weather.validated and set(weather.data) == {"temperature", "conditions", "humidity"}
        image = await c.call_tool("get-tiny-image")
        png = next(b for b in image.content if isinstance(b, ImageContent))
        assert base64.b64decode(png.data)[:4] == b"\x89PNG"
        gz = await c.call_tool(
            "gzip-file-as-resource", {"name": "hello.gz", "data": "data:text/plain;base64,aGVsbG8gd29ybGQ="}
        )
        link = next(b for b in gz.content if isinstance(b, ResourceLink))
        blob = await c.read_resource(link.uri)
        assert blob.contents[0].uri == link.uri  # a session resource created by the tool

        seen: list[float] = []
        done = await c.call_tool(
            "trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=lambda p, t, m: seen.append(p)
        )
        assert not done.is_error and seen == [1.0, 2.0, 3.0, 4.0]

        roots = await c.call_tool("get-roots-list")
        assert "file:///tmp/proj" in roots.text

        sampled_result = await c.call_tool("trigger-sampling-request", {"prompt": "6 x 7?", "maxTokens": 20})
        assert "42" in sampled_result.text and sampled[0]["maxTokens"] == 20

        form = await c.call_tool("trigger-elicitation-request")
        assert not form.is_error and "accept" in form.text
        schema = forms[-1]["requestedSchema"]
        defaults = {k: p["default"] for k, p in schema["properties"].items() if "default" in p}
        assert defaults  # the form has defaults, and the client sent them back filled in
        for value in defaults.values():
            if isinstance(value, str):
                assert value in form.text

        url = await c.call_tool("trigger-url-elicitation", {"url": "https://example.com/consent"})
        assert "accept" in url.text.lower() and forms[-1]["mode"] == "url"
        # the error path: -32042 with the elicitation; the client hands it to the handler and retries once
        before = len(forms)
        err_path = await c.call_tool("trigger-url-elicitation", {"url": "https://example.com/e", "errorPath": True})
        assert not err_path.is_error and "accept" in err_path.text.lower()
        handled = forms[before:]  # the prerequisite from the error, then the request path of the retry
        assert len(handled) == 2 and all(f["mode"] == "url" for f in handled) and "elicitationId" in handled[0]
        assert handled[1]["url"] == "https://example.com/e"

        # a task-only tool: the client runs it as a task (2025-11-25) and waits for its result
        research = await c.call_tool("simulate-research-query", {"topic": "mcp"})
        assert not research.is_error and "Research Report: mcp" in research.text
        # called plainly (the low-level session sends no task), the server answers with a clear error result
        plain = await c.session.call_tool("simulate-research-query", {"topic": "mcp"})
        assert plain.is_error and "task" in plain.text


@pytest.mark.npm
async def test_everything_logging_and_subscriptions(everything: list[str]) -> None:
    logs: list[dict[str, Any]] = []
    notes: list[tuple[str, Any]] = []
    async with Client(everything, logging_handler=logs.append, on_notification=lambda m, p: notes.append((m, p))) as c:
        await c.set_logging_level("debug")
        before = len(logs)
        await c.call_tool("toggle-simulated-logging")
        assert await _until(lambda: len(logs) > before, 15)
        await c.call_tool("toggle-simulated-logging")
        uri = "demo://resource/static/document/features.md"
        await c.subscribe_resource(uri)
        await c.call_tool("toggle-subscriber-updates")
        assert await _until(lambda: any(m == "notifications/resources/updated" for m, _ in notes), 15)
        await c.call_tool("toggle-subscriber-updates")
        await c.unsubscribe_resource(uri)
    updated = [p for m, p in notes if m == "notifications/resources/updated"]
    assert updated[0]["uri"] == uri
    assert {"level", "data"} <= set(logs[-1])


@pytest.mark.npm
async def test_everything_resources_prompts_completion(everything: list[str]) -> None:
    async with Client(everything) as c:
        await c.ping()
        resources = await c.list_resources()
        assert len(resources) == 7
        for r in resources:
            result = await c.read_resource(r.uri)
            assert result.contents and result.contents[0].uri == r.uri
        templates = {t.uri_template for t in await c.list_resource_templates()}
        assert templates == {"demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"}
        text = await c.read_resource("demo://resource/dynamic/text/3")
        assert text.contents[0].text  # type: ignore[union-attr]
        blob = await c.read_resource("demo://resource/dynamic/blob/3")
        assert blob.contents[0].blob  # type: ignore[union-attr]

        prompts = {p.name for p in await c.list_prompts()}
        assert prompts == {"simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"}
        simple = await c.get_prompt("simple-prompt")
        assert isinstance(simple.messages[0].content, TextContent)
        args = await c.get_prompt("args-prompt", {"city": "Paris", "state": "IDF"})
        assert "Paris" in args.messages[0].content.text  # type: ignore[union-attr]
        team = await c.get_prompt("completable-prompt", {"department": "Engineering", "name": "Alice"})
        assert "Alice" in json.dumps(team.dump())
        res = await c.get_prompt("resource-prompt", {"resourceType": "Text", "resourceId": 1})  # 1 sent as "1"
        assert any(isinstance(m.content, EmbeddedResource) for m in res.messages)

        dept = await c.complete("completable-prompt", "department", "E")
        assert dept.completion.values == ["Engineering"]
        names = await c.complete("completable-prompt", "name", "", {"department": "Engineering"})
        assert names.completion.values == ["Alice", "Bob", "Charlie"]
        with pytest.raises(MCPError):
            await c.read_resource("demo://resource/nope")


@pytest.mark.npm
@pytest.mark.req("S019", "S020")
async def test_everything_timeout_cancels(everything: list[str]) -> None:
    async with Client(everything) as c:
        with pytest.raises(RequestTimeout):
            await c.call_tool("trigger-long-running-operation", {"duration": 5, "steps": 5}, timeout=0.5)
        r: ToolResult = await c.call_tool("echo", {"message": "after"})
        assert r.text == "Echo: after"


# ---------------------------------------------------------------------------------------------- TS SDK v2 server


@pytest.fixture
def ts_v2(node_bin: Path) -> list[str]:
    if not TS_V2.is_file() or not (TESTS / "node_modules" / "@modelcontextprotocol" / "server").is_dir():
        pytest.skip("TS SDK v2 server not available")
    return [str(node_bin), str(TS_V2), "--stdio"]


@pytest.mark.npm
@pytest.mark.parametrize("mode", ERAS)
async def test_typescript_v2_server_both_eras(ts_v2: list[str], mode: str) -> None:
    async def llm(params: dict[str, Any]) -> str:
        return "sampled by mcpkit"

    async with Client(
        ts_v2,
        mode=mode,
        roots=["file:///ts-root"],
        sampling_handler=llm,
        elicitation_handler=lambda p: {"name": "Grace"},
    ) as c:
        assert c.protocol_version == ("2026-07-28" if mode == "modern" else "2025-11-25")
        tools = {t.name for t in await c.list_tools()}
        assert {"echo", "add", "slow", "fail", "sample", "ask_name", "roots"} <= tools
        assert (await c.call_tool("echo", {"text": "x"})).text == "x"
        add = await c.call_tool("add", {"a": 2, "b": 5})
        assert add.validated and add.structured == {"result": 7}
        assert (await c.call_tool("fail")).is_error
        assert "sampled by mcpkit" in (await c.call_tool("sample", {"prompt": "p"})).text
        assert "Hello, Grace!" in (await c.call_tool("ask_name")).text
        assert "file:///ts-root" in (await c.call_tool("roots")).text
        progress: list[float] = []
        await c.call_tool("slow", {"steps": 3, "delay_ms": 10}, on_progress=lambda p, t, m: progress.append(p))
        assert progress == [1.0, 2.0, 3.0]
        assert len(await c.list_resources()) == 101  # 10 pages walked
        with pytest.raises(RequestTimeout):
            await c.call_tool("slow", {"steps": 50, "delay_ms": 50}, timeout=0.3)

        async def cancelled() -> bool:
            return json.loads((await c.call_tool("stats")).text)["cancelledSlow"] >= 1

        for _ in range(40):
            if await cancelled():
                break
            await asyncio.sleep(0.05)
        assert await cancelled()


@pytest.mark.npm
@pytest.mark.parametrize("mode", ERAS)
async def test_a_call_timeout_bounds_the_elicitation_it_waits_for_in_both_eras(ts_v2: list[str], mode: str) -> None:
    """``call_tool(timeout=...)`` bounds the whole call. In 2026-07-28 the server's question comes back as an
    ``InputRequiredResult`` and the client answers it between two requests: the timeout used to apply to each
    request alone, so a call waiting on a slow elicitation handler ran past it (and succeeded after 3 s)."""
    state: dict[str, bool] = {}

    async def slow_user(params: Any) -> dict[str, str]:
        try:
            await asyncio.sleep(3)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        state["answered"] = True
        return {"name": "late"}

    async with Client(ts_v2, mode=mode, elicitation_handler=slow_user) as c:
        started = asyncio.get_running_loop().time()
        with pytest.raises(RequestTimeout):
            await c.call_tool("ask_name", timeout=0.5)
        assert asyncio.get_running_loop().time() - started < 2.5
        assert await _until(lambda: "cancelled" in state, timeout=5), state
        assert "answered" not in state
        assert (await c.call_tool("echo", {"text": "after"})).text == "after"


@pytest.mark.parametrize("mode", ERAS)
async def test_many_concurrent_calls_over_one_connection(mode: str) -> None:
    async with Client(SERVER, mode=mode) as c:
        results = await asyncio.gather(*(c.call_tool("echo", {"text": f"m{i}"}) for i in range(200)))
        assert [r.text for r in results] == [f"m{i}" for i in range(200)]
        sums = await asyncio.gather(*(c.call_tool("add", {"a": i, "b": 1}) for i in range(50)))
        assert [r.data for r in sums] == [{"sum": i + 1} for i in range(50)]


# ---------------------------------------------------------------------------------------------- official Python SDK

OFFICIAL_SERVER = """
from pydantic import BaseModel
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("official")


class Weather(BaseModel):
    city: str
    celsius: float


@app.tool()
def add(a: int, b: int) -> int:
    return a + b


@app.tool()
def weather(city: str) -> Weather:
    return Weather(city=city, celsius=21.5)


@app.resource("data://greeting")
def greeting() -> str:
    return "hello from the official SDK"


@app.prompt()
def review(code: str) -> str:
    return f"Review this: {code}"


@app.tool()
async def chatty(ctx: Context) -> str:
    await ctx.debug("detail")
    await ctx.warning("careful")
    return "done"


app.run()
"""


@pytest.mark.parametrize("mode", ["handshake", "modern", "auto"])
async def test_official_python_sdk_server(mode: str, tmp_path: Path) -> None:
    pytest.importorskip("mcp.server.mcpserver")
    script = tmp_path / "official_server.py"
    script.write_text(OFFICIAL_SERVER)
    async with Client(str(script), mode=mode) as c:
        assert c.protocol_version == ("2025-11-25" if mode == "handshake" else "2026-07-28")
        added = await c.call_tool("add", {"a": 1, "b": 2})
        assert added.validated and added.structured == {"result": 3} and added.data == 3
        weather = await c.call_tool("weather", {"city": "Oslo"})
        assert weather.validated and weather.data == {"city": "Oslo", "celsius": 21.5}
        assert await c.read_text("data://greeting") == "hello from the official SDK"
        assert (await c.get_prompt("review", {"code": "x=1"})).messages[0].content.text == "Review this: x=1"  # type: ignore[union-attr]


async def test_auto_mode_connects_to_a_modern_server_slower_to_start_than_the_discover_probe(tmp_path: Path) -> None:
    """A stdio server that takes longer to start than ``discover_timeout`` (``uvx``/``npx`` fetching a package, a
    loaded machine) reads the ``server/discover`` probe late and answers it; the client, which had given up on
    the probe, had sent ``initialize`` meanwhile, which such a server refuses (the official SDK: "connection is
    serving the 2026-07-28 protocol"), and the connection failed. The late answer to the probe now decides."""
    pytest.importorskip("mcp.server.mcpserver")
    script = tmp_path / "slow_official_server.py"
    script.write_text("import time\ntime.sleep(2.0)\n" + OFFICIAL_SERVER)
    async with Client(str(script), mode="auto", discover_timeout=0.3) as c:
        assert c.protocol_version == "2026-07-28"
        added = await c.call_tool("add", {"a": 1, "b": 2})
        assert added.structured == {"result": 3}


@pytest.mark.parametrize("mode", ["handshake", "modern"])
async def test_a_log_level_connects_to_a_server_that_declares_no_logging(mode: str, tmp_path: Path) -> None:
    """``log_level`` is a wish, not a requirement: the official server declares no ``logging`` capability in the
    handshake era (yet sends log messages). The client used to fail to connect there (CapabilityNotSupported from
    its own ``logging/setLevel``); now it connects without asking, and the messages it gets are still delivered."""
    pytest.importorskip("mcp.server.mcpserver")
    script = tmp_path / "official_server.py"
    script.write_text(OFFICIAL_SERVER)
    logs: list[Any] = []
    async with Client(str(script), mode=mode, log_level="warning", logging_handler=logs.append) as c:  # type: ignore[arg-type]
        assert (await c.call_tool("chatty")).text == "done"
        assert await _until(lambda: any(m.data == "careful" for m in logs))
    assert "careful" in [m.data for m in logs]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_stdio_client_takes_the_max_message_size_it_is_given(mode: str) -> None:
    """A 5 MB answer is over the 4 MiB default: it fails naming the option, and with
    ``transport_options={"max_message_size": ...}`` it arrives (that option was silently ignored for stdio targets,
    while the error told the user to raise it)."""
    from mcpkit.protocol.errors import MessageTooLarge

    core = str(SERVERS / "core_server.py")
    async with Client(core, mode=mode) as c:
        with pytest.raises(MessageTooLarge, match="max_message_size"):
            await c.call_tool("big", {"n": 5_000_000})
    async with Client(core, mode=mode, transport_options={"max_message_size": 8 << 20}) as c:
        assert len((await c.call_tool("big", {"n": 5_000_000})).text) == 5_000_000


async def test_a_stdio_client_refuses_a_transport_option_it_would_ignore() -> None:
    """``max_message_size`` is the one transport option a stdio target takes; any other (``max_mesage_size``, an
    HTTP transport's ``timeout``) is a ``TypeError`` naming the closest one, before the server is started: it was
    silently dropped, so a misspelled bound was never applied."""
    core = str(SERVERS / "core_server.py")
    with pytest.raises(TypeError, match="unknown option 'max_mesage_size'; did you mean 'max_message_size'"):
        async with Client(core, transport_options={"max_mesage_size": 8 << 20}):
            pass
    with pytest.raises(TypeError, match="unknown option 'sse_read_timeout'"):
        async with Client(core, transport_options={"sse_read_timeout": 5}):
            pass


@pytest.mark.parametrize("program", ["python", "python3"])
async def test_a_command_line_starting_with_python_runs_under_the_clients_interpreter(
    program: str, tmp_path: Path
) -> None:
    """``Client("python server.py")`` (or ``python3``) runs the server with the client's own interpreter
    (``sys.executable``), not whichever ``python`` is first on PATH, so the server sees the client's virtual
    environment; what the server reports as its interpreter is the test's own."""
    script = tmp_path / "where.py"
    script.write_text(
        "import sys\nfrom mcpkit import MCPKit\napp = MCPKit('where')\n\n\n@app.tool\ndef interpreter() -> str:\n"
        "    return sys.executable\n\n\napp.run()\n"
    )
    async with Client(f"{program} {script}", timeout=30) as client:
        assert (await client.call_tool("interpreter")).data == sys.executable


async def test_a_missing_working_directory_is_named_as_such_not_as_a_missing_command(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(ServerNotFound) as info:
        async with Client(StdioServer([sys.executable, SERVER], cwd=str(missing))):
            pass
    assert "working directory" in str(info.value) and str(missing) in str(info.value)
    assert "command not found" not in str(info.value)
    with pytest.raises(ServerNotFound, match="working directory"):
        async with Client({"command": sys.executable, "args": [SERVER], "cwd": str(missing)}):
            pass


async def test_a_config_command_that_holds_its_arguments_or_names_a_windows_program_says_what_to_change() -> None:
    with pytest.raises(ServerNotFound, match="put the arguments in 'args'"):
        async with Client({"command": "python3 -m some_server"}):
            pass
    with pytest.raises(ServerNotFound, match="Windows"):
        async with Client({"command": "npx.cmd", "args": ["-y", "some-server"]}):
            pass


async def test_a_server_file_path_with_spaces_is_that_file(tmp_path: Path) -> None:
    """``Client("my servers/server.py")`` shell-split the path and started the program ``my``: a path that names
    an existing file is run as that file."""
    folder = tmp_path / "my servers"
    folder.mkdir()
    (folder / "server.py").write_text(Path(SERVER).read_text())
    async with Client(str(folder / "server.py")) as client:
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
