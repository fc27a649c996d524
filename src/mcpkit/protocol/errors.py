"""JSON-RPC and MCP error codes of every revision, as typed exceptions.

An :class:`MCPError` raised by a handler becomes a JSON-RPC error response; an error response received from a
peer becomes the matching subclass, so callers can ``except ResourceNotFound`` whatever revision is spoken.
"""

from __future__ import annotations

from typing import Any, ClassVar

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # 2024-11-05 .. 2025-11-25; 2026-07-28 uses INVALID_PARAMS
URL_ELICITATION_REQUIRED = -32042  # 2025-11-25 only
HEADER_MISMATCH = -32020  # 2026-07-28
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021  # 2026-07-28
UNSUPPORTED_PROTOCOL_VERSION = -32022  # 2026-07-28
#: the codes only a 2026-07-28 server answers with (a client probing with server/discover learns the era from them)
MODERN_ERROR_CODES = frozenset((HEADER_MISMATCH, MISSING_REQUIRED_CLIENT_CAPABILITY, UNSUPPORTED_PROTOCOL_VERSION))


#: characters of an error's message its exception's text (``str()``, hence tracebacks and logs) and ``repr()`` show;
#: the message itself is kept whole (``MCPError.message``, ``to_error()``: what a proxy relays)
MAX_ERROR_TEXT = 1000


def _bounded_text(message: str) -> str:
    if len(message) <= MAX_ERROR_TEXT:
        return message
    return f"{message[:MAX_ERROR_TEXT]}... ({len(message) - MAX_ERROR_TEXT:,} more characters)"


