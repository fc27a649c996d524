"""Redis-backed :class:`~mcpkit.auth.server.AuthStorage`: the authorization server's clients, codes and refresh
tokens survive restarts and are shared by every replica (pass the same ``signing_key`` to each).

Codes and refresh tokens expire in Redis with their own lifetime, and are taken with ``GETDEL`` (Redis >= 6.2)
so a code or a rotated refresh token can be used once across all replicas, never twice. They are kept under the
SHA-256 of the secret, never the secret itself: whoever can list the keys (a replica, a dump, ``SCAN``) learns
nothing that redeems.

    storage = RedisAuthStorage("redis://127.0.0.1:6379/0")
    AuthorizationServer(issuer, storage=storage, production=True, signing_key=key)

:class:`RedisReplayCache` is the :class:`~mcpkit.auth.replay.ReplayCache` every worker of a resource server (or
replica of the authorization server) shares, so a DPoP proof or an assertion replayed to another worker is seen.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import orjson

from .storage import ClientRecord, CodeGrant, RefreshGrant, check_shared_bounds

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisAuthStorage", "RedisReplayCache"]

# Every lease, every "is it due / expired" and every order of use below is on the Redis server's clock (TIME), never
# a replica's: a replica passes lifetimes (ms from now), so replicas whose clocks disagree still agree on who holds a
# lease, what expired and what was used last.
# (TIME then writes: allowed with effects replication, the default from Redis 5 and the only mode from 7; this
# storage needs 6.2 for GETDEL. replicate_commands() switches it on where a server was configured without it.)
_NOW = """
redis.replicate_commands()
local clock = redis.call('TIME')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local now_us = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
"""

# KEYS: the client's key, the set of self-registered clients (score: when saved or last used, µs), their sizes (a
# hash), the sum of their sizes; ARGV: the record, the most kept, the client id, the prefix of client keys, the
# record's size, the most bytes kept. Saves the client; past either bound the least recently used self-registered
# clients go (never the one just saved; pre-registered ones are never in the set).
_SAVE_DYNAMIC = (
    _NOW
    + """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], now_us, ARGV[3])
local old = tonumber(redis.call('HGET', KEYS[3], ARGV[3]) or '0')
redis.call('HSET', KEYS[3], ARGV[3], ARGV[5])
local total = redis.call('INCRBY', KEYS[4], tonumber(ARGV[5]) - old)
local count = redis.call('ZCARD', KEYS[2])
while count > 1 and (count > tonumber(ARGV[2]) or total > tonumber(ARGV[6])) do
  local id = redis.call('ZPOPMIN', KEYS[2])[1]
  if id == ARGV[3] then
    redis.call('ZADD', KEYS[2], now_us, id)
    break
  end
  redis.call('DEL', ARGV[4] .. id)
  total = redis.call('INCRBY', KEYS[4], -tonumber(redis.call('HGET', KEYS[3], id) or '0'))
  redis.call('HDEL', KEYS[3], id)
  count = count - 1
end
return 1
"""
)

# KEYS: the token's key (by digest), the key an earlier version kept it under (or the same), the set of unexpiring
# refresh tokens; ARGV: the DPoP key thumbprint presented ('' for none), the digest, '1' to check the binding.
# Takes the token unless it is bound to another key: then it is returned, left in place ({0, record}).
_TAKE_REFRESH = """
local key = KEYS[1]
local raw = redis.call('GET', key)
if not raw then
  key = KEYS[2]
  raw = redis.call('GET', key)
end
if not raw then return false end
if ARGV[3] == '1' then
  local bound = cjson.decode(raw)['jkt']
  if type(bound) == 'string' and bound ~= ARGV[1] then return {0, raw} end
