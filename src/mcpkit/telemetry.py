"""OpenTelemetry spans for every MCP request, on the server and on the client, with W3C trace context in ``_meta``.

    from mcpkit.telemetry import Telemetry

    telemetry = Telemetry()                      # the global tracer provider, or tracer_provider=...
    app.add_middleware(telemetry)                # server: a SERVER span per request it handles
    async with Client(url, telemetry=telemetry): # client: a CLIENT span per request it sends
        ...

Needs the ``otel`` extra (``pip install 'mcpkit[otel]'``: opentelemetry-api and -sdk); nothing of it is imported,
and nothing is done on any request, unless a :class:`Telemetry` is made and installed.

**Spans** follow the OpenTelemetry semantic conventions for MCP: named ``<method> <target>`` (``tools/call add``,
``prompts/get review``; the method alone otherwise, and for a name the server has nothing for: a handler that
raises :class:`~mcpkit.protocol.errors.UnknownName`, so a caller cannot make span names up), with
``mcp.method.name``, ``mcp.protocol.version``, ``mcp.session.id`` (a label made for the session in this process:
never the HTTP session id), ``jsonrpc.request.id``, ``gen_ai.tool.name`` and ``gen_ai.operation.name``
(``execute_tool``) for a tool call, ``gen_ai.prompt.name``, ``mcp.resource.uri``, and ``mcpkit.era``
(``handshake`` or ``modern``), and ``network.transport`` (``pipe``: stdio; ``tcp``: HTTP, SSE, WebSocket; ``unix``:
HTTP on a Unix domain socket; none in memory). A request that fails is an error span: ``error.type`` and
``rpc.response.status_code`` are the JSON-RPC error code, or ``tool_error`` for a tool's ``isError`` result, or the
exception's type (recorded on the span); the status description is the error's message.

Where they come from: on the server, the interceptor chain (the span is current while the handler runs, so spans
your tools make are its children), and the session's outgoing requests (sampling, elicitation, roots: CLIENT
spans, children of the tool's span); on the client, the requests its session sends (CLIENT spans) and, from its
message tap, the requests the server sends it (SERVER spans; around the handler, for a request a 2025-03-26
server sent inside a batch, which the tap shows as one message). In 2026-07-28 a server asks for input inside its
result (``InputRequiredResult``) instead: the server makes a CLIENT span for each input request it lists (a child of
the request's span, its context in the input request's ``_meta``), and the client a SERVER span around its handler
for each one it answers (current while the handler runs), so the trace has the same shape in both eras.

**Propagation**: every request sent carries the current span's context in ``params._meta`` as ``traceparent``
(and ``tracestate``), the convention the 2026-07-28 specification reserves (read and written in every revision).
An incoming context is untrusted input: it is checked and bounded (:mod:`mcpkit.protocol.tracecontext`) and, with
``incoming="parent"`` (default), becomes the span's parent; ``"link"`` starts a new trace linked to it (for an
endpoint open to anyone: a client cannot put its spans in your traces or force sampling); ``"ignore"`` drops it.
``baggage`` is never read.
"""

from __future__ import annotations

import contextlib
import contextvars
import secrets
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from ._extras import require
from ._version import __version__
from .protocol.errors import MCPError, UnknownMethod, UnknownName
from .protocol.tracecontext import TRACEPARENT, TRACESTATE, format_traceparent, incoming
from .protocol.versions import is_modern
from .server.interceptors import Call, CallNext
from .server.middleware.base import Middleware, session_label

if TYPE_CHECKING:
    import asyncio

    from .client.lowlevel import ClientSession
    from .engine.tap import TapEvent
    from .protocol.jsonrpc import JSONDict, RequestId

