"""Issue 12 (security and limits), the authorization and OAuth items: every test is an attack that worked on
91956f7 and must now fail. Everything is real: the protected mcpkit app and the development authorization server
on uvicorn at 127.0.0.1, raw httpx / websockets clients playing the attacker."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect

from mcpkit import Context, MCPKit
from mcpkit.auth import AuthorizationServer, JWTVerifier, current_access_token, protect, tool_scopes
from mcpkit.transports.http import create_app
from test_auth import _forge, serve, stack
from test_http_support import initialize_body, modern_body, modern_headers

HS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def _call(rid: int, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": args or {}}}


# ---------------------------------------------------------------------------------------------------- item 1
async def test_issue12_item1_websocket_and_batches_pass_the_same_scope_rule() -> None:
    """A token holding only mcp:read ran the admin tool over /ws (the scope rule only ran for HTTP POST). Now the
    dispatcher takes the one decision for every transport and for each item of a batch."""
    async with stack(scope_rule=tool_scopes({"admin": ["mcp:admin"]})) as s:
        reader = _forge(s["as"], aud=s["mcp_url"], scope="mcp:read")
        admin = _forge(s["as"], aud=s["mcp_url"], scope="mcp:read mcp:admin")
        ws_url = s["rs_base"].replace("http://", "ws://") + "/ws"

        async def over_ws(token: str) -> list[Any]:
            async with connect(
                ws_url,
                subprotocols=["mcp"],  # type: ignore[list-item]
                additional_headers={"authorization": f"Bearer {token}"},
            ) as ws:
                await ws.send(orjson.dumps(initialize_body("2025-06-18")).decode())
                assert "result" in orjson.loads(await ws.recv())
                await ws.send(orjson.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).decode())
                await ws.send(orjson.dumps(_call(2, "admin")).decode())
                single = orjson.loads(await ws.recv())
                await ws.send(orjson.dumps([_call(3, "whoami"), _call(4, "admin")]).decode())
                batch = orjson.loads(await ws.recv())
                return [single, sorted(batch, key=lambda m: m["id"])]

        single, batch = await over_ws(reader)
        assert single["error"]["code"] == -32003 and single["error"]["data"]["scopes"] == ["mcp:admin"]
        assert "mcp:admin" in single["error"]["message"]
        assert "result" in batch[0] and batch[1]["error"]["code"] == -32003  # only the forbidden item is refused
        single, batch = await over_ws(admin)
        assert single["result"]["content"][0]["text"] == "admin ok"
        assert "result" in batch[1]

        # the same decision over POST /mcp still answers 403 + step-up challenge
        async with httpx.AsyncClient() as http:
            r = await http.post(s["mcp_url"], json=initialize_body("2025-06-18"), headers=_bearer(reader))
            sid = r.headers["mcp-session-id"]
            r = await http.post(
                s["mcp_url"], json=_call(2, "admin"), headers={**_bearer(reader), "mcp-session-id": sid}
            )
            assert r.status_code == 403 and "insufficient_scope" in r.headers["www-authenticate"]


def _bearer(token: str, sid: str | None = None) -> dict[str, str]:
    return {**HS, "authorization": f"Bearer {token}", **({"mcp-session-id": sid} if sid else {})}


# ---------------------------------------------------------------------------------------------------- item 4
async def test_issue12_item4_body_larger_than_the_authorizer_limit_is_refused_413() -> None:
    """A body over protect's max_body skipped the scope rule (fail open): admin ran without mcp:admin. Now 413."""
    async with stack(scope_rule=tool_scopes({"admin": ["mcp:admin"]}), rs_options={"max_body": 64 * 1024}) as s:
        reader = _forge(s["as"], aud=s["mcp_url"], scope="mcp:read")
        async with httpx.AsyncClient() as http:
            r = await http.post(s["mcp_url"], json=initialize_body("2025-06-18"), headers=_bearer(reader))
            sid = r.headers["mcp-session-id"]
            big = _call(2, "admin", {"pad": "x" * (256 * 1024)})
            r = await http.post(s["mcp_url"], json=big, headers=_bearer(reader, sid))
            assert r.status_code == 413
            assert "max_body" in r.json()["error_description"]
            # the session goes on
            r = await http.post(
                s["mcp_url"], json=_call(3, "whoami"), headers={**_bearer(reader), "mcp-session-id": sid}
            )
            assert r.status_code == 200 and "mallory" in r.text


