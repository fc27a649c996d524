"""``WWW-Authenticate`` challenges (RFC 9110 section 11.6.1): read them (what a client, or ``mcpkit check``, learns
from a 401: the scheme, ``resource_metadata``, ``error``, ``scope``, DPoP ``algs``) and quote an auth-param value
for one (what a resource server writes)."""

from __future__ import annotations

__all__ = ["parse_challenges", "parse_www_authenticate", "quote_param"]


def quote_param(value: str) -> str:
    """An auth-param value as an RFC 7235 quoted-string."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_www_authenticate(value: str) -> tuple[str, dict[str, str]]:
    """``Bearer realm="x", error="invalid_token", scope="a b"`` → ("bearer", {...}). Only the first challenge."""
    found = parse_challenges(value)
    return found[0] if found else ("", {})


def parse_challenges(value: str) -> list[tuple[str, dict[str, str]]]:
    """Every challenge of a ``WWW-Authenticate`` value (several header fields joined by commas, as httpx does):
    ``Bearer error="x", DPoP algs="ES256"`` → [("bearer", {"error": "x"}), ("dpop", {"algs": "ES256"})]. Schemes
    lower-cased, parameter names lower-cased, quoted-string values unescaped; a token68 is skipped."""
    out: list[tuple[str, dict[str, str]]] = []
    params: dict[str, str] | None = None
    i, n = 0, len(value)
    while i < n:
        while i < n and value[i] in " \t,":
            i += 1
        if i >= n:
            break
        start = i
        while i < n and value[i] not in " \t,=":
            i += 1
        token = value[start:i]
        j = i
        while j < n and value[j] in " \t":
            j += 1
        if params is None or j >= n or value[j] != "=":
            params = {}
            out.append((token.lower(), params))  # a new challenge
            i = j
            continue
        i = j + 1
        while i < n and value[i] in " \t":
            i += 1
        if i < n and value[i] == '"':
            i += 1
            buf: list[str] = []
            while i < n and value[i] != '"':
                if value[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(value[i])
                i += 1
            i += 1
            val = "".join(buf)
        else:
            start = i
            while i < n and value[i] not in " \t,":
                i += 1
            val = value[start:i]
        if token:
            params[token.lower()] = val
    return out
