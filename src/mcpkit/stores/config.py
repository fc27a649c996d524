"""One configuration for several workers, the same whichever way they are run: ``mcpkit run`` flags, environment
variables (an ASGI app under uvicorn, gunicorn or Kubernetes reads them in ``create_app``), or code.

=================  =============================  ============================  ===================================
setting            environment variable           ``mcpkit run``                default
=================  =============================  ============================  ===================================
``redis_url``      ``MCPKIT_REDIS_URL``           ``--redis URL``               none: in-memory stores (one worker)
``redis_cluster``  ``MCPKIT_REDIS_CLUSTER=1``     ``--redis-cluster``           off (the URL names one Redis)
``redis_prefix``   ``MCPKIT_REDIS_PREFIX``        ``--redis-prefix``            ``mcpkit:``
``redis_timeout``  ``MCPKIT_REDIS_TIMEOUT``       ``--redis-timeout``           1 s (connect, and each answer)
``postgres_url``   ``MCPKIT_POSTGRES_URL``        ``--postgres URL``            none (not with a Redis URL)
``postgres_prefix`` ``MCPKIT_POSTGRES_PREFIX``    ``--postgres-prefix``         ``mcpkit_`` (table names)
``postgres_timeout`` ``MCPKIT_POSTGRES_TIMEOUT``  ``--postgres-timeout``        5 s (connect, pool, statement)
``postgres_pool_size`` ``MCPKIT_POSTGRES_POOL_SIZE`` (environment only)         10 connections per worker (<= 100)
``state_keys``     ``MCPKIT_STATE_KEYS`` (comma-  ``--state-keys-file PATH``    a random key per process
                   separated) or                  (one key a line)
                   ``MCPKIT_STATE_KEYS_FILE``
=================  =============================  ============================  ===================================

With a Redis URL, ``create_app`` builds one :class:`~mcpkit.stores.redis.RedisConnection` and on it the session store,
the event store and the fan-out (:class:`~mcpkit.stores.redis.RedisFanout`), for each of them not given explicitly, and
the task store (:class:`~mcpkit.stores.redis.RedisTaskStore`), which the server uses unless ``enable_tasks`` was given a
store of its own; the state keys (a key ring: the first signs, every one verifies) seal ``requestState`` and list
cursors on every worker alike, so they are required with a Redis URL (``mcpkit run --workers N`` on one host generates
one for its workers). Without a URL nothing changes: in-memory stores, the zero-configuration default.

With a PostgreSQL URL instead (``postgresql://user:password@host:port/db``), ``create_app`` builds one
:class:`~mcpkit.stores.postgres.PostgresConnection` (a bounded pool) and on it the session store, the event store and
the fan-out (:class:`~mcpkit.stores.postgres.PostgresFanout`), and the task store
(:class:`~mcpkit.stores.postgres.PostgresTaskStore`), with the same requirement of shared state keys. A Redis URL and
a PostgreSQL URL together are refused: one deployment keeps its shared state in one place.

Keys are text of at least 32 characters (their UTF-8 bytes are the key), e.g. ``python -c "import secrets;
print(secrets.token_urlsafe(32))"``. Rotation: add the new key last everywhere (it verifies), then move it first (it
signs), then drop the old one once what it sealed has expired (``requestState``: 10 minutes; a list cursor sealed
with a dropped key is refused and the client lists again from the start).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..hosting import MAX_KEYS, check_key_ring
from .base import without_password

if TYPE_CHECKING:
    from .postgres import (
        PostgresConnection,
        PostgresEventStore,
        PostgresFanout,
        PostgresSessionStore,
        PostgresTaskStore,
    )
    from .redis import RedisConnection, RedisEventStore, RedisFanout, RedisSessionStore, RedisTaskStore

__all__ = ["ENV", "MIN_KEY_CHARS", "ScaleConfig", "SharedStores", "generate_key", "parse_keys", "read_keys_file"]

#: The environment variable of each setting.
ENV = {
    "redis_url": "MCPKIT_REDIS_URL",
    "redis_cluster": "MCPKIT_REDIS_CLUSTER",
    "redis_prefix": "MCPKIT_REDIS_PREFIX",
    "redis_timeout": "MCPKIT_REDIS_TIMEOUT",
    "postgres_url": "MCPKIT_POSTGRES_URL",
    "postgres_prefix": "MCPKIT_POSTGRES_PREFIX",
    "postgres_timeout": "MCPKIT_POSTGRES_TIMEOUT",
    "postgres_pool_size": "MCPKIT_POSTGRES_POOL_SIZE",
    "state_keys": "MCPKIT_STATE_KEYS",
    "state_keys_file": "MCPKIT_STATE_KEYS_FILE",
}
#: The shortest key accepted, in characters.
MIN_KEY_CHARS = 32
_TRUE = frozenset(("1", "true", "yes", "on"))
_FALSE = frozenset(("", "0", "false", "no", "off"))


def generate_key() -> str:
    """A fresh random key (43 URL-safe characters, 256 bits)."""
    return secrets.token_urlsafe(32)


def parse_keys(text: str, *, source: str = ENV["state_keys"]) -> tuple[bytes, ...]:
    """The key ring in ``text``: keys separated by commas or line breaks, blank entries and ``#`` comment lines
    ignored; each at least :data:`MIN_KEY_CHARS` characters."""
    keys: list[bytes] = []
    for line in text.splitlines():
        if line.strip().startswith("#"):
            continue
        for part in line.split(","):
            key = part.strip()
            if not key:
                continue
            if len(key) < MIN_KEY_CHARS:
                raise ValueError(f"{source}: a key has {len(key)} characters, at least {MIN_KEY_CHARS} are needed")
            keys.append(key.encode())
    if len(keys) > MAX_KEYS:
        raise ValueError(f"{source}: {len(keys)} keys; a key ring holds at most {MAX_KEYS}")
    return tuple(keys)


def _flag(value: str, name: str) -> bool:
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"{name}={value!r}: expected 1 or 0 (true/false, yes/no, on/off)")


def _check_redis_url(url: str) -> None:
    """Refuse, where it is given, a URL that Redis clients cannot use (rather than in every worker at start, or,
    for a database that is not a number, by using database 0 without a word)."""
    shown = without_password(url)
    if "://" not in url:
        raise ValueError(f"not a Redis URL: {shown!r} (expected redis://host:port/db)")
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"not a Redis URL: {shown!r} (it must start with redis://, rediss:// or unix://)")
    if parts.scheme == "unix":
        return
    try:
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        raise ValueError(f"not a Redis URL: {shown!r} (the port is not a number)") from None
    db = parts.path.strip("/")
    if db and not (db.isascii() and db.isdigit()):
        raise ValueError(f"not a Redis URL: {shown!r} (the path is the database number: /0, /1, ...)")


@dataclass(frozen=True)
class ScaleConfig:
    """What the workers of one deployment share (see the module docstring)."""

    redis_url: str | None = None
    redis_cluster: bool = False
    redis_prefix: str = "mcpkit:"
    redis_timeout: float = 1.0
    state_keys: tuple[bytes, ...] = field(default=(), repr=False)
    postgres_url: str | None = None
    postgres_prefix: str = "mcpkit_"
    postgres_timeout: float = 5.0
    postgres_pool_size: int = 10

    def __post_init__(self) -> None:
        if self.redis_timeout <= 0:
            raise ValueError("redis_timeout must be positive")
        if self.postgres_timeout <= 0:
            raise ValueError("postgres_timeout must be positive")
        if self.redis_url is not None:
            _check_redis_url(self.redis_url)
        if self.postgres_url is not None:
            from .postgres.connection import MAX_POOL_SIZE, check_url

            check_url(self.postgres_url)
            if self.redis_url is not None:
                raise ValueError(
                    f"both a Redis URL ({without_password(self.redis_url)}) and a PostgreSQL URL "
                    f"({without_password(self.postgres_url)}) are configured: the workers of one deployment share "
                    "their state in one place; give one of them"
                )
            if not 1 <= self.postgres_pool_size <= MAX_POOL_SIZE:
                raise ValueError(f"postgres_pool_size must be between 1 and {MAX_POOL_SIZE}")
        object.__setattr__(self, "state_keys", tuple(check_key_ring(self.state_keys, source="state_keys")))

    @property
    def shared(self) -> bool:
        """True when the workers share state (through Redis or PostgreSQL)."""
        return bool(self.redis_url or self.postgres_url)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ScaleConfig:
        """The configuration the environment gives (``os.environ`` by default); missing variables keep the
        defaults. Raises ``ValueError`` naming the variable that is wrong."""
        env = os.environ if environ is None else environ
        options: dict[str, Any] = {}
        url = env.get(ENV["redis_url"], "").strip()
        if url:
            options["redis_url"] = url
        if ENV["redis_cluster"] in env:
            options["redis_cluster"] = _flag(env[ENV["redis_cluster"]], ENV["redis_cluster"])
        if env.get(ENV["redis_prefix"]):
            options["redis_prefix"] = env[ENV["redis_prefix"]]
        if env.get(ENV["redis_timeout"]):
            try:
                options["redis_timeout"] = float(env[ENV["redis_timeout"]])
            except ValueError:
                raise ValueError(f"{ENV['redis_timeout']}: not a number of seconds") from None
        url = env.get(ENV["postgres_url"], "").strip()
        if url:
            options["postgres_url"] = url
        if env.get(ENV["postgres_prefix"]):
            options["postgres_prefix"] = env[ENV["postgres_prefix"]]
        for name, kind in (("postgres_timeout", float), ("postgres_pool_size", int)):
            if env.get(ENV[name]):
                try:
                    options[name] = kind(env[ENV[name]])
                except ValueError:
                    what = "a number of seconds" if kind is float else "a whole number"
                    raise ValueError(f"{ENV[name]}: not {what}") from None
        keys = parse_keys(env.get(ENV["state_keys"], ""))
        path = env.get(ENV["state_keys_file"], "").strip()
        if path:
            keys += read_keys_file(path)
        if keys:
            options["state_keys"] = tuple(dict.fromkeys(keys))  # (each once, in order)
        return cls(**options)

    def to_env(self) -> dict[str, str]:
        """The environment variables that give this configuration (what ``mcpkit run --workers`` passes to its
        worker processes)."""
        env = {ENV["redis_prefix"]: self.redis_prefix, ENV["redis_timeout"]: repr(self.redis_timeout)}
        if self.redis_url:
            env[ENV["redis_url"]] = self.redis_url
        env[ENV["redis_cluster"]] = "1" if self.redis_cluster else "0"
        if self.postgres_url:
            env[ENV["postgres_url"]] = self.postgres_url
        env[ENV["postgres_prefix"]] = self.postgres_prefix
        env[ENV["postgres_timeout"]] = repr(self.postgres_timeout)
        env[ENV["postgres_pool_size"]] = str(self.postgres_pool_size)
        if self.state_keys:
            env[ENV["state_keys"]] = ",".join(k.decode() for k in self.state_keys)
        return env

    def with_keys(self, keys: Sequence[bytes]) -> ScaleConfig:
        """This configuration with another key ring."""
        return dataclasses.replace(self, state_keys=tuple(keys))

    def connect(self) -> RedisConnection:
        """A connection to the configured Redis (needs ``mcpkit[redis]``)."""
        if not self.redis_url:
            raise ValueError("no Redis URL is configured")
        from .redis import RedisConnection

        return RedisConnection(
            self.redis_url, cluster=self.redis_cluster, prefix=self.redis_prefix, timeout=self.redis_timeout
        )

    def connect_postgres(self) -> PostgresConnection:
        """A connection (a bounded pool) to the configured PostgreSQL (needs ``mcpkit[postgres]``)."""
        if not self.postgres_url:
            raise ValueError("no PostgreSQL URL is configured")
        from .postgres import PostgresConnection

        return PostgresConnection(
            self.postgres_url,
            prefix=self.postgres_prefix,
            timeout=self.postgres_timeout,
            pool_size=self.postgres_pool_size,
        )

    def build(self, *, session_store: Any = None, event_store: Any = None, fanout: Any = None) -> SharedStores | None:
        """The shared pieces on one connection, for those not given, and the task store; None without a URL."""
        if self.postgres_url:
            from .postgres import PostgresEventStore, PostgresFanout, PostgresSessionStore, PostgresTaskStore

            pg = self.connect_postgres()
            return SharedStores(
                pg,
                session_store if session_store is not None else PostgresSessionStore(pg),
                event_store if event_store is not None else PostgresEventStore(pg),
                fanout if fanout is not None else PostgresFanout(pg),
                PostgresTaskStore(pg),
            )
        if not self.redis_url:
            return None
        from .redis import RedisEventStore, RedisFanout, RedisSessionStore, RedisTaskStore

        conn = self.connect()
        return SharedStores(
            conn,
            session_store if session_store is not None else RedisSessionStore(conn),
            event_store if event_store is not None else RedisEventStore(conn),
            fanout if fanout is not None else RedisFanout(conn),
            RedisTaskStore(conn),
        )


def read_keys_file(path: str | os.PathLike[str]) -> tuple[bytes, ...]:
    """The key ring in a file (one key a line, ``#`` comments; e.g. a mounted Kubernetes secret)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{ENV['state_keys_file']}: cannot read {path}: {exc.strerror or exc}") from None
    keys = parse_keys(text, source=str(path))
    if not keys:
        raise ValueError(f"{path}: no key in the file")
    return keys


@dataclass
class SharedStores:
    """The shared pieces ``create_app`` built from a :class:`ScaleConfig`, on one connection (Redis or
    PostgreSQL)."""

    connection: RedisConnection | PostgresConnection
    session_store: RedisSessionStore | PostgresSessionStore
    event_store: RedisEventStore | PostgresEventStore
    fanout: RedisFanout | PostgresFanout
    task_store: RedisTaskStore | PostgresTaskStore

    async def aclose(self) -> None:
        """Stop the task store's change reader and close the connection (the fan-out is closed by the app's
        lifespan first)."""
        try:
            await self.task_store.aclose()
        finally:
            await self.connection.aclose()
