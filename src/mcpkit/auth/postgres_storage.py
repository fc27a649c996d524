"""PostgreSQL-backed :class:`~mcpkit.auth.server.AuthStorage`, for a deployment that runs PostgreSQL and no Redis:
the authorization server's clients, codes, refresh tokens and replay ledger, and an OAuth proxy's state (pending
logins, upstream tokens, refresh leases, the records of pending upstream revocations), durable and shared by every
replica (pass the same ``signing_key`` to each, and to an OAuth proxy the same ``UpstreamLogin(secret=)``).

    storage = PostgresAuthStorage("postgresql://mcp:secret@db:5432/mcp")
    AuthorizationServer(issuer, storage=storage, production=True, signing_key=key)

Everything lives in one table, ``<prefix>oauth`` (a row per record: its kind, its key, its value), made on first
use on the pool of :class:`~mcpkit.stores.postgres.PostgresConnection` (give it the one your other PostgreSQL
stores share). Each step that must happen once across replicas is one statement or one transaction: a code or a
refresh token is taken with ``DELETE ... RETURNING`` (two replicas redeeming one: exactly one gets it), a refresh
token bound to another DPoP key is left in place by the same statement, a revocation record is taken over with
``FOR UPDATE SKIP LOCKED``, a bounded kind is counted and trimmed under an advisory lock of its own. Every expiry
and lease is kept on the database's clock (a replica's lifetime in seconds, added to ``clock_timestamp()``), so
replicas whose clocks differ agree on when a lease ends.

Codes and refresh tokens are kept under the SHA-256 of the secret, never the secret; client secrets as their
SHA-256; an OAuth proxy's records sealed (AES-256-GCM, :class:`~mcpkit.auth.upstream_state.Sealer`): whoever reads
the table learns nothing that redeems.

:class:`PostgresReplayCache` is the :class:`~mcpkit.auth.replay.ReplayCache` every worker of a resource server (or
replica of the authorization server) shares, so a DPoP proof or an assertion replayed to another worker is seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any, ClassVar

import orjson

from ..stores.postgres.connection import DEFAULT_TIMEOUT, PostgresConnection
from ..stores.postgres.swept import SweptTable
from .storage import ClientRecord, CodeGrant, RefreshGrant, check_shared_bounds

__all__ = ["MAX_SWEEP", "PostgresAuthStorage", "PostgresReplayCache"]

#: Expired rows one clean-up deletes at most. A clean-up runs at most every ``sweep_every`` seconds per worker; one
#: that found a full batch lets the next write sweep again at once, so the clean-up keeps pace with any write rate
#: (:class:`~mcpkit.stores.postgres.swept.SweptTable`).
MAX_SWEEP = 500

_ALIVE = "(expires_at IS NULL OR expires_at > clock_timestamp())"


def _uncount(table: str, kind: str) -> str:
    """The part of a ``WITH gone AS (DELETE ... RETURNING stamp, ...)`` statement that takes a row without an
    expiry (stamped) off the count of its kind (the parameter ``kind``; see ``PostgresAuthStorage._keep``)."""
    return (
        f", uncounted AS (UPDATE {table} SET size = size - 1 WHERE kind = 'count' AND key = {kind} AND EXISTS "
        "(SELECT 1 FROM gone WHERE stamp IS NOT NULL))"
    )


def _at(param: str) -> str:
    """The SQL of the moment ``param`` seconds from now on the database's clock (NULL when ``param`` is NULL)."""
    return f"clock_timestamp() + make_interval(secs => {param}::float8)"


def _ddl(table: str, index: str) -> list[str]:
    # kind: what the row is (client, code, refresh, spent, revoked, pending, upstream, lease, revocation, jti);
    # owner: a lease's owner, a refresh token's DPoP key thumbprint; stamp: the order a bounded kind is trimmed in
    # (last use, or issue), or a revocation record's lease; size: a self-registered client's bytes.
    return [
        f"CREATE TABLE IF NOT EXISTS {table} (kind text NOT NULL, key text NOT NULL, value bytea NOT NULL, owner "
        "text, size integer NOT NULL DEFAULT 0, stamp timestamptz, expires_at timestamptz, PRIMARY KEY (kind, key))",
        f"CREATE INDEX IF NOT EXISTS {index}_s ON {table} (kind, stamp, key) WHERE stamp IS NOT NULL",
        f"CREATE INDEX IF NOT EXISTS {index}_x ON {table} (expires_at) WHERE expires_at IS NOT NULL",
    ]


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "replace")).hexdigest()


