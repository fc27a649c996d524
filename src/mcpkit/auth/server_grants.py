"""The token grants of the development authorization server (:mod:`mcpkit.auth.server`): the authorization code
(PKCE S256, single use: a replayed code revokes what was issued from it, RFC 6749 §4.1.2), the refresh token
(rotated: a reused one revokes its family; a public client's bound to its DPoP key), the token response itself
(JWT access tokens, ``DPoP`` when bound; an OpenID Connect ``id_token`` when ``openid`` is granted) and RFC 7662
introspection (the token's own client or a designated resource server only).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._util import OAuthError, s256, send_json
from .storage import AuthStorage, ClientRecord, KeyBoundRefreshStorage, RefreshGrant, RevocationLedger

if TYPE_CHECKING:
    from .._asgi import Receive, Scope, Send
    from .upstream_login import UpstreamLogin

__all__ = ["TokenGrants"]


#: the ledger key that marks a grant family which can hold no refresh token (its tokens live as long as its access
#: token): a revocation of the family, from a replayed code or an access token at ``/revoke``, lasts that long
_NO_REFRESH = "no-refresh:"


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


class TokenGrants:
    """Grants, token responses and introspection for :class:`~mcpkit.auth.server.AuthorizationServer` (the
    attributes below are set by its ``__init__``)."""

    issuer: str
    key: Any
    kid: str
    storage: AuthStorage
    ledger: RevocationLedger
    clock: Callable[[], float]
    access_token_ttl: float
    refresh_token_ttl: float | None
    code_ttl: float
    clock_skew: float
    issue_refresh_tokens: bool
    upstream: UpstreamLogin | None
    _resource: Callable[[str | None], str | None]

    def issue_access_token(
        self,
        *,
        subject: str,
        client_id: str | None,
        scopes: list[str],
        resource: str | None,
        grant: str | None = None,
        jkt: str | None = None,
    ) -> str:
        raise NotImplementedError  # pragma: no cover - AuthorizationServer.issue_access_token

    async def _form(self, scope: Scope, receive: Receive) -> dict[str, str]:
        raise NotImplementedError  # pragma: no cover - AuthorizationServer._form

    async def _client_auth(self, scope: Scope, form: dict[str, str]) -> ClientRecord:
        raise NotImplementedError  # pragma: no cover - AuthorizationServer._client_auth

    async def _grant_code(self, client: ClientRecord, form: dict[str, str], jkt: str | None) -> dict[str, Any]:
        raw = form.get("code", "")
        code = await self.storage.pop_code(raw)  # single use
        key = "code:" + _digest(raw)
        if code is None:
            family = await self.ledger.used(key) if raw else None
            if family is not None:  # a replayed code: revoke what was issued from it (RFC 6749 §4.1.2)
                await self._revoke(family, None)
            raise OAuthError("invalid_grant", "invalid, expired or already used authorization code")
        family = code.family or secrets.token_urlsafe(16)
        refresh = self.issue_refresh_tokens and "refresh_token" in client.grant_types
        expiry = self._family_expiry(refresh)
        await self.ledger.mark_used(key, family, expiry)
        if not refresh:
            await self.ledger.mark_used(_NO_REFRESH + family, family, expiry)
        if code.client_id != client.client_id or code.expires_at < self.clock():
            raise OAuthError("invalid_grant", "invalid, expired or already used authorization code")
        if code.redirect_uri_given and "redirect_uri" not in form:
            # RFC 6749 / OAuth 2.1 §4.1.3: named in the authorization request, so required here, identical
            raise OAuthError("invalid_grant", "redirect_uri is required: the authorization request named one")
        if form.get("redirect_uri", code.redirect_uri) != code.redirect_uri:
            raise OAuthError("invalid_grant", "redirect_uri does not match the authorization request")
        verifier = form.get("code_verifier")
        if not verifier or not verifier.isascii() or not hmac.compare_digest(s256(verifier), code.challenge):
            raise OAuthError("invalid_grant", "PKCE verification failed")
        resource = self._same_resource(form, code.resource, "the authorization request")
        return await self._tokens(
            client.client_id,
            code.subject,
            code.scopes,
            resource,
            refresh=refresh,
            family=family,
            jkt=jkt,
            bind_refresh=_public(client),
            openid=True,
            nonce=code.nonce,
            auth_time=code.auth_time,
        )

    def _same_resource(self, form: dict[str, str], granted: str | None, what: str) -> str | None:
        """The resource a token request may name: the one ``granted`` (``what`` says by what), or none."""
        if "resource" not in form:
            return granted
        asked = self._resource(form["resource"])
        if granted is not None and asked != granted:
            raise OAuthError("invalid_target", f"resource differs from {what}")
        return asked

    def _family_expiry(self, refresh: bool) -> float | None:
        """How long a grant family must be remembered: as long as any token of it can live, and ``clock_skew``
        more. A token's ``exp`` is this replica's clock's; a resource server (or another replica) judges it on its
        own, with its leeway, so a clock behind this one still takes the token after it has expired here.
        ``refresh``: the family can hold refresh tokens (without, its code and access token are all it has)."""
        if refresh and self.refresh_token_ttl is None:
            return None
        longest = max(self.access_token_ttl, self.code_ttl, (self.refresh_token_ttl or 0.0) if refresh else 0.0)
        return self.clock() + longest + self.clock_skew

    async def _revoke(self, family: str, refresh: bool | None) -> None:
        """Revoke a grant family: its tokens are refused from now on, and an OAuth proxy drops (and revokes at the
        provider) the upstream tokens of that sign-in. ``refresh``: whether the family can hold refresh tokens;
        None when the request does not tell (a replayed code, an access token): then only a family marked at its
        code's exchange as holding none is revoked for its access token's lifetime, any other for a refresh
        token's (one made when the server still issued them, or its client still had the grant, lives on)."""
        if refresh is None:
            refresh = await self.ledger.used(_NO_REFRESH + family) is None
        await self.ledger.revoke(family, self._family_expiry(refresh))
        if self.upstream is not None:
            await self.upstream.grant_revoked(family)

    async def _revocation(self, scope: Scope, receive: Receive, send: Send) -> None:
        """RFC 7009 ``/revoke``: a client revokes one of its refresh or access tokens, and with it the whole grant
        it belongs to. A token of another client is refused; an unknown, expired or malformed one is answered 200
        like a revoked one (§2.2)."""
        form = await self._form(scope, receive)
        client = await self._client_auth(scope, form)
        token = form.get("token", "")
        if not token:
            raise OAuthError("invalid_request", "token is required")
        family, refresh = await self._family_of(token, client)
        if family:
            await self._revoke(family, refresh)
        await send_json(send, 200, {}, [(b"pragma", b"no-cache")])

    async def _family_of(self, token: str, client: ClientRecord) -> tuple[str | None, bool | None]:
        """The grant family of ``token`` (a refresh token of this server, taken; else an access token of it),
        checked to be ``client``'s, and whether it holds refresh tokens (True: ``token`` is one; None: unknown)."""
        record = await self.storage.pop_refresh(token)
        if record is not None:
            if record.client_id != client.client_id:
                await self.storage.save_refresh(token, record)
                raise OAuthError("unauthorized_client", "this token was not issued to this client")
            return record.family or None, True
        claims = self._own_claims(token, self.clock_skew)  # (a clock behind this one may still take it)
        if claims is None:
            return None, None
        if claims.get("client_id") != client.client_id:
            raise OAuthError("unauthorized_client", "this token was not issued to this client")
        grant = claims.get("grant_id")
        return grant if isinstance(grant, str) else None, None

    def _own_claims(self, token: str, leeway: float) -> dict[str, Any] | None:
        """The claims of ``token`` if it is an access token this server signed, unexpired ``leeway`` seconds ago on
        this replica's clock; else None. Its ``iat`` and ``nbf`` are not checked: they are the clock's of the
        replica that issued it, which may run ahead of this one (a token just issued there is not invalid here)."""
        import jwt

        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                self.key.public_key(),
                algorithms=["ES256"],
                issuer=self.issuer,
                options={"verify_aud": False, "verify_exp": False, "verify_iat": False, "verify_nbf": False},
            )
        except jwt.PyJWTError:
            return None
        exp = claims.get("exp")
        if not isinstance(exp, (int, float)) or exp + leeway < self.clock():
            return None
        return claims

    async def _holder_ok(self, old: RefreshGrant, client: ClientRecord) -> bool:
        """Whether ``client`` may still use the refresh token ``old``: its own, not expired, its grant not revoked."""
        return not (
            old.client_id != client.client_id
            or (old.expires_at is not None and old.expires_at < self.clock())
            or (old.family and await self.ledger.revoked(old.family))
        )

    def _refreshed_grant(self, form: dict[str, str], old: RefreshGrant) -> tuple[list[str], str | None]:
        """The scopes and resource a refresh of ``old`` asks for: at most the original grant."""
        scopes = old.scopes
        if form.get("scope"):
            asked = form["scope"].split()
            if any(s not in old.scopes for s in asked):
                raise OAuthError("invalid_scope", "a refresh cannot widen the grant")
            scopes = asked
        return scopes, self._same_resource(form, old.resource, "the original grant")

    async def _grant_refresh(self, client: ClientRecord, form: dict[str, str], jkt: str | None) -> dict[str, Any]:
        raw = form.get("refresh_token", "")
        # rotation: the old one dies now, unless bound to another DPoP key: a storage that can checks the binding
        # before taking it (atomically), so a wrong-key request never takes it from under its holder's refresh
        atomic = isinstance(self.storage, KeyBoundRefreshStorage)
        if isinstance(self.storage, KeyBoundRefreshStorage):
            if form.get("scope") or "resource" in form:
                # a request its own client got wrong (more scope, another resource) is refused from a read that
                # takes nothing: taking the token and putting it back made a concurrent refresh find it missing
                seen = await self.storage.peek_refresh(raw)
                if seen is not None and seen.jkt in (None, jkt) and await self._holder_ok(seen, client):
                    self._refreshed_grant(form, seen)
            old = await self.storage.take_refresh(raw, jkt)
        else:
            old = await self.storage.pop_refresh(raw)
        key = "refresh:" + _digest(raw)
        if old is None:
            family = await self.ledger.used(key) if raw else None
            if family is not None:  # a rotated refresh token came back: someone holds a copy; kill the family
                await self._revoke(family, True)
            raise OAuthError("invalid_grant", "invalid, expired or already used refresh token")
        if old.jkt is not None and jkt != old.jkt:
            # RFC 9449 §5: a public client's refresh token is bound to its DPoP key. A request with another key (or
            # none) is refused without spending the token: whoever holds a copy without the key cannot burn it
            if not atomic:
                await self.storage.save_refresh(raw, old)
            raise OAuthError("invalid_grant", "the refresh token is bound to another DPoP key")
        holder_ok = await self._holder_ok(old, client)
        try:
            scopes, resource = self._refreshed_grant(form, old)
        except OAuthError:
            if holder_ok:
                # a request its own client got wrong spends nothing: spending it made the retry a "reused" token,
                # and that revoked the whole grant (with a KeyBoundRefreshStorage it was refused above, untaken)
                await self.storage.save_refresh(raw, old)
                raise
            scopes, resource = old.scopes, old.resource  # refused below as invalid_grant, like any bad holder
        if old.family:
            await self.ledger.mark_used(key, old.family, self._family_expiry(True))
        if not holder_ok:
            raise OAuthError("invalid_grant", "invalid, expired, revoked or already used refresh token")
        return await self._tokens(
            client.client_id,
            old.subject,
            scopes,
            resource,
            refresh=True,
            keep_scopes=old.scopes,
            family=old.family,
            jkt=jkt,
            bind_refresh=_public(client),
            openid=True,
            auth_time=old.auth_time,  # a refreshed id_token: the same authentication, no nonce (OIDC Core §12.2)
        )

    async def _tokens(
        self,
        client_id: str | None,
        subject: str,
        scopes: list[str],
        resource: str | None,
        *,
        refresh: bool,
        keep_scopes: list[str] | None = None,
        family: str | None = None,
        jkt: str | None = None,
        bind_refresh: bool = False,
        openid: bool = False,
        nonce: str | None = None,
        auth_time: int | None = None,
    ) -> dict[str, Any]:
        result: dict[str, Any] = {
            "access_token": self.issue_access_token(
                subject=subject, client_id=client_id, scopes=scopes, resource=resource, grant=family, jkt=jkt
            ),
            "token_type": "DPoP" if jkt else "Bearer",
            "expires_in": int(self.access_token_ttl),
        }
        if scopes:
            result["scope"] = " ".join(scopes)
        if openid and "openid" in scopes and client_id is not None:  # (a user's grant: code or refresh)
            result["id_token"] = self._id_token(subject, client_id, nonce, auth_time)
        if refresh and client_id is not None:
            token = secrets.token_urlsafe(32)
            expires = self.clock() + self.refresh_token_ttl if self.refresh_token_ttl else None
            bound = jkt if bind_refresh else None
            record = RefreshGrant(client_id, keep_scopes or scopes, resource, subject, expires, family or "", bound)
            record.auth_time = auth_time
            await self.storage.save_refresh(token, record)
            result["refresh_token"] = token
        return result

    def _id_token(self, subject: str, client_id: str, nonce: str | None, auth_time: int | None) -> str:
        """The OpenID Connect ID Token of a grant of ``openid`` (Core §2): about ``subject``, for the client
        (``aud``), signed with the server's key as its discovery document says (ES256, the JWKS ``kid``)."""
        import jwt

        now = int(self.clock())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": subject,
            "aud": client_id,
            "iat": now,
            "exp": now + int(self.access_token_ttl),
            "auth_time": auth_time if auth_time is not None else now,
        }
        if nonce is not None:
            claims["nonce"] = nonce
        return jwt.encode(claims, self.key, algorithm="ES256", headers={"kid": self.kid, "typ": "JWT"})

    async def _introspect(self, scope: Scope, receive: Receive, send: Send) -> None:
        form = await self._form(scope, receive)
        client = await self._client_auth(scope, form)
        if not client.has_secret:
            raise OAuthError("invalid_client", "introspection needs a confidential client", 401)
        claims = self._own_claims(form.get("token", ""), 0.0)
        if claims is None:
            await send_json(send, 200, {"active": False})
            return
        grant = claims.get("grant_id")
        if (not client.resource_server and claims.get("client_id") != client.client_id) or (
            isinstance(grant, str) and await self.ledger.revoked(grant)
        ):
            # RFC 7662 §4: only the token's own client or a designated resource server learns anything about it
            await send_json(send, 200, {"active": False})
            return
        claims["active"] = True
        cnf = claims.get("cnf")
        # RFC 9449 §6.2: a token bound to a DPoP key is a DPoP token (its cnf.jkt goes with the claims)
        claims["token_type"] = "DPoP" if isinstance(cnf, dict) and "jkt" in cnf else "Bearer"
        await send_json(send, 200, claims)


def _public(client: ClientRecord) -> bool:
    """A client without credentials of its own (RFC 9449 §5: its refresh tokens are bound to its DPoP key)."""
    return not client.has_secret and client.token_endpoint_auth_method != "private_key_jwt"
