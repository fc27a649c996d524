"""Issue 12 (security and limits), the authorization and OAuth items: every test is an attack that worked on
91956f7 and must now fail. Everything is real: the protected mcpkit app and the development authorization server
on uvicorn at 127.0.0.1, raw httpx / websockets clients playing the attacker."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import orjson
import pytest
from websockets.asyncio.client import connect

from mcpkit import Context, MCPKit
from mcpkit.auth import (
    AccessToken,
    AuthorizationServer,
    HeadlessBrowser,
    JWTVerifier,
    OAuthClient,
    OAuthFlowError,
    StaticTokenVerifier,
    current_access_token,
    protect,
    tool_scopes,
)
from mcpkit.transports.http import create_app
from support.mcp_http import initialize_body, modern_body, modern_headers
from support.oauth import REDIRECT, _forge, code_grant, serve, stack
from support.paths import REPO
from support.redis_server import redis_url  # noqa: F401  (the session fixture)

HS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def _call(rid: int, name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": args or {}}}


# ---------------------------------------------------------------------------------------------------- item 1
async def test_websocket_and_batches_pass_the_same_scope_rule() -> None:
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
async def test_body_larger_than_the_authorizer_limit_is_refused_413() -> None:
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


async def test_request_state_is_bound_to_the_principal() -> None:
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
async def test_simple_template_variable_never_matches_a_decoded_slash(tmp_path: Any) -> None:
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
        ("file://docs/{dir}/{name}", "file://docs/../secret.txt"),  # dot segments, literal or encoded
        ("file://docs/{dir}/{name}", "file://docs/%2E%2E/secret.txt"),
        ("file://docs/{dir}/{name}", "file://docs/./secret.txt"),
    ]:
        assert UriTemplate(template).match(uri) is None, template
    assert UriTemplate("a://x/{+path}").match("a://x/a%2Fb") == {"path": "a/b"}  # reserved form: opt-in
    assert UriTemplate("a://x{#frag}").match("a://x#a/b") == {"frag": "a/b"}


# ---------------------------------------------------------------------------------------------------- helpers (AS)
def _basic(client_id: str, secret: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()}


async def _code_tokens(
    http: httpx.AsyncClient,
    base: str,
    client_id: str,
    secret: str | None = None,
    scope: str | None = None,
    resource: str | None = None,
) -> dict[str, Any]:
    """Run /authorize (auto-approved) and /token for ``client_id`` (its secret, if any, in a Basic header): the token
    response, or the refused authorization's parameters; with the form sent to /token (``_form``, to replay; empty
    when the authorization was refused) and the status (``_status``)."""
    asked = {**({"scope": scope} if scope else {}), **({"resource": resource} if resource else {})}
    form = {"resource": resource} if resource else None
    r = await code_grant(http, base, client_id, query=asked, form=form, auth=(client_id, secret) if secret else None)
    return {**r.json(), "_form": dict(parse_qsl(r.request.content.decode())), "_status": r.status_code}


@contextlib.asynccontextmanager
async def _as(**options: Any) -> AsyncIterator[tuple[str, AuthorizationServer]]:
    holder: dict[str, AuthorizationServer] = {}

    def make(base: str) -> AuthorizationServer:
        holder["as"] = AuthorizationServer(base, **options)
        return holder["as"]

    async with serve(make) as (base, _):
        yield base, holder["as"]


async def _deny_all(_: Any) -> str | None:
    return None


# ---------------------------------------------------------------------------------------------------- item 2
@pytest.mark.req("M031")
async def test_self_registered_clients_get_only_policy_scopes_and_the_approver_decides() -> None:
    """Anyone could self-register a client_credentials client and mint mcp:admin; a deny-all approver was never
    consulted. Now: client_credentials is off for self-registered clients, the approver decides every grant, and a
    registered client is only ever granted the scopes the registration policy gave it."""
    scopes = ["mcp:read", "mcp:admin"]
    cc = {"grant_types": ["client_credentials"], "token_endpoint_auth_method": "client_secret_basic"}
    async with _as(approver=_deny_all, scopes_supported=scopes) as (base, authz), httpx.AsyncClient() as http:
        r = await http.post(base + "/register", json={**cc, "scope": "mcp:admin"})
        assert r.status_code == 400 and "registration_client_credentials" in r.json()["error_description"]
        # a pre-registered machine client is still refused by a deny-all approver
        rec = await authz.register_client(
            grant_types=["client_credentials"], token_endpoint_auth_method="client_secret_basic"
        )
        assert rec.client_secret is not None
        r = await http.post(
            base + "/token", data={"grant_type": "client_credentials"}, headers=_basic(rec.client_id, rec.client_secret)
        )
        assert r.status_code == 400 and r.json()["error"] == "access_denied"
    async with (
        _as(approver=_deny_all, scopes_supported=scopes, registration_client_credentials=True) as (base, _),
        httpx.AsyncClient() as http,
    ):
        info = (await http.post(base + "/register", json={**cc, "scope": "mcp:admin"})).json()
        r = await http.post(
            base + "/token",
            data={"grant_type": "client_credentials", "scope": "mcp:admin"},
            headers=_basic(info["client_id"], info["client_secret"]),
        )
        assert r.status_code == 400 and r.json()["error"] == "access_denied" and "access_token" not in r.json()
    async with (
        _as(auto_approve=True, scopes_supported=scopes, registration_scopes=["mcp:read"]) as (base, _),
        httpx.AsyncClient() as http,
    ):
        reg = await http.post(
            base + "/register",
            json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "scope": "mcp:read mcp:admin"},
        )
        assert reg.status_code == 201 and reg.json()["scope"] == "mcp:read"  # narrowed to the policy
        cid = reg.json()["client_id"]
        assert (await _code_tokens(http, base, cid, scope="mcp:admin"))["error"] == "invalid_scope"
        ok = await _code_tokens(http, base, cid, scope="mcp:read")
        assert ok["_status"] == 200 and ok["scope"] == "mcp:read"


async def test_a_self_registered_client_may_step_up_to_any_scope_of_the_registration_policy() -> None:
    """MCP (2025-11-25) keeps ``scopes_supported`` minimal and adds scopes by step-up; the official clients
    register with ``scope`` set to those minimal scopes. The registration ``scope`` was kept as the client's cap
    for good, so every step-up was ``invalid_scope`` (scope not allowed for this client). A self-registered client
    may ask for any scope of the registration policy (``registration_scopes``, else ``scopes_supported``, else
    any); each authorization still goes to the approver."""
    for options in ({}, {"scopes_supported": ["mcp:read", "mcp:admin"]}):
        async with _as(auto_approve=True, **options) as (base, _), httpx.AsyncClient() as http:
            reg = await http.post(
                base + "/register",
                json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "scope": "mcp:read"},
            )
            assert reg.status_code == 201, reg.text
            cid = reg.json()["client_id"]
            stepped = await _code_tokens(http, base, cid, scope="mcp:read mcp:admin")
            assert stepped["_status"] == 200, (options, stepped)
            assert stepped["scope"] == "mcp:read mcp:admin"
            if "scopes_supported" in options:
                assert reg.json()["scope"] == "mcp:read mcp:admin"  # RFC 7591 §3.2.1: what it was granted
                refused = await _code_tokens(http, base, cid, scope="mcp:root")
                assert refused["error"] == "invalid_scope"  # outside the policy: still refused


# ---------------------------------------------------------------------------------------------------- item 7 (auth)
async def test_registration_is_size_capped_rate_limited_and_never_evicts_preregistered() -> None:
    """DCR metadata had no size cap and a registration flood evicted pre-registered clients."""
    from mcpkit.auth import InMemoryAuthStorage

    async with (
        _as(auto_approve=True, storage=InMemoryAuthStorage(max_entries=8)) as (base, authz),
        httpx.AsyncClient() as http,
    ):
        pre = await authz.register_client(redirect_uris=[REDIRECT], client_id="pre-registered")
        small = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
        for _ in range(16):  # a flood twice the table
            assert (await http.post(base + "/register", json=small)).status_code == 201
        assert await authz.storage.get_client(pre.client_id) is not None
        assert (await _code_tokens(http, base, pre.client_id))["_status"] == 200
        big = {**small, "client_name": "x" * (1 << 20)}
        r = await http.post(base + "/register", json=big)
        assert r.status_code == 413 and "max_client_metadata" in r.json()["error_description"]
        # the default rate: 20 per minute per address (the 413 attempt counted too)
        codes = [(await http.post(base + "/register", json=small)).status_code for _ in range(5)]
        assert codes == [201, 201, 201, 429, 429]
        assert (await http.post(base + "/register", json=small)).headers["retry-after"] == "60"
    # a cap on self-registered clients: the oldest self-registered ones make room, never a pre-registered one
    async with (
        _as(auto_approve=True, max_dynamic_clients=3, registration_rate=None) as (base, authz),
        httpx.AsyncClient() as http,
    ):
        pre = await authz.register_client(redirect_uris=[REDIRECT], client_id="pre-registered")
        ids = [(await http.post(base + "/register", json=small)).json()["client_id"] for _ in range(10)]
        kept = [cid for cid in ids if await authz.storage.get_client(cid) is not None]
        assert kept == ids[-3:] and await authz.storage.get_client(pre.client_id) is not None


# ---------------------------------------------------------------------------------------------------- item 11
@pytest.mark.req("M031")
async def test_introspection_is_scoped_and_replay_or_reuse_revokes_the_family() -> None:
    """Any confidential client introspected anyone's token; tokens issued from a replayed code stayed valid; a
    reused refresh token did not revoke its rotated successor."""
    async with _as(auto_approve=True) as (base, authz), httpx.AsyncClient() as http:
        conf = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "client_secret_basic"}
        alice = (await http.post(base + "/register", json=conf)).json()
        mallory = (await http.post(base + "/register", json=conf)).json()
        tokens = await _code_tokens(http, base, alice["client_id"], alice["client_secret"])
        assert tokens["_status"] == 200

        async def introspect(who: tuple[str, str], token: str) -> bool:
            r = await http.post(base + "/introspect", data={"token": token}, headers=_basic(*who))
            return bool(r.json()["active"])

        me = (alice["client_id"], alice["client_secret"])
        assert not await introspect((mallory["client_id"], mallory["client_secret"]), tokens["access_token"])
        assert await introspect(me, tokens["access_token"])
        rs = await authz.register_client(token_endpoint_auth_method="client_secret_basic", resource_server=True)
        assert rs.client_secret is not None
        assert await introspect((rs.client_id, rs.client_secret), tokens["access_token"])
        # a replayed code revokes what it issued
        replay = await http.post(base + "/token", data=tokens["_form"], headers=_basic(*me))
        assert replay.status_code == 400
        assert not await introspect((rs.client_id, rs.client_secret), tokens["access_token"])
        refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
        assert (await http.post(base + "/token", data=refresh, headers=_basic(*me))).status_code == 400
        # refresh-token reuse revokes the whole family
        fresh = await _code_tokens(http, base, alice["client_id"], alice["client_secret"])
        old = {"grant_type": "refresh_token", "refresh_token": fresh["refresh_token"]}
        rotated = (await http.post(base + "/token", data=old, headers=_basic(*me))).json()
        assert (await http.post(base + "/token", data=old, headers=_basic(*me))).status_code == 400  # reuse
        successor = {"grant_type": "refresh_token", "refresh_token": rotated["refresh_token"]}
        assert (await http.post(base + "/token", data=successor, headers=_basic(*me))).status_code == 400
        assert not await introspect((rs.client_id, rs.client_secret), rotated["access_token"])


@pytest.mark.req("M038")
async def test_every_verifier_error_is_a_401_hs256_included() -> None:
    """With HS256 enabled by an operator next to an EC key, an HS256 token raised TypeError: a 500."""
    import jwt as pyjwt
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    resource = "http://127.0.0.1:7/mcp"
    verifier = JWTVerifier(
        issuer="iss", audience=resource, keys={"k1": key.public_key()}, algorithms=["ES256", "HS256"]
    )
    app = protect(create_app(MCPKit("x")), resource=resource, verifier=verifier)
    claims = {"iss": "iss", "aud": resource, "sub": "m", "exp": int(time.time()) + 60}
    hs = pyjwt.encode(claims, "secret-secret-secret-secret-secret", algorithm="HS256", headers={"kid": "k1"})
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport) as local:
        r = await local.post(resource, json=initialize_body("2025-06-18"), headers=_bearer(hs))
        assert r.status_code == 401 and "invalid_token" in r.headers["www-authenticate"]
        good = pyjwt.encode(claims, key, algorithm="ES256", headers={"kid": "k1"})
        r = await local.post(resource, json=initialize_body("2025-06-18"), headers=_bearer(good))
        assert r.status_code == 200


# ---------------------------------------------------------------------------------------------------- item 8 (+ 7)
def _hostile_rs(docs: dict[str, Any]) -> Callable[[str], Any]:
    """A resource server answering every /mcp request 401 with a challenge, and serving ``docs[path]`` (a
    callable of the base URL giving a JSON value, or raw bytes)."""

    def factory(base: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            path = scope["path"]
            if path == "/mcp":
                challenge = docs["challenge"](base).encode()
                await send(
                    {"type": "http.response.start", "status": 401, "headers": [(b"www-authenticate", challenge)]}
                )
                await send({"type": "http.response.body", "body": b""})
                return
            doc = docs.get(path)
            if doc is None:
                await send({"type": "http.response.start", "status": 404, "headers": []})
                await send({"type": "http.response.body", "body": b""})
                return
            body = doc if isinstance(doc, bytes) else orjson.dumps(doc(base))
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": body})

        return app

    return factory


async def _flow(url: str, **options: Any) -> tuple[OAuthClient, BaseException | None]:
    auth = OAuthClient(
        url,
        client_metadata={"client_name": "ssrf-test", "redirect_uris": [REDIRECT]},
        redirect_handler=HeadlessBrowser().redirect_handler,
        callback_handler=HeadlessBrowser().callback_handler,
        timeout=2.0,
        **options,
    )
    error: BaseException | None = None
    try:
        async with httpx.AsyncClient(auth=auth, timeout=5.0) as http:
            await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
    except Exception as exc:  # what the flow raised is examined by the test
        error = exc
    await auth.aclose()
    return auth, error


@pytest.mark.req("M031")
async def test_oauth_client_never_fetches_what_a_hostile_server_names() -> None:
    """OAuthClient fetched any resource_metadata URL a 401 named (http://169.254.169.254/... included) and accepted
    a plain-http issuer on a private address; it read metadata documents of any size."""
    prm_path = "/.well-known/oauth-protected-resource/mcp"
    # 1. a resource_metadata URL pointing at the cloud metadata service / another origin is never fetched
    docs: dict[str, Any] = {
        "challenge": lambda base: 'Bearer resource_metadata="http://169.254.169.254/latest/meta-data/iam"',
    }
    async with serve(_hostile_rs(docs)) as (base, _):
        auth, _err = await _flow(base + "/mcp")
        assert not any(line.startswith("GET http://169.254") for line in auth.log), auth.log
        assert any("ignored resource_metadata on another origin" in line for line in auth.log)
    # 2. a PRM naming a plain-http issuer on a private / link-local address: refused before any request to it
    for issuer in ("http://10.1.2.3:9", "https://169.254.169.254", "https://[fd00::1]:9"):
        docs = {
            "challenge": lambda base: f'Bearer resource_metadata="{base}{prm_path}"',
            prm_path: lambda base, issuer=issuer: {"resource": base + "/mcp", "authorization_servers": [issuer]},
        }
        async with serve(_hostile_rs(docs)) as (base, _):
            auth, err = await _flow(base + "/mcp")
            assert isinstance(err, OAuthFlowError), (issuer, err)
            assert not any(issuer.split("//")[1] in line for line in auth.log if line.startswith("GET")), auth.log
            assert "https" in str(err) or "allow_private_network" in str(err)
    # 3. (item 7) a metadata document far over the cap is not read
    huge = orjson.dumps({"resource": "x", "authorization_servers": ["https://as.example"], "pad": "x" * (8 << 20)})
    docs = {"challenge": lambda base: f'Bearer resource_metadata="{base}{prm_path}"', prm_path: huge}
    async with serve(_hostile_rs(docs)) as (base, _):
        auth, err = await _flow(base + "/mcp")
        assert isinstance(err, OAuthFlowError) and "max_document_size" in str(err)


async def test_request_state_is_bound_to_the_session_where_there_is_one() -> None:
    """A modern requestState sealed on one WebSocket session is refused on another (same principal), accepted on
    its own."""
    async with serve(lambda base: create_app(_asking_server())) as (base, _):
        ws_url = base.replace("http://", "ws://") + "/ws"
        caps = {"elicitation": {}}
        async with (
            connect(ws_url, subprotocols=["mcp"]) as one,  # type: ignore[list-item]
            connect(ws_url, subprotocols=["mcp"]) as other,  # type: ignore[list-item]
        ):
            await one.send(
                orjson.dumps(modern_body("tools/call", {"name": "ask", "arguments": {}}, caps=caps)).decode()
            )
            first = orjson.loads(await one.recv())["result"]
            assert first["resultType"] == "input_required"
            key = next(iter(first["inputRequests"]))
            params = {
                "name": "ask",
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {key: {"action": "accept", "content": {"name": "Bob"}}},
            }
            again = orjson.dumps(modern_body("tools/call", params, rid=2, caps=caps)).decode()
            await other.send(again)
            err = orjson.loads(await other.recv())["error"]
            assert err["code"] == -32602 and "different session" in err["message"]
            await one.send(again)
            assert orjson.loads(await one.recv())["result"]["content"][0]["text"] == "None:Bob"


class _ExpiringApp:
    """A protected app whose only token, ``t``, expires ``seconds`` after the app is made (no leeway: a static
    token); ``expires_at`` is that moment, for tests to measure a stream's end against the token's expiry rather
    than against the stream's start (which, on a loaded machine, may come well after the app was made)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expires_at = 0.0

    def __call__(self, base: str) -> Any:
        self.expires_at = time.time() + self.seconds
        verifier = StaticTokenVerifier.simple({"t": ["mcp:read"]}, audience=base + "/mcp", expires_at=self.expires_at)
        return protect(create_app(_asking_server()), resource=base + "/mcp", verifier=verifier)

    def ended_at_expiry(self) -> bool:
        """Now is when the token expired (not before it, within 3 s after it)."""
        return self.expires_at - 0.25 <= time.time() < self.expires_at + 3


def _expiring_app(seconds: float) -> _ExpiringApp:
    return _ExpiringApp(seconds)


@pytest.mark.req("M038")
async def test_a_websocket_does_not_outlive_its_token() -> None:
    """The WebSocket was authorized once, at the upgrade: it kept running tools after its token expired; then it
    refused them (-32003) but stayed open, so server notifications kept reaching it. Now it is closed with 1008
    when the token expires, and the reason says why (the client gets a fresh token and reconnects)."""
    from websockets.exceptions import ConnectionClosed as WSClosed

    app = _expiring_app(2.5)
    async with serve(app) as (base, _):
        ws_url = base.replace("http://", "ws://") + "/ws"
        async with connect(ws_url, subprotocols=["mcp"], additional_headers={"authorization": "Bearer t"}) as ws:  # type: ignore[list-item]
            await ws.send(orjson.dumps(initialize_body("2025-06-18")).decode())
            assert "result" in orjson.loads(await ws.recv())
            await ws.send(orjson.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).decode())
            assert "result" in orjson.loads(await ws.recv())
            with pytest.raises(WSClosed):
                await asyncio.wait_for(ws.recv(), 10)
            assert app.ended_at_expiry(), (time.time(), app.expires_at)
            assert ws.close_code == 1008
            assert ws.close_reason is not None and "access token" in ws.close_reason and "expired" in ws.close_reason


