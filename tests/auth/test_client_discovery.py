"""The OAuth client's discovery against scripted servers that name endpoints it must not use."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import httpx
import orjson
import pytest

from mcpkit.auth import OAuthFlowError
from support.scripted_oauth import ScriptedOAuth, client_for, scripted


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


def _metadata_without_pkce(s: ScriptedOAuth) -> dict[str, str]:
    return {
        "issuer": s.base,
        "authorization_endpoint": s.base + "/authorize",
        "token_endpoint": s.base + "/token",
        "registration_endpoint": s.base + "/register",
    }


def _rpc(method: str, version: str, **params: object) -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params}})


@pytest.mark.req("M034")
@pytest.mark.parametrize("metadata", ["without the PKCE field", "none at all"])
async def test_without_resource_metadata_a_negotiated_2025_11_25_session_refuses_an_as_advertising_no_pkce(
    metadata: str,
) -> None:
    """From 2025-11-25 on, "if code_challenge_methods_supported is absent ... MCP clients MUST refuse to proceed".
    A request carrying the negotiated ``MCP-Protocol-Version`` tells the client which revision the server speaks:
    the 2025-03-26 discovery (no resource metadata) no longer takes metadata without the field, nor the default
    endpoints when there is no metadata at all. Nothing is registered and the browser is never sent."""
    async with scripted() as s:
        s.prm = {}
        s.as_metadata = _metadata_without_pkce(s) if metadata == "without the PKCE field" else {}
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match="does not advertise PKCE S256") as refused:
                await http.get(s.mcp_url, headers={"mcp-protocol-version": "2025-11-25"})
        assert "2025-11-25" in str(refused.value)
        assert browser.visited == []
        assert s.requests_to("/register") == []
        await client.aclose()


@pytest.mark.req("M034")
@pytest.mark.parametrize(
    ("method", "version", "header"),
    [("initialize", "2025-11-25", False), ("server/discover", "2026-07-28", True)],
)
async def test_the_first_401_of_negotiation_where_the_version_is_only_proposed_still_takes_a_2025_03_26_server(
    method: str, version: str, header: bool
) -> None:
    """The ``initialize`` or ``server/discover`` that opens a session only proposes a revision: a 2025-03-26 server
    (metadata without the PKCE field) may answer it, which the version fallback exists for. The client proceeds,
    with S256, and then refuses nothing: the 2025-03-26 rule applies to a server it cannot place yet."""
    async with scripted() as s:
        s.prm = {}
        s.as_metadata = _metadata_without_pkce(s)
        client, browser = client_for(s)
        headers = {"mcp-protocol-version": version} if header else {}
        params = {"protocolVersion": version} if method == "initialize" else {}
        async with httpx.AsyncClient(auth=client) as http:
            answer = await http.post(s.mcp_url, content=_rpc(method, version, **params), headers=headers)
        assert answer.status_code == 200
        assert "code_challenge_method=S256" in browser.visited[0]
        await client.aclose()


@pytest.mark.req("M034")
async def test_once_a_2026_07_28_request_went_through_a_later_server_discover_401_is_held_to_the_pkce_rule() -> None:
    """After ``server/discover`` was answered the client sends its other requests with the negotiated revision: a
    later 401, even on ``server/discover`` again (the 2026-07-28 ping), is no longer the unknown first contact."""
    async with scripted() as s:
        client, browser = client_for(s)
        modern = {"mcp-protocol-version": "2026-07-28"}
        async with httpx.AsyncClient(auth=client) as http:
            answer = await http.post(s.mcp_url, content=_rpc("tools/list", "2026-07-28"), headers=modern)
            assert answer.status_code == 200
            s.tokens.clear()  # every token revoked: the next request meets a 401
            s.refresh_tokens.clear()
            s.prm = {}
            s.as_metadata = _metadata_without_pkce(s)
            with pytest.raises(OAuthFlowError, match="does not advertise PKCE S256"):
                await http.post(s.mcp_url, content=_rpc("server/discover", "2026-07-28"), headers=modern)
        assert len(browser.visited) == 1
        await client.aclose()


@pytest.mark.req("M034")
async def test_require_advertised_pkce_refuses_an_as_advertising_no_pkce_whatever_the_revision() -> None:
    """``require_advertised_pkce=True`` holds every authorization server to the 2025-11-25 rule: a 2025-03-26 server
    and the unknown first contact included."""
    async with scripted() as s:
        s.prm = {}
        s.as_metadata = _metadata_without_pkce(s)
        client, browser = client_for(s, require_advertised_pkce=True)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match="does not advertise PKCE S256"):
                await http.get(s.mcp_url, headers={"mcp-protocol-version": "2025-03-26"})
            with pytest.raises(OAuthFlowError, match="does not advertise PKCE S256"):
                await http.post(s.mcp_url, content=_rpc("initialize", "2025-11-25", protocolVersion="2025-11-25"))
        assert browser.visited == []
        await client.aclose()


@pytest.mark.req("M032")
async def test_resource_metadata_naming_a_parent_of_the_server_at_the_servers_own_metadata_url_is_refused() -> None:
    """RFC 9728 §3.3: the ``resource`` of a metadata document "MUST be identical" to the resource identifier its
    well-known URL was made from, and to the URL of the request when the challenge named the document; otherwise it
    "MUST NOT be used". The document at ``/.well-known/oauth-protected-resource/mcp`` (the one the challenge names)
    naming the origin was taken as a parent, and the origin sent as ``resource``: it is refused now, saying why."""
    async with scripted() as s:
        s.prm = {"resource": s.base, "authorization_servers": [s.base]}
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match=r"RFC 9728 §3\.3") as refused:
                await http.get(s.mcp_url)
        assert s.base in str(refused.value) and s.mcp_url in str(refused.value)
        assert browser.visited == []
        await client.aclose()


@pytest.mark.req("M032")
@pytest.mark.parametrize("names", ["the origin", "the server"])
async def test_the_root_resource_metadata_may_name_the_origin_or_the_server_and_that_resource_is_sent(
    names: str,
) -> None:
    """The spec's fallback to ``/.well-known/oauth-protected-resource`` at the root: its resource identifier is the
    origin (RFC 9728 §3.3 identity), and the spec hosts the MCP endpoint's metadata there too. Either is accepted,
    and the ``resource`` sent to the authorization server is the one the metadata names, the identifier the
    server checks its tokens' audience against."""
    async with scripted() as s:
        s.prm = {}  # nothing at the server's own metadata URL: the root document
        resource = s.base if names == "the origin" else s.mcp_url
        s.root_prm = {"resource": resource, "authorization_servers": [s.base]}
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
        assert parse_qs(urlsplit(browser.visited[0]).query)["resource"] == [resource]
        assert [form["resource"] for form in s.requests_to("/token")] == [resource]
        await client.aclose()
