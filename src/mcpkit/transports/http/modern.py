"""Streamable HTTP server, the 2026-07-28 requests: their ``Mcp-*`` headers checked against the body, then run.

:class:`ModernRoutes` (the endpoint holds one) checks the ``MCP-Protocol-Version``, ``Mcp-Method`` and
``Mcp-Name`` headers against the body, the tool's ``Mcp-Param-*`` headers against its arguments, and reads the
request's ``_meta`` (``server.modern_context``). The rules are written once, in the step-by-step diagnosis
(:meth:`ModernRoutes.diagnose`), and the first problem it finds is the one answered; the usual request passes
one quick test instead, a lookup of header values the diagnosis found good before (bounded tables: a memo of its
verdicts, deciding nothing of its own). :meth:`ModernRoutes.post` answers a refused request with its
:class:`Refused` (the HTTP status and the JSON-RPC error) and runs the others statelessly (``dispatch_modern``).
It also refuses a batch that 2026-07-28 does not allow, or that is longer than ``max_batch_size``
(:meth:`ModernRoutes.refuse_batch`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._asgi import AsksAuthorization, Receive, Scope, Send
from ...engine import MODERN_BATCH_REFUSAL, Outgoing, batch_too_long
from ...protocol import jsonrpc, versions
from ...protocol.errors import HEADER_MISMATCH, INVALID_PARAMS, METHOD_NOT_FOUND, MCPError, UnsupportedProtocolVersion
from ...protocol.jsonrpc import Batch, JSONDict, Notification, Request
from ...protocol.versions import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    MODERN_ONLY,
    Features,
)
from ..base import NULL_OUTBOX
from .headers import NAME_FIELD, check_param_headers, decode_header_value
from .sessions import network_of
from .stream import UNDECIDED, Stream
from .wire import Headers, respond, text

if TYPE_CHECKING:
    from ...engine import Peer
    from ...hosting import HostedServer, ModernContext
    from .answer import Answerer

ToolHeaders = Callable[[str], "Mapping[str, Sequence[str]] | None"]


_PARAM_PREFIX = b"mcp-param-"

#: Header values :meth:`ModernRoutes.validate` remembers (the quick test's table): combinations at most, and the
#: bytes of one combination at most (longer ones, a long resource URI in ``Mcp-Name``, are diagnosed every time)
MAX_KNOWN = 512
MAX_KNOWN_BYTES = 1024

_ASK: Any = object()  # (a remembered tool's Mcp-Param-* headers: ask tool_headers each time)


def _param_headers(scope: Scope) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers by their lower-case suffix (the first of duplicates); read only for a tool
    that declares some."""
    params: dict[str, str] = {}
    for key, value in scope.get("headers", ()):
        k = bytes(key).lower()
        if k.startswith(_PARAM_PREFIX):
            name = k[10:].decode("latin-1")
            if name not in params:
                params[name] = bytes(value).strip(b" \t").decode("latin-1")  # (without the OWS around it)
    return params


class Refused:
    """A 2026-07-28 request refused before it runs: the HTTP status and the JSON-RPC error of the answer."""

    __slots__ = ("error", "status")

    def __init__(self, status: int, error: JSONDict) -> None:
        self.status: int = status
        self.error: JSONDict = error


def _mismatch(text: str) -> Refused:
    return Refused(400, {"code": HEADER_MISMATCH, "message": f"Header mismatch: {text}"})


