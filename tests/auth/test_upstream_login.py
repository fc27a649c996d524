"""The OAuth proxy (``AuthorizationServer(upstream=UpstreamLogin(...))``) end to end with real parts: the upstream
identity provider is a second mcpkit authorization server on uvicorn (no DCR, the proxy pre-registered as a
confidential client, a ``/userinfo`` route), the proxy hosts the protected MCP server, :class:`OAuthClient` signs in
through its loopback listener while a browser (httpx, cookies, the consent form posted) walks the redirects."""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from typing import Any

import httpx
import jwt
import pytest

from mcpkit.auth.upstream import UpstreamProvider
from mcpkit.auth.upstream_login import UpstreamLogin
from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import create_app
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.mcp_http import initialize_body
from support.oauth import serve
from support.upstream_idp import (
    MCP_HEADERS,
    PROXY_CLIENT_ID,
    PROXY_CLIENT_SECRET,
    REDIRECT,
    Browser,
    authorize_url,
    call,
    oauth_client,
    proxied_server,
    proxy_stack,
    query,
    sign_in,
    upstream_refresh_tokens,
    upstream_tokens,
    whoami_with,
)


# ------------------------------------------------------------------------------------------- end to end
@pytest.mark.req("M036")
async def test_a_user_signs_in_at_the_upstream_provider_and_a_tool_calls_its_api_with_the_upstream_token() -> None:
    """DCR at the proxy, the consent page approved, the login at the IdP with the proxy's own client, PKCE and
    state, the proxy's code to the client's loopback listener; the tool reads the upstream token server-side and
    calls the IdP's API with it. The proxy's token is its own (issuer, audience = the MCP resource); the upstream
    tokens never appear in any response the proxy sent."""
    async with proxy_stack() as s:
        browser = Browser()
        client, _ = oauth_client(s, browser)
        assert await call(s["mcp_url"], client) == "login-of-alice|alice"
        assert browser.consent_pages == 1
        # the IdP saw the proxy's own client, callback, PKCE S256 and state; never the MCP client's
        to_idp = [path for m, path, _ in s["idp_log"].requests if path.startswith("/authorize")]
        assert len(to_idp) == 1
        upstream = dict(httpx.QueryParams(to_idp[0].split("?", 1)[1]))
        assert upstream["client_id"] == "mcp-proxy" and upstream["redirect_uri"] == s["login"].callback_url
        assert upstream["code_challenge_method"] == "S256" and len(upstream["state"]) >= 32
        token_request = [h for m, path, h in s["idp_log"].requests if path == "/token"]
        assert token_request and token_request[0]["authorization"].startswith("Basic ")
        # the client holds the proxy's token, bound to the MCP resource
        assert client.issuer is not None
        ours = await client.storage.get_tokens(client.issuer, client.resource)
        assert ours is not None
        claims = jwt.decode(ours.access_token, options={"verify_signature": False})
        assert claims["iss"] == s["proxy_url"] and claims["aud"] == s["mcp_url"] and claims["sub"] == "alice"
        # the upstream tokens exist, were used, and never left the server
        issued = upstream_tokens(s)
        assert issued
        seen = s["proxy_recorded"].everything()
        seen += b"".join(r.content + repr(r.headers).encode() for r in browser.seen)
        assert all(t.encode() not in seen for t in issued)
        assert ours.access_token not in issued and ours.refresh_token not in issued
        await client.aclose()
        await browser.aclose()