class MCPError(Exception):
    """An error that travels as a JSON-RPC error object: ``code``, ``message`` and optional ``data``.

    Its text (``str()``) shows at most :data:`MAX_ERROR_TEXT` characters of the message (a peer may send a long
    one); ``message`` and :meth:`to_error` hold it whole."""

    code: ClassVar[int] = INTERNAL_ERROR
    default_message: ClassVar[str] = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None, *, code: int | None = None) -> None:
        self.message: str = message if message is not None else self.default_message
        self.data = data
        if code is not None:
            self.code = code  # type: ignore[misc]
        super().__init__(self.message)

    def to_error(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` member for this exception."""
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            err["data"] = self.data
        return err

    def __str__(self) -> str:
        return _bounded_text(self.message)

    def __repr__(self) -> str:
        message, data = _bounded_text(self.message), _bounded_text(repr(self.data))
        return f"{type(self).__name__}(code={self.code}, message={message!r}, data={data})"


class ParseError(MCPError):
    """-32700: the bytes were not valid JSON."""

    code = PARSE_ERROR
    default_message = "Parse error"


class InvalidRequest(MCPError):
    """-32600: valid JSON, but not a valid JSON-RPC request."""

    code = INVALID_REQUEST
    default_message = "Invalid Request"


class MethodNotFound(MCPError):
    """-32601: the method does not exist or is not available (e.g. capability not declared)."""

    code = METHOD_NOT_FOUND
    default_message = "Method not found"


class UnknownMethod(MethodNotFound):
    """-32601 for a method the server has no handler for at all (not one it knows but does not offer here): raised
    instead of a plain :class:`MethodNotFound` so what observes the request knows the method is the caller's word
    (telemetry names the span ``_OTHER``, as the OpenTelemetry RPC conventions do)."""


class InvalidParams(MCPError):
    """-32602: the params are invalid (unknown tool, missing argument, bad cursor, ...)."""

    code = INVALID_PARAMS
    default_message = "Invalid params"


class UnknownName(InvalidParams):
    """-32602: a ``tools/call`` or ``prompts/get`` (or a proxy's route) names nothing there is, or something hidden
    from the caller. Raised instead of a plain :class:`InvalidParams` so what observes the request knows the name is
    the caller's word, unchecked: telemetry names the span after the method alone (a caller could otherwise make
    as many span names as it likes), the name staying an attribute. On the wire it is any -32602."""

    def __init__(self, name: str, message: str | None = None) -> None:
        super().__init__(message or f"Unknown name: {name!r}", {"name": name})
        self.name = name


class UnknownTool(UnknownName):
    """-32602: ``tools/call`` of a tool there is not (see :class:`UnknownName`)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, f"Unknown tool: {name!r}")


class UnknownPrompt(UnknownName):
    """-32602: ``prompts/get`` of a prompt there is not (see :class:`UnknownName`)."""

    def __init__(self, name: str) -> None:
        super().__init__(name, f"Unknown prompt: {name!r}")


class InternalError(MCPError):
    """-32603: the receiver failed while handling the request."""

    code = INTERNAL_ERROR
    default_message = "Internal error"


class ResourceNotFound(MCPError):
    """-32002 (handshake era): the resource does not exist. Sent as -32602 in the modern era."""

    code = RESOURCE_NOT_FOUND
    default_message = "Resource not found"

    def __init__(self, uri: str, message: str | None = None) -> None:
        super().__init__(message or f"Resource not found: {uri}", {"uri": uri})
        self.uri = uri


class URLElicitationRequired(MCPError):
    """-32042 (2025-11-25 only): the request needs the user to complete URL elicitations first."""

    code = URL_ELICITATION_REQUIRED
    default_message = "URL elicitation required"


class HeaderMismatch(MCPError):
    """-32020 (2026-07-28): an HTTP header disagrees with the body, or a required header is missing."""

    code = HEADER_MISMATCH
    default_message = "Header mismatch"


class MissingRequiredClientCapability(MCPError):
    """-32021 (2026-07-28): handling the request needs a capability the client did not declare."""

    code = MISSING_REQUIRED_CLIENT_CAPABILITY
    default_message = "Missing required client capability"

    def __init__(self, required: dict[str, Any], message: str | None = None) -> None:
        names = ", ".join(sorted(required))
        super().__init__(message or f"Missing required client capability: {names}", {"requiredCapabilities": required})


class UnsupportedProtocolVersion(MCPError):
    """-32022 (2026-07-28): the requested protocol version is not supported; ``data`` lists what is."""

    code = UNSUPPORTED_PROTOCOL_VERSION
    default_message = "Unsupported protocol version"

    def __init__(self, requested: Any, supported: list[str], message: str | None = None) -> None:
        super().__init__(
            message or f"Unsupported protocol version: {requested!r}",
            {"supported": list(supported), "requested": requested},
        )


class FrameTooLarge(Exception):
    """Raised by a transport's ``receive()`` when a frame exceeds the configured maximum size (the engine answers
    it with -32600 and goes on reading).

    ``request_id`` is the id of the request the frame carried when the transport found it while the frame streamed
    past (:class:`mcpkit.protocol.oversize.RequestIdScanner`); the -32600 answer then carries it,
    so the peer's request fails at once instead of waiting out its timeout. None: not known (the answer has
    ``id: null``), or not a request."""

    def __init__(self, limit: int, request_id: int | str | None = None) -> None:
        super().__init__(f"message larger than the {limit}-byte limit")
        self.limit = limit
        self.request_id = request_id


class RequestTimeout(TimeoutError):
    """Local error: no response arrived in time. A ``notifications/cancelled`` was sent to the peer."""

    def __init__(self, method: str, timeout: float, waiting_for: str | None = None) -> None:
        detail = f" ({waiting_for})" if waiting_for else ""
        super().__init__(f"request {method!r} timed out after {timeout:g}s{detail}")
        self.method = method
        self.timeout = timeout


class ConnectionClosed(ConnectionError):
    """Local error: the connection closed before the response arrived.

    ``connection`` is the connection (the engine's peer) that ended, when it is what raised the error (a request
    or notification it could not complete): a server's handler compares it with its own request's connection to
    tell its session ending (normal) from a connection it opened itself failing. None when unknown."""

    connection: object | None = None


class SessionExpired(ConnectionClosed):
    """Local error: the server no longer knows our session (it answered HTTP 404 to our ``Mcp-Session-Id``).

    The Streamable HTTP client transport raises it; start a new session (``initialize``). The high-level
    :class:`~mcpkit.client.client.Client` does that itself and repeats a request that is safe to repeat; for one
    that is not, it raises this again with ``reinitialized`` True: the next call goes to the new session.
    One class under both import paths (``mcpkit.client.client`` and ``mcpkit.transports.http``).
    """

    reinitialized: bool = False  # True once the Client has opened a new session in its place


class MessageTooLarge(ConnectionClosed):
    """Local error: a message from the peer exceeded the transport's size limit and was dropped; the requests
    waiting on that connection fail with it rather than wait out their timeout (the dropped message may have
    been their answer). ``limit`` is the limit in bytes."""

    def __init__(self, message: str, limit: int) -> None:
        super().__init__(message)
        self.limit = limit


class TaskFailed(MCPError):
    """Raise it in a tool to end its call with this JSON-RPC error rather than an ``isError`` result: a task then
    ends ``failed`` with the error inlined (2026-07-28) or answered by ``tasks/result`` (2025-11-25); a call
    that is not a task gets the error as its answer. Default code -32603."""

    code = INTERNAL_ERROR
    default_message = "Task failed"


class TaskLimitReached(InvalidRequest):
    """-32600: a task was refused because the caller (or the server) already has as many tasks in progress as
    it allows (``max_tasks_per_principal`` / ``max_tasks``); retry once one has finished."""

    default_message = "Too many tasks in progress"


class CapabilityNotSupported(RuntimeError):
    """Local error: the peer did not declare the capability this call needs, so the call was not sent."""


_BY_CODE: dict[int, type[MCPError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequest,
        MethodNotFound,
        InvalidParams,
        InternalError,
        URLElicitationRequired,
        HeaderMismatch,
    )
}


def error_from_response(error: Any) -> MCPError:
    """Build the typed exception for an ``error`` member received from a peer (tolerant of malformed ones)."""
    if not isinstance(error, dict):
        return InternalError(f"malformed error object: {error!r}")
    code = error.get("code")
    message = error.get("message")
    data = error.get("data")
    if not isinstance(code, int) or isinstance(code, bool):
        return InternalError(f"malformed error object: {error!r}")
    msg = message if isinstance(message, str) else ""
    if code == RESOURCE_NOT_FOUND:
        uri = data.get("uri", "") if isinstance(data, dict) else ""
        exc: MCPError = ResourceNotFound(str(uri), msg)
        exc.data = data
        return exc
    if code == MISSING_REQUIRED_CLIENT_CAPABILITY:
        exc = MCPError(msg, data, code=code)
        exc.__class__ = MissingRequiredClientCapability
        return exc
    if code == UNSUPPORTED_PROTOCOL_VERSION:
        exc = MCPError(msg, data, code=code)
        exc.__class__ = UnsupportedProtocolVersion
        return exc
    cls = _BY_CODE.get(code)
    if cls is None:
        return MCPError(msg, data, code=code)
    return cls(msg, data)
