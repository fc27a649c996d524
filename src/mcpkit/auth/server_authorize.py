"""The ``/authorize`` endpoint of the development authorization server (:mod:`mcpkit.auth.server`): the
authorization request checked (the client and its registered redirect URI first, so an error is never sent to an
unregistered one; then the response type, PKCE S256, scopes and resource), the approver asked, and the code
(single use, bound to the PKCE challenge) sent back in the redirect with RFC 9207 ``iss``.
"""

from __future__ import annotations

import re
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

from .._asgi import Receive, Scope, Send
from ._util import OAuthError, is_loopback_host, valid_redirect_uri
from .storage import AuthorizationRequest, AuthStorage, ClientRecord, CodeGrant

if TYPE_CHECKING:
    from .upstream_login import UpstreamLogin

__all__ = ["MAX_NONCE", "Approver", "AuthorizeEndpoint"]

#: the longest OpenID Connect ``nonce`` an authorization request may carry (characters): it is kept in the code
#: record and signed into the id_token
MAX_NONCE = 512

#: decides an authorization request: the subject it is granted to, or None to deny it
Approver = Callable[[AuthorizationRequest], Awaitable[str | None]]


def _redirect_registered(uri: str, registered: list[str]) -> bool:
    """Exact match, except that a loopback redirect URI matches on any port (RFC 8252 §7.3: native apps bind an
    ephemeral port at run time, so the port cannot be registered in advance)."""
    if uri in registered:
        return True
    try:
        asked = urlsplit(uri)
        if asked.scheme != "http" or not is_loopback_host(asked.hostname):
            return False
        for candidate in registered:
            reg = urlsplit(candidate)
            if (reg.scheme, reg.hostname, reg.path, reg.query) == (
                asked.scheme,
                asked.hostname,
                asked.path,
                asked.query,
            ):
                return True
    except ValueError:
        return False
    return False


_S256_CHALLENGE = re.compile(r"[A-Za-z0-9_-]{43}")


