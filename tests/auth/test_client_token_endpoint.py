"""The OAuth client's token requests against a scripted authorization server that answers oddly: malformed token
responses, tokens in a refused answer, an authorization server that cannot refresh for a while."""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import pytest

from mcpkit.auth import AuthorizationServerUnavailable, InMemoryTokenStorage, OAuthFlowError
from support.scripted_oauth import client_for, scripted


@pytest.mark.parametrize(
    "answer",
    [
        {"access_token": "AT-1", "token_type": "Bearer", "scope": ["read"]},
        {"access_token": "AT-1", "token_type": "Bearer", "refresh_token": 5},
        {"access_token": {"nested": "AT-1"}, "token_type": "Bearer"},
        {"access_token": "AT-1", "token_type": "Bearer", "expires_in": [3600]},
    ],
    ids=["scope-list", "refresh-number", "token-object", "expires-list"],
)
async def test_a_token_response_of_the_wrong_shape_fails_the_flow_with_an_oauth_flow_error(answer: Any) -> None:
    """RFC 6749 §5.1 makes the token, the refresh token and the scope strings and ``expires_in`` a number (a
    numeric string is read as one, as some authorization servers send it): anything else is refused at once with an
    OAuthFlowError, rather than stored and crashing a later step (a list scope raised AttributeError at the next
    step-up)."""
    async with scripted() as s:

        async def shaped(form: dict[str, str]) -> tuple[int, Any]:
            return 200, answer

        s.token_hook = shaped
        client, _ = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match="token response"):
                await http.get(s.mcp_url)
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage) and storage.tokens == {}
        await client.aclose()


async def test_an_expires_in_sent_as_a_numeric_string_still_expires_the_token() -> None:
    """``"expires_in": "3600"`` (some authorization servers quote it) is read as 3600 s: the token is refreshed
    when due instead of being taken for one that never expires."""
    async with scripted() as s:

        async def quoted(form: dict[str, str]) -> tuple[int, Any]:
            s.codes.pop(form.get("code", ""), None)
            s.tokens["AT-quoted"] = {"read"}
            return 200, {"access_token": "AT-quoted", "token_type": "Bearer", "expires_in": "3600"}

        s.token_hook = quoted
        client, _ = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage)
        expires_at = storage.tokens[(s.base, s.mcp_url)].expires_at
        assert expires_at is not None and abs(expires_at - time.time() - 3600) < 60
        await client.aclose()


async def token_refusal(status: int, answer: Any) -> tuple[OAuthFlowError, list[str]]:
    """Sign in where the token endpoint answers ``status`` with ``answer``: the error the flow fails with, and the
    flow's log."""
    async with scripted() as s:

        async def answer_with(form: dict[str, str]) -> tuple[int, Any]:
            return status, answer

        s.token_hook = answer_with
        client, _ = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError) as caught:
                await http.get(s.mcp_url)
        await client.aclose()
    return caught.value, list(client.log)


@pytest.mark.parametrize(
    "status, answer",
    [
        (201, {"access_token": "AT-SECRET", "refresh_token": "RT-SECRET", "token_type": "Bearer"}),
        (200, {"refresh_token": "RT-SECRET", "id_token": "ID-SECRET", "token_type": "Bearer"}),
        (400, {"error": "invalid_request", "access_token": "AT-SECRET"}),
    ],
    ids=["created", "no-access-token", "error-with-token"],
)
async def test_a_refused_token_response_never_shows_its_tokens_in_the_error_or_the_log(
    status: int, answer: dict[str, Any]
) -> None:
    """An answer the client refuses may still hold tokens (a 201, a 200 without access_token): the error and the
    flow's log name the status and the OAuth error, never a token value."""
    error, log = await token_refusal(status, answer)
    said = str(error) + "\n".join(log)
    assert f"HTTP {status}" in str(error)
    assert "SECRET" not in said, said


@pytest.mark.parametrize(
    "outage",
    [(503, {"error": "temporarily_unavailable"}), (500, b"<html>oops</html>"), (429, {"error": "slow_down"})],
    ids=["503", "500-html", "429"],
)
async def test_a_refresh_the_authorization_server_cannot_answer_now_keeps_the_refresh_token(outage: Any) -> None:
    """A refresh refused for the moment (5xx, 429) fails the call with an OAuthFlowError and keeps the refresh
    token: once the authorization server is back, the next call refreshes with it, and the user is never sent
    through the browser again for an outage (the refresh token was dropped, and the call started a new
    authorization)."""
    async with scripted() as s:
        client, browser = client_for(s)
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage)
        key = (s.base, s.mcp_url)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
            before = storage.tokens[key]
            before.expires_at = time.time()  # due for a refresh

            async def down(form: dict[str, str]) -> tuple[int, Any] | None:
                return outage if form["grant_type"] == "refresh_token" else None

            s.token_hook = down
            with pytest.raises(OAuthFlowError, match="refresh token is kept"):
                await http.get(s.mcp_url)
            assert storage.tokens[key].refresh_token == before.refresh_token
            s.token_hook = None  # back
            assert (await http.get(s.mcp_url)).status_code == 200
            assert storage.tokens[key].access_token != before.access_token
        assert len(browser.visited) == 1
        refreshes = [f for f in s.requests_to("/token") if f["grant_type"] == "refresh_token"]
        assert len(refreshes) == 2 and {f["refresh_token"] for f in refreshes} == {before.refresh_token}
        await client.aclose()