class ModernRoutes:
    """The 2026-07-28 requests of one Streamable HTTP endpoint: :meth:`post` (checked against its headers by
    :meth:`validate`, then run), :meth:`refuse_batch`. ``tool_headers(name)``: a tool's ``Mcp-Param-*`` headers;
    ``max_batch``: the endpoint's ``max_batch_size``; ``answers``: its answering; ``json_response``: its option."""

    __slots__ = (
        "_asked_too",
        "_asks",
        "_found_good",
        "_known",
        "_known_handlers",
        "_known_stamp",
        "_own_headers",
        "_peer",
        "answers",
        "json_response",
        "max_batch",
        "server",
        "tool_headers",
    )

    def __init__(
        self,
        server: HostedServer,
        tool_headers: ToolHeaders | None,
        max_batch: int,
        answers: Answerer,
        *,
        json_response: bool = False,
    ) -> None:
        self.server: HostedServer = server
        self.tool_headers: ToolHeaders | None = tool_headers
        self.max_batch: int = max_batch
        self.answers: Answerer = answers
        self.json_response: bool = json_response
        self._peer: Peer | None = None  # the stateless peer that runs them (made by the first)
        # a call the server runs as the call of another tool (tool search's call_tool): that tool's headers sent
        # must match. Read while the server serves a caller tool only (_forget_known: when its handlers change)
        self._asks = server if isinstance(server, AsksAuthorization) else None
        self._asked_too: Callable[[str, Any], tuple[JSONDict, ...]] | None = None
        # the quick test of validate: the MCP-Protocol-Version, Mcp-Method and Mcp-Name values (bytes) that diagnose
        # found good together, with what they stand for: the version (served), the method (implemented in the
        # modern era), the params field Mcp-Name carries and its plain visible-ASCII value (not the sentinel), and
        # the version's features as server.modern_context read them (bounded; started afresh when the server's
        # versions or handlers change)
        self._known_stamp: Any = None
        self._known_handlers = -1
        # (and, for tools/call, the tool's Mcp-Param-* headers when they are the server's own: its handlers_version
        # counts changes to its tools; _ASK: a tool_headers function of the endpoint's, asked every time)
        self._known: dict[tuple[bytes | None, ...], tuple[str, str, str | None, Any, Features, Any]] = {}
        self._own_headers = tool_headers is not None and tool_headers == server.tool_param_headers
        self._found_good: tuple[str, str, str | None, Any] | None = None  # what the last diagnose found good

    def modern_header(self, hv: bytes) -> bool:
        """An MCP-Protocol-Version header naming a modern revision (and no handshake one this server speaks)."""
        v = text(hv)
        return v not in self.server.handshake_versions and versions.is_modern(v)

    def post(
        self, scope: Scope, h: Headers, msg: Request, meta: Any, body: bytes, receive: Receive, send: Send
    ) -> Outgoing | Awaitable[Any]:
        """A 2026-07-28 request (``meta``: its ``params._meta``): checked against its headers, then run statelessly
        through ``server.dispatch_modern``. Returns its answer when it was made at once (the endpoint sends it with
        ``application/json``), else the awaitable that answers it (whose result, an answer, is sent the same way)."""
        # The usual request, in one test (hot path: docs/architecture.md): header values diagnose found good before,
        # standing for the body's version, method and name, of a method without a tool's Mcp-Param-* check to make,
        # and server.modern_context's usual case: the client capabilities an object, no log level. Anything else is
        # settled by validate.
        server = self.server
        read: ModernContext | None = None
        hit = None
        key: tuple[bytes | None, ...] = ()
        params = msg.params
        if type(meta) is dict:
            if self._known_stamp is not server.modern_versions or self._known_handlers != server.handlers_version:
                self._forget_known()
            key = (h.get(b"mcp-protocol-version"), h.get(b"mcp-method"), h.get(b"mcp-name"))
            hit = self._known.get(key)
            if hit is not None and (
                hit[1] != msg.method
                or hit[0] != meta.get(META_PROTOCOL_VERSION)
                or (hit[2] is not None and hit[3] != params.get(hit[2]))  # type: ignore[union-attr]
            ):
                hit = None
            elif hit is not None:
                caps = meta.get(META_CLIENT_CAPABILITIES)
                if type(caps) is dict and META_LOG_LEVEL not in meta:
                    info = meta.get(META_CLIENT_INFO)
                    read = (hit[4], caps, info if type(info) is dict else None, None)
        if read is None or hit[5] is not None or self._asked_too is not None:  # type: ignore[index]
            checked = self.validate(scope, h, msg, meta, hit, key, read)
            if type(checked) is Refused:
                return respond(send, checked.status, jsonrpc.encode_error(msg.id, checked.error))
            read = checked  # type: ignore[assignment]
        peer = self._peer
        if peer is None:
            peer = self._peer = server.stateless_peer()  # runs dispatch_modern(rc)
            peer.network = network_of(scope)  # (one endpoint, one listener: its first request's says)
        if self.json_response and msg.method != "subscriptions/listen":
            # answered with application/json, nothing before it: what the handler sends first (progress, log
            # messages) has nowhere to go, so its outbox drops it
            ctx = peer.detached(msg.id, msg.method, params, NULL_OUTBOX, body)
            ctx.validated_meta = read  # what _meta says, for dispatch_modern
            runner = peer.run_detached(ctx)
            if type(runner) is Outgoing:
                return runner  # answered at once: the endpoint sends it
            return self.answers.answer_modern(runner, ctx, receive, send)  # type: ignore[arg-type]
        stream = Stream(self.answers.sse, None, 0, UNDECIDED)  # (the answer is returned, not sent through it)
        ctx = peer.detached(msg.id, msg.method, params, stream, body)
        ctx.validated_meta = read
        runner = peer.run_detached(ctx)
        if type(runner) is Outgoing:
            # answered at once: nothing can have gone out before it (the stream's sends are awaited), so it is the
            # one application/json body Answerer.serve would send, with the same status: the endpoint sends it
            return runner
        return self.answers.serve(stream, runner, ctx, receive, send, ())

    def validate(
        self,
        scope: Scope,
        h: Headers,
        msg: Request,
        meta: Any,
        hit: tuple[str, str, str | None, Any, Features, Any] | None = None,
        key: tuple[bytes | None, ...] = (),
        read: ModernContext | None = None,
    ) -> ModernContext | Refused:
        """Check a 2026-07-28 request against its headers and read its ``_meta`` (``server.modern_context``: the
        client capabilities and log level; the ``Mcp-Param-*`` headers of a tool that declares some): what it
        says, or the :class:`Refused` answer it gets instead. ``hit``: the remembered header values :meth:`post`
        found standing for the body's (None: diagnosed step by step here, remembered under ``key`` when good, a
        tuple when ``meta`` is an object); ``read``: what it read of ``_meta`` already."""
        method = msg.method
        params = msg.params
        server = self.server
        good: tuple[str, str, str | None, Any] | None = None  # what diagnose found good here, to remember
        spec: Any = _ASK  # the tool's Mcp-Param-* headers, when known
        if hit is not None:
            spec = hit[5]
        else:
            self._found_good = None
            refused = self.diagnose(h, msg, meta)
            good = self._take_found_good()
            if refused is not None:
                return refused
        if read is None:
            try:
                read = server.modern_context(meta)  # the client capabilities and log level (the version is known good)
            except MCPError as exc:
                return Refused(400, exc.to_error())
            if good is not None and len(self._known) < MAX_KNOWN and sum(len(v or b"") for v in key) <= MAX_KNOWN_BYTES:
                if method != "tools/call" or self.tool_headers is None:
                    spec = None  # (no tool's headers to check)
                elif self._own_headers:
                    spec = self.tool_headers(good[3]) or None  # (the plain name: params.name)
                self._known[key] = (*good, read[0], spec)
        if method == "tools/call" and self.tool_headers is not None:
            name = params.get("name")  # type: ignore[union-attr]
            if type(name) is str:
                if spec is _ASK:
                    spec = self.tool_headers(name)
                if spec:
                    problem = check_param_headers(spec, params.get("arguments"), _param_headers(scope))  # type: ignore[union-attr]
                    if problem is not None:
                        return _mismatch(problem)
                if self._asked_too is not None and (inner := self._asked_too(method, params)):  # type: ignore[arg-type]
                    refused = self._inner_headers(scope, name, inner[0])
                    if refused is not None:
                        return refused
        return read

    def _inner_headers(self, scope: Scope, name: str, inner: JSONDict) -> Refused | None:
        """The header check of the tool a call of ``name`` runs instead (tool search's ``call_tool``). A client
        mirrors the ``x-mcp-header`` parameters of the tool it calls, ``name``, whose definition declares none:
        the inner tool's ``Mcp-Param-*`` headers are not required (its values travel in the arguments), but one
        that is sent must match the inner arguments, so that what runs is what an intermediary read in it.
        (``Mcp-Name`` is the body's ``params.name``: the caller tool's, checked above.)"""
        assert self.tool_headers is not None
        called: str = inner["name"]
        spec = self.tool_headers(called)
        if not spec:
            return None
        problem = check_param_headers(spec, inner["arguments"], _param_headers(scope), required=False)
        if problem is None:
            return None
        return _mismatch(f"{problem}, for tool {called!r}, which {name!r} calls")

    def _take_found_good(self) -> tuple[str, str, str | None, Any] | None:
        """What the diagnose just made found good (None: not all of it), forgotten here."""
        good, self._found_good = self._found_good, None
        return good

    def _forget_known(self) -> None:
        """Start the quick test's tables afresh (the server's versions or handlers changed)."""
        server = self.server
        self._known_stamp = server.modern_versions
        self._known_handlers = server.handlers_version
        asks = self._asks
        self._asked_too = asks.asked_too if asks is not None and asks.asks_too else None
        self._known = {}
        self._found_good = None

    def diagnose(self, h: Headers, msg: Request, meta: Any) -> Refused | None:
        """The header checks of :meth:`validate`, step by step: the refusal of the first problem found, None when
        there is none. What it finds good is remembered for :meth:`validate`'s quick test."""
        params = msg.params or {}
        body_version = meta.get(META_PROTOCOL_VERSION) if isinstance(meta, dict) else None
        if not isinstance(body_version, str):
            if msg.method == "initialize":
                return self._initialize_refusal(h)
            # A malformed body is the body's fault (-32602), not a header mismatch: check it first.
            return Refused(
                400,
                {
                    "code": INVALID_PARAMS,
                    "message": f"missing _meta {META_PROTOCOL_VERSION!r}: required on every 2026-07-28 request",
                },
            )
        hv = h.get(b"mcp-protocol-version")
        if hv is None:
            return _mismatch("the MCP-Protocol-Version header is required")
        if text(hv) != body_version:
            return _mismatch(f"MCP-Protocol-Version header {text(hv)!r} does not match the body's {body_version!r}")
        server = self.server
        if body_version not in server.modern_versions:
            message = None
            if body_version in server.handshake_versions:  # (listed in `supported`: say how it is spoken here)
                message = (
                    f"Unsupported protocol version: {body_version!r} per request; it is a handshake-era revision:"
                    " send initialize without the 2026-07-28 header and _meta"
                )
            refusal = UnsupportedProtocolVersion(body_version, server.supported_versions, message)
            return Refused(400, refusal.to_error())
        method = msg.method
        hm = h.get(b"mcp-method")
        if hm is None:
            return _mismatch("the Mcp-Method header is required")
        if text(hm) != method:
            return _mismatch(f"Mcp-Method header {text(hm)!r} does not match the body's method {method!r}")
        if not server.implements(method, modern=True):
            message = f"Method not found: {method}"
            if method == "initialize":
                message += f" (2026-07-28 has no handshake; {self._initialize_advice()})"
            return Refused(404, {"code": METHOD_NOT_FOUND, "message": message})
        field = NAME_FIELD.get(method)
        plain: Any = None
        if field is not None:
            raw_b = h.get(b"mcp-name")
            if raw_b is None:
                return _mismatch("the Mcp-Name header is required for " + method)
            raw = text(raw_b)
            expected = params.get(field)
            # the usual case: the header carries the body's value as is (plain visible ASCII, not a sentinel)
            if raw != expected or not (raw.isascii() and raw.isprintable()) or raw.startswith("=?base64?"):
                try:
                    name = decode_header_value(raw)
                except ValueError as exc:
                    return _mismatch(f"Mcp-Name: {exc}")
            else:
                name = raw
            if name != expected:
                return _mismatch(f"Mcp-Name header value {name!r} does not match body value {params.get(field)!r}")
            if name is not raw:
                return None  # (a sentinel or an encoded name: diagnosed every time)
            plain = raw
        # the header values were the body's byte for byte (a served version, a method implemented in the modern
        # era, a plain name): validate remembers them for its quick test
        self._found_good = (body_version, method, field, plain)
        return None

    def _initialize_refusal(self, h: Headers) -> Refused:
        """``initialize`` under a 2026-07-28 ``MCP-Protocol-Version`` header: a handshake in the body, a revision
        without one in the header (HeaderMismatch), with what to do instead."""
        hv = text(h.get(b"mcp-protocol-version"))
        return _mismatch(
            f"MCP-Protocol-Version header {hv!r} names a revision without initialize (it has no handshake); "
            + self._initialize_advice()
        )

    def _initialize_advice(self) -> str:
        """What a client that sent ``initialize`` the 2026-07-28 way does instead (naming the versions served)."""
        server = self.server
        handshake = sorted(server.handshake_versions, reverse=True)
        if handshake:
            return (
                "for a handshake-era session send initialize without the 2026-07-28 header and _meta (this server"
                f" speaks {', '.join(handshake)}), or use server/discover and per-request _meta"
            )
        modern = ", ".join(sorted(server.modern_versions, reverse=True))
        return f"this server speaks only {modern}: use server/discover and per-request _meta"

    def refuse_batch(self, batch: Batch, hv_raw: bytes | None) -> str | None:
        """Why a batch is refused whole (-32600, 400), or None: batches do not exist in 2026-07-28 (the header, any
        member or the server says that revision), and a batch has at most ``max_batch_size`` messages."""
        server = self.server
        modern = server.modern_versions
        if modern and (not server.handshake_versions or (hv_raw is not None and self.modern_header(hv_raw))):
            return MODERN_BATCH_REFUSAL
        if len(batch) > self.max_batch:  # (before looking at the members: a long batch costs one compare)
            return batch_too_long(len(batch), self.max_batch)
        if modern:
            for item in batch:
                if type(item) is Request or type(item) is Notification:
                    p = item.params  # type: ignore[union-attr]
                    meta = p.get("_meta") if p is not None else None
                    if item.method in MODERN_ONLY or (type(meta) is dict and META_PROTOCOL_VERSION in meta):  # type: ignore[union-attr]
                        return MODERN_BATCH_REFUSAL
        return None
