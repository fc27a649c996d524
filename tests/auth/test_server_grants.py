"""Token grants (``mcpkit.auth.server_grants``) over real HTTP with a real ``redis-server`` behind them."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import parse_qsl, urlsplit

import httpx

from mcpkit.auth import AuthorizationServer, RedisAuthStorage, SigningKey
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.dpop import make_proof
from support.oauth import REDIRECT, serve
from support.redis_server import redis_url  # noqa: F401  (the session fixture)


async def test_a_refresh_with_the_wrong_dpop_key_never_fails_a_concurrent_refresh_with_the_right_one(
    redis_url: str,  # noqa: F811
) -> None:
    """A refresh token bound to a DPoP key, presented with another key, was taken from the storage and put back:
    a refresh by the key's holder arriving in between found no token and got ``invalid_grant`` (the user was
    signed out by whoever held a copy). The binding is checked before the token is taken now."""
    storage = RedisAuthStorage(redis_url, prefix=f"mcpkit-test:{time.time_ns()}:")

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, dpop=True, storage=storage)

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        reg = await http.post(
            base + "/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
        )
        cid = reg.json()["client_id"]
        key, other = SigningKey.generate(), SigningKey.generate()

        async def bound_refresh_token() -> str:
            verifier, challenge = pkce_pair()
            query = {
                "response_type": "code",
                "client_id": cid,
                "redirect_uri": REDIRECT,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
            location = (await http.get(base + "/authorize", params=query)).headers["location"]
            form = {
                "grant_type": "authorization_code",
                "code": dict(parse_qsl(urlsplit(location).query))["code"],
                "code_verifier": verifier,
                "client_id": cid,
                "redirect_uri": REDIRECT,
            }
            proof = make_proof(key, "POST", base + "/token")
            return str((await http.post(base + "/token", data=form, headers={"dpop": proof})).json()["refresh_token"])

        async def refresh_with(proof_key: SigningKey, token: str) -> httpx.Response:
            data = {"grant_type": "refresh_token", "refresh_token": token, "client_id": cid}
            proof = make_proof(proof_key, "POST", base + "/token")
            return await http.post(base + "/token", data=data, headers={"dpop": proof})

        for _ in range(5):  # bounded: 5 grants, each refreshed by its key's holder amid 8 wrong-key requests
            refresh = await bound_refresh_token()
            wrong = [refresh_with(other, refresh) for _ in range(8)]
            answers = await asyncio.wait_for(asyncio.gather(*wrong[:4], refresh_with(key, refresh), *wrong[4:]), 30)
            right = answers.pop(4)
            assert right.status_code == 200, right.text
            assert all(a.status_code == 400 and a.json()["error"] == "invalid_grant" for a in answers)
    await storage.aclose()


async def test_a_refused_wider_refresh_never_fails_a_concurrent_refresh_by_the_same_client(
    redis_url: str,  # noqa: F811
) -> None:
    """A client's own refresh asking for more scope (``invalid_scope``) or another resource (``invalid_target``)
    took the token and put it back: a concurrent, legitimate refresh by the same client arriving in between found
    no token and got ``invalid_grant`` (the user was signed out). The refusal is decided before the token is taken
    now, and the token is still good afterwards."""
    storage = RedisAuthStorage(redis_url, prefix=f"mcpkit-test:{time.time_ns()}:")

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, scopes_supported=["read", "write"], storage=storage)

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        reg = await http.post(
            base + "/register", json={"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none"}
        )
        cid = reg.json()["client_id"]

        async def refresh_token() -> str:
            verifier, challenge = pkce_pair()
            query = {
                "response_type": "code",
                "client_id": cid,
                "redirect_uri": REDIRECT,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "scope": "read",
                "resource": base + "/mcp",
            }
            location = (await http.get(base + "/authorize", params=query)).headers["location"]
            form = {
                "grant_type": "authorization_code",
                "code": dict(parse_qsl(urlsplit(location).query))["code"],
                "code_verifier": verifier,
                "client_id": cid,
                "redirect_uri": REDIRECT,
                "resource": base + "/mcp",
            }
            answer = await http.post(base + "/token", data=form)
            assert answer.status_code == 200, answer.text
            return str(answer.json()["refresh_token"])

        async def refresh(token: str, **extra: str) -> httpx.Response:
            data = {"grant_type": "refresh_token", "refresh_token": token, "client_id": cid, **extra}
            return await http.post(base + "/token", data=data)

        wider = {"scope": "read write"}
        elsewhere = {"resource": base + "/other"}
        for _ in range(5):  # bounded: 5 grants, each refreshed once amid 8 refused requests of its own client
            token = await refresh_token()
            refused = [refresh(token, **(wider if i % 2 else elsewhere)) for i in range(8)]
            answers = await asyncio.wait_for(asyncio.gather(*refused[:4], refresh(token), *refused[4:]), 30)
            right = answers.pop(4)
            assert right.status_code == 200, right.text
            # one arriving after the rotation presents a spent token: invalid_grant (reuse detection), as intended
            assert all(a.status_code == 400 for a in answers)
            assert {a.json()["error"] for a in answers} <= {"invalid_scope", "invalid_target", "invalid_grant"}
        # refused alone, the token is not spent: a plain refresh after it works
        token = await refresh_token()
        assert (await refresh(token, **wider)).json()["error"] == "invalid_scope"
        assert (await refresh(token, **elsewhere)).json()["error"] == "invalid_target"
        assert (await refresh(token)).status_code == 200
    await storage.aclose()