async def test_an_openid_provider_signs_the_user_in_by_its_id_token_and_a_forged_one_is_refused() -> None:
    """``UpstreamProvider.oidc(<the IdP>)``, whose discovery names no userinfo endpoint: the user is who the IdP's
    ``id_token`` says, verified against its keys, issuer, audience (the proxy's client id), expiry and the nonce
    the proxy sent. An IdP answering an id_token with another nonce or audience, expired, or signed by another
    key signs nobody in: the MCP client gets ``server_error`` and no code."""
    from cryptography.hazmat.primitives.asymmetric import ec

    tamper: list[Any] = [lambda claims: (claims, None)]
    async with proxy_stack(oidc=True, tamper=tamper) as s:
        provider = s["login"].provider
        assert provider.userinfo_url is None and provider.openid and provider.issuer == s["idp_url"]
        browser = Browser()
        client, _ = oauth_client(s, browser)
        assert await call(s["mcp_url"], client) == "login-of-alice|alice"
        to_idp = [path for m, path, _ in s["idp_log"].requests if path.startswith("/authorize")]
        nonce = dict(httpx.QueryParams(to_idp[0].split("?", 1)[1]))["nonce"]
        id_token = s["idp_recorded"].bodies("/token")[0]["id_token"]
        claims = jwt.decode(id_token, options={"verify_signature": False})
        assert claims["nonce"] == nonce and claims["aud"] == "mcp-proxy" and claims["sub"] == "alice"
        # only the tool's own API call read userinfo: the sign-in did not
        assert [p for _, p, _ in s["idp_log"].requests if p.startswith("/userinfo")] == ["/userinfo"]
        await client.aclose()
        now = int(time.time())
        forgeries = {
            "another nonce": lambda c: ({**c, "nonce": "not-this-login"}, None),
            "another audience": lambda c: ({**c, "aud": "another-client"}, None),
            "expired": lambda c: ({**c, "iat": now - 1200, "exp": now - 600}, None),
            "another key": lambda c: (c, ec.generate_private_key(ec.SECP256R1())),
        }
        for why, forge in forgeries.items():
            tamper[0] = forge
            refused = query(await Browser().open(await authorize_url(s), stop_at=REDIRECT))
            assert refused["error"] == "server_error" and "code" not in refused, why
            assert refused["state"] == "client-state", why


# ------------------------------------------------------------------------------------------- refusals
async def test_the_upstream_state_is_single_use_and_bound_to_the_browser_that_started_the_login() -> None:
    async with proxy_stack() as s:
        browser = Browser()
        at_callback = await browser.open(await authorize_url(s), stop_at=s["login"].callback_url)
        callback = str(at_callback.url.join(at_callback.headers["location"]))
        state = query(at_callback)["state"]
        async with httpx.AsyncClient() as stranger:
            wrong = await stranger.get(callback.replace(state, "x" * len(state)))
            assert wrong.status_code == 400 and "state" in wrong.json()["error_description"]
        done = await browser.open(callback, stop_at=REDIRECT)
        got = query(done)
        assert got["state"] == "client-state" and got["iss"] == s["proxy_url"] and "code" in got
        again = await browser.http.get(callback)  # replayed
        assert again.status_code == 400 and "already used" in again.json()["error_description"]
        # another browser holding the callback URL (a stolen code and state) cannot finish the login, and burns it
        other = Browser()
        at_callback = await other.open(await authorize_url(s), stop_at=s["login"].callback_url)
        callback = str(at_callback.url.join(at_callback.headers["location"]))
        async with httpx.AsyncClient() as thief:
            stolen = await thief.get(callback)
            assert stolen.status_code == 403 and "not started in this browser" in stolen.json()["error_description"]
        assert (await other.http.get(callback)).status_code == 400
        await browser.aclose()
        await other.aclose()


