"""The errors of the OAuth client flow."""

from __future__ import annotations

from ..protocol.errors import MCPError


class OAuthFlowError(MCPError):
    """Authorization could not be obtained (discovery failed, the AS refused, a security check failed).

    An :class:`~mcpkit.protocol.errors.MCPError` so that the HTTP transport answers the pending request with it
    even when the exchange already runs in the background (an authorization takes longer than the transport's
    answer window): the caller gets an error instead of waiting forever. ``oauth_error`` is the OAuth ``error``
    code the authorization server answered with (``invalid_grant``, ``invalid_client``...), when it answered."""

    oauth_error: str | None = None


class InvalidClientError(OAuthFlowError):
    """The token endpoint does not accept the client's credentials (``invalid_client``)."""


class AuthorizationServerUnavailable(OAuthFlowError):
    """The token endpoint could not answer now (unreachable, timed out, HTTP 5xx or 429, ``temporarily_unavailable``):
    worth trying again later. A refresh that fails this way keeps the refresh token."""
