"""Tool search: tools/list shows a search tool, a caller tool and the pinned tools; search finds what the caller
may see, as tools/list would show it; call_tool is a direct call of the tool it names (the same rules, errors,
interceptors, progress). Both eras, stdio and HTTP (the app is tests/support/servers/toolkit_apps.py's
``tool_search``), a real protected HTTP server for scopes, and the TypeScript SDK's client."""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from mcpkit import Client, Context, MCPKit
from mcpkit.protocol.errors import MCPError
from mcpkit.server.tool_search import MAX_QUERY_CHARS, MAX_RESULTS
from mcpkit.server.transform import forward, transform_tool
from support.toolkit import APPS_FILE, ERAS, TRANSPORTS, build, serve_http, toolkit_client
from support.ts_peers import run_ts_client

pytestmark = pytest.mark.timeout(90)
BOTH = pytest.mark.parametrize("mode", ERAS)
EVERYWHERE = pytest.mark.parametrize("transport", TRANSPORTS)


async def _refused(coro: Any) -> MCPError:
    with pytest.raises(MCPError) as info:
        await coro
    return info.value


async def _found(client: Client, query: str, prefixed: str = "", **more: Any) -> list[str]:
    result = await client.call_tool(f"{prefixed}search_tools", {"query": query, **more})
    assert not result.is_error, result.text
    names = [tool["name"] for tool in json.loads(result.text)["tools"]]  # (the text: every revision has it)
    if result.structured is not None:
        assert [tool["name"] for tool in result.structured["tools"]] == names
    return names


@BOTH
@EVERYWHERE
async def test_the_list_shows_the_search_and_caller_tools_and_the_pinned_one(transport: str, mode: str) -> None:
    async with toolkit_client("tool_search", transport, mode) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed] == ["search_tools", "call_tool", "forecast"]
        search = listed[0]
        assert search.input_schema["properties"]["query"]["maxLength"] == MAX_QUERY_CHARS
        if client.protocol_version != "2024-11-05" and client.protocol_version != "2025-03-26":
            assert search.output_schema is not None and search.output_schema["required"] == ["tools"]
        # every tool stays callable by its own name: search is discovery, not access control
        assert (await client.call_tool("send_email", {"to": "ann", "subject": "hi"})).text == "sent 'hi' to ann"


