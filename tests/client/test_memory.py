"""The high-level Client against a real low-level mcpkit server over the in-memory transport (bytes on the wire),
in both eras: lifecycle, typed calls, pagination, output validation, timeouts/cancellation/progress, handlers."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from mcpkit.client.client import (
    Client,
    PaginationLimitExceeded,
    ToolCallError,
    ToolOutputError,
    apply_schema_defaults,
)
from mcpkit.protocol.errors import CapabilityNotSupported, MCPError, RequestTimeout, URLElicitationRequired
from mcpkit.transports.memory import create_memory_pair
from support.oracle import validate_message
from support.servers.client_server import build_server, state

ERAS = ["handshake", "modern"]


class Wire:
    """Records every message of an in-memory pair, decoded, with its direction."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Any]] = []

    def __call__(self, direction: str, data: bytes) -> None:
        self.messages.append((direction, json.loads(data)))

    def sent(self) -> list[Any]:
        return [m for d, m in self.messages if d == "client->server"]

    def received(self) -> list[Any]:
        return [m for d, m in self.messages if d == "server->client"]

    def methods(self) -> list[str]:
        return [m.get("method", "<response>") for m in self.sent() if isinstance(m, dict)]


def client(mode: str = "handshake", wire: Wire | None = None, **kw: Any) -> Client:
    opts: dict[str, Any] = {"tap": wire} if wire is not None else {}
    return Client(build_server(), mode=mode, transport_options=opts, **kw)


@pytest.fixture(autouse=True)
def _reset_state() -> None:
    state.update(started=[], cancelled=[], finished=[], counter=0, roots_changed=0, url_done=False)


# ---------------------------------------------------------------------------------------------- lifecycle


@pytest.mark.req("M039", "M040", "M041", "M043", "M044", "S013", "S015")
async def test_handshake_sequence_on_the_wire() -> None:
    wire = Wire()
    async with client("handshake", wire, roots=["file:///r"]) as c:
        await c.ping()
        assert c.protocol_version == "2025-11-25"
    sent = wire.sent()
    first = sent[0]
    assert isinstance(first, dict) and first["method"] == "initialize"  # first interaction, not in a batch
    p = first["params"]
    assert p["protocolVersion"] == "2025-11-25"  # the latest handshake revision we support
    assert p["clientInfo"]["name"] == "mcpkit" and "version" in p["clientInfo"]
    assert p["capabilities"] == {"roots": {"listChanged": True}}
    # nothing but the initialized notification goes out between initialize and its response
    assert sent[1] == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    init_response = wire.received()[0]
    assert init_response["id"] == first["id"] and "result" in init_response
    order = [m for _, m in wire.messages]
    assert order.index(init_response) < order.index(sent[1])
    for m in sent:
        validate_message(m, "2025-11-25", sender="client")


@pytest.mark.req("M042")
async def test_server_identity_exposed() -> None:
    async with client("handshake") as c:
        assert c.server_info == {"name": "client-test", "version": "2.0.0"}
        assert set(c.server_capabilities) >= {"tools", "resources", "prompts", "logging"}
        assert c.instructions == "a server for the client tests"
    async with client("modern") as c:
        assert c.protocol_version == "2026-07-28" and c.modern
        assert c.server_info is not None and c.server_info.name == "client-test"


async def test_auto_mode_prefers_the_modern_era_and_pinning_works() -> None:
    async with client("auto") as c:
        assert c.protocol_version == "2026-07-28"
    async with Client(build_server(), protocol_version="2025-03-26") as c:
        assert c.protocol_version == "2025-03-26"
    async with Client(build_server(), protocol_version="2024-11-05") as c:
        assert c.protocol_version == "2024-11-05"
        assert (await c.call_tool("echo", {"text": "old"})).text == "old"


@pytest.mark.parametrize(("mode", "version"), [("handshake", "2026-07-28"), ("modern", "2024-11-05")])
async def test_a_mode_that_contradicts_the_pinned_revision_is_refused_when_the_client_is_built(
    mode: str, version: str
) -> None:
    with pytest.raises(ValueError, match=f"mode={mode!r}.*{version}"):
        Client(build_server(), mode=mode, protocol_version=version)  # type: ignore[arg-type]
    async with Client(build_server(), mode="auto", protocol_version=version) as c:  # (auto follows the pin)
        assert c.protocol_version == version


