"""The MCP server as an OAuth 2.1 resource server: wrap any ASGI app (``create_app(server)``) with
:func:`protect`.

- Serves RFC 9728 Protected Resource Metadata at ``/.well-known/oauth-protected-resource<path>`` (the path-aware
  location named in the 401 challenge) and, unless disabled, at ``/.well-known/oauth-protected-resource``, naming
  ``authorization_servers``: the configured ones, else mcpkit's
  :class:`~mcpkit.auth.server.AuthorizationServer` when it hosts the protected app. With neither there is no
  metadata (MCP requires it to name at least one authorization server): 404 at those locations, a challenge
  without ``resource_metadata``; that is plain bearer-token protection, without OAuth discovery.
- Requires ``Authorization: Bearer <token>`` on the protected paths: missing → 401 with
  ``WWW-Authenticate: Bearer resource_metadata="…"[, scope="…"]``; invalid, expired or meant for another resource
  (RFC 8707 audience) → 401 ``error="invalid_token"``; too few scopes → 403 ``error="insufficient_scope"`` (step-up;
  ``scope_implies`` declares scope hierarchies, e.g. ``{"files:admin": ["files:write"]}``).
- Never accepts a token from the query string (an ``access_token`` query parameter is refused with 400) nor from a
  form body.
- One authorization decision for every transport: the verified token becomes a
  :class:`~mcpkit.server.request_context.ScopeAuthorization` (principal, granted scopes, ``scope_rule``, expiry)
  that the dispatcher applies to every JSON-RPC request it runs, whatever carried it (POST /mcp, /messages, /ws) and
  each item of a batch; a refused request gets JSON-RPC error -32003 naming the missing scopes. HTTP POSTs are also
  looked at early to answer the spec's 403 ``insufficient_scope`` step-up challenge (asking the rule too about the
  requests the wrapped app's server runs for them: tool search's ``call_tool`` is the call of the tool it names,
  :class:`~mcpkit._asgi.AsksAuthorization`); a body larger than ``max_body``
  (default 4 MiB) cannot be looked at and is refused with 413, never passed. A WebSocket stops running requests
  when the token it was opened with expires. The authenticated principal also binds a modern ``requestState``.
- Any error of the verifier (not only :class:`InvalidToken`) is a 401, never a 500.
- The clock skew tolerated on a token's expiry is counted once from its ``exp`` (``AccessToken.expires_at``): by
  default the verifier's (``AccessToken.leeway``: a :class:`~mcpkit.auth.verifiers.JWTVerifier`'s ``leeway``,
  30 s unless set; none for static tokens and introspection), or ``leeway=`` (seconds) given to :func:`protect`
  instead. A request after ``exp + leeway`` gets 401 and a WebSocket stops its requests then. A JWTVerifier
  refuses a token past its own leeway in any case, so a larger ``leeway=`` does not extend it.
- DPoP (RFC 9449), with ``dpop=True`` or a :class:`~mcpkit.auth.dpop.DPoPVerifier`: ``Authorization: DPoP <token>``
  is accepted with a ``DPoP`` proof that must verify (signature, ``htm``/``htu`` of this request, ``iat`` window,
  ``ath`` of this token, the key the token is bound to by ``cnf.jkt``, the server's nonce when required, a ``jti``
  never seen: a bounded replay cache); refusals are 401 with a ``DPoP`` challenge (``invalid_dpop_proof``, or
  ``use_dpop_nonce`` with a ``DPoP-Nonce`` header). ``dpop_required=True`` refuses bearer tokens altogether. A
  DPoP-bound token (``cnf.jkt``) presented as a bearer token is always refused (RFC 9449 §7.2).
- ``revocation=`` (a :class:`~mcpkit.auth.verifiers.TokenRevocation`, e.g. ``AuthorizationServer.revocation`` when
  the authorization server runs in the same process) is asked about every verified token: a revoked one gets 401
  (the access token issued from a replayed authorization code, RFC 6749 §4.1.2). An error of the check is a 401.
- A Streamable HTTP session (``Mcp-Session-Id``) is bound to the principal (issuer, subject) whose request created
  it: a request on that session with another principal's token gets 404, as for an unknown session.
- The verified :class:`~mcpkit.auth.verifiers.AccessToken` reaches the app as ``scope["state"]["access_token"]``,
  ``scope["auth"]`` and through :func:`current_access_token` (a context variable that MCP handlers can read: the
  request's tasks are created inside the wrapped call and inherit it).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

import orjson

from .._asgi import (
    ASGIApp,
    AsksAuthorization,
    BodyTooLarge,
    Disconnected,
    HasProbes,
    MakesInnerRequests,
    Receive,
    Scope,
    Send,
    read_body,
)
from ..server.request_context import CURRENT_AUTHORIZATION, ScopeAuthorization, authorize_as
from ._util import (
    COLOCATED_ISSUER,
    canonical_resource,
    header,
    send_json,
    send_preflight,
)
from .challenges import quote_param
from .verifiers import AccessToken, InvalidToken, TokenRevocation, TokenVerifier

if TYPE_CHECKING:
    from .dpop import DPoPVerifier

__all__ = ["BearerAuthMiddleware", "ScopeRule", "current_access_token", "protect", "tool_scopes"]

PRM_WELL_KNOWN = "/.well-known/oauth-protected-resource"

logger: logging.Logger = logging.getLogger("mcpkit.auth")

_current: contextvars.ContextVar[AccessToken | None] = contextvars.ContextVar("mcpkit_access_token", default=None)

# (JSON-RPC method, params) -> scopes this message needs beyond ``required_scopes``
ScopeRule = Callable[[str, Mapping[str, Any]], Iterable[str]]


def current_access_token() -> AccessToken | None:
    """The access token of the HTTP request being served (None outside a protected request)."""
    return _current.get()


def principal_of(token: AccessToken) -> str:
    """The caller a token speaks for, as one string: issuer and subject (client id without a subject)."""
    return orjson.dumps([token.issuer, token.subject or token.client_id]).decode()


def tool_scopes(rules: Mapping[str, Iterable[str]]) -> ScopeRule:
    """A :data:`ScopeRule` demanding extra scopes for named tools: ``tool_scopes({"delete": ["files:write"]})``."""
    table = {name: tuple(scopes) for name, scopes in rules.items()}

    def rule(method: str, params: Mapping[str, Any]) -> Iterable[str]:
        if method == "tools/call":
            return table.get(str(params.get("name")), ())
        return ()

    return rule


class BearerAuthMiddleware:
    """See the module docstring. Build it with :func:`protect`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        resource: str,
        verifier: TokenVerifier,
        authorization_servers: Sequence[str] = (),
        required_scopes: Iterable[str] = (),
        scopes_supported: Iterable[str] | None = None,
        scope_rule: ScopeRule | None = None,
        protected_paths: Iterable[str] | None = None,
        resource_metadata: bool = True,
        root_metadata: bool = True,
        metadata_extra: Mapping[str, Any] | None = None,
        check_audience: bool = True,
        leeway: float | None = None,
        resource_name: str | None = None,
        max_body: int = 4 * 1024 * 1024,
        bind_sessions: bool = True,
        max_bound_sessions: int = 100_000,
        scope_implies: Mapping[str, Iterable[str]] | None = None,
        dpop: DPoPVerifier | bool | None = None,
        dpop_required: bool = False,
        revocation: TokenRevocation | None = None,
    ) -> None:
        self.app = app
        # the wrapped app's health and readiness probes: a GET of them needs no token (orchestrators carry none)
        self.probe_paths: frozenset[str] = app.probe_paths if isinstance(app, HasProbes) else frozenset()
        # what the wrapped server asks the authorization about too (tool search's call_tool: the tool it names); read
        # only while it says it may name any (asks_too: an app without tool search pays nothing)
        self._asks: AsksAuthorization | None = app if isinstance(app, AsksAuthorization) else None
        # the requests of other methods it makes for a request (resources as tools: read_resource's resources/read)
        self._inner_requests = app.inner_requests if isinstance(app, MakesInnerRequests) else None
        if dpop is True or (dpop_required and dpop is None):
            from .dpop import DPoPVerifier

            dpop = DPoPVerifier()
        self.dpop: DPoPVerifier | None = dpop or None
        self.dpop_required = dpop_required
        self.revocation = revocation
        self.scope_implies: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in (scope_implies or {}).items()}
        self.bind_sessions = bind_sessions
        self.max_bound_sessions = max_bound_sessions
        self._owners: dict[str, tuple[str | None, str | None]] = {}  # Mcp-Session-Id -> (issuer, subject)
        self.resource: str = canonical_resource(resource)
        parts = urlsplit(self.resource)
        self.origin: str = f"{parts.scheme}://{parts.netloc}"
        self.resource_path: str = parts.path
        self.verifier = verifier
        self.authorization_servers: list[str] = list(authorization_servers)
        self.required_scopes: tuple[str, ...] = tuple(required_scopes)
        self.scopes_supported: list[str] | None = list(scopes_supported) if scopes_supported is not None else None
        self.scope_rule = scope_rule
        self.protected_paths: set[str] | None = (
            None if protected_paths is None else {"/" + p.strip("/") if p.strip("/") else "/" for p in protected_paths}
        )
        self.serve_metadata = resource_metadata
        self.metadata_path: str = PRM_WELL_KNOWN + self.resource_path
        self.root_metadata = root_metadata
        self.metadata_extra: dict[str, Any] = dict(metadata_extra or {})
        self.check_audience = check_audience
        self.leeway = leeway
        self.resource_name = resource_name
        self.max_body = max_body

    # ---------------------------------------------------------------- metadata
    @property
    def metadata_url(self) -> str:
        return self.origin + self.metadata_path

    def servers_for(self, scope: Scope) -> list[str]:
        """The authorization servers named to the client of this request: the configured ones, else the
        authorization server hosting this app (mcpkit's, in the same process), else none (then there is no
        resource metadata: plain bearer-token protection)."""
        if self.authorization_servers:
            return self.authorization_servers
        colocated = scope.get(COLOCATED_ISSUER)
        return [colocated] if isinstance(colocated, str) else []

    def metadata(self, authorization_servers: Sequence[str] | None = None) -> dict[str, Any]:
        """The RFC 9728 document (``authorization_servers``: default the configured ones)."""
        servers = self.authorization_servers if authorization_servers is None else authorization_servers
        doc: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": list(servers),
            "bearer_methods_supported": ["header"],
        }
        if self.dpop is not None:
            doc["dpop_signing_alg_values_supported"] = list(self.dpop.algorithms)  # RFC 9449 §5.1 / RFC 9728
            if self.dpop_required:
                doc["dpop_bound_access_tokens_required"] = True
        scopes = self.scopes_supported if self.scopes_supported is not None else list(self.required_scopes)
        if scopes:
            doc["scopes_supported"] = scopes
        if self.resource_name:
            doc["resource_name"] = self.resource_name
        doc.update(self.metadata_extra)
        return doc

    def challenge(
        self,
        error: str | None = None,
        description: str | None = None,
        scopes: Iterable[str] | None = None,
        scheme: str = "Bearer",
        *,
        discoverable: bool | None = None,
    ) -> bytes:
        """A ``WWW-Authenticate`` challenge of ``scheme`` (``Bearer``, or ``DPoP`` with its ``algs``); it names the
        resource metadata when that is served and ``discoverable`` (default: authorization servers are
        configured)."""
        if discoverable is None:
            discoverable = bool(self.authorization_servers)
        parts: list[str] = []
        if scheme == "DPoP" and self.dpop is not None:
            parts.append(f"algs={quote_param(' '.join(self.dpop.algorithms))}")
        if error:
            parts.append(f"error={quote_param(error)}")
        if description:
            parts.append(f"error_description={quote_param(_description_param(description))}")
        if self.serve_metadata and discoverable:
            parts.append(f"resource_metadata={quote_param(self.metadata_url)}")
        wanted = list(scopes) if scopes is not None else list(self.required_scopes)
        if wanted:
            parts.append(f"scope={quote_param(' '.join(wanted))}")
        return (f"{scheme} " + ", ".join(parts) if parts else scheme).encode("latin-1")

    # ---------------------------------------------------------------- ASGI
    def _path(self, scope: Scope) -> str:
        path: str = scope.get("path", "") or "/"
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root) :] or "/"
        if len(path) > 1 and path.endswith("/"):
            path = path[:-1]
        return path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        path = self._path(scope)
        if (
            self.serve_metadata
            and scope["type"] == "http"
            and (path == self.metadata_path or (self.root_metadata and path == PRM_WELL_KNOWN))
        ):
            await self._serve_metadata(scope, send)
            return
        if self.protected_paths is not None and path not in self.protected_paths:
            await self.app(scope, receive, send)
            return
        if path in self.probe_paths and scope["type"] == "http" and scope.get("method") in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope.get("method") == "OPTIONS":
            await self.app(scope, receive, send)  # CORS preflight carries no credentials
            return
        query = bytes(scope.get("query_string", b"")).decode("latin-1")
        if query and any(k == "access_token" for k, _ in parse_qsl(query, keep_blank_values=True)):
            # OAuth 2.1 §5.1 / MCP: tokens MUST NOT travel in the query string; never look at it
            await self._deny(scope, send, 400, "invalid_request", "access tokens are not accepted in the query string")
            return
        auth = header(scope, b"authorization")
        if not auth:
            await self._deny(scope, send, 401, None, None)
            return
        kind, _, token = auth.strip().partition(" ")
        token = token.strip()
        scheme = "DPoP" if kind.lower() == "dpop" and self.dpop is not None else kind
        if scheme.lower() != "bearer" and scheme != "DPoP":
            await self._deny(scope, send, 401, None, None)  # no credentials of a scheme we take: the plain challenge
            return
        if scheme != "DPoP" and self.dpop_required:
            await self._deny(scope, send, 401, "invalid_token", "this resource takes DPoP-bound tokens only")
            return
        if not token:
            await self._deny(scope, send, 400, "invalid_request", f"empty {scheme} token", scheme=scheme)
            return
        try:
            verified = await self.verifier.verify(token)
        except InvalidToken as exc:
            await self._deny(scope, send, 401, "invalid_token", str(exc) or "invalid token", scheme=scheme)
            return
        except Exception:  # every verifier error is a 401, never a 500
            logger.warning("token verifier failed; answering 401", exc_info=True)
            await self._deny(scope, send, 401, "invalid_token", "the access token could not be verified", scheme=scheme)
            return
        refusal = await self._refusal(scope, verified, token, scheme)
        if refusal is not None:
            error, description, nonce = refusal
            await self._deny(scope, send, 401, error, description, None, nonce, scheme=scheme)
            return
        granted = self._effective(verified.scopes)
        leeway = verified.leeway if self.leeway is None else self.leeway
        expires = verified.expires_at + leeway if verified.expires_at is not None else None
        authz = ScopeAuthorization(principal_of(verified), granted, self.scope_rule, expires)
        needed = list(self.required_scopes)
        if self.scope_rule is not None and scope["type"] == "http" and scope.get("method") == "POST":
            # An early look at the body, only to answer HTTP 403 + step-up challenge; the decision itself is taken
            # again by the dispatcher for every request on every transport (``authz.check``).
            inspected = await self._inspect_body(receive, authz)
            if inspected is None:
                await self._too_large(send)
                return
            receive, extra = inspected
            needed.extend(s for s in extra if s not in needed)
        missing = [s for s in needed if s not in granted]
        if missing:
            # ask for what the token has plus what is missing, so the client does not lose earlier grants
            wanted = sorted(set(verified.scopes) | set(needed))
            await self._deny(
                scope,
                send,
                403,
                "insufficient_scope",
                "this request needs scope " + " ".join(missing),
                wanted,
                scheme=scheme,
            )
            return
        if self.bind_sessions:
            owner = (verified.issuer, verified.subject or verified.client_id)
            sid = header(scope, b"mcp-session-id")
            if sid is not None:
                bound = self._owners.pop(sid, None)
                if bound is not None:
                    self._owners[sid] = bound  # most recently used last: the table evicts idle bindings first
                if bound is not None and bound != owner:
                    # a session belongs to the principal that created it; another token cannot ride on it (and
                    # does not learn that it exists)
                    await send_json(send, 404, {"error": "not_found", "error_description": "unknown session"})
                    return
            send = self._recording_owner(send, owner)
        state = scope.setdefault("state", {})
        state["access_token"] = verified
        scope["auth"] = verified
        reset = _current.set(verified)
        reset_authz = authorize_as(authz)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT_AUTHORIZATION.reset(reset_authz)
            _current.reset(reset)

    async def _refusal(
        self, scope: Scope, verified: AccessToken, token: str, scheme: str
    ) -> tuple[str, str, str | None] | None:
        """Why a verified token cannot be used here: (error, description, the DPoP nonce to send), or None."""
        if verified.expired(leeway=verified.leeway if self.leeway is None else self.leeway):
            return "invalid_token", "the access token expired", None
        if self.check_audience and not any(_same_resource(a, self.resource) for a in verified.audience):
            return "invalid_token", "the access token is for another resource", None
        if self.revocation is not None:
            try:
                if await self.revocation.revoked(verified):
                    return "invalid_token", "the access token was revoked", None
            except Exception:  # a revocation check that cannot answer refuses (fail closed), never a 500
                logger.warning("revocation check failed; answering 401", exc_info=True)
                return "invalid_token", "the access token's revocation status is unknown", None
        cnf = verified.claims.get("cnf") if isinstance(verified.claims, Mapping) else None
        jkt = cnf.get("jkt") if isinstance(cnf, Mapping) else None
        if scheme != "DPoP":
            if jkt is not None:  # RFC 9449 §7.2: a DPoP-bound token is never accepted as a bearer token
                return "invalid_token", "a DPoP-bound access token must be presented with the DPoP scheme", None
            return None
        if not isinstance(jkt, str):
            return "invalid_token", "the access token is not DPoP-bound", None
        from .dpop import DPoPError

        assert self.dpop is not None
        method = scope.get("method", "GET") if scope["type"] == "http" else "GET"
        proofs = [bytes(v).decode("latin-1") for k, v in scope.get("headers", ()) if bytes(k).lower() == b"dpop"]
        try:
            url = self._request_url(scope, proofs)
            await self.dpop.verify(proofs, method=method, url=url, access_token=token, jkt=jkt)
        except DPoPError as exc:
            return exc.error, exc.description, exc.nonce
        return None

    def _request_url(self, scope: Scope, proofs: list[str]) -> str:
        """The URI a proof's ``htu`` must name: this resource's origin and the request path (with the mount prefix
        when the server runs under one and the proof names it)."""
        path: str = scope.get("path", "") or "/"
        root: str = scope.get("root_path", "") or ""
        if root and not path.startswith(root) and len(proofs) == 1:
            import jwt

            from .dpop import normalize_htu

            try:
                htu = jwt.decode(proofs[0], options={"verify_signature": False}).get("htu")
            except jwt.PyJWTError:
                htu = None
            if isinstance(htu, str) and normalize_htu(htu) == normalize_htu(self.origin + root + path):
                return self.origin + root + path
        return self.origin + path

    async def _too_large(self, send: Send) -> None:
        await send_json(
            send,
            413,
            {
                "error": "invalid_request",
                "error_description": f"the request body exceeds the authorization limit of {self.max_body} bytes "
                "(protect(max_body=...)); a body the authorizer cannot inspect is refused",
            },
        )

    def _recording_owner(self, send: Send, owner: tuple[str | None, str | None]) -> Send:
        async def recording(message: Any) -> None:
            if message.get("type") == "http.response.start":
                for key, value in message.get("headers", ()):
                    if bytes(key).lower() == b"mcp-session-id":
                        sid = bytes(value).decode("latin-1")
                        if sid not in self._owners:
                            if len(self._owners) >= self.max_bound_sessions:
                                self._owners.pop(next(iter(self._owners)))
                            self._owners[sid] = owner
            await send(message)

        return recording

    def _effective(self, scopes: frozenset[str]) -> set[str]:
        """The granted scopes plus every scope they imply (``scope_implies``: broader → narrower, transitive)."""
        result = set(scopes)
        todo = list(scopes)
        while todo:
            for narrower in self.scope_implies.get(todo.pop(), ()):
                if narrower not in result:
                    result.add(narrower)
                    todo.append(narrower)
        return result

    async def _inspect_body(self, receive: Receive, authz: ScopeAuthorization) -> tuple[Receive, list[str]] | None:
        """Buffer the POST body, ask the scope rule about each JSON-RPC request in it, replay it downstream.
        None when the body is larger than ``max_body``: what cannot be inspected is refused (413), never passed."""
        messages: list[Any]
        try:
            body = await read_body(receive, self.max_body)  # the one body reader (limit, disconnect)
        except BodyTooLarge:
            return None
        except Disconnected:
            body, messages = b"", [{"type": "http.disconnect"}]  # the app downstream sees the client leave
        else:
            messages = [{"type": "http.request", "body": body, "more_body": False}]
        extra: list[str] = []
        asks = self._asks
        asked_too = asks.asked_too if asks is not None and asks.asks_too else None
        try:
            parsed = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = None
        for msg in parsed if isinstance(parsed, list) else [parsed]:
            if isinstance(msg, dict) and isinstance(msg.get("method"), str):
                method, params = msg["method"], msg.get("params")
                params = params if isinstance(params, dict) else {}
                asked = (params, *asked_too(method, params)) if asked_too is not None else (params,)
                inner = self._inner_requests(method, params) if self._inner_requests is not None else ()
                for one_method, one in (*((method, p) for p in asked), *inner):
                    for s in authz.missing(one_method, one):
                        if s not in extra:
                            extra.append(s)
        pending = list(messages)

        async def replay() -> Any:
            if pending:
                return pending.pop(0)
            return await receive()

        return replay, extra

    async def _serve_metadata(self, scope: Scope, send: Send) -> None:
        cors = [(b"access-control-allow-origin", b"*")]
        servers = self.servers_for(scope)
        if not servers:
            # MCP: the document MUST name an authorization server; without one there is no OAuth discovery
            await send_json(send, 404, {"error": "not_found"})
            return
        if scope.get("method") == "OPTIONS":
            await send_preflight(send, b"GET, HEAD, OPTIONS", b"mcp-protocol-version")
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await send_json(send, 405, {"error": "method_not_allowed"}, [(b"allow", b"GET, HEAD, OPTIONS")])
            return
        await send_json(send, 200, self.metadata(servers), cors)

    async def _deny(
        self,
        scope: Scope,
        send: Send,
        status: int,
        error: str | None,
        description: str | None,
        scopes: Iterable[str] | None = None,
        nonce: str | None = None,
        *,
        scheme: str | None = None,
    ) -> None:
        """Refuse with ``status`` and the challenge of ``scheme`` (the one the request used; without one, every
        scheme this resource takes: Bearer unless ``dpop_required``, and DPoP when enabled)."""
        if scope["type"] == "websocket":
            if "websocket.http.response" not in (scope.get("extensions") or {}):
                await send({"type": "websocket.close", "code": 1008})  # before accept: the ASGI server's HTTP 403
                return
            send = _as_websocket_denial(send)  # the same HTTP answer, in place of the upgrade (ASGI denial response)
        body: dict[str, Any] = {"error": error or "unauthorized"}
        if description:
            body["error_description"] = description
        if scheme is not None:
            schemes = ["DPoP" if scheme == "DPoP" else "Bearer"]
        else:
            schemes = [] if self.dpop_required else ["Bearer"]
            if self.dpop is not None:
                schemes.append("DPoP")
        discoverable = bool(self.servers_for(scope))
        headers = [
            (b"www-authenticate", self.challenge(error, description, scopes, s, discoverable=discoverable))
            for s in schemes
        ]
        if nonce is not None:
            headers.append((b"dpop-nonce", nonce.encode("ascii")))
        if header(scope, b"origin"):
            # a browser client must be able to read the challenge to start authorization (the resource metadata
            # it names is public, served to any origin too); no credentials are allowed with it
            headers += _CORS_CHALLENGE
        await send_json(send, status, body, headers)