end
redis.call('DEL', key)
redis.call('ZREM', KEYS[3], ARGV[2])
return {1, raw}
"""

# KEYS: the token's key, the set of unexpiring refresh tokens (score: when saved, µs); ARGV: the record, the digest,
# the most kept, the prefix of the tokens' keys. Past the bound the least recently issued ones go.
_SAVE_UNEXPIRING = (
    _NOW
    + """
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], now_us, ARGV[2])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[3])
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do redis.call('DEL', ARGV[4] .. gone[i]) end
end
return 1
"""
)

# KEYS: the token's key, the set of unexpiring refresh tokens; ARGV: the record, its lifetime (ms), the digest. A token
# saved with an expiry leaves that set (kept without one before, it is no longer counted, nor evicted at the bound).
_SAVE_EXPIRING = """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZREM', KEYS[2], ARGV[3])
return 1
"""

# KEYS: a set ordered by use (self-registered clients); ARGV: the member just used. Its use now, if it is in the set
# (ZADD XX: never adds one: a pre-registered or evicted client stays out).
_TOUCH = (
    _NOW
    + """
redis.call('ZADD', KEYS[1], 'XX', now_us, ARGV[1])
return 1
"""
)

# KEYS: the record's key, the set of records (score: when its lease or life ends, ms); ARGV: the sealed record, its
# lifetime (ms), its score (ms from now), its digest, the most kept, '1' when a score past is an expiry (those
# members are forgotten first). Refused (0) past the bound: a count-bounded insert (pending logins, revocations).
_PUT_BOUNDED = (
    _NOW
    + """
if ARGV[6] == '1' then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms) end
if not redis.call('ZSCORE', KEYS[2], ARGV[4]) and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[5]) then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[3]), ARGV[4])
return 1
"""
)

# KEYS: the user's upstream tokens' key, the set of users kept (score: last use, µs); ARGV: the sealed record, its
# lifetime (ms), its digest, the most kept, the prefix of the records' keys. Forgets the ones unused for longer than
# that lifetime (expired), then the least recently used past the bound.
_PUT_UPSTREAM = (
    _NOW
    + """
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now_us, ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_us - tonumber(ARGV[2]) * 1000 - 1)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do redis.call('DEL', ARGV[5] .. gone[i]) end
end
return 1
"""
)

# KEYS: a user's upstream tokens' key, the set of users kept; ARGV: the digest. The record, now its most recent use
# (a ZADD XX: one forgotten meanwhile is not added back).
_GET_UPSTREAM = (
    _NOW
    + """
local raw = redis.call('GET', KEYS[1])
if raw then redis.call('ZADD', KEYS[2], 'XX', now_us, ARGV[1]) end
return raw
"""
)

# KEYS: a lease; ARGV: its owner. Ends the lease if that owner still holds it (one it lost at expiry is left alone).
_RELEASE_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: the set of pending revocations (score: the end of a record's lease, ms); ARGV: the new lease (ms from now),
# then the records' digests. Extends the lease of those still in the set.
_RENEW_REVOCATIONS = (
    _NOW
    + """
local lease_end = now_ms + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', lease_end, ARGV[i]) end
return 1
"""
)

# KEYS: the set of pending revocations; ARGV: the time leases must have ended by (ms from now), the new lease (ms
# from now), the most taken, the prefix of the records' keys. Takes over the records whose lease ended (a record
# forgotten meanwhile leaves the set, and does not count: each round leases or removes every member it read, so the
# loop ends).
_CLAIM_REVOCATIONS = (
    _NOW
    + """
local taken = {}
local want = tonumber(ARGV[3])
local due_before = now_ms + tonumber(ARGV[1])
local lease_end = now_ms + tonumber(ARGV[2])
while #taken < 2 * want do
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', due_before - 1, 'LIMIT', 0, want - #taken / 2)
  if #due == 0 then break end
  for _, id in ipairs(due) do
    local record = redis.call('GET', ARGV[4] .. id)
    if record then
      redis.call('ZADD', KEYS[1], lease_end, id)
      table.insert(taken, id)
      table.insert(taken, record)
    else
      redis.call('ZREM', KEYS[1], id)
    end
  end
