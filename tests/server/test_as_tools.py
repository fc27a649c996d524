"""Resources and prompts as tools (``mcpkit.server.as_tools``), with real clients: ours over stdio and HTTP in
both eras (the app ``as_tools`` of ``tests/support/servers/toolkit_apps.py``), the official schemas of each
revision for what goes on the wire, a protected HTTP server for scopes, mounted, imported and proxied apps, and the
TypeScript SDK's client."""

from __future__ import annotations

import base64
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from mcpkit import Client, MCPKit
from mcpkit.protocol.errors import MCPError
from mcpkit.server.as_tools import MAX_INNER_PAGES, MAX_PAGE_SIZE
from mcpkit.testing import Traffic
from support.oracle import REVISIONS, validate_message
from support.toolkit import APPS_FILE, ERAS, TRANSPORTS, UserHeader, build, toolkit_client
from support.ts_peers import run_ts_client

pytestmark = pytest.mark.timeout(90)
BOTH = pytest.mark.parametrize("mode", ERAS)
EVERYWHERE = pytest.mark.parametrize("transport", TRANSPORTS)
LOGO = b"\x89PNG\r\n\x1a\nlogo"


def _wire(result: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = result.raw.model_dump(by_alias=True, exclude_none=True, mode="json")
    return dumped


async def _walk(client: Client, tool: str, *fields: str) -> tuple[dict[str, list[Any]], int]:
    """Every entry a listing tool answers, following its cursors (and how many calls it took)."""
    found: dict[str, list[Any]] = {field: [] for field in fields}
    cursor: str | None = None
    for calls in range(1, 50):
        result = await client.call_tool(tool, {"cursor": cursor} if cursor is not None else {})
        assert not result.is_error, result.text
        page = result.structured if result.structured is not None else json.loads(result.text)
        assert sum(len(page[field]) for field in fields) <= 3  # (the page_size the app chose)
        for field in fields:
            found[field].extend(page[field])
        cursor = page.get("nextCursor")
        if cursor is None:
            return found, calls
    raise AssertionError("the listing never ended")


@BOTH
@EVERYWHERE
async def test_resources_are_listed_and_read_through_tools_as_directly(transport: str, mode: str) -> None:
    async with toolkit_client("as_tools", transport, mode) as client:
        names = [t.name for t in await client.list_tools()]
        assert {"list_resources", "read_resource", "list_prompts", "get_prompt"} <= set(names)
        found, calls = await _walk(client, "list_resources", "resources", "resourceTemplates")
        direct = [r.model_dump(by_alias=True, exclude_none=True, mode="json") for r in await client.list_resources()]
        templates = await client.list_resource_templates()
        assert found["resources"] == direct  # (the caller's view: secret://plan is alice's only)
        assert [r["uri"] for r in direct] == ["docs://readme", "docs://logo", "secret://keys"]
        assert found["resourceTemplates"] == [
            t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in templates
        ]
        assert calls >= 2  # (4 entries, pages of 3)

        text = await client.call_tool("read_resource", {"uri": "docs://readme"})
        assert not text.is_error and _wire(text)["content"] == [{"type": "text", "text": "read me first"}]
        blob = await client.call_tool("read_resource", {"uri": "docs://logo"})
        (block,) = _wire(blob)["content"]
        assert block["type"] == "resource" and block["resource"]["uri"] == "docs://logo"
        assert block["resource"]["mimeType"] == "image/png"
        assert base64.b64decode(block["resource"]["blob"]) == LOGO
        templated = await client.call_tool("read_resource", {"uri": "docs://pages/intro"})
        assert templated.text == "page intro"
        for unknown in ("docs://nothing", "secret://plan"):  # (the caller may not see the plan: not there)
            missing = await client.call_tool("read_resource", {"uri": unknown})
            assert missing.is_error and unknown in missing.text


@BOTH
@EVERYWHERE
async def test_prompts_are_listed_and_got_through_tools_as_directly(transport: str, mode: str) -> None:
    async with toolkit_client("as_tools", transport, mode) as client:
        found, _ = await _walk(client, "list_prompts", "prompts")
        direct = [p.model_dump(by_alias=True, exclude_none=True, mode="json") for p in await client.list_prompts()]
        assert found["prompts"] == direct and [p["name"] for p in direct] == ["summarize"]
        assert [a["name"] for a in direct[0]["arguments"]] == ["topic", "style"]
        got = await client.call_tool("get_prompt", {"name": "summarize", "arguments": {"topic": "MCP"}})
        expected = (await client.get_prompt("summarize", {"topic": "MCP"})).model_dump(
            by_alias=True, exclude_none=True, mode="json"
        )
        page = got.structured if got.structured is not None else json.loads(got.text)
        assert page["messages"] == expected["messages"] and page["description"] == "Summarize a topic."
        assert page["messages"][0]["content"]["text"] == "Summarize MCP, short."
        missing = await client.call_tool("get_prompt", {"name": "summarize"})  # (a required argument is missing)
        assert missing.is_error and "topic" in missing.text
        unknown = await client.call_tool("get_prompt", {"name": "admin_prompt"})  # (alice's only)
        assert unknown.is_error and "admin_prompt" in unknown.text


@BOTH
async def test_the_inner_requests_run_the_apps_interceptors_and_follow_each_principals_view(mode: str) -> None:
    async with toolkit_client("as_tools", "http", mode, user="alice") as alice:
        await alice.call_tool("recorded")
        found, _ = await _walk(alice, "list_resources", "resources", "resourceTemplates")
        assert "secret://plan" in [r["uri"] for r in found["resources"]]
        assert (await alice.call_tool("read_resource", {"uri": "secret://plan"})).text == "the plan"
        got = await alice.call_tool("get_prompt", {"name": "admin_prompt", "arguments": {"topic": "mine"}})
        assert not got.is_error
        seen = (await alice.call_tool("recorded")).structured["result"]
        inner = [s for s in seen if s.startswith(("resources/", "prompts/"))]
        assert inner[0] == "resources/list" and "resources/templates/list" in inner
        assert inner[-2:] == ["resources/read secret://plan", "prompts/get admin_prompt"]


@BOTH
async def test_a_scope_rule_on_a_resource_holds_through_the_tool(mode: str) -> None:
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    app = build("as_tools")
    async with serve_asgi(UserHeader(create_app(app), app.scope_rule)) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, headers={"X-User": "bob"}) as bob:
            with pytest.raises(MCPError) as direct:
                await bob.read_resource("secret://keys")
            with pytest.raises(MCPError) as through:
                await bob.call_tool("read_resource", {"uri": "secret://keys"})
            assert (through.value.code, through.value.message, through.value.data) == (
                direct.value.code,
                direct.value.message,
                direct.value.data,
            )
            assert through.value.data["scopes"] == ["files:admin"]
            assert (await bob.call_tool("read_resource", {"uri": "docs://readme"})).text == "read me first"
        async with Client(url, mode=mode, headers={"X-User": "bob", "X-Scopes": "files:admin"}) as admin:
            assert (await admin.call_tool("read_resource", {"uri": "secret://keys"})).text == "the keys"


