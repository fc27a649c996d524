"""An OAuth proxy stack for the upstream-login tests, all real and on 127.0.0.1: the upstream identity provider is a
second mcpkit :class:`AuthorizationServer` (no Dynamic Client Registration, the proxy pre-registered as a
confidential client) with a small ``/userinfo`` route; the proxy is an :class:`AuthorizationServer` with an
:class:`UpstreamLogin`, hosting the protected MCP server; :class:`Browser` is the user's browser (httpx following
redirects, keeping cookies, posting the consent form)."""

from __future__ import annotations

import contextlib
import dataclasses
import html
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import jwt
import orjson

from mcpkit import Context, MCPKit
from mcpkit._asgi import lifespan
from mcpkit.auth import AuthorizationServer, JWTVerifier, LoopbackCallback, OAuthClient, current_access_token, protect
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.storage import AuthorizationRequest
from mcpkit.auth.upstream import UpstreamProvider
from mcpkit.auth.upstream_login import UpstreamLogin
from mcpkit.client.lowlevel import ClientSession
from mcpkit.transports.http import create_app
from mcpkit.transports.http.streamable_client import StreamableHTTPClientTransport
from support.oauth import serve

REDIRECT = "http://127.0.0.1:9/callback"  # never contacted: the browser stops at the redirect to it
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


async def call(url: str, auth: OAuthClient) -> str:
    """The ``upstream_whoami`` tool's answer, signed in with ``auth``."""
    async with StreamableHTTPClientTransport(url, auth=auth) as conn, ClientSession(conn) as session:
        result = await session.call_tool("upstream_whoami", {})
        return str(result.content[0].text)  # type: ignore[union-attr]


def oauth_client(s: dict[str, Any], browser: Browser) -> tuple[OAuthClient, LoopbackCallback]:
    """An :class:`OAuthClient` for the stack's MCP server, its loopback listener opened by ``browser``."""
    callback = LoopbackCallback(open_url=browser.open, timeout=60)
    client = OAuthClient(
        s["mcp_url"],
        client_metadata={"client_name": "Proxy Test Client", "redirect_uris": [callback.redirect_uri]},
        redirect_handler=callback.redirect_handler,
        callback_handler=callback.callback_handler,
    )
    return client, callback


def authorization_query(client_id: str, challenge: str, resource: str, **extra: str) -> httpx.QueryParams:
    """The query of an authorization request of the proxy's public client ``client_id`` (PKCE S256, the code sent
    to ``REDIRECT``), with ``extra`` parameters added or replaced (``state``, ``redirect_uri``)."""
    return httpx.QueryParams(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": resource,
            **extra,
        }
    )


async def redeem(base: str, client_id: str, code: str, verifier: str) -> tuple[dict[str, Any], dict[str, str]]:
    """``code`` redeemed at ``base``'s ``/token`` by the public client ``client_id`` (the answer asserted 200): the
    token answer, and the form that redeemed it (to replay)."""
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "code_verifier": verifier,
        "client_id": client_id,
        "redirect_uri": REDIRECT,
    }
    async with httpx.AsyncClient() as http:
        answer = await http.post(base + "/token", data=form)
    assert answer.status_code == 200, answer.text
    return answer.json(), form


async def authorize_url(s: dict[str, Any], state: str = "client-state", redirect: str = REDIRECT) -> str:
    """An authorization request of a new client of the proxy (two redirect URIs registered)."""
    client = await s["proxy"].register_client(redirect_uris=[REDIRECT, "http://127.0.0.1:9/other"])
    _, challenge = pkce_pair()
    params = authorization_query(client.client_id, challenge, s["mcp_url"], redirect_uri=redirect, state=state)
    return f"{s['proxy_url']}/authorize?{params}"


