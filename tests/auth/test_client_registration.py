"""Dynamic client registration by the OAuth client (:mod:`mcpkit.auth.client_registration`) against a scripted
authorization server: what a refused registration's error shows."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from mcpkit.auth import OAuthFlowError
from support.scripted_oauth import client_for, scripted

SECRETS = ("s3cr3t-value", "RAT-leak", "AT-leak", "RT-leak")

REFUSALS: dict[str, tuple[int, Any, list[str]]] = {
    "an OAuth error with credentials beside it": (
        400,
        {
            "error": "invalid_client_metadata",
            "error_description": "redirect_uris must be https",
            "client_secret": "s3cr3t-value",
            "registration_access_token": "RAT-leak",
        },
        ["HTTP 400", "invalid_client_metadata", "redirect_uris must be https"],
    ),
    "a JSON answer without an error, a client secret in it": (
        500,
        {"client_id": "abc", "client_secret": "s3cr3t-value", "note": "x" * 5000},
        ["HTTP 500"],
    ),
    "a text answer with terminal escapes and credentials": (
        502,
        b"upstream \x1b[31mfailed\x1b[0m\r\nclient_secret=s3cr3t-value&access_token=AT-leak "
        b'"refresh_token": "RT-leak" Bearer AT-leak ' + b"z" * 5000,
        ["HTTP 502", "upstream", "\\x1b[31mfailed"],
    ),
    "an error_description with control characters, very long": (
        400,
        {"error": "invalid_redirect_uri", "error_description": "bad\x1b]0;pwned\x07 " + "d" * 5000},
        ["invalid_redirect_uri", "bad\\x1b]0;pwned\\x07"],
    ),
}


@pytest.mark.parametrize("case", REFUSALS)
async def test_a_refused_registration_shows_a_short_sanitized_excerpt_never_a_credential(case: str) -> None:
    """The authorization server refuses the registration. The error showed the first 200 bytes of the raw answer as
    they came: a client secret or token in it, terminal escape sequences and line breaks (which rewrite what a
    terminal or a log shows). It now shows the ``error`` and ``error_description`` of a JSON answer, else at most
    about 200 characters of the text with control characters escaped and credentials replaced by ``…``."""
    status, answer, shown = REFUSALS[case]
    async with scripted() as s:
        s.registration_answer = (status, answer)
        client, _ = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError) as refused:
                await http.get(s.mcp_url)
        message = str(refused.value)
        assert message.startswith("registration failed: ")
        for part in shown:
            assert part in message
        assert not any(secret in message for secret in SECRETS)
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in message)
        assert len(message) < 600
        assert not any(secret in line for line in client.log for secret in SECRETS)
        await client.aclose()