@BOTH
@pytest.mark.parametrize("how", ["own", "mounted", "installers_rule"])
async def test_a_protected_server_refuses_read_resource_and_get_prompt_as_the_direct_request(
    mode: str, how: str
) -> None:
    """Under ``protect(..., scope_rule=app.scope_rule)`` the read of a resource needing a scope is refused with the
    HTTP 403 step-up challenge, and so is ``read_resource`` of it (and ``get_prompt`` of such a prompt): the rule
    asks for the inner request's scopes, by the names the serving app gives (a mounted app's tools too). A rule of
    the installer's own, which knows nothing of these tools, is asked about the inner request by ``protect``'s early
    look at the body, for the same 403."""
    from mcpkit.auth import StaticTokenVerifier, protect
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    app = MCPKit("parent") if how == "mounted" else _child()
    if how == "mounted":
        app.mount(_child(), prefix="c")
    p = "c_" if how == "mounted" else ""
    readme = "docs://c/readme" if how == "mounted" else "docs://readme"

    def installers_rule(method: str, params: Any) -> list[str]:
        if (method, params.get("uri") or params.get("name")) in (("resources/read", readme), ("prompts/get", "secret")):
            return ["docs:read"]
        return []

    rule = installers_rule if how == "installers_rule" else app.scope_rule
    resource = "http://mcp.test/mcp"
    verifier = StaticTokenVerifier.simple({"reader": [], "docs": ["docs:read"]}, audience=resource)
    asgi = protect(create_app(app), resource=resource, verifier=verifier, scope_rule=rule)
    async with serve_asgi(asgi) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, headers={"Authorization": "Bearer reader"}) as reader:
            with pytest.raises(MCPError) as direct:
                await reader.read_resource(readme)
            with pytest.raises(MCPError) as through:
                await reader.call_tool(f"{p}read_resource", {"uri": readme})
            assert direct.value.code != -32003 and "docs:read" in direct.value.message  # (the HTTP 403 step-up)
            assert (through.value.code, through.value.message) == (direct.value.code, direct.value.message)
            with pytest.raises(MCPError) as direct:
                await reader.get_prompt(f"{p}secret", {"who": "x"})
            with pytest.raises(MCPError) as through:
                await reader.call_tool(f"{p}get_prompt", {"name": f"{p}secret", "arguments": {"who": "x"}})
            assert direct.value.code != -32003 and "docs:read" in direct.value.message
            assert (through.value.code, through.value.message) == (direct.value.code, direct.value.message)
            page = await reader.call_tool(f"{p}read_resource", {"uri": readme.replace("readme", "pages/a")})
            assert page.text == "child page a"  # (a resource that needs no scope)
        async with Client(url, mode=mode, headers={"Authorization": "Bearer docs"}) as docs:
            assert (await docs.call_tool(f"{p}read_resource", {"uri": readme})).text == "child readme"
            got = await docs.call_tool(f"{p}get_prompt", {"name": f"{p}secret", "arguments": {"who": "ann"}})
            assert got.structured["messages"][0]["content"]["text"] == "secret for ann"


