"""The 2026-07-28 request checks of the Streamable HTTP endpoint (transports/http/modern.py) for a call that the
server rewrites: tool search's ``call_tool`` (and a mounted app's ``<prefix>_call_tool``). ``Mcp-Name`` mirrors
the body's ``params.name`` (the caller tool). A client mirrors the ``x-mcp-header`` parameters of the tool it
calls, ``call_tool``, which declares none: the inner tool's ``Mcp-Param-*`` headers are not required (its values
travel in the arguments), but one that is sent must match the inner arguments, as on the direct call. A real
uvicorn server, raw requests (to choose each header), our own client and the TypeScript SDK v2 client."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import httpx
import orjson
import pytest
from pydantic import Field

from mcpkit import Client, MCPKit
from support.mcp_http import modern_body, modern_headers
from support.paths import REPO
from support.toolkit import serve_http

pytestmark = pytest.mark.timeout(90)


def _regional() -> MCPKit:
    app = MCPKit("regional")

    @app.tool
    def where(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], q: str = "") -> str:
        """Run a query in a region."""
        return f"ran {q!r} in {region}"

    @app.tool
    def plain(q: str) -> str:
        """Echo a query."""
        return q

    app.add_tool_search()
    return app


def _call(caller: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return modern_body("tools/call", {"name": caller, "arguments": {"name": name, "arguments": arguments}})


@pytest.mark.parametrize("mounted", [False, True])
async def test_a_rewritten_call_is_named_by_its_caller_tool_and_checks_the_inner_tools_headers_sent(
    mounted: bool,
) -> None:
    app = _regional()
    if mounted:
        served = MCPKit("parent")
        served.mount(app, prefix="c")
    else:
        served = app
    p = "c_" if mounted else ""
    caller = f"{p}call_tool"
    async with serve_http(served) as url, httpx.AsyncClient(timeout=30) as http:

        async def post(body: dict[str, Any], name: str, **params: str) -> tuple[int, Any]:
            r = await http.post(url, json=body, headers=modern_headers("tools/call", name, **params))
            return r.status_code, orjson.loads(r.content)

        # Mcp-Name mirrors params.name: the caller tool's (an Mcp-Name of the inner tool does not match the body)
        status, answer = await post(_call(caller, f"{p}plain", {"q": "x"}), f"{p}plain")
        assert status == 400 and answer["error"]["code"] == -32020 and "Mcp-Name" in answer["error"]["message"]
        status, answer = await post(_call(caller, f"{p}plain", {"q": "x"}), caller)
        assert status == 200 and answer["result"]["content"][0]["text"] == "x"
        # the direct call needs Mcp-Param-Region; call_tool declares no header, so a client sends none for it
        direct_status, direct = await post(
            modern_body("tools/call", {"name": f"{p}where", "arguments": {"region": "eu"}}), f"{p}where"
        )
        assert (direct_status, direct["error"]["code"]) == (400, -32020)
        status, answer = await post(_call(caller, f"{p}where", {"region": "eu", "q": "0"}), caller)
        assert status == 200 and answer["result"]["content"][0]["text"] == "ran '0' in eu"
        # an inner header that is sent must match the inner arguments (what an intermediary read is what runs)
        status, answer = await post(_call(caller, f"{p}where", {"region": "eu"}), caller, **{"Mcp-Param-Region": "us"})
        message = answer["error"]["message"]
        assert status == 400 and answer["error"]["code"] == -32020
        assert "does not match" in message and f"{p}where" in message
        status, answer = await post(_call(caller, f"{p}where", {}), caller, **{"Mcp-Param-Region": "eu"})
        assert status == 400 and "argument is absent" in answer["error"]["message"]
        status, answer = await post(
            _call(caller, f"{p}where", {"region": "eu", "q": "1"}), caller, **{"Mcp-Param-Region": "eu"}
        )
        assert status == 200 and answer["result"]["content"][0]["text"] == "ran '1' in eu"
        # no region in the body: no header expected (the inner tool's default rules, as directly)
        status, answer = await post(_call(caller, f"{p}where", {}), caller)
        assert status == 200 and answer["result"]["isError"] is True
        async with Client(url, mode="modern") as client:  # (our own client: it mirrors call_tool's headers, none)
            done = await client.call_tool(caller, {"name": f"{p}where", "arguments": {"region": "eu", "q": "2"}})
            assert done.text == "ran '2' in eu"


async def test_tool_search_added_while_serving_gets_the_inner_header_check() -> None:
    """The endpoint skips the inner tool's header check while the app serves no caller tool, and does it once tool
    search is added (or a mounted app with tool search routes through it) while it serves."""
    app = MCPKit("late")

    @app.tool
    def where(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
        """Run in a region."""
        return f"ran in {region}"

    parent = MCPKit("parent")
    parent.add_tool(lambda: "mine", name="own", description="A tool of its own.")
    async with serve_http(app) as url, serve_http(parent) as parent_url, httpx.AsyncClient(timeout=30) as http:

        async def post(at: str, body: dict[str, Any], name: str, **params: str) -> tuple[int, Any]:
            r = await http.post(at, json=body, headers=modern_headers("tools/call", name, **params))
            return r.status_code, orjson.loads(r.content)

        direct = modern_body("tools/call", {"name": "where", "arguments": {"region": "eu"}})
        assert (await post(url, direct, "where", **{"Mcp-Param-Region": "eu"}))[0] == 200
        own = await post(parent_url, modern_body("tools/call", {"name": "own", "arguments": {}}), "own")
        assert own[0] == 200
        app.add_tool_search()
        status, answer = await post(url, _call("call_tool", "where", {"region": "eu"}), "call_tool")
        assert status == 200 and answer["result"]["content"][0]["text"] == "ran in eu"
        wrong = {"Mcp-Param-Region": "us"}
        status, answer = await post(url, _call("call_tool", "where", {"region": "eu"}), "call_tool", **wrong)
        assert status == 400 and "does not match" in answer["error"]["message"]
        parent.mount(app, prefix="c")  # (the parent served a call already: it routes from now on)
        status, answer = await post(
            parent_url, _call("c_call_tool", "c_where", {"region": "eu"}), "c_call_tool", **wrong
        )
        assert status == 400 and "does not match" in answer["error"]["message"]


async def _ts_v2(node_bin: Path, url: str, steps: list[dict[str, Any]]) -> list[Any]:
    """The TypeScript SDK v2 client's answers to ``steps`` over HTTP in 2026-07-28."""
    proc = await asyncio.create_subprocess_exec(
        str(node_bin),
        str(REPO / "tests" / "support" / "interop" / "ts_client_v2.mjs"),
        "--negotiation",
        "2026-07-28",
        "--http",
        url,
        "--script",
        json.dumps(steps),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(REPO / "tests"),
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode == 0, (out.decode()[-3000:], err.decode()[-2000:])
    result = json.loads(out)
    assert result["protocolVersion"] == "2026-07-28"
    answers: list[Any] = result["results"]
    return answers


@pytest.mark.npm
@pytest.mark.parametrize("mounted", [False, True])
async def test_the_typescript_client_calls_a_header_tool_of_an_app_with_tool_search_by_its_name(
    node_bin: Path, mounted: bool
) -> None:
    """Not pinned, the tool with x-mcp-header parameters is listed beside the search and caller tools (the client
    learns its headers from the list only), so the TypeScript SDK v2 client calls it by its name with its header;
    mounted, the parent lists what the app lists, under the prefix."""
    served = app = _regional()
    if mounted:
        served = MCPKit("parent")
        served.mount(app, prefix="c")
    p = "c_" if mounted else ""
    steps = [{"op": "listTools"}, {"op": "callTool", "name": f"{p}where", "arguments": {"region": "eu", "q": "1"}}]
    async with serve_http(served) as url:
        listed, direct = await _ts_v2(node_bin, url, steps)
    assert [t["name"] for t in listed["tools"]] == [f"{p}search_tools", f"{p}call_tool", f"{p}where"]
    assert direct["content"][0]["text"] == "ran '1' in eu"


@pytest.mark.npm
async def test_the_typescript_client_calls_a_header_tool_found_by_search_by_its_name(node_bin: Path) -> None:
    """The TypeScript SDK v2 client over HTTP (2026-07-28) mirrors the x-mcp-header parameters of the tool it
    calls: call_tool of the header tool (call_tool declares none) runs, the inner values travel in its arguments;
    the tool pinned in the list is called by its name with its header."""
    app = _regional()
    pinned = MCPKit("pinned")
    pinned.mount(app)  # (a parent with tool search that lists the header tool)
    pinned.add_tool_search(search_tool_name="find", call_tool_name="run", always_visible=["where"])
    steps = [
        {"op": "listTools"},
        {"op": "callTool", "name": "run", "arguments": {"name": "where", "arguments": {"region": "eu", "q": "0"}}},
        {"op": "callTool", "name": "where", "arguments": {"region": "eu", "q": "1"}},
    ]
    async with serve_http(pinned) as url:
        listed, through, direct = await _ts_v2(node_bin, url, steps)
    assert [t["name"] for t in listed["tools"]] == ["find", "run", "where"]
    assert through["content"][0]["text"] == "ran '0' in eu"
    assert direct["content"][0]["text"] == "ran '1' in eu"


async def test_a_tool_replaced_while_serving_is_checked_against_its_new_headers() -> None:
    """The endpoint remembers a tool's ``Mcp-Param-*`` headers with the header values it found good; a tool added,
    replaced or removed while it serves (here, or in an app mounted into the one served) is read afresh."""
    app = MCPKit("changing")

    @app.tool
    def where(region: str) -> str:
        """Run in a region."""
        return f"ran in {region}"

    parent = MCPKit("parent")
    parent.mount(app, prefix="c")
    async with serve_http(app) as url, serve_http(parent) as parent_url, httpx.AsyncClient(timeout=30) as http:

        async def post(at: str, name: str, **params: str) -> tuple[int, Any]:
            body = modern_body("tools/call", {"name": name, "arguments": {"region": "eu"}})
            r = await http.post(at, json=body, headers=modern_headers("tools/call", name, **params))
            return r.status_code, orjson.loads(r.content)

        for _ in range(2):  # (the second call takes the quick test)
            assert (await post(url, "where"))[0] == 200
            assert (await post(parent_url, "c_where"))[0] == 200

        def regional(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
            """Run in a region."""
            return f"ran in {region} (regional)"

        app.add_tool(regional, name="where", replace=True)
        for at, name in ((url, "where"), (parent_url, "c_where")):
            status, answer = await post(at, name)
            assert status == 400 and "Mcp-Param-region header is required" in answer["error"]["message"], answer
            status, answer = await post(at, name, **{"Mcp-Param-Region": "eu"})
            assert status == 200 and answer["result"]["content"][0]["text"] == "ran in eu (regional)"
        app.remove_tool("where")
        status, answer = await post(url, "where")  # (no such tool now: nothing to require)
        assert status == 200 and ("error" in answer or answer["result"]["isError"]), answer


async def test_the_quick_tests_table_keeps_no_long_header_values() -> None:
    """The header values the 2026-07-28 checks remember (to pass the next request with the same ones in one test)
    are bounded in bytes, not only in number: requests naming 600 different long tools leave nothing remembered,
    and each is still answered as before (its headers checked step by step)."""
    from mcpkit.transports.http import create_app
    from mcpkit.transports.http.modern import MAX_KNOWN, MAX_KNOWN_BYTES
    from support.asgi import serve_asgi

    app = MCPKit("long")

    @app.tool
    def echo(text: str) -> str:
        """Echo."""
        return text

    served = create_app(app)
    async with serve_asgi(served) as port, httpx.AsyncClient(timeout=30) as http:
        url = f"http://127.0.0.1:{port}/mcp"
        statuses = set()
        for i in range(600):
            name = f"{i:04d}" + "n" * 3000
            body = modern_body("tools/call", {"name": name, "arguments": {}})
            r = await http.post(url, json=body, headers=modern_headers("tools/call", name))
            statuses.add((r.status_code, "result" in r.json() or r.json()["error"]["code"]))
        body = modern_body("tools/call", {"name": "echo", "arguments": {"text": "hi"}})
        r = await http.post(url, json=body, headers=modern_headers("tools/call", "echo"))
        assert r.status_code == 200 and r.json()["result"]["content"][0]["text"] == "hi"
    assert len(statuses) == 1
    known = served.streamable.modern._known  # (the table measured)
    held = sum(len(v or b"") for key in known for v in key)
    assert held <= MAX_KNOWN_BYTES and len(known) == 1 <= MAX_KNOWN  # (echo's values only)
