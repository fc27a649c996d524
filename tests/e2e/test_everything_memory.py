"""examples/everything.py through the real ClientSession over memory pairs, in both eras."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from mcpkit.protocol.errors import MCPError
from mcpkit.testing import running_functions
from support.everything import MODES, Recorder, connect, text_of

pytestmark = pytest.mark.parametrize("mode", MODES)

COUNTER = "mcpkit://counter"
TOOL_NAMES = {"echo", "add", "slow", "sample", "ask_name", "roots", "touch", "add_tool", "log", "fail", "image"}


# ---------------------------------------------------------------------------------------------- tools


@pytest.mark.req("M065", "M066", "M067", "M070", "A020")
async def test_tools_list(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        caps = cs.server_capabilities
        assert caps["tools"] == {"listChanged": True}
        result = await cs.list_tools()
        assert result.next_cursor in (None, "")
        tools = {t.name: t.dump() for t in result.tools}
        assert set(tools) == TOOL_NAMES
        for t in tools.values():
            assert t["description"] and t["inputSchema"]["type"] == "object"
        add = tools["add"]
        assert add["inputSchema"]["properties"]["a"] == {"type": "integer", "description": "The first addend."}
        assert add["inputSchema"]["required"] == ["a", "b"]
        assert add["outputSchema"] == {
            "type": "object",
            "properties": {"result": {"type": "integer"}},
            "required": ["result"],
        }
        assert add["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
        assert add["title"] == "Add two integers"
        assert tools["echo"]["inputSchema"]["properties"]["text"]["description"] == "Text to echo back."
        assert "outputSchema" not in tools["echo"]  # -> str: text only
        assert tools["slow"]["inputSchema"]["properties"]["steps"]["default"] == 5
        assert "ctx" not in tools["slow"]["inputSchema"]["properties"]
        assert tools["log"]["inputSchema"]["properties"]["level"]["enum"][0] == "debug"
        assert tools["fail"]["inputSchema"] == {"type": "object", "properties": {}, "additionalProperties": False}


@pytest.mark.req("M068", "M069")
async def test_call_echo_add_image_fail(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        r = await cs.call_tool("echo", {"text": "hello"})
        assert r.dump()["content"] == [{"type": "text", "text": "hello"}]
        assert r.is_error is False
        assert r.structured_content in (None, {})
        r = await cs.call_tool("add", {"a": 2, "b": 40})
        assert r.structured_content == {"result": 42}
        assert json.loads(text_of(r)) == {"result": 42}
        r = await cs.call_tool("image", {})
        (block,) = r.dump()["content"]
        assert block["type"] == "image" and block["mimeType"] == "image/png"
        assert base64.b64decode(block["data"]).startswith(b"\x89PNG")
        r = await cs.call_tool("fail", {})
        assert r.is_error is True
        assert text_of(r) == "This tool always fails."


async def test_argument_errors_are_tool_errors(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        r = await cs.call_tool("add", {"a": "two", "b": 1, "c": 3})
        assert r.is_error is True
        msg = text_of(r)
        assert "Invalid arguments for tool 'add'" in msg
        assert "a: Input should be a valid integer" in msg and "'two'" in msg
        assert "unexpected argument 'c'" in msg
        r = await cs.call_tool("echo", {})
        assert r.is_error and "missing required argument 'text'" in text_of(r)
        with pytest.raises(MCPError) as exc:
            await cs.call_tool("no_such_tool", {})
        assert exc.value.code == -32602
        assert "no_such_tool" in exc.value.message


@pytest.mark.req("S025", "M070")
async def test_add_tool_fires_list_changed(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, rec):
        if mode == "handshake":
            r = await cs.call_tool("add_tool", {"name": "dyn"})
            assert text_of(r) == "added tool dyn"
            await rec.wait_for("notifications/tools/list_changed")
        else:
            async with cs.listen(tools=True) as sub:
                assert sub.acknowledged == {"toolsListChanged": True}
                await cs.call_tool("add_tool", {"name": "dyn"})
                method, _ = await sub.next(timeout=5)
                assert method == "notifications/tools/list_changed"
        names = {t.name for t in (await cs.list_tools()).tools}
        assert "dyn" in names
        r = await cs.call_tool("dyn", {"text": "hi"})
        assert text_of(r) == "dyn: hi"


@pytest.mark.req("S023", "S024", "M057", "M064")
async def test_resource_and_prompt_list_changed(mode: str) -> None:
    async with connect(mode=mode) as (cs, app, rec):
        assert cs.server_capabilities["resources"]["listChanged"] is True
        assert cs.server_capabilities["prompts"]["listChanged"] is True
        if mode == "handshake":
            app.add_resource("mcpkit://extra", "extra text")
            await rec.wait_for("notifications/resources/list_changed")

            @app.prompt
            def extra() -> str:
                return "x"

            await rec.wait_for("notifications/prompts/list_changed")
            app.remove_prompt("extra")
        else:
            async with cs.listen(resources=True, prompts=True) as sub:
                app.add_resource("mcpkit://extra", "extra text")
                assert (await sub.next(timeout=5))[0] == "notifications/resources/list_changed"
                app.remove_prompt("simple")
                assert (await sub.next(timeout=5))[0] == "notifications/prompts/list_changed"
        read = await cs.read_resource("mcpkit://extra")
        assert read.dump()["contents"] == [{"uri": "mcpkit://extra", "mimeType": "text/plain", "text": "extra text"}]


async def test_progress_of_slow(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        seen: list[tuple[float, float | None, str | None]] = []
        r = await cs.call_tool("slow", {"steps": 4, "delay_ms": 5}, on_progress=lambda p, t, m: seen.append((p, t, m)))
        assert text_of(r) == "done after 4 steps"
        assert [p for p, _, _ in seen] == [1, 2, 3, 4]
        assert all(t == 4 for _, t, _ in seen)
        assert seen[-1][2] == "step 4 of 4"


async def test_cancel_slow_really_stops(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        started = asyncio.Event()
        call = asyncio.create_task(
            cs.call_tool("slow", {"steps": 200, "delay_ms": 20}, on_progress=lambda *a: started.set())
        )
        await asyncio.wait_for(started.wait(), 5)
        assert "slow" in running_functions()
        call.cancel()  # the client sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(100):
            if "slow" not in running_functions():
                break
            await asyncio.sleep(0.01)
        assert "slow" not in running_functions()
        r = await cs.call_tool("echo", {"text": "still alive"})
        assert text_of(r) == "still alive"


@pytest.mark.req("M076", "M077", "M078")
async def test_sampling(mode: str) -> None:
    sent: list[dict[str, object]] = []
    tap = lambda d, b: sent.append(json.loads(b)) if d == "client->server" else None  # noqa: E731
    async with connect(mode=mode, tap=tap) as (cs, _, rec):
        assert "sampling" in cs.capabilities(cs.features)
        r = await cs.call_tool("sample", {"prompt": "What is 6 x 7?"})
        assert text_of(r) == "The answer is 42."
        (params,) = rec.sampling
        assert params["messages"] == [{"role": "user", "content": {"type": "text", "text": "What is 6 x 7?"}}]
        assert params["maxTokens"] == 200
    # what the client answered, on the wire: a response (handshake) or an inputResponses entry (modern)
    answers: list[object] = [m["result"] for m in sent if isinstance(m.get("result"), dict)]
    for m in sent:
        p = m.get("params")
        if isinstance(p, dict) and isinstance(p.get("inputResponses"), dict):
            answers.extend(p["inputResponses"].values())
    (answer,) = [a for a in answers if isinstance(a, dict) and "model" in a]
    assert answer == {
        "role": "assistant",
        "content": {"type": "text", "text": "The answer is 42."},
        "model": "test-model",
        "stopReason": "endTurn",
    }
    async with connect(mode=mode, client_handlers=False) as (cs, _, _):  # the same error in both eras
        with pytest.raises(MCPError) as exc:
            await cs.call_tool("sample", {"prompt": "x"})
        assert exc.value.code == -32021 and exc.value.data == {"requiredCapabilities": {"sampling": {}}}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ({"action": "accept", "content": {"name": "Ada"}}, "Hello, Ada!"),
        ({"action": "decline"}, "No name given (decline)"),
        ({"action": "cancel"}, "No name given (cancel)"),
    ],
)
async def test_elicitation(mode: str, answer: dict[str, object], expected: str) -> None:
    rec = Recorder(elicit_answer=answer)
    async with connect(mode=mode, rec=rec) as (cs, _, _):
        r = await cs.call_tool("ask_name", {})
        assert text_of(r) == expected
        (params,) = rec.elicitations
        assert params["message"] == "What is your name?"
        assert params["requestedSchema"]["properties"]["name"]["type"] == "string"


@pytest.mark.req("M071", "M072", "M073", "A021")
async def test_roots(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        assert "roots" in cs.capabilities(cs.features)
        r = await cs.call_tool("roots", {})
        assert json.loads(text_of(r)) == [{"uri": "file:///work", "name": "work"}, {"uri": "file:///tmp"}]
    async with connect(mode=mode, client_handlers=False) as (cs, _, _):  # the same error in both eras
        with pytest.raises(MCPError) as exc:
            await cs.call_tool("roots", {})
        assert exc.value.code == -32021 and exc.value.data == {"requiredCapabilities": {"roots": {}}}


@pytest.mark.req("M087")
async def test_logging_levels(mode: str) -> None:
    kw = {"log_level": "warning"} if mode == "modern" else {}
    async with connect(mode=mode, **kw) as (cs, _, rec):
        assert cs.server_capabilities["logging"] == {}
        if mode == "handshake":
            await cs.set_logging_level("warning")
        r = await cs.call_tool("log", {"level": "info", "message": "quiet"})
        assert text_of(r) == "filtered"
        r = await cs.call_tool("log", {"level": "error", "message": "loud"})
        assert text_of(r) == "sent"
        assert rec.logs == [{"level": "error", "logger": "everything", "data": "loud"}]
        await cs.set_logging_level("debug")
        r = await cs.call_tool("log", {"level": "debug", "message": "now heard"})
        assert text_of(r) == "sent"
        assert rec.logs[-1]["data"] == "now heard"
        r = await cs.call_tool("log", {"level": "loud", "message": "x"})
        assert r.is_error and "level" in text_of(r)


# ---------------------------------------------------------------------------------------------- resources


@pytest.mark.req("M048", "M049", "M050", "M051", "M052", "S022", "A017")
async def test_paginate_and_read_all_static_resources(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        assert isinstance(cs.server_capabilities["resources"], dict)
        seen: list[dict[str, object]] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await cs.list_resources(cursor)
            pages += 1
            seen.extend(r.dump() for r in page.resources)
            if not page.next_cursor:
                break
            cursor = page.next_cursor
        assert pages == 11  # 100 static resources + the counter, 10 a page
        static = [r for r in seen if str(r["uri"]).startswith("mcpkit://static/")]
        assert [r["uri"] for r in static] == [f"mcpkit://static/{n}" for n in range(1, 101)]
        for n, r in enumerate(static, 1):
            assert r["name"] == f"static-{n}"
            assert r["mimeType"] == ("text/plain" if n % 2 else "application/octet-stream")
            assert isinstance(r["size"], int) and r["size"] > 0
            (content,) = (await cs.read_resource(str(r["uri"]))).dump()["contents"]
            assert content["uri"] == r["uri"] and content["mimeType"] == r["mimeType"]
            if n % 2:
                assert content["text"] == f"Static resource {n}"
                assert len(content["text"].encode()) == r["size"]
            else:
                raw = base64.b64decode(content["blob"])
                assert raw.endswith(f"static {n}".encode()) and len(raw) == r["size"]
        counter = [r for r in seen if r["uri"] == COUNTER]
        assert counter and counter[0]["description"]


@pytest.mark.req("S030")
async def test_invalid_cursors(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        first = await cs.list_resources()
        assert first.next_cursor
        for bad in ("garbage", first.next_cursor[:-2] + "xx", "a.b.c", "\x00" * 3000, "." + first.next_cursor):
            with pytest.raises(MCPError) as exc:
                await cs.list_resources(bad)
            assert exc.value.code == -32602
        with pytest.raises(MCPError) as exc:
            await cs.list_tools(first.next_cursor)  # a resources cursor is not a tools cursor
        assert exc.value.code == -32602
        empty = await cs.list_resources("")  # "" is an empty last page, never the first page again
        assert empty.resources == [] and empty.next_cursor in (None, "")


@pytest.mark.req("M053", "M054", "A018")
async def test_template_list_read_and_complete(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        (tmpl,) = (await cs.list_resource_templates()).resource_templates
        d = tmpl.dump()
        assert d["uriTemplate"] == "mcpkit://items/{id}"
        assert d["name"] == "item" and d["mimeType"] == "application/json" and d["description"]
        (content,) = (await cs.read_resource("mcpkit://items/7")).dump()["contents"]
        assert content["mimeType"] == "application/json"
        assert json.loads(content["text"]) == {"id": 7, "name": "Item 7"}
        c = await cs.complete({"type": "ref/resource", "uri": "mcpkit://items/{id}"}, "id", "4")
        values = c.completion.values
        assert values[:11] == ["4", *[str(n) for n in range(40, 50)]]
        assert set(values[11:]) == {"14", "24", "34", "54", "64", "74", "84", "94"}
        all_ids = await cs.complete({"type": "ref/resource", "uri": "mcpkit://items/{id}"}, "id", "")
        assert len(all_ids.completion.values) == 100


async def test_unknown_resources(mode: str) -> None:
    code = -32002 if mode == "handshake" else -32602
    async with connect(mode=mode) as (cs, _, _):
        for uri in ("mcpkit://nope", "mcpkit://items/500", "mcpkit://items/abc", "mcpkit://static/101"):
            with pytest.raises(MCPError) as exc:
                await cs.read_resource(uri)
            assert exc.value.code == code, uri
            assert exc.value.data == {"uri": uri}


@pytest.mark.req("M055", "M056")
async def test_counter_subscription(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, rec):
        assert cs.server_capabilities["resources"]["subscribe"] is True
        before = (await cs.read_resource(COUNTER)).dump()["contents"][0]["text"]
        if mode == "handshake":
            await cs.subscribe_resource(COUNTER)
            await cs.call_tool("touch", {})
            assert await rec.wait_for("notifications/resources/updated") == {"uri": COUNTER}
            await cs.unsubscribe_resource(COUNTER)
            rec.notifications.clear()
            await cs.call_tool("touch", {})
            await asyncio.sleep(0.05)
            assert not [m for m, _ in rec.notifications if m == "notifications/resources/updated"]
        else:
            async with cs.listen(resource_uris=[COUNTER]) as sub:
                assert sub.acknowledged == {"resourceSubscriptions": [COUNTER]}
                await cs.call_tool("touch", {})
                method, params = await sub.next(timeout=5)
                assert method == "notifications/resources/updated" and params["uri"] == COUNTER
        after = (await cs.read_resource(COUNTER)).dump()["contents"][0]["text"]
        assert int(after) > int(before)
        r = await cs.call_tool("touch", {"uri": "mcpkit://static/1"})
        assert r.is_error


# ---------------------------------------------------------------------------------------------- prompts


@pytest.mark.req("M058", "M059", "M060", "A019")
async def test_prompts_list(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        assert cs.server_capabilities["prompts"]["listChanged"] is True
        prompts = {p.name: p.dump() for p in (await cs.list_prompts()).prompts}
        assert set(prompts) == {"simple", "greet", "with_resource", "with_image"}
        assert "arguments" not in prompts["simple"]
        assert prompts["greet"]["arguments"] == [
            {"name": "name", "required": True, "description": "Who to greet."},
            {"name": "style", "required": False, "description": "formal, friendly or funny."},
        ]
        assert all(p["description"] for p in prompts.values())


@pytest.mark.req("M061", "M062", "M063")
async def test_get_prompts(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        r = (await cs.get_prompt("simple")).dump()
        assert r["messages"] == [
            {"role": "user", "content": {"type": "text", "text": "This is a simple prompt without arguments."}}
        ]
        r = (await cs.get_prompt("greet", {"name": "Ada", "style": "formal"})).dump()
        assert [m["role"] for m in r["messages"]] == ["user", "assistant"]
        assert r["messages"][0]["content"]["text"] == "Please greet Ada in a formal style."
        r = (await cs.get_prompt("greet", {"name": "Bob"})).dump()
        assert "friendly" in r["messages"][0]["content"]["text"]
        r = (await cs.get_prompt("with_resource", {"n": "3"})).dump()
        embedded = r["messages"][0]["content"]
        assert embedded["type"] == "resource"
        expected = {"uri": "mcpkit://static/3", "mimeType": "text/plain", "text": "Static resource 3"}
        assert embedded["resource"] == expected
        r = (await cs.get_prompt("with_image")).dump()
        assert r["messages"][0]["content"]["type"] == "image"
        assert r["messages"][0]["content"]["mimeType"] == "image/png"


async def test_prompt_argument_errors(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        for name, args in (("greet", {}), ("with_resource", {"n": "not a number"}), ("nope", {})):
            with pytest.raises(MCPError) as exc:
                await cs.get_prompt(name, args)
            assert exc.value.code == -32602, name
        with pytest.raises(MCPError) as exc:
            await cs.get_prompt("greet", {"style": "formal"})
        assert "name" in exc.value.message


@pytest.mark.req("M088", "M089", "S029", "A026")
async def test_prompt_completion(mode: str) -> None:
    async with connect(mode=mode) as (cs, _, _):
        assert cs.server_capabilities["completions"] == {}
        ref = {"type": "ref/prompt", "name": "greet"}
        c = (await cs.complete(ref, "style", "f")).completion
        assert c.values == ["formal", "friendly", "funny"] and c.total == 3 and c.has_more is False
        c = (await cs.complete(ref, "style", "fu")).completion
        assert c.values == ["funny"]
        c = (await cs.complete(ref, "style", "LY")).completion  # case-insensitive substring match
        assert c.values == ["friendly"]
        c = (await cs.complete(ref, "name", "A", {"style": "formal"})).completion
        assert c.values == []
        with pytest.raises(MCPError) as exc:
            await cs.complete({"type": "ref/prompt", "name": "nope"}, "x", "")
        assert exc.value.code == -32602


@pytest.mark.req("M074", "M075", "M076")
async def test_client_roots_change_reaches_the_server(mode: str) -> None:
    frames: list[bytes] = []
    async with connect(mode=mode, tap=lambda d, b: frames.append(b)) as (cs, app, _):
        caps = cs.capabilities(cs.features)
        assert "sampling" in caps
        changed = asyncio.Event()

        @app.notification_handler("notifications/roots/list_changed")
        async def on_roots_changed(session: object, params: object) -> None:
            changed.set()

        await cs.set_roots(["file:///new"])
        if mode == "handshake":
            assert caps["roots"] == {"listChanged": True}
            await asyncio.wait_for(changed.wait(), 5)
        else:
            assert not changed.is_set()  # 2026-07-28 has no roots/list_changed: the next call simply asks again
        r = await cs.call_tool("roots", {})
        assert json.loads(text_of(r)) == [{"uri": "file:///new"}]
        initialize = [json.loads(f) for f in frames if b'"initialize"' in f]
        if mode == "handshake":
            assert initialize[0]["params"]["capabilities"]["roots"] == {"listChanged": True}
