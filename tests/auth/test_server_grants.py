"""Token grants (``mcpkit.auth.server_grants``) over real HTTP with each storage behind them: in memory, a real
``redis-server``, a real PostgreSQL."""

from __future__ import annotations

import asyncio
import hashlib
import time
from urllib.parse import parse_qsl

import httpx
import jwt

from mcpkit.auth import AuthorizationServer, SigningKey
from mcpkit.auth.dpop import make_proof
from support.auth_storages import StorageMaker, make_auth_storage  # noqa: F401  (the fixture)
from support.oauth import REDIRECT, code_grant, register, serve
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)


async def test_a_refresh_with_the_wrong_dpop_key_never_fails_a_concurrent_refresh_with_the_right_one(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """A refresh token bound to a DPoP key, presented with another key, was taken from the storage and put back:
    a refresh by the key's holder arriving in between found no token and got ``invalid_grant`` (the user was
    signed out by whoever held a copy). The binding is checked before the token is taken now."""
    storage = make_auth_storage()

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, dpop=True, storage=storage)

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = (await register(http, base))["client_id"]
        key, other = SigningKey.generate(), SigningKey.generate()

        async def bound_refresh_token() -> str:
            proof = make_proof(key, "POST", base + "/token")
            return str((await code_grant(http, base, cid, headers={"dpop": proof})).json()["refresh_token"])

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


async def test_a_refused_wider_refresh_never_fails_a_concurrent_refresh_by_the_same_client(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """A client's own refresh asking for more scope (``invalid_scope``) or another resource (``invalid_target``)
    took the token and put it back: a concurrent, legitimate refresh by the same client arriving in between found
    no token and got ``invalid_grant`` (the user was signed out). The refusal is decided before the token is taken
    now, and the token is still good afterwards."""
    storage = make_auth_storage()

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, scopes_supported=["read", "write"], storage=storage)

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        cid = (await register(http, base))["client_id"]

        async def refresh_token() -> str:
            resource = {"resource": base + "/mcp"}
            answer = await code_grant(http, base, cid, query={"scope": "read", **resource}, form=resource)
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


async def test_an_openid_grant_answers_an_id_token_for_the_client_with_the_requests_nonce(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """The server advertised OpenID discovery but never issued an ``id_token`` (OpenID Connect Core §3.1.3.3).
    With ``openid`` granted, the code's token answer carries one signed with the server's key (ES256, its ``kid``),
    for the client (``aud``), with the authorization request's ``nonce`` kept through the code record in either
    storage; a refresh still granting ``openid`` gets one without ``nonce`` (§12.2), a narrower refresh and a grant
    without ``openid`` get none. A nonce longer than ``MAX_NONCE`` characters is refused."""
    from mcpkit.auth.server_authorize import MAX_NONCE

    storage = make_auth_storage()

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True, scopes_supported=["mcp:read"], storage=storage)

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        meta = (await http.get(base + "/.well-known/openid-configuration")).json()
        assert meta["response_types_supported"] == ["code"] and "openid" in meta["scopes_supported"]
        assert meta["id_token_signing_alg_values_supported"] == ["ES256"]
        assert {"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce"} <= set(meta["claims_supported"])
        keys = jwt.PyJWKSet.from_dict((await http.get(meta["jwks_uri"])).json())
        cid = (await register(http, base))["client_id"]

        async def authorize(scope: str, **extra: str) -> httpx.Response:
            return await code_grant(http, base, cid, query={"scope": scope, **extra})

        def checked(id_token: str) -> dict[str, object]:
            header = jwt.get_unverified_header(id_token)
            assert header["alg"] == "ES256"
            key = next(k for k in keys.keys if k.key_id == header["kid"])
            claims: dict[str, object] = jwt.decode(id_token, key.key, algorithms=["ES256"], audience=cid, issuer=base)
            assert claims["sub"] == "test-user" and claims["aud"] == cid
            assert isinstance(claims["iat"], int) and isinstance(claims["exp"], int) and claims["exp"] > claims["iat"]
            assert isinstance(claims["auth_time"], int) and abs(claims["auth_time"] - time.time()) < 120
            return claims

        before = int(time.time())
        answer = await authorize("openid mcp:read", nonce="n-0S6_WzA2Mj")
        assert answer.status_code == 200, answer.text
        first = checked(answer.json()["id_token"])
        assert first["nonce"] == "n-0S6_WzA2Mj" and isinstance(first["auth_time"], int)
        assert before - 1 <= first["auth_time"] <= int(time.time()) + 1
        refreshed = await http.post(
            base + "/token",
            data={"grant_type": "refresh_token", "refresh_token": answer.json()["refresh_token"], "client_id": cid},
        )
        assert refreshed.status_code == 200, refreshed.text
        again = checked(refreshed.json()["id_token"])
        assert "nonce" not in again and again["auth_time"] == first["auth_time"]
        narrower = await http.post(
            base + "/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": refreshed.json()["refresh_token"],
                "client_id": cid,
                "scope": "mcp:read",
            },
        )
        assert narrower.status_code == 200 and "id_token" not in narrower.json()
        without_nonce = await authorize("openid")
        assert "nonce" not in checked(without_nonce.json()["id_token"])
        plain = await authorize("mcp:read", nonce="ignored")
        assert plain.status_code == 200 and "id_token" not in plain.json()
        too_long = await authorize("openid", nonce="n" * (MAX_NONCE + 1))
        assert too_long.json()["error"] == "invalid_request" and "nonce" in too_long.json()["error_description"]
        assert (await authorize("openid", nonce="n" * MAX_NONCE)).status_code == 200