@BOTH
async def test_a_resource_that_asks_the_user_and_a_middleware_work_through_read_resource(mode: str) -> None:
    """The inner read is the app's own: a middleware's ``on_read_resource`` runs around it, and a resource that asks
    the user (a server request in the handshake era, an input round of the tool call in 2026-07-28) is answered."""
    from mcpkit import Context
    from mcpkit.server.middleware import Middleware

    app = MCPKit("asking")
    seen: list[str] = []

    class Reads(Middleware):
        async def on_read_resource(self, call: Any, call_next: Any) -> Any:
            seen.append(call.uri)
            return await call_next(call)

    app.add_middleware(Reads())

    @app.resource("ask://{what}")
    async def ask(what: str, ctx: Context) -> str:
        answer = await ctx.elicit(f"Which {what}?", str)
        return f"{what}: {answer.data}" if answer.accepted else f"{what}: none"

    app.add_resources_as_tools()
    async with Client(app, mode=mode, elicitation_handler=lambda params: {"value": "blue"}) as client:
        assert (await client.call_tool("read_resource", {"uri": "ask://colour"})).text == "colour: blue"
    assert seen == ["ask://colour"] * len(seen) and seen


@BOTH
@EVERYWHERE
async def test_the_listing_tool_follows_the_catalog_as_it_changes(transport: str, mode: str) -> None:
    async with toolkit_client("as_tools", transport, mode) as client:
        assert (await client.call_tool("add_resource_named", {"uri": "docs://late"})).text == "added"
        found, _ = await _walk(client, "list_resources", "resources", "resourceTemplates")
        assert "docs://late" in [r["uri"] for r in found["resources"]]
        assert (await client.call_tool("read_resource", {"uri": "docs://late"})).text == "new docs://late"