end
return taken
"""
)

#: what the secrets mcpkit issues look like (``secrets.token_urlsafe(32)``): only such a value is looked up under the
#: key an earlier version kept it by (the secret itself)
_ISSUED_SECRET = re.compile(r"[A-Za-z0-9_-]{43}")


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


# KEYS: a one-time JWT's key; ARGV: when the JWT can no longer be accepted (ms since the epoch: its own claims, on no
# replica's clock). Its first use (1) keeps the key until then on the Redis server's clock; a key kept already is a
# replay (0), and so is a JWT past that time on the server's clock (0): a key is forgotten then, and a replica whose
# clock is behind, still accepting the JWT, would take its replay for a first use. (Judged by the clock of the
# replica that kept it, a fast replica's key was forgotten up to its skew before a slow replica stopped accepting.)
_FIRST_USE = (
    _NOW
    + """
local left = tonumber(ARGV[1]) - now_ms
if left <= 0 then return 0 end
if redis.call('SET', KEYS[1], '1', 'NX', 'PX', left) then return 1 end
return 0
"""
)


def _ms_from_now(at: float, now: float | None = None) -> int:
    """How long until ``at`` (a time on the caller's clock, ``now`` by default its ``time.time()``), in whole ms
    (negative when past): what the scripts add to the Redis server's clock."""
    return round((at - (time.time() if now is None else now)) * 1000)


def _ttl(at: float, now: float | None = None) -> int:
    """A record's lifetime in ms for ``PX`` (at least 1)."""
    return max(1, _ms_from_now(at, now))


def _is_cluster(redis: Any) -> bool:
    """Whether ``redis`` is a ``redis.asyncio.RedisCluster`` client."""
    try:
        from redis.asyncio.cluster import RedisCluster
    except ImportError:  # pragma: no cover - (a Redis client was given: redis is installed)
        return False
    return isinstance(redis, RedisCluster)


class _RedisHolder:
    """A Redis client given, or made from a URL (and then closed by :meth:`aclose`), and the keys' prefix."""

    def __init__(self, redis: str | Redis, prefix: str) -> None:
        if isinstance(redis, str):
            from redis.asyncio import Redis as _Redis

            self.redis: Redis = _Redis.from_url(redis)
            self._owned = True
        else:
            self.redis = redis
            self._owned = False
        self.prefix = prefix

    async def aclose(self) -> None:
        """Close the client if it was made here from a URL (one given is the caller's to close)."""
        if self._owned:
            await self.redis.aclose()


class RedisAuthStorage(_RedisHolder):
    """The authorization server's state in Redis (keys under ``prefix``), shared by every replica. Codes, refresh
    tokens and the replay ledger expire with their lifetimes; at most ``max_dynamic_clients`` self-registered
    clients, together at most ``max_dynamic_client_bytes`` of JSON, are kept (beyond either the least recently used
    goes, as in :class:`~mcpkit.auth.storage.InMemoryAuthStorage`), and pre-registered clients are never evicted.
    Refresh tokens without an expiry (``AuthorizationServer(refresh_token_ttl=None)``) are kept up to
    ``max_refresh_tokens``, the least recently issued going first; client secrets are kept as their SHA-256."""

    def __init__(
        self,
        redis: str | Redis,
        *,
        prefix: str = "mcpkit:oauth:",
        max_dynamic_clients: int = 10_000,
        max_dynamic_client_bytes: int = 16 * 1024 * 1024,
        max_refresh_tokens: int = 100_000,
    ) -> None:
        check_shared_bounds(max_dynamic_clients, max_dynamic_client_bytes, max_refresh_tokens)
        super().__init__(redis, prefix)
        if _is_cluster(self.redis) and not re.search(r"\{[^}]+\}", prefix):
            raise ValueError(
                f"RedisAuthStorage on a Redis Cluster needs a prefix with a hash tag, e.g. 'mcpkit:{{oauth}}:' (got "
                f"{prefix!r}): its scripts touch several keys at once, which a cluster runs only within one slot"
            )
        self.max_dynamic_clients = max_dynamic_clients
        self.max_dynamic_client_bytes = max_dynamic_client_bytes
        self.max_refresh_tokens = max_refresh_tokens
        self._save_dynamic = self.redis.register_script(_SAVE_DYNAMIC)
        self._take_refresh = self.redis.register_script(_TAKE_REFRESH)
        self._save_unexpiring = self.redis.register_script(_SAVE_UNEXPIRING)
        self._save_expiring = self.redis.register_script(_SAVE_EXPIRING)
        self._touch = self.redis.register_script(_TOUCH)
        self._put_bounded = self.redis.register_script(_PUT_BOUNDED)
        self._put_upstream = self.redis.register_script(_PUT_UPSTREAM)
        self._get_upstream = self.redis.register_script(_GET_UPSTREAM)
        self._release_lease = self.redis.register_script(_RELEASE_LEASE)
        self._renew_revocations = self.redis.register_script(_RENEW_REVOCATIONS)
        self._claim_revocations = self.redis.register_script(_CLAIM_REVOCATIONS)

    def _key(self, kind: str, name: str) -> str:
        return f"{self.prefix}{kind}:{name}"

    @staticmethod
    def _ttl_ms(expires_at: float | None) -> int | None:
        return None if expires_at is None else _ttl(expires_at)

    async def get_client(self, client_id: str) -> ClientRecord | None:
        raw = await self.redis.get(self._key("client", client_id))
        return ClientRecord.from_dict(orjson.loads(raw)) if raw else None

    async def client_used(self, client_id: str) -> None:
        """A self-registered client just used gets the latest score in the eviction order (the Redis server's time),
        one ``ZADD XX`` in a script (which never adds: a pre-registered or evicted client stays out of the set)."""
        await self._touch(keys=[self._key("clients", "dynamic")], args=[client_id])

    async def save_client(self, client: ClientRecord) -> None:
        record = orjson.dumps(asdict(client.stored()))
        if not client.dynamic:
            await self.redis.set(self._key("client", client.client_id), record)
            return
        keys = [
            self._key("client", client.client_id),
            self._key("clients", "dynamic"),
            self._key("clients", "dynamic-sizes"),
            self._key("clients", "dynamic-bytes"),
        ]
        args: list[bytes | str | int] = [
            record,
            self.max_dynamic_clients,
            client.client_id,
            self._key("client", ""),
            len(record),
            self.max_dynamic_client_bytes,
        ]
        await self._save_dynamic(keys=keys, args=args)

    def _secret_key(self, kind: str, secret: str) -> str:
        """Where a code or refresh token is kept: under its digest (``<kind>-sha256:``, a name no secret a client
        sends can make the pre-digest key ``<kind>:<secret>`` take)."""
        return self._key(kind + "-sha256", _digest(secret))

    async def _take(self, kind: str, secret: str) -> Any:
        """GETDEL of a code or refresh token; one an earlier version stored under the secret itself (a refresh token
        lives for weeks) is taken from there, in the same round trip."""
        if not _ISSUED_SECRET.fullmatch(secret):
            return await self.redis.getdel(self._secret_key(kind, secret))
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.getdel(self._secret_key(kind, secret))
            pipe.getdel(self._key(kind, secret))
            current, legacy = await pipe.execute()
        return current or legacy

    async def save_code(self, code: str, data: CodeGrant) -> None:
        key = self._secret_key("code", code)
        await self.redis.set(key, orjson.dumps(asdict(data)), px=self._ttl_ms(data.expires_at))

    async def pop_code(self, code: str) -> CodeGrant | None:
        raw: Any = await self._take("code", code)
        return CodeGrant(**orjson.loads(raw)) if raw else None

    async def save_refresh(self, token: str, data: RefreshGrant) -> None:
        keys = [self._secret_key("refresh", token), self._key("refresh-unexpiring", "all")]
        record = orjson.dumps(asdict(data))
        if data.expires_at is not None:
            await self._save_expiring(keys=keys, args=[record, _ttl(data.expires_at), _digest(token)])
            return
        # no expiry (refresh_token_ttl=None): counted, and past max_refresh_tokens the least recently issued go
        prefix = self._key("refresh-sha256", "")
        args: list[bytes | str | int] = [record, _digest(token), self.max_refresh_tokens, prefix]
        await self._save_unexpiring(keys=keys, args=args)

    async def _take_refresh_record(self, token: str, jkt: str | None, check: bool) -> RefreshGrant | None:
        current = self._secret_key("refresh", token)
        legacy = self._key("refresh", token) if _ISSUED_SECRET.fullmatch(token) else current
        keys = [current, legacy, self._key("refresh-unexpiring", "all")]
        answer: Any = await self._take_refresh(keys=keys, args=[jkt or "", _digest(token), "1" if check else "0"])
        return RefreshGrant(**orjson.loads(answer[1])) if answer else None

    async def pop_refresh(self, token: str) -> RefreshGrant | None:
        return await self._take_refresh_record(token, None, False)

    async def peek_refresh(self, token: str) -> RefreshGrant | None:
        """The refresh token's record, left in place (under the key an earlier version kept it by, too)."""
        current = self._secret_key("refresh", token)
        legacy = self._key("refresh", token) if _ISSUED_SECRET.fullmatch(token) else current
        found, old = await self.redis.mget([current, legacy])
        raw = found or old
        return RefreshGrant(**orjson.loads(raw)) if raw else None

    async def take_refresh(self, token: str, jkt: str | None) -> RefreshGrant | None:
        """Take the refresh token unless it is bound to another DPoP key (then it is returned and left in place), in
        one script: a refresh with the wrong key never takes the token away from a concurrent one with the right
        key."""
        return await self._take_refresh_record(token, jkt, True)

    # the replay ledger (see AuthStorage): digests of spent codes / rotated refresh tokens -> their grant family
    async def mark_used(self, key: str, family: str, expires_at: float | None) -> None:
        await self.redis.set(self._key("spent", key), family.encode(), px=self._ttl_ms(expires_at))

    async def used(self, key: str) -> str | None:
        raw: Any = await self.redis.get(self._key("spent", key))
        return bytes(raw).decode() if raw else None

    async def revoke(self, family: str, expires_at: float | None) -> None:
        await self.redis.set(self._key("revoked", family), b"1", px=self._ttl_ms(expires_at))

    async def revoked(self, family: str) -> bool:
        return bool(await self.redis.exists(self._key("revoked", family)))

    # an OAuth proxy's state (UpstreamStateStorage): sealed records under digests, shared by every replica
    async def _put_counted(self, kind: str, key: str, sealed: bytes, ttl: int, score: int, most: int) -> bool:
        """The count-bounded insert (``_PUT_BOUNDED``) of a pending login (``kind`` "pending": its score is its
        expiry, and the ones past it make room) or a revocation record ("revocation": the end of its lease)."""
        everyone = self._key("upstream-pending" if kind == "pending" else "upstream-revocations", "all")
        keys = [self._key(f"upstream-{kind}", key), everyone]
        args: list[bytes | str | int] = [sealed, ttl, score, key, most, "1" if kind == "pending" else "0"]
        return bool(await self._put_bounded(keys=keys, args=args))

    async def put_pending(self, key: str, sealed: bytes, expires_at: float, now: float, max_pending: int) -> bool:
        ttl = _ttl(expires_at, now)
        return await self._put_counted("pending", key, sealed, ttl, ttl, max_pending)

    async def peek_pending(self, key: str, now: float) -> bytes | None:
        raw: Any = await self.redis.get(self._key("upstream-pending", key))
        return bytes(raw) if raw else None

    async def take_pending(self, key: str, now: float) -> bytes | None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.getdel(self._key("upstream-pending", key))
            pipe.zrem(self._key("upstream-pending", "all"), key)
            raw, _ = await pipe.execute()
        return bytes(raw) if raw else None

    async def put_upstream(self, key: str, sealed: bytes, expires_at: float, now: float, max_tokens: int) -> None:
        keys = [self._key("upstream-token", key), self._key("upstream-tokens", "all")]
        prefix = self._key("upstream-token", "")
        args: list[bytes | str | int] = [sealed, _ttl(expires_at, now), key, max_tokens, prefix]
        await self._put_upstream(keys=keys, args=args)

    async def get_upstream(self, key: str, now: float) -> bytes | None:
        """The user's upstream tokens, now their most recent use on the Redis server's clock (``now`` is unused:
        the record expires in Redis), in one script."""
        keys = [self._key("upstream-token", key), self._key("upstream-tokens", "all")]
        raw: Any = await self._get_upstream(keys=keys, args=[key])
        return bytes(raw) if raw else None

    async def drop_upstream(self, key: str) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.delete(self._key("upstream-token", key))
            pipe.zrem(self._key("upstream-tokens", "all"), key)
            await pipe.execute()

    async def acquire_lease(self, key: str, owner: str, ttl: float) -> bool:
        """``SET NX PX``: the first replica to ask holds it; Redis ends it at its expiry if its owner never does."""
        ttl_ms = max(1, int(ttl * 1000))
        return bool(await self.redis.set(self._key("upstream-lease", key), owner, nx=True, px=ttl_ms))

    async def release_lease(self, key: str, owner: str) -> None:
        await self._release_lease(keys=[self._key("upstream-lease", key)], args=[owner])

    async def put_revocation(self, key: str, sealed: bytes, until: float, expires_at: float, max_records: int) -> bool:
        lease = _ms_from_now(until)
        return await self._put_counted("revocation", key, sealed, _ttl(expires_at), lease, max_records)

    async def renew_revocations(self, keys: list[str], until: float) -> None:
        if keys:
            args: list[str | int] = [_ms_from_now(until), *keys]
            await self._renew_revocations(keys=[self._key("upstream-revocations", "all")], args=args)

    async def claim_revocations(self, now: float, until: float, limit: int) -> list[tuple[str, bytes]]:
        """The records whose lease ended (on the Redis server's clock: ``now`` and ``until`` count only as their
        distance from this replica's clock), leased anew, in one script."""
        keys = [self._key("upstream-revocations", "all")]
        prefix = self._key("upstream-revocation", "")
        args: list[str | int] = [_ms_from_now(now), _ms_from_now(until), limit, prefix]
        raw: Any = await self._claim_revocations(keys=keys, args=args)
        flat = [bytes(v) for v in raw]
        return [(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)]

    async def drop_revocation(self, key: str) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.delete(self._key("upstream-revocation", key))
            pipe.zrem(self._key("upstream-revocations", "all"), key)
            await pipe.execute()


class RedisReplayCache(_RedisHolder):
    """A :class:`~mcpkit.auth.replay.ReplayCache` in Redis: ``SET key NX`` until the JWT's expiry on the Redis
    server's clock, so the first worker to see a key wins, and a JWT past its expiry there is refused (see
    ``_FIRST_USE``: no replica's clock decides when a key is forgotten). Its size is bounded by time (accepted JWTs
    per second x the acceptance window), each key about 100 bytes."""

    def __init__(self, redis: str | Redis, *, prefix: str = "mcpkit:replay:") -> None:
        super().__init__(redis, prefix)
        self._first_use = self.redis.register_script(_FIRST_USE)

    async def first_use(self, key: str, issued_at: float, expires_at: float) -> bool:
        return bool(await self._first_use(keys=[self.prefix + key], args=[int(expires_at * 1000)]))
