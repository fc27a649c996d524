"""Streamable HTTP interop with the official implementations, over real uvicorn/Node servers on 127.0.0.1:
the TypeScript SDK clients (1.32 handshake era, v2 both eras) and the official Python SDK (mcp 2.3.0) client
against mcpkit's endpoint; mcpkit's client against the official Python SDK server and the TypeScript v2 server."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import StreamableHTTPClientTransport, create_app
from support.asgi import serve_asgi
from support.mcp_http import make_server, running
from support.paths import INTEROP, TESTS
from support.ts_peers import run_ts_client

OPTIONS = {"elicitation": {"action": "accept", "content": {"name": "Ada"}}}
STEPS = [
    {"op": "listTools"},
    {"op": "callTool", "name": "echo", "arguments": {"text": "hi"}},
    {"op": "callTool", "name": "progress", "arguments": {"steps": 2}},
    {"op": "callTool", "name": "ask"},
    {"op": "callTool", "name": "region", "arguments": {"region": "Zürich", "count": 2}},
]


async def run_http_client(
    node: Path,
    client: str,
    url: str,
    *extra: str,
    options: dict[str, Any] | None = None,
    steps: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    script = {"options": {**OPTIONS, **(options or {})}, "steps": steps or STEPS}
    return await run_ts_client(node, client, ["--http", url], script, *extra)


def texts(out: dict[str, Any]) -> list[str]:
    return [r["content"][0]["text"] for r in out["results"][1:]]


async def eventually(pred: Any, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if pred():
            return
        await asyncio.sleep(0.05)
    assert pred()


@pytest.mark.npm
@pytest.mark.req("M019", "M020", "M029", "S007", "A005", "A007")
async def test_typescript_sdk_v1_client(node_bin: Path) -> None:
    async with running(make_server()) as (base, app):
        out = await run_http_client(node_bin, "ts_client.mjs", base + "/mcp", options={"terminateSession": True})
        assert out["era"] == "legacy" and out["protocolVersion"] == "2025-11-25"
        assert "echo" in [t["name"] for t in out["results"][0]["tools"]]
        assert texts(out) == ["hi", "done 2", "accept:Ada", "Zürich/2"]
        assert [r["method"] for r in out["requests"]] == ["elicitation/create"]
        await eventually(lambda: app.streamable.session_count == 0)  # DELETE honoured


@pytest.mark.npm
@pytest.mark.parametrize("negotiation", ["legacy", "auto"])
async def test_typescript_sdk_v2_client(node_bin: Path, negotiation: str) -> None:
    async with running(make_server()) as (base, _):
        out = await run_http_client(node_bin, "ts_client_v2.mjs", base + "/mcp", "--negotiation", negotiation)
        assert out["era"] == ("legacy" if negotiation == "legacy" else "modern")
        if negotiation == "auto":
            assert out["protocolVersion"] == "2026-07-28"
        # the v2 client mirrors x-mcp-header arguments (Mcp-Param-Region); our server validated them
        assert texts(out) == ["hi", "done 2", "accept:Ada", "Zürich/2"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_official_python_client(mode: str) -> None:
    from mcp import Client

    async with running(make_server()) as (base, app):
        async with Client(base + "/mcp", mode=mode) as client:  # type: ignore[arg-type]
            tools = await client.list_tools()
            assert "echo" in [t.name for t in tools.tools]
            r = await client.call_tool("echo", {"text": "py"})
            assert r.content[0].text == "py"  # type: ignore[union-attr]
            r = await client.call_tool("region", {"region": "Zürich", "count": 2})
            assert r.content[0].text == "Zürich/2"  # type: ignore[union-attr]
        await eventually(lambda: app.streamable.session_count == 0)


async def test_official_python_client_hears_the_cancel_of_an_elicitation_its_cancelled_call_had_made() -> None:
    """The official client cancels a tool call while it answers the tool's elicitation: the server cancels the tool
    and sends ``notifications/cancelled`` for its elicitation request. That notification went out on the call's
    SSE stream after the stream had ended (a cancelled request gets no answer) and was lost, so the client's
    elicitation ran to its end. Now a message sent for a request whose stream has ended goes on the GET stream."""
    from mcp import Client, types

    state: dict[str, Any] = {"started": asyncio.Event()}

    async def elicit(ctx: Any, params: Any) -> Any:
        state["started"].set()
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        state["finished"] = True
        return types.ElicitResult(action="accept", content={"name": "late"})

    async with (
        running(make_server()) as (base, _),
        Client(base + "/mcp", mode="legacy", elicitation_callback=elicit) as client,  # type: ignore[arg-type]
    ):
        call = asyncio.ensure_future(client.call_tool("ask", {}))
        await asyncio.wait_for(state["started"].wait(), 10)
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await call
        await eventually(lambda: "cancelled" in state or "finished" in state, timeout=8)
        assert state.get("cancelled") is True and "finished" not in state
        r = await client.call_tool("echo", {"text": "still here"})
        assert r.content[0].text == "still here"  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def official_server(**options: Any) -> AsyncIterator[str]:
    from mcp.server.mcpserver import MCPServer

    official = MCPServer("official-http")

    @official.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    app = official.streamable_http_app(**options)
    async with serve_asgi(app) as port:
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize(("mode", "json_response"), [("handshake", False), ("handshake", True), ("auto", False)])
async def test_our_client_against_the_official_python_server(mode: str, json_response: bool) -> None:
    async with official_server(json_response=json_response) as url:
        transport = StreamableHTTPClientTransport(url)
        async with ClientSession(transport, mode=mode) as cs:
            assert cs.server_info is not None and cs.server_info["name"] == "official-http"
            assert [t.name for t in (await cs.list_tools()).tools] == ["add"]
            r = await cs.call_tool("add", {"a": 2, "b": 3})
            assert r.content[0].text == "5"  # type: ignore[union-attr]
            if mode == "handshake":
                assert transport.session_id is not None


@contextlib.asynccontextmanager
async def ts_v2_server(node: Path) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        str(node),
        str(INTEROP / "ts_server_v2.mjs"),
        "--http",
        "--port",
        "0",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=str(TESTS),
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        yield json.loads(line)["listening"]
    finally:
        proc.terminate()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(proc.wait(), 5)


@pytest.mark.npm
@pytest.mark.parametrize("mode", ["handshake", "auto"])
async def test_our_client_against_the_typescript_v2_server(node_bin: Path, mode: str) -> None:
    async with ts_v2_server(node_bin) as url, ClientSession(StreamableHTTPClientTransport(url), mode=mode) as cs:
        assert cs.modern == (mode == "auto")
        tools = (await cs.list_tools()).tools
        assert tools
        names = [t.name for t in tools]
        assert "echo" in names
        r = await cs.call_tool("echo", {"text": "ts"})
        assert "ts" in r.content[0].text  # type: ignore[union-attr]


async def test_official_python_client_steps_up_a_scope_at_mcpkits_authorization_server() -> None:
    """The official client (mcp 2.3.0, ``OAuthClientProvider``) against a protected mcpkit server whose resource
    metadata lists only the minimal scope (MCP 2025-11-25) and a tool that needs one more: it registers with the
    minimal scope, signs in, and steps up on the tool's 403. mcpkit's authorization server kept the registration
    scope as the client's cap: the step-up was refused (invalid_scope) and the call failed."""
    import httpx
    import httpx2
    from mcp import ClientSession as OfficialSession
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

    from mcpkit import MCPKit
    from mcpkit.auth import AuthorizationServer, JWTVerifier, protect, tool_scopes
    from support.oauth import serve

    app = MCPKit("step-up")

    @app.tool
    def admin() -> str:
        """Needs mcp:admin."""
        return "admin ok"

    def make(base: str) -> AuthorizationServer:
        authz = AuthorizationServer(base, auto_approve=True, resources=[base + "/mcp"])
        authz.app = protect(
            create_app(app),
            resource=base + "/mcp",
            verifier=JWTVerifier(issuer=base, audience=base + "/mcp", keys={authz.kid: authz.key.public_key()}),
            authorization_servers=[base],
            required_scopes=["mcp:read"],
            scope_rule=tool_scopes({"admin": ["mcp:admin"]}),
        )
        return authz

    class Storage:
        tokens: OAuthToken | None = None
        client: OAuthClientInformationFull | None = None

        async def get_tokens(self) -> OAuthToken | None:
            return self.tokens

        async def set_tokens(self, tokens: OAuthToken) -> None:
            self.tokens = tokens

        async def get_client_info(self) -> OAuthClientInformationFull | None:
            return self.client

        async def set_client_info(self, info: OAuthClientInformationFull) -> None:
            self.client = info

    asked: list[str] = []
    redirect: dict[str, str] = {}

    async def follow(url: str) -> None:  # the user-agent: the authorization server approves by itself
        query = dict(parse_qsl(urlsplit(url).query))
        asked.append(query.get("scope", ""))
        async with httpx.AsyncClient() as browser:
            location = (await browser.get(url)).headers["location"]
        redirect.clear()
        redirect.update(parse_qsl(urlsplit(location).query))

    async def callback() -> AuthorizationCodeResult:
        assert "code" in redirect, redirect  # an error here: the authorization server refused
        return AuthorizationCodeResult(code=redirect["code"], state=redirect.get("state"), iss=redirect.get("iss"))

    async with serve(make) as (base, _):
        provider = OAuthClientProvider(
            base + "/mcp",
            OAuthClientMetadata(redirect_uris=["http://127.0.0.1:3999/callback"], client_name="official"),  # type: ignore[list-item]
            Storage(),
            follow,
            callback,
        )
        async with (
            httpx2.AsyncClient(auth=provider) as http,
            streamable_http_client(base + "/mcp", http_client=http) as (read, write),
            OfficialSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("admin", {})
            assert result.content[0].text == "admin ok"  # type: ignore[union-attr]
    # signed in with the minimal scope, then stepped up keeping it
    assert len(asked) == 2 and asked[0] == "mcp:read" and set(asked[1].split()) == {"mcp:read", "mcp:admin"}