@pytest.mark.req("S017")
async def test_unsupported_server_version_disconnects() -> None:
    client_end, server_end = create_memory_pair()
    seen: list[Any] = []

    async def fake_server() -> None:
        while True:
            data = await server_end.receive()
            if data is None:
                seen.append("EOF")
                return
            msg = json.loads(data)
            seen.append(msg.get("method"))
            if msg.get("method") == "initialize":
                info = {"name": "x", "version": "1"}
                result = {"protocolVersion": "1999-01-01", "capabilities": {}, "serverInfo": info}
                await server_end.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode())

    task = asyncio.create_task(fake_server())
    with pytest.raises(MCPError, match="1999-01-01"):
        async with Client(client_end, mode="handshake"):
            pass
    await asyncio.wait_for(task, 5)
    assert seen == ["initialize", "EOF"]  # no initialized notification, the connection was closed


@pytest.mark.req("M071", "M076")
@pytest.mark.parametrize("mode", ERAS)
async def test_capabilities_declared_only_for_given_handlers(mode: str) -> None:
    def caps(wire: Wire) -> dict[str, Any]:
        first = wire.sent()[0]
        if mode == "handshake":
            return first["params"]["capabilities"]  # type: ignore[no-any-return]
        return first["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]  # type: ignore[no-any-return]

    # tasks are always supported (Client(tasks=True) by default): the 2026-07-28 extension, and in 2025-11-25 the
    # running of the server's sampling/elicitation requests as tasks, declared with the handlers that serve them
    task_keys = {"extensions"} if mode == "modern" else {"tasks"}
    bare = Wire()
    async with client(mode, bare):
        pass
    assert caps(bare) == ({"extensions": {"io.modelcontextprotocol/tasks": {}}} if mode == "modern" else {})
    full = Wire()
    async with client(
        mode, full, roots=[], sampling_handler=lambda p: "x", sampling_tools=True, elicitation_handler=lambda p: None
    ):
        pass
    got = caps(full)
    assert set(got) == {"roots", "sampling", "elicitation"} | task_keys
    assert got["sampling"] == {"tools": {}}
    assert got["elicitation"] == {"form": {}, "url": {}}


# ---------------------------------------------------------------------------------------------- typed calls


@pytest.mark.parametrize("mode", ERAS)
async def test_typed_calls(mode: str) -> None:
    async with client(mode) as c:
        assert (await c.call_tool("echo", {"text": "hi"})).text == "hi"
        resources = await c.list_resources()
        assert [r.uri for r in resources][-1] == "mcpkit://blob" and len(resources) == 7
        templates = await c.list_resource_templates()
        assert templates[0].uri_template == "mcpkit://item/{id}"
        assert await c.read_text("mcpkit://text/3") == "text number 3"
        blob = await c.read_resource("mcpkit://blob")
        assert blob.contents[0].blob  # type: ignore[union-attr]
        with pytest.raises(MCPError):
            await c.read_resource("mcpkit://nope")
        prompts = await c.list_prompts()
        assert [p.name for p in prompts] == ["greet", "plain"]
        got = await c.get_prompt("greet", {"name": "Ada", "style": "formal"})
        assert got.messages[0].content.text == "Say hello to Ada in a formal way."  # type: ignore[union-attr]
        done = await c.complete("greet", "name", "al")
        assert done.completion.values == ["alice", "albert"]
        by_template = await c.complete({"type": "ref/resource", "uri": "mcpkit://item/{id}"}, "id", "b")
        assert by_template.completion.values == ["bob"]
        assert await c.ping() >= 0


@pytest.mark.parametrize("mode", ERAS)
async def test_auto_pagination_and_raw_pages(mode: str) -> None:
    wire = Wire()
    async with client(mode, wire) as c:
        tools = await c.list_tools()
        assert len(tools) == 27 and tools[-1].name == "t11"
        assert wire.methods().count("tools/list") == 7  # 27 tools, 4 per page
        page, cursor = await c.list_tools_page()
        assert len(page) == 4 and cursor == "4"
        page, cursor = await c.list_tools_page("24")
        assert [t.name for t in page] == ["t09", "t10", "t11"] and cursor is None
        with pytest.raises(PaginationLimitExceeded) as info:
            await c.list_tools(max_pages=2)
        assert len(info.value.items) == 8
        with pytest.raises(PaginationLimitExceeded) as info:
            await c.list_tools(max_items=5)
        assert len(info.value.items) == 5


# ---------------------------------------------------------------------------------------------- tool results


@pytest.mark.parametrize("mode", ERAS)
async def test_tool_results_structured_validated_and_errors(mode: str) -> None:
    async with client(mode) as c:
        r = await c.call_tool("add", {"a": 2, "b": 3})
        assert r.structured == {"sum": 5} and r.data == {"sum": 5} and r.validated and not r.is_error
        assert (await c.call_tool("wrapped")).data == [1, 2]
        with pytest.raises(ToolOutputError, match="sum"):
            await c.call_tool("bad_output")
        with pytest.raises(ToolOutputError, match="no structuredContent"):
            await c.call_tool("no_structured")
        unchecked = await c.call_tool("bad_output", validate=False)
        assert unchecked.structured == {"sum": "not a number"} and not unchecked.validated
        failed = await c.call_tool("fail", {"why": "bad input"})
        assert failed.is_error and failed.text == "failed: bad input"
        with pytest.raises(ToolCallError) as info:
            await c.call_tool("fail", raise_on_error=True)
        assert info.value.result.is_error


async def test_tool_cache_refreshed_on_list_changed() -> None:
    server = build_server()
    async with Client(server, mode="handshake") as c:
        await c.list_tools()
        assert c._tools_complete
        await server.notify_list_changed("tools")
        for _ in range(50):
            if not c._tools_complete:
                break
            await asyncio.sleep(0.01)
        assert not c._tools_complete


# ---------------------------------------------------------------------------------------------- timeouts, cancellation


@pytest.mark.req("S019", "S020")
@pytest.mark.parametrize("mode", ERAS)
async def test_timeout_sends_cancelled_and_server_stops(mode: str) -> None:
    wire = Wire()
    async with client(mode, wire) as c:
        with pytest.raises(RequestTimeout):
            await c.call_tool("slow", {"steps": 50, "delay": 0.05}, timeout=0.2)
        call = [m for m in wire.sent() if m.get("method") == "tools/call"][-1]
        for _ in range(100):  # the cancellation is sent in the background (issue 15.3): the timeout never waits
            if state["cancelled"]:
                break
            await asyncio.sleep(0.01)
        cancels = [m for m in wire.sent() if m.get("method") == "notifications/cancelled"]
        assert cancels and cancels[-1]["params"]["requestId"] == call["id"]
        assert state["cancelled"] == [call["id"]] and state["finished"] == []
        assert (await c.call_tool("echo", {"text": "still fine"})).text == "still fine"


async def test_default_timeout_applies_to_every_request() -> None:
    async with client("handshake", timeout=0.2) as c:
        with pytest.raises(RequestTimeout):
            await c.call_tool("slow", {"steps": 50, "delay": 0.05})


@pytest.mark.parametrize("mode", ERAS)
async def test_cancelling_the_task_cancels_the_request(mode: str) -> None:
    wire = Wire()
    async with client(mode, wire) as c:
        task = asyncio.create_task(c.call_tool("slow", {"steps": 100, "delay": 0.02}))
        for _ in range(500):  # until the server's handler runs (a fixed wait was too short on a loaded machine)
            if state["started"]:
                break
            await asyncio.sleep(0.01)
        assert state["started"], "the slow tool never started"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        call = [m for m in wire.sent() if m.get("method") == "tools/call"][-1]
        for _ in range(100):
            if state["cancelled"]:
                break
            await asyncio.sleep(0.01)
        assert state["cancelled"] == [call["id"]] and not state["finished"]
        cancel = [m for m in wire.sent() if m.get("method") == "notifications/cancelled"][-1]
        assert cancel["params"]["requestId"] == call["id"]


@pytest.mark.req("S028")
async def test_late_response_to_a_timed_out_request_is_ignored() -> None:
    client_end, server_end = create_memory_pair()

    async def stubborn_server() -> None:
        # answers initialize at once and every other request after 0.3 s, ignoring notifications/cancelled
        while (data := await server_end.receive()) is not None:
            msg = json.loads(data)
            if "id" not in msg:
                continue
            if msg["method"] == "initialize":
                result: dict[str, Any] = {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "slow", "version": "1"},
                }
            else:
                await asyncio.sleep(0.3)
                result = {"content": [{"type": "text", "text": f"answer to {msg['id']}"}]}
            await server_end.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode())

    task = asyncio.create_task(stubborn_server())
    async with Client(client_end, mode="handshake", validate_output=False) as c:
        with pytest.raises(RequestTimeout):
            await c.call_tool("x", timeout=0.1)
        second = await c.call_tool("x", timeout=5)  # the late answer to the first call must not be taken for this
        assert second.text == "answer to 3"
    await server_end.close()
    task.cancel()