@BOTH
async def test_a_tool_with_header_parameters_is_listed_beside_the_search_tools_in_every_revision(mode: str) -> None:
    """A client learns the Mcp-Param-* headers a tool needs from tools/list only: a tool declaring x-mcp-header
    parameters is listed as if pinned (registered before or after the search), whatever the revision or the
    transport; the other tools are not."""
    app = MCPKit("regional")

    @app.tool
    def where(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Run in a region."""
        return f"in {region}"

    app.add_tool(lambda q: q, name="plain", description="Echo a query.")
    app.add_tool_search(always_visible=["plain"])

    @app.tool
    def zoned(zone: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Zone"})]) -> str:
        """Run in a zone."""
        return f"in {zone}"

    app.add_tool(lambda q: q, name="hidden_plain", description="Echo again.")
    expected = ["search_tools", "call_tool", "plain", "where", "zoned"]
    async with serve_http(app) as url, Client(url, mode=mode) as client:
        assert [t.name for t in await client.list_tools()] == expected
        assert (await client.call_tool("where", {"region": "eu"})).text == "in eu"
    async with Client(app, mode=mode) as client:  # (in memory: the same list)
        assert [t.name for t in await client.list_tools()] == expected


@BOTH
@EVERYWHERE
async def test_search_ranks_by_name_description_and_parameters_and_answers_listed_definitions(
    transport: str, mode: str
) -> None:
    async with toolkit_client("tool_search", transport, mode) as client:
        found = await _found(client, "email")
        assert found[:2] == ["send_email", "archive"]  # (archive: by its parameter's description)
        assert (await _found(client, "weather forecast for a city"))[0] == "forecast"
        assert len(await _found(client, "fleet metric")) == 10  # max_results
        assert len(await _found(client, "fleet metric", limit=3)) == 3
        # the definition is the one tools/list gives this revision (forecast is listed: compare them)
        result = await client.call_tool("search_tools", {"query": "forecast", "limit": 1})
        (searched,) = json.loads(result.text)["tools"]
        listed = next(t for t in await client.list_tools() if t.name == "forecast")
        assert searched == listed.model_dump(by_alias=True, exclude_none=True, mode="json")


@pytest.mark.parametrize("version", ["2024-11-05", "2025-06-18", "2026-07-28"])
async def test_search_answers_each_revision_the_definition_its_list_shows(version: str) -> None:
    app = MCPKit("revisions")

    @app.tool(title="Weather report", annotations={"readOnlyHint": True})
    def report(city: str) -> dict[str, int]:
        """The temperature of a city."""
        return {"celsius": 20}

    app.add_tool_search(always_visible=["report"])
    async with Client(app, protocol_version=version) as client:
        result = await client.call_tool("search_tools", {"query": "weather"})
        (searched,) = json.loads(result.text)["tools"]
        (listed,) = [t for t in await client.list_tools() if t.name == "report"]
        assert searched == listed.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert ("outputSchema" in searched, "title" in searched) == (
            (False, False) if version == "2024-11-05" else (True, True)
        )


@BOTH
@EVERYWHERE
async def test_call_tool_is_the_direct_call_interceptors_progress_and_errors_alike(transport: str, mode: str) -> None:
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with toolkit_client("tool_search", transport, mode) as client:
        result = await client.call_tool(
            "call_tool", {"name": "forecast", "arguments": {"city": "Oslo"}}, on_progress=on_progress
        )
        assert result.text == "Oslo: sunny"
        assert progress == [(1, "looking at the sky")]
        # the app's interceptors saw the real tool's call, not the caller tool's
        recorded = json.loads((await client.call_tool("recorded", {})).text)["result"]
        assert recorded[-2:] == ["forecast", "recorded"]
        for name, arguments in (("no_such_tool", {}), ("forecast", {"city": 3}), ("send_email", {"to": "ann"})):
            direct = await _outcome(client.call_tool(name, arguments))
            through = await _outcome(client.call_tool("call_tool", {"name": name, "arguments": arguments}))
            assert through == direct
        for synthetic in ("call_tool", "search_tools"):
            refused = await _refused(client.call_tool("call_tool", {"name": synthetic, "arguments": {}}))
            assert refused.code == -32602 and "call it directly" in refused.message
        bad = await client.call_tool("call_tool", {"arguments": {}})  # (no name: the caller tool's own input check)
        assert bad.is_error and "name" in bad.text


@BOTH
async def test_call_tool_asks_the_user_and_is_cancelled_as_the_direct_call(mode: str) -> None:
    app = MCPKit("rounds")
    cancelled = asyncio.Event()
    started = asyncio.Event()

    @app.tool
    async def greet(ctx: Context) -> str:
        answer = await ctx.elicit("Your name?", str)
        return f"hello {answer.data}"

    @app.tool
    async def hang() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    app.add_tool_search()
    async with Client(app, mode=mode, elicitation_handler=lambda params: {"value": "Ada"}) as client:
        assert (await client.call_tool("call_tool", {"name": "greet"})).text == "hello Ada"  # (2026: an input round)
        call = asyncio.ensure_future(client.call_tool("call_tool", {"name": "hang"}))
        await asyncio.wait_for(started.wait(), 10)
        call.cancel()  # (the client sends notifications/cancelled)
        await asyncio.wait_for(cancelled.wait(), 10)


@pytest.mark.parametrize("mounted", [False, True])
@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_call_tool_runs_the_inner_tool_as_a_task(version: str, mounted: bool) -> None:
    app = MCPKit("tasks")

    @app.tool(task=True)
    async def scan(depth: int) -> str:
        return f"scanned to {depth}"

    app.add_tool_search()
    served, p = app, ""
    if mounted:  # (the parent's task support runs c_scan, as for its direct call)
        served, p = MCPKit("parent"), "c_"
        served.mount(app, prefix="c")
    async with Client(served, protocol_version=version) as client:
        handle = await client.call_tool_as_task(f"{p}call_tool", {"name": f"{p}scan", "arguments": {"depth": 2}})
        assert (await handle.result()).text == "scanned to 2"


@BOTH
async def test_call_tool_run_by_other_means_obeys_the_same_rules_and_errors(mode: str) -> None:
    """A tool derived from call_tool (its calls reach call_tool's own function through ``forward()``, not the
    rewrite) refuses a hidden tool, or a synthetic one, with the JSON-RPC error of the direct call, not an isError
    result."""
    from mcpkit.server.transform import transform_tool

    app = build("tool_search")
    caller = app.get_tool("call_tool")
    assert caller is not None
    app.add_tool(transform_tool(caller, name="run"))
    async with serve_http(app) as url, Client(url, mode=mode) as client:
        assert (await client.call_tool("run", {"name": "send_email", "arguments": {"to": "a", "subject": "b"}})).text
        hidden = await _refused(client.call_tool("run", {"name": "wipe"}))
        direct = await _refused(client.call_tool("wipe", {}))
        assert (hidden.code, hidden.message, hidden.data) == (direct.code, direct.message, direct.data)
        refused = await _refused(client.call_tool("run", {"name": "call_tool"}))
        rewritten = await _refused(client.call_tool("call_tool", {"name": "call_tool"}))
        assert refused.code == -32602 and (refused.message, refused.data) == (rewritten.message, rewritten.data)
        assert "call it directly" in refused.message
        bad = await _outcome(client.call_tool("run", {"name": "send_email", "arguments": {"to": "a"}}))
        assert bad == await _outcome(client.call_tool("send_email", {"to": "a"}))  # (bad arguments: as directly)


async def test_a_search_runs_off_the_event_loop() -> None:
    """Building the index of a large catalog takes a while (a second for 10,000 tools): never on the event loop.
    The view filter, which a search asks about every tool, says where the search ran."""
    import threading

    app = MCPKit("large")
    for i in range(200):
        app.add_tool(lambda: "", name=f"tool_{i}", description=f"Reports metric {i}.")
    asked_on: set[int] = set()

    def view(component: Any, principal: str | None) -> bool:
        if component.name.startswith("tool_"):  # (not the search tool, which its own call asks about)
            asked_on.add(threading.get_ident())
        return True

    app.add_tool_search()
    app.set_view_filter(view)
    async with Client(app) as client:
        found = await client.call_tool("search_tools", {"query": "metric"})
    assert len(json.loads(found.text)["tools"]) == 10
    assert asked_on and threading.get_ident() not in asked_on


async def _outcome(call: Any) -> tuple[Any, ...]:
    try:
        result = await call
    except MCPError as exc:
        return ("error", exc.code, exc.message)
    return ("result", result.is_error, result.text)


@BOTH
@EVERYWHERE
async def test_hidden_tools_are_never_found_and_refused_through_call_tool_as_directly(
    transport: str, mode: str
) -> None:
    async with toolkit_client("tool_search", transport, mode) as client:
        # wipe: admin-tagged, only alice sees it; debug_dump: excluded by tag; beta: disabled at registration
        for hidden, query in (("wipe", "wipe"), ("debug_dump", "debug dump"), ("beta", "beta")):
            assert hidden not in await _found(client, query)
            direct = await _refused(client.call_tool(hidden, {}))
            through = await _refused(client.call_tool("call_tool", {"name": hidden, "arguments": {}}))
            assert (through.code, through.message, through.data) == (direct.code, direct.message, direct.data)


@BOTH
async def test_search_and_call_tool_follow_each_principals_view(mode: str) -> None:
    app = build("tool_search")
    async with (
        serve_http(app) as url,
        Client(url, mode=mode, headers={"X-User": "alice"}) as alice,
        Client(url, mode=mode, headers={"X-User": "bob"}) as bob,
    ):
        assert await _found(alice, "wipe") == ["wipe"]
        assert (await alice.call_tool("call_tool", {"name": "wipe"})).text == "wiped"
        assert await _found(bob, "wipe") == []
        refused = await _refused(bob.call_tool("call_tool", {"name": "wipe"}))
        assert refused.message == "Unknown tool: 'wipe'"


@BOTH
@EVERYWHERE
async def test_search_follows_the_catalog_as_it_changes(transport: str, mode: str) -> None:
    async with toolkit_client("tool_search", transport, mode) as client:
        assert "beta" not in await _found(client, "beta")
        await client.call_tool("set_beta", {"on": True})
        assert "beta" in await _found(client, "beta")
        assert (await client.call_tool("call_tool", {"name": "beta"})).text == "beta"
        await client.call_tool("set_beta", {"on": False})
        assert "beta" not in await _found(client, "beta")
        assert await _found(client, "zeppelin") == []
        await client.call_tool("add_tool_named", {"name": "fly", "description": "Fly a zeppelin."})
        assert await _found(client, "zeppelin") == ["fly"]
        assert [t.name for t in await client.list_tools()] == ["search_tools", "call_tool", "forecast"]


@BOTH
async def test_keyword_search_needs_every_word_and_takes_no_pattern(mode: str) -> None:
    app = MCPKit("kw")
    app.add_tool(lambda: "a", name="send_email", description="Send an Email message.")
    app.add_tool(lambda: "b", name="read_email", description="Read an email message.")
    app.add_tool(lambda: "c", name="ping", description="Are you there? (a+)+$")
    app.add_tool_search("keyword")
    async with Client(app, mode=mode) as client:
        assert await _found(client, "EMAIL message") == ["send_email", "read_email"]
        assert await _found(client, "email send") == ["send_email"]
        assert await _found(client, "(a+)+$") == ["ping"]  # a literal string, never a pattern
        assert await _found(client, ".*") == []


@BOTH
async def test_query_and_limit_are_bounded(mode: str) -> None:
    app = build("tool_search")
    async with Client(app, mode=mode) as client:
        too_long = await client.call_tool("search_tools", {"query": "e" * (MAX_QUERY_CHARS + 1)})
        assert too_long.is_error and "query" in too_long.text
        assert not (await client.call_tool("search_tools", {"query": "e" * MAX_QUERY_CHARS})).is_error
        for limit in (0, 11):
            refused = await client.call_tool("search_tools", {"query": "metric", "limit": limit})
            assert refused.is_error and "limit" in refused.text


def test_add_tool_search_refuses_bad_settings() -> None:
    app = MCPKit("settings")
    with pytest.raises(ValueError, match="max_results"):
        app.add_tool_search(max_results=MAX_RESULTS + 1)
    with pytest.raises(ValueError, match="strategy"):
        app.add_tool_search("regex")  # type: ignore[arg-type]
    app.add_tool(lambda: "", name="find")
    with pytest.raises(ValueError):
        app.add_tool_search(search_tool_name="find")
    assert [t.name for t in app.tools] == ["find"]
    app.add_tool_search()
    with pytest.raises(ValueError, match="already"):
        app.add_tool_search()


def test_the_scope_rule_asks_for_the_inner_tools_scopes() -> None:
    app = build("tool_search")
    rule = app.scope_rule
    assert rule("tools/call", {"name": "purge"}) == ["files:admin"]
    assert rule("tools/call", {"name": "call_tool", "arguments": {"name": "purge", "arguments": {}}}) == ["files:admin"]
    assert rule("tools/call", {"name": "call_tool", "arguments": {"name": "forecast"}}) == []
    assert rule("tools/call", {"name": "call_tool", "arguments": {"name": "call_tool"}}) == []
    assert rule("tools/call", {"name": "call_tool", "arguments": "purge"}) == []
    search = app.tool_search
    assert search is not None
    own = search.scope_rule(lambda method, params: ["files:admin"] if params.get("name") == "purge" else ["read"])
    assert own("tools/call", {"name": "purge"}) == ["files:admin"]
    assert own("tools/call", {"name": "call_tool", "arguments": {"name": "purge"}}) == ["read", "files:admin"]
    assert own("tools/call", {"name": "call_tool", "arguments": {"name": "call_tool"}}) == ["read"]
    assert own("tools/call", {"name": "call_tool", "arguments": ["purge"]}) == ["read"]
    assert own("prompts/get", {"name": "call_tool", "arguments": {"name": "purge"}}) == ["read"]


def _searching_child() -> MCPKit:
    child = MCPKit("child")

    @child.tool()
    def purge(path: str) -> str:
        """Purge a path for good."""
        return f"purged {path}"

    @child.tool()
    def secret_purge(path: str) -> str:
        """Purge a secret path."""
        return f"secretly purged {path}"

    @child.tool()
    def forecast(city: str) -> str:
        """The weather forecast of a city."""
        return f"{city}: sunny"

    child.add_tool_search()
    return child


@BOTH
async def test_a_mounted_app_with_tool_search_calls_its_tools_as_the_parents_own_calls(mode: str) -> None:
    """A parent that mounts an app with tool search: ``c_search_tools`` finds what the parent serves this caller
    of the mounted tools, under the parent's names, and ``c_call_tool`` of one is the parent's own call of it (its
    scope rule, its view, its interceptors): refused, or run, exactly as the direct call."""
    from mcpkit.auth import StaticTokenVerifier, protect
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    parent = MCPKit("parent")
    seen: list[str] = []

    async def record(call: Any, call_next: Any) -> Any:
        seen.append(call.params.get("name"))
        return await call_next(call)

    parent.add_interceptor(record, methods="tools/call")
    parent.mount(_searching_child(), prefix="c")
    parent.disable("c_secret_purge")
    resource = "http://mcp.test/mcp"
    verifier = StaticTokenVerifier.simple({"reader": [], "admin": ["files:admin"]}, audience=resource)

    def own_rule(method: str, params: Any) -> list[str]:  # (the parent's rule names the tools as it serves them)
        return ["files:admin"] if method == "tools/call" and params.get("name") == "c_purge" else []

    asgi = protect(create_app(parent), resource=resource, verifier=verifier, scope_rule=own_rule)
    async with serve_asgi(asgi) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, headers={"Authorization": "Bearer reader"}) as reader:
            found = await reader.call_tool("c_search_tools", {"query": "purge"})
            assert [t["name"] for t in json.loads(found.text)["tools"]] == ["c_purge"]  # (c_secret_purge: hidden)
            direct = await _refused(reader.call_tool("c_purge", {"path": "/x"}))
            through = await _refused(reader.call_tool("c_call_tool", {"name": "c_purge", "arguments": {"path": "/x"}}))
            assert direct.code != -32003 and "files:admin" in direct.message  # (the HTTP 403 step-up)
            assert (through.code, through.message, through.data) == (direct.code, direct.message, direct.data)
            for name in ("c_secret_purge", "purge", "forecast"):  # hidden in the parent; the child's own names
                direct = await _refused(reader.call_tool(name, {"path": "/x"}))
                through = await _refused(reader.call_tool("c_call_tool", {"name": name, "arguments": {"path": "/x"}}))
                assert (through.code, through.message, through.data) == (direct.code, direct.message, direct.data)
            for synthetic in ("c_call_tool", "c_search_tools"):
                refused = await _refused(reader.call_tool("c_call_tool", {"name": synthetic}))
                assert refused.code == -32602 and "call it directly" in refused.message
            seen.clear()
            done = await reader.call_tool("c_call_tool", {"name": "c_forecast", "arguments": {"city": "Oslo"}})
            assert done.text == "Oslo: sunny" and seen == ["c_forecast"]  # (the parent's interceptor saw the call)
        async with Client(url, mode=mode, headers={"Authorization": "Bearer admin"}) as admin:
            done = await admin.call_tool("c_call_tool", {"name": "c_purge", "arguments": {"path": "/x"}})
            assert done.text == "purged /x"


async def test_search_through_a_grandparent_an_import_or_added_once_mounted_names_tools_as_the_serving_app() -> None:
    child = MCPKit("child")
    child.add_tool(lambda path: f"purged {path}", name="purge", description="Purge a path.")
    parent, grandparent, importer = MCPKit("parent"), MCPKit("grandparent"), MCPKit("importer")
    parent.mount(child, prefix="c")
    grandparent.mount(parent, prefix="p")
    child.add_tool_search()  # (once mounted: the parent and the grandparent route its calls from now on)
    importer.import_server(child, prefix="i")
    for app, prefix in ((parent, "c_"), (grandparent, "p_c_"), (importer, "i_")):
        async with Client(app) as client:
            found = await client.call_tool(f"{prefix}search_tools", {"query": "purge"})
            assert [t["name"] for t in json.loads(found.text)["tools"]] == [f"{prefix}purge"]
            done = await client.call_tool(f"{prefix}call_tool", {"name": f"{prefix}purge", "arguments": {"path": "/"}})
            assert done.text == "purged /"
            app.disable(f"{prefix}purge")
            assert json.loads((await client.call_tool(f"{prefix}search_tools", {"query": "purge"})).text) == {
                "tools": []
            }
            direct = await _refused(client.call_tool(f"{prefix}purge", {"path": "/"}))
            through = await _refused(client.call_tool(f"{prefix}call_tool", {"name": f"{prefix}purge"}))
            assert (through.code, through.message) == (direct.code, direct.message)
            app.enable(f"{prefix}purge")


async def test_call_tool_of_an_import_runs_the_imported_copy_as_the_direct_call_after_the_child_replaces_it() -> None:
    """An import copies the child's tools: once the child replaces one, the importer still serves its copy, by its
    name and through ``i_call_tool`` alike (the call of the caller tool is the direct call)."""
    child = MCPKit("child")
    child.add_tool(lambda path: f"purged {path}", name="purge", description="Purge a path.")
    child.add_tool_search()
    importer = MCPKit("importer")
    importer.import_server(child, prefix="i")
    child.add_tool(lambda path: f"new purge of {path}", name="purge", description="Purge a path.", replace=True)
    async with Client(importer) as client:
        direct = await client.call_tool("i_purge", {"path": "/"})
        through = await client.call_tool("i_call_tool", {"name": "i_purge", "arguments": {"path": "/"}})
        assert (through.text, through.is_error) == (direct.text, direct.is_error) == ("purged /", False)
        found = json.loads((await client.call_tool("i_search_tools", {"query": "purge"})).text)["tools"]
        assert [t["name"] for t in found] == ["i_purge"]  # (the importer's entry, as it serves it)
        for name in ("purge", "i_nothing"):  # (the child's own name; a name nobody serves)
            refused = await _refused(client.call_tool(name, {"path": "/"}))
            through_refused = await _refused(client.call_tool("i_call_tool", {"name": name}))
            assert (through_refused.code, through_refused.message) == (refused.code, refused.message)


async def test_the_search_of_an_import_finds_and_shows_the_copies_it_serves_after_the_child_changes() -> None:
    """An import is a snapshot: once the child replaces or removes a tool, the importer's search ranks on the text
    of the copies the importer serves (not the child's new text), shows those copies, and still finds a copy the
    child removed, as the direct call and ``i_call_tool`` still run it; through a live mount of the importer too.
    A copy the importer itself removes is no longer found."""
    child = MCPKit("child")
    child.add_tool(lambda path: f"purged {path}", name="purge", description="Purge a path for good.")
    child.add_tool(lambda city: f"{city}: sunny", name="forecast", description="The weather of a city.")
    child.add_tool_search(strategy="keyword")
    importer, top = MCPKit("importer"), MCPKit("top")
    importer.import_server(child, prefix="i")
    top.mount(importer, prefix="t")
    child.add_tool(lambda path: f"archived {path}", name="purge", description="Archive a folder.", replace=True)
    child.remove_tool("forecast")
    for app, prefix in ((importer, "i_"), (top, "t_i_")):
        async with Client(app) as client:
            assert await _found(client, "archive", prefixed=prefix) == []  # (the child's new text: not served)
            found = await client.call_tool(f"{prefix}search_tools", {"query": "purge"})
            assert [(t["name"], t["description"]) for t in json.loads(found.text)["tools"]] == [
                (f"{prefix}purge", "Purge a path for good.")
            ]
            assert await _found(client, "weather", prefixed=prefix) == [f"{prefix}forecast"]
            direct = await client.call_tool(f"{prefix}forecast", {"city": "Oslo"})
            through = await client.call_tool(
                f"{prefix}call_tool", {"name": f"{prefix}forecast", "arguments": {"city": "Oslo"}}
            )
            assert (through.text, through.is_error) == (direct.text, direct.is_error) == ("Oslo: sunny", False)
    importer.remove_tool("i_forecast")
    later = MCPKit("later")
    later.import_server(child, prefix="l")  # (its copy is the replacement: each import searched as it serves)
    for app, prefix, (text, other) in (
        (importer, "i_", ("good", "archive")),
        (later, "l_", ("archive", "good")),
        (top, "t_i_", ("good", "archive")),
    ):
        async with Client(app) as client:
            assert await _found(client, "weather", prefixed=prefix) == []
            assert await _found(client, text, prefixed=prefix) == [f"{prefix}purge"]
            assert await _found(client, other, prefixed=prefix) == []


async def test_a_parent_lists_of_a_mounted_or_imported_app_with_tool_search_what_that_app_lists() -> None:
    """The parent's tools/list shows, of an app with tool search, what the app shows on its own (its search and
    caller tools and its pinned tools, prefixed, in its order; a pinned tool registered later too); the others
    stay callable by their prefixed names and found by its search tool. Through a grandparent, and imported."""
    child = MCPKit("child")
    child.add_tool(lambda path: f"purged {path}", name="purge", description="Purge a path.")
    child.add_tool(lambda city: f"{city}: sunny", name="forecast", description="The weather of a city.")
    child.add_tool_search(always_visible=["forecast", "late"])
    parent, grandparent, importer = MCPKit("parent"), MCPKit("grandparent"), MCPKit("importer")
    for app in (parent, grandparent, importer):
        app.add_tool(lambda: "mine", name="own", description="A tool of its own.")
    parent.mount(child, prefix="c")
    grandparent.mount(parent, prefix="p")
    importer.import_server(child, prefix="i")
    async with Client(child) as client:
        assert [t.name for t in await client.list_tools()] == ["search_tools", "call_tool", "forecast"]
    shown = ["search_tools", "call_tool", "forecast"]
    for app, prefix, own in (
        (parent, "c_", ["own"]),
        (grandparent, "p_c_", ["own", "p_own"]),
        (importer, "i_", ["own"]),
    ):
        async with Client(app) as client:
            assert [t.name for t in await client.list_tools()] == own + [prefix + name for name in shown]
            assert (await client.call_tool(f"{prefix}purge", {"path": "/"})).text == "purged /"
            assert await _found(client, "purge", prefixed=prefix) == [f"{prefix}purge"]
            through = await client.call_tool(
                f"{prefix}call_tool", {"name": f"{prefix}purge", "arguments": {"path": "/"}}
            )
            assert through.text == "purged /"
    child.add_tool(lambda: "late", name="late", description="Pinned, registered once mounted.")
    child.add_tool(lambda: "later", name="later", description="Not pinned, registered once mounted.")
    async with Client(parent) as client:
        assert [t.name for t in await client.list_tools()] == [
            "own",
            "c_search_tools",
            "c_call_tool",
            "c_forecast",
            "c_late",
        ]
        assert (await client.call_tool("c_later", {})).text == "later"
    async with Client(grandparent) as client:
        assert [t.name for t in await client.list_tools()][-1] == "p_c_late"


@BOTH
async def test_a_parents_list_pages_follow_what_a_mounted_app_with_tool_search_lists(mode: str) -> None:
    """Over HTTP, in both eras, page by page (two tools a page): the parent lists its own tools and, of the mounted
    app with tool search, what that app lists (its two tools, the pinned one, the one with a header parameter);
    a page never holds an unlisted tool, and each of those is callable by its prefixed name."""
    child = MCPKit("child")
    for i in range(5):
        child.add_tool(lambda i=i: f"hidden {i}", name=f"hidden{i}", description=f"Unlisted tool {i}.")
    child.add_tool(lambda: "pinned", name="pinned", description="Pinned.")

    @child.tool
    def where(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Run in a region."""
        return f"ran in {region}"

    child.add_tool_search(always_visible=["pinned"])
    parent = MCPKit("parent", page_size=2)
    parent.add_tool(lambda: "mine", name="own", description="A tool of its own.")
    parent.mount(child, prefix="c")
    parent.add_tool(lambda: "later", name="own_later", description="Registered once mounted.")
    async with serve_http(parent) as url, Client(url, mode=mode) as client:
        pages: list[list[str]] = []
        cursor: str | None = None
        while True:
            page, cursor = await client.list_tools_page(cursor)
            pages.append([tool.name for tool in page])
            if cursor is None:
                break
            assert len(pages) < 10
        assert all(len(page) == 2 for page in pages[:-1]) and 1 <= len(pages[-1]) <= 2
        assert [name for page in pages for name in page] == [
            "own",
            "c_search_tools",
            "c_call_tool",
            "c_pinned",
            "c_where",
            "own_later",
        ]
        assert [t.name for t in await client.list_tools()] == [name for page in pages for name in page]
        for i in range(5):
            assert (await client.call_tool(f"c_hidden{i}", {})).text == f"hidden {i}"
        assert (await _found(client, "unlisted tool 3", prefixed="c_"))[0] == "c_hidden3"


async def test_a_tool_derived_from_a_mounted_call_tool_calls_as_the_parent_serves() -> None:
    """Derived from ``c_call_tool`` (mapping its arguments, or forwarding from a function of its own), a tool
    calls the tools by the parent's names, under the parent's view, with the direct call's refusals."""

    parent = MCPKit("parent")
    parent.mount(_searching_child(), prefix="c")
    caller = parent.get_tool("c_call_tool")
    assert caller is not None

    async def forwarding(name: str) -> Any:
        return await forward(name=name, arguments={"path": "/"})

    parent.add_tool(transform_tool(caller, name="run"))
    parent.add_tool(transform_tool(caller, name="run_fn", fn=forwarding))
    async with Client(parent) as client:
        for tool in ("run", "run_fn"):
            done = await client.call_tool(tool, {"name": "c_purge", "arguments": {"path": "/"}})
            assert done.text == "purged /"
            parent.disable("c_purge")
            direct = await _refused(client.call_tool("c_purge", {"path": "/"}))
            for name in ("c_purge", "purge"):
                through = await _refused(client.call_tool(tool, {"name": name, "arguments": {"path": "/"}}))
                assert (through.code, through.message) == (direct.code, direct.message.replace("c_purge", name))
            parent.enable("c_purge")


@BOTH
async def test_search_and_call_tool_run_by_hand_of_a_child_mounted_twice_are_refused_naming_why(mode: str) -> None:
    """A child with tool search mounted under two prefixes serves its tools twice, under two names each. Its
    ``call_tool`` and ``search_tools`` run by a request that names neither (a parent's tool calling them by hand)
    cannot tell which prefix the names take: refused, saying so and what to do, rather than guess. The tools each
    prefix serves work, and a child mounted once is found by hand too."""

    def child() -> MCPKit:
        app = MCPKit("child")

        @app.tool()
        def forecast(city: str) -> str:
            return f"sunny in {city}"

        app.add_tool_search()
        return app

    def parent_of(kid: MCPKit, prefixes: tuple[str, ...]) -> MCPKit:
        parent = MCPKit("parent")
        for prefix in prefixes:
            parent.mount(kid, prefix=prefix)

        @parent.tool()
        async def by_hand(ctx: Context, which: str) -> Any:  # (runs the child's tool itself, as code could)
            tool = kid.get_tool(which)
            assert tool is not None
            args = (
                {"name": "a_forecast", "arguments": {"city": "Oslo"}} if which == "call_tool" else {"query": "forecast"}
            )
            result = tool.call(args, ctx, ctx.request_context.features)
            return json.dumps(result if isinstance(result, dict) else await result)

        return parent

    twice = child()
    async with Client(parent_of(twice, ("a", "b")), mode=mode) as client:
        assert (await client.call_tool("a_call_tool", {"name": "a_forecast", "arguments": {"city": "Oslo"}})).text == (
            "sunny in Oslo"
        )
        assert await _found(client, "forecast", "b_") == ["b_forecast"]
        refused = await _refused(client.call_tool("by_hand", {"which": "call_tool"}))
        assert refused.code == -32602
        assert refused.message == (
            "'call_tool' of 'child' is served more than once by 'parent', under different names: call it by the "
            "name the server lists it under"
        )
        searched = json.loads((await client.call_tool("by_hand", {"which": "search_tools"})).text)
        assert searched["isError"] is True
        assert searched["content"][0]["text"] == (
            "'search_tools' of 'child' is served more than once by 'parent', under different names: call it by the "
            "name the server lists it under"
        )
    async with Client(parent_of(child(), ("a",)), mode=mode) as client:  # (one way to serve it: no doubt)
        assert "sunny in Oslo" in (await client.call_tool("by_hand", {"which": "call_tool"})).text
        assert "a_forecast" in (await client.call_tool("by_hand", {"which": "search_tools"})).text


@BOTH
async def test_a_parent_with_tool_search_asks_its_own_scope_rule_for_a_mounted_tool(mode: str) -> None:
    """The supported way: tool search on the parent, whose own scope rule names the mounted tool as the parent
    serves it (``ops_purge``); a call through ``call_tool`` is refused as the direct call is."""
    from mcpkit.auth import StaticTokenVerifier, protect
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    child = MCPKit("child")

    @child.tool()
    def purge(path: str) -> str:
        return f"purged {path}"

    parent = MCPKit("parent")
    parent.mount(child, prefix="ops")
    parent.add_tool_search()
    resource = "http://mcp.test/mcp"
    verifier = StaticTokenVerifier.simple({"reader": [], "admin": ["files:admin"]}, audience=resource)

    def own_rule(method: str, params: Any) -> list[str]:
        return ["files:admin"] if method == "tools/call" and params.get("name") == "ops_purge" else []

    asgi = protect(create_app(parent), resource=resource, verifier=verifier, scope_rule=own_rule)
    async with serve_asgi(asgi) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, headers={"Authorization": "Bearer reader"}) as reader:
            direct = await _refused(reader.call_tool("ops_purge", {"path": "/x"}))
            through = await _refused(reader.call_tool("call_tool", {"name": "ops_purge", "arguments": {"path": "/x"}}))
            assert (through.code, through.message, through.data) == (direct.code, direct.message, direct.data)
            assert "files:admin" in through.message
        async with Client(url, mode=mode, headers={"Authorization": "Bearer admin"}) as admin:
            done = await admin.call_tool("call_tool", {"name": "ops_purge", "arguments": {"path": "/x"}})
            assert done.text == "purged /x"


