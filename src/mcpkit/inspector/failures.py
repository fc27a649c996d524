"""What the page is told when something fails: :func:`describe_failure` turns an exception into the JSON the page
shows (an MCP error's code, message and data; a server that did not start with its stderr), and
:func:`connect_failure` does so for a connection that could not be opened, saying what to do when the server asks
for authorization, and marking a start that was abandoned (:data:`ABANDONED`: ``mcpkit dev`` started newer code).
"""

from __future__ import annotations

from typing import Any

from ..client.results import ModernEraRefused
from ..client.targets import ServerStartError
from ..protocol.errors import MCPError

__all__ = ["ABANDONED", "NEEDS_AUTHORIZATION", "connect_failure", "describe_failure"]

#: The failure of a connection whose opening was abandoned (``Inspector.abandon_connect``).
ABANDONED = ConnectionAbortedError("abandoned: a newer change replaced it before it answered")
#: Said after an HTTP 401 at connect without an OAuth client (``--auth``).
NEEDS_AUTHORIZATION = (
    "The server needs authorization (OAuth): sign in with mcpkit inspect URL --auth (client_options={'auth': "
    "'oauth'} in code), or give an access token as a header, mcpkit inspect URL -H 'Authorization: Bearer TOKEN'."
)
#: Said when a connection forced to 2026-07-28 is refused as a handshake-era server refuses it.
SPEAKS_HANDSHAKE_ONLY = (
    "Inspect it with mcpkit inspect TARGET --mode auto (which falls back to the handshake era) or --mode handshake, "
    "or another --protocol-version (mode='auto' or 'handshake' in code)."
)


def describe_failure(exc: BaseException) -> dict[str, Any]:
    """``exc`` as the page shows it: ``{"message", "code"?, "data"?, "stderr"?}``."""
    if isinstance(exc, MCPError):
        return {"code": exc.code, "message": exc.message, "data": exc.data}
    if isinstance(exc, ServerStartError):
        return {"message": exc.message, "stderr": exc.stderr}
    return {"message": f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__}


def connect_failure(exc: BaseException) -> dict[str, Any]:
    """Why a connection could not be opened (``"abandoned": True`` for :data:`ABANDONED`)."""
    if exc is ABANDONED:
        return {"message": str(exc), "abandoned": True}
    failure = describe_failure(exc)
    if isinstance(exc, MCPError) and isinstance(exc.data, dict) and exc.data.get("status") == 401:
        failure["message"] = f"{failure['message']}\n{NEEDS_AUTHORIZATION}"
    elif isinstance(exc, ModernEraRefused):
        failure["message"] = (
            "The server does not seem to speak protocol 2026-07-28: it answered server/discover with error "
            f"{exc.code} ({exc.server_message}).\n{SPEAKS_HANDSHAKE_ONLY}"
        )
    return failure
