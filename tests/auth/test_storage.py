"""The contract of the authorization server's storage (``mcpkit.auth.storage``), held by every backend: in memory,
``RedisAuthStorage`` on a real ``redis-server`` and ``PostgresAuthStorage`` on a real PostgreSQL. A refresh token
bound to a DPoP key is taken only with that key, a code or refresh token is taken once whoever races for it, and an
OAuth proxy's pending logins and upstream tokens keep their bounds."""

from __future__ import annotations

import asyncio
import inspect
import secrets
import sys
import time
import typing
from typing import Any

import httpx
import jwt
import pytest

from mcpkit.auth.storage import ClientRecord, CodeGrant, RefreshGrant
from support.auth_storages import StorageMaker, make_auth_storage  # noqa: F401  (the fixture)
from support.oauth import register, serve
from support.postgres_server import postgres_url  # noqa: F401  (the session fixture)
from support.redis_server import redis_url  # noqa: F401  (the session fixture)


async def test_a_refresh_token_bound_to_another_key_is_left_in_place(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    storage = make_auth_storage()
    token = secrets.token_urlsafe(32)
    await storage.save_refresh(token, RefreshGrant("c", ["s"], None, "alice", time.time() + 60, "fam", "jkt-1"))
    for wrong in ("jkt-2", None):
        seen = await storage.take_refresh(token, wrong)
        assert seen is not None and seen.jkt == "jkt-1"  # shown (to be refused), not taken
    taken = await storage.take_refresh(token, "jkt-1")
    assert taken is not None and taken.subject == "alice"
    assert await storage.take_refresh(token, "jkt-1") is None
    unbound = secrets.token_urlsafe(32)
    await storage.save_refresh(unbound, RefreshGrant("c", ["s"], None, "bob", None, "fam"))
    assert (await storage.take_refresh(unbound, "any")) is not None and await storage.pop_refresh(unbound) is None


async def test_a_refresh_token_read_with_peek_stays_in_place(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """The refresh grant refuses a wider scope or another resource from a read that takes nothing: the token is
    still there to take afterwards."""
    storage = make_auth_storage()
    token = secrets.token_urlsafe(32)
    await storage.save_refresh(token, RefreshGrant("c", ["s"], "https://a/mcp", "alice", time.time() + 60, "fam"))
    for _ in range(2):
        seen = await storage.peek_refresh(token)
        assert seen is not None and seen.subject == "alice" and seen.resource == "https://a/mcp"
    assert await storage.peek_refresh(secrets.token_urlsafe(32)) is None
    assert (await storage.take_refresh(token, None)) is not None and await storage.peek_refresh(token) is None


async def test_two_replicas_taking_one_code_or_refresh_token_at_once_take_it_once(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """Rotation and single use across replicas: two replicas (two storages on one backend) race for each of 20
    codes and 20 refresh tokens (bound and unbound), each asking several times at once: exactly one take of each
    gets the record, every other gets nothing (a second winner would be a code redeemed twice, a refresh token
    rotated into two families)."""
    first = make_auth_storage()
    second = make_auth_storage.shared()
    later = time.time() + 60
    codes = [secrets.token_urlsafe(32) for _ in range(20)]
    refresh = [secrets.token_urlsafe(32) for _ in range(20)]
    for code in codes:
        await first.save_code(code, CodeGrant("c", "https://r", "x", ["s"], None, "alice", later))
    for i, token in enumerate(refresh):
        await first.save_refresh(token, RefreshGrant("c", ["s"], None, "alice", later, "fam", "jkt" if i % 2 else None))
    code_takes = [s.pop_code(code) for code in codes for s in (first, second, first, second)]
    refresh_takes = [
        take
        for i, token in enumerate(refresh)
        for s in (first, second, first, second)
        for take in (s.take_refresh(token, "jkt" if i % 2 else None), s.pop_refresh(token) if i % 2 == 0 else None)
        if take is not None
    ]
    got = await asyncio.gather(*code_takes, *refresh_takes)
    code_wins = [sum(1 for r in got[i * 4 : i * 4 + 4] if r is not None) for i in range(len(codes))]
    assert code_wins == [1] * len(codes)
    rest = got[len(code_takes) :]
    assert sum(1 for r in rest if r is not None) == len(refresh)
    for token in refresh:
        assert await first.peek_refresh(token) is None


async def test_an_oauth_proxys_pending_logins_and_upstream_tokens_keep_their_bounds(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """The bounds of ``UpstreamLogin`` hold whatever keeps its state: at most ``max_pending`` live pending records
    (an expired one makes room), each taken once; at most ``max_tokens`` users' upstream tokens, the least recently
    used going first, each forgotten at its expiry."""
    storage = make_auth_storage()
    now = time.time()
    assert await storage.put_pending("a", b"A", now + 60, now, 2)
    assert await storage.put_pending("b", b"B", now + 1, now, 2)
    assert not await storage.put_pending("c", b"C", now + 60, now, 2)  # full
    assert await storage.put_pending("a", b"A2", now + 60, now, 2)  # the same one again: not one more
    assert await storage.peek_pending("a", time.time()) == b"A2"
    assert await storage.take_pending("a", time.time()) == b"A2" and await storage.take_pending("a", now) is None
    await asyncio.sleep(1.3)  # b expired: room for two again
    now = time.time()
    assert await storage.peek_pending("b", now) is None
    assert await storage.put_pending("c", b"C", now + 60, now, 2)
    assert await storage.put_pending("d", b"D", now + 60, now, 2)
    for user in ("u1", "u2"):
        await storage.put_upstream(user, user.encode(), now + 60, now, 2)
        await asyncio.sleep(0.01)  # (a storage orders uses by its clock: two uses never tie)
    assert await storage.get_upstream("u1", now) == b"u1"  # u1 used last: u2 goes first
    await storage.put_upstream("u3", b"u3", now + 60, now, 2)
    assert await storage.get_upstream("u2", now) is None
    assert await storage.get_upstream("u1", now) == b"u1" and await storage.get_upstream("u3", now) == b"u3"
    await storage.put_upstream("u4", b"u4", now + 0.5, now, 2)
    await asyncio.sleep(1.0)
    assert await storage.get_upstream("u4", time.time()) is None  # expired
    await storage.drop_upstream("u1")
    assert await storage.get_upstream("u1", time.time()) is None


@pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)
async def test_refresh_tokens_without_an_expiry_are_bounded_in_count(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """``refresh_token_ttl=None`` gave refresh tokens no TTL in Redis: every abandoned one stayed forever (the
    in-memory storage keeps at most 100,000). At most ``max_refresh_tokens`` unexpiring ones are kept now, the
    least recently issued going first; tokens with a lifetime expire by themselves and are not counted."""
    storage = make_auth_storage(max_refresh_tokens=3)
    tokens = [secrets.token_urlsafe(32) for _ in range(6)]
    for i, token in enumerate(tokens):
        await storage.save_refresh(token, RefreshGrant("c", ["s"], None, f"u{i}", None, "fam"))
    expiring = secrets.token_urlsafe(32)
    await storage.save_refresh(expiring, RefreshGrant("c", ["s"], None, "e", time.time() + 60, "fam"))
    assert [t for t in tokens if await storage.peek_refresh(t) is not None] == tokens[3:]
    # a token taken (rotated) leaves the count: the next one saved evicts nothing
    assert (await storage.pop_refresh(tokens[3])) is not None
    newest = secrets.token_urlsafe(32)
    await storage.save_refresh(newest, RefreshGrant("c", ["s"], None, "n", None, "fam"))
    alive = [t for t in [*tokens, newest] if await storage.pop_refresh(t) is not None]
    assert alive == [tokens[4], tokens[5], newest]
    assert await storage.pop_refresh(expiring) is not None
    with pytest.raises(ValueError, match="max_refresh_tokens"):
        make_auth_storage(max_refresh_tokens=0)


@pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)
async def test_a_refresh_token_saved_again_with_an_expiry_no_longer_counts_among_the_unexpiring_ones(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """A token kept without an expiry, then saved again with one, leaves the ``max_refresh_tokens`` unexpiring ones:
    two more fit under a bound of two and nothing goes (still counted, it made PostgreSQL evict the older of the two,
    and Redis evict the token itself, expiry and all), and the bound holds after (a third evicts the oldest)."""
    storage = make_auth_storage(max_refresh_tokens=2)
    tokens = [secrets.token_urlsafe(32) for _ in range(5)]

    async def save(token: str, expires_at: float | None) -> None:
        await storage.save_refresh(token, RefreshGrant("c", ["s"], None, "u", expires_at, "fam"))
        await asyncio.sleep(0.01)  # (a storage orders saves by its clock: two never tie)

    async def kept() -> list[int]:
        return [i for i, token in enumerate(tokens) if await storage.peek_refresh(token) is not None]

    await save(tokens[0], None)
    await save(tokens[0], time.time() + 60)
    await save(tokens[1], None)
    await save(tokens[2], None)
    assert await kept() == [0, 1, 2]
    await save(tokens[3], None)
    assert await kept() == [0, 2, 3]
    await save(tokens[2], time.time() + 60)
    await save(tokens[4], None)
    assert await kept() == [0, 2, 3, 4]


class _Clock:
    """A replica's clock ``offset`` seconds off: what the storage's module reads as ``time`` while that replica
    calls it (its other functions are the real ones)."""

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def time(self) -> float:
        return time.time() + self.offset

    def time_ns(self) -> int:
        return time.time_ns() + int(self.offset * 1e9)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)
async def test_replicas_whose_clocks_differ_agree_on_leases_and_expiries(
    make_auth_storage: StorageMaker,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two replicas sharing a storage, one's clock a minute slow, the other's a minute fast: each passes its own
    clock's ``now``, ``until`` and ``expires_at``, and the storage keeps only the lifetimes they mean, on its
    server's clock. The fast replica does not take over a revocation record the slow one leased (or renewed) for 5 s
    a moment ago (comparing the replicas' own times it would, and both would revoke), and the slow one does take
    over a record whose 10 ms lease ended; the fast replica counts the slow one's live pending logins (no more than
    ``max_pending`` are kept) and its users' upstream tokens (no more than ``max_tokens``, the least recently used
    going first)."""
    slow_replica = make_auth_storage()
    fast_replica = make_auth_storage.shared()
    module = sys.modules[type(slow_replica).__module__]
    slow, fast = _Clock(-60), _Clock(60)

    def on(clock: _Clock) -> float:
        monkeypatch.setattr(module, "time", clock)
        return clock.time()

    now = on(slow)
    assert await slow_replica.put_revocation("r", b"R", now + 5, now + 600, 10)  # leased for 5 s
    assert await slow_replica.put_revocation("s", b"S", now + 0.01, now + 600, 10)  # for 10 ms
    assert await slow_replica.put_revocation("t", b"T", now + 0.01, now + 600, 10)
    now = on(slow)
    await slow_replica.renew_revocations(["t"], now + 5)  # t renewed for 5 s
    await asyncio.sleep(0.05)
    now = on(fast)
    assert await fast_replica.claim_revocations(now, now + 5, 10) == [("s", b"S")]
    now = on(fast)
    assert await fast_replica.put_revocation("u", b"U", now + 0.01, now + 600, 10)  # for 10 ms
    await asyncio.sleep(0.05)
    now = on(slow)
    assert await slow_replica.claim_revocations(now, now + 5, 10) == [("u", b"U")]

    now = on(slow)
    assert await slow_replica.put_pending("p1", b"P1", now + 30, now, 2)
    assert await slow_replica.put_pending("p2", b"P2", now + 30, now, 2)
    now = on(fast)
    assert not await fast_replica.put_pending("p3", b"P3", now + 30, now, 2)  # two live ones: full

    uses = [("a", slow_replica, slow), ("b", fast_replica, fast), ("c", slow_replica, slow)]
    for user, replica, clock in uses:
        now = on(clock)
        await replica.put_upstream(user, user.encode(), now + 30, now, 2)
        await asyncio.sleep(0.01)  # (a storage orders uses by its clock: two uses never tie)
    now = on(slow)
    kept = [user for user in "abc" if await slow_replica.get_upstream(user, now) is not None]
    assert kept == ["b", "c"]  # a, the least recently used, went


@pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)
async def test_a_ledger_entry_lives_its_lifetime_whatever_the_clock_of_the_replica_that_wrote_it(
    make_auth_storage: StorageMaker,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The authorization server asks the ledger to keep a spent code and a revoked family for as long as a token
    of the family can live: until its own clock's now plus that lifetime (``AuthorizationServer._family_expiry``).
    The storage keeps each entry that long on its server's clock, whatever the skew of the replica that wrote it: a
    code a minute-slow replica marked used is still known near the end of its 3 s to a minute-fast one (so a late
    replay still revokes its family), a family the fast replica revoked is still refused near the end of its
    lifetime, and both are gone after it (the ledger stays bounded). Read as an absolute time on the server's clock,
    the slow replica's entry would end a minute early (gone at once) and the fast one's a minute late."""
    slow_replica = make_auth_storage()
    fast_replica = make_auth_storage.shared()
    module = sys.modules[type(slow_replica).__module__]
    slow, fast = _Clock(-60), _Clock(60)
    lifetime = 3.0

    def on(clock: _Clock) -> float:
        monkeypatch.setattr(module, "time", clock)
        return clock.time()

    await slow_replica.mark_used("code:spent", "fam-1", on(slow) + lifetime)
    await fast_replica.revoke("fam-2", on(fast) + lifetime)
    await asyncio.sleep(lifetime - 1.0)
    on(fast)
    assert await fast_replica.used("code:spent") == "fam-1"  # a late replay is still known: its family is revoked
    on(slow)
    assert await slow_replica.revoked("fam-2")
    await asyncio.sleep(1.5)
    assert await slow_replica.used("code:spent") is None and not await slow_replica.revoked("fam-2")
    on(fast)
    assert await fast_replica.used("code:spent") is None and not await fast_replica.revoked("fam-2")


async def test_a_slow_replica_refuses_a_revoked_grants_access_token_until_it_has_expired_on_its_clock(
    make_auth_storage: StorageMaker,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An access token's ``exp`` is the issuing replica's clock's, and a resource server judges it on its own clock,
    with its leeway. The ledger kept a revoked grant for the longest token lifetime from the revocation, so a replica
    whose clock runs behind the issuer's still took a token of that grant for unexpired after the entry had gone,
    and accepted it (for up to the skew plus the leeway). The authorization server's ``clock_skew`` (here the 0.5 s
    leeway plus the 1 s a replica's clock runs behind the issuer's) now keeps the entry that much longer: at
    every moment until the token has expired on the slow clock (its ``exp`` plus the leeway) the slow replica finds
    the grant revoked, and the entry still ends soon after (the ledger stays bounded)."""
    from mcpkit.auth import AccessToken, AuthorizationServer

    issuer_storage = make_auth_storage()
    slow_storage = make_auth_storage.shared()
    module = sys.modules[type(issuer_storage).__module__]  # (in memory the storage has one clock: the real one)
    issuer, slow = _Clock(0.0), _Clock(-1.0)
    leeway, ttl = 0.5, 2
    clock_skew = leeway + issuer.offset - slow.offset
    made: list[AuthorizationServer] = []

    def make(base: str) -> AuthorizationServer:
        options: dict[str, Any] = {"access_token_ttl": ttl, "code_ttl": ttl, "refresh_token_ttl": ttl}
        made.append(
            AuthorizationServer(base, storage=issuer_storage, clock=issuer.time, clock_skew=clock_skew, **options)
        )
        return made[-1]

    monkeypatch.setattr(module, "time", issuer)  # the issuing replica's storage reads its clock
    async with serve(make) as (base, _), httpx.AsyncClient() as http:
        client = await register(http, base, "client_secret_basic")
        authz = made[0]
        while issuer.time() % 1 > 0.2:  # (exp is whole seconds: issued early in one, the token lives its full ttl)
            await asyncio.sleep(0.05)
        raw = authz.issue_access_token(
            subject="alice", client_id=client["client_id"], scopes=[], resource=None, grant="g"
        )
        answer = await http.post(
            base + "/revoke", data={"token": raw}, auth=(client["client_id"], client["client_secret"])
        )
        assert answer.status_code == 200, answer.text
        revoked_at = time.time()
    monkeypatch.setattr(module, "time", slow)
    claims = jwt.decode(raw, options={"verify_signature": False})
    token = AccessToken(raw, issuer=claims["iss"], expires_at=float(claims["exp"]), claims=claims)
    slow_replica = AuthorizationServer(base, storage=slow_storage, clock=slow.time).revocation
    checks = 0
    while await slow_replica.revoked(token):
        checks += 1
        assert time.time() < revoked_at + ttl + clock_skew + 5.0, "the ledger entry never ended"
        await asyncio.sleep(0.05)
    late = claims["exp"] + leeway - slow.time()  # (the clock read after the answer: any lag errs against the check)
    assert late < 0, f"the slow replica accepts the revoked grant's token for {late:.2f} s more"
    assert checks > 0  # (it was refused while it was still unexpired on the slow clock)
    for wrong in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="clock_skew"):
            AuthorizationServer(base, clock_skew=wrong)


@pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)
async def test_replicas_whose_clocks_differ_agree_on_which_self_registered_client_was_used_last(
    make_auth_storage: StorageMaker,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past ``max_dynamic_clients`` the least recently used self-registered client goes, in the order the storage's
    server saw the saves and uses, whatever the clocks of the replicas that made them (compared by the replicas'
    clocks, a slow replica's newest client was the oldest, and evicting none but it, kept three past a bound of
    two)."""
    slow_replica = make_auth_storage(max_dynamic_clients=2)
    fast_replica = make_auth_storage.shared()
    module = sys.modules[type(slow_replica).__module__]
    slow, fast = _Clock(-60), _Clock(60)
    steps = [("a", fast_replica, fast), ("b", slow_replica, slow), ("c", slow_replica, slow)]
    for client_id, replica, clock in steps:
        monkeypatch.setattr(module, "time", clock)
        await replica.save_client(ClientRecord(client_id, None, ["https://app/cb"], dynamic=True))
        await asyncio.sleep(0.01)  # (two saves never tie)
        if client_id == "b":
            monkeypatch.setattr(module, "time", fast)
            await fast_replica.client_used("b")  # (so the slow replica's c is the newest by far only on its clock)
            await asyncio.sleep(0.01)
    kept = [c for c in "abc" if await slow_replica.get_client(c) is not None]
    assert kept == ["b", "c"]  # a, the least recently used, went


async def test_a_replay_cache_lets_one_use_of_a_key_through_until_its_expiry_and_none_after(
    make_auth_storage: StorageMaker,  # noqa: F811
) -> None:
    """The first use of a key wins on every replica sharing the cache, and its replays are refused; a JWT past its
    expiry is refused too (the cache can no longer tell whether it was used: its key would be forgotten)."""
    make_auth_storage()
    first, second = make_auth_storage.replay_cache(), make_auth_storage.replay_cache()
    now = time.time()
    assert await first.first_use("k", now, now + 60)
    assert not await second.first_use("k", now, now + 60) and not await first.first_use("k", now, now + 60)
    assert not await second.first_use("old", now - 120, now - 60)
    assert await second.first_use("other", now, now + 60)


@pytest.mark.parametrize("make_auth_storage", ["redis", "postgres"], indirect=True)
async def test_a_replayed_dpop_proof_is_refused_whatever_the_clocks_of_the_replicas(
    make_auth_storage: StorageMaker,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two resource-server replicas share a replay cache, one's clock a minute fast, the other's a minute slow, and
    accept a proof for 62 s after its ``iat``: on their own clocks, both accept a fresh proof for a while. The fast
    replica accepts it first, with 3 s left by its clock: a cache that kept the key for those 3 s forgot it while the
    slow replica still had a minute to accept it, and the replay there was a first use. The key is kept until the
    proof's own expiry on the cache server's clock; and a proof past that expiry there, though the slow replica
    still accepts it on its clock, is refused (its key, had it been used, is forgotten)."""
    from mcpkit.auth import DPoPVerifier, SigningKey
    from mcpkit.auth.dpop import DPoPError, make_proof

    make_auth_storage()
    fast, slow = _Clock(60), _Clock(-60)
    caches = {fast: make_auth_storage.replay_cache(), slow: make_auth_storage.replay_cache()}
    module = sys.modules[type(caches[fast]).__module__]
    key, url, max_age = SigningKey.generate(), "https://mcp.example/mcp", 62.0

    async def verify(proof: str, clock: _Clock) -> None:
        monkeypatch.setattr(module, "time", clock)  # (what the cache's module reads as its clock)
        verifier = DPoPVerifier(replay_cache=caches[clock], max_age=max_age, clock=clock.time)
        await verifier.verify(proof, method="POST", url=url)

    issued = int(time.time()) + 1  # (iat is whole seconds: at most 60 s behind the fast replica's clock)
    proof = make_proof(key, "POST", url, now=issued)
    await verify(proof, fast)
    await asyncio.sleep(max(0.0, issued + max_age - fast.time()) + 0.2)  # past its expiry on the fast clock
    with pytest.raises(DPoPError, match="replay"):
        await verify(proof, slow)

    issued = int(time.time()) - 60  # acceptable for 2 to 3 s more on the cache server's clock
    late = make_proof(key, "POST", url, now=issued)
    await verify(late, slow)
    await asyncio.sleep(max(0.0, issued + max_age - time.time()) + 0.2)  # its key forgotten
    assert abs(slow.time() - issued) <= max_age  # (the slow replica still accepts it on its clock)
    with pytest.raises(DPoPError, match="replay"):
        await verify(late, slow)


def test_every_type_the_storage_protocols_name_is_importable_from_mcpkit_auth() -> None:
    """A user implementing ``AuthStorage`` (and the optional ``KeyBoundRefreshStorage``, ``ClientUseStorage``,
    ``RevocationLedger``) annotates its methods with the types the protocols name: each is exported by
    ``mcpkit.auth`` (``CodeGrant`` and ``RefreshGrant`` were reachable only from the private module's namespace)."""
    import mcpkit.auth
    from mcpkit.auth import AuthStorage, ClientRecord, CodeGrant, RefreshGrant
    from mcpkit.auth.server import ClientUseStorage, KeyBoundRefreshStorage, RevocationLedger

    def classes(hint: Any) -> list[type]:
        return [hint] if isinstance(hint, type) else [c for arg in typing.get_args(hint) for c in classes(arg)]

    named: set[type] = set()
    for protocol in (AuthStorage, KeyBoundRefreshStorage, ClientUseStorage, RevocationLedger):
        for member in vars(protocol).values():
            if inspect.iscoroutinefunction(member):
                for hint in typing.get_type_hints(member).values():
                    named.update(c for c in classes(hint) if c.__module__.startswith("mcpkit"))
    assert named == {ClientRecord, CodeGrant, RefreshGrant}
    assert all(getattr(mcpkit.auth, c.__name__) is c and c.__name__ in mcpkit.auth.__all__ for c in named)


async def test_a_full_in_memory_ledger_drops_expired_entries_before_a_live_one_whatever_their_order() -> None:
    """Ledger entries live as long as the tokens of their grant: a grant without refresh tokens as long as its access
    token, one with them for theirs. The in-memory ledger dropped expired entries only from the front of the order
    they were written in, so one long-lived entry there kept the expired ones behind it, and a full table then forgot
    that live entry (a revoked grant's tokens taken again). Expired entries go first wherever they are now; a table
    full of live ones forgets the one nearest its end."""
    from mcpkit.auth.storage import InMemoryAuthStorage

    now = [1_000.0]
    storage = InMemoryAuthStorage(max_entries=4, clock=lambda: now[0])
    await storage.revoke("long", now[0] + 1_000)
    await storage.mark_used("code:long", "long", now[0] + 1_000)
    for i in range(3):
        await storage.revoke(f"short-{i}", now[0] + 10)
        await storage.mark_used(f"code:short-{i}", f"short-{i}", now[0] + 10)
    now[0] += 20  # the short ones have ended; the table is full
    for i in range(3):
        await storage.revoke(f"later-{i}", now[0] + 10)
        await storage.mark_used(f"code:later-{i}", f"later-{i}", now[0] + 10)
    assert await storage.revoked("long") and await storage.used("code:long") == "long"
    await storage.revoke("soonest", now[0] + 5)  # full of live entries: the one ending first goes (not "long")
    await storage.revoke("last", now[0] + 500)
    assert await storage.revoked("long") and not await storage.revoked("soonest")
    assert all([await storage.revoked(family) for family in ("later-1", "later-2", "last")])
    for _ in range(1_000):  # the same grant revoked again and again: the table's bookkeeping stays bounded
        await storage.revoke("last", now[0] + 500)
    assert len(storage.revoked_families._ends) <= 2 * 4 + 64