@BOTH
@pytest.mark.parametrize("rule", ["app", "own", "own_for_search", "own_behind_another_app"])
async def test_a_protected_server_refuses_call_tool_without_the_inner_tools_scopes(mode: str, rule: str) -> None:
    from mcpkit.auth import StaticTokenVerifier, protect
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    app = build("tool_search")
    resource = "http://mcp.test/mcp"
    verifier = StaticTokenVerifier.simple({"reader": [], "admin": ["files:admin"]}, audience=resource)

    def own_rule(method: str, params: Any) -> list[str]:  # (an installer's rule that knows nothing of call_tool)
        return ["files:admin"] if method == "tools/call" and params.get("name") == "purge" else []

    search = app.tool_search
    caller = app.get_tool("call_tool")
    assert search is not None and caller is not None
    app.add_tool(transform_tool(caller, name="run"))  # (a tool derived from call_tool: refused alike)

    async def forwarding(name: str, arguments: dict[str, Any]) -> Any:
        return await forward(name=name, arguments=arguments)

    app.add_tool(transform_tool(caller, name="run_fn", fn=forwarding))  # (what it calls is known once it runs)
    scope_rule = (
        app.scope_rule if rule == "app" else search.scope_rule(own_rule) if rule == "own_for_search" else own_rule
    )
    served = create_app(app)

    async def another_app(scope: Any, receive: Any, send: Any) -> None:  # (protect sees an ASGI app, no server)
        await served(scope, receive, send)

    wrapped = another_app if rule == "own_behind_another_app" else served
    asgi = protect(wrapped, resource=resource, verifier=verifier, scope_rule=scope_rule)
    async with serve_asgi(asgi) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, headers={"Authorization": "Bearer reader"}) as reader:
            direct = await _refused(reader.call_tool("purge", {"path": "/x"}))
            through = await _refused(reader.call_tool("call_tool", {"name": "purge", "arguments": {"path": "/x"}}))
            derived = await _refused(reader.call_tool("run", {"name": "purge", "arguments": {"path": "/x"}}))
            if rule != "own_behind_another_app":  # the same refusal (HTTP 403 with the step-up challenge)
                assert direct.code != -32003, direct
                assert (through.code, through.message, through.data) == (direct.code, direct.message, direct.data)
                assert (derived.code, derived.message, derived.data) == (direct.code, direct.message, direct.data)
            else:  # protect knows no server: the rule is asked about the inner tool by the dispatcher only
                assert through.code == -32003 and through.data["scopes"] == ["files:admin"]
            assert "files:admin" in through.message
            # fn= forwards from inside its run: refused there (-32003), naming the tool it called and why
            forwarded = await _refused(reader.call_tool("run_fn", {"name": "purge", "arguments": {"path": "/x"}}))
            assert forwarded.code == -32003 and forwarded.data == {
                "error": "insufficient_scope",
                "scopes": ["files:admin"],
                "tool": "purge",
            }
            message = forwarded.message
            assert "'run_fn' called 'purge'" in message and "files:admin" in message and "while it runs" in message
            assert "purge" in await _found(reader, "purge")  # (scopes guard calls; search shows the view)
        async with Client(url, mode=mode, headers={"Authorization": "Bearer admin"}) as admin:
            done = await admin.call_tool("call_tool", {"name": "purge", "arguments": {"path": "/x"}})
            assert done.text == "purged /x"