@pytest.mark.parametrize("mode", ERAS)
async def test_progress_callback(mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []
    async with client(mode) as c:
        r = await c.call_tool("slow", {"steps": 4, "delay": 0.01}, on_progress=lambda p, t, m: seen.append((p, t, m)))
    assert r.text == "done after 4 steps"
    assert seen == [(1.0, 4.0, "step 1"), (2.0, 4.0, "step 2"), (3.0, 4.0, "step 3"), (4.0, 4.0, "step 4")]


# ---------------------------------------------------------------------------------------------- client features


@pytest.mark.req("M072", "M073")
@pytest.mark.parametrize("mode", ERAS)
async def test_roots(mode: str) -> None:
    wire = Wire()
    roots = [{"uri": "file:///work", "name": "work"}, "file:///tmp"]
    async with client(mode, wire, roots=roots) as c:
        r = await c.call_tool("roots")
        assert json.loads(r.text) == {"roots": [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]}

        async def dynamic() -> list[str]:
            return ["file:///dyn"]

        await c.set_roots(dynamic)
        assert json.loads((await c.call_tool("roots")).text) == {"roots": [{"uri": "file:///dyn"}]}
        version = c.protocol_version
    assert version is not None
    answers = _client_answers(wire, "roots/list", mode)
    assert answers and all("roots" in a and all("uri" in x for x in a["roots"]) for a in answers)
    if mode == "handshake":
        for d, m in wire.messages:
            if d == "client->server" and "result" in m and "roots" in m["result"]:
                validate_message(m, version, sender="client", request_method="roots/list")


@pytest.mark.req("M074", "M075")
async def test_roots_list_changed_notification() -> None:
    wire = Wire()
    async with client("handshake", wire, roots=["file:///a"]) as c:
        init = wire.sent()[0]
        assert init["params"]["capabilities"]["roots"] == {"listChanged": True}
        await c.set_roots(["file:///b"])
        await c.ping()
        for _ in range(50):
            if state["roots_changed"]:
                break
            await asyncio.sleep(0.01)
    assert {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"} in wire.sent()
    assert state["roots_changed"] == 1


@pytest.mark.req("M075")
async def test_roots_cannot_change_without_the_capability() -> None:
    wire = Wire()
    async with client("handshake", wire) as c:
        with pytest.raises(CapabilityNotSupported):
            await c.set_roots(["file:///late"])
    assert "notifications/roots/list_changed" not in wire.methods()
    assert "roots" not in wire.sent()[0]["params"]["capabilities"]


def _client_answers(wire: Wire, method: str, mode: str) -> list[dict[str, Any]]:
    """What the client answered to the server's ``method`` requests (responses, or inputResponses on retries)."""
    out: list[dict[str, Any]] = []
    if mode == "handshake":
        ids = {m["id"] for m in wire.received() if m.get("method") == method}
        out = [m["result"] for m in wire.sent() if m.get("id") in ids and "result" in m]
    else:
        for m in wire.sent():
            responses = (m.get("params") or {}).get("inputResponses") or {}
            out.extend(v for k, v in responses.items() if k.startswith(method.split("/")[0]))
    return out


@pytest.mark.req("M077", "M078")
@pytest.mark.parametrize("mode", ERAS)
async def test_sampling(mode: str) -> None:
    wire = Wire()
    asked: list[dict[str, Any]] = []

    def llm(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {
            "role": "assistant",
            "content": {"type": "text", "text": "Paris"},
            "model": "test-llm",
            "stopReason": "endTurn",
        }

    async with client(mode, wire, sampling_handler=llm) as c:
        r = await c.call_tool("sample", {"prompt": "capital of France?"})
        version = c.protocol_version
        # without the sampling.tools capability a request with tools is refused
        try:
            refused = await c.call_tool("sample", {"prompt": "x", "tools": True})
        except MCPError:
            pass  # modern era: -32021, the client lacks sampling.tools
        else:
            assert refused.is_error
    assert json.loads(r.text)["content"]["text"] == "Paris"
    assert len(asked) == 1 and asked[0]["messages"][0]["content"]["text"] == "capital of France?"
    answers = _client_answers(wire, "sampling/createMessage", mode)
    assert answers[0] == {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "test-llm",
        "stopReason": "endTurn",
    }
    if mode == "handshake":
        assert version is not None
        for m in wire.sent():
            if m.get("result", {}).get("model"):
                validate_message(m, version, sender="client", request_method="sampling/createMessage")


@pytest.mark.parametrize("mode", ERAS)
async def test_sampling_with_tools_and_plain_string_answers(mode: str) -> None:
    asked: list[dict[str, Any]] = []

    def llm(params: dict[str, Any]) -> str:
        asked.append(params)
        return "use the lookup tool"

    async with client(mode, sampling_handler=llm, sampling_tools=True) as c:
        r = await c.call_tool("sample", {"prompt": "x", "tools": True})
    assert asked[0]["tools"][0]["name"] == "lookup" and asked[0]["toolChoice"] == {"mode": "auto"}
    answer = json.loads(r.text)
    assert answer["content"] == {"type": "text", "text": "use the lookup tool"} and answer["role"] == "assistant"


@pytest.mark.parametrize("mode", ERAS)
async def test_elicitation_form_defaults_enums_and_decline(mode: str) -> None:
    seen: list[dict[str, Any]] = []

    def user(params: dict[str, Any]) -> Any:
        seen.append(params)
        return {"name": "Ada", "color": "blue"}

    async with client(mode, elicitation_handler=user) as c:
        r = await c.call_tool("ask")
    assert json.loads(r.text) == {
        "action": "accept",
        "content": {"name": "Ada", "color": "blue", "size": "s", "count": 3},
    }
    assert seen[0]["message"] == "What is your name?" and seen[0]["requestedSchema"]["required"] == ["name"]

    async with client(mode, elicitation_handler=lambda p: None) as c:
        assert json.loads((await c.call_tool("ask")).text) == {"action": "decline"}

    async with client(mode, elicitation_handler=lambda p: {"action": "cancel", "content": {"x": 1}}) as c:
        assert json.loads((await c.call_tool("ask")).text) == {"action": "cancel"}

    # a value outside the enum is caught on the client: it never reaches the server as an accepted answer
    async with client(mode, elicitation_handler=lambda p: {"name": "Ada", "color": "purple"}) as c:
        try:
            bad = await c.call_tool("ask")
        except Exception as exc:  # modern era: the handler error surfaces in the caller
            assert "purple" in str(exc) or "enum" in str(exc) or "match" in str(exc)
        else:  # handshake era: the server got an error response for its elicitation request
            assert bad.is_error or "accept" not in bad.text


@pytest.mark.parametrize("mode", ERAS)
async def test_elicitation_url_mode(mode: str) -> None:
    seen: list[dict[str, Any]] = []

    async def user(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"action": "accept"}

    async with client(mode, elicitation_handler=user) as c:
        r = await c.call_tool("ask_url")
    assert json.loads(r.text) == {"action": "accept"}
    assert seen[0]["mode"] == "url" and seen[0]["url"] == "https://example.com/login"

    async with client(mode, elicitation_handler=user, elicitation_url=False) as c:
        try:
            refused = await c.call_tool("ask_url")
        except MCPError:
            pass  # modern: -32021 missing client capability
        else:
            assert refused.is_error or "accept" not in refused.text
    assert len(seen) == 1


async def test_url_elicitation_required_error_is_handled_and_retried_once() -> None:
    seen: list[dict[str, Any]] = []

    def user(params: dict[str, Any]) -> dict[str, Any]:
        seen.append(params)
        return {"action": "accept"}

    wire = Wire()
    async with client("handshake", wire, elicitation_handler=user) as c:
        r = await c.call_tool("needs_url")
        assert r.text == "authorized"
        assert "url-1" in c._completed_elicitations  # the retry waited for notifications/elicitation/complete
    assert seen == [{"mode": "url", "elicitationId": "url-1", "url": "https://example.com/auth", "message": "Sign in"}]
    calls = [m for m in wire.sent() if m.get("method") == "tools/call"]
    assert len(calls) == 2 and calls[0]["id"] != calls[1]["id"]
    order = [m.get("method") for d, m in wire.messages if d == "server->client" and "method" in m]
    assert "notifications/elicitation/complete" in order

    state["url_done"] = False
    async with client("handshake", elicitation_handler=lambda p: {"action": "decline"}) as c:
        with pytest.raises(URLElicitationRequired):
            await c.call_tool("needs_url")
    state["url_done"] = False
    async with client("handshake") as c:  # no elicitation handler: the error goes to the caller
        with pytest.raises(URLElicitationRequired):
            await c.call_tool("needs_url")


@pytest.mark.req("M078")
async def test_sampling_content_types() -> None:
    image = {"type": "image", "data": base64.b64encode(b"png").decode(), "mimeType": "image/png"}
    async with client(
        "handshake",
        sampling_handler=lambda p: {"role": "assistant", "content": image, "model": "m", "stopReason": "endTurn"},
    ) as c:
        assert json.loads((await c.call_tool("sample")).text)["content"] == image
    # a content type sampling does not allow never leaves the client as a result: the server gets an error
    bad = {"type": "resource_link", "uri": "file:///x", "name": "x"}
    wire = Wire()
    async with client(
        "handshake", wire, sampling_handler=lambda p: {"role": "assistant", "content": bad, "model": "m"}
    ) as c:
        with pytest.raises(MCPError):
            await c.call_tool("sample")
    ids = {m["id"] for m in wire.received() if m.get("method") == "sampling/createMessage"}
    answers = [m for m in wire.sent() if m.get("id") in ids and "method" not in m]
    assert answers and all("error" in m and "result" not in m for m in answers)


async def test_modern_input_rounds_are_bounded_and_use_new_ids() -> None:
    client_end, server_end = create_memory_pair()
    seen: list[dict[str, Any]] = []

    async def greedy_server() -> None:
        # a 2026-07-28 server that asks for more input forever
        while (data := await server_end.receive()) is not None:
            msg = json.loads(data)
            if "id" not in msg:
                continue
            seen.append(msg)
            if msg["method"] == "server/discover":
                result: dict[str, Any] = {
                    "resultType": "complete",
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}},
                }
            else:
                result = {
                    "resultType": "input_required",
                    "requestState": f"s{len(seen)}",
                    "inputRequests": {"q": {"method": "roots/list", "params": {}}},
                }
            await server_end.send(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}).encode())

    task = asyncio.create_task(greedy_server())
    async with Client(client_end, mode="modern", roots=["file:///r"], max_input_rounds=3, validate_output=False) as c:
        with pytest.raises(MCPError, match="still required input after 3 rounds"):
            await c.call_tool("x")
    calls = [m for m in seen if m["method"] == "tools/call"]
    assert len(calls) == 4 and len({m["id"] for m in calls}) == 4  # first try + 3 retries, each a new id
    assert "inputResponses" not in calls[0]["params"]
    for i, m in enumerate(calls[1:], start=1):
        assert m["params"]["inputResponses"] == {"q": {"roots": [{"uri": "file:///r"}]}}
        assert m["params"]["requestState"] == f"s{seen.index(calls[i - 1]) + 1}"
    await server_end.close()
    task.cancel()


