"""How every PostgreSQL store reaches PostgreSQL: one bounded pool (asyncpg), the table names, the schema made on
first use, and the breaker that makes an unreachable or stalled database fail fast.

A :class:`PostgresConnection` is shared by the stores of one worker (``create_app`` builds one from the
configuration and hands it to each store; a store built from a URL makes its own). What it guarantees:

* **Bounded pool, bounded waits.** At most ``pool_size`` connections per worker; connecting, waiting for a free
  connection and each statement are bounded by ``timeout`` seconds. A statement that fails for want of the
  database (refused, reset, timed out, too many connections) raises
  :class:`~mcpkit.stores.base.StoreUnavailable` (the HTTP endpoint answers 503), and for ``breaker`` seconds
  afterwards every guarded statement raises it at once without waiting again.
* **Tables made on first use.** ``CREATE TABLE IF NOT EXISTS`` of every table (under a transaction-level advisory
  lock, so workers starting together do not race), once per connection. The layout is versioned by
  :data:`SCHEMA_VERSION`, recorded in ``<prefix>meta``: a later mcpkit that changes a table raises the version and
  uses new table names, so nothing is migrated in place (a database whose recorded version is newer than this
  mcpkit's is refused with a clear error rather than misread).
* **Names.** Every table is ``<prefix><name>`` (default prefix ``mcpkit_``: several applications share one database
  with different prefixes), in ``schema`` when one is given (else the connection's ``search_path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ..base import Breaker, StoreUnavailable, without_password

__all__ = [
    "DEFAULT_POOL_SIZE",
    "DEFAULT_TIMEOUT",
    "MAX_POOL_SIZE",
    "SCHEMA_VERSION",
    "PostgresConnection",
    "StoreUnavailable",
    "delete_expired",
    "postgres_for",
    "without_password",
]

#: Default seconds to connect, to get a pooled connection and to run one statement.
DEFAULT_TIMEOUT = 5.0
#: Default connections one worker's pool holds at most.
DEFAULT_POOL_SIZE = 10
#: The most connections a pool may be given (each is a PostgreSQL backend process).
MAX_POOL_SIZE = 100
#: The version of the table layout (see the module docstring).
SCHEMA_VERSION = 1
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}\Z")


def check_url(url: str) -> None:
    """Refuse a URL that is not a PostgreSQL URL (``postgresql://`` or ``postgres://``), showing it without its
    password."""
    scheme, sep, _ = url.partition("://")
    if not sep or scheme not in ("postgresql", "postgres"):
        raise ValueError(
            f"not a PostgreSQL URL: {without_password(url)!r} (expected postgresql://user:password@host:port/db)"
        )


def _ddl(t: dict[str, str], prefix: str) -> list[str]:
    # (an index is named without its schema: PostgreSQL makes it in its table's, and refuses a qualified name)
    i = {name: prefix + name for name in ("sessions_x", "streams_s", "streams_x", "inbox_w", "tasks_o")}
    return [
        f"CREATE TABLE IF NOT EXISTS {t['meta']} (key text PRIMARY KEY, value text NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {t['sessions']} (id text PRIMARY KEY, state bytea NOT NULL, expires_at "
        "timestamptz)",
        f"CREATE INDEX IF NOT EXISTS {i['sessions_x']} ON {t['sessions']} (expires_at) WHERE expires_at IS NOT NULL",
        f"CREATE TABLE IF NOT EXISTS {t['streams']} (stream text PRIMARY KEY, session text NOT NULL, last_seq bigint "
        "NOT NULL, written bigint NOT NULL, bytes bigint NOT NULL, request_id text, expires_at timestamptz)",
        f"CREATE INDEX IF NOT EXISTS {i['streams_s']} ON {t['streams']} (session, written)",
        f"CREATE INDEX IF NOT EXISTS {i['streams_x']} ON {t['streams']} (expires_at) WHERE expires_at IS NOT NULL",
        f"CREATE TABLE IF NOT EXISTS {t['events']} (stream text NOT NULL REFERENCES {t['streams']} (stream) ON "
        "DELETE CASCADE, seq bigint NOT NULL, data bytea NOT NULL, last boolean NOT NULL, PRIMARY KEY (stream, seq))",
        f"CREATE SEQUENCE IF NOT EXISTS {t['log_id']}",
        f"CREATE TABLE IF NOT EXISTS {t['log']} (id bigint PRIMARY KEY, origin text NOT NULL, kind text NOT NULL, "
        "value text NOT NULL, data bytea, late boolean NOT NULL)",
        f"CREATE SEQUENCE IF NOT EXISTS {t['worker_seq']}",
        f"CREATE TABLE IF NOT EXISTS {t['workers']} (worker integer PRIMARY KEY, alive_until timestamptz NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {t['inbox']} (id bigserial PRIMARY KEY, worker integer NOT NULL, session text "
        "NOT NULL, kind text NOT NULL, data bytea NOT NULL, owner text, expires_at timestamptz NOT NULL)",
        f"CREATE INDEX IF NOT EXISTS {i['inbox_w']} ON {t['inbox']} (worker, id)",
        f"CREATE TABLE IF NOT EXISTS {t['tasks']} (id text PRIMARY KEY, owner text, created bigint NOT NULL, record "
        "bytea NOT NULL, size integer NOT NULL, live boolean NOT NULL, kept_until bigint)",
        f"CREATE INDEX IF NOT EXISTS {i['tasks_o']} ON {t['tasks']} (owner, created, id)",
    ]


def _totals_ddl(t: dict[str, str], prefix: str) -> list[str]:
    """The running byte totals of the tasks (``'*'``: all; ``'o:<owner>'``, ``'-'``: no owner), kept by a trigger in
    the transaction of every change of a task row, then filled from the rows already there."""
    b, tasks, key = t["task_bytes"], t["tasks"], "coalesce('o:' || {row}.owner, '-')"
    old, new = key.format(row="OLD"), key.format(row="NEW")
    return [
        f"CREATE TABLE {b} (key text PRIMARY KEY, bytes bigint NOT NULL)",
        f"CREATE OR REPLACE FUNCTION {t['task_bytes_f']}() RETURNS trigger LANGUAGE plpgsql AS $body$ BEGIN "
        f"IF TG_OP <> 'INSERT' THEN UPDATE {b} SET bytes = bytes - OLD.size WHERE key IN ('*', {old}); "
        f"DELETE FROM {b} WHERE key = {old} AND bytes <= 0; END IF; "
        f"IF TG_OP <> 'DELETE' THEN INSERT INTO {b} AS x VALUES ('*', NEW.size), ({new}, NEW.size) "
        "ON CONFLICT (key) DO UPDATE SET bytes = x.bytes + EXCLUDED.bytes; END IF; RETURN NULL; END $body$",
        f"CREATE TRIGGER {prefix}task_bytes AFTER INSERT OR DELETE ON {tasks} FOR EACH ROW EXECUTE FUNCTION "
        f"{t['task_bytes_f']}()",
        f"CREATE TRIGGER {prefix}task_bytes_u AFTER UPDATE ON {tasks} FOR EACH ROW WHEN (OLD.size IS DISTINCT FROM "
        f"NEW.size OR OLD.owner IS DISTINCT FROM NEW.owner) EXECUTE FUNCTION {t['task_bytes_f']}()",
        f"INSERT INTO {b} SELECT '*', sum(size) FROM {tasks} HAVING count(*) > 0",
        f"INSERT INTO {b} SELECT {key.format(row=tasks)}, sum(size) FROM {tasks} GROUP BY owner",
    ]


def _errors() -> tuple[type[BaseException], ...]:
    import asyncpg

    return (
        OSError,
        asyncio.TimeoutError,
        asyncpg.PostgresConnectionError,
        asyncpg.InterfaceError,
        asyncpg.CannotConnectNowError,
        asyncpg.TooManyConnectionsError,
        asyncpg.QueryCanceledError,
        asyncpg.AdminShutdownError,
    )


class PostgresConnection(Breaker):
    """The pool of one worker's PostgreSQL stores, their table names and their breaker (see the module
    docstring and :class:`~mcpkit.stores.base.Breaker`: :meth:`guard`, :meth:`check`, :attr:`available`).

    Args:
        url: ``postgresql://user:password@host:port/database`` (any libpq URL asyncpg accepts).
        prefix: the start of every table name (lower-case letters, digits, ``_``; at most 40 characters).
        schema: the schema the tables live in (same characters); None: the connection's ``search_path``.
        timeout: seconds to connect, to wait for a pooled connection and to run one statement (default 5).
        pool_size: connections this worker holds at most (default 10, at most :data:`MAX_POOL_SIZE`); a fan-out,
            a task store and an event store (from its first follow) hold one more each, of their own, for
            ``LISTEN``.
        breaker: seconds during which statements fail at once after one failed for want of the database
            (default: ``timeout``).
    """

    backend: ClassVar[str] = "PostgreSQL"

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "mcpkit_",
        schema: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        pool_size: int = DEFAULT_POOL_SIZE,
        breaker: float | None = None,
    ) -> None:
        from ..._extras import require

        require("asyncpg", "mcpkit.stores.postgres")  # (one line naming the extra when asyncpg is missing)
        check_url(url)
        if not _NAME.match(prefix):
            raise ValueError(f"PostgreSQL table prefix {prefix!r}: lower-case letters, digits and _, at most 40")
        if schema is not None and not _NAME.match(schema):
            raise ValueError(f"PostgreSQL schema {schema!r}: lower-case letters, digits and _, at most 40")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if not 1 <= pool_size <= MAX_POOL_SIZE:
            raise ValueError(f"pool_size must be between 1 and {MAX_POOL_SIZE}")
        super().__init__(timeout if breaker is None else breaker, _errors())
        self.url: str = url
        self.prefix: str = prefix
        self.schema: str | None = schema
        self.timeout: float = timeout
        self.pool_size: int = pool_size
        where = f'"{schema}".' if schema else ""
        names = ["meta", "sessions", "sessions_x", "streams", "streams_s", "streams_x", "events", "log", "log_id"]
        names += ["worker_seq", "workers", "inbox", "inbox_w", "tasks", "tasks_o", "task_bytes", "task_bytes_f"]
        #: The qualified name of each table, index and sequence.
        self.tables: dict[str, str] = {name: f"{where}{prefix}{name}" for name in names}
        self._where: str = where
        self._pool: Any = None
        self._opening: asyncio.Lock | None = None
        self._sweeps: dict[str, float] = {}
        self._layouts: set[str] = set()  # the layers' own tables made by this connection (see ensure)
        self._closed = False

    @property
    def shown_url(self) -> str:
        """The URL without its password (for messages)."""
        return without_password(self.url)

    async def pool(self) -> Any:
        """The pool (an ``asyncpg.Pool``), made with the tables on first use."""
        if self._pool is not None:
            return self._pool
        if self._closed:
            raise StoreUnavailable("the PostgreSQL connection is closed")
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                import asyncpg

                pool = await asyncpg.create_pool(
                    self.url,
                    min_size=1,
                    max_size=self.pool_size,
                    timeout=self.timeout,
                    command_timeout=self.timeout,
                )
                try:
                    await self._create_tables(pool)
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
        return self._pool

    async def _create_tables(self, pool: Any) -> None:
        t = self.tables
        async with pool.acquire(timeout=self.timeout) as db, db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"{t['meta']} schema")
            for statement in _ddl(t, self.prefix):
                await db.execute(statement)
            # the running byte totals of the tasks: made with new tables, or added to tables an older mcpkit made
            if await db.fetchval("SELECT to_regclass($1)", t["task_bytes"]) is None:
                for statement in _totals_ddl(t, self.prefix):
                    await db.execute(statement)
            found = await db.fetchval(f"SELECT value FROM {t['meta']} WHERE key = 'version'")
            if found is None:
                await db.execute(f"INSERT INTO {t['meta']} VALUES ('version', $1)", str(SCHEMA_VERSION))
            elif not found.isdigit() or int(found) > SCHEMA_VERSION:
                raise RuntimeError(
                    f"the tables under prefix {self.prefix!r} have layout version {found}; this mcpkit knows "
                    f"{SCHEMA_VERSION}: upgrade mcpkit, or give this deployment another prefix"
                )

    def table(self, name: str) -> str:
        """The qualified name of a table a layer above the stores keeps here (``<schema>.<prefix><name>``)."""
        return f"{self._where}{self.prefix}{name}"

    async def ensure(self, db: Any, layout: str, statements: list[str]) -> None:
        """Make a layer's own tables on ``db`` (a connection of this pool) once per connection object: each of
        ``statements`` is idempotent (``CREATE ... IF NOT EXISTS``), run in one transaction under the advisory lock
        the store tables are made under, so workers starting together do not race. (The OAuth storage's tables are
        made this way, only where it is used.)"""
        if layout in self._layouts:
            return
        async with db.transaction():
            await db.execute("SELECT pg_advisory_xact_lock(hashtext($1))", f"{self.tables['meta']} schema")
            for statement in statements:
                await db.execute(statement)
        self._layouts.add(layout)

    @contextlib.asynccontextmanager
    async def acquire(self, what: str) -> AsyncIterator[Any]:
        """A pooled connection (an ``asyncpg.Connection``) under :meth:`guard`."""
        async with self.guard(what):
            pool = await self.pool()
            async with pool.acquire(timeout=self.timeout) as db:
                yield db

    @contextlib.asynccontextmanager
    async def transaction(self, what: str) -> AsyncIterator[Any]:
        """A pooled connection inside a transaction, under :meth:`guard`."""
        async with self.acquire(what) as db, db.transaction():
            yield db

    def sweep_due(self, name: str, every: float) -> bool:
        """True at most once every ``every`` seconds for ``name`` in this process (a store's bounded clean-up of
        expired rows runs then)."""
        now = time.monotonic()
        if now - self._sweeps.get(name, float("-inf")) < every:
            return False
        self._sweeps[name] = now
        return True

    def sweep_soon(self, name: str) -> None:
        """Let the next :meth:`sweep_due` of ``name`` be True at once (a sweep that found more than one batch to
        delete: the writes that come next keep sweeping until it has caught up)."""
        self._sweeps.pop(name, None)

    async def ping(self) -> None:
        """One round trip (raises :class:`StoreUnavailable`)."""
        async with self.acquire("ping") as db:
            await db.fetchval("SELECT 1")

    async def aclose(self) -> None:
        """Close the pool (waiting at most ``timeout`` for connections in use, then cutting them)."""
        if self._closed:
            return
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), self.timeout)
            except Exception:
                pool.terminate()


def postgres_for(
    postgres: str | PostgresConnection, *, prefix: str = "mcpkit_", timeout: float = DEFAULT_TIMEOUT
) -> tuple[PostgresConnection, bool]:
    """``(connection, owned)``: ``postgres`` itself when it is a :class:`PostgresConnection` (shared: not owned;
    its own prefix applies), else a new connection to the URL (owned: the store closes it)."""
    if isinstance(postgres, PostgresConnection):
        return postgres, False
    return PostgresConnection(postgres, prefix=prefix, timeout=timeout), True


async def delete_expired(db: Any, table: str, columns: str, limit: int) -> int:
    """Delete at most ``limit`` rows of ``table`` whose ``expires_at`` has passed on the database's clock, picked by
    their key ``columns`` (``"id"``, ``"kind, key"``); returns how many went (a store's bounded sweep)."""
    done = await db.execute(
        f"DELETE FROM {table} WHERE ({columns}) IN (SELECT {columns} FROM {table} WHERE expires_at <= "
        f"clock_timestamp() LIMIT {limit})"
    )
    return int(done.rsplit(" ", 1)[-1])