# ---------------------------------------------------------------------------------------------------- item 9
def _asking_server() -> MCPKit:
    app = MCPKit("rs-test", version="1.0.0")

    @app.tool
    async def ask(ctx: Context) -> str:
        """Asks the caller a question (an input round in 2026-07-28)."""
        answer = await ctx.elicit("name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        tok = current_access_token()
        return f"{tok.subject if tok else None}:{(answer.content or {}).get('name')}"

    return app


async def test_issue12_item9_request_state_is_bound_to_the_principal() -> None:
    """alice's sealed requestState was accepted with mallory's token (the principal was never set)."""
    holder: dict[str, Any] = {}

    def make_as(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, auto_approve=True)
        return holder["as"]

    async with serve(make_as) as (as_url, _):

        def make_rs(base: str) -> Any:
            resource = base + "/mcp"
            holder["url"] = resource
            verifier = JWTVerifier(issuer=as_url, audience=resource, jwks_url=as_url + "/jwks")
            return protect(create_app(_asking_server()), resource=resource, verifier=verifier)

        async with serve(make_rs) as _rs, httpx.AsyncClient() as http:
            url = holder["url"]
            alice = _forge(holder["as"], aud=url, sub="alice")
            mallory = _forge(holder["as"], aud=url, sub="mallory")
            caps = {"elicitation": {}}
            body = modern_body("tools/call", {"name": "ask", "arguments": {}}, caps=caps)
            headers = modern_headers("tools/call", "ask")
            r = await http.post(url, json=body, headers={**headers, "authorization": f"Bearer {alice}"})
            first = r.json()["result"]
            assert first["resultType"] == "input_required"
            key = next(iter(first["inputRequests"]))
            answers = {key: {"action": "accept", "content": {"name": "Alice"}}}
            params = {"name": "ask", "arguments": {}, "requestState": first["requestState"], "inputResponses": answers}
            again = modern_body("tools/call", params, rid=2, caps=caps)
            stolen = await http.post(url, json=again, headers={**headers, "authorization": f"Bearer {mallory}"})
            err = stolen.json()["error"]
            assert err["code"] == -32602 and "different principal" in err["message"]
            ok = await http.post(url, json=again, headers={**headers, "authorization": f"Bearer {alice}"})
            assert ok.json()["result"]["content"][0]["text"] == "alice:Alice"


# ---------------------------------------------------------------------------------------------------- item 10
async def test_issue12_item10_simple_template_variable_never_matches_a_decoded_slash(tmp_path: Any) -> None:
    """``%2F`` was decoded into ``/`` for a simple ``{name}``: a template joining it onto a directory read a file
    outside it. Now no non-reserved form matches a decoded ``/``; ``{+path}`` (reserved) is the explicit opt-in."""
    from mcpkit.client.client import Client
    from mcpkit.protocol.errors import MCPError
    from mcpkit.server.uri_template import UriTemplate

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "readme.txt").write_text("public")
    (tmp_path / "secret.txt").write_text("SECRET")
    app = MCPKit("files", version="1.0.0")

    @app.resource("file://docs/{name}")
    def doc(name: str) -> str:
        """A file of the docs directory (joined naively, as the attacker hopes)."""
        return (docs / name).read_text()

    async with Client(app) as c:
        ok = await c.read_resource("file://docs/readme.txt")
        assert "public" in str(ok)
        for smuggled in (
            "file://docs/..%2Fsecret.txt",
            "file://docs/..%2fsecret.txt",
            "file://docs/%2E%2E%2Fsecret.txt",
        ):
            with pytest.raises(MCPError) as err:
                await c.read_resource(smuggled)
            assert "SECRET" not in str(err.value)
    for template, uri in [
        ("a://x/{.ext}", "a://x/.a%2Fb"),
        ("a://x{/seg}", "a://x/a%2Fb"),
        ("a://x{;p}", "a://x;p=a%2Fb"),
        ("a://x{?q}", "a://x?q=a%2Fb"),
    ]:
        assert UriTemplate(template).match(uri) is None, template
    assert UriTemplate("a://x/{+path}").match("a://x/a%2Fb") == {"path": "a/b"}  # reserved form: opt-in
    assert UriTemplate("a://x{#frag}").match("a://x#a/b") == {"frag": "a/b"}
