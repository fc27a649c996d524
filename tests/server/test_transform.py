"""Tool transformation: a tool derived from another (renamed, re-described, hidden or defaulted arguments, a
wrapping function) while the original stays as it is; both eras over stdio and HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from mcpkit import Client, Context, MCPKit, Tool
from mcpkit.engine.tap import OUT
from mcpkit.server.transform import ArgTransform, forward, forward_raw, transform_tool
from support.servers import toolkit_apps
from support.toolkit import ERAS, TRANSPORTS, toolkit_client

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_derived_tools_show_their_own_schema_and_call_the_original(transport: str, mode: str) -> None:
    async with toolkit_client("transform", transport, mode) as client:
        tools = {t.name: t for t in await client.list_tools()}
        search, find, shout = tools["search"], tools["find"], tools["shout"]
        assert set(search.input_schema["properties"]) == {"query", "limit", "api_key"}  # the original is untouched
        assert find.description == "Find things in the catalog."
        assert find.input_schema["properties"] == {
            "q": {"type": "string", "description": "What to look for"},
            "limit": {"type": "integer", "default": 3},
        }
        assert find.input_schema["required"] == ["q"]
        assert find.output_schema == search.output_schema
        assert (await client.call_tool("find", {"q": "cats"})).data == {"query": "cats", "limit": 3, "key_used": True}
        assert (await client.call_tool("find", {"q": "cats", "limit": 1})).data["limit"] == 1
        assert (await client.call_tool("search", {"query": "dogs"})).data["key_used"] is False
        refused = await client.call_tool("find", {"q": "cats", "api_key": "mine"})  # a hidden argument
        assert refused.is_error and "api_key" in refused.text
        assert (
            await client.call_tool("find", {"query": "cats"})
        ).is_error  # the original's name is not the derived one's
        assert set(shout.input_schema["properties"]) == {"q", "limit"}
        assert (await client.call_tool("shout", {"q": "cats"})).text == "CATS"


async def test_a_missing_argument_of_a_derived_tool_is_named_as_the_client_knows_it() -> None:
    """The refusal names the derived tool and its renamed argument, not the original's names (which the client
    cannot send: the model would be told to send ``query`` and then refused for it)."""
    async with Client(toolkit_apps.build("transform")) as client:
        refused = await client.call_tool("find", {})
        assert refused.is_error
        assert "'find'" in refused.text and "'q'" in refused.text
        assert "search" not in refused.text and "query" not in refused.text


@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_derived_from_an_upstream_servers_tool_refuses_bad_arguments_itself_in_its_own_names(
    mode: str,
) -> None:
    """The original is another server's tool, called through a client (it checks nothing itself): a call of the
    derived tool with an argument of the wrong type is refused here, naming the derived tool and its arguments,
    and never reaches the upstream server (whose refusal would name its own tool and arguments); a good call
    does, with the original's names."""
    sent: list[Any] = []
    upstream = Client(
        toolkit_apps.build("transform"), tap=lambda event: sent.append(event.method) if event.direction == OUT else None
    )
    async with upstream:
        definition = next(t for t in await upstream.list_tools() if t.name == "search")
        app = MCPKit("front")

        async def send_upstream(arguments: dict[str, Any], ctx: Context) -> Any:
            return await upstream.session.request("tools/call", {"name": definition.name, "arguments": arguments})

        offered = Tool.from_schema(definition.name, definition.input_schema, send_upstream)
        app.add_tool(
            transform_tool(
                offered,
                name="find",
                args={"query": ArgTransform(name="q"), "api_key": ArgTransform(hide=True, default="k")},
            )
        )
        async with Client(app, mode=mode) as client:
            sent.clear()
            refused = await client.call_tool("find", {"q": ["not", "text"], "limit": "many"})
            assert refused.is_error
            assert refused.text.startswith("Invalid arguments for tool 'find': ")
            assert "q: " in refused.text and "limit: " in refused.text
            assert "search" not in refused.text and "query" not in refused.text
            assert "tools/call" not in sent  # (refused before anything was sent upstream)
            found = await client.call_tool("find", {"q": "cats", "limit": 2})
            assert not found.is_error and found.data == {"query": "cats", "limit": 2, "key_used": True}
            assert sent.count("tools/call") == 1


def _catalog() -> MCPKit:
    app = MCPKit("catalog")

    @app.tool
    def search(query: str, limit: int = 10, api_key: str = "", filters: dict[str, int] | None = None) -> str:
        """Search the catalog."""
        return f"{query} {limit}"

    return app