@BOTH
async def test_a_listing_page_is_bounded_and_a_bad_cursor_is_the_tools_error(mode: str) -> None:
    app = MCPKit("many")
    for i in range(30):
        app.add_resource(f"data://item/{i}", f"item {i}")
    app.add_resources_as_tools(page_size=7)
    async with Client(app, mode=mode) as client:
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(10):
            result = await client.call_tool("list_resources", {"cursor": cursor} if cursor else {})
            page = result.structured if result.structured is not None else json.loads(result.text)
            assert len(page["resources"]) <= 7
            seen += [r["uri"] for r in page["resources"]]
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        assert seen == [f"data://item/{i}" for i in range(30)]
        for bad in ("nonsense", base64.urlsafe_b64encode(b'[0, "forged", 0]').decode()):
            refused = await client.call_tool("list_resources", {"cursor": bad})
            assert refused.is_error and "cursor" in refused.text.lower()
        too_long = await client.call_tool("list_resources", {"cursor": "x" * 5000})
        assert too_long.is_error


@BOTH
async def test_a_listing_page_is_filled_from_the_apps_smaller_pages_and_resumes_where_it_stopped(mode: str) -> None:
    app = MCPKit("small pages", page_size=2)
    for i in range(11):
        app.add_resource(f"data://item/{i:02}", f"item {i}")

    def echo(name: str) -> str:
        return name

    for i in range(3):
        app.add_resource(f"data://tpl/{i}/{{name}}", echo)

    @app.prompt
    def only() -> str:
        return "hi"

    inner: list[str] = []

    async def count(call: Any, call_next: Any) -> Any:
        inner.append(call.method)
        return await call_next(call)

    app.add_interceptor(count, methods=["resources/list", "resources/templates/list"])
    app.add_resources_as_tools(page_size=5)
    app.add_prompts_as_tools(page_size=5)
    async with Client(app, mode=mode) as client:
        pages: list[list[str]] = []
        cursor: str | None = None
        for _ in range(10):
            result = await client.call_tool("list_resources", {"cursor": cursor} if cursor else {})
            page = result.structured if result.structured is not None else json.loads(result.text)
            pages.append([r["uri"] for r in page["resources"]] + [t["uriTemplate"] for t in page["resourceTemplates"]])
            cursor = page.get("nextCursor")
            if cursor is None:
                break
        resources = [f"data://item/{i:02}" for i in range(11)]
        templates = [f"data://tpl/{i}/{{name}}" for i in range(3)]
        assert pages == [resources[0:5], resources[5:10], [resources[10], *templates[0:3]]]
        # (the app's 6 + 2 pages, the one cut between two calls asked for again)
        assert inner == ["resources/list"] * 7 + ["resources/templates/list"] * 2
        prompts = await client.call_tool("list_prompts", {})
        assert [p["name"] for p in prompts.structured["prompts"]] == ["only"]
        a_second_list = base64.urlsafe_b64encode(b"[1, null, 0]").decode()  # (prompts have one list)
        assert (await client.call_tool("list_prompts", {"cursor": a_second_list})).is_error


@BOTH
async def test_a_listing_call_asks_for_a_bounded_number_of_the_apps_pages(mode: str) -> None:
    app = MCPKit("one a page", page_size=1)
    for i in range(25):
        app.add_resource(f"data://item/{i:02}", f"item {i}")
    app.add_resources_as_tools(page_size=50)
    asked: list[int] = []

    async def count(call: Any, call_next: Any) -> Any:
        asked[-1] += 1
        return await call_next(call)

    app.add_interceptor(count, methods=["resources/list", "resources/templates/list"])
    async with Client(app, mode=mode) as client:
        seen: list[str] = []
        cursor: str | None = None
        for _ in range(10):
            asked.append(0)
            result = await client.call_tool("list_resources", {"cursor": cursor} if cursor else {})
            seen += [r["uri"] for r in result.structured["resources"]]
            cursor = result.structured.get("nextCursor")
            if cursor is None:
                break
        assert seen == [f"data://item/{i:02}" for i in range(25)]
        assert asked[:2] == [MAX_INNER_PAGES, MAX_INNER_PAGES]  # (10 entries of the 50 asked for, then a cursor)
        assert max(asked) <= MAX_INNER_PAGES