class AuthorizeEndpoint:
    """``/authorize`` for :class:`~mcpkit.auth.server.AuthorizationServer` (its base class; the attributes below
    are set by its ``__init__``, the methods stubbed here are its other bases' and its own)."""

    issuer: str
    storage: AuthStorage
    clock: Callable[[], float]
    code_ttl: float
    max_form: int
    approver: Approver | None
    upstream: UpstreamLogin | None

    @staticmethod
    async def _body(receive: Receive, limit: int, option: str) -> bytes:
        raise NotImplementedError  # pragma: no cover - ClientRegistration._body

    async def _client(self, client_id: str) -> ClientRecord | None:
        raise NotImplementedError  # pragma: no cover - ClientDocuments._client

    def _scopes(self, requested: str | None, client: ClientRecord) -> list[str]:
        raise NotImplementedError  # pragma: no cover - AuthorizationServer._scopes

    def _resource(self, requested: str | None) -> str | None:
        raise NotImplementedError  # pragma: no cover - AuthorizationServer._resource

    async def _used(self, client: ClientRecord | None) -> None:
        raise NotImplementedError  # pragma: no cover - AuthorizationServer._used

    async def _authorize(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") not in ("GET", "POST"):
            raise OAuthError("invalid_request", "use GET", 405)
        pairs = parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1"))
        if scope.get("method") == "POST":
            pairs += parse_qsl((await self._body(receive, self.max_form, "max_form")).decode("utf-8", "replace"))
        q: dict[str, str] = dict(pairs)
        # RFC 6749 §3.1: no parameter more than once (§4.1.2.1: invalid_request)
        repeated = sorted(k for k, n in Counter(k for k, _ in pairs).items() if n > 1) if len(q) != len(pairs) else []
        if "client_id" in repeated or "redirect_uri" in repeated:
            raise OAuthError("invalid_request", "repeated parameter: " + " ".join(repeated))
        client = await self._client(q.get("client_id", ""))
        if client is None:
            raise OAuthError("invalid_client", "unknown client_id")
        redirect_uri = q.get("redirect_uri")
        if redirect_uri is None:
            if len(client.redirect_uris) != 1:
                raise OAuthError("invalid_request", "redirect_uri is required")
            redirect_uri = client.redirect_uris[0]
        if not _redirect_registered(redirect_uri, client.redirect_uris) or not valid_redirect_uri(redirect_uri):
            # never redirect to an unregistered URI (open redirector)
            raise OAuthError("invalid_request", "redirect_uri is not registered for this client")
        state = q.get("state")

        async def fail(error: str, description: str) -> None:
            params = {"error": error, "error_description": description, "iss": self.issuer}
            if state is not None:
                params["state"] = state
            await self._redirect(send, redirect_uri, params)

        if repeated == ["resource"]:
            # RFC 8707 §2 lets a client name several resources; a token here is for one (its audience)
            await fail("invalid_target", "one resource per authorization request")
            return
        if repeated:
            await fail("invalid_request", "repeated parameter: " + " ".join(repeated))
            return
        if q.get("response_type") != "code":
            await fail("unsupported_response_type", "only response_type=code")
            return
        if "authorization_code" not in client.grant_types:
            await fail("unauthorized_client", "this client may not use the authorization code grant")
            return
        challenge = q.get("code_challenge")
        if not challenge:
            await fail("invalid_request", "PKCE is required: code_challenge missing")
            return
        if q.get("code_challenge_method") != "S256":
            await fail("invalid_request", "PKCE code_challenge_method must be S256")
            return
        if not _S256_CHALLENGE.fullmatch(challenge):
            # RFC 7636 §4.2: BASE64URL(SHA256(verifier)), 43 characters without padding; nothing else can match
            await fail("invalid_request", "code_challenge is not an S256 value (43 base64url characters)")
            return
        try:
            scopes = self._scopes(q.get("scope"), client)
            resource = self._resource(q.get("resource"))
        except OAuthError as exc:
            await fail(exc.error, exc.description)
            return
        nonce = q.get("nonce")
        if nonce is not None and len(nonce) > MAX_NONCE:
            await fail("invalid_request", f"nonce is longer than {MAX_NONCE} characters")
            return
        request = AuthorizationRequest(client, redirect_uri, scopes, resource, state, nonce=nonce)
        if self.upstream is not None:  # an OAuth proxy: consent, then the login at the upstream provider
            await self.upstream.begin(scope, send, request, challenge, "redirect_uri" in q)
            return
        subject = await self.approver(request) if self.approver is not None else None
        if subject is None:
            await fail("access_denied", "the resource owner denied the request")
            return
        await self._issue_code(send, request, challenge, subject, "redirect_uri" in q)

    async def _issue_code(
        self,
        send: Send,
        request: AuthorizationRequest,
        challenge: str,
        subject: str,
        redirect_uri_given: bool,
        extra: list[tuple[bytes, bytes]] | None = None,
        family: str | None = None,
    ) -> None:
        """The authorization request was granted to ``subject``: its code (single use, bound to the PKCE
        challenge) sent to the client's redirect URI. ``family`` names the grant its tokens will belong to (the
        ``grant_id`` of its access tokens; default: a new one)."""
        client = request.client
        assert client is not None
        code = secrets.token_urlsafe(32)
        await self.storage.save_code(
            code,
            CodeGrant(
                client.client_id,
                request.redirect_uri,
                challenge,
                request.scopes,
                request.resource,
                subject,
                self.clock() + self.code_ttl,
                redirect_uri_given=redirect_uri_given,
                nonce=request.nonce,
                auth_time=int(self.clock()),
                family=family or secrets.token_urlsafe(16),
            ),
        )
        await self._used(client)
        params = {"code": code, "iss": self.issuer}
        if request.state is not None:
            params["state"] = request.state
        await self._redirect(send, request.redirect_uri, params, extra)

    async def _consent(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.upstream is None:  # pragma: no cover - routed only with an upstream login
            raise OAuthError("invalid_request", "no consent here", 404)
        await self.upstream.consent(scope, receive, send)

    async def _callback(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.upstream is None:  # pragma: no cover - routed only with an upstream login
            raise OAuthError("invalid_request", "no callback here", 404)
        await self.upstream.callback(scope, receive, send)

    async def _redirect(
        self, send: Send, uri: str, params: Mapping[str, str], extra: list[tuple[bytes, bytes]] | None = None
    ) -> None:
        sep = "&" if urlsplit(uri).query else "?"
        location = uri + sep + urlencode(params)
        await send(
            {
                "type": "http.response.start",
                "status": 302,
                "headers": [
                    (b"location", location.encode()),
                    (b"cache-control", b"no-store"),
                    (b"content-length", b"0"),
                    *(extra or ()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b""})
