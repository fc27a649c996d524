"""The errors of the OAuth client flow, and how they show what a server answered (bounded, escaped, redacted)."""

from __future__ import annotations

import re

from ..protocol.errors import MCPError

#: members of a token endpoint's (or a registration's) answer that are credentials: never shown in an error or a log
SECRET_MEMBERS = frozenset(
    {"access_token", "refresh_token", "id_token", "issued_token", "client_secret", "registration_access_token"}
)
#: a credential in a text answer: ``name=value``, ``"name": "value"``, or an ``Authorization`` scheme's credentials
_SECRET_NAMES = "|".join(sorted(SECRET_MEMBERS))
_SECRET_IN_TEXT = re.compile(
    rf"""(?i)((?:{_SECRET_NAMES})["']?\s*[:=]\s*["']?|\b(?:bearer|basic|dpop)\s+)"""  # the name, or the scheme
    r"""[^\s"'&,;}]+"""  # the credential
)
EXCERPT = 200  # characters of an answer's text an error shows


def shown_safely(text: str, limit: int = EXCERPT) -> str:
    """``text`` (something a server or a redirect wrote) as an error or a log line may show it: anything that looks
    like a credential replaced by ``…``, control characters escaped as ``\\xNN`` (no terminal escape sequence, no
    forged log line), at most ``limit`` characters (then ``…``)."""
    text = text[: limit * 4]
    text = _SECRET_IN_TEXT.sub(lambda m: m.group(1) + "…", text)
    text = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 else c for c in text)
    return text if len(text) <= limit else text[:limit] + "…"


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
