"""The OAuth client's discovery against scripted servers that name endpoints it must not use."""

from __future__ import annotations

import httpx
import pytest

from mcpkit.auth import OAuthFlowError
from support.scripted_oauth import client_for, scripted


@pytest.mark.req("M034")
async def test_a_2025_03_26_server_whose_metadata_names_a_plain_http_authorization_endpoint_is_refused() -> None:
    """2025-03-26 metadata need not advertise ``code_challenge_methods_supported``, but its endpoints are still
    authorization endpoints ("All authorization endpoints MUST be served over HTTPS"): one on plain http elsewhere
    than a loopback host is refused before the browser is sent there (it was: the metadata without the PKCE field
    skipped the endpoint check)."""
    async with scripted() as s:
        s.prm = {}  # no resource metadata: the 2025-03-26 discovery at the authorization base URL
        s.as_metadata = {
            "issuer": s.base,
            "authorization_endpoint": "http://authorize.example/authorize",
            "token_endpoint": s.base + "/token",
            "registration_endpoint": s.base + "/register",
        }
        client, browser = client_for(s, protocol_version="2025-03-26")
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match="authorization_endpoint must be an https URL"):
                await http.get(s.mcp_url, headers={"mcp-protocol-version": "2025-03-26"})
        assert browser.visited == []
        assert s.requests_to("/register") == []
        await client.aclose()


@pytest.mark.req("M034")
async def test_a_2025_03_26_server_whose_metadata_lists_no_pkce_is_still_authorized_with_s256() -> None:
    """2025-03-26 metadata need not list ``code_challenge_methods_supported``: the client proceeds, with S256."""
    async with scripted() as s:
        s.prm = {}
        s.as_metadata = {
            "issuer": s.base,
            "authorization_endpoint": s.base + "/authorize",
            "token_endpoint": s.base + "/token",
            "registration_endpoint": s.base + "/register",
        }
        client, browser = client_for(s, protocol_version="2025-03-26")
        async with httpx.AsyncClient(auth=client) as http:
            answer = await http.get(s.mcp_url, headers={"mcp-protocol-version": "2025-03-26"})
        assert answer.status_code == 200
        assert "code_challenge_method=S256" in browser.visited[0]
        await client.aclose()
