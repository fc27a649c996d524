"""The OAuth proxy's revocations at the upstream provider (``mcpkit.auth.upstream_revocation``), with real parts: the
provider is the test IdP (a second mcpkit authorization server on uvicorn) behind a wrapper that answers its
``/revoke`` as a script says (503, 429, 500, a 400, no answer in time) before letting it through; a proxy killed
with revocations pending is a real process on a real ``redis-server`` or PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from redis.asyncio import Redis

from mcpkit.auth import InMemoryAuthStorage, PostgresAuthStorage
from mcpkit.auth._util import pkce_pair
from mcpkit.auth.upstream_login import UpstreamLogin
from mcpkit.auth.upstream_revocation import MAX_REVOCATION_RECORDS, RevocationRetry
from mcpkit.auth.upstream_state import InMemoryUpstreamState
from support.auth_storages import StorageMaker, make_auth_storage  # noqa: F401  (the fixture)
from support.oauth import register, serve
from support.paths import REPO
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.procs import stop
from support.redis_server import redis_url  # noqa: F401  (the session fixture)
from support.upstream_idp import (
    PROXY_CLIENT_ID,
    PROXY_CLIENT_SECRET,
    REDIRECT,
    Browser,
    Recorded,
    authorization_query,
    identity_provider,
    proxy_stack,
    query,
    redeem,
    sign_in,
    upstream_refresh_tokens,
)


class RevokeScript:
    """Wraps the IdP: each ``/revoke`` takes the next answer of :attr:`answers` (a status with its headers, or
    ``"hang"``: no answer for 4 s) and, when none is left, :attr:`then` (None: the IdP itself answers). ``arrived``
    holds when each came (monotonic)."""

    def __init__(self) -> None:
        self.answers: list[Any] = []
        self.then: Any = None
        self.arrived: list[float] = []

    def wrap(self, app: Any) -> Any:
        async def wrapped(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http" or scope["path"] != "/revoke":
                await app(scope, receive, send)
                return
            self.arrived.append(time.monotonic())
            answer = self.answers.pop(0) if self.answers else self.then
            if answer is None:
                await app(scope, receive, send)
                return
            if answer == "hang":
                await asyncio.sleep(4)
                answer = (503, {})
            status, headers = answer
            body = orjson.dumps({"error": headers.pop("error")}) if "error" in headers else b""
            raw = [(k.encode(), str(v).encode()) for k, v in headers.items()]
            await send({"type": "http.response.start", "status": status, "headers": raw})
            await send({"type": "http.response.body", "body": body})

        return wrapped


async def until(condition: Any, what: str, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(what)
        await asyncio.sleep(0.05)


async def revoke_at_proxy(s: dict[str, Any], grant: dict[str, Any]) -> None:
    form = {"token": grant["refresh_token"], "client_id": grant["client_id"]}
    async with httpx.AsyncClient() as http:
        assert (await http.post(s["proxy_url"] + "/revoke", data=form)).status_code == 200


async def refused_at_idp(idp_url: str, upstream_refresh: str) -> bool:
    """Whether the IdP refuses its own refresh token ``upstream_refresh`` (it was revoked there)."""
    form = {"grant_type": "refresh_token", "refresh_token": upstream_refresh}
    async with httpx.AsyncClient() as http:
        at_idp = await http.post(idp_url + "/token", data=form, auth=(PROXY_CLIENT_ID, PROXY_CLIENT_SECRET))
    return bool(at_idp.json().get("error") == "invalid_grant")


def records(login: UpstreamLogin) -> dict[str, Any]:
    store = login._revocations.records
    assert isinstance(store, InMemoryUpstreamState)
    return store._revocations


# ------------------------------------------------------------------------------------------- retries
async def test_a_revocation_the_provider_could_not_take_now_is_tried_again_until_it_is_done() -> None:
    """A revocation was tried once: a provider that did not answer in time, or answered 503, 429 or 500, never
    revoked the upstream token (its refresh token kept working there). Each of those is tried again now (RFC 7009
    §2.2: a 503 means the token still exists, try later), the provider's ``Retry-After`` honoured, until it
    answers 200; the record of the revocation is dropped then."""
    script = RevokeScript()
    script.answers = ["hang", (503, {"retry-after": "1"}), (429, {}), (500, {})]
    retry = RevocationRetry(first_delay=0.2, max_delay=2.0, deadline=60.0)
    options = {"revocation_retry": retry}
    async with proxy_stack(
        oidc=True, idp_wrap=script.wrap, login_options=options, provider_options={"timeout": 2}
    ) as s:
        login: UpstreamLogin = s["login"]
        grant = await sign_in(s, Browser())
        (upstream_refresh,) = upstream_refresh_tokens(s)
        await revoke_at_proxy(s, grant)
        await until(lambda: login.revocation_counts["done"] == 1, f"never done: {login.revocation_counts}")
        assert len(script.arrived) == 5  # no answer, 503, 429, 500, then the IdP's 200
        assert script.arrived[2] - script.arrived[1] >= 0.9  # the 503's Retry-After: 1
        counts = login.revocation_counts
        assert (counts["queued"], counts["retried"], counts["failed"]) == (1, 4, 0)
        assert await refused_at_idp(s["idp_url"], upstream_refresh)
        assert records(login) == {}


async def test_a_revocation_the_provider_refused_is_final() -> None:
    """RFC 7009 §2.2.1: ``unsupported_token_type`` (and any other error answer: ``invalid_client``...) will be the
    answer to the same request again: tried once, counted ``failed``, its record dropped."""
    script = RevokeScript()
    script.then = (400, {"content-type": "application/json", "error": "unsupported_token_type"})
    options = {"revocation_retry": RevocationRetry(first_delay=0.1)}
    async with proxy_stack(oidc=True, idp_wrap=script.wrap, login_options=options) as s:
        login: UpstreamLogin = s["login"]
        await revoke_at_proxy(s, await sign_in(s, Browser()))
        await until(lambda: login.revocation_counts["failed"] == 1, f"never failed: {login.revocation_counts}")
        script.then = (401, {"content-type": "application/json", "error": "invalid_client"})
        await revoke_at_proxy(s, await sign_in(s, Browser()))
        await until(lambda: login.revocation_counts["failed"] == 2, f"never failed: {login.revocation_counts}")
        await asyncio.sleep(0.5)  # (a retry would have come by now)
        assert len(script.arrived) == 2
        assert login.revocation_counts["retried"] == 0
        assert records(login) == {}


async def test_retries_of_a_revocation_are_bounded_in_tries_and_time() -> None:
    """A provider answering 503 for ever: one replica tries a revocation ``attempts`` times, never starting a try
    past ``deadline`` seconds after it was asked, and waits at most ``max_delay`` whatever ``Retry-After`` says;
    then it is given up (``failed``) and its record dropped."""
    script = RevokeScript()
    script.then = (503, {})
    async with proxy_stack(oidc=True, idp_wrap=script.wrap) as s:
        login: UpstreamLogin = s["login"]
        # tries: 3 of them
        login._revocations.retry = RevocationRetry(attempts=3, first_delay=0.1, deadline=60)
        await revoke_at_proxy(s, await sign_in(s, Browser()))
        await until(lambda: login.revocation_counts["failed"] == 1, f"never given up: {login.revocation_counts}")
        assert len(script.arrived) == 3 and login.revocation_counts["retried"] == 2
        # time: Retry-After: 1 within a deadline of 1.5 s: the try after the second would start past it
        script.then, script.arrived = (503, {"retry-after": "1"}), []
        login._revocations.retry = RevocationRetry(attempts=10, first_delay=0.1, deadline=1.5)
        await revoke_at_proxy(s, await sign_in(s, Browser()))
        await until(lambda: login.revocation_counts["failed"] == 2, f"never given up: {login.revocation_counts}")
        assert len(script.arrived) == 2
        # the longest pause: a Retry-After of an hour waits max_delay
        script.then, script.arrived = (503, {"retry-after": "3600"}), []
        login._revocations.retry = RevocationRetry(attempts=3, first_delay=0.1, max_delay=0.3, deadline=60)
        await revoke_at_proxy(s, await sign_in(s, Browser()))
        await until(lambda: login.revocation_counts["failed"] == 3, f"never given up: {login.revocation_counts}", 10)
        assert len(script.arrived) == 3 and script.arrived[-1] - script.arrived[0] < 3
        assert records(login) == {}


class RecordsDown(InMemoryAuthStorage):
    """The server's storage, its revocation records unreachable (a Redis that went away for them)."""

    async def put_revocation(self, key: str, sealed: bytes, until: float, expires_at: float, max_records: int) -> bool:
        raise ConnectionError("the storage is down")


