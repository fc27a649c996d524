"""Composition: ``app.mount(other, prefix=...)`` (live) and ``app.import_server(other, prefix=...)`` (a copy), in both
eras over stdio and Streamable HTTP (the apps are in tests/support/servers/toolkit_apps.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from mcpkit import Client, Context, MCPKit
from mcpkit.protocol.errors import MCPError
from mcpkit.server.compose import prefixed_uri, unprefixed_uri
from support.toolkit import ERAS, TRANSPORTS, serve_http, toolkit_client

pytestmark = pytest.mark.timeout(60)
HANDLERS: dict[str, Any] = {
    "elicitation_handler": lambda params: {"name": "Oslo"},
    "sampling_handler": lambda params: "mild and dry",
}


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_mounted_and_imported_components_are_served_under_their_prefix(transport: str, mode: str) -> None:
    async with toolkit_client("compose", transport, mode, **HANDLERS) as client:
        tools = {t.name for t in await client.list_tools()}
        assert {"local", "weather_forecast", "weather_ask_city", "weather_double", "copy_hello"} <= tools
        assert "forecast" not in tools and "hello" not in tools
        assert [r.uri for r in await client.list_resources()] == ["data://weather/today"]
        assert [t.uri_template for t in await client.list_resource_templates()] == ["data://weather/city/{name}"]
        assert [p.name for p in await client.list_prompts()] == ["weather_brief"]
        assert (await client.call_tool("weather_double", {"x": 21})).data == 42
        assert (await client.call_tool("copy_hello", {})).text == "hello from the copy"
        assert await client.read_text("data://weather/today") == "sunny today"
        read = await client.read_resource("data://weather/city/Rome")
        assert str(read.contents[0].uri) == "data://weather/city/Rome"  # the parent's URI, not the mounted one
        assert read.contents[0].text == "data of Rome"  # type: ignore[union-attr]
        prompt = await client.get_prompt("weather_brief", {"city": "Oslo", "style": "long"})
        assert prompt.messages[0].content.text == "Write a long brief for Oslo"  # type: ignore[union-attr]
        assert (await client.complete("weather_brief", "style", "l")).completion.values == ["long"]
        with pytest.raises(MCPError):
            await client.call_tool("forecast", {"city": "Oslo"})  # only the prefixed name exists
        with pytest.raises(MCPError):
            await client.read_resource("data://today")


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_mounted_tool_gets_its_servers_lifespan_and_the_callers_progress_log_elicitation_sampling(
    transport: str, mode: str
) -> None:
    logs: list[Any] = []
    async with toolkit_client(
        "compose", transport, mode, logging_handler=logs.append, log_level="info", **HANDLERS
    ) as client:
        progress: list[float] = []
        result = await client.call_tool(
            "weather_forecast", {"city": "Paris"}, on_progress=lambda p, total, message: progress.append(p)
        )
        assert result.text == "Paris: sunny, celsius (served by weather)"  # ctx.app and its lifespan_state
        assert progress == [1, 2]
        assert (await client.call_tool("weather_ask_city", {})).text == "you chose Oslo"
        assert (await client.call_tool("weather_summarize", {})).text == "model says mild and dry"
    assert {"level": "info", "data": "forecast for Paris"} in [{k: e[k] for k in ("level", "data")} for e in logs]


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_mount_is_live_with_list_changed_and_import_is_a_copy(transport: str, mode: str) -> None:
    async with toolkit_client("compose", transport, mode) as client:
        async with client.watch(tools=True) as watch:
            assert (await client.call_tool("grow", {"name": "later"})).text == "grown"
            method, _ = await watch.next(timeout=5)
            assert method == "notifications/tools/list_changed"
        assert "weather_later" in {t.name for t in await client.list_tools()}
        assert (await client.call_tool("weather_later", {})).text == "I am later"
        await client.call_tool("shrink", {"name": "later"})
        assert "weather_later" not in {t.name for t in await client.list_tools()}
        with pytest.raises(MCPError):
            await client.call_tool("weather_later", {})
        await client.call_tool("grow_copy", {"name": "ghost"})
        names = {t.name for t in await client.list_tools()}
        assert "copy_ghost" not in names and "ghost" not in names


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_mounted_servers_resource_updates_reach_the_parents_subscribers_under_the_prefixed_uri(
    transport: str, mode: str
) -> None:
    async with toolkit_client("compose", transport, mode) as client:
        uris = ["data://weather/today", "data://weather/city/Rome"]
        async with client.watch(resource_uris=uris) as watch:
            assert (await client.call_tool("weather_touch", {"city": "Rome"})).text == "touched"
            got = sorted([(await watch.next(timeout=5))[1]["uri"] for _ in uris])
            assert got == sorted(uris)


@pytest.mark.parametrize("mode", ["2025-11-25", "2026-07-28"])
async def test_a_mounted_tool_that_may_run_as_a_task_runs_as_one_in_the_parent(mode: str) -> None:
    """The parent takes on the mounted tool's task support (as if registered there): it declares tasks, runs the
    call as a task when asked, and a tool that requires one is never run plainly."""
    child = MCPKit("child")

    @child.tool(task=True)
    async def double(x: int) -> int:
        await asyncio.sleep(0.05)
        return x * 2

    parent = MCPKit("parent")
    parent.mount(child, prefix="c")
    assert parent.tasks is not None

    @child.tool(task="required")  # (registered after mounting: the live mount brings it too)
    async def must(ctx: Context, x: int) -> str:
        await ctx.become_task()
        return f"{x} in task {ctx.task_id is not None}"

    async with Client(parent, protocol_version=mode) as client:
        handle = await client.call_tool_as_task("c_double", {"x": 21})
        assert (await handle.result()).structured == {"result": 42}
        assert (await client.call_tool("c_must", {"x": 1})).text == "1 in task True"


def test_prefixed_uris_round_trip() -> None:
    for uri, expected in [
        ("data://today", "data://w/today"),
        ("file:///etc/x", "file://w//etc/x"),
        ("urn:isbn:1", "urn:w/isbn:1"),
        ("plain", "w/plain"),
        ("data://city/{name}", "data://w/city/{name}"),
    ]:
        assert prefixed_uri("w", uri) == expected
        assert unprefixed_uri("w", expected) == uri
    assert unprefixed_uri("w", "data://other/today") is None
    assert prefixed_uri(None, "data://x") == "data://x"


def test_mount_refuses_collisions_cycles_and_bad_prefixes() -> None:
    parent, child = MCPKit("parent"), MCPKit("child")
    parent.add_tool(lambda: 1, name="c_x")
    child.add_tool(lambda: 2, name="x")
    with pytest.raises(ValueError, match="c_x"):
        parent.mount(child, prefix="c")
    assert parent.get_tool("c_x") is not None and len(parent.tools) == 1  # nothing was half-mounted
    parent.mount(child, prefix="k")
    with pytest.raises(ValueError, match="already mounted"):
        parent.mount(MCPKit("other"), prefix="k")
    with pytest.raises(ValueError, match="itself"):
        child.mount(parent, prefix="loop")
    with pytest.raises(ValueError, match="itself"):
        parent.mount(parent, prefix="self")
    for bad in ("", "a b", "a/b", "-x", "x" * 65):
        with pytest.raises(ValueError, match="prefix"):
            parent.mount(MCPKit("z"), prefix=bad)


def test_a_later_colliding_name_is_left_out_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    parent, child = MCPKit("parent"), MCPKit("child")
    parent.add_tool(lambda: "mine", name="c_x")
    parent.mount(child, prefix="c")
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.compose"):
        child.add_tool(lambda: "theirs", name="x")
    tool = parent.get_tool("c_x")
    assert tool is not None and type(tool).__name__ == "Tool"  # the parent's own tool stays
    assert "collides" in caplog.text


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_mounted_servers_own_interceptors_run_inside_the_parents_for_its_components(
    transport: str, mode: str
) -> None:
    """A request for a mounted component runs the parent's chain (outermost), then the mounted server's own around
    its handler, as when that server is served alone (it sees the component under its own name), down nested
    mounts: a guard installed on a mounted server holds for tools, prompts, resources and templates reached
    through the parent, and for completing their arguments, plain ``def`` tools that run inline and tools that ask
    the client alike."""
    async with toolkit_client(
        "guarded_mount", transport, mode, elicitation_handler=lambda params: {"name": "Ada"}
    ) as client:
        assert (await client.call_tool("in_echo", {"text": "x"})).text == "main:in_echo(inner:echo(x))"
        assert (
            await client.call_tool("in_deep_echo", {"text": "x"})
        ).text == "main:in_deep_echo(inner:deep_echo(deep:echo(x)))"
        asked = await client.call_tool("in_ask", {})
        assert asked.text == "main:in_ask(inner:ask(hello Ada))"
        assert (
            await client.call_tool("in_deep_ask", {})
        ).text == "main:in_deep_ask(inner:deep_ask(deep:ask(hello Ada)))"
        for refused in ("in_secret", "in_deep_classified"):
            with pytest.raises(MCPError) as error:
                await client.call_tool(refused, {})
            assert error.value.code == -32001, refused
        # (inner knows deep's secret as deep_secret, which it does not refuse)
        assert (
            await client.call_tool("in_deep_secret", {})
        ).text == "main:in_deep_secret(inner:deep_secret(deep:secret(the secret)))"
        assert (await client.call_tool("in_classified", {})).text == "main:in_classified(inner:classified(classified))"
        with pytest.raises(MCPError) as error:
            await client.get_prompt("in_secret")
        assert error.value.code == -32001 and "inner refuses secret" in str(error.value)
        assert (await client.get_prompt("in_deep_open")).messages[0].content.text == "an open prompt"  # type: ignore[union-attr]
        for uri in ("data://in/secret", "data://in/item/secret", "data://in/deep/item/classified"):
            with pytest.raises(MCPError) as error:
                await client.read_text(uri)
            assert error.value.code == -32001, uri
        assert await client.read_text("data://in/open") == "open data"
        assert await client.read_text("data://in/deep/item/7") == "item 7"
        # completion of a mounted prompt's argument or template's variable: the same chains, the same guards
        completed = await client.complete({"type": "ref/prompt", "name": "in_deep_open"}, "style", "f")
        assert completed.completion.values == ["main:inner:deep:formal"]
        completed = await client.complete({"type": "ref/resource", "uri": "data://in/item/{key}"}, "key", "")
        assert completed.completion.values == ["main:inner:7", "main:inner:8"]
        for ref in (
            {"type": "ref/prompt", "name": "in_secret"},
            {"type": "ref/resource", "uri": "data://in/deep/{key}/classified"},
        ):
            with pytest.raises(MCPError) as error:
                await client.complete(ref, "style" if "name" in ref else "key", "")
            assert error.value.code == -32001, ref


async def test_a_mounted_servers_interceptors_added_after_mounting_apply_and_an_import_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The mounted server's chain is read at each request (added or removed later, it holds at once), for a tool
    that takes no Context too; an import copies the components only, which importing a server with interceptors
    says in the log (mounting one says nothing)."""
    child = MCPKit("child")
    child.add_tool(lambda: "data", name="secret")
    parent = MCPKit("parent")
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.compose"):
        parent.mount(child, prefix="c")

    async def deny(call: Any, call_next: Any) -> Any:
        raise MCPError("denied", code=-32001)

    async with Client(parent) as client:
        assert (await client.call_tool("c_secret", {})).text == "data"
        remove = child.add_interceptor(deny, methods=["tools/call"])
        with pytest.raises(MCPError, match="denied"):
            await client.call_tool("c_secret", {})
        remove()
        assert (await client.call_tool("c_secret", {})).text == "data"
    assert caplog.text == ""
    child.add_interceptor(deny, methods=["tools/call"])
    with caplog.at_level(logging.WARNING, logger="mcpkit.server.compose"):
        parent.mount(child, prefix="c2")
        assert caplog.text == ""
        MCPKit("other").import_server(child, prefix="i")
    assert "'child' has interceptors or middleware of its own: importing copies its components only" in caplog.text


