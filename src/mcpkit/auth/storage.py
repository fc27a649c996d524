"""What the authorization server (:mod:`mcpkit.auth.server`) keeps and where: registered clients
(:class:`ClientRecord`), pending authorization requests, codes and refresh tokens, the :class:`AuthStorage`
protocol a backend implements (:class:`~mcpkit.auth.redis_storage.RedisAuthStorage` or
:class:`~mcpkit.auth.postgres_storage.PostgresAuthStorage` for several workers) and the
bounded in-memory default. Re-exported by :mod:`mcpkit.auth.server`, their public import path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

from .upstream_state import InMemoryUpstreamState

if TYPE_CHECKING:
    from .verifiers import AccessToken

__all__ = [
    "AuthStorage",
    "AuthorizationRequest",
    "ClientRecord",
    "ClientUseStorage",
    "CodeGrant",
    "InMemoryAuthStorage",
    "KeyBoundRefreshStorage",
    "LedgerRevocation",
    "RefreshGrant",
    "RevocationLedger",
]


def _secret_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def check_shared_bounds(max_dynamic_clients: int, max_dynamic_client_bytes: int, max_refresh_tokens: int) -> None:
    """Refuse bounds a shared storage (Redis, PostgreSQL) cannot work with: ``ValueError`` saying which."""
    if max_dynamic_clients < 1:
        raise ValueError("max_dynamic_clients must be at least 1")
    if max_dynamic_client_bytes < 16 * 1024:
        raise ValueError("max_dynamic_client_bytes must hold at least one 16 KiB registration")
    if max_refresh_tokens < 1:
        raise ValueError("max_refresh_tokens must be at least 1")


@dataclass
class ClientRecord:
    """A registered client. ``scope`` (space-separated) is everything it may ever be granted (None: any scope);
    ``dynamic`` marks a self-registered (RFC 7591) client; ``resource_server`` lets it introspect every token.

    A secret is stored as its SHA-256 (``client_secret_sha256``); ``client_secret`` holds it in clear only in the
    record :meth:`~mcpkit.auth.server.AuthorizationServer.register_client` returns (the one time it is shown) and in
    records an earlier version stored (replaced by the digest on their first successful use)."""

    client_id: str
    client_secret: str | None
    redirect_uris: list[str]
    token_endpoint_auth_method: str = "none"
    grant_types: list[str] = field(default_factory=lambda: ["authorization_code", "refresh_token"])
    scope: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    dynamic: bool = False
    resource_server: bool = False
    jwks: dict[str, Any] | None = None  # the public keys of a private_key_jwt client (RFC 7591 jwks)
    client_secret_sha256: str | None = None  # hex SHA-256 of the secret: what storages keep

    @property
    def has_secret(self) -> bool:
        """Whether the client authenticates with a secret (a confidential ``client_secret_*`` client)."""
        return self.client_secret is not None or self.client_secret_sha256 is not None

    def secret_matches(self, presented: str) -> bool:
        """Whether ``presented`` is this client's secret (compared in constant time, digest against digest)."""
        expected = self.client_secret_sha256
        if expected is None:
            if self.client_secret is None:
                return False
            expected = _secret_digest(self.client_secret)
        return hmac.compare_digest(expected.encode(), _secret_digest(presented).encode())

    def stored(self) -> ClientRecord:
        """This record as a storage keeps it: the secret replaced by its digest."""
        if self.client_secret is None:
            return self
        return dataclasses.replace(self, client_secret=None, client_secret_sha256=_secret_digest(self.client_secret))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ClientRecord:
        """A record from its stored JSON form; members this version does not know (a newer one wrote them) are
        ignored, so replicas of two versions can share a storage during an upgrade."""
        return cls(**{k: v for k, v in data.items() if k in _CLIENT_FIELDS})

    def size(self) -> int:
        """The bytes of its stored JSON form: what the self-registered clients' byte budget counts."""
        return len(orjson.dumps(dataclasses.asdict(self)))


_CLIENT_FIELDS = frozenset(f.name for f in dataclasses.fields(ClientRecord))


