"""What the authorization server (:mod:`mcpkit.auth.server`) keeps and where: registered clients
(:class:`ClientRecord`), pending authorization requests, codes and refresh tokens, the :class:`AuthStorage`
protocol a backend implements (:class:`~mcpkit.auth.redis_storage.RedisAuthStorage` for several workers) and the
bounded in-memory default. Re-exported by :mod:`mcpkit.auth.server`, their public import path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = [
    "AuthStorage",
    "AuthorizationRequest",
    "ClientRecord",
    "InMemoryAuthStorage",
]


@dataclass
class ClientRecord:
    """A registered client. ``scope`` (space-separated) is everything it may ever be granted (None: any scope);
    ``dynamic`` marks a self-registered (RFC 7591) client; ``resource_server`` lets it introspect every token."""

    client_id: str
    client_secret: str | None
    redirect_uris: list[str]
    token_endpoint_auth_method: str = "none"
    grant_types: list[str] = field(default_factory=lambda: ["authorization_code", "refresh_token"])
    scope: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    dynamic: bool = False
    resource_server: bool = False


@dataclass
class AuthorizationRequest:
    """What /authorize (or a ``client_credentials`` token request: ``grant_type``, no ``redirect_uri``) asked; the
    approver decides who, if anyone, grants it (it returns the subject, or None to deny)."""

    client: ClientRecord
    redirect_uri: str
    scopes: list[str]
    resource: str | None
    state: str | None
    grant_type: str = "authorization_code"  # or "client_credentials" (no user: redirect_uri is "")


@dataclass
class _Code:
    client_id: str
    redirect_uri: str
    challenge: str
    scopes: list[str]
    resource: str | None
    subject: str
    expires_at: float


@dataclass
class _Refresh:
    client_id: str
    scopes: list[str]
    resource: str | None
    subject: str
    expires_at: float | None
    family: str = ""  # the grant (one authorization code) every rotated refresh token of a chain belongs to


class AuthStorage(Protocol):
    """Durable state of the authorization server. Codes must be single-use (``pop``).

    The replay ledger (``mark_used``/``used``/``revoke``/``revoked``) remembers which grant family a spent code
    or rotated refresh token belonged to (keys are digests, never the secrets), so a replay revokes the family
    (RFC 6749 §4.1.2, OAuth 2.1 §4.3.1). A storage without these methods gets a process-local ledger."""

    async def get_client(self, client_id: str) -> ClientRecord | None: ...
    async def save_client(self, client: ClientRecord) -> None: ...
    async def save_code(self, code: str, data: _Code) -> None: ...
    async def pop_code(self, code: str) -> _Code | None: ...
    async def save_refresh(self, token: str, data: _Refresh) -> None: ...
    async def pop_refresh(self, token: str) -> _Refresh | None: ...


class _Ledger(Protocol):
    async def mark_used(self, key: str, family: str, expires_at: float | None) -> None: ...
    async def used(self, key: str) -> str | None: ...
    async def revoke(self, family: str, expires_at: float | None) -> None: ...
    async def revoked(self, family: str) -> bool: ...


class InMemoryAuthStorage:
    """Process-local storage (development and tests only). Every table holds at most ``max_entries``; at most
    ``max_dynamic_clients`` self-registered clients are kept. When either bound is reached the oldest
    *self-registered* client goes, never a pre-registered one."""

    def __init__(self, max_entries: int = 100_000, max_dynamic_clients: int = 10_000) -> None:
        self.max_dynamic_clients = max_dynamic_clients
        self._dynamic: dict[str, None] = {}  # self-registered client ids, oldest first
        self.clients: dict[str, ClientRecord] = {}
        self.codes: dict[str, _Code] = {}
        self.refresh: dict[str, _Refresh] = {}
        self.spent: dict[str, tuple[str, float | None]] = {}  # digest of a spent code/refresh -> family
        self.revoked_families: dict[str, float | None] = {}
        self.max_entries = max_entries

    def _bound(self, table: dict[str, Any]) -> None:
        if len(table) >= self.max_entries:
            table.pop(next(iter(table)))

    async def get_client(self, client_id: str) -> ClientRecord | None:
        return self.clients.get(client_id)

    async def save_client(self, client: ClientRecord) -> None:
        new = client.client_id not in self.clients
        if new and (
            len(self.clients) >= self.max_entries or (client.dynamic and len(self._dynamic) >= self.max_dynamic_clients)
        ):
            if not self._dynamic:
                raise RuntimeError(f"client table full ({self.max_entries} pre-registered clients: max_entries)")
            victim = next(iter(self._dynamic))
            del self._dynamic[victim]
            self.clients.pop(victim, None)
        self.clients[client.client_id] = client
        if client.dynamic:
            self._dynamic[client.client_id] = None

    async def mark_used(self, key: str, family: str, expires_at: float | None) -> None:
        self._bound(self.spent)
        self.spent[key] = (family, expires_at)

    async def used(self, key: str) -> str | None:
        hit = self.spent.get(key)
        return hit[0] if hit is not None else None

    async def revoke(self, family: str, expires_at: float | None) -> None:
        self._bound(self.revoked_families)
        self.revoked_families[family] = expires_at

    async def revoked(self, family: str) -> bool:
        return family in self.revoked_families

    async def save_code(self, code: str, data: _Code) -> None:
        self._bound(self.codes)
        self.codes[code] = data

    async def pop_code(self, code: str) -> _Code | None:
        return self.codes.pop(code, None)

    async def save_refresh(self, token: str, data: _Refresh) -> None:
        self._bound(self.refresh)
        self.refresh[token] = data

    async def pop_refresh(self, token: str) -> _Refresh | None:
        return self.refresh.pop(token, None)
