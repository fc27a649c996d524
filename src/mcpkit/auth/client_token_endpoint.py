"""The token endpoint side of :class:`~mcpkit.auth.client.OAuthClient`: token requests with the client's
authentication (a secret, or a ``private_key_jwt`` assertion: RFC 7523 §2.2), the jwt-bearer grant (RFC 7523 §2.1)
and its assertion providers' requests, and DPoP (RFC 9449): the key tokens are bound to, the proof on every token
and MCP request, and the servers' nonces (retried once on ``use_dpop_nonce``).

Every request goes through the discovery mixin's checks (https or loopback, the address rules, capped answers).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections import deque
from collections.abc import Mapping
from types import NoneType
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import orjson

from ._util import DocumentTooLarge, fetch_capped_response
from .challenges import parse_challenges
from .client_discovery import Discovered, DiscoveryMixin
from .client_errors import (
    EXCERPT,
    SECRET_MEMBERS,
    AuthorizationServerUnavailable,
    InvalidClientError,
    OAuthFlowError,
    shown_safely,
)
from .client_grants import JWT_BEARER_GRANT, AssertionProvider, AssertionRequest
from .client_tokens import TokenSet
from .dpop import make_proof
from .keys import SigningKey

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
# the DPoP key algorithms a client generates, in order of preference
_DPOP_PREFERENCE = ("ES256", "EdDSA", "ES384", "ES512", "PS256", "RS256")
_MAX_NONCES = 64  # origins whose latest DPoP nonce is remembered
_MAX_NONCE_SIZE = 1024


class TokenEndpointMixin(DiscoveryMixin):
    """Token requests, assertions and DPoP for :class:`~mcpkit.auth.client.OAuthClient` (the attributes below are
    set by its ``__init__``)."""

    private_key: SigningKey | None
    assertion: str | AssertionProvider | None
    dpop: bool | str
    _dpop_key: SigningKey | None
    _nonces: dict[str, str]
    _rs_offers_dpop: bool
    _refused: deque[str]

    # ------------------------------------------------------------------ DPoP
    def _present(self, request: httpx.Request, tokens: TokenSet | None) -> None:
        """Put the access token (and, for a DPoP-bound one, a fresh proof) on ``request``."""
        if tokens is None:
            return
        if tokens.token_type.lower() == "dpop" and self._dpop_key is not None:
            request.headers["Authorization"] = f"DPoP {tokens.access_token}"
            request.headers["DPoP"] = make_proof(
                self._dpop_key,
                request.method,
                str(request.url),
                access_token=tokens.access_token,
                nonce=self._nonces.get(_origin(str(request.url))),
            )
        else:
            request.headers["Authorization"] = f"Bearer {tokens.access_token}"
            request.headers.pop("DPoP", None)

    def _remember_nonce(self, url: Any, response: httpx.Response | Mapping[str, str]) -> str | None:
        headers = response.headers if isinstance(response, httpx.Response) else response
        nonce = headers.get("dpop-nonce")
        if not nonce or len(nonce) > _MAX_NONCE_SIZE or not nonce.isascii() or not nonce.isprintable():
            return None
        origin = _origin(str(url))
        self._nonces.pop(origin, None)
        self._nonces[origin] = nonce
        while len(self._nonces) > _MAX_NONCES:
            self._nonces.pop(next(iter(self._nonces)))
        return nonce

    def _wants_nonce(self, response: httpx.Response, tokens: TokenSet | None) -> bool:
        if tokens is None or tokens.token_type.lower() != "dpop" or "dpop-nonce" not in response.headers:
            return False
        found = dict(parse_challenges(", ".join(response.headers.get_list("www-authenticate"))))
        return found.get("dpop", {}).get("error") == "use_dpop_nonce"

    def _dpop_for(self, discovery: Discovered) -> SigningKey | None:
        """The key to bind tokens from this authorization server to, or None (no DPoP). In ``auto`` mode only when
        the MCP server takes DPoP (a ``DPoP`` challenge, or DPoP fields in its resource metadata): an authorization
        server that merely supports it would otherwise bind tokens a bearer-only MCP server refuses."""
        if self.dpop is False:
            return None
        supported = discovery.metadata.get("dpop_signing_alg_values_supported")
        algs = [a for a in supported if isinstance(a, str)] if isinstance(supported, list) else []
        if self.dpop == "auto" and not (self._rs_offers_dpop or _prm_offers_dpop(discovery.prm)):
            return None
        key = self._dpop_key
        if key is None:
            alg = next((a for a in _DPOP_PREFERENCE if a in algs), None) if algs else "ES256"
            if alg is None:
                if self.dpop == "auto":
                    return None  # nothing this client can sign with: plain bearer tokens
                raise OAuthFlowError(f"the authorization server accepts no DPoP algorithm this client can use: {algs}")
            key = self._dpop_key = SigningKey.generate(alg)
        if algs and key.algorithm not in algs:
            if self.dpop == "auto":
                return None
            raise OAuthFlowError(
                f"the authorization server accepts DPoP proofs signed with {algs}, not {key.algorithm} (the DPoP key)"
            )
        return key

    async def _jwt_bearer(self, discovery: Discovered, client: Mapping[str, Any], scopes: list[str] | None) -> TokenSet:
        """RFC 7523 §2.1: trade the assertion for an access token. An assertion the authorization server refused
        is not sent again (a static workload token would only be refused again): the error surfaces instead."""
        if isinstance(self.assertion, str):
            assertion = self.assertion
        else:
            assert self.assertion is not None
            request = AssertionRequest(
                issuer=str(discovery.metadata.get("issuer") or discovery.issuer),
                token_endpoint=str(discovery.metadata["token_endpoint"]),
                resource=discovery.resource,
                scopes=tuple(scopes or ()),
                client_id=client.get("client_id"),
                _post=self._post_form,
            )
            assertion = await self.assertion(request)
        if not isinstance(assertion, str) or not assertion:
            raise OAuthFlowError("the assertion provider returned no assertion")
        digest = hashlib.sha256(assertion.encode()).hexdigest()
        if digest in self._refused:
            raise OAuthFlowError("the authorization server refused this assertion before; not sending it again")
        form = {"grant_type": JWT_BEARER_GRANT, "assertion": assertion}
        if scopes:
            form["scope"] = " ".join(scopes)
        if discovery.resource:
            form["resource"] = discovery.resource
        try:
            return await self._token_request(discovery, client, form, discovery.resource)
        except OAuthFlowError as exc:
            if not isinstance(exc, AuthorizationServerUnavailable) and exc.oauth_error not in (None, "use_dpop_nonce"):
                self._refused.append(digest)
            raise

    async def _post_form(self, url: str, form: Mapping[str, str], headers: Mapping[str, str]) -> dict[str, Any]:
        """A token-endpoint style POST under the fetch rules (an assertion provider's token exchange)."""
        await self._check_target(url, "token exchange endpoint")
        self.log.append("POST " + url + " " + str(form.get("grant_type", "")))
        hdrs = {"accept": "application/json", "content-type": "application/x-www-form-urlencoded", **headers}
        try:
            status, raw = await self._fetch("POST", url, content=urlencode(dict(form)), headers=hdrs)
        except httpx.HTTPError as exc:
            raise OAuthFlowError(f"the request to {url} failed: {exc}") from exc
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:
            data = None
        if status != 200 or not isinstance(data, dict):
            error = data.get("error") if isinstance(data, dict) else None
            shown = _answer_shown(data) if isinstance(data, dict) else refusal_excerpt(raw)
            refused = OAuthFlowError(f"{url} refused the request: HTTP {status} {shown}")
            refused.oauth_error = str(error) if error else None
            raise refused
        return data

    async def _token_request(
        self, discovery: Discovered, client: Mapping[str, Any], form: dict[str, str], resource: str | None
    ) -> TokenSet:
        """One token request: client authentication, a DPoP proof when tokens are bound (retried once with the
        authorization server's nonce on ``use_dpop_nonce``, RFC 9449 §8), the answer checked and read."""
        endpoint = str(discovery.metadata["token_endpoint"])
        await self._check_target(endpoint, "token endpoint")
        key = self._dpop_for(discovery)
        status, data, error, raw = 0, None, None, b""  # (bound for a checker that cannot see the loop runs)
        for attempt in range(2):
            body, headers = self._authenticated(discovery, client, form)
            if key is not None:
                headers["dpop"] = make_proof(key, "POST", endpoint, nonce=self._nonces.get(_origin(endpoint)))
            self.log.append("POST " + endpoint + " " + form["grant_type"])
            try:
                status, answer_headers, raw = await fetch_capped_response(
                    self._client(), "POST", endpoint, self.max_document_size, content=urlencode(body), headers=headers
                )
            except DocumentTooLarge as exc:
                raise OAuthFlowError(f"{exc}; refusing to read it (OAuthClient(max_document_size=...))") from None
            except httpx.HTTPError as exc:
                raise AuthorizationServerUnavailable(f"token request failed: {exc}") from exc
            fresh_nonce = self._remember_nonce(endpoint, answer_headers) if key is not None else None
            try:
                data = orjson.loads(raw)
            except orjson.JSONDecodeError:
                data = None
            error = data.get("error") if isinstance(data, dict) else None
            if error == "use_dpop_nonce" and fresh_nonce is not None and attempt == 0:
                self.log.append("the authorization server asked for a DPoP nonce: retrying with it")
                continue
            break
        if status != 200 or not isinstance(data, dict) or not data.get("access_token"):
            if status >= 500 or status == 429 or error == "temporarily_unavailable":
                kind: type[OAuthFlowError] = AuthorizationServerUnavailable
            else:
                kind = InvalidClientError if error == "invalid_client" else OAuthFlowError
            shown = _answer_shown(data) if isinstance(data, dict) else refusal_excerpt(raw)
            refused = kind(f"token request refused: HTTP {status} {shown}")
            refused.oauth_error = str(error) if error else None
            raise refused
        token_type = str(data.get("token_type", "")).lower()
        if token_type not in ("bearer", "dpop") or (token_type == "dpop" and key is None):
            raise OAuthFlowError(f"unsupported token_type {shown_safely(repr(data.get('token_type')), 100)}")
        access, refresh, scope = data["access_token"], data.get("refresh_token"), data.get("scope")
        try:
            expires_in = _seconds(data.get("expires_in"))
            well_formed = isinstance(access, str) and isinstance(refresh, (str, NoneType))
        except ValueError:
            expires_in, well_formed = None, False
        if not well_formed or not isinstance(scope, (str, NoneType)):
            # RFC 6749 §5.1: strings, and a number of seconds; stored as is, another shape breaks a later step
            raise OAuthFlowError(f"malformed token response (RFC 6749 §5.1): {_answer_shown(data)}")
        return TokenSet(
            access_token=str(access),
            token_type="DPoP" if token_type == "dpop" else "Bearer",
            refresh_token=refresh or None,
            expires_at=time.time() + expires_in if expires_in is not None else None,
            scope=scope or form.get("scope"),
            resource=resource,
            dpop_jkt=key.thumbprint if token_type == "dpop" and key is not None else None,
        )

    def _authenticated(
        self, discovery: Discovered, client: Mapping[str, Any], form: Mapping[str, str]
    ) -> tuple[dict[str, str], dict[str, str]]:
        """The form and headers of a token request with the client's authentication: HTTP Basic, the secret in the
        form, a fresh ``private_key_jwt`` assertion (RFC 7523 §2.2), or the bare ``client_id`` (public client)."""
        headers = {"accept": "application/json", "content-type": "application/x-www-form-urlencoded"}
        body = dict(form)
        method = client.get("token_endpoint_auth_method") or "none"
        client_id = client.get("client_id")
        secret = client.get("client_secret")
        if method == "private_key_jwt" and self.private_key is not None and client_id:
            now = int(time.time())
            claims = {
                "iss": str(client_id),
                "sub": str(client_id),
                # RFC 7523bis / the client credentials extension: the audience is the issuer identifier
                "aud": str(discovery.metadata.get("issuer") or discovery.issuer),
                "iat": now,
                "exp": now + 60,
                "jti": secrets.token_urlsafe(16),
            }
            body["client_assertion_type"] = CLIENT_ASSERTION_TYPE
            body["client_assertion"] = self.private_key.sign(claims)
        elif method == "client_secret_basic" and secret and client_id:
            pair = f"{quote(str(client_id), safe='')}:{quote(str(secret), safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        elif client_id:
            body["client_id"] = str(client_id)
            if method == "client_secret_post" and secret:
                body["client_secret"] = str(secret)
        return body, headers


_ANSWER_SHOWN = 300  # characters of a refused token answer an error shows


def _redacted(data: Any) -> Any:
    """A token endpoint's answer with its credentials replaced by ``'…'``."""
    if not isinstance(data, dict):
        return data
    return {k: "…" if k in SECRET_MEMBERS else v for k, v in data.items()}


def _answer_shown(data: dict[str, Any]) -> str:
    """A refused JSON answer as an error may show it: the OAuth ``error`` and ``error_description`` first, then the
    other members, credentials redacted, bounded and escaped (:func:`~.client_errors.shown_safely`)."""
    first: dict[str, Any] = {k: data[k] for k in ("error", "error_description") if k in data}
    ordered: dict[str, Any] = {**first, **{k: v for k, v in data.items() if k not in first}}
    return shown_safely(repr(_redacted(ordered)), _ANSWER_SHOWN)


def refusal_excerpt(raw: bytes) -> str:
    """What an error may show of an authorization server's refusal: the ``error`` and ``error_description`` of a
    JSON object, else about 200 characters of the text; control characters escaped (no terminal escape sequence or
    forged log line) and anything that looks like a credential replaced by ``…``."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        parts = [str(data[k]) for k in ("error", "error_description") if isinstance(data.get(k), (str, int, float))]
        return shown_safely(": ".join(parts) if parts else "(no error in the answer)")
    return shown_safely(raw[: EXCERPT * 4].decode("utf-8", "replace"))


def _seconds(value: Any) -> float | None:
    """``expires_in`` in seconds: a number, or a numeric string (some authorization servers quote it); None when
    absent. Anything else raises ValueError (a malformed answer)."""
    if value is None:
        return None
    number = float(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, (int, float)) or number != number:  # (NaN)
        raise ValueError(f"expires_in {value!r} is not a number of seconds")
    return float(number)


def _origin(url: str) -> str:
    parts = httpx.URL(url)
    return f"{parts.scheme}://{parts.host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


def _prm_offers_dpop(prm: Mapping[str, Any] | None) -> bool:
    """The protected resource metadata says the MCP server takes DPoP-bound tokens (RFC 9728 §2)."""
    return bool(prm and (prm.get("dpop_signing_alg_values_supported") or prm.get("dpop_bound_access_tokens_required")))