INCOMING = ("parent", "link", "ignore")
#: the span name and ``mcp.method.name`` of a request for a method the server does not have (the method itself, at
#: most 128 characters, in ``rpc.method_original``), as the OpenTelemetry RPC conventions do
OTHER = "_OTHER"
#: ``network.transport`` (OpenTelemetry) of a client's target kind (mcpkit.client.targets); none in memory
NETWORK_TRANSPORT = {"stdio": "pipe", "http": "tcp", "sse": "tcp", "ws": "tcp"}
DEFAULT_MAX_PENDING = 4_096
"""How many requests the client's tap may hold open spans for (server-to-client requests not yet answered)."""

#: Inside :meth:`Telemetry.rounds`: the CLIENT span of the first round of one call (empty until it is sent), the
#: parent of the later rounds' spans; inside :meth:`Telemetry.call`, until the call's request is sent, its
#: :class:`_Reserved` span; None elsewhere.
_ROUNDS: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("mcpkit_telemetry_rounds", default=None)


class _Reserved:
    """The CLIENT span of a call started before its request is sent (:meth:`Telemetry.call`): the parent of the
    requests sent first, and the span of the call's request (``method``) once that is sent."""

    __slots__ = ("method", "span")

    def __init__(self, method: str, span: Any) -> None:
        self.method = method
        self.span = span


def _span_of(first: Any) -> Any:
    """The span of a call's first round (its reserved span until its request is sent)."""
    return first.span if type(first) is _Reserved else first


def span_name(method: str, params: Any) -> str:
    """``<method> <tool or prompt name>``, else the method."""
    if method in ("tools/call", "prompts/get") and type(params) is dict:
        name = params.get("name")
        if type(name) is str:
            return f"{method} {name[:128]}"
    return method


def request_attributes(method: str, params: Any, request_id: Any, version: str | None, session: str | None) -> JSONDict:
    """The span attributes of one request (see the module docstring)."""
    attrs: JSONDict = {"mcp.method.name": method}
    if request_id is not None:
        attrs["jsonrpc.request.id"] = str(request_id)
    if version is not None:
        attrs["mcp.protocol.version"] = version
        attrs["mcpkit.era"] = "modern" if is_modern(version) else "handshake"
    if session is not None:
        attrs["mcp.session.id"] = session
    if type(params) is dict:
        if method == "tools/call" and type(params.get("name")) is str:
            attrs["gen_ai.tool.name"] = params["name"][:128]
            attrs["gen_ai.operation.name"] = "execute_tool"
        elif method == "prompts/get" and type(params.get("name")) is str:
            attrs["gen_ai.prompt.name"] = params["name"][:128]
        elif type(params.get("uri")) is str:
            attrs["mcp.resource.uri"] = params["uri"][:2048]
    return attrs