async def test_a_legacy_sse_stream_ends_when_its_token_expires() -> None:
    """A legacy SSE stream opened with a token kept receiving server messages after the token expired (only its
    POSTs were refused). Now the stream, and its session, end when the token expires."""
    app = _expiring_app(2.5)
    async with serve(app) as (base, _), httpx.AsyncClient(timeout=10) as http:
        headers = {"authorization": "Bearer t", "accept": "text/event-stream"}
        async with http.stream("GET", base + "/sse", headers=headers) as r:
            assert r.status_code == 200
            lines = r.aiter_lines()
            assert (await asyncio.wait_for(lines.__anext__(), 5)) == "event: endpoint"
            endpoint = (await asyncio.wait_for(lines.__anext__(), 5)).removeprefix("data: ")
            with contextlib.suppress(StopAsyncIteration):
                while True:  # the stream ends (no keep-alive comment comes for 15 s)
                    await asyncio.wait_for(lines.__anext__(), 10)
            assert app.ended_at_expiry(), (time.time(), app.expires_at)
        auth = {"authorization": "Bearer t"}
        gone = await http.post(base + endpoint, json=initialize_body("2024-11-05"), headers=auth)
        assert gone.status_code == 401  # (the token itself is refused now)


async def test_a_streamable_http_get_stream_ends_when_its_token_expires() -> None:
    """The session's standalone GET stream outlived the token it was opened with (only requests were refused).
    Now it ends when the token expires; the client opens it again with a fresh token."""
    app = _expiring_app(2.5)
    async with serve(app) as (base, _), httpx.AsyncClient(timeout=10) as http:
        auth = {"authorization": "Bearer t"}
        init = await http.post(base + "/mcp", json=initialize_body("2025-06-18"), headers={**HS, **auth})
        assert init.status_code == 200
        sid = init.headers["mcp-session-id"]
        session = {**HS, **auth, "mcp-session-id": sid}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(base + "/mcp", json=note, headers=session)).status_code == 202
        get_headers = {**session, "accept": "text/event-stream"}
        async with http.stream("GET", base + "/mcp", headers=get_headers) as r:
            assert r.status_code == 200
            with contextlib.suppress(StopAsyncIteration):
                lines = r.aiter_lines()
                while True:
                    await asyncio.wait_for(lines.__anext__(), 10)
            assert app.ended_at_expiry(), (time.time(), app.expires_at)


