"""The upstream identity provider of the OAuth proxy (:mod:`mcpkit.auth.upstream`): presets, OpenID discovery
(bounded, https only but on loopback, the issuer checked), ``id_token`` verification against the provider's keys,
and a GitHub-shaped provider (``client_secret_post``, a userinfo member naming the user) end to end. The provider
is a real mcpkit authorization server on uvicorn at 127.0.0.1 (:mod:`support.upstream_idp`)."""

from __future__ import annotations

import time
from typing import Any

import jwt
import orjson
import pytest

from mcpkit.auth.storage import AuthorizationRequest
from mcpkit.auth.upstream import (
    UpstreamError,
    UpstreamIdentity,
    UpstreamProvider,
    UpstreamTokens,
    auth0_issuer,
    entra_issuer,
    keycloak_issuer,
    okta_issuer,
)
from support.oauth import serve
from support.upstream_idp import (
    REDIRECT,
    Browser,
    authorize_url,
    call,
    identity_provider,
    oauth_client,
    proxy_stack,
    query,
)


def test_the_github_preset_names_githubs_endpoints_and_its_numeric_user_id() -> None:
    github = UpstreamProvider.github("Iv1.abc", "s3cret")
    assert github.authorize_url == "https://github.com/login/oauth/authorize"
    assert github.token_url == "https://github.com/login/oauth/access_token"
    assert github.userinfo_url == "https://api.github.com/user" and github.subject_claim == "id"
    assert github.token_auth == "client_secret_post" and github.scopes == ("read:user",) and not github.openid
    assert "user-agent" in github.userinfo_headers  # the GitHub API refuses a request without one


def test_a_provider_with_an_insecure_or_unusable_configuration_is_refused() -> None:
    base = {"authorize_url": "https://idp.example/a", "token_url": "https://idp.example/t", "client_id": "c"}
    with pytest.raises(ValueError, match="https"):
        UpstreamProvider(**{**base, "token_url": "http://idp.example/t"}, client_secret="s", userinfo_url="https://u")
    with pytest.raises(ValueError, match="userinfo_url or"):
        UpstreamProvider(**base, client_secret="s")
    with pytest.raises(ValueError, match="issuer"):
        UpstreamProvider(**base, client_secret="s", jwks_url="https://idp.example/jwks")


def test_the_openid_presets_build_each_vendors_documented_issuer() -> None:
    """Microsoft Entra ID, Auth0, Keycloak and Okta are thin issuer builders over ``oidc``: the issuer each builds
    (its discovery document is read from there), and the inputs each refuses."""
    tenant = "72F988BF-86F1-41AF-91AB-2D7CD011DB47"
    assert entra_issuer(tenant) == "https://login.microsoftonline.com/72f988bf-86f1-41af-91ab-2d7cd011db47/v2.0"
    for multi_tenant in ("common", "organizations", "consumers", "contoso.onmicrosoft.com"):
        with pytest.raises(ValueError, match="directory id"):
            entra_issuer(multi_tenant)
    assert auth0_issuer("example.us.auth0.com") == "https://example.us.auth0.com/"
    assert auth0_issuer("https://login.example.com/") == "https://login.example.com/"
    assert keycloak_issuer("https://sso.example.com/", "staff") == "https://sso.example.com/realms/staff"
    assert keycloak_issuer("https://old.example.com/auth", "a b") == "https://old.example.com/auth/realms/a%20b"
    assert okta_issuer("example.okta.com") == "https://example.okta.com/oauth2/default"
    assert okta_issuer("example.okta.com", "aus1a2b3") == "https://example.okta.com/oauth2/aus1a2b3"
    assert okta_issuer("example.okta.com", None) == "https://example.okta.com"
    for bad in ("example.com/path", "exa mple.com", "", "user@example.com"):
        with pytest.raises(ValueError, match="host name"):
            okta_issuer(bad)
        with pytest.raises(ValueError, match="host name"):
            auth0_issuer(bad)
    with pytest.raises(ValueError, match="realm"):
        keycloak_issuer("https://sso.example.com", "a/b")


