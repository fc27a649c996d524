"""The high-level server API (MCPKit, Context) beyond the everything example, through a real ClientSession."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
import threading
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import jsonschema
import orjson
import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from mcpkit import Context, MCPKit, ToolError
from mcpkit.protocol import types as t
from mcpkit.protocol.errors import MCPError
from mcpkit.protocol.versions import features
from mcpkit.server.prompts import Message
from mcpkit.server.tools import Audio, Image
from support.everything import MODES, Recorder, connect, text_of

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


class Address(BaseModel):
    street: str
    city: str = Field(description="City name")


class Person(BaseModel):
    name: str
    addresses: list[Address]


class Weather(TypedDict):
    temperature: float
    conditions: str


def schema_app() -> MCPKit:
    app = MCPKit("schemas")

    @app.tool
    def register(person: Person, tags: list[str] | None = None) -> Person:
        """Register a person.

        Args:
            person: Who to register.
            tags: Optional labels.
        """
        return person

    @app.tool
    def weather(city: str) -> Weather:
        """:param city: Where."""
        return {"temperature": 21.5, "conditions": "sunny"}

    @app.tool
    def names(prefix: str) -> list[str]:
        """List names.

        Parameters
        ----------
        prefix : str
            Only names starting with this.
        """
        return [prefix + "a", prefix + "b"]

    @app.tool
    def counts() -> dict[str, int]:
        return {"a": 1}

    @app.tool
    def big() -> str:
        return "y" * 100_000

    return app


@pytest.mark.parametrize("mode", MODES)
async def test_schemas_are_valid_2020_12_with_defs(mode: str) -> None:
    async with connect(schema_app(), mode=mode) as (cs, _, _):
        tools = {tool.name: tool.dump() for tool in (await cs.list_tools()).tools}
        reg = tools["register"]
        schema = reg["inputSchema"]
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["properties"]["person"] == {"$ref": "#/$defs/Person", "description": "Who to register."}
        assert set(schema["$defs"]) == {"Person", "Address"}
        assert schema["$defs"]["Address"]["properties"]["city"]["description"] == "City name"
        good = {"person": {"name": "Ada", "addresses": [{"street": "1 Main", "city": "X"}]}}
        jsonschema.validate(good, schema, cls=jsonschema.Draft202012Validator)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"person": {"name": "Ada", "addresses": [{}]}}, schema)
        assert reg["description"] == "Register a person."
        assert schema["properties"]["tags"]["description"] == "Optional labels."
        out = reg["outputSchema"]
        jsonschema.Draft202012Validator.check_schema(out)
        r = await cs.call_tool("register", good)
        assert r.structured_content == good["person"]
        jsonschema.validate(r.structured_content, out)
        assert tools["weather"]["inputSchema"]["properties"]["city"]["description"] == "Where."
        assert tools["weather"]["outputSchema"]["required"] == ["temperature", "conditions"]
        r = await cs.call_tool("weather", {"city": "Paris"})
        jsonschema.validate(r.structured_content, tools["weather"]["outputSchema"])
        assert tools["names"]["inputSchema"]["properties"]["prefix"]["description"] == "Only names starting with this."
        r = await cs.call_tool("names", {"prefix": "x"})
        assert r.structured_content == {"result": ["xa", "xb"]}
        jsonschema.validate(r.structured_content, tools["names"]["outputSchema"])
        r = await cs.call_tool("counts", {})
        assert r.structured_content == {"a": 1}
        assert "outputSchema" not in tools["big"]


async def test_str_result_is_sent_once() -> None:
    frames: list[bytes] = []
    async with connect(schema_app(), tap=lambda d, b: frames.append(b)) as (cs, _, _):
        r = await cs.call_tool("big", {})
        assert text_of(r) == "y" * 100_000
        assert r.structured_content in (None, {})
    (answer,) = [f for f in frames if b"yyyy" in f]
    assert answer.count(b"y" * 100_000) == 1 and len(answer) < 100_300


async def test_sync_tools_run_off_the_event_loop() -> None:
    app = MCPKit("threads")
    loop_thread = threading.get_ident()
    seen: list[int] = []

    @app.tool
    def blocking() -> str:
        seen.append(threading.get_ident())
        return "ok"

    async with connect(app) as (cs, _, _):
        await cs.call_tool("blocking", {})
    assert seen and seen[0] != loop_thread


async def test_exceptions_are_sanitized_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    app = MCPKit("errors")

    @app.tool
    def leaky() -> str:
        raise RuntimeError("password=hunter2")

    @app.tool
    async def explicit() -> str:
        raise ToolError("Please pass a smaller number.")

    caplog.set_level(logging.ERROR, logger="mcpkit")
    async with connect(app) as (cs, _, _):
        r = await cs.call_tool("leaky", {})
        assert r.is_error
        msg = text_of(r)
        assert "hunter2" not in msg
        error_id = re.search(r"error id ([0-9a-f]{12})", msg)
        assert error_id is not None
        r = await cs.call_tool("explicit", {})
        assert r.is_error and text_of(r) == "Please pass a smaller number."
    logged = [rec for rec in caplog.records if error_id.group(1) in rec.getMessage()]
    assert logged and logged[0].exc_info is not None and "hunter2" in str(logged[0].exc_info[1])


def content_app() -> MCPKit:
    app = MCPKit("content")

    @app.tool
    def png_bytes() -> bytes:
        return PNG

    @app.tool
    def raw_bytes() -> bytes:
        return b"\x00\x01binary"

    @app.tool
    def audio() -> Audio:
        return Audio(b"RIFF\x00\x00\x00\x00WAVEfmt ", annotations={"audience": ["user"]})

    @app.tool
    def mixed() -> list[Any]:
        return [
            "text",
            Image(PNG),
            t.ResourceLink(uri="file:///a.txt", name="a.txt", mime_type="text/plain"),
            t.TextResourceContents(uri="file:///b.txt", text="b", mime_type="text/plain"),
        ]

    @app.tool
    def full() -> t.CallToolResult:
        return t.CallToolResult(content=[t.TextContent(text="custom")], is_error=True)

    @app.tool
    def as_dict() -> Any:
        return {"content": [{"type": "text", "text": "from a dict"}], "isError": False}

    @app.tool(title="Titled", annotations=t.ToolAnnotations(read_only_hint=True), meta={"k": "v"})
    def titled() -> None:
        return None

    @app.tool(icons=[{"src": "https://example.com/i.png", "mimeType": "image/png"}])
    def iconic() -> float:
        return 1.5

    return app


async def test_return_value_conversions() -> None:
    async with connect(content_app(), version="2025-11-25") as (cs, _, _):
        (b,) = (await cs.call_tool("png_bytes", {})).dump()["content"]
        assert b["type"] == "image" and b["mimeType"] == "image/png"
        (b,) = (await cs.call_tool("raw_bytes", {})).dump()["content"]
        assert b["type"] == "resource" and base64.b64decode(b["resource"]["blob"]) == b"\x00\x01binary"
        (b,) = (await cs.call_tool("audio", {})).dump()["content"]
        assert b["type"] == "audio" and b["mimeType"] == "audio/wav" and b["annotations"] == {"audience": ["user"]}
        blocks = (await cs.call_tool("mixed", {})).dump()["content"]
        assert [x["type"] for x in blocks] == ["text", "image", "resource_link", "resource"]
        r = await cs.call_tool("full", {})
        assert r.is_error and text_of(r) == "custom"
        assert text_of(await cs.call_tool("as_dict", {})) == "from a dict"
        r = await cs.call_tool("titled", {})
        assert r.dump()["content"] == []
        assert (await cs.call_tool("iconic", {})).structured_content == {"result": 1.5}
        tools = {x.name: x.dump() for x in (await cs.list_tools()).tools}
        assert tools["titled"]["title"] == "Titled" and tools["titled"]["_meta"] == {"k": "v"}
        assert tools["titled"]["annotations"] == {"readOnlyHint": True}
        assert tools["iconic"]["icons"] == [{"src": "https://example.com/i.png", "mimeType": "image/png"}]


@pytest.mark.req("A020")
async def test_older_revisions_get_what_they_understand() -> None:
    async with connect(content_app(), version="2024-11-05") as (cs, _, _):
        (b,) = (await cs.call_tool("audio", {})).dump()["content"]
        assert b["type"] == "text"  # no AudioContent in 2024-11-05
        tools = {x.name: x.dump() for x in (await cs.list_tools()).tools}
        assert "annotations" not in tools["titled"] and "title" not in tools["titled"]
        assert "outputSchema" not in tools["iconic"] and "icons" not in tools["iconic"]
        r = await cs.call_tool("iconic", {})
        assert r.structured_content == {"result": 1.5}
    async with connect(content_app(), version="2025-03-26") as (cs, _, _):
        types = [x["type"] for x in (await cs.call_tool("mixed", {})).dump()["content"]]
        assert types == ["text", "image", "text", "resource"]  # resource links arrive in 2025-06-18
        tools = {x.name: x.dump() for x in (await cs.list_tools()).tools}
        assert tools["titled"]["annotations"] == {"readOnlyHint": True, "title": "Titled"}
        assert (await cs.list_tools()).next_cursor == ""  # 2025-03-26 sessions end every list with nextCursor ""


@pytest.mark.parametrize("mode", MODES)
async def test_session_state_and_context_facts(mode: str) -> None:
    app = MCPKit("state")

    @app.tool
    async def bump(ctx: Context) -> int:
        ctx.session_state["n"] = ctx.session_state.get("n", 0) + 1
        return int(ctx.session_state["n"])

    @app.tool
    async def facts(ctx: Context | None = None) -> dict[str, Any]:
        assert ctx is not None
        return {
            "modern": ctx.modern,
            "version": ctx.protocol_version,
            "client": (ctx.client_info or {}).get("name"),
            "token": ctx.progress_token,
            "custom": ctx.meta.get("custom"),
            "method": ctx.method,
        }

    async with connect(app, mode=mode) as (cs, _, _):
        values = [(await cs.call_tool("bump", {})).structured_content for _ in range(3)]
        expected = [1, 1, 1] if mode == "modern" else [1, 2, 3]
        assert values == [{"result": v} for v in expected]
        r = await cs.call_tool("facts", {}, on_progress=lambda *a: None, meta={"custom": 7})
        facts_ = r.structured_content
        assert facts_ is not None
        assert facts_["modern"] is (mode == "modern") and facts_["client"] == "mcpkit"
        assert facts_["token"] is not None and facts_["custom"] == 7 and facts_["method"] == "tools/call"
    async with connect(app, mode=mode) as (cs, _, _):
        assert (await cs.call_tool("bump", {})).structured_content == {"result": 1}  # a new session starts over


async def test_lifespan_runs_once_for_concurrent_sessions() -> None:
    events: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: MCPKit) -> AsyncIterator[dict[str, str]]:
        events.append("start")
        yield {"db": "open"}
        events.append("stop")

    app = MCPKit("life", lifespan=lifespan)

    @app.tool
    async def db(ctx: Context) -> str:
        return str(ctx.lifespan_state["db"])

    async with connect(app) as (cs1, _, _), connect(app, mode="modern") as (cs2, _, _):
        assert text_of(await cs1.call_tool("db", {})) == "open"
        assert text_of(await cs2.call_tool("db", {})) == "open"
        assert events == ["start"]
    assert events == ["start", "stop"]
    assert app.lifespan_state is None


async def test_async_generator_lifespan() -> None:
    async def lifespan(app: MCPKit) -> AsyncIterator[int]:
        yield 42

    app = MCPKit("gen", lifespan=lifespan)

    @app.tool
    async def answer(ctx: Context) -> int:
        return int(ctx.lifespan_state)

    async with connect(app) as (cs, _, _):
        assert (await cs.call_tool("answer", {})).structured_content == {"result": 42}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.req("S025", "S030")
async def test_remove_tool_and_pagination_across_changes(mode: str) -> None:
    app = MCPKit("pages", page_size=2)
    for i in range(5):
        app.add_tool(lambda: "x", name=f"t{i}", description=f"tool {i}")
    rec = Recorder()
    async with connect(app, mode=mode, rec=rec) as (cs, _, _):
        first = await cs.list_tools()
        assert [x.name for x in first.tools] == ["t0", "t1"] and first.next_cursor
        app.remove_tool("t0")  # the list shifts under the client's feet
        second = await cs.list_tools(first.next_cursor)
        assert [x.name for x in second.tools] == ["t2", "t3"]  # resumes after t1, skips nothing
        third = await cs.list_tools(second.next_cursor)
        assert [x.name for x in third.tools] == ["t4"] and not third.next_cursor
        with pytest.raises(MCPError) as exc:
            await cs.call_tool("t0", {})
        assert exc.value.code == -32602
        if mode == "handshake":
            await rec.wait_for("notifications/tools/list_changed")
        with pytest.raises(KeyError):
            app.remove_tool("t0")


@pytest.mark.parametrize("mode", MODES)
async def test_templates_levels_1_to_3_map_to_arguments(mode: str) -> None:
    app = MCPKit("templates")

    @app.resource("files:///{+path}")
    def file(path: str) -> str:
        return f"file {path}"

    @app.resource("search://items{?q,limit}")
    def search(q: str = "", limit: int = 10) -> dict[str, Any]:
        return {"q": q, "limit": limit}

    @app.resource("pair://{a},{b}/{kind}")
    def pair(a: int, b: int, kind: Literal["sum", "product"]) -> str:
        return str(a + b if kind == "sum" else a * b)

    @app.resource("raw://blob/{n}", mime_type="application/x-test")
    def blob(n: int) -> bytes:
        return bytes([n])

    async with connect(app, mode=mode) as (cs, _, _):
        templates = [x.dump() for x in (await cs.list_resource_templates()).resource_templates]
        assert [x["uriTemplate"] for x in templates] == [
            "files:///{+path}",
            "search://items{?q,limit}",
            "pair://{a},{b}/{kind}",
            "raw://blob/{n}",
        ]
        assert templates[1]["mimeType"] == "application/json" and templates[0]["mimeType"] == "text/plain"

        async def read(uri: str) -> dict[str, Any]:
            (c,) = (await cs.read_resource(uri)).dump()["contents"]
            return dict(c)

        assert (await read("files:///docs/a%20b/readme.md"))["text"] == "file docs/a b/readme.md"
        assert orjson.loads((await read("search://items?limit=3&q=red"))["text"]) == {"q": "red", "limit": 3}
        assert orjson.loads((await read("search://items"))["text"]) == {"q": "", "limit": 10}
        assert (await read("pair://3,4/product"))["text"] == "12"
        b = await read("raw://blob/7")
        assert b["mimeType"] == "application/x-test" and base64.b64decode(b["blob"]) == b"\x07"
        for bad in ("pair://3,4/divide", "raw://blob/x", "search://items?limit=many", "pair://1/sum"):
            with pytest.raises(MCPError):
                await cs.read_resource(bad)
        c = await cs.complete({"type": "ref/resource", "uri": "pair://{a},{b}/{kind}"}, "kind", "p")
        assert c.completion.values == ["product"]


@pytest.mark.req("A026")
async def test_completion_is_cut_at_100_and_sees_context() -> None:
    app = MCPKit("complete")

    @app.prompt
    def pick(country: str, city: str) -> str:
        return f"{city}, {country}"

    @app.completion(prompt="pick", argument="city")
    def cities(value: str, context: dict[str, str]) -> list[str]:
        return [f"{context.get('country', '?')}-{i}" for i in range(250) if str(i).startswith(value)]

    @app.completion(prompt="pick", argument="country")
    async def countries(value: str) -> list[str]:
        return [c for c in ("France", "Finland", "Germany") if c.lower().startswith(value.lower())]

    async with connect(app) as (cs, _, _):
        c = (await cs.complete({"type": "ref/prompt", "name": "pick"}, "city", "", {"country": "FR"})).completion
        assert len(c.values) == 100 and c.total == 250 and c.has_more is True
        assert c.values[0] == "FR-0"
        c = (await cs.complete({"type": "ref/prompt", "name": "pick"}, "country", "f")).completion
        assert c.values == ["France", "Finland"] and c.has_more is False
        with pytest.raises(MCPError) as exc:
            await cs.complete({"type": "ref/prompt", "name": "pick"}, "nope", "")
        assert exc.value.code == -32602


class Contact(BaseModel):
    email: str
    age: int | None = None
    newsletter: bool = False


@pytest.mark.parametrize("mode", MODES)
async def test_elicit_with_a_model_and_prompt_content_types(mode: str) -> None:
    app = MCPKit("elicit")
    runs: list[int] = []

    @app.tool
    async def signup(ctx: Context) -> str:
        runs.append(1)
        answer = await ctx.elicit("Your contact?", Contact)
        if answer.accepted and answer.data is not None:
            return f"{answer.data.email}/{answer.data.age}/{answer.data.newsletter}"
        return answer.action

    @app.prompt
    def rich(topic: Annotated[str, Field(description="What about")]) -> list[Any]:
        return [
            Message.user(f"Tell me about {topic}"),
            Message.assistant(Image(PNG)),
            Message.user(Audio(b"RIFF\x00\x00\x00\x00WAVE")),
            Message.user(t.ResourceLink(uri="file:///x", name="x")),
            {"role": "assistant", "content": "plain dict"},
        ]

    rec = Recorder(elicit_answer={"action": "accept", "content": {"email": "a@b.c", "age": 3}})
    async with connect(app, mode=mode, rec=rec) as (cs, _, _):
        assert text_of(await cs.call_tool("signup", {})) == "a@b.c/3/False"
        schema = rec.elicitations[0]["requestedSchema"]
        assert schema == {
            "type": "object",
            "properties": {
                "email": {"type": "string"},
                "age": {"type": "integer"},  # no null default: elicitation schemas are primitive-only
                "newsletter": {"type": "boolean", "default": False},
            },
            "required": ["email"],
        }
        assert len(runs) == (2 if mode == "modern" else 1)  # modern: re-run once the client answered
        p = (await cs.get_prompt("rich", {"topic": "cats"})).dump()
        assert [m["content"]["type"] for m in p["messages"]] == ["text", "image", "audio", "resource_link", "text"]
        (arg,) = (await cs.list_prompts()).prompts[0].dump()["arguments"]
        assert arg == {"name": "topic", "required": True, "description": "What about"}


async def test_resource_errors_and_sync_resource_functions() -> None:
    app = MCPKit("res")

    @app.resource("data://broken")
    def broken() -> str:
        raise ValueError("db password leaked")

    @app.resource("data://fixed", size=5)
    def fixed() -> str:
        return "fixed"

    async with connect(app) as (cs, _, _):
        with pytest.raises(MCPError) as exc:
            await cs.read_resource("data://broken")
        assert exc.value.code == -32603 and "leaked" not in exc.value.message and "error id" in exc.value.message
        (r,) = [x.dump() for x in (await cs.list_resources()).resources if x.uri == "data://fixed"]
        assert r == {"uri": "data://fixed", "name": "fixed", "mimeType": "text/plain", "size": 5}


def test_registration_errors_are_caught_early() -> None:
    app = MCPKit("bad")
    with pytest.raises(ValueError, match="are not variables of the URI"):
        app.add_resource("x://{a}", lambda a, b: a)
    with pytest.raises(ValueError, match="are not parameters of"):
        app.add_resource("x://{a}/{b}", lambda a: a)
    with pytest.raises(ValueError, match="level 4"):
        app.add_resource("x://{a*}", lambda a: a)
    with pytest.raises(ValueError, match="required arguments"):
        app.add_resource("x://static", lambda a: a)
    with pytest.raises(ValueError, match="page_size"):
        MCPKit("x", page_size={"tool": 3})
    assert not app.has_handler("tools/call")
    assert "tools" not in app.capabilities(features("2025-11-25"))


async def test_list_changed_from_a_running_tool_is_coalesced() -> None:
    app = MCPKit("burst")

    @app.tool
    async def burst() -> str:
        for i in range(5):
            app.add_tool(lambda: "x", name=f"b{i}")
        await asyncio.sleep(0.05)
        return "ok"

    rec = Recorder()
    async with connect(app, rec=rec) as (cs, _, _):
        await cs.call_tool("burst", {})
        await rec.wait_for("notifications/tools/list_changed")
        await asyncio.sleep(0.05)
        assert [m for m, _ in rec.notifications].count("notifications/tools/list_changed") == 1


@pytest.mark.parametrize("mode", MODES)
async def test_sync_tools_use_the_context_through_run(mode: str) -> None:
    app = MCPKit("sync-ctx")

    @app.tool
    def crunch(n: int, ctx: Context) -> str:
        for i in range(n):
            ctx.run(ctx.report_progress(i + 1, n))
        answer = ctx.run(ctx.elicit("Go on?", {"type": "object", "properties": {"ok": {"type": "boolean"}}}))
        ctx.run(app.notify_resource_updated("x://thing"))
        return f"{n} steps, {answer.action}"

    @app.tool
    async def misuse(ctx: Context) -> str:
        ctx.run(ctx.info("x"))  # in an async function this is a mistake: a clear error, no hang
        return "unreachable"

    rec = Recorder(elicit_answer={"action": "decline"})
    async with connect(app, mode=mode, rec=rec) as (cs, _, _):
        seen: list[float] = []
        r = await cs.call_tool("crunch", {"n": 3}, on_progress=lambda p, t, m: seen.append(p))
        assert text_of(r) == "3 steps, decline"
        assert seen == ([1, 2, 3] if mode == "handshake" else [1, 2, 3, 1, 2, 3])  # modern: re-run after the answer
        r = await cs.call_tool("misuse", {})
        assert r.is_error and "error id" in text_of(r)


async def test_workers_sharing_request_state_keys_share_cursors() -> None:
    def worker(name: str, keys: list[bytes] | None) -> MCPKit:
        app = MCPKit(name, page_size=1, request_state_keys=keys)
        for tool in ("a", "b", "c"):
            app.add_tool(lambda: "", name=tool)
        return app

    keys = [b"s" * 32]
    async with connect(worker("one", keys)) as (one, _, _), connect(worker("two", keys)) as (two, _, _):
        first = await one.list_tools()
        assert first.next_cursor
        assert [x.name for x in (await two.list_tools(first.next_cursor)).tools] == ["b"]
    async with connect(worker("other", None)) as (other, _, _):
        with pytest.raises(MCPError) as exc:
            await other.list_tools(first.next_cursor)
        assert exc.value.code == -32602


@pytest.mark.parametrize("mode", MODES)
async def test_url_elicitation(mode: str) -> None:
    app = MCPKit("url")

    @app.tool
    async def connect_account(ctx: Context) -> str:
        answer = await ctx.elicit_url("Sign in to continue", "https://example.com/oauth?state=1")
        return answer.action

    rec = Recorder(elicit_answer={"action": "accept"})
    async with connect(app, mode=mode, rec=rec) as (cs, _, _):
        assert text_of(await cs.call_tool("connect_account", {})) == "accept"
        (params,) = rec.elicitations
        assert params["mode"] == "url" and params["url"] == "https://example.com/oauth?state=1"
        assert params["elicitationId"]
    async with connect(app, version="2025-06-18", rec=Recorder()) as (cs, _, _):
        r = await cs.call_tool("connect_account", {})
        assert r.is_error and "URL elicitation" in text_of(r)


@pytest.mark.parametrize("mode", MODES)
async def test_cache_hints(mode: str) -> None:
    app = MCPKit("cache", list_ttl_ms=60_000, list_cache_scope="public")
    app.add_resource("data://static", "fixed", ttl_ms=5_000, cache_scope="public")

    @app.resource("data://user/{id}", ttl_ms=1_000)
    def user(id: str) -> str:
        return id

    app.add_resource("data://plain", "x")
    async with connect(app, mode=mode) as (cs, _, _):
        listed = await cs.request("resources/list", {})
        static = await cs.request("resources/read", {"uri": "data://static"})
        templated = await cs.request("resources/read", {"uri": "data://user/7"})
        plain = await cs.request("resources/read", {"uri": "data://plain"})
    hints = [{k: r.get(k) for k in ("ttlMs", "cacheScope")} for r in (listed, static, templated, plain)]
    if mode == "modern":
        assert hints == [
            {"ttlMs": 60_000, "cacheScope": "public"},
            {"ttlMs": 5_000, "cacheScope": "public"},
            {"ttlMs": 1_000, "cacheScope": "private"},
            {"ttlMs": 0, "cacheScope": "private"},
        ]
    else:
        assert all(h == {"ttlMs": None, "cacheScope": None} for h in hints)  # not in handshake-era results
    with pytest.raises(ValueError, match="cache_scope"):
        MCPKit("bad", list_cache_scope="shared")
    with pytest.raises(ValueError, match="ttl_ms"):
        app.add_resource("data://neg", "x", ttl_ms=-1)


def test_list_changed_survives_a_loop_that_ended_with_a_change_pending() -> None:
    app = MCPKit("loops")

    async def change_then_stop() -> None:
        app.add_tool(lambda: "", name="first")  # its notification task never gets to run: the loop ends

    asyncio.run(change_then_stop())

    async def serve_and_change() -> list[str]:
        rec = Recorder()
        async with connect(app, rec=rec) as (cs, _, _):
            app.add_tool(lambda: "", name="second")
            await rec.wait_for("notifications/tools/list_changed")
            return [t.name for t in (await cs.list_tools()).tools]

    assert asyncio.run(serve_and_change()) == ["first", "second"]


def test_nameless_callables_need_a_name() -> None:
    import functools

    app = MCPKit("names")
    with pytest.raises(ValueError, match="name="):
        app.add_tool(lambda: "x")
    with pytest.raises(ValueError, match="name="):
        app.add_prompt(functools.partial(lambda who: who, "x"))
    assert app.add_tool(lambda: "x", name="ok").name == "ok"
    assert app.add_resource("x://plain", lambda: "x").name == "x://plain"


class Opaque:
    """A type pydantic can check (isinstance) but cannot describe in JSON Schema."""


async def test_a_tool_whose_schema_cannot_be_built_fails_at_decoration() -> None:
    """Issue 13 (e): a parameter type that cannot become a JSON Schema is a TypeError naming the parameter when
    the tool is decorated (it used to register, log a traceback at tools/list and advertise {"type": "object"});
    the app stays usable."""
    app = MCPKit("opaque")

    with pytest.raises(TypeError, match=r"tool 'strange': parameter 'x' has type Opaque.*JSON Schema"):

        @app.tool
        def strange(n: int, x: Opaque) -> str:
            return "never"

    @app.tool
    def fine() -> str:
        return "ok"

    async with connect(app) as (cs, _, _):
        tools = {t.name: t.dump() for t in (await cs.list_tools()).tools}
        assert set(tools) == {"fine"}
        assert tools["fine"]["inputSchema"]["additionalProperties"] is False


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"])
async def test_model_elicitation_and_rich_results_are_schema_valid(version: str) -> None:
    from support.wire_recorder import WireRecorder

    app = content_app()

    @app.tool
    async def signup(ctx: Context) -> str:
        return (await ctx.elicit("Your contact?", Contact)).action

    wire = WireRecorder()
    rec = Recorder(elicit_answer={"action": "accept", "content": {"email": "a@b.c"}})
    async with connect(app, version=version, traffic=wire, rec=rec) as (cs, _, _):
        signup_result = await cs.call_tool("signup", {})
        assert signup_result.is_error if version < "2025-06-18" else text_of(signup_result) == "accept"
        for name in ("png_bytes", "raw_bytes", "audio", "mixed", "full", "as_dict", "titled", "iconic"):
            await cs.call_tool(name, {})
        await cs.list_tools()
    assert wire.validate(version) > 20


async def test_sync_tools_run_in_a_thread_unless_told_otherwise() -> None:
    import threading

    from mcpkit import MCPKit
    from mcpkit.client.lowlevel import ClientSession
    from mcpkit.transports.memory import create_memory_pair

    app = MCPKit("threads")
    main = threading.get_ident()

    @app.tool
    def threaded() -> bool:
        return threading.get_ident() != main

    @app.tool(thread=False)
    def inline() -> bool:
        return threading.get_ident() == main

    c, s = create_memory_pair()
    task = asyncio.create_task(app.serve(s))
    async with ClientSession(c, mode="handshake") as cs:
        assert (await cs.call_tool("threaded")).structured_content == {"result": True}
        assert (await cs.call_tool("inline")).structured_content == {"result": True}
    await asyncio.wait_for(task, 5)


@pytest.mark.parametrize("thread", [True, None, False])
async def test_a_sync_tool_that_adds_a_tool_tells_the_clients(thread: bool | None) -> None:
    """A plain ``def`` tool that registers another tool: on a worker thread (declared, or still being learned) the
    change is handed to the serving loop; inline it is made on the loop itself. Either way the client gets one
    ``tools/list_changed`` and then lists the new tool."""
    app = MCPKit("grow")
    count = [0]

    @app.tool(thread=thread)
    def grow() -> str:
        count[0] += 1
        app.add_tool(lambda: "x", name=f"grown{count[0]}")
        return threading.current_thread().name

    rec = Recorder()
    async with connect(app, rec=rec) as (cs, _, _):
        ran_on = (await cs.call_tool("grow", {})).content[0].text  # type: ignore[union-attr]
        assert (ran_on == threading.main_thread().name) is (thread is False)
        await rec.wait_for("notifications/tools/list_changed")
        assert "grown1" in [t.name for t in (await cs.list_tools()).tools]


async def test_an_inline_tool_that_adds_a_tool_during_a_hand_over_leaves_the_loop_to_its_stand_in() -> None:
    """An inline ``def`` tool that blocks long enough for the loop to be handed over to a stand-in thread, then
    registers a tool: the change reaches the loop through ``call_soon_threadsafe`` (the tool's thread does not
    drive the loop at that moment; with asyncio's debug checks on, touching it directly raises), and the client
    gets ``tools/list_changed``."""
    asyncio.get_running_loop().set_debug(True)
    app = MCPKit("grow-handover")

    @app.tool(thread=False)
    def grow() -> str:
        time.sleep(0.15)  # the watch hands the loop over after 10-15 ms
        app.add_tool(lambda: "x", name="grown")
        return "ok"

    rec = Recorder()
    async with connect(app, rec=rec) as (cs, _, _):
        result = await cs.call_tool("grow", {})
        assert not result.is_error and result.content[0].text == "ok", result  # type: ignore[union-attr]
        await rec.wait_for("notifications/tools/list_changed")
        assert "grown" in [t.name for t in (await cs.list_tools()).tools]


async def test_a_sync_tool_on_a_worker_thread_over_http_can_reach_the_serving_loop() -> None:
    """Over HTTP (no connection of the app's own enters its lifespan), a sync tool's call that goes to a worker
    thread leaves the serving loop where the tool's add_tool() finds it; one that ran inline needs none."""
    import httpx

    from support.mcp_http import modern_body, modern_headers, running

    app = MCPKit("grow-http")

    @app.tool(thread=True)
    def grow() -> str:
        app.add_tool(lambda: "x", name="grown")
        return "ok"

    async with running(app) as (base, _), httpx.AsyncClient() as http:
        body = modern_body("tools/call", {"name": "grow", "arguments": {}})
        r = await http.post(base + "/mcp", json=body, headers=modern_headers("tools/call", "grow"))
        assert r.status_code == 200 and "ok" in r.text, r.text
        assert app._serving_loop is asyncio.get_running_loop()
        assert app.get_tool("grown") is not None


async def test_annotations_resolve_one_by_one_when_one_cannot_be_resolved() -> None:
    """``from __future__ import annotations`` with ``Context`` imported inside a function (tests/support/servers/
    local_context_server.py): that one annotation cannot be resolved, yet ``-> str`` is still ``str`` (plain text, no
    output schema) and ``n: int`` still an integer."""
    from mcpkit import Client
    from support.servers.local_context_server import build

    async with Client(build()) as client:
        (tool,) = await client.list_tools()
        assert tool.output_schema is None and tool.input_schema["properties"]["n"]["type"] == "integer"
        result = await client.call_tool("t", {"n": 2})
        assert result.text == "aa" and result.structured is None
