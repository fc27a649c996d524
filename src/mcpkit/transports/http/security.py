"""DNS-rebinding protection for local HTTP servers: ``Origin`` and ``Host`` validation (403 when refused).

A web page can make a browser send requests to ``http://127.0.0.1:PORT`` (or to a hostname it re-points at
127.0.0.1). Such requests carry the page's ``Origin`` and, after DNS rebinding, a foreign ``Host``. So a local
server accepts only localhost ``Host`` names and, when ``Origin`` is present, localhost origins, plus whatever the
operator lists explicitly. ``"*"`` disables a check (a server bound to a public interface behind its own auth).

``make_request_check(allowed_origins, allowed_hosts)`` returns ``check(scope) -> (status, reason) | None``: the
same callable shape the legacy SSE and WebSocket endpoints accept as ``check_request``, so one policy covers every
route of :func:`mcpkit.transports.http.create_app`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from ..._asgi import Scope, header

RequestCheck = Callable[[Scope], "tuple[int, str] | None"]

LOCAL_HOSTNAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
LOOPBACK_BINDS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


def is_loopback(host: str) -> bool:
    """True when a bind address only accepts local connections."""
    return host.lower() in LOOPBACK_BINDS or host.startswith("127.")


def hostname(authority: str) -> str:
    """``host[:port]`` → lower-case host name (an IPv6 literal keeps its brackets)."""
    authority = authority.strip().lower()
    if authority.startswith("["):
        end = authority.find("]")
        return authority[: end + 1] if end != -1 else authority
    return authority.rsplit(":", 1)[0] if authority.count(":") == 1 else authority


def make_request_check(
    allowed_origins: Iterable[str] | str | None = None,
    allowed_hosts: Iterable[str] | str | None = None,
) -> RequestCheck:
    """The DNS-rebinding policy as a callable.

    ``allowed_origins``: origins accepted besides localhost ones (``"https://app.example"``); ``"*"``: any.
    ``allowed_hosts``: host names, with or without port, accepted besides localhost ones; ``"*"``: any.
    A request without ``Origin`` does not come from a web page and passes the Origin check.
    """
    any_origin = allowed_origins == "*" or (not isinstance(allowed_origins, str) and "*" in (allowed_origins or ()))
    any_host = allowed_hosts == "*" or (not isinstance(allowed_hosts, str) and "*" in (allowed_hosts or ()))
    origins: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()
    if not any_origin and allowed_origins is not None and not isinstance(allowed_origins, str):
        origins = frozenset(o.strip().rstrip("/").lower() for o in allowed_origins)
    elif isinstance(allowed_origins, str) and not any_origin:
        origins = frozenset((allowed_origins.strip().rstrip("/").lower(),))
    if not any_host and allowed_hosts is not None and not isinstance(allowed_hosts, str):
        hosts = frozenset(h.strip().lower() for h in allowed_hosts)
    elif isinstance(allowed_hosts, str) and not any_host:
        hosts = frozenset((allowed_hosts.strip().lower(),))

    def allows(host: str | None, origin: str | None) -> tuple[int, str] | None:
        if not any_host:
            if host is None:
                return 403, "missing Host header"
            h = host.strip().lower()
            if hostname(h) not in LOCAL_HOSTNAMES and h not in hosts and hostname(h) not in hosts:
                return 403, "Host header not allowed"
        if not any_origin and origin is not None:
            o = origin.strip().rstrip("/").lower()
            if o not in origins:
                parts = urlsplit(o)
                if parts.scheme not in ("http", "https") or hostname(parts.netloc) not in LOCAL_HOSTNAMES:
                    return 403, "Origin not allowed"
        return None

    return RequestPolicy(allows)


class RequestPolicy:
    """``policy(scope) -> (status, reason) | None``; ``policy.allows(host, origin)`` for callers that already
    read the headers. Verdicts are cached per (Host, Origin) pair (bounded)."""

    __slots__ = ("_allows", "_cache")

    def __init__(self, allows: Callable[[str | None, str | None], tuple[int, str] | None]) -> None:
        self._allows = allows
        self._cache: dict[tuple[str | None, str | None], tuple[int, str] | None] = {}

    def allows(self, host: str | None, origin: str | None) -> tuple[int, str] | None:
        key = (host, origin)
        try:
            return self._cache[key]
        except KeyError:
            pass
        verdict = self._allows(host, origin)
        if len(self._cache) >= 1024:
            self._cache.clear()
        self._cache[key] = verdict
        return verdict

    def __call__(self, scope: Scope) -> tuple[int, str] | None:
        return self.allows(header(scope, b"host"), header(scope, b"origin"))


MISSING: Any = object()  # "no verdict cached yet", for callers' own caches (dict.get(key, MISSING))


def default_policy(
    bind_host: str | None,
    allowed_origins: Iterable[str] | str | None,
    allowed_hosts: Iterable[str] | str | None,
) -> tuple[Iterable[str] | str | None, Iterable[str] | str | None]:
    """Defaults for a server bound to ``bind_host``: localhost-only checks for a loopback bind (or unknown), and
    no Host check for a public bind unless the caller listed hosts (the operator fronts it with auth/TLS)."""
    if bind_host is not None and not is_loopback(bind_host) and allowed_hosts is None:
        allowed_hosts = "*"
    return allowed_origins, allowed_hosts
