"""An OAuth proxy: :class:`~mcpkit.auth.server.AuthorizationServer` logging its users in at an upstream identity
provider that has no Dynamic Client Registration (GitHub, Google, any OpenID provider; see
:class:`~mcpkit.auth.upstream.UpstreamProvider`).

    login = UpstreamLogin(UpstreamProvider.github(CLIENT_ID, CLIENT_SECRET))
    authz = AuthorizationServer("https://mcp.example.com", resources=["https://mcp.example.com/mcp"],
                                upstream=login, app=protect(create_app(server), ...))

The flow (MCP security best practices, "Confused Deputy Problem"; MCP authorization, "Token Passthrough"):

1. ``/authorize`` checks the MCP client's request as always (client, redirect URI, PKCE, scopes, resource).
2. Consent: the client registered itself, so nobody vouches for it. Unless this browser approved this client and
   redirect URI before (a signed, ``HttpOnly``, ``SameSite=Lax`` cookie, ``__Host-`` on https, remembering at
   most ``max_remembered_consents`` of them for ``consent_ttl`` seconds), a consent page names the client, its
   redirect URI and what it asks; the form is bound to this browser (a cookie and a field of the page, checked
   against the pending request) and the page cannot be framed. ``consent=`` replaces the page with a hook of
   your own.
3. Only then a login is pending: a fresh ``state``, PKCE S256 and (OpenID) ``nonce`` of the proxy's own, the
   ``state`` also set in a cookie of this browser; the browser goes to the provider with the proxy's fixed
   ``client_id`` and its own callback URL.
4. ``/upstream/callback`` takes the pending login by its ``state`` (single use, ``pending_ttl`` seconds, the
   cookie must name the same ``state``), exchanges the code (client secret, PKCE verifier), identifies the user
   (a verified ``id_token`` or the userinfo endpoint) and sends the MCP client its own authorization code, as
   ``/authorize`` does without a proxy. The proxy's tokens are audience-bound to the MCP resource as always.
5. The provider's tokens never reach the client: they stay here, per sign-in (the grant of the proxy's tokens,
   their ``grant_id``; at most ``max_tokens``, each for ``token_ttl`` seconds after the login), refreshed with the
   provider's refresh token when expired (once across replicas: a lease in the storage), dropped (and revoked at
   the provider) when that grant is revoked. A tool reads them with ``await ctx.upstream_token()`` (or
   :meth:`UpstreamLogin.upstream_token`) to call the provider's API for the user.

Pending logins and upstream tokens go into the authorization server's storage, sealed (AES-GCM) under a key derived
from ``secret`` (:mod:`mcpkit.auth.upstream_state`): with a :class:`~mcpkit.auth.redis_storage.RedisAuthStorage`
and the same ``secret`` on every replica, a login may start on one replica and end on another.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import html
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode

import orjson

from .._asgi import Receive, Scope, Send
from ._util import OAuthError, header, pkce_pair
from .storage import AuthorizationRequest, ClientRecord
from .upstream import UpstreamError, UpstreamIdentity, UpstreamProvider
from .upstream_refresh import REFRESH_LEASE_MARGIN, UpstreamTokenKeeper
from .upstream_revocation import REVOCATION_CONCURRENCY, RevocationRetry, UpstreamRevocations
from .upstream_state import (
    InMemoryUpstreamState,
    RefreshLeaseStorage,
    RevocationRecordStorage,
    Sealer,
    UpstreamStateStorage,
    state_key,
)

if TYPE_CHECKING:
    from .verifiers import AccessToken

logger: logging.Logger = logging.getLogger(__name__)

__all__ = [
    "MAX_CONSENT_PAGES",
    "REFRESH_LEASE_MARGIN",
    "REVOCATION_CONCURRENCY",
    "ConsentHook",
    "UpstreamLogin",
    "UserHook",
]

#: consent pages one browser may have open at once: each has its own CSRF cookie (named by its transaction); past
#: it the oldest page's cookie is dropped (its form is then refused). As many sign-ins may be at the provider at once
#: from one browser: each has its own login cookie (named by its state); past it the oldest one's callback is refused
MAX_CONSENT_PAGES = 5

#: decides, instead of the consent page, whether a client's request may go on to the provider
ConsentHook = Callable[[AuthorizationRequest], Awaitable[bool]]
#: maps the user the provider identified to the subject of the proxy's tokens (None denies)
UserHook = Callable[[UpstreamIdentity, AuthorizationRequest], Awaitable[str | None]]

_FRAME_HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"),
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"no-referrer"),
]


class _Host(Protocol):
    """What the login needs of its :class:`~mcpkit.auth.server.AuthorizationServer` (typed here, so this module
    does not import the server that imports it)."""

    issuer: str
    clock: Callable[[], float]
    storage: Any

    async def _form(self, scope: Scope, receive: Receive) -> dict[str, str]: ...

    async def _client(self, client_id: str) -> ClientRecord | None: ...

    async def _issue_code(
        self,
        send: Send,
        request: AuthorizationRequest,
        challenge: str,
        subject: str,
        redirect_uri_given: bool,
        extra: list[tuple[bytes, bytes]] | None = None,
        family: str | None = None,
    ) -> None: ...


@dataclass
class _Pending:
    """An MCP client's authorization request waiting for consent (keyed by its form's id) or for the provider
    (keyed by the upstream ``state``)."""

    request: AuthorizationRequest
    challenge: str
    redirect_uri_given: bool
    expires_at: float
    csrf: str = ""
    verifier: str = ""  # the upstream PKCE verifier (after consent)
    nonce: str | None = None
    upstream: bool = False  # consent given, waiting for the provider's callback

    def dump(self) -> bytes:
        r = self.request
        assert r.client is not None
        fields = dataclasses.asdict(self)
        fields["request"] = [r.client.client_id, r.redirect_uri, r.scopes, r.resource, r.state, r.nonce]
        return orjson.dumps(fields)

    @staticmethod
    async def load(data: bytes, host: _Host) -> _Pending | None:
        """The pending request stored by :meth:`dump`; None when its client is gone meanwhile."""
        fields = orjson.loads(data)
        client_id, redirect_uri, scopes, resource, state, nonce = fields.pop("request")
        client = await host._client(client_id)
        if client is None:
            return None
        request = AuthorizationRequest(client, redirect_uri, scopes, resource, state, nonce=nonce)
        return _Pending(request, **fields)


def _login_name(state: str) -> str:
    """The name (after ``login-``) of the cookie binding the sign-in of ``state`` to a browser."""
    return hashlib.sha256(state.encode()).hexdigest()[:24]


class UpstreamLogin:
    """The upstream login of an :class:`~mcpkit.auth.server.AuthorizationServer` (its ``upstream=``). See the
    module docstring for the flow.

    Args:
        provider: the identity provider and the proxy's registration there.
        consent: a hook deciding each request instead of the consent page (True lets it go on to the provider).
            The page is the default: a client that registered itself must never get a silent grant.
        authorize_user: maps the identified user to the subject of the proxy's tokens, or None to deny (default:
            the provider's subject as is).
        secret: the key signing the remembered-consent cookie and sealing the pending logins and upstream tokens
            kept in the server's storage (default: a new one per process; give every replica the same, at least
            32 random bytes: with a shared storage it is required).
        pending_ttl / max_pending: how long a pending consent or login lives (seconds) and how many are kept at
            once (past it a new request is refused with ``temporarily_unavailable``).
        max_tokens / token_ttl: how many users' upstream tokens are kept (past it the least recently used go) and
            for how long after their login or last refresh (seconds).
        max_remembered_consents / consent_ttl: how many client approvals one browser's cookie remembers (the
            oldest go first) and for how long (seconds).
        max_queued_revocations: how many revocations at the provider (of revoked grants' upstream tokens) may
            wait or run in the background at once, per process; past it one is tried once in the request that
            revoked its grant (see :meth:`grant_revoked`). ``revocation_counts`` counts them: ``queued``,
            ``inline``, ``done`` (the provider answered 200), ``failed`` (refused for good, or out of tries),
            ``retried``, ``taken_over`` and ``unrecorded`` (:class:`~mcpkit.auth.upstream_revocation.
            UpstreamRevocations`).
        revocation_retry: how a revocation the provider could not take now (5xx, 429, no answer) is tried again
            (default: :class:`~mcpkit.auth.upstream_revocation.RevocationRetry`: 6 tries within 300 s).
        clock: the time source of these lifetimes (default: the authorization server's).
    """

    def __init__(
        self,
        provider: UpstreamProvider,
        *,
        consent: ConsentHook | None = None,
        authorize_user: UserHook | None = None,
        secret: bytes | None = None,
        pending_ttl: float = 600.0,
        max_pending: int = 1_000,
        max_tokens: int = 10_000,
        token_ttl: float = 30 * 86400.0,
        max_remembered_consents: int = 20,
        consent_ttl: float = 30 * 86400.0,
        max_queued_revocations: int = 1_000,
        revocation_retry: RevocationRetry | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.provider: UpstreamProvider = provider
        self.consent_hook: ConsentHook | None = consent
        self.authorize_user: UserHook | None = authorize_user
        self.secret: bytes = secret or secrets.token_bytes(32)
        self.pending_ttl: float = pending_ttl
        self.max_pending: int = max_pending
        self.max_tokens: int = max_tokens
        self.token_ttl: float = token_ttl
        self.max_remembered_consents: int = max_remembered_consents
        self.consent_ttl: float = consent_ttl
        self.max_queued_revocations: int = max_queued_revocations
        self._secret_given = secret is not None
        self._sealer: Sealer = Sealer(self.secret)
        self._state: UpstreamStateStorage = InMemoryUpstreamState()
        self._server: _Host | None = None
        self._own_clock = clock is not None
        self.clock: Callable[[], float] = clock or time.time
        self._tokens = UpstreamTokenKeeper(
            provider, self._sealer, lambda: self.clock(), max_tokens=max_tokens, token_ttl=token_ttl
        )
        self._tokens.state = self._state  # (the storage's, once bound)
        self._revocations = UpstreamRevocations(
            provider,
            self._sealer,
            max_queued=max_queued_revocations,
            retry=revocation_retry or RevocationRetry(),
            keep_for=token_ttl,
        )
        self.revocation_counts: dict[str, int] = self._revocations.counts

    # ------------------------------------------------------------------ wiring
    def bind(self, server: _Host) -> None:
        """Called by the authorization server this login belongs to."""
        if self._server is not None and self._server is not server:
            raise ValueError("an UpstreamLogin belongs to one AuthorizationServer")
        self._server = server
        if not self._own_clock:
            self.clock = server.clock
        if isinstance(server.storage, UpstreamStateStorage):
            if not isinstance(server.storage, InMemoryUpstreamState) and not self._secret_given:
                raise ValueError(
                    "an UpstreamLogin on a shared storage needs UpstreamLogin(secret=...), the same on every replica: "
                    "it seals the pending logins and upstream tokens kept there"
                )
            self._state = self._tokens.state = server.storage
            if isinstance(server.storage, RevocationRecordStorage):
                self._revocations.records = server.storage
            elif self.provider.revocation_url:
                logger.warning(
                    "%s keeps the OAuth proxy's state but no revocation records (RevocationRecordStorage): the "
                    "upstream revocations not done yet are kept in this process only, lost if it dies",
                    type(server.storage).__name__,
                )
            if isinstance(server.storage, RefreshLeaseStorage):
                self._tokens.leases = server.storage
            else:
                logger.warning(
                    "%s keeps the OAuth proxy's state but has no refresh leases (RefreshLeaseStorage): an expired "
                    "upstream token is refreshed once per replica, not once across them",
                    type(server.storage).__name__,
                )

    @property
    def server(self) -> _Host:
        if self._server is None:
            raise RuntimeError("this UpstreamLogin is not the upstream= of an AuthorizationServer")
        return self._server

    @property
    def callback_url(self) -> str:
        """The redirect URI to register with the provider: ``<issuer>/upstream/callback``."""
        return self.server.issuer + "/upstream/callback"

    def _cookie(self, name: str) -> str:
        return ("__Host-" if self.server.issuer.startswith("https:") else "") + "mcpkit-" + name

    def _set_cookie(self, name: str, value: str, max_age: float) -> tuple[bytes, bytes]:
        attrs = f"{self._cookie(name)}={value}; Path=/; Max-Age={int(max_age)}; HttpOnly; SameSite=Lax"
        if self.server.issuer.startswith("https:"):
            attrs += "; Secure"
        return (b"set-cookie", attrs.encode())

    def _cookies(self, scope: Scope) -> dict[str, str]:
        found: dict[str, str] = {}
        for part in (header(scope, b"cookie") or "").split(";"):
            name, sep, value = part.strip().partition("=")
            if sep:
                found.setdefault(name, value)
        return found

    # ------------------------------------------------------------------ remembered consent
    def _consent_key(self, request: AuthorizationRequest) -> str:
        assert request.client is not None
        raw = request.client.client_id + "\0" + request.redirect_uri
        return base64.urlsafe_b64encode(hashlib.sha256(raw.encode()).digest()[:16]).rstrip(b"=").decode()

    def _sign(self, payload: bytes) -> str:
        return base64.urlsafe_b64encode(hmac.new(self.secret, payload, hashlib.sha256).digest()).rstrip(b"=").decode()

    def _remembered(self, scope: Scope) -> list[list[Any]]:
        """The approvals this browser's cookie holds that are still valid: ``[key, expiry]`` each."""
        value = self._cookies(scope).get(self._cookie("consent"), "")
        body, _, mac = value.partition(".")
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            if not hmac.compare_digest(mac, self._sign(payload)):
                return []
            entries = orjson.loads(payload)
        except (ValueError, orjson.JSONDecodeError):
            return []
        now = self.clock()
        if not isinstance(entries, list):
            return []
        return [e for e in entries if isinstance(e, list) and len(e) == 2 and isinstance(e[1], int) and e[1] > now]

    def _remember(self, scope: Scope, request: AuthorizationRequest) -> tuple[bytes, bytes]:
        key = self._consent_key(request)
        entries = [e for e in self._remembered(scope) if e[0] != key]
        entries.append([key, int(self.clock() + self.consent_ttl)])
        entries = entries[-self.max_remembered_consents :]
        payload = orjson.dumps(entries)
        value = base64.urlsafe_b64encode(payload).rstrip(b"=").decode() + "." + self._sign(payload)
        return self._set_cookie("consent", value, self.consent_ttl)

    # ------------------------------------------------------------------ /authorize
    async def _put_pending(self, name: str, pending: _Pending) -> bool:
        key = state_key("pending", name)
        sealed = self._sealer.seal(key, pending.dump())
        return await self._state.put_pending(key, sealed, pending.expires_at, self.clock(), self.max_pending)

    async def _get_pending(self, name: str, take: bool) -> _Pending | None:
        key, now = state_key("pending", name), self.clock()
        sealed = await (self._state.take_pending(key, now) if take else self._state.peek_pending(key, now))
        data = self._sealer.open(key, sealed) if sealed is not None else None
        return await _Pending.load(data, self.server) if data is not None else None

    async def begin(
        self, scope: Scope, send: Send, request: AuthorizationRequest, challenge: str, redirect_uri_given: bool
    ) -> None:
        """``/authorize`` checked the MCP client's request: ask for consent, or go on to the provider."""
        pending = _Pending(request, challenge, redirect_uri_given, self.clock() + self.pending_ttl)
        if self.consent_hook is not None:
            if not await self.consent_hook(request):
                await self._fail(send, request, "access_denied", "consent was not given")
                return
            await self._to_provider(scope, send, pending, [])
            return
        key = self._consent_key(request)
        if any(e[0] == key for e in self._remembered(scope)):
            await self._to_provider(scope, send, pending, [])
            return
        txn, pending.csrf = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        if not await self._put_pending(txn, pending):
            await self._fail(send, request, "temporarily_unavailable", "too many sign-ins in progress; retry later")
            return
        page = self._consent_page(request, txn, pending.csrf).encode()
        headers = [
            (b"content-type", b"text/html; charset=utf-8"),
            (b"content-length", str(len(page)).encode()),
            *_FRAME_HEADERS,
            *self._page_cookies(scope, "csrf-", txn, pending.csrf),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": page})

    def _page_cookies(self, scope: Scope, kind: str, name: str, secret: str) -> list[tuple[bytes, bytes]]:
        """The cookie binding a new consent page (``kind`` ``csrf-``, ``name`` its transaction) or sign-in at the
        provider (``login-``, named by its state) to this browser, its value ``<issued>.<secret>``, and expired ones
        for the oldest of that kind this browser still holds past :data:`MAX_CONSENT_PAGES`."""
        prefix = self._cookie(kind)
        open_pages: list[tuple[int, str]] = []
        for held, value in self._cookies(scope).items():
            issued, _, _ = value.partition(".")
            if held.startswith(prefix) and issued.isdigit():
                open_pages.append((int(issued), held[len(prefix) :]))
        open_pages.sort()
        gone = open_pages[: max(0, len(open_pages) - (MAX_CONSENT_PAGES - 1))]
        cookies = [self._set_cookie(kind + old, "", 0) for _, old in gone]
        cookies.append(self._set_cookie(kind + name, f"{time.time_ns()}.{secret}", self.pending_ttl))
        return cookies

    def _consent_page(self, request: AuthorizationRequest, txn: str, csrf: str) -> str:
        assert request.client is not None
        e = html.escape
        name = request.client.metadata.get("client_name")
        who = e(str(name)) if isinstance(name, str) and name else "An unnamed application"
        upstream = ", ".join(self.provider.scopes) or "(none)"
        return (
            "<!doctype html><html><head><meta charset='utf-8'><title>Authorize an application</title></head>"
            "<body style='font-family:sans-serif;max-width:40em;margin:2em auto'>"
            f"<h1>Allow {who} to act for you?</h1>"
            f"<p><b>{who}</b> (client id <code>{e(request.client.client_id)}</code>) asks to sign you in with "
            f"{e(self.provider.name)} and use this server as you"
            f" (scopes: <code>{e(' '.join(request.scopes) or '(default)')}</code>;"
            f" at {e(self.provider.name)}: <code>{e(upstream)}</code>).</p>"
            f"<p>Its tokens will be sent to <code>{e(request.redirect_uri)}</code>. Approve only if you started "
            "this sign-in from that application.</p>"
            f"<form method='post' action='{e(self.server.issuer)}/consent'>"
            f"<input type='hidden' name='txn' value='{e(txn)}'><input type='hidden' name='csrf' value='{e(csrf)}'>"
            "<button name='action' value='approve'>Approve</button> "
            "<button name='action' value='deny'>Deny</button></form></body></html>"
        )

    async def consent(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /consent``: the consent page's answer (bound to the browser it was shown to)."""
        form = await self.server._form(scope, receive)
        pending = await self._get_pending(form.get("txn", ""), take=False)
        if pending is None or pending.upstream or pending.expires_at < self.clock():
            raise OAuthError("invalid_request", "this consent request is unknown, expired or already answered")
        cookie = self._cookies(scope).get(self._cookie("csrf-" + form["txn"]), "").partition(".")[2]
        if not (hmac.compare_digest(form.get("csrf", ""), pending.csrf) and hmac.compare_digest(cookie, pending.csrf)):
            raise OAuthError("invalid_request", "this consent form was not shown to this browser", 403)
        if await self._get_pending(form["txn"], take=True) is None:  # (answered meanwhile, elsewhere)
            raise OAuthError("invalid_request", "this consent request is unknown, expired or already answered")
        clear = self._set_cookie("csrf-" + form["txn"], "", 0)
        if form.get("action") != "approve":
            await self._fail(send, pending.request, "access_denied", "the user denied the request", [clear])
            return
        await self._to_provider(scope, send, pending, [clear, self._remember(scope, pending.request)])

    async def _to_provider(
        self, scope: Scope, send: Send, pending: _Pending, cookies: list[tuple[bytes, bytes]]
    ) -> None:
        """Consent given: a login of the proxy's own at the provider (state, PKCE, nonce), bound to this browser."""
        state = secrets.token_urlsafe(32)
        pending.verifier, challenge = pkce_pair()
        pending.upstream = True
        pending.expires_at = self.clock() + self.pending_ttl
        p = self.provider
        params = {
            "response_type": "code",
            "client_id": p.client_id,
            "redirect_uri": self.callback_url,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        if p.scopes:
            params["scope"] = " ".join(p.scopes)
        if p.openid:
            pending.nonce = params["nonce"] = secrets.token_urlsafe(24)
        params.update(p.authorize_params)
        if not await self._put_pending(state, pending):
            await self._fail(send, pending.request, "temporarily_unavailable", "too many sign-ins in progress", cookies)
            return
        sep = "&" if "?" in p.authorize_url else "?"
        login = self._page_cookies(scope, "login-", _login_name(state), state)
        await self._redirect(send, p.authorize_url + sep + urlencode(params), [*cookies, *login])

    # ------------------------------------------------------------------ /upstream/callback
    async def callback(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``GET /upstream/callback``: the provider's answer to the proxy's login."""
        if scope.get("method") != "GET":
            raise OAuthError("invalid_request", "use GET", 405)
        q = dict(parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1")))
        state = q.get("state", "")
        pending = await self._get_pending(state, take=True) if state else None  # single use, whatever follows
        if pending is None or not pending.upstream or pending.expires_at < self.clock():
            raise OAuthError("invalid_request", "unknown, expired or already used state")
        login = "login-" + _login_name(state)
        if not hmac.compare_digest(self._cookies(scope).get(self._cookie(login), "").partition(".")[2], state):
            raise OAuthError("invalid_request", "this sign-in was not started in this browser", 403)
        clear = [self._set_cookie(login, "", 0)]
        request = pending.request
        if "error" in q:
            error = UpstreamError(q["error"], "")
            code = "access_denied" if error.error == "access_denied" else "server_error"
            await self._fail(send, request, code, f"{self.provider.name} answered {error.error}", clear)
            return
        if self.provider.issuer and "iss" in q and q["iss"] != self.provider.issuer:  # RFC 9207 (mix-up)
            await self._fail(send, request, "server_error", "the answer came from another issuer", clear)
            return
        now = self.clock()
        try:
            tokens = await self.provider.exchange_code(q.get("code", ""), self.callback_url, pending.verifier, now)
            identity = await self.provider.identify(tokens, pending.nonce)
        except UpstreamError as exc:
            await self._fail(send, request, "server_error", f"{self.provider.name}: {exc.description}", clear)
            return
        subject = await self.authorize_user(identity, request) if self.authorize_user is not None else identity.subject
        if subject is None:
            await self._fail(send, request, "access_denied", "this user may not use this server", clear)
            return
        assert request.client is not None
        family = secrets.token_urlsafe(16)  # the grant this sign-in's tokens belong to (their grant_id)
        await self._tokens.keep(family, subject, request.client.client_id, tokens)
        given = pending.redirect_uri_given
        await self.server._issue_code(send, request, pending.challenge, subject, given, clear, family=family)

    # ------------------------------------------------------------------ upstream tokens
    async def grant_revoked(self, family: str) -> None:
        """The proxy revoked the grant ``family`` (a replayed code, a reused refresh token, ``/revoke``): its
        upstream tokens are forgotten at once, and revoked at the provider when it has a revocation endpoint, in
        the background (the ``/token`` or ``/revoke`` answer does not wait for a slow provider): recorded in the
        storage until done (a replica that dies leaves it to another), at most
        :data:`~mcpkit.auth.upstream_revocation.REVOCATION_CONCURRENCY` tries at a time, each bounded by the
        provider's ``timeout``, tried again as ``revocation_retry`` says. With ``max_queued_revocations`` waiting or
        running, this one is tried once here, before the answer (never dropped)."""
        tokens = await self._tokens.take(family)
        if tokens is not None:
            await self._revocations.revoke(family, tokens)

    async def drain(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the upstream revocations being tried in the background (or
        waiting for a slot; not those pausing before their next try, whose records stay in the storage): the
        authorization server does at shutdown."""
        await self._revocations.drain(timeout)

    def _draining(self, receive: Receive) -> Receive:
        """``receive`` of the ASGI lifespan, waiting for :meth:`drain` (bounded by the provider's ``timeout``)
        before it hands on the shutdown."""
        return self._revocations.lifespan(receive)

    async def upstream_token(self, token: AccessToken | None = None) -> str | None:
        """The provider's access token of the user (and client) the request being served speaks for, refreshed
        when it expired; None when there is none (no login through this proxy, forgotten, or refused at refresh:
        the user signs in again). ``token`` defaults to :func:`~mcpkit.auth.current_access_token`."""
        if token is None:
            from .resource import current_access_token

            token = current_access_token()
        if token is None or token.issuer != self.server.issuer or not token.subject:
            return None
        family = token.claims.get("grant_id")
        if not isinstance(family, str):
            return None
        return await self._tokens.access_token(family, token.subject, token.client_id or "")

    # ------------------------------------------------------------------ answers
    async def _fail(
        self,
        send: Send,
        request: AuthorizationRequest,
        error: str,
        description: str,
        cookies: list[tuple[bytes, bytes]] | None = None,
    ) -> None:
        params = {"error": error, "error_description": description, "iss": self.server.issuer}
        if request.state is not None:
            params["state"] = request.state
        sep = "&" if "?" in request.redirect_uri else "?"
        await self._redirect(send, request.redirect_uri + sep + urlencode(params), cookies or [])

    @staticmethod
    async def _redirect(send: Send, location: str, extra: list[tuple[bytes, bytes]]) -> None:
        headers = [(b"location", location.encode()), (b"cache-control", b"no-store"), (b"content-length", b"0")]
        await send({"type": "http.response.start", "status": 302, "headers": [*headers, *extra]})
        await send({"type": "http.response.body", "body": b""})