# ---------------------------------------------------------------------------------------- the TypeScript client


async def _ts_client(node: Path, negotiation: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    command = shlex.join([sys.executable, str(APPS_FILE), "tool_search"])
    return await run_ts_client(node, "ts_client_v2.mjs", ["--stdio", command], steps, "--negotiation", negotiation)


@pytest.mark.npm
@pytest.mark.parametrize("negotiation", ["legacy", "2026-07-28"])
async def test_the_typescript_client_searches_and_calls_through_call_tool(node_bin: Path, negotiation: str) -> None:
    steps = [
        {"op": "listTools"},
        {"op": "callTool", "name": "search_tools", "arguments": {"query": "send an email", "limit": 2}},
        {
            "op": "callTool",
            "name": "call_tool",
            "arguments": {"name": "send_email", "arguments": {"to": "a", "subject": "b"}},
        },
        {"op": "callTool", "name": "call_tool", "arguments": {"name": "wipe"}},
    ]
    out = await _ts_client(node_bin, negotiation, steps)
    assert out["protocolVersion"] == ("2025-11-25" if negotiation == "legacy" else "2026-07-28")
    listed, searched, called, hidden = out["results"]
    assert [t["name"] for t in listed["tools"]] == ["search_tools", "call_tool", "forecast"]
    assert [t["name"] for t in searched["structuredContent"]["tools"]] == ["send_email", "archive"]
    assert searched["structuredContent"]["tools"][0]["inputSchema"]["required"] == ["to", "subject"]
    assert called["content"][0]["text"] == "sent 'b' to a"
    assert hidden["error"]["code"] == -32602 and "Unknown tool" in hidden["error"]["message"]


def test_importing_an_app_with_tool_search_warns_only_of_interceptors_of_its_own(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tool search's routing is no interceptor of the user's: the importer routes the calls itself, so importing an
    app with tool search and nothing else in its chain says nothing; one with an interceptor of its own is warned."""
    child = MCPKit("child")
    child.add_tool(lambda path: f"purged {path}", name="purge", description="Purge a path.")
    child.add_tool_search()
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.compose"):
        MCPKit("importer").import_server(child, prefix="i")
    assert caplog.text == ""

    async def own(call: Any, call_next: Any) -> Any:
        return await call_next(call)

    child.add_interceptor(own)
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.compose"):
        MCPKit("importer").import_server(child, prefix="i")
    assert "'child' has interceptors or middleware of its own" in caplog.text