async def test_a_client_revokes_its_grant_at_the_revocation_endpoint_and_never_another_clients() -> None:
    """RFC 7009 ``/revoke`` (advertised as ``revocation_endpoint``): a client's refresh token, or its access token,
    revokes the grant it belongs to (the refresh token no longer refreshes, the access token introspects
    inactive); a token of another client is refused and stays good; an unknown token is answered 200."""

    def make(base: str) -> AuthorizationServer:
        return AuthorizationServer(base, auto_approve=True)

    async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
        meta = (await http.get(base + "/.well-known/oauth-authorization-server")).json()
        assert meta["revocation_endpoint"] == base + "/revoke"
        clients = []
        for _ in range(2):
            reg = await register(http, base, "client_secret_basic")
            clients.append((reg["client_id"], reg["client_secret"]))

        async def grant(client: tuple[str, str]) -> dict[str, str]:
            answer = await code_grant(http, base, client[0], auth=client)
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        async def active(client: tuple[str, str], token: str) -> bool:
            return bool((await http.post(base + "/introspect", data={"token": token}, auth=client)).json()["active"])

        async def refreshes(client: tuple[str, str], token: str) -> bool:
            data = {"grant_type": "refresh_token", "refresh_token": token}
            return (await http.post(base + "/token", data=data, auth=client)).status_code == 200

        alice, mallory = clients
        for kind in ("refresh_token", "access_token"):
            mine = await grant(alice)
            refused = await http.post(base + "/revoke", data={"token": mine[kind]}, auth=mallory)
            assert refused.status_code == 400 and refused.json()["error"] == "unauthorized_client"
            assert await active(alice, mine["access_token"])
            revoked = await http.post(base + "/revoke", data={"token": mine[kind]}, auth=alice)
            assert revoked.status_code == 200
            assert not await active(alice, mine["access_token"]), kind
            assert not await refreshes(alice, mine["refresh_token"]), kind
        unknown = await http.post(base + "/revoke", data={"token": "not-a-token"}, auth=alice)
        assert unknown.status_code == 200
        missing = await http.post(base + "/revoke", data={}, auth=alice)
        assert missing.status_code == 400 and missing.json()["error"] == "invalid_request"