def _as_websocket_denial(send: Send) -> Send:
    """``send`` for an HTTP response given to a WebSocket upgrade (the ASGI ``websocket.http.response``
    extension): ``http.response.*`` messages become ``websocket.http.response.*``."""

    async def deny(message: MutableMapping[str, Any]) -> None:
        await send({**message, "type": "websocket." + message["type"]})

    return deny


def _same_resource(audience: str, resource: str) -> bool:
    """A token audience names this resource (canonical URIs equal); one that is no URL names none."""
    try:
        return canonical_resource(audience) == resource
    except ValueError:
        return False


#: the characters an ``error_description`` auth-param may hold (RFC 6750 §3: %x20-21 / %x23-5B / %x5D-7E)
_DESCRIPTION_CHARS = frozenset(map(chr, [0x20, 0x21, *range(0x23, 0x5C), *range(0x5D, 0x7F)]))


def _description_param(text: str) -> str:
    """``text`` (a verifier's words, any Unicode) as an ``error_description`` a challenge may carry: accents dropped,
    whitespace (a line break too) a space, ``"`` an apostrophe, any other character outside RFC 6750 §3 a ``?``. The
    JSON body keeps the words as they were."""
    if all(c in _DESCRIPTION_CHARS for c in text):
        return text
    import unicodedata

    out: list[str] = []
    for c in unicodedata.normalize("NFKD", text):
        if c in _DESCRIPTION_CHARS:
            out.append(c)
        elif c == '"':
            out.append("'")
        elif c.isspace():
            out.append(" ")
        elif not unicodedata.combining(c):
            out.append("?")
    return "".join(out)


#: CORS headers of a refusal sent to a browser page: it may read the status and the challenge headers.
_CORS_CHALLENGE = [
    (b"access-control-allow-origin", b"*"),
    (b"access-control-expose-headers", b"www-authenticate, dpop-nonce"),
]


def protect(
    app: ASGIApp,
    *,
    resource: str,
    verifier: TokenVerifier,
    authorization_servers: Sequence[str] = (),
    required_scopes: Iterable[str] = (),
    **options: Any,
) -> BearerAuthMiddleware:
    """Wrap ``app`` so every request needs a valid bearer token for ``resource`` (the MCP endpoint's canonical
    URL, e.g. ``https://mcp.example.com/mcp``). ``options`` go to :class:`BearerAuthMiddleware`
    (``scopes_supported``, ``scope_rule``, ``protected_paths``, ``resource_metadata``, ``check_audience``, ...)."""
    return BearerAuthMiddleware(
        app,
        resource=resource,
        verifier=verifier,
        authorization_servers=authorization_servers,
        required_scopes=required_scopes,
        **options,
    )
