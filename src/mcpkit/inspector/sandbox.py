"""The MCP Apps sandbox proxy of the inspector: :class:`SandboxApp`, a second, tiny ASGI app on its own loopback
port, so its origin differs from the inspector page's (the Apps spec: "The Host and the Sandbox MUST have different
origins").

It holds no secret and offers no API: ``GET /view`` serves the proxy document, ``GET /proxy.js`` its script (see
``sandbox/proxy.js``). The document's Content-Security-Policy is built from the view's CSP lists given in the query
(``connectDomains=...&resourceDomains=...``, each source checked again here: :func:`~mcpkit.protocol.apps.
csp_source_problem`; whatever fails is dropped, never loosened) with ``frame-ancestors`` limited to the inspector's
own origin (``host=``, which must be one of them); the view's inner frame inherits that policy. Every other path is
404; a ``Host`` that is not loopback is refused (the DNS-rebinding rule of the MCP endpoints).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from importlib import resources
from urllib.parse import parse_qs

from .._asgi import Receive, Scope, Send, not_http
from ..protocol.apps import CSP_LISTS, MAX_CSP_SOURCES, content_security_policy, csp_source_problem
from ..transports.http.security import make_request_check

__all__ = ["SandboxApp"]

MAX_QUERY = 64 * 1024
_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


def _load(name: str) -> bytes:
    return (resources.files("mcpkit.inspector") / "sandbox" / name).read_bytes()


class SandboxApp:
    """The sandbox proxy's ASGI app (see the module docstring). ``host_origins()`` returns the inspector page's
    origins (known once it listens)."""

    def __init__(self, host_origins: Callable[[], frozenset[str]]) -> None:
        self._host_origins = host_origins
        self._policy_check = make_request_check(None, None)
        self._page = _load("proxy.html").decode("utf-8")
        self._script = _load("proxy.js")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await not_http(scope["type"], receive, send)
            return
        verdict = self._policy_check(scope)
        if verdict is not None:
            await self._respond(send, verdict[0], verdict[1].encode(), b"text/plain; charset=utf-8")
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await self._respond(send, 405, b"Method Not Allowed", b"text/plain; charset=utf-8")
            return
        path = scope.get("path", "")
        if path == "/proxy.js":
            await self._respond(send, 200, self._script, b"text/javascript; charset=utf-8")
            return
        if path != "/view":
            await self._respond(send, 404, b"Not Found", b"text/plain; charset=utf-8")
            return
        raw = bytes(scope.get("query_string") or b"")
        if len(raw) > MAX_QUERY:
            await self._respond(send, 414, b"query too long", b"text/plain; charset=utf-8")
            return
        query = parse_qs(raw.decode("latin-1"), keep_blank_values=True, max_num_fields=16)
        host = (query.get("host") or [""])[0]
        if host not in self._host_origins():
            await self._respond(send, 400, b"host must be the inspector's origin", b"text/plain; charset=utf-8")
            return
        csp: dict[str, list[str]] = {}
        for key in CSP_LISTS:
            sources = [s for s in " ".join(query.get(key) or ()).split() if csp_source_problem(s) is None]
            if sources:
                csp[key] = list(dict.fromkeys(sources))[:MAX_CSP_SOURCES]
        policy = content_security_policy(csp)
        page = self._page.replace("{host}", html.escape(host)).replace("{policy}", html.escape(policy))
        header = f"{policy}; frame-ancestors {host}".encode()
        await self._respond(send, 200, page.encode(), b"text/html; charset=utf-8", header)

    @staticmethod
    async def _respond(send: Send, status: int, body: bytes, ctype: bytes, csp: bytes | None = None) -> None:
        headers = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()), *_HEADERS]
        if csp is not None:
            headers.append((b"content-security-policy", csp))
        else:
            headers.append((b"x-frame-options", b"DENY"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
