"""Step-up authorization (403 ``insufficient_scope``) of the OAuth client against a scripted server: one
re-authorization for many calls refused at once, and the first 401 of a request not counted as a step-up."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from mcpkit.auth import OAuthFlowError
from support.scripted_oauth import ScriptedOAuth, client_for, scripted


@pytest.mark.req("M031")
async def test_concurrent_calls_refused_for_the_same_missing_scope_share_one_re_authorization() -> None:
    """Five calls refused at once for the scope ``write`` lead to one step-up authorization, not five (the user
    was sent through the browser once per call), and every call succeeds with the token it obtained."""
    async with scripted() as s:
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
            s.token_delay = 0.2  # the step-up takes a moment: the other calls are refused meanwhile
            answers = await asyncio.gather(*(http.get(s.mcp_url, headers={"x-need": "write"}) for _ in range(5)))
        assert [a.status_code for a in answers] == [200] * 5
        assert all(a.json()["scopes"] == ["read", "write"] for a in answers)
        assert len(browser.visited) == 2
        await client.aclose()


@pytest.mark.req("M031")
async def test_a_request_authorized_on_its_first_401_may_still_step_up() -> None:
    """A request sent without a token gets 401 (authorized with the challenge's scope ``read``), then 403
    ``insufficient_scope`` for ``write``: that is the request's first step-up, allowed by ``max_step_up=1`` (the
    401's authorization used the step-up allowance, and the call failed with 403)."""
    async with scripted() as s:
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            answer = await http.get(s.mcp_url, headers={"x-need": "write"})
        assert answer.status_code == 200 and answer.json()["scopes"] == ["read", "write"]
        assert len(browser.visited) == 2
        await client.aclose()


def granting_read_only(s: ScriptedOAuth, *, say_so: bool) -> Any:
    """A token endpoint hook: whatever is asked, the token carries ``read`` only, and the answer says so
    (``say_so``) or names no scope (RFC 6749 §5.1: the client then takes the scopes it asked for)."""

    async def hook(form: dict[str, str]) -> tuple[int, Any] | None:
        if form["grant_type"] != "authorization_code":
            return None
        s.codes.pop(form["code"], None)
        s.tokens[token := f"AT-{len(s.tokens)}"] = {"read"}
        return 200, {"access_token": token, "token_type": "Bearer", **({"scope": "read"} if say_so else {})}

    return hook


@pytest.mark.req("M031")
async def test_a_server_that_never_accepts_the_stepped_up_token_gets_a_bounded_number_of_authorizations() -> None:
    """An authorization server that never grants the scope asked for (without saying so), and a server that keeps
    refusing: one authorization for the 401, ``max_step_up`` for the 403s, then the 403 is the answer (no loop)."""
    async with scripted() as s:
        s.token_hook = granting_read_only(s, say_so=False)
        client, browser = client_for(s, max_step_up=2)
        async with httpx.AsyncClient(auth=client) as http:
            answer = await http.get(s.mcp_url, headers={"x-need": "write"})
        assert answer.status_code == 403
        assert len(browser.visited) == 3
        await client.aclose()


@pytest.mark.req("M031")
async def test_scopes_the_authorization_server_declined_are_not_asked_for_again_on_every_call() -> None:
    """The authorization server granted ``read`` when asked for ``read write``: later calls refused for ``write``
    get their 403 at once instead of sending the user through the same authorization on every call (they did: one
    browser round per call), as the spec asks clients to track scope upgrade attempts; calls that need ``read``
    only go on with the token."""
    async with scripted() as s:
        s.token_hook = granting_read_only(s, say_so=True)
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
            statuses = [(await http.get(s.mcp_url, headers={"x-need": "write"})).status_code for _ in range(3)]
            assert statuses == [403, 403, 403]
            assert (await http.get(s.mcp_url)).status_code == 200
        assert len(browser.visited) == 2  # the first sign-in and the one step-up the server declined
        await client.aclose()


@pytest.mark.req("M031")
async def test_a_scope_left_out_of_the_first_authorization_is_still_asked_for_once_when_a_call_needs_it() -> None:
    """The first authorization asked for ``read write`` (the 401's scope) and got ``read`` (a user may untick a
    scope): the first call that needs ``write`` steps up once, since the user may grant it now; once that
    step-up was declined too, later calls get their 403 at once."""
    async with scripted() as s:
        s.challenge_scope = "read write"
        s.token_hook = granting_read_only(s, say_so=True)
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
            assert len(browser.visited) == 1
            statuses = [(await http.get(s.mcp_url, headers={"x-need": "write"})).status_code for _ in range(3)]
        assert statuses == [403, 403, 403]
        assert len(browser.visited) == 2
        await client.aclose()


@pytest.mark.req("M031")
async def test_a_step_up_that_would_ask_for_more_scopes_than_the_bound_is_refused_naming_it() -> None:
    """A server whose every 403 names new scopes (granted without them each time): each step-up asks for every scope
    asked for before, so the authorization request grew by one challenge per step-up without end (automatic with
    ``client_credentials``). Past ``MAX_STEPPED_UP_SCOPES`` scopes the step-up is refused with an
    :class:`OAuthFlowError` naming the bound, no authorization ever asked for more, the scopes remembered stay
    bounded, and calls the token serves go on."""
    from mcpkit.auth.client import MAX_STEPPED_UP_SCOPES

    async with scripted() as s:
        s.token_hook = granting_read_only(s, say_so=True)
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            for call in range(2):
                fresh = " ".join(f"scope-{call}-{i}" for i in range(100))
                assert (await http.get(s.mcp_url, headers={"x-need": fresh})).status_code == 403
            with pytest.raises(OAuthFlowError, match=f"{MAX_STEPPED_UP_SCOPES} scopes"):
                await http.get(s.mcp_url, headers={"x-need": " ".join(f"scope-2-{i}" for i in range(100))})
            assert (await http.get(s.mcp_url)).status_code == 200
        asked = [parse_qs(urlsplit(url).query)["scope"][0].split() for url in browser.visited]
        assert [len(a) for a in asked] == [1, 101, 201]  # the first sign-in and two step-ups, then the refusal
        assert 0 < len(client._stepped_up[s.base]) <= MAX_STEPPED_UP_SCOPES
        await client.aclose()


@pytest.mark.req("M031")
async def test_a_step_up_whose_scope_string_would_pass_its_length_bound_is_refused_naming_it() -> None:
    """Few scopes, but long ones: the scope string of a step-up is bounded too (``MAX_SCOPE_STRING`` characters), so
    the authorization URL and the token form stay of a size every server takes."""
    from mcpkit.auth.client import MAX_SCOPE_STRING

    async with scripted() as s:
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            long = " ".join(f"{i}-" + "x" * 1000 for i in range(9))
            with pytest.raises(OAuthFlowError, match=f"{MAX_SCOPE_STRING} characters"):
                await http.get(s.mcp_url, headers={"x-need": long})
            assert (await http.get(s.mcp_url)).status_code == 200
        assert len(browser.visited) == 1  # the first sign-in only
        await client.aclose()


@pytest.mark.req("M031")
async def test_a_first_authorization_whose_challenge_names_more_scopes_than_the_bound_is_refused_naming_it() -> None:
    """The bound on the scopes an authorization asks for held for step-ups only: a first ``401`` naming 300 scopes
    sent them all to the authorization server and remembered them for every later step-up. It is refused like a
    step-up past the bound, before the browser is sent anywhere."""
    from mcpkit.auth.client import MAX_STEPPED_UP_SCOPES

    async with scripted() as s:
        s.challenge_scope = " ".join(f"scope-{i}" for i in range(MAX_STEPPED_UP_SCOPES + 44))
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            with pytest.raises(OAuthFlowError, match=f"{MAX_STEPPED_UP_SCOPES} scopes"):
                await http.get(s.mcp_url)
        assert browser.visited == []
        assert client._requested == {}
        await client.aclose()


@pytest.mark.req("M031")
async def test_offline_access_is_asked_for_only_while_the_scopes_stay_within_their_bound() -> None:
    """``offline_access`` (SEP-2207) was added after the bound was checked: an authorization at the bound asked for
    one scope more. It is now left out when it would pass the bound; the authorization goes on without it."""
    from mcpkit.auth.client import MAX_STEPPED_UP_SCOPES

    async with scripted() as s:
        s.as_metadata = {
            "issuer": s.base,
            "authorization_endpoint": s.base + "/authorize",
            "token_endpoint": s.base + "/token",
            "registration_endpoint": s.base + "/register",
            "code_challenge_methods_supported": ["S256"],
            "scopes_supported": ["read", "offline_access"],
        }
        s.challenge_scope = " ".join(["read", *(f"scope-{i}" for i in range(MAX_STEPPED_UP_SCOPES - 1))])
        client, browser = client_for(s)
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
            s.challenge_scope = "read"
            other, other_browser = client_for(s)
            async with httpx.AsyncClient(auth=other) as http2:
                assert (await http2.get(s.mcp_url)).status_code == 200
            await other.aclose()
        asked = parse_qs(urlsplit(browser.visited[0]).query)["scope"][0].split()
        assert len(asked) == MAX_STEPPED_UP_SCOPES and "offline_access" not in asked
        assert "offline_access" in parse_qs(urlsplit(other_browser.visited[0]).query)["scope"][0].split()
        await client.aclose()
