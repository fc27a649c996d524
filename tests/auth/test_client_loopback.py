"""The loopback redirect listener (:class:`~mcpkit.auth.LoopbackCallback`) against stray requests to its port."""

from __future__ import annotations

import httpx

from mcpkit.auth import LoopbackCallback, OAuthClient
from support.scripted_oauth import scripted


async def test_a_callback_with_another_state_is_discarded_and_the_real_one_still_completes_the_flow() -> None:
    """Anything on the machine, or any web page the browser shows, can reach the listener on 127.0.0.1 before the
    authorization server's redirect does. A callback whose ``state`` is not the pending request's is discarded
    (400) and the listener keeps waiting, as the spec asks ("discard any results that do not include or have a
    mismatch with the original state"): before, the first request to the path ended the flow with a state
    mismatch, so a stray request aborted every sign-in."""
    answers: list[int] = []

    async def browser(url: str) -> None:
        async with httpx.AsyncClient(follow_redirects=True) as http:
            for forged in ("?code=forged&state=wrong", "?code=forged", "?error=access_denied"):
                answers.append((await http.get(callback.redirect_uri + forged)).status_code)
            answers.append((await http.get(url)).status_code)  # the user signs in

    async with scripted() as s:
        callback = LoopbackCallback(open_url=browser, timeout=10)
        client = OAuthClient(
            s.mcp_url,
            client_metadata={"redirect_uris": [callback.redirect_uri]},
            redirect_handler=callback.redirect_handler,
            callback_handler=callback.callback_handler,
        )
        async with httpx.AsyncClient(auth=client) as http:
            assert (await http.get(s.mcp_url)).status_code == 200
        assert answers == [400, 400, 400, 200]
        assert [f["code"] for f in s.requests_to("/token")] != ["forged"]
        await client.aclose()