@dataclass
class AuthorizationRequest:
    """What /authorize (or a ``client_credentials`` or jwt-bearer token request: ``grant_type``, no
    ``redirect_uri``) asked; the approver decides who, if anyone, grants it (it returns the subject, or None to
    deny; for a jwt-bearer grant the subject is the assertion's ``sub`` whatever it returns). ``client`` is None
    for a jwt-bearer grant made without client authentication (workload identity)."""

    client: ClientRecord | None
    redirect_uri: str
    scopes: list[str]
    resource: str | None
    state: str | None
    grant_type: str = "authorization_code"  # or "client_credentials" / the jwt-bearer URN (no redirect_uri)
    assertion: dict[str, Any] | None = None  # a jwt-bearer grant's verified assertion claims (its sub is the subject)
    nonce: str | None = None  # OpenID Connect: the client's nonce, returned in the id_token of this grant


@dataclass
class CodeGrant:
    """An authorization code the built-in server issued, as the storages keep it until its token request."""

    client_id: str
    redirect_uri: str
    challenge: str
    scopes: list[str]
    resource: str | None
    subject: str
    expires_at: float
    redirect_uri_given: bool = False  # the authorization request named it: the token request must too
    nonce: str | None = None  # OpenID Connect: the authorization request's nonce, for the id_token
    auth_time: int | None = None  # when the user was authenticated (the id_token's auth_time)
    family: str = ""  # the grant family its tokens will belong to (chosen when the code is issued)


@dataclass
class RefreshGrant:
    """A refresh token the built-in server issued, as the storages keep it: whose, for what, until when."""

    client_id: str
    scopes: list[str]
    resource: str | None
    subject: str
    expires_at: float | None
    family: str = ""  # the grant (one authorization code) every rotated refresh token of a chain belongs to
    jkt: str | None = None  # a public client's refresh token is bound to its DPoP key (RFC 9449 §5)
    auth_time: int | None = None  # the original authentication (a refreshed id_token keeps it)


class AuthStorage(Protocol):
    """Durable state of the authorization server. Codes must be single-use (``pop``).

    The replay ledger (``mark_used``/``used``/``revoke``/``revoked``) remembers which grant family a spent code
    or rotated refresh token belonged to (keys are digests, never the secrets), so a replay revokes the family
    (RFC 6749 §4.1.2, OAuth 2.1 §4.3.1). A storage without these methods gets a process-local ledger."""

    async def get_client(self, client_id: str) -> ClientRecord | None: ...
    async def save_client(self, client: ClientRecord) -> None: ...
    async def save_code(self, code: str, data: CodeGrant) -> None: ...
    async def pop_code(self, code: str) -> CodeGrant | None: ...
    async def save_refresh(self, token: str, data: RefreshGrant) -> None: ...
    async def pop_refresh(self, token: str) -> RefreshGrant | None: ...


@runtime_checkable
class KeyBoundRefreshStorage(Protocol):
    """A storage that takes a refresh token only if it is not bound to another DPoP key, in one atomic step, and
    reads one without taking it. Without it the server takes the token and puts it back when the key differs or
    the token's client asks for more than its grant (a concurrent refresh can then find it missing)."""

    async def peek_refresh(self, token: str) -> RefreshGrant | None:
        """The refresh token's record, left in place. None: no such token."""
        ...

    async def take_refresh(self, token: str, jkt: str | None) -> RefreshGrant | None:
        """Take (remove and return) the refresh token unless it is bound (``jkt``) to a key other than ``jkt``:
        such a one is returned and left in place. None: no such token."""
        ...


@runtime_checkable
class ClientUseStorage(Protocol):
    """A storage told when a client is used, so that its budget of self-registered clients evicts the least
    recently used one (not merely the one registered longest ago). Without it eviction follows registration order."""

    async def client_used(self, client_id: str) -> None:
        """The client ``client_id`` was just used (a token issued to it, an authorization request of its accepted):
        a self-registered one becomes the last to be evicted. A pre-registered or unknown one: nothing."""
        ...