async def test_a_mounted_task_tool_runs_as_a_task_of_the_parent_inside_the_mounted_servers_chain() -> None:
    """The mounted server's own task entry does not run for its components served by the parent (the parent's
    decides, and runs the call as its task); its other interceptors do, inside the task."""
    child = MCPKit("child")
    seen: list[str] = []

    @child.tool(task="required")
    async def scan(depth: int) -> str:
        return f"scanned to {depth}"

    async def record(call: Any, call_next: Any) -> Any:
        seen.append(call.params["name"])
        return await call_next(call)

    child.add_interceptor(record, methods=["tools/call"])
    parent = MCPKit("parent")
    parent.mount(child, prefix="c")
    for mode in ("2025-11-25", "2026-07-28"):
        async with Client(parent, protocol_version=mode) as client:
            handle = await client.call_tool_as_task("c_scan", {"depth": 2})
            assert (await handle.result()).text == "scanned to 2"
    assert seen == ["scan", "scan"]


def test_scopes_and_tags_follow_the_prefixed_names() -> None:
    parent, child = MCPKit("parent"), MCPKit("child")

    @child.tool(scopes=["files:write"], tags={"files"})
    def delete(path: str) -> str:
        return path

    @child.resource("files://{path}", scopes=["files:read"])
    def read(path: str) -> str:
        return path

    parent.mount(child, prefix="fs", tags={"mounted"})
    rule = parent.scope_rule
    assert rule("tools/call", {"name": "fs_delete"}) == ["files:write"]
    assert rule("tools/call", {"name": "delete"}) == []
    assert rule("resources/read", {"uri": "files://fs/a.txt"}) == ["files:read"]
    tool = parent.get_tool("fs_delete")
    assert tool is not None and tool.tags == {"files", "mounted"}