async def sign_in(s: dict[str, Any], browser: Browser) -> dict[str, Any]:
    """A new public client of the proxy signed in through ``browser``: its token answer (the code redeemed), with
    ``client_id`` and ``form`` (the form that redeemed the code, to replay) added."""
    client = await s["proxy"].register_client(redirect_uris=[REDIRECT])
    verifier, challenge = pkce_pair()
    params = authorization_query(client.client_id, challenge, s["mcp_url"])
    got = query(await browser.open(f"{s['proxy_url']}/authorize?{params}", stop_at=REDIRECT))
    tokens, form = await redeem(s["proxy_url"], client.client_id, got["code"], verifier)
    return {**tokens, "client_id": client.client_id, "form": form}


async def whoami_with(s: dict[str, Any], access_token: str, tool: str = "upstream_whoami") -> str:
    """The answer of ``tool`` (``upstream_whoami``) to a call made with the proxy's ``access_token``."""
    bearer = {"authorization": "Bearer " + access_token}
    async with (
        StreamableHTTPClientTransport(s["mcp_url"], headers=bearer) as conn,
        ClientSession(conn) as session,
    ):
        result = await session.call_tool(tool, {})
        return str(result.content[0].text)  # type: ignore[union-attr]


def upstream_tokens(s: dict[str, Any]) -> list[str]:
    """Every access and refresh token the IdP's token endpoint answered."""
    found = []
    for body in s["idp_recorded"].bodies("/token"):
        found += [body[k] for k in ("access_token", "refresh_token") if k in body]
    return found


def upstream_refresh_tokens(s: dict[str, Any]) -> list[str]:
    """Every refresh token the IdP's token endpoint answered."""
    return [body["refresh_token"] for body in s["idp_recorded"].bodies("/token") if "refresh_token" in body]


PROXY_CLIENT_ID = "mcp-proxy"
PROXY_CLIENT_SECRET = "proxy-secret-at-the-idp"