def test_the_adders_refuse_bad_settings_and_taken_names() -> None:
    app = MCPKit("settings")
    for bad in (0, MAX_PAGE_SIZE + 1, 2.5):
        with pytest.raises(ValueError, match="page_size"):
            app.add_resources_as_tools(page_size=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix"):
        app.add_prompts_as_tools(prefix="bad prefix")
    with pytest.raises(ValueError, match="different names"):
        app.add_prompts_as_tools(list_name="same", get_name="same")

    @app.tool
    def read_resource() -> str:
        return "mine"

    with pytest.raises(ValueError):
        app.add_resources_as_tools()
    assert app.get_tool("list_resources") is None  # (nothing added)
    made = app.add_resources_as_tools(prefix="docs", list_name="ls", read_name="cat")
    assert (made.list_tool.name, made.read_tool.name) == ("docs_ls", "docs_cat")


@pytest.mark.parametrize("version", REVISIONS)
async def test_what_the_tools_answer_is_valid_for_each_revisions_official_schema(version: str) -> None:
    app = build("as_tools")
    traffic = Traffic()
    remove = app.add_tap(traffic)
    try:
        async with Client(app, protocol_version=version) as client:
            await client.call_tool("list_resources")
            await client.call_tool("read_resource", {"uri": "docs://logo"})
            await client.call_tool("read_resource", {"uri": "docs://readme"})
            await client.call_tool("list_prompts")
            await client.call_tool("get_prompt", {"name": "summarize", "arguments": {"topic": "x"}})
    finally:
        remove()
    calls = traffic.requests("tools/call", "in")
    assert len(calls) == 5
    for request in calls:
        answer = traffic.answer_to(request)
        assert answer is not None and "result" in answer, answer
        validate_message(answer, version, sender="server", request_method="tools/call")


# ---------------------------------------------------------------------------------------- composition, proxy


def _child() -> MCPKit:
    child = MCPKit("child")

    @child.resource("docs://readme", scopes=["docs:read"])
    def readme() -> str:
        return "child readme"

    @child.resource("docs://pages/{name}")
    def page(name: str) -> str:
        return f"child page {name}"

    @child.prompt
    def hello(who: str) -> str:
        return f"hello {who}"

    @child.prompt(scopes=["docs:read"])
    def secret(who: str) -> str:
        return f"secret for {who}"

    child.add_resources_as_tools()
    child.add_prompts_as_tools()
    return child


@BOTH
@pytest.mark.parametrize("how", ["mount", "import"])
async def test_a_mounted_or_imported_app_lists_and_reads_what_the_parent_serves_through_it(mode: str, how: str) -> None:
    """The parent's ``c_list_resources`` lists what the parent serves of the child, by the parent's URIs (not the
    parent's own resources); ``c_read_resource`` reads them with the parent's rules (its scope rule, by the URI it
    knows, and its interceptors), and refuses a URI the parent serves from elsewhere as one that is not there."""
    from mcpkit.transports.http import create_app
    from support.asgi import serve_asgi

    parent = MCPKit("parent")
    seen: list[str] = []

    async def record(call: Any, call_next: Any) -> Any:
        seen.append(f"{call.method} {call.params.get('uri') or call.params.get('name') or ''}".strip())
        return await call_next(call)

    parent.add_interceptor(record)

    @parent.resource("own://note")
    def note() -> str:
        return "the parent's own"

    (parent.mount if how == "mount" else parent.import_server)(_child(), prefix="c")
    async with serve_asgi(UserHeader(create_app(parent), parent.scope_rule)) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode=mode, headers={"X-User": "bob"}) as bob:
            listed = await bob.call_tool("c_list_resources")
            assert [r["uri"] for r in listed.structured["resources"]] == ["docs://c/readme"]
            assert [t["uriTemplate"] for t in listed.structured["resourceTemplates"]] == ["docs://c/pages/{name}"]
            assert (await bob.call_tool("c_read_resource", {"uri": "docs://c/pages/a"})).text == "child page a"
            with pytest.raises(MCPError) as refused:  # (the parent's scope rule, by the URI the parent knows)
                await bob.call_tool("c_read_resource", {"uri": "docs://c/readme"})
            assert refused.value.data["scopes"] == ["docs:read"]
            for elsewhere in ("own://note", "docs://readme"):
                missing = await bob.call_tool("c_read_resource", {"uri": elsewhere})
                assert missing.is_error and elsewhere in missing.text
            prompts = await bob.call_tool("c_list_prompts")
            assert [p["name"] for p in prompts.structured["prompts"]] == ["c_hello", "c_secret"]
            seen.clear()
            got = await bob.call_tool("c_get_prompt", {"name": "c_hello", "arguments": {"who": "ann"}})
            assert got.structured["messages"][0]["content"]["text"] == "hello ann"
            assert "prompts/get c_hello" in seen  # (the parent's interceptors saw the inner request)
            assert (await bob.call_tool("c_get_prompt", {"name": "hello", "arguments": {"who": "x"}})).is_error
        async with Client(url, mode=mode, headers={"X-User": "bob", "X-Scopes": "docs:read"}) as reader:
            assert (await reader.call_tool("c_read_resource", {"uri": "docs://c/readme"})).text == "child readme"