async def test_a_keycloak_realm_and_an_issuer_spelled_with_a_trailing_slash_are_discovered() -> None:
    """``keycloak(base_url, realm)`` reads ``<base_url>/realms/<realm>/.well-known/openid-configuration`` (here a
    real mcpkit authorization server whose issuer has that path). An issuer spelled with a trailing slash in its
    own document (Auth0's) is kept as spelled: its id_tokens carry that exact ``iss``."""
    async with serve(lambda base: identity_provider(base + "/realms/staff", lambda: "alice")) as (url, _):
        provider = await UpstreamProvider.keycloak(url, "staff", "proxy", "secret")
        assert provider.issuer == url + "/realms/staff" and provider.name == "Keycloak"
        assert provider.token_url == url + "/realms/staff/token" and provider.openid

    def slash_issuer(base: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            assert scope["path"] == "/.well-known/openid-configuration"
            doc = {"issuer": base + "/", "authorization_endpoint": base + "/authorize"}
            doc.update(token_endpoint=base + "/oauth/token", jwks_uri=base + "/.well-known/jwks.json")
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": orjson.dumps(doc)})

        return app

    async with serve(slash_issuer) as (url, _):
        for given in (url, url + "/"):
            provider = await UpstreamProvider.oidc(given, "proxy", "secret")
            assert provider.issuer == url + "/"


async def test_an_openid_provider_is_configured_from_its_discovery_document() -> None:
    async with serve(lambda base: identity_provider(base, lambda: "alice")) as (idp_url, _):
        provider = await UpstreamProvider.oidc(idp_url, "proxy", "secret", userinfo_url=idp_url + "/userinfo")
        assert provider.issuer == idp_url and provider.jwks_url == idp_url + "/jwks"
        assert provider.authorize_url == idp_url + "/authorize" and provider.token_url == idp_url + "/token"
        assert provider.token_auth == "client_secret_basic" and provider.openid
        with pytest.raises(UpstreamError, match="DocumentTooLarge"):
            await UpstreamProvider.oidc(idp_url, "proxy", "secret", max_response=100)
    with pytest.raises(ValueError, match="https"):
        await UpstreamProvider.oidc("http://idp.example", "proxy", "secret")

    def impostor(base: str) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                return
            doc = orjson.dumps({"issuer": "https://accounts.google.com", "authorization_endpoint": base + "/a"})
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]}
            )
            await send({"type": "http.response.body", "body": doc})

        return app

    async with serve(impostor) as (url, _):
        with pytest.raises(UpstreamError, match="another issuer"):
            await UpstreamProvider.oidc(url, "proxy", "secret")


async def test_an_id_token_is_verified_against_the_providers_keys_issuer_audience_and_the_logins_nonce() -> None:
    from cryptography.hazmat.primitives.asymmetric import ec

    held: dict[str, Any] = {}

    def make(base: str) -> Any:
        held["idp"] = identity_provider(base, lambda: "alice")
        return held["idp"]

    async with serve(make) as (idp_url, _):
        provider = await UpstreamProvider.oidc(idp_url, "proxy", "secret")
        key, kid = held["idp"].key, held["idp"].kid

        def id_token(signer: Any = key, **claims: Any) -> str:
            now = int(time.time())
            base = {"iss": idp_url, "aud": "proxy", "sub": "u-1", "iat": now, "exp": now + 300, "nonce": "n1"}
            return jwt.encode({**base, **claims}, signer, algorithm="ES256", headers={"kid": kid})

        identity = await provider.identify(UpstreamTokens("at", id_token=id_token()), "n1")
        assert identity.subject == "u-1" and identity.claims["nonce"] == "n1"
        for bad, why in [
            (id_token(nonce="n2"), "nonce"),
            (id_token(aud="another-client"), "refused"),
            (id_token(iss="https://another.example"), "refused"),
            (id_token(exp=int(time.time()) - 600), "refused"),
            (id_token(signer=ec.generate_private_key(ec.SECP256R1())), "refused"),
        ]:
            with pytest.raises(UpstreamError, match=why):
                await provider.identify(UpstreamTokens("at", id_token=bad), "n1")


async def test_a_github_shaped_provider_posts_its_secret_and_maps_the_user_it_names() -> None:
    """``client_secret_post``, the user named by a userinfo member other than ``sub`` (GitHub's ``id``), and an
    ``authorize_user`` hook mapping that user to the proxy's subject, or denying it."""
    seen: list[UpstreamIdentity] = []

    async def authorize_user(identity: UpstreamIdentity, request: AuthorizationRequest) -> str | None:
        seen.append(identity)
        return None if identity.subject == "login-of-mallory" else "gh:" + identity.subject

    users = ["alice"]
    async with proxy_stack(
        user=lambda: users[0],
        provider_options={"token_auth": "client_secret_post", "subject_claim": "login"},
        login_options={"authorize_user": authorize_user},
    ) as s:
        browser = Browser()
        client, _ = oauth_client(s, browser)
        assert await call(s["mcp_url"], client) == "login-of-alice|gh:login-of-alice"
        token_request = [h for m, path, h in s["idp_log"].requests if path == "/token"]
        assert token_request and "authorization" not in token_request[0]  # the secret went in the body
        assert seen[0].claims["sub"] == "alice"
        users[0] = "mallory"
        denied = query(await browser.open(await authorize_url(s), stop_at=REDIRECT))
        assert denied["error"] == "access_denied" and "code" not in denied
        await client.aclose()
        await browser.aclose()