async def test_consent_is_asked_per_client_and_redirect_uri_denial_and_a_forged_form_never_reach_the_provider() -> None:
    async with proxy_stack() as s:
        idp_authorizations = lambda: [p for _, p, _ in s["idp_log"].requests if p.startswith("/authorize")]  # noqa: E731
        page = await Browser(decision=None).open(await authorize_url(s))
        assert page.status_code == 200 and "Test IdP" in page.text and REDIRECT in page.text
        assert (
            page.headers["x-frame-options"] == "DENY"
            and "frame-ancestors 'none'" in page.headers["content-security-policy"]
        )
        # the form posted by a page of another origin (no cookie of this browser) is refused
        fields = dict(
            httpx.QueryParams(
                "&".join(f"{k}={v}" for k, v in __import__("re").findall(r"name='(\w+)' value='([^']*)'", page.text))
            )
        )
        async with httpx.AsyncClient() as forger:
            r = await forger.post(s["proxy_url"] + "/consent", data={**fields, "action": "approve"})
            assert r.status_code == 403
        # denied: the client is told, the provider never asked
        denied = await Browser(decision="deny").open(await authorize_url(s), stop_at=REDIRECT)
        assert query(denied)["error"] == "access_denied" and query(denied)["state"] == "client-state"
        assert idp_authorizations() == []
        # approved once: the same client and redirect URI skip the page in this browser, another redirect URI not
        browser = Browser()
        url = await authorize_url(s)
        await browser.open(url, stop_at=REDIRECT)
        assert browser.consent_pages == 1
        await browser.open(url, stop_at=REDIRECT)
        assert browser.consent_pages == 1
        await browser.open(url.replace("%2Fcallback", "%2Fother"), stop_at="http://127.0.0.1:9/")
        assert browser.consent_pages == 2
        # an unregistered redirect URI gets no redirect at all, and no login upstream
        before = len(idp_authorizations())
        r = await browser.http.get(url.replace("%2Fcallback", "%2Fevil"))
        assert r.status_code == 400 and "location" not in r.headers and len(idp_authorizations()) == before
        await browser.aclose()


async def test_an_upstream_refusal_or_failure_reaches_the_client_as_an_oauth_error_without_its_details() -> None:
    users: list[str | None] = [None]
    async with proxy_stack(user=lambda: users[0]) as s:
        denied = await Browser().open(await authorize_url(s), stop_at=REDIRECT)
        assert query(denied)["error"] == "access_denied" and query(denied)["state"] == "client-state"
    async with proxy_stack(secret="not-the-registered-secret") as s:  # the IdP refuses the code exchange
        failed = await Browser().open(await authorize_url(s), stop_at=REDIRECT)
        got = query(failed)
        assert got["error"] == "server_error" and "code" not in got and "secret" not in got["error_description"]


async def test_a_token_of_the_proxy_for_another_audience_is_refused_by_the_mcp_server() -> None:
    async with proxy_stack() as s:
        proxy = s["proxy"]
        other = proxy.issue_access_token(
            subject="alice", client_id="c", scopes=[], resource="https://other.example/mcp"
        )
        mine = proxy.issue_access_token(subject="alice", client_id="c", scopes=[], resource=s["mcp_url"])
        async with httpx.AsyncClient() as http:
            body = initialize_body("2025-06-18")
            r = await http.post(s["mcp_url"], json=body, headers={**MCP_HEADERS, "authorization": f"Bearer {other}"})
            assert r.status_code == 401
            r = await http.post(s["mcp_url"], json=body, headers={**MCP_HEADERS, "authorization": f"Bearer {mine}"})
            assert r.status_code == 200


async def test_consent_pages_open_at_once_in_one_browser_are_each_accepted_up_to_a_bound() -> None:
    """One CSRF cookie served every consent page: with two open in one browser, the first one's form was refused
    (403). Each page has its own cookie now (named by its transaction), so both are accepted, answered in either
    order; past ``MAX_CONSENT_PAGES`` open at once the oldest page's cookie is dropped and its form refused."""
    from mcpkit.auth.upstream_login import MAX_CONSENT_PAGES

    async with proxy_stack() as s:
        browser = Browser(decision=None)
        first = await browser.open(await authorize_url(s, state="first"))
        second = await browser.open(await authorize_url(s, state="second"))
        for page, state in ((first, "first"), (second, "second")):
            approved = await browser.answer(page, "approve")
            assert approved.status_code == 302, approved.text
            done = await browser.open(str(approved.url.join(approved.headers["location"])), stop_at=REDIRECT)
            assert query(done)["state"] == state and "code" in query(done)
        pages = [await browser.open(await authorize_url(s)) for _ in range(MAX_CONSENT_PAGES + 1)]
        csrf_cookies = [c for c in browser.http.cookies if "csrf" in c]
        assert len(csrf_cookies) == MAX_CONSENT_PAGES
        oldest = await browser.answer(pages[0], "approve")
        assert oldest.status_code == 403
        for page in pages[1:]:
            assert (await browser.answer(page, "approve")).status_code == 302