class Telemetry(Middleware):
    """Spans for every request, both sides (see the module docstring).

    Args:
        tracer_provider: where spans go (default: the global one, ``opentelemetry.trace.set_tracer_provider``).
        incoming: what an incoming ``traceparent`` becomes: "parent", "link" or "ignore".
        max_pending: bound of the client tap's table of open spans (the oldest is ended, marked abandoned).
    """

    name = "telemetry"

    def __init__(
        self, *, tracer_provider: Any = None, incoming: str = "parent", max_pending: int = DEFAULT_MAX_PENDING
    ) -> None:
        super().__init__()
        if incoming not in INCOMING:
            raise ValueError(f"incoming must be one of {', '.join(INCOMING)}")
        trace = require("opentelemetry.trace", "mcpkit.telemetry")
        self._trace = trace
        self._context = require("opentelemetry.context", "mcpkit.telemetry")
        self.tracer: Any = trace.get_tracer("mcpkit", __version__, tracer_provider=tracer_provider)
        self.incoming = incoming
        self.max_pending = max_pending
        self._open: OrderedDict[tuple[int, Any], Any] = OrderedDict()
        #: the tracer of each live client session by its peer's channel (what its tap events carry): the session
        #: label and transport of the SERVER spans the tap makes; an entry goes with its session (weak)
        self._peers: weakref.WeakValueDictionary[int, _PeerTracer] = weakref.WeakValueDictionary()

    # ------------------------------------------------------------------ incoming context

    def _remote(self, params: Any) -> tuple[Any, list[Any]]:
        """``(parent context or None, links)`` for a request's ``_meta``."""
        if self.incoming == "ignore" or type(params) is not dict:
            return None, []
        found = incoming(params.get("_meta"))
        if found is None:
            return None, []
        parent, state = found
        trace = self._trace
        remote = trace.SpanContext(
            trace_id=parent.trace_id,
            span_id=parent.span_id,
            is_remote=True,
            trace_flags=trace.TraceFlags(parent.flags & 1),
            trace_state=trace.TraceState(state),
        )
        if self.incoming == "link":
            return None, [trace.Link(remote)]
        return trace.set_span_in_context(trace.NonRecordingSpan(remote)), []

    def _failed(self, span: Any, exc: BaseException) -> None:
        trace = self._trace
        if isinstance(exc, MCPError):
            code = str(exc.code)
            span.set_attribute("error.type", code)
            span.set_attribute("rpc.response.status_code", code)
            span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message[:256]))
        elif isinstance(exc, Exception):
            span.set_attribute("error.type", type(exc).__qualname__)
            span.record_exception(exc)
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__qualname__))
        else:
            span.set_attribute("error.type", "cancelled")
            span.set_status(trace.Status(trace.StatusCode.ERROR, "cancelled"))

    def _outcome(self, span: Any, result: Any) -> None:
        if type(result) is dict and result.get("isError") is True:
            span.set_attribute("error.type", "tool_error")
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, "tool_error"))

    # ------------------------------------------------------------------ server: the interceptor chain

    async def on_request(self, call: Call, call_next: CallNext) -> Any:
        session = call.session
        if session is not None and session.peer.tracer is None:
            label = session_label(call)
            session.peer.tracer = _PeerTracer(self, lambda: session.version, label)  # server->client requests
        parent, links = self._remote(call.params)
        trace = self._trace
        method = call.method
        context = call.context
        attrs = request_attributes(method, call.params, call.request_id, context.features.version, session_label(call))
        network = context.rc.peer.network  # (the peer it came on: a session's, or the stateless one of 2026-07-28)
        if network is not None:
            attrs["network.transport"] = network
        span = self.tracer.start_span(
            span_name(method, call.params), context=parent, kind=trace.SpanKind.SERVER, attributes=attrs, links=links
        )
        token = self._context.attach(trace.set_span_in_context(span))
        try:
            result = await call_next(call)
        except BaseException as exc:
            if isinstance(exc, UnknownName):  # (the caller's word, not one of ours: no span name of its own)
                span.update_name(method)
            elif isinstance(exc, UnknownMethod):  # (the same for a method: the RPC conventions' _OTHER)
                span.update_name(OTHER)
                span.set_attribute("mcp.method.name", OTHER)
                span.set_attribute("rpc.method_original", method[:128])
            self._failed(span, exc)
            raise
        else:
            self._outcome(span, result)
            if type(result) is dict and result.get("resultType") == "input_required":
                return self._asking(result, span, attrs)
            return result
        finally:
            self._context.detach(token)
            span.end()

    def _asking(self, result: JSONDict, span: Any, attrs: JSONDict) -> JSONDict:
        """A 2026-07-28 ``input_required`` result with a CLIENT span (a child of the request's ``span``) for each input
        request it lists, that span's context in the input request's ``_meta`` (a copy: the handler's dict is left as
        it was). The span ends here: the server does not wait for the answer, which comes with a later request."""
        requests = result.get("inputRequests")
        if type(requests) is not dict:
            return result
        trace = self._trace
        parent = trace.set_span_in_context(span)
        version = attrs.get("mcp.protocol.version")
        session = attrs.get("mcp.session.id")
        traced: JSONDict = {}
        for key, request in requests.items():
            method = request.get("method") if type(request) is dict else None
            params = request.get("params") if type(request) is dict else None
            if type(method) is not str or (params is not None and type(params) is not dict):
                traced[key] = request  # (not an input request this can carry a context in)
                continue
            asked = self.tracer.start_span(
                span_name(method, params),
                context=parent,
                kind=trace.SpanKind.CLIENT,
                attributes=request_attributes(method, params, None, version, session),
            )
            traced[key] = {**request, "params": carrying(params, asked)}
            asked.end()
        return {**result, "inputRequests": traced}

    # ------------------------------------------------------------------ client

    def client_tracer(self, session: ClientSession, transport: str | None = None) -> _PeerTracer:
        """The tracer of a client session's outgoing requests (``Client(telemetry=...)`` installs it); ``transport``:
        the kind of the client's target ("stdio", "http", ...: its ``network.transport``)."""

        def version() -> str | None:  # (None until the session has negotiated one)
            features = session.features
            return features.version if features is not None else None

        tracer = _PeerTracer(self, version, secrets.token_hex(6))
        tracer.network = NETWORK_TRANSPORT.get(transport) if transport is not None else None
        self._peers[session.peer.channel] = tracer
        return tracer

    def serve_input(
        self, method: str, params: JSONDict, key: str, version: str | None, channel: int | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """A SERVER span around the client's handler of one input request of a 2026-07-28 ``InputRequiredResult``
        (``key``: its key there; ``channel``: the client session's peer, whose label and transport it carries),
        current while the handler runs, continuing the trace whose context the server put
        in its ``_meta`` (checked like any incoming context; without one, a child of the call's first round, as a
        task's input requests read with ``tasks/get`` are); an error span when the handler fails."""
        first = _ROUNDS.get()
        fallback = _span_of(first[0]) if first else None
        return self._serving(method, params, None, version, channel, fallback, {"mcpkit.input.key": key[:128]})

    def serve_member(
        self, channel: int, request_id: Any, method: str, params: JSONDict, version: str | None
    ) -> contextlib.AbstractContextManager[None]:
        """A SERVER span around the client's handler of a request the server sent inside a JSON-RPC batch
        (2025-03-26): the tap sees the batch as one message and the members' answers leave together in one array,
        so the span is made here, from the request (``channel``: the session's peer, as in :meth:`serve_input`),
        and ends with its handler; an error span when the handler fails."""
        return self._serving(method, params, request_id, version, channel, None, None)

    @contextlib.contextmanager
    def _serving(
        self,
        method: str,
        params: JSONDict,
        request_id: Any,
        version: str | None,
        channel: int | None,
        fallback: Any,
        extra: JSONDict | None,
    ) -> Iterator[None]:
        """A SERVER span around one handler of the client's, current while it runs: its parent the context in
        ``params._meta`` (checked), else ``fallback`` (a span) if any; an error span when the handler fails."""
        trace = self._trace
        parent, links = self._remote(params)
        if parent is None and not links and fallback is not None:
            parent = trace.set_span_in_context(fallback)
        peer = self._peers.get(channel) if channel is not None else None
        attrs = request_attributes(method, params, request_id, version, peer.session if peer is not None else None)
        if peer is not None and peer.network is not None:
            attrs["network.transport"] = peer.network
        if extra:
            attrs.update(extra)
        span = self.tracer.start_span(
            span_name(method, params), context=parent, kind=trace.SpanKind.SERVER, attributes=attrs, links=links
        )
        token = self._context.attach(trace.set_span_in_context(span))
        rounds = _ROUNDS.set(None)  # (a request the handler sends is the handler's child, not a round of a call)
        try:
            yield
        except BaseException as exc:
            self._failed(span, exc)
            raise
        finally:
            _ROUNDS.reset(rounds)
            self._context.detach(token)
            span.end()

    @contextlib.contextmanager
    def rounds(self, trail: Any = None) -> Iterator[Any]:
        """Around every round of one call (2026-07-28: the rounds that answer an ``InputRequiredResult``, the
        requests that follow its task; in both eras the requests of the handle of a task it made): their CLIENT
        spans are children of the first round's, so one call is one trace even when no span was current where it
        was made. Yields the call's trail: given to a later ``rounds(trail)`` (a task handle's next request), that
        one continues the same call; without one, the call in progress here, if any, goes on."""
        if trail is None:
            trail = _ROUNDS.get()
        token = _ROUNDS.set([] if trail is None else trail)
        try:
            yield _ROUNDS.get()
        finally:
            _ROUNDS.reset(token)

    @contextlib.contextmanager
    def call(self, method: str, params: JSONDict) -> Iterator[None]:
        """Around one call that sends other requests before its own (``call_tool`` of a tool not listed yet sends
        ``tools/list`` first, to learn its output schema and whether it must run as a task): the call's CLIENT span
        starts here, the requests sent first are its children, and it is the span of the call's own request
        (``method``) when that is sent, so the call is one trace (with the rounds and task requests that follow, as
        :meth:`rounds`). A call that never sends its request (the lookup timed out) ends its span here, an error
        span if it failed. Inside a call already in progress, nothing changes."""
        if _ROUNDS.get():
            yield
            return
        span = self.tracer.start_span(
            span_name(method, params), kind=self._trace.SpanKind.CLIENT, attributes={"mcp.method.name": method}
        )
        reserved = _Reserved(method, span)
        trail = [reserved]
        token = _ROUNDS.set(trail)
        try:
            yield
        except BaseException as exc:
            if trail[0] is reserved:
                self._failed(span, exc)
            raise
        finally:
            _ROUNDS.reset(token)
            if trail[0] is reserved:  # (never sent: nobody else ends it)
                span.end()

    @contextlib.contextmanager
    def serve_request(self, channel: int, request_id: Any, version: str | None) -> Iterator[None]:
        """Around the client's handler of a request the server sent (sampling, elicitation, roots): the SERVER span
        the tap opened for it (``channel``, ``request_id``: the tap event's) is current while the handler runs, so the
        handler's own spans are its children; ``version`` (the session's revision) completes its attributes."""
        span = self._open.get((channel, request_id))
        if span is None:
            yield
            return
        if version is not None:  # (the tap knows no session: the revision's attributes come from here)
            attrs = request_attributes("", None, None, version, None)
            del attrs["mcp.method.name"]
            span.set_attributes(attrs)
        token = self._context.attach(self._trace.set_span_in_context(span))
        rounds = _ROUNDS.set(None)
        try:
            yield
        except Exception:
            raise  # (answered with an error: the tap ends the span when that is sent)
        except BaseException:
            self._abandon((channel, request_id), "cancelled")  # (no answer is sent: the span ends here)
            raise
        finally:
            _ROUNDS.reset(rounds)
            self._context.detach(token)

    def _abandon(self, key: tuple[int, Any], why: str) -> None:
        """End the tap's open span ``key`` (if still open) as an error span that got no answer: ``why``."""
        span = self._open.pop(key, None)
        if span is not None:
            span.set_attribute("error.type", why)
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, why))
            span.end()

    def tap(self, event: TapEvent) -> None:
        """A client's message tap: a SERVER span for each request the server sends it, ended by the answer (or,
        for a request the server cancels, by its ``notifications/cancelled``: no answer follows)."""
        key = (event.channel, event.id)
        if event.direction == "in" and event.kind == "request":
            method = event.method or ""
            params = event.message.params
            parent, links = self._remote(params)
            peer = self._peers.get(event.channel)
            attrs = request_attributes(method, params, event.id, None, peer.session if peer is not None else None)
            if peer is not None and peer.network is not None:
                attrs["network.transport"] = peer.network
            span = self.tracer.start_span(
                span_name(method, params),
                context=parent,
                kind=self._trace.SpanKind.SERVER,
                attributes=attrs,
                links=links,
            )
            if key in self._open:  # (the server reused the id of a request still unanswered)
                self._abandon(key, "abandoned")
            self._open[key] = span
            while len(self._open) > self.max_pending:
                self._abandon(next(iter(self._open)), "abandoned")
        elif event.direction == "in" and event.kind == "notification" and event.method == "notifications/cancelled":
            params = event.message.params
            rid = params.get("requestId") if self._open and type(params) is dict else None
            if type(rid) is int or type(rid) is str:  # (a server's word: anything else names no request)
                self._abandon((event.channel, rid), "cancelled")
        elif event.direction == "out" and event.kind in ("result", "error"):
            span = self._open.pop(key, None)
            if span is None:
                return
            if event.kind == "error":
                code = str(event.message.code)
                span.set_attribute("error.type", code)
                span.set_attribute("rpc.response.status_code", code)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, _error_message(event.message.data)))
            span.end()