def _left(expires_at: float | None, now: float | None = None) -> float | None:
    """Seconds from ``now`` (this replica's clock, default its time) to ``expires_at``; None for no expiry."""
    return None if expires_at is None else expires_at - (time.time() if now is None else now)


class _PostgresHolder(SweptTable):
    """The table ``<prefix>oauth``, made on first use, on a connection given or made from a URL, and its sweep."""

    swept_name: ClassVar[str] = "oauth"
    swept_keys: ClassVar[str] = "kind, key"
    swept_most: ClassVar[int] = MAX_SWEEP
    swept_what: ClassVar[str] = "OAuth storage"

    def __init__(self, postgres: str | PostgresConnection, prefix: str, timeout: float, sweep_every: float) -> None:
        super().__init__(postgres, prefix=prefix, timeout=timeout, sweep_every=sweep_every)
        self._layout = _ddl(self.table, self.conn.prefix + "oauth")

    def _connection(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self._db()

    @contextlib.asynccontextmanager
    async def _db(self, *, lock: str | None = None) -> AsyncIterator[Any]:
        """A pooled connection (the table made on first use); with ``lock``, inside a transaction holding the
        advisory lock of that kind (its count and trim are then one step for every replica)."""
        async with self.conn.acquire(self.swept_what) as db:
            await self.conn.ensure(db, "oauth", self._layout)
            if lock is None:
                yield db
                return
            async with db.transaction():
                await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"{self.table} {lock}")
                yield db