@runtime_checkable
class RevocationLedger(Protocol):
    """The replay ledger of the authorization server (see :class:`AuthStorage`): spent codes and rotated refresh
    tokens by digest, and the grant families revoked. A storage that implements it keeps the ledger with the rest
    of its state (shared by replicas); otherwise the server keeps a process-local one. Each entry keeps its own
    ``expires_at`` (None: no end): they differ, a grant that can hold no refresh token being kept only as long as
    its access token, so the order entries were written in is not the order they end in."""

    async def mark_used(self, key: str, family: str, expires_at: float | None) -> None: ...
    async def used(self, key: str) -> str | None: ...
    async def revoke(self, family: str, expires_at: float | None) -> None: ...
    async def revoked(self, family: str) -> bool: ...


class LedgerRevocation:
    """The :class:`~mcpkit.auth.verifiers.TokenRevocation` of an authorization server's ledger: a token of this
    issuer is revoked when the grant family it was issued from (its ``grant_id`` claim) is. One ledger lookup per
    request; the ledger bounds itself (entries expire with the longest lifetime of a token of their grant, plus
    the server's ``clock_skew``: a resource server whose clock runs behind the issuer's still finds the grant
    revoked)."""

    def __init__(self, ledger: RevocationLedger, issuer: str) -> None:
        self.ledger = ledger
        self.issuer = issuer

    async def revoked(self, token: AccessToken) -> bool:
        grant = token.claims.get("grant_id")
        return token.issuer == self.issuer and isinstance(grant, str) and await self.ledger.revoked(grant)