async def test_sign_ins_started_at_once_in_one_browser_each_come_back_up_to_a_bound() -> None:
    """One ``login`` cookie bound the provider's callback to the browser: a second sign-in started in the same
    browser before the first came back (two consent pages approved, two MCP clients signing in at once) replaced
    it, and the first one's callback was refused (403, "not started in this browser"). Each sign-in has its own
    cookie now; past ``MAX_CONSENT_PAGES`` at once the oldest one's cookie is dropped and its callback refused."""
    from mcpkit.auth.upstream_login import MAX_CONSENT_PAGES

    async with proxy_stack() as s:
        browser = Browser(decision=None)

        async def started(state: str) -> str:
            """The provider URL a sign-in is sent to once its consent page is approved."""
            approved = await browser.answer(await browser.open(await authorize_url(s, state=state)), "approve")
            assert approved.status_code == 302, approved.text
            return str(approved.url.join(approved.headers["location"]))

        at_provider = [(await started("first"), "first"), (await started("second"), "second")]
        for url, state in at_provider:  # (the first sign-in comes back after the second began)
            done = await browser.open(url, stop_at=REDIRECT)
            assert done.status_code == 302 and query(done)["state"] == state and "code" in query(done), done.text
        many = [await started(f"s{i}") for i in range(MAX_CONSENT_PAGES + 1)]
        assert len([c for c in browser.http.cookies if "login" in c]) == MAX_CONSENT_PAGES
        assert (await browser.open(many[0], stop_at=REDIRECT)).status_code == 403  # (the oldest: dropped)
        for i, url in enumerate(many[1:], 1):
            done = await browser.open(url, stop_at=REDIRECT)
            assert query(done)["state"] == f"s{i}", done.text


async def test_a_tool_reads_the_upstream_token_with_ctx_upstream_token(caplog: pytest.LogCaptureFixture) -> None:
    """``Context`` (server layer) cannot import the proxy: the proxy installs its upstream credentials for the
    requests it passes on to its app, and ``await ctx.upstream_token()`` in a tool reads the caller's upstream
    token (the same as ``login.upstream_token()``; None once its grant is revoked). Served without a proxy, the
    call is an error naming what is missing, not a silent None: a configuration error, which the client is told is
    one (with its error id; in development with the fix), and the server log names the fix."""
    async with proxy_stack() as s:
        grant = await sign_in(s, Browser())
        assert await whoami_with(s, grant["access_token"], "ctx_upstream_token") == "same"
        async with httpx.AsyncClient() as http:
            form = {"token": grant["refresh_token"], "client_id": grant["client_id"]}
            assert (await http.post(s["proxy_url"] + "/revoke", data=form)).status_code == 200
        assert await whoami_with(s, grant["access_token"], "ctx_upstream_token") == "none"

    async def without_proxy(debug: bool) -> str:
        app = proxied_server(UpstreamLogin(UpstreamProvider.github("id", "secret")), "http://127.0.0.1:9", debug)
        async with (
            serve(lambda base: create_app(app)) as (base, _),
            StreamableHTTPClientTransport(base + "/mcp") as conn,
            ClientSession(conn) as session,
        ):
            result = await session.call_tool("ctx_upstream_token", {})
        assert result.is_error
        return str(result.content[0].text)  # type: ignore[union-attr]

    # in production the client learns it is the server's configuration (not its user) and the error id, nothing of
    # the server's insides; the log names what to fix, at the first call
    caplog.clear()
    told = await without_proxy(debug=False)
    assert "misconfigured" in told and "error id" in told and "AuthorizationServer" not in told, told
    (error_id,) = re.findall(r"error id ([0-9a-f]{12})", told)
    logged = [r.getMessage() for r in caplog.records if error_id in r.getMessage()]
    assert len(logged) == 1 and "AuthorizationServer(upstream=UpstreamLogin(...), app=<this app>)" in logged[0]
    # in development (MCPKit(debug=True)) the client is told what to fix as well
    told = await without_proxy(debug=True)
    assert "AuthorizationServer(upstream=UpstreamLogin(...), app=<this app>)" in told, told