async def test_a_revocation_the_storage_cannot_record_is_still_done_from_memory(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A storage that fails to record a pending revocation does not fail the ``/revoke`` answer nor lose the
    revocation: it is tried from this process's memory (``unrecorded``, a warning line)."""
    with caplog.at_level(logging.WARNING, "mcpkit.auth.upstream_revocation"):
        async with proxy_stack(oidc=True, proxy_options={"storage": RecordsDown()}) as s:
            login: UpstreamLogin = s["login"]
            await revoke_at_proxy(s, await sign_in(s, Browser()))
            await until(lambda: login.revocation_counts["done"] == 1, f"never done: {login.revocation_counts}")
            assert login.revocation_counts["unrecorded"] == 1
    assert any("could not be recorded" in r.getMessage() for r in caplog.records)


async def test_a_shutdown_waits_for_revocations_being_tried_not_for_those_pausing_between_tries() -> None:
    """``drain()`` (which the lifespan shutdown awaits, at most the provider's ``timeout``) waited for every
    revocation task: one pausing 60 s before its next try held every shutdown for the whole ``timeout``. It waits
    for the tries under way (and those queued for a slot) only: a pausing one is ended with the process, its record
    left in the storage for a replica to take over."""
    script = RevokeScript()
    script.answers = [(503, {"retry-after": "60"}), "hang"]
    async with proxy_stack(oidc=True, idp_wrap=script.wrap, provider_options={"timeout": 5}) as s:
        login: UpstreamLogin = s["login"]
        await revoke_at_proxy(s, await sign_in(s, Browser()))
        await until(lambda: login.revocation_counts["retried"] == 1, "the provider never answered 503")
        started = time.monotonic()
        await login.drain(5)
        assert time.monotonic() - started < 1.5  # (it waited the whole timeout before)
        await revoke_at_proxy(s, await sign_in(s, Browser()))  # the provider holds this one 4 s
        await until(lambda: len(script.arrived) == 2, "the provider never received the second revocation")
        started = time.monotonic()
        await login.drain(5)  # a try under way is waited for
        assert time.monotonic() - started >= 2
        await login._revocations.stop()
        assert len(records(login)) == 2  # (the second: 503 after its hang, pausing too)


async def test_revocation_records_are_bounded_leased_and_taken_over_once(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """The storage side of the records: at most ``max_records`` (``MAX_REVOCATION_RECORDS`` in the proxy), a
    record leased is not taken over before its lease ends, one whose lease ended is taken over once (by one
    replica: the next claim finds it leased again), at most ``limit`` at a time; renewed, it is not due; dropped,
    it is gone; expired, it is forgotten."""
    assert MAX_REVOCATION_RECORDS == 10_000
    storage = make_auth_storage()
    await storage.drop_revocation("none")  # (connected first: the leases below last 2 s from now)
    # (2 s: five PostgreSQL transactions, each with its advisory lock, took longer than the 0.3 s it was under a
    # load of 35, and the leases had ended before the first claim)
    now = time.time()
    for i in range(3):
        assert await storage.put_revocation(f"k{i}", b"sealed%d" % i, now + 2, now + 60, 3)
    assert not await storage.put_revocation("k3", b"sealed3", now + 2, now + 60, 3)  # the bound
    assert await storage.put_revocation("k0", b"again", now + 2, now + 60, 3)  # (the same record again)
    assert await storage.put_revocation("gone", b"x", now + 2, now + 2.05, 10)  # forgotten at its end
    assert await storage.claim_revocations(time.time(), time.time() + 5, 10) == []  # all leased
    await asyncio.sleep(max(0.0, now + 2.2 - time.time()))
    await storage.renew_revocations(["k2"], time.time() + 5)  # its replica lives
    first = await storage.claim_revocations(time.time(), time.time() + 5, 1)
    second = await storage.claim_revocations(time.time(), time.time() + 5, 10)
    assert sorted(first + second) == [("k0", b"again"), ("k1", b"sealed1")] and len(first) == 1
    assert await storage.claim_revocations(time.time(), time.time() + 5, 10) == []  # taken over once
    for key in ("k0", "k1", "k2"):
        await storage.drop_revocation(key)
    assert await storage.claim_revocations(time.time() + 10, time.time() + 15, 10) == []


# ------------------------------------------------------------------------------------------- a replica killed
@contextlib.asynccontextmanager
async def proxy_process(
    idp_url: str, url: str, prefix: str, timeout: float = 2.0
) -> AsyncIterator[tuple[subprocess.Popen[str], str]]:
    """The proxy of ``tests/support/servers/upstream_proxy.py`` in a process of its own (its provider's
    ``timeout``: its records' lease is that + 5 s, swept every half lease); the process and its URL."""
    script = str(REPO / "tests" / "support" / "servers" / "upstream_proxy.py")
    proc = subprocess.Popen(
        [sys.executable, script, idp_url, url, prefix, str(timeout)],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)
        assert line, "the proxy process did not start"
        yield proc, f"http://127.0.0.1:{json.loads(line)['port']}"
    finally:
        stop(proc)


async def sign_in_at(proxy_url: str) -> dict[str, Any]:
    """alice signs in at the proxy process through a new client (registered over HTTP): its token answer, with
    ``client_id``."""
    async with httpx.AsyncClient() as http:
        client_id = (await register(http, proxy_url))["client_id"]
    verifier, challenge = pkce_pair()
    params = authorization_query(client_id, challenge, proxy_url + "/mcp")
    browser = Browser()
    try:
        got = query(await browser.open(f"{proxy_url}/authorize?{params}", stop_at=REDIRECT))
    finally:
        await browser.aclose()
    tokens, _ = await redeem(proxy_url, client_id, got["code"], verifier)
    return {**tokens, "client_id": client_id}


class KeptRecords:
    """The revocation records a shared storage keeps, read from outside the proxies (as a dump would show them):
    under the Redis prefix or in the PostgreSQL table of ``prefix``."""

    def __init__(self, backend: str, url: str, prefix: str) -> None:
        self.backend = backend
        self.redis = Redis.from_url(url) if backend == "redis" else None
        self.postgres = PostgresAuthStorage(url, prefix=prefix) if backend == "postgres" else None
        self.prefix = prefix

    async def sealed(self) -> list[bytes]:
        """Every record kept (sealed)."""
        if self.redis is not None:
            kept = [k async for k in self.redis.scan_iter(self.prefix + "upstream-revocation:*")]
            return [await self.redis.get(k) or b"" for k in kept]
        assert self.postgres is not None
        async with self.postgres._db() as db:
            rows = await db.fetch(f"SELECT value FROM {self.postgres.table} WHERE kind = 'revocation'")
        return [bytes(row["value"]) for row in rows]

    async def leased(self) -> int:
        """How many records are leased now (their replica's lease has not ended)."""
        if self.redis is not None:
            leases = self.prefix + "upstream-revocations:all"
            return len(await self.redis.zrangebyscore(leases, int(time.time() * 1000), "+inf"))
        assert self.postgres is not None
        async with self.postgres._db() as db:
            return int(
                await db.fetchval(
                    f"SELECT count(*) FROM {self.postgres.table} WHERE kind = 'revocation' AND stamp >= "
                    "clock_timestamp()"
                )
            )

    async def aclose(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()
        if self.postgres is not None:
            await self.postgres.aclose()


@pytest.mark.parametrize("backend", ["redis", "postgres"])
@pytest.mark.parametrize("second_starts", ["while leased", "after the lease"])
async def test_revocations_pending_in_a_killed_proxy_are_done_by_another_replica(
    second_starts: str, backend: str, request: pytest.FixtureRequest
) -> None:
    """A revocation lived in the memory of the process trying it: a proxy killed while its provider was down lost
    it, and the upstream tokens of grants the proxy had revoked stayed valid at the provider. Each is recorded in
    the shared storage (Redis or PostgreSQL, sealed) before it is tried now: the proxy is SIGKILLed with three
    revocations waiting for their next try (the IdP answered 503, ``Retry-After: 60``), and a second proxy process
    on the same storage takes the records over and revokes them at the IdP, which refuses those upstream refresh
    tokens from then on; the records are gone. Started while the records are still leased, the second takes them
    over in a periodic sweep once their lease ended; started after that, in the sweep of its startup (before its
    first periodic one, half its own 15 s lease later)."""
    s: dict[str, Any] = {"idp_recorded": Recorded()}
    script = RevokeScript()
    script.then = (503, {"retry-after": "60"})
    url: str = request.getfixturevalue(f"{backend}_url")
    prefix = f"mcpkit-test:{time.time_ns()}:" if backend == "redis" else f"t{time.time_ns()}_"

    def make_idp(base: str) -> Any:
        s["idp"] = identity_provider(base, lambda: "alice")
        return script.wrap(s["idp_recorded"].wrap(s["idp"]))

    async with serve(make_idp) as (idp_url, _):
        async with proxy_process(idp_url, url, prefix) as (first, first_url):
            await s["idp"].register_client(
                client_id=PROXY_CLIENT_ID,
                client_secret=PROXY_CLIENT_SECRET,
                redirect_uris=[first_url + "/upstream/callback"],
                token_endpoint_auth_method="client_secret_basic",
            )
            grants = [await sign_in_at(first_url) for _ in range(3)]
            upstream = upstream_refresh_tokens(s)
            assert len(upstream) == 3
            async with httpx.AsyncClient() as http:
                for grant in grants:
                    form = {"token": grant["refresh_token"], "client_id": grant["client_id"]}
                    assert (await http.post(first_url + "/revoke", data=form)).status_code == 200
            await until(lambda: len(script.arrived) == 3, "the first proxy never tried the three revocations")
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        records = KeptRecords(backend, url, prefix)
        try:
            sealed = await records.sealed()
            assert len(sealed) == 3  # recorded, sealed: no upstream token in clear
            assert all(t.encode() not in value for value in sealed for t in upstream)
            script.then = None  # the provider is back
            timeout, within = 2.0, 40.0  # (the records' lease: the provider's 2 s timeout + 5 s)
            if second_starts == "after the lease":
                for _ in range(300):
                    if not await records.leased():
                        break
                    await asyncio.sleep(0.1)
                timeout, within = 10.0, 5.0  # (its first periodic sweep: 7.5 s after its startup)
            async with proxy_process(idp_url, url, prefix, timeout):
                what = "the second proxy never took the revocations over"
                await until(lambda: len(script.arrived) == 6, what, within)
                for _ in range(100):
                    if not await records.sealed():
                        break
                    await asyncio.sleep(0.1)
                assert await records.sealed() == []
            revoked = [r for r in s["idp_recorded"].responses if r[0] == "/revoke" and r[1] == 200]
            assert len(revoked) == 3
            assert all([await refused_at_idp(idp_url, t) for t in upstream])
        finally:
            await records.aclose()