def test_apply_schema_defaults() -> None:
    schema = {"properties": {"a": {"default": 1}, "b": {"type": "string"}, "c": {"default": [1]}}}
    assert apply_schema_defaults(schema, {"a": 5}) == {"a": 5, "c": [1]}
    assert apply_schema_defaults(None, None) == {}


@pytest.mark.parametrize("mode", ERAS)
async def test_logging_handler_and_level(mode: str) -> None:
    logs: list[dict[str, Any]] = []
    async with client(mode, logging_handler=logs.append, log_level="warning") as c:
        r = await c.call_tool("log")
        assert json.loads(r.text) == ["warning", "error"]
        await c.set_logging_level("debug")
        assert json.loads((await c.call_tool("log")).text) == ["debug", "info", "warning", "error"]
    assert [m["level"] for m in logs] == ["warning", "error", "debug", "info", "warning", "error"]


async def test_on_notification_receives_list_changed() -> None:
    server = build_server()
    got: list[str] = []
    async with Client(server, mode="handshake", on_notification=lambda m, p: got.append(m)) as c:
        # the server answers this ping only after it has seen notifications/initialized (the wire is ordered), and
        # list_changed goes to initialized sessions only
        await c.ping()
        await server.notify_list_changed("prompts")
        for _ in range(50):
            if got:
                break
            await asyncio.sleep(0.01)
    assert got == ["notifications/prompts/list_changed"]


async def test_modern_listen_through_the_client() -> None:
    server = build_server()
    async with Client(server, mode="modern") as c, c.listen(tools=True) as sub:
        assert sub.acknowledged == {"toolsListChanged": True}
        await server.notify_list_changed("tools")
        method, _ = await sub.next(timeout=5)
        assert method == "notifications/tools/list_changed"