def _error_message(data: bytes) -> str | None:
    """The ``message`` of the error response the client sent (``data``: its own encoding), for a span's status."""
    try:
        message = orjson.loads(data)["error"]["message"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return message[:256] if type(message) is str else None


def carrying(params: JSONDict | None, span: Any) -> JSONDict | None:
    """``params`` with ``span``'s context in ``_meta`` (``traceparent``, ``tracestate``): a copy, the caller's dicts
    left as they were; ``params`` itself when the span has no valid context (a non-recording tracer)."""
    context = span.get_span_context()
    if not context.is_valid:
        return params
    out = dict(params) if params else {}
    meta = out.get("_meta")
    meta = dict(meta) if isinstance(meta, dict) else {}
    meta[TRACEPARENT] = format_traceparent(context.trace_id, context.span_id, int(context.trace_flags))
    state = context.trace_state.to_header() if context.trace_state else ""
    if state:
        meta[TRACESTATE] = state
    out["_meta"] = meta
    return out


class _PeerTracer:
    """The engine's :class:`~mcpkit.engine.outgoing.RequestTracer` for one peer: a CLIENT span per request it
    sends, its context put in the request's ``_meta``."""

    __slots__ = ("__weakref__", "network", "owner", "session", "version")

    def __init__(self, owner: Telemetry, version: Callable[[], str | None], session: str | None) -> None:
        self.owner: Telemetry = owner
        self.version: Callable[[], str | None] = version
        self.session: str | None = session
        self.network: str | None = None  # (network.transport: "pipe", "tcp"; None in memory)

    def start(
        self, method: str, params: JSONDict | None, request_id: RequestId, peer: Any
    ) -> tuple[JSONDict | None, Callable[[BaseException | None, asyncio.Future[JSONDict]], None]]:
        owner = self.owner
        trace = owner._trace
        attrs = request_attributes(method, params, request_id, self.version(), self.session)
        if self.network is not None:
            attrs["network.transport"] = self.network
        rounds = _ROUNDS.get()
        first = rounds[0] if rounds else None
        if rounds and type(first) is _Reserved and first.method == method:  # (the call's own request: its span)
            span = first.span
            span.set_attributes(attrs)
            rounds[0] = span  # (claimed: the first round from here on)
        else:
            parent = trace.set_span_in_context(_span_of(first)) if rounds else None  # (a later round: in its trace)
            span = owner.tracer.start_span(
                span_name(method, params), context=parent, kind=trace.SpanKind.CLIENT, attributes=attrs
            )
            if rounds is not None and not rounds:
                rounds.append(span)
        params = carrying(params, span)

        def done(exc: BaseException | None, fut: asyncio.Future[JSONDict]) -> None:
            if exc is not None:
                owner._failed(span, exc)
            elif fut.done() and not fut.cancelled() and fut.exception() is None:
                owner._outcome(span, fut.result())
            span.end()

        return params, done


__all__ = ["DEFAULT_MAX_PENDING", "INCOMING", "Telemetry", "request_attributes", "span_name"]
