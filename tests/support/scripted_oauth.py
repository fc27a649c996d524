"""A scriptable authorization server and protected resource on one origin, for attacking the OAuth client from the
outside: each behaviour (the token endpoint's answer, its delay, the scopes the resource wants, the metadata) is a
plain attribute a test sets, so a test plays a quirky or hostile server without reimplementing OAuth.

    async with scripted() as s:
        s.need = {"read", "write"}               # what GET /mcp wants
        s.token_hook = refuse_refreshes          # async (form) -> (status, body) | None (None: the normal answer)
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            await http.get(s.mcp_url)

``/mcp`` answers 401 with ``resource_metadata`` and ``scope`` (``challenge_scope``, ``read``) without a token it
issued, 403 ``insufficient_scope`` (naming every scope wanted) when the token lacks one of ``need`` or of the
request's ``x-need`` header, else 200 with the token's scopes. Every request is recorded in ``log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

from mcpkit.auth import HeadlessBrowser, OAuthClient
from support.asgi import read_body, serve_asgi

TokenHook = Callable[[dict[str, str]], Awaitable[tuple[int, Any] | None]]
Answer = tuple[int, Any, list[tuple[bytes, bytes]]]


class ScriptedOAuth:
    """The app (see the module docstring); ``base`` is set once it listens."""

    def __init__(self) -> None:
        self.base = ""
        self.tokens: dict[str, set[str]] = {}  # live access tokens -> their scopes
        self.refresh_tokens: dict[str, set[str]] = {}
        self.codes: dict[str, str] = {}
        self.log: list[tuple[str, str, dict[str, str]]] = []  # (method, path?query, form)
        self.need: set[str] = {"read"}
        self.challenge_scope = "read"  # the scope= of the 401 challenge
        self.token_hook: TokenHook | None = None
        self.token_delay = 0.0
        self.as_metadata: dict[str, Any] | None = None  # None: the default document; {} serves none (404)
        self.prm: dict[str, Any] | None = None  # None: the default document; {} serves none (404)
        self.root_prm: dict[str, Any] | None = None  # at /.well-known/oauth-protected-resource (None: 404)
        self.registration_answer: tuple[int, Any] | None = None  # (status, JSON or raw bytes); None: a registration
        self.authorize_answer: tuple[int, Any] | None = None  # (status, JSON or raw bytes); None: the redirect

    @property
    def mcp_url(self) -> str:
        return self.base + "/mcp"

    def requests_to(self, path: str) -> list[dict[str, str]]:
        """The forms of the requests made to ``path``."""
        return [form for _, p, form in self.log if p.split("?")[0] == path]

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        query = scope["query_string"].decode()
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        form = dict(parse_qsl(body.decode())) if body else {}
        self.log.append((scope["method"], scope["path"] + ("?" + query if query else ""), form))
        status, payload, extra = await self._route(scope["path"], query, headers, form)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def _route(self, path: str, query: str, headers: dict[str, str], form: dict[str, str]) -> Answer:
        base = self.base
        if path == "/.well-known/oauth-protected-resource/mcp":
            prm = {"resource": self.mcp_url, "authorization_servers": [base]} if self.prm is None else self.prm
            return (200, prm, []) if prm else (404, {}, [])
        if path == "/.well-known/oauth-protected-resource":
            return (200, self.root_prm, []) if self.root_prm else (404, {}, [])
        if path == "/.well-known/oauth-authorization-server":
            default = {
                "issuer": base,
                "authorization_endpoint": base + "/authorize",
                "token_endpoint": base + "/token",
                "registration_endpoint": base + "/register",
                "code_challenge_methods_supported": ["S256"],
            }
            document = default if self.as_metadata is None else self.as_metadata
            return (200, document, []) if document else (404, {}, [])
        if path == "/register":
            if self.registration_answer is not None:
                return *self.registration_answer, []
            return 201, {"client_id": "client-" + secrets.token_hex(4), "token_endpoint_auth_method": "none"}, []
        if path == "/authorize":
            if self.authorize_answer is not None:
                return *self.authorize_answer, []
            q = dict(parse_qsl(query))
            code = secrets.token_hex(8)
            self.codes[code] = q.get("scope", "")
            return 302, {}, [(b"location", f"{q['redirect_uri']}?code={code}&state={q['state']}".encode())]
        if path == "/token":
            return await self._token(form)
        if path == "/mcp":
            return self._mcp(headers)
        return 404, {}, []

    async def _token(self, form: dict[str, str]) -> Answer:
        if self.token_delay:
            await asyncio.sleep(self.token_delay)
        if self.token_hook is not None:
            scripted = await self.token_hook(form)
            if scripted is not None:
                return scripted[0], scripted[1], []
        if form.get("grant_type") == "authorization_code" and form.get("code") in self.codes:
            scopes = set(self.codes.pop(form["code"]).split())
        elif form.get("grant_type") == "refresh_token" and form.get("refresh_token") in self.refresh_tokens:
            scopes = self.refresh_tokens.pop(form["refresh_token"])  # rotated
        else:
            return 400, {"error": "invalid_grant"}, []
        access, refresh = "AT-" + secrets.token_hex(8), "RT-" + secrets.token_hex(8)
        self.tokens[access] = scopes
        self.refresh_tokens[refresh] = scopes
        answer = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": refresh,
            "scope": " ".join(sorted(scopes)),
        }
        return 200, answer, []

    def _mcp(self, headers: dict[str, str]) -> Answer:
        metadata = f'resource_metadata="{self.base}/.well-known/oauth-protected-resource/mcp"'
        credentials = headers.get("authorization", "")
        token = credentials.split(" ", 1)[1] if " " in credentials else None
        if token not in self.tokens:
            challenge = f'Bearer {metadata}, scope="{self.challenge_scope}"'
            return 401, {}, [(b"www-authenticate", challenge.encode())]
        need = self.need | set(headers.get("x-need", "").split())
        if not need <= self.tokens[token]:
            challenge = f'Bearer error="insufficient_scope", scope="{" ".join(sorted(need))}", {metadata}'
            return 403, {}, [(b"www-authenticate", challenge.encode())]
        return 200, {"scopes": sorted(self.tokens[token])}, []


@contextlib.asynccontextmanager
async def scripted(app: ScriptedOAuth | None = None) -> AsyncIterator[ScriptedOAuth]:
    """Serve ``app`` (a fresh :class:`ScriptedOAuth` by default) on uvicorn at 127.0.0.1."""
    app = app or ScriptedOAuth()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    app.base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serve_asgi(app, sock=sock):
        yield app


def client_for(app: ScriptedOAuth, **options: Any) -> tuple[OAuthClient, HeadlessBrowser]:
    """An OAuth client of ``app``'s MCP endpoint that signs in headlessly (``browser.visited``: its authorizations)."""
    browser = HeadlessBrowser()
    client = OAuthClient(
        app.mcp_url,
        client_metadata={"client_name": "scripted-test", "redirect_uris": ["http://127.0.0.1:9/callback"]},
        redirect_handler=browser.redirect_handler,
        callback_handler=browser.callback_handler,
        **options,
    )
    return client, browser