class _LedgerTable:
    """One table of the in-memory replay ledger: key -> (family, expiry), at most ``limit`` entries. Lifetimes
    differ (a grant without refresh tokens is kept as long as its access token, one with them for the refresh
    token's lifetime, or with no end), so the order entries were written in is not the order they end in: a heap of
    their ends finds the expired ones wherever they are, and a table full of live entries forgets the one nearest
    its end (with none that ends, the oldest)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rows: dict[str, tuple[str, float | None]] = {}
        self._ends: list[tuple[float, str]] = []  # (expiry, key), with stale pairs of rewritten or dropped keys

    def get(self, key: str, now: float) -> str | None:
        hit = self.rows.get(key)
        return hit[0] if hit is not None and (hit[1] is None or hit[1] > now) else None

    def put(self, key: str, family: str, expires_at: float | None, now: float) -> None:
        self._drop(now)
        if key not in self.rows and len(self.rows) >= self.limit:
            self._drop(None)
        self.rows.pop(key, None)
        self.rows[key] = (family, expires_at)
        if expires_at is not None:
            heapq.heappush(self._ends, (expires_at, key))
        if len(self._ends) > 2 * len(self.rows) + 64:  # stale pairs of rewritten keys: bounded by the table
            self._ends = [(end, k) for k, (_, end) in self.rows.items() if end is not None]
            heapq.heapify(self._ends)

    def _drop(self, now: float | None) -> None:
        """Drop the entries expired by ``now``; ``now=None``: the one live entry nearest its end (else the oldest)."""
        while self._ends and (now is None or self._ends[0][0] <= now):
            end, key = heapq.heappop(self._ends)
            hit = self.rows.get(key)
            if hit is not None and hit[1] == end:
                del self.rows[key]
                if now is None:
                    return
        if now is None and self.rows:
            del self.rows[next(iter(self.rows))]


class InMemoryAuthStorage(InMemoryUpstreamState):
    """Process-local storage (development and tests only); an OAuth proxy's state too
    (:class:`~mcpkit.auth.upstream_state.UpstreamStateStorage`). Every table holds at most ``max_entries``; at most
    ``max_dynamic_clients`` self-registered clients are kept. When either bound is reached the least recently used
    *self-registered* client goes (used: registered, or a token issued to it, or an authorization request of its
    accepted), never a pre-registered one. The replay ledger's entries (spent codes and refresh
    tokens, revoked grant families) are dropped once expired (they live as long as the longest lifetime of a token
    of their grant plus the server's ``clock_skew``); a ledger table full of live entries forgets the one nearest its
    end."""

    def __init__(
        self,
        max_entries: int = 100_000,
        max_dynamic_clients: int = 10_000,
        *,
        max_dynamic_client_bytes: int = 16 * 1024 * 1024,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if max_dynamic_client_bytes < 16 * 1024:
            raise ValueError("max_dynamic_client_bytes must hold at least one 16 KiB registration")
        super().__init__()
        self.clock = clock
        self.max_dynamic_clients = max_dynamic_clients
        self.max_dynamic_client_bytes = max_dynamic_client_bytes
        self._dynamic: dict[str, int] = {}  # self-registered client ids -> size in bytes, least recently used first
        self._dynamic_bytes = 0
        self.clients: dict[str, ClientRecord] = {}
        self.codes: dict[str, CodeGrant] = {}
        self.refresh: dict[str, RefreshGrant] = {}
        self.spent = _LedgerTable(max_entries)  # digest of a spent code/refresh -> family
        self.revoked_families = _LedgerTable(max_entries)  # revoked family -> itself
        self.max_entries = max_entries

    def _bound(self, table: dict[str, Any]) -> None:
        if len(table) >= self.max_entries:
            table.pop(next(iter(table)))

    async def get_client(self, client_id: str) -> ClientRecord | None:
        return self.clients.get(client_id)

    def _evict_dynamic(self) -> None:
        victim = next(iter(self._dynamic))
        self._dynamic_bytes -= self._dynamic.pop(victim)
        self.clients.pop(victim, None)

    async def client_used(self, client_id: str) -> None:
        """A self-registered client just used moves to the end of the eviction order (see :class:`ClientUseStorage`)."""
        size = self._dynamic.pop(client_id, None)
        if size is not None:
            self._dynamic[client_id] = size

    async def save_client(self, client: ClientRecord) -> None:
        client = client.stored()
        new = client.client_id not in self.clients
        if new and (
            len(self.clients) >= self.max_entries or (client.dynamic and len(self._dynamic) >= self.max_dynamic_clients)
        ):
            if not self._dynamic:
                raise RuntimeError(f"client table full ({self.max_entries} pre-registered clients: max_entries)")
            self._evict_dynamic()
        self._dynamic_bytes -= self._dynamic.pop(client.client_id, 0)
        self.clients[client.client_id] = client
        if client.dynamic:
            size = client.size()
            while self._dynamic and self._dynamic_bytes + size > self.max_dynamic_client_bytes:
                self._evict_dynamic()  # the byte budget: the least recently used self-registered clients go
            self._dynamic[client.client_id] = size
            self._dynamic_bytes += size

    async def mark_used(self, key: str, family: str, expires_at: float | None) -> None:
        self.spent.put(key, family, expires_at, self.clock())

    async def used(self, key: str) -> str | None:
        return self.spent.get(key, self.clock())

    async def revoke(self, family: str, expires_at: float | None) -> None:
        self.revoked_families.put(family, family, expires_at, self.clock())

    async def revoked(self, family: str) -> bool:
        return self.revoked_families.get(family, self.clock()) is not None

    async def save_code(self, code: str, data: CodeGrant) -> None:
        self._bound(self.codes)
        self.codes[code] = data

    async def pop_code(self, code: str) -> CodeGrant | None:
        return self.codes.pop(code, None)

    async def save_refresh(self, token: str, data: RefreshGrant) -> None:
        self._bound(self.refresh)
        self.refresh[token] = data

    async def pop_refresh(self, token: str) -> RefreshGrant | None:
        return self.refresh.pop(token, None)

    async def peek_refresh(self, token: str) -> RefreshGrant | None:
        return self.refresh.get(token)

    async def take_refresh(self, token: str, jkt: str | None) -> RefreshGrant | None:
        found = self.refresh.get(token)
        if found is None or (found.jkt is not None and found.jkt != jkt):
            return found
        return self.refresh.pop(token)
