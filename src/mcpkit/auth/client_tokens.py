"""Where the OAuth client keeps what it obtained: a :class:`TokenSet` per authorization server and resource (MCP
server), and the client registration per authorization server, behind the :class:`TokenStorage` protocol (in
memory, or a JSON file)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass
class TokenSet:
    """What a token request returned. ``token_type`` is ``Bearer`` or ``DPoP``; a DPoP-bound token (and its
    refresh token) works only with the key whose thumbprint is ``dpop_jkt``."""

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None
    scope: str | None = None
    resource: str | None = None
    dpop_jkt: str | None = None

    def expired(self, skew: float = 30.0) -> bool:
        """The access token expires within ``skew`` seconds (refresh it before use)."""
        return self.expires_at is not None and time.time() + skew >= self.expires_at


class TokenStorage(Protocol):
    """Where tokens and client registrations live. Tokens are keyed by issuer and resource (the MCP server they
    were issued for: one authorization server serving several MCP servers issues each its own token, which no
    other is shown); registrations by issuer (credentials are never reused across authorization servers)."""

    async def get_tokens(self, issuer: str, resource: str | None = None) -> TokenSet | None:
        """The tokens ``issuer`` issued for ``resource`` (None: a server that names no resource)."""
        ...

    async def set_tokens(self, issuer: str, tokens: TokenSet | None, resource: str | None = None) -> None:
        """Store the tokens ``issuer`` issued for ``resource`` (None forgets them)."""
        ...

    async def get_client_info(self, issuer: str) -> dict[str, Any] | None: ...
    async def set_client_info(self, issuer: str, info: dict[str, Any] | None) -> None:
        """Store a registration (None forgets it: the client registers again)."""
        ...


class InMemoryTokenStorage:
    """Tokens and registrations for the life of the process."""

    def __init__(self) -> None:
        self.tokens: dict[tuple[str, str | None], TokenSet] = {}
        self.clients: dict[str, dict[str, Any]] = {}

    async def get_tokens(self, issuer: str, resource: str | None = None) -> TokenSet | None:
        return self.tokens.get((issuer, resource))

    async def set_tokens(self, issuer: str, tokens: TokenSet | None, resource: str | None = None) -> None:
        if tokens is None:
            self.tokens.pop((issuer, resource), None)
        else:
            self.tokens[(issuer, resource)] = tokens

    async def get_client_info(self, issuer: str) -> dict[str, Any] | None:
        return self.clients.get(issuer)

    async def set_client_info(self, issuer: str, info: dict[str, Any] | None) -> None:
        if info is None:
            self.clients.pop(issuer, None)
        else:
            self.clients[issuer] = info


class FileTokenStorage:
    """Tokens and registrations in one JSON file (mode 0600, replaced atomically), so a restarted client keeps
    its refresh tokens and its dynamic registration. One process per file.

    Tokens are stored under ``"<issuer> <resource>"`` (a space never occurs in a URL). A file written by an earlier
    version holds one token per issuer (under ``"<issuer>"``): that entry is still read, for the resource its token
    was issued for only (its ``resource`` field), and is moved to the new key on first use."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path: Path = Path(path)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return {"tokens": {}, "clients": {}}
        return data if isinstance(data, dict) else {"tokens": {}, "clients": {}}

    def _save(self, data: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a fresh file of our own (mkstemp: O_EXCL, mode 0600, a random name): never one that lies at a fixed name
        # already, a stale file of another mode or a symlink planted to catch the tokens
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(data, fh)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @staticmethod
    def _key(issuer: str, resource: str | None) -> str:
        return f"{issuer} {resource or ''}"

    @staticmethod
    def _token_set(raw: Any) -> TokenSet | None:
        try:
            return TokenSet(**raw) if isinstance(raw, dict) else None
        except TypeError:  # not a token set this version can read
            return None

    async def get_tokens(self, issuer: str, resource: str | None = None) -> TokenSet | None:
        data = self._load()
        table = data.get("tokens")
        if not isinstance(table, dict):
            return None
        found = self._token_set(table.get(self._key(issuer, resource)))
        if found is not None:
            return found
        legacy = self._token_set(table.get(issuer))  # an earlier version's entry: one token per issuer
        if legacy is None or legacy.resource != resource:
            return None  # never shown to a resource it was not issued for
        del table[issuer]
        table[self._key(issuer, resource)] = asdict(legacy)
        self._save(data)
        return legacy

    async def set_tokens(self, issuer: str, tokens: TokenSet | None, resource: str | None = None) -> None:
        data = self._load()
        table = data.setdefault("tokens", {})
        legacy = self._token_set(table.get(issuer))
        if legacy is not None and legacy.resource == resource:
            del table[issuer]  # superseded
        if tokens is None:
            table.pop(self._key(issuer, resource), None)
        else:
            table[self._key(issuer, resource)] = asdict(tokens)
        self._save(data)

    async def get_client_info(self, issuer: str) -> dict[str, Any] | None:
        raw = self._load().get("clients", {}).get(issuer)
        return raw if isinstance(raw, dict) else None

    async def set_client_info(self, issuer: str, info: dict[str, Any] | None) -> None:
        data = self._load()
        table = data.setdefault("clients", {})
        if info is None:
            table.pop(issuer, None)
        else:
            table[issuer] = info
        self._save(data)