# ------------------------------------------------------------------------------------------- revocation
NONE_YET = dict.fromkeys(("queued", "inline", "done", "failed", "retried", "taken_over", "unrecorded"), 0)


async def test_a_revoked_grant_drops_its_upstream_token_and_revokes_it_at_the_provider() -> None:
    """A replayed code, a reused refresh token and an RFC 7009 ``/revoke`` each revoke a grant of the proxy: the
    user's upstream token of that grant was kept until its TTL; now it is dropped at once (a tool finds none) and
    revoked at the provider's ``revocation_endpoint`` too (its refresh token no longer refreshes there). Another
    grant's upstream token stays."""
    async with proxy_stack(oidc=True) as s:
        assert s["login"].provider.revocation_url == s["idp_url"] + "/revoke"
        kept = await sign_in(s, Browser())
        idp_refresh_before = set(upstream_refresh_tokens(s))
        async with httpx.AsyncClient() as http:

            async def revoked_by(trigger: str) -> None:
                grant = await sign_in(s, Browser())
                (upstream_refresh,) = set(upstream_refresh_tokens(s)) - idp_refresh_before
                idp_refresh_before.add(upstream_refresh)
                assert await whoami_with(s, grant["access_token"]) == "login-of-alice|alice", trigger
                if trigger == "a replayed code":
                    again = await http.post(s["proxy_url"] + "/token", data=grant["form"])
                    assert again.json()["error"] == "invalid_grant"
                elif trigger == "a reused refresh token":
                    data = {"grant_type": "refresh_token", "refresh_token": grant["refresh_token"]}
                    data["client_id"] = grant["client_id"]
                    assert (await http.post(s["proxy_url"] + "/token", data=data)).status_code == 200
                    assert (await http.post(s["proxy_url"] + "/token", data=data)).json()["error"] == "invalid_grant"
                else:
                    form = {"token": grant["refresh_token"], "client_id": grant["client_id"]}
                    assert (await http.post(s["proxy_url"] + "/revoke", data=form)).status_code == 200
                assert await whoami_with(s, grant["access_token"]) == "no upstream token", trigger
                await s["login"].drain(30)  # (the revocation at the provider runs in the background)
                # revoked at the provider: its refresh token refreshes nothing there any more
                upstream = {"grant_type": "refresh_token", "refresh_token": upstream_refresh}
                proxy_at_idp = (PROXY_CLIENT_ID, PROXY_CLIENT_SECRET)
                at_idp = await http.post(s["idp_url"] + "/token", data=upstream, auth=proxy_at_idp)
                assert at_idp.json()["error"] == "invalid_grant", trigger

            for trigger in ("a replayed code", "a reused refresh token", "/revoke"):
                await revoked_by(trigger)
        assert await whoami_with(s, kept["access_token"]) == "login-of-alice|alice"
        assert [p for m, p, _ in s["idp_log"].requests if p == "/revoke"] == ["/revoke"] * 3