def _derived_from(original: str) -> tuple[MCPKit, str]:
    """An app offering ``find(q, limit, where)``, derived from ``search(query, limit, api_key, filters)`` of another
    app: directly (a function tool), through a mount, through another derived tool, or by a wrapper."""
    args = {
        "query": ArgTransform(name="q"),
        "filters": ArgTransform(name="where"),
        "api_key": ArgTransform(hide=True, default="k"),
    }
    catalog = _catalog()
    app = MCPKit("front")
    if original == "mounted":
        app.mount(catalog, prefix="cat")
        tool = app.get_tool("cat_search")
    elif original == "derived":
        middle = transform_tool(catalog.get_tool("search"), name="lookup", args={"query": ArgTransform(name="text")})  # type: ignore[arg-type]
        catalog.add_tool(middle)
        tool = middle
        args = {"text": ArgTransform(name="q"), "filters": args["filters"], "api_key": args["api_key"]}
    else:
        tool = catalog.get_tool("search")
    assert tool is not None
    if original == "wrapper":

        async def find(q: Any, limit: Any = 3, where: Any = None):  # type: ignore[no-untyped-def]
            return await forward(q=q, limit=limit, where=where)

        app.add_tool(transform_tool(tool, name="find", args=args, fn=find))
    else:
        app.add_tool(transform_tool(tool, name="find", args=args))
    return app, "search" if original != "derived" else "lookup"


@pytest.mark.parametrize("original", ["function", "mounted", "derived", "wrapper"])
@pytest.mark.parametrize("mode", ERAS)
async def test_an_argument_of_the_wrong_type_for_a_derived_tool_is_named_as_the_client_knows_it(
    original: str, mode: str
) -> None:
    """The refusal of a value the original's validation rejects names the derived tool and the renamed argument
    (also inside it: ``where.a``), never the original tool or the original's names for them."""
    app, original_name = _derived_from(original)
    async with Client(app, mode=mode) as client:
        refused = await client.call_tool("find", {"q": ["not", "text"], "where": {"a": "x"}})
        assert refused.is_error, refused.text
        text = refused.text
        assert "Invalid arguments for tool 'find'" in text
        assert "q: " in text and "where.a: " in text
        for foreign in (original_name, "query", "text:", "filters", "cat_"):
            assert foreign not in text, (foreign, text)
        assert (await client.call_tool("find", {"q": "cats", "limit": 2})).text == "cats 2"


async def test_a_derived_tools_invalid_hidden_value_is_an_internal_error_that_does_not_reveal_it() -> None:
    """A hidden value the server set that the original rejects is the server's mistake: the client is told an
    internal error occurred (the details go to the log), not the name of an argument it cannot see or set."""
    catalog = _catalog()
    app = MCPKit("front")
    app.add_tool(
        transform_tool(catalog.get_tool("search"), name="find", args={"api_key": ArgTransform(hide=True, default=7)})  # type: ignore[arg-type]
    )
    async with Client(app) as client:
        refused = await client.call_tool("find", {"query": "cats"})
        assert refused.is_error and "internal error" in refused.text
        assert "api_key" not in refused.text and "search" not in refused.text