class Recorded:
    """Every response an app sent: status, headers and body (what a client of it could ever see)."""

    def __init__(self) -> None:
        self.responses: list[tuple[str, int, list[tuple[bytes, bytes]], bytes]] = []

    def wrap(self, app: Any) -> Any:
        async def recorded(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            entry: list[Any] = [scope["path"], 0, [], b""]

            async def capture(message: Any) -> None:
                if message["type"] == "http.response.start":
                    entry[1], entry[2] = message["status"], list(message.get("headers", []))
                elif message["type"] == "http.response.body":
                    entry[3] += message.get("body", b"")
                    if not message.get("more_body"):
                        self.responses.append((entry[0], entry[1], entry[2], entry[3]))
                await send(message)

            await app(scope, receive, capture)

        return recorded

    def everything(self) -> bytes:
        return b"\n".join(b"%d %s %s" % (s, repr(h).encode(), b) for _, s, h, b in self.responses)

    def bodies(self, path_end: str) -> list[dict[str, Any]]:
        return [orjson.loads(b) for p, s, _, b in self.responses if p.endswith(path_end) and s == 200 and b]


def identity_provider(base: str, users: Callable[[], str | None]) -> AuthorizationServer:
    """The upstream IdP at ``base``: its ``/userinfo`` answers the user of a valid token of its own."""

    async def userinfo(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http" or scope["path"] != "/userinfo":
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        status, body = 401, {"error": "invalid_token"}
        if auth.startswith("Bearer "):
            try:
                claims = jwt.decode(auth[7:], idp.key.public_key(), algorithms=["ES256"], options={"verify_aud": False})
            except jwt.InvalidTokenError:
                pass
            else:
                status, body = 200, {"sub": claims["sub"], "login": "login-of-" + claims["sub"]}
        data = orjson.dumps(body)
        await send(
            {"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]}
        )
        await send({"type": "http.response.body", "body": data})

    async def approver(request: AuthorizationRequest) -> str | None:
        return users()

    idp = AuthorizationServer(base, registration=False, approver=approver, app=userinfo)
    return idp


#: rewrites the claims of the id_token the IdP's /token answers, and names the key that signs it again (None: the
#: IdP's own): a misbehaving or impostor identity provider
IdTokenTamper = Callable[[dict[str, Any]], tuple[dict[str, Any], Any]]


def tampering(idp: AuthorizationServer, app: Any, tamper: IdTokenTamper) -> Any:
    """``app`` (the IdP) with every ``id_token`` of its /token answers rewritten by ``tamper``."""

    async def wrapped(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].endswith("/token"):
            await app(scope, receive, send)
            return
        held: dict[str, Any] = {}

        async def rewrite(message: Any) -> None:
            if message["type"] == "http.response.start":
                held["start"] = message
                return
            body = orjson.loads(message["body"])
            if "id_token" in body:
                claims = jwt.decode(body["id_token"], options={"verify_signature": False})
                claims, key = tamper(claims)
                body["id_token"] = jwt.encode(claims, key or idp.key, algorithm="ES256", headers={"kid": idp.kid})
            data = orjson.dumps(body)
            headers = [(k, v) for k, v in held["start"]["headers"] if k.lower() != b"content-length"]
            await send({**held["start"], "headers": [*headers, (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

        await app(scope, receive, rewrite)

    return wrapped


def proxied_server(login: UpstreamLogin, idp_url: str, debug: bool = False) -> MCPKit:
    app = MCPKit("proxied", version="1.0.0", debug=debug)

    @app.tool
    async def upstream_whoami() -> str:
        """Calls the upstream API (its userinfo) with the user's upstream token."""
        token = await login.upstream_token()
        if token is None:
            return "no upstream token"
        async with httpx.AsyncClient(timeout=10) as http:
            r = await http.get(idp_url + "/userinfo", headers={"authorization": "Bearer " + token})
        ours = current_access_token()
        assert ours is not None
        return f"{r.json().get('login')}|{ours.subject}"

    @app.tool
    async def ctx_upstream_token(ctx: Context) -> str:
        """What ``ctx.upstream_token()`` gives, beside ``login.upstream_token()``."""
        token = await ctx.upstream_token()
        return "none" if token is None else "same" if token == await login.upstream_token() else "different"

    return app


@contextlib.asynccontextmanager
async def proxy_stack(
    *,
    user: Callable[[], str | None] = lambda: "alice",
    provider_options: dict[str, Any] | None = None,
    login_options: dict[str, Any] | None = None,
    proxy_options: dict[str, Any] | None = None,
    idp_options: Callable[[AuthorizationServer], Awaitable[None]] | None = None,
    secret: str = PROXY_CLIENT_SECRET,
    oidc: bool = False,
    tamper: list[IdTokenTamper] | None = None,
    idp_wrap: Callable[[Any], Any] | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The IdP, then the proxy hosting the MCP server at ``<proxy>/mcp``; the proxy registered at the IdP.
    ``oidc=True``: the provider is ``UpstreamProvider.oidc(<the IdP>)`` (its discovery names no userinfo endpoint:
    users are identified by the id_token alone); ``tamper[0]``, when set, rewrites the IdP's id_tokens; ``idp_wrap``
    wraps the IdP's app (a slow or gated endpoint)."""
    s: dict[str, Any] = {"idp_recorded": Recorded(), "proxy_recorded": Recorded()}

    def make_idp(base: str) -> Any:
        s["idp"] = identity_provider(base, user)
        app = s["idp"]
        if tamper is not None:
            app = tampering(s["idp"], app, lambda claims: tamper[0](claims) if tamper else (claims, None))
        app = s["idp_recorded"].wrap(app)
        return idp_wrap(app) if idp_wrap is not None else app

    async with serve(make_idp) as (idp_url, idp_log):
        discovered = (
            await UpstreamProvider.oidc(idp_url, PROXY_CLIENT_ID, secret, scopes=("openid", "profile"), name="Test IdP")
            if oidc
            else None
        )

        def make_proxy(base: str) -> Any:
            fields: dict[str, Any] = {
                "authorize_url": idp_url + "/authorize",
                "token_url": idp_url + "/token",
                "userinfo_url": idp_url + "/userinfo",
                "client_id": PROXY_CLIENT_ID,
                "client_secret": secret,
                "scopes": ("profile",),
                "name": "Test IdP",
            }
            if discovered is not None:
                provider = dataclasses.replace(discovered, **(provider_options or {}))
            else:
                provider = UpstreamProvider(**{**fields, **(provider_options or {})})
            login = UpstreamLogin(provider, **(login_options or {}))
            resource = base + "/mcp"
            verifier = JWTVerifier(issuer=base, audience=resource, jwks_url=base + "/jwks")
            mcp = protect(
                create_app(proxied_server(login, idp_url)),
                resource=resource,
                verifier=verifier,
                authorization_servers=[base],
            )
            s["proxy"] = AuthorizationServer(
                base,
                resources=[resource, "https://other.example/mcp"],
                upstream=login,
                app=mcp,
                **(proxy_options or {}),
            )
            s.update(login=login, mcp_url=resource)
            return s["proxy_recorded"].wrap(s["proxy"])

        async with serve(make_proxy) as (proxy_url, proxy_log):
            await s["idp"].register_client(
                client_id=PROXY_CLIENT_ID,
                client_secret=PROXY_CLIENT_SECRET,
                redirect_uris=[s["login"].callback_url],
                token_endpoint_auth_method=s["login"].provider.token_auth,
            )
            if idp_options is not None:
                await idp_options(s["idp"])
            s.update(idp_url=idp_url, idp_log=idp_log, proxy_url=proxy_url, proxy_log=proxy_log)
            try:
                yield s
            finally:
                while _BROWSERS:
                    await _BROWSERS.pop().aclose()


_BROWSERS: list[Browser] = []

_INPUT = re.compile(r"<input type='hidden' name='(\w+)' value='([^']*)'>")
_ACTION = re.compile(r"<form method='post' action='([^']*)'>")


class Browser:
    """The user's browser: follows redirects (at most ``max_hops``), keeps cookies, and answers a consent page with
    ``decision`` (``approve`` or ``deny``; None: stops at the page). ``seen`` is every response it got."""

    def __init__(self, decision: str | None = "approve", *, max_hops: int = 12) -> None:
        self.http = httpx.AsyncClient(follow_redirects=False, timeout=20)
        self.decision = decision
        self.max_hops = max_hops
        self.seen: list[httpx.Response] = []
        self.consent_pages = 0
        _BROWSERS.append(self)  # closed when the proxy_stack it was used in ends

    async def open(self, url: str, *, stop_at: str | None = None) -> httpx.Response:
        """Go to ``url`` and on until a page that is not a redirect, or a redirect to a URL starting with
        ``stop_at`` (its response is returned, not followed)."""
        resp = await self.http.get(url)
        for _ in range(self.max_hops):
            self.seen.append(resp)
            if resp.status_code == 200 and "<form method='post'" in resp.text:
                self.consent_pages += 1
                if self.decision is None:
                    return resp
                resp = await self.answer(resp, self.decision)
                continue
            location = resp.headers.get("location")
            if resp.status_code not in (302, 303) or not location:
                return resp
            target = str(resp.url.join(location))
            if stop_at is not None and target.startswith(stop_at):
                return resp
            resp = await self.http.get(target)
        raise AssertionError("too many redirects")

    async def answer(self, page: httpx.Response, decision: str) -> httpx.Response:
        fields = dict(_INPUT.findall(page.text))
        action = _ACTION.search(page.text)
        assert action is not None
        return await self.http.post(html.unescape(action.group(1)), data={**fields, "action": decision})

    async def aclose(self) -> None:
        await self.http.aclose()


def query(resp: httpx.Response) -> dict[str, str]:
    """The query parameters of a redirect's target."""
    return dict(parse_qsl(urlsplit(resp.headers["location"]).query))