class PostgresAuthStorage(_PostgresHolder):
    """The authorization server's state, and an OAuth proxy's, in PostgreSQL (the table ``<prefix>oauth``), shared
    by every replica: the same contract as :class:`~mcpkit.auth.redis_storage.RedisAuthStorage`.

    Codes, refresh tokens, the replay ledger, pending logins, upstream tokens and revocation records expire with
    their lifetimes (never read past it; deleted by the sweep). At most ``max_dynamic_clients`` self-registered
    clients, together at most ``max_dynamic_client_bytes`` of JSON, are kept (beyond either the least recently used
    goes); pre-registered clients are never evicted. Refresh tokens without an expiry
    (``AuthorizationServer(refresh_token_ttl=None)``), and the ledger entries that then have none either, are kept
    up to ``max_refresh_tokens`` of each kind, the least recently written going first.

    Args:
        postgres: a URL or a shared :class:`~mcpkit.stores.postgres.PostgresConnection`.
        prefix, timeout: for a URL (see :class:`~mcpkit.stores.postgres.PostgresConnection`).
        sweep_every: seconds between two clean-ups of expired rows by this worker (see :data:`MAX_SWEEP`).
    """

    def __init__(
        self,
        postgres: str | PostgresConnection,
        *,
        prefix: str = "mcpkit_",
        timeout: float = DEFAULT_TIMEOUT,
        max_dynamic_clients: int = 10_000,
        max_dynamic_client_bytes: int = 16 * 1024 * 1024,
        max_refresh_tokens: int = 100_000,
        sweep_every: float = 60.0,
    ) -> None:
        check_shared_bounds(max_dynamic_clients, max_dynamic_client_bytes, max_refresh_tokens)
        super().__init__(postgres, prefix, timeout, sweep_every)
        self.max_dynamic_clients = max_dynamic_clients
        self.max_dynamic_client_bytes = max_dynamic_client_bytes
        self.max_refresh_tokens = max_refresh_tokens

    # ------------------------------------------------------------------ rows
    async def _put(
        self,
        db: Any,
        kind: str,
        key: str,
        value: bytes,
        expires_in: float | None,
        *,
        owner: str | None = None,
        stamped: bool = False,
        size: int = 0,
        over_stamped: bool = True,
    ) -> bool:
        """Keep (or replace) a row expiring ``expires_in`` seconds from now (None: never); ``stamped``: its stamp
        is now (the order its kind is trimmed in). Without ``over_stamped``, a stamped row of the key is left as it
        is (False: nothing kept)."""
        stamp = "clock_timestamp()" if stamped else "NULL"
        kept = await db.fetchval(
            f"INSERT INTO {self.table} AS t (kind, key, value, owner, size, stamp, expires_at) VALUES ($1, $2, $3, $4, "
            f"$5, {stamp}, {_at('$6')}) ON CONFLICT (kind, key) DO UPDATE SET value = EXCLUDED.value, owner = "
            "EXCLUDED.owner, size = EXCLUDED.size, stamp = EXCLUDED.stamp, expires_at = EXCLUDED.expires_at"
            f"{'' if over_stamped else ' WHERE t.stamp IS NULL'} RETURNING 1",
            kind,
            key,
            value,
            owner,
            size,
            expires_in,
        )
        return kept is not None

    async def _trim(self, db: Any, kind: str, most: int) -> None:
        """Keep the ``most`` rows of ``kind`` stamped last (the rows without a stamp are not counted)."""
        await db.execute(
            f"DELETE FROM {self.table} WHERE kind = $1 AND key IN (SELECT key FROM {self.table} WHERE kind = $1 AND "
            "stamp IS NOT NULL ORDER BY stamp DESC, key DESC OFFSET $2)",
            kind,
            most,
        )

    async def _keep(
        self, kind: str, key: str, value: bytes, expires_at: float | None, owner: str | None = None
    ) -> None:
        """A row that expires at ``expires_at``. Without an expiry it is stamped and counted (the row ``count`` of
        its kind, kept in the same transaction as every change of such a row), and past ``max_refresh_tokens`` the
        oldest go: an index scan of the few rows that go, never a count of the 100,000 kept. A row with an expiry
        never overwrites a counted one: that one is deleted first, off the count in the same statement."""
        if expires_at is not None:
            async with self._db() as db:
                if not await self._put(db, kind, key, value, _left(expires_at), owner=owner, over_stamped=False):
                    await db.execute(
                        f"WITH gone AS (DELETE FROM {self.table} WHERE kind = $1 AND key = $2 AND stamp IS NOT NULL "
                        f"RETURNING stamp) {_uncount(self.table, '$1')} SELECT 1",
                        kind,
                        key,
                    )
                    # (kept unless the key was saved without an expiry again meanwhile: that save is then the later)
                    await self._put(db, kind, key, value, _left(expires_at), owner=owner, over_stamped=False)
            await self._sweep()
            return
        async with self._db(lock=kind) as db:
            replaced = await db.fetchval(
                f"DELETE FROM {self.table} WHERE kind = $1 AND key = $2 RETURNING stamp IS NOT NULL", kind, key
            )
            await self._put(db, kind, key, value, None, owner=owner, stamped=True)
            kept = await self._count(db, kind, 0 if replaced else 1)
            if kept > self.max_refresh_tokens:
                gone = await db.execute(
                    f"DELETE FROM {self.table} WHERE kind = $1 AND key IN (SELECT key FROM {self.table} WHERE kind = "
                    "$1 AND stamp IS NOT NULL ORDER BY stamp, key LIMIT $2)",
                    kind,
                    kept - self.max_refresh_tokens,
                )
                await self._count(db, kind, -int(gone.rsplit(" ", 1)[-1]))

    async def _count(self, db: Any, kind: str, change: int) -> int:
        """Add ``change`` to the count of ``kind``'s rows without an expiry; the count now."""
        return int(
            await db.fetchval(
                f"INSERT INTO {self.table} AS t (kind, key, value, size) VALUES ('count', $1, '', $2) ON CONFLICT "
                "(kind, key) DO UPDATE SET size = t.size + EXCLUDED.size RETURNING size",
                kind,
                change,
            )
        )

    async def _read(self, kind: str, key: str) -> bytes | None:
        async with self._db() as db:
            raw = await db.fetchval(
                f"SELECT value FROM {self.table} WHERE kind = $1 AND key = $2 AND {_ALIVE}", kind, key
            )
        return bytes(raw) if raw is not None else None

    async def _take(self, kind: str, key: str) -> bytes | None:
        """Delete the row and return its value (None when none, or it expired): once across every replica."""
        async with self._db() as db:
            row = await db.fetchrow(
                f"WITH gone AS (DELETE FROM {self.table} WHERE kind = $1 AND key = $2 RETURNING value, {_ALIVE} AS "
                f"alive, stamp) {_uncount(self.table, '$1')} SELECT value, alive FROM gone",
                kind,
                key,
            )
        return bytes(row["value"]) if row is not None and row["alive"] else None

    async def _drop(self, kind: str, key: str) -> None:
        async with self._db() as db:
            await db.execute(f"DELETE FROM {self.table} WHERE kind = $1 AND key = $2", kind, key)

    # ------------------------------------------------------------------ clients
    async def get_client(self, client_id: str) -> ClientRecord | None:
        raw = await self._read("client", client_id)
        return ClientRecord.from_dict(orjson.loads(raw)) if raw is not None else None

    async def client_used(self, client_id: str) -> None:
        """A self-registered client just used is stamped now: the last to be evicted (a pre-registered one has no
        stamp and gets none)."""
        async with self._db() as db:
            await db.execute(
                f"UPDATE {self.table} SET stamp = clock_timestamp() WHERE kind = 'client' AND key = $1 AND stamp IS "
                "NOT NULL",
                client_id,
            )

    async def save_client(self, client: ClientRecord) -> None:
        record = orjson.dumps(asdict(client.stored()))
        if not client.dynamic:
            async with self._db() as db:
                await self._put(db, "client", client.client_id, record, None)
            return
        async with self._db(lock="client") as db:
            await self._put(db, "client", client.client_id, record, None, stamped=True, size=len(record))
            # the self-registered ones used last are kept while both bounds hold; never the one just saved
            await db.execute(
                f"DELETE FROM {self.table} WHERE kind = 'client' AND key IN (SELECT key FROM (SELECT key, row_number() "
                f"OVER w AS n, sum(size) OVER w AS b FROM {self.table} WHERE kind = 'client' AND stamp IS NOT NULL AND "
                "key <> $1 WINDOW w AS (ORDER BY stamp DESC, key DESC)) AS r WHERE n >= $2 OR b > $3)",
                client.client_id,
                self.max_dynamic_clients,
                self.max_dynamic_client_bytes - len(record),
            )

    # ------------------------------------------------------------------ codes and refresh tokens
    async def save_code(self, code: str, data: CodeGrant) -> None:
        await self._keep("code", _digest(code), orjson.dumps(asdict(data)), data.expires_at)

    async def pop_code(self, code: str) -> CodeGrant | None:
        raw = await self._take("code", _digest(code))
        return CodeGrant(**orjson.loads(raw)) if raw is not None else None

    async def save_refresh(self, token: str, data: RefreshGrant) -> None:
        await self._keep("refresh", _digest(token), orjson.dumps(asdict(data)), data.expires_at, data.jkt)

    async def pop_refresh(self, token: str) -> RefreshGrant | None:
        raw = await self._take("refresh", _digest(token))
        return RefreshGrant(**orjson.loads(raw)) if raw is not None else None

    async def peek_refresh(self, token: str) -> RefreshGrant | None:
        raw = await self._read("refresh", _digest(token))
        return RefreshGrant(**orjson.loads(raw)) if raw is not None else None

    async def take_refresh(self, token: str, jkt: str | None) -> RefreshGrant | None:
        """Take the refresh token unless it is bound to another DPoP key (then it is returned and left in place), in
        one statement: a refresh with the wrong key never takes the token away from a concurrent one with the right
        key, and of two takes with the right key exactly one gets it."""
        async with self._db() as db:
            row = await db.fetchrow(
                f"WITH gone AS (DELETE FROM {self.table} WHERE kind = $4 AND key = $1 AND (owner IS NULL OR owner = "
                f"$2) RETURNING value, {_ALIVE} AS alive, stamp) {_uncount(self.table, '$4')} SELECT value, alive "
                f"FROM gone UNION ALL SELECT value, true FROM {self.table} WHERE kind = $4 AND key = $1 AND owner <> "
                f"$3 AND {_ALIVE} AND NOT EXISTS (SELECT 1 FROM gone)",
                _digest(token),
                jkt,
                jkt or "",
                "refresh",
            )
        return RefreshGrant(**orjson.loads(row["value"])) if row is not None and row["alive"] else None

    # ------------------------------------------------------------------ the replay ledger (see AuthStorage)
    async def mark_used(self, key: str, family: str, expires_at: float | None) -> None:
        await self._keep("spent", key, family.encode(), expires_at)

    async def used(self, key: str) -> str | None:
        raw = await self._read("spent", key)
        return raw.decode() if raw is not None else None

    async def revoke(self, family: str, expires_at: float | None) -> None:
        await self._keep("revoked", family, b"1", expires_at)

    async def revoked(self, family: str) -> bool:
        return await self._read("revoked", family) is not None

    # ------------------------------------------------------------------ an OAuth proxy's state (UpstreamStateStorage)
    async def put_pending(self, key: str, sealed: bytes, expires_at: float, now: float, max_pending: int) -> bool:
        async with self._db(lock="pending") as db:
            await db.execute(f"DELETE FROM {self.table} WHERE kind = 'pending' AND NOT {_ALIVE}")
            others = await db.fetchval(
                f"SELECT count(*) FROM {self.table} WHERE kind = 'pending' AND key <> $1", key
            )  # (at most max_pending rows: past it none is added)
            here = await db.fetchval(f"SELECT count(*) FROM {self.table} WHERE kind = 'pending' AND key = $1", key)
            if not here and others >= max_pending:
                return False
            await self._put(db, "pending", key, sealed, _left(expires_at, now))
        return True

    async def peek_pending(self, key: str, now: float) -> bytes | None:
        return await self._read("pending", key)

    async def take_pending(self, key: str, now: float) -> bytes | None:
        return await self._take("pending", key)

    async def put_upstream(self, key: str, sealed: bytes, expires_at: float, now: float, max_tokens: int) -> None:
        async with self._db(lock="upstream") as db:
            await self._put(db, "upstream", key, sealed, _left(expires_at, now), stamped=True)
            await db.execute(f"DELETE FROM {self.table} WHERE kind = 'upstream' AND NOT {_ALIVE}")
            await self._trim(db, "upstream", max_tokens)

    async def get_upstream(self, key: str, now: float) -> bytes | None:
        """A user's upstream tokens, stamped now (their most recent use) in the same statement."""
        async with self._db() as db:
            raw = await db.fetchval(
                f"UPDATE {self.table} SET stamp = clock_timestamp() WHERE kind = 'upstream' AND key = $1 AND {_ALIVE} "
                "RETURNING value",
                key,
            )
        return bytes(raw) if raw is not None else None

    async def drop_upstream(self, key: str) -> None:
        await self._drop("upstream", key)

    # ------------------------------------------------------------------ refresh leases (RefreshLeaseStorage)
    async def acquire_lease(self, key: str, owner: str, ttl: float) -> bool:
        """One upsert: taken when there is no lease, when it ended (on the database's clock), or when ``owner``
        holds it already."""
        async with self._db() as db:
            got = await db.fetchval(
                f"INSERT INTO {self.table} AS t (kind, key, value, owner, expires_at) VALUES ('lease', $1, '', $2, "
                f"{_at('$3')}) ON CONFLICT (kind, key) DO UPDATE SET owner = EXCLUDED.owner, expires_at = "
                "EXCLUDED.expires_at WHERE t.expires_at <= clock_timestamp() OR t.owner = EXCLUDED.owner RETURNING 1",
                key,
                owner,
                max(ttl, 0.001),
            )
        return got is not None

    async def release_lease(self, key: str, owner: str) -> None:
        async with self._db() as db:
            await db.execute(f"DELETE FROM {self.table} WHERE kind = 'lease' AND key = $1 AND owner = $2", key, owner)

    # ------------------------------------------------------------------ revocation records (RevocationRecordStorage)
    async def put_revocation(self, key: str, sealed: bytes, until: float, expires_at: float, max_records: int) -> bool:
        async with self._db(lock="revocation") as db:
            counts = await db.fetchrow(
                f"SELECT count(*) FILTER (WHERE key <> $1) AS others, count(*) FILTER (WHERE key = $1) AS here FROM "
                f"{self.table} WHERE kind = 'revocation' AND {_ALIVE}",
                key,
            )
            if not counts["here"] and counts["others"] >= max_records:
                return False
            await self._put(db, "revocation", key, sealed, _left(expires_at))
            await db.execute(
                f"UPDATE {self.table} SET stamp = {_at('$2')} WHERE kind = 'revocation' AND key = $1", key, _left(until)
            )
        await self._sweep()
        return True

    async def renew_revocations(self, keys: list[str], until: float) -> None:
        if keys:
            async with self._db() as db:
                await db.execute(
                    f"UPDATE {self.table} SET stamp = {_at('$2')} WHERE kind = 'revocation' AND key = ANY($1::text[])",
                    keys,
                    _left(until),
                )

    async def claim_revocations(self, now: float, until: float, limit: int) -> list[tuple[str, bytes]]:
        """The records whose lease ended (on the database's clock), leased anew in one statement: rows another
        replica is claiming are skipped (``SKIP LOCKED``), and one it claimed meanwhile is no longer due."""
        async with self._db() as db:
            rows = await db.fetch(
                f"UPDATE {self.table} SET stamp = {_at('$3')} WHERE kind = 'revocation' AND key IN (SELECT key FROM "
                f"{self.table} WHERE kind = 'revocation' AND stamp < {_at('$1')} AND {_ALIVE} ORDER BY stamp LIMIT $2 "
                "FOR UPDATE SKIP LOCKED) RETURNING key, value",
                _left(now),
                limit,
                _left(until),
            )
        return [(row["key"], bytes(row["value"])) for row in rows]

    async def drop_revocation(self, key: str) -> None:
        await self._drop("revocation", key)