async def test_a_modern_listen_stream_ends_when_its_token_expires() -> None:
    """A 2026-07-28 ``subscriptions/listen`` stream is as long-lived as a GET stream: it ends (with its result) when
    the token it was opened with expires, and the client listens again with a fresh token."""
    app = _expiring_app(2.5)
    async with serve(app) as (base, _), httpx.AsyncClient(timeout=10) as http:
        listen = modern_body("subscriptions/listen", {"notifications": {"toolsListChanged": True}}, rid=41)
        headers = {**modern_headers("subscriptions/listen"), "authorization": "Bearer t"}
        async with http.stream("POST", base + "/mcp", json=listen, headers=headers) as r:
            assert r.status_code == 200
            seen: list[str] = []
            with contextlib.suppress(StopAsyncIteration):
                lines = r.aiter_lines()
                while True:
                    seen.append(await asyncio.wait_for(lines.__anext__(), 10))
            assert app.ended_at_expiry(), (time.time(), app.expires_at)
        final = orjson.loads(next(x for x in reversed(seen) if x.startswith("data: "))[6:])
        assert final["id"] == 41 and "result" in final


async def test_jwks_and_introspection_answers_are_read_with_a_cap() -> None:
    """The resource server's verifiers read JWKS and introspection answers of any size."""
    import jwt as pyjwt
    from cryptography.hazmat.primitives.asymmetric import ec

    from mcpkit.auth import IntrospectionVerifier, InvalidToken

    huge = orjson.dumps({"keys": [], "active": True, "pad": "x" * (4 << 20)})

    def factory(base: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": huge})

        return app

    async with serve(factory) as (base, _):
        jwks = JWTVerifier(issuer="iss", audience="aud", jwks_url=base + "/jwks")
        key = ec.generate_private_key(ec.SECP256R1())
        token = pyjwt.encode({"exp": int(time.time()) + 60}, key, algorithm="ES256", headers={"kid": "x"})
        with pytest.raises(InvalidToken, match="max_document_size"):
            await jwks.verify(token)
        # (issue 14 item 5: both verifiers read through one helper, so this error names its option too)
        with pytest.raises(InvalidToken, match=r"more than .*\(IntrospectionVerifier\(max_document_size=\.\.\.\)\)"):
            await IntrospectionVerifier(base + "/introspect").verify("t")


async def test_the_session_binding_table_evicts_idle_bindings_not_live_ones() -> None:
    """The table binding sessions to principals is bounded (max_bound_sessions); when full it evicted the oldest
    binding even while that session was in use, leaving it open to any principal. Now the least recently used goes."""
    async with stack(rs_options={"max_bound_sessions": 2}) as s, httpx.AsyncClient() as http:
        tokens = {who: _forge(s["as"], aud=s["mcp_url"], sub=who) for who in ("alice", "bob", "carol")}

        async def open_session(who: str) -> str:
            r = await http.post(s["mcp_url"], json=initialize_body("2025-06-18"), headers=_bearer(tokens[who]))
            return str(r.headers["mcp-session-id"])

        async def ping(who: str, sid: str) -> int:
            ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
            return (await http.post(s["mcp_url"], json=ping, headers=_bearer(tokens[who], sid))).status_code

        alice = await open_session("alice")
        await open_session("bob")
        assert await ping("alice", alice) == 200  # alice's binding is now the most recently used
        await open_session("carol")  # the table is full: bob's idle binding goes
        assert await ping("bob", alice) == 404


async def test_the_same_decision_holds_on_any_transport_memory_and_stdio_embedders() -> None:
    """The decision lives in the dispatcher, not in a transport: installed around an in-memory (or stdio) server
    by an embedder that authenticated its peer, it refuses exactly what protect() refuses over HTTP."""
    from mcpkit.client.client import Client
    from mcpkit.protocol.errors import MCPError
    from mcpkit.server.request_context import CURRENT_AUTHORIZATION, ScopeAuthorization, authorize_as

    app = MCPKit("mem", version="1.0.0")

    @app.tool
    def admin() -> str:
        """Needs mcp:admin."""
        return "admin ok"

    @app.tool
    def hello() -> str:
        """Needs nothing."""
        return "hello"

    reset = authorize_as(ScopeAuthorization("p", ["mcp:read"], tool_scopes({"admin": ["mcp:admin"]})))
    try:
        async with Client(app) as c:
            assert "hello" in str(await c.call_tool("hello", {}))
            with pytest.raises(MCPError) as err:
                await c.call_tool("admin", {})
            assert err.value.code == -32003 and "mcp:admin" in err.value.message
    finally:
        CURRENT_AUTHORIZATION.reset(reset)


# ---------------------------------------------------------------- session binding across workers


@pytest.mark.req("M038")
async def test_session_binding_holds_on_every_worker_sharing_the_session_store(redis_url: str) -> None:  # noqa: F811
    """A session opened by alice on worker A is refused to bob's (valid) token on worker B, for POST, GET and
    DELETE: the owner travels in the shared session record (an in-process binding table would not reach B)."""
    from mcpkit.stores.redis import RedisSessionStore

    prefix = f"bind{time.monotonic_ns()}:"

    resource = "http://mcp.example.test/mcp"  # one resource served by two workers behind a balancer
    verifier = StaticTokenVerifier(
        {
            "alice": AccessToken("alice", subject="alice", audience=(resource,)),
            "bob": AccessToken("bob", subject="bob", audience=(resource,)),
        }
    )

    def worker(base: str) -> Any:
        app = MCPKit("bound")
        endpoint = create_app(app, session_store=RedisSessionStore(redis_url, prefix=prefix), sse=False, ws=False)
        return protect(endpoint, resource=resource, verifier=verifier)

    async with serve(worker) as (a, _), serve(worker) as (b, _), httpx.AsyncClient() as http:
        hdrs = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
        r = await http.post(
            a + "/mcp", json=initialize_body("2025-06-18"), headers={**hdrs, "authorization": "Bearer alice"}
        )
        assert r.status_code == 200, r.text
        sid = r.headers["mcp-session-id"]
        done = await http.post(
            a + "/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**hdrs, "mcp-session-id": sid, "authorization": "Bearer alice"},
        )
        assert done.status_code == 202
        ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
        on_b = {**hdrs, "mcp-session-id": sid}
        as_bob = await http.post(b + "/mcp", json=ping, headers={**on_b, "authorization": "Bearer bob"})
        assert as_bob.status_code == 404, as_bob.text
        get_bob = await http.get(b + "/mcp", headers={**on_b, "authorization": "Bearer bob"})
        assert get_bob.status_code == 404
        delete_bob = await http.delete(b + "/mcp", headers={**on_b, "authorization": "Bearer bob"})
        assert delete_bob.status_code == 404
        as_alice = await http.post(b + "/mcp", json=ping, headers={**on_b, "authorization": "Bearer alice"})
        assert as_alice.status_code == 200, as_alice.text
        # and bob still cannot use it on A either (the session is still alive after his DELETE)
        again = await http.post(
            a + "/mcp", json=ping, headers={**hdrs, "mcp-session-id": sid, "authorization": "Bearer bob"}
        )
        assert again.status_code == 404


@pytest.mark.req("M038")
async def test_legacy_sse_session_takes_messages_from_its_principal_only() -> None:
    """The legacy HTTP+SSE transport binds its session to the principal that opened the stream: bob's valid token
    cannot post into alice's session (404, as for an unknown session); alice's posts are accepted."""
    resource = "http://mcp.example.test/mcp"
    verifier = StaticTokenVerifier(
        {
            "alice": AccessToken("alice", subject="alice", audience=(resource,)),
            "bob": AccessToken("bob", subject="bob", audience=(resource,)),
        }
    )

    def factory(base: str) -> Any:
        return protect(create_app(MCPKit("bound-sse"), ws=False), resource=resource, verifier=verifier)

    async with (
        serve(factory) as (base, _),
        httpx.AsyncClient(timeout=10) as http,
        http.stream("GET", base + "/sse", headers={"authorization": "Bearer alice"}) as stream,
    ):
        assert stream.status_code == 200
        endpoint = None
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                endpoint = line[5:].strip()
                break
        assert endpoint is not None and "session_id=" in endpoint
        url = base + endpoint if endpoint.startswith("/") else endpoint
        body = initialize_body("2024-11-05")
        as_bob = await http.post(url, json=body, headers={"authorization": "Bearer bob"})
        assert as_bob.status_code == 404
        as_alice = await http.post(url, json=body, headers={"authorization": "Bearer alice"})
        assert as_alice.status_code == 202


# ---------------------------------------------------------------------------------------------------- revocation, DPoP
def _example_oauth_server() -> Any:
    import importlib.util

    path = REPO / "examples" / "oauth_server.py"
    spec = importlib.util.spec_from_file_location("example_oauth_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.req("M031", "M038")
async def test_a_replayed_codes_access_token_is_refused_at_the_colocated_resource_server() -> None:
    """RFC 6749 §4.1.2: the access token issued from a code that was then replayed worked at /mcp until it expired
    (the resource server checked the JWT offline). In one process the resource server asks the authorization
    server's ledger: the replay revokes the grant and its access token gets 401 at once (examples/oauth_server.py)."""
    example = _example_oauth_server()
    holder: dict[str, Any] = {}

    def make(base: str) -> Any:
        parts = urlsplit(base)
        holder["as"] = example.build(parts.hostname, parts.port)
        return holder["as"]

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        client = (await http.post(base + "/register", json={"redirect_uris": [REDIRECT]})).json()
        mcp = base + "/mcp"
        tokens = await _code_tokens(http, base, client["client_id"], client["client_secret"], "mcp:read", mcp)
        assert tokens["_status"] == 200
        bearer = {**HS, "authorization": f"Bearer {tokens['access_token']}"}
        ok = await http.post(base + "/mcp", json=initialize_body("2025-06-18"), headers=bearer)
        assert ok.status_code == 200, ok.text
        replay = await http.post(
            base + "/token", data=tokens["_form"], headers=_basic(client["client_id"], client["client_secret"])
        )
        assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
        refused = await http.post(base + "/mcp", json=initialize_body("2025-06-18"), headers=bearer)
        assert refused.status_code == 401 and refused.json()["error"] == "invalid_token"
        assert "revoked" in refused.json()["error_description"]
        # another grant of the same client is untouched
        other = await _code_tokens(http, base, client["client_id"], client["client_secret"], "mcp:read", mcp)
        fine = {**HS, "authorization": f"Bearer {other['access_token']}"}
        assert (await http.post(base + "/mcp", json=initialize_body("2025-06-18"), headers=fine)).status_code == 200


async def test_a_revocation_check_that_fails_refuses_the_request() -> None:
    class Broken:
        async def revoked(self, token: AccessToken) -> bool:
            raise ConnectionError("the ledger is down")

    async with stack(rs_options={"revocation": Broken()}) as s, httpx.AsyncClient() as http:
        token = _forge(s["as"], aud=s["mcp_url"])
        r = await http.post(s["mcp_url"], json=initialize_body("2025-06-18"), headers={**HS, **_bearer(token)})
        assert r.status_code == 401 and "revocation status is unknown" in r.json()["error_description"]


@pytest.mark.req("M038")
async def test_a_replayed_dpop_proof_is_refused() -> None:
    """A DPoP proof captured with its token (a logging proxy, a leaked trace) is replayed within its iat window:
    the resource server has seen its jti and refuses it (RFC 9449 §11.1); the token without a proof of its own
    is useless."""
    from mcpkit.auth import SigningKey
    from mcpkit.auth.dpop import make_proof

    async with stack(rs_options={"dpop": True}) as s, httpx.AsyncClient() as http:
        key = SigningKey.generate()
        token = _forge(s["as"], aud=s["mcp_url"], cnf={"jkt": key.thumbprint})
        headers = {
            **HS,
            "authorization": f"DPoP {token}",
            "dpop": make_proof(key, "POST", s["mcp_url"], access_token=token),
        }
        first = await http.post(s["mcp_url"], json=initialize_body("2025-06-18"), headers=headers)
        assert first.status_code == 200
        replayed = await http.post(s["mcp_url"], json=initialize_body("2025-06-18"), headers=headers)
        assert replayed.status_code == 401 and replayed.json()["error"] == "invalid_dpop_proof"
        assert "replay" in replayed.json()["error_description"]
        assert replayed.headers["www-authenticate"].startswith("DPoP ")