@BOTH
async def test_the_tools_of_an_app_served_behind_a_proxy_read_and_get_through_it(mode: str) -> None:
    import mcpkit

    proxy = mcpkit.proxy(build("as_tools"))
    async with Client(proxy, mode=mode) as client:
        assert (await client.call_tool("read_resource", {"uri": "docs://pages/p"})).text == "page p"
        got = await client.call_tool("get_prompt", {"name": "summarize", "arguments": {"topic": "t"}})
        assert got.structured["messages"][0]["content"]["text"] == "Summarize t, short."


# ---------------------------------------------------------------------------------------- the TypeScript client


@pytest.mark.npm
@pytest.mark.parametrize("negotiation", ["legacy", "2026-07-28"])
async def test_the_typescript_client_reads_resources_and_gets_prompts_through_tools(
    node_bin: Path, negotiation: str
) -> None:
    command = shlex.join([sys.executable, str(APPS_FILE), "as_tools"])
    steps = [
        {"op": "listTools"},
        {"op": "callTool", "name": "list_resources", "arguments": {}},
        {"op": "callTool", "name": "read_resource", "arguments": {"uri": "docs://logo"}},
        {"op": "callTool", "name": "read_resource", "arguments": {"uri": "docs://pages/ts"}},
        {"op": "callTool", "name": "get_prompt", "arguments": {"name": "summarize", "arguments": {"topic": "ts"}}},
        {"op": "callTool", "name": "read_resource", "arguments": {"uri": "docs://nothing"}},
    ]
    out = await run_ts_client(node_bin, "ts_client_v2.mjs", ["--stdio", command], steps, "--negotiation", negotiation)
    assert out["protocolVersion"] == ("2025-11-25" if negotiation == "legacy" else "2026-07-28")
    listed, page, logo, text, prompt, missing = out["results"]
    assert {"list_resources", "read_resource", "list_prompts", "get_prompt"} <= {t["name"] for t in listed["tools"]}
    first = page["structuredContent"]  # (3 entries, filled from the app's pages of 2; more with the cursor)
    assert [r["uri"] for r in first["resources"]] == ["docs://readme", "docs://logo", "secret://keys"]
    assert "nextCursor" in first
    (block,) = logo["content"]
    assert block["type"] == "resource" and base64.b64decode(block["resource"]["blob"]) == LOGO
    assert text["content"] == [{"type": "text", "text": "page ts"}]
    assert prompt["structuredContent"]["messages"][0]["content"]["text"] == "Summarize ts, short."
    assert missing["isError"] is True