async def test_an_invalid_argument_of_a_tool_derived_from_an_api_operation_is_named_as_the_client_knows_it() -> None:
    spec = {
        "openapi": "3.1.0",
        "info": {"title": "pets", "version": "1"},
        "paths": {
            "/pets": {
                "get": {
                    "operationId": "list_pets",
                    "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    async with httpx.AsyncClient(base_url="http://127.0.0.1:9") as http:  # (never reached: the call is refused)
        api = MCPKit.from_openapi(spec, client=http)
        tool = api.get_tool("list_pets")
        assert tool is not None
        app = MCPKit("front")
        app.add_tool(transform_tool(tool, name="pets", args={"limit": ArgTransform(name="at_most")}))
        async with Client(app) as client:
            assert [t.name for t in await client.list_tools()] == ["pets"]
            refused = await client.call_tool("pets", {"at_most": "many"})
            assert refused.is_error
            assert "'pets'" in refused.text and "at_most" in refused.text
            assert "limit" not in refused.text and "list_pets" not in refused.text


async def test_a_wrapper_gets_the_context_and_forward_raw_uses_the_original_names() -> None:
    app = MCPKit("x")

    @app.tool
    async def add(a: int, b: int, ctx: Context) -> int:
        await ctx.info("adding")
        return a + b

    async def twice(x: int, ctx: Context) -> int:
        await ctx.info("twice")
        first = await forward(x=x)
        second = await forward_raw(a=x, b=first["structuredContent"]["result"])
        return int(second["structuredContent"]["result"])

    original = app.get_tool("add")
    assert original is not None
    app.add_tool(
        transform_tool(
            original, name="triple", args={"a": ArgTransform(name="x"), "b": ArgTransform(hide=True, default=0)}
        )
    )
    app.add_tool(
        transform_tool(
            original,
            name="twice",
            args={"a": ArgTransform(name="x"), "b": ArgTransform(hide=True, default=0)},
            fn=twice,
        )
    )
    logs: list[str] = []
    async with Client(app, log_level="info", logging_handler=lambda p: logs.append(p["data"])) as client:
        assert (await client.call_tool("triple", {"x": 4})).data == 4
        result = await client.call_tool("twice", {"x": 4})
        assert result.data == 8 and result.structured == {"result": 8}
    assert logs == ["adding", "twice", "adding", "adding"]


@pytest.mark.parametrize("mode", ["2025-11-25", "2026-07-28"])
async def test_a_tool_derived_from_a_task_tool_runs_as_a_task(mode: str) -> None:
    source = MCPKit("source")

    @source.tool(task=True)
    async def scan(path: str, depth: int) -> str:
        return f"{path} to depth {depth}"

    original = source.get_tool("scan")
    assert original is not None
    app = MCPKit("x")
    app.add_tool(transform_tool(original, name="scan_root", args={"path": ArgTransform(hide=True, default="/")}))
    assert app.tasks is not None  # (as for a task tool registered here)
    async with Client(app, protocol_version=mode) as client:
        handle = await client.call_tool_as_task("scan_root", {"depth": 2})
        assert (await handle.result()).text == "/ to depth 2"


def test_transform_refuses_what_cannot_work() -> None:
    app = MCPKit("x")

    @app.tool
    def f(a: int, b: str = "") -> str:
        return b * a

    tool = app.get_tool("f")
    assert tool is not None
    with pytest.raises(ValueError, match="no arguments"):
        transform_tool(tool, args={"nope": ArgTransform(name="x")})
    with pytest.raises(ValueError, match="needs a default"):
        transform_tool(tool, args={"a": ArgTransform(hide=True)})
    with pytest.raises(ValueError, match="two arguments"):
        transform_tool(tool, args={"a": ArgTransform(name="b")})

    async def wrapper(c: int) -> str:
        return ""

    with pytest.raises(ValueError, match="fn takes"):
        transform_tool(tool, fn=wrapper)
    derived = transform_tool(tool, name="g", args={"b": ArgTransform(hide=True)})  # (the original has a default)
    assert "b" not in derived.input_schema["properties"]
    assert tool.input_schema["properties"].keys() == {"a", "b"}


async def test_forward_outside_a_transformed_tool_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="only available"):
        await forward(x=1)


def _wrapped_search() -> MCPKit:
    """``search(query, limit=10, api_key="")`` and two wrappers of it: ``first(q, limit)``, whose ``limit`` (the
    derived default 3) has no default of its own, and ``loud(q)``, which does not take ``limit`` at all."""
    app = MCPKit("wrapped")

    @app.tool
    def search(query: str, limit: int = 10, api_key: str = "") -> dict[str, Any]:
        return {"query": query, "limit": limit}

    original = app.get_tool("search")
    assert original is not None

    async def first(q: str, limit: int) -> str:
        result = await forward(q=q, limit=limit)
        return f"{q} limit={limit} original={result['structuredContent']['limit']}"

    async def loud(q: str) -> str:
        found = (await forward(q=q.upper()))["structuredContent"]
        return f"{found['query']} {found['limit']}"

    hidden = {"api_key": ArgTransform(hide=True, default="k")}
    renamed = {"query": ArgTransform(name="q"), **hidden}
    app.add_tool(transform_tool(original, name="first", args={**renamed, "limit": ArgTransform(default=3)}, fn=first))
    app.add_tool(transform_tool(original, name="loud", args=renamed, fn=loud))
    return app


@pytest.mark.parametrize("mode", ERAS)
async def test_a_wrapper_gets_the_advertised_default_of_an_argument_the_client_leaves_out(mode: str) -> None:
    """The derived schema says ``limit`` is optional (default 3); a wrapper taking ``limit`` without a default of
    its own gets 3 when the client leaves it out, as the schema promised, instead of refusing the call for a
    missing argument the client was told it need not send."""
    async with toolkit_client("wrapped", "http", mode, app=_wrapped_search()) as client:
        first = next(t for t in await client.list_tools() if t.name == "first")
        assert first.input_schema["required"] == ["q"]
        assert first.input_schema["properties"]["limit"]["default"] == 3
        result = await client.call_tool("first", {"q": "cats"})
        assert not result.is_error, result.text
        assert result.text == "cats limit=3 original=3"
        assert (await client.call_tool("first", {"q": "cats", "limit": 5})).text == "cats limit=5 original=5"


@pytest.mark.parametrize("mode", ERAS)
async def test_an_argument_the_wrapper_does_not_take_still_reaches_the_original(mode: str) -> None:
    """``loud(q)`` offers ``limit`` (the original's, in the derived schema) without taking it: a value the client
    sends for it reaches the original through ``forward()`` instead of being dropped without a word; what the
    wrapper passes itself wins, and leaving it out still means the default."""
    async with toolkit_client("wrapped", "http", mode, app=_wrapped_search()) as client:
        loud = next(t for t in await client.list_tools() if t.name == "loud")
        assert set(loud.input_schema["properties"]) == {"q", "limit"}
        assert (await client.call_tool("loud", {"q": "cats", "limit": 7})).text == "CATS 7"
        assert (await client.call_tool("loud", {"q": "cats"})).text == "CATS 10"
        refused = await client.call_tool("loud", {"q": "cats", "limit": "many"})
        assert refused.is_error and "Invalid arguments for tool 'loud'" in refused.text and "limit" in refused.text


async def test_a_derived_default_the_original_rejects_is_an_internal_error_not_the_clients() -> None:
    """A default the server gave (visible, so the client may leave it out) that the original rejects is the
    server's mistake, as a hidden value is: a client that did not send it is not told its arguments are invalid."""
    catalog = _catalog()
    original = catalog.get_tool("search")
    assert original is not None
    app = MCPKit("front")
    app.add_tool(transform_tool(original, name="find", args={"limit": ArgTransform(default="ten")}))
    app.add_tool(transform_tool(original, name="keyed", args={"api_key": ArgTransform(default=None)}))
    async with Client(app) as client:
        for name in ("find", "keyed"):
            refused = await client.call_tool(name, {"query": "cats"})
            assert refused.is_error and "internal error" in refused.text, refused.text
            assert "Invalid arguments" not in refused.text
        sent = await client.call_tool("find", {"query": "cats", "limit": "many"})  # (sent by the client: its own)
        assert sent.is_error and "Invalid arguments for tool 'find'" in sent.text and "limit" in sent.text
        assert (await client.call_tool("find", {"query": "cats", "limit": 2})).text == "cats 2"


class _Window(BaseModel):
    start: int
    end: int


@pytest.mark.parametrize("mode", ERAS)
async def test_a_wrapper_of_another_type_lists_the_type_it_validates(mode: str) -> None:
    """``page(q: int, window: _Window)`` over ``search(query: str, limit: int)``: the derived schema shows what the
    wrapper takes (``q`` an integer, ``window`` the model, through ``$defs``), so the listed schema and the
    validation agree: a client following the schema is accepted, one sending the original's type is refused in
    the wrapper's words; the original's description and a derived default still show."""
    app = MCPKit("typed")

    @app.tool
    def search(query: str, limit: int = 10) -> dict[str, Any]:
        """Search.

        Args:
            query: What to look for.
        """
        return {"query": query, "limit": limit}

    original = app.get_tool("search")
    assert original is not None

    async def page(q: int, window: _Window) -> str:
        result = await forward_raw(query=str(q), limit=window.end - window.start)
        return f"{result['structuredContent']['query']} {result['structuredContent']['limit']}"

    app.add_tool(
        transform_tool(
            original,
            name="page",
            args={
                "query": ArgTransform(name="q"),
                "limit": ArgTransform(name="window", default={"start": 0, "end": 4}),
            },
            fn=page,
        )
    )
    async with toolkit_client("typed", "http", mode, app=app) as client:
        listed = next(t for t in await client.list_tools() if t.name == "page").input_schema
        assert listed["properties"]["q"] == {"type": "integer", "description": "What to look for."}
        window = listed["properties"]["window"]
        assert window["default"] == {"start": 0, "end": 4}
        defined = listed["$defs"][window["$ref"].rpartition("/")[2]]
        assert {key: value["type"] for key, value in defined["properties"].items()} == {
            "start": "integer",
            "end": "integer",
        }
        assert listed["required"] == ["q"]
        assert (await client.call_tool("page", {"q": 5})).text == "5 4"
        assert (await client.call_tool("page", {"q": 5, "window": {"start": 1, "end": 3}})).text == "5 2"
        refused = await client.call_tool("page", {"q": "cats"})
        assert refused.is_error and "Invalid arguments for tool 'page': q:" in refused.text


class _Elsewhere:
    class _Window(BaseModel):  # (another type of the same name)
        other: str


def test_a_wrapper_whose_definitions_clash_with_the_originals_is_refused() -> None:
    """``fn``'s type and the original's have one name in ``$defs``: refused when the tool is made, not served
    with a reference that means one of them to the client and the other to the validation."""
    app = MCPKit("clash")

    @app.tool
    def search(query: str, window: _Window) -> str:
        return query

    original = app.get_tool("search")
    assert original is not None

    async def page(query: str, window: _Elsewhere._Window) -> str:
        return query

    with pytest.raises(ValueError, match="_Window"):
        transform_tool(original, name="page", fn=page)
