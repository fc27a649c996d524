"""Assertions for the JWT bearer grant (RFC 7523 §2.1) of :class:`~mcpkit.auth.client.OAuthClient`:
``OAuthClient(url, grant_type="jwt_bearer", assertion=...)``.

The assertion is a JWT the authorization server trusts, obtained elsewhere:

- a workload identity token (Kubernetes, SPIFFE, a cloud's metadata service: the MCP workload identity federation
  extension) given as a string, or read fresh by a callable each time a token is needed;
- an Identity Assertion JWT Authorization Grant (ID-JAG) that :class:`IdJagExchange` obtains from the enterprise
  identity provider by token exchange (RFC 8693) of the user's ID token, for the MCP server's authorization server
  and resource (the MCP enterprise-managed authorization extension).

A callable gets an :class:`AssertionRequest`: who the assertion is for (the authorization server's issuer, its
token endpoint, the resource, the scopes) and :meth:`AssertionRequest.post_form`, which makes a token-endpoint style
request under the OAuth client's rules (https or loopback, no private address the MCP server is not on, answers
capped in size).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from .client_errors import OAuthFlowError

__all__ = [
    "ID_JAG_TOKEN_TYPE",
    "ID_TOKEN_TYPE",
    "JWT_BEARER_GRANT",
    "TOKEN_EXCHANGE_GRANT",
    "AssertionProvider",
    "AssertionRequest",
    "IdJagExchange",
]

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"

PostForm = Callable[[str, Mapping[str, str], Mapping[str, str]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class AssertionRequest:
    """What an assertion is needed for: the authorization server (``issuer``, the audience RFC 7523 names, and
    ``token_endpoint``), the MCP server's ``resource`` and the ``scopes`` being asked for."""

    issuer: str
    token_endpoint: str
    resource: str | None
    scopes: tuple[str, ...]
    client_id: str | None
    _post: PostForm = field(repr=False, compare=False)

    async def post_form(
        self, url: str, form: Mapping[str, str], headers: Mapping[str, str] | None = None
    ) -> dict[str, Any]:
        """POST ``form`` (``application/x-www-form-urlencoded``) to ``url`` under the OAuth client's fetch rules;
        the JSON object answered with 200, else :class:`~mcpkit.auth.client_errors.OAuthFlowError` naming the
        OAuth ``error`` of the answer."""
        return await self._post(url, form, headers or {})


AssertionProvider = Callable[[AssertionRequest], Awaitable[str]]


class IdJagExchange:
    """Obtain an ID-JAG from the enterprise identity provider: the token exchange of SEP-990 / the Identity
    Assertion JWT Authorization Grant draft (``requested_token_type`` ID-JAG, ``audience`` the MCP server's
    authorization server, ``resource`` the MCP server, the user's ID token as ``subject_token``).

    Args:
        token_endpoint: the identity provider's token endpoint.
        subject_token: the identity assertion from single sign-on (an OpenID Connect ID token), or a callable
            returning a current one.
        subject_token_type: its type (default the ID token type; a SAML-derived refresh token works the same way).
        client_id / client_secret: the MCP client's credentials at the identity provider, when it requires them.
        client_auth: ``client_secret_post`` (default, as the extension's example) or ``client_secret_basic``.
        scope: scopes to ask the identity provider for (default: the ones the MCP client asks the MCP server's
            authorization server for).
    """

    def __init__(
        self,
        token_endpoint: str,
        subject_token: str | Callable[[], Awaitable[str]],
        *,
        subject_token_type: str = ID_TOKEN_TYPE,
        client_id: str | None = None,
        client_secret: str | None = None,
        client_auth: str = "client_secret_post",
        scope: str | None = None,
    ) -> None:
        if client_auth not in ("client_secret_post", "client_secret_basic"):
            raise ValueError("client_auth must be 'client_secret_post' or 'client_secret_basic'")
        self.token_endpoint = token_endpoint
        self.subject_token = subject_token
        self.subject_token_type = subject_token_type
        self.client_id = client_id
        self.client_secret = client_secret
        self.client_auth = client_auth
        self.scope = scope

    async def __call__(self, request: AssertionRequest) -> str:
        import base64

        token = self.subject_token if isinstance(self.subject_token, str) else await self.subject_token()
        form: dict[str, str] = {
            "grant_type": TOKEN_EXCHANGE_GRANT,
            "requested_token_type": ID_JAG_TOKEN_TYPE,
            "audience": request.issuer,
            "subject_token": token,
            "subject_token_type": self.subject_token_type,
        }
        if request.resource:
            form["resource"] = request.resource
        scope = self.scope or " ".join(request.scopes)
        if scope:
            form["scope"] = scope
        headers: dict[str, str] = {}
        if self.client_id and self.client_secret and self.client_auth == "client_secret_basic":
            pair = f"{quote(self.client_id, safe='')}:{quote(self.client_secret, safe='')}"
            headers["authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        elif self.client_id:
            form["client_id"] = self.client_id
            if self.client_secret:
                form["client_secret"] = self.client_secret
        data = await request.post_form(self.token_endpoint, form, headers)
        if data.get("issued_token_type") != ID_JAG_TOKEN_TYPE:
            raise OAuthFlowError(
                f"the identity provider issued {data.get('issued_token_type')!r}, not an ID-JAG ({ID_JAG_TOKEN_TYPE})"
            )
        grant = data.get("access_token")
        if not isinstance(grant, str) or not grant:
            raise OAuthFlowError("the identity provider's token exchange answer has no access_token (the ID-JAG)")
        return grant