async def test_prefixed_tool_scopes_are_enforced_over_http() -> None:
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi
    from support.toolkit import UserHeader, build

    app = build("compose")
    async with serve_asgi(UserHeader(create_app(app), app.scope_rule)) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, headers={"X-User": "bob"}) as client:
            with pytest.raises(MCPError) as refused:
                await client.call_tool("weather_forecast", {"city": "Oslo"})
            assert refused.value.code == -32003 and refused.value.data["scopes"] == ["weather:read"]
        async with Client(url, headers={"X-User": "ann", "X-Scopes": "weather:read"}) as client:
            assert (await client.call_tool("weather_forecast", {"city": "Oslo"})).text.startswith("Oslo: sunny")


async def test_mounted_lifespans_run_inside_the_parents_in_order() -> None:
    events: list[str] = []

    def lifespan(tag: str) -> Any:
        @contextlib.asynccontextmanager
        async def run(app: MCPKit) -> AsyncIterator[str]:
            events.append(f"enter {tag}")
            yield tag
            events.append(f"exit {tag}")

        return run

    parent = MCPKit("parent", lifespan=lifespan("parent"))
    child = MCPKit("child", lifespan=lifespan("child"))
    grandchild = MCPKit("grandchild", lifespan=lifespan("grandchild"))
    child.mount(grandchild, prefix="g")
    parent.mount(child, prefix="c")

    @grandchild.tool
    def state(ctx: Context) -> str:
        return str(ctx.lifespan_state)

    async with Client(parent) as client:
        assert (await client.call_tool("c_g_state", {})).text == "grandchild"
        assert events == ["enter parent", "enter child", "enter grandchild"]
    assert events[3:] == ["exit grandchild", "exit child", "exit parent"]


