"""OAuth 2.1 for MCP over HTTP (needs ``mcpkit[auth]`` for JWTs; ``mcpkit[http]`` for httpx).

Server side: :func:`protect` wraps an ASGI app (``create_app(server)``) as an OAuth resource server with a
:class:`JWTVerifier`, :class:`IntrospectionVerifier` or :class:`StaticTokenVerifier`; handlers read the caller's
token with :func:`current_access_token`. :class:`AuthorizationServer` is a small ASGI authorization server for
development and tests; with ``upstream=UpstreamLogin(UpstreamProvider.github(...))`` it is an OAuth proxy logging
users in at an identity provider without Dynamic Client Registration (GitHub, Google, any OpenID provider). Client
side: :class:`OAuthClient` is an ``httpx.Auth`` for ``StreamableHTTPClientTransport(url, auth=...)``.

Authorization applies to HTTP transports (POST /mcp, /messages and /ws alike: :func:`protect` installs one decision
that the dispatcher applies to every request); a stdio server takes its credentials from the environment (an
embedder that authenticates a stdio peer can install the same decision with
:func:`mcpkit.server.request_context.authorize_as`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

if TYPE_CHECKING:
    from .client import (
        AssertionRequest,
        AuthorizationServerUnavailable,
        FileTokenStorage,
        HeadlessBrowser,
        IdJagExchange,
        InMemoryTokenStorage,
        InvalidClientError,
        LoopbackCallback,
        OAuthClient,
        OAuthFlowError,
        TokenSet,
        TokenStorage,
    )
    from .dpop import DPoPVerifier, NonceSource
    from .keys import SigningKey
    from .postgres_storage import PostgresAuthStorage, PostgresReplayCache
    from .redis_storage import RedisAuthStorage, RedisReplayCache
    from .replay import InMemoryReplayCache, ReplayCache
    from .resource import BearerAuthMiddleware, current_access_token, protect, tool_scopes
    from .server import (
        AuthorizationRequest,
        AuthorizationServer,
        AuthStorage,
        ClientRecord,
        CodeGrant,
        InMemoryAuthStorage,
        RefreshGrant,
    )
    from .upstream import UpstreamError, UpstreamIdentity, UpstreamProvider, UpstreamTokens
    from .upstream_login import UpstreamLogin
    from .upstream_revocation import RevocationRetry
    from .verifiers import (
        AccessToken,
        IntrospectionVerifier,
        InvalidToken,
        JWTVerifier,
        StaticTokenVerifier,
        TokenRevocation,
    )

_LAZY = {
    "AssertionRequest": ".client",
    "AuthorizationServerUnavailable": ".client",
    "IdJagExchange": ".client",
    "DPoPVerifier": ".dpop",
    "NonceSource": ".dpop",
    "SigningKey": ".keys",
    "InMemoryReplayCache": ".replay",
    "ReplayCache": ".replay",
    "FileTokenStorage": ".client",
    "HeadlessBrowser": ".client",
    "InvalidClientError": ".client",
    "LoopbackCallback": ".client",
    "InMemoryTokenStorage": ".client",
    "OAuthClient": ".client",
    "OAuthFlowError": ".client",
    "TokenSet": ".client",
    "TokenStorage": ".client",
    "PostgresAuthStorage": ".postgres_storage",
    "PostgresReplayCache": ".postgres_storage",
    "RedisAuthStorage": ".redis_storage",
    "RedisReplayCache": ".redis_storage",
    "BearerAuthMiddleware": ".resource",
    "current_access_token": ".resource",
    "protect": ".resource",
    "tool_scopes": ".resource",
    "AuthorizationRequest": ".server",
    "AuthorizationServer": ".server",
    "AuthStorage": ".server",
    "ClientRecord": ".server",
    "CodeGrant": ".server",
    "InMemoryAuthStorage": ".server",
    "RefreshGrant": ".server",
    "UpstreamError": ".upstream",
    "UpstreamIdentity": ".upstream",
    "UpstreamProvider": ".upstream",
    "UpstreamTokens": ".upstream",
    "UpstreamLogin": ".upstream_login",
    "RevocationRetry": ".upstream_revocation",
    "AccessToken": ".verifiers",
    "IntrospectionVerifier": ".verifiers",
    "InvalidToken": ".verifiers",
    "JWTVerifier": ".verifiers",
    "StaticTokenVerifier": ".verifiers",
    "TokenRevocation": ".verifiers",
}


if not TYPE_CHECKING:  # (a type checker reads the imports above: a misspelled name is an error there)
    __getattr__ = lazy_getattr(__name__, _LAZY, needs="jwt")


__all__ = [
    "AssertionRequest",
    "AuthorizationServerUnavailable",
    "DPoPVerifier",
    "IdJagExchange",
    "InMemoryReplayCache",
    "NonceSource",
    "ReplayCache",
    "SigningKey",
    "FileTokenStorage",
    "InvalidClientError",
    "LoopbackCallback",
    "AccessToken",
    "AuthStorage",
    "AuthorizationRequest",
    "AuthorizationServer",
    "ClientRecord",
    "CodeGrant",
    "BearerAuthMiddleware",
    "HeadlessBrowser",
    "InMemoryAuthStorage",
    "InMemoryTokenStorage",
    "IntrospectionVerifier",
    "InvalidToken",
    "JWTVerifier",
    "OAuthClient",
    "OAuthFlowError",
    "PostgresAuthStorage",
    "PostgresReplayCache",
    "RedisAuthStorage",
    "RefreshGrant",
    "RedisReplayCache",
    "RevocationRetry",
    "StaticTokenVerifier",
    "TokenRevocation",
    "TokenSet",
    "TokenStorage",
    "UpstreamError",
    "UpstreamIdentity",
    "UpstreamLogin",
    "UpstreamProvider",
    "UpstreamTokens",
    "current_access_token",
    "protect",
    "tool_scopes",
]