async def test_replicas_revoke_and_introspect_each_others_tokens_whatever_their_clocks() -> None:
    """Replicas share a storage and a signing key. A token a replica whose clock runs 5 s ahead just issued carries
    that clock's ``iat`` and ``nbf``, in the future for the others: ``/revoke`` at another replica took it for
    invalid and answered 200 without revoking its grant, and ``/introspect`` called it inactive. And a token that
    expired here moments ago, issued by a replica 30 s behind, is still taken for unexpired on clocks like that one:
    ``/revoke`` revokes its grant as long as ``clock_skew`` says some clock may still accept it."""
    from cryptography.hazmat.primitives.asymmetric import ec

    from mcpkit.auth import AccessToken, InMemoryAuthStorage

    storage, key = InMemoryAuthStorage(), ec.generate_private_key(ec.SECP256R1())
    made: list[AuthorizationServer] = []

    def make(base: str) -> AuthorizationServer:
        made.append(AuthorizationServer(base, storage=storage, signing_key=key))
        return made[-1]

    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        reg = await register(http, base, "client_secret_basic")
        auth = (reg["client_id"], reg["client_secret"])

        def issued_by(offset: float, grant: str) -> str:
            replica = AuthorizationServer(
                base, storage=storage, signing_key=key, access_token_ttl=10, clock=lambda: time.time() + offset
            )
            return replica.issue_access_token(
                subject="alice", client_id=reg["client_id"], scopes=[], resource=None, grant=grant
            )

        async def active(token: str) -> bool:
            return bool((await http.post(base + "/introspect", data={"token": token}, auth=auth)).json()["active"])

        async def revoke(token: str, grant: str) -> bool:
            assert (await http.post(base + "/revoke", data={"token": token}, auth=auth)).status_code == 200
            return await made[0].revocation.revoked(AccessToken(token, issuer=base, claims={"grant_id": grant}))

        ahead = issued_by(5.0, "ahead")
        assert await active(ahead)
        assert await revoke(ahead, "ahead") and not await active(ahead)
        behind = issued_by(-30.0, "behind")  # (expired here 20 s ago; made[0]'s clock_skew is 60 s)
        assert not await active(behind)
        assert await revoke(behind, "behind")
        long_gone = issued_by(-100.0, "long-gone")  # (expired 90 s ago: no clock within 60 s takes it)
        assert not await revoke(long_gone, "long-gone")


async def test_a_revoked_grant_is_remembered_as_long_as_a_token_it_can_hold_lives() -> None:
    """The ledger keeps a revoked grant (and its spent code) until every token of it has expired, plus
    ``clock_skew``. It counted the refresh token's lifetime (30 days by default) even for a grant that can hold no
    refresh token: the server gives none (``issue_refresh_tokens=False``) or the client lacks the grant. Such a grant
    is remembered for its access token's lifetime now, however it was revoked (its access token at ``/revoke``, its
    code replayed); one that holds refresh tokens still for theirs, revoked by its access token too."""
    now = [time.time()]
    ttl, refresh_ttl, skew = 600.0, 86_400.0, 60.0

    async def kept_for(lifetime: float, issue_refresh: bool, grant_types: list[str]) -> None:
        made: list[AuthorizationServer] = []

        def make(base: str) -> AuthorizationServer:
            made.append(
                AuthorizationServer(
                    base,
                    auto_approve=True,
                    issue_refresh_tokens=issue_refresh,
                    access_token_ttl=ttl,
                    refresh_token_ttl=refresh_ttl,
                    clock_skew=skew,
                    clock=lambda: now[0],
                )
            )
            return made[-1]

        async with serve(make) as (base, _), httpx.AsyncClient(follow_redirects=False) as http:
            meta = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", "grant_types": grant_types}
            registered = await http.post(base + "/register", json=meta)
            assert registered.status_code == 201, registered.text
            cid = registered.json()["client_id"]

            async def grant() -> tuple[str, str, str]:
                """A grant's family, access token and spent code."""
                answer = await code_grant(http, base, cid)
                assert answer.status_code == 200, answer.text
                token = answer.json()["access_token"]
                code = dict(parse_qsl(answer.request.content.decode()))["code"]
                return jwt.decode(token, options={"verify_signature": False})["grant_id"], token, code

            by_token, token, spent = await grant()
            revoked = await http.post(base + "/revoke", data={"token": token, "client_id": cid})
            assert revoked.status_code == 200, revoked.text
            by_replay, _, code = await grant()
            replayed = await http.post(
                base + "/token",
                data={"grant_type": "authorization_code", "code": code, "client_id": cid, "code_verifier": "x" * 43},
            )
            assert replayed.status_code == 400 and replayed.json()["error"] == "invalid_grant"
        ledger, start, spent_key = made[0].ledger, now[0], "code:" + hashlib.sha256(spent.encode()).hexdigest()
        try:
            now[0] = start + lifetime + skew - 1
            assert await ledger.revoked(by_token) and await ledger.revoked(by_replay)
            assert await ledger.used(spent_key) == by_token
            now[0] = start + lifetime + skew + 1
            assert not await ledger.revoked(by_token) and not await ledger.revoked(by_replay)
            assert await ledger.used(spent_key) is None
        finally:
            now[0] = start

    await kept_for(ttl, issue_refresh=False, grant_types=["authorization_code", "refresh_token"])
    await kept_for(ttl, issue_refresh=True, grant_types=["authorization_code"])
    await kept_for(refresh_ttl, issue_refresh=True, grant_types=["authorization_code", "refresh_token"])