async def test_a_server_mounted_while_serving_starts_its_lifespan_and_clients_are_told() -> None:
    parent = MCPKit("parent")
    parent.add_tool(lambda: "x", name="x")
    started = asyncio.Event()

    @contextlib.asynccontextmanager
    async def lifespan(app: MCPKit) -> AsyncIterator[str]:
        started.set()
        yield "late"

    child = MCPKit("child", lifespan=lifespan)

    @child.tool
    def state(ctx: Context) -> str:
        return str(ctx.lifespan_state)

    async with serve_http(parent) as url, Client(url) as client, client.watch(tools=True) as watch:
        parent.mount(child, prefix="late")
        assert (await watch.next(timeout=5))[0] == "notifications/tools/list_changed"
        assert (await client.call_tool("late_state", {})).text == "late"  # (the first request entered it)
        assert started.is_set()
        parent.unmount("late")
        assert (await watch.next(timeout=5))[0] == "notifications/tools/list_changed"
        assert [t.name for t in await client.list_tools()] == ["x"]


@pytest.mark.parametrize("mode", ERAS)
async def test_completions_a_mounted_server_gains_after_mounting_are_served_by_the_parent(mode: str) -> None:
    """A prompt or template with completions, or a completer, that the mounted server gets after it was mounted
    (even into a server mounted in turn) completes through the parent, which then declares completions."""
    child = MCPKit("child")
    child.add_tool(lambda: "x", name="x")
    middle = MCPKit("middle")
    middle.mount(child, prefix="c")
    app = MCPKit("main")
    app.mount(middle, prefix="m")

    @child.prompt(completions={"style": ["short", "long"]})
    def brief(city: str, style: str = "short") -> str:
        return f"{style} {city}"

    @child.resource("data://city/{name}")
    def city(name: str) -> str:
        return name

    @child.completion(prompt="brief", argument="city")
    def cities(value: str) -> list[str]:
        return [c for c in ("Oslo", "Rome") if c.startswith(value)]

    @child.completion(template="data://city/{name}", argument="name")
    def names(value: str) -> list[str]:
        return ["Lima"]

    async with Client(app, mode=mode) as client:
        assert "completions" in client.server_capabilities
        assert (await client.complete("m_c_brief", "style", "l")).completion.values == ["long"]
        assert (await client.complete("m_c_brief", "city", "R")).completion.values == ["Rome"]
        ref = {"type": "ref/resource", "uri": "data://m/c/city/{name}"}
        assert (await client.complete(ref, "name", "")).completion.values == ["Lima"]


