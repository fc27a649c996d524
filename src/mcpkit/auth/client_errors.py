"""The errors of the OAuth client flow."""

from __future__ import annotations

from ..protocol.errors import MCPError


class OAuthFlowError(MCPError):
    """Authorization could not be obtained (discovery failed, the AS refused, a security check failed).

    An :class:`~mcpkit.protocol.errors.MCPError` so that the HTTP transport answers the pending request with it
    even when the exchange already runs in the background (an authorization takes longer than the transport's
    answer window): the caller gets an error instead of waiting forever."""


class InvalidClientError(OAuthFlowError):
    """The token endpoint does not accept the client's credentials (``invalid_client``)."""