class PostgresReplayCache(_PostgresHolder):
    """A :class:`~mcpkit.auth.replay.ReplayCache` in PostgreSQL (rows of ``<prefix>oauth``): one upsert that
    succeeds only for a key not kept or kept past its expiry, so the first worker to see a key wins; each key is
    kept until the JWT's expiry on the database's clock (a JWT past it there is refused) and swept after. Its size
    is bounded by time (accepted JWTs per second x the acceptance window), as
    :class:`~mcpkit.auth.redis_storage.RedisReplayCache`'s.

    Args:
        postgres: a URL or a shared :class:`~mcpkit.stores.postgres.PostgresConnection`.
        prefix, timeout: for a URL (see :class:`~mcpkit.stores.postgres.PostgresConnection`).
        sweep_every: seconds between two clean-ups of expired rows by this worker (see :data:`MAX_SWEEP`).
    """

    def __init__(
        self,
        postgres: str | PostgresConnection,
        *,
        prefix: str = "mcpkit_",
        timeout: float = DEFAULT_TIMEOUT,
        sweep_every: float = 60.0,
    ) -> None:
        super().__init__(postgres, prefix, timeout, sweep_every)

    async def first_use(self, key: str, issued_at: float, expires_at: float) -> bool:
        """One upsert, judged on the database's clock: a JWT past ``expires_at`` there is refused (its key, were it
        used before, is forgotten: a replica whose clock is behind, still accepting it, would take its replay for a
        first use), else the key is kept until ``expires_at`` (the JWT's own time: no replica's clock decides)."""
        async with self._db() as db:
            first = await db.fetchval(
                f"INSERT INTO {self.table} AS t (kind, key, value, expires_at) SELECT 'jti', $1, '', to_timestamp($2) "
                "WHERE to_timestamp($2) > clock_timestamp() ON CONFLICT (kind, key) DO UPDATE SET expires_at = "
                "EXCLUDED.expires_at WHERE t.expires_at <= clock_timestamp() RETURNING 1",
                key,
                expires_at,
            )
        await self._sweep()
        return first is not None