async def test_mounting_a_proxy_or_a_low_level_server_is_refused_with_what_to_do_instead() -> None:
    """A proxy's components live upstream (nothing is registered in it) and a low-level ``Server`` has no
    registries: mounting either used to mount nothing, silently, or fail on a missing attribute. The refusal
    names the gateway, which does put a proxied server and a local app behind one endpoint."""
    import mcpkit
    from mcpkit.server.lowlevel import Server

    upstream = MCPKit("up")
    upstream.add_tool(lambda: "hi", name="hi")
    app = MCPKit("main")
    app.add_tool(lambda: "local", name="here")
    proxy = mcpkit.proxy(upstream)
    for mount in (app.mount, app.import_server):
        with pytest.raises(TypeError, match="gateway"):
            mount(proxy, prefix="p")
        with pytest.raises(TypeError, match="MCPKit"):
            mount(Server("low"), prefix="low")
    assert app.get_tool("p_hi") is None
    async with Client(mcpkit.proxy({"main": app, "p": upstream})) as client:
        assert {t.name for t in await client.list_tools()} == {"main_here", "p_hi"}
        assert (await client.call_tool("p_hi", {})).text == "hi"


@pytest.mark.parametrize("mode", ERAS)
async def test_resource_uris_a_mounted_tool_or_prompt_hands_out_are_the_parents_and_read_back(mode: str) -> None:
    """A mounted tool's resource link and embedded resource, and a mounted prompt's embedded resource, named the
    mounted server's own URI (``data://shelf/a``), which the parent answered with "Resource not found"; they name
    the parent's (``data://one/shelf/a``), as its lists and ``resources/read`` do (mounted without a prefix: as they
    are)."""
    from mcpkit.protocol import types as t

    child = MCPKit("child")

    @child.resource("data://shelf/{name}")
    def shelf(name: str) -> str:
        return f"item {name}"

    @child.tool()
    def find(name: str):  # type: ignore[no-untyped-def]  # (no outputSchema: the list is the content)
        uri = f"data://shelf/{name}"
        return [
            t.ResourceLink(uri=uri, name=name),
            t.EmbeddedResource(resource=t.TextResourceContents(uri=uri, text=".")),
        ]

    @child.prompt()
    def show(name: str) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": {"type": "resource", "resource": {"uri": f"data://shelf/{name}", "text": "."}}}
        ]

    plain = MCPKit("plain")
    plain.mount(child)  # (no prefix: URIs as they are)
    parent = MCPKit("parent")
    parent.mount(child, "one")
    async with serve_http(parent) as url, Client(url, mode=mode) as client:
        link, embedded = (await client.call_tool("one_find", {"name": "a"})).content
        assert link.uri == embedded.resource.uri == "data://one/shelf/a"
        assert (await client.read_resource(link.uri)).contents[0].text == "item a"
        message = (await client.get_prompt("one_show", {"name": "a"})).messages[0]
        assert message.content.resource.uri == "data://one/shelf/a"
    async with Client(plain, mode=mode) as client:
        link, _ = (await client.call_tool("find", {"name": "a"})).content
        assert link.uri == "data://shelf/a"