async def test_a_revocation_at_a_slow_provider_runs_off_the_request_path_and_still_reaches_it() -> None:
    """The revocation at the provider ran inside the proxy's ``/revoke`` (or ``/token``) request: a slow provider
    held that answer up to its ``timeout``. It runs in the background now: ``/revoke`` answers while the provider
    still holds the revocation, the upstream token is already gone for tools, and the provider receives it. Past
    ``max_queued_revocations`` (1 here) waiting or running, the next one runs in its own request (never dropped).
    ``drain()`` waits for the revocations still running. The provider holds every ``/revoke`` until the test lets it
    go (at most 20 s)."""
    gate = [asyncio.Event()]
    arrived: list[float] = []

    def gated(app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == "/revoke":
                arrived.append(time.monotonic())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(gate[0].wait(), 20)
            await app(scope, receive, send)

        return wrapped

    async def until(condition: Any, what: str) -> None:
        for _ in range(300):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(what)

    options = {"max_queued_revocations": 1}
    async with proxy_stack(oidc=True, idp_wrap=gated, login_options=options, provider_options={"timeout": 30}) as s:
        login: UpstreamLogin = s["login"]
        grants = [await sign_in(s, Browser()) for _ in range(2)]
        upstream_refreshes = upstream_refresh_tokens(s)
        assert len(upstream_refreshes) == 2
        async with httpx.AsyncClient(timeout=60) as http:

            async def revoke(grant: dict[str, Any]) -> httpx.Response:
                form = {"token": grant["refresh_token"], "client_id": grant["client_id"]}
                return await http.post(s["proxy_url"] + "/revoke", data=form)

            first = await asyncio.wait_for(revoke(grants[0]), 15)  # answered while the provider holds it
            assert first.status_code == 200
            assert await whoami_with(s, grants[0]["access_token"]) == "no upstream token"
            await until(lambda: len(arrived) == 1, "the provider never received the first revocation")
            second = asyncio.create_task(revoke(grants[1]))  # the queue is full: this one runs in its request
            await until(lambda: len(arrived) == 2, "the provider never received the second revocation")
            await asyncio.sleep(0.2)
            assert not second.done()  # (its answer waits for the provider)
            gate[0].set()
            assert (await asyncio.wait_for(second, 30)).status_code == 200
            await login.drain(30)
            assert login.revocation_counts == {**NONE_YET, "queued": 1, "inline": 1, "done": 2}
            # drain() (which the server's lifespan shutdown awaits) waits for a revocation still at the provider
            gate[0] = asyncio.Event()
            third = await sign_in(s, Browser())
            assert (await asyncio.wait_for(revoke(third), 15)).status_code == 200
            await until(lambda: len(arrived) == 3, "the provider never received the third revocation")
            asyncio.get_running_loop().call_later(0.3, gate[0].set)
            await login.drain(30)
            assert login.revocation_counts == {**NONE_YET, "queued": 2, "inline": 1, "done": 3}
            for upstream_refresh in upstream_refreshes:  # both revoked at the provider
                form = {"grant_type": "refresh_token", "refresh_token": upstream_refresh}
                at_idp = await http.post(
                    s["idp_url"] + "/token", data=form, auth=(PROXY_CLIENT_ID, PROXY_CLIENT_SECRET)
                )
                assert at_idp.json()["error"] == "invalid_grant"


# ------------------------------------------------------------------------------------------- bounds
async def test_pending_logins_are_bounded_in_count_and_time() -> None:
    now = [1_000_000.0]
    options = {"clock": lambda: now[0]}
    async with proxy_stack(login_options={"max_pending": 2, "pending_ttl": 60}, proxy_options=options) as s:
        browsers = [Browser(decision=None) for _ in range(3)]
        pages = [await b.open(await authorize_url(s)) for b in browsers[:2]]
        assert all(p.status_code == 200 for p in pages)
        full = await browsers[2].open(await authorize_url(s), stop_at=REDIRECT)
        assert query(full)["error"] == "temporarily_unavailable"
        now[0] += 61  # both expired: the page's form is refused, and there is room again
        r = await browsers[0].answer(pages[0], "approve")
        assert r.status_code == 400 and "expired" in r.json()["error_description"]
        assert (await browsers[2].open(await authorize_url(s))).status_code == 200
        # a login past its time at the provider is refused at the callback
        browser = Browser()
        at_callback = await browser.open(await authorize_url(s), stop_at=s["login"].callback_url)
        now[0] += 61
        late = await browser.http.get(str(at_callback.url.join(at_callback.headers["location"])))
        assert late.status_code == 400
        for b in [*browsers, browser]:
            await b.aclose()


async def test_stored_upstream_tokens_are_bounded_in_count_and_time_and_refreshed_when_expired() -> None:
    now = [__import__("time").time()]
    login_options = {"max_tokens": 1, "token_ttl": 3600, "clock": lambda: now[0]}
    async with proxy_stack(login_options=login_options) as s:
        s["idp"].access_token_ttl = 60.0
        users = iter(["alice", "bob"])
        s["idp"].approver = lambda request: asyncio.sleep(0, next(users))
        alice_browser, bob_browser = Browser(), Browser()
        alice, _ = oauth_client(s, alice_browser)
        assert await call(s["mcp_url"], alice) == "login-of-alice|alice"
        first = upstream_tokens(s)[0]
        now[0] += 120  # alice's upstream token expired: refreshed with the upstream refresh token
        assert await call(s["mcp_url"], alice) == "login-of-alice|alice"
        refreshes = [b for b in s["idp_recorded"].bodies("/token")]
        assert len(refreshes) == 2 and refreshes[1]["access_token"] != first
        bob, _ = oauth_client(s, bob_browser)
        assert await call(s["mcp_url"], bob) == "login-of-bob|bob"
        assert await call(s["mcp_url"], alice) == "no upstream token"  # one kept: alice's went
        now[0] += 3601  # past token_ttl: bob's is forgotten too
        assert await call(s["mcp_url"], bob) == "no upstream token"
        for c in (alice, bob):
            await c.aclose()
        await alice_browser.aclose()
        await bob_browser.aclose()


async def test_upstream_answers_are_read_bounded_in_size_and_time() -> None:
    async with proxy_stack(provider_options={"max_response": 64}) as s:  # a token answer is larger
        got = query(await Browser().open(await authorize_url(s), stop_at=REDIRECT))
        assert got["error"] == "server_error" and "token endpoint" in got["error_description"]
    release = asyncio.Event()

    def stalled_endpoint(base: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:  # a token endpoint that never answers
            if scope["type"] == "http":
                await asyncio.wait_for(release.wait(), 30)

        return app

    async with serve(stalled_endpoint) as (stalled_url, _):
        async with proxy_stack(provider_options={"timeout": 0.5, "token_url": stalled_url + "/token"}) as s:
            started = asyncio.get_running_loop().time()
            got = query(await Browser().open(await authorize_url(s), stop_at=REDIRECT))
            assert got["error"] == "server_error" and "ReadTimeout" in got["error_description"]
            assert asyncio.get_running_loop().time() - started < 10
        release.set()


async def test_remembered_consents_are_bounded_in_count_and_time() -> None:
    """One browser's cookie remembers ``max_remembered_consents`` approvals, the oldest going first, each for
    ``consent_ttl`` seconds: past either, the consent page is shown again."""
    now = [__import__("time").time()]
    options = {"max_remembered_consents": 2, "consent_ttl": 600, "clock": lambda: now[0]}
    async with proxy_stack(login_options=options) as s:
        browser = Browser()
        first, second, third = [await authorize_url(s) for _ in range(3)]  # three clients
        for url in (first, second, first):
            await browser.open(url, stop_at=REDIRECT)
        assert browser.consent_pages == 2  # the first client's approval was remembered
        await browser.open(third, stop_at=REDIRECT)  # a third approval: the oldest (the first's) goes
        assert browser.consent_pages == 3
        await browser.open(second, stop_at=REDIRECT)
        assert browser.consent_pages == 3
        await browser.open(first, stop_at=REDIRECT)
        assert browser.consent_pages == 4
        now[0] += 601  # every approval expired
        await browser.open(first, stop_at=REDIRECT)
        assert browser.consent_pages == 5
        await browser.aclose()