async def test_a_refresh_token_the_authorization_server_refuses_is_dropped_and_the_user_authorizes_again() -> None:
    """``invalid_grant`` (revoked, expired) is final: the refresh token goes and the flow authorizes afresh."""
    async with scripted() as s:
        client, browser = client_for(s)
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
            token = storage.tokens[(s.base, s.mcp_url)]
            s.refresh_tokens.clear()  # revoked at the authorization server
            token.expires_at = time.time()
            assert (await http.get(s.mcp_url)).status_code == 200
        assert len(browser.visited) == 2
        await client.aclose()


async def test_calls_waiting_on_a_refresh_that_could_not_be_made_share_its_failure() -> None:
    """Ten calls find the token due while the authorization server is down: one refresh request is made and all
    ten fail with its AuthorizationServerUnavailable (each queued call made its own attempt after the one before it
    failed, so the last waited for ten timeouts in a row); the next call, the server back, refreshes."""
    async with scripted() as s:
        client, browser = client_for(s)
        storage = client.storage
        assert isinstance(storage, InMemoryTokenStorage)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
            storage.tokens[(s.base, s.mcp_url)].expires_at = time.time()

            async def down(form: dict[str, str]) -> tuple[int, Any] | None:
                if form["grant_type"] != "refresh_token":
                    return None
                await asyncio.sleep(0.3)
                return 503, {"error": "temporarily_unavailable"}

            s.token_hook = down
            answers = await asyncio.gather(*(http.get(s.mcp_url) for _ in range(10)), return_exceptions=True)
            assert all(isinstance(a, AuthorizationServerUnavailable) for a in answers), answers
            assert len([f for f in s.requests_to("/token") if f["grant_type"] == "refresh_token"]) == 1
            s.token_hook = None
            assert (await http.get(s.mcp_url)).status_code == 200
        assert len(browser.visited) == 1
        await client.aclose()


HOSTILE = "bad\x1b[31m\r\nforged log line access_token=AT-SECRET Bearer BEARER-SECRET\x07"


def _clean(message: str) -> None:
    """What every refusal the client shows must be: bounded, no control character, no credential."""
    assert len(message) < 700, len(message)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in message), message
    assert "SECRET" not in message, message


@pytest.mark.parametrize(
    "status, answer",
    [
        (400, {"error": "invalid_grant", "error_description": HOSTILE, "pad": "a" * 200_000}),
        (400, {"pad": "p" * 200_000, "error": "invalid_grant", "error_description": HOSTILE}),
        (400, HOSTILE.encode() + b"x" * 200_000),
        (200, {"access_token": "AT-SECRET", "token_type": "Bearer", "scope": ["read"], "note": HOSTILE * 2000}),
    ],
    ids=["json-error-first", "json-error-last", "text", "malformed-200"],
)
async def test_a_refused_token_answer_is_shown_bounded_escaped_and_without_credentials(
    status: int, answer: Any
) -> None:
    """A token endpoint's refusal was shown whole (up to max_document_size: 200 KB in an error message) with its
    control characters as they came (a terminal escape sequence, a forged log line) and credentials inside its
    description. It is now shown as the registration refusal is: bounded, control characters escaped, credentials
    replaced by ``…``; the OAuth ``error`` and its description come first."""
    error, log = await token_refusal(status, answer)
    message = str(error)
    _clean(message)
    assert (f"HTTP {status}" if status != 200 else "malformed token response") in message
    if isinstance(answer, dict) and "error" in answer:
        assert "invalid_grant" in message and "bad\\x1b[31m\\r\\nforged" in message
        assert error.oauth_error == "invalid_grant"
    for line in log:
        _clean(line)


async def test_an_authorization_error_from_the_redirect_is_shown_bounded_and_escaped() -> None:
    """The ``error`` and ``error_description`` of the authorization response come from the redirect's query, which
    the authorization server (or whoever forged the redirect) writes: shown bounded and escaped."""
    async with scripted() as s:
        seen: list[str] = []

        async def redirect(url: str) -> None:
            seen.append(url)

        async def callback() -> dict[str, str]:
            state = dict(parse_qsl(urlsplit(seen[-1]).query))["state"]
            return {"state": state, "error": "access_denied\x1b[2J", "error_description": HOSTILE * 3000}

        client, _ = client_for(s)
        client.redirect_handler, client.callback_handler = redirect, callback
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match="authorization refused") as caught:
                await http.get(s.mcp_url)
        _clean(str(caught.value))
        assert "access_denied\\x1b[2J" in str(caught.value)
        await client.aclose()