async def test_a_server_mounted_twice_keeps_its_lifespan_when_one_of_its_mounts_is_removed() -> None:
    """Unmounting one of two prefixes of the same server stopped running its lifespan with the parent's for good:
    the next session's calls under the other prefix had no lifespan state (an internal error)."""
    runs: list[str] = []

    @contextlib.asynccontextmanager
    async def life(app: Any) -> AsyncIterator[dict[str, str]]:
        runs.append("enter")
        yield {"db": "open"}
        runs.append("exit")

    child = MCPKit("child", lifespan=life)

    @child.tool()
    def db(ctx: Context) -> str:
        return str(ctx.lifespan_state["db"])

    parent = MCPKit("parent")
    parent.mount(child, "one")
    parent.mount(child, "two")
    parent.unmount("one")
    for _ in range(2):  # (each in-memory connection holds the parent's lifespan: entered, then left)
        async with Client(parent, mode="handshake") as client:
            assert (await client.call_tool("two_db", {})).text == "open"
            assert [t.name for t in await client.list_tools()] == ["two_db"]
    assert runs == ["enter", "exit", "enter", "exit"]
    parent.unmount("two")
    async with Client(parent, mode="handshake"):
        pass
    assert runs == ["enter", "exit", "enter", "exit"]  # (no mount left: its lifespan no longer runs)


def _apps_child() -> MCPKit:
    child = MCPKit("dice")
    child.add_view("ui://dice/board", html="<!doctype html><html><body>board</body></html>")

    @child.tool(ui="ui://dice/board")
    def roll() -> int:
        return 4

    @child.tool(meta={"ui/resourceUri": "ui://dice/board"})  # (the deprecated flat key alone)
    def legacy_roll() -> int:
        return 4

    return child


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("how", ["mount", "import_server"])
async def test_a_mounted_tools_view_link_names_the_view_where_the_parent_serves_it(mode: str, how: str) -> None:
    """An MCP Apps tool mounted under a prefix kept its own server's view URI in ``_meta.ui.resourceUri`` (and the
    flat ``ui/resourceUri``) while the parent served the view at the prefixed URI: every host that rendered it
    read ``ui://dice/board`` and got "Resource not found"."""
    parent = MCPKit("parent")
    getattr(parent, how)(_apps_child(), "games")
    async with Client(parent, mode=mode) as client:
        tools = {t.name: t for t in await client.list_tools()}
        roll, legacy = tools["games_roll"], tools["games_legacy_roll"]
        assert roll.meta is not None and roll.meta["ui"]["resourceUri"] == "ui://games/dice/board"
        assert roll.meta["ui/resourceUri"] == "ui://games/dice/board"
        assert legacy.meta == {"ui/resourceUri": "ui://games/dice/board"}
        for tool in (roll, legacy):
            view = await client.read_view(tool)
            assert view.uri == "ui://games/dice/board" and "board" in view.html
    child_tool = _apps_child()._tools["roll"]  # (the mounted server's own definition is not touched)
    assert child_tool.meta["ui"]["resourceUri"] == "ui://dice/board"


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("guarded", [False, True])
async def test_a_uri_with_a_colon_but_no_scheme_is_mounted_under_the_prefix_and_read_back(
    mode: str, guarded: bool
) -> None:
    """``notes/q1:summary`` and ``{+path}`` have no scheme (a scheme has no ``/``): the part before the first colon
    was taken for one, so a read of ``n/file:///etc/x`` through ``{+path}`` mounted as ``n/{+path}`` reached the
    mounted server's own chain (``guarded``: it has middleware) as ``n/file:///etc/x``, its prefix still on, and
    ``path`` was wrong. Either way, over HTTP, the mounted server gets its own URIs and the client the parent's."""
    child = MCPKit("notes")

    @child.resource("notes/q1:summary")
    def summary() -> str:
        return "q1 went well"

    @child.resource("{+path}")
    def anything(path: str) -> str:
        return f"path={path}"

    if guarded:
        seen: list[str] = []

        async def record(call: Any, call_next: Any) -> Any:
            seen.append(call.params["uri"])
            return await call_next(call)

        child.add_interceptor(record, methods="resources/read")
    app = MCPKit("main")
    app.mount(child, prefix="n")
    async with serve_http(app) as url, Client(url, mode=mode) as client:
        assert [r.uri for r in await client.list_resources()] == ["n/notes/q1:summary"]
        assert [t.uri_template for t in await client.list_resource_templates()] == ["n/{+path}"]
        read = await client.read_resource("n/notes/q1:summary")
        assert [(c.uri, c.text) for c in read.contents] == [("n/notes/q1:summary", "q1 went well")]  # type: ignore[union-attr]
        read = await client.read_resource("n/file:///etc/x")
        assert [(c.uri, c.text) for c in read.contents] == [("n/file:///etc/x", "path=file:///etc/x")]  # type: ignore[union-attr]
    if guarded:
        assert seen == ["notes/q1:summary", "file:///etc/x"]


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("guarded", [False, True])
async def test_a_mounted_template_read_is_answered_by_the_template_the_parent_matched(mode: str, guarded: bool) -> None:
    """The mounted server's templates ``{+anything}`` (registered first) and ``mem://{key}`` overlap: under prefix
    ``a`` the parent matches ``mem://a/k1`` to ``mem://a/{key}``. The answer is that template's, whether or not the
    mounted server has middleware (``guarded``), which sees the read with its own URI; with middleware it used to
    match the URI again in its own order and answer ``{+anything}``'s."""
    child = MCPKit("overlap")

    @child.resource("{+anything}")
    def anything(anything: str) -> str:
        return f"any {anything}"

    @child.resource("mem://{key}")
    def memory(key: str) -> str:
        return f"mem {key}"

    seen: list[str] = []
    if guarded:

        async def record(call: Any, call_next: Any) -> Any:
            seen.append(call.params["uri"])
            return await call_next(call)

        child.add_interceptor(record, methods="resources/read")
    app = MCPKit("main")
    app.mount(child, prefix="a")
    async with serve_http(app) as url, Client(url, mode=mode) as client:
        assert await client.read_text("mem://a/k1") == "mem k1"
        assert await client.read_text("a/notes/x") == "any notes/x"
    assert seen == (["mem://k1", "notes/x"] if guarded else [])


async def test_a_mounted_servers_middleware_sees_the_answers_of_an_input_round_as_when_served_alone() -> None:
    """A 2026-07-28 client answers a mounted tool's elicitation and sends the call again with ``inputResponses``
    and ``requestState``: the mounted server's middleware sees them in the retried call, as it does when that
    server is served alone (it saw only ``name`` and ``arguments`` before)."""

    def child_app(seen: list[dict[str, Any]]) -> MCPKit:
        child = MCPKit("asker")

        @child.tool
        async def ask(ctx: Context) -> str:
            answer = await ctx.elicit("Which city?", {"type": "object", "properties": {"name": {"type": "string"}}})
            return f"you chose {answer.content['name'] if answer.content else answer.action}"

        async def record(call: Any, call_next: Any) -> Any:
            seen.append(dict(call.params))
            return await call_next(call)

        child.add_interceptor(record, methods="tools/call")
        return child

    alone: list[dict[str, Any]] = []
    mounted: list[dict[str, Any]] = []
    app = MCPKit("main")
    app.mount(child_app(mounted), prefix="c")
    for served, name, seen in ((child_app(alone), "ask", alone), (app, "c_ask", mounted)):
        async with serve_http(served) as url, Client(url, mode="modern", **HANDLERS) as client:
            assert (await client.call_tool(name, {})).text == "you chose Oslo"
        assert [sorted(key for key in params if key != "_meta") for params in seen] == [
            ["arguments", "name"],
            ["arguments", "inputResponses", "name", "requestState"],
        ], seen
        assert list(seen[1]["inputResponses"].values()) == [{"action": "accept", "content": {"name": "Oslo"}}]
    assert mounted[1]["inputResponses"] == alone[1]["inputResponses"]
